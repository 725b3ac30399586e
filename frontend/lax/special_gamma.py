"""The regularized incomplete gamma functions and the exponentially scaled modified Bessel
functions that jax.scipy.special emits: igamma (gammainc), igammac (gammaincc), igamma_grad_a,
random_gamma_grad (jax.random.gamma's derivative), bessel_i0e (i0e), bessel_i1e (i1e).

Each is written once in sprue's own operations, in float64 whatever the operands' float type (then
rounded once): `incomplete_gamma` and `bessel_ie` below. They are these primitives' numpy
references (run eagerly, every operation is numpy's); the incomplete gamma's is also its lowering
(traced and emitted inline by sprue.lowering.rules_special, as the convolution's lowering traces
conv_as_matmul), while the Bessel functions' few lines are written again there as StableHLO (JAX's
chlo.bessel_i1e in foreign StableHLO is lowered by them too, outside any jaxpr); the tests
compare them with closed forms (P(n, x) for integer n, P(1/2, x) = erf(sqrt x), numpy's i0, I1's
power series) and finite differences.

- igamma, igammac: P(a, x) by its power series where x <= 1 or x <= a, else Q(a, x) by Legendre's
  continued fraction (modified Lentz), as XLA and Cephes choose; both run in one while loop over the
  whole array until every element has converged (at most 2,000 steps). Their derivative in `a`
  (igamma_grad_a) carries the derivatives of the series' and the fraction's terms through the same
  loop (XLA's IgammaGradA does this forward-mode sum too);
- bessel_i0e, bessel_i1e: Cephes' Chebyshev expansions on [0, 8] and in 32/x beyond (XLA's
  coefficients, float64).
"""
from __future__ import annotations

import numpy as np

from sprue.base.errors import SprueTypeError
from sprue.interp.ad_util import aval_of, is_zero, jvp_rules, vjp_rules, zero_of
from sprue.lax.control_flow.api import while_loop
from sprue.lax.elementwise import (
    FLOAT,
    _binary,
    _binary_ad,
    _binary_function,
    _unary,
    _unary_function,
    abs,
    add,
    bitwise_and,
    bitwise_or,
    convert_element_type,
    div,
    eq,
    exp,
    gt,
    le,
    log,
    lt,
    mul,
    ne,
    neg,
    select_n,
    sign,
    sqrt,
    sub,
)
from sprue.lax.reductions import reduce_or
from sprue.lax.special import digamma, lgamma
from sprue.lax.structural import broadcast_in_dim

__all__ = ["bessel_i0e", "bessel_i0e_p", "bessel_i1e", "bessel_i1e_p", "igamma", "igamma_grad_a",
           "igamma_grad_a_p", "igamma_p", "igammac", "igammac_p", "random_gamma_grad", "random_gamma_grad_p"]

EPS = float(np.finfo(np.float64).eps)
TINY = 1e-300          # Lentz's floor for a vanishing denominator
MAX_STEPS = 2000       # XLA's bound for the series and the fraction


def _k(like, v):
    return np.array(v, aval_of(like).dtype)[()]


def _in_f64(compute, *xs):
    dtype = aval_of(xs[0]).dtype
    out = compute(*[convert_element_type(x, np.float64) for x in xs])
    return convert_element_type(out, dtype)


def _full(like, v):
    return broadcast_in_dim(_k(like, v), aval_of(like).shape, ())


def select(p, on_true, on_false):
    """p ? on_true : on_false, a rank-0 case taken at p's shape."""
    cases = [on_false, on_true]
    shape = aval_of(p).shape
    cases = [broadcast_in_dim(c, shape, ()) if aval_of(c).shape != shape else c for c in cases]
    return select_n(p, *cases)


def _or(*flags):
    out = flags[0]
    for f in flags[1:]:
        out = bitwise_or(out, f)
    return out


def _any(flags):
    return reduce_or(flags, tuple(range(aval_of(flags).ndim))) if aval_of(flags).ndim else flags


def _not_small(step, total):
    """Whether a sum's last step still moves it (NaN counts as settled: it stays NaN)."""
    return gt(abs(step), mul(abs(total), _k(total, EPS)))


