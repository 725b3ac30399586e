"""Indexing with numpy's rules: x[idx] and the functional updates x.at[idx].set/add/multiply/...

Basic indices (ints, slices, None, Ellipsis) lower to `slice` (+ `rev` for negative steps) and
`squeeze`; traced scalar ints to `dynamic_slice` (negative ones wrapped by a `select`). Integer
arrays (and static boolean masks, made integer with nonzero) lower to `gather` with numpy's
advanced-indexing layout: the broadcast index shape replaces the indexed axes when they are
adjacent, else goes first. Updates lower to scatter / scatter-add / -mul / -min / -max with the
same index analysis (mode FILL_OR_DROP, as JAX: traced out-of-bounds updates are dropped).
Static out-of-bounds indices raise IndexError as in numpy; traced ones are clamped by gather.
"""
from __future__ import annotations

import builtins
import operator
from dataclasses import dataclass, field

import numpy as np

from .. import dtypes, lax
from ..errors import ConcretizationError, SprueError
from ..lax import GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers
from ..tracing import Tracer
from ._promote import (aval, as_result, broadcast_to, const, convert, describe, loc, normalize_axis, operand,
                       reshape, static_int, type_error, value_error)

__all__ = ["getitem", "IndexUpdateHelper", "take", "take_along_axis", "put_along_axis"]


class SprueIndexError(SprueError, IndexError):
    """An index out of bounds, or of a kind numpy does not accept."""


def _index_error(msg: str) -> SprueIndexError:
    return SprueIndexError(f"{msg}{loc()}")


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


def _mask_error():
    return ConcretizationError(
        "boolean-mask indexing x[mask] with a traced mask has a data-dependent shape, which sprue cannot"
        f" compile{loc()}; use a static (numpy) mask, or jnp.where(mask, x, fill) to keep the shape")


def _classify(item):
    if item is None:
        return _Entry("none")
    if item is Ellipsis:
        return _Entry("ellipsis")
    if isinstance(item, slice):
        parts = []
        for v in (item.start, item.stop, item.step):
            if isinstance(v, Tracer):
                raise type_error("getitem", f"slice bounds must be static ints, got a traced {v.aval.str_short()};"
                                            f" use lax.dynamic_slice for traced starts")
            try:
                parts.append(None if v is None else operator.index(v))
            except TypeError:
                raise _index_error(f"slice indices must be integers or None, got {type(v).__name__}") from None
        return _Entry("slice", slice(*parts))
    if isinstance(item, (bool, np.bool_)):
        raise _index_error("boolean scalar indices (x[True]) are not supported; use x[None] or jnp.where")
    if isinstance(item, (int, np.integer)):
        return _Entry("int", int(item))
    if isinstance(item, Tracer):
        if dtypes.is_bool(item.dtype):
            raise _mask_error()
        if not dtypes.is_int(item.dtype):
            raise _index_error(f"{_INDEX_KINDS}; got a traced {item.aval.str_short()}")
        return _Entry("dyn" if item.ndim == 0 else "array", item)
    if isinstance(item, (list, tuple)):
        from ._creation import _leaves, array
        if any(isinstance(v, Tracer) for v in _leaves(item, [])):
            return _classify(array(item, fname="getitem"))
        item = np.asarray(item) if item else np.zeros((0,), np.int64)
    if isinstance(item, np.ndarray):
        if item.dtype == np.bool_:
            if item.ndim == 0:
                raise _index_error("boolean scalar indices (x[True]) are not supported; use x[None] or jnp.where")
            return _Entry("mask", item)
        if not dtypes.is_int(item.dtype):
            raise _index_error(f"{_INDEX_KINDS}; got an array of dtype {item.dtype}")
        return _Entry("int", int(item)) if item.ndim == 0 else _Entry("array", item)
    raise _index_error(f"{_INDEX_KINDS}; got {type(item).__name__}")


