"""sprue.numpy.linalg's orthogonal factorizations (qr, eigh, svd) and what is built on them (pinv,
lstsq, matrix_rank, cond, norm's 2/-2/'nuc') against numpy.linalg: compiled and eager, f32 and
f64, square, tall, wide, batched and 1x1 matrices, odd and even sizes (the Jacobi rounds pair
indices, an odd size is padded), a batch size known only at run time; eigenvectors and singular
vectors have no defined sign, so they are checked by reconstruction and orthogonality and the
values against numpy's; derivatives against central differences of numpy's functions."""
from __future__ import annotations

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.base.errors import ShapeError, SprueValueError, UnsupportedError
from tests.helpers.linalg_checks import check_derivatives

RNG = np.random.default_rng(21)
TOL = {np.float64: 1e-11, np.float32: 3e-5}
SHAPES = [(1, 1), (4, 4), (5, 5), (7, 3), (3, 7), (2, 3, 6, 4), (2, 33, 33), (40, 9)]


def _close(got, want, dtype, scale=None):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    scale = max(1.0, float(np.max(np.abs(want)))) if scale is None else scale
    np.testing.assert_allclose(got, want, rtol=0, atol=TOL[dtype] * scale * 10)


def _orthonormal_columns(q, dtype):
    k = q.shape[-1]
    _close(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(k, dtype=dtype), q.shape[:-2] + (k, k)), dtype)


def _symmetric(*shape, dtype=np.float64):
    a = RNG.standard_normal(shape)
    return ((a + np.swapaxes(a, -1, -2)) / 2).astype(dtype)


def _with_singular_values(m, n, s):
    """An m x n matrix with the given singular values (random orthogonal factors)."""
    u = np.linalg.qr(RNG.standard_normal((m, m)))[0][:, :len(s)]
    v = np.linalg.qr(RNG.standard_normal((n, n)))[0][:, :len(s)]
    return (u * s) @ v.T


# ---- qr ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_qr_matches_numpy_in_every_mode(dtype):
    # Householder with LAPACK's conventions: the same signs as numpy, so Q and R compare directly
    modes = ("reduced", "complete", "r")
    compiled = sprue.qjit(lambda x: [jnp.linalg.qr(x, mode) for mode in modes])
    for shape in SHAPES + [(71, 40), (40, 71), (2, 97, 97)]:   # past BLOCK columns: by panels
        a = RNG.standard_normal(shape).astype(dtype)
        for mode, c in zip(modes, compiled(a)):
            want = np.linalg.qr(a, mode)
            for got in (c, jnp.linalg.qr(a, mode)):
                if mode == "r":
                    _close(got, want, dtype)
                else:
                    assert isinstance(got, jnp.linalg.QRResult)
                    _close(got.Q, want.Q, dtype), _close(got.R, want.R, dtype)


def test_qr_of_a_rank_deficient_matrix_keeps_q_orthonormal():
    a = RNG.standard_normal((6, 4))
    a[:, 2] = 0.0
    a[:, 3] = a[:, 0]
    q, r = sprue.qjit(lambda x: jnp.linalg.qr(x, "complete"))(a)
    _orthonormal_columns(q, np.float64)
    _close(q @ r, a, np.float64)
    _close(r, np.linalg.qr(a, "complete").R, np.float64)


# ---- eigh --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_eigh_values_match_numpy_and_vectors_reconstruct(dtype):
    f = sprue.qjit(lambda x: jnp.linalg.eigh(x))
    for shape in [(1, 1), (2, 2), (5, 5), (8, 8), (2, 3, 6, 6), (33, 33)]:
        a = _symmetric(*shape, dtype=dtype)
        for w, v in (f(a), jnp.linalg.eigh(a)):
            _close(w, np.linalg.eigvalsh(a), dtype)
            _orthonormal_columns(v, dtype)
            _close((v * w[..., None, :]) @ np.swapaxes(v, -1, -2), a, dtype)
    _close(jnp.linalg.eigvalsh(a), np.linalg.eigvalsh(a), dtype)