# -- P(a, x) and Q(a, x), with their derivatives in a ----------------------------------------------
def incomplete_gamma(a, x, *, upper: bool, d_a: bool):
    """P(a, x) (Q with `upper`), or its derivative in a with `d_a`; float64 a, x of one shape."""
    nan = _or(ne(a, a), ne(x, x), lt(x, _k(x, 0.0)), le(a, _k(a, 0.0)))
    zero, inf = eq(x, _k(x, 0.0)), eq(x, _k(x, np.inf))
    ok = _or(nan, zero, inf)
    a = select(ok, _k(a, 1.0), a)          # the loop runs on harmless values where the answer is known
    x = select(ok, _k(x, 1.0), x)
    use_fraction = bitwise_and(gt(x, _k(x, 1.0)), gt(x, a))
    one, z = _k(a, 1.0), _k(a, 0.0)
    # series: s = sum_n x^n / (a (a+1) ... (a+n)), its terms t; ds, dt their derivatives in a
    t0 = div(one, a)
    dt0 = neg(mul(t0, t0))
    # fraction: Lentz's c, d, h for 1/(x+1-a- 1(1-a)/(x+3-a- 2(2-a)/(...))) and their derivatives
    b0 = add(sub(x, a), one)
    b0 = select(lt(abs(b0), _k(b0, TINY)), _k(b0, TINY), b0)
    d0 = div(one, b0)
    dd0 = mul(d0, d0)                      # d/da 1/b = 1/b^2 (db/da = -1)

    def body(state):
        n, s, t, ds, dt, b, c, d, h, dc, dd, dh, _ = state
        nf = convert_element_type(n, np.float64)
        # series step: t_n = t_(n-1) x / (a + n)
        an = add(a, nf)
        t_new = div(mul(t, x), an)
        dt_new = sub(div(mul(dt, x), an), div(t_new, an))
        s_new, ds_new = add(s, t_new), add(ds, dt_new)
        # fraction step (Numerical Recipes' gcf): a_n = -n (n - a), b_n = b_(n-1) + 2
        num, dnum = mul(neg(nf), sub(nf, a)), nf
        b = add(b, _k(b, 2.0))
        dpre = add(mul(num, d), b)
        ddpre = sub(add(mul(dnum, d), mul(num, dd)), one)
        small = lt(abs(dpre), _k(dpre, TINY))
        dpre, ddpre = select(small, _k(dpre, TINY), dpre), select(small, z, ddpre)
        c_new = add(b, div(num, c))
        dc_new = sub(sub(div(dnum, c), div(mul(num, dc), mul(c, c))), one)
        small = lt(abs(c_new), _k(c_new, TINY))
        c_new, dc_new = select(small, _k(c_new, TINY), c_new), select(small, z, dc_new)
        d_new = div(one, dpre)
        dd_new = neg(mul(ddpre, mul(d_new, d_new)))
        step = mul(d_new, c_new)
        h_new = mul(h, step)
        dh_new = add(mul(dh, step), mul(h, add(mul(dd_new, c_new), mul(d_new, dc_new))))
        moving = select(use_fraction, _not_small(sub(h_new, h), h_new), _not_small(t_new, s_new))
        if d_a:
            moving = _or(moving, select(use_fraction, _not_small(sub(dh_new, dh), dh_new),
                                                   _not_small(dt_new, ds_new)))
        return (add(n, np.int32(1)), s_new, t_new, ds_new, dt_new, b, c_new, d_new, h_new, dc_new, dd_new, dh_new,
                _any(moving))

    init = (np.int32(1), t0, t0, dt0, dt0, b0, _full(a, 1 / TINY), d0, d0, _full(a, 0.0), dd0, dd0, np.bool_(True))
    out = while_loop(lambda st: bitwise_and(st[-1], lt(st[0], np.int32(MAX_STEPS))), body, init)
    _, s, _, ds, _, _, _, _, h, _, _, dh, _ = out
    log_prefix = sub(sub(mul(a, log(x)), x), lgamma(a))   # log(x^a e^-x / Gamma(a))
    prefix = exp(log_prefix)
    if d_a:
        dlog = sub(log(x), digamma(a))
        d_series = mul(prefix, add(mul(dlog, s), ds))          # dP/da by the series
        d_fraction = mul(prefix, add(mul(dlog, h), dh))        # dQ/da by the fraction
        dp = select(use_fraction, neg(d_fraction), d_series)
        result = neg(dp) if upper else dp
        result = select(_or(zero, inf), z, result)
        return select(nan, _k(a, np.nan), result)
    p_series, q_fraction = mul(prefix, s), mul(prefix, h)
    if upper:
        result = select(use_fraction, q_fraction, sub(one, p_series))
    else:
        result = select(use_fraction, sub(one, q_fraction), p_series)
    result = select(zero, _k(a, 1.0 if upper else 0.0), result)
    result = select(inf, _k(a, 0.0 if upper else 1.0), result)
    return select(nan, _k(a, np.nan), result)


