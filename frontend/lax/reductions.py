"""Reductions over axes (reduce_prod/max/min/and/or), argmax/argmin, and the cumulative ops
(cumsum/cumprod/cummax/cummin). reduce_sum, broadcast_in_dim's transpose, is in structural.py with
the helpers every reduction shares. Each block is one primitive's (or family's) whole story: shape
rule and numpy reference, the function that binds it, its jvp, vjp, batching and cost rules (tables
in sprue.interp.ad_util); the lowering is in sprue.lowering.rules_reductions."""
from __future__ import annotations

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueValueError
from sprue.interp.ad_util import (
    aval_of,
    batch_rules,
    cost_rules,
    jvp_linear_in_first,
    jvp_rules,
    vjp_rules,
    zero_of,
    zeros_like,
)
from sprue.interp.cost import numel
from sprue.ir.core import ShapedArray
from sprue.ir.shapes import prove_equal
from sprue.lax._rules import check_axes, define
from sprue.lax.dimension_numbers import GatherDimensionNumbers, GatherScatterMode
from sprue.lax.elementwise import bitwise_and, bitwise_or, convert_element_type, div, eq, mul, ne, select
from sprue.lax.indexing import _scatter_dn_of, bind_gather, bind_scatter, concatenate, scatter_add_p
from sprue.lax.structural import (
    _np_reduce,
    _reduce_batch,
    _reduce_rule,
    _reducer,
    _reduction_cost,
    broadcast_in_dim,
    broadcasted_iota,
    reduce_sum,
    require_ordered,
)

# sprue.lax re-exports these (the package imports * from this module)
__all__ = [
    "argmax", "argmax_p", "argmin", "argmin_p", "cummax", "cummax_p", "cummin", "cummin_p", "cumprod",
    "cumprod_p", "cumsum", "cumsum_p", "reduce_and", "reduce_and_p", "reduce_max", "reduce_max_p",
    "reduce_min", "reduce_min_p", "reduce_or", "reduce_or_p", "reduce_prod", "reduce_prod_p"
]


# -- helpers of the rules below ---------------------------------------------------------------------
def _norm_axes(x, axes) -> tuple:
    nd = aval_of(x).ndim
    return tuple(sorted(a % nd for a in axes)) if nd else ()


def _back(v, xa, axes):
    """A reduced value v broadcast back to the operand's shape (the reduced axes restored)."""
    kept = tuple(i for i in range(xa.ndim) if i not in axes)
    return broadcast_in_dim(v, xa.shape, kept)


def _k(x, v):
    """The constant v in x's dtype (rank 0)."""
    return np.array(v, aval_of(x).dtype)[()]


def _fill(x, v):
    """v at x's shape and dtype."""
    xa = aval_of(x)
    return broadcast_in_dim(_k(x, v), xa.shape, ()) if xa.ndim else _k(x, v)


def _as_float(pred, like):
    return convert_element_type(pred, aval_of(like).dtype)


def _no_derivative(p):
    """Integer or boolean results: no tangent, no cotangent."""
    def jvp(primals, tangents, **params):
        out = p.bind(*primals, **params)
        return out, zero_of(out)
    jvp_rules[p] = jvp
    vjp_rules[p] = lambda cts, primals, outs, **params: [None] * len(primals)


def _reduction(name: str, impl, logical: bool = False):
    """A reduction over axes (shape rule shared with reduce_sum), its batching and cost."""
    p = define(name, _reduce_rule(name, logical), _np_reduce(impl))
    batch_rules[p], cost_rules[p] = _reduce_batch(p), _reduction_cost
    return p


# -- reduce_prod: the product of the other elements, correct with zeros ------------------------------
reduce_prod_p = _reduction("reduce_prod",
                           lambda x, axis: np.all(x, axis=axis) if x.dtype == bool else np.prod(x, axis=axis))
reduce_prod = _reducer(reduce_prod_p)


def _prod_of_others(x, axes):
    """d prod(x) / d x_i = the product of the other elements of x_i's slice: prod / x_i without
    zeros, the product of the nonzero elements at the only zero, 0 elsewhere (exact to first order
    with zeros; higher derivatives are exact away from zeros)."""
    xa = aval_of(x)
    zero = _fill(x, 0)
    z = eq(x, _k(x, 0))
    xs = select(z, _fill(x, 1), x)
    nz = _back(reduce_sum(_as_float(z, x), axes), xa, axes)
    p = _back(reduce_prod(xs, axes), xa, axes)
    at_zero = select(eq(nz, _k(x, 1)), p, zero)
    elsewhere = select(eq(nz, _k(x, 0)), div(p, xs), zero)
    return select(z, at_zero, elsewhere)