def test_eigh_reads_one_triangle_and_handles_repeated_eigenvalues():
    a = _symmetric(7, 7)
    for uplo, garbage in (("L", np.triu(RNG.standard_normal((7, 7)), 1)), ("U", np.tril(RNG.standard_normal((7, 7)), -1))):
        got = jnp.linalg.eigh(a + garbage, UPLO=uplo, symmetrize_input=False)
        _close(got.eigenvalues, np.linalg.eigvalsh(a), np.float64)
    # eigenvalues 1 (x3), 2 (x2), 5: any orthonormal basis of each eigenspace does
    q = np.linalg.qr(RNG.standard_normal((6, 6)))[0]
    d = np.array([1.0, 2.0, 1.0, 5.0, 2.0, 1.0])
    a = (q * d) @ q.T
    w, v = sprue.qjit(lambda x: jnp.linalg.eigh(x))(a)
    _close(w, np.sort(d), np.float64)
    _orthonormal_columns(v, np.float64)
    _close((v * w) @ v.T, a, np.float64)


def test_eigh_of_an_ill_conditioned_matrix():
    q = np.linalg.qr(RNG.standard_normal((20, 20)))[0]
    d = np.logspace(0, -14, 20)
    a = (q * d) @ q.T
    w, v = sprue.qjit(lambda x: jnp.linalg.eigh(x))(a)
    _close(w, np.linalg.eigvalsh(a), np.float64)
    _orthonormal_columns(v, np.float64)


# ---- svd ---------------------------------------------------------------------------------------

