"""sprue.scipy.linalg: jax.scipy.linalg's names over sprue.numpy.linalg's kernels. scipy's own
defaults where they differ from numpy's (cholesky's factor is upper unless lower=True); failures are
values, as in JAX (NaNs for a matrix that is not positive definite, infinities or NaNs for a
singular one), where scipy raises LinAlgError."""
from __future__ import annotations

import numpy as np

import sprue.numpy as jnp
from sprue import lax
from sprue.base.errors import SprueValueError, UnsupportedError
from sprue.numpy import _linalg_kernels as K
from sprue.numpy import linalg as _linalg
from sprue.numpy._avals import aval, describe, loc, value_error
from sprue.numpy.linalg import det, inv, norm, pinv, solve_triangular  # noqa: F401

__all__ = ["cholesky", "cho_factor", "cho_solve", "det", "inv", "norm", "pinv", "solve", "solve_triangular", "qr",
           "eigh", "svd", "lu", "lu_factor", "lu_solve", "expm"]


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """scipy.linalg.cholesky: the upper factor U (a = U^T U) unless lower=True."""
    return _linalg.cholesky(a, upper=not lower)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """scipy.linalg.cho_factor: (factor, lower), the factor's other triangle zero (scipy leaves
    whatever a held there; cho_solve reads only the factor's triangle either way)."""
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """scipy.linalg.cho_solve: x with a x = b from cho_factor's (factor, lower): two triangular solves."""
    c, lower = c_and_lower
    if lower:   # a = L L^T
        return solve_triangular(c, solve_triangular(c, b, lower=True), trans=1, lower=True)
    return solve_triangular(c, solve_triangular(c, b, trans=1, lower=False), lower=False)   # a = U^T U


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True, assume_a="gen"):
    """scipy.linalg.solve: b may be (n,) or (n, k) for one matrix a (n, n); assume_a="pos" solves by
    Cholesky, every other kind by LU."""
    if assume_a in ("pos", "positive definite"):
        return cho_solve(cho_factor(a, lower=True), b)
    return _linalg.solve(a, b)


def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """scipy.linalg.qr: (Q, R) for mode 'full' (Q (..., m, m), R (..., m, n)) or 'economic' (numpy's
    'reduced'); (R,) for 'r' (R (..., m, n), as scipy and JAX)."""
    if pivoting:
        raise UnsupportedError(f"sprue.scipy.linalg.qr: pivoting=True is not supported (no column-pivoted QR"
                               f" yet){loc()}")
    if mode not in ("full", "economic", "r"):
        raise value_error("scipy.linalg.qr", f"mode must be 'full', 'economic' or 'r', got {mode!r}")
    if mode != "r":
        return tuple(_linalg.qr(a, "complete" if mode == "full" else "reduced"))
    r = _linalg.qr(a, "r")
    batch, (k, n) = aval(r).shape[:-2], aval(r).shape[-2:]
    m = aval(a).shape[-2] if hasattr(a, "shape") else np.shape(a)[-2]
    if isinstance(m, int) and isinstance(k, int) and m > k:   # scipy's R has a's m rows
        r = jnp.concatenate([r, jnp.zeros(tuple(batch) + (m - k, n), aval(r).dtype)], axis=-2)
    return (r,)


def eigh(a, b=None, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False, turbo=True,
         eigvals=None, type=1, check_finite=True):
    """scipy.linalg.eigh of one symmetric matrix (its lower triangle, or upper with lower=False; not
    symmetrized, as JAX): w ascending, or (w, v)."""
    if b is not None or eigvals is not None:
        raise UnsupportedError(f"sprue.scipy.linalg.eigh: the generalized problem (b) and eigvals= are not"
                               f" supported (nor in JAX){loc()}")
    w, v = _linalg.eigh(a, "L" if lower else "U", symmetrize_input=False)
    return w if eigvals_only else (w, v)


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True, lapack_driver="gesdd"):
    """scipy.linalg.svd: (U, s, Vh), or s alone."""
    return _linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv) if not compute_uv else \
        tuple(_linalg.svd(a, full_matrices=full_matrices))


# ---- LU ----------------------------------------------------------------------------------------

def _lu_of_square(fname: str, a):
    a = _linalg._square(fname, a)
    m, n = aval(a).shape[-2:]
    if not (isinstance(m, int) and m == n):
        raise UnsupportedError(f"sprue.scipy.linalg.{fname}: only square matrices with static sizes are"
                               f" supported, got {describe(a)}{loc()}")
    return (a,) + K.lu(a)[:2]


