"""Indexing with numpy's rules: x[idx] and the functional updates x.at[idx].set/add/multiply/...

Basic indices (ints, slices, None, Ellipsis) lower to `slice` (+ `rev` for negative steps) and
`squeeze`; traced scalar ints to `dynamic_slice` (negative ones wrapped by a `select`). Integer
arrays (and static boolean masks, made integer with nonzero) lower to `gather` with numpy's
advanced-indexing layout: the broadcast index shape replaces the indexed axes when they are
adjacent, else goes first. Updates lower to scatter / scatter-add / -mul / -min / -max with the
same index analysis (mode FILL_OR_DROP, as JAX: traced out-of-bounds updates are dropped).
Static out-of-bounds indices raise IndexError as in numpy; traced ones are clamped by gather.

A traced boolean mask (x[x > 0], x[:, m], x[m, 1:]) has a result size only run time knows: the
basic entries apply first, then the `filter` primitive (sprue.lax.filtering) keeps the mask's
entries, its count a fresh dimension (_getitem_mask). nonzero, flatnonzero, argwhere, extract and
compress (_nonzero.py) are filters too. x.at[mask] updates with a traced mask are not
supported (jnp.where keeps the shape).

On axes whose size is known only at run time (and for traced slice bounds) see _slicing: the
bounds check becomes a run-time check, slices are dynamic_slice/gather with sizes computed from
the dims, and a gather through an axis that may be empty reads from the operand padded by one.
"""
from __future__ import annotations

import builtins
import math
import operator
from dataclasses import dataclass, field

import numpy as np

from sprue import lax
from sprue.base import dtypes, eager_array
from sprue.base.errors import ConcretizationError
from sprue.ir.shapes import DimExpr, format_dim, prove_equal
from sprue.lax import GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers
from sprue.numpy import _dims as _d
from sprue.numpy import _slicing
from sprue.numpy._avals import SprueIndexError, aval, const, describe, index_error, loc, type_error, value_error
from sprue.numpy._promote import (
    array,
    as_result,
    broadcast_shapes,
    broadcast_to,
    convert,
    nested_leaves,
    normalize_axis,
    operand,
    reshape,
)
from sprue.numpy._ufuncs import _funcs as F
from sprue.numpy._ufuncs import clip, power
from sprue.trace.tracing import Tracer

__all__ = ["getitem", "IndexUpdateHelper", "take", "take_along_axis", "put_along_axis"]


_INDEX_KINDS = ("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or boolean"
                " arrays are valid indices")

# -- the index, normalized --------------------------------------------------------------------------
# kinds: "none" (newaxis), "sep" (an Ellipsis of no dims), "slice" (static start, stop, step),
# "int" (static int), "dyn" (traced scalar int), "array" (an integer array, numpy or traced).
# "slice", "int", "dyn" and "array" each index one operand `dim`.


@dataclass
class _Entry:
    kind: str
    value: object = None
    dim: int = -1


def _mask_update_error():
    return ConcretizationError(
        "x.at[mask] updates with a traced boolean mask are not supported" + loc() + "; write"
        " jnp.where(mask, values, x) instead (it keeps the shape), or use integer indices")


def _mask_unsupported(why: str) -> SprueIndexError:
    return index_error(f"boolean-mask indexing with a traced mask {why} is not supported; supported are one"
                       f" mask combined with slices, ints, None and Ellipsis (x[mask], x[:, mask], x[mask, 1:]),"
                       f" or jnp.where(mask, x, fill) to keep the shape")


def _classify(item):
    if item is None:
        return _Entry("none")
    if item is Ellipsis:
        return _Entry("ellipsis")
    if isinstance(item, slice):
        return _classify_slice(item)
    if isinstance(item, (bool, np.bool_)):
        raise index_error("boolean scalar indices (x[True]) are not supported; use x[None] or jnp.where")
    if isinstance(item, (int, np.integer)):
        return _Entry("int", int(item))
    if isinstance(item, DimExpr):  # x[:, x.shape[1] - 1]: the size's run-time value, a traced int
        return _classify_tracer(_d.value(item))
    if isinstance(item, Tracer):
        return _classify_tracer(item)
    if isinstance(item, (list, tuple)):
        if any(isinstance(v, Tracer) for v in nested_leaves(item)):
            return _classify(array(item, fname="getitem"))
        item = np.asarray(item) if item else np.zeros((0,), np.int64)
    if isinstance(item, np.ndarray):
        return _classify_array(item)
    raise index_error(f"{_INDEX_KINDS}; got {type(item).__name__}")


