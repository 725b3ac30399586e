"""Sizes known only at run time, for sprue.numpy: sizes given as values, run-time size arithmetic,
run-time checks, and the memory-safe resizing that stands in for numpy's broadcasting when two sizes
can only be compared at run time.

A dim is an int or a DimExpr (sprue.ir.shapes). Arithmetic that stays a polynomial (n + 1, 2 * n,
n // 2) stays symbolic, so the sizes it makes are provably equal to others. What is not a
polynomial (min(n, 5), numpy's broadcast of n against m) is computed at run time and becomes a
fresh dimension variable bound by the computed i64 value. Within one trace the same computation
gives the same fresh dimension (memoized per builder), so `x[:5] + x[:5]` needs no check.

Everything here is the identity on static sizes: static programs trace exactly as before.
"""
from __future__ import annotations

import weakref
from fractions import Fraction

import numpy as np

from sprue import lax
from sprue.base import dtypes
from sprue.base.errors import SprueMemoryError, SprueValueError
from sprue.ir.core import memory_bytes
from sprue.ir.shapes import DimExpr, DimVar, dim, format_dim, prove_equal
from sprue.lax import GatherDimensionNumbers, GatherScatterMode, gather_p
from sprue.numpy._avals import aval, const, describe, loc, type_error, value_error
from sprue.runtime.results import MEMORY_CHECK
from sprue.trace.inference import assume_broadcast, assume_equal
from sprue.trace.rows import check_broadcast
from sprue.trace.tracing import Tracer, as_dim, current_builder, dim_value

Dim = int | DimExpr

# builder -> {key: value}: fresh dims already computed and checks already emitted in that trace
_memo: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def memo_of():
    """This trace's memo of fresh dims and emitted checks (a throwaway dict outside tracing)."""
    b = current_builder()
    if b is None:
        return {}
    return _memo.setdefault(b, {})


def has_dynamic(shape) -> bool:
    return any(isinstance(d, DimExpr) for d in shape)


