"""threefry2x32, the counter-based hash of JAX's default generator, from which sprue.random makes
its bits.

threefry2x32(k1, k2, x1, x2) hashes the 64-bit counters (x1, x2) under the 64-bit key (k1, k2):
Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11),
exactly as jax._src.random.threefry2x32 computes it, so that sprue.random's streams are JAX's bit
for bit. Operands are uint32 and of one shape, or rank 0 (a key's two words beside arrays of
counters); it is elementwise integer work, lowered to StableHLO adds, xors and shifts
(sprue.lowering.rules_random) that vectorize like any other elementwise loop.
"""
from __future__ import annotations

import numpy as np

from sprue.base.errors import SprueTypeError, SprueValueError
from sprue.interp.ad_util import batch_rules, cost_rules, jvp_rules, vjp_rules, zero_of
from sprue.interp.batching import elementwise_batch_rule
from sprue.interp.cost import free
from sprue.ir.core import ShapedArray
from sprue.lax._rules import define, require_equal

__all__ = ["THREEFRY_ROTATIONS", "threefry2x32", "threefry2x32_p"]

UINT32 = np.dtype(np.uint32)
# Threefry-2x32's rotation distances: the even groups of four rounds use the first row, the odd the
# second (Random123's R_32x2 constants, as JAX's threefry2x32 has them).
THREEFRY_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
THREEFRY_PARITY = 0x1BD11BDA   # the key schedule's third word is k1 ^ k2 ^ this


# == threefry2x32 ==================================================================================
def _threefry_rule(k1: ShapedArray, k2: ShapedArray, x1: ShapedArray, x2: ShapedArray):
    avals = (k1, k2, x1, x2)
    if any(a.dtype != UINT32 for a in avals):
        raise SprueTypeError("threefry2x32 requires uint32 operands, got "
                             + ", ".join(a.str_short() for a in avals))
    shaped = [a for a in avals if a.ndim]
    shape = shaped[0].shape if shaped else ()
    for a in shaped:
        if a.ndim != len(shape):
            raise SprueValueError("threefry2x32 requires operands of one shape (or rank 0), got "
                                  + ", ".join(x.str_short() for x in avals))
        for d, e in zip(shape, a.shape):
            require_equal(d, e, "threefry2x32 requires operands of one shape (or rank 0), got "
                          + ", ".join(x.str_short() for x in avals))
    out = ShapedArray(shape, UINT32)
    return [out, out]


def threefry_rounds(k1, k2, x1, x2, add, xor, rotate_left, const):
    """Threefry-2x32's 20 rounds over any array type, given its wrapping uint32 operations (the
    numpy reference and the StableHLO lowering share this one schedule): five groups of four
    rounds, each group followed by the injection of the next key-schedule words and the group's
    number."""
    ks = [k1, k2, xor(xor(k1, k2), const(THREEFRY_PARITY))]
    x = [add(x1, ks[0]), add(x2, ks[1])]
    for group in range(5):
        for r in THREEFRY_ROTATIONS[group % 2]:
            x[0] = add(x[0], x[1])
            x[1] = xor(x[0], rotate_left(x[1], r))
        x = [add(x[0], ks[(group + 1) % 3]), add(add(x[1], ks[(group + 2) % 3]), const(group + 1))]
    return x


def _threefry_impl(k1, k2, x1, x2):
    shape = np.broadcast_shapes(*(np.shape(a) for a in (k1, k2, x1, x2)))
    k1, k2, x1, x2 = (np.broadcast_to(np.asarray(a, UINT32), shape).copy() for a in (k1, k2, x1, x2))
    with np.errstate(over="ignore"):
        out = threefry_rounds(
            k1, k2, x1, x2, add=np.add, xor=np.bitwise_xor, const=UINT32.type,
            rotate_left=lambda v, r: (v << UINT32.type(r)) | (v >> UINT32.type(32 - r)))
    return [np.asarray(o, UINT32) for o in out]


threefry2x32_p = define("threefry2x32", _threefry_rule, _threefry_impl, multiple_results=True)


def threefry2x32(k1, k2, x1, x2):
    """The two uint32 words of Threefry-2x32 of the counters (x1, x2) under the key (k1, k2)."""
    return tuple(threefry2x32_p.bind(k1, k2, x1, x2))


def _no_derivative(p):
    def jvp(primals, tangents, **params):
        outs = p.bind(*primals, **params)
        return outs, ([zero_of(o) for o in outs] if p.multiple_results else zero_of(outs))
    jvp_rules[p] = jvp
    vjp_rules[p] = lambda cts, primals, outs, **params: [None] * len(primals)


# integers have no derivative; batched keys or counters broadcast against the others; the hash is
# integer work (sprue.cost counts floating-point operations only)
_no_derivative(threefry2x32_p)
batch_rules[threefry2x32_p] = elementwise_batch_rule(threefry2x32_p)
cost_rules[threefry2x32_p] = free
