"""rng_bit_generator: XLA's RngBitGenerator as JAX's CPU backend computes it, bit for bit.

`lax.rng_bit_generator(key, shape, dtype, algorithm)` (what JAX's `rbg` and `unsafe_rbg` keys draw
their bits with) is not defined by JAX but by XLA, whose algorithms are Philox-4x32-10 and
Threefry-2x32-20 over a 128-bit state. JAX passes the key as four uint32 words, read as the two
uint64 `[s0, s1]` (words 0-1 and 2-3, low word first). XLA's expander (rng_bit_generator_expander.cc,
prng.cc) then:

- PHILOX (also RNG_DEFAULT, which XLA's CPU and GPU backends take as Philox): the key is s0, the
  128-bit counter has s1 as its low half and s0 as its high half (a two-word state is reversed);
  counter + i for i < ceil(n / 4) (n 32-bit words; twice as many for 64-bit results) feeds 10 Philox
  rounds whose four output words are interleaved round-robin; the new state is s1 + ceil(n / 4).
- THREE_FRY: the key is s0, the counter s1; the shape is split in halves along its first even
  dimension (else its largest; a scalar counts as [1]), counter + i (i the row-major index in the
  half shape) feeds Threefry-2x32, and the two output words fill the two halves, interleaved on the
  split dimension; the new state is s1 + the half's size. 64-bit results take no split: low | high << 32.

Results narrower than 32 bits keep the low bits of 32-bit ones; the dtypes are JAX's, unsigned of 8,
16, 32 or 64 bits. The composition uses uint32 and uint64 arithmetic only, so it lowers, vectorizes
and batches as any integer code does.
"""
from __future__ import annotations

import math

import numpy as np

from sprue.base.errors import SprueTypeError, SprueValueError
from sprue.lax import elementwise as _e
from sprue.lax import indexing as _i
from sprue.lax import structural as _s
from sprue.lax.random_bits import threefry2x32

__all__ = ["RNG_ALGORITHMS", "rng_bit_generator"]

RNG_ALGORITHMS = ("RNG_DEFAULT", "RNG_THREE_FRY", "RNG_PHILOX")
_U32, _U64 = np.dtype(np.uint32), np.dtype(np.uint64)
# Philox-4x32's Weyl increments of the key and its two multipliers (Salmon et al., SC'11; prng.cc)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)
_PHILOX_M = (0xD2511F53, 0xCD9E8D57)
_NATIVE = {np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64)}


def _u64(lo, hi):
    return _e.bitwise_or(_e.convert_element_type(lo, _U64),
                         _e.shift_left(_e.convert_element_type(hi, _U64), _U64.type(32)))


def _halves(x):
    """The low and high uint32 words of uint64 x."""
    return (_e.convert_element_type(x, _U32),
            _e.convert_element_type(_e.shift_right_logical(x, _U64.type(32)), _U32))


def _philox_rounds(x: list, k0, k1) -> list:
    """Philox-4x32's 10 rounds of the counter words x under the key (k0, k1)."""
    for _ in range(10):
        hi0, lo0 = _mul_hi_lo(x[0], _PHILOX_M[0])
        hi1, lo1 = _mul_hi_lo(x[2], _PHILOX_M[1])
        x = [_e.bitwise_xor(_e.bitwise_xor(hi1, x[1]), k0), lo1, _e.bitwise_xor(_e.bitwise_xor(hi0, x[3]), k1), lo0]
        k0, k1 = _e.add(k0, _U32.type(_PHILOX_W[0])), _e.add(k1, _U32.type(_PHILOX_W[1]))
    return x


def _mul_hi_lo(x, m: int):
    lo, hi = _halves(_e.mul(_e.convert_element_type(x, _U64), _U64.type(m)))
    return hi, lo


