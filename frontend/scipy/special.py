"""sprue.scipy.special: jax.scipy.special's functions, over sprue.lax's special-function primitives
(erf, erfc, erf_inv, lgamma, digamma, igamma, igammac, bessel_i0e, bessel_i1e, logistic, zeta,
polygamma, betainc) and
sprue.numpy. Traced and eager alike, differentiable where jax.scipy's are; integer and bool
arguments are computed in float64 (jax.scipy under x64), Python scalars take the other operand's
float type. Values follow jax.scipy 0.10's where it departs from scipy (loggamma(0) is nan)."""
from __future__ import annotations

import math

import numpy as np

import sprue.numpy as jnp
from sprue import lax
from sprue.lax.custom_derivatives import custom_jvp
from sprue.numpy._avals import value_error
from sprue.numpy._promote import operand, result_type, static_int

__all__ = ["erf", "erfc", "erfinv", "expit", "logit", "gammaln", "loggamma", "gamma", "gammasgn", "digamma",
           "polygamma", "zeta", "betainc",
           "gammainc", "gammaincc", "beta", "betaln", "factorial", "comb", "poch", "multigammaln", "xlogy",
           "xlog1py", "entr", "rel_entr", "kl_div", "logsumexp", "softmax", "log_softmax", "ndtr", "ndtri",
           "log_ndtr", "i0", "i0e", "i1", "i1e", "boxcox", "boxcox1p"]


def float_operands(fname: str, *xs):
    """The operands as arrays of their common float type (float64 for integers and bools)."""
    xs = [operand(fname, x) for x in xs]
    dt, _ = result_type(*xs)
    if not np.issubdtype(dt, np.inexact):
        dt = np.dtype(np.float64)
    out = [jnp.asarray(x, dtype=dt) for x in xs]
    return out[0] if len(out) == 1 else out


# -- the error function and the normal distribution ----------------------------------------------
def erf(x):
    return lax.erf(float_operands("erf", x))


def erfc(x):
    return lax.erfc(float_operands("erfc", x))


def erfinv(x):
    return lax.erf_inv(float_operands("erfinv", x))


def ndtr(x):
    """The standard normal CDF, from erf near 0 and erfc in the tails (jax.scipy's split: no
    cancellation on either side)."""
    x = float_operands("ndtr", x)
    half_sqrt_2 = 0.5 * math.sqrt(2.0)
    w = x * half_sqrt_2
    z = jnp.abs(w)
    y = jnp.where(z < half_sqrt_2, 1.0 + lax.erf(w), jnp.where(w > 0, 2.0 - lax.erfc(z), lax.erfc(z)))
    return 0.5 * y


# Acklam's rational approximation of the normal quantile (relative error < 1.2e-9), then one step of
# Halley's method on ndtr, which makes it exact to rounding wherever erfc is (P. J. Acklam, "An
# algorithm for computing the inverse normal cumulative distribution function").
_ACKLAM_A = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
             -3.066479806614716e+01, 2.506628277459239e+00)
_ACKLAM_B = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
             -1.328068155288572e+01)
_ACKLAM_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
             4.374664141464968e+00, 2.938163982698783e+00)
_ACKLAM_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)
_ACKLAM_LOW = 0.02425


def _horner(coefficients, t):
    out = coefficients[0]
    for c in coefficients[1:]:
        out = out * t + c
    return out


