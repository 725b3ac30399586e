"""examples/gp_regression.py against the same formulas in numpy: the likelihood, its gradient
(central differences), the posterior mean and variance; one compilation for two training sizes."""
import importlib.util

import numpy as np

from tests.helpers.system import REPO


def _numpy_nll(gp, log_scale, x, y):
    k = gp.kernel(np, x, x, log_scale) + gp.NOISE ** 2 * np.eye(len(x))
    return 0.5 * y @ np.linalg.solve(k, y) + 0.5 * np.linalg.slogdet(k)[1]


def _numpy_posterior(gp, log_scale, x, y, x_test):
    k = gp.kernel(np, x, x, log_scale) + gp.NOISE ** 2 * np.eye(len(x))
    k_s = gp.kernel(np, x, x_test, log_scale)
    return k_s.T @ np.linalg.solve(k, y), 1.0 - np.sum(k_s * np.linalg.solve(k, k_s), axis=0)


def test_gp_regression_matches_numpy():
    spec = importlib.util.spec_from_file_location("gp", REPO / "examples" / "gp_regression.py")
    gp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gp)
    for n in (30, 70):
        r = gp.main(n, steps=20)
        x, y, s = r["x"], r["y"], r["log_scale"]
        for t in (s, s + 0.3):     # at the fitted scale (the gradient near 0) and away from it
            value, grad = gp.loss_and_grad(t, x, y)
            np.testing.assert_allclose(value, _numpy_nll(gp, t, x, y), rtol=1e-9)
            fd = (_numpy_nll(gp, t + 1e-6, x, y) - _numpy_nll(gp, t - 1e-6, x, y)) / 2e-6
            np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6)
        assert abs(gp.loss_and_grad(s + 0.3, x, y)[1]) > 1.0
        mean, var = _numpy_posterior(gp, s, x, y, r["x_test"])
        np.testing.assert_allclose(r["mean"], mean, atol=1e-9)
        np.testing.assert_allclose(r["var"], var, atol=1e-9)
    assert gp.loss_and_grad.compile_count == 1 and gp.posterior.compile_count == 1
