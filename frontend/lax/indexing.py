"""gather and the scatter family (scatter, scatter-add, scatter-mul, scatter-min, scatter-max),
with XLA's dimension numbers. The index vector is the last axis of `indices`, as in JAX.

Out-of-bounds behaviour follows `mode`: CLIP (and PROMISE_IN_BOUNDS, which sprue treats as CLIP
so that no index ever reads outside an array) clamps each start index; FILL_OR_DROP makes gather
return `fill_value` for windows that do not fit and makes scatter skip them."""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from sprue.base import dtypes
from sprue.ir.core import ShapedArray, dynamic_dim_params
from sprue.base.errors import SprueTypeError, SprueValueError
from sprue.ir.shapes import format_dim
from sprue.lax._rules import define, fits, is_one, require_equal, same_dtypes


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


# == transformation rules (tables in sprue.ad_util): jvp, vjp, batching, cost =====================
# JAX's rules (jax/_src/lax/slicing.py), written as direct reverse-mode rules. A gather's cotangent
# is a scatter-add into zeros with the matching dimension numbers, a scatter-add's updates get a
# gather of the cotangent; the mode is kept (a gather's CLIP is a scatter's CLIP, and a scatter's
# FILL_OR_DROP is a gather's FILL_OR_DROP with fill value 0: dropped windows have no derivative).
from sprue.interp.ad_util import (aval_of, batch_rules, cost_rules, instantiate, is_zero, jvp_rules, resolved,
    vjp_rules, zero_of, zeros_like)
from sprue.interp.batching import batch_size, move_batch_axis  # noqa: E402
from sprue.interp.cost import free, numel  # noqa: E402
from sprue.base.errors import UnsupportedError  # noqa: E402

_MODE_NAMES = {"clip": GatherScatterMode.CLIP, "fill": GatherScatterMode.FILL_OR_DROP,
               "drop": GatherScatterMode.FILL_OR_DROP, "promise_in_bounds": GatherScatterMode.PROMISE_IN_BOUNDS}


def _mode(mode, default: GatherScatterMode) -> GatherScatterMode:
    """A mode param as the enum; None is what the reference rules do with None (gathers clamp,
    scatters drop)."""
    if mode is None:
        return default
    if isinstance(mode, str):
        return _MODE_NAMES[mode.lower()]
    return GatherScatterMode(mode)


def _gather_mode(mode) -> GatherScatterMode:
    return _mode(mode, GatherScatterMode.CLIP)


def _scatter_mode(mode) -> GatherScatterMode:
    return _mode(mode, GatherScatterMode.FILL_OR_DROP)


def _zero_fill(x):
    return np.zeros((), aval_of(x).dtype)[()]


def bind_gather(operand, indices, dn, slice_sizes, mode, fill_value=None, indices_are_sorted=False,
                unique_indices=False):
    """gather_p, with window sizes known only at run time passed as trailing operands."""
    from sprue import lax
    param, sizes = lax._split_dims(slice_sizes)
    return gather_p.bind(operand, indices, *sizes, dimension_numbers=dn, slice_sizes=param,
                         indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
                         fill_value=fill_value)


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


def _full(like, v, dtype=None):
    from sprue import lax
    a = aval_of(like)
    c = np.array(v, a.dtype if dtype is None else dtype)[()]
    return lax.broadcast_in_dim(c, a.shape, ()) if a.ndim else c


# -- gather -----------------------------------------------------------------------------------------------
def _gather_jvp(primals, tangents, **params):
    out = gather_p.bind(*primals, **params)
    if is_zero(tangents[0]):
        return out, zero_of(out)
    tparams = dict(params)
    if _gather_mode(params.get("mode")) == GatherScatterMode.FILL_OR_DROP:
        tparams["fill_value"] = _zero_fill(out)  # the fill is a constant
    return out, gather_p.bind(tangents[0], *primals[1:], **tparams)


def _gather_vjp(cts, primals, outs, **params):
    (operand, indices), rp = resolved(gather_p, primals, params)

    def ct_operand():
        mode = _gather_mode(rp.get("mode"))
        ct = instantiate(cts[0], outs[0])
        return bind_scatter(scatter_add_p, zeros_like(operand), indices, ct, _scatter_dn_of(rp["dimension_numbers"]),
                            mode, rp.get("indices_are_sorted", False), rp.get("unique_indices", False))
    return [ct_operand] + [None] * (len(primals) - 1)


def _shift(dims, by=1) -> tuple:
    return tuple(d + by for d in dims)


