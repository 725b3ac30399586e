"""Shape-changing primitives: broadcast_in_dim, reshape, transpose, squeeze, rev, concatenate,
pad, slice, dynamic_slice, dynamic_update_slice, iota, copy."""
from __future__ import annotations

import math

import numpy as np

from sprue.base import dtypes
from sprue.ir.core import ShapedArray, dynamic_dim_params
from sprue.ir.shapes import format_dim, lower_bound, prove_equal
from sprue.base.errors import SprueTypeError, SprueValueError
from sprue.lax._rules import (check_axes, define, fits, is_one, require_equal, same_dtypes, shapes_equal,
    surely_less)


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
from sprue.interp.ad_util import (Zero, aval_of, batch_rules, cost_rules, defjvp_linear, instantiate, is_zero,
    jvp_linear_in_first, jvp_rules, resolved, vjp_rules, zero_of, zeros_like)
from sprue.interp.batching import batch_size, batched_all, broadcast_batch  # noqa: E402
from sprue.interp.cost import free  # noqa: E402


def _broadcast_in_dim_vjp(cts, primals, outs, **params):
    from sprue import lax
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
    from sprue import lax
    from sprue.base.errors import UnsupportedError
    if any(d is not None for d in dims[1:]):
        raise UnsupportedError("not batchable: broadcast_in_dim to a size that differs between batch elements")
    (x,), rp = resolved(broadcast_in_dim_p, args, params)
    size = aval_of(x).shape[0]
    out = lax.broadcast_in_dim(x, (size, *rp["shape"]), (0, *(d + 1 for d in rp["broadcast_dimensions"])))
    return out, 0


jvp_rules[broadcast_in_dim_p] = jvp_linear_in_first(broadcast_in_dim_p)
vjp_rules[broadcast_in_dim_p] = _broadcast_in_dim_vjp
batch_rules[broadcast_in_dim_p] = _broadcast_in_dim_batch
cost_rules[broadcast_in_dim_p] = free


# -- helpers: windows of an array whose sizes may be known only at run time ----------------------
def _static(*dims) -> bool:
    return all(isinstance(d, (int, np.integer)) for d in dims)


def _start_value(s):
    """A start index (an int or a DimExpr) as an i64 operand."""
    from sprue.trace.tracing import dim_value
    v = dim_value(s) if not isinstance(s, (int, np.integer)) else int(s)
    return np.int64(v) if isinstance(v, int) else v


def _zero(x):
    return np.zeros((), aval_of(x).dtype)


def _window(x, starts, sizes, strides=None):
    """Elements starts[a] + j * strides[a], j < sizes[a], of every axis a: a lax.slice when every
    size is static, else (no DimExpr may appear in a static param) a dynamic_slice of spans
    sizes * strides from x padded by strides - 1, reshaped to pick every stride-th element."""
    from sprue import lax
    shape = aval_of(x).shape
    strides = tuple(strides or (1,) * len(shape))
    if _static(*shape, *starts, *sizes):
        limits = [s + (n - 1) * k + 1 if n else s for s, n, k in zip(starts, sizes, strides)]
        return lax.slice(x, starts, limits, strides if any(k != 1 for k in strides) else None)
    strided = any(k != 1 for k in strides)
    if strided:
        x = lax.pad(x, _zero(x), [(0, k - 1, 0) for k in strides])
    spans = [n * k for n, k in zip(sizes, strides)]
    everything = all(isinstance(s, int) and s == 0 for s in starts) and shapes_equal(spans, aval_of(x).shape)
    y = x if everything else lax.bind_dynamic_slice(x, [_start_value(s) for s in starts], spans)
    if not strided:
        return y
    y = lax.reshape(y, [d for n, k in zip(sizes, strides) for d in (n, k)])
    y = lax.bind_dynamic_slice(y, [np.int64(0)] * (2 * len(sizes)), [d for n in sizes for d in (n, 1)])
    return lax.reshape(y, sizes)


