"""JAX's zeta (Hurwitz's zeta function), polygamma and betainc (the regularized incomplete beta
function), which jax.scipy.special.zeta/polygamma/betainc bind as primitives of their own (`zeta`,
`polygamma`, `regularized_incomplete_beta`): written here in sprue's operations, so a program
read from JAX's text computes them without primitives of sprue's own (their derivatives, where
JAX has them, are spelled out in the printed program).
- zeta(x, q) = sum_k (k + q)^-x: Cephes' zeta.c, as XLA's chlo.zeta: nine terms summed directly,
  then the Euler-Maclaurin tail with twelve Bernoulli terms, in float64 whatever the float type;
- polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x) for n >= 1 (digamma for n = 0; NaN unless n is a
  non-negative integer), as JAX's;
- betainc(a, b, x): JAX's regularized_incomplete_beta_impl, the continued fraction of DLMF 8.17.22
  by the modified Lentz algorithm (200 steps in float32, 600 in float64, stopping when every element
  has settled), with the symmetry I_x(a, b) = 1 - I_(1-x)(b, a) where it converges slowly.
"""
from __future__ import annotations

import numpy as np

from sprue.interp.ad_util import aval_of
from sprue.lax.control_flow.api import while_loop
from sprue.lax.elementwise import (
    abs,
    add,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    convert_element_type,
    div,
    eq,
    exp,
    floor,
    ge,
    gt,
    le,
    log,
    log1p,
    lt,
    mul,
    ne,
    neg,
    pow,
    select_n,
    sub,
)
from sprue.lax.reductions import reduce_or
from sprue.lax.special import digamma, lgamma
from sprue.lax.structural import broadcast_in_dim

__all__ = ["zeta", "polygamma", "betainc"]

# Cephes zeta.c's A[]: (2k)! / B_2k, the Euler-Maclaurin coefficients
_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
           1.8152105401943546773e17, -7.1661652561756670113e18)


def _k(like, v):
    return np.array(v, aval_of(like).dtype)[()]


def _where(p, on_true, on_false):
    shape = aval_of(p).shape
    cases = [x if aval_of(x).shape == shape else broadcast_in_dim(x, shape, ()) for x in (on_false, on_true)]
    return select_n(p, *cases)


def _common(*xs):
    """The operands at one shape (a rank-0 operand broadcast: JAX prints `polygamma 1.0:f32[] a`)."""
    shape = next((aval_of(x).shape for x in xs if aval_of(x).ndim), ())
    return [x if aval_of(x).shape == shape else broadcast_in_dim(x, shape, ()) for x in xs]


def _is_integer(x):
    return eq(x, floor(x))


def _zeta64(x, q):
    s = pow(q, neg(x))
    a, b = q, _k(q, 0.0)
    for _ in range(9):
        a = add(a, _k(q, 1.0))
        b = pow(a, neg(x))
        s = add(s, b)
    w = a
    s = add(s, sub(div(mul(b, w), sub(x, _k(x, 1.0))), mul(_k(b, 0.5), b)))
    fac, k = _k(x, 1.0), 0.0
    for coefficient in _ZETA_A:
        fac = mul(fac, add(x, _k(x, k)))
        b = div(b, w)
        s = add(s, div(mul(fac, b), _k(b, coefficient)))
        k += 1.0
        fac = mul(fac, add(x, _k(x, k)))
        b = div(b, w)
        k += 1.0
    # x = 1: the pole; x < 1: not defined (Cephes' domain); q a non-positive integer: a pole;
    # q < 0 otherwise: defined only for integer x (Cephes)
    s = _where(eq(x, _k(x, 1.0)), _k(x, np.inf), s)
    s = _where(lt(x, _k(x, 1.0)), _k(x, np.nan), s)
    q_pole = bitwise_and(le(q, _k(q, 0.0)), _is_integer(q))
    s = _where(q_pole, _k(x, np.inf), s)
    return _where(bitwise_and(lt(q, _k(q, 0.0)), bitwise_not(bitwise_or(q_pole, _is_integer(x)))), _k(x, np.nan), s)


def zeta(x, q):
    """Hurwitz's zeta function sum_k (k + q)^-x (jax.scipy.special.zeta, lax.zeta)."""
    x, q = _common(x, q)
    dtype = aval_of(x).dtype
    return convert_element_type(_zeta64(convert_element_type(x, np.float64), convert_element_type(q, np.float64)),
                                dtype)


def polygamma(n, x):
    """The n-th derivative of digamma (jax.scipy.special.polygamma, lax.polygamma)."""
    n, x = _common(n, x)
    dtype = aval_of(x).dtype
    n64, x64 = convert_element_type(n, np.float64), convert_element_type(x, np.float64)
    order = add(n64, _k(n64, 1.0))
    sign = sub(_k(n64, 1.0), mul(_k(n64, 2.0), sub(n64, mul(_k(n64, 2.0), floor(div(n64, _k(n64, 2.0)))))))
    # (-1)^(n+1) n!: +1 for odd n, -1 for even n
    higher = mul(mul(neg(sign), exp(lgamma(order))), _zeta64(order, x64))
    out = _where(eq(n64, _k(n64, 0.0)), digamma(x64), higher)
    out = _where(bitwise_or(lt(n64, _k(n64, 0.0)), ne(n64, floor(n64))), _k(out, np.nan), out)
    return convert_element_type(out, dtype)