def _with_batch_counter(indices):
    """Indices batched on axis 0 with the batch position prepended to each index vector."""
    from sprue import lax
    ia = aval_of(indices)
    dt = ia.dtype if ia.dtype.itemsize == 8 else dtypes.int64
    if dt != ia.dtype:
        indices = lax.convert_element_type(indices, dt)
    counts = lax.broadcasted_iota(dt, (*ia.shape[:-1], 1), 0)
    return lax.concatenate([counts, indices], ia.ndim - 1)


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


# -- take_along_axis: a gather of one element per position (used by cummax/cummin's rules) -----------
def _along_axis_indices(idx, axis: int):
    from sprue import lax
    ia = aval_of(idx)
    nd, shape = ia.ndim, tuple(ia.shape)
    if ia.dtype != dtypes.int64:
        idx = lax.convert_element_type(idx, dtypes.int64)
    comps = [lax.broadcast_in_dim(idx, (*shape, 1), tuple(range(nd))) if d == axis
             else lax.broadcasted_iota(dtypes.int64, (*shape, 1), d) for d in range(nd)]
    return comps[0] if nd == 1 else lax.concatenate(comps, nd)


def _along_axis_dn(nd: int):
    every = tuple(range(nd))
    return GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=every, start_index_map=every)


def take_along_axis(x, idx, axis: int):
    """y[..., i, ...] = x[..., idx[..., i, ...], ...] along axis (idx of x's shape; clamped)."""
    nd = aval_of(x).ndim
    return bind_gather(x, _along_axis_indices(idx, axis), _along_axis_dn(nd), (1,) * nd, GatherScatterMode.CLIP)


def take_along_axis_transpose(ct, idx, axis: int):
    """The cotangent of x in take_along_axis(x, idx, axis) (x of ct's shape)."""
    nd = aval_of(ct).ndim
    return bind_scatter(scatter_add_p, zeros_like(ct), _along_axis_indices(idx, axis),
                        ct, _scatter_dn_of(_along_axis_dn(nd)), GatherScatterMode.CLIP)


# -- the scatter family ---------------------------------------------------------------------------------
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


def _scatter_add_vjp(cts, primals, outs, *, dimension_numbers, mode=None, **params):
    operand, indices, updates = primals
    ct = instantiate(cts[0], outs[0])
    return [ct, None, lambda: _gather_back(ct, operand, indices, updates, dimension_numbers, _scatter_mode(mode))]


def _scatter_winners(operand, indices, updates, dn, mode):
    """Which update elements a scatter keeps: with repeated indices one update wins each written
    element. Each scatter dimension's position is scattered as an id and read back (JAX's unique-ids
    trick, one id per scatter dimension); None when nothing can collide."""
    from sprue import lax
    ua = aval_of(updates)
    scatter_dims = [d for d in range(ua.ndim) if d not in dn.update_window_dims]
    if all(isinstance(ua.shape[d], int) and ua.shape[d] <= 1 for d in scatter_dims):
        return None
    won = None
    for d in scatter_dims:
        ids = lax.broadcasted_iota(dtypes.int64, ua.shape, d)
        written = bind_scatter(scatter_p, _full(operand, -1, dtypes.int64), indices, ids, dn, mode)
        back = _gather_back(written, operand, indices, updates, dn, mode, fill=np.int64(-1))
        same = lax.eq(back, ids)
        won = same if won is None else lax.bitwise_and(won, same)
    return won


def _scatter_vjp(cts, primals, outs, *, dimension_numbers, mode=None, unique_indices=False, **params):
    from sprue import lax
    operand, indices, updates = primals
    dn, smode = dimension_numbers, _scatter_mode(mode)
    ct = instantiate(cts[0], outs[0])

    def ct_operand():  # the written places get no cotangent
        return bind_scatter(scatter_p, ct, indices, zeros_like(updates), dn, smode)

    def ct_updates():
        g = _gather_back(ct, operand, indices, updates, dn, smode)
        won = None if unique_indices else _scatter_winners(operand, indices, updates, dn, smode)
        return g if won is None else lax.select(won, g, _full(g, 0))
    return [ct_operand, None, ct_updates]


# scatter-mul: out[e] = x[e] * prod_{p -> e} u_p. The updates' derivative is the product of the
# others (x[e] included): done as reduce_prod's, exact with zeros and repeated indices.
def _mul_others(operand, indices, updates, dn, mode):
    from sprue import lax
    z = lax.eq(updates, _zero_fill(updates))
    zero = _full(updates, 0)
    us = lax.select(z, _full(updates, 1), updates)
    nz = bind_scatter(scatter_add_p, zeros_like(operand), indices, lax.convert_element_type(z, aval_of(updates).dtype),
                      dn, mode)
    prod = bind_scatter(scatter_mul_p, operand, indices, us, dn, mode)
    nz, prod = (_gather_back(v, operand, indices, updates, dn, mode) for v in (nz, prod))
    at_zero = lax.select(lax.eq(nz, _full(nz, 1)), prod, zero)
    elsewhere = lax.select(lax.eq(nz, zero), lax.div(prod, us), zero)
    return lax.select(z, at_zero, elsewhere)


