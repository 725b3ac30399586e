"""log1p, expm1, cbrt and the inverse trigonometric and hyperbolic functions, from stablehlo ops.

StableHLO has no sinh/cosh/asinh/acosh/atanh/asin/acos/atan (they are chlo ops, and chlo is not
available on this stack), so each is composed from exp/log/sqrt/atan2 with the classic fdlibm
range splits, which keep the result within a few ulp of numpy (glibc) instead of losing all
digits near 0 or overflowing early near the top of the range. Every branch is computed and one is
selected; float ops do not trap, so the unused branches' infs and NaNs are harmless.

stablehlo.log_plus_one and exponential_minus_one become C library calls for float32/float64
(vector_math.call_libm: convert-math-to-llvm would expand them to log(1 + x) and exp(x) - 1, which
lose every digit for tiny x); other float types compose them, with Goldberg's and Kahan's
corrections.

The loops these become are vectorized by LLVM, and their math calls glibc's vector math library
(vector_math.py) or is written out as arithmetic (approximations.py: exp, tanh, log).
"""
from __future__ import annotations

import numpy as np

from sprue import lax
from sprue.ir.core import Eqn
from sprue.lowering.rules_common import (
    LoweringContext,
    Value,
    compare,
    constant_like,
    dtype_of,
    ew,
    logical_or,
    lowering_rules,
    select,
)


def _c(value: float, x: Value) -> Value:
    return constant_like(value, x)


def _with_sign_of(x: Value, magnitude: Value) -> Value:
    """magnitude carrying x's sign, for odd functions f(x) = sign(x) f(|x|); f(+-0) = +-0."""
    signed = select(compare(x, _c(0.0, x), "LT"), ew("negate", magnitude), magnitude)
    return select(compare(x, _c(0.0, x), "EQ"), x, signed)


def _native(x: Value) -> bool:
    """float32/float64 log1p and expm1 are C library calls (vector_math.call_libm), vectorized
    with libmvec; other float types keep the compositions below."""
    return dtype_of(x) in (np.float32, np.float64)


def log1p(x: Value) -> Value:
    """log(1 + x) = log(u) * x / (u - 1) with u = 1 + x: the rounding of u cancels (Goldberg)."""
    if _native(x):
        return ew("log_plus_one", x)
    u = ew("add", _c(1.0, x), x)
    d = ew("subtract", u, _c(1.0, x))
    r = ew("multiply", ew("log", u), ew("divide", x, d))
    r = select(compare(d, _c(0.0, x), "EQ"), x, r)  # 1 + x rounds to 1: log1p x = x (keeps -0.0)
    return select(compare(u, _c(np.inf, x), "EQ"), u, r)  # x = inf: inf/inf would be NaN


def expm1(x: Value) -> Value:
    """exp(x) - 1 = (u - 1) * x / log(u) with u = exp(x): the rounding of u cancels (Kahan)."""
    if _native(x):
        return ew("exponential_minus_one", x)
    u = ew("exponential", x)
    um1 = ew("subtract", u, _c(1.0, x))
    r = ew("multiply", um1, ew("divide", x, ew("log", u)))
    r = select(compare(u, _c(1.0, x), "EQ"), x, r)  # exp(x) rounds to 1: expm1 x = x
    r = select(compare(um1, _c(-1.0, x), "EQ"), um1, r)  # exp(x) underflows relative to 1
    return select(compare(u, _c(np.inf, x), "EQ"), u, r)