def _classify_slice(item: slice) -> _Entry:
    parts = []
    for k, v in enumerate((item.start, item.stop, item.step)):
        if isinstance(v, Tracer) and k == 2:
            raise type_error("getitem", f"slice steps must be static ints, got a traced {v.aval.str_short()}")
        if isinstance(v, (Tracer, DimExpr)):  # a traced bound or a size: see _slicing
            if isinstance(v, Tracer) and (v.ndim or not dtypes.is_int(v.dtype)):
                raise index_error(f"slice indices must be integer scalars, got a traced {v.aval.str_short()}")
            parts.append(v)
            continue
        try:
            parts.append(None if v is None else operator.index(v))
        except TypeError:
            raise index_error(f"slice indices must be integers or None, got {type(v).__name__}") from None
    return _Entry("slice", slice(*parts))


def _classify_tracer(item: Tracer) -> _Entry:
    if dtypes.is_bool(item.dtype):
        if item.ndim == 0:
            raise index_error("boolean scalar indices (x[True]) are not supported; use x[None] or jnp.where")
        return _Entry("tmask", item)  # a traced mask: the result size is computed at run time (filter)
    if not dtypes.is_int(item.dtype):
        raise index_error(f"{_INDEX_KINDS}; got a traced {item.aval.str_short()}")
    return _Entry("dyn" if item.ndim == 0 else "array", item)


def _classify_array(item: np.ndarray) -> _Entry:
    if item.dtype == np.bool_:
        if item.ndim == 0:
            raise index_error("boolean scalar indices (x[True]) are not supported; use x[None] or jnp.where")
        return _Entry("mask", item)
    if not dtypes.is_int(item.dtype):
        raise index_error(f"{_INDEX_KINDS}; got an array of dtype {item.dtype}")
    return _Entry("int", int(item)) if item.ndim == 0 else _Entry("array", item)


def _normalize(shape, idx) -> list[_Entry]:
    """Entries with their operand dims: Ellipsis expanded, masks made integer arrays, missing
    trailing dims filled with full slices."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    entries = [_classify(i) for i in idx]
    if builtins.sum(e.kind == "ellipsis" for e in entries) > 1:
        raise index_error("an index can only have a single ellipsis ('...')")
    used = builtins.sum(e.value.ndim if e.kind in ("mask", "tmask") else 1 for e in entries
                        if e.kind not in ("none", "ellipsis"))
    if used > len(shape):
        raise index_error(f"too many indices for array: array is {len(shape)}-dimensional, but {used} were indexed")
    fill = [_Entry("slice", slice(None)) for _ in range(len(shape) - used)]
    if any(e.kind == "ellipsis" for e in entries):
        k = next(i for i, e in enumerate(entries) if e.kind == "ellipsis")
        # an empty Ellipsis still separates advanced indices (numpy puts their dims first)
        entries = entries[:k] + (fill or [_Entry("sep")]) + entries[k + 1:]
    else:
        entries = entries + fill
    out, dim = [], 0
    for e in entries:
        if e.kind in ("none", "sep"):
            out.append(e)
        elif e.kind == "mask":
            m = e.value
            for k in range(m.ndim):
                if isinstance(shape[dim + k], DimExpr):  # a static mask on an axis of run-time size
                    _d.check(_d.eq_value(shape[dim + k], m.shape[k]), f"sprue.numpy.getitem: boolean index did not"
                             f" match indexed array along axis {dim + k}; size of corresponding boolean axis is"
                             f" {m.shape[k]}{loc()}")
                elif m.shape[k] != shape[dim + k]:
                    raise index_error(f"boolean index did not match indexed array along axis {dim + k}; size of axis"
                                      f" is {shape[dim + k]} but size of corresponding boolean axis is {m.shape[k]}")
            for k, nz in enumerate(np.nonzero(m)):
                out.append(_Entry("array", nz.astype(np.int64), dim + k))
            dim += m.ndim
        elif e.kind == "tmask":
            e.value, e.dim = _fit_mask(e.value, shape, dim), dim
            out.append(e)
            dim += e.value.ndim
        else:
            e.dim = dim
            out.append(e)
            dim += 1
    return out


def _fit_mask(m, shape, dim: int):
    """A traced mask checked against the axes it indexes (numpy's IndexError when its shape provably
    differs, a run-time check when only run time can compare), with those axes' very sizes."""
    for k in range(m.ndim):
        n, d = shape[dim + k], aval(m).shape[k]
        same = prove_equal(d, n)
        if same:
            continue
        msg = (f"boolean index did not match indexed array along axis {dim + k}; size of axis is {format_dim(n)}"
               f" but size of corresponding boolean axis is {format_dim(d)}")
        if same is False:
            raise index_error(msg)
        _d.check(_d.eq_value(d, n), f"sprue.numpy.getitem: {msg}{loc()}", key=("mask", d, n))
        m = _d.cut_axis(m, k, n)  # clamped: never reads outside the mask, should the check fail
    return m


