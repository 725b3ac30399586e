"""Shape manipulation: reshape, ravel, transpose, swapaxes, moveaxis, squeeze, expand_dims,
concatenate, stack, hstack, vstack, broadcast_to, broadcast_arrays, flip, diagonal, tril, triu, ...
Each lowers to one or a few lax structural ops. Axes are static; sizes may be known only at run
time (see _dims): sizes that numpy requires equal and tracing cannot compare are checked at run
time, and the operands brought to one size by clamped gathers."""
from __future__ import annotations

import builtins
import math

import numpy as np

from sprue import lax
from sprue.base import dtypes
from sprue.ir.shapes import DimExpr, format_dim, prove_equal
from sprue.numpy import _dims as _d
from sprue.numpy._avals import aval, describe, is_py_scalar, loc, type_error, value_error
from sprue.numpy._indexing import getitem, take
from sprue.numpy._promote import (
    as_result,
    check_dtype,
    convert,
    normalize_axes,
    normalize_axis,
    operand,
    operands,
    result_type,
    static_int,
    static_shape,
)
from sprue.numpy._promote import broadcast_shapes as _bshapes
from sprue.numpy._promote import broadcast_to as _bcast
from sprue.numpy._promote import reshape as _reshape
from sprue.numpy._reductions import sum as _sum
from sprue.numpy._ufuncs import where_xy as _where
from sprue.trace.tracing import Tracer

__all__ = ["reshape", "ravel", "transpose", "permute_dims", "matrix_transpose", "swapaxes", "moveaxis",
           "squeeze", "expand_dims", "concatenate", "concat", "stack", "hstack", "vstack", "dstack",
           "column_stack", "atleast_1d", "atleast_2d", "atleast_3d", "broadcast_to", "broadcast_arrays",
           "broadcast_shapes", "flip", "fliplr", "flipud", "diagonal", "diag", "trace", "tril", "triu",
           "roll", "repeat", "tile", "split", "array_split", "shape", "ndim", "size"]


def shape(a):
    return aval(operand("shape", a)).shape


def ndim(a):
    return aval(operand("ndim", a)).ndim


def size(a, axis=None):
    av = aval(operand("size", a))
    return av.size if axis is None else av.shape[normalize_axis("size", axis, av.ndim)]


def reshape(a, /, shape=None, order="C", *, newshape=None, copy=None):
    """numpy.reshape, with one -1 dimension inferred; order 'F' by transposes."""
    shape = newshape if shape is None else shape
    if shape is None:
        raise type_error("reshape", "missing the new shape")
    a = operand("reshape", a)
    av = aval(a)
    dims = list(shape) if isinstance(shape, (list, tuple)) else [shape]
    if builtins.any(isinstance(d, (Tracer, DimExpr)) for d in dims) or _d.has_dynamic(av.shape):
        return _reshape_dynamic(a, dims, order)
    dims = [static_int("reshape", d, "a shape dimension") for d in dims]
    if dims.count(-1) > 1 or builtins.any(d < -1 for d in dims):
        raise value_error("reshape", f"invalid new shape {tuple(dims)} for {describe(a)}")
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        if known == 0 or av.size % known:
            raise value_error("reshape", f"cannot reshape {describe(a)} (size {av.size}) into shape {tuple(dims)}")
        dims[dims.index(-1)] = av.size // known
    if math.prod(dims) != av.size:
        raise value_error("reshape", f"cannot reshape {describe(a)} (size {av.size}) into shape {tuple(dims)}")
    if order == "F":
        t = transpose(a) if av.ndim > 1 else a
        r = _reshape(t, tuple(dims[::-1]))
        return as_result(transpose(r) if len(dims) > 1 else r)
    if order not in ("C", "A"):
        raise value_error("reshape", f"order must be 'C' or 'F', got {order!r}")
    return as_result(_reshape(a, tuple(dims)))