def _column(x, i):
    """x[..., i] at a traced i, as (..., 1)."""
    return jnp.sum(jnp.where(K._arange(aval(x).shape[-1]) == i, x, 0), axis=-1, keepdims=True)


def _swapped(cur, i, j, value_at_j):
    """cur with its entries i and j exchanged (cur[j] given)."""
    idx = K._arange(aval(cur).shape[-1])
    return jnp.where(idx == i, value_at_j, jnp.where(idx == j, _column(cur, i), cur))


def _pivots_of(perm):
    """LAPACK's ipiv (row i was exchanged with row ipiv[i], in order) from the permutation perm."""
    n = aval(perm).shape[-1]

    def step(i, carry):
        cur, ipiv = carry
        target = _column(perm, i)
        j = jnp.argmax(cur == target, axis=-1, keepdims=True)
        idx = K._arange(n)
        return _swapped(cur, i, j, target), jnp.where(idx == i, j, ipiv)
    start = jnp.broadcast_to(K._arange(n), aval(perm).shape)
    return lax.fori_loop(0, n, step, (start, jnp.zeros_like(start)))[1]


def _permutation_of(ipiv):
    n = aval(ipiv).shape[-1]

    def step(i, cur):
        j = _column(ipiv, i)
        return _swapped(cur, i, j, K.take_along(cur, j, -1))
    return lax.fori_loop(0, n, step, jnp.broadcast_to(K._arange(n), aval(ipiv).shape))


def lu(a, permute_l=False, overwrite_a=False, check_finite=True):
    """scipy.linalg.lu of a square matrix: (p, l, u) with a = p l u (p a permutation matrix of a's
    dtype), or (p l, u) with permute_l."""
    a, packed, perm = _lu_of_square("lu", a)
    n = aval(a).shape[-1]
    lower = jnp.tril(packed, -1) + jnp.eye(n, dtype=aval(a).dtype)
    upper = jnp.triu(packed)
    # p[perm[i], i] = 1: (p^T a)[i] = a[perm[i]]
    p = jnp.astype(K._index_column(n) == perm[..., None, :], aval(a).dtype)
    return (p @ lower, upper) if permute_l else (p, lower, upper)


def lu_factor(a, overwrite_a=False, check_finite=True):
    """scipy.linalg.lu_factor of a square matrix: (lu, piv), L (unit diagonal implied) and U packed,
    piv LAPACK's row interchanges (int32, as JAX)."""
    _, packed, perm = _lu_of_square("lu_factor", a)
    return packed, jnp.astype(_pivots_of(perm), np.int32)


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """scipy.linalg.lu_solve: x with a x = b (trans=0) or a^T x = b (1 or 2) from lu_factor's
    (lu, piv); b (..., n) or (..., n, k)."""
    packed, piv = lu_and_piv
    if trans not in (0, 1, 2):
        raise value_error("scipy.linalg.lu_solve", f"trans must be 0, 1 or 2, got {trans!r}")
    packed = _linalg._square("lu_solve", packed)
    b = _linalg._floating("lu_solve", b)
    vector = aval(b).ndim == aval(packed).ndim - 1
    if vector:
        b = b[..., None]
    perm = _permutation_of(jnp.astype(piv, np.int64))
    if trans == 0:   # L U x = P b
        y = solve_triangular(packed, K.take_along(b, perm[..., :, None], -2), lower=True, unit_diagonal=True)
        x = solve_triangular(packed, y, lower=False)
    else:            # U^T L^T (P x) = b
        z = solve_triangular(packed, b, trans=1, lower=False)
        w = solve_triangular(packed, z, trans=1, lower=True, unit_diagonal=True)
        x = K.take_along(w, jnp.argsort(perm, axis=-1)[..., :, None], -2)
    return x[..., 0] if vector else x


# ---- expm --------------------------------------------------------------------------------------
# Scaling and squaring with a diagonal Padé approximant (Higham, "The scaling and squaring method
# for the matrix exponential revisited", 2005), as scipy and JAX compute it: the degree m is the
# lowest whose bound theta_m holds the 1-norm of A, and past the largest A is divided by 2^s to fit
# it, the result squared s times. Each row: (theta_m, the coefficients b_0..b_m of p_m). Degree 13
# is float64's largest; float32 stops at 7, as in JAX.
_PADE = {
    3: (120., 60., 12., 1.),
    5: (30240., 15120., 3360., 420., 30., 1.),
    7: (17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.),
    9: (17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160., 110880., 3960., 90., 1.),
    13: (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
         10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.),
}
_THETA = {np.dtype(np.float64): {3: 1.495585217958292e-2, 5: 2.539398330063230e-1, 7: 9.504178996162932e-1,
                                 9: 2.097847961257068e0, 13: 5.371920351148152e0},
          np.dtype(np.float32): {3: 4.258730016922831e-1, 5: 1.880152677804762e0, 7: 3.925724783138660e0}}


