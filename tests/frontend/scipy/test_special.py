"""sprue.scipy.special against references from Python's math module, series and identities (scipy
is not a dependency), eagerly and compiled, with gradients against central differences."""
from __future__ import annotations

import math

import numpy as np
import pytest

import sprue
import sprue.numpy as snp
import sprue.scipy.special as S

X = np.array([-4.5, -2.0, -0.75, -1e-3, 0.0, 0.3, 1.0, 2.5, 6.0])
POS = np.array([0.05, 0.5, 1.0, 1.5, 3.2, 7.0, 20.0])


def both(fn, *args):
    """fn eagerly and compiled (the arguments traced), checked equal; the eager result."""
    eager = np.asarray(fn(*args))
    compiled = np.asarray(sprue.qjit(lambda *a: fn(*a))(*args))
    np.testing.assert_allclose(compiled, eager, rtol=1e-13, atol=1e-14, equal_nan=True)
    return eager


def central_difference(fn, x, h=1e-6):
    return (fn(x + h) - fn(x - h)) / (2 * h)


@pytest.mark.parametrize("name, reference", [("erf", math.erf), ("erfc", math.erfc), ("gammaln", math.lgamma),
                                             ("expit", lambda v: 1.0 / (1.0 + math.exp(-v))),
                                             ("ndtr", lambda v: 0.5 * math.erfc(-v / math.sqrt(2.0)))])
def test_against_math(name, reference):
    x = POS if name == "gammaln" else X
    np.testing.assert_allclose(both(getattr(S, name), x), [reference(v) for v in x], rtol=1e-13, atol=1e-15)


def test_gamma_and_its_sign_with_poles():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.0, 4.5, -1.0, -2.0])
    want = [math.gamma(v) for v in x[:6]]
    got = both(S.gamma, x)
    np.testing.assert_allclose(got[:6], want, rtol=1e-13)
    assert np.isnan(got[6:]).all()
    np.testing.assert_array_equal(both(S.gammasgn, x)[:6], np.sign(want))
    assert both(S.gammasgn, np.array([0.0]))[0] == 1.0
    assert np.isnan(both(S.loggamma, np.array([-0.5, 0.0]))).all()


def test_digamma_is_lgammas_derivative_and_keeps_its_recurrence():
    got = both(S.digamma, POS)
    np.testing.assert_allclose(got, [central_difference(math.lgamma, v, 1e-5) for v in POS], rtol=1e-7)
    np.testing.assert_allclose(both(S.digamma, POS + 1.0), got + 1.0 / POS, rtol=1e-12)
    np.testing.assert_allclose(S.digamma(1.0), -np.euler_gamma, rtol=1e-14)


def test_incomplete_gamma_at_integer_orders():
    x = np.array([0.1, 1.0, 2.5, 7.0])
    for n in (1, 2, 5):
        # P(n, x) = exp(-x) sum_{k >= n} x^k / k! (no cancellation: every term positive)
        closed = np.array([math.exp(-v) * math.fsum(v ** k / math.factorial(k) for k in range(n, n + 150))
                           for v in x])
        np.testing.assert_allclose(both(S.gammainc, np.full_like(x, n), x), closed, rtol=1e-12)
        np.testing.assert_allclose(both(S.gammaincc, np.full_like(x, n), x), 1.0 - closed, rtol=1e-11)


def test_erfinv_and_ndtri_invert():
    y = np.array([-0.999, -0.5, 0.0, 0.25, 0.9, 0.99999])
    np.testing.assert_allclose([math.erf(v) for v in both(S.erfinv, y)], y, rtol=1e-12, atol=1e-15)
    p = np.array([1e-300, 1e-100, 1e-20, 1e-5, 0.02, 0.3, 0.5, 0.9, 0.975, 1 - 1e-12])
    x = both(S.ndtri, p)
    tail = np.minimum(p, 1 - p)
    back = [0.5 * math.erfc(abs(v) / math.sqrt(2.0)) for v in x]   # the smaller tail, from the quantile
    np.testing.assert_allclose(back, tail, rtol=1e-12)
    assert np.all(np.sign(x) == np.sign(p - 0.5))
    special = both(S.ndtri, np.array([0.0, 1.0, -0.1, 1.5, np.nan]))
    assert special[0] == -np.inf and special[1] == np.inf and np.isnan(special[2:]).all()


def _log_ndtr_reference(v):
    if v < -38:   # math.erfc underflows: the asymptotic series to 12 terms, exact to rounding here
        series = sum((-1) ** n * math.prod(range(1, 2 * n, 2)) / v ** (2 * n) for n in range(13))
        return -0.5 * v * v - math.log(-v) - 0.5 * math.log(2 * math.pi) + math.log(series)
    if v > 5:
        return math.log1p(-0.5 * math.erfc(v / math.sqrt(2.0)))
    return math.log(0.5 * math.erfc(-v / math.sqrt(2.0)))


