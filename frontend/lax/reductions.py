"""Reductions over axes (reduce_sum/prod/max/min/and/or), argmax/argmin, and cumulative ops."""
from __future__ import annotations

import numpy as np

from sprue.base import dtypes
from sprue.ir.core import ShapedArray
from sprue.base.errors import SprueTypeError, SprueValueError
from sprue.ir.shapes import prove_equal
from sprue.lax._rules import check_axes, define


def _reduce_rule(name: str, logical: bool = False):
    def rule(x: ShapedArray, *, axes, out_sharding=None):
        ax = check_axes(axes, x.ndim, name) if x.ndim else ()
        if axes and not x.ndim:
            raise SprueValueError(f"{name}: axes {tuple(axes)} out of bounds for a rank-0 operand")
        if logical and not (dtypes.is_bool(x.dtype) or dtypes.is_int(x.dtype)):
            raise SprueTypeError(f"{name} requires a boolean or integer operand, got {x.str_short()}")
        return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i not in ax), x.dtype)
    return rule


def _np_reduce(f):
    def impl(x, *, axes, out_sharding=None):
        with np.errstate(all="ignore"):
            return f(x, axis=tuple(axes)).astype(x.dtype) if axes else x.copy()
    return impl


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


reduce_sum_p = define("reduce_sum", _reduce_rule("reduce_sum"), _np_reduce(
    lambda x, axis: np.any(x, axis=axis) if x.dtype == bool else np.sum(x, axis=axis)))
reduce_prod_p = define("reduce_prod", _reduce_rule("reduce_prod"), _np_reduce(
    lambda x, axis: np.all(x, axis=axis) if x.dtype == bool else np.prod(x, axis=axis)))
reduce_max_p = define("reduce_max", _reduce_rule("reduce_max"), _np_reduce(_max_impl))
reduce_min_p = define("reduce_min", _reduce_rule("reduce_min"), _np_reduce(_min_impl))
reduce_and_p = define("reduce_and", _reduce_rule("reduce_and", True), _np_reduce(
    lambda x, axis: np.all(x, axis=axis) if x.dtype == bool else np.bitwise_and.reduce(x, axis=axis)))
reduce_or_p = define("reduce_or", _reduce_rule("reduce_or", True), _np_reduce(
    lambda x, axis: np.any(x, axis=axis) if x.dtype == bool else np.bitwise_or.reduce(x, axis=axis)))


def _arg_rule(name: str):
    def rule(x: ShapedArray, *, axes, index_dtype):
        (ax,) = check_axes(axes, x.ndim, name)
        if prove_equal(x.shape[ax], 0):
            raise SprueValueError(f"{name} of an empty axis (axis {ax} of {x.str_short()})")
        return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i != ax), dtypes.canonicalize(index_dtype))
    return rule


# numpy's argmax/argmin return the first NaN's index when there is one, as JAX's do.
argmax_p = define("argmax", _arg_rule("argmax"),
                  lambda x, *, axes, index_dtype: np.argmax(x, axis=axes[0]).astype(index_dtype))
argmin_p = define("argmin", _arg_rule("argmin"),
                  lambda x, *, axes, index_dtype: np.argmin(x, axis=axes[0]).astype(index_dtype))


def _cum_rule(name: str):
    def rule(x: ShapedArray, *, axis, reverse=False):
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


cumsum_p = define("cumsum", _cum_rule("cumsum"), _cum_impl(
    lambda x, axis: np.logical_or.accumulate(x, axis=axis) if x.dtype == bool else np.cumsum(x, axis=axis)))
cumprod_p = define("cumprod", _cum_rule("cumprod"), _cum_impl(
    lambda x, axis: np.logical_and.accumulate(x, axis=axis) if x.dtype == bool else np.cumprod(x, axis=axis)))
cummax_p = define("cummax", _cum_rule("cummax"), _cum_impl(lambda x, axis: np.maximum.accumulate(x, axis=axis)))
cummin_p = define("cummin", _cum_rule("cummin"), _cum_impl(lambda x, axis: np.minimum.accumulate(x, axis=axis)))