def _scatter_mul_jvp(primals, tangents, *, dimension_numbers, mode=None, **params):
    from sprue import lax
    operand, indices, updates = primals
    dn = dimension_numbers
    out = scatter_mul_p.bind(*primals, dimension_numbers=dn, mode=mode, **params)
    t = None
    if not is_zero(tangents[0]):
        t = scatter_mul_p.bind(tangents[0], indices, updates, dimension_numbers=dn, mode=mode, **params)
    if not is_zero(tangents[2]):
        smode = _scatter_mode(mode)
        tu = lax.mul(tangents[2], _mul_others(operand, indices, updates, dn, smode))
        tu = bind_scatter(scatter_add_p, zeros_like(operand), indices, tu, dn, smode)
        t = tu if t is None else lax.add(t, tu)
    return out, zero_of(out) if t is None else t


def _scatter_mul_vjp(cts, primals, outs, *, dimension_numbers, mode=None, **params):
    from sprue import lax
    operand, indices, updates = primals
    dn, smode = dimension_numbers, _scatter_mode(mode)
    ct = instantiate(cts[0], outs[0])
    return [lambda: scatter_mul_p.bind(ct, indices, updates, dimension_numbers=dn, mode=mode, **params), None,
            lambda: lax.mul(_gather_back(ct, operand, indices, updates, dn, smode),
                            _mul_others(operand, indices, updates, dn, smode))]


# scatter-min/max: the derivative of each written element goes to the contenders equal to the result
# (the operand's element and the updates written there), shared evenly among ties.
def _extremum_weights(operand, indices, updates, out, dn, mode):
    """(operand weights, updates weights, number of winners per element, never 0)."""
    from sprue import lax
    dt = aval_of(operand).dtype
    w_operand = lax.convert_element_type(lax.eq(operand, out), dt)
    nan = np.array(np.nan, dt)[()]  # dropped updates read NaN back: they never win
    w_updates = lax.convert_element_type(lax.eq(updates, _gather_back(out, operand, indices, updates, dn, mode, nan)), dt)
    count = lax.add(w_operand, bind_scatter(scatter_add_p, zeros_like(operand), indices, w_updates, dn, mode))
    count = lax.max(count, _full(count, 1))
    return w_operand, w_updates, count


def _scatter_extremum_ad(p):
    def jvp(primals, tangents, *, dimension_numbers, mode=None, **params):
        from sprue import lax
        operand, indices, updates = primals
        dn, smode = dimension_numbers, _scatter_mode(mode)
        out = p.bind(*primals, dimension_numbers=dn, mode=mode, **params)
        if is_zero(tangents[0]) and is_zero(tangents[2]):
            return out, zero_of(out)
        t_operand, t_updates = _scatter_operands(tangents, primals)
        wx, wu, count = _extremum_weights(operand, indices, updates, out, dn, smode)
        t = lax.add(lax.mul(wx, t_operand),
                    bind_scatter(scatter_add_p, zeros_like(operand), indices, lax.mul(wu, t_updates), dn, smode))
        return out, lax.div(t, count)

    def vjp(cts, primals, outs, *, dimension_numbers, mode=None, **params):
        from sprue import lax
        operand, indices, updates = primals
        dn, smode = dimension_numbers, _scatter_mode(mode)
        ct = instantiate(cts[0], outs[0])
        box = []

        def weights():
            if not box:
                wx, wu, count = _extremum_weights(operand, indices, updates, outs[0], dn, smode)
                box.append((wx, wu, lax.div(ct, count)))
            return box[0]

        return [lambda: lax.mul(weights()[2], weights()[0]), None,
                lambda: lax.mul(_gather_back(weights()[2], operand, indices, updates, dn, smode), weights()[1])]
    jvp_rules[p], vjp_rules[p] = jvp, vjp


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


jvp_rules[scatter_p], vjp_rules[scatter_p] = _scatter_linear_jvp(scatter_p), _scatter_vjp
jvp_rules[scatter_add_p], vjp_rules[scatter_add_p] = _scatter_linear_jvp(scatter_add_p), _scatter_add_vjp
jvp_rules[scatter_mul_p], vjp_rules[scatter_mul_p] = _scatter_mul_jvp, _scatter_mul_vjp
_scatter_extremum_ad(scatter_min_p)
_scatter_extremum_ad(scatter_max_p)
for _p in (scatter_p, scatter_add_p, scatter_mul_p, scatter_min_p, scatter_max_p):
    batch_rules[_p] = _scatter_batch(_p)
    cost_rules[_p] = _scatter_cost
cost_rules[scatter_p] = free
