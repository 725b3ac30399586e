"""JAX's linear-algebra primitives as a printed jaxpr has them (io/jaxpr_linalg.py), written by hand
in JAX 0.10's style, compiled with sprue.load and compared with numpy's dense solves."""
import numpy as np
import pytest

from sprue.io.jaxpr_lexer import JaxprUnsupportedError
from tests.helpers.jaxprs import load_text as load


def _dense(dl, d, du):
    """The tridiagonal matrices, batched over the leading axes (dl[..., 0] and du[..., -1] unused)."""
    m = d.shape[-1]
    a = np.zeros(d.shape + (m,), d.dtype)
    i = np.arange(m)
    a[..., i, i] = d
    a[..., i[1:], i[:-1]] = dl[..., 1:]
    a[..., i[:-1], i[1:]] = du[..., :-1]
    return a


def test_tridiagonal_solve_batched_with_several_right_hand_sides(tmp_path):
    # lax.linalg.tridiagonal_solve (jax.scipy's spline and implicit-stencil solves); dl[0] and du[-1]
    # hold garbage that must not be read
    f = load(tmp_path, "{ lambda ; a:f64[2,5] b:f64[2,5] c:f64[2,5] d:f64[2,5,3]. let\n"
                       "    e:f64[2,5,3] = tridiagonal_solve[perturb_singular=False] a b c d\n  in (e,) }")
    r = np.random.RandomState(0)
    dl, du = r.uniform(-1, 1, (2, 5)), r.uniform(-1, 1, (2, 5))
    d = r.uniform(2.5, 4, (2, 5))
    dl[:, 0], du[:, -1] = 1e3, -1e3
    b = r.uniform(-1, 1, (2, 5, 3))
    np.testing.assert_allclose(f(dl, d, du, b), np.linalg.solve(_dense(dl, d, du), b), rtol=1e-12, atol=1e-14)


def test_tridiagonal_solve_with_perturbed_singular_pivots_is_refused(tmp_path):
    with pytest.raises(JaxprUnsupportedError, match=r"prog.jaxpr:2:5: tridiagonal_solve: tridiagonal_solve with"
                                                    r" perturb_singular=True .* is not supported"):
        load(tmp_path, "{ lambda ; a:f32[4] b:f32[4] c:f32[4] d:f32[4,1]. let\n"
                       "    e:f32[4,1] = tridiagonal_solve[perturb_singular=True] a b c d\n  in (e,) }")


def _permutation_of_pivots(pivots, size):
    """LAPACK's row exchanges applied in order to 0..size-1 (the reference for lu_pivots_to_permutation)."""
    out = np.empty(pivots.shape[:-1] + (size,), np.int32)
    for idx in np.ndindex(*pivots.shape[:-1]):
        perm = np.arange(size)
        for i, j in enumerate(pivots[idx]):
            perm[[i, j]] = perm[[j, i]]
        out[idx] = perm
    return out


def test_lu_pivots_to_permutation_batched_and_wider_than_the_pivots(tmp_path):
    # jax.scipy.linalg.lu_solve of lu_factor's pivots; an m x n LU has min(m, n) pivots of m rows
    f = load(tmp_path, "{ lambda ; a:i32[2,3]. let\n"
                       "    b:i32[2,5] = lu_pivots_to_permutation[permutation_size=5] a\n  in (b,) }")
    pivots = np.array([[4, 1, 3], [2, 2, 2]], np.int32)
    np.testing.assert_array_equal(f(pivots), _permutation_of_pivots(pivots, 5))


def test_complex_lu_pivots_as_lapack_and_complex_triangular_solves(tmp_path):
    # LAPACK's cgetrf picks the pivot of largest |re| + |im| (icamax), not of largest modulus: in the
    # column (3, 2+2j) it is row 1 (4 > 3) although |3| > |2+2j|
    f = load(tmp_path, "{ lambda ; a:c64[2,2]. let\n    b:c64[2,2] c:i32[2] d:i32[2] = lu a\n  in (b, c, d) }")
    a = np.array([[3, 1], [2 + 2j, 1j]], np.complex64)
    packed, pivots, perm = f(a)
    assert list(pivots) == [1, 1] and list(perm) == [1, 0]
    lower, upper = np.tril(packed, -1) + np.eye(2), np.triu(packed)
    np.testing.assert_allclose(lower @ upper, a[perm], rtol=1e-6)
    # x with a^H x = b (transpose_a and conjugate_a: jax.scipy.linalg.solve_triangular's trans='C')
    g = load(tmp_path, "{ lambda ; a:c128[3,3] b:c128[3,2]. let\n    c:c128[3,2] = triangular_solve["
                       "conjugate_a=True left_side=True lower=False transpose_a=True unit_diagonal=False] a b\n"
                       "  in (c,) }", "tri.jaxpr")
    r = np.random.RandomState(3)
    u = np.triu(r.uniform(-1, 1, (3, 3)) + 1j * r.uniform(-1, 1, (3, 3))) + 3 * np.eye(3)
    b = r.uniform(-1, 1, (3, 2)) + 1j * r.uniform(-1, 1, (3, 2))
    np.testing.assert_allclose(g(u, b), np.linalg.solve(u.conj().T, b), rtol=1e-12)