def test_log_ndtr_in_its_three_regions():
    x = np.array([-60.0, -30.0, -20.5, -19.5, -5.0, 0.0, 3.0, 7.0, 12.0])
    got = both(S.log_ndtr, x)
    # (below -20 the series of order 3, as jax.scipy's: ~1.5e-11 from the full one at -20.5)
    np.testing.assert_allclose(got[:7], [_log_ndtr_reference(v) for v in x[:7]], rtol=3e-11)
    np.testing.assert_allclose(got[7:], [_log_ndtr_reference(v) for v in x[7:]], rtol=5e-2)   # jax.scipy's log1p split
    grad = sprue.grad(lambda v: S.log_ndtr(v))
    for v in (-25.0, -2.0, 1.0):
        assert grad(v) == pytest.approx(central_difference(_log_ndtr_reference, v, 1e-5), rel=1e-6)
    with pytest.raises(sprue.SprueValueError, match="log_ndtr: series_order must be between 0 and 30, got 31"):
        S.log_ndtr(1.0, series_order=31)


def test_beta_factorial_comb_poch_multigammaln():
    a, b = np.array([0.5, 2.0, 3.5, 10.0]), np.array([1.5, 3.0, 0.25, 12.0])
    want = [math.exp(math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)) for x, y in zip(a, b)]
    np.testing.assert_allclose(both(S.beta, a, b), want, rtol=1e-12)
    np.testing.assert_allclose(both(S.betaln, a, b), np.log(want), rtol=1e-12)
    n = np.arange(-2.0, 12.0)
    np.testing.assert_allclose(both(S.factorial, n), [0, 0] + [math.factorial(int(v)) for v in n[2:]], rtol=1e-12)
    N, k = np.array([10.0, 5, 3, 7, 0]), np.array([3.0, 5, 4, 0, 0])
    np.testing.assert_allclose(both(S.comb, N, k), [math.comb(int(x), int(y)) for x, y in zip(N, k)], rtol=1e-12)
    np.testing.assert_allclose(S.comb(4.0, 2.0, repetition=True), math.comb(5, 2), rtol=1e-12)
    z, m = np.array([0.5, 2.0, 3.0]), np.array([2.0, 0.0, 1.5])
    np.testing.assert_allclose(both(S.poch, z, m), [math.gamma(x + y) / math.gamma(x) for x, y in zip(z, m)],
                               rtol=1e-12)
    ref = [3 * 2 / 4 * math.log(math.pi) + sum(math.lgamma(v - j / 2) for j in range(3)) for v in POS + 2]
    np.testing.assert_allclose(both(lambda v: S.multigammaln(v, 3), POS + 2), ref, rtol=1e-13)
    with pytest.raises(NotImplementedError, match="exact=True"):
        S.factorial(3.0, exact=True)
    with pytest.raises(sprue.SprueValueError, match="multigammaln: d must be a positive integer, got 0"):
        S.multigammaln(2.0, 0)


def test_xlogy_family_is_zero_with_its_factor_and_has_jaxs_derivative():
    x, y = np.array([0.0, 0.5, 2.0, 0.0]), np.array([0.0, 3.0, 0.25, 5.0])
    np.testing.assert_allclose(both(S.xlogy, x, y), [0.0, 0.5 * math.log(3.0), 2 * math.log(0.25), 0.0])
    np.testing.assert_allclose(both(S.xlog1py, x, y), [0.0, 0.5 * math.log1p(3.0), 2 * math.log1p(0.25), 0.0])
    assert sprue.grad(S.xlogy)(0.0, 5.0) == pytest.approx(math.log(5.0))      # d/dx at x == 0 is log(y)
    assert sprue.grad(S.xlogy, argnums=1)(0.5, 3.0) == pytest.approx(0.5 / 3.0)
    p, q = np.array([0.0, 0.2, 0.3, -1.0, 0.4]), np.array([0.5, 0.4, 0.0, 0.5, 0.4])
    np.testing.assert_allclose(both(S.entr, np.array([0.0, 0.5, -1.0])), [0.0, -0.5 * math.log(0.5), -np.inf])
    np.testing.assert_allclose(both(S.rel_entr, p, q), [0.0, 0.2 * math.log(0.5), np.inf, np.inf, 0.0])
    np.testing.assert_allclose(both(S.kl_div, p, q), [0.5, 0.2 * math.log(0.5) + 0.2, np.inf, np.inf, 0.0],
                               atol=1e-15)


