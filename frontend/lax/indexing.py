"""Windows of an array: slice, dynamic_slice, dynamic_update_slice, concatenate, pad, gather, scatter
and scatter-add (with XLA's dimension numbers, dimension_numbers.py; the index vector is the last
axis of `indices`, as in JAX). One module because their rules use one another: the transpose of a
concatenate, pad or slice is a window of the cotangent (a dynamic_slice when sizes are known only at
run time), a batch of dynamic_slices a gather, a batch of gathers indexes with a concatenated batch
counter. scatter-mul/min/max, which nothing here needs, are in scatter_reductions.py. Each block is
one primitive's whole story: shape rule and numpy reference, the function that binds it, its jvp,
vjp, batching and cost rules (tables in sprue.interp.ad_util); the lowering is in
sprue.lowering.rules_structural and rules_indexing.

Out-of-bounds behaviour follows `mode`: CLIP (and PROMISE_IN_BOUNDS, treated as CLIP: no index
reads outside an array) clamps each start index; FILL_OR_DROP gathers `fill_value` for windows
that do not fit and scatters skip them. A gather over an empty axis reads nothing (zeros)."""
from __future__ import annotations

import builtins

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueTypeError, SprueValueError, UnsupportedError
from sprue.interp.ad_util import (
    Zero,
    aval_of,
    batch_rules,
    cost_rules,
    defjvp_linear,
    instantiate,
    is_zero,
    jvp_linear_in_first,
    jvp_rules,
    resolved,
    vjp_rules,
    zero_of,
    zeros_like,
)
from sprue.interp.batching import batch_size, batched_all, broadcast_batch, move_batch_axis
from sprue.interp.cost import free, numel
from sprue.ir.core import ShapedArray, dynamic_dim_params
from sprue.ir.shapes import format_dim, lower_bound
from sprue.lax._rules import define, fits, is_one, require_equal, same_dtypes, shapes_equal, surely_less
from sprue.lax.dimension_numbers import (
    GatherDimensionNumbers,
    GatherScatterMode,
    ScatterDimensionNumbers,
    check_indices,
    default_fill,
    gather_mode,
    scatter_mode,
    window_starts,
)
from sprue.lax.elementwise import bitwise_and, convert_element_type, eq, select, sub
from sprue.lax.structural import (
    _fmt,
    _sizes_unbatched,
    _split_dims,
    broadcast_in_dim,
    broadcasted_iota,
    reduce_sum,
    reshape,
)
from sprue.trace.tracing import dim_value

# sprue.lax re-exports these (the package imports * from this module)
__all__ = [
    "bind_dynamic_slice", "bind_dynamic_update_slice", "concatenate", "concatenate_p",
    "dynamic_slice_p", "dynamic_update_slice_p", "fits", "gather", "gather_p", "pad", "pad_p",
    "scatter", "scatter_add", "scatter_add_p", "scatter_p", "slice", "slice_p"
]


# == windows of an array whose sizes may be known only at run time ===================================
def _static(*dims) -> bool:
    return all(isinstance(d, (int, np.integer)) for d in dims)


def _start_value(s):
    """A start index (an int or a DimExpr) as an i64 operand."""
    v = dim_value(s) if not isinstance(s, (int, np.integer)) else int(s)
    return np.int64(v) if isinstance(v, int) else v


def _zero(x):
    return np.zeros((), aval_of(x).dtype)


def _window(x, starts, sizes, strides=None):
    """Elements starts[a] + j * strides[a], j < sizes[a], of every axis a: a lax.slice when every
    size is static, else (no DimExpr may appear in a static param) a dynamic_slice of spans
    sizes * strides from x padded by strides - 1, reshaped to pick every stride-th element."""
    shape = aval_of(x).shape
    strides = tuple(strides or (1,) * len(shape))
    if _static(*shape, *starts, *sizes):
        limits = [s + (n - 1) * k + 1 if n else s for s, n, k in zip(starts, sizes, strides)]
        return slice(x, starts, limits, strides if any(k != 1 for k in strides) else None)
    strided = any(k != 1 for k in strides)
    if strided:
        x = pad(x, _zero(x), [(0, k - 1, 0) for k in strides])
    spans = [n * k for n, k in zip(sizes, strides)]
    everything = all(isinstance(s, int) and s == 0 for s in starts) and shapes_equal(spans, aval_of(x).shape)
    y = x if everything else bind_dynamic_slice(x, [_start_value(s) for s in starts], spans)
    if not strided:
        return y
    y = reshape(y, [d for n, k in zip(sizes, strides) for d in (n, k)])
    y = bind_dynamic_slice(y, [np.int64(0)] * (2 * len(sizes)), [d for n in sizes for d in (n, 1)])
    return reshape(y, sizes)