def _pade_uv(a, degree: int, powers: dict):
    """(U, V) of the degree-m Padé approximant r_m(A) = (V - U)^-1 (V + U): U holds A's odd powers,
    V the even ones. powers maps k to A^k (k even), shared between the degrees."""
    b = _PADE[degree]
    ident = powers[0]
    if degree == 13:   # Higham's evaluation: A^8..A^12 through A^6, so only A^2, A^4, A^6 are formed
        a6 = powers[6]
        u = a @ (a6 @ (b[13] * a6 + b[11] * powers[4] + b[9] * powers[2])
                 + b[7] * a6 + b[5] * powers[4] + b[3] * powers[2] + b[1] * ident)
        v = a6 @ (b[12] * a6 + b[10] * powers[4] + b[8] * powers[2]) + b[6] * a6 + b[4] * powers[4] \
            + b[2] * powers[2] + b[0] * ident
        return u, v
    u = a @ sum(b[k + 1] * powers[k] for k in range(0, degree, 2))
    v = sum(b[k] * powers[k] for k in range(0, degree, 2))
    return u, v


def expm(A, *, upper_triangular=False, max_squarings=16):
    """scipy.linalg.expm: the matrix exponential of A (..., n, n) by scaling and squaring with a Padé
    approximant (degrees 3 to 13 in float64, 3 to 7 in float32; integers become float64). As in JAX,
    a matrix that needs more than max_squarings squarings gives NaNs, and upper_triangular=True
    solves the Padé quotient as triangular. Batches are computed together; differentiable (the
    scaling's power of two is piecewise constant: its derivative is zero)."""
    if not isinstance(max_squarings, (int, np.integer)) or isinstance(max_squarings, bool) or max_squarings < 0:
        raise SprueValueError(f"sprue.scipy.linalg.expm: max_squarings must be a non-negative Python int (the"
                              f" number of squarings compiled), got {max_squarings!r}{loc()}")
    a = _linalg._square("expm", A)
    dtype = aval(a).dtype
    theta = _THETA.get(dtype)
    if theta is None:
        raise UnsupportedError(f"sprue.scipy.linalg.expm: {dtype} matrices are not supported (float32 and float64"
                               f" are){loc()}")
    n = aval(a).shape[-1]
    norm = jnp.max(jnp.sum(jnp.abs(a), axis=-2), axis=-1)            # the 1-norm, per matrix
    degrees = sorted(theta)
    top = theta[degrees[-1]]
    # scaled so that the norm is at most theta of the largest degree (scipy's ceil: JAX's floor lets
    # the scaled norm reach twice the bound); the lower degrees are chosen only where s is 0
    s = jnp.maximum(0.0, jnp.ceil(jnp.log2(norm / top)))
    scaled = a / jnp.astype(2.0 ** s, dtype)[..., None, None]
    powers = {0: jnp.broadcast_to(jnp.eye(n, dtype=dtype), aval(a).shape), 2: scaled @ scaled}
    for k in range(4, min(degrees[-1], 9), 2):
        powers[k] = powers[k - 2] @ powers[2]
    u, v = _pade_uv(scaled, degrees[-1], powers)
    for degree in reversed(degrees[:-1]):   # the lowest degree whose bound holds the norm
        u_m, v_m = _pade_uv(scaled, degree, powers)
        fits = (norm <= theta[degree])[..., None, None]
        u, v = jnp.where(fits, u_m, u), jnp.where(fits, v_m, v)
    r = solve_triangular(v - u, v + u) if upper_triangular else _linalg.solve(v - u, v + u)
    s = jnp.astype(s, np.int32)
    last = jnp.max(s)

    def square(i, r):   # r @ r where i < s, for the batch's largest s only
        return lax.cond(i < last, lambda m: jnp.where((i < s)[..., None, None], m @ m, m), lambda m: m, r)
    r = lax.fori_loop(0, max_squarings, square, r)
    return jnp.where((s > max_squarings)[..., None, None], jnp.nan, r)