def _density64(a, x):
    """d/dx P(a, x) = x^(a-1) e^-x / Gamma(a)."""
    return exp(sub(sub(mul(sub(a, _k(a, 1.0)), log(x)), x), lgamma(a)))


def _density(a, x):
    return _in_f64(_density64, a, x)


def _gamma_impl(upper: bool, d_a: bool):
    def impl(a, x):
        a, x = np.asarray(a), np.asarray(x)
        shape = np.broadcast_shapes(a.shape, x.shape)
        return np.asarray(gamma_lowered(upper, d_a)(*(np.broadcast_to(v, shape) for v in (a, x)))).astype(a.dtype)
    return impl


def _both_shapes(a, x):
    """(a, x) at their common shape: the loop's carries are of one shape."""
    sa, sx = aval_of(a).shape, aval_of(x).shape
    shape = sx if len(sx) >= len(sa) else sa
    return tuple(broadcast_in_dim(v, shape, ()) if aval_of(v).shape != shape else v for v in (a, x))


def gamma_lowered(upper: bool, d_a: bool):
    """The function the lowering traces: incomplete_gamma in float64, rounded to a's type."""
    return lambda a, x: _in_f64(lambda a, x: incomplete_gamma(a, x, upper=upper, d_a=d_a), *_both_shapes(a, x))


# -- igamma: P(a, x); d/dx = the gamma density, d/da = igamma_grad_a -------------------------------
igamma_grad_a_p = _binary("igamma_grad_a", FLOAT, _gamma_impl(False, True))
igamma_p = _binary("igamma", FLOAT, _gamma_impl(False, False))
_binary_ad(igamma_p, lambda a, x, o: igamma_grad_a_p.bind(a, x), lambda a, x, o: _density(a, x))
igamma, igamma_grad_a = _binary_function(igamma_p), _binary_function(igamma_grad_a_p)

# -- igammac: Q(a, x) = 1 - P(a, x) ---------------------------------------------------------------
igammac_p = _binary("igammac", FLOAT, _gamma_impl(True, False))
_binary_ad(igammac_p, lambda a, x, o: neg(igamma_grad_a_p.bind(a, x)), lambda a, x, o: neg(_density(a, x)))
igammac = _binary_function(igammac_p)


# -- random_gamma_grad: d sample / d a of a gamma sample x (implicit reparameterization:
#    -(dP/da) / (dP/dx), Figurnov et al. 2018, as jax.random.gamma's jvp) ---------------------------
def random_gamma_grad_lowered(a, x):
    a, x = _both_shapes(a, x)
    return _in_f64(lambda a, x: neg(div(incomplete_gamma(a, x, upper=False, d_a=True), _density64(a, x))), a, x)


def _random_gamma_grad_impl(a, x):
    a, x = np.asarray(a), np.asarray(x)
    shape = np.broadcast_shapes(a.shape, x.shape)
    out = random_gamma_grad_lowered(*(np.broadcast_to(v, shape) for v in (a, x)))
    return np.asarray(out).astype(a.dtype)


random_gamma_grad_p = _binary("random_gamma_grad", FLOAT, _random_gamma_grad_impl)
random_gamma_grad = _binary_function(random_gamma_grad_p)


def _no_second_derivative(p):
    """igamma_grad_a and random_gamma_grad are the end of the chain (as in JAX: they have no jvp)."""
    def refuse():
        raise SprueTypeError(f"{p.name} has no derivative (JAX defines none either): igamma and igammac can be"
                             f" differentiated once in their first argument a")

    def jvp(primals, tangents, **params):
        if all(is_zero(t) for t in tangents):
            out = p.bind(*primals)
            return out, zero_of(out)
        refuse()

    def vjp(cts, primals, outs, **params):
        refuse()
    jvp_rules[p], vjp_rules[p] = jvp, vjp


_no_second_derivative(igamma_grad_a_p)
_no_second_derivative(random_gamma_grad_p)


# -- bessel_i0e, bessel_i1e: exp(-|x|) I0(x), exp(-|x|) I1(x) ------------------------------------
# Cephes' Chebyshev coefficients (i0.c, i1.c; XLA's I0eImpl64, I1eImpl64): A on [0, 8] in x/2 - 2,
# B on (8, inf) in 32/x - 2, divided by sqrt(x)
I0E_A = (-4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
         1.71539128555513303061E-15, -1.16853328779934516808E-14, 7.67618549860493561688E-14,
         -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
         9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
         -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
         1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
         -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
         1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
         -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
         1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1)
