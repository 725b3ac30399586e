"""Gaussian-process regression with sprue.scipy.linalg: a squared-exponential kernel's length scale
fitted by gradient descent on the negative log marginal likelihood (its gradient through
cho_factor/cho_solve is JAX's Cholesky and triangular-solve rules), then the posterior mean and
variance at test points. Compiled once for every number of training points (a run-time size);
tests/e2e/test_gp_regression.py checks the results against the same formulas in numpy.

    python examples/gp_regression.py
"""
from __future__ import annotations

import time

import numpy as np

import sprue
import sprue.numpy as jnp
import sprue.scipy.linalg as jsl

NOISE = 0.1


def kernel(np_, a, b, log_scale):
    d = a[:, None] - b[None, :]
    return np_.exp(-0.5 * d * d / np_.exp(2 * log_scale))


def negative_log_likelihood(log_scale, x, y):
    k = kernel(jnp, x, x, log_scale) + NOISE ** 2 * jnp.eye(x.shape[0])
    c = jsl.cho_factor(k, lower=True)
    return 0.5 * jnp.dot(y, jsl.cho_solve(c, y)) + jnp.sum(jnp.log(jnp.diagonal(c[0])))


loss_and_grad = sprue.qjit(sprue.value_and_grad(negative_log_likelihood), abstracted_axes=(None, {0: "n"}, {0: "n"}))


@sprue.qjit(abstracted_axes=(None, {0: "n"}, {0: "n"}, None))
def posterior(log_scale, x, y, x_test):
    """The posterior mean and variance at x_test (Rasmussen & Williams, Algorithm 2.1)."""
    L = jnp.linalg.cholesky(kernel(jnp, x, x, log_scale) + NOISE ** 2 * jnp.eye(x.shape[0]))
    alpha = jsl.solve_triangular(L, jsl.solve_triangular(L, y, lower=True), lower=True, trans=1)
    k_s = kernel(jnp, x, x_test, log_scale)
    v = jsl.solve_triangular(L, k_s, lower=True)
    return k_s.T @ alpha, 1.0 - jnp.sum(v * v, axis=0)


def fit(x, y, steps=50, rate=0.02, log_scale=0.0):
    for _ in range(steps):
        _, g = loss_and_grad(log_scale, x, y)
        log_scale -= rate * float(g)
    return log_scale


def main(n_train=200, seed=0, steps=50):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0.0, 10.0, n_train))
    y = np.sin(x) + NOISE * rng.standard_normal(n_train)
    x_test = np.linspace(0.0, 10.0, 50)
    log_scale = fit(x, y, steps)
    mean, var = posterior(log_scale, x, y, x_test)
    return {"x": x, "y": y, "x_test": x_test, "log_scale": log_scale, "mean": mean, "var": var}


if __name__ == "__main__":
    t0 = time.perf_counter()
    for n in (100, 400):
        r = main(n)
        err = np.max(np.abs(r["mean"] - np.sin(r["x_test"])))
        print(f"{n} points: length scale {np.exp(r['log_scale']):.3f}, max |mean - sin| {err:.3f},"
              f" max sd {np.sqrt(r['var'].max()):.3f}")
    print(f"compiled {loss_and_grad.compile_count} + {posterior.compile_count} times, {time.perf_counter() - t0:.1f} s")
