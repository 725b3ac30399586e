"""Lowering of the control-flow primitives to StableHLO regions: for_loop, while, cond, scan.

Nested jaxprs become the regions of `stablehlo.while`, `stablehlo.if` and `stablehlo.case`; their
hoisted consts are the enclosing values themselves (regions may use values defined above them), so
only the real carries travel around a loop. legalize.py turns these ops into scf afterwards.

- for_loop: a while over (k, carries...) for k < trips, with i = lower + k * step and the trip
  count computed once, before the loop, as len(range(lower, upper, step)) — so negative steps,
  empty ranges and traced bounds need nothing special (a zero step runs no trips). The while is
  marked counted, and legalization turns it into an scf.for over [0, trips) (unless it resizes
  arrays: see counted_loop). The count is done in
  64 bits, so narrow index types do not overflow (bounds spanning more than 2**63 still would).
- cond: two branches are a `stablehlo.if` on index > 0 (branches[0] is the false branch); more
  are a `stablehlo.case` on the index clamped into range (case itself runs the last branch for any
  index out of range, negative ones included, which is not the clamp).
- scan: a while over k; step k reads xs[idx] with dynamic_slice and writes ys[idx] with
  dynamic_update_slice into stacked outputs carried through the loop (idx = k, or length-1-k in
  reverse), allocated once before the loop, so each trip updates them in place. Also counted.

Dynamic shapes: a loop's carries have the types of the equation's results — `?` for every size
not known statically, so one carry type serves every trip. A resizing loop carries its implicit
sizes first (tensor<i64>), binding the body's dimension variables on each trip; a value whose type
is more static than its carry's (an array entering a resizing loop as tensor<3xf64>, a body
returning a fixed size) is cast to the carry type with tensor.cast. Scan's length, when only run
time knows it, is the size of xs's leading axis.

Checks: when a nested jaxpr contains checks (`contains_checks`), the check status is threaded
through its region (emit.lower_region_body): one more carry of a loop, one more result of each
branch. A threaded while also stops once a check has failed (values computed after a failed
check may never meet its condition); counted loops end anyway. A while whose cond function has
checks is rotated — the cond runs once before the loop and
again at the end of every trip, the predicate carried — since the cond region of stablehlo.while
can return nothing but the predicate.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import tensor

from sprue import lax
from sprue.ir.core import ClosedJaxpr, Eqn, Jaxpr
from sprue.lowering.emit import lower_region_body
from sprue.lowering.legalize import COUNTED, OVERWRITTEN
from sprue.lowering.rules_checks import contains_checks
from sprue.lowering.rules_common import (
    LoweringContext,
    Value,
    aval_type,
    broadcast_in_dim,
    build_region,
    compare,
    constant,
    constant_like,
    convert,
    dims_of,
    dtype_of,
    ew,
    i64s,
    logical_and,
    lowering_rules,
    op,
    op1,
    reshape,
    scalar_type,
    select,
    size_value,
    slice_,
    tensor_type,
)

Status = Value | None


def _status_type() -> ir.Type:
    return scalar_type(np.int64)


def _region(ctx: LoweringContext, closed: ClosedJaxpr, consts: Sequence[Value], args: Sequence[Value],
            status: Status) -> tuple[list[Value], Status]:
    """The ops of a nested jaxpr (invars: hoisted consts, then parameters) at the insertion point,
    and the check status after them (None when not threaded)."""
    return lower_region_body(ctx, closed.jaxpr, [], [*consts, *args], status)


def _threads(ctx: LoweringContext, *jaxprs: ClosedJaxpr | Jaxpr) -> bool:
    """Whether regions of these jaxprs must thread the check status (they contain checks)."""
    return ctx.status is not None and any(contains_checks(j) for j in jaxprs)


def _cast(v: Value, t: ir.Type) -> Value:
    """v as type t, a type of the same element type and rank with more `?` dims."""
    return v if v.type == t else tensor.CastOp(t, v).result


def _casts(vs: Sequence[Value], types: Sequence[ir.Type]) -> list[Value]:
    return [_cast(v, t) for v, t in zip(vs, types)]


def _while(inits: Sequence[Value], cond, body, attrs: dict | None = None) -> list[Value]:
    """stablehlo.while over `inits`: cond(args) -> [i1 tensor], body(args) -> next values."""
    types = [v.type for v in inits]
    loop = op("stablehlo.while", inits, types, attrs, regions=2)
    build_region(loop, types, cond, 0)
    build_region(loop, types, lambda args: _casts(body(args), types), 1)
    return list(loop.results)


def counted_loop(trips: Value, inits: Sequence[Value], body, types: Sequence[ir.Type], resizing: bool = False
                 ) -> list[Value]:
    """A while over (k, *inits) for k in [0, trips): body(k, values) -> next values, the values
    cast to `types` (the carry types) on entry.

    It is marked counted (legalize.COUNTED), so legalization makes it an scf.for — unless it resizes
    arrays: MLIR's canonicalization of scf.for moves a tensor.cast of an entry value (static to `?`,
    written here or made by folding a size that turns out constant) inside the loop, making the
    carry static again as if every trip kept its size (ForOpTensorCastFolder assumes so), so a
    resizing loop stays a general while (scf.while)."""
    def step(args: list[Value]) -> list[Value]:
        return [ew("add", args[0], constant_like(1, args[0])), *body(args[0], args[1:])]
    k0 = constant_like(0, trips)
    results = _while([k0, *_casts(inits, types)], lambda args: [compare(args[0], trips, "LT")], step,
                     None if resizing else {COUNTED: ir.UnitAttr.get()})
    return results[1:]


def _with_status(ctx: LoweringContext, thread: bool, values: list[Value]) -> list[Value]:
    """The carries, and the check status as one more when it is threaded."""
    return [*values, ctx.status] if thread else values


def _with_status_type(thread: bool, types: Sequence[ir.Type]) -> list[ir.Type]:
    return [*types, *([_status_type()] if thread else [])]


def _take_status(ctx: LoweringContext, thread: bool, results: list[Value]) -> list[Value]:
    """The results of an op that threaded the status as its last one: that becomes the status."""
    if not thread:
        return results
    ctx.status = results[-1]
    return results[:-1]


def _result_types(eqn: Eqn) -> list[ir.Type]:
    return [aval_type(v.aval) for v in eqn.outvars]


def trip_count(lower: Value, upper: Value, step: Value) -> Value:
    """len(range(lower, upper, step)), 0 for a zero step: (span - 1) // |step| + 1 when the range is
    not empty, where span and |step| are positive (no floor/trunc question, no division by zero)."""
    zero, one = constant_like(0, step), constant_like(1, step)
    up = compare(step, zero, "GT")
    nonempty = logical_and(compare(step, zero, "NE"),
                           select(up, compare(upper, lower, "GT"), compare(lower, upper, "GT")))
    span = select(up, ew("subtract", upper, lower), ew("subtract", lower, upper))
    size = select(up, step, ew("negate", step))
    size = select(nonempty, size, one)
    trips = ew("add", ew("divide", ew("subtract", span, one), size), one)
    return select(nonempty, trips, zero)


def _for_loop(ctx: LoweringContext, eqn: Eqn, *operands: Value) -> list[Value]:
    p = eqn.params
    n = p["body_nconsts"]
    consts, (lower, upper, step), init = operands[:n], operands[n:n + 3], operands[n + 3:]
    # Counting happens in 64 bits: upper - lower overflows narrower types (range(-128, 127) in int8).
    index = dtype_of(lower)
    wide = np.uint64 if index.kind == "u" else np.int64
    lower, upper, step = (convert(v, wide) for v in (lower, upper, step))
    types = _result_types(eqn)
    thread = _threads(ctx, p["body_jaxpr"])

    def body(k: Value, carry: list[Value]) -> list[Value]:
        i = convert(ew("add", lower, ew("multiply", k, step)), index)
        outs, status = _region(ctx, p["body_jaxpr"], consts, [i, *carry[:len(types)]],
                               carry[-1] if thread else None)
        return [*_casts(outs, types), *([status] if thread else [])]

    results = counted_loop(trip_count(lower, upper, step), _with_status(ctx, thread, list(init)), body,
                       _with_status_type(thread, types), resizing=p.get("nimplicit", 0) > 0)
    return _take_status(ctx, thread, results)


def _while_loop(ctx: LoweringContext, eqn: Eqn, *operands: Value) -> list[Value]:
    p = eqn.params
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    cconsts, bconsts, init = operands[:nc], operands[nc:nc + nb], operands[nc + nb:]
    types = _result_types(eqn)
    init = _casts(init, types)
    n = len(types)
    if _threads(ctx, p["cond_jaxpr"]):
        return _rotated_while(ctx, eqn, cconsts, bconsts, init)
    thread = _threads(ctx, p["body_jaxpr"])

    def cond(args: list[Value]) -> list[Value]:
        (pred,), _ = _region(ctx, p["cond_jaxpr"], cconsts, args[:n], None)
        return [_unless_failed(pred, args[n]) if thread else pred]

    def body(args: list[Value]) -> list[Value]:
        outs, status = _region(ctx, p["body_jaxpr"], bconsts, args[:n], args[n] if thread else None)
        return [*_casts(outs, types), *([status] if thread else [])]

    return _take_status(ctx, thread, _while(_with_status(ctx, thread, init), cond, body))


def _unless_failed(pred: Value, status: Value) -> Value:
    """pred, and no check failed yet: a while stops at a failed check, since values computed after
    one may never meet its condition (the caller raises the check's message anyway)."""
    return logical_and(pred, compare(status, constant(0, np.int64), "EQ"))


def _rotated_while(ctx: LoweringContext, eqn: Eqn, cconsts: Sequence[Value], bconsts: Sequence[Value],
                   init: list[Value]) -> list[Value]:
    """A while whose cond function has checks: (status, carries..., pred) carried, the cond run
    before the loop and after each trip, so that its checks update the status. The predicate goes
    last: the scf.while's condition region then forwards every other carry at its own position
    (canonicalization drops the predicate the body does not read), which one-shot bufferization
    needs to update the carries in place; first, it shifted them, and every trip copied each one
    (a run-time-size Newton iteration: 8 MB allocated and copied per trip)."""
    p = eqn.params
    types = [v.type for v in init]

    def test(carries: list[Value], status: Value) -> tuple[Value, Value]:
        (pred,), status = _region(ctx, p["cond_jaxpr"], cconsts, carries, status)
        return _unless_failed(pred, status), status

    def body(args: list[Value]) -> list[Value]:
        outs, status = _region(ctx, p["body_jaxpr"], bconsts, args[1:-1], args[0])
        outs = _casts(outs, types)
        pred, status = test(outs, status)
        return [status, *outs, pred]

    pred, status = test(init, ctx.status)
    results = _while([status, *init, pred], lambda args: [args[-1]], body)
    ctx.status = results[0]
    return results[1:-1]


def _cond(ctx: LoweringContext, eqn: Eqn, index: Value, *operands: Value) -> list[Value]:
    branches: tuple[ClosedJaxpr, ...] = eqn.params["branches"]
    types = _result_types(eqn)
    thread = _threads(ctx, *branches)

    def region(branch: ClosedJaxpr) -> list[Value]:
        # a branch starts from the status before the cond (regions see the values above them)
        outs, status = _region(ctx, branch, [], operands, ctx.status if thread else None)
        return [*_casts(outs, types), *([status] if thread else [])]

    if len(branches) == 1:
        return _take_status(ctx, thread, region(branches[0]))
    result_types = _with_status_type(thread, types)
    if len(branches) == 2:
        selector = compare(index, constant_like(0, index), "GT")
        regions = [branches[1], branches[0]]        # stablehlo.if: true region first
        node = op("stablehlo.if", [selector], result_types, regions=2)
    else:
        last = min(len(branches) - 1, int(np.iinfo(dtype_of(index)).max))
        clamped = ew("minimum", ew("maximum", index, constant_like(0, index)), constant_like(last, index))
        node = op("stablehlo.case", [convert(clamped, np.int32)], result_types, regions=len(branches))
        regions = list(branches)
    for k, branch in enumerate(regions):
        build_region(node, [], lambda _, b=branch: region(b), k)
    return _take_status(ctx, thread, list(node.results))


def _scan(ctx: LoweringContext, eqn: Eqn, *operands: Value) -> list[Value]:
    p = eqn.params
    nconsts, ncarry, reverse = p["num_consts"], p["num_carry"], p["reverse"]
    consts, init, xs = operands[:nconsts], operands[nconsts:nconsts + ncarry], operands[nconsts + ncarry:]
    # length None: the run-time size of xs's leading axis (see lax.control_flow)
    length = p["length"] if p["length"] is not None else ctx.size(eqn.invars[nconsts + ncarry].aval.shape[0])
    types = _result_types(eqn)
    # Outputs start as zeros broadcast into fresh tensors (not a constant: that would be a read-only
    # global, copied before the first write), marked as overwritten: trip k writes row k, so every
    # row is written before the loop's results are read (a failed check discards them), and the
    # legalization leaves them uninitialized (legalize.OVERWRITTEN)
    ys0 = [broadcast_in_dim(constant(0, v.aval.dtype), ctx.sizes(v.aval.shape), []) for v in eqn.outvars[ncarry:]]
    if isinstance(length, int) and length == 0:
        return [*init, *ys0]
    for y in ys0:
        y.owner.attributes[OVERWRITTEN] = ir.UnitAttr.get()
    thread = _threads(ctx, p["jaxpr"])
    slice_shapes = [v.aval.shape[1:] for v in eqn.invars[nconsts + ncarry:]]
    last = ew("subtract", size_value(length), constant(1, np.int64))

    def body(k: Value, args: list[Value]) -> list[Value]:
        carry, ys = args[:ncarry], args[ncarry:len(types)]
        idx = ew("subtract", last, k) if reverse else k
        slices = [_row(ctx, x, idx, shape) for x, shape in zip(xs, slice_shapes)]
        outs, status = _region(ctx, p["jaxpr"], consts, [*carry, *slices], args[-1] if thread else None)
        new_ys = [_set_row(buf, y, idx) for buf, y in zip(ys, outs[ncarry:])]
        return [*_casts(outs[:ncarry], types), *new_ys, *([status] if thread else [])]

    inits = _with_status(ctx, thread, [*init, *ys0])
    return _take_status(ctx, thread, counted_loop(size_value(length), inits, body, _with_status_type(thread, types)))


def _row(ctx: LoweringContext, x: Value, idx: Value, shape: Sequence) -> Value:
    """x[idx] (idx within the leading axis), of the jaxpr shape `shape`."""
    zero = constant_like(0, idx)
    rest = ctx.sizes(shape)
    if all(isinstance(d, int) for d in rest):
        row = op1("stablehlo.dynamic_slice", [x, idx, *[zero] * len(rest)], tensor_type([1, *rest], dtype_of(x)),
                  {"slice_sizes": i64s([1, *rest])})
    else:   # run-time trailing sizes: a slice [idx, 0, ...] to [idx + 1, sizes...]
        row = slice_(x, [idx, *[0] * len(rest)], [ew("add", idx, constant_like(1, idx)), *rest], None,
                     tensor_type([1, *shape], dtype_of(x)))
    return reshape(row, rest)


def _set_row(buf: Value, y: Value, idx: Value) -> Value:
    """buf with buf[idx] = y."""
    zero = constant_like(0, idx)
    row = reshape(y, [1, *dims_of(y)])
    return op1("stablehlo.dynamic_update_slice", [buf, row, idx, *[zero] * len(dims_of(y))], buf.type)


lowering_rules.update({lax.for_loop_p: _for_loop, lax.while_p: _while_loop, lax.cond_p: _cond,
                       lax.scan_p: _scan})