def _unwindow(ct, shape, starts, strides=None):
    """The transpose of _window: ct placed at starts + j * strides in zeros of `shape`."""
    from sprue import lax
    sizes = aval_of(ct).shape
    strides = tuple(strides or (1,) * len(shape))
    if _static(*shape, *starts, *sizes):
        return lax.pad(ct, _zero(ct), [(s, d - s - ((n - 1) * k + 1 if n else 0), k - 1)
                                       for d, s, n, k in zip(shape, starts, sizes, strides)])
    strided = any(k != 1 for k in strides)
    if strided:  # every element followed by stride - 1 zeros
        ct = lax.reshape(ct, [d for n in sizes for d in (n, 1)])
        ct = lax.pad(ct, _zero(ct), [c for k in strides for c in ((0, 0, 0), (0, k - 1, 0))])
        ct = lax.reshape(ct, [n * k for n, k in zip(sizes, strides)])
    big = [d + k - 1 for d, k in zip(shape, strides)]
    if all(isinstance(s, int) and s == 0 for s in starts) and shapes_equal(aval_of(ct).shape, big):
        y = ct
    else:
        y = lax.bind_dynamic_update_slice(instantiate(Zero(aval_of(ct).update(shape=tuple(big)))), ct,
                                          [_start_value(s) for s in starts])
    return lax.bind_dynamic_slice(y, [np.int64(0)] * len(shape), shape) if strided else y


def _i64(i):
    from sprue import lax
    return i if aval_of(i).dtype == np.int64 else lax.convert_element_type(i, np.int64)


def _index_columns(idx, idims, size, with_batch: bool):
    """The start indices of a batch of windows as an i64[size, k] (the batch index first when
    with_batch); unbatched indices are broadcast."""
    from sprue import lax
    cols = [lax.broadcasted_iota(np.int64, (size, 1), 0)] if with_batch else []
    for i, d in zip(idx, idims):
        cols.append(lax.broadcast_in_dim(_i64(i), (size, 1), (0,) if d is not None else ()))
    return cols[0] if len(cols) == 1 else lax.concatenate(cols, 1)


def _sizes_unbatched(p, dims, n_data):
    from sprue.base.errors import UnsupportedError
    if any(d is not None for d in dims[n_data:]):
        raise UnsupportedError(f"not batchable: {p.name} to a size that differs between batch elements"
                               f" (the size of an array cannot depend on the batch index)")


# -- reshape, transpose, squeeze, rev, copy ------------------------------------------------------
def _reshape_vjp(cts, primals, outs, **params):
    from sprue import lax
    return [lax.reshape(cts[0], aval_of(primals[0]).shape)] + [None] * (len(primals) - 1)


def _reshape_batch(args, dims, **params):
    from sprue import lax
    _sizes_unbatched(reshape_p, dims, 1)
    (x,), rp = resolved(reshape_p, args, params)
    return lax.reshape(x, (aval_of(x).shape[0], *rp["new_sizes"])), 0


def _transpose_vjp(cts, primals, outs, *, permutation):
    from sprue import lax
    return [lax.transpose(cts[0], tuple(int(i) for i in np.argsort(permutation)))]


def _transpose_batch(args, dims, *, permutation):
    from sprue import lax
    return lax.transpose(args[0], (0, *(p + 1 for p in permutation))), 0


def _axes_batch(p):
    """squeeze, rev: the axes params move up by one."""
    def rule(args, dims, *, dimensions):
        nd = aval_of(args[0]).ndim - 1
        return p.bind(args[0], dimensions=tuple(d % nd + 1 for d in dimensions)), 0
    return rule


def _squeeze_vjp(cts, primals, outs, *, dimensions):
    from sprue import lax
    return [lax.reshape(cts[0], aval_of(primals[0]).shape)]


jvp_rules[reshape_p], vjp_rules[reshape_p] = jvp_linear_in_first(reshape_p), _reshape_vjp
batch_rules[reshape_p] = _reshape_batch
jvp_rules[transpose_p], vjp_rules[transpose_p] = jvp_linear_in_first(transpose_p), _transpose_vjp
batch_rules[transpose_p] = _transpose_batch
jvp_rules[squeeze_p], vjp_rules[squeeze_p] = jvp_linear_in_first(squeeze_p), _squeeze_vjp
batch_rules[squeeze_p] = _axes_batch(squeeze_p)
jvp_rules[rev_p], batch_rules[rev_p] = jvp_linear_in_first(rev_p), _axes_batch(rev_p)
vjp_rules[rev_p] = lambda cts, primals, outs, *, dimensions: [rev_p.bind(cts[0], dimensions=dimensions)]
jvp_rules[copy_p], batch_rules[copy_p] = jvp_linear_in_first(copy_p), lambda args, dims: (copy_p.bind(args[0]), 0)
vjp_rules[copy_p] = lambda cts, primals, outs: [copy_p.bind(cts[0])]


