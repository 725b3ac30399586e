"""sprue.numpy.linalg: numpy.linalg's API (with jax.numpy.linalg's conventions) over kernels that
sprue compiles itself (see _linalg_kernels: blocked, batched over leading axes, any size).

As in JAX, failures are values: a matrix that is not positive definite gives a Cholesky factor of
NaNs, a singular one infinities or NaNs from solve/inv, det 0 and slogdet (0, -inf); numpy raises
LinAlgError instead. Derivatives are JAX's rules (jax._src.lax.linalg), written from the factor
with custom_jvp, so reverse mode transposes them: nothing is differentiated through the loops.
Besides numpy's names: `solve_triangular` (jax.scipy.linalg's signature) and `triangular_solve`
(jax.lax.linalg's).
"""
from __future__ import annotations

import functools

import numpy as np

from sprue.lax.custom_derivatives import custom_jvp
from sprue.numpy import _linalg_kernels as K
from sprue.numpy._avals import aval, describe, type_error, value_error
from sprue.numpy._linalg import _contract as contract_sizes
from sprue.numpy._linalg_kernels import jnp
from sprue.numpy._promote import operand

__all__ = ["norm", "cholesky", "solve", "inv", "det", "slogdet", "matrix_power", "solve_triangular",
           "triangular_solve"]

mT = K.mT


def _floating(fname: str, x, min_ndim: int = 1):
    """x as a float array (integers and booleans become float64, as numpy.linalg converts them)."""
    x = operand(f"linalg.{fname}", x)
    av = aval(x)
    if av.dtype.kind == "c":
        raise type_error(f"linalg.{fname}", f"complex matrices are not supported yet (got {describe(x)})")
    if av.ndim < min_ndim:
        raise value_error(f"linalg.{fname}", f"needs an array of at least {min_ndim} dimensions, got {describe(x)}")
    return x if av.dtype.kind == "f" else jnp.astype(x, np.float64)


def _square(fname: str, a):
    a = _floating(fname, a, 2)
    n, m = aval(a).shape[-2:]
    if isinstance(n, int) and isinstance(m, int) and n != m:
        raise value_error(f"linalg.{fname}", f"last 2 dimensions of the array must be square, got {describe(a)}")
    return a


# ---- norm --------------------------------------------------------------------------------------

