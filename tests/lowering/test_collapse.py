"""lowering/collapse.py: adjacent loops over one run of memory become one loop, checked on the IR
the pipeline keeps (the generic's operand types after bufferization, no copies) and on compiled
results against numpy."""
import math
import os
import re

import numpy as np
import pytest

import sprue
import sprue.numpy as snp
from sprue import lax


def _stage(tmp_path, name: str) -> str:
    return next(tmp_path.glob(f"*{name}*.mlir")).read_text()


def _generics(text: str) -> list[str]:
    return [line for line in text.splitlines() if "linalg.generic" in line]


def _batch_norm(x, g, b):
    mu = snp.mean(x, axis=(0, 2, 3), keepdims=True)
    var = snp.var(x, axis=(0, 2, 3), keepdims=True)
    return snp.maximum((x - mu) / snp.sqrt(var + 1e-5) * g[None, :, None, None] + b[None, :, None, None], 0.0)


def _batch_norm_ref(x, g, b):
    mu, var = x.mean(axis=(0, 2, 3), keepdims=True), x.var(axis=(0, 2, 3), keepdims=True)
    return np.maximum((x - mu) / np.sqrt(var + 1e-5) * g[None, :, None, None] + b[None, :, None, None], 0.0)


@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_a_batch_norm_reads_each_image_plane_as_one_loop(dt, tmp_path):
    """The sums over (n, h, w) and the normalization run h and w as one loop of 12 * 12 trips:
    every generic reading x reads it as 4 x 16 x 144, none as 4 x 16 x 12 x 12."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 16, 12, 12)).astype(dt)
    g, b = rng.standard_normal(16).astype(dt), rng.standard_normal(16).astype(dt)
    got = sprue.qjit(_batch_norm, keep_intermediate=str(tmp_path))(x, g, b)
    tol = 1e-12 if dt == np.float64 else 2e-5
    np.testing.assert_allclose(got, _batch_norm_ref(x, g, b), rtol=tol, atol=tol)
    text = _stage(tmp_path, "bufferized")
    readers = [line for line in _generics(text) if "4x16x" in line]
    assert readers and all("4x16x144x" in line for line in readers), "\n".join(readers)
    assert "memref.copy" not in text


def test_run_time_batch_collapses_with_its_sizes_read_back(tmp_path):
    """A run-time batch: the collapsed loops keep the batch's run-time size, the results their shape."""
    rng = np.random.default_rng(1)
    f = sprue.qjit(_batch_norm, abstracted_axes=({0: "n"}, None, None), keep_intermediate=str(tmp_path))
    g, b = rng.standard_normal(16), rng.standard_normal(16)
    for n in (3, 5):
        x = rng.standard_normal((n, 16, 12, 12))
        got = f(x, g, b)
        assert got.shape == x.shape
        np.testing.assert_allclose(got, _batch_norm_ref(x, g, b), rtol=1e-12, atol=1e-12)
    assert any("?x16x144x" in line for line in _generics(_stage(tmp_path, "bufferized")))


def test_an_operand_sliced_along_the_inner_axis_keeps_the_loops_apart(tmp_path):
    """A stencil's `u[:, 1:] - u[:, :-1]`: rows 1 element apart are not one run, so merging the
    loops would need a copy of each slice; the loops stay, and nothing is copied."""
    u = np.random.default_rng(2).standard_normal((64, 65))
    got = sprue.qjit(lambda u: u[:, 1:] - u[:, :-1], keep_intermediate=str(tmp_path))(u)
    np.testing.assert_allclose(got, u[:, 1:] - u[:, :-1], rtol=1e-15)
    text = _stage(tmp_path, "bufferized")
    assert "memref.copy" not in text
    assert not re.search(r"memref<4096xf64", text)


def test_a_slice_of_whole_rows_still_collapses(tmp_path):
    """Rows 2..-2 of a 3-D array taken whole: the two inner axes are still one run per row block."""
    x = np.random.default_rng(3).standard_normal((6, 8, 10))
    got = sprue.qjit(lambda x: x[2:-2] * 2.0 + 1.0, keep_intermediate=str(tmp_path))(x)
    np.testing.assert_allclose(got, x[2:-2] * 2.0 + 1.0, rtol=1e-15)
    text = _stage(tmp_path, "bufferized")
    assert "memref.copy" not in text
    assert any("160xf64" in line for line in _generics(text)), text


def test_an_update_in_a_loop_stays_in_place(tmp_path):
    """`c = c * 0.5 + x` carried by a fori_loop over a 3-D array: one loop, written in place."""
    x = np.random.default_rng(4).standard_normal((4, 8, 16))

    def f(x):
        return lax.fori_loop(0, 7, lambda i, c: c * 0.5 + x, x)
    ref = x.copy()
    for _ in range(7):
        ref = ref * 0.5 + x
    got = sprue.qjit(f, keep_intermediate=str(tmp_path))(x)
    np.testing.assert_allclose(got, ref, rtol=1e-14)
    text = _stage(tmp_path, "bufferized")
    assert "memref.copy" not in text.split("scf.for", 1)[1]
    assert any("512xf64" in line for line in _generics(text)), text


def _block(np_, x, wq, wk, wv, wo, w1, w2, g, b):
    """A pre-norm transformer block, 4 heads (benchmarks/program_sources.py's `block`)."""
    bt, t, d = x.shape

    def norm(y):
        mu = np_.mean(y, axis=-1, keepdims=True)
        return (y - mu) / np_.sqrt(np_.mean((y - mu) ** 2, axis=-1, keepdims=True) + 1e-5) * g + b

    def split(y):
        return y.reshape(bt, t, 4, d // 4).transpose(0, 2, 1, 3)
    h = norm(x)
    q, k, v = split(h @ wq), split(h @ wk), split(h @ wv)
    s = q @ np_.swapaxes(k, -1, -2) / math.sqrt(d // 4)
    e = np_.exp(s - np_.max(s, axis=-1, keepdims=True))
    x = x + (e / np_.sum(e, axis=-1, keepdims=True) @ v).transpose(0, 2, 1, 3).reshape(bt, t, d) @ wo
    u = norm(x) @ w1
    return x + 0.5 * u * (1 + np_.tanh(0.7978845608 * (u + 0.044715 * u ** 3))) @ w2


def test_per_head_scores_are_private_to_each_chunk_of_the_pool():
    """The heads' scores, computed one batch element at a time on the pool (batch_fusion.py),
    once shared the normalized x's buffer (its shape, its tensor.empty, collapsed by this pass and
    written in place from inside the loop): two threads then overwrote each other's scores. The
    collapsed ops get empty tensors of their own; every call, on two threads, equals numpy."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 128, 128))
    ws = [rng.standard_normal(shape) / math.sqrt(shape[0]) for shape in [(128, 128)] * 4 + [(128, 512), (512, 128)]]
    ws += [np.ones(128), np.zeros(128)]
    want = _block(np, x, *ws)
    sprue.set_num_threads(2)
    try:
        f = sprue.qjit(lambda *a: _block(snp, *a))
        for _ in range(4):
            np.testing.assert_allclose(f(x, *ws), want, rtol=1e-9, atol=1e-12)
    finally:
        sprue.set_num_threads(len(os.sched_getaffinity(0)))
