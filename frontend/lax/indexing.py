"""gather and the scatter family (scatter, scatter-add, scatter-mul, scatter-min, scatter-max),
with XLA's dimension numbers. The index vector is the last axis of `indices`, as in JAX.

Out-of-bounds behaviour follows `mode`: CLIP (and PROMISE_IN_BOUNDS, which sprue treats as CLIP
so that no index ever reads outside an array) clamps each start index; FILL_OR_DROP makes gather
return `fill_value` for windows that do not fit and makes scatter skip them."""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..core import ShapedArray, dynamic_dim_params
from ..errors import SprueTypeError, SprueValueError
from ..shapes import format_dim
from ._rules import define, fits, is_one, require_equal, same_dtypes


class GatherScatterMode(enum.Enum):
    CLIP = 0
    FILL_OR_DROP = 1
    PROMISE_IN_BOUNDS = 2
    ONE_HOT = 3


class _PrintedLikeJax:
    """`Name(field=(...), ...)`, as JAX prints dimension numbers in jaxpr params."""

    def __str__(self):
        fields = ", ".join(f"{k}={tuple(getattr(self, k))}" for k in self.__dataclass_fields__)
        return f"{type(self).__name__}({fields})"


@dataclass(frozen=True)
class GatherDimensionNumbers(_PrintedLikeJax):
    offset_dims: tuple
    collapsed_slice_dims: tuple
    start_index_map: tuple
    operand_batching_dims: tuple = ()
    start_indices_batching_dims: tuple = ()



@dataclass(frozen=True)
class ScatterDimensionNumbers(_PrintedLikeJax):
    update_window_dims: tuple
    inserted_window_dims: tuple
    scatter_dims_to_operand_dims: tuple
    operand_batching_dims: tuple = ()
    scatter_indices_batching_dims: tuple = ()



def _check_indices(name, indices: ShapedArray, nmap: int):
    if not dtypes.is_int(indices.dtype):
        raise SprueTypeError(f"{name}: indices must be integers, got {indices.str_short()}")
    if indices.ndim == 0 or indices.shape[-1] != nmap:
        raise SprueValueError(f"{name}: the last axis of indices {indices.str_short()} must have size {nmap}")


def _gather_rule(operand: ShapedArray, indices: ShapedArray, *, dimension_numbers, slice_sizes,
                 indices_are_sorted=False, unique_indices=False, mode=None, fill_value=None):
    dn = dimension_numbers
    if dn.operand_batching_dims:
        raise SprueValueError("gather with operand_batching_dims is not supported yet")
    _check_indices("gather", indices, len(dn.start_index_map))
    # a window larger than its operand is an error, except in a gather of no windows at all (an
    # empty batch reads nothing: x[::2] of an f64[n] is a gather of (n+1)//2 windows, 0 when n is 0)
    empty = any(isinstance(b, int) and b == 0 for b in indices.shape[:-1])
    if len(slice_sizes) != operand.ndim or (not empty and any(not fits(s, d) for s, d in zip(slice_sizes, operand.shape))):
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


def default_fill(dtype):
    dtype = np.dtype(dtype)
    if dtypes.is_float(dtype):
        return np.nan
    if dtypes.is_bool(dtype):
        return True
    return np.iinfo(dtype).min if dtypes.is_signed(dtype) else np.iinfo(dtype).max


def _window_starts(operand_shape, window_shape, starts, mode):
    """Clamped starts (CLIP) and, for FILL_OR_DROP, a mask of the windows that fit."""
    limit = np.asarray(operand_shape) - np.asarray(window_shape)
    fits = np.all((starts >= 0) & (starts <= limit), axis=-1)
    clamped = np.clip(starts, 0, np.maximum(limit, 0))
    return clamped, fits


def _gather_impl(operand, indices, *, dimension_numbers, slice_sizes, indices_are_sorted=False,
                 unique_indices=False, mode=None, fill_value=None):
    dn = dimension_numbers
    batch_shape = indices.shape[:-1]
    R = operand.ndim
    starts = np.zeros(batch_shape + (R,), np.int64)
    for k, d in enumerate(dn.start_index_map):
        starts[..., d] = indices[..., k]
    starts, fits = _window_starts(operand.shape, slice_sizes, starts, mode)
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


def _scatter_rule(name):
    def rule(operand: ShapedArray, indices: ShapedArray, updates: ShapedArray, *, dimension_numbers,
             indices_are_sorted=False, unique_indices=False, mode=None, update_jaxpr=None, update_consts=()):
        dn = dimension_numbers
        same_dtypes(name, operand, updates)
        if dn.operand_batching_dims:
            raise SprueValueError(f"{name} with operand_batching_dims is not supported yet")
        _check_indices(name, indices, len(dn.scatter_dims_to_operand_dims))
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
        clamped, fits = _window_starts(operand.shape, window_shape, starts, mode)
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


scatter_p = define("scatter", _scatter_rule("scatter"), _scatter_impl(_set))
scatter_add_p = define("scatter-add", _scatter_rule("scatter-add"), _scatter_impl(_ufunc_at(np.add, np.logical_or)))
scatter_mul_p = define("scatter-mul", _scatter_rule("scatter-mul"), _scatter_impl(_ufunc_at(np.multiply, np.logical_and)))
scatter_min_p = define("scatter-min", _scatter_rule("scatter-min"), _scatter_impl(_ufunc_at(np.minimum, np.minimum)))
scatter_max_p = define("scatter-max", _scatter_rule("scatter-max"), _scatter_impl(_ufunc_at(np.maximum, np.maximum)))