def _check_static(n, dim: int, values: np.ndarray):
    if isinstance(n, DimExpr):  # numpy's IndexError, checked at run time
        if values.size:
            hi, lo = int(values.max()), int(values.min())
            need = builtins.max(hi + 1, -lo)
            if _d.le(need, n) is not True:
                _d.check(lax.ge(_d.value(n), np.int64(need)), f"sprue.numpy.getitem: index {hi if hi + 1 >= -lo else lo}"
                         f" is out of bounds for axis {dim} with size {n}{loc()}", key=("inbounds", n, need))
        return
    bad = (values < -n) | (values >= n)
    if np.any(bad):
        v = int(np.asarray(values)[bad].flat[0])
        raise index_error(f"index {v} is out of bounds for axis {dim} with size {n}")


def _wrap_negative(i, n):
    """i, with negative values counted from the end: numpy arithmetic when static, else a select."""
    if isinstance(n, DimExpr):  # the size is a run-time value: select, even for static indices
        if not isinstance(i, Tracer):
            i = np.asarray(i)
            if not np.any(i < 0):
                return i
        dt = aval(i).dtype
        return lax.select(lax.lt(i, const(dt, 0)), lax.add(i, convert(_d.value(n), dt)), i)
    if isinstance(i, Tracer):
        zero, size = const(i.dtype, 0), const(i.dtype, n)
        return lax.select(lax.lt(i, zero), lax.add(i, size), i)
    i = np.asarray(i)
    return np.where(i < 0, i + n, i).astype(i.dtype)


# -- x[idx] ---------------------------------------------------------------------------------------
def getitem(x, idx, mode=None, fill_value=None):
    x = operand("getitem", x)
    shape = aval(x).shape
    entries = _normalize(shape, idx)
    if any(e.kind == "tmask" for e in entries):
        return as_result(_getitem_mask(x, entries))
    if mode is None and not any(e.kind == "array" for e in entries):
        return as_result(_basic(x, entries))
    fill_mode = mode in ("fill", "drop")
    # "clip": the gather clamps each index into its axis itself (CLIP), and from an axis that is
    # empty at run time reads nothing and gives zeros, so the indices are only wrapped (clamped
    # here too, into an operand padded by one, a PageRank step's gather of x[src] with a run-time n
    # ran 2x the static version's time: two clamps and a test against the padding per read)
    plan = _plan(shape, entries, check=mode is None, clamp="fill" if fill_mode else None)
    gmode = GatherScatterMode.FILL_OR_DROP if fill_mode else GatherScatterMode.CLIP
    if plan.indices is None:  # no index components: the whole array, with None dims
        return as_result(reshape(x, plan.out_shape))
    fill = None if fill_value is None else np.asarray(fill_value, aval(x).dtype)[()]
    dn = GatherDimensionNumbers(offset_dims=plan.offset_dims, collapsed_slice_dims=plan.collapsed,
                                start_index_map=plan.start_index_map)
    for d in plan.pad_dims:  # the clamped index of an axis that may be empty needs a target
        x = _d.pad_one(x, d)
    out = _d.gather(x, plan.indices, dn, plan.slice_sizes, mode=gmode, fill_value=fill)
    return as_result(reshape(out, plan.out_shape))


def _is_traced_mask(item) -> bool:
    return isinstance(item, Tracer) and dtypes.is_bool(item.dtype)


def _getitem_mask(x, entries):
    """x[idx] where idx holds one traced boolean mask (entry kind "tmask"), the other entries basic
    (slices, ints, None, Ellipsis). The basic entries apply first, the mask's axes kept whole; then
    `filter` keeps the entries of those axes (flattened into one) where the mask is true: a result
    axis of a fresh size, known at run time. It lands where numpy puts advanced-index dims: at the
    mask's place when the mask and the int indices (advanced too, next to an array index) are
    adjacent in the index, else first."""
    masks = [e for e in entries if e.kind == "tmask"]
    if len(masks) > 1:
        raise _mask_unsupported("used twice in one index")
    if any(e.kind == "array" for e in entries):
        raise _mask_unsupported("combined with integer-array (or static boolean) indices")
    me = masks[0]
    m, k = me.value, me.value.ndim
    basic = []
    for e in entries:
        basic += [_Entry("slice", slice(None), me.dim + i) for i in range(k)] if e is me else [e]
    y = _basic(x, basic)
    before = entries[:entries.index(me)]
    p = builtins.sum(e.kind in ("none", "slice") for e in before)   # where the mask's axes are in y
    adv = [i for i, e in enumerate(entries) if e.kind in ("tmask", "int", "dyn")]
    adjacent = adv == list(range(adv[0], adv[-1] + 1))
    ys = aval(y).shape
    if k != 1:  # the mask's axes as one (row-major, as nonzero orders the true entries)
        y = lax.reshape(y, ys[:p] + (math.prod(ys[p:p + k]),) + ys[p + k:])
        m = lax.reshape(m, (math.prod(aval(m).shape),))
    _, (out,) = lax.filter(m, y, axis=p)
    if not adjacent and p != 0:
        nd = aval(out).ndim
        out = lax.transpose(out, (p, *(i for i in range(nd) if i != p)))
    return out