def _reshape_dynamic(a, dims, order):
    """reshape with sizes known only at run time. The -1 dim is size // (product of the others),
    symbolic when that product is static; a product not provably equal to the size gets a check,
    and the flattened input is brought to the target size by a clamped gather first, so that a
    failed check never reads out of bounds."""
    av = aval(a)
    dims = [d if isinstance(d, (Tracer, DimExpr)) else static_int("reshape", d, "a shape dimension") for d in dims]
    static = [d for d in dims if isinstance(d, int)]
    if static.count(-1) > 1 or builtins.any(d < -1 for d in static):
        raise value_error("reshape", f"invalid new shape {_d.fmt(dims)} for {describe(a)}")
    dims = [d if isinstance(d, int) and d == -1 else _d.size_arg("reshape", d) for d in dims]
    message = f"cannot reshape {describe(a)} (size {format_dim(av.size)}) into shape {_d.fmt(dims)}"
    if -1 in dims:
        known = math.prod(d for d in dims if not (isinstance(d, int) and d == -1))
        if isinstance(known, int) and known == 0:
            raise value_error("reshape", message)
        if not isinstance(known, int) and _d.maybe_zero(known):  # numpy cannot infer -1 beside a 0
            _d.check(lax.ne(_d.value(known), np.int64(0)), f"sprue.numpy.reshape: {message}{loc()}")
        q = _d.exact_div(av.size, known)
        if q is not None or isinstance(known, int):
            q = av.size // known if q is None else q
        else:  # size // known at run time (known is checked non-zero)
            q = _d.fresh(("div", av.size, known), lambda: lax.div(
                _d.value(av.size) if not isinstance(av.size, int) else np.int64(av.size),
                lax.max(_d.value(known), np.int64(1))))
        dims[dims.index(-1)] = q
    dims = tuple(dims)
    total = math.prod(dims)
    same = prove_equal(total, av.size)
    if same is False:
        raise value_error("reshape", message)
    if order == "F":
        a = transpose(a) if av.ndim > 1 else a
        dims = dims[::-1]
    elif order not in ("C", "A"):
        raise value_error("reshape", f"order must be 'C' or 'F', got {order!r}")
    if same is None:
        _d.check(_d.eq_value(total, av.size), f"sprue.numpy.reshape: {message}{loc()}")
        a = _d.cut_axis(_reshape(a, (av.size,)), 0, total)
    r = _reshape(a, dims)
    return as_result(transpose(r) if order == "F" and len(dims) > 1 else r)


def ravel(a, order="C"):
    return reshape(a, (-1,), order=order)


def transpose(a, axes=None):
    a = operand("transpose", a)
    nd = aval(a).ndim
    if axes is None:
        perm = tuple(range(nd))[::-1]
    else:
        perm = tuple(normalize_axis("transpose", ax, nd, a) for ax in axes)
        if len(perm) != nd or sorted(perm) != list(range(nd)):
            raise value_error("transpose", f"axes {tuple(axes)} are not a permutation of the axes of {describe(a)}")
    if perm == tuple(range(nd)):
        return as_result(a)
    return as_result(lax.transpose(a, perm))


permute_dims = transpose


def matrix_transpose(x, /):
    x = operand("matrix_transpose", x)
    if aval(x).ndim < 2:
        raise value_error("matrix_transpose", f"needs an array of rank >= 2, got {describe(x)}")
    return swapaxes(x, -1, -2)


def swapaxes(a, axis1, axis2):
    a = operand("swapaxes", a)
    nd = aval(a).ndim
    i, j = normalize_axis("swapaxes", axis1, nd, a), normalize_axis("swapaxes", axis2, nd, a)
    perm = list(range(nd))
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(a, perm)


