"""The incomplete gamma and scaled Bessel functions (lax/special_gamma.py; lowered by tracing the same
float64 algorithms, lowering/rules_special.py), compiled and eager, against independent references:
closed forms of P(a, x) (integer a: Poisson sums; a = 1/2: erf(sqrt x)), its recurrence in a
with math.lgamma, numpy's i0, I1's power series, and central finite differences for every derivative."""
from __future__ import annotations

import math

import numpy as np
import pytest

import sprue
from sprue import lax
from sprue.errors import SprueTypeError


def _poisson(k: int, x: float) -> float:
    return math.exp(k * math.log(x) - x - math.lgamma(k + 1))


def _p_integer(n: int, x: float) -> float:
    """P(n, x) = e^-x sum_{k >= n} x^k / k! (the tail: no cancellation where P is small)."""
    return math.fsum(_poisson(k, x) for k in range(n, n + 400))


def _q_integer(n: int, x: float) -> float:
    return math.fsum(_poisson(k, x) for k in range(n))


def _both(f, *args):
    """f compiled and f run eagerly (the primitives' numpy references), as arrays."""
    return np.asarray(sprue.qjit(f)(*args)), np.asarray(f(*args))


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-13), (np.float32, 2e-6)])
def test_igamma_and_igammac_match_closed_forms(dtype, rtol):
    xs = np.concatenate([np.linspace(0.01, 3, 20), np.linspace(3, 60, 40)])
    a = np.concatenate([np.full(60, n, float) for n in (1, 2, 5, 17)] + [np.full(60, 0.5)])
    x = np.tile(xs, 5)
    want_p = np.array([_p_integer(int(ai), xi) if ai >= 1 else math.erf(math.sqrt(xi)) for ai, xi in zip(a, x)])
    want_q = np.array([_q_integer(int(ai), xi) if ai >= 1 else math.erfc(math.sqrt(xi)) for ai, xi in zip(a, x)])
    a, x = a.astype(dtype), x.astype(dtype)
    for got in _both(lax.igamma, a, x):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want_p, rtol=rtol, atol=rtol * 1e-3)
    for got in _both(lax.igammac, a, x):
        np.testing.assert_allclose(got, want_q, rtol=rtol * 50, atol=1e-300)   # Q's tail: relative to small values


