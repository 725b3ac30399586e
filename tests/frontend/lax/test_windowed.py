"""sprue.lax.reduce_window, select_and_scatter_add and select_and_gather_add (lax/windowed.py),
compiled and eager, against direct loops written from XLA's definition of a window (below), finite
differences for their gradients and loops for vmap."""
from __future__ import annotations

import operator

import numpy as np
import pytest

import sprue
from sprue import lax
from sprue.errors import SprueTypeError, SprueValueError

RNG = np.random.RandomState(7)


def _same_pads(shape, window, strides, dilation, lower=False):
    pads = []
    for n, w, s, d in zip(shape, window, strides, dilation):
        reach = (w - 1) * d + 1
        total = max((-(-n // s) - 1) * s + reach - n, 0)
        lo = total - total // 2 if lower else total // 2
        pads.append((lo, total - lo))
    return pads


def reference(x, init, op, window, strides, padding, base=None, dilation=None):
    """XLA's ReduceWindow, one output element and one window element at a time."""
    rank = x.ndim
    base, dilation = base or (1,) * rank, dilation or (1,) * rank
    dilated = np.full([(n - 1) * b + 1 for n, b in zip(x.shape, base)], init, x.dtype)
    dilated[tuple(slice(None, None, b) for b in base)] = x
    if isinstance(padding, str):
        padding = ([(0, 0)] * rank if padding == "VALID" else
                   _same_pads(dilated.shape, window, strides, dilation, padding == "SAME_LOWER"))
    padded = np.pad(dilated, [(max(lo, 0), max(hi, 0)) for lo, hi in padding], constant_values=init)
    padded = padded[tuple(slice(max(-lo, 0), n - max(-hi, 0)) for (lo, hi), n in zip(padding, padded.shape))]
    reach = [(w - 1) * d + 1 for w, d in zip(window, dilation)]
    out = np.empty([(n - r) // s + 1 for n, r, s in zip(padded.shape, reach, strides)], x.dtype)
    for idx in np.ndindex(*out.shape):
        acc = init
        for off in np.ndindex(*window):
            acc = op(acc, padded[tuple(i * s + o * d for i, o, s, d in zip(idx, off, strides, dilation))])
        out[idx] = acc
    return out


CONFIGS = [   # (shape, window, strides, padding, base dilation, window dilation)
    ((5, 6), (2, 2), (1, 1), "VALID", None, None),
    ((5, 6), (2, 3), (2, 1), "SAME", None, None),
    ((7, 6), (3, 2), (2, 2), "SAME_LOWER", None, None),
    ((5, 6), (2, 2), (2, 1), "SAME", None, (2, 1)),
    ((4, 5), (2, 3), (2, 1), ((0, 1), (1, 1)), (2, 1), None),
    ((2, 9, 9, 3), (1, 3, 3, 1), (1, 2, 2, 1), "SAME", None, (1, 2, 1, 1)),
    ((10,), (4,), (3,), ((2, -1),), None, None),
]
REDUCTIONS = [("max", lax.max, np.maximum, -np.inf), ("sum", lax.add, operator.add, 0.0),
              ("min", lax.min, np.minimum, np.inf), ("prod", lax.mul, operator.mul, 1.0)]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c[0]}-{c[3]}")
@pytest.mark.parametrize("reduction", REDUCTIONS, ids=lambda r: r[0])
def test_reduce_window_matches_the_definition(config, reduction):
    shape, window, strides, padding, base, dilation = config
    _, combine, np_op, init = reduction
    x = RNG.uniform(0.5, 1.5, shape)
    want = reference(x, init, np_op, window, strides, padding, base, dilation)

    def pool(x):
        return lax.reduce_window(x, init, combine, window, strides, padding, base, dilation)
    np.testing.assert_allclose(pool(x), want, rtol=1e-14)
    np.testing.assert_allclose(sprue.qjit(pool)(x), want, rtol=1e-14)


def test_reduce_window_any_computation_pytrees_and_init():
    x, y = RNG.uniform(-1, 1, (5, 6)), RNG.uniform(-1, 1, (5, 6))
    custom = lambda a, b: a + 2 * b
    want = reference(x, 0.5, custom, (2, 2), (1, 1), "VALID")
    np.testing.assert_allclose(sprue.qjit(lambda x: lax.reduce_window(x, 0.5, custom, (2, 2), (1, 1), "VALID"))(x),
                               want, rtol=1e-14)
    # two operands folded together: the max of x and, beside it, y where that max is (an argmax pool)
    pick = lambda a, b: (lax.max(a[0], b[0]), lax.select(lax.ge(a[0], b[0]), a[1], b[1]))
    mx, at = sprue.qjit(lambda x, y: lax.reduce_window((x, y), (-np.inf, 0.0), pick, (2, 3), (1, 1), "VALID"))(x, y)
    np.testing.assert_allclose(mx, reference(x, -np.inf, np.maximum, (2, 3), (1, 1), "VALID"), rtol=1e-14)
    for i, j in np.ndindex(*mx.shape):
        win = x[i:i + 2, j:j + 3]
        assert at[i, j] == y[i:i + 2, j:j + 3].flat[np.argmax(win)]


def _fd_grad(f, x, h=1e-6):
    g = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        e = np.zeros_like(x)
        e[idx] = h
        g[idx] = (f(x + e) - f(x - e)) / (2 * h)
    return g


@pytest.mark.parametrize("config", CONFIGS[:5], ids=lambda c: f"{c[0]}-{c[3]}")
@pytest.mark.parametrize("reduction", REDUCTIONS[:3], ids=lambda r: r[0])
def test_pooling_gradients_by_finite_differences(config, reduction):
    shape, window, strides, padding, base, dilation = config
    _, combine, np_op, init = reduction
    x = RNG.uniform(-2, 2, shape)
    weights = RNG.uniform(-1, 1, reference(x, init, np_op, window, strides, padding, base, dilation).shape)

    def loss(x):
        return (lax.reduce_window(x, init, combine, window, strides, padding, base, dilation) * weights).sum()

    def loss_np(x):
        return (reference(x, init, np_op, window, strides, padding, base, dilation) * weights).sum()
    np.testing.assert_allclose(sprue.qjit(sprue.grad(loss))(x), _fd_grad(loss_np, x), rtol=1e-6, atol=1e-8)


def test_pooling_under_vmap():
    xs = RNG.uniform(-2, 2, (3, 5, 6))

    def pool(x):
        return lax.reduce_window(x, -np.inf, lax.max, (2, 2), (2, 1), "SAME", window_dilation=(2, 1))
    got = sprue.qjit(sprue.vmap(pool))(xs)
    np.testing.assert_allclose(got, [pool(x) for x in xs], rtol=1e-15)
    grads = sprue.qjit(sprue.vmap(sprue.grad(lambda x: (pool(x) ** 2).sum())))(xs)
    np.testing.assert_allclose(grads, [sprue.grad(lambda x: (pool(x) ** 2).sum())(x) for x in xs], rtol=1e-15)


def _scatter_reference(source, x, window, strides, padding, select=operator.ge):
    """XLA's SelectAndScatter: per window, the first element that select keeps gets the source."""
    xp = np.pad(x, padding, constant_values=-np.inf if select is operator.ge else np.inf)
    out = np.zeros_like(xp)
    for idx in np.ndindex(*source.shape):
        best = None
        for off in np.ndindex(*window):
            pos = tuple(i * s + o for i, o, s in zip(idx, off, strides))
            if best is None or not select(xp[best], xp[pos]):
                best = pos
        out[best] += source[idx]
    return out[tuple(slice(lo, lo + n) for (lo, _), n in zip(padding, x.shape))]


@pytest.mark.parametrize("select", ["ge", "le"])
def test_select_and_scatter_add_and_gather_add(select):
    x = np.round(RNG.uniform(-2, 2, (6, 7)), 1)    # rounded: ties, where the first element must win
    padding = ((1, 0), (1, 1))
    window, strides = (3, 2), (2, 2)
    op = operator.ge if select == "ge" else operator.le
    out_shape = reference(x, 0.0, operator.add, window, strides, list(padding)).shape
    source = RNG.uniform(1, 2, out_shape)
    want = _scatter_reference(source, x, window, strides, padding, op)
    f = sprue.qjit(lambda s, x: lax.select_and_scatter_add(s, x, select, window, strides, padding))
    np.testing.assert_allclose(f(source, x), want, rtol=1e-15)
    # gather: the tangent at each window's selected element (a tangent that names its position)
    positions = np.arange(x.size, dtype=float).reshape(x.shape)
    gathered = sprue.qjit(lambda t, x: lax.select_and_gather_add(t, x, select, window, strides, padding))(positions, x)
    ones = np.ones(out_shape)
    chosen = _scatter_reference(ones, x, window, strides, padding, op)
    assert sorted(set(gathered.ravel().astype(int))) == sorted(np.flatnonzero(chosen))


def test_reduce_window_errors_name_the_problem():
    x = np.ones((4, 4))
    with pytest.raises(SprueValueError, match=r"padding must be 'VALID', 'SAME', 'SAME_LOWER' or \(low, high\) pairs,"
                                              r" got 'FULL'.*test_windowed.py"):
        lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), "FULL")
    with pytest.raises(SprueValueError, match=r"window_dimensions must be 2 positive ints .* got \(2,\)"):
        lax.reduce_window(x, 0.0, lax.add, (2,), (1, 1), "VALID")
    with pytest.raises(SprueValueError, match=r"a window of 5000 elements \(1, 5000\) is unrolled"):
        lax.reduce_window(np.ones((1, 5000)), 0.0, lax.add, (1, 5000), (1, 1), "VALID")
    with pytest.raises(SprueTypeError, match=r"the computation must return the operand's structure"):
        lax.reduce_window(x, 0.0, lambda a, b: (a, b), (2, 2), (1, 1), "VALID")
    with pytest.raises(SprueValueError, match=r"select_prim must be ge or le"):
        lax.select_and_scatter_add(np.ones((3, 3)), x, "eq", (2, 2), (1, 1), ((0, 0), (0, 0)))