def _vector_norm(x, ord, axis, keepdims):
    ax = jnp.abs(x)
    if ord is None or ord == 2:
        return jnp.sqrt(jnp.sum(x * x, axis=axis, keepdims=keepdims))
    if ord == np.inf:
        return jnp.max(ax, axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return jnp.min(ax, axis=axis, keepdims=keepdims)
    if ord == 0:
        return jnp.sum(jnp.astype(x != 0, x.dtype), axis=axis, keepdims=keepdims)
    if ord == 1:
        return jnp.sum(ax, axis=axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise value_error("linalg.norm", f"invalid norm order {ord!r} for vectors")
    p = np.asarray(ord, x.dtype)[()]
    return jnp.sum(ax ** p, axis=axis, keepdims=keepdims) ** (1 / p)


def _matrix_norm(x, ord, axis, keepdims):
    r, c = axis
    if ord in ("fro", "f", None):
        return jnp.sqrt(jnp.sum(x * x, axis=axis, keepdims=keepdims))
    if ord in (1, -1, np.inf, -np.inf):
        # 1: the largest column sum of |x| (sum over rows); inf: the largest row sum
        summed, other = (r, c) if ord in (1, -1) else (c, r)
        s = jnp.sum(jnp.abs(x), axis=summed, keepdims=True)
        out = (jnp.max if ord > 0 else jnp.min)(s, axis=other, keepdims=True)
        return out if keepdims else jnp.squeeze(out, axis=(r, c))
    if ord in (2, -2, "nuc"):
        raise value_error("linalg.norm", f"the matrix norm ord={ord!r} needs singular values (svd), which"
                                         f" sprue.numpy.linalg does not have yet; 'fro', 1, -1, inf and -inf work")
    raise value_error("linalg.norm", f"invalid norm order {ord!r} for matrices")


def norm(x, ord=None, axis=None, keepdims=False):
    """numpy.linalg.norm: vector norms over one axis, matrix norms over two; with axis=None, the
    2-norm of the flattened array if ord is None, else the vector or matrix norm of a 1-D or 2-D x."""
    x = _floating("norm", x, 0)
    nd = aval(x).ndim
    if axis is None:
        if ord is None:
            out = jnp.sqrt(jnp.sum(x * x))
            return jnp.reshape(out, (1,) * nd) if keepdims else out
        if nd not in (1, 2):
            raise value_error("linalg.norm", f"ord={ord!r} with axis=None needs a 1-D or 2-D array, got {describe(x)}")
        axis = tuple(range(nd))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    try:
        axes = tuple(int(a) + nd if -nd <= int(a) < 0 else int(a) for a in axes)
    except TypeError:
        raise type_error("linalg.norm", f"axis must be an int or a tuple of ints, got {axis!r}") from None
    if any(not 0 <= a < nd for a in axes) or len(set(axes)) != len(axes):
        raise value_error("linalg.norm", f"axis {axis!r} is out of range or repeated for {describe(x)}")
    if len(axes) == 1:
        return _vector_norm(x, ord, axes, keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, ord, axes, keepdims)
    raise value_error("linalg.norm", f"improper number of dimensions to norm: axis={axis!r}")


# ---- Cholesky ----------------------------------------------------------------------------------

def _nan_unless(ok, x):
    """x where ok (one flag per matrix), NaN everywhere else: LAPACK's failure, as JAX reports it."""
    return jnp.where(ok[..., None, None], x, np.asarray(np.nan, x.dtype))


@custom_jvp
def _cholesky(a):
    L = K.cholesky(a)
    return _nan_unless(jnp.all(jnp.isfinite(jnp.diagonal(L, axis1=-2, axis2=-1)), axis=-1), L)


@_cholesky.defjvp
def _cholesky_jvp(primals, tangents):
    """JAX's _cholesky_jvp_rule (after Murray, Differentiation of the Cholesky decomposition,
    arXiv:1602.07527): dL = L phi(L^-1 dA L^-T), phi taking the lower triangle with its diagonal
    halved. The solves are the plain kernels, so that reverse mode transposes them as loops."""
    (a,), (da,) = primals, tangents
    L = _cholesky(a)
    y = K.lower_solve(L, mT(K.lower_solve(L, mT(da))))
    n = aval(a).shape[-1]
    phi = jnp.tril(y) * (1 - 0.5 * jnp.eye(n, dtype=y.dtype))
    return L, L @ phi


def cholesky(a, *, upper=False, symmetrize_input=True):
    """numpy.linalg.cholesky (jax.numpy's: the input symmetrized as (a + a^T) / 2 first, NaNs for a
    matrix that is not positive definite)."""
    a = _square("cholesky", a)
    if symmetrize_input:
        a = (a + mT(a)) / 2
    L = _cholesky(a)
    return mT(L) if upper else L


# ---- triangular solve --------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _lower_solver(unit_diagonal: bool):
    """L^-1 b for a lower triangular L, as a function with JAX's derivative (one per flag)."""
    @custom_jvp
    def lower_solve(L, b):
        return K.lower_solve(L, b, unit_diagonal)

    @lower_solve.defjvp
    def lower_solve_jvp(primals, tangents):
        # JAX's _triangular_solve_jvp_rule_a and the rule for b: dX = L^-1 (db - tri(dL) X)
        (L, b), (dL, db) = primals, tangents
        x = lower_solve(L, b)
        dl = jnp.tril(dL, -1 if unit_diagonal else 0)
        return x, K.lower_solve(L, db - dl @ x, unit_diagonal)
    return lower_solve


def _batch_broadcast(fname, a, b):
    """a (..., n, n) and b (..., n, k) with their batch axes broadcast together, and n checked (at
    run time where only then known)."""
    a, b = contract_sizes(fname, a, b, [(aval(a).ndim - 1, aval(b).ndim - 2)],
                          f"{describe(a)} and right-hand side {describe(b)} have different sizes: {aval(a).shape[-1]}"
                          f" is not {aval(b).shape[-2]}")
    ab, bb = aval(a).shape[:-2], aval(b).shape[:-2]
    try:
        batch = tuple(np.broadcast_shapes(ab, bb)) if all(isinstance(s, int) for s in ab + bb) else None
    except ValueError:
        raise value_error(fname, f"batch dimensions of {describe(a, b)} cannot be broadcast together") from None
    if batch is None:
        if len(ab) != len(bb):
            raise value_error(fname, f"batch dimensions of {describe(a, b)} differ in number; with sizes known"
                                     f" only at run time they must match")
        return a, b
    return jnp.broadcast_to(a, batch + aval(a).shape[-2:]), jnp.broadcast_to(b, batch + aval(b).shape[-2:])


def _solve_lower_or_upper(a, b, lower: bool, unit_diagonal: bool):
    """a^-1 b for a triangular a: an upper one is a lower one with rows and columns reversed."""
    if lower:
        return _lower_solver(unit_diagonal)(a, b)
    flipped = _lower_solver(unit_diagonal)(jnp.flip(a, axis=(-2, -1)), jnp.flip(b, axis=-2))
    return jnp.flip(flipped, axis=-2)


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False, debug=None,
                     check_finite=True):
    """jax.scipy.linalg.solve_triangular: x with op(a) x = b, op(a) = a, a^T (trans=1 or 'T') or
    a^H (2 or 'C'); a (..., n, n) triangular (the other triangle ignored), b (..., n) or (..., n, k)."""
    fname = "linalg.solve_triangular"
    a, b = _square("solve_triangular", a), _floating("solve_triangular", b)
    dt = np.promote_types(aval(a).dtype, aval(b).dtype)
    a, b = jnp.astype(a, dt), jnp.astype(b, dt)
    if trans not in (0, 1, 2, "N", "T", "C"):
        raise value_error(fname, f"trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    vector = aval(b).ndim == aval(a).ndim - 1
    if vector:
        b = b[..., None]
    a, b = _batch_broadcast(fname, a, b)
    transposed = trans not in (0, "N")
    if transposed:
        a = mT(a)
    x = _solve_lower_or_upper(a, b, bool(lower) != transposed, bool(unit_diagonal))
    return x[..., 0] if vector else x


def triangular_solve(a, b, left_side=False, lower=False, transpose_a=False, conjugate_a=False,
                     unit_diagonal=False):
    """jax.lax.linalg.triangular_solve: x with op(a) x = b (left_side) or x op(a) = b, where
    op(a) = a^T if transpose_a; a (..., m, m), b (..., m, n) or (..., n, m)."""
    if left_side:
        return solve_triangular(a, b, trans=1 if transpose_a else 0, lower=lower, unit_diagonal=unit_diagonal)
    # x op(a) = b  <=>  op(a)^T x^T = b^T
    b = _floating("triangular_solve", b, 2)
    xt = solve_triangular(a, mT(b), trans=0 if transpose_a else 1, lower=lower, unit_diagonal=unit_diagonal)
    return mT(xt)


# ---- LU: solve, inv, det, slogdet --------------------------------------------------------------

@custom_jvp
def _solve(a, b):
    packed, perm, _ = K.lu(a)
    return K.lu_solve(packed, perm, b)


@_solve.defjvp
def _solve_jvp(primals, tangents):
    """dx = a^-1 (db - da x), from one factorization (JAX's solve differentiates through
    custom_linear_solve to the same)."""
    (a, b), (da, db) = primals, tangents
    packed, perm, _ = K.lu(a)
    x = K.lu_solve(packed, perm, b)
    return x, K.lu_solve(packed, perm, db - da @ x)


def solve(a, b):
    """numpy.linalg.solve (numpy 2's broadcasting: b is a vector only when it is 1-D); a singular a
    gives infinities or NaNs, as JAX, where numpy raises."""
    a, b = _square("solve", a), _floating("solve", b)
    dt = np.promote_types(aval(a).dtype, aval(b).dtype)
    a, b = jnp.astype(a, dt), jnp.astype(b, dt)
    vector = aval(b).ndim == 1
    if vector:
        b = b[:, None]
    a, b = _batch_broadcast("linalg.solve", a, b)
    x = _solve(a, b)
    return x[..., 0] if vector else x


def inv(a):
    """numpy.linalg.inv: solve against the identity (a singular a gives infinities or NaNs)."""
    a = _square("inv", a)
    return _solve(a, jnp.broadcast_to(jnp.eye(aval(a).shape[-1], dtype=aval(a).dtype), aval(a).shape))


def _trace(x):
    return jnp.sum(jnp.diagonal(x, axis1=-2, axis2=-1), axis=-1)


def _lu_diagonal(a):
    packed, perm, swaps = K.lu(a)
    parity = jnp.astype(1 - 2 * (swaps % 2), aval(a).dtype)
    return jnp.diagonal(packed, axis1=-2, axis2=-1), parity, packed, perm


@custom_jvp
def _slogdet(a):
    diag, parity, _, _ = _lu_diagonal(a)
    return parity * jnp.prod(jnp.sign(diag), axis=-1), jnp.sum(jnp.log(jnp.abs(diag)), axis=-1)


@_slogdet.defjvp
def _slogdet_jvp(primals, tangents):
    """JAX's _slogdet_jvp: the sign's tangent is zero, log|det|'s is trace(a^-1 da)."""
    (a,), (da,) = primals, tangents
    diag, parity, packed, perm = _lu_diagonal(a)
    sign = parity * jnp.prod(jnp.sign(diag), axis=-1)
    return (sign, jnp.sum(jnp.log(jnp.abs(diag)), axis=-1)), (jnp.zeros_like(sign),
                                                               _trace(K.lu_solve(packed, perm, da)))


@custom_jvp
def _det(a):
    diag, parity, _, _ = _lu_diagonal(a)
    return parity * jnp.prod(diag, axis=-1)


@_det.defjvp
def _det_jvp(primals, tangents):
    """d det = det trace(a^-1 da) (Jacobi's formula; JAX's cofactor form also covers a singular a,
    where this gives NaN)."""
    (a,), (da,) = primals, tangents
    diag, parity, packed, perm = _lu_diagonal(a)
    d = parity * jnp.prod(diag, axis=-1)
    return d, d * _trace(K.lu_solve(packed, perm, da))


def slogdet(a):
    """numpy.linalg.slogdet: (sign, log|det|), (0, -inf) for a singular a."""
    return _slogdet(_square("slogdet", a))


def det(a):
    """numpy.linalg.det: the product of U's diagonal from a pivoted LU, signed by the pivoting."""
    return _det(_square("det", a))


def matrix_power(a, n):
    """numpy.linalg.matrix_power for a static integer n: repeated squaring (inv first if n < 0)."""
    a = _square("matrix_power", a)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise type_error("linalg.matrix_power", f"exponent must be an integer known when tracing, got {n!r}")
    n = int(n)
    if n == 0:
        return jnp.broadcast_to(jnp.eye(aval(a).shape[-1], dtype=aval(a).dtype), aval(a).shape)
    if n < 0:
        a, n = inv(a), -n
    result, square = None, a
    while True:
        if n & 1:
            result = square if result is None else result @ square
        n >>= 1
        if not n:
            return result
        square = square @ square