def test_igamma_recurrence_for_large_and_fractional_a():
    """P(a+1, x) = P(a, x) - x^a e^-x / Gamma(a+1), on both sides of x = a (series and fraction),
    up to a = 300 (the loop runs until every element has converged)."""
    a = np.array([0.3, 1.7, 4.2, 9.5, 33.3, 120.0, 300.0, 300.0, 2.5])
    x = np.array([0.2, 2.9, 3.1, 12.0, 30.0, 118.0, 290.0, 310.0, 1e-3])
    f = sprue.qjit(lax.igamma)
    step = np.exp(a * np.log(x) - x - np.array([math.lgamma(v + 1) for v in a]))
    np.testing.assert_allclose(np.asarray(f(a + 1, x)), np.asarray(f(a, x)) - step, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(np.asarray(f(a, x)) + np.asarray(sprue.qjit(lax.igammac)(a, x)), 1.0, rtol=1e-14)


def test_igamma_edges_as_jax():
    a = np.array([2.0, 2.0, 2.0, 0.0, -1.0, np.nan, 2.0])
    x = np.array([0.0, np.inf, -1.0, 1.0, 1.0, 1.0, np.nan])
    for p, q in zip(_both(lax.igamma, a, x), _both(lax.igammac, a, x)):
        np.testing.assert_array_equal(p[:2], [0.0, 1.0])
        np.testing.assert_array_equal(q[:2], [1.0, 0.0])
        assert np.all(np.isnan(p[2:])) and np.all(np.isnan(q[2:]))


def test_derivatives_of_igamma_by_finite_differences():
    a = np.array([0.4, 1.0, 2.5, 7.0, 30.0, 3.0])
    x = np.array([0.3, 2.0, 1.5, 11.0, 25.0, 0.5])
    h = 1e-6
    d_a = (lax.igamma(a + h, x) - lax.igamma(a - h, x)) / (2 * h)
    d_x = (lax.igamma(a, x + h) - lax.igamma(a, x - h)) / (2 * h)
    for got in _both(lax.igamma_grad_a, a, x):
        np.testing.assert_allclose(got, d_a, rtol=1e-6, atol=1e-9)
    grad = sprue.qjit(sprue.grad(lambda a, x: (lax.igamma(a, x) * np.arange(1.0, 7.0)).sum(), argnums=(0, 1)))
    ga, gx = grad(a, x)
    np.testing.assert_allclose(ga, d_a * np.arange(1.0, 7.0), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(gx, d_x * np.arange(1.0, 7.0), rtol=1e-6, atol=1e-9)
    gq = sprue.grad(lambda a, x: lax.igammac(a, x).sum(), argnums=(0, 1))(a, x)
    np.testing.assert_allclose(gq[0], -d_a, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(gq[1], -d_x, rtol=1e-6, atol=1e-9)
    # jax.random.gamma's derivative: d sample / d a = -(dP/da) / (dP/dx)
    for got in _both(lax.random_gamma_grad, a, x):
        np.testing.assert_allclose(got, -d_a / d_x, rtol=1e-5)


def test_igamma_batches_and_refuses_a_second_derivative():
    a = np.array([[0.5, 1.5, 3.0], [2.0, 4.0, 6.0]])
    x = np.array([1.0, 2.0, 3.5])
    got = sprue.qjit(sprue.vmap(lax.igamma, in_axes=(0, None)))(a, x)
    np.testing.assert_allclose(got, [lax.igamma(r, x) for r in a], rtol=1e-14)
    with pytest.raises(SprueTypeError, match="igamma_grad_a has no derivative"):
        sprue.grad(lambda a: sprue.grad(lambda a: lax.igamma(a, 2.0))(a))(1.5)


def _i1_series(x: float) -> float:
    return sum((x / 2) ** (2 * k + 1) / (math.factorial(k) * math.factorial(k + 1)) for k in range(80))


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-14), (np.float32, 2e-6)])
def test_bessel_i0e_i1e_match_numpy_i0_and_the_power_series(dtype, rtol):
    x = np.concatenate([np.linspace(-30, 30, 121), [0.0, 7.99, 8.01, -8.0, 200.0]]).astype(dtype)
    x64 = x.astype(np.float64)
    want0 = np.i0(x64) * np.exp(-np.abs(x64))
    want1 = np.array([math.copysign(_i1_series(abs(v)) * math.exp(-abs(v)), v) for v in x64[:-1]] + [np.nan])
    for got in _both(lax.bessel_i0e, x):
        np.testing.assert_allclose(got, want0, rtol=rtol)
    for got in _both(lax.bessel_i1e, x):
        np.testing.assert_allclose(got[:-1], want1[:-1], rtol=rtol * 5, atol=1e-300)
        # beyond the series' reach, the asymptote sqrt(1 / (2 pi x)) (1 - 3/(8x))
        np.testing.assert_allclose(got[-1], (1 - 3 / 1600) / math.sqrt(400 * math.pi), rtol=1e-5)


def test_bessel_derivatives_by_finite_differences():
    x = np.array([-9.0, -2.0, -1e-3, 0.0, 1e-3, 0.7, 3.0, 8.5, 40.0])
    h = 1e-6
    for f in (lax.bessel_i0e, lax.bessel_i1e):
        fd = (f(x + h) - f(x - h)) / (2 * h)
        got = sprue.qjit(sprue.vmap(sprue.grad(f)))(x)
        keep = x != 0.0 if f is lax.bessel_i0e else slice(None)   # i0e has a kink at 0 (|x|)
        np.testing.assert_allclose(np.asarray(got)[keep], fd[keep], rtol=1e-6, atol=1e-9)