# == transformation rules (tables in sprue.ad_util): jvp, vjp, batching, cost =====================
from sprue.interp.ad_util import (aval_of, batch_rules, cost_rules, jvp_linear_in_first, jvp_rules, vjp_rules,
    zero_of)
from sprue.interp.cost import numel  # noqa: E402


def _reduce_sum_vjp(cts, primals, outs, *, axes, out_sharding=None):
    from sprue import lax
    xa = aval_of(primals[0])
    kept = tuple(i for i in range(xa.ndim) if i not in {a % max(xa.ndim, 1) for a in axes})
    return [lax.broadcast_in_dim(cts[0], xa.shape, kept)]


def _reduce_batch(p):
    def rule(args, dims, *, axes, **params):
        nd = aval_of(args[0]).ndim - 1
        return p.bind(args[0], axes=tuple(a % nd + 1 for a in axes), **params), 0
    return rule


def _reduction_cost(in_avals, out_avals, **params):
    """Folding n elements into one takes n - 1 operations."""
    return numel(in_avals[0]) - numel(out_avals[0]) if dtypes.is_float(in_avals[0].dtype) else 0


jvp_rules[reduce_sum_p], vjp_rules[reduce_sum_p] = jvp_linear_in_first(reduce_sum_p), _reduce_sum_vjp
batch_rules[reduce_sum_p] = _reduce_batch(reduce_sum_p)
cost_rules[reduce_sum_p] = _reduction_cost


# -- helpers of the rules below ---------------------------------------------------------------------
def _norm_axes(x, axes) -> tuple:
    nd = aval_of(x).ndim
    return tuple(sorted(a % nd for a in axes)) if nd else ()


def _back(v, xa, axes):
    """A reduced value v broadcast back to the operand's shape (the reduced axes restored)."""
    from sprue import lax
    kept = tuple(i for i in range(xa.ndim) if i not in axes)
    return lax.broadcast_in_dim(v, xa.shape, kept)


def _k(x, v):
    """The constant v in x's dtype (rank 0)."""
    return np.array(v, aval_of(x).dtype)[()]


def _fill(x, v):
    """v at x's shape and dtype."""
    from sprue import lax
    xa = aval_of(x)
    return lax.broadcast_in_dim(_k(x, v), xa.shape, ()) if xa.ndim else _k(x, v)


def _as_float(pred, like):
    from sprue import lax
    return lax.convert_element_type(pred, aval_of(like).dtype)


def _no_derivative(p):
    """Integer or boolean results: no tangent, no cotangent."""
    def jvp(primals, tangents, **params):
        out = p.bind(*primals, **params)
        return out, zero_of(out)
    jvp_rules[p] = jvp
    vjp_rules[p] = lambda cts, primals, outs, **params: [None] * len(primals)


# -- reduce_prod: the product of the other elements, correct with zeros ------------------------------
def _prod_of_others(x, axes):
    """d prod(x) / d x_i = the product of the other elements of x_i's slice: prod / x_i without
    zeros, the product of the nonzero elements at the only zero, 0 elsewhere (exact to first order
    with zeros; higher derivatives are exact away from zeros)."""
    from sprue import lax
    xa = aval_of(x)
    zero = _fill(x, 0)
    z = lax.eq(x, _k(x, 0))
    xs = lax.select(z, _fill(x, 1), x)
    nz = _back(lax.reduce_sum(_as_float(z, x), axes), xa, axes)
    p = _back(lax.reduce_prod(xs, axes), xa, axes)
    at_zero = lax.select(lax.eq(nz, _k(x, 1)), p, zero)
    elsewhere = lax.select(lax.eq(nz, _k(x, 0)), lax.div(p, xs), zero)
    return lax.select(z, at_zero, elsewhere)


