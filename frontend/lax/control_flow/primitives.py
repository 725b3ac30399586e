"""Control-flow primitives: for_loop, while, cond and scan, each holding nested jaxprs.

Every nested jaxpr is a ClosedJaxpr *without* consts of its own: what its body closed over (numpy
arrays, tracers of an enclosing trace) was hoisted into leading invars, and the equation passes the
values as its first operands (`body_nconsts`, `cond_nconsts`, `num_consts`), as JAX does. Operands:

    for_loop[body_jaxpr body_nconsts ...]      consts... lower upper step init...
    while[body_jaxpr body_nconsts cond_jaxpr cond_nconsts]   cond_consts... body_consts... init...
    cond[branches]                             index operands...   (index clamped into range)
    scan[jaxpr num_consts num_carry length reverse ...]      consts... init... xs...

Body signatures: for_loop (consts, i, carry) -> carry; while cond (consts, carry) -> bool[] and
body (consts, carry) -> carry; cond branch k (operands) -> outs; scan (consts, carry, x) -> (carry, y).

Dynamic shapes. A carry's type may mention dimension variables of the enclosing jaxpr (bound, in
the body, by its hoisted consts): the carry keeps that type on every trip (`preserve_dimensions`).
A loop that resizes arrays (`nimplicit=k`, for_loop and while) carries k sizes first: its carries
are `implicit sizes..., arrays...` in the operands, the bodies' parameters and the body's results,
each implicit parameter binding a dimension variable the array parameters' types mention
(`{ lambda ; i:i64[] d:i64[] a:f64[d]. ... in (e, b) }` with `e` = the new size of `b`). The
equation's results are the final sizes, typed as new dimension variables (core.SizeAval), then the
arrays typed by them. (while has JAX's params, plus `nimplicit` and `preserve_dimensions=False`
when built with allow_array_resizing.) Scan's `length` is None when it is the run-time leading size
of its xs.

The shape rules check that the nested jaxprs fit their operands; the user-facing checks with
pytree structures and weak-type promotion are in sprue.lax.control_flow.api, which builds these
equations.
The reference rules run the nested jaxprs with eval_jaxpr in Python loops.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueTypeError, SprueValueError, UnsupportedError, at
from sprue.base.source_info import user_frame_summary
from sprue.ir.core import ClosedJaxpr, ShapedArray, SizeAval, Var
from sprue.ir.shapes import Dim, DimExpr, DimVar, dim, substitute
from sprue.lax._rules import define
from sprue.trace.tracing import eval_jaxpr


# -- type checks shared with sprue.lax.control_flow.api ----------------------------------------
def typematch(a: ShapedArray, b: ShapedArray) -> bool:
    """Equal shapes and dtypes; weak types do not matter (a Python scalar fits a strong slot)."""
    return a.shape == b.shape and a.dtype == b.dtype


def type_mismatches(*columns: Sequence[ShapedArray]) -> list[str]:
    """'output i: t0 vs t1 [vs t2 ...]' for every position where the columns' types differ."""
    out = []
    for i, row in enumerate(zip(*columns)):
        if not all(typematch(row[0], a) for a in row[1:]):
            out.append(f"output {i}: " + " vs ".join(a.str_short() for a in row))
    return out


def check_types(what: str, *columns: Sequence[ShapedArray], note: str = "") -> None:
    """Raise `<what>: output 0: f64[3] vs f32[3]; ...` naming the user's line, if types differ."""
    lengths = {len(c) for c in columns}
    if len(lengths) > 1:
        raise SprueTypeError(f"{what}: {' vs '.join(str(len(c)) for c in columns)} values{note}"
                             f"{at(user_frame_summary())}")
    bad = type_mismatches(*columns)
    if bad:
        raise SprueTypeError(f"{what}: {'; '.join(bad)}{note}{at(user_frame_summary())}")