def _check_svd(a, result, full_matrices, dtype):
    u, s, vh = result
    m, n = a.shape[-2:]
    k = min(m, n)
    assert u.shape == a.shape[:-2] + ((m, m) if full_matrices else (m, k))
    assert vh.shape == a.shape[:-2] + ((n, n) if full_matrices else (k, n))
    _close(s, np.linalg.svd(a, compute_uv=False), dtype)
    _orthonormal_columns(u, dtype)
    _orthonormal_columns(np.swapaxes(vh, -1, -2), dtype)
    _close((u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], a, dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_svd_matches_numpy_compiled_and_eager(dtype):
    f = sprue.qjit(lambda x: (jnp.linalg.svd(x), jnp.linalg.svd(x, full_matrices=False),
                              jnp.linalg.svd(x, compute_uv=False)))
    for shape in SHAPES:
        a = RNG.standard_normal(shape).astype(dtype)
        full, reduced, values = f(a)
        _check_svd(a, full, True, dtype)
        _check_svd(a, reduced, False, dtype)
        _close(values, np.linalg.svd(a, compute_uv=False), dtype)
        assert isinstance(full, jnp.linalg.SVDResult)
    _check_svd(a, jnp.linalg.svd(a, full_matrices=False), False, dtype)
    _close(jnp.linalg.svdvals(a), np.linalg.svd(a, compute_uv=False), dtype)


def test_svd_of_ill_conditioned_and_rank_deficient_matrices():
    # one-sided Jacobi finds small singular values to high relative accuracy: checked against the
    # values the matrix was built with (numpy's, from LAPACK's gesdd, only to eps * s_max)
    s_true = np.logspace(0, -12, 8)
    a = _with_singular_values(12, 8, s_true)
    f = sprue.qjit(lambda x: jnp.linalg.svd(x))
    u, s, vh = f(a)
    _close(s, np.linalg.svd(a, compute_uv=False), np.float64)
    np.testing.assert_allclose(s, s_true, rtol=1e-3)   # the construction itself rounds at 1e-16 absolute
    _check_svd(a, (u, s, vh), True, np.float64)
    # rank 3 of 6: U is orthonormal and complete even where the singular values are zero
    for shape in ((9, 6), (6, 9)):
        a = _with_singular_values(*shape, np.array([3.0, 2.0, 1.0]))
        _check_svd(a, f(a), True, np.float64)
    z = np.zeros((4, 3))
    _check_svd(z, f(z), True, np.float64)


def test_svd_hermitian_uses_eigh():
    a = _symmetric(6, 6)
    u, s, vh = jnp.linalg.svd(a, hermitian=True)
    _close(s, np.linalg.svd(a, compute_uv=False), np.float64)
    _close((u * s) @ vh, a, np.float64)
    _close(jnp.linalg.svd(a, compute_uv=False, hermitian=True), np.linalg.svd(a, compute_uv=False), np.float64)


# ---- pinv, lstsq, matrix_rank, cond, norm ---------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_pinv_matrix_rank_cond_and_norms_match_numpy(dtype):
    f = sprue.qjit(lambda x: (jnp.linalg.pinv(x), jnp.linalg.matrix_rank(x), jnp.linalg.cond(x),
                              [jnp.linalg.norm(x, o, axis=(-2, -1)) for o in (2, -2, "nuc")]))
    for shape in [(1, 1), (5, 5), (7, 3), (3, 7), (2, 3, 6, 4)]:
        a = RNG.standard_normal(shape).astype(dtype)
        pinv, rank, cond, norms = f(a)
        _close(pinv, np.linalg.pinv(a).astype(dtype), dtype, scale=float(np.max(np.abs(np.linalg.pinv(a)))))
        np.testing.assert_array_equal(rank, np.linalg.matrix_rank(a))
        np.testing.assert_allclose(cond, np.linalg.cond(a), rtol=TOL[dtype] * 100)
        for o, got in zip((2, -2, "nuc"), norms):
            _close(got, np.linalg.norm(a, o, axis=(-2, -1)), dtype)
    x = RNG.standard_normal((3, 4, 5))
    for o, ax, keep in ((2, (0, 2), True), ("nuc", (2, 1), False), (-2, None, False)):
        y = x if ax else x[0]
        _close(jnp.linalg.norm(y, o, ax, keep), np.linalg.norm(y, o, ax, keep), np.float64)


def test_rank_deficient_pinv_and_rank():
    a = _with_singular_values(7, 5, np.array([4.0, 1.0, 0.5]))
    _close(jnp.linalg.pinv(a), np.linalg.pinv(a), np.float64)
    assert int(sprue.qjit(lambda x: jnp.linalg.matrix_rank(x))(a)) == 3
    assert int(jnp.linalg.matrix_rank(a, tol=0.7)) == 2
    assert int(jnp.linalg.matrix_rank(a, rtol=0.2)) == 2
    assert int(jnp.linalg.matrix_rank(np.array([0.0, 1e-30]))) == 1
    with np.errstate(invalid="ignore"):   # 0 / 0, as numpy's own cond of a zero matrix
        assert np.isinf(jnp.linalg.cond(np.zeros((3, 3))))
    b = RNG.standard_normal((4, 4)) + 3 * np.eye(4)
    for p in (1, np.inf, "fro", -2):
        np.testing.assert_allclose(jnp.linalg.cond(b, p), np.linalg.cond(b, p), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_lstsq_matches_numpy(dtype):
    f = sprue.qjit(lambda x, y: jnp.linalg.lstsq(x, y))
    for (m, n), k in (((8, 5), None), ((8, 5), 3), ((5, 8), 2), ((6, 6), None)):
        a = RNG.standard_normal((m, n)).astype(dtype)
        b = RNG.standard_normal((m,) if k is None else (m, k)).astype(dtype)
        want = np.linalg.lstsq(a, b)
        for x, resid, rank, s in (f(a, b), jnp.linalg.lstsq(a, b)):
            _close(x, want[0], dtype)
            _close(s, want[3], dtype)
            assert int(rank) == want[2]
            # JAX's residuals: |b - a x|^2 per column always (numpy's only when m > n = rank)
            _close(resid, np.sum((b.reshape(m, -1) - a @ want[0].reshape(n, -1)) ** 2, axis=0).astype(dtype), dtype)
            if m > n:
                _close(resid, want[1], dtype)
    a = _with_singular_values(7, 5, np.array([2.0, 1.0, 0.5]))
    b = RNG.standard_normal(7)
    x, resid, rank, _ = jnp.linalg.lstsq(a, b, numpy_resid=True)
    want = np.linalg.lstsq(a, b)
    _close(x, want[0], np.float64)
    assert int(rank) == 3 and resid.shape == want[1].shape == (0,)


# ---- derivatives -------------------------------------------------------------------------------

def test_qr_derivatives():
    for shape in ((5, 3), (2, 4, 4)):
        a = RNG.standard_normal(shape)
        check_derivatives(lambda x: jnp.linalg.qr(x).Q, lambda x: np.linalg.qr(x).Q, [a], RNG)
        check_derivatives(lambda x: jnp.linalg.qr(x).R, lambda x: np.linalg.qr(x).R, [a], RNG)
        check_derivatives(lambda x: jnp.linalg.qr(x, "r"), lambda x: np.linalg.qr(x, "r"), [a], RNG)


def _symmetrized(f):
    return lambda x: f((x + np.swapaxes(x, -1, -2)) / 2)


def test_eigh_derivatives():
    a = _symmetric(2, 5, 5)
    check_derivatives(lambda x: jnp.linalg.eigh(x).eigenvalues, _symmetrized(np.linalg.eigvalsh), [a], RNG)
    # eigenvectors up to sign: their squares are defined
    check_derivatives(lambda x: jnp.linalg.eigh(x).eigenvectors ** 2,
                      _symmetrized(lambda x: np.linalg.eigh(x)[1] ** 2), [a], RNG)


def test_svd_derivatives():
    for shape in ((6, 4), (4, 6), (2, 5, 5)):
        a = RNG.standard_normal(shape)
        check_derivatives(lambda x: jnp.linalg.svd(x, compute_uv=False),
                          lambda x: np.linalg.svd(x, compute_uv=False), [a], RNG)
        check_derivatives(lambda x: jnp.linalg.svd(x, full_matrices=False).U ** 2,
                          lambda x: np.linalg.svd(x, full_matrices=False)[0] ** 2, [a], RNG)
        check_derivatives(lambda x: jnp.linalg.svd(x, full_matrices=False).Vh ** 2,
                          lambda x: np.linalg.svd(x, full_matrices=False)[2] ** 2, [a], RNG)


def test_pinv_lstsq_and_norm_derivatives():
    for shape in ((6, 4), (4, 6)):
        a = RNG.standard_normal(shape)
        check_derivatives(jnp.linalg.pinv, np.linalg.pinv, [a], RNG)
        check_derivatives(lambda x: jnp.linalg.norm(x, "nuc"), lambda x: np.linalg.norm(x, "nuc"), [a], RNG)
        check_derivatives(lambda x: jnp.linalg.norm(x, 2), lambda x: np.linalg.norm(x, 2), [a], RNG)
    a, b = RNG.standard_normal((7, 4)), RNG.standard_normal((7, 2))
    check_derivatives(lambda x, y: jnp.linalg.lstsq(x, y)[0], lambda x, y: np.linalg.lstsq(x, y)[0], [a, b], RNG)


# ---- transformations and sizes -------------------------------------------------------------------

def test_vmap_matches_a_loop():
    a = RNG.standard_normal((3, 6, 4))
    s = a[:, :4] + np.swapaxes(a[:, :4], -1, -2)
    got = sprue.vmap(lambda x, y: (jnp.linalg.qr(x).R, jnp.linalg.svd(x, compute_uv=False), jnp.linalg.pinv(x),
                                   jnp.linalg.eigvalsh(y)))(a, s)
    wants = [np.stack(w) for w in zip(*[(np.linalg.qr(a[i]).R, np.linalg.svd(a[i], compute_uv=False),
                                         np.linalg.pinv(a[i]), np.linalg.eigvalsh(s[i])) for i in range(3)])]
    for g, w in zip(got, wants):
        _close(g, w, np.float64)


def test_a_run_time_batch_size_compiles_once():
    f = sprue.qjit(lambda x: (jnp.linalg.qr(x).R, jnp.linalg.eigvalsh(x), jnp.linalg.svd(x, compute_uv=False)),
                   abstracted_axes={0: "b"})
    for b in (1, 4):
        a = _symmetric(b, 5, 5)
        for got, want in zip(f(a), (np.linalg.qr(a).R, np.linalg.eigvalsh(a), np.linalg.svd(a, compute_uv=False))):
            _close(got, want, np.float64)
    assert f.compile_count == 1


def test_qr_of_a_run_time_size_compiles_once():
    # square: with two independent run-time sizes, k = min(m, n) is not a size sprue can express
    f = sprue.qjit(lambda x: jnp.linalg.qr(x), abstracted_axes={0: "n", 1: "n"})
    for shape in ((1, 1), (3, 3), (9, 9)):
        a = RNG.standard_normal(shape)
        for got, want in zip(f(a), np.linalg.qr(a)):
            _close(got, want, np.float64)
    assert f.compile_count == 1


def test_qr_complete_of_two_run_time_sizes_compiles_once():
    f = sprue.qjit(lambda x: jnp.linalg.qr(x, "complete"), abstracted_axes={0: "m", 1: "n"})
    for shape in ((5, 3), (3, 5), (4, 4)):
        a = RNG.standard_normal(shape)
        for got, want in zip(f(a), np.linalg.qr(a, "complete")):
            _close(got, want, np.float64)
    assert f.compile_count == 1
    with pytest.raises(ShapeError, match=r"linalg.qr: mode='reduced' of f64\[m,n\] gives factors of min\(m, n\) rows"
                                         r" or columns, and a result's size cannot be the smaller of two run-time"):
        sprue.qjit(lambda x: jnp.linalg.qr(x), abstracted_axes={0: "m", 1: "n"})(np.ones((3, 2)))


def test_eigh_and_svd_of_a_run_time_size_compile_once():
    # a run-time size is padded by 2 or 3 decoupled indices (the round-robin's halves need 2)
    f = sprue.qjit(lambda x: (jnp.linalg.eigh(x), jnp.linalg.svd(x), jnp.linalg.pinv(x)),
                   abstracted_axes={1: "n", 2: "n"})
    for n in (1, 2, 3, 6, 9):
        a = _symmetric(2, n, n)
        (w, v), usv, p = f(a)
        _close(w, np.linalg.eigvalsh(a), np.float64)
        _orthonormal_columns(v, np.float64)
        _close((v * w[..., None, :]) @ np.swapaxes(v, -1, -2), a, np.float64)
        _check_svd(a, usv, True, np.float64)
        _close(p, np.linalg.pinv(a), np.float64, scale=float(np.max(np.abs(np.linalg.pinv(a)))))
    assert f.compile_count == 1


# ---- errors ------------------------------------------------------------------------------------

def test_errors_say_what_was_wrong():
    with pytest.raises(SprueValueError, match=r"linalg.qr: mode must be 'reduced', 'complete' or 'r', got 'raw'"):
        jnp.linalg.qr(np.ones((3, 3)), "raw")
    with pytest.raises(UnsupportedError, match=r"linalg.qr: the derivative of a QR decomposition is defined for"
                                               r" m >= n .* got f64\[3,5\] with mode='reduced'"):
        sprue.jvp(lambda x: jnp.linalg.qr(x).R, (np.ones((3, 5)),), (np.ones((3, 5)),))
    with pytest.raises(UnsupportedError, match=r"linalg.svd: the derivative of an SVD with full_matrices=True of"
                                               r" a non-square f64\[4,3\]"):
        sprue.grad(lambda x: jnp.sum(jnp.linalg.svd(x).U))(np.ones((4, 3)))
    with pytest.raises(SprueValueError, match=r"linalg.eigh: UPLO must be 'L' or 'U', got 'X'"):
        jnp.linalg.eigh(np.eye(2), "X")
    with pytest.raises(SprueValueError, match=r"linalg.eigh: last 2 dimensions of the array must be square"):
        jnp.linalg.eigh(np.ones((2, 3)))
    with pytest.raises(SprueValueError, match=r"linalg.lstsq: a must be 2-D and b 1-D or 2-D"):
        jnp.linalg.lstsq(np.ones((2, 3, 3)), np.ones(3))
    with pytest.raises(SprueValueError, match=r"numpy_resid=True needs the rank known"):
        sprue.qjit(lambda x, y: jnp.linalg.lstsq(x, y, numpy_resid=True))(np.eye(3), np.ones(3))
