"""sprue.scipy.linalg against numpy: scipy's conventions (cholesky upper by default, cho_factor and
cho_solve), and a Gaussian-process regression compiled with its gradient against differences."""
from __future__ import annotations

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
import sprue.scipy.linalg as sl

RNG = np.random.default_rng(20)


def _spd(n):
    a = RNG.standard_normal((n, n))
    return a @ a.T / n + np.eye(n)


@pytest.mark.parametrize("lower", [False, True])
def test_cholesky_and_cho_solve_follow_scipy(lower):
    a, b = _spd(40), RNG.standard_normal((40, 3))
    factor = np.linalg.cholesky(a)
    np.testing.assert_allclose(sl.cholesky(a, lower=lower), factor if lower else factor.T, atol=1e-12)
    f = sprue.qjit(lambda m, r: sl.cho_solve(sl.cho_factor(m, lower=lower), r))
    np.testing.assert_allclose(f(a, b), np.linalg.solve(a, b), atol=1e-10)
    np.testing.assert_allclose(sl.solve(a, b[:, 0], assume_a="pos"), np.linalg.solve(a, b[:, 0]), atol=1e-10)
    np.testing.assert_allclose(sl.solve(a, b), np.linalg.solve(a, b), atol=1e-10)


def _gp_negative_log_likelihood(np_, cho_factor, cho_solve, log_scale, x, y):
    """-log p(y | x) for a squared-exponential kernel of length scale exp(log_scale), noise 0.1."""
    d = x[:, None] - x[None, :]
    k = np_.exp(-0.5 * d * d / np_.exp(2 * log_scale)) + 0.01 * np_.eye(x.shape[0])
    c, lower = cho_factor(k, lower=True)
    alpha = cho_solve((c, lower), y)
    return 0.5 * np_.dot(y, alpha) + np_.sum(np_.log(np_.diagonal(c)))


def _numpy_cho_factor(k, lower=True):
    return np.linalg.cholesky(k), True


def _numpy_cho_solve(c_lower, y):
    return np.linalg.solve(c_lower[0] @ c_lower[0].T, y)


def test_gaussian_process_likelihood_and_its_gradient_compiled():
    x, y = np.sort(RNG.uniform(0, 5, 50)), RNG.standard_normal(50)
    sprue_nll = lambda s, xs, ys: _gp_negative_log_likelihood(jnp, sl.cho_factor, sl.cho_solve, s, xs, ys)  # noqa: E731
    numpy_nll = lambda s: _gp_negative_log_likelihood(np, _numpy_cho_factor, _numpy_cho_solve, s, x, y)  # noqa: E731
    value, grad = sprue.qjit(sprue.value_and_grad(sprue_nll))(0.3, x, y)
    np.testing.assert_allclose(value, numpy_nll(0.3), rtol=1e-10)
    np.testing.assert_allclose(grad, (numpy_nll(0.3 + 1e-6) - numpy_nll(0.3 - 1e-6)) / 2e-6, rtol=1e-6)