def _slice_params(s: slice, n: int):
    """(start, limit, stride, reversed, size) of a static slice as a forward lax.slice."""
    start, stop, step = s.indices(n)
    size = len(range(start, stop, step))
    if size == 0:
        return 0, 0, 1, False, 0
    if step > 0:
        return start, start + (size - 1) * step + 1, step, False, size
    last = start + (size - 1) * step
    return last, start + 1, -step, True, size


def _is_full(s: slice) -> bool:
    return s.start is None and s.stop is None and s.step in (None, 1)


def _basic(x, entries):
    """Ints, slices, None and traced scalar ints: slice, dynamic_slice, squeeze, rev, reshape."""
    shape = aval(x).shape
    dynamic = _d.has_dynamic(shape)
    if any(e.kind in ("int", "dyn") and dynamic or e.kind == "slice" and not (_is_full(e.value) or (
            not dynamic and not _slicing.needs_dynamic(e.value, 0))) for e in entries):
        return _basic_dynamic(x, entries)
    starts, limits, strides, rev_dims, int_dims, dyn = [], [], [], [], [], []
    for e in entries:
        if e.kind in ("none", "sep"):
            continue
        n = shape[e.dim]
        if e.kind == "int":
            _check_static(n, e.dim, np.asarray(e.value))
            i = e.value % n if n else 0
            starts.append(i), limits.append(i + 1), strides.append(1)
            int_dims.append(e.dim)
        elif e.kind == "dyn":
            starts.append(0), limits.append(n), strides.append(1)
            int_dims.append(e.dim)
            dyn.append(e)
        else:
            st, lim, stride, rev, _ = _slice_params(e.value, n) if isinstance(n, int) else (0, n, 1, False, n)
            starts.append(st), limits.append(lim), strides.append(stride)
            if rev:
                rev_dims.append(e.dim)
    y = x
    if (tuple(starts), tuple(limits)) != ((0,) * len(shape), shape) or builtins.any(s != 1 for s in strides):
        y = lax.slice(y, starts, limits, strides if builtins.any(s != 1 for s in strides) else None)
    if dyn:
        if any(d == 0 for d in (shape[e.dim] for e in dyn)):
            raise index_error("index into an axis of size 0")
        idt = np.result_type(*[e.value.dtype for e in dyn])
        ys = aval(y).shape
        idx = [const(idt, 0)] * len(ys)
        for e in dyn:
            idx[e.dim] = _wrap_negative(convert(e.value, idt), ys[e.dim])
        y = lax.bind_dynamic_slice(y, idx, tuple(1 if any(e.dim == d for e in dyn) else s for d, s in enumerate(ys)))
    if int_dims:
        y = lax.squeeze(y, tuple(int_dims))
    if rev_dims:
        kept = [d for d in range(len(shape)) if d not in int_dims]
        y = lax.rev(y, tuple(kept.index(d) for d in rev_dims))
    return _with_new_axes(y, entries)


def _with_new_axes(y, entries):
    """y (the indexed result without None entries) reshaped with a size-1 axis per None entry."""
    out_shape, it = [], iter(aval(y).shape)
    for e in entries:
        if e.kind == "none":
            out_shape.append(1)
        elif e.kind == "slice":
            out_shape.append(next(it))
    return reshape(y, tuple(out_shape))


def _basic_dynamic(x, entries):
    """_basic for arrays with dimensions known only at run time, or slices with traced bounds: one
    axis at a time, from the last (so that removing an axis keeps the earlier axes' numbers)."""
    y = x
    for e in reversed([e for e in entries if e.kind in ("int", "dyn", "slice")]):
        shape = aval(y).shape
        n = shape[e.dim]
        if e.kind == "slice":  # lax.slice only on static shapes (its limits are static params)
            if _d.has_dynamic(shape) or _slicing.needs_dynamic(e.value, n):
                y = _slicing.slice_axis(y, e.dim, e.value) if not _is_full(e.value) else y
            elif not _is_full(e.value):
                y = _static_slice_axis(y, e.dim, e.value)
        elif isinstance(n, DimExpr):
            y = _slicing.index_axis(y, e.dim, e.value)
        else:
            y = _static_index_axis(y, e)
    return _with_new_axes(y, entries)


