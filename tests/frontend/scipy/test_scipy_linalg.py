"""sprue.scipy.linalg against numpy: scipy's conventions (cholesky upper by default, cho_factor and
cho_solve), and a Gaussian-process regression compiled with its gradient against differences."""
from __future__ import annotations

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
import sprue.scipy.linalg as sl
from sprue.base.errors import SprueValueError, UnsupportedError

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


# ---- qr, eigh, svd, lu ---------------------------------------------------------------------------

def test_qr_eigh_svd_follow_scipy_conventions():
    a = RNG.standard_normal((7, 4))
    f = sprue.qjit(lambda m: (sl.qr(m), sl.qr(m, mode="economic"), sl.qr(m, mode="r"), sl.svd(m),
                              sl.svd(m, compute_uv=False)))
    full, economic, (r,), (u, s, vh), values = f(a)
    for got, want in zip(full, np.linalg.qr(a, "complete")):
        np.testing.assert_allclose(got, want, atol=1e-12)
    for got, want in zip(economic, np.linalg.qr(a)):
        np.testing.assert_allclose(got, want, atol=1e-12)
    np.testing.assert_allclose(r, np.linalg.qr(a, "complete").R, atol=1e-12)   # scipy's 'r': m rows
    assert u.shape == (7, 7) and vh.shape == (4, 4)
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), atol=1e-12)
    np.testing.assert_allclose((u[:, :4] * s) @ vh, a, atol=1e-12)
    np.testing.assert_allclose(values, s, atol=1e-12)
    sym = _spd(6)
    low = np.tril(sym) + np.triu(RNG.standard_normal((6, 6)), 1)    # the upper triangle is not read
    w, v = sl.eigh(low)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(sym), atol=1e-12)
    np.testing.assert_allclose((v * w) @ v.T, sym, atol=1e-12)
    np.testing.assert_allclose(sl.eigh(sym.T * np.triu(np.ones((6, 6))), lower=False, eigvals_only=True),
                               np.linalg.eigvalsh(sym), atol=1e-12)


def _partial_pivoting(a):
    """Row interchanges of LAPACK's getrf (the largest |entry| of each column at or below the
    diagonal, the first on ties), in numpy: (packed L\\U, ipiv, perm)."""
    lu, n = a.copy(), a.shape[0]
    ipiv, perm = np.zeros(n, np.int32), np.arange(n)
    for j in range(n):
        p = j + int(np.argmax(np.abs(lu[j:, j])))
        ipiv[j] = p
        lu[[j, p]], perm[[j, p]] = lu[[p, j]], perm[[p, j]]
        lu[j + 1:, j] /= lu[j, j]
        lu[j + 1:, j + 1:] -= np.outer(lu[j + 1:, j], lu[j, j + 1:])
    return lu, ipiv, perm


def test_lu_lu_factor_and_lu_solve_follow_scipy():
    a, b = RNG.standard_normal((9, 9)), RNG.standard_normal((9, 2))
    want_lu, want_piv, perm = _partial_pivoting(a)
    f = sprue.qjit(lambda m: (sl.lu(m), sl.lu(m, permute_l=True), sl.lu_factor(m)))
    for (p, low, up), (pl, up2), (lu, piv) in (f(a), (sl.lu(a), sl.lu(a, permute_l=True), sl.lu_factor(a))):
        np.testing.assert_allclose(p @ low @ up, a, atol=1e-12)
        np.testing.assert_allclose(pl @ up2, a, atol=1e-12)
        np.testing.assert_array_equal(p, np.eye(9)[:, perm])
        np.testing.assert_allclose(np.tril(low, -1) + up, want_lu, atol=1e-12)
        np.testing.assert_allclose(lu, want_lu, atol=1e-12)
        assert piv.dtype == np.int32
        np.testing.assert_array_equal(piv, want_piv)
    solve = sprue.qjit(lambda m, r: [sl.lu_solve(sl.lu_factor(m), r, trans=t) for t in (0, 1)]
                       + [sl.lu_solve(sl.lu_factor(m), r[:, 0])])
    x, xt, x1 = solve(a, b)
    np.testing.assert_allclose(x, np.linalg.solve(a, b), atol=1e-10)
    np.testing.assert_allclose(xt, np.linalg.solve(a.T, b), atol=1e-10)
    np.testing.assert_allclose(x1, np.linalg.solve(a, b[:, 0]), atol=1e-10)


def test_unsupported_options_say_so():
    with pytest.raises(UnsupportedError, match=r"scipy.linalg.qr: pivoting=True is not supported"):
        sl.qr(np.eye(3), pivoting=True)
    with pytest.raises(UnsupportedError, match=r"scipy.linalg.eigh: the generalized problem"):
        sl.eigh(np.eye(3), np.eye(3))
    with pytest.raises(SprueValueError, match=r"linalg.lu: last 2 dimensions of the array must be square, got f64\[3,4\]"):
        sl.lu(np.ones((3, 4)))


