"""Lowering of reductions (reduce_sum/prod/max/min/and/or), argmax/argmin, the cumulative ops
and sort.

Booleans combine with or (sum, max) and and (prod, min), as the reference rules do. Float max/min
propagate NaN (stablehlo.maximum is NaN-propagating, like numpy.maximum).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from torch_mlir import ir

from .. import lax
from ..core import Eqn
from .rules_common import (LoweringContext, Value, boolean, build_region, compare, constant, dtype_of, ew,
                           highest, i64, i64s, int_max, is_float, is_nan, logical_and, logical_not,
                           logical_or, lowering_rules, lowest, op, op1, reduce, scalar_type, select,
                           shape_of, tensor_type)

# How each reduction combines two values: (stablehlo op, op on booleans, identity of dtype).
Monoid = tuple[str, str, Callable[[np.dtype], object]]
_SUM: Monoid = ("add", "or", lambda dt: 0)
_PROD: Monoid = ("multiply", "and", lambda dt: 1)
_MAX: Monoid = ("maximum", "or", lowest)
_MIN: Monoid = ("minimum", "and", highest)
_AND: Monoid = ("and", "and", lambda dt: True if dt == np.bool_ else -1 if dt.kind == "i" else int_max(dt))
_OR: Monoid = ("or", "or", lambda dt: 0)


def _combiner(monoid: Monoid, dtype: np.dtype) -> Callable[[list[Value]], list[Value]]:
    name = monoid[1] if dtype == np.bool_ else monoid[0]
    return lambda args: [ew(name, args[0], args[1])]


def _reduction(monoid: Monoid):
    def rule(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
        axes = eqn.params["axes"]
        if not axes:
            return [x]
        dt = dtype_of(x)
        return reduce([x], [constant(monoid[2](dt), dt)], axes, _combiner(monoid, dt))
    return rule


for _p, _m in [(lax.reduce_sum_p, _SUM), (lax.reduce_prod_p, _PROD), (lax.reduce_max_p, _MAX),
               (lax.reduce_min_p, _MIN), (lax.reduce_and_p, _AND), (lax.reduce_or_p, _OR)]:
    lowering_rules[_p] = _reduction(_m)


# -- argmax / argmin ----------------------------------------------------------------------------
def _arg_reduction(direction: str, init: Callable[[np.dtype], object]):
    """A variadic reduce over (value, index). `a` wins over `b` when it is NaN and b is not, or
    when it is strictly better ("GT" for argmax, "LT" for argmin), or on a tie with the lower index:
    a total order, so the reduction order does not matter, and it picks numpy's first NaN or
    first extremum."""
    def better(args: list[Value]) -> list[Value]:
        av, ai, bv, bi = args
        a_better, tie = compare(av, bv, direction), compare(av, bv, "EQ")
        if is_float(av):
            a_nan, b_nan = is_nan(av), is_nan(bv)
            a_better = logical_or(a_better, logical_and(a_nan, logical_not(b_nan)))
            tie = logical_or(tie, logical_and(a_nan, b_nan))
        pick_a = logical_or(a_better, logical_and(tie, compare(ai, bi, "LT")))
        return [select(pick_a, av, bv), select(pick_a, ai, bi)]

    def rule(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
        (axis,) = eqn.params["axes"]
        index_dtype = np.dtype(eqn.params["index_dtype"])
        dt = dtype_of(x)
        index = op1("stablehlo.iota", [], tensor_type(shape_of(x), index_dtype), {"iota_dimension": i64(axis)})
        # the initial index loses every tie, so it never survives against a real element
        inits = [constant(init(dt), dt), constant(int_max(index_dtype), index_dtype)]
        return [reduce([x, index], inits, [axis], better)[1]]
    return rule


lowering_rules[lax.argmax_p] = _arg_reduction("GT", lowest)
lowering_rules[lax.argmin_p] = _arg_reduction("LT", highest)


# -- cumulative ops -----------------------------------------------------------------------------
def _cumulative(monoid: Monoid):
    """A reduce_window whose window spans the whole axis, padded by n-1 identities before the
    array (after it when reversed), so output i combines elements 0..i (i..n-1). O(n^2) work."""
    def rule(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
        axis, reverse = eqn.params["axis"], eqn.params.get("reverse", False)
        shape = shape_of(x)
        n = shape[axis]
        if n <= 1 or 0 in shape:
            return [x]
        dt = dtype_of(x)
        window = [n if d == axis else 1 for d in range(len(shape))]
        padding = np.zeros((len(shape), 2), np.int64)
        padding[axis, 1 if reverse else 0] = n - 1
        attrs = {"window_dimensions": i64s(window), "window_strides": i64s([1] * len(shape)),
                 "padding": ir.DenseIntElementsAttr.get(padding)}
        window_op = op("stablehlo.reduce_window", [x, constant(monoid[2](dt), dt)], [x.type], attrs, regions=1)
        build_region(window_op, [scalar_type(dt)] * 2, _combiner(monoid, dt))
        return [window_op.result]
    return rule


for _p, _m in [(lax.cumsum_p, _SUM), (lax.cumprod_p, _PROD), (lax.cummax_p, _MAX), (lax.cummin_p, _MIN)]:
    lowering_rules[_p] = _cumulative(_m)


# -- sort ---------------------------------------------------------------------------------------
def _less_and_equal(a: Value, b: Value) -> tuple[Value, Value]:
    """(a < b, a == b) in numpy's sort order: NaNs after everything and equal to each other;
    -0.0 == 0.0, so a stable sort keeps their order, as numpy's does."""
    less, equal = compare(a, b, "LT"), compare(a, b, "EQ")
    if is_float(a):
        a_nan, b_nan = is_nan(a), is_nan(b)
        less = logical_or(less, logical_and(logical_not(a_nan), b_nan))
        equal = logical_or(equal, logical_and(a_nan, b_nan))
    return less, equal


def _lexicographic_less(args: list[Value], num_keys: int) -> Value:
    """The comparator: lhs < rhs by key 0, ties broken by key 1, ... (args are lhs0, rhs0, lhs1, ...)."""
    less, _ = _less_and_equal(args[2 * (num_keys - 1)], args[2 * num_keys - 1])
    for k in range(num_keys - 2, -1, -1):
        lt, eq = _less_and_equal(args[2 * k], args[2 * k + 1])
        less = logical_or(lt, logical_and(eq, less))
    return less


def _sort(ctx: LoweringContext, eqn: Eqn, *xs: Value) -> list[Value]:
    p = eqn.params
    if shape_of(xs[0])[p["dimension"]] <= 1:
        return list(xs)
    attrs = {"dimension": i64(p["dimension"]), "is_stable": boolean(p.get("is_stable", True))}
    sort_op = op("stablehlo.sort", xs, [x.type for x in xs], attrs, regions=1)
    arg_types = [t for x in xs for t in (scalar_type(dtype_of(x)),) * 2]
    build_region(sort_op, arg_types, lambda args: [_lexicographic_less(args, p.get("num_keys", 1))])
    return list(sort_op.results)


lowering_rules[lax.sort_p] = _sort
