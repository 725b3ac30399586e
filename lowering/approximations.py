"""Transcendentals written as arithmetic where that is faster than a vector library call.

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


def expand_tanh(module: ir.Module) -> None:
    """Every scalar f32/f64 math.tanh becomes the arithmetic above (before the llvm stage's
    vectorization, like math-polynomial-approximation, which MLIR has for f32 only)."""
    found = ops_where(module.operation,
                      lambda op: op.name == "math.tanh" and str(op.results[0].type) in ("f32", "f64"))
    for op in found:
        with ir.InsertionPoint(op), op.location:
            value = _tanh(op.operands[0])
        op.results[0].replace_all_uses_with(value)
        op.erase()


__all__ = ["expand_tanh"]