def moveaxis(a, source, destination):
    a = operand("moveaxis", a)
    nd = aval(a).ndim
    src = [source] if not isinstance(source, (list, tuple)) else list(source)
    dst = [destination] if not isinstance(destination, (list, tuple)) else list(destination)
    if len(src) != len(dst):
        raise value_error("moveaxis", "source and destination must have the same number of elements")
    src = [normalize_axis("moveaxis", s, nd, a) for s in src]
    dst = [normalize_axis("moveaxis", d, nd, a) for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise value_error("moveaxis", f"repeated axis in source {source} or destination {destination}")
    order = [n for n in range(nd) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(a, order)


def squeeze(a, axis=None):
    a = operand("squeeze", a)
    av = aval(a)
    if axis is None:  # sizes known only at run time are never squeezed: the rank must be static
        dims = tuple(i for i, d in enumerate(av.shape) if isinstance(d, int) and d == 1)
    else:
        dims = normalize_axes("squeeze", axis, av.ndim, a)
        for d in dims:
            if isinstance(av.shape[d], DimExpr):  # checked to be 1 at run time, then made a static 1
                _d.check(_d.eq_value(av.shape[d], 1), f"sprue.numpy.squeeze: cannot select an axis to squeeze"
                         f" out which has size not equal to one (axis {d} of {describe(a)}){loc()}")
                a = _d.cut_axis(a, d, 1)
            elif av.shape[d] != 1:
                raise value_error("squeeze", f"cannot select an axis to squeeze out which has size not equal to one"
                                             f" (axis {d} of {describe(a)})")
    if not dims:
        return as_result(a)
    return as_result(lax.squeeze(a, dims))


def expand_dims(a, axis):
    a = operand("expand_dims", a)
    av = aval(a)
    axes = axis if isinstance(axis, (list, tuple)) else (axis,)
    out_nd = av.ndim + len(axes)
    pos = normalize_axes("expand_dims", tuple(axes), out_nd, a)
    it = iter(av.shape)
    return as_result(_reshape(a, tuple(1 if i in pos else next(it) for i in range(out_nd))))


def _arrays(fname, arrays):
    if isinstance(arrays, (np.ndarray,)) or hasattr(arrays, "aval"):
        arrays = list(arrays)  # numpy iterates the first axis
    if not isinstance(arrays, (list, tuple)) or not arrays:
        raise value_error(fname, "needs a non-empty sequence of arrays")
    # numpy makes each operand an array first: Python scalars here are strong (float64, int64)
    return [convert(x, aval(x).dtype) if is_py_scalar(x) else x for x in operands(fname, *arrays)]


def _common(fname, xs, dtype):
    if dtype is not None:
        dt = check_dtype(fname, dtype)
    else:
        dt, _ = result_type(*xs)
    return [convert(x, dt) for x in xs]


def concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    if out is not None:
        raise type_error("concatenate", "out= is not supported (sprue arrays are immutable)")
    xs = _arrays("concatenate", arrays)
    if axis is None:
        xs = [ravel(x) for x in xs]
        axis = 0
    nd = aval(xs[0]).ndim
    if nd == 0 or builtins.any(aval(x).ndim == 0 for x in xs):
        raise value_error("concatenate", "zero-dimensional arrays cannot be concatenated")
    ax = normalize_axis("concatenate", axis, nd, xs[0])
    s0 = aval(xs[0]).shape
    for x in xs:
        s = aval(x).shape
        if len(s) != nd or builtins.any(isinstance(s[i], int) and isinstance(s0[i], int) and s[i] != s0[i]
                                        for i in range(nd) if i != ax):
            raise value_error("concatenate", f"array dimensions must match except along axis {ax}, got {describe(*xs)}")
    xs = _unify_axes("concatenate", xs, [i for i in range(nd) if i != ax],
                     f"array dimensions must match except along axis {ax}, got {describe(*xs)}")
    xs = _common("concatenate", xs, dtype)
    if len(xs) == 1:
        return as_result(xs[0])
    return as_result(lax.concatenate(xs, ax))


def _unify_axes(fname, xs, axes, message):
    """The arrays with each of `axes` of one size: sizes only run time can compare are checked
    equal, and all cut to one size (see _dims.unify_equal)."""
    for i in axes:
        dims = [aval(x).shape[i] for x in xs]
        if builtins.all(_d.dims_equal(d, dims[0]) for d in dims):
            continue
        r = _d.unify_equal(fname, dims, message)
        xs = [_d.fit_axis(x, i, r) for x in xs]
    return xs


def concat(arrays, /, *, axis=0):
    return concatenate(arrays, axis)


def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    xs = _arrays("stack", arrays)
    shapes = {aval(x).shape for x in xs}
    if len(shapes) != 1:
        if len({len(s) for s in shapes}) != 1 or builtins.any(
                p is False for s in shapes for p in map(prove_equal, s, aval(xs[0]).shape)):
            raise value_error("stack", f"all input arrays must have the same shape, got {describe(*xs)}")
        xs = _unify_axes("stack", xs, range(aval(xs[0]).ndim),
                         f"all input arrays must have the same shape, got {describe(*xs)}")
    nd = aval(xs[0]).ndim + 1
    ax = normalize_axis("stack", axis, nd, None)
    return concatenate([expand_dims(x, ax) for x in xs], ax, out, dtype=dtype)


def atleast_1d(*arys):
    out = [operand("atleast_1d", a) for a in arys]
    out = [as_result(_reshape(a, (1,)) if aval(a).ndim == 0 else a) for a in out]
    return out[0] if len(out) == 1 else tuple(out)


def atleast_2d(*arys):
    out = []
    for a in arys:
        a = operand("atleast_2d", a)
        s = aval(a).shape
        out.append(as_result(_reshape(a, (1,) * (2 - len(s)) + s) if len(s) < 2 else a))
    return out[0] if len(out) == 1 else tuple(out)


def atleast_3d(*arys):
    out = []
    for a in arys:
        a = operand("atleast_3d", a)
        s = aval(a).shape
        new = {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}.get(len(s), s)
        out.append(as_result(_reshape(a, new)))
    return out[0] if len(out) == 1 else tuple(out)


def hstack(tup, *, dtype=None, casting="same_kind"):
    xs = [atleast_1d(x) for x in _arrays("hstack", tup)]
    return concatenate(xs, 0 if aval(xs[0]).ndim == 1 else 1, dtype=dtype)


def vstack(tup, *, dtype=None, casting="same_kind"):
    return concatenate([atleast_2d(x) for x in _arrays("vstack", tup)], 0, dtype=dtype)


def dstack(tup):
    return concatenate([atleast_3d(x) for x in _arrays("dstack", tup)], 2)


def column_stack(tup):
    xs = _arrays("column_stack", tup)
    xs = [reshape(x, (-1, 1)) if aval(x).ndim < 2 else x for x in xs]
    return concatenate(xs, 1)


def broadcast_to(array, shape):
    a = operand("broadcast_to", array)
    shape = _d.shape_arg("broadcast_to", shape)
    s = aval(a).shape
    if len(s) > len(shape) or builtins.any(isinstance(d, int) and isinstance(t, int) and d not in (1, t)
                                           for d, t in zip(s[::-1], shape[::-1])):
        raise value_error("broadcast_to", f"cannot broadcast {describe(a)} to shape {_d.fmt(shape)}")
    _d.check_broadcast_to("broadcast_to", a, shape, "array")
    _d.check_allocation("broadcast_to", shape, aval(a).dtype)
    return as_result(_bcast(a, shape))


def broadcast_arrays(*args):
    xs = operands("broadcast_arrays", *args)
    shape = _bshapes("broadcast_arrays", *xs)
    return tuple(as_result(_bcast(x, shape)) for x in xs)


def broadcast_shapes(*shapes):
    dummies = [np.broadcast_to(np.bool_(False), static_shape("broadcast_shapes", s)) for s in shapes]
    return _bshapes("broadcast_shapes", *dummies)


def flip(m, axis=None):
    m = operand("flip", m)
    nd = aval(m).ndim
    axes = normalize_axes("flip", axis, nd, m)
    if not axes:
        return as_result(m)
    return as_result(lax.rev(m, axes))


def fliplr(m):
    m = operand("fliplr", m)
    if aval(m).ndim < 2:
        raise value_error("fliplr", f"needs an array of rank >= 2, got {describe(m)}")
    return flip(m, 1)


def flipud(m):
    m = operand("flipud", m)
    if aval(m).ndim < 1:
        raise value_error("flipud", f"needs an array of rank >= 1, got {describe(m)}")
    return flip(m, 0)


def diagonal(a, offset=0, axis1=0, axis2=1):
    """numpy.diagonal: the diagonal as the last axis. A strided slice of the two axes flattened
    (element (i, i + offset) of a d1 x d2 matrix is at i * (d2 + 1) + offset): no gather."""
    a = operand("diagonal", a)
    av = aval(a)
    if av.ndim < 2:
        raise value_error("diagonal", f"needs an array of rank >= 2, got {describe(a)}")
    i, j = normalize_axis("diagonal", axis1, av.ndim, a), normalize_axis("diagonal", axis2, av.ndim, a)
    if i == j:
        raise value_error("diagonal", "axis1 and axis2 cannot be the same")
    k = static_int("diagonal", offset, "offset")
    rest = [d for d in range(av.ndim) if d not in (i, j)]
    x = transpose(a, rest + [i, j]) if rest + [i, j] != list(range(av.ndim)) else a
    d1, d2 = av.shape[i], av.shape[j]
    lead = tuple(av.shape[d] for d in rest)
    flat = _reshape(x, lead + (d1 * d2,))
    start = k if k >= 0 else -k * d2
    if _d.has_dynamic((d1, d2)):  # a gather of every (d2+1)-th element (no slice on a symbolic size)
        n = _d.dmax(0, _d.dmin(d1, d2 - k) if k >= 0 else _d.dmin(d1 + k, d2))
        step = lax.add(_d.value(d2), np.int64(1)) if isinstance(d2, DimExpr) else np.int64(d2 + 1)
        first = _d.value(start) if isinstance(start, DimExpr) else np.int64(start)
        idx = lax.add(lax.mul(lax.iota(dtypes.int64, n), step), first)
        return as_result(_d.take_clamped(flat, len(lead), idx))  # n is 0 when flat is empty
    n = builtins.max(0, builtins.min(d1, d2 - k) if k >= 0 else builtins.min(d1 + k, d2))
    if n == 0:
        start = limit = 0
    else:
        limit = start + (n - 1) * (d2 + 1) + 1
    return as_result(lax.slice(flat, (0,) * len(lead) + (start,), lead + (limit,), (1,) * len(lead) + (d2 + 1,)))


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    return _sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype, out=out)


def diag(v, k=0):
    """numpy.diag: the k-th diagonal of a matrix, or a matrix with v on its k-th diagonal."""
    v = operand("diag", v)
    av = aval(v)
    k = static_int("diag", k, "k")
    if av.ndim == 2:
        return diagonal(v, k)
    if av.ndim != 1:
        raise value_error("diag", f"input must be 1- or 2-d, got {describe(v)}")
    n = av.shape[0] + builtins.abs(k)
    vp = lax.pad(v, convert(0, av.dtype), [(0, builtins.abs(k), 0)]) if k else v
    # row i holds v[i] at column i + k (k >= 0); column j holds v[j] at row j - k (k < 0)
    full = lax.broadcast_in_dim(vp, (n, n), (0,) if k >= 0 else (1,))
    return _where(_tri_mask((n, n), k, "eq"), full, convert(0, av.dtype))


def _tri_mask(shape, k, cmp):
    """The bool mask j - i == k / j - i <= k / j - i >= k over the last two dims (iota based)."""
    rows = lax.broadcasted_iota(dtypes.int64, shape, len(shape) - 2)
    cols = lax.broadcasted_iota(dtypes.int64, shape, len(shape) - 1)
    shifted = lax.add(rows, np.int64(k)) if k else rows
    return {"eq": lax.eq, "le": lax.ge, "ge": lax.le}[cmp](shifted, cols)


def _tri_select(fname, m, k, cmp):
    m = operand(fname, m)
    av = aval(m)
    k = static_int(fname, k, "k")
    if av.ndim == 0:
        raise value_error(fname, f"needs an array of rank >= 1, got {describe(m)}")
    nm = (av.shape[0], av.shape[0]) if av.ndim == 1 else av.shape[-2:]
    mask = _tri_mask(nm, k, cmp)
    return _where(mask, m, convert(0, av.dtype))


def tril(m, k=0):
    return _tri_select("tril", m, k, "le")


def triu(m, k=0):
    return _tri_select("triu", m, k, "ge")


def roll(a, shift, axis=None):
    """numpy.roll with static shifts: two slices concatenated."""
    a = operand("roll", a)
    av = aval(a)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), av.shape)
    shifts = shift if isinstance(shift, (list, tuple)) else (shift,)
    axes = axis if isinstance(axis, (list, tuple)) else (axis,)
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    if len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise value_error("roll", "shift and axis must have the same length")
    x = a
    for s, ax in zip(shifts, axes):
        ax = normalize_axis("roll", ax, av.ndim, a)
        s = static_int("roll", s, "shift")
        n = av.shape[ax]
        if isinstance(n, DimExpr):
            x = _roll_dynamic(x, ax, s)
            continue
        if n == 0 or s % n == 0:
            continue
        s %= n
        x = lax.concatenate([_slice_axis(x, ax, n - s, n), _slice_axis(x, ax, 0, n - s)], ax)
    return as_result(x)