def _reduce_prod_jvp(primals, tangents, *, axes, out_sharding=None):
    x, t = primals[0], tangents[0]
    out = reduce_prod_p.bind(x, axes=axes, out_sharding=out_sharding)
    ax = _norm_axes(x, axes)
    if not ax:
        return out, t
    return out, reduce_sum(mul(t, _prod_of_others(x, ax)), ax)


def _reduce_prod_vjp(cts, primals, outs, *, axes, out_sharding=None):
    x = primals[0]
    ax = _norm_axes(x, axes)
    if not ax:
        return [cts[0]]
    return [lambda: mul(_back(cts[0], aval_of(x), ax), _prod_of_others(x, ax))]


jvp_rules[reduce_prod_p], vjp_rules[reduce_prod_p] = _reduce_prod_jvp, _reduce_prod_vjp


# -- reduce_max / reduce_min: to the locations of the extremum, ties sharing evenly ----------------------
def _max_impl(x, axis):
    if x.size == 0:  # the identity: -inf for floats, the smallest integer
        shape = tuple(s for i, s in enumerate(x.shape) if i not in axis)
        return np.full(shape, -np.inf if dtypes.is_float(x.dtype) else (False if x.dtype == bool else np.iinfo(x.dtype).min), x.dtype)
    return np.max(x, axis=axis)


def _min_impl(x, axis):
    if x.size == 0:
        shape = tuple(s for i, s in enumerate(x.shape) if i not in axis)
        return np.full(shape, np.inf if dtypes.is_float(x.dtype) else (True if x.dtype == bool else np.iinfo(x.dtype).max), x.dtype)
    return np.min(x, axis=axis)


reduce_max_p = _reduction("reduce_max", _max_impl)
reduce_min_p = _reduction("reduce_min", _min_impl)
reduce_max = _reducer(reduce_max_p); reduce_min = _reducer(reduce_min_p)


def _extremum_locations(x, out, axes):
    """(indicator of the elements equal to the result, their count per result)."""
    loc = _as_float(eq(x, _back(out, aval_of(x), axes)), x)
    return loc, reduce_sum(loc, axes)


def _reduce_extremum_ad(p):
    def jvp(primals, tangents, *, axes, out_sharding=None):
        x, t = primals[0], tangents[0]
        out = p.bind(x, axes=axes, out_sharding=out_sharding)
        ax = _norm_axes(x, axes)
        if not ax:
            return out, t
        loc, count = _extremum_locations(x, out, ax)
        return out, div(reduce_sum(mul(t, loc), ax), count)

    def vjp(cts, primals, outs, *, axes, out_sharding=None):
        x = primals[0]
        ax = _norm_axes(x, axes)
        if not ax:
            return [cts[0]]

        def ct_x():
            loc, count = _extremum_locations(x, outs[0], ax)
            return mul(_back(div(cts[0], count), aval_of(x), ax), loc)
        return [ct_x]
    jvp_rules[p], vjp_rules[p] = jvp, vjp


_reduce_extremum_ad(reduce_max_p)
_reduce_extremum_ad(reduce_min_p)


# -- reduce_and / reduce_or: integer or boolean results, no derivative ---------------------------------
reduce_and_p = _reduction("reduce_and", lambda x, axis: np.all(x, axis=axis) if x.dtype == bool
                          else np.bitwise_and.reduce(x, axis=axis), logical=True)
reduce_or_p = _reduction("reduce_or", lambda x, axis: np.any(x, axis=axis) if x.dtype == bool
                         else np.bitwise_or.reduce(x, axis=axis), logical=True)
reduce_and = _reducer(reduce_and_p); reduce_or = _reducer(reduce_or_p)
_no_derivative(reduce_and_p)
_no_derivative(reduce_or_p)


# -- argmax / argmin: index results, no derivative -------------------------------------------------------
def _arg_rule(name: str):
    def rule(x: ShapedArray, *, axes, index_dtype):
        require_ordered(name, x)
        (ax,) = check_axes(axes, x.ndim, name)
        if prove_equal(x.shape[ax], 0):
            raise SprueValueError(f"{name} of an empty axis (axis {ax} of {x.str_short()})")
        return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i != ax), dtypes.canonicalize(index_dtype))
    return rule


def _arg_batch(p):
    def rule(args, dims, *, axes, index_dtype):
        nd = aval_of(args[0]).ndim - 1
        return p.bind(args[0], axes=tuple(a % nd + 1 for a in axes), index_dtype=index_dtype), 0
    return rule


# numpy's argmax/argmin return the first NaN's index when there is one, as JAX's do.
argmax_p = define("argmax", _arg_rule("argmax"),
                  lambda x, *, axes, index_dtype: np.argmax(x, axis=axes[0]).astype(index_dtype))
