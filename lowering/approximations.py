"""Transcendentals written as arithmetic where that is faster than a vector library call.

exp: glibc's libmvec exp is fast on ordinary lanes, but a vector with a lane that underflows or
overflows (a masked softmax's exp(-1e30 - max) or exp(-inf), a sigmoid of a large input) goes
through scalar exp lane by lane, errno included: causal attention over 8 x 256 x 256 scores spent
55% of its time there (4.6 ms, JAX 1.7). Written out (Cody & Waite's reduction, a Taylor
polynomial, the power of two in two steps: _exp below) it handles every lane alike, 3-5% faster
than libmvec on ordinary inputs.

tanh: glibc's libmvec variant (vector_math.py) costs ~5 ns an f64 element on AVX2, where numpy's
SIMD tanh and XLA's take ~1-3.5; GELU's, LSTMs' and tanh networks' activations spend their time
there. Written out, with no call and no table:

  float64:  tanh |x| = m / (m + 2),  m = expm1(2|x|)   (the sign of x copied on)

expm1 as exp's reduction gives it (_expm1_positive): 2|x| = n ln2 + r, expm1(r) by its Taylor
polynomial without the constant term, expm1 = 2^n expm1(r) + (2^n - 1) in one FMA. m >= 0, so
neither m nor m + 2 cancels: one formula over the whole range, ~2 ulp, no branch for small
arguments (Cephes' P / Q below 0.625 and 1 - 2 / (e^2|x| + 1) above cost both halves and libmvec's
exp: 1.10x numpy's time at 2^20 elements, this 0.70x). 2|x| is clamped at 40 (tanh rounds to 1
from |x| = 19.1) by a NaN-propagating minimum: +-0 keeps its sign, tiny and subnormal x give x,
+-inf gives +-1, nan gives nan.

  float32:  Eigen's generic_fast_tanh_float, which XLA's CPU tanh is: x P(x^2) / Q(x^2), degrees
            13 and 6, |x| clamped at 7.9988 (where it gives exactly 1), x itself below 0.0004

Fourteen vector ops and one division: 0.78x numpy's time at 2^20 elements, where the expm1 form
above took 1.17x (its exp reduction and 2^n build are most of its ops). Within 5 ulp of numpy
over every float32 in [0, 9.5] (4 ulp or less for all but 123 of 1.09e9; exhaustive, checked
when it was written): JAX's own float32 tanh, and the bound test_vector_math.py holds it to.

log: libmvec's float64 log took 1.2x numpy's time (2^20 elements, one core, Zen 5), and its
float32 log is up to 4 ulp off, so float32 log was computed in float64 at 2.7x numpy's time.
Both are now calls that the LLVM stage defines for the target CPU (vector_log.py: Cephes' logf
and fdlibm's log inlined, within 1 ulp of the correctly rounded result, or an AVX-512 table kernel
in vector loops where the CPU has it).
"""
from __future__ import annotations

import math

from torch_mlir import ir
from torch_mlir.dialects import arith
from torch_mlir.dialects import math as mmath

from sprue.lowering.mlir_util import call_declared, ops_where
from sprue.lowering.vector_log import LOG_F32, LOG_F64

# Eigen's generic_fast_tanh_float (MathFunctionsImpl.h): numerator (odd) and denominator (even)
# coefficients in x^2, highest power first
_TANH32_P = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
             1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03)
_TANH32_Q = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03)
_TANH32_CLAMP, _TANH32_TINY = 7.99881172180175781, 0.0004
_TANH64_CLAMP = 40.0   # on 2|x|: tanh rounds to 1 in float64 from |x| = 19.06


def _horner(z: ir.Value, coefficients: tuple[float, ...], t: ir.Type, leading_one: bool = False) -> ir.Value:
    """sum c_i z^(n-i), highest power first (a leading 1 first where `leading_one`), by FMAs."""
    terms = list(coefficients)
    acc = arith.constant(t, 1.0 if leading_one else terms.pop(0))
    for c in terms:
        acc = mmath.fma(acc, z, arith.constant(t, c))
    return acc


def _tanh(x: ir.Value) -> ir.Value:
    t = x.type
    ax = mmath.absf(x)
    if str(t) == "f64":
        y = arith.minimumf(arith.addf(ax, ax), arith.constant(t, _TANH64_CLAMP))
        m = _expm1_positive(y)
        r = arith.divf(m, arith.addf(m, arith.constant(t, 2.0)))
    else:
        xc = arith.minimumf(ax, arith.constant(t, _TANH32_CLAMP))
        z = arith.mulf(xc, xc)
        r = arith.divf(arith.mulf(xc, _horner(z, _TANH32_P, t)), _horner(z, _TANH32_Q, t))
        r = arith.select(arith.cmpf(arith.CmpFPredicate.OLT, ax, arith.constant(t, _TANH32_TINY)), ax, r)
    return mmath.copysign(r, x)


# exp: x = n ln2 + r, |r| <= ln2 / 2 (n = round(x / ln2); Cody & Waite's two-part ln2, exact
# with FMAs), e^r by its Taylor polynomial, e^x = e^r 2^n. Degree 13 (f64) and 7 (f32): the
# truncation at |r| = 0.347 is r^14 / 14! = 4e-18 and r^8 / 8! = 5e-9, under an ulp (1.1e-16,
# 6e-8), so Horner's rounding is the error (~1 ulp). 2^n is two powers of two, 2^(n/2) and
# 2^(n - n/2), each a normal number or +0 for every n of a clamped x: results near the bottom of
# the range round once, into the subnormals, as libm's do, and large ones overflow to inf.
_LN2 = {"f64": (6.93147180369123816490e-01, 1.90821492927058770002e-10),
        "f32": (6.93359375e-1, -2.12194440e-4)}