def fmt(shape) -> str:
    """(3, n+1), as numpy prints shapes."""
    return "(" + ", ".join(format_dim(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


# -- comparisons that tracing can decide ---------------------------------------------------------
def _bounded(d, upper: bool, floor_zero: bool = False):
    """A polynomial over dimension variables (monomial -> Fraction) bounding d from above (upper)
    or below, each floordiv/mod atom replaced by its bound: e//c by e/c above and (e-c+1)/c below
    (or 0 below, with floor_zero, when e >= 0), e%c by c-1 above and 0 below. None when an atom
    sits in a product (no such bound here)."""
    if isinstance(d, int):
        return {(): Fraction(d)}
    out: dict = {}
    for mono, coef in d.terms:
        atoms = [(a, p) for a, p in mono if not isinstance(a, DimVar)]
        if not atoms:
            out[mono] = out.get(mono, 0) + Fraction(coef)
            continue
        if len(mono) != 1 or atoms[0][1] != 1:
            return None
        atom = atoms[0][0]
        up = upper if coef > 0 else not upper  # the atom's bound that bounds coef * atom as asked
        if atom.op == "mod":
            part = {(): Fraction(atom.c - 1 if up else 0)}
        elif not up and floor_zero and nonneg(atom.expr):
            part = {}
        else:
            inner = _bounded(atom.expr, up)
            if inner is None:
                return None
            part = {m: c / atom.c for m, c in inner.items()}
            if not up:
                part[()] = part.get((), 0) - Fraction(atom.c - 1, atom.c)
        for m, c in part.items():
            out[m] = out.get(m, 0) + coef * c
    return out


def _lower(d) -> Fraction | None:
    """A lower bound of d over non-negative dimension variables, or None: the better of bounding
    e//c below by (e-c+1)/c (n - 2*(n//2) >= 0) and by 0 (n//2 >= 0)."""
    best = None
    for floor_zero in (False, True):
        poly = _bounded(d, upper=False, floor_zero=floor_zero)
        if poly is None or any(c < 0 for m, c in poly.items() if m != ()):
            continue
        lo = poly.get((), Fraction(0))
        best = lo if best is None else max(best, lo)
    return best


def nonneg(d) -> bool:
    """d >= 0 provably (dimension variables are non-negative)."""
    if isinstance(d, int):
        return d >= 0
    lo = _lower(d)
    return lo is not None and lo >= 0


def le(a, b) -> bool | None:
    """a <= b: True / False when provable, None when only run time knows."""
    diff = b - a if isinstance(b, DimExpr) or not isinstance(a, DimExpr) else -(a - b)
    if isinstance(diff, int):
        return diff >= 0
    lo = _lower(diff)
    if lo is not None and lo >= 0:
        return True
    lo = _lower(-diff)
    if lo is not None and lo > 0:
        return False
    return None


def dims_equal(a, b) -> bool:
    """Provably equal dims."""
    return prove_equal(a, b) is True


def exact_div(a, b):
    """a / b as a dim when b divides a term by term (3*n / n, 6*n*m / (2*m)); else None."""
    if isinstance(b, int):
        return a // b if b and (a % b == 0) else None
    if len(b.terms) != 1:
        return None
    (bm, bc), = b.terms
    bpow = dict(bm)
    out: dict = {}
    for m, c in (a.terms if isinstance(a, DimExpr) else (((), a),)):
        powers = dict(m)
        if c % bc or any(powers.get(atom, 0) < p for atom, p in bpow.items()):
            return None
        rest = tuple((atom, p - bpow.get(atom, 0)) for atom, p in m if p - bpow.get(atom, 0))
        out[rest] = out.get(rest, 0) + c // bc
    return DimExpr.make(out)


def maybe_zero(d) -> bool:
    return prove_equal(d, 0) is not False


def maybe_one(d) -> bool:
    return prove_equal(d, 1) is not False


# -- values of sizes -----------------------------------------------------------------------------
def value(d):
    """The run-time value of a dim as an operand: an int, or an i64[] tracer."""
    return dim_value(d)


def weak_value(d):
    """A dim used as a number (`x.shape[0] * 2.0`): numpy sees a Python int, so a weak i64."""
    if isinstance(d, int):
        return d
    memo = memo_of()
    if ("weak", d) in memo:
        return memo[("weak", d)]
    strong = dim_value(d)
    b = current_builder()
    if b is not None:  # the weak copy also has the value d: keep the strong one as d's value
        b.dim_values.setdefault(d, strong)
    out = memo[("weak", d)] = lax.convert_element_type_p.bind(strong, new_dtype=dtypes.int64, weak_type=True,
                                                               sharding=None)
    return out


def fresh(key, compute) -> Dim:
    """The dim whose value compute() gives (an i64 tracer or an int), memoized under key."""
    memo = memo_of()
    if key in memo:
        return memo[key]
    v = compute()
    d = v if isinstance(v, int) else as_dim(v)
    memo[key] = d
    return d


def _i64(v):
    return v if isinstance(v, Tracer) else np.int64(v)


def _le_here(a, b) -> bool:
    """a <= b provably, or because this trace checked b - a >= 0 (jnp.zeros(n - 4) did: a later
    x[:n - 4] then has n - 4 elements, not max(0, n - 4))."""
    return bool(le(a, b)) or (isinstance(b - a, DimExpr) and ("check", ("nonneg", b - a)) in memo_of())


def dmax(a, b) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    if _le_here(a, b):
        return b
    if _le_here(b, a):
        return a
    return fresh(("max",) + tuple(sorted((a, b), key=str)),
                 lambda: lax.max(_i64(value(a)), _i64(value(b))))


def dmin(a, b) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    if _le_here(a, b):
        return a
    if _le_here(b, a):
        return b
    return fresh(("min",) + tuple(sorted((a, b), key=str)),
                 lambda: lax.min(_i64(value(a)), _i64(value(b))))


# -- run-time checks -----------------------------------------------------------------------------
def check(ok, message: str, key=None):
    """lax.check(ok, message), once per key in this trace. ok: a bool tracer (or a Python bool:
    False raises now, True needs nothing)."""
    if not isinstance(ok, Tracer):
        if not bool(ok):
            raise SprueValueError(message)
        return
    if key is not None:
        memo = memo_of()
        if ("check", key) in memo:
            return
        memo[("check", key)] = True
    lax.check(ok, message)


def eq_value(d, c):
    """The bool scalar d == c (dims or ints): a Python bool when tracing can decide."""
    p = prove_equal(d, c)
    if p is not None:
        return p
    return lax.eq(_i64(value(d)), _i64(value(c)))


def _fold(conds, absorbing: bool, combine):
    """Combine bool scalars with `combine`, folding Python bools: `absorbing` decides the result,
    its negation drops out."""
    if any(c is absorbing for c in conds):
        return absorbing
    out = [c for c in conds if c is not (not absorbing)]
    if not out:
        return not absorbing
    r = out[0]
    for c in out[1:]:
        r = combine(r, c)
    return r


def any_of(*conds):
    """Logical or of bool scalars, Python bools folded."""
    return _fold(conds, True, lax.bitwise_or)


def all_of(*conds):
    """Logical and of bool scalars, Python bools folded."""
    return _fold(conds, False, lax.bitwise_and)


# -- sizes given by the user ---------------------------------------------------------------------
def size_arg(fname: str, v, what: str = "a shape dimension") -> Dim:
    """A size argument: a static int, a dim (x.shape[0], n + 1), or a traced integer scalar. A
    traced size becomes a dimension; dimensions are non-negative, which a run-time check makes
    true (numpy raises for negative sizes too)."""
    if isinstance(v, DimExpr):  # x.shape[0] - 4: numpy raises where it is negative, so check it
        if not nonneg(v):
            check(lax.ge(_i64(value(v)), np.int64(0)),
                  f"sprue.numpy.{fname}: negative dimensions are not allowed ({what} {v} is negative at run"
                  f" time){loc()}", key=("nonneg", v))
        return v
    if isinstance(v, Tracer):
        if v.ndim != 0 or not dtypes.is_int(v.dtype):
            raise type_error(fname, f"{what} must be an integer scalar, got a traced {v.aval.str_short()}")
        d = as_dim(v)
        if isinstance(d, DimExpr) and not _checked_nonneg(d):
            check(lax.ge(_i64(value(d)), np.int64(0)),
                  f"sprue.numpy.{fname}: negative dimensions are not allowed (a size given at run time is"
                  f" negative){loc()}", key=("nonneg", d))
        return d
    # (Catalyst's and JAX's words for a shape, which their users' code matches)
    said = " (Shapes must be 1D sequences of integer scalars)" if what == "a shape dimension" else ""
    if isinstance(v, (bool, np.bool_)):
        raise type_error(fname, f"{what} must be an int, got {type(v).__name__} {v!r}{said}")
    try:
        n = int(v.__index__())
    except (AttributeError, TypeError):
        raise type_error(fname, f"{what} must be an int, got {type(v).__name__} {v!r}{said}") from None
    return n


def _checked_nonneg(d) -> bool:
    """d >= 0 is known in this trace: checked, or implied by checks of its variables (n + 1)."""
    memo = memo_of()
    if ("check", ("nonneg", d)) in memo:
        return True
    return nonneg(d) and all(("check", ("nonneg", dim(v))) in memo for v in d.dim_vars())


def _sizes_of_array(fname: str, shape) -> list:
    """The entries of a 1-D integer array given as a shape: Python ints, or traced scalars (sizes)."""
    a = aval(shape)
    if a.ndim != 1:
        raise type_error(fname, f"a shape given as an array must be 1-D (one size per axis), got {a.str_short()}")
    if not dtypes.is_int(a.dtype):
        raise type_error(fname, f"a shape given as an array must have an integer dtype, got {a.str_short()}")
    if not isinstance(a.shape[0], int):
        raise type_error(fname, f"a shape given as an array must have a length known when tracing (its length is"
                                f" the result's rank), got {a.str_short()}")
    known = shape.builder.const_value(shape.jvar) if isinstance(shape, Tracer) else shape
    if known is not None:   # numpy's array, or jnp.array([2, 1, 3]) made in the trace: static sizes
        return [int(n) for n in known]
    return [lax.squeeze(lax.slice(shape, (k,), (k + 1,)), (0,)) for k in range(a.shape[0])]


def shape_arg(fname: str, shape) -> tuple:
    """A shape argument: an int/dim/traced int, a sequence of them, or a 1-D integer array of sizes,
    concrete or traced (Catalyst's dynamic arrays: `zeros(jnp.array([n, 3]))`, each traced entry a
    run-time size); negative static sizes raise."""
    if isinstance(shape, (np.ndarray, Tracer)) and np.ndim(shape) >= 1:
        shape = _sizes_of_array(fname, shape)
    if isinstance(shape, (list, tuple)):
        dims = tuple(size_arg(fname, d) for d in shape)
    else:
        dims = (size_arg(fname, shape, "shape"),)
    if any(isinstance(d, int) and d < 0 for d in dims):
        raise value_error(fname, f"negative dimensions are not allowed: {fmt(dims)}")
    return dims


def check_allocation(fname: str, dims, dtype) -> None:
    """An array of shape `dims` (some sizes given at run time) must fit in memory: its byte count is
    computed in float64 (no integer overflow, whatever the sizes) and checked at run time. A failed
    check makes every later size 0 (sprue.lowering.rules_common: LoweringContext.guarded), so huge or
    overflowing sizes raise an error and never reach the allocator. Either way the error is a
    SprueMemoryError: raised now when the static sizes alone are too large, else by the runtime,
    which recognizes the check by its message (runtime/results.py MEMORY_CHECK). Fully static
    shapes are checked when every equation is traced (sprue.ir.core.check_fits_in_memory)."""
    dynamic = [d for d in dims if isinstance(d, DimExpr)]
    if not dynamic:
        return
    if len(dynamic) == 1 and all(v.is_axis for v in dynamic[0].dim_vars()) \
            and all(abs(c) <= 2 and len(m) == 1 and m[0][1] == 1 for m, c in dynamic[0].terms if m):
        return   # about the size of an argument's axis (n, n + 1, 2 * n): it fits like the argument
    itemsize = np.dtype(dtype).itemsize
    static = float(np.prod([float(d) for d in dims if not isinstance(d, DimExpr)])) * itemsize
    limit = memory_bytes()
    what = f"an array of shape {fmt(dims)} and dtype {np.dtype(dtype).name} would take {MEMORY_CHECK}" \
           f" ({limit} bytes)"
    if static > limit:
        raise SprueMemoryError(f"sprue.numpy.{fname}: {what} even where its sizes known only at run time"
                               f" are 1{loc()}")
    if len(dynamic) == 1 and _is_variable(dynamic[0]):   # one run-time size: an integer bound
        ok = lax.le(_i64(value(dynamic[0])), np.int64(int(limit // max(static, 1.0))))
    else:   # a product, or a size computed from sizes (n * n): in float64, which cannot overflow
        total = np.float64(max(static, 1.0))
        for d in dynamic:
            total = lax.mul(total, _float_bound(d))
        ok = lax.le(total, np.float64(limit))
    check(ok, f"sprue.numpy.{fname}: {what} (a size given at run time is too large)"
                                            f"{loc()}", key=("fits", tuple(dims), itemsize))


def _is_variable(d: DimExpr) -> bool:
    """d is a dimension variable itself (its value is an i64 the program was given or computed)."""
    return len(d.terms) == 1 and d.terms[0][1] == 1 and len(d.terms[0][0]) == 1 \
        and d.terms[0][0][0][1] == 1 and isinstance(d.terms[0][0][0][0], DimVar)


def _float_bound(d):
    """d evaluated in float64 (an f64[] tracer), so that a product of sizes cannot wrap around as its
    i64 value does; a floordiv atom e // c by e / c, a mod atom by c - 1 (upper bounds)."""
    total = None
    for mono, coef in d.terms:
        term = np.float64(coef)
        for atom, power in mono:
            if isinstance(atom, DimVar):
                v = lax.convert_element_type(_i64(value(dim(atom))), np.float64)
            elif atom.op == "mod":
                v = np.float64(atom.c - 1)
            else:
                v = lax.div(_float_bound(atom.expr), np.float64(atom.c))
            for _ in range(power):
                term = lax.mul(term, v)
        total = term if total is None else lax.add(total, term)
    return total


# -- memory-safe resizing ------------------------------------------------------------------------
def gather(operand, indices, dn, slice_sizes, mode=GatherScatterMode.CLIP, fill_value=None):
    """lax.gather, with window sizes known only at run time passed as trailing operands."""
    param, sizes = lax._split_dims(slice_sizes)
    return gather_p.bind(operand, indices, *sizes, dimension_numbers=dn, slice_sizes=param,
                         indices_are_sorted=False, unique_indices=False, mode=mode, fill_value=fill_value)


def pad_one(x, axis: int):
    """x with one zero element appended along axis (so that a clamped index always has a target)."""
    zero = const(aval(x).dtype, 0)
    return lax.pad(x, zero, [(0, 1 if i == axis else 0, 0) for i in range(aval(x).ndim)])


def take_clamped(x, axis: int, idx):
    """x[..., idx, ...] along axis with idx an i64[r] tracer, each index clamped into the axis.
    Never reads outside x: a clamped gather from an axis that is empty at run time reads nothing and
    gives zeros (sprue.lax's gather, its lowering alike), so only a static 0 is padded by one zero
    element, for the shape rule. Padding a run-time axis too cost every read a test against the
    padding (a PageRank step's gather of x[src] with a run-time n: 2x the static version's time)."""
    shape = aval(x).shape
    n = shape[axis]
    if isinstance(n, int) and n == 0:  # (a static 0 costs nothing to pad)
        x = pad_one(x, axis)
        shape = aval(x).shape
    nd = len(shape)
    dn = GatherDimensionNumbers(offset_dims=tuple(i for i in range(nd) if i != axis), collapsed_slice_dims=(axis,),
                                start_index_map=(axis,))
    r = aval(idx).shape[0]
    ind = lax.broadcast_in_dim(idx, (r, 1), (0,))
    return gather(x, ind, dn, tuple(1 if i == axis else d for i, d in enumerate(shape)))


def resize_axis(x, axis: int, target: Dim):
    """numpy's broadcast of one axis, by index: element i of the result is x[i] (x[0] when the axis
    has size 1), clamped. Used once a check has asserted that the size is target or 1; should the
    check fail, the clamp keeps every read inside x."""
    n = aval(x).shape[axis]
    idx = lax.iota(dtypes.int64, target)
    if maybe_one(n):  # all indices 0 when the axis has size 1: idx * (n != 1)
        idx = lax.mul(idx, lax.convert_element_type(lax.ne(value(n), np.int64(1)), dtypes.int64))
    return take_clamped(x, axis, idx)


def cut_axis(x, axis: int, target: Dim):
    """The first `target` elements of x along axis, for a target asserted (by a check) to be at most
    the axis size; clamped, so a failed check never reads outside x."""
    return take_clamped(x, axis, lax.iota(dtypes.int64, target))


# -- numpy's broadcasting with sizes known only at run time ---------------------------------------
def broadcast_dim(fname: str, dims: list, xs) -> Dim:
    """The broadcast of one axis's sizes (static 1s dropped). Sizes that only run time can compare
    get a check (they must be equal or 1) and a result size numpy's rule gives at run time."""
    out = 1
    for d in dims:
        if isinstance(d, int) and d == 1:
            continue
        out = d if (isinstance(out, int) and out == 1) else _broadcast_pair(fname, out, d, xs)
    return out


def _broadcast_pair(fname, a, b, xs) -> Dim:
    p = prove_equal(a, b)
    if p:
        return a
    if p is False and not maybe_one(a) and not maybe_one(b):
        raise value_error(fname, f"operands could not be broadcast together: {describe(*xs)}")
    check_broadcast(fname, a, b)   # (a row's axes cannot be lined up with another size's: OCANNL's rows)
    assumed = assume_broadcast(fname, a, b)   # (a size nobody gave, while shapes are inferred)
    if assumed is not None:
        return assumed
    ok = any_of(eq_value(a, b), eq_value(a, 1), eq_value(b, 1))
    check(ok, f"sprue.numpy.{fname}: operands {describe(*xs)} do not broadcast{loc()}",
          key=("bcast",) + tuple(sorted((a, b), key=str)))
    if isinstance(a, int):  # a static size other than 1 is the result whenever the check passes
        return a
    if isinstance(b, int):
        return b

    def compute():
        va, vb = value(a), value(b)
        m = lax.min(va, vb)
        return lax.select(lax.eq(vb, np.int64(1)), va, lax.select(lax.eq(va, np.int64(1)), vb, m))
    return fresh(("bcast",) + tuple(sorted((a, b), key=str)), compute)


def unify_equal(fname: str, dims: list, message: str) -> Dim:
    """One size for dims numpy requires equal (concatenated arrays' other axes, contracted axes):
    provably equal dims need nothing; others get a check and the result is the first static one,
    else the smallest (so resizing to it only ever cuts). While shapes are inferred
    (sprue.trace.inference), a size nobody gave is recorded equal instead."""
    assumed = assume_equal(fname, dims)
    if assumed is not None:
        return assumed
    out = dims[0]
    for d in dims[1:]:
        p = prove_equal(out, d)
        if p:
            continue
        if p is False:
            raise value_error(fname, message)
        check(eq_value(out, d), f"sprue.numpy.{fname}: {message}{loc()}",
              key=("eq",) + tuple(sorted((out, d), key=str)))
        out = out if isinstance(out, int) else d if isinstance(d, int) else dmin(out, d)
    return out


def fit_axis(x, axis: int, target: Dim):
    """x with its axis brought to target after a unify_equal check: nothing when provably equal,
    else a clamped cut (the target is the smallest size, or the checked-equal static one)."""
    if prove_equal(aval(x).shape[axis], target):
        return x
    return cut_axis(x, axis, target)


def needs_resize(d, target) -> bool:
    """An axis of size d broadcast to target needs the index-based resize (not broadcast_in_dim):
    d is not a static 1 and not provably the target."""
    return not (isinstance(d, int) and d == 1) and prove_equal(d, target) is not True


def check_broadcast_to(fname: str, x, shape, what: str):
    """Checks that x broadcasts to shape where only run time can tell (static mismatches are the
    caller's compile-time error); `what` names x in the message."""
    xs = aval(x).shape
    nd = len(shape)
    for i, d in enumerate(xs):
        t = shape[nd - len(xs) + i]
        if not needs_resize(d, t) or (isinstance(d, int) and isinstance(t, int)):
            continue
        if prove_equal(d, t) is False and not maybe_one(d):
            raise value_error(fname, f"{what} {describe(x)} cannot be broadcast to shape {fmt(shape)}")
        check(any_of(eq_value(d, t), eq_value(d, 1)),
              f"sprue.numpy.{fname}: {what} {describe(x)} cannot be broadcast to shape {fmt(shape)}{loc()}")