# -- concatenate, pad, slice ---------------------------------------------------------------------
def _concatenate_jvp(primals, tangents, *, dimension):
    out = concatenate_p.bind(*primals, dimension=dimension)
    if all(is_zero(t) for t in tangents):
        return out, zero_of(out)
    return out, concatenate_p.bind(*(instantiate(t, x) for t, x in zip(tangents, primals)), dimension=dimension)


def _concatenate_vjp(cts, primals, outs, *, dimension):
    ct, result, offset = cts[0], [], 0
    for x in primals:
        shape = aval_of(x).shape
        starts = [offset if a == dimension else 0 for a in range(len(shape))]
        result.append(lambda starts=starts, shape=shape: _window(ct, starts, shape))
        offset = offset + shape[dimension]
    return result


def _concatenate_batch(args, dims, *, dimension):
    return concatenate_p.bind(*batched_all(args, dims), dimension=dimension + 1), 0


def _pad_vjp(cts, primals, outs, *, padding_config):
    from sprue import lax
    (ct,), (x, v) = cts, primals
    cache = []

    def operand_ct():
        if not cache:  # undo the edges (a negative edge padded back with zeros), then the interior
            t = lax.pad(ct, _zero(ct), [(-lo, -hi, 0) for lo, hi, _ in padding_config])
            if any(i for _, _, i in padding_config):
                t = _window(t, [0] * len(padding_config), aval_of(x).shape, [i + 1 for _, _, i in padding_config])
            cache.append(t)
        return cache[0]

    def value_ct():
        every = tuple(range(aval_of(ct).ndim))
        return lax.sub(lax.reduce_sum(ct, every), lax.reduce_sum(operand_ct(), every))
    return [operand_ct, value_ct]


def _pad_batch(args, dims, *, padding_config):
    from sprue import lax
    x, v = args
    dx, dv = dims
    size = batch_size(args, dims)
    config = ((0, 0, 0), *padding_config)
    if dv is None:
        return pad_p.bind(x, v, padding_config=config), 0
    # a padding value per batch element: pad with zeros, then select it where the mask says
    x = x if dx is not None else broadcast_batch(x, size)
    shape = aval_of(x).shape
    padded = pad_p.bind(x, _zero(x), padding_config=config)
    inside = lax.broadcast_in_dim(np.bool_(True), shape, ())
    mask = pad_p.bind(inside, np.bool_(False), padding_config=config)
    fill = lax.broadcast_in_dim(v, aval_of(padded).shape, (0,))
    return lax.select(mask, padded, fill), 0


def _slice_vjp(cts, primals, outs, *, start_indices, limit_indices, strides=None):
    return [_unwindow(cts[0], aval_of(primals[0]).shape, start_indices, strides)]


