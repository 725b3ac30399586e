"""Special functions and bit operations that jax.numpy, jax.nn and jax.scipy.special emit: erf,
erfc, erf_inv, lgamma, digamma; clz, population_count, bitcast_convert_type, nextafter.

Each block is one primitive's whole story (shape rule, numpy reference, jvp/vjp, batching, cost);
the lowering is in sprue.lowering.rules_special. The numpy references use Python's math module
(erf, erfc, lgamma) where numpy has no such function, and for digamma and erf_inv the same
formulas the lowering uses (their tests compare with math.lgamma's finite differences and
math.erf's inverse)."""
from __future__ import annotations

import math

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueTypeError
from sprue.interp.ad_util import batch_rules, cost_rules
from sprue.interp.batching import elementwise_batch_rule
from sprue.interp.cost import free, per_output_element
from sprue.ir.core import ShapedArray
from sprue.lax._rules import define
from sprue.lax.elementwise import (
    FLOAT,
    INT,
    _binary,
    _c,
    _mul,
    _unary,
    _unary_function,
    _zero_derivative,
    add_p,
    div_p,
    exp_p,
    lt_p,
    mul_p,
    neg_p,
    select_n_p,
    sin_p,
    sub_p,
)

__all__ = ["bitcast_convert_type", "bitcast_convert_type_p", "clz", "clz_p", "digamma", "digamma_p", "erf",
           "erf_inv", "erf_inv_p", "erf_p", "erfc", "erfc_p", "lgamma", "lgamma_p", "nextafter", "nextafter_p",
           "population_count", "population_count_p"]


def _each(f, out_dtype=None):
    """A numpy reference applying the scalar function f to each element (in float64)."""
    def impl(x):
        x = np.asarray(x)
        with np.errstate(all="ignore"):
            y = np.vectorize(f, otypes=[np.float64])(x.astype(np.float64))
        return y.astype(out_dtype or x.dtype)
    return impl


def _lgamma_scalar(v: float) -> float:
    try:
        return math.lgamma(v)
    except ValueError:   # a pole: JAX gives inf
        return math.inf


# Lanczos' approximation (g = 7, n = 9; Numerical Recipes, and XLA's chlo.lgamma/digamma): the
# coefficients the lowering uses too.
LANCZOS_G = 7.0
LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
           -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
           1.5056327351493116e-7)


def _digamma_scalar(v: float) -> float:
    if v <= 0 and v == math.floor(v):
        return math.nan
    if v < 0.5:   # reflection: psi(1 - v) - pi / tan(pi v)
        return _digamma_scalar(1.0 - v) - math.pi / math.tan(math.pi * v)
    z = v - 1.0
    num, den = 0.0, LANCZOS[0]
    for i, c in enumerate(LANCZOS[1:], 1):
        num -= c / (z + i) ** 2
        den += c / (z + i)
    t = z + LANCZOS_G + 0.5
    return math.log(t) + num / den - LANCZOS_G / t


def _erf_inv_scalar(v: float) -> float:
    a = abs(v)
    if a >= 1:
        return math.copysign(math.inf, v) if a == 1 else math.nan
    w = -math.log((1.0 - a) * (1.0 + a))
    coefficients, t = ((ERF_INV_F64_LT_6_25, w - 3.125) if w < 6.25 else
                       (ERF_INV_F64_LT_16, math.sqrt(w) - 3.25) if w < 16 else (ERF_INV_F64_GE_16, math.sqrt(w) - 5.0))
    p = 0.0
    for c in coefficients:
        p = p * t + c
    return math.copysign(p * a, v)


# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011), double precision, as XLA's
# ErfInv64 (xla/hlo/builder/lib/math.cc): polynomials of w = -log(1 - x^2) in three ranges, below
# 6.25 (in w - 3.125), below 16 (in sqrt(w) - 3.25) and above (in sqrt(w) - 5); within ~6e-16 of
# the answer over all of (-1, 1) when w is computed as -log((1 - |x|)(1 + |x|)), whose factors are
# exact near 1 (Sterbenz). XLA's -log1p(-x*x) rounds x*x first: 8% off at 1 - 2^-52. (sprue.lax's
# erf_inv had used the single-precision polynomials with two Newton steps on erf(y) = x: 1e-9
# relative at 1 - 1e-10, where erf(y) rounds near 1.)
# float64: three ranges, below 6.25 (w - 3.125), below 16 (sqrt(w) - 3.25), above (sqrt(w) - 5)
ERF_INV_F64_LT_6_25 = (
    -3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
    1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
    6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
    2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
    1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
    4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
    0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
    0.24015818242558961693, 1.6536545626831027356)
ERF_INV_F64_LT_16 = (
    2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
    1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
    2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
    6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
    0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
    -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
    3.0838856104922207635)
ERF_INV_F64_GE_16 = (
    -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
    -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
    2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
    -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
    7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
    1.0103004648645343977, 4.8499064014085844221)


def _two_over_sqrt_pi_exp_neg_sq(x):
    return _mul(_c(x, 2 / math.sqrt(math.pi)), exp_p.bind(neg_p.bind(mul_p.bind(x, x))))