def ndtri(p):
    """The inverse of ndtr: -inf at 0, inf at 1, nan outside [0, 1]."""
    p = float_operands("ndtri", p)
    tail = jnp.minimum(p, 1.0 - p)                    # the smaller tail: the approximation's input
    safe_tail = jnp.clip(tail, 1e-300, 0.5)
    q = jnp.sqrt(-2.0 * jnp.log(safe_tail))
    x_tail = _horner(_ACKLAM_C, q) / (_horner(_ACKLAM_D, q) * q + 1.0)          # < 0: the lower tail's
    r = p - 0.5
    r2 = r * r
    x_central = r * _horner(_ACKLAM_A, r2) / (_horner(_ACKLAM_B, r2) * r2 + 1.0)
    x = jnp.where(tail < _ACKLAM_LOW, jnp.where(p < 0.5, x_tail, -x_tail), x_central)
    # Halley's step on the smaller tail (its error relative to itself), by symmetry for p > 0.5
    lower = jnp.where(p < 0.5, x, -x)
    e = 0.5 * lax.erfc(-lower / math.sqrt(2.0)) - tail
    u = e * math.sqrt(2.0 * math.pi) * jnp.exp(0.5 * lower * lower)
    lower = lower - u / (1.0 + 0.5 * lower * u)
    x = jnp.where(p < 0.5, lower, -lower)
    x = jnp.where(p == 0.0, -jnp.inf, jnp.where(p == 1.0, jnp.inf, x))
    return jnp.where((p < 0.0) | (p > 1.0) | jnp.isnan(p), jnp.nan, x)


def log_ndtr(x, series_order=3):
    """log(ndtr(x)) without underflow: jax.scipy's three regions (the asymptotic series of Abramowitz
    and Stegun 26.2.12 below -20, or -10 in float32; log1p(-ndtr(-x)) above 8, or 5)."""
    series_order = static_int("log_ndtr", series_order, "series_order")
    if not 0 <= series_order <= 30:
        raise value_error("log_ndtr", f"series_order must be between 0 and 30, got {series_order}")
    x = float_operands("log_ndtr", x)
    lower, upper = (-10.0, 5.0) if x.dtype == np.float32 else (-20.0, 8.0)
    safe_lower = jnp.minimum(x, lower)
    x2 = safe_lower * safe_lower
    series, term = 1.0, 1.0
    for n in range(1, series_order + 1):   # (2n-1)!! / x^2n, alternating
        term = term * (2 * n - 1)
        series = series + (-1) ** n * term / x2 ** n
    asymptotic = -0.5 * x2 - jnp.log(-safe_lower) - 0.5 * math.log(2.0 * math.pi) + jnp.log(series)
    middle = jnp.log(ndtr(jnp.clip(x, lower, upper)))
    high = jnp.log1p(-ndtr(-jnp.maximum(x, upper)))
    return jnp.where(x > upper, high, jnp.where(x > lower, middle, asymptotic))


# -- the logistic function -----------------------------------------------------------------------
def expit(x):
    return lax.logistic(float_operands("expit", x))


def logit(x):
    x = float_operands("logit", x)
    return jnp.log(x / (1.0 - x))


# -- gamma and friends ---------------------------------------------------------------------------
def gammaln(x):
    return lax.lgamma(float_operands("gammaln", x))


def loggamma(x):
    """log(gamma(x)) for real x > 0, nan elsewhere (jax.scipy's, for real arguments)."""
    x = float_operands("loggamma", x)
    return jnp.where(x > 0, lax.lgamma(x), jnp.nan)


def gammasgn(x):
    x = float_operands("gammasgn", x)
    floor_x = jnp.floor(x)
    positive = (x >= 0) | (jnp.remainder(floor_x, 2.0) == 0)
    pole = (x < 0) & (x == floor_x)
    return jnp.where(jnp.isnan(x) | pole, jnp.nan, jnp.where(positive, 1.0, -1.0).astype(x.dtype))


def gamma(x):
    x = float_operands("gamma", x)
    return gammasgn(x) * jnp.exp(lax.lgamma(x))


def digamma(x):
    return lax.digamma(float_operands("digamma", x))


def polygamma(n, x):
    """The n-th derivative of digamma (n a non-negative integer)."""
    n, x = float_operands("polygamma", n, x)
    return lax.polygamma(n, x)