def _static_slice_axis(y, ax: int, s: slice):
    """A static slice of an axis of static size, the other axes whole."""
    shape = aval(y).shape
    st, lim, stride, rev, _ = _slice_params(s, shape[ax])
    y = lax.slice(y, tuple(st if i == ax else 0 for i in range(len(shape))),
                  tuple(lim if i == ax else d for i, d in enumerate(shape)),
                  tuple(stride if i == ax else 1 for i in range(len(shape))) if stride != 1 else None)
    return lax.rev(y, (ax,)) if rev else y


def _static_index_axis(y, e: _Entry):
    """An int or traced int index into an axis of static size, the axis removed."""
    shape = aval(y).shape
    n, ax = shape[e.dim], e.dim
    if e.kind == "int" and not _d.has_dynamic(shape):
        _check_static(n, ax, np.asarray(e.value))
        i = e.value % n if n else 0
        y = lax.slice(y, tuple(i if k == ax else 0 for k in range(len(shape))),
                      tuple(i + 1 if k == ax else d for k, d in enumerate(shape)))
    elif e.kind == "int":  # other axes have run-time sizes: a dynamic_slice, sizes as operands
        _check_static(n, ax, np.asarray(e.value))
        idx = [np.int64(0)] * len(shape)
        idx[ax] = np.int64(e.value % n if n else 0)
        y = lax.bind_dynamic_slice(y, idx, tuple(1 if k == ax else d for k, d in enumerate(shape)))
    else:
        if n == 0:
            raise index_error("index into an axis of size 0")
        idx = [const(e.value.dtype, 0)] * len(shape)
        idx[ax] = _wrap_negative(e.value, n)
        y = lax.bind_dynamic_slice(y, idx, tuple(1 if k == ax else d for k, d in enumerate(shape)))
    return lax.squeeze(y, (ax,))


# -- the gather/scatter plan -------------------------------------------------------------------------
@dataclass
class _Plan:
    indices: object                    # batch_shape + (n_components,) int64 index array, or None
    offset_dims: tuple                 # positions of window dims in the result (without None dims)
    collapsed: tuple                   # operand dims indexed by a scalar per batch element
    start_index_map: tuple             # operand dim of each index component
    slice_sizes: tuple
    result_shape: tuple                # the gather result / scatter updates shape (no None dims)
    out_shape: tuple                   # the indexed shape numpy reports (with None dims)
    components: list = field(default_factory=list)
    pad_dims: list = field(default_factory=list)  # axes of run-time size to pad by one (see _plan)


def _bcast_index(i, batch_shape, dims):
    """Index component i broadcast into batch_shape, its own axes going to batch positions `dims`."""
    if isinstance(i, Tracer):
        i = convert(i, dtypes.int64)
        for k, d in enumerate(dims):  # an axis only run time can compare with the batch: checked, resized
            if _d.needs_resize(aval(i).shape[k], batch_shape[d]):
                i = _d.resize_axis(i, k, batch_shape[d])
        return lax.broadcast_in_dim(i, batch_shape, tuple(dims))
    i = np.asarray(i, np.int64)
    if _d.has_dynamic(batch_shape):
        return lax.broadcast_in_dim(i, batch_shape, tuple(dims)) if i.ndim else \
            lax.broadcast_in_dim(np.int64(i), batch_shape, ())
    return np.broadcast_to(i.reshape([i.shape[dims.index(d)] if d in dims else 1 for d in range(len(batch_shape))]),
                           batch_shape)


def _index_shapes(arrays) -> tuple:
    """The broadcast shape of the index arrays (run-time checked where only run time can tell)."""
    arr_shapes = [tuple(aval(a).shape) if isinstance(a, Tracer) else tuple(np.shape(a)) for a in arrays]
    if any(_d.has_dynamic(s) for s in arr_shapes):
        return broadcast_shapes("getitem", *[a if isinstance(a, Tracer) or np.ndim(a) else np.int64(a)
                                             for a in arrays])
    try:
        return np.broadcast_shapes(*arr_shapes) if arr_shapes else ()
    except ValueError:
        raise index_error("shape mismatch: indexing arrays could not be broadcast together with shapes "
                          + " ".join(str(s) for s in arr_shapes)) from None


