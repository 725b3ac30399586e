"""Transcendentals written as arithmetic where that is faster than a vector library call.

exp: glibc's libmvec exp is fast on ordinary lanes, but a vector with a lane that underflows or
overflows (a masked softmax's exp(-1e30 - max) or exp(-inf), a sigmoid of a large input) goes
through scalar exp lane by lane, errno included: causal attention over 8 x 256 x 256 scores spent
55% of its time there (4.6 ms, JAX 1.7). Written out (Cody & Waite's reduction, a Taylor
polynomial, the power of two in two steps: _exp below) it handles every lane alike, 3-5% faster
than libmvec on ordinary inputs. tanh keeps libmvec's exp (its argument 2|x| overflows only past
|x| = 354), measured 10% faster there than the written-out one.

tanh: glibc's libmvec variant (vector_math.py) costs ~5 ns an f64 element on AVX2, where numpy's
SIMD tanh and XLA's take ~1-3.5; GELU's, LSTMs' and tanh networks' activations spend their time
there. Cephes' tanh (Moshier), which glibc's scalar tanh descends from too, is

    |x| <  0.625:  x + x^3 P(x^2) / Q(x^2)     (a rational approximation, ~1 ulp)
    |x| >= 0.625:  1 - 2 / (exp(2|x|) + 1)     (exp from libmvec, vectorized by LLVM)

with the sign of x. Both halves are computed for every element and one selected, so the loop
vectorizes; they share one division (the small half's P / Q or the large half's 2 / (s + 1)).
Special values fall out: +-0 keeps its sign (copysign), tiny and denormal x give x, large |x| and
+-inf give +-1 (exp overflows to inf, 2 / inf = 0), nan gives nan. f32 takes Cephes' tanhf: an
odd polynomial of degree 11 below 0.625, the same exp form above it, in f32. The ulp tests of
tests/lowering/test_vector_math.py hold it to 4 ulp of numpy on special values and whole ranges.
"""
from __future__ import annotations

import math

from torch_mlir import ir
from torch_mlir.dialects import arith
from torch_mlir.dialects import math as mmath

from sprue.lowering.mlir_util import ops_where

SMALL = 0.625
# Cephes tanh.c: P / Q for |x| < 0.625, coefficients highest power first (Q's leading 1 implicit)
_P64 = (-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3)
_Q64 = (1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3)
# Cephes tanhf.c: x + x^3 P(x^2) for |x| < 0.625
_P32 = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1)


def _horner(z: ir.Value, coefficients: tuple[float, ...], t: ir.Type, leading_one: bool = False) -> ir.Value:
    """sum c_i z^(n-i), highest power first (a leading 1 first where `leading_one`), by FMAs."""
    terms = list(coefficients)
    acc = arith.constant(t, 1.0 if leading_one else terms.pop(0))
    for c in terms:
        acc = mmath.fma(acc, z, arith.constant(t, c))
    return acc


def _tanh(x: ir.Value) -> ir.Value:
    t = x.type
    one, two = arith.constant(t, 1.0), arith.constant(t, 2.0)
    ax = mmath.absf(x)
    small = arith.cmpf(arith.CmpFPredicate.OLT, ax, arith.constant(t, SMALL))
    z = arith.mulf(ax, ax)
    s = mmath.exp(arith.mulf(two, ax))
    large_den = arith.addf(s, one)
    if str(t) == "f64":
        num = arith.select(small, _horner(z, _P64, t), two)
        den = arith.select(small, _horner(z, _Q64, t, leading_one=True), large_den)
        d = arith.divf(num, den)                     # P / Q, or 2 / (s + 1)
        near = mmath.fma(arith.mulf(ax, z), d, ax)
    else:
        d = arith.divf(two, large_den)
        near = mmath.fma(arith.mulf(ax, z), _horner(z, _P32, t), ax)
    far = arith.subf(one, d)
    return mmath.copysign(arith.select(small, near, far), x)


# exp: x = n ln2 + r, |r| <= ln2 / 2 (n = round(x / ln2); Cody & Waite's two-part ln2, exact
# with FMAs), e^r by its Taylor polynomial, e^x = e^r 2^n. Degree 13 (f64) and 7 (f32): the
# truncation at |r| = 0.347 is r^14 / 14! = 4e-18 and r^8 / 8! = 5e-9, under an ulp (1.1e-16,
# 6e-8), so Horner's rounding is the error (~1 ulp). 2^n is two powers of two, 2^(n/2) and
# 2^(n - n/2), each a normal number for every n of a clamped x: results near the bottom of the
# range round once, into the subnormals, as libm's do, and large ones overflow to inf.
_LN2 = {"f64": (6.93147180369123816490e-01, 1.90821492927058770002e-10),
        "f32": (6.93359375e-1, -2.12194440e-4)}
_EXP_RANGE = {"f64": (-746.0, 710.0), "f32": (-104.0, 89.0)}
_EXP_TERMS = {"f64": 13, "f32": 7}
_FLOAT_BITS = {"f64": (64, 52, 1023), "f32": (32, 23, 127)}


def _exp(x: ir.Value) -> ir.Value:
    t, name = x.type, str(x.type)
    width, mantissa, bias = _FLOAT_BITS[name]
    i = ir.IntegerType.get_signless(width)
    lo, hi = _EXP_RANGE[name]
    xc = arith.minnumf(arith.maxnumf(x, arith.constant(t, lo)), arith.constant(t, hi))
    n = mmath.roundeven(arith.mulf(xc, arith.constant(t, 1.4426950408889634)))
    ln2_hi, ln2_lo = _LN2[name]
    r = mmath.fma(arith.negf(n), arith.constant(t, ln2_hi), xc)
    r = mmath.fma(arith.negf(n), arith.constant(t, ln2_lo), r)
    terms = _EXP_TERMS[name]
    p = arith.constant(t, 1.0 / math.factorial(terms))
    for k in range(terms - 1, -1, -1):
        p = mmath.fma(p, r, arith.constant(t, 1.0 / math.factorial(k)))
    ni = arith.fptosi(i, n)
    half = arith.shrsi(ni, arith.constant(i, 1))
    rest = arith.subi(ni, half)

    def power(e: ir.Value) -> ir.Value:
        return arith.bitcast(t, arith.shli(arith.addi(e, arith.constant(i, bias)), arith.constant(i, mantissa)))
    y = arith.mulf(arith.mulf(p, power(half)), power(rest))
    return arith.select(arith.cmpf(arith.CmpFPredicate.UNO, x, x), x, y)


def _expand(module: ir.Module, name: str, build) -> None:
    """Every scalar f32/f64 `name` op becomes `build`'s arithmetic (before the llvm stage's
    vectorization, like math-polynomial-approximation, which MLIR has for f32 only)."""
    found = ops_where(module.operation, lambda op: op.name == name and str(op.results[0].type) in ("f32", "f64"))
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


__all__ = ["expand_exp", "expand_tanh"]
