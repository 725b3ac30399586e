"""Lowering of sprue.lax.random_bits.threefry2x32: its 20 rounds of StableHLO adds, xors and
constant shifts (the schedule the numpy reference runs, shared through random_bits.threefry_rounds).

The hash is elementwise integer work: the linalg stage fuses it into one loop with whatever reads
its bits, and the loop vectorizer widens it (uint32 lanes: 16 per AVX-512 register). XLA lowers it
the same way on CPU (jax's _threefry2x32_lowering, unrolled)."""
from __future__ import annotations

from sprue.ir.core import Eqn
from sprue.lax import random_bits
from sprue.lowering.rules_common import (
    LoweringContext,
    Value,
    broadcast_like,
    constant_like,
    ew,
    lowering_rules,
    shape_of,
)


def _threefry2x32(ctx: LoweringContext, eqn: Eqn, *operands: Value) -> list[Value]:
    ref = max(operands, key=lambda x: len(shape_of(x)))
    k1, k2, x1, x2 = (broadcast_like(x, ref) for x in operands)
    consts: dict[int, Value] = {}

    def const(v: int) -> Value:   # one splat per distinct constant
        if v not in consts:
            consts[v] = constant_like(v, ref)
        return consts[v]

    def rotate_left(x: Value, r: int) -> Value:   # r in 1..31: no shift reaches the bit width
        return ew("or", ew("shift_left", x, const(r)), ew("shift_right_logical", x, const(32 - r)))

    out = random_bits.threefry_rounds(k1, k2, x1, x2, add=lambda a, b: ew("add", a, b),
                                      xor=lambda a, b: ew("xor", a, b), rotate_left=rotate_left, const=const)
    return list(out)


lowering_rules[random_bits.threefry2x32_p] = _threefry2x32