def zeta(x, q=None):
    """Hurwitz's zeta function sum_k (k + q)^-x; Riemann's (q = 1) without q."""
    if q is None:
        q = 1.0
    x, q = float_operands("zeta", x, q)
    return lax.zeta(x, q)


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b)."""
    a, b, x = jnp.broadcast_arrays(*float_operands("betainc", a, b, x))
    return lax.betainc(a, b, x)


def gammainc(a, x):
    a, x = float_operands("gammainc", a, x)
    return lax.igamma(a, x)


def gammaincc(a, x):
    a, x = float_operands("gammaincc", a, x)
    return lax.igammac(a, x)


def betaln(a, b):
    a, b = float_operands("betaln", a, b)
    return lax.lgamma(a) + lax.lgamma(b) - lax.lgamma(a + b)


def beta(a, b):
    a, b = float_operands("beta", a, b)
    sign = gammasgn(a) * gammasgn(b) * gammasgn(a + b)
    return sign * jnp.exp(betaln(a, b))


def factorial(n, exact=False):
    if exact:
        raise NotImplementedError("factorial with exact=True is not supported in sprue (as in jax.scipy):"
                                  " its integers would overflow; use exact=False")
    n = float_operands("factorial", n)
    return jnp.where(n < 0, 0.0, jnp.exp(lax.lgamma(n + 1.0)))


def comb(N, k, exact=False, repetition=False):
    if exact:
        raise NotImplementedError("comb with exact=True is not supported in sprue (as in jax.scipy); use"
                                  " exact=False")
    N, k = float_operands("comb", N, k)
    if repetition:
        N = N + k - 1.0
    value = jnp.exp(lax.lgamma(N + 1.0) - lax.lgamma(k + 1.0) - lax.lgamma(N - k + 1.0))
    return jnp.where((k >= 0) & (N >= 0) & (k <= N), value, 0.0)


def poch(z, m):
    """Pochhammer's rising factorial gamma(z + m) / gamma(z)."""
    z, m = float_operands("poch", z, m)
    sign = gammasgn(z + m) * gammasgn(z)
    return jnp.where(m == 0, 1.0, sign * jnp.exp(lax.lgamma(z + m) - lax.lgamma(z)))


def multigammaln(a, d):
    d = static_int("multigammaln", d, "d")
    if d < 1:
        raise value_error("multigammaln", f"d must be a positive integer, got {d}")
    a = float_operands("multigammaln", a)
    total = d * (d - 1) / 4.0 * math.log(math.pi)
    for j in range(d):
        total = total + lax.lgamma(a - j / 2.0)
    return total


# -- logarithms that are 0 where their factor is (custom JVPs as jax.scipy's: d/dx is log(y), also at
# x == 0) ------------------------------------------------------------------------------------------
def _x_times(log_fn):
    @custom_jvp
    def fn(x, y):
        x_ok = x != 0.0
        safe_x, safe_y = jnp.where(x_ok, x, 1.0), jnp.where(x_ok, y, 1.0)
        return jnp.where(x_ok, safe_x * log_fn(safe_y), jnp.zeros_like(x))

    @fn.defjvp
    def fn_jvp(primals, tangents):
        x, y = primals
        x_dot, y_dot = tangents
        derivative = 1.0 / y if log_fn is jnp.log else 1.0 / (1.0 + y)
        return fn(x, y), x_dot * log_fn(y) + y_dot * x * derivative
    return fn


_xlogy = _x_times(jnp.log)
_xlog1py = _x_times(jnp.log1p)


def xlogy(x, y):
    x, y = jnp.broadcast_arrays(*float_operands("xlogy", x, y))
    return _xlogy(x, y)


def xlog1py(x, y):
    x, y = jnp.broadcast_arrays(*float_operands("xlog1py", x, y))
    return _xlog1py(x, y)


def entr(x):
    x = float_operands("entr", x)
    return jnp.where(x < 0, -jnp.inf, -xlogy(x, x))