def _roll_dynamic(x, ax, s: int):
    """roll by a static shift along an axis of run-time size n: a gather of (i - s) mod n."""
    if s == 0:
        return x
    n1 = lax.max(_d.value(aval(x).shape[ax]), np.int64(1))  # rem by 0 never happens; n = 0 reads nothing
    shift = lax.rem(lax.add(lax.rem(np.int64(-s), n1), n1), n1)  # (-s) mod n, in [0, n)
    idx = lax.rem(lax.add(lax.iota(dtypes.int64, aval(x).shape[ax]), shift), n1)
    return _d.take_clamped(x, ax, idx)


def _slice_axis(x, ax, start, stop):
    s = aval(x).shape
    return lax.slice(x, tuple(start if i == ax else 0 for i in range(len(s))),
                     tuple(stop if i == ax else d for i, d in enumerate(s)))


def repeat(a, repeats, axis=None):
    """numpy.repeat with a static int (or static per-element list of) repeats."""
    a = operand("repeat", a)
    if axis is None:
        a, axis = ravel(a), 0
    av = aval(a)
    ax = normalize_axis("repeat", axis, av.ndim, a)
    if isinstance(repeats, (list, tuple, np.ndarray)) and np.ndim(repeats) == 1 and len(repeats) != 1:
        reps = [static_int("repeat", r, "repeats") for r in repeats]
        if isinstance(av.shape[ax], DimExpr):  # numpy needs one count per element: checked at run time
            _d.check(_d.eq_value(av.shape[ax], len(reps)), f"sprue.numpy.repeat: {len(reps)} repeats for axis"
                     f" {ax} of size {av.shape[ax]} in {describe(a)}{loc()}")
            return take(_d.cut_axis(a, ax, len(reps)), np.repeat(np.arange(len(reps)), reps), axis=ax)
        if len(reps) != av.shape[ax]:
            raise value_error("repeat", f"{len(reps)} repeats for axis {ax} of size {av.shape[ax]} in {describe(a)}")
        return take(a, np.repeat(np.arange(av.shape[ax]), reps), axis=ax)
    r = static_int("repeat", repeats[0] if isinstance(repeats, (list, tuple, np.ndarray)) else repeats, "repeats")
    if r < 0:
        raise value_error("repeat", "negative repeats")
    s = av.shape
    x = lax.broadcast_in_dim(a, s[:ax + 1] + (r,) + s[ax + 1:], tuple(d if d <= ax else d + 1 for d in range(len(s))))
    return as_result(_reshape(x, s[:ax] + (s[ax] * r,) + s[ax + 1:]))


