"""Reductions, argmax/argmin, cumulative ops and sort compiled through StableHLO vs their numpy
reference rules (and numpy)."""
import numpy as np
import pytest

import sprue.lax as lax
from tests.helpers.lowering_harness import Compiled, check

DTYPES = ["float64", "float32", "int64", "int32", "int8", "uint32", "uint8", "bool"]


def sample(shape, dt, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dt == "bool":
        return rng.random(shape) > 0.5
    if np.dtype(dt).kind == "u":
        return rng.integers(0, 6, shape).astype(dt)
    return (rng.normal(size=shape) * 3).round().astype(dt) if np.dtype(dt).kind == "i" else \
        rng.normal(size=shape).astype(dt)


def _reducers(dt):
    ops = [lax.reduce_sum, lax.reduce_prod, lax.reduce_max, lax.reduce_min]
    if np.dtype(dt).kind in "iub":
        ops += [lax.reduce_and, lax.reduce_or]
    return ops


@pytest.mark.parametrize("dt", DTYPES)
def test_reductions_over_axes(dt):
    x = sample((3, 4, 5), dt)
    axes_list = [(0,), (1,), (2,), (0, 2), (0, 1, 2), ()]
    fns = [(f, axes) for f in _reducers(dt) for axes in axes_list]
    check(lambda a: tuple(f(a, axes) for f, axes in fns), x, rtol=1e-12 if dt == "float64" else 1e-5)


@pytest.mark.parametrize("dt", DTYPES)
def test_reductions_of_empty_axes_give_the_identity(dt):
    x = np.zeros((0, 3), dt)
    check(lambda a: tuple(f(a, (0,)) for f in _reducers(dt)), x)


def test_float_max_min_propagate_nan_and_sum_keeps_inf():
    x = np.array([[1.0, np.nan, 3.0], [np.inf, -np.inf, 0.0], [-0.0, 2.0, 1.0]])
    check(lambda a: (lax.reduce_max(a, (1,)), lax.reduce_min(a, (1,)), lax.reduce_sum(a, (1,)),
                     lax.reduce_max(a, (0,)), lax.reduce_min(a, (0,))), x)


def test_scalar_reduction_with_no_axes():
    check(lambda a: (lax.reduce_sum(a, ()), lax.reduce_max(a, ())), np.float64(3.0))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("index_dtype", ["int64", "int32"])
def test_argmax_argmin(dt, index_dtype):
    x = sample((4, 6), dt)
    x[1] = x[1, 0]  # a row of ties: the first index wins
    got = check(lambda a: (lax.argmax(a, 0, index_dtype), lax.argmax(a, 1, index_dtype),
                           lax.argmin(a, 0, index_dtype), lax.argmin(a, 1, index_dtype)), x)
    np.testing.assert_array_equal(got[1], np.argmax(x, 1))
    np.testing.assert_array_equal(got[3], np.argmin(x, 1))


def test_argmax_argmin_pick_the_first_nan_then_the_first_extremum():
    nan, inf = np.nan, np.inf
    x = np.array([[1.0, nan, 3.0, nan], [-inf, -inf, -inf, -inf], [inf, 2.0, inf, nan], [0.0, -0.0, 0.0, -1.0],
                  [2.0, 5.0, 5.0, 1.0], [nan, nan, 1.0, 2.0]])
    got = check(lambda a: (lax.argmax(a, 1), lax.argmin(a, 1), lax.argmax(a, 0), lax.argmin(a, 0)), x)
    np.testing.assert_array_equal(got[0], np.argmax(x, 1))
    np.testing.assert_array_equal(got[1], np.argmin(x, 1))
    np.testing.assert_array_equal(got[2], np.argmax(x, 0))


def test_argmax_of_integer_extremes():
    info = np.iinfo(np.int64)
    x = np.array([[info.min, info.min, info.min], [info.max, 0, info.max]])
    check(lambda a: (lax.argmax(a, 1), lax.argmin(a, 1)), x)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative_ops(dt, reverse):
    x = sample((4, 5), dt)
    fns = [lax.cumsum, lax.cumprod, lax.cummax, lax.cummin]
    check(lambda a: tuple(f(a, axis, reverse) for f in fns for axis in (0, 1)), x,
          rtol=1e-12 if dt == "float64" else 1e-5)


def test_cumulative_ops_with_nan_and_edge_sizes():
    x = np.array([1.0, np.nan, -2.0, 3.0])
    check(lambda a: (lax.cummax(a), lax.cummin(a, 0, True), lax.cumsum(a)), x)
    check(lambda a: (lax.cumsum(a, 0), lax.cummax(a, 1)), np.zeros((0, 3)))
    check(lambda a: (lax.cumsum(a, 1), lax.cumprod(a, 0, True)), np.ones((1, 1)) * 3)


@pytest.mark.parametrize("dt", DTYPES)
def test_sort_one_operand(dt):
    x = sample((5, 7), dt)
    got = check(lambda a: (lax.sort(a, 0), lax.sort(a, 1)), x)
    np.testing.assert_array_equal(got[1], np.sort(x, 1))


def test_sort_puts_nans_last_and_keeps_equal_keys_in_order():
    keys = np.array([3.0, np.nan, -0.0, 1.0, 0.0, -np.inf, np.nan, np.inf, 1.0, -0.0])
    payload = np.arange(10)
    got = check(lambda k, p: lax.sort((k, p), 0), keys, payload)
    np.testing.assert_array_equal(got[1], np.argsort(keys, kind="stable"))


@pytest.mark.parametrize("dt", ["float64", "int32", "uint8", "bool"])
def test_sort_lexicographic_with_two_keys_and_a_payload(dt):
    rng = np.random.default_rng(3)
    k0 = rng.integers(0, 3, (4, 9)).astype(dt)
    k1 = sample((4, 9), dt, 5)
    payload = rng.normal(size=(4, 9))
    got = check(lambda a, b, c: lax.sort((a, b, c), 1, num_keys=2), k0, k1, payload)
    order = np.lexsort((k1, k0), axis=1)
    np.testing.assert_array_equal(got[2], np.take_along_axis(payload, order, 1))


def test_sort_of_length_one_axis_and_scalar_reductions():
    x = np.array([[3.0, 1.0, 2.0]])
    check(lambda a: (lax.sort(a, 0), lax.sort(a, 1)), x)


def test_reductions_and_argmax_of_arrays_with_an_empty_kept_axis():
    x = np.zeros((3, 0))
    check(lambda a: (lax.reduce_sum(a, (0,)), lax.reduce_max(a, (0,)), lax.argmax(a, 0), lax.sort(a, 0)), x)


DOTS = {  # name: (lhs shape, rhs shape, dimension numbers)
    "matmul": ((3, 4), (4, 5), (((1,), (0,)), ((), ()))),
    "matvec": ((3, 4), (4,), (((1,), (0,)), ((), ()))),
    "inner": ((4,), (4,), (((0,), (0,)), ((), ()))),
    "outer": ((3,), (2,), (((), ()), ((), ()))),
    "transposed_operands": ((4, 3), (5, 4), (((0,), (1,)), ((), ()))),
    "batched": ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,)))),
    "batch_not_leading": ((3, 2, 4), (4, 5, 2), (((2,), (0,)), ((1,), (2,)))),
    "two_contracting": ((2, 3, 4), (4, 3, 5), (((1, 2), (1, 0)), ((), ()))),
    "empty_contraction": ((3, 0), (0, 2), (((1,), (0,)), ((), ()))),
}