def _betainc_numerator(step, a, b, x):
    """DLMF 8.17.23's partial numerators (the first is 1)."""
    m = floor(div(convert_element_type(sub(step, np.int32(1)), aval_of(a).dtype), _k(a, 2.0)))
    m = broadcast_in_dim(m, aval_of(a).shape, ())
    one, two = _k(a, 1.0), _k(a, 2.0)
    zero_numerator = div(mul(neg(add(a, b)), x), add(a, one))
    a2m = add(a, mul(two, m))
    even = _where(eq(m, _k(m, 0.0)), zero_numerator,
                  div(mul(mul(neg(add(a, m)), add(add(a, b), m)), x), mul(a2m, add(a2m, one))))
    odd = div(mul(mul(m, sub(b, m)), x), mul(sub(a2m, one), a2m))
    is_even = eq(sub(step, mul(np.int32(2), div(step, np.int32(2)))), np.int32(0))
    numerator = _where(broadcast_in_dim(is_even, aval_of(a).shape, ()), even, odd)
    return _where(broadcast_in_dim(eq(step, np.int32(1)), aval_of(a).shape, ()), _k(a, 1.0), numerator)


def _lentz(a, b, x, steps: int, small):
    """JAX's lentz_thompson_barnett_algorithm over the betainc fraction."""
    def cond(state):
        step, unsettled = state[0], state[1]
        return bitwise_and(lt(step, np.int32(steps)), unsettled)

    def body(state):
        step, _, c, d, h = state
        num = _betainc_numerator(step, a, b, x)
        den = _where(broadcast_in_dim(eq(step, np.int32(0)), aval_of(a).shape, ()), _k(a, 0.0), _k(a, 1.0))
        c = add(den, div(num, c))
        c = _where(lt(abs(c), small), small, c)
        d = add(den, mul(num, d))
        d = _where(lt(abs(d), small), small, d)
        d = div(_k(d, 1.0), d)
        delta = mul(c, d)
        unsettled = ge(abs(sub(delta, _k(delta, 1.0))), small)
        unsettled = reduce_or(unsettled, tuple(range(aval_of(unsettled).ndim))) if aval_of(unsettled).ndim else unsettled
        return step + np.int32(1), unsettled, c, d, mul(h, delta)
    full = broadcast_in_dim(small, aval_of(a).shape, ())
    zeros = broadcast_in_dim(_k(a, 0.0), aval_of(a).shape, ())
    # step 0 (denominator 0) starts the fraction at `small`; the loop runs from step 1, as JAX's
    return while_loop(cond, body, (np.int32(1), np.bool_(True), full, zeros, full))[4]


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b) (jax.scipy.special.betainc, lax.betainc)."""
    a, b, x = _common(a, b, x)
    dtype = np.dtype(aval_of(a).dtype)
    finfo = np.finfo(dtype)
    small = _k(a, finfo.eps / 2)
    zero, one = _k(a, 0.0), _k(a, 1.0)
    a_is_zero = bitwise_or(eq(a, zero), eq(b, _k(b, np.inf)))
    b_is_zero = bitwise_or(eq(b, zero), eq(a, _k(a, np.inf)))
    x_is_zero, x_is_one = eq(x, zero), eq(x, one)
    is_nan = bitwise_or(bitwise_or(ne(a, a), ne(b, b)), ne(x, x))
    result_is_zero = bitwise_or(bitwise_and(b_is_zero, bitwise_not(x_is_one)), bitwise_and(a_is_zero, x_is_zero))
    result_is_one = bitwise_or(bitwise_and(a_is_zero, bitwise_not(x_is_zero)), bitwise_and(b_is_zero, x_is_one))
    result_is_nan = bitwise_or(bitwise_or(lt(a, zero), lt(b, zero)), bitwise_or(lt(x, zero), gt(x, one)))
    result_is_nan = bitwise_or(result_is_nan, bitwise_or(bitwise_and(a_is_zero, b_is_zero), is_nan))
    fast = lt(x, div(add(a, one), add(add(a, b), _k(a, 2.0))))
    a, b = _where(fast, a, b), _where(fast, b, a)
    x = _where(fast, x, sub(one, x))
    fraction = _lentz(a, b, x, 200 if dtype == np.float32 else 600, small)
    lbeta_small_a = sub(lgamma(b), lgamma(add(a, b)))
    lbeta = add(lgamma(a), lbeta_small_a)
    factor = _where(lt(a, _k(a, finfo.tiny * 2)), exp(sub(mul(log1p(neg(x)), b), lbeta_small_a)),
                    div(exp(sub(add(mul(log(x), a), mul(log1p(neg(x)), b)), lbeta)), a))
    result = mul(fraction, factor)
    result = _where(fast, result, sub(one, result))
    result = _where(result_is_zero, zero, result)
    result = _where(result_is_one, one, result)
    return _where(result_is_nan, _k(a, np.nan), result)