def _no_consts(name: str, closed: ClosedJaxpr) -> None:
    if not isinstance(closed, ClosedJaxpr):
        raise SprueTypeError(f"{name}: nested jaxprs must be ClosedJaxprs, got {type(closed).__name__}")
    if closed.consts or closed.jaxpr.constvars:
        raise SprueValueError(f"{name}: a nested jaxpr must not have consts of its own; pass them as"
                              f" leading operands")


def _int_scalar(name: str, what: str, a: ShapedArray) -> None:
    if a.ndim or not dtypes.is_int(a.dtype):
        raise SprueTypeError(f"{name}: {what} must be an integer scalar, got {a.str_short()}")


# -- dimensions of loop carries ----------------------------------------------------------------------
def _implicit_vars(name: str, params: Sequence[Var]) -> list[DimVar]:
    """The dimension variables that a body's implicit size parameters bind."""
    out = []
    for v in params:
        if v.aval.shape != () or not dtypes.is_int(v.aval.dtype) or v.dim is None:
            raise SprueTypeError(f"{name}: an implicit parameter must be an integer scalar binding a dimension,"
                                 f" got {v.aval.str_short()}")
        out.append(v.dim)
    return out


def _is_var(d: Dim, implicit: Sequence[DimVar]) -> DimVar | None:
    """The implicit variable d is exactly, if any."""
    return next((v for v in implicit if isinstance(d, DimExpr) and d == dim(v)), None)


def _mismatch(what: str, params: Sequence[ShapedArray], args: Sequence[ShapedArray], note: str = ""):
    check_types(what, params, args, note=note)   # lengths and dtypes/ranks first, with the usual text
    raise SprueTypeError(f"{what}: " + "; ".join(f"output {i}: {p.str_short()} vs {a.str_short()}"
                                                 for i, (p, a) in enumerate(zip(params, args)) if p != a) + note)


def unify(what: str, params: Sequence[ShapedArray], args: Sequence[ShapedArray],
          implicit: Sequence[DimVar]) -> dict[DimVar, Dim]:
    """Match parameter types with argument types: dtypes and ranks equal, every dim equal, except
    that a dim which is exactly an implicit variable takes the argument's dim (the same one
    wherever it occurs). Returns those bindings."""
    if len(params) != len(args):
        check_types(what, params, args)
    found: dict[DimVar, Dim] = {}
    for p, a in zip(params, args):
        if p.dtype != a.dtype or p.ndim != a.ndim:
            _mismatch(what, params, args)
        for dp, da in zip(p.shape, a.shape):
            v = _is_var(dp, implicit)
            if v is None and dp != da or v is not None and found.setdefault(v, da) != da:
                _mismatch(what, params, args)
    return found


def carry_results(name: str, carry: Sequence[ShapedArray], outs: Sequence[ShapedArray], nimplicit: int,
                  implicit: Sequence[DimVar]) -> None:
    """Check a loop body's results against its carry parameters: the implicit ones are integer
    scalars (the new sizes); each array keeps its dtype and rank, and every dim that is not an
    implicit variable (those are what the new sizes say)."""
    note = " (carry in vs body out)"
    if len(outs) != len(carry):
        check_types(f"{name} body changes the type of its carry", carry, outs, note=note)
    for o in outs[:nimplicit]:
        if o.shape != () or not dtypes.is_int(o.dtype):
            raise SprueTypeError(f"{name}: an implicit result (a new size) must be an integer scalar, got"
                                 f" {o.str_short()}")
    arrays, results = carry[nimplicit:], outs[nimplicit:]
    for c, o in zip(arrays, results):
        if c.dtype != o.dtype or c.ndim != o.ndim or any(
                _is_var(dc, implicit) is None and dc != do for dc, do in zip(c.shape, o.shape)):
            _mismatch(f"{name} body changes the type of its carry", arrays, results, note=note)


