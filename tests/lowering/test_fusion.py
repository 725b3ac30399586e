"""lowering/fusion.py: generic loop order (innermost loop contiguous) and sums of contractions
accumulated in one buffer, checked on the chosen orders, on the IR the pipeline keeps, and on
compiled results against numpy."""
import re

import numpy as np
import pytest
from torch_mlir import ir

import sprue
import sprue.numpy as snp
from sprue import lax
from sprue.lowering.interchange import MIN_INNER, choose_order


def _maps(*texts: str) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(ir.Attribute.parse(f"affine_map<{t}>")).value for t in texts]


@pytest.fixture
def ctx():
    with ir.Context() as c:
        yield c


def test_column_sum_moves_the_contiguous_axis_innermost(ctx):
    # sum over axis 0 of [m, n]: (d0 = n parallel, d1 = m reduction), input read as x[d1, d0]
    maps = _maps("(d0, d1) -> (d1, d0)", "(d0, d1) -> (d0)")
    assert choose_order(maps, [128, 512]) == [1, 0]


def test_row_sum_and_elementwise_keep_their_order(ctx):
    assert choose_order(_maps("(d0, d1) -> (d0, d1)", "(d0, d1) -> (d0)"), [512, 128]) is None
    assert choose_order(_maps("(d0, d1) -> (d0, d1)", "(d0, d1) -> (d0, d1)"), [4, 8]) is None
    # a transpose: one operand contiguous either way, the order stays
    assert choose_order(_maps("(d0, d1) -> (d1, d0)", "(d0, d1) -> (d0, d1)"), [64, 64]) is None


def test_short_dimensions_are_not_moved_inward(ctx):
    maps = _maps("(d0, d1) -> (d1, d0)", "(d0, d1) -> (d0)")
    assert choose_order(maps, [MIN_INNER - 1, 512]) is None
    assert choose_order(maps, [None, 512]) == [1, 0]   # unknown extent: contiguity decides


def test_contraction_generic_accumulates_along_the_output_row(ctx):
    # out[n, d] += x[n, c] * k[c, d] with c innermost: d is contiguous in k and in out
    maps = _maps("(d0, d1, d2) -> (d0, d2)", "(d0, d1, d2) -> (d2, d1)", "(d0, d1, d2) -> (d0, d1)")
    assert choose_order(maps, [100, 16, 8]) == [0, 2, 1]


def _stage(tmp_path, name: str) -> str:
    return next(tmp_path.glob(f"*_{name}.mlir")).read_text()


def _elements(memref_text: str) -> int:
    """The element count of the first static memref type in `memref_text` (any shape: collapse.py
    may have merged its axes)."""
    dims = re.search(r"memref<((?:\d+x)+)f\d+", memref_text).group(1).strip("x").split("x")
    return int(np.prod([int(d) for d in dims]))


