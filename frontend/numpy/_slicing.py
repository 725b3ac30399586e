"""Basic indexing along axes whose size, or whose slice bounds, are known only at run time:
x[1:], x[:-1], x[::2], x[:k], x[i:j], x[i] on dynamically-shaped arrays, with numpy's clamping.

A slice a:b:k of an axis of size n selects, in numpy, the range [A, B) of a normalized axis with
A and B clamped into [0, n]: for k > 0 the axis itself, with A = a (n + a when a < 0, 0 when
None) and B = b (n + b, n); for k < 0 the reversed axis, with A = n - 1 - a (-1 - a when a < 0,
0 when None) and B = n - 1 - b (-1 - b, n). Its contiguous length is
    L0 = max(0, min(B, n) - max(A, 0))
and the result has ceil(L0 / |k|) elements. That is a polynomial when tracing can order the terms
(x[::2] of f64[n] has (n+1)//2 elements); otherwise it is computed at run time and becomes a fresh
dimension, memoized by the expression, so x[1:] and x[:-1] (both max(0, n - 1)) share it. Bounds
computed from sizes (x[:, 0:n - 4], n = x.shape[1]) are dims too, counted from the start even
where they may be negative, so x[:, 0:n - 4] and x[:, 1:n - 3] share max(0, n - 4); see "bounds
computed from sizes" below for how results stay numpy's.

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
from sprue.ir.shapes import DimExpr, substitute
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
    """A or B of one bound: static arithmetic on dims when the bound is static or a dim, else a
    select. A dim bound is taken as counted from the start even where it may be negative (see
    _assume_nonneg)."""
    if v is None:
        return default
    if isinstance(v, Tracer):
        v = _as_value(v)
        nv = _val(n)
        wrapped = lax.add(v, nv) if forward else lax.sub(np.int64(-1), v)
        plain = v if forward else lax.sub(lax.sub(nv, np.int64(1)), v)
        return lax.select(lax.lt(v, np.int64(0)), wrapped, plain)
    if isinstance(v, DimExpr):  # a dim (x.shape[0] // 2, n - 4): plain arithmetic on dims
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
    b = Bounds(A, B, abs(step), not fwd, isinstance(A, Tracer) or isinstance(B, Tracer))
    _assume_nonneg(s, n, b)
    return b


# -- bounds computed from sizes ------------------------------------------------------------------
# x[:, 0:n - 4] with n = x.shape[1]: numpy counts a negative stop from the end, so the length is
# the piecewise n - 4 (n >= 4) / max(0, min(2n - 4, n)) (n < 4), which no polynomial is. Taking a
# bound that is a dim as counted from the start keeps the length a polynomial-or-clamp of dims
# (max(0, n - 4)), the same expression x[:, 1:n - 3] and x[:, 4:] get, so `x[:, 0:n-4] +
# x[:, 1:n-3]` needs no broadcast check or index-based resize (the way JAX's shape polymorphism
# and TVM Relax's symbolic shapes compute slice sizes on dimension expressions; JAX refuses the
# bound outright unless its sign is decidable). Results stay numpy's: wherever a bound may be
# negative, the sizes at which the two readings select different elements are enumerated when
# they are finitely many (a bound a*n + b, a > 0, is negative only for n < -b/a); when none
# differs nothing is emitted (x[:, 1:n - 3] reads the same either way: at n < 3 both are
# empty), otherwise a run-time check (a few scalar ops, once) raises exactly where the two
# differ (x[:, 0:n - 4] at n = 3 is numpy's x[:, 0:2], here empty).
_ENUMERATE_LIMIT = 4096


def _assumed(s: slice):
    """The dim bounds of s that may be negative (not provably, nor checked in this trace, >= 0)."""
    memo = _d.memo_of()
    return [v for v in (s.start, s.stop) if isinstance(v, DimExpr) and not _d.nonneg(v)
            and ("check", ("nonneg", v)) not in memo]


def _selection(start, stop, step: int, n: int, wrap_dims: bool, dim_bounds) -> list:
    """The indices s selects on an axis of size n (ints); dim bounds (positions in dim_bounds)
    count from the end when negative only if wrap_dims (numpy), else as _raw does."""
    fwd = step > 0

    def raw(v, default, is_dim):
        if v is None:
            return default
        if v < 0 and (wrap_dims or not is_dim):
            return n + v if fwd else -1 - v
        return v if fwd else n - 1 - v
    A = raw(start, 0, 0 in dim_bounds)
    B = raw(stop, n, 1 in dim_bounds)
    lo, hi = max(A, 0), min(B, n)
    picked = list(range(lo, hi, abs(step)))
    return picked if fwd else [n - 1 - i for i in picked]


def _may_differ(s: slice, n, assumed) -> bool:
    """Whether some run-time size makes numpy's reading of s differ from sprue's (see above):
    False when every dim involved is one variable t and the bounds are negative only below a
    small t, at each of which the two readings select the same indices."""
    exprs = [d for d in (n, s.start, s.stop) if isinstance(d, DimExpr)]
    vars_ = set().union(*(d.dim_vars() for d in exprs))
    if len(vars_) != 1:
        return True
    t, = vars_
    limit = 0
    for v in assumed:
        terms = dict(v.terms)
        coef = terms.get(((t, 1),), 0)
        if set(terms) - {(), ((t, 1),)} or coef <= 0:
            return True  # not a*t + b with a > 0: no finite set of sizes to look at
        limit = max(limit, -(terms.get((), 0) // coef))  # v >= 0 from t = ceil(-b / a) on
    if limit > _ENUMERATE_LIMIT:
        return True
    step = 1 if s.step is None else int(s.step)
    dim_pos = {i for i, v in enumerate((s.start, s.stop)) if isinstance(v, DimExpr)}
    for value in range(limit):
        at_t = {t: value}
        nv = substitute(n, at_t)
        if nv < 0:
            continue
        start, stop = (None if v is None else int(substitute(v, at_t)) for v in (s.start, s.stop))
        if _selection(start, stop, step, nv, True, dim_pos) != _selection(start, stop, step, nv, False, dim_pos):
            return True
    return False


def _assume_nonneg(s: slice, n, b: Bounds) -> None:
    """The run-time check that numpy's reading of s is sprue's, where it may not be (see above)."""
    assumed = _assumed(s)
    if not assumed or not _may_differ(s, n, assumed):
        return
    key = ("slice-bounds", s.start, s.stop, s.step, n)
    memo = _d.memo_of()
    if ("check", key) in memo:
        return
    # the same elements: the same length and, unless empty, the same first index (A clamped at 0
    # in the normalized axis: both readings go the same direction)
    exact = bounds(slice(*(_d.value(v) if isinstance(v, DimExpr) else v for v in (s.start, s.stop, s.step))), n)
    length, exact_length = _traced_length(b, n), _traced_length(exact, n)
    same = max(b.A, 0) == max(exact.A, 0) if isinstance(b.A, int) and isinstance(exact.A, int) \
        else lax.eq(_max0(b.A), _max0(exact.A))
    ok = _d.all_of(lax.eq(length, exact_length), _d.any_of(lax.eq(length, np.int64(0)), same))
    names = ", ".join(str(v) for v in assumed)
    _d.check(ok, f"sprue.numpy.getitem: a slice bound computed from sizes ({names}) is negative at run time, where"
                 f" numpy counts it from the end of the axis; sprue counts such bounds from the start (so that"
                 f" slice sizes stay symbolic) and here the two select different elements: write the bound so"
                 f" that it is not negative{loc()}", key=key)


def _traced_length(b: Bounds, n):
    """L0 (see contiguous_length) as an i64 scalar computed at run time."""
    hi = lax.min(_val(b.B), _val(n))
    return lax.max(lax.sub(hi, _max0(b.A)), np.int64(0))


def _max0(A):
    """max(A, 0) as an i64 operand (folded for a static A)."""
    return np.int64(max(A, 0)) if isinstance(A, int) else lax.max(_val(A), np.int64(0))


def contiguous_length(b: Bounds, n) -> _d.Dim:
    """L0 = max(0, min(B, n) - max(A, 0)), symbolic when tracing can decide the min and max."""
    if not b.traced:
        return _d.dmax(0, _d.dmin(b.B, n) - _d.dmax(b.A, 0))
    return as_dim(_traced_length(b, n))


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
        y = _d.take_clamped(y, ax, idx)
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