@pytest.mark.parametrize("case", list(DOTS))
@pytest.mark.parametrize("dt", ["float64", "float32", "int64", "int32", "uint8", "bool"])
def test_dot_general(case, dt):
    ls, rs, dn = DOTS[case]
    check(lambda a, b: lax.dot_general(a, b, dn), sample(ls, dt), sample(rs, dt, 1),
          rtol=1e-12 if dt == "float64" else 1e-5)


@pytest.mark.parametrize("dt, preferred", [("int32", "int64"), ("float32", "float64"), ("bool", "int32"),
                                           ("bool", "float64"), ("int8", "bool"), ("uint8", "int32")])
def test_dot_general_preferred_element_type(dt, preferred):
    a, b = sample((3, 4), dt), sample((4, 2), dt, 1)
    check(lambda x, y: lax.dot_general(x, y, (((1,), (0,)), ((), ())), preferred_element_type=np.dtype(preferred)),
          a, b, rtol=1e-6)


def test_dot_general_accumulates_in_the_preferred_type():
    # int8 products summed past 127: accumulating in int32 keeps the exact count
    a = np.full((1, 64), 100, np.int8)
    got = Compiled(lambda x, y: lax.dot_general(x, y, (((1,), (0,)), ((), ())), preferred_element_type=np.int32),
                   a, a.T.copy())(a, a.T.copy())[0]
    np.testing.assert_array_equal(got, [[64 * 100 * 100]])
