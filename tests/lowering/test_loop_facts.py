"""lowering/loop_facts.py: inside loops, sizes of carried arrays read from their initial values and
a loop's bound known positive, so that programs with run-time sizes fold what their static
versions fold; compiled results against numpy, then the bufferized IR."""
import re

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax

RNG = np.random.default_rng(29)


def _bufferized(folder) -> str:
    return next(folder.glob("*.03_bufferized.mlir")).read_text()


def _loop_body(text: str) -> tuple[list[str], str]:
    """(the carried names, the rest of the module from the body on) of the first scf.for."""
    m = re.search(r"scf\.for %\w+ = [^\n]*\{", text)
    args = re.search(r"iter_args\(([^)]*)\)", m.group(0))
    carried = re.findall(r"(%\w+) = ", args.group(1)) if args else []
    return carried, text[m.end():]


def _emas(xs, s0):
    def step(carry, x):
        fast, slow = carry
        fast, slow = 0.9 * fast + 0.1 * x, 0.99 * slow + 0.01 * x
        return (fast, slow), jnp.where(fast > slow, 1.0, -1.0) * jnp.abs(fast - slow)
    return lax.scan(step, (s0, s0), xs)


def _emas_ref(xs, s0):
    fast, slow, out = s0.copy(), s0.copy(), []
    for x in xs:
        fast, slow = 0.9 * fast + 0.1 * x, 0.99 * slow + 0.01 * x
        out.append(np.where(fast > slow, 1.0, -1.0) * np.abs(fast - slow))
    return (fast, slow), np.array(out).reshape(len(xs), -1)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "run-time sizes"])
def test_a_scan_reads_and_writes_its_rows_without_clamps(dynamic, tmp_path):
    """The scan's row i of xs and of its output: i is in [0, t) and the output has t rows, so
    neither the read's clamp of i nor the write's min(1, t) rows is left in the loop."""
    axes = ({0: "t", 1: "k"}, {0: "k"}) if dynamic else None
    f = sprue.qjit(_emas, abstracted_axes=axes, keep_intermediate=str(tmp_path))
    for t, k in [(50, 8), (1, 3)] if dynamic else [(50, 8)]:
        xs, s0 = RNG.standard_normal((t, k)), RNG.standard_normal(k)
        (fast, slow), ys = f(xs, s0)
        (wf, ws), wy = _emas_ref(xs, s0)
        np.testing.assert_allclose(ys, wy, rtol=1e-12)
        np.testing.assert_allclose(fast, wf, rtol=1e-12)
        np.testing.assert_allclose(slow, ws, rtol=1e-12)
    _, body = _loop_body(_bufferized(tmp_path))
    assert "arith.minsi" not in body and "arith.maxsi" not in body, body
    assert re.search(r"memref\.subview %\w+\[%\w+, 0\] \[1, %?\w+\] \[1, 1\]", body), body


def test_a_carried_array_keeps_its_initial_size(tmp_path):
    """A segment sum swept in a fori_loop over x with a run-time size: the loop reads the size of
    x from the initial x, not from the carried buffer on every trip."""
    n, e = 40, 300
    x, w = RNG.standard_normal(n), RNG.standard_normal(e)
    src, dst = RNG.integers(0, n, e), RNG.integers(0, n, e)

    def sweep(x, src, dst, w):
        return lax.fori_loop(0, 3, lambda i, x: 0.15 + 0.85 * jnp.zeros_like(x).at[dst].add(x[src] * w), x)

    f = sprue.qjit(sweep, abstracted_axes=({0: "n"}, {0: "e"}, {0: "e"}, {0: "e"}), keep_intermediate=str(tmp_path))
    want = x.copy()
    for _ in range(3):
        agg = np.zeros(n)
        np.add.at(agg, dst, want[src] * w)
        want = 0.15 + 0.85 * agg
    np.testing.assert_allclose(f(x, src, dst, w), want, rtol=1e-12)
    carried, body = _loop_body(_bufferized(tmp_path))
    assert carried and not [c for c in carried if re.search(rf"memref\.dim {c},", body)], body


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "run-time sizes"])
def test_an_invariant_transpose_leaves_the_loop(dynamic, tmp_path):
    """Sinkhorn's iterations, `k.T @ u` in a fori_loop: k's transpose reads nothing a trip computes
    and runs once, before the loop (hoist_invariant_ops); the accumulators' fills stay inside."""
    def sinkhorn(kmat, u0):
        def step(i, uv):
            u, v = uv
            u = 1.0 / (kmat @ v + 1.0)
            return u, 1.0 / (kmat.T @ u + 1.0)
        return lax.fori_loop(0, 5, step, (u0, u0))
    axes = ({0: "n", 1: "n"}, {0: "n"}) if dynamic else None
    f = sprue.qjit(sinkhorn, abstracted_axes=axes, keep_intermediate=str(tmp_path))
    kmat, u0 = RNG.random((96, 96)), RNG.random(96)
    u, v = u0, u0
    for _ in range(5):
        u = 1.0 / (kmat @ v + 1.0)
        v = 1.0 / (kmat.T @ u + 1.0)
    got = f(kmat, u0)
    np.testing.assert_allclose(got[0], u, rtol=1e-12)
    np.testing.assert_allclose(got[1], v, rtol=1e-12)
    _, body = _loop_body(_bufferized(tmp_path))
    transposing = re.findall(r"(#map\d*) = affine_map<\(d0, d1\) -> \(d1, d0\)>", _bufferized(tmp_path))
    assert not any(re.search(rf"indexing_maps = \[{m}, ", body) for m in transposing), body