def test_logsumexp():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4))
    np.testing.assert_allclose(both(S.logsumexp, a), np.log(np.exp(a).sum()), rtol=1e-13)
    np.testing.assert_allclose(S.logsumexp(a, axis=(0, 1), keepdims=True), np.log(np.exp(a).sum(keepdims=True)))
    np.testing.assert_allclose(S.logsumexp(a + 1000.0, axis=1), np.log(np.exp(a).sum(axis=1)) + 1000.0, rtol=1e-13)
    assert S.logsumexp(np.full(3, -np.inf)) == -np.inf
    b = np.array([1.0, -2.0, 0.5])
    v = np.array([0.0, 0.1, 0.2])
    total = float(np.sum(b * np.exp(v)))
    out, sign = S.logsumexp(v, b=b, return_sign=True)
    assert out == pytest.approx(math.log(abs(total))) and sign == np.sign(total)
    assert np.isnan(S.logsumexp(v, b=b))
    where = np.array([True, False, True])
    np.testing.assert_allclose(S.logsumexp(v, where=where), math.log(math.exp(0.0) + math.exp(0.2)))
    grad = np.asarray(sprue.grad(lambda t: S.logsumexp(t))(a))
    np.testing.assert_allclose(grad, np.exp(a) / np.exp(a).sum(), rtol=1e-12)
    np.testing.assert_allclose(both(S.softmax, a), np.exp(a) / np.exp(a).sum(), rtol=1e-13)
    np.testing.assert_allclose(both(S.log_softmax, a), a - np.log(np.exp(a).sum()), rtol=1e-13)


def test_bessel_and_box_cox():
    x = np.array([-3.0, -0.5, 0.0, 0.7, 4.0, 30.0])
    i1 = np.array([sum((v / 2) ** (2 * k + 1) / (math.factorial(k) * math.factorial(k + 1)) for k in range(80))
                   for v in x])
    np.testing.assert_allclose(both(S.i0, x), np.i0(x), rtol=1e-13)
    np.testing.assert_allclose(both(S.i0e, x), np.i0(x) * np.exp(-np.abs(x)), rtol=1e-13)
    np.testing.assert_allclose(both(S.i1, x), i1, rtol=1e-13)
    np.testing.assert_allclose(both(S.i1e, x), i1 * np.exp(-np.abs(x)), rtol=1e-13)
    v, lm = np.array([0.5, 2.0, 3.0]), np.array([0.0, 0.5, -1.0])
    np.testing.assert_allclose(both(S.boxcox, v, lm), [math.log(0.5), (2.0 ** 0.5 - 1) / 0.5, (1 / 3.0 - 1) / -1.0])
    np.testing.assert_allclose(both(S.boxcox1p, v, lm), [math.log1p(0.5), (3.0 ** 0.5 - 1) / 0.5, (1 / 4.0 - 1) / -1.0])
    np.testing.assert_allclose(both(S.logit, both(S.expit, X)), X, rtol=1e-12, atol=1e-12)


def test_types_follow_the_operands():
    assert S.erf(np.arange(3)).dtype == np.float64                 # integers computed in float64
    assert S.gammaln(np.ones(2, np.float32)).dtype == np.float32
    assert S.xlogy(np.ones(2, np.float32), 2.0).dtype == np.float32  # a Python float takes the array's type
    f = sprue.qjit(lambda t: S.ndtr(t) + S.gammainc(2.0, t))
    assert f(np.ones(3, np.float32)).dtype == np.float32


def test_gradients_against_central_differences():
    for fn, x in ((S.erf, 0.3), (S.gammaln, 2.5), (S.ndtr, -1.2), (S.i1e, 0.8), (S.gammainc, 1.7)):
        g = sprue.grad(fn)(x) if fn is not S.gammainc else sprue.grad(fn, argnums=1)(2.0, x)
        ref = central_difference(lambda v: float(fn(v) if fn is not S.gammainc else fn(2.0, v)), x)
        assert g == pytest.approx(ref, rel=1e-6), fn.__name__
    assert snp.allclose(sprue.vmap(S.erf)(X), S.erf(X))


def test_polygamma_zeta_betainc():
    x = np.array([0.5, 1.0, 2.5, 7.0])
    # polygamma(1, x) = zeta(2, x); polygamma(0) is digamma; Riemann's zeta(2) = pi^2 / 6
    np.testing.assert_allclose(both(S.polygamma, np.ones_like(x), x), both(S.zeta, np.full_like(x, 2.0), x),
                               rtol=1e-12)
    np.testing.assert_allclose(both(S.polygamma, np.zeros_like(x), x), S.digamma(x), rtol=1e-12)
    assert S.zeta(2.0) == pytest.approx(math.pi ** 2 / 6, rel=1e-14)
    np.testing.assert_allclose(both(S.zeta, np.full_like(x, 3.0), x),
                               [math.fsum((k + v) ** -3.0 for k in range(200000)) + (200000 + v) ** -2 / 2 for v in x],
                               rtol=1e-9)
    # I_x(a, 1) = x^a and I_x(1, b) = 1 - (1 - x)^b
    t = np.array([0.1, 0.5, 0.9])
    np.testing.assert_allclose(both(S.betainc, np.full(3, 2.5), np.ones(3), t), t ** 2.5, rtol=1e-12)
    np.testing.assert_allclose(both(S.betainc, np.ones(3), np.full(3, 3.5), t), 1 - (1 - t) ** 3.5, rtol=1e-12)