def loop_results(name: str, body_params: Sequence[Var], nimplicit: int, init: Sequence[ShapedArray],
                 body_outs: Sequence[ShapedArray], preserve_dimensions: bool) -> list:
    """The result types of a loop whose carry parameters are `body_params` (implicit sizes first)
    and operands `init`: with implicit sizes, fresh sizes (SizeAvals) and the arrays typed by them."""
    if nimplicit and preserve_dimensions:
        raise SprueValueError(f"{name}: implicit sizes (nimplicit={nimplicit}) need preserve_dimensions=False")
    implicit = _implicit_vars(name, body_params[:nimplicit])
    carry = [v.aval for v in body_params]
    unify(f"{name}: the body's parameters do not fit its operands", carry[nimplicit:], init[nimplicit:], implicit)
    for a in init[:nimplicit]:
        _int_scalar(name, "an implicit size operand", a)
    carry_results(name, carry, body_outs, nimplicit, implicit)
    if not nimplicit:
        return carry
    sizes = [SizeAval(DimVar()) for _ in implicit]
    fresh = {v: dim(s.binds) for v, s in zip(implicit, sizes)}
    return [*sizes, *(a.update(shape=tuple(substitute(d, fresh) for d in a.shape)) for a in carry[nimplicit:])]


def _strong_unless_all_weak(cols: Sequence[Sequence[ShapedArray]]) -> list[ShapedArray]:
    return [row[0].update(weak_type=all(a.weak_type for a in row)) for row in zip(*cols)]


# -- for_loop -----------------------------------------------------------------------------------
def trip_count(lower: int, upper: int, step: int) -> int:
    """len(range(lower, upper, step)); a zero step runs no trips (compiled code cannot raise)."""
    return len(range(lower, upper, step)) if step else 0


def _for_loop_rule(*avals: ShapedArray, body_jaxpr: ClosedJaxpr, body_nconsts: int,
                   apply_reverse_transform: bool = False, nimplicit: int = 0, preserve_dimensions: bool = True):
    _no_consts("for_loop", body_jaxpr)
    if apply_reverse_transform:
        raise UnsupportedError("for_loop: reverse transforms are not supported")
    consts, bounds, init = avals[:body_nconsts], avals[body_nconsts:body_nconsts + 3], avals[body_nconsts + 3:]
    if len(bounds) != 3:
        raise SprueValueError("for_loop needs lower, upper and step operands")
    for what, b in zip(("the lower bound", "the upper bound", "the step"), bounds):
        _int_scalar("for_loop", what, b)
    if len({b.dtype for b in bounds}) != 1:
        raise SprueTypeError(f"for_loop: lower, upper and step must share one integer type, got"
                             f" {', '.join(b.str_short() for b in bounds)}")
    jaxpr = body_jaxpr.jaxpr
    check_types("for_loop: the body's parameters do not fit its operands", jaxpr.in_avals[:body_nconsts + 1],
                [*consts, bounds[0]])
    return loop_results("for_loop", jaxpr.invars[body_nconsts + 1:], nimplicit, init, jaxpr.out_avals,
                        preserve_dimensions)


def _for_loop_impl(*args, body_jaxpr: ClosedJaxpr, body_nconsts: int, **_):
    consts, (lower, upper, step), carry = args[:body_nconsts], args[body_nconsts:body_nconsts + 3], \
        list(args[body_nconsts + 3:])
    index = np.asarray(lower).dtype
    n = trip_count(int(lower), int(upper), int(step))
    for k in range(n):
        i = np.asarray(int(lower) + k * int(step), index)
        carry = eval_jaxpr(body_jaxpr.jaxpr, [], *consts, i, *carry)
    return carry


for_loop_p = define("for_loop", _for_loop_rule, _for_loop_impl, multiple_results=True)