def _log(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    return [ew("log", x)]


def _log1p(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    return [log1p(x)]


def _expm1(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    return [expm1(x)]


def _logistic(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    """1/(1 + e^-x) for x >= 0, e^x/(1 + e^x) below: stablehlo.logistic's 1/(1 + e^-x) alone
    overflows e^-x to inf and returns 0 where the result is still a (subnormal) number."""
    e = ew("exponential", ew("negate", ew("abs", x)))   # <= 1: never overflows
    one = _c(1.0, x)
    r = ew("divide", one, ew("add", one, e))
    return [select(compare(x, _c(0.0, x), "LT"), ew("multiply", e, r), r)]


def _cbrt(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    """sign(x) * |x|^(1/3): pow's estimate, then one Newton step y += (a/y^2 - y)/3, which fixes
    the error of the rounded exponent 1/3 (tens of ulp for large |x|) and makes perfect cubes exact.
    (stablehlo.cbrt becomes a libm call that the C-wrapper pass currently breaks.)"""
    a = ew("abs", x)
    y = ew("power", a, _c(1.0 / 3.0, x))
    y = ew("add", y, ew("divide", ew("subtract", ew("divide", a, ew("multiply", y, y)), y), _c(3.0, x)))
    # a = 0 and a = inf make the Newton step 0/0 or inf/inf: cbrt is a itself there
    y = select(logical_or(compare(a, _c(0.0, x), "EQ"), compare(a, _c(np.inf, x), "EQ")), a, y)
    return [_with_sign_of(x, y)]


def _exp_big(a: Value) -> Value:
    """exp(a)/2 for large a (>= 2) without overflowing before the result does: exp(a - 1) * (e/2).
    a - 1 is exact, so this is exp's error plus two roundings (the former exp(a/2)^2/2 doubled
    exp's error: 5-7 ulp from numpy)."""
    return ew("multiply", ew("exponential", ew("subtract", a, _c(1.0, a))), _c(np.e / 2, a))


# Past this |x|, e^-|x| is below the rounding error of e^|x| in every float type we compile.
_EXP_BIG = 20.0


def _sinh(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    a = ew("abs", x)
    u = expm1(a)  # sinh a = (u + u/(u+1)) / 2: no cancellation near 0
    small = ew("multiply", _c(0.5, x), ew("add", u, ew("divide", u, ew("add", u, _c(1.0, x)))))
    r = select(compare(a, _c(_EXP_BIG, x), "LT"), small, _exp_big(a))
    return [_with_sign_of(x, r)]


def _cosh(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    a = ew("abs", x)
    e = ew("exponential", a)
    small = ew("multiply", _c(0.5, x), ew("add", e, ew("divide", _c(1.0, x), e)))
    return [select(compare(a, _c(_EXP_BIG, x), "LT"), small, _exp_big(a))]


def _sqrt_tail(x: Value) -> float:
    """A magnitude past which 1/x^2 is negligible next to 1 (and x^2 still fits)."""
    return {8: 2.0 ** 28, 4: 2.0 ** 12, 2: 2.0 ** 6}[dtype_of(x).itemsize]


def _asinh(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    a = ew("abs", x)
    one, two = _c(1.0, x), _c(2.0, x)
    a2 = ew("multiply", a, a)
    root = ew("sqrt", ew("add", a2, one))  # sqrt(a^2 + 1)
    big = ew("add", ew("log", a), _c(np.log(2.0), x))
    mid = ew("log", ew("add", ew("multiply", two, a), ew("divide", one, ew("add", root, a))))
    small = log1p(ew("add", a, ew("divide", a2, ew("add", one, root))))
    r = select(compare(a, _c(_sqrt_tail(x), x), "GT"), big,
               select(compare(a, two, "GT"), mid, small))
    return [_with_sign_of(x, r)]


def _acosh(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    one, two = _c(1.0, x), _c(2.0, x)
    big = ew("add", ew("log", x), _c(np.log(2.0), x))
    root = ew("sqrt", ew("subtract", ew("multiply", x, x), one))  # sqrt(x^2 - 1)
    mid = ew("log", ew("subtract", ew("multiply", two, x), ew("divide", one, ew("add", x, root))))
    t = ew("subtract", x, one)  # exact near 1, where x^2 - 1 would cancel
    small = log1p(ew("add", t, ew("sqrt", ew("add", ew("multiply", two, t), ew("multiply", t, t)))))
    r = select(compare(x, _c(_sqrt_tail(x), x), "GT"), big, select(compare(x, two, "GT"), mid, small))
    return [select(compare(x, one, "LT"), _c(np.nan, x), r)]


def _atanh(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    a = ew("abs", x)
    one, half = _c(1.0, x), _c(0.5, x)
    two_a = ew("add", a, a)
    one_minus = ew("subtract", one, a)
    # atanh a = log1p(2a / (1 - a)) / 2; below 1/2 rewrite 2a/(1-a) = 2a + 2a*a/(1-a) for accuracy.
    small = log1p(ew("add", two_a, ew("divide", ew("multiply", two_a, a), one_minus)))
    large = log1p(ew("divide", two_a, one_minus))
    r = ew("multiply", half, select(compare(a, half, "LT"), small, large))
    return [_with_sign_of(x, r)]


def _cos_of_asin(x: Value) -> Value:
    """sqrt(1 - x^2) as sqrt((1-x)(1+x)): exact factors near |x| = 1; NaN for |x| > 1."""
    one = _c(1.0, x)
    return ew("sqrt", ew("multiply", ew("subtract", one, x), ew("add", one, x)))


def _asin(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    return [ew("atan2", x, _cos_of_asin(x))]


def _acos(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    return [ew("atan2", _cos_of_asin(x), x)]


def _atan(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    return [ew("atan2", x, _c(1.0, x))]


lowering_rules.update({lax.log_p: _log, lax.logistic_p: _logistic, lax.log1p_p: _log1p, lax.expm1_p: _expm1, lax.cbrt_p: _cbrt,
                       lax.sinh_p: _sinh, lax.cosh_p: _cosh, lax.asinh_p: _asinh, lax.acosh_p: _acosh,
                       lax.atanh_p: _atanh, lax.asin_p: _asin, lax.acos_p: _acos, lax.atan_p: _atan})