def _philox(words, n: int, wide: bool):
    """(the new state's words 2-3, the flat results) of Philox for n results."""
    n32 = 2 * n if wide else n
    m = -(-n32 // 4)
    s0, s1 = _u64(words[0], words[1]), _u64(words[2], words[3])
    low = _e.add(_s.iota(_U64, m), s1)
    high = _e.add(s0, _e.convert_element_type(_e.lt(low, s1), _U64))   # the 128-bit add's carry
    out = _philox_rounds([*_halves(low), *_halves(high)], words[0], words[1])
    if wide:
        out = [_u64(out[0], out[1]), _u64(out[2], out[3])]
    flat = _s.reshape(_i.concatenate([_s.reshape(o, (m, 1)) for o in out], 1), (m * len(out),))
    return _halves(_e.add(s1, _U64.type(m))), _i.slice(flat, (0,), (n,))


def _split_in_halves(shape: tuple) -> tuple[int, tuple]:
    if not shape:
        return 0, (1,)
    even = [i for i, d in enumerate(shape) if d % 2 == 0]
    split = even[0] if even else int(np.argmax(shape))
    return split, tuple(-(-d // 2) if i == split else d for i, d in enumerate(shape))


def _threefry(words, shape: tuple, wide: bool):
    """(the new state's words 2-3, the results) of XLA's Threefry for `shape`."""
    s1 = _u64(words[2], words[3])
    split, half = (None, shape) if wide else _split_in_halves(shape)
    count = math.prod(half)
    x0, x1 = threefry2x32(words[0], words[1], *_halves(_e.add(_s.iota(_U64, count), s1)))
    new_state = _halves(_e.add(s1, _U64.type(count)))
    if wide:
        return new_state, _s.reshape(_u64(x0, x1), shape)
    if not shape:
        return new_state, _s.reshape(x0, ())
    halves = [_s.reshape(x, (*half[:split + 1], 1, *half[split + 1:])) for x in (x0, x1)]
    full = list(shape)
    full[split] = 2 * half[split]
    both = _s.reshape(_i.concatenate(halves, split + 1), tuple(full))
    return new_state, _i.slice(both, (0,) * len(shape), shape)


def rng_bit_generator(key, shape, dtype=np.uint32, algorithm: str = "RNG_DEFAULT"):
    """(new key, random bits of `shape` and `dtype`) from a uint32[4] key, as XLA's CPU backend
    computes lax.rng_bit_generator (see the module doc); `algorithm` is one of RNG_ALGORITHMS.
    Under sprue.vmap each key draws its own bits; JAX's batching rule draws the whole batch's from
    the first key (the jaxpr reader does that for printed key arrays, as JAX computed them)."""
    algorithm = str(getattr(algorithm, "name", algorithm))
    if algorithm not in RNG_ALGORITHMS:
        raise SprueValueError(f"rng_bit_generator: unknown algorithm {algorithm!r} (one of {', '.join(RNG_ALGORITHMS)})")
    aval = key.aval if hasattr(key, "aval") else None
    key_shape, key_dtype = (aval.shape, aval.dtype) if aval is not None else (np.shape(key), np.asarray(key).dtype)
    if tuple(key_shape) != (4,) or np.dtype(key_dtype) != _U32:
        raise SprueTypeError(f"rng_bit_generator takes a uint32[4] key (JAX's form of XLA's two uint64 words),"
                             f" got {np.dtype(key_dtype).name}{list(key_shape)}")
    dtype, shape = np.dtype(dtype), tuple(int(d) for d in shape)
    if dtype not in _NATIVE:
        raise SprueTypeError(f"rng_bit_generator makes unsigned bits (uint8, uint16, uint32 or uint64, as JAX's),"
                             f" got dtype {dtype.name}")
    n = math.prod(shape)
    if n == 0:
        return key, _s.broadcast_in_dim(np.zeros((), dtype), shape, ())
    words = [_s.reshape(_i.slice(key, (i,), (i + 1,)), ()) for i in range(4)]
    wide = dtype.itemsize == 8
    if algorithm == "RNG_THREE_FRY":
        state, bits = _threefry(words, shape, wide)
    else:
        state, flat = _philox(words, n, wide)
        bits = _s.reshape(flat, shape)
    new_key = _i.concatenate([_s.reshape(w, (1,)) for w in (*words[:2], *state)], 0)
    return new_key, (_e.convert_element_type(bits, dtype) if dtype.itemsize < 4 else bits)