# -- while --------------------------------------------------------------------------------------
def _while_rule(*avals: ShapedArray, cond_jaxpr: ClosedJaxpr, cond_nconsts: int, body_jaxpr: ClosedJaxpr,
                body_nconsts: int, nimplicit: int = 0, preserve_dimensions: bool = True):
    _no_consts("while", cond_jaxpr)
    _no_consts("while", body_jaxpr)
    cconsts = avals[:cond_nconsts]
    bconsts = avals[cond_nconsts:cond_nconsts + body_nconsts]
    init = avals[cond_nconsts + body_nconsts:]
    cj, bj = cond_jaxpr.jaxpr, body_jaxpr.jaxpr
    check_types("while: the cond function's parameters do not fit its operands", cj.in_avals[:cond_nconsts], cconsts)
    check_types("while: the body's parameters do not fit its operands", bj.in_avals[:body_nconsts], bconsts)
    cond_params = cj.invars[cond_nconsts:]
    if len(cond_params) != len(init):
        check_types("while: the cond function's parameters do not fit its operands", cj.in_avals, avals)
    unify("while: the cond function's parameters do not fit its operands", [v.aval for v in cond_params[nimplicit:]],
          init[nimplicit:], _implicit_vars("while", cond_params[:nimplicit]))
    outs = cj.out_avals
    if len(outs) != 1 or outs[0].shape != () or outs[0].dtype != dtypes.bool_:
        raise SprueTypeError(f"while: the cond function must return one bool[], got"
                             f" ({', '.join(a.str_short() for a in outs)})")
    return loop_results("while_loop", bj.invars[body_nconsts:], nimplicit, init, bj.out_avals, preserve_dimensions)


def _while_impl(*args, cond_jaxpr: ClosedJaxpr, cond_nconsts: int, body_jaxpr: ClosedJaxpr, body_nconsts: int,
                **_):
    cconsts = args[:cond_nconsts]
    bconsts = args[cond_nconsts:cond_nconsts + body_nconsts]
    carry = list(args[cond_nconsts + body_nconsts:])
    while bool(eval_jaxpr(cond_jaxpr.jaxpr, [], *cconsts, *carry)[0]):
        carry = eval_jaxpr(body_jaxpr.jaxpr, [], *bconsts, *carry)
    return carry


while_p = define("while", _while_rule, _while_impl, multiple_results=True)


# -- cond ---------------------------------------------------------------------------------------
def _cond_rule(index: ShapedArray, *ops: ShapedArray, branches: tuple[ClosedJaxpr, ...]):
    if not branches:
        raise SprueValueError("cond needs at least one branch")
    for b in branches:
        _no_consts("cond", b)
    _int_scalar("cond", "the branch index", index)
    for k, b in enumerate(branches):
        check_types(f"cond: the parameters of branch {k} do not fit the operands", b.in_avals, ops)
    check_types("cond branches return different types", *[b.out_avals for b in branches])
    return _strong_unless_all_weak([b.out_avals for b in branches])


def _cond_impl(index, *ops, branches: tuple[ClosedJaxpr, ...]):
    k = min(max(int(index), 0), len(branches) - 1)
    return eval_jaxpr(branches[k].jaxpr, [], *ops)


cond_p = define("cond", _cond_rule, _cond_impl, multiple_results=True)


# -- scan ---------------------------------------------------------------------------------------
def _bound_inside(jaxpr, nconsts: int) -> set:
    """The dimension variables a body binds itself (parameters and equation outputs, not the hoisted
    consts, which bind the enclosing jaxpr's)."""
    vs = [*jaxpr.invars[nconsts:], *(o for e in jaxpr.eqns for o in e.outvars)]
    return {v.dim for v in vs if v.dim is not None}