# ---- expm ------------------------------------------------------------------------------------------

def _expm_taylor(a, terms=40):
    """exp(a) in float64 by its Taylor series on a / 2^k (norm below 1/2), squared k times: the
    reference, independent of the Padé approximants (scipy is not a dependency)."""
    a = np.asarray(a, np.float64)
    k = max(0, int(np.ceil(np.log2(max(np.abs(a).sum(axis=0).max(), 1e-300)))) + 1)
    b, term = a / 2.0 ** k, np.eye(a.shape[-1])
    out = term.copy()
    for i in range(1, terms):
        term = term @ b / i
        out = out + term
    for _ in range(k):
        out = out @ out
    return out


@pytest.mark.parametrize("scale", [1e-3, 0.1, 0.6, 1.5, 4.0, 20.0, 300.0])   # each Padé degree, and squarings
def test_expm_against_eigendecomposition_and_taylor(scale):
    m = RNG.standard_normal((5, 5))
    sym = (m + m.T) * scale / 4
    w, v = np.linalg.eigh(sym)
    want = (v * np.exp(w)) @ v.T
    compiled = sprue.qjit(lambda x: sl.expm(x))
    for got in (sl.expm(sym), compiled(sym)):
        np.testing.assert_allclose(got, want, rtol=1e-12 * max(1.0, scale), atol=1e-13 * np.abs(want).max())
    general = m * scale / 4
    want = _expm_taylor(general)
    np.testing.assert_allclose(compiled(general), want, rtol=1e-11 * max(1.0, scale), atol=1e-12 * np.abs(want).max())


def test_expm_analytic_cases_dtypes_and_options():
    t = 0.7
    rotation = sl.expm(np.array([[0.0, -t], [t, 0.0]]))
    np.testing.assert_allclose(rotation, [[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]], atol=1e-15)
    nilpotent = sl.expm(np.array([[0, 1], [0, 0]]))          # integers become float64
    assert nilpotent.dtype == np.float64
    np.testing.assert_array_equal(nilpotent, [[1.0, 1.0], [0.0, 1.0]])
    a = RNG.standard_normal((4, 4))
    single = sprue.qjit(lambda x: sl.expm(x))(a.astype(np.float32) * 3)
    assert single.dtype == np.float32
    np.testing.assert_allclose(single, _expm_taylor(a.astype(np.float32) * 3), rtol=2e-5, atol=2e-5)
    upper = np.triu(a) * 2
    np.testing.assert_allclose(sl.expm(upper, upper_triangular=True), _expm_taylor(upper), rtol=1e-12)
    assert np.isnan(sl.expm(a * 100, max_squarings=3)).all()    # more squarings needed than allowed: NaNs, as JAX
    assert not np.isnan(sl.expm(a * 100)).any()
    with pytest.raises(SprueValueError, match=r"sprue\.scipy\.linalg\.expm: max_squarings must be a non-negative"
                                              r" Python int .* got -1"):
        sl.expm(a, max_squarings=-1)


def test_expm_of_a_batch_and_under_vmap():
    batch = RNG.standard_normal((3, 2, 4, 4)) * np.array([0.01, 1.0, 30.0])[:, None, None, None]
    want = np.array([[_expm_taylor(m) for m in row] for row in batch])
    size = np.abs(want).max(axis=(-2, -1), keepdims=True)   # each matrix's error relative to its size
    got = sprue.qjit(lambda b: sl.expm(b))(batch)
    assert np.abs((got - want) / size).max() < 1e-12, np.abs((got - want) / size).max(axis=(-2, -1))
    mapped = sprue.qjit(sprue.vmap(lambda m: sl.expm(m)))(batch[:, 0])
    assert np.abs((mapped - want[:, 0]) / size[:, 0]).max() < 1e-12


@pytest.mark.parametrize("t", [0.01, 0.3, 2.0, 7.0])
def test_expm_gradients(t):
    """d/dt sum(expm(tA) * W) = sum(A expm(tA) * W) (tA commutes with A); the gradient with respect
    to the matrix against central differences of the Taylor reference."""
    a, weights = RNG.standard_normal((4, 4)), RNG.standard_normal((4, 4))
    along_t = sprue.grad(lambda s: jnp.sum(sl.expm(s * a) * weights))
    want = np.sum(a @ _expm_taylor(t * a) * weights)
    np.testing.assert_allclose(along_t(t), want, rtol=1e-11)
    np.testing.assert_allclose(sprue.qjit(along_t)(t), want, rtol=1e-11)
    g = sprue.qjit(sprue.grad(lambda m: jnp.sum(sl.expm(m) * weights)))(t * a)
    eps = 1e-6 * max(1.0, t)
    fd = np.zeros((4, 4))
    for i in range(4):
        for j in range(4):
            d = np.zeros((4, 4))
            d[i, j] = eps
            fd[i, j] = np.sum((_expm_taylor(t * a + d) - _expm_taylor(t * a - d)) * weights) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())
