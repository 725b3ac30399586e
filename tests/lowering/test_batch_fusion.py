"""Chains over one batch run a batch element at a time (lowering/batch_fusion.py): attention's
products and softmax per head, with results equal to numpy's, static and run-time sizes."""
import math
import re

import numpy as np
import pytest

import sprue
import sprue.numpy as snp
from sprue.base.errors import RuntimeCheckError

RNG = np.random.default_rng(31)


def _softmax(m, s):
    e = m.exp(s - m.max(s, axis=-1, keepdims=True))
    return e / m.sum(e, axis=-1, keepdims=True)


def _heads(m, q, k, v):
    s = m.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    return m.einsum("bhqk,bhkd->bhqd", _softmax(m, s), v)


def _bufferized(tmp_path) -> str:
    return next(tmp_path.glob("*.03_bufferized.mlir")).read_text()


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-12)


def test_heads_run_per_head_in_one_loop(tmp_path):
    q, k, v = (RNG.standard_normal((2, 3, 64, 64)) for _ in range(3))   # (products big enough to pack)
    f = sprue.qjit(lambda q, k, v: _heads(snp, q, k, v), keep_intermediate=str(tmp_path))
    _close(f(q, k, v), _heads(np, q, k, v))
    text = _bufferized(tmp_path)
    # one loop over the 2 x 3 heads, marked to run on the pool; no intermediate of the whole batch
    assert re.search(r"scf\.for %\w+ = %c0 to %c6 step %c1 \{", text), text
    # (the function's own loop closes at its body's indentation, with one head's floating-point work)
    flops = int(re.search(r"\n    \} \{sprue\.parallel = (\d+) : i64\}", text).group(1))
    assert 2 * (2 * 64 ** 3) <= flops < 2 * (2 * 64 ** 3) + 10 * 64 * 64
    assert len(re.findall(r"memref\.alloc\(\)[^\n]*memref<2x3x64x64xf64>", text)) == 1, text   # (the result)
    assert not re.search(r"memref\.alloc\(\)[^\n]*memref<6x64x64xf64>", text), text
    # the last product writes into its slice of the result: no copy there
    assert "memref.copy" not in text and "linalg.copy" not in text, text


def test_three_dimensional_attention_and_its_weights(tmp_path):
    """A result read after the chain (the attention weights) is written whole, slice by slice."""
    q, k, v = (RNG.standard_normal((4, 24, 8)) for _ in range(3))

    def attention(m, q, k, v):
        p = _softmax(m, (q @ m.swapaxes(k, -1, -2)) * 0.5)
        return p @ v, p
    f = sprue.qjit(lambda q, k, v: attention(snp, q, k, v), keep_intermediate=str(tmp_path))
    out, p = f(q, k, v)
    want_out, want_p = attention(np, q, k, v)
    _close(out, want_out)
    _close(p, want_p)
    assert re.search(r"scf\.for %\w+ = %c0 to %c4 step %c1 \{", _bufferized(tmp_path))


@pytest.mark.parametrize("t", [1, 7, 33])
def test_run_time_lengths(t):
    """abstracted_axes over the sequence length: the loop's slices and buffers take run-time sizes."""
    f = sprue.qjit(lambda q, k, v: _heads(snp, q, k, v), abstracted_axes=({2: "t"}, {2: "t"}, {2: "t"}))
    q, k, v = (RNG.standard_normal((2, 3, t, 8)) for _ in range(3))
    _close(f(q, k, v), _heads(np, q, k, v))


def test_run_time_length_zero_still_checked():
    """The max of an empty row has no identity (numpy raises too): the check runs before the loop."""
    f = sprue.qjit(lambda q, k, v: _heads(snp, q, k, v), abstracted_axes=({2: "t"}, {2: "t"}, {2: "t"}))
    q = np.zeros((2, 3, 0, 8))
    with pytest.raises(RuntimeCheckError, match=r"zero-size array f64\[2,3,t,t\] to reduction operation maximum"):
        f(q, q, q)


def test_run_time_batch():
    f = sprue.qjit(lambda q, k, v: _heads(snp, q, k, v), abstracted_axes=({0: "b"}, {0: "b"}, {0: "b"}))
    for b in (1, 3):
        q, k, v = (RNG.standard_normal((b, 2, 12, 8)) for _ in range(3))
        _close(f(q, k, v), _heads(np, q, k, v))


def test_causal_mask_reads_the_batch_loop_positions():
    """An iota mask (linalg.index in a payload) and a bias broadcast over the batch inside the chain."""
    q, k, v = (RNG.standard_normal((3, 16, 8)) for _ in range(3))
    bias = RNG.standard_normal((16, 16))

    def causal(m, q, k, v, bias):
        s = q @ m.swapaxes(k, -1, -2) + bias
        i = m.arange(16)
        s = m.where(i[:, None] >= i[None, :], s, -1e30)
        return _softmax(m, s) @ v
    f = sprue.qjit(lambda *a: causal(snp, *a))
    _close(f(q, k, v, bias), causal(np, q, k, v, bias))


def test_product_broadcast_over_the_batch_keeps_one_product(tmp_path):
    """x (batch, n, k) @ w (k, m) is one big product: no loop over the batch around it."""
    x = RNG.standard_normal((4, 32, 16))
    w1, w2 = RNG.standard_normal((16, 24)), RNG.standard_normal((24, 8))
    f = sprue.qjit(lambda x, w1, w2: snp.tanh(x @ w1) @ w2, keep_intermediate=str(tmp_path))
    _close(f(x, w1, w2), np.tanh(x @ w1) @ w2)
    assert not re.search(r"scf\.for %\w+ = %c0 to %c4 step %c1 \{", _bufferized(tmp_path))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_heads_dtypes(dtype):
    q, k, v = (RNG.standard_normal((2, 2, 20, 8)).astype(dtype) for _ in range(3))
    got = sprue.qjit(lambda q, k, v: _heads(snp, q, k, v))(q, k, v)
    assert got.dtype == dtype
    tol = 1e-5 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(got, _heads(np, q, k, v), rtol=tol, atol=tol)
