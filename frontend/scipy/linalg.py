"""sprue.scipy.linalg: jax.scipy.linalg's names over sprue.numpy.linalg's kernels. scipy's own
defaults where they differ from numpy's (cholesky's factor is upper unless lower=True); failures are
values, as in JAX (NaNs for a matrix that is not positive definite, infinities or NaNs for a
singular one), where scipy raises LinAlgError."""
from __future__ import annotations

from sprue.numpy import linalg as _linalg
from sprue.numpy.linalg import det, inv, norm, solve_triangular  # noqa: F401

__all__ = ["cholesky", "cho_factor", "cho_solve", "det", "inv", "norm", "solve", "solve_triangular"]


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
