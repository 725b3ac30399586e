"""Layout primitives: broadcast_in_dim, reshape, transpose, squeeze, rev, iota, copy; and reduce_sum,
broadcast_in_dim's transpose. Each block is one primitive's whole story: its shape rule and numpy
reference, the function that binds it, and its jvp, vjp, batching and cost rules (tables in
sprue.interp.ad_util); its lowering is in sprue.lowering.rules_structural.

These are the bottom of sprue.lax: their rules use only one another, and every other module's rules
use them (a binary op broadcasts a rank-0 tangent and sums a cotangent back into it). reduce_sum is
here, not in reductions.py, because broadcast_in_dim and reduce_sum are each the other's vjp; the
other reductions share its helpers from here. The windows of an array (slice, pad, concatenate,
dynamic_slice, gather, scatter) are in indexing.py."""
from __future__ import annotations

import math

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueTypeError, SprueValueError, UnsupportedError
from sprue.interp.ad_util import (
    aval_of,
    batch_rules,
    cost_rules,
    jvp_linear_in_first,
    jvp_rules,
    resolved,
    vjp_rules,
    zero_of,
)
from sprue.interp.cost import free, numel
from sprue.ir.core import ShapedArray, dynamic_dim_params
from sprue.ir.shapes import DimExpr, format_dim, prove_equal
from sprue.lax._rules import check_axes, define, is_one, require_equal, surely_less
from sprue.trace.tracing import as_dim, dim_value

# sprue.lax re-exports these (the package imports * from this module)
__all__ = [
    "broadcast_in_dim", "broadcast_in_dim_p", "broadcasted_iota", "copy_p", "iota", "iota_p",
    "reduce_sum", "reduce_sum_p", "reshape", "reshape_p", "rev", "rev_p", "squeeze", "squeeze_p",
    "transpose", "transpose_p"
]