def _unwindow(ct, shape, starts, strides=None):
    """The transpose of _window: ct placed at starts + j * strides in zeros of `shape`."""
    sizes = aval_of(ct).shape
    strides = tuple(strides or (1,) * len(shape))
    if _static(*shape, *starts, *sizes):
        return pad(ct, _zero(ct), [(s, d - s - ((n - 1) * k + 1 if n else 0), k - 1)
                                   for d, s, n, k in zip(shape, starts, sizes, strides)])
    strided = any(k != 1 for k in strides)
    if strided:  # every element followed by stride - 1 zeros
        ct = reshape(ct, [d for n in sizes for d in (n, 1)])
        ct = pad(ct, _zero(ct), [c for k in strides for c in ((0, 0, 0), (0, k - 1, 0))])
        ct = reshape(ct, [n * k for n, k in zip(sizes, strides)])
    big = [d + k - 1 for d, k in zip(shape, strides)]
    if all(isinstance(s, int) and s == 0 for s in starts) and shapes_equal(aval_of(ct).shape, big):
        y = ct
    else:
        y = bind_dynamic_update_slice(instantiate(Zero(aval_of(ct).update(shape=tuple(big)))), ct,
                                      [_start_value(s) for s in starts])
    return bind_dynamic_slice(y, [np.int64(0)] * len(shape), shape) if strided else y


# -- slice ---------------------------------------------------------------------------------------------
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
    tuple(builtins.slice(s, l, st) for s, l, st in zip(start_indices, limit_indices, strides or (1,) * x.ndim))])


def slice(x, start_indices, limit_indices, strides=None):
    return slice_p.bind(x, start_indices=tuple(start_indices), limit_indices=tuple(limit_indices),
                        strides=None if strides is None else tuple(strides))


def _slice_vjp(cts, primals, outs, *, start_indices, limit_indices, strides=None):
    return [_unwindow(cts[0], aval_of(primals[0]).shape, start_indices, strides)]