def _reduce_prod_jvp(primals, tangents, *, axes, out_sharding=None):
    from sprue import lax
    x, t = primals[0], tangents[0]
    out = reduce_prod_p.bind(x, axes=axes, out_sharding=out_sharding)
    ax = _norm_axes(x, axes)
    if not ax:
        return out, t
    return out, lax.reduce_sum(lax.mul(t, _prod_of_others(x, ax)), ax)


def _reduce_prod_vjp(cts, primals, outs, *, axes, out_sharding=None):
    from sprue import lax
    x = primals[0]
    ax = _norm_axes(x, axes)
    if not ax:
        return [cts[0]]
    return [lambda: lax.mul(_back(cts[0], aval_of(x), ax), _prod_of_others(x, ax))]


jvp_rules[reduce_prod_p], vjp_rules[reduce_prod_p] = _reduce_prod_jvp, _reduce_prod_vjp


# -- reduce_max / reduce_min: to the locations of the extremum, ties sharing evenly ----------------------
def _extremum_locations(x, out, axes):
    """(indicator of the elements equal to the result, their count per result)."""
    from sprue import lax
    loc = _as_float(lax.eq(x, _back(out, aval_of(x), axes)), x)
    return loc, lax.reduce_sum(loc, axes)


def _reduce_extremum_ad(p):
    def jvp(primals, tangents, *, axes, out_sharding=None):
        from sprue import lax
        x, t = primals[0], tangents[0]
        out = p.bind(x, axes=axes, out_sharding=out_sharding)
        ax = _norm_axes(x, axes)
        if not ax:
            return out, t
        loc, count = _extremum_locations(x, out, ax)
        return out, lax.div(lax.reduce_sum(lax.mul(t, loc), ax), count)

    def vjp(cts, primals, outs, *, axes, out_sharding=None):
        from sprue import lax
        x = primals[0]
        ax = _norm_axes(x, axes)
        if not ax:
            return [cts[0]]

        def ct_x():
            loc, count = _extremum_locations(x, outs[0], ax)
            return lax.mul(_back(lax.div(cts[0], count), aval_of(x), ax), loc)
        return [ct_x]
    jvp_rules[p], vjp_rules[p] = jvp, vjp


_reduce_extremum_ad(reduce_max_p)
_reduce_extremum_ad(reduce_min_p)
for _p in (reduce_and_p, reduce_or_p, argmax_p, argmin_p):
    _no_derivative(_p)
for _p in (reduce_prod_p, reduce_max_p, reduce_min_p, reduce_and_p, reduce_or_p):
    batch_rules[_p] = _reduce_batch(_p)
    cost_rules[_p] = _reduction_cost


def _arg_batch(p):
    def rule(args, dims, *, axes, index_dtype):
        nd = aval_of(args[0]).ndim - 1
        return p.bind(args[0], axes=tuple(a % nd + 1 for a in axes), index_dtype=index_dtype), 0
    return rule


for _p in (argmax_p, argmin_p):
    batch_rules[_p] = _arg_batch(_p)
    cost_rules[_p] = _reduction_cost  # n - 1 comparisons per result


# -- cumulative ops -------------------------------------------------------------------------------------
def _cumsum_vjp(cts, primals, outs, *, axis, reverse=False):
    return [cumsum_p.bind(cts[0], axis=axis, reverse=not reverse)]


jvp_rules[cumsum_p], vjp_rules[cumsum_p] = jvp_linear_in_first(cumsum_p), _cumsum_vjp


def _first_zero(x, axis, reverse):
    """For cumprod's derivative: (no zero yet at or before each position, in scan order; the first
    zero of each scan; x with its zeros made 1; the cumprod of x with its first zero made 1)."""
    from sprue import lax
    z = lax.eq(x, _k(x, 0))
    count = cumsum_p.bind(_as_float(z, x), axis=axis, reverse=reverse)
    before = lax.eq(count, _k(x, 0))
    first = lax.bitwise_and(z, lax.eq(count, _k(x, 1)))
    one = _fill(x, 1)
    skip_first = cumprod_p.bind(lax.select(first, one, x), axis=axis, reverse=reverse)
    return before, first, lax.select(z, one, x), skip_first