def _plan(shape, entries, check: bool, clamp: str | None = None) -> _Plan:
    """numpy's indexing as a gather: which operand dims are indexed per batch element, which are
    windows, and where the advanced (broadcast) index dims go in the result.

    On an axis of run-time size, `clamp` prepares the index components for a memory-safe gather
    of an operand padded by one element along that axis (plan.pad_dims): "clip" clamps them into
    [0, n - 1], "fill" sends those past the end to -1 (a window that does not fit: the fill value)."""
    has_array = any(e.kind == "array" for e in entries)
    adv = [k for k, e in enumerate(entries) if e.kind == "array" or (has_array and e.kind in ("int", "dyn"))]
    B = _index_shapes([entries[k].value for k in adv])
    layout = _layout(entries, adv)
    batch_shape, batch_pos, pos = [], {}, 0
    for item in layout:
        if item[0] == "B":
            batch_pos["B"] = list(range(pos, pos + len(B)))
            batch_shape += B
            pos += len(B)
        elif item[0] == "S":
            e = entries[item[1]]
            batch_pos[item[1]] = [pos]
            batch_shape.append(_slice_size(e.value, shape[e.dim]))
            pos += 1
    batch_shape = tuple(batch_shape)
    comps, start_map, collapsed, pad_dims = [], [], [], []
    slice_sizes = list(shape)
    result_shape, out_shape, offset_dims = [], [], []
    for item in layout:
        if item[0] == "N":
            out_shape.append(1)
            continue
        if item[0] == "B":
            result_shape += B
            out_shape += B
            continue
        e = entries[item[1]]
        n = shape[e.dim]
        if _slicing.needs_dynamic(e.value, n):  # first element, size and step computed from dims
            b = _slicing.bounds(e.value, n)
            start, size = _slicing.first_index(b, n), _slicing.length(b, n)
            step = -b.k if b.reverse else b.k
            positions = lax.add(lax.mul(lax.iota(dtypes.int64, size), np.int64(step)), start) \
                if item[0] == "S" else None
        else:
            start, stop, step = e.value.indices(n)
            size = len(range(start, stop, step))
            positions = np.arange(size, dtype=np.int64) * step + start
        if item[0] == "S":
            comps.append(_bcast_index(positions, batch_shape, batch_pos[item[1]]))
            start_map.append(e.dim), collapsed.append(e.dim)
            slice_sizes[e.dim] = 1
        else:
            offset_dims.append(len(result_shape))
            slice_sizes[e.dim] = size
            if not _d.dims_equal(size, n):
                first = start if isinstance(start, Tracer) else np.int64(start if isinstance(size, DimExpr) or size else 0)
                comps.append(_bcast_index(first, batch_shape, []))
                start_map.append(e.dim)
        result_shape.append(size)
        out_shape.append(size)
    scalars = [k for k, e in enumerate(entries) if e.kind in ("int", "dyn") and k not in adv]
    for k in adv + scalars:  # advanced indices, then (without arrays) the plain int indices
        e = entries[k]
        n = shape[e.dim]
        i = e.value
        if not isinstance(i, Tracer):
            if check:
                _check_static(n, e.dim, np.asarray(i))
        elif n == 0:
            raise index_error(f"index into axis {e.dim} of size 0")
        i = _wrap_negative(i, n)
        if isinstance(n, DimExpr) and clamp is not None:
            i, padded = _clamp_for_pad(i, n, clamp)
            if padded:
                pad_dims.append(e.dim)
        ndim_i = len(np.shape(i)) if not isinstance(i, Tracer) else i.ndim
        dims = batch_pos.get("B", [])[len(B) - ndim_i:] if ndim_i else []
        comps.append(_bcast_index(i, batch_shape, dims))
        start_map.append(e.dim), collapsed.append(e.dim)
        slice_sizes[e.dim] = 1
    # operand dims not indexed and not in the layout are full windows already (slices fill them)
    indices = _stack(comps, batch_shape) if comps else None
    return _Plan(indices, tuple(offset_dims), tuple(sorted(collapsed)), tuple(start_map), tuple(slice_sizes),
                 tuple(result_shape), tuple(out_shape), comps, pad_dims)


def _layout(entries, adv: list[int]) -> list[tuple]:
    """The result's axes, in order: ("B",) the advanced (broadcast index) block — at the first
    advanced index when they are adjacent in the index, else first —, ("S", k) the batch dim of a
    strided slice, ("W", k) a window dim, ("N",) a new axis."""
    adjacent = bool(adv) and adv == list(range(adv[0], adv[-1] + 1))
    layout = [("B",)] if adv and not adjacent else []
    for k, e in enumerate(entries):
        if e.kind == "sep":
            continue
        if e.kind == "none":
            layout.append(("N",))
        elif k in adv or e.kind in ("int", "dyn"):
            if adjacent and k == adv[0]:
                layout.append(("B",))
        else:
            step = 1 if e.value.step is None else e.value.step
            layout.append(("W", k) if step == 1 else ("S", k))
    return layout


def _slice_size(s: slice, n):
    if _slicing.needs_dynamic(s, n):
        return _slicing.length(_slicing.bounds(s, n), n)
    return _slice_params(s, n)[4]