argmin_p = define("argmin", _arg_rule("argmin"),
                  lambda x, *, axes, index_dtype: np.argmin(x, axis=axes[0]).astype(index_dtype))


def argmax(x, axis: int, index_dtype=np.int64):
    return argmax_p.bind(x, axes=(axis,), index_dtype=dtypes.canonicalize(index_dtype))


def argmin(x, axis: int, index_dtype=np.int64):
    return argmin_p.bind(x, axes=(axis,), index_dtype=dtypes.canonicalize(index_dtype))


for _p in (argmax_p, argmin_p):
    _no_derivative(_p)
    batch_rules[_p] = _arg_batch(_p)
    cost_rules[_p] = _reduction_cost  # n - 1 comparisons per result


# -- cumulative ops: shared definitions ------------------------------------------------------------------
def _cum_rule(name: str):
    def rule(x: ShapedArray, *, axis, reverse=False):
        if name in ("cummax", "cummin"):
            require_ordered(name, x)
        check_axes((axis,), x.ndim, name)
        return x
    return rule


def _cum_impl(f):
    def impl(x, *, axis, reverse=False):
        y = np.flip(x, axis) if reverse else x
        with np.errstate(all="ignore"):
            y = f(y, axis=axis).astype(x.dtype)
        return np.flip(y, axis) if reverse else y
    return impl


def _cum_batch(p):
    def rule(args, dims, *, axis, reverse=False):
        nd = aval_of(args[0]).ndim - 1
        return p.bind(args[0], axis=axis % nd + 1, reverse=reverse), 0
    return rule


def _cumulative_cost(in_avals, out_avals, *, axis, reverse=False):
    """n - 1 operations along each scanned line of n elements."""
    xa = in_avals[0]
    if not dtypes.is_float(xa.dtype) or not xa.ndim:
        return 0
    n = xa.shape[axis % xa.ndim]
    return numel(xa) - numel(xa) // n if n else 0


def _cumulative(name: str, impl):
    """A cumulative op along one axis, its batching and cost."""
    p = define(name, _cum_rule(name), _cum_impl(impl))
    batch_rules[p], cost_rules[p] = _cum_batch(p), _cumulative_cost
    return p


# -- cumsum: linear; its transpose is the reverse cumsum ---------------------------------------------------
cumsum_p = _cumulative("cumsum", lambda x, axis: np.logical_or.accumulate(x, axis=axis) if x.dtype == bool
                       else np.cumsum(x, axis=axis))


def cumsum(x, axis: int = 0, reverse: bool = False):
    return cumsum_p.bind(x, axis=axis, reverse=reverse)


def _cumsum_vjp(cts, primals, outs, *, axis, reverse=False):
    return [cumsum_p.bind(cts[0], axis=axis, reverse=not reverse)]


jvp_rules[cumsum_p], vjp_rules[cumsum_p] = jvp_linear_in_first(cumsum_p), _cumsum_vjp


# -- cumprod -------------------------------------------------------------------------------------------------
cumprod_p = _cumulative("cumprod", lambda x, axis: np.logical_and.accumulate(x, axis=axis) if x.dtype == bool
                        else np.cumprod(x, axis=axis))


def cumprod(x, axis: int = 0, reverse: bool = False):
    return cumprod_p.bind(x, axis=axis, reverse=reverse)


def _first_zero(x, axis, reverse):
    """For cumprod's derivative: (no zero yet at or before each position, in scan order; the first
    zero of each scan; x with its zeros made 1; the cumprod of x with its first zero made 1)."""
    z = eq(x, _k(x, 0))
    count = cumsum_p.bind(_as_float(z, x), axis=axis, reverse=reverse)
    before = eq(count, _k(x, 0))
    first = bitwise_and(z, eq(count, _k(x, 1)))
    one = _fill(x, 1)
    skip_first = cumprod_p.bind(select(first, one, x), axis=axis, reverse=reverse)
    return before, first, select(z, one, x), skip_first


# cumprod: y_i = prod_{j<=i} x_j (in scan order); z is the first zero of the scan (if any).
#   dy_i = y_i * sum_{k<=i} t_k / x_k        before z (no zero so far)
#        = t_z * prod_{j<=i, j!=z} x_j         from z on (every other term has the factor x_z = 0)
#   ct_k = sum_{i>=k} ct_i y_i / x_k            before z
#        = sum_{i>=z} ct_i prod_{j<=i, j!=z} x_j   at z, and 0 after z.
# Exact to first order with any zeros; higher derivatives are exact away from zeros.
def _cumprod_jvp(primals, tangents, *, axis, reverse=False):
    x, t = primals[0], tangents[0]
    y = cumprod_p.bind(x, axis=axis, reverse=reverse)
    before, first, xs, skip_first = _first_zero(x, axis, reverse)
    scan = lambda v: cumsum_p.bind(v, axis=axis, reverse=reverse)  # noqa: E731
    t_before = mul(y, scan(div(t, xs)))
    t_after = mul(scan(select(first, t, _fill(x, 0))), skip_first)
    return y, select(before, t_before, t_after)


