"""Shape-changing primitives: broadcast_in_dim, reshape, transpose, squeeze, rev, concatenate,
pad, slice, dynamic_slice, dynamic_update_slice, iota, copy."""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..core import ShapedArray, dynamic_dim_params
from ..shapes import format_dim, lower_bound, prove_equal
from ..errors import SprueTypeError, SprueValueError
from ._rules import check_axes, define, fits, is_one, require_equal, same_dtypes, surely_less


def _fmt(shape) -> str:
    """A shape for messages: (3, n+1)."""
    return "(" + ", ".join(format_dim(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


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


def _transpose_rule(x: ShapedArray, *, permutation):
    perm = tuple(permutation)
    if sorted(perm) != list(range(x.ndim)):
        raise SprueValueError(f"transpose: {perm} is not a permutation of the axes of {x.str_short()}")
    return x.update(shape=tuple(x.shape[p] for p in perm))


transpose_p = define("transpose", _transpose_rule, lambda x, *, permutation: np.transpose(x, permutation))


def _squeeze_rule(x: ShapedArray, *, dimensions):
    dims = check_axes(dimensions, x.ndim, "squeeze")
    for d in dims:
        if not is_one(x.shape[d]):
            raise SprueValueError(f"squeeze: axis {d} of {x.str_short()} has size {x.shape[d]}, not 1"
                                  f"{'' if isinstance(x.shape[d], int) else ' (a size known only at run time)'}")
    return x.update(shape=tuple(s for i, s in enumerate(x.shape) if i not in dims))


squeeze_p = define("squeeze", _squeeze_rule, lambda x, *, dimensions: np.squeeze(x, tuple(dimensions)))


def _rev_rule(x: ShapedArray, *, dimensions):
    check_axes(dimensions, x.ndim, "rev")
    return x


rev_p = define("rev", _rev_rule, lambda x, *, dimensions: np.flip(x, tuple(dimensions)) if dimensions else x)


def _concatenate_rule(*xs: ShapedArray, dimension):
    if not xs:
        raise SprueValueError("concatenate needs at least one operand")
    same_dtypes("concatenate", *xs)
    r = xs[0].ndim
    if not 0 <= dimension < r:
        raise SprueValueError(f"concatenate: dimension {dimension} out of bounds for rank {r}")
    for x in xs:
        if x.ndim != r:
            raise SprueValueError("concatenate: operands must match except along the axis, got "
                                  + ", ".join(x.str_short() for x in xs))
        for i in range(r):
            if i != dimension:
                require_equal(xs[0].shape[i], x.shape[i], "concatenate: operands must match except along the"
                              " axis, got " + ", ".join(x.str_short() for x in xs))
    size = sum(x.shape[dimension] for x in xs)
    shape = list(xs[0].shape)
    shape[dimension] = size
    return xs[0].update(shape=tuple(shape), weak_type=all(x.weak_type for x in xs))


concatenate_p = define("concatenate", _concatenate_rule, lambda *xs, dimension: np.concatenate(xs, dimension))


def _pad_rule(x: ShapedArray, v: ShapedArray, *, padding_config):
    same_dtypes("pad", x, v)
    if v.ndim:
        raise SprueValueError("pad: padding value must be a scalar")
    if len(padding_config) != x.ndim:
        raise SprueValueError(f"pad: padding_config needs {x.ndim} entries")
    shape = []
    for d, (lo, hi, interior) in zip(x.shape, padding_config):
        if interior < 0:
            raise SprueValueError("pad: interior padding must be non-negative")
        if interior and not isinstance(d, int) and lower_bound(d - 1) < 0:
            # d + (d - 1) * interior for d >= 1, but 0 for d == 0: not a polynomial
            raise SprueValueError(f"pad: interior padding of a dimension {d} that may be 0 at run time")
        n = lo + hi + d + (max(d - 1, 0) if isinstance(d, int) else d - 1) * interior
        if surely_less(n, 0):
            raise SprueValueError(f"pad: negative resulting dimension {n}")
        shape.append(n)
    return x.update(shape=tuple(shape))


def _pad_impl(x, v, *, padding_config):
    # interior padding by strided placement, then edge padding (negative edges crop)
    shape = [d + max(d - 1, 0) * i for d, (_, _, i) in zip(x.shape, padding_config)]
    y = np.full(shape, v, x.dtype)
    y[tuple(slice(None, None, i + 1) for (_, _, i) in padding_config)] = x
    for ax, (lo, hi, _) in enumerate(padding_config):
        if lo < 0:
            y = np.take(y, range(-lo, y.shape[ax]), axis=ax)
        if hi < 0:
            y = np.take(y, range(0, y.shape[ax] + hi), axis=ax)
        widths = [(0, 0)] * y.ndim
        widths[ax] = (max(lo, 0), max(hi, 0))
        y = np.pad(y, widths, constant_values=v)
    return y


pad_p = define("pad", _pad_rule, _pad_impl)


def _slice_rule(x: ShapedArray, *, start_indices, limit_indices, strides=None):
    strides = strides or (1,) * x.ndim
    if not (len(start_indices) == len(limit_indices) == len(strides) == x.ndim):
        raise SprueValueError(f"slice: index lists must have length {x.ndim}")
    shape = []
    for d, s, l, st in zip(x.shape, start_indices, limit_indices, strides):
        # symbolic bounds (a limit of `n`, the end of a dimension n) are accepted unless provably wrong
        if not (fits(s, d) and fits(l, d) and not surely_less(l, s)) or st < 1:
            raise SprueValueError(f"slice: [{s}:{l}:{st}] is out of bounds for a dimension of size {d}")
        shape.append((l - s + st - 1) // st)
    return x.update(shape=tuple(shape))


slice_p = define("slice", _slice_rule, lambda x, *, start_indices, limit_indices, strides=None: x[
    tuple(slice(s, l, st) for s, l, st in zip(start_indices, limit_indices, strides or (1,) * x.ndim))])


def _index_scalars(name: str, x: ShapedArray, idx):
    if len(idx) != x.ndim:
        raise SprueValueError(f"{name}: needs {x.ndim} start indices, got {len(idx)}")
    for i in idx:
        if i.ndim or not dtypes.is_int(i.dtype):
            raise SprueTypeError(f"{name}: start indices must be integer scalars, got {i.str_short()}")


def _dynamic_slice_rule(x: ShapedArray, *idx: ShapedArray, slice_sizes):
    _index_scalars("dynamic_slice", x, idx)
    if len(slice_sizes) != x.ndim or any(not fits(s, d) for s, d in zip(slice_sizes, x.shape)):
        raise SprueValueError(f"dynamic_slice: slice_sizes {_fmt(slice_sizes)} do not fit {x.str_short()}")
    return x.update(shape=tuple(slice_sizes))


def _clamped_starts(shape, sizes, idx):
    return [int(np.clip(int(i), 0, d - s)) for i, d, s in zip(idx, shape, sizes)]


def _dynamic_slice_impl(x, *idx, slice_sizes):
    st = _clamped_starts(x.shape, slice_sizes, idx)
    return x[tuple(slice(s, s + n) for s, n in zip(st, slice_sizes))]


dynamic_slice_p = define("dynamic_slice", _dynamic_slice_rule, _dynamic_slice_impl)


def _dynamic_update_slice_rule(x: ShapedArray, u: ShapedArray, *idx: ShapedArray):
    same_dtypes("dynamic_update_slice", x, u)
    _index_scalars("dynamic_update_slice", x, idx)
    if u.ndim != x.ndim or any(not fits(a, b) for a, b in zip(u.shape, x.shape)):
        raise SprueValueError(f"dynamic_update_slice: update {u.str_short()} does not fit {x.str_short()}")
    return x


def _dynamic_update_slice_impl(x, u, *idx):
    st = _clamped_starts(x.shape, u.shape, idx)
    y = x.copy()
    y[tuple(slice(s, s + n) for s, n in zip(st, u.shape))] = u
    return y


dynamic_update_slice_p = define("dynamic_update_slice", _dynamic_update_slice_rule, _dynamic_update_slice_impl)


def _iota_rule(*, dtype, shape, dimension, sharding=None):
    if not 0 <= dimension < len(shape):
        raise SprueValueError(f"iota: dimension {dimension} out of bounds for shape {tuple(shape)}")
    return ShapedArray(tuple(shape), dtypes.canonicalize(dtype))


def _iota_impl(*, dtype, shape, dimension, sharding=None):
    r = np.arange(shape[dimension], dtype=dtype)
    return np.broadcast_to(r.reshape([-1 if i == dimension else 1 for i in range(len(shape))]), shape).copy()


iota_p = define("iota", _iota_rule, _iota_impl)

copy_p = define("copy", lambda x: x, lambda x: x.copy())


# Sizes known only at run time are None in these params, their values trailing operands.
dynamic_dim_params[broadcast_in_dim_p] = "shape"
dynamic_dim_params[reshape_p] = "new_sizes"
dynamic_dim_params[dynamic_slice_p] = "slice_sizes"
dynamic_dim_params[iota_p] = "shape"


# == transformation rules (tables in sprue.ad_util): jvp, vjp, batching, cost =====================
# Operands after the data operands are run-time sizes (dynamic_dim_params): they never have
# tangents or cotangents; `resolved` gives the params with those sizes filled in.
from ..ad_util import (aval_of, batch_rules, cost_rules, is_zero, jvp_rules, resolved, vjp_rules,  # noqa: E402
                       zero_of)
from ..cost import free  # noqa: E402


def _broadcast_in_dim_jvp(primals, tangents, **params):
    out = broadcast_in_dim_p.bind(*primals, **params)
    if is_zero(tangents[0]):
        return out, zero_of(out)
    return out, broadcast_in_dim_p.bind(tangents[0], *primals[1:], **params)


def _broadcast_in_dim_vjp(cts, primals, outs, **params):
    from .. import lax
    (x,), rp = resolved(broadcast_in_dim_p, primals, params)
    ct, xa = cts[0], aval_of(x)
    bd = rp["broadcast_dimensions"]
    shape = rp["shape"]
    summed = [d for d in range(len(shape)) if d not in bd]
    summed += [bd[i] for i in range(xa.ndim) if is_one(xa.shape[i]) and not is_one(shape[bd[i]])]
    r = lax.reduce_sum(ct, tuple(sorted(summed))) if summed else ct
    if aval_of(r).shape != xa.shape:
        r = lax.reshape(r, xa.shape)
    return [r] + [None] * (len(primals) - 1)


def _broadcast_in_dim_batch(args, dims, **params):
    from .. import lax
    from ..errors import UnsupportedError
    if any(d is not None for d in dims[1:]):
        raise UnsupportedError("not batchable: broadcast_in_dim to a size that differs between batch elements")
    (x,), rp = resolved(broadcast_in_dim_p, args, params)
    size = aval_of(x).shape[0]
    out = lax.broadcast_in_dim(x, (size, *rp["shape"]), (0, *(d + 1 for d in rp["broadcast_dimensions"])))
    return out, 0


jvp_rules[broadcast_in_dim_p] = _broadcast_in_dim_jvp
vjp_rules[broadcast_in_dim_p] = _broadcast_in_dim_vjp
batch_rules[broadcast_in_dim_p] = _broadcast_in_dim_batch
cost_rules[broadcast_in_dim_p] = free