# cumprod: y_i = prod_{j<=i} x_j (in scan order); z is the first zero of the scan (if any).
#   dy_i = y_i * sum_{k<=i} t_k / x_k        before z (no zero so far)
#        = t_z * prod_{j<=i, j!=z} x_j         from z on (every other term has the factor x_z = 0)
#   ct_k = sum_{i>=k} ct_i y_i / x_k            before z
#        = sum_{i>=z} ct_i prod_{j<=i, j!=z} x_j   at z, and 0 after z.
# Exact to first order with any zeros; higher derivatives are exact away from zeros.
def _cumprod_jvp(primals, tangents, *, axis, reverse=False):
    from sprue import lax
    x, t = primals[0], tangents[0]
    y = cumprod_p.bind(x, axis=axis, reverse=reverse)
    before, first, xs, skip_first = _first_zero(x, axis, reverse)
    scan = lambda v: cumsum_p.bind(v, axis=axis, reverse=reverse)  # noqa: E731
    t_before = lax.mul(y, scan(lax.div(t, xs)))
    t_after = lax.mul(scan(lax.select(first, t, _fill(x, 0))), skip_first)
    return y, lax.select(before, t_before, t_after)


def _cumprod_vjp(cts, primals, outs, *, axis, reverse=False):
    from sprue import lax
    x, ct, y = primals[0], cts[0], outs[0]
    before, first, xs, skip_first = _first_zero(x, axis, reverse)
    back = lambda v: cumsum_p.bind(v, axis=axis, reverse=not reverse)  # noqa: E731
    ct_before = lax.div(back(lax.mul(ct, y)), xs)
    ct_at = lax.select(first, back(lax.mul(ct, skip_first)), _fill(x, 0))
    return [lax.select(before, ct_before, ct_at)]


jvp_rules[cumprod_p], vjp_rules[cumprod_p] = _cumprod_jvp, _cumprod_vjp


def _cum_extremum_source(x, y, axis, reverse):
    """The index along `axis` of the element each running extremum y_i is (the latest one in scan
    order among equal values; a NaN is its own source)."""
    from sprue import lax
    xa = aval_of(x)
    pos = lax.broadcasted_iota(dtypes.int64, xa.shape, axis)
    record = lax.bitwise_or(lax.eq(x, y), lax.ne(x, x))
    # the first position in scan order is always a record: the other value is never the result
    other = np.int64(0) if not reverse else np.int64(np.iinfo(np.int64).max)
    other = lax.broadcast_in_dim(other, xa.shape, ()) if xa.ndim else other
    marked = lax.select(record, pos, other)
    return (cummin_p if reverse else cummax_p).bind(marked, axis=axis, reverse=reverse)


def _cum_extremum_ad(p):
    def jvp(primals, tangents, *, axis, reverse=False):
        from sprue.lax.indexing import take_along_axis
        x, t = primals[0], tangents[0]
        y = p.bind(x, axis=axis, reverse=reverse)
        return y, take_along_axis(t, _cum_extremum_source(x, y, axis, reverse), axis % aval_of(x).ndim)

    def vjp(cts, primals, outs, *, axis, reverse=False):
        from sprue.lax.indexing import take_along_axis_transpose
        x = primals[0]
        src = _cum_extremum_source(x, outs[0], axis, reverse)
        return [take_along_axis_transpose(cts[0], src, axis % aval_of(x).ndim)]
    jvp_rules[p], vjp_rules[p] = jvp, vjp


_cum_extremum_ad(cummax_p)
_cum_extremum_ad(cummin_p)


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


for _p in (cumsum_p, cumprod_p, cummax_p, cummin_p):
    batch_rules[_p] = _cum_batch(_p)
    cost_rules[_p] = _cumulative_cost
