"""Lowering of the control-flow primitives to StableHLO regions: for_loop, while, cond, scan.

Nested jaxprs become the regions of `stablehlo.while`, `stablehlo.if` and `stablehlo.case`; their
hoisted consts are the enclosing values themselves (regions may use values defined above them), so
only the real carries travel around a loop. legalize.py turns these ops into scf afterwards.

- for_loop: a while over (k, carries...) for k < trips, with i = lower + k * step and the trip
  count computed once, before the loop, as len(range(lower, upper, step)) — so negative steps,
  empty ranges and traced bounds need nothing special (a zero step runs no trips). The while is
  marked counted, and legalization turns it into an scf.for over [0, trips). The count is done in
  64 bits, so narrow index types do not overflow (bounds spanning more than 2**63 still would).
- cond: two branches are a `stablehlo.if` on index > 0 (branches[0] is the false branch); more
  are a `stablehlo.case` on the index clamped into range (case itself runs the last branch for any
  index out of range, negative ones included, which is not the clamp).
- scan: a while over k; step k reads xs[idx] with dynamic_slice and writes ys[idx] with
  dynamic_update_slice into stacked outputs carried through the loop (idx = k, or length-1-k in
  reverse), allocated once before the loop, so each trip updates them in place. Also counted.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from torch_mlir import ir

from .. import lax
from ..core import ClosedJaxpr, Eqn
from . import stablehlo
from .legalize import COUNTED
from .rules_common import (LoweringContext, Value, aval_type, broadcast_in_dim, build_region, compare, constant,
                           constant_like, convert, dtype_of, ew, i64s, logical_and, lowering_rules, op, op1, reshape,
                           select, shape_of, tensor_type)


def _region_body(ctx: LoweringContext, closed: ClosedJaxpr, consts: Sequence[Value], args: Sequence[Value]
                 ) -> list[Value]:
    """The ops of a nested jaxpr (invars: hoisted consts, then parameters) at the insertion point."""
    return stablehlo.lower_jaxpr_body(ctx, closed.jaxpr, [], [*consts, *args])


def _while(inits: Sequence[Value], cond, body, attrs: dict | None = None) -> list[Value]:
    """stablehlo.while over `inits`: cond(args) -> [i1 tensor], body(args) -> next values."""
    types = [v.type for v in inits]
    loop = op("stablehlo.while", inits, types, attrs, regions=2)
    build_region(loop, types, cond, 0)
    build_region(loop, types, body, 1)
    return list(loop.results)


def _counted(trips: Value, inits: Sequence[Value], body) -> list[Value]:
    """A while over (k, *inits) for k in [0, trips): body(k, values) -> next values. It is marked
    counted (legalize.COUNTED), so legalization makes it an scf.for."""
    def step(args: list[Value]) -> list[Value]:
        return [ew("add", args[0], constant_like(1, args[0])), *body(args[0], args[1:])]
    k0 = constant_like(0, trips)
    results = _while([k0, *inits], lambda args: [compare(args[0], trips, "LT")], step,
                     {COUNTED: ir.UnitAttr.get()})
    return results[1:]


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
    n = eqn.params["body_nconsts"]
    consts, (lower, upper, step), init = operands[:n], operands[n:n + 3], operands[n + 3:]
    # Counting happens in 64 bits: upper - lower overflows narrower types (range(-128, 127) in int8).
    index = dtype_of(lower)
    wide = np.uint64 if index.kind == "u" else np.int64
    lower, upper, step = (convert(v, wide) for v in (lower, upper, step))

    def body(k: Value, carry: list[Value]) -> list[Value]:
        i = convert(ew("add", lower, ew("multiply", k, step)), index)
        return _region_body(ctx, eqn.params["body_jaxpr"], consts, [i, *carry])

    return _counted(trip_count(lower, upper, step), init, body)


def _while_loop(ctx: LoweringContext, eqn: Eqn, *operands: Value) -> list[Value]:
    p = eqn.params
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    cconsts, bconsts, init = operands[:nc], operands[nc:nc + nb], operands[nc + nb:]
    return _while(init, lambda args: _region_body(ctx, p["cond_jaxpr"], cconsts, args),
                  lambda args: _region_body(ctx, p["body_jaxpr"], bconsts, args))


def _cond(ctx: LoweringContext, eqn: Eqn, index: Value, *operands: Value) -> list[Value]:
    branches: tuple[ClosedJaxpr, ...] = eqn.params["branches"]
    if len(branches) == 1:
        return _region_body(ctx, branches[0], [], operands)
    types = [aval_type(v.aval) for v in eqn.outvars]
    if len(branches) == 2:
        selector = compare(index, constant_like(0, index), "GT")
        regions = [branches[1], branches[0]]        # stablehlo.if: true region first
        node = op("stablehlo.if", [selector], types, regions=2)
    else:
        last = min(len(branches) - 1, int(np.iinfo(dtype_of(index)).max))
        clamped = ew("minimum", ew("maximum", index, constant_like(0, index)), constant_like(last, index))
        node = op("stablehlo.case", [convert(clamped, np.int32)], types, regions=len(branches))
        regions = list(branches)
    for k, branch in enumerate(regions):
        build_region(node, [], lambda _, b=branch: _region_body(ctx, b, [], operands), k)
    return list(node.results)


def _scan(ctx: LoweringContext, eqn: Eqn, *operands: Value) -> list[Value]:
    p = eqn.params
    nconsts, ncarry, length, reverse = p["num_consts"], p["num_carry"], p["length"], p["reverse"]
    consts, init, xs = operands[:nconsts], operands[nconsts:nconsts + ncarry], operands[nconsts + ncarry:]
    # Outputs start as zeros broadcast into fresh tensors (not a constant: that would be a read-only
    # global, copied before the first write).
    ys0 = [broadcast_in_dim(constant(0, v.aval.dtype), v.aval.shape, []) for v in eqn.outvars[ncarry:]]
    if length == 0:
        return [*init, *ys0]

    def body(k: Value, args: list[Value]) -> list[Value]:
        carry, ys = args[:ncarry], args[ncarry:]
        idx = ew("subtract", constant_like(length - 1, k), k) if reverse else k
        zero = constant_like(0, idx)
        slices = [reshape(op1("stablehlo.dynamic_slice", [x, idx, *[zero] * (len(shape_of(x)) - 1)],
                              tensor_type([1, *shape_of(x)[1:]], dtype_of(x)),
                              {"slice_sizes": i64s([1, *shape_of(x)[1:]])}), shape_of(x)[1:])
                  for x in xs]
        outs = _region_body(ctx, p["jaxpr"], consts, [*carry, *slices])
        new_ys = [op1("stablehlo.dynamic_update_slice",
                      [buf, reshape(y, [1, *shape_of(y)]), idx, *[zero] * len(shape_of(y))], buf.type)
                  for buf, y in zip(ys, outs[ncarry:])]
        return [*outs[:ncarry], *new_ys]

    return _counted(constant(length, np.int64), [*init, *ys0], body)


lowering_rules.update({lax.for_loop_p: _for_loop, lax.while_p: _while_loop, lax.cond_p: _cond,
                       lax.scan_p: _scan})