def _slice_batch(args, dims, *, start_indices, limit_indices, strides=None):
    x = args[0]
    st = strides or (1,) * len(start_indices)
    sizes = [(l - s + k - 1) // k for s, l, k in zip(start_indices, limit_indices, st)]
    return _window(x, (0, *start_indices), (aval_of(x).shape[0], *sizes), (1, *st)), 0


jvp_rules[slice_p], vjp_rules[slice_p], batch_rules[slice_p] = jvp_linear_in_first(slice_p), _slice_vjp, _slice_batch
cost_rules[slice_p] = free


# -- dynamic_slice, dynamic_update_slice: starts clamped into range ------------------------------------
def _index_scalars(name: str, x: ShapedArray, idx):
    if len(idx) != x.ndim:
        raise SprueValueError(f"{name}: needs {x.ndim} start indices, got {len(idx)}")
    for i in idx:
        if i.ndim or not dtypes.is_int(i.dtype):
            raise SprueTypeError(f"{name}: start indices must be integer scalars, got {i.str_short()}")


def _clamped_starts(shape, sizes, idx):
    return [int(np.clip(int(i), 0, d - s)) for i, d, s in zip(idx, shape, sizes)]


def _i64(i):
    return i if aval_of(i).dtype == np.int64 else convert_element_type(i, np.int64)


def _index_columns(idx, idims, size, with_batch: bool):
    """The start indices of a batch of windows as an i64[size, k] (the batch index first when
    with_batch); unbatched indices are broadcast."""
    cols = [broadcasted_iota(np.int64, (size, 1), 0)] if with_batch else []
    for i, d in zip(idx, idims):
        cols.append(broadcast_in_dim(_i64(i), (size, 1), (0,) if d is not None else ()))
    return cols[0] if len(cols) == 1 else concatenate(cols, 1)


def _dynamic_slice_rule(x: ShapedArray, *idx: ShapedArray, slice_sizes):
    _index_scalars("dynamic_slice", x, idx)
    if len(slice_sizes) != x.ndim or any(not fits(s, d) for s, d in zip(slice_sizes, x.shape)):
        raise SprueValueError(f"dynamic_slice: slice_sizes {_fmt(slice_sizes)} do not fit {x.str_short()}")
    return x.update(shape=tuple(slice_sizes))


def _dynamic_slice_impl(x, *idx, slice_sizes):
    st = _clamped_starts(x.shape, slice_sizes, idx)
    return x[tuple(builtins.slice(s, s + n) for s, n in zip(st, slice_sizes))]


dynamic_slice_p = define("dynamic_slice", _dynamic_slice_rule, _dynamic_slice_impl)
dynamic_dim_params[dynamic_slice_p] = "slice_sizes"


def bind_dynamic_slice(x, start_indices, slice_sizes):
    """The dynamic_slice primitive itself: its sizes must provably fit the operand. (sprue.lax.dynamic_slice
    is the checked form, for sizes known only at run time.)"""
    slice_sizes, sizes = _split_dims(slice_sizes)
    return dynamic_slice_p.bind(x, *start_indices, *sizes, slice_sizes=slice_sizes)


def _dynamic_slice_vjp(cts, primals, outs, **params):
    (x, *idx), _ = resolved(dynamic_slice_p, primals, params)
    return [lambda: bind_dynamic_update_slice(zeros_like(x), cts[0], idx)] + [None] * (len(primals) - 1)


def _dynamic_slice_batch(args, dims, **params):
    n = aval_of(args[0]).ndim - (dims[0] is not None)
    _sizes_unbatched(dynamic_slice_p, dims, 1 + n)
    (x, *idx), rp = resolved(dynamic_slice_p, args, params)
    sizes, size = rp["slice_sizes"], batch_size(args, dims)
    idims = dims[1:1 + n]
    if all(d is None for d in idims):
        zero = np.zeros((), aval_of(idx[0]).dtype) if idx else np.int64(0)
        return bind_dynamic_slice(x, [zero, *idx], (size, *sizes)), 0
    # one window per batch element: a gather (clamped as dynamic_slice clamps its starts); an
    # unbatched operand is indexed by the starts alone, a batched one by (batch index, starts)
    batched_x = dims[0] is not None
    k = int(batched_x)
    dn = GatherDimensionNumbers(offset_dims=tuple(range(1, n + 1)), collapsed_slice_dims=(0,) if batched_x else (),
                                start_index_map=tuple(range(n + k)))
    indices = _index_columns(idx, idims, size, batched_x)
    return bind_gather(x, indices, dn, (1, *sizes) if batched_x else sizes, GatherScatterMode.CLIP), 0


jvp_rules[dynamic_slice_p], vjp_rules[dynamic_slice_p] = jvp_linear_in_first(dynamic_slice_p), _dynamic_slice_vjp
batch_rules[dynamic_slice_p], cost_rules[dynamic_slice_p] = _dynamic_slice_batch, free


def _dynamic_update_slice_rule(x: ShapedArray, u: ShapedArray, *idx: ShapedArray):
    same_dtypes("dynamic_update_slice", x, u)
    _index_scalars("dynamic_update_slice", x, idx)
    if u.ndim != x.ndim or any(not fits(a, b) for a, b in zip(u.shape, x.shape)):
        raise SprueValueError(f"dynamic_update_slice: update {u.str_short()} does not fit {x.str_short()}")
    return x


def _dynamic_update_slice_impl(x, u, *idx):
    st = _clamped_starts(x.shape, u.shape, idx)
    y = x.copy()
    y[tuple(builtins.slice(s, s + n) for s, n in zip(st, u.shape))] = u
    return y


dynamic_update_slice_p = define("dynamic_update_slice", _dynamic_update_slice_rule, _dynamic_update_slice_impl)


def bind_dynamic_update_slice(x, update, start_indices):
    """The dynamic_update_slice primitive itself: the update must provably fit the operand."""
    return dynamic_update_slice_p.bind(x, update, *start_indices)


def _dus_jvp(primals, tangents):
    x, u, *idx = primals
    out = dynamic_update_slice_p.bind(*primals)
    tx, tu = tangents[:2]
    if is_zero(tx) and is_zero(tu):
        return out, zero_of(out)
    return out, dynamic_update_slice_p.bind(instantiate(tx, x), instantiate(tu, u), *idx)


def _dus_vjp(cts, primals, outs):
    (ct,), (_, u, *idx) = cts, primals
    return [lambda: bind_dynamic_update_slice(ct, zeros_like(u), idx),
            lambda: bind_dynamic_slice(ct, idx, aval_of(u).shape)] + [None] * len(idx)


def _dus_batch(args, dims):
    size = batch_size(args, dims)
    x, u, *idx = batched_all(args[:2], dims[:2], size) + list(args[2:])
    idims = dims[2:]
    if all(d is None for d in idims):
        zero = np.zeros((), aval_of(idx[0]).dtype) if idx else np.int64(0)
        return bind_dynamic_update_slice(x, u, [zero, *idx]), 0
    # one window per batch element: a scatter (CLIP clamps the starts as dynamic_update_slice does)
    n = len(idx)
    dn = ScatterDimensionNumbers(update_window_dims=tuple(range(1, n + 1)), inserted_window_dims=(0,),
                                 scatter_dims_to_operand_dims=tuple(range(n + 1)))
    indices = _index_columns(idx, idims, size, True)
    return scatter(x, indices, u, dn, mode=GatherScatterMode.CLIP), 0


jvp_rules[dynamic_update_slice_p], vjp_rules[dynamic_update_slice_p] = _dus_jvp, _dus_vjp
batch_rules[dynamic_update_slice_p], cost_rules[dynamic_update_slice_p] = _dus_batch, free


# -- concatenate -----------------------------------------------------------------------------------------
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


def concatenate(xs, dimension: int):
    return concatenate_p.bind(*xs, dimension=dimension)


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


jvp_rules[concatenate_p], vjp_rules[concatenate_p] = _concatenate_jvp, _concatenate_vjp
batch_rules[concatenate_p], cost_rules[concatenate_p] = _concatenate_batch, free


# -- pad: edges (negative ones crop) and interior ----------------------------------------------------------
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
    y[tuple(builtins.slice(None, None, i + 1) for (_, _, i) in padding_config)] = x
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


def pad(x, padding_value, padding_config):
    return pad_p.bind(x, padding_value, padding_config=tuple(tuple(c) for c in padding_config))


def _pad_vjp(cts, primals, outs, *, padding_config):
    (ct,), (x, _) = cts, primals
    cache = []

    def operand_ct():
        if not cache:  # undo the edges (a negative edge padded back with zeros), then the interior
            t = pad(ct, _zero(ct), [(-lo, -hi, 0) for lo, hi, _ in padding_config])
            if any(i for _, _, i in padding_config):
                t = _window(t, [0] * len(padding_config), aval_of(x).shape, [i + 1 for _, _, i in padding_config])
            cache.append(t)
        return cache[0]

    def value_ct():
        every = tuple(range(aval_of(ct).ndim))
        return sub(reduce_sum(ct, every), reduce_sum(operand_ct(), every))
    return [operand_ct, value_ct]


def _pad_batch(args, dims, *, padding_config):
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
    inside = broadcast_in_dim(np.bool_(True), shape, ())
    mask = pad_p.bind(inside, np.bool_(False), padding_config=config)
    fill = broadcast_in_dim(v, aval_of(padded).shape, (0,))
    return select(mask, padded, fill), 0


defjvp_linear(pad_p)
vjp_rules[pad_p], batch_rules[pad_p], cost_rules[pad_p] = _pad_vjp, _pad_batch, free


# == gather and scatter ==================================================================================
# JAX's rules (jax/_src/lax/slicing.py), written as direct reverse-mode rules. A gather's cotangent
# is a scatter-add into zeros with the matching dimension numbers, a scatter-add's updates get a
# gather of the cotangent; the mode is kept (a gather's CLIP is a scatter's CLIP, and a scatter's
# FILL_OR_DROP is a gather's FILL_OR_DROP with fill value 0: dropped windows have no derivative).
def _zero_fill(x):
    return np.zeros((), aval_of(x).dtype)[()]


def _full(like, v, dtype=None):
    a = aval_of(like)
    c = np.array(v, a.dtype if dtype is None else dtype)[()]
    return broadcast_in_dim(c, a.shape, ()) if a.ndim else c


def _shift(dims, by=1) -> tuple:
    return tuple(d + by for d in dims)


def _with_batch_counter(indices):
    """Indices batched on axis 0 with the batch position prepended to each index vector."""
    ia = aval_of(indices)
    dt = ia.dtype if ia.dtype.itemsize == 8 else dtypes.int64
    if dt != ia.dtype:
        indices = convert_element_type(indices, dt)
    counts = broadcasted_iota(dt, (*ia.shape[:-1], 1), 0)
    return concatenate([counts, indices], ia.ndim - 1)


# -- gather ----------------------------------------------------------------------------------------------
def _gather_rule(operand: ShapedArray, indices: ShapedArray, *, dimension_numbers, slice_sizes,
                 indices_are_sorted=False, unique_indices=False, mode=None, fill_value=None):
    dn = dimension_numbers
    if dn.operand_batching_dims:
        raise SprueValueError("gather with operand_batching_dims is not supported yet")
    check_indices("gather", indices, len(dn.start_index_map))
    # a window larger than its operand is an error, except in a gather of no windows (x[::2] of an
    # f64[n] gathers (n+1)//2 windows, 0 when n is 0) and over an empty axis (x[idx] at n = 0)
    empty = any(isinstance(b, int) and b == 0 for b in indices.shape[:-1])
    if len(slice_sizes) != operand.ndim or (not empty and any(
            not fits(s, d) and d != 0 for s, d in zip(slice_sizes, operand.shape))):
        raise SprueValueError(f"gather: slice_sizes {tuple(format_dim(s) for s in slice_sizes)} do not fit"
                              f" {operand.str_short()}")
    for d in dn.collapsed_slice_dims:
        if not is_one(slice_sizes[d]):
            raise SprueValueError(f"gather: collapsed dimension {d} must have slice size 1")
    offset_sizes = [s for i, s in enumerate(slice_sizes) if i not in dn.collapsed_slice_dims]
    if len(offset_sizes) != len(dn.offset_dims):
        raise SprueValueError("gather: offset_dims do not match the non-collapsed slice dimensions")
    batch = list(indices.shape[:-1])
    rank = len(batch) + len(offset_sizes)
    shape, bi, oi = [], iter(batch), iter(offset_sizes)
    for i in range(rank):
        shape.append(next(oi) if i in dn.offset_dims else next(bi))
    return ShapedArray(tuple(shape), operand.dtype)


def _gather_impl(operand, indices, *, dimension_numbers, slice_sizes, indices_are_sorted=False,
                 unique_indices=False, mode=None, fill_value=None):
    dn = dimension_numbers
    batch_shape = indices.shape[:-1]
    R = operand.ndim
    starts = np.zeros(batch_shape + (R,), np.int64)
    for k, d in enumerate(dn.start_index_map):
        starts[..., d] = indices[..., k]
    starts, fits = window_starts(operand.shape, slice_sizes, starts, mode)
    nb = len(batch_shape)
    idx = []
    for d in range(R):
        shape = batch_shape + tuple(slice_sizes[i] if i == d else 1 for i in range(R))
        idx.append((starts[..., d].reshape(batch_shape + (1,) * R)
                    + np.arange(slice_sizes[d]).reshape((1,) * nb + tuple(-1 if i == d else 1 for i in range(R)))
                    ).reshape(shape) if operand.size else np.zeros(shape, np.int64))
    out = operand[tuple(idx)] if operand.size else np.zeros(batch_shape + tuple(slice_sizes), operand.dtype)
    if mode == GatherScatterMode.FILL_OR_DROP:
        fill = default_fill(operand.dtype) if fill_value is None else fill_value
        out = np.where(fits.reshape(batch_shape + (1,) * R), out, np.asarray(fill, operand.dtype))
    out = out.reshape(batch_shape + tuple(s for i, s in enumerate(slice_sizes) if i not in dn.collapsed_slice_dims))
    # place offset dims where offset_dims says, batch dims in the remaining positions
    rank = out.ndim
    batch_pos = [i for i in range(rank) if i not in dn.offset_dims]
    perm = [0] * rank
    for j, p in enumerate(batch_pos):
        perm[p] = j
    for j, p in enumerate(dn.offset_dims):
        perm[p] = nb + j
    return np.transpose(out, perm)


gather_p = define("gather", _gather_rule, _gather_impl)
# A window over a dimension known only at run time (taking rows of an f64[n,m]) has slice size
# None in the param and its value as a trailing operand, as for dynamic_slice.
dynamic_dim_params[gather_p] = "slice_sizes"


def gather(operand, indices, dimension_numbers, slice_sizes, mode=GatherScatterMode.CLIP, fill_value=None):
    return gather_p.bind(operand, indices, dimension_numbers=dimension_numbers, slice_sizes=tuple(slice_sizes),
                         indices_are_sorted=False, unique_indices=False, mode=mode, fill_value=fill_value)


def bind_gather(operand, indices, dn, slice_sizes, mode, fill_value=None, indices_are_sorted=False,
                unique_indices=False):
    """gather_p, with window sizes known only at run time passed as trailing operands."""
    param, sizes = _split_dims(slice_sizes)
    return gather_p.bind(operand, indices, *sizes, dimension_numbers=dn, slice_sizes=param,
                         indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
                         fill_value=fill_value)


def _gather_jvp(primals, tangents, **params):
    out = gather_p.bind(*primals, **params)
    if is_zero(tangents[0]):
        return out, zero_of(out)
    tparams = dict(params)
    if gather_mode(params.get("mode")) == GatherScatterMode.FILL_OR_DROP:
        tparams["fill_value"] = _zero_fill(out)  # the fill is a constant
    return out, gather_p.bind(tangents[0], *primals[1:], **tparams)


def _gather_vjp(cts, primals, outs, **params):
    (operand, indices), rp = resolved(gather_p, primals, params)

    def ct_operand():
        mode = gather_mode(rp.get("mode"))
        ct = instantiate(cts[0], outs[0])
        return bind_scatter(scatter_add_p, zeros_like(operand), indices, ct, _scatter_dn_of(rp["dimension_numbers"]),
                            mode, rp.get("indices_are_sorted", False), rp.get("unique_indices", False))
    return [ct_operand] + [None] * (len(primals) - 1)


def _gather_batch(args, dims, **params):
    (operand, indices), rp = resolved(gather_p, args, params)
    if any(d is not None for d in dims[2:]):
        raise UnsupportedError("not batchable: gather with a window size that differs between batch elements")
    dn, sizes = rp["dimension_numbers"], tuple(rp["slice_sizes"])
    size = batch_size(args, dims)
    common = dict(mode=rp.get("mode"), fill_value=rp.get("fill_value"))
    if dims[1] is None:  # a batched operand: the batch axis is one more window dimension
        bdn = GatherDimensionNumbers(offset_dims=(0, *_shift(dn.offset_dims)),
                                     collapsed_slice_dims=_shift(dn.collapsed_slice_dims),
                                     start_index_map=_shift(dn.start_index_map))
        return bind_gather(operand, indices, bdn, (size, *sizes), indices_are_sorted=rp.get("indices_are_sorted", False),
                           unique_indices=rp.get("unique_indices", False), **common), 0
    bdn = GatherDimensionNumbers(offset_dims=_shift(dn.offset_dims), collapsed_slice_dims=tuple(dn.collapsed_slice_dims),
                                 start_index_map=tuple(dn.start_index_map))
    if dims[0] is None:  # batched indices: one more batch dimension of the result
        return bind_gather(operand, indices, bdn, sizes, **common), 0
    # both: each batch element's index vector gets its position in the batch as a first component
    bdn = GatherDimensionNumbers(offset_dims=_shift(dn.offset_dims),
                                 collapsed_slice_dims=(0, *_shift(dn.collapsed_slice_dims)),
                                 start_index_map=(0, *_shift(dn.start_index_map)))
    return bind_gather(operand, _with_batch_counter(indices), bdn, (1, *sizes), **common), 0


jvp_rules[gather_p], vjp_rules[gather_p] = _gather_jvp, _gather_vjp
batch_rules[gather_p], cost_rules[gather_p] = _gather_batch, free


# -- the scatter family: shared definitions ---------------------------------------------------------------
def _scatter_rule(name):
    def rule(operand: ShapedArray, indices: ShapedArray, updates: ShapedArray, *, dimension_numbers,
             indices_are_sorted=False, unique_indices=False, mode=None, update_jaxpr=None, update_consts=()):
        dn = dimension_numbers
        same_dtypes(name, operand, updates)
        if dn.operand_batching_dims:
            raise SprueValueError(f"{name} with operand_batching_dims is not supported yet")
        check_indices(name, indices, len(dn.scatter_dims_to_operand_dims))
        n_scatter = updates.ndim - len(dn.update_window_dims)
        if n_scatter != indices.ndim - 1:
            raise SprueValueError(f"{name}: updates {updates.str_short()} do not match indices {indices.str_short()}")
        if len(dn.update_window_dims) + len(dn.inserted_window_dims) != operand.ndim:
            raise SprueValueError(f"{name}: window dimensions do not cover the operand {operand.str_short()}")
        scatter_sizes = [s for i, s in enumerate(updates.shape) if i not in dn.update_window_dims]
        if len(scatter_sizes) != indices.ndim - 1:
            raise SprueValueError(f"{name}: updates {updates.str_short()} do not match indices {indices.str_short()}")
        for u, i in zip(scatter_sizes, indices.shape[:-1]):
            require_equal(u, i, f"{name}: updates {updates.str_short()} do not match indices {indices.str_short()}")
        return operand
    return rule


def _scatter_impl(combine):
    def impl(operand, indices, updates, *, dimension_numbers, indices_are_sorted=False,
             unique_indices=False, mode=None, update_jaxpr=None, update_consts=()):
        dn = dimension_numbers
        R = operand.ndim
        out = operand.copy()
        if updates.size == 0:
            return out
        U = updates.shape
        scatter_pos = [d for d in range(len(U)) if d not in dn.update_window_dims]
        window_dims = [d for d in range(R) if d not in dn.inserted_window_dims]
        window_shape = [1] * R
        for od, ud in zip(window_dims, dn.update_window_dims):
            window_shape[od] = U[ud]
        grid = np.indices(U)                                     # (len(U), *U)
        batch_idx = tuple(grid[p] for p in scatter_pos)
        start_vec = indices[batch_idx] if scatter_pos else np.broadcast_to(indices, U + indices.shape[-1:])
        starts = np.zeros(U + (R,), np.int64)
        for k, d in enumerate(dn.scatter_dims_to_operand_dims):
            starts[..., d] = start_vec[..., k]
        clamped, fits = window_starts(operand.shape, window_shape, starts, mode)
        if mode == GatherScatterMode.CLIP or mode == GatherScatterMode.PROMISE_IN_BOUNDS:
            starts, fits = clamped, np.ones(U, bool)
        full = [starts[..., d] for d in range(R)]
        for od, ud in zip(window_dims, dn.update_window_dims):
            full[od] = full[od] + grid[ud]
        sel = tuple(f[fits] for f in full)
        combine(out, sel, updates[fits])
        return out
    return impl


def _set(out, sel, vals):
    out[sel] = vals


def _ufunc_at(uf, bool_uf):
    def combine(out, sel, vals):
        (bool_uf if out.dtype == bool else uf).at(out, sel, vals)
    return combine


def _scatterer(p):
    def f(operand, indices, updates, dimension_numbers, mode=GatherScatterMode.FILL_OR_DROP):
        return p.bind(operand, indices, updates, dimension_numbers=dimension_numbers, indices_are_sorted=False,
                      unique_indices=False, mode=mode, update_jaxpr=None, update_consts=())
    f.__name__ = p.name
    return f


def bind_scatter(p, operand, indices, updates, dn, mode, indices_are_sorted=False, unique_indices=False):
    return p.bind(operand, indices, updates, dimension_numbers=dn, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices, mode=mode, update_jaxpr=None, update_consts=())


def _scatter_dn_of(dn: GatherDimensionNumbers) -> ScatterDimensionNumbers:
    return ScatterDimensionNumbers(update_window_dims=tuple(dn.offset_dims),
                                   inserted_window_dims=tuple(dn.collapsed_slice_dims),
                                   scatter_dims_to_operand_dims=tuple(dn.start_index_map))


def _gather_of_scatter(dn: ScatterDimensionNumbers, operand, updates):
    """The gather reading what a scatter writes: (dimension numbers, slice sizes)."""
    gdn = GatherDimensionNumbers(offset_dims=tuple(dn.update_window_dims),
                                 collapsed_slice_dims=tuple(dn.inserted_window_dims),
                                 start_index_map=tuple(dn.scatter_dims_to_operand_dims))
    ushape, window = aval_of(updates).shape, iter(dn.update_window_dims)
    sizes = tuple(1 if d in dn.inserted_window_dims else ushape[next(window)] for d in range(aval_of(operand).ndim))
    return gdn, sizes


def _gather_back(x, operand, indices, updates, dn, mode, fill=None):
    """x (of the operand's shape) read at every place the scatter writes: of the updates' shape."""
    gdn, sizes = _gather_of_scatter(dn, operand, updates)
    return bind_gather(x, indices, gdn, sizes, mode, _zero_fill(x) if fill is None else fill)


def _scatter_operands(tangents, primals):
    """The operand and updates tangents as arrays (for rules linear in them)."""
    return instantiate(tangents[0], primals[0]), instantiate(tangents[2], primals[2])


def _scatter_linear_jvp(p):
    """scatter and scatter-add are linear in (operand, updates) jointly: the tangent is p applied to
    the tangents. (With repeated indices, scatter's tangent takes the same winning update.)"""
    def jvp(primals, tangents, **params):
        out = p.bind(*primals, **params)
        if is_zero(tangents[0]) and is_zero(tangents[2]):
            return out, zero_of(out)
        t_operand, t_updates = _scatter_operands(tangents, primals)
        return out, p.bind(t_operand, primals[1], t_updates, **params)
    return jvp


def _scatter_batch(p):
    """JAX's _scatter_batching_rule: the operand and updates get the batch axis (broadcast when
    unbatched); unbatched indices make it a window dimension, batched ones an extra index component."""
    def rule(args, dims, *, dimension_numbers, **params):
        operand, indices, updates = args
        size = batch_size(args, dims)
        operand = move_batch_axis(operand, dims[0], size)
        updates = move_batch_axis(updates, dims[2], size)
        dn = dimension_numbers
        if dims[1] is None:
            bdn = ScatterDimensionNumbers(update_window_dims=(0, *_shift(dn.update_window_dims)),
                                          inserted_window_dims=_shift(dn.inserted_window_dims),
                                          scatter_dims_to_operand_dims=_shift(dn.scatter_dims_to_operand_dims))
            return p.bind(operand, indices, updates, dimension_numbers=bdn, **params), 0
        bdn = ScatterDimensionNumbers(update_window_dims=_shift(dn.update_window_dims),
                                      inserted_window_dims=(0, *_shift(dn.inserted_window_dims)),
                                      scatter_dims_to_operand_dims=(0, *_shift(dn.scatter_dims_to_operand_dims)))
        params = {**params, "indices_are_sorted": False}
        return p.bind(operand, _with_batch_counter(indices), updates, dimension_numbers=bdn, **params), 0
    return rule


def _scatter_cost(in_avals, out_avals, **params):
    """One operation per element of the updates (an add, a multiply or a comparison)."""
    return numel(in_avals[2]) if dtypes.is_float(in_avals[2].dtype) else 0


def _scatter_primitive(name: str, combine):
    p = define(name, _scatter_rule(name), _scatter_impl(combine))
    batch_rules[p], cost_rules[p] = _scatter_batch(p), _scatter_cost
    return p


# -- scatter: the updates replace; with repeated indices one update wins each written element ----------
scatter_p = _scatter_primitive("scatter", _set)
scatter = _scatterer(scatter_p)


def _scatter_winners(operand, indices, updates, dn, mode):
    """Which update elements a scatter keeps: with repeated indices one update wins each written
    element. Each scatter dimension's position is scattered as an id and read back (JAX's unique-ids
    trick, one id per scatter dimension); None when nothing can collide."""
    ua = aval_of(updates)
    scatter_dims = [d for d in range(ua.ndim) if d not in dn.update_window_dims]
    if all(isinstance(ua.shape[d], int) and ua.shape[d] <= 1 for d in scatter_dims):
        return None
    won = None
    for d in scatter_dims:
        ids = broadcasted_iota(dtypes.int64, ua.shape, d)
        written = bind_scatter(scatter_p, _full(operand, -1, dtypes.int64), indices, ids, dn, mode)
        back = _gather_back(written, operand, indices, updates, dn, mode, fill=np.int64(-1))
        same = eq(back, ids)
        won = same if won is None else bitwise_and(won, same)
    return won


def _scatter_vjp(cts, primals, outs, *, dimension_numbers, mode=None, unique_indices=False, **params):
    operand, indices, updates = primals
    dn, smode = dimension_numbers, scatter_mode(mode)
    ct = instantiate(cts[0], outs[0])

    def ct_operand():  # the written places get no cotangent
        return bind_scatter(scatter_p, ct, indices, zeros_like(updates), dn, smode)

    def ct_updates():
        g = _gather_back(ct, operand, indices, updates, dn, smode)
        won = None if unique_indices else _scatter_winners(operand, indices, updates, dn, smode)
        return g if won is None else select(won, g, _full(g, 0))
    return [ct_operand, None, ct_updates]


jvp_rules[scatter_p], vjp_rules[scatter_p] = _scatter_linear_jvp(scatter_p), _scatter_vjp
cost_rules[scatter_p] = free


# -- scatter-add --------------------------------------------------------------------------------------------
scatter_add_p = _scatter_primitive("scatter-add", _ufunc_at(np.add, np.logical_or))
scatter_add = _scatterer(scatter_add_p)


def _scatter_add_vjp(cts, primals, outs, *, dimension_numbers, mode=None, **params):
    operand, indices, updates = primals
    ct = instantiate(cts[0], outs[0])
    return [ct, None, lambda: _gather_back(ct, operand, indices, updates, dimension_numbers, scatter_mode(mode))]


jvp_rules[scatter_add_p], vjp_rules[scatter_add_p] = _scatter_linear_jvp(scatter_add_p), _scatter_add_vjp