def _cumprod_vjp(cts, primals, outs, *, axis, reverse=False):
    x, ct, y = primals[0], cts[0], outs[0]
    before, first, xs, skip_first = _first_zero(x, axis, reverse)
    back = lambda v: cumsum_p.bind(v, axis=axis, reverse=not reverse)  # noqa: E731
    ct_before = div(back(mul(ct, y)), xs)
    ct_at = select(first, back(mul(ct, skip_first)), _fill(x, 0))
    return [select(before, ct_before, ct_at)]


jvp_rules[cumprod_p], vjp_rules[cumprod_p] = _cumprod_jvp, _cumprod_vjp


# -- cummax / cummin: the derivative follows the element each running extremum is -----------------------------
cummax_p = _cumulative("cummax", lambda x, axis: np.maximum.accumulate(x, axis=axis))
cummin_p = _cumulative("cummin", lambda x, axis: np.minimum.accumulate(x, axis=axis))


def cummax(x, axis: int = 0, reverse: bool = False):
    return cummax_p.bind(x, axis=axis, reverse=reverse)


def cummin(x, axis: int = 0, reverse: bool = False):
    return cummin_p.bind(x, axis=axis, reverse=reverse)


def _along_axis_indices(idx, axis: int):
    ia = aval_of(idx)
    nd, shape = ia.ndim, tuple(ia.shape)
    if ia.dtype != dtypes.int64:
        idx = convert_element_type(idx, dtypes.int64)
    comps = [broadcast_in_dim(idx, (*shape, 1), tuple(range(nd))) if d == axis
             else broadcasted_iota(dtypes.int64, (*shape, 1), d) for d in range(nd)]
    return comps[0] if nd == 1 else concatenate(comps, nd)


def _along_axis_dn(nd: int):
    every = tuple(range(nd))
    return GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=every, start_index_map=every)


def _take_along_axis(x, idx, axis: int):
    """y[..., i, ...] = x[..., idx[..., i, ...], ...] along axis (idx of x's shape; clamped): a gather
    of one element per position."""
    nd = aval_of(x).ndim
    return bind_gather(x, _along_axis_indices(idx, axis), _along_axis_dn(nd), (1,) * nd, GatherScatterMode.CLIP)


def _take_along_axis_transpose(ct, idx, axis: int):
    """The cotangent of x in _take_along_axis(x, idx, axis) (x of ct's shape)."""
    nd = aval_of(ct).ndim
    return bind_scatter(scatter_add_p, zeros_like(ct), _along_axis_indices(idx, axis),
                        ct, _scatter_dn_of(_along_axis_dn(nd)), GatherScatterMode.CLIP)


def _cum_extremum_source(x, y, axis, reverse):
    """The index along `axis` of the element each running extremum y_i is (the latest one in scan
    order among equal values; a NaN is its own source)."""
    xa = aval_of(x)
    pos = broadcasted_iota(dtypes.int64, xa.shape, axis)
    record = bitwise_or(eq(x, y), ne(x, x))
    # the first position in scan order is always a record: the other value is never the result
    other = np.int64(0) if not reverse else np.int64(np.iinfo(np.int64).max)
    other = broadcast_in_dim(other, xa.shape, ()) if xa.ndim else other
    marked = select(record, pos, other)
    return (cummin_p if reverse else cummax_p).bind(marked, axis=axis, reverse=reverse)


def _cum_extremum_ad(p):
    def jvp(primals, tangents, *, axis, reverse=False):
        x, t = primals[0], tangents[0]
        y = p.bind(x, axis=axis, reverse=reverse)
        return y, _take_along_axis(t, _cum_extremum_source(x, y, axis, reverse), axis % aval_of(x).ndim)

    def vjp(cts, primals, outs, *, axis, reverse=False):
        x = primals[0]
        src = _cum_extremum_source(x, outs[0], axis, reverse)
        return [_take_along_axis_transpose(cts[0], src, axis % aval_of(x).ndim)]
    jvp_rules[p], vjp_rules[p] = jvp, vjp


_cum_extremum_ad(cummax_p)
_cum_extremum_ad(cummin_p)