def _normalize(shape, idx) -> list[_Entry]:
    """Entries with their operand dims: Ellipsis expanded, masks made integer arrays, missing
    trailing dims filled with full slices."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    entries = [_classify(i) for i in idx]
    if builtins.sum(e.kind == "ellipsis" for e in entries) > 1:
        raise _index_error("an index can only have a single ellipsis ('...')")
    used = builtins.sum(e.value.ndim if e.kind == "mask" else 1 for e in entries if e.kind not in ("none", "ellipsis"))
    if used > len(shape):
        raise _index_error(f"too many indices for array: array is {len(shape)}-dimensional, but {used} were indexed")
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
                if m.shape[k] != shape[dim + k]:
                    raise _index_error(f"boolean index did not match indexed array along axis {dim + k}; size of axis"
                                       f" is {shape[dim + k]} but size of corresponding boolean axis is {m.shape[k]}")
            for k, nz in enumerate(np.nonzero(m)):
                out.append(_Entry("array", nz.astype(np.int64), dim + k))
            dim += m.ndim
        else:
            e.dim = dim
            out.append(e)
            dim += 1
    return out


def _check_static(n: int, dim: int, values: np.ndarray):
    bad = (values < -n) | (values >= n)
    if np.any(bad):
        v = int(np.asarray(values)[bad].flat[0])
        raise _index_error(f"index {v} is out of bounds for axis {dim} with size {n}")


def _wrap_negative(i, n: int):
    """i, with negative values counted from the end: numpy arithmetic when static, else a select."""
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
    if mode is None and not any(e.kind == "array" for e in entries):
        return as_result(_basic(x, entries))
    plan = _plan(shape, entries, check=mode is None)
    gmode = GatherScatterMode.FILL_OR_DROP if mode in ("fill", "drop") else GatherScatterMode.CLIP
    if plan.indices is None:  # no index components: the whole array, with None dims
        return as_result(reshape(x, plan.out_shape))
    fill = None if fill_value is None else np.asarray(fill_value, aval(x).dtype)[()]
    dn = GatherDimensionNumbers(offset_dims=plan.offset_dims, collapsed_slice_dims=plan.collapsed,
                                start_index_map=plan.start_index_map)
    out = lax.gather(x, plan.indices, dn, plan.slice_sizes, mode=gmode, fill_value=fill)
    return as_result(reshape(out, plan.out_shape))


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


def _basic(x, entries):
    """Ints, slices, None and traced scalar ints: slice, dynamic_slice, squeeze, rev, reshape."""
    shape = aval(x).shape
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
            st, lim, stride, rev, _ = _slice_params(e.value, n)
            starts.append(st), limits.append(lim), strides.append(stride)
            if rev:
                rev_dims.append(e.dim)
    y = x
    if (tuple(starts), tuple(limits)) != ((0,) * len(shape), shape) or builtins.any(s != 1 for s in strides):
        y = lax.slice(y, starts, limits, strides if builtins.any(s != 1 for s in strides) else None)
    if dyn:
        if any(d == 0 for d in (shape[e.dim] for e in dyn)):
            raise _index_error("index into an axis of size 0")
        idt = np.result_type(*[e.value.dtype for e in dyn])
        ys = aval(y).shape
        idx = [const(idt, 0)] * len(ys)
        for e in dyn:
            idx[e.dim] = _wrap_negative(convert(e.value, idt), ys[e.dim])
        y = lax.dynamic_slice(y, idx, tuple(1 if any(e.dim == d for e in dyn) else s for d, s in enumerate(ys)))
    if int_dims:
        y = lax.squeeze(y, tuple(int_dims))
    if rev_dims:
        kept = [d for d in range(len(shape)) if d not in int_dims]
        y = lax.rev(y, tuple(kept.index(d) for d in rev_dims))
    out_shape, it = [], iter(aval(y).shape)
    for e in entries:
        if e.kind == "none":
            out_shape.append(1)
        elif e.kind == "slice":
            out_shape.append(next(it))
    return reshape(y, tuple(out_shape))


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


def _bcast_index(i, batch_shape, dims):
    """Index component i broadcast into batch_shape, its own axes going to batch positions `dims`."""
    if isinstance(i, Tracer):
        return lax.broadcast_in_dim(convert(i, dtypes.int64), batch_shape, tuple(dims))
    i = np.asarray(i, np.int64)
    return np.broadcast_to(i.reshape([i.shape[dims.index(d)] if d in dims else 1 for d in range(len(batch_shape))]),
                           batch_shape)


def _plan(shape, entries, check: bool) -> _Plan:
    """numpy's indexing as a gather: which operand dims are indexed per batch element, which are
    windows, and where the advanced (broadcast) index dims go in the result."""
    has_array = any(e.kind == "array" for e in entries)
    adv = [k for k, e in enumerate(entries) if e.kind == "array" or (has_array and e.kind in ("int", "dyn"))]
    arr_shapes = [tuple(np.shape(e.value)) if e.kind == "array" else () for e in (entries[k] for k in adv)]
    try:
        B = np.broadcast_shapes(*arr_shapes) if arr_shapes else ()
    except ValueError:
        raise _index_error("shape mismatch: indexing arrays could not be broadcast together with shapes "
                           + " ".join(str(s) for s in arr_shapes)) from None
    adjacent = bool(adv) and adv == list(range(adv[0], adv[-1] + 1))
    # the result layout, in order: ("B",) advanced block, ("S", k) strided slice batch dim,
    # ("W", k) window dim, ("N",) new axis
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
            step = e.value.indices(shape[e.dim])[2]
            layout.append(("W", k) if step == 1 else ("S", k))
    batch_shape, batch_pos, pos = [], {}, 0
    for item in layout:
        if item[0] == "B":
            batch_pos["B"] = list(range(pos, pos + len(B)))
            batch_shape += B
            pos += len(B)
        elif item[0] == "S":
            e = entries[item[1]]
            batch_pos[item[1]] = [pos]
            batch_shape.append(_slice_params(e.value, shape[e.dim])[4])
            pos += 1
    batch_shape = tuple(batch_shape)
    comps, start_map, collapsed = [], [], []
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
        start, stop, step = e.value.indices(n)
        size = len(range(start, stop, step))
        if item[0] == "S":
            comps.append(_bcast_index(np.arange(size, dtype=np.int64) * step + start, batch_shape, batch_pos[item[1]]))
            start_map.append(e.dim), collapsed.append(e.dim)
            slice_sizes[e.dim] = 1
        else:
            offset_dims.append(len(result_shape))
            slice_sizes[e.dim] = size
            if size != n:
                comps.append(_bcast_index(np.int64(start if size else 0), batch_shape, []))
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
            raise _index_error(f"index into axis {e.dim} of size 0")
        i = _wrap_negative(i, n)
        ndim_i = len(np.shape(i)) if not isinstance(i, Tracer) else i.ndim
        dims = batch_pos.get("B", [])[len(B) - ndim_i:] if ndim_i else []
        comps.append(_bcast_index(i, batch_shape, dims))
        start_map.append(e.dim), collapsed.append(e.dim)
        slice_sizes[e.dim] = 1
    # operand dims not indexed and not in the layout are full windows already (slices fill them)
    indices = _stack(comps, batch_shape) if comps else None
    return _Plan(indices, tuple(offset_dims), tuple(sorted(collapsed)), tuple(start_map), tuple(slice_sizes),
                 tuple(result_shape), tuple(out_shape), comps)


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
    entries = _normalize(xa.shape, idx)
    plan = _plan(xa.shape, entries, check=mode is None)
    v = convert(operand(fname, values), xa.dtype)
    vs = aval(v).shape
    while len(vs) > len(plan.out_shape) and vs[0] == 1:  # numpy drops leading size-1 dims of the values
        v = reshape(v, vs[1:])
        vs = vs[1:]
    if len(vs) > len(plan.out_shape) or builtins.any(d not in (1, s) for d, s in zip(vs[::-1], plan.out_shape[::-1])):
        raise value_error(fname, f"values {describe(v)} cannot be broadcast to the indexed shape {plan.out_shape}"
                                 f" of {describe(x)}")
    v = reshape(broadcast_to(v, plan.out_shape), plan.result_shape)
    if plan.indices is None:  # the whole array: an elementwise op
        from ._ufuncs import _funcs as F
        whole = {"set": lambda a, b: b, "add": F["add"], "multiply": F["multiply"], "min": F["minimum"],
                 "max": F["maximum"]}[op]
        return as_result(convert(broadcast_to(whole(x, v), xa.shape), xa.dtype))
    dn = ScatterDimensionNumbers(update_window_dims=plan.offset_dims, inserted_window_dims=plan.collapsed,
                                 scatter_dims_to_operand_dims=plan.start_index_map)
    smode = GatherScatterMode.CLIP if mode == "clip" else GatherScatterMode.FILL_OR_DROP
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
        from ._ufuncs import _funcs as F
        return scatter_update(self.array, self.index, F["negative"](values), "add", mode)

    def multiply(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        return scatter_update(self.array, self.index, values, "multiply", mode)

    mul = multiply

    def divide(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        from ._ufuncs import _funcs as F
        x = self.array
        return scatter_update(x, self.index, F["divide"](getitem(x, self.index, mode="clip"), values), "set", mode)

    def power(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        from ._ufuncs import power
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


def _index_operand(fname, indices):
    """Index arrays given as lists stay static numpy arrays (checked at trace time, like x[[0, 2]])."""
    if isinstance(indices, (list, tuple)):
        from ._creation import _leaves
        if not any(isinstance(v, Tracer) for v in _leaves(indices, [])):
            return np.asarray(indices) if len(indices) else np.zeros((0,), np.int64)
    return operand(fname, indices)


# -- take / take_along_axis -------------------------------------------------------------------------
def take(a, indices, axis=None, out=None, mode=None, unique_indices=False, indices_are_sorted=False,
         fill_value=None):
    """numpy.take. mode None/'raise' (static indices checked, traced ones clamped), 'clip' (clamped,
    no negative indices), 'wrap' (modulo the axis), or 'fill' (out of bounds give fill_value)."""
    from ._ufuncs import _funcs as F
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
    if mode == "clip":
        from ._ufuncs import clip
        idx = clip(idx, 0, builtins.max(n - 1, 0))
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
    full = tuple(idx if d == ax else np.arange(aval(a).shape[d]).reshape([-1 if k == d else 1 for k in range(nd)])
                 for d in range(nd))
    return getitem(a, full, mode=mode, fill_value=fill_value)


def put_along_axis(arr, indices, values, axis, inplace=False, *, mode=None):
    """Functional numpy.put_along_axis (JAX requires inplace=False): a scatter."""
    if inplace:
        raise type_error("put_along_axis", "sprue arrays are immutable; pass inplace=False and use the result")
    a = operand("put_along_axis", arr)
    idx = operand("put_along_axis", indices)
    ax = normalize_axis("put_along_axis", axis, aval(a).ndim, a)
    nd = aval(a).ndim
    full = tuple(idx if d == ax else np.arange(aval(a).shape[d]).reshape([-1 if k == d else 1 for k in range(nd)])
                 for d in range(nd))
    return scatter_update(a, full, values, "set", mode)
