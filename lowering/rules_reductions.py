"""Lowering of reductions (reduce_sum/prod/max/min/and/or), argmax/argmin, the cumulative ops,
dot_general and sort.

Booleans combine with or (sum, max) and and (prod, min), as the reference rules do. Float max/min
propagate NaN (stablehlo.maximum is NaN-propagating, like numpy.maximum).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo

from sprue import lax
from sprue.ir.core import Eqn
from sprue.lowering.dot_canonical import canonical_dot
from sprue.lowering.legalize_scan import PREFIX_SCAN_TARGET
from sprue.lowering.matmul import forms_enabled as matmul_forms_enabled
from sprue.lowering.rules_common import (
    LoweringContext,
    Value,
    axes_param,
    boolean,
    broadcast_in_dim,
    broadcast_like,
    build_region,
    compare,
    constant,
    constant_like,
    convert,
    dims_of,
    dtype_of,
    ew,
    full,
    has_zero,
    highest,
    i64,
    i64s,
    int_max,
    iota,
    is_float,
    is_nan,
    is_static,
    logical_and,
    logical_not,
    logical_or,
    lowering_rules,
    lowest,
    op,
    op1,
    reduce,
    scalar_type,
    select,
    shape_of,
    static_or_dynamic,
    tensor_type,
)

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
        axes = axes_param(eqn, "axes")
        if not axes:
            return [x]
        dt = dtype_of(x)
        if has_zero(x):  # nothing to combine (and reduce of an empty tensor has no linalg lowering)
            return [full(monoid[2](dt), dt, ctx.sizes(eqn.outvars[0].aval.shape))]
        # a `?` axis that is empty at run time reduces to the init value: the identity
        return reduce([x], [constant(monoid[2](dt), dt)], axes, _combiner(monoid, dt))
    return rule


for _p, _m in [(lax.reduce_sum_p, _SUM), (lax.reduce_prod_p, _PROD), (lax.reduce_max_p, _MAX),
               (lax.reduce_min_p, _MIN), (lax.reduce_and_p, _AND), (lax.reduce_or_p, _OR)]:
    lowering_rules[_p] = _reduction(_m)


# -- argmax / argmin ----------------------------------------------------------------------------
# Along a static axis of at most this many elements (k-means' 16 centres), one variadic reduce over
# (value, index) pairs, scalar; along longer ones two vectorized reductions (_first_extremum).
# One core, argmin along rows of k of 320,000 elements: k = 8-16 0.37 ms variadic, 0.46-0.55 two
# passes; k = 32-128 1.35-1.40 ms variadic, 0.09-0.13 two passes.
ARG_VARIADIC_MAX = 16


def _variadic(direction: str, x: Value, axis: int, index_dtype: np.dtype, init) -> Value:
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
    dt = dtype_of(x)
    index = iota(index_dtype, dims_of(x), axis)
    # the initial index loses every tie, so it never survives against a real element
    inits = [constant(init(dt), dt), constant(int_max(index_dtype), index_dtype)]
    return reduce([x, index], inits, [axis], better)[1]


def _first_extremum(monoid: Monoid, x: Value, axis: int, index_dtype: np.dtype) -> Value:
    """Two reductions along the axis: its extremum (max/min, NaN-propagating), then the first index
    holding it (a NaN where the extremum is NaN): numpy's first NaN or first extremum. Each is a
    plain reduction LLVM vectorizes (the row is in cache for the second), where the variadic
    reduce carries a compare-and-select chain from element to element (argmax along 1000-element
    rows of 1000: 4.1 -> 0.24 ms, numpy 0.10-0.14)."""
    dt = dtype_of(x)
    best = reduce([x], [constant(monoid[2](dt), dt)], [axis], _combiner(monoid, dt))[0]
    dims = dims_of(x)
    best = broadcast_in_dim(best, dims, [d for d in range(len(dims)) if d != axis])
    hit = compare(x, best, "EQ")
    if is_float(x):
        hit = logical_or(hit, logical_and(is_nan(x), is_nan(best)))
    never = constant(int_max(index_dtype), index_dtype)
    first = select(hit, iota(index_dtype, dims, axis), broadcast_like(never, x))
    return reduce([first], [never], [axis], _combiner(_MIN, index_dtype))[0]


def _arg_reduction(monoid: Monoid, direction: str):
    def rule(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
        (axis,) = axes_param(eqn, "axes")
        index_dtype = np.dtype(eqn.params["index_dtype"])
        if has_zero(x):  # a kept axis is empty (the shape rule forbids an empty reduced one)
            return [full(0, index_dtype, ctx.sizes(eqn.outvars[0].aval.shape))]
        # (a `?` reduced axis that is empty at run time gives int_max: no index holds the extremum)
        n = shape_of(x)[axis]
        if not ir.ShapedType.is_dynamic_size(n) and n <= ARG_VARIADIC_MAX:
            return [_variadic(direction, x, axis, index_dtype, monoid[2])]
        return [_first_extremum(monoid, x, axis, index_dtype)]
    return rule


lowering_rules[lax.argmax_p] = _arg_reduction(_MAX, "GT")
lowering_rules[lax.argmin_p] = _arg_reduction(_MIN, "LT")


# -- cumulative ops -----------------------------------------------------------------------------
def _cumulative(monoid: Monoid):
    """Static sizes: JAX's encoding, a reduce_window spanning the axis with n - 1 identities padded
    before it (after it when reversed); the legalization computes it in one O(n) pass
    (legalize_scan.py), and a cumsum in a program exported from JAX takes the same path. `?` sizes
    (a window's size is an attribute): sprue's prefix-scan custom_call (_prefix_call), lowered by
    the same pass. Both combine in numpy's order, element after element."""
    def rule(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
        (axis,), reverse = axes_param(eqn, "axis"), eqn.params.get("reverse", False)
        n = shape_of(x)[axis]
        if 0 <= n <= 1 or has_zero(x):
            return [x]
        dt = dtype_of(x)
        identity, combine = constant(monoid[2](dt), dt), _combiner(monoid, dt)
        if is_static(x):
            return [_prefix_window(x, axis, reverse, identity, combine)]
        return [_prefix_call(x, axis, reverse, monoid[1] if dt == np.bool_ else monoid[0])]
    return rule


def _prefix_window(x: Value, axis: int, reverse: bool, identity: Value, combine) -> Value:
    shape = shape_of(x)
    n = shape[axis]
    pads = [([0, n - 1] if reverse else [n - 1, 0]) if d == axis else [0, 0] for d in range(len(shape))]
    window = op("stablehlo.reduce_window", [x, identity], [x.type], {
        "window_dimensions": i64s([n if d == axis else 1 for d in range(len(shape))]),
        "padding": ir.DenseIntElementsAttr.get(np.array(pads, dtype=np.int64))}, regions=1)
    scalar = scalar_type(dtype_of(x))
    build_region(window, [scalar, scalar], combine)
    return window.results[0]


def _prefix_call(x: Value, axis: int, reverse: bool, combine: str) -> Value:
    """A prefix scan along an axis with a run-time size: sprue's custom_call, which the
    legalization computes in the same one pass as a static one (legalize_scan.lower_prefix_call):
    over the last axis with the running value in a register, else row after contiguous row."""
    i64 = ir.IntegerType.get_signless(64)
    return op1("stablehlo.custom_call", [x], x.type, {
        "call_target_name": ir.StringAttr.get(PREFIX_SCAN_TARGET),
        "sprue.axis": ir.IntegerAttr.get(i64, axis), "sprue.reverse": ir.BoolAttr.get(bool(reverse)),
        "sprue.combine": ir.StringAttr.get(f"stablehlo.{combine}")})


for _p, _m in [(lax.cumsum_p, _SUM), (lax.cumprod_p, _PROD), (lax.cummax_p, _MAX), (lax.cummin_p, _MIN)]:
    lowering_rules[_p] = _cumulative(_m)


# -- dot_general --------------------------------------------------------------------------------
def _dot_general(ctx: LoweringContext, eqn: Eqn, lhs: Value, rhs: Value) -> list[Value]:
    """Accumulates in the preferred element type (operands are converted to it first, as JAX
    does); booleans count in int64 and a bool result is `count != 0` (or of ands)."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    out = eqn.outvars[0].aval
    accumulate = np.dtype(out.dtype)
    if accumulate == np.bool_:
        accumulate = np.dtype(np.int64) if dtype_of(lhs) == np.bool_ else dtype_of(lhs)
    lhs, rhs = convert(lhs, accumulate), convert(rhs, accumulate)
    # any layout -> matmul / batch_matmul / matvec / vecmat, which matmul.py tiles (dot_canonical.py)
    result = canonical_dot(lhs, rhs, lc, rc, lb, rb, [static_or_dynamic(d) for d in out.shape]) \
        if matmul_forms_enabled() else None
    if result is None:
        dims = _stablehlo.DotDimensionNumbers.get(
            lhs_batching_dimensions=list(lb), rhs_batching_dimensions=list(rb),
            lhs_contracting_dimensions=list(lc), rhs_contracting_dimensions=list(rc))
        result = op1("stablehlo.dot_general", [lhs, rhs], tensor_type(out.shape, accumulate),
                     {"dot_dimension_numbers": dims})
    if out.dtype == np.bool_:
        return [compare(result, constant_like(0, result), "NE")]
    return [result]


lowering_rules[lax.dot_general_p] = _dot_general


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
    (dimension,) = axes_param(eqn, "dimension")
    if 0 <= shape_of(xs[0])[dimension] <= 1 or has_zero(xs[0]):  # (a `?` dim is negative here)
        return list(xs)
    attrs = {"dimension": i64(dimension), "is_stable": boolean(p.get("is_stable", True))}
    sort_op = op("stablehlo.sort", xs, [x.type for x in xs], attrs, regions=1)
    arg_types = [t for x in xs for t in (scalar_type(dtype_of(x)),) * 2]
    build_region(sort_op, arg_types, lambda args: [_lexicographic_less(args, p.get("num_keys", 1))])
    return list(sort_op.results)


lowering_rules[lax.sort_p] = _sort
