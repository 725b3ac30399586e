"""Slices whose bounds are computed from sizes (x[:, 0:n - 4] with n = x.shape[1]) get sizes that are
expressions of dims, so shifted slices of one array have one size and combine with no broadcast
check or index-based resize (sprue.numpy._slicing, "bounds computed from sizes"). Values are
compared with numpy at several sizes, including ones smaller than the offsets; where numpy would
count a negative bound from the end and select something, sprue raises a run-time error."""
from __future__ import annotations

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.api.traced import trace_function
from sprue.base.errors import SprueValueError
from sprue.numpy._slicing import _selection
from sprue.trace.tracing import eval_jaxpr
from tests.helpers.jaxprs import f64, prims

NEGATIVE = r"a slice bound computed from sizes \(n-4\) is negative at run time"


def trace(fn, *avals):
    return trace_function(fn, avals, {}).closed_jaxpr


def run(cj, *args):
    return eval_jaxpr(cj.jaxpr, cj.consts, *args)


def sl(x):
    n = x.shape[1]
    return x[:, 0:n - 4] * 2.0 + x[:, 1:n - 3]


def conv1d(x):   # five shifted slices summed, their bounds computed from the size
    n = x.shape[1]
    w = (0.1, 0.2, 0.4, 0.2, 0.1)
    out = w[0] * x[:, 0:n - 4]
    for k in range(1, 5):
        out = out + w[k] * x[:, k:n - 4 + k]
    return out


def conv1d_negative_stops(x):   # the same with static negative stops
    w = (0.1, 0.2, 0.4, 0.2, 0.1)
    out = w[0] * x[:, 0:-4]
    for k in range(1, 5):
        out = out + w[k] * x[:, k:(k - 4 if k < 4 else None)]
    return out


def numpy_or_error(fn, x):
    try:
        return fn(x)
    except ValueError:
        return None


def test_selection_is_pythons_slicing():
    # the static reading _may_differ enumerates: numpy's (wrap) must be Python's own slicing
    for n in range(7):
        for a in [None] + list(range(-8, 9)):
            for b in [None] + list(range(-8, 9)):
                for k in (1, 2, 3, -1, -2, -3):
                    assert _selection(a, b, k, n, True, {0, 1}) == list(range(n))[a:b:k]


@pytest.mark.parametrize("fn", [sl, conv1d, conv1d_negative_stops])
def test_shifted_slices_share_one_size(fn):
    cj = trace(fn, f64("b", "n"))
    ps = prims(cj)
    assert "gather" not in ps and "pad" not in ps
    # numpy's x[:, 0:n - 4] at n = 3 is x[:, 0:2] (the stop counted from the end): the one bound
    # whose two readings differ at some size is checked; x[:, 1:n - 3] ... are the same either way
    assert ps.count("check") == (0 if fn is conv1d_negative_stops else 1)
    assert ps.count("dynamic_slice") == (2 if fn is sl else 5)
    for n in range(0, 10):
        x = np.arange(3.0 * n).reshape(3, n) ** 1.5
        want = numpy_or_error(fn, x)
        if want is None:   # numpy: operands could not be broadcast (n = 3 for sl)
            with pytest.raises(SprueValueError, match=NEGATIVE):
                run(cj, 3, n, x)
            continue
        if fn is conv1d and n == 3:   # numpy sums x[:, 0:2] with four empty slices: an empty result
            with pytest.raises(SprueValueError, match=NEGATIVE):
                run(cj, 3, n, x)
            continue
        np.testing.assert_allclose(run(cj, 3, n, x)[0], want, rtol=1e-15)