def _scan_rule(*avals: ShapedArray, jaxpr: ClosedJaxpr, num_consts: int, num_carry: int, length: int | None,
               reverse: bool, linear: tuple, unroll=1, _split_transpose: bool = False):
    _no_consts("scan", jaxpr)
    consts, init, xs = avals[:num_consts], avals[num_consts:num_consts + num_carry], avals[num_consts + num_carry:]
    if length is None:   # the run-time leading size of xs
        if not xs or not xs[0].ndim:
            raise SprueValueError("scan: length=None needs xs with a leading axis")
        length = xs[0].shape[0]
    elif not isinstance(length, (int, np.integer)) or length < 0:
        raise SprueValueError(f"scan: length must be a non-negative int, got {length!r}")
    for x in xs:
        if not x.ndim or x.shape[0] != length:
            raise SprueValueError(f"scan: every scanned array needs a leading axis of length {length}, got"
                                  f" {x.str_short()}")
    if len(linear) != len(avals):
        raise SprueValueError(f"scan: `linear` needs one entry per operand ({len(avals)}), got {len(linear)}")
    slices = [x.update(shape=x.shape[1:]) for x in xs]
    check_types("scan: the body's parameters do not fit its operands", jaxpr.in_avals, [*consts, *init, *slices])
    carry = jaxpr.in_avals[num_consts:num_consts + num_carry]
    outs = jaxpr.out_avals
    check_types("scan body changes the type of its carry", carry, outs[:num_carry], note=" (carry in vs body out)")
    inner = _bound_inside(jaxpr.jaxpr, num_consts)
    for y in outs[num_carry:]:
        if any(DimExpr.dim_vars(d) & inner for d in y.shape if isinstance(d, DimExpr)):
            raise SprueValueError(f"scan: a per-step output {y.str_short()} has a size that may change from step to"
                                  f" step, so the outputs cannot be stacked; return arrays whose sizes do not"
                                  f" depend on the carry or the step")
    return [*carry, *(y.update(shape=(length, *y.shape)) for y in outs[num_carry:])]


def _scan_impl(*args, jaxpr: ClosedJaxpr, num_consts: int, num_carry: int, length: int | None, reverse: bool,
               **_):
    consts, carry, xs = args[:num_consts], list(args[num_consts:num_consts + num_carry]), args[num_consts + num_carry:]
    if length is None:
        length = len(xs[0])
    y_avals = jaxpr.out_avals[num_carry:]
    ys = [np.empty((length, *a.shape), a.dtype) for a in y_avals]
    for k in range(length):
        i = length - 1 - k if reverse else k
        outs = eval_jaxpr(jaxpr.jaxpr, [], *consts, *carry, *(x[i] for x in xs))
        carry = outs[:num_carry]
        for buf, y in zip(ys, outs[num_carry:]):
            buf[i] = y
    return [*carry, *ys]


scan_p = define("scan", _scan_rule, _scan_impl, multiple_results=True)


# -- parameters that receive an operand unchanged ---------------------------------------------------
def invariant_parameters(p, count: Callable[[str], object], n_operands: int) -> dict[str, dict[int, int]]:
    """For an equation of p: {jaxpr param: {parameter index: operand index}} for the parameters of
    its nested jaxprs that hold an operand's value unchanged on every run (the hoisted consts of a
    loop body; every operand of a cond branch), not the carries, the index or scanned slices.

    A traced body's size consts bind the enclosing jaxpr's own dimension variables (closure
    conversion, tracing.close_dims), so `f64[a]` in the body and `f64[n]` outside are one type. A
    reader building a body from text (sprue.io.jaxpr_eval) binds these parameters to their operands'
    dimension variables to get that same jaxpr back. `count(name)` gives the equation's integer
    param (body_nconsts, ...); one that is missing or not a count leaves its jaxpr out (the shape
    rule reports it)."""
    def span(n, offset=0) -> dict[int, int]:   # parameters 0..n-1 hold operands offset..offset+n-1
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (n, offset)) \
                or n + offset > n_operands:
            return {}
        return {i: offset + i for i in range(n)}
    if p is for_loop_p:
        return {"body_jaxpr": span(count("body_nconsts"))}
    if p is while_p:
        cond_nconsts = count("cond_nconsts")
        return {"cond_jaxpr": span(cond_nconsts), "body_jaxpr": span(count("body_nconsts"), cond_nconsts)}
    if p is cond_p:
        return {"branches": {i: 1 + i for i in range(n_operands - 1)}}
    if p is scan_p:
        return {"jaxpr": span(count("num_consts"))}
    return {}


__all__ = ["for_loop_p", "while_p", "cond_p", "scan_p", "invariant_parameters", "trip_count", "typematch",
           "type_mismatches", "check_types"]