def _slice_batch(args, dims, *, start_indices, limit_indices, strides=None):
    x = args[0]
    st = strides or (1,) * len(start_indices)
    sizes = [(l - s + k - 1) // k for s, l, k in zip(start_indices, limit_indices, st)]
    return _window(x, (0, *start_indices), (aval_of(x).shape[0], *sizes), (1, *st)), 0


jvp_rules[concatenate_p], vjp_rules[concatenate_p] = _concatenate_jvp, _concatenate_vjp
batch_rules[concatenate_p] = _concatenate_batch
defjvp_linear(pad_p)
vjp_rules[pad_p], batch_rules[pad_p] = _pad_vjp, _pad_batch
jvp_rules[slice_p], vjp_rules[slice_p], batch_rules[slice_p] = jvp_linear_in_first(slice_p), _slice_vjp, _slice_batch


# -- dynamic_slice, dynamic_update_slice ---------------------------------------------------------
def _dynamic_slice_vjp(cts, primals, outs, **params):
    from sprue import lax
    (x, *idx), _ = resolved(dynamic_slice_p, primals, params)
    return [lambda: lax.bind_dynamic_update_slice(zeros_like(x), cts[0], idx)] + [None] * (len(primals) - 1)


def _gather(operand, indices, dn, slice_sizes):
    from sprue import lax
    from sprue.lax.indexing import GatherScatterMode, gather_p
    param, sizes = lax._split_dims(slice_sizes)
    return gather_p.bind(operand, indices, *sizes, dimension_numbers=dn, slice_sizes=param, indices_are_sorted=False,
                         unique_indices=False, mode=GatherScatterMode.CLIP, fill_value=None)


def _dynamic_slice_batch(args, dims, **params):
    from sprue import lax
    from sprue.lax.indexing import GatherDimensionNumbers
    n = aval_of(args[0]).ndim - (dims[0] is not None)
    _sizes_unbatched(dynamic_slice_p, dims, 1 + n)
    (x, *idx), rp = resolved(dynamic_slice_p, args, params)
    sizes, size = rp["slice_sizes"], batch_size(args, dims)
    idims = dims[1:1 + n]
    if all(d is None for d in idims):
        zero = np.zeros((), aval_of(idx[0]).dtype) if idx else np.int64(0)
        return lax.bind_dynamic_slice(x, [zero, *idx], (size, *sizes)), 0
    # one window per batch element: a gather (clamped as dynamic_slice clamps its starts); an
    # unbatched operand is indexed by the starts alone, a batched one by (batch index, starts)
    batched_x = dims[0] is not None
    k = int(batched_x)
    dn = GatherDimensionNumbers(offset_dims=tuple(range(1, n + 1)), collapsed_slice_dims=(0,) if batched_x else (),
                                start_index_map=tuple(range(n + k)))
    indices = _index_columns(idx, idims, size, batched_x)
    return _gather(x, indices, dn, (1, *sizes) if batched_x else sizes), 0


def _dus_jvp(primals, tangents):
    x, u, *idx = primals
    out = dynamic_update_slice_p.bind(*primals)
    tx, tu = tangents[:2]
    if is_zero(tx) and is_zero(tu):
        return out, zero_of(out)
    return out, dynamic_update_slice_p.bind(instantiate(tx, x), instantiate(tu, u), *idx)


def _dus_vjp(cts, primals, outs):
    from sprue import lax
    (ct,), (x, u, *idx) = cts, primals
    return [lambda: lax.bind_dynamic_update_slice(ct, zeros_like(u), idx),
            lambda: lax.bind_dynamic_slice(ct, idx, aval_of(u).shape)] + [None] * len(idx)


def _dus_batch(args, dims):
    from sprue import lax
    from sprue.lax.indexing import GatherScatterMode, ScatterDimensionNumbers
    size = batch_size(args, dims)
    x, u, *idx = batched_all(args[:2], dims[:2], size) + list(args[2:])
    idims = dims[2:]
    if all(d is None for d in idims):
        zero = np.zeros((), aval_of(idx[0]).dtype) if idx else np.int64(0)
        return lax.bind_dynamic_update_slice(x, u, [zero, *idx]), 0
    # one window per batch element: a scatter (CLIP clamps the starts as dynamic_update_slice does)
    n = len(idx)
    dn = ScatterDimensionNumbers(update_window_dims=tuple(range(1, n + 1)), inserted_window_dims=(0,),
                                 scatter_dims_to_operand_dims=tuple(range(n + 1)))
    indices = _index_columns(idx, idims, size, True)
    return lax.scatter(x, indices, u, dn, mode=GatherScatterMode.CLIP), 0


jvp_rules[dynamic_slice_p], vjp_rules[dynamic_slice_p] = jvp_linear_in_first(dynamic_slice_p), _dynamic_slice_vjp
batch_rules[dynamic_slice_p] = _dynamic_slice_batch
jvp_rules[dynamic_update_slice_p], vjp_rules[dynamic_update_slice_p] = _dus_jvp, _dus_vjp
batch_rules[dynamic_update_slice_p] = _dus_batch


# -- iota: its only operands are sizes ------------------------------------------------------------
def _iota_jvp(primals, tangents, **params):
    out = iota_p.bind(*primals, **params)
    return out, zero_of(out)


def _iota_batch(args, dims, **params):
    _sizes_unbatched(iota_p, dims, 0)


jvp_rules[iota_p], batch_rules[iota_p] = _iota_jvp, _iota_batch
vjp_rules[iota_p] = lambda cts, primals, outs, **params: [None] * len(primals)

for _p in (reshape_p, transpose_p, squeeze_p, rev_p, concatenate_p, pad_p, slice_p, dynamic_slice_p,
           dynamic_update_slice_p, iota_p, copy_p):
    cost_rules[_p] = free