def tile(A, reps):
    a = operand("tile", A)
    reps = tuple(static_int("tile", r, "reps") for r in (reps if isinstance(reps, (list, tuple)) else (reps,)))
    s = aval(a).shape
    nd = builtins.max(len(s), len(reps))
    s = (1,) * (nd - len(s)) + s
    reps = (1,) * (nd - len(reps)) + reps
    x = _reshape(a, s)
    big = tuple(v for r, d in zip(reps, s) for v in (r, d))
    x = lax.broadcast_in_dim(x, big, tuple(range(1, 2 * nd, 2)))
    return as_result(_reshape(x, tuple(r * d for r, d in zip(reps, s))))


def array_split(ary, indices_or_sections, axis=0):
    return _split("array_split", ary, indices_or_sections, axis, strict=False)


def split(ary, indices_or_sections, axis=0):
    return _split("split", ary, indices_or_sections, axis, strict=True)


def _split(fname, ary, ios, axis, strict):
    a = operand(fname, ary)
    av = aval(a)
    ax = normalize_axis(fname, axis, av.ndim, a)
    n = av.shape[ax]
    if isinstance(n, DimExpr) or (isinstance(ios, (list, tuple)) and builtins.any(
            isinstance(i, (DimExpr, Tracer)) for i in ios)):
        return _split_dynamic(fname, a, ios, ax, strict)
    if isinstance(ios, (list, tuple, np.ndarray)):
        cuts = [static_int(fname, i, "split index") for i in ios]
        bounds = [0] + cuts + [n]
    else:
        k = static_int(fname, ios, "sections")
        if k <= 0:
            raise value_error(fname, "number sections must be larger than 0")
        if strict and n % k:
            raise value_error(fname, f"array split does not result in an equal division ({n} into {k})")
        q, r = divmod(n, k)
        sizes = [q + 1] * r + [q] * (k - r)
        bounds = [0] + [int(b) for b in np.cumsum(sizes)]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        lo = int(builtins.min(builtins.max(lo if lo >= 0 else lo + n, 0), n))
        hi = int(builtins.min(builtins.max(hi if hi >= 0 else hi + n, 0), n))
        out.append(as_result(_slice_axis(a, ax, lo, builtins.max(lo, hi))))
    return out