# The clamp's bottom is the x whose n is -2 bias (e^x rounds to +0 from -745.1 and -104.0): both
# powers of two are then the bit pattern 0, +0.0, and the product an exact +0. At -746 and -104
# they were normal numbers whose product underflowed, and a multiply whose result underflows
# takes a microcode assist: ~3x the time of the whole vector on Zen 5, where a causal mask's
# exp(-1e30 - max) is half of a softmax's lanes. Lanes between the two (no mask gives them) still
# underflow in the multiply, as do the subnormal results above -104 that need it.
_EXP_RANGE = {"f64": (-2046 * math.log(2.0), 710.0), "f32": (-254 * math.log(2.0), 89.0)}
_EXP_TERMS = {"f64": 13, "f32": 7}
_FLOAT_BITS = {"f64": (64, 52, 1023), "f32": (32, 23, 127)}


def _taylor(degree: int, lowest: int) -> tuple[float, ...]:
    """exp's Taylor coefficients 1/k!, k from `degree` down to `lowest` (for _horner)."""
    return tuple(1.0 / math.factorial(k) for k in range(degree, lowest - 1, -1))


def _reduce(x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(n, r): x = n ln2 + r, n = round(x / ln2) as a float, r by Cody & Waite's two-part ln2."""
    t = x.type
    n = mmath.roundeven(arith.mulf(x, arith.constant(t, 1.4426950408889634)))
    ln2_hi, ln2_lo = _LN2[str(t)]
    r = mmath.fma(arith.negf(n), arith.constant(t, ln2_hi), x)
    return n, mmath.fma(arith.negf(n), arith.constant(t, ln2_lo), r)


def _power_of_two(e: ir.Value, t: ir.Type) -> ir.Value:
    """2^e for an integer e in the normal exponent range, built in the exponent bits."""
    width, mantissa, bias = _FLOAT_BITS[str(t)]
    i = e.type
    return arith.bitcast(t, arith.shli(arith.addi(e, arith.constant(i, bias)), arith.constant(i, mantissa)))


def _exp(x: ir.Value) -> ir.Value:
    t, name = x.type, str(x.type)
    i = ir.IntegerType.get_signless(_FLOAT_BITS[name][0])
    lo, hi = _EXP_RANGE[name]
    # NaN-propagating clamps (one vmaxps/vminps each against a constant): a nan stays nan through
    # the polynomial, and nan times the power of two is nan, with no select at the end
    xc = arith.minimumf(arith.maximumf(x, arith.constant(t, lo)), arith.constant(t, hi))
    n, r = _reduce(xc)
    p = _horner(r, _taylor(_EXP_TERMS[name], 0), t)
    ni = arith.fptosi(i, n)
    half = arith.shrsi(ni, arith.constant(i, 1))
    rest = arith.subi(ni, half)
    return arith.mulf(arith.mulf(p, _power_of_two(half, t)), _power_of_two(rest, t))


def _expm1_positive(y: ir.Value) -> ir.Value:
    """expm1(y) for 0 <= y <= 40 (tanh's 2|x|, clamped): expm1(r) = r + r^2 (1/2! + r/3! + ...)
    to r^13 / 13! (exp's degree), then 2^n expm1(r) + (2^n - 1) in one FMA; 2^n is one normal
    number here and 2^n - 1 exact for n <= 53, so the error is expm1(r)'s, ~1 ulp."""
    t = y.type
    n, r = _reduce(y)
    q = _horner(r, _taylor(_EXP_TERMS[str(t)], 2), t)
    p = mmath.fma(arith.mulf(r, r), q, r)
    s = _power_of_two(arith.fptosi(ir.IntegerType.get_signless(_FLOAT_BITS[str(t)][0]), n), t)
    return mmath.fma(s, p, arith.subf(s, arith.constant(t, 1.0)))


def _expand(module: ir.Module, name: str, build, types: tuple[str, ...] = ("f32", "f64")) -> None:
    """Every scalar f32/f64 `name` op becomes `build`'s arithmetic (before the llvm stage's
    vectorization, like math-polynomial-approximation, which MLIR has for f32 only)."""
    found = ops_where(module.operation, lambda op: op.name == name and str(op.results[0].type) in types)
    for op in found:
        with ir.InsertionPoint(op), op.location:
            value = build(op.operands[0])
        op.results[0].replace_all_uses_with(value)
        op.erase()


def expand_exp(module: ir.Module) -> None:
    """Every scalar f32/f64 math.exp becomes the arithmetic above."""
    _expand(module, "math.exp", _exp)


def expand_tanh(module: ir.Module) -> None:
    """Every scalar f32/f64 math.tanh becomes the arithmetic above."""
    _expand(module, "math.tanh", _tanh)


def expand_log(module: ir.Module) -> None:
    """Every scalar f32/f64 math.log becomes a call of vector_log's LOG_F32/LOG_F64, which the
    LLVM stage defines for the target CPU: arithmetic inlined, or an AVX-512 kernel in vector loops."""
    found = ops_where(module.operation, lambda op: op.name == "math.log" and str(op.results[0].type) in ("f32", "f64"))
    call_declared(module, found, lambda op: LOG_F32 if str(op.results[0].type) == "f32" else LOG_F64)


__all__ = ["expand_exp", "expand_log", "expand_tanh"]