def _clamp_for_pad(i, n, clamp: str):
    """Index values i (wrapped) into an axis of run-time size n, for a gather from the operand
    padded by one element along the axis: (new indices, whether the padding is needed)."""
    nv = _d.value(n)
    dt = aval(i).dtype
    if clamp == "clip":
        hi = convert(lax.max(lax.sub(nv, np.int64(1)), np.int64(0)), dt)
        i = lax.clamp(const(dt, 0), i, hi) if not np.ndim(i) else lax.max(lax.min(i, hi), const(dt, 0))
    else:
        i = lax.select(lax.ge(i, convert(nv, dt)), lax.broadcast_in_dim(const(dt, -1), aval(i).shape, ())
                       if np.ndim(i) else const(dt, -1), i)
    return i, _d.maybe_zero(n)


def _stack(comps, batch_shape):
    """The index components stacked along a new last axis (numpy when all are static)."""
    if not any(isinstance(c, Tracer) for c in comps):
        return np.stack([np.asarray(c, np.int64) for c in comps], axis=-1)
    nd = len(batch_shape)
    parts = [lax.broadcast_in_dim(c, batch_shape + (1,), tuple(range(nd))) for c in comps]
    return parts[0] if len(parts) == 1 else lax.concatenate(parts, nd)


# -- x.at[idx].set(v) and friends ---------------------------------------------------------------------
_SCATTERS = {"set": lax.scatter, "add": lax.scatter_add, "multiply": lax.scatter_mul,
             "min": lax.scatter_min, "max": lax.scatter_max}


def _modes(fname, mode):
    if mode not in (None, "clip", "fill", "drop", "promise_in_bounds"):
        raise value_error(fname, f"unknown index mode {mode!r}; expected 'clip', 'fill', 'drop' or None")
    return mode


def scatter_update(x, idx, values, op: str, mode=None):
    fname = f"at[...].{op}"
    _modes(fname, mode)
    x = operand(fname, x)
    xa = aval(x)
    if any(_is_traced_mask(i) for i in (idx if isinstance(idx, tuple) else (idx,))):
        raise _mask_update_error()
    entries = _normalize(xa.shape, idx)
    plan = _plan(xa.shape, entries, check=mode is None, clamp="clip" if mode == "clip" else None)
    v = convert(operand(fname, values), xa.dtype)
    vs = aval(v).shape
    while len(vs) > len(plan.out_shape) and vs[0] == 1:  # numpy drops leading size-1 dims of the values
        v = reshape(v, vs[1:])
        vs = vs[1:]
    if len(vs) > len(plan.out_shape) or builtins.any(
            isinstance(d, int) and isinstance(s, int) and d not in (1, s) for d, s in zip(vs[::-1], plan.out_shape[::-1])):
        raise value_error(fname, f"values {describe(v)} cannot be broadcast to the indexed shape"
                                 f" {_d.fmt(plan.out_shape)} of {describe(x)}")
    _d.check_broadcast_to(fname, v, plan.out_shape, "values")
    v = reshape(broadcast_to(v, plan.out_shape), plan.result_shape)
    if plan.indices is None:  # the whole array: an elementwise op
        whole = {"set": lambda a, b: b, "add": F["add"], "multiply": F["multiply"], "min": F["minimum"],
                 "max": F["maximum"]}[op]
        return as_result(convert(broadcast_to(whole(x, v), xa.shape), xa.dtype))
    dn = ScatterDimensionNumbers(update_window_dims=plan.offset_dims, inserted_window_dims=plan.collapsed,
                                 scatter_dims_to_operand_dims=plan.start_index_map)
    # clip on an axis of run-time size: the indices are clamped above, and an empty axis drops them
    smode = GatherScatterMode.CLIP if mode == "clip" and not plan.pad_dims else GatherScatterMode.FILL_OR_DROP
    return as_result(_SCATTERS[op](x, plan.indices, v, dn, mode=smode))