def _fmt(shape) -> str:
    """A shape for messages: (3, n+1)."""
    return "(" + ", ".join(format_dim(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


# Sizes known only at run time are None in the params of broadcast_in_dim, reshape, iota (and
# dynamic_slice, gather), their values trailing operands (dynamic_dim_params). Those operands never
# have tangents or cotangents; `resolved` gives the params with those sizes filled in.
def _split_dims(dims) -> tuple[tuple, list]:
    """(param, size operands): static sizes stay in the param; a size known only at run time is
    None there and its value becomes a trailing operand (JAX's dynamic-shape convention)."""
    param, operands = [], []
    for d in dims:
        if d is not None and not isinstance(d, DimExpr):
            d = as_dim(d)
        if isinstance(d, int):
            param.append(d)
        else:
            param.append(None)
            operands.append(dim_value(d))
    return tuple(param), operands


def _sizes_unbatched(p, dims, n_data):
    if any(d is not None for d in dims[n_data:]):
        raise UnsupportedError(f"not batchable: {p.name} to a size that differs between batch elements"
                               f" (the size of an array cannot depend on the batch index)")


# -- broadcast_in_dim ------------------------------------------------------------------------------
def _broadcast_in_dim_rule(x: ShapedArray, *, shape, broadcast_dimensions, sharding=None):
    shape = tuple(shape)
    bd = tuple(broadcast_dimensions)
    if len(bd) != x.ndim:
        raise SprueValueError(f"broadcast_in_dim: operand {x.str_short()} needs {x.ndim} broadcast_dimensions, got {bd}")
    if any(not 0 <= d < len(shape) for d in bd) or list(bd) != sorted(set(bd)):
        raise SprueValueError(f"broadcast_in_dim: broadcast_dimensions {bd} must be increasing and within rank {len(shape)}")
    for i, d in enumerate(bd):
        if not is_one(x.shape[i]):
            require_equal(x.shape[i], shape[d],
                          f"broadcast_in_dim: cannot broadcast {x.str_short()} to shape {_fmt(shape)}")
    return x.update(shape=shape)


def _broadcast_in_dim_impl(x, *, shape, broadcast_dimensions, sharding=None):
    expanded = np.reshape(x, [x.shape[broadcast_dimensions.index(d)] if d in broadcast_dimensions else 1
                              for d in range(len(shape))])
    return np.broadcast_to(expanded, shape).copy()


broadcast_in_dim_p = define("broadcast_in_dim", _broadcast_in_dim_rule, _broadcast_in_dim_impl)
dynamic_dim_params[broadcast_in_dim_p] = "shape"


def broadcast_in_dim(x, shape, broadcast_dimensions):
    shape, sizes = _split_dims(shape)
    return broadcast_in_dim_p.bind(x, *sizes, shape=shape, broadcast_dimensions=tuple(broadcast_dimensions),
                                   sharding=None)


def _broadcast_in_dim_vjp(cts, primals, outs, **params):
    (x,), rp = resolved(broadcast_in_dim_p, primals, params)
    ct, xa = cts[0], aval_of(x)
    bd = rp["broadcast_dimensions"]
    shape = rp["shape"]
    summed = [d for d in range(len(shape)) if d not in bd]
    summed += [bd[i] for i in range(xa.ndim) if is_one(xa.shape[i]) and not is_one(shape[bd[i]])]
    r = reduce_sum(ct, tuple(sorted(summed))) if summed else ct
    if aval_of(r).shape != xa.shape:
        r = reshape(r, xa.shape)
    return [r] + [None] * (len(primals) - 1)


def _broadcast_in_dim_batch(args, dims, **params):
    if any(d is not None for d in dims[1:]):
        raise UnsupportedError("not batchable: broadcast_in_dim to a size that differs between batch elements")
    (x,), rp = resolved(broadcast_in_dim_p, args, params)
    size = aval_of(x).shape[0]
    out = broadcast_in_dim(x, (size, *rp["shape"]), (0, *(d + 1 for d in rp["broadcast_dimensions"])))
    return out, 0


jvp_rules[broadcast_in_dim_p] = jvp_linear_in_first(broadcast_in_dim_p)
vjp_rules[broadcast_in_dim_p] = _broadcast_in_dim_vjp
batch_rules[broadcast_in_dim_p] = _broadcast_in_dim_batch
cost_rules[broadcast_in_dim_p] = free


# -- reduce_sum, and the helpers of every reduction over axes (the others are in reductions.py) -----
def require_ordered(name: str, x: ShapedArray):
    """Maxima, minima and sorting need an order: complex numbers have none (JAX's lax refuses them;
    numpy and jax.numpy order them lexicographically, sprue does not)."""
    if dtypes.is_complex(x.dtype):
        raise SprueTypeError(f"{name} requires ordered (not complex) operands, got {x.str_short()}; order by"
                             f" the real part (real(z)) or the magnitude (abs(z))")


def _reduce_rule(name: str, logical: bool = False):
    def rule(x: ShapedArray, *, axes, out_sharding=None):
        if name in ("reduce_max", "reduce_min"):
            require_ordered(name, x)
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


def _reducer(p):
    def f(x, axes):
        return p.bind(x, axes=tuple(axes), out_sharding=None)
    f.__name__ = p.name
    return f


def _reduce_batch(p):
    def rule(args, dims, *, axes, **params):
        nd = aval_of(args[0]).ndim - 1
        return p.bind(args[0], axes=tuple(a % nd + 1 for a in axes), **params), 0
    return rule


def _reduction_cost(in_avals, out_avals, **params):
    """Folding n elements into one takes n - 1 operations."""
    return numel(in_avals[0]) - numel(out_avals[0]) if dtypes.is_float(in_avals[0].dtype) else 0


reduce_sum_p = define("reduce_sum", _reduce_rule("reduce_sum"), _np_reduce(
    lambda x, axis: np.any(x, axis=axis) if x.dtype == bool else np.sum(x, axis=axis)))
reduce_sum = _reducer(reduce_sum_p)


def _reduce_sum_vjp(cts, primals, outs, *, axes, out_sharding=None):
    xa = aval_of(primals[0])
    kept = tuple(i for i in range(xa.ndim) if i not in {a % max(xa.ndim, 1) for a in axes})
    return [broadcast_in_dim(cts[0], xa.shape, kept)]


jvp_rules[reduce_sum_p], vjp_rules[reduce_sum_p] = jvp_linear_in_first(reduce_sum_p), _reduce_sum_vjp
batch_rules[reduce_sum_p] = _reduce_batch(reduce_sum_p)
cost_rules[reduce_sum_p] = _reduction_cost


# -- reshape -----------------------------------------------------------------------------------------
def _reshape_rule(x: ShapedArray, *, new_sizes, dimensions=None, sharding=None):
    new_sizes = tuple(new_sizes)
    if dimensions is not None:
        raise SprueValueError("reshape with `dimensions` is not supported; transpose first")
    if any(surely_less(d, 0) for d in new_sizes) or prove_equal(math.prod(new_sizes), x.size) is False:
        raise SprueValueError(f"cannot reshape {x.str_short()} (size {x.size}) into shape {_fmt(new_sizes)}")
    if prove_equal(math.prod(new_sizes), x.size) is None:
        raise SprueValueError(f"reshape of {x.str_short()} into shape {_fmt(new_sizes)}: the sizes {x.size} and"
                              f" {math.prod(new_sizes)} are not provably equal; sprue.numpy.reshape checks"
                              f" them at run time")
    return x.update(shape=new_sizes)


reshape_p = define("reshape", _reshape_rule, lambda x, *, new_sizes, dimensions=None, sharding=None:
                   np.reshape(x, new_sizes))
dynamic_dim_params[reshape_p] = "new_sizes"


def reshape(x, new_sizes):
    new_sizes, sizes = _split_dims(new_sizes)
    return reshape_p.bind(x, *sizes, new_sizes=new_sizes, dimensions=None, sharding=None)


def _reshape_vjp(cts, primals, outs, **params):
    return [reshape(cts[0], aval_of(primals[0]).shape)] + [None] * (len(primals) - 1)


def _reshape_batch(args, dims, **params):
    _sizes_unbatched(reshape_p, dims, 1)
    (x,), rp = resolved(reshape_p, args, params)
    return reshape(x, (aval_of(x).shape[0], *rp["new_sizes"])), 0


jvp_rules[reshape_p], vjp_rules[reshape_p] = jvp_linear_in_first(reshape_p), _reshape_vjp
batch_rules[reshape_p], cost_rules[reshape_p] = _reshape_batch, free


# -- transpose -------------------------------------------------------------------------------------
def _transpose_rule(x: ShapedArray, *, permutation):
    perm = tuple(permutation)
    if sorted(perm) != list(range(x.ndim)):
        raise SprueValueError(f"transpose: {perm} is not a permutation of the axes of {x.str_short()}")
    return x.update(shape=tuple(x.shape[p] for p in perm))


transpose_p = define("transpose", _transpose_rule, lambda x, *, permutation: np.transpose(x, permutation))


def transpose(x, permutation):
    return transpose_p.bind(x, permutation=tuple(permutation))


def _transpose_vjp(cts, primals, outs, *, permutation):
    return [transpose(cts[0], tuple(int(i) for i in np.argsort(permutation)))]


def _transpose_batch(args, dims, *, permutation):
    return transpose(args[0], (0, *(p + 1 for p in permutation))), 0


jvp_rules[transpose_p], vjp_rules[transpose_p] = jvp_linear_in_first(transpose_p), _transpose_vjp
batch_rules[transpose_p], cost_rules[transpose_p] = _transpose_batch, free


# -- squeeze, rev: their axes params move up by one under vmap ---------------------------------------
def _axes_batch(p):
    """squeeze, rev: the axes params move up by one."""
    def rule(args, dims, *, dimensions):
        nd = aval_of(args[0]).ndim - 1
        return p.bind(args[0], dimensions=tuple(d % nd + 1 for d in dimensions)), 0
    return rule


def _squeeze_rule(x: ShapedArray, *, dimensions):
    dims = check_axes(dimensions, x.ndim, "squeeze")
    for d in dims:
        if not is_one(x.shape[d]):
            raise SprueValueError(f"squeeze: axis {d} of {x.str_short()} has size {x.shape[d]}, not 1"
                                  f"{'' if isinstance(x.shape[d], int) else ' (a size known only at run time)'}")
    return x.update(shape=tuple(s for i, s in enumerate(x.shape) if i not in dims))


squeeze_p = define("squeeze", _squeeze_rule, lambda x, *, dimensions: np.squeeze(x, tuple(dimensions)))


def squeeze(x, dimensions):
    return squeeze_p.bind(x, dimensions=tuple(dimensions))


def _squeeze_vjp(cts, primals, outs, *, dimensions):
    return [reshape(cts[0], aval_of(primals[0]).shape)]


jvp_rules[squeeze_p], vjp_rules[squeeze_p] = jvp_linear_in_first(squeeze_p), _squeeze_vjp
batch_rules[squeeze_p], cost_rules[squeeze_p] = _axes_batch(squeeze_p), free


def _rev_rule(x: ShapedArray, *, dimensions):
    check_axes(dimensions, x.ndim, "rev")
    return x


rev_p = define("rev", _rev_rule, lambda x, *, dimensions: np.flip(x, tuple(dimensions)) if dimensions else x)


def rev(x, dimensions):
    return rev_p.bind(x, dimensions=tuple(dimensions))


jvp_rules[rev_p], batch_rules[rev_p] = jvp_linear_in_first(rev_p), _axes_batch(rev_p)
vjp_rules[rev_p] = lambda cts, primals, outs, *, dimensions: [rev_p.bind(cts[0], dimensions=dimensions)]
cost_rules[rev_p] = free


# -- iota: its only operands are sizes ---------------------------------------------------------------
def _iota_rule(*, dtype, shape, dimension, sharding=None):
    if not 0 <= dimension < len(shape):
        raise SprueValueError(f"iota: dimension {dimension} out of bounds for shape {tuple(shape)}")
    return ShapedArray(tuple(shape), dtypes.canonicalize(dtype))


def _iota_impl(*, dtype, shape, dimension, sharding=None):
    r = np.arange(shape[dimension], dtype=dtype)
    return np.broadcast_to(r.reshape([-1 if i == dimension else 1 for i in range(len(shape))]), shape).copy()


iota_p = define("iota", _iota_rule, _iota_impl)
dynamic_dim_params[iota_p] = "shape"


def iota(dtype, size):
    return broadcasted_iota(dtype, (size,), 0)


def broadcasted_iota(dtype, shape, dimension: int):
    shape, sizes = _split_dims(shape)
    return iota_p.bind(*sizes, dtype=dtypes.canonicalize(dtype), shape=shape, dimension=dimension, sharding=None)


def _iota_jvp(primals, tangents, **params):
    out = iota_p.bind(*primals, **params)
    return out, zero_of(out)


def _iota_batch(args, dims, **params):
    _sizes_unbatched(iota_p, dims, 0)


jvp_rules[iota_p], batch_rules[iota_p] = _iota_jvp, _iota_batch
vjp_rules[iota_p] = lambda cts, primals, outs, **params: [None] * len(primals)
cost_rules[iota_p] = free


# -- copy --------------------------------------------------------------------------------------------
copy_p = define("copy", lambda x: x, lambda x: x.copy())
jvp_rules[copy_p], batch_rules[copy_p] = jvp_linear_in_first(copy_p), lambda args, dims: (copy_p.bind(args[0]), 0)
vjp_rules[copy_p] = lambda cts, primals, outs: [copy_p.bind(cts[0])]
cost_rules[copy_p] = free