def test_a_centered_value_read_twice_through_a_broadcast_is_recomputed_not_stored(tmp_path):
    """A batch norm's `x - mean` (the mean broadcast over the batch and pixels) is read by the
    variance and by the normalization: each recomputes it (a broadcast is as free to recompute
    as a scalar), so no temporary of x's size is written and read back."""
    x = np.random.default_rng(3).standard_normal((8, 16, 12, 12))

    def f(x):
        mu = snp.mean(x, axis=(0, 2, 3), keepdims=True)
        var = snp.var(x, axis=(0, 2, 3), keepdims=True)
        return (x - mu) / snp.sqrt(var + 1e-5)
    got = sprue.qjit(f, keep_intermediate=str(tmp_path))(x)
    mu, var = x.mean(axis=(0, 2, 3), keepdims=True), x.var(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(got, (x - mu) / np.sqrt(var + 1e-5), rtol=1e-10)
    writers = [line for line in _stage(tmp_path, "bufferized").splitlines()
               if "linalg.generic" in line and "outs(" in line and _elements(line.split("outs(")[1]) == x.size]
    assert len(writers) == 1, writers   # (the result; not `x - mean` first)


@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_leading_axis_reductions_match_numpy_in_the_new_order(dt, tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((37, 19, 23)).astype(dt)

    def f(x):
        return snp.sum(x, axis=0), snp.max(x, axis=(0, 1)), snp.mean(x * 2.0, axis=(0, 2))
    out = sprue.qjit(f, keep_intermediate=str(tmp_path))(x)
    for got, ref in zip(out, (x.sum(0), x.max((0, 1)), (x * 2).mean((0, 2)))):
        np.testing.assert_allclose(got, ref, rtol=1e-12 if dt == np.float64 else 2e-5, atol=0 if dt == np.float64 else 1e-5)
    # the sum over axis 0 iterates its reduction outside, the contiguous axis inside
    text = _stage(tmp_path, "bufferized")
    assert re.search(r'iterator_types = \["parallel", "reduction", "parallel"\]', text) or \
        re.search(r'iterator_types = \["reduction", "parallel", "parallel"\]', text), text


def test_iota_in_a_reordered_reduction_keeps_its_dimension(tmp_path):
    # a weighted column sum whose weights come from linalg.index (iota): renumbered with the loops
    x = np.random.default_rng(1).standard_normal((40, 24))

    def f(x):
        rows = snp.arange(40.0)[:, None] + 0.0 * x
        cols = snp.arange(24.0)[None, :] + 0.0 * x
        return snp.sum(x * rows + cols, axis=0)
    got = sprue.qjit(f)(x)
    np.testing.assert_allclose(got, (x * np.arange(40.0)[:, None] + np.arange(24.0)[None, :]).sum(0), rtol=1e-12)


def _linalg_and_buffers(tmp_path) -> tuple[str, int]:
    return _stage(tmp_path, "linalg"), _stage(tmp_path, "bufferized").count("memref.alloc")


def test_sum_of_products_accumulates_into_one_buffer(tmp_path):
    rng = np.random.default_rng(2)
    x, h, w, u, b = (rng.standard_normal(s) for s in [(32, 48), (32, 40), (48, 64), (40, 64), (64,)])

    def f(x, h, w, u, b):
        return x @ w + h @ u + b     # the LSTM gate: b is broadcast after both products
    out = sprue.qjit(f, keep_intermediate=str(tmp_path))(x, h, w, u, b)
    np.testing.assert_allclose(out, x @ w + h @ u + b, rtol=1e-12, atol=1e-12)
    linalg, allocs = _linalg_and_buffers(tmp_path)
    # no add of two tensors is left: the bias is the first product's init, the second accumulates
    assert "linalg.fill" not in linalg
    assert allocs == 1, allocs


def test_shifted_einsums_of_a_convolution_share_one_accumulator(tmp_path):
    rng = np.random.default_rng(3)
    x, k = rng.standard_normal((2, 10, 12, 8)), rng.standard_normal((3, 3, 8, 16))

    def conv(x, k):
        out = None
        for dy in range(3):
            for dx in range(3):
                patch = x[:, dy:dy + 8, dx:dx + 10, :]
                term = snp.einsum("nhwc,cd->nhwd", patch, k[dy, dx])
                out = term if out is None else out + term
        return out
    ref = sum(np.einsum("nhwc,cd->nhwd", x[:, dy:dy + 8, dx:dx + 10, :], k[dy, dx]) for dy in range(3) for dx in range(3))
    out = sprue.qjit(conv, keep_intermediate=str(tmp_path))(x, k)
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)
    linalg, allocs = _linalg_and_buffers(tmp_path)
    assert linalg.count("linalg.fill") == 1
    assert allocs <= 2, allocs   # the accumulator (and at most one reshaping copy of the input)


def test_product_used_twice_is_not_overwritten(tmp_path):
    rng = np.random.default_rng(4)
    a, b, y = rng.standard_normal((20, 30)), rng.standard_normal((30, 24)), rng.standard_normal((20, 24))

    def f(a, b, y):
        d = a @ b
        return d + y, d * 2.0
    s, t = sprue.qjit(f)(a, b, y)
    np.testing.assert_allclose(s, a @ b + y, rtol=1e-12)
    np.testing.assert_allclose(t, 2 * (a @ b), rtol=1e-12)


def test_accumulating_into_an_argument_leaves_the_argument_alone(tmp_path):
    rng = np.random.default_rng(5)
    a, b, y = rng.standard_normal((33, 17)), rng.standard_normal((17, 9)), rng.standard_normal((33, 9))
    y0 = y.copy()
    out = sprue.qjit(lambda a, b, y: y + a @ b)(a, b, y)
    np.testing.assert_allclose(out, y0 + a @ b, rtol=1e-12)
    np.testing.assert_array_equal(y, y0)


def test_dynamic_sizes_and_integer_products(tmp_path):
    rng = np.random.default_rng(6)
    a, b, y = rng.standard_normal((21, 13)), rng.standard_normal((13, 11)), rng.standard_normal((21, 11))
    f = sprue.qjit(lambda a, b, y: a @ b + y, abstracted_axes=({0: "m"}, None, {0: "m"}))
    np.testing.assert_allclose(f(a, b, y), a @ b + y, rtol=1e-12)
    np.testing.assert_allclose(f(a[:5], b, y[:5]), a[:5] @ b + y[:5], rtol=1e-12)
    ai, bi, yi = (rng.integers(-5, 5, s) for s in [(6, 7), (7, 3), (6, 3)])
    np.testing.assert_array_equal(sprue.qjit(lambda a, b, y: a @ b + y)(ai, bi, yi), ai @ bi + yi)


def test_sum_inside_a_loop_body(tmp_path):
    rng = np.random.default_rng(7)
    h0, w, u = rng.standard_normal((8, 16)), 0.1 * rng.standard_normal((16, 16)), 0.1 * rng.standard_normal((16, 16))

    def f(h, w, u):
        return sprue.lax.fori_loop(0, 5, lambda i, h: snp.tanh(h @ w + h @ u + 1.0), h)
    ref = h0
    for _ in range(5):
        ref = np.tanh(ref @ w + ref @ u + 1.0)
    np.testing.assert_allclose(sprue.qjit(f)(h0, w, u), ref, rtol=1e-12)


def _allocs_of_shape(text: str, shape: str) -> int:
    return len(re.findall(rf"memref\.alloc\(\)[^\n]*memref<{shape}x", text))


def test_softmax_of_scaled_scores_keeps_one_scores_buffer(tmp_path):
    rng = np.random.default_rng(8)
    q, k = rng.standard_normal((2, 40, 16)), rng.standard_normal((2, 40, 16))

    def f(q, k):
        s = (q @ snp.swapaxes(k, -1, -2)) * 0.25
        s = s - snp.max(s, axis=-1, keepdims=True)
        e = snp.exp(s)
        return e / snp.sum(e, axis=-1, keepdims=True)
    s = (q @ np.swapaxes(k, -1, -2)) * 0.25
    e = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(sprue.qjit(f, keep_intermediate=str(tmp_path))(q, k), e / e.sum(-1, keepdims=True),
                               rtol=1e-12)
    linalg = _stage(tmp_path, "linalg")
    # the scaling is recomputed inside the max and inside the exp: no generic of its own
    assert not re.search(r"\{\n\s*\^bb0\(%in: f64, %out: f64\):\n\s*%\S+ = arith\.mulf %in, %cst\S* : f64\n\s*linalg\.yield",
                         linalg), linalg
    # the chain runs one batch element at a time (batch_fusion.py): the result is the only buffer
    # of the whole batch, and one element's scores the only other; the exp (merged with its row
    # sum) is written into the result's slice, and the quotient over it, which it reads last
    bufferized = _stage(tmp_path, "bufferized")
    assert _allocs_of_shape(bufferized, "2x40x40") == 1
    assert _allocs_of_shape(bufferized, "40x40") == 1


def test_expensive_producers_are_not_recomputed(tmp_path):
    x = np.random.default_rng(9).standard_normal((30, 50))

    def f(x):
        e = snp.exp(x)
        return e / snp.sum(e, axis=1, keepdims=True)
    got = sprue.qjit(f, keep_intermediate=str(tmp_path))(x)
    np.testing.assert_allclose(got, np.exp(x) / np.exp(x).sum(1, keepdims=True), rtol=1e-12)
    assert _stage(tmp_path, "linalg").count("math.exp") == 1


def test_an_input_read_later_is_not_overwritten(tmp_path):
    rng = np.random.default_rng(10)
    a, w = rng.standard_normal((24, 24)), rng.standard_normal((24, 24))

    def f(a, w):
        p = a @ w
        q = snp.tanh(p) * 2.0      # could write over p, but p is read again below and returned
        return q + p, p
    s, p = sprue.qjit(f)(a, w)
    np.testing.assert_allclose(p, a @ w, rtol=1e-12)
    np.testing.assert_allclose(s, np.tanh(a @ w) * 2 + a @ w, rtol=1e-12)


def test_loop_invariant_value_is_not_overwritten_inside_the_loop(tmp_path):
    rng = np.random.default_rng(11)
    a, w = rng.standard_normal((16, 16)), 0.1 * rng.standard_normal((16, 16))

    def f(a, w):
        p = a @ w                  # computed once, read by every trip
        return sprue.lax.fori_loop(0, 4, lambda i, c: c + snp.exp(p * 0.5), snp.zeros_like(a))
    np.testing.assert_allclose(sprue.qjit(f)(a, w), 4 * np.exp((a @ w) * 0.5), rtol=1e-12)


def test_duplication_does_not_cascade_up_a_chain_of_cheap_ops(tmp_path):
    # every level reads its input twice (x ^ (x >> s)); the last value feeds two reductions
    c = np.arange(5000, dtype=np.uint32)

    def f(c):
        x = c * np.uint32(2)
        x = x ^ (x >> np.uint32(16))
        x = x * np.uint32(0x7FEB352D)
        x = x ^ (x >> np.uint32(15))
        r = (x >> np.uint32(8)).astype(snp.float64) * (1.0 / (1 << 24))
        return snp.sum(r), snp.sum(snp.exp(-r))
    x = c * np.uint32(2)
    x = x ^ (x >> np.uint32(16))
    x = x * np.uint32(0x7FEB352D)
    x = x ^ (x >> np.uint32(15))
    r = (x >> np.uint32(8)).astype(np.float64) * (1.0 / (1 << 24))
    s, e = sprue.qjit(f, keep_intermediate=str(tmp_path))(c)
    np.testing.assert_allclose([s, e], [r.sum(), np.exp(-r).sum()], rtol=1e-12)
    # the chain is computed once (its three shifts), not once per reader of each level
    assert _stage(tmp_path, "linalg").count("arith.shrui") == 3


@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_exp_and_its_row_sum_are_one_pass(dt, tmp_path):
    x = np.random.default_rng(12).standard_normal((33, 70)).astype(dt)

    def f(x):
        e = snp.exp(x - snp.max(x, axis=1, keepdims=True))
        return e / snp.sum(e, axis=1, keepdims=True), snp.sum(e, axis=1)
    e = np.exp(x - x.max(1, keepdims=True))
    p, s = sprue.qjit(f, keep_intermediate=str(tmp_path))(x)
    tol = 1e-12 if dt == np.float64 else 2e-6
    np.testing.assert_allclose(p, e / e.sum(1, keepdims=True), rtol=tol)
    np.testing.assert_allclose(s, e.sum(1), rtol=tol)
    # one generic yields both the exponentials and their running sum
    linalg = _stage(tmp_path, "linalg")
    assert re.search(r"%\w+ = math\.exp [^\n]*\n\s*%\w+ = arith\.addf [^\n]*\n\s*linalg\.yield %\w+, %\w+", linalg), linalg


def test_producer_read_before_the_reduction_is_not_merged(tmp_path):
    x = np.random.default_rng(13).standard_normal((20, 30))

    def f(x):
        e = snp.exp(x)
        first = e[:, 0] * 2.0            # a reader of e before its sum
        return first + snp.sum(e, axis=1), e * 3.0
    e = np.exp(x)
    a, b = sprue.qjit(f)(x)
    np.testing.assert_allclose(a, e[:, 0] * 2 + e.sum(1), rtol=1e-12)
    np.testing.assert_allclose(b, e * 3, rtol=1e-12)


def test_a_causal_mask_is_recomputed_by_its_readers(tmp_path):
    """`where(i >= j, s, -1e30)` read by the row max and by the exp: the where and the comparison
    only it reads are cheap, so each reader recomputes them (duplicate_cheap_producers): no masked
    copy of the scores."""
    rng = np.random.default_rng(12)
    q, k = rng.standard_normal((2, 40, 16)), rng.standard_normal((2, 40, 16))

    def f(q, k, xp):
        i = xp.arange(40)
        s = xp.where(i[:, None] >= i[None, :], q @ xp.swapaxes(k, -1, -2), -1e30)
        e = xp.exp(s - s.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    got = sprue.qjit(lambda q, k: f(q, k, snp), keep_intermediate=str(tmp_path))(q, k)
    np.testing.assert_allclose(got, f(q, k, np), rtol=1e-12, atol=1e-300)
    bufferized = _stage(tmp_path, "bufferized")
    assert _allocs_of_shape(bufferized, "2x40x40") == 1       # (the result)
    assert _allocs_of_shape(bufferized, "40x40") == 1         # (one element's scores)


def test_a_broadcast_of_a_shared_value_is_recomputed_by_each_reader(tmp_path):
    # per-example gradients' outer products: d (an elementwise result the matmul also reads) is
    # broadcast to (n, h, o) and read by two reductions; the broadcast is cloned per reader and
    # fused, so no (n, h, o) buffer is written
    rng = np.random.default_rng(13)
    d, f, w, s = (rng.standard_normal(shape) for shape in [(48, 10), (48, 24), (24, 10), (48,)])

    def g(d, f, w, s):
        y = d * 2.0 + 1.0
        # (the broadcasts vmap(grad) writes: broadcast_in_dim, not a reshape and implicit ones)
        outer = lax.broadcast_in_dim(y, (48, 24, 10), (0, 2)) * lax.broadcast_in_dim(f, (48, 24, 10), (0, 1))
        return y @ w.T, snp.sum(outer * outer, axis=(1, 2)), snp.sum(outer * s[:, None, None], axis=0)
    y = d * 2.0 + 1.0
    outer = y[:, None, :] * f[:, :, None]
    got = sprue.qjit(g, keep_intermediate=str(tmp_path))(d, f, w, s)
    for a, b in zip(got, (y @ w.T, (outer * outer).sum((1, 2)), (outer * s[:, None, None]).sum(0))):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert "48x24x10" not in _stage(tmp_path, "bufferized")