class _IndexUpdateRef:
    """x.at[idx]: .get(), .set(v), .add(v), .subtract(v), .multiply(v), .divide(v), .power(v),
    .min(v), .max(v) — each returns a new array (JAX's functional updates)."""

    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array = array
        self.index = index

    def get(self, *, mode=None, fill_value=None, indices_are_sorted=False, unique_indices=False):
        return getitem(self.array, self.index, mode=_modes("at[...].get", mode), fill_value=fill_value)

    def set(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        return scatter_update(self.array, self.index, values, "set", mode)

    def add(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        return scatter_update(self.array, self.index, values, "add", mode)

    def subtract(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        return scatter_update(self.array, self.index, F["negative"](values), "add", mode)

    def multiply(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        return scatter_update(self.array, self.index, values, "multiply", mode)

    mul = multiply

    def divide(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        x = self.array
        return scatter_update(x, self.index, F["divide"](getitem(x, self.index, mode="clip"), values), "set", mode)

    def power(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        x = self.array
        return scatter_update(x, self.index, power(getitem(x, self.index, mode="clip"), values), "set", mode)

    def min(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        return scatter_update(self.array, self.index, values, "min", mode)

    def max(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        return scatter_update(self.array, self.index, values, "max", mode)

    def __repr__(self):
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"


class IndexUpdateHelper:
    """x.at: index it, x.at[idx], to get an update reference."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index):
        return _IndexUpdateRef(self.array, index)


eager_array.index_update = IndexUpdateHelper   # EagerArray.at (arrays computed eagerly)


def _index_operand(fname, indices):
    """Index arrays given as lists stay static numpy arrays (checked at trace time, like x[[0, 2]])."""
    if isinstance(indices, (list, tuple)):
        if not any(isinstance(v, Tracer) for v in nested_leaves(indices)):
            return np.asarray(indices) if len(indices) else np.zeros((0,), np.int64)
    return operand(fname, indices)


# -- take / take_along_axis -------------------------------------------------------------------------
def take(a, indices, axis=None, out=None, mode=None, unique_indices=False, indices_are_sorted=False,
         fill_value=None):
    """numpy.take. mode None/'raise' (static indices checked, traced ones clamped), 'clip' (clamped,
    no negative indices), 'wrap' (modulo the axis), or 'fill' (out of bounds give fill_value)."""
    if out is not None:
        raise type_error("take", "out= is not supported (sprue arrays are immutable)")
    a = operand("take", a)
    if axis is None:
        a, ax = reshape(a, (aval(a).size,)), 0
    else:
        ax = normalize_axis("take", axis, aval(a).ndim, a)
    n = aval(a).shape[ax]
    idx = _index_operand("take", indices)
    if not dtypes.is_int(aval(idx).dtype):
        raise type_error("take", f"indices must be integers, got {describe(idx)}")
    if mode in ("clip", "wrap") and isinstance(n, DimExpr) and _d.maybe_zero(n) and \
            not _d.dims_equal(math.prod(aval(idx).shape), 0):  # numpy's IndexError for an empty axis
        _d.check(lax.ne(_d.value(n), np.int64(0)),
                 f"sprue.numpy.take: cannot do a non-empty take from an empty axis{loc()}", key=("nonempty", n))
    if mode == "clip":
        idx = clip(idx, 0, _d.dmax(n - 1, 0))
    elif mode == "wrap":
        idx = F["remainder"](idx, n)
    elif mode not in (None, "raise", "fill"):
        raise value_error("take", f"unknown mode {mode!r}")
    if isinstance(idx, np.ndarray) and idx.ndim == 0:
        idx = int(idx)
    full = (slice(None),) * ax + (idx,)
    return getitem(a, full, mode="fill" if mode == "fill" else None, fill_value=fill_value)


def take_along_axis(arr, indices, axis, mode=None, fill_value=None):
    """numpy.take_along_axis: arr[i0, ..., indices, ..., in] with aranges for the other axes."""
    a = operand("take_along_axis", arr)
    idx = _index_operand("take_along_axis", indices)
    if axis is None:
        a, idx, ax = reshape(a, (aval(a).size,)), reshape(idx, (aval(idx).size,)), 0
    else:
        ax = normalize_axis("take_along_axis", axis, aval(a).ndim, a)
    if aval(idx).ndim != aval(a).ndim:
        raise value_error("take_along_axis", f"indices {describe(idx)} and array {describe(a)} must have the same"
                                             f" number of dimensions")
    if not dtypes.is_int(aval(idx).dtype):
        raise type_error("take_along_axis", f"indices must be integers, got {describe(idx)}")
    nd = aval(a).ndim
    full = tuple(idx if d == ax else _arange_along(aval(a).shape[d], d, nd) for d in range(nd))
    return getitem(a, full, mode=mode, fill_value=fill_value)


def _arange_along(n, d: int, nd: int):
    """arange(n) shaped to broadcast along axis d of nd axes: numpy when n is static, else an iota."""
    shape = [n if k == d else 1 for k in range(nd)]
    if isinstance(n, int):
        return np.arange(n).reshape(shape)
    return lax.broadcasted_iota(dtypes.int64, tuple(shape), d)


def put_along_axis(arr, indices, values, axis, inplace=False, *, mode=None):
    """Functional numpy.put_along_axis (JAX requires inplace=False): a scatter."""
    if inplace:
        raise type_error("put_along_axis", "sprue arrays are immutable; pass inplace=False and use the result")
    a = operand("put_along_axis", arr)
    idx = operand("put_along_axis", indices)
    ax = normalize_axis("put_along_axis", axis, aval(a).ndim, a)
    nd = aval(a).ndim
    full = tuple(idx if d == ax else _arange_along(aval(a).shape[d], d, nd) for d in range(nd))
    return scatter_update(a, full, values, "set", mode)