# (start, stop, step) of axis 1 as functions of its size m
CASES = [
    (lambda m: 2, lambda m: -2, 1),
    (lambda m: m // 2, lambda m: None, 1),
    (lambda m: 1, lambda m: m - 1, 2),
    (lambda m: m - 2, lambda m: None, -1),
    (lambda m: m - 5, lambda m: m - 1, 1),
    (lambda m: None, lambda m: None, -2),
    (lambda m: m - 3, lambda m: 1, -1),
    (lambda m: None, lambda m: m - 6, 3),
    (lambda m: m - 7, lambda m: None, 1),
    (lambda m: m - 4, lambda m: 2 * m - 9, -2),
]


@pytest.mark.parametrize("i", range(len(CASES)))
def test_slices_with_bounds_from_sizes_are_numpys_or_an_error(i):
    start, stop, step = CASES[i]
    fn = lambda x: x[:, start(x.shape[1]):stop(x.shape[1]):step]   # noqa: E731
    cj = trace(fn, f64("b", "n"))
    assert "gather" not in prims(cj) or abs(step) > 1   # every k-th element: a gather
    assert "pad" not in prims(cj)
    from_sizes = {k for k, f in enumerate((start, stop)) if f(100) != f(200)}   # bounds that are dims
    for n in range(0, 14):
        x = np.arange(4.0 * n).reshape(4, n)
        a, b = start(n), stop(n)
        differ = _selection(a, b, step, n, True, from_sizes) != _selection(a, b, step, n, False, from_sizes)
        if differ:   # numpy counts a negative bound computed from sizes from the end
            with pytest.raises(SprueValueError, match="computed from sizes"):
                run(cj, 4, n, x)
            continue
        np.testing.assert_array_equal(run(cj, 4, n, x)[0], fn(x))


def test_bounds_from_sizes_on_two_axes():
    fn = lambda x: x[x.shape[0] - 2:, x.shape[1] - 7:] * 2.0   # noqa: E731
    cj = trace(fn, f64("b", "n"))
    for b, n in [(0, 0), (1, 3), (1, 5), (0, 5), (2, 7), (3, 9), (5, 12)]:
        x = np.arange(1.0 * b * n).reshape(b, n)
        # x[-1:] of one row is all of it (as x[0:] is); x[:, -2:] of 5 columns is not x[:, 0:]
        if n in (4, 5, 6):
            with pytest.raises(SprueValueError, match="computed from sizes"):
                run(cj, b, n, x)
            continue
        np.testing.assert_array_equal(run(cj, b, n, x)[0], fn(x))


def test_a_slice_from_sizes_has_a_symbolic_size():
    cj = trace(lambda x: (x[:, 0:x.shape[1] - 4], x[:, 2:-2], x[:, 4:]), f64("b", "n"))
    text = str(cj)
    out = text[text.rindex("in ("):]
    types = {v: t for v, t in __import__("re").findall(r"(\w+):(\w+\[[^\]]*\])", text)}
    sizes = {types[v] for v in out[4:-3].rstrip(",) }").split(", ")}
    assert len(sizes) == 1   # max(0, n - 4), computed once


def test_bounds_from_sizes_that_cannot_be_negative_need_no_check():
    fn = lambda x: x[:, x.shape[1] // 2:x.shape[1]] + x[:, 0:x.shape[1] - x.shape[1] // 2]   # noqa: E731
    cj = trace(fn, f64("b", "n"))
    ps = prims(cj)
    assert "check" not in ps and "gather" not in ps   # both n - n // 2 long
    for n in (0, 1, 5, 6):
        x = np.arange(2.0 * n).reshape(2, n)
        np.testing.assert_array_equal(run(cj, 2, n, x)[0], fn(x))


# -- compiled ----------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [sl, conv1d])
def test_compiled_static_and_dynamic_match_numpy(fn):
    dyn = sprue.qjit(fn, abstracted_axes={0: "b", 1: "n"})
    for n in (0, 1, 2, 4, 5, 9, 64):
        x = np.random.default_rng(n).standard_normal((3, n))
        want = fn(x)
        np.testing.assert_allclose(dyn(x), want, rtol=1e-13)
        np.testing.assert_allclose(sprue.qjit(fn)(x), want, rtol=1e-13)
    with pytest.raises(SprueValueError, match=NEGATIVE):
        dyn(np.ones((3, 3)))


def test_an_index_computed_from_sizes():
    fn = lambda x: (x[:, x.shape[1] - 1], x[:, x.shape[1] - 3])   # noqa: E731
    cj = trace(fn, f64("b", "n"))
    for n in (3, 4, 7):
        x = np.arange(2.0 * n).reshape(2, n)
        for got, want in zip(run(cj, 2, n, x), fn(x)):   # n - 3 counts from the end where negative
            np.testing.assert_array_equal(got, want)
    with pytest.raises(SprueValueError, match="index into axis 1 of size 0"):
        run(cj, 2, 0, np.zeros((2, 0)))


def test_a_size_computed_from_sizes_is_checked_and_then_known():
    def fn(x):
        n = x.shape[1]
        return jnp.zeros((x.shape[0], n - 4)) + x[:, 0:n - 4] + x[:, 2:-2], jnp.ones(n + 1)
    cj = trace(fn, f64("b", "n"))
    ps = prims(cj)
    # zeros' n - 4 >= 0 is checked (numpy raises for a negative size), which makes both slices n - 4
    # long: no broadcast check between them, no clamp max(0, n - 4); n + 1 needs no check
    negative = [e for e in cj.jaxpr.eqns if e.primitive.name == "check" and "negative" in e.params["message"]]
    assert len(negative) == 1 and "gather" not in ps and "pad" not in ps
    for n in (4, 5, 9):
        x = np.arange(2.0 * n).reshape(2, n)
        for got, want in zip(run(cj, 2, n, x), (x[:, 0:n - 4] + x[:, 2:-2], np.ones(n + 1))):
            np.testing.assert_array_equal(got, want)
    with pytest.raises(SprueValueError, match=r"sprue.numpy.zeros: negative dimensions are not allowed \(a shape"
                                              r" dimension n-4 is negative at run time\)"):
        run(cj, 2, 3, np.zeros((2, 3)))