def _split_dynamic(fname, a, ios, ax, strict):
    """split / array_split of an axis of run-time size n. Split points: numpy's slices a[lo:hi].
    Sections k: pieces of n // k (array_split: the first n % k one longer), each a dynamic_slice
    whose start and size are computed from n; split's n % k == 0 is a run-time check."""
    n = aval(a).shape[ax]
    lead = (slice(None),) * ax
    if isinstance(ios, (list, tuple, np.ndarray)):
        cuts = [i if isinstance(i, (DimExpr, Tracer)) else static_int(fname, i, "split index") for i in ios]
        bounds = [None] + cuts + [None]
        return [as_result(getitem(a, lead + (slice(lo, hi),))) for lo, hi in zip(bounds[:-1], bounds[1:])]
    k = static_int(fname, ios, "sections")
    if k <= 0:
        raise value_error(fname, "number sections must be larger than 0")
    q, r = n // k, n % k
    if strict:
        _d.check(_d.eq_value(r, 0), f"sprue.numpy.{fname}: array split does not result in an equal division"
                                     f" ({format_dim(n)} into {k}){loc()}")
    out = []
    for i in range(k):
        if strict:
            start, size = i * q, q
        else:  # numpy: the first n % k pieces have q + 1 elements
            start, size = i * q + _d.dmin(i, r), q + _d.dmin(_d.dmax(r - i, 0), 1)
        starts = [np.int64(0)] * aval(a).ndim
        starts[ax] = _d.value(start) if isinstance(start, DimExpr) else np.int64(start)
        out.append(as_result(lax.bind_dynamic_slice(a, starts, tuple(size if d == ax else s
                                                                for d, s in enumerate(aval(a).shape)))))
    return out
