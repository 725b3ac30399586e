"""Products over several row, column or reduction loops (matmul_unfuse.collapse_contraction_dims):
a transformer block's projections reshaped into heads, the heads merged back before the output
projection, per-head scores whose batch loop is not the operands' first axis, a layer norm fused
into `x @ w` -- each the vector kernel's, with numpy's results."""
import math
import os
import re

import numpy as np
import pytest

import sprue
import sprue.numpy as snp

RNG = np.random.default_rng(23)
B, T, H, DH = 2, 64, 4, 32
D = H * DH


@pytest.fixture(autouse=True)
def _inline_products(monkeypatch):
    """These tests read the inline kernels' code: no product calls the prebuilt library
    (matmul_library.py; tests/lowering/test_matmul_library.py tests those calls)."""
    monkeypatch.setenv("SPRUE_MATMUL_LIBRARY", "0")


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-11)


def _split_heads(m, x):
    return x.reshape(B, T, H, DH).transpose(0, 2, 1, 3)


FORMS = {
    # (h @ wq) split into heads: rows (b, t), columns (head, d)
    "split_heads": (lambda m, x, w: _split_heads(m, x @ w), [(B, T, D), (D, D)]),
    # heads merged before the output projection: reductions (head, d), stored apart in a
    "merge_heads": (lambda m, a, w: a.transpose(0, 2, 1, 3).reshape(B, T, D) @ w, [(B, H, T, DH), (D, D)]),
    # per-head scores of q and k stored (b, t, head, d): the batch loop (head) is not first
    "scores": (lambda m, q, k: _split_heads(m, q) @ m.swapaxes(_split_heads(m, k), -1, -2), [(B, T, D), (B, T, D)]),
    # a layer norm fused into the product of a batch of sequences: the weights read once
    "layer_norm": (lambda m, x, w: ((x - x.mean(-1, keepdims=True)) / m.sqrt(x.var(-1, keepdims=True) + 1e-5)) @ w,
                   [(B, T, D), (D, 2 * D)]),
}


@pytest.mark.parametrize("name", FORMS)
def test_form_takes_the_vector_kernel(name, tmp_path):
    f, shapes = FORMS[name]
    args = [RNG.standard_normal(s) for s in shapes]
    _close(sprue.qjit(lambda *a: f(snp, *a), keep_intermediate=str(tmp_path))(*args), f(np, *args))
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    assert re.search(r"vector\.(fma|outerproduct)", text), text
    # no product left as a generic of several reductions, nor a weight broadcast over the batch
    assert not re.search(r'iterator_types = \[[^\]]*"reduction", "reduction"', text), text
    assert not re.search(rf"memref\.alloc\(\)[^\n]*memref<{B}x{D}x{2 * D}xf64>", text), text


@pytest.mark.parametrize("name", ["split_heads", "merge_heads", "layer_norm"])
def test_run_time_sizes(name):
    f, shapes = FORMS[name]
    axes = ({0: "b", 1: "t"} if name != "merge_heads" else {0: "b", 2: "t"}, None)
    g = sprue.qjit(lambda x, w: f(snp, x, w), abstracted_axes=axes)
    args = [RNG.standard_normal(s) for s in shapes]
    _close(g(*args), f(np, *args))


@pytest.fixture
def threads_restored():
    yield
    sprue.set_num_threads(len(os.sched_getaffinity(0)))   # the default


def test_a_transformer_block(threads_restored):
    """Layer norms, projections into heads, attention per head, the output projection and a GELU
    MLP, against numpy, at 1 and 2 threads. (The loop over the sequences, on the pool, packed the
    weights of its products into the block buffer every other product packed into: one buffer for
    all its chunks, until inplace.split_shared_fills gave each packing transpose its own.)"""
    def block(m, x, wq, wk, wv, wo, w1, w2):
        def ln(x):
            return (x - x.mean(-1, keepdims=True)) / m.sqrt(x.var(-1, keepdims=True) + 1e-5)
        h = ln(x)
        q, k, v = (_split_heads(m, h @ w) for w in (wq, wk, wv))
        s = q @ m.swapaxes(k, -1, -2) / math.sqrt(DH)
        e = m.exp(s - s.max(-1, keepdims=True))
        a = ((e / e.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
        x = x + a @ wo
        g = ln(x) @ w1
        return x + 0.5 * g * (1 + m.tanh(0.79788456 * (g + 0.044715 * g ** 3))) @ w2
    args = [RNG.standard_normal((B, T, D))] + [RNG.standard_normal(s) / 8 for s in [(D, D)] * 4 + [(D, 4 * D), (4 * D, D)]]
    f = sprue.qjit(lambda *a: block(snp, *a))
    for threads in (2, 1):
        sprue.set_num_threads(threads)
        _close(f(*args), block(np, *args))


def test_a_weight_gradient_over_a_run_time_batch_and_length(tmp_path):
    """d/dw of sum((ln(x) @ w)^2) = 2 ln(x)^T (ln(x) @ w), contracted over the batch and the
    sequence, both run-time sizes, with the layer norm fused into it: the two reduction loops as one
    (collapse_reductions), the vector kernel's, against the analytic gradient."""
    def ln(m, x):
        return (x - x.mean(-1, keepdims=True)) / m.sqrt(x.var(-1, keepdims=True) + 1e-5) * 1.5 + 0.25

    def loss(w, x):
        return snp.sum((ln(snp, x) @ w) ** 2)
    f = sprue.qjit(sprue.grad(loss), abstracted_axes=(None, {0: "b", 1: "t"}), keep_intermediate=str(tmp_path))
    w = RNG.standard_normal((D, D)) / 8
    for b, t in [(B, T), (3, 5)]:
        x = RNG.standard_normal((b, t, D))
        h = ln(np, x).reshape(-1, D)
        _close(f(w, x), 2 * h.T @ (h @ w))
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    assert re.search(r"vector\.(fma|outerproduct)", text), text
    assert not re.search(r'iterator_types = \[[^\]]*"reduction", "reduction"', text), text
