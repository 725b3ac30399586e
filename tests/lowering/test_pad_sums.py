"""Sums of zero-padded pieces written as concatenations, long concatenates as writes in place
(lowering/pad_sums.py): results against numpy, and the ops the StableHLO stages are left with."""
import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from sprue.lowering import pad_sums


def _legalized(tmp_path) -> str:
    return next(tmp_path.glob("*.01_legalized.mlir")).read_text()


def _stacked_net_grads(ws, x):
    """d sum(net(x)**2) / d ws for net = tanh(h @ ws[i]) layer by layer, by hand."""
    hs = [x]
    for w in ws:
        hs.append(np.tanh(hs[-1] @ w))
    dh, grads = 2.0 * hs[-1], np.zeros_like(ws)
    for i in range(len(ws) - 1, -1, -1):
        da = dh * (1.0 - hs[i + 1] ** 2)
        grads[i] = hs[i].T @ da
        dh = da @ ws[i].T
    return grads


@pytest.mark.parametrize("n", [3, 100])
def test_the_gradient_of_weights_stacked_in_one_array(n, tmp_path):
    """Each layer slices its weights out of one array: the gradient's pads (one per layer) are
    one concatenation, no pad is left, and at 100 layers (partitioned) the layers share parts."""
    def loss(ws, x):
        h = x
        for i in range(n):
            h = jnp.tanh(h @ ws[i])
        return jnp.sum(h ** 2)
    rng = np.random.default_rng(0)
    ws, x = rng.standard_normal((n, 8, 8)) / 3.0, rng.standard_normal((8, 8))
    got = sprue.qjit(sprue.grad(loss), keep_intermediate=str(tmp_path))(ws, x)
    np.testing.assert_allclose(got, _stacked_net_grads(ws, x), rtol=1e-10, atol=1e-12)
    text = _legalized(tmp_path)
    assert "stablehlo.pad" not in text
    if n >= pad_sums.LONG_CONCATENATE:
        assert "stablehlo.concatenate" not in text and text.count("stablehlo.dynamic_update_slice") >= n
        parts = text.count("func.func private @__sprue_hlo_part_")
        assert 0 < parts < 10, parts   # the layers' parts are shared, not one per layer
    else:
        assert "stablehlo.concatenate" in text


def test_the_gradient_of_split_pieces(tmp_path):
    """q, k, v = split(x): their gradient is the three cotangents side by side."""
    def f(x):
        q, k, v = jnp.split(x, 3, axis=1)
        return jnp.sum(jnp.sin(q) * k + v ** 3)
    x = np.random.default_rng(1).standard_normal((4, 9))
    got = sprue.qjit(sprue.grad(f), keep_intermediate=str(tmp_path))(x)
    q, k, v = np.split(x, 3, axis=1)
    want = np.concatenate([np.cos(q) * k, np.sin(q), 3 * v ** 2], axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert "stablehlo.pad" not in _legalized(tmp_path)


def _padded(x, rows):
    """x with zero rows added before and after (lax.pad: a stablehlo.pad)."""
    return lax.pad(x, jnp.zeros((), x.dtype), [rows] + [(0, 0, 0)] * (x.ndim - 1))


def test_pieces_with_gaps_and_overlaps(tmp_path):
    """Disjoint pieces with zeros between them are a concatenation; overlapping ones stay a sum."""
    def disjoint(a, b):
        return _padded(a, (1, 6, 0)) + _padded(b, (5, 0, 0))

    def overlapping(a, b):
        return _padded(a, (0, 4, 0)) + _padded(b, (2, 0, 0))
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    want = np.zeros((10, 4))
    want[1:4] += a
    want[5:10] += b
    got = sprue.qjit(disjoint, keep_intermediate=str(tmp_path / "d"))(a, b)
    np.testing.assert_array_equal(got, want)
    assert "stablehlo.concatenate" in _legalized(tmp_path / "d")
    want = np.zeros((7, 4))
    want[0:3] += a
    want[2:7] += b
    got = sprue.qjit(overlapping, keep_intermediate=str(tmp_path / "o"))(a, b)
    np.testing.assert_allclose(got, want, rtol=1e-15)
    text = _legalized(tmp_path / "o")
    assert "stablehlo.concatenate" not in text and "stablehlo.pad" in text


def test_float16_pieces():
    """A half-precision zero is read as a FloatAttr (indexing a dense f16 attribute fails)."""
    a, b = np.arange(3, dtype=np.float16), np.full(2, -2.5, dtype=np.float16)
    got = sprue.qjit(lambda a, b: _padded(a, (0, 2, 0)) + _padded(b, (3, 0, 0)))(a, b)
    np.testing.assert_array_equal(got, np.concatenate([a, b]))


def test_integer_pieces_along_a_middle_axis():
    def f(a, b):
        zero = jnp.zeros((), a.dtype)
        return (lax.pad(a, zero, [(0, 0, 0), (0, 2, 0), (0, 0, 0)])
                + lax.pad(b, zero, [(0, 0, 0), (3, 0, 0), (0, 0, 0)]))
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    b = -np.arange(16, dtype=np.int32).reshape(2, 2, 4)
    np.testing.assert_array_equal(sprue.qjit(f)(a, b), np.concatenate([a, b], axis=1))


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_a_long_concatenate_along_an_outer_axis_is_written_piece_by_piece(dtype, tmp_path):
    """(Along the last axis legalize_dynamic inserts the pieces already.)"""
    pieces = [np.full((k + 1, 3), k, dtype=dtype) for k in range(12)]
    got = sprue.qjit(lambda *xs: jnp.concatenate(xs, axis=0), keep_intermediate=str(tmp_path))(*pieces)
    np.testing.assert_array_equal(got, np.concatenate(pieces, axis=0))
    text = _legalized(tmp_path)
    assert "stablehlo.concatenate" not in text and text.count("stablehlo.dynamic_update_slice") == 12


def test_a_short_concatenate_along_an_outer_axis_stays_one_op(tmp_path):
    pieces = [np.full((k + 1, 3), k, dtype=np.float64) for k in range(3)]
    got = sprue.qjit(lambda *xs: jnp.concatenate(xs, axis=0) * 2.0, keep_intermediate=str(tmp_path))(*pieces)
    np.testing.assert_array_equal(got, np.concatenate(pieces, axis=0) * 2.0)
    assert "stablehlo.concatenate" in _legalized(tmp_path)
