"""Operands read a row apart per lane of the vectorized loop (lowering/layouts.py): pairwise
distances over a few features read the second point set from a transposed copy, with numpy's
results; static and run-time sizes."""
import re

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp

RNG = np.random.default_rng(17)


def _distances(x, z):
    return jnp.sum((x[:, None, :] - z[None, :, :]) ** 2, axis=-1)


def _gaussian_sums(x, z):
    return jnp.sum(jnp.exp(-0.5 * _distances(x, z)), axis=1)


def _bufferized(folder) -> str:
    return next(folder.glob("*.03_bufferized.mlir")).read_text()


def _transposed(text: str, rows: str, features: int) -> bool:
    """Whether a buffer of the second point set's shape with its dimensions swapped is there."""
    return re.search(rf"memref<(?:1x)?{features}x{rows}xf64>", text) is not None


@pytest.mark.parametrize("features", [3, 8, 16])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "run-time sizes"])
def test_pairwise_distances_read_the_second_set_transposed(features, dynamic, tmp_path):
    x, z = RNG.standard_normal((300, features)), RNG.standard_normal((200, features))
    axes = ({0: "n"}, {0: "m"}) if dynamic else None
    f = sprue.qjit(_gaussian_sums, abstracted_axes=axes, keep_intermediate=str(tmp_path))
    want = np.exp(-0.5 * ((x[:, None, :] - z[None]) ** 2).sum(-1)).sum(1)
    np.testing.assert_allclose(f(x, z), want, rtol=1e-12)
    assert _transposed(_bufferized(tmp_path), r"\?" if dynamic else "200", features)


def test_long_reductions_and_operands_read_once_keep_their_layout(tmp_path):
    """Over 16 features LLVM keeps the reduction a loop and vectorizes it (no gathers to avoid);
    an operand no other loop reads again (a row-wise dot) is not worth a copy."""
    x, z = RNG.standard_normal((300, 40)), RNG.standard_normal((200, 40))
    f = sprue.qjit(_distances, keep_intermediate=str(tmp_path / "long"))
    np.testing.assert_allclose(f(x, z), ((x[:, None, :] - z[None]) ** 2).sum(-1), rtol=1e-12)
    assert not _transposed(_bufferized(tmp_path / "long"), "200", 40)
    a, b = RNG.standard_normal((500, 8)), RNG.standard_normal((500, 8))
    g = sprue.qjit(lambda a, b: jnp.sum(a * b, axis=-1), keep_intermediate=str(tmp_path / "dot"))
    np.testing.assert_allclose(g(a, b), (a * b).sum(-1), rtol=1e-12)
    assert "8x500xf64" not in _bufferized(tmp_path / "dot")


def _forces(p, mass):
    """n-body accelerations: a long reduction over the bodies j of diff (i, j, c) * inv (i, j)."""
    diff = p[None, :, :] - p[:, None, :]
    r2 = jnp.sum(diff * diff, axis=-1) + 0.01
    inv = mass[None, :] / (r2 * jnp.sqrt(r2))
    return jnp.sum(diff * inv[:, :, None], axis=1)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "run-time sizes"])
def test_a_long_reduction_across_rows_reads_them_transposed(dynamic, tmp_path):
    """The forces' sum over j reads p (j, c) along j, 3 apart, for every i: p is copied once as
    (3, n) and read contiguously (the vectorized loop gathered its lanes with a run-time n)."""
    p, mass = RNG.standard_normal((130, 3)), RNG.uniform(0.5, 1.5, 130)
    axes = ({0: "n"}, {0: "n"}) if dynamic else None
    f = sprue.qjit(_forces, abstracted_axes=axes, keep_intermediate=str(tmp_path))
    d = p[None, :, :] - p[:, None, :]
    r2 = (d * d).sum(-1) + 0.01
    np.testing.assert_allclose(f(p, mass), (d * (mass[None, :] / (r2 * np.sqrt(r2)))[:, :, None]).sum(1),
                               rtol=1e-12, atol=1e-12)
    text = _bufferized(tmp_path)
    reduction = [line for line in text.splitlines() if "linalg.generic" in line and '"reduction"]' in line
                 and "x3xf64>" in line.split("outs(")[1]]
    assert reduction and re.search(rf"memref<(?:1x)?3x{'[?]' if dynamic else '130'}xf64>", reduction[-1]), reduction