def rel_entr(p, q):
    p, q = jnp.broadcast_arrays(*float_operands("rel_entr", p, q))
    both_positive = (p > 0) & (q > 0)
    safe_p, safe_q = jnp.where(both_positive, p, 1.0), jnp.where(both_positive, q, 1.0)
    value = xlogy(safe_p, safe_p / safe_q)
    return jnp.where(both_positive, value, jnp.where((p == 0) & (q >= 0), 0.0, jnp.inf))


def kl_div(p, q):
    p, q = jnp.broadcast_arrays(*float_operands("kl_div", p, q))
    both_positive = (p > 0) & (q > 0)
    safe_p, safe_q = jnp.where(both_positive, p, 1.0), jnp.where(both_positive, q, 1.0)
    value = xlogy(safe_p, safe_p / safe_q) - safe_p + safe_q
    return jnp.where(both_positive, value, jnp.where((p == 0) & (q >= 0), q, jnp.inf))


# -- log-sum-exp and softmax ---------------------------------------------------------------------
def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    """log(sum(b * exp(a))) over `axis`, shifted by the (gradient-free) maximum; with `b`, a negative
    sum is nan unless return_sign=True, which also returns its sign (jax.scipy's)."""
    if b is None:
        a = float_operands("logsumexp", a)
    else:
        a, b = jnp.broadcast_arrays(*float_operands("logsumexp", a, b))
        a = jnp.where(b != 0, a, -jnp.inf)
    amax = jnp.max(a, axis=axis, keepdims=True, where=where, initial=-jnp.inf)
    amax = lax.stop_gradient(jnp.where(jnp.isfinite(amax), amax, 0.0))
    exp_a = jnp.exp(a - amax)
    if b is not None:
        exp_a = exp_a * b
    sumexp = jnp.sum(exp_a, axis=axis, keepdims=keepdims, where=where)
    sign = jnp.sign(sumexp)
    out = jnp.log(jnp.abs(sumexp)) + (amax if keepdims else jnp.squeeze(amax, axis=axis))
    if return_sign:
        return out, sign
    if b is not None:
        out = jnp.where(sign < 0, jnp.nan, out)
    return out


def softmax(x, axis=None):
    """exp(x) / sum(exp(x)) over `axis` (scipy's default: all of x)."""
    x = float_operands("softmax", x)
    unnormalized = jnp.exp(x - lax.stop_gradient(jnp.max(x, axis=axis, keepdims=True)))
    return unnormalized / jnp.sum(unnormalized, axis=axis, keepdims=True)


def log_softmax(x, axis=None):
    x = float_operands("log_softmax", x)
    shifted = x - lax.stop_gradient(jnp.max(x, axis=axis, keepdims=True))
    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=axis, keepdims=True))


# -- Bessel functions ----------------------------------------------------------------------------
def i0e(x):
    return lax.bessel_i0e(float_operands("i0e", x))


def i0(x):
    x = float_operands("i0", x)
    return jnp.exp(jnp.abs(x)) * lax.bessel_i0e(x)


def i1e(x):
    return lax.bessel_i1e(float_operands("i1e", x))


def i1(x):
    x = float_operands("i1", x)
    return jnp.exp(jnp.abs(x)) * lax.bessel_i1e(x)


# -- Box-Cox transforms --------------------------------------------------------------------------
def boxcox(x, lmbda):
    x, lmbda = float_operands("boxcox", x, lmbda)
    safe = jnp.where(lmbda == 0, 1.0, lmbda)
    return jnp.where(lmbda == 0, jnp.log(x), jnp.expm1(safe * jnp.log(x)) / safe)


def boxcox1p(x, lmbda):
    x, lmbda = float_operands("boxcox1p", x, lmbda)
    safe = jnp.where(lmbda == 0, 1.0, lmbda)
    return jnp.where(lmbda == 0, jnp.log1p(x), jnp.expm1(safe * jnp.log1p(x)) / safe)
