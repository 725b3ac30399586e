"""Reductions over axes (reduce_sum/prod/max/min/and/or), argmax/argmin, and cumulative ops."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..core import ShapedArray
from ..errors import SprueTypeError, SprueValueError
from ..shapes import prove_equal
from ._rules import check_axes, define


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
from ..ad_util import aval_of, batch_rules, cost_rules, is_zero, jvp_rules, vjp_rules, zero_of  # noqa: E402
from ..cost import numel  # noqa: E402


def _reduce_sum_jvp(primals, tangents, *, axes, out_sharding=None):
    out = reduce_sum_p.bind(primals[0], axes=axes, out_sharding=out_sharding)
    if is_zero(tangents[0]):
        return out, zero_of(out)
    return out, reduce_sum_p.bind(tangents[0], axes=axes, out_sharding=out_sharding)


def _reduce_sum_vjp(cts, primals, outs, *, axes, out_sharding=None):
    from .. import lax
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


jvp_rules[reduce_sum_p], vjp_rules[reduce_sum_p] = _reduce_sum_jvp, _reduce_sum_vjp
batch_rules[reduce_sum_p] = _reduce_batch(reduce_sum_p)
cost_rules[reduce_sum_p] = _reduction_cost
