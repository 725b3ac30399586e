"""Basic indexing along axes whose size, or whose slice bounds, are known only at run time:
x[1:], x[:-1], x[::2], x[:k], x[i:j], x[i] on dynamically-shaped arrays, with numpy's clamping.

A slice a:b:k of an axis of size n selects, in numpy, the range [A, B) of a normalized axis with
A and B clamped into [0, n]: for k > 0 the axis itself, with A = a (n + a when a < 0, 0 when
None) and B = b (n + b, n); for k < 0 the reversed axis, with A = n - 1 - a (-1 - a when a < 0,
0 when None) and B = n - 1 - b (-1 - b, n). Its contiguous length is
    L0 = max(0, min(B, n) - max(A, 0))
and the result has ceil(L0 / |k|) elements. That is a polynomial when tracing can order the terms
(x[::2] of f64[n] has (n+1)//2 elements); otherwise it is computed at run time and becomes a fresh
dimension, memoized by the expression, so x[1:] and x[:-1] (both max(0, n - 1)) share it.

The data moves with `rev`, then `dynamic_slice` from A with size L0 (JAX's dynamic_slice clamps
the start into [0, n - L0], which is exactly max(A, 0) whenever L0 > 0), then, when |k| > 1, a
gather of every |k|-th element. No lax.slice is emitted on an array with a symbolic size: its
static limit params would have to hold the DimExpr, which the eager reference cannot evaluate;
dynamic_slice and gather take run-time sizes as operands.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sprue import lax
from sprue.base import dtypes
from sprue.ir.shapes import DimExpr
from sprue.numpy import _dims as _d
from sprue.numpy._avals import aval, index_error, loc, type_error
from sprue.numpy._promote import convert
from sprue.numpy._reductions import lax_reduce
from sprue.trace.tracing import Tracer, as_dim


def is_traced_bound(v) -> bool:
    return isinstance(v, (Tracer, DimExpr))


def needs_dynamic(s: slice, n) -> bool:
    """This slice of an axis of size n needs the dynamic path (symbolic size or traced bounds)."""
    return not isinstance(n, int) or any(is_traced_bound(v) for v in (s.start, s.stop))


@dataclass
class Bounds:
    """A slice normalized as above: A, B (ints, dims or i64 tracers), |k|, and whether the axis is
    reversed first; `traced` when A or B is a run-time value rather than a dim."""
    A: object
    B: object
    k: int
    reverse: bool
    traced: bool


def _as_value(v):
    """A traced bound as an i64 scalar (numpy's index semantics: any integer type)."""
    if isinstance(v, DimExpr):
        return _d.value(v)
    if v.ndim != 0 or not dtypes.is_int(v.dtype):
        raise type_error("getitem", f"slice bounds must be integer scalars, got a traced {v.aval.str_short()}")
    return convert(v, dtypes.int64)


def _raw(v, n, default, forward: bool):
    """A or B of one bound: static arithmetic on dims when the bound is static, else a select."""
    if v is None:
        return default
    if isinstance(v, DimExpr) and not _d.nonneg(v):  # may be negative (n - 5): counted from the end then
        v = _d.value(v)
    if isinstance(v, Tracer):
        v = _as_value(v)
        nv = _val(n)
        wrapped = lax.add(v, nv) if forward else lax.sub(np.int64(-1), v)
        plain = v if forward else lax.sub(lax.sub(nv, np.int64(1)), v)
        return lax.select(lax.lt(v, np.int64(0)), wrapped, plain)
    if isinstance(v, DimExpr):  # a non-negative dim (x.shape[0] // 2): plain arithmetic on dims
        return v if forward else n - 1 - v
    v = int(v)
    if forward:
        return n + v if v < 0 else v
    return -1 - v if v < 0 else n - 1 - v


def bounds(s: slice, n) -> Bounds:
    step = 1 if s.step is None else s.step
    if isinstance(step, (Tracer, DimExpr)):
        raise type_error("getitem", "slice steps must be static ints")
    step = int(step)
    if step == 0:
        raise index_error("slice step cannot be zero")
    fwd = step > 0
    A = _raw(s.start, n, 0, fwd)
    B = _raw(s.stop, n, n, fwd)
    return Bounds(A, B, abs(step), not fwd, isinstance(A, Tracer) or isinstance(B, Tracer))


def contiguous_length(b: Bounds, n) -> _d.Dim:
    """L0 = max(0, min(B, n) - max(A, 0)), symbolic when tracing can decide the min and max."""
    if not b.traced:
        return _d.dmax(0, _d.dmin(b.B, n) - _d.dmax(b.A, 0))
    hi = lax.min(_val(b.B), _val(n))
    lo = lax.max(_val(b.A), np.int64(0))
    return as_dim(lax.max(lax.sub(hi, lo), np.int64(0)))


def length(b: Bounds, n) -> _d.Dim:
    L0 = contiguous_length(b, n)
    return L0 if b.k == 1 else (L0 + b.k - 1) // b.k


def first_index(b: Bounds, n):
    """The index (in the original axis) of the first element selected, when any is: an int or an
    i64 tracer."""
    A = b.A
    if isinstance(A, Tracer):
        lo = lax.max(A, np.int64(0))
    elif isinstance(A, int):
        lo = max(A, 0)
    else:
        lo = _d.dmax(A, 0)
    if not b.reverse:
        return lo if isinstance(lo, (int, Tracer)) else _d.value(lo)
    if isinstance(lo, Tracer) or not isinstance(n - 1 - lo, int):
        nv = _d.value(n)
        lo_v = lo if isinstance(lo, Tracer) else _d.value(lo)
        return lax.sub(lax.sub(_i64(nv), np.int64(1)), _i64(lo_v))
    return n - 1 - lo


def _i64(v):
    return v if isinstance(v, Tracer) else np.int64(v)


def _val(v):
    """A bound or size as an i64 operand: a tracer, or a static int."""
    if isinstance(v, Tracer):
        return v
    return _i64(v if isinstance(v, int) else _d.value(v))


def _start_operand(A):
    """dynamic_slice's start for A (it clamps into [0, n - L0] itself)."""
    if isinstance(A, Tracer):
        return A
    return _i64(A if isinstance(A, int) else _d.value(A))


def slice_axis(x, ax: int, s: slice):
    """x[..., s, ...] along axis ax (the dynamic path): rev, dynamic_slice, strided slice."""
    shape = aval(x).shape
    n = shape[ax]
    b = bounds(s, n)
    y = lax.rev(x, (ax,)) if b.reverse and not (isinstance(n, int) and n <= 1) else x
    L0 = contiguous_length(b, n)
    if _d.le(n, L0) is not True:  # not the whole axis: dynamic_slice from A, L0 elements
        starts = [np.int64(0)] * len(shape)
        starts[ax] = _start_operand(b.A)
        y = lax.bind_dynamic_slice(y, starts, tuple(L0 if i == ax else d for i, d in enumerate(shape)))
    if b.k > 1:  # every k-th element: indices iota(ceil(L0 / k)) * k, all below L0
        idx = lax.mul(lax.iota(dtypes.int64, (L0 + b.k - 1) // b.k), np.int64(b.k))
        y = _d.take_clamped(y, ax, idx, pad=False)
    return y


def index_axis(x, ax: int, i):
    """x[..., i, ...] along an axis of symbolic size n, the axis removed: numpy's IndexError for a
    static i out of bounds becomes a run-time check; a traced i is clamped (as sprue's gathers
    clamp), an empty axis a run-time error. The element is read with a dynamic_slice of
    min(n, 1) elements reduced over the axis, which never reads outside x, even when n is 0."""
    shape = aval(x).shape
    n = shape[ax]
    if isinstance(i, Tracer):
        if _d.maybe_zero(n):
            _d.check(lax.ne(_val(n), np.int64(0)), f"sprue.numpy.getitem: index into axis {ax} of size 0{loc()}",
                     key=("nonempty", n))
        iv = convert(i, dtypes.int64)
        start = lax.select(lax.lt(iv, np.int64(0)), lax.add(iv, _val(n)), iv)
    else:
        i = int(i)
        need = i + 1 if i >= 0 else -i  # numpy: -n <= i < n
        if _d.le(need, n) is not True:
            if _d.le(need, n) is False:
                raise index_error(f"index {i} is out of bounds for axis {ax} with size {n}")
            _d.check(lax.ge(_val(n), np.int64(need)),
                     f"sprue.numpy.getitem: index {i} is out of bounds for axis {ax} with size {n}{loc()}",
                     key=("inbounds", n, need))
        start = _start_operand(i if i >= 0 else n + i)
    one = _d.dmin(n, 1)
    starts = [np.int64(0)] * len(shape)
    starts[ax] = start
    y = lax.bind_dynamic_slice(x, starts, tuple(one if k == ax else d for k, d in enumerate(shape)))
    return lax_reduce("max", y, (ax,))