I0E_B = (-7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
         3.46122286769746109310E-17, -2.82762398051658348494E-16, -3.42548561967721913462E-16,
         1.77256013305652638360E-15, 3.81168066935262242075E-15, -9.55484669882830764870E-15,
         -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
         7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11,
         -3.14991652796324136454E-11, 1.18891471078464383424E-11, 4.94060238822496958910E-10,
         3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
         2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
         8.04490411014108831608E-1)
I1E_A = (2.77791411276104639959E-18, -2.11142121435816608115E-17, 1.55363195773620046921E-16,
         -1.10559694773538630805E-15, 7.60068429473540693410E-15, -5.04218550472791168711E-14,
         3.22379336594557470981E-13, -1.98397439776494371520E-12, 1.17361862988909016308E-11,
         -6.66348972350202774223E-11, 3.62559028155211703701E-10, -1.88724975172282928790E-9,
         9.38153738649577178388E-9, -4.44505912879632808065E-8, 2.00329475355213526229E-7,
         -8.56872026469545474066E-7, 3.47025130813767847674E-6, -1.32731636560394358279E-5,
         4.78156510755005422638E-5, -1.61760815825896745588E-4, 5.12285956168575772895E-4,
         -1.51357245063125314899E-3, 4.15642294431288815669E-3, -1.05640848946261981558E-2,
         2.47264490306265168283E-2, -5.29459812080949914269E-2, 1.02643658689847095384E-1,
         -1.76416518357834055153E-1, 2.52587186443633654823E-1)
I1E_B = (7.51729631084210481353E-18, 4.41434832307170791151E-18, -4.65030536848935832153E-17,
         -3.20952592199342395980E-17, 2.96262899764595013876E-16, 3.30820231092092828324E-16,
         -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,
         4.27244001671195135429E-14, -2.10154184277266431302E-14, -4.08355111109219731823E-13,
         -7.19855177624590851209E-13, 2.03562854414708950722E-12, 1.41258074366137813316E-11,
         3.25260358301548823856E-11, -1.89749581235054123450E-11, -5.58974346219658380687E-10,
         -3.83538038596423702205E-9, -2.63146884688951950684E-8, -2.51223623787020892529E-7,
         -3.88256480887769039346E-6, -1.10588938762623716291E-4, -9.76109749136146840777E-3,
         7.78576235018280120474E-1)


def _chebyshev(t, coeffs):
    """Cephes' chbevl: Clenshaw's recurrence, 0.5 (b0 - b2)."""
    b0, b1, b2 = _k(t, 0.0), _k(t, 0.0), _k(t, 0.0)
    for c in coeffs:
        b2, b1 = b1, b0
        b0 = add(sub(mul(t, b1), b2), _k(t, c))
    return mul(_k(t, 0.5), sub(b0, b2))


def bessel_ie(x, *, order: int):
    """exp(-|x|) I_order(x) for order 0 or 1, float64 x."""
    z = abs(x)
    near, far = (I0E_A, I0E_B) if order == 0 else (I1E_A, I1E_B)
    far_z = select(le(z, _k(z, 8.0)), _k(z, 8.0), z)      # no division by zero on the unused side
    small = _chebyshev(sub(mul(_k(z, 0.5), z), _k(z, 2.0)), near)
    large = div(_chebyshev(sub(div(_k(z, 32.0), far_z), _k(z, 2.0)), far), sqrt(far_z))
    if order == 1:
        small = mul(z, small)
    out = select(le(z, _k(z, 8.0)), small, large)
    return mul(sign(x), out) if order == 1 else out


def _bessel_impl(order: int):
    def impl(x):
        x = np.asarray(x)
        return np.asarray(bessel_ie(x.astype(np.float64), order=order)).astype(x.dtype)
    return impl


def _i1e_derivative(x, y):
    """d/dx i1e = i0e(x) - i1e(x) (sign x + 1/x), 1/2 at 0 (JAX's _bessel_i1e_jvp)."""
    tiny = gt(abs(x), _k(x, np.finfo(aval_of(x).dtype).eps))
    safe = select(tiny, x, _k(x, np.finfo(aval_of(x).dtype).eps))
    dy = sub(bessel_i0e_p.bind(safe), mul(y, add(sign(safe), div(_k(x, 1.0), safe))))
    return select(tiny, dy, _k(x, 0.5))


# d/dx i0e = i1e(x) - sign(x) i0e(x)
bessel_i1e_p = _unary("bessel_i1e", FLOAT, _bessel_impl(1), _i1e_derivative)
bessel_i0e_p = _unary("bessel_i0e", FLOAT, _bessel_impl(0), lambda x, y: sub(bessel_i1e_p.bind(x), mul(sign(x), y)))
bessel_i0e, bessel_i1e = _unary_function(bessel_i0e_p), _unary_function(bessel_i1e_p)