# -- erf, erfc: the error function and its complement --------------------------------------------
erf_p = _unary("erf", FLOAT, _each(math.erf), lambda x, y: _two_over_sqrt_pi_exp_neg_sq(x))
erfc_p = _unary("erfc", FLOAT, _each(math.erfc), lambda x, y: neg_p.bind(_two_over_sqrt_pi_exp_neg_sq(x)))
erf = _unary_function(erf_p)
erfc = _unary_function(erfc_p)

# -- erf_inv: the inverse error function; d/dx = sqrt(pi)/2 exp(y^2) ----------------------------
erf_inv_p = _unary("erf_inv", FLOAT, _each(_erf_inv_scalar),
                   lambda x, y: _mul(_c(x, math.sqrt(math.pi) / 2), exp_p.bind(mul_p.bind(y, y))))
erf_inv = _unary_function(erf_inv_p)

# -- digamma: d/dx lgamma; d/dx digamma = trigamma, composed below ---------------------------------
def _trigamma(x):
    """psi'(x) from primitives: sum_{k<6} 1/(x+k)^2 + the asymptotic series at x+6 (through x^-9:
    within ~4e-11 there), and psi'(x) = pi^2/sin^2(pi x) - psi'(1-x) below 1/2 (Abramowitz and
    Stegun 6.4.7, 6.4.12)."""
    below = lt_p.bind(x, _c(x, 0.5))
    r = select_n_p.bind(below, x, sub_p.bind(_c(x, 1.0), x))
    total = _c(x, 0.0)
    for k in range(6):
        rk = add_p.bind(r, _c(x, float(k)))
        total = add_p.bind(total, div_p.bind(_c(x, 1.0), mul_p.bind(rk, rk)))
    z = add_p.bind(r, _c(x, 6.0))
    inv = div_p.bind(_c(x, 1.0), z)
    inv2 = mul_p.bind(inv, inv)
    tail = _c(x, -1 / 30)
    for c in (1 / 42, -1 / 30, 1 / 6):
        tail = add_p.bind(mul_p.bind(tail, inv2), _c(x, c))
    tail = mul_p.bind(mul_p.bind(tail, inv2), inv)   # 1/(6z^3) - 1/(30z^5) + 1/(42z^7) - 1/(30z^9)
    tail = add_p.bind(add_p.bind(inv, mul_p.bind(_c(x, 0.5), inv2)), tail)   # + 1/z + 1/(2z^2)
    series = add_p.bind(total, tail)
    s = sin_p.bind(mul_p.bind(_c(x, math.pi), x))
    reflected = sub_p.bind(div_p.bind(_c(x, math.pi ** 2), mul_p.bind(s, s)), series)
    return select_n_p.bind(below, series, reflected)


digamma_p = _unary("digamma", FLOAT, _each(_digamma_scalar), lambda x, y: _trigamma(x))
digamma = _unary_function(digamma_p)

# -- lgamma: log |Gamma(x)|; d/dx = digamma --------------------------------------------------------
lgamma_p = _unary("lgamma", FLOAT, _each(_lgamma_scalar), lambda x, y: digamma_p.bind(x))
lgamma = _unary_function(lgamma_p)


# -- clz, population_count: leading zero bits, set bits (integers; no derivative) -----------------
def _clz_impl(x):
    x = np.asarray(x)
    bits = x.dtype.itemsize * 8
    u = x.astype(np.dtype(f"u{x.dtype.itemsize}")).astype(object)
    return np.vectorize(lambda v: bits - int(v).bit_length(), otypes=[x.dtype])(u)


def _popcnt_impl(x):
    x = np.asarray(x)
    u = x.astype(np.dtype(f"u{x.dtype.itemsize}")).astype(object)
    return np.vectorize(lambda v: bin(int(v)).count("1"), otypes=[x.dtype])(u)


clz_p = _zero_derivative(_unary("clz", INT, _clz_impl, cost=free))
population_count_p = _zero_derivative(_unary("population_count", INT, _popcnt_impl, cost=free))
clz = _unary_function(clz_p)
population_count = _unary_function(population_count_p)


# -- bitcast_convert_type: the same bits read as another type of the same width ------------------
def _bitcast_rule(x: ShapedArray, *, new_dtype):
    new_dtype = np.dtype(new_dtype)
    if dtypes.is_bool(x.dtype) or dtypes.is_bool(new_dtype) or x.dtype.itemsize != new_dtype.itemsize:
        raise SprueTypeError(f"bitcast_convert_type: {x.str_short()} to {dtypes.short_name(new_dtype)} changes"
                             f" the width (sprue bitcasts only between types of one width, not bool)")
    return ShapedArray(x.shape, new_dtype)


bitcast_convert_type_p = _zero_derivative(define(
    "bitcast_convert_type", _bitcast_rule, lambda x, *, new_dtype: np.asarray(x).view(np.dtype(new_dtype))))
batch_rules[bitcast_convert_type_p] = elementwise_batch_rule(bitcast_convert_type_p)
cost_rules[bitcast_convert_type_p] = free


def bitcast_convert_type(x, new_dtype):
    return bitcast_convert_type_p.bind(x, new_dtype=np.dtype(new_dtype))


# -- nextafter: the next float after x towards y (no derivative) ---------------------------------
nextafter_p = _zero_derivative(_binary("nextafter", FLOAT, np.nextafter, cost=per_output_element))


def nextafter(x, y):
    return nextafter_p.bind(x, y)
