"""sprue.numpy.linalg: numpy.linalg's API (with jax.numpy.linalg's conventions) over sprue's own
kernels (_linalg_kernels: for float32/float64 the native Cholesky, LU and triangular solve of
sprue.lax.linalg, C that sprue links into the library; batched over leading axes, any size).

As in JAX, failures are values: a matrix that is not positive definite gives a Cholesky factor of
NaNs, a singular one infinities or NaNs from solve/inv, det 0 and slogdet (0, -inf); numpy raises
LinAlgError instead. Derivatives are JAX's rules (jax._src.lax.linalg), written from the factor
with custom_jvp, so reverse mode transposes them: nothing is differentiated through the loops.
Besides numpy's names: `solve_triangular` (jax.scipy.linalg's signature) and `triangular_solve`
(jax.lax.linalg's).
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from sprue import lax
from sprue.base.errors import ConcretizationError, ShapeError, UnsupportedError
from sprue.lax.custom_derivatives import custom_jvp
from sprue.numpy import _dims as _d
from sprue.numpy import _linalg_kernels as K
from sprue.numpy import _linalg_spectral as S
from sprue.numpy._avals import aval, describe, loc, type_error, value_error
from sprue.numpy._linalg import _contract as contract_sizes
from sprue.numpy._linalg_spectral import jnp
from sprue.numpy._promote import operand

__all__ = ["norm", "cholesky", "solve", "inv", "det", "slogdet", "matrix_power", "solve_triangular",
           "triangular_solve", "qr", "eigh", "eigvalsh", "svd", "svdvals", "lstsq", "pinv", "matrix_rank", "cond",
           "QRResult", "EighResult", "SVDResult"]

mT = K.mT


def _floating(fname: str, x, min_ndim: int = 1, complex_ok: bool = False):
    """x as a float array (integers and booleans become float64, as numpy.linalg converts them);
    complex ones only where the computation is written for them (complex_ok)."""
    x = operand(f"linalg.{fname}", x)
    av = aval(x)
    if av.dtype.kind == "c" and not complex_ok:
        raise type_error(f"linalg.{fname}", f"complex matrices are not supported yet (got {describe(x)})")
    if av.ndim < min_ndim:
        raise value_error(f"linalg.{fname}", f"needs an array of at least {min_ndim} dimensions, got {describe(x)}")
    return x if av.dtype.kind in "fc" else jnp.astype(x, np.float64)


def _square(fname: str, a, complex_ok: bool = False):
    a = _floating(fname, a, 2, complex_ok)
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
        # the singular values of the matrices over axes (r, c), moved last
        rest = [d for d in range(x.ndim) if d not in (r, c)]
        s = svdvals(jnp.transpose(x, rest + [r, c]))
        out = jnp.max(s, axis=-1) if ord == 2 else jnp.min(s, axis=-1) if ord == -2 else jnp.sum(s, axis=-1)
        return jnp.expand_dims(out, tuple(sorted((r, c)))) if keepdims else out
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
    halved. The solves are the plain kernels (the triangular-solve primitive, whose reverse rule
    reverse mode uses; or the traced loops)."""
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
    # substitution is the same in complex arithmetic (a^H: conjugate a before, as trans=2 asks)
    a, b = _square("solve_triangular", a, complex_ok=True), _floating("solve_triangular", b, complex_ok=True)
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
    if trans in (2, "C") and aval(a).dtype.kind == "c":
        a = lax.conj(a)
    x = _solve_lower_or_upper(a, b, bool(lower) != transposed, bool(unit_diagonal))
    return x[..., 0] if vector else x


def triangular_solve(a, b, left_side=False, lower=False, transpose_a=False, conjugate_a=False,
                     unit_diagonal=False):
    """jax.lax.linalg.triangular_solve: x with op(a) x = b (left_side) or x op(a) = b, where
    op(a) = a^T if transpose_a, conjugated if conjugate_a; a (..., m, m), b (..., m, n) or (..., n, m)."""
    if conjugate_a and aval(operand("linalg.triangular_solve", a)).dtype.kind == "c":
        a = lax.conj(a)
    if left_side:
        return solve_triangular(a, b, trans=1 if transpose_a else 0, lower=lower, unit_diagonal=unit_diagonal)
    # x op(a) = b  <=>  op(a)^T x^T = b^T
    b = _floating("triangular_solve", b, 2, complex_ok=True)
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


# ---- QR ----------------------------------------------------------------------------------------

class QRResult(NamedTuple):
    Q: object
    R: object


def _upper_solve_right(r, b):
    """b r^-1 for an upper triangular r: (r^T)^-1 b^T transposed."""
    return mT(K.lower_solve(mT(r), mT(b)))


@functools.lru_cache(maxsize=None)
def _qr_function(mode: str):
    """The QR of one mode as a function with JAX's derivative (qr_jvp_rule, after Townsend's note
    'Differentiating the QR decomposition': defined for m >= n, and for 'complete' only if m == n)."""
    @custom_jvp
    def qr_of(a):
        q, r = S.qr(a, mode)
        return r if mode == "r" else (q, r)

    @qr_of.defjvp
    def qr_jvp(primals, tangents):
        (a,), (da,) = primals, tangents
        m, n = aval(a).shape[-2:]
        if not (_static(m, n) and m >= n and (mode != "complete" or m == n)):
            raise UnsupportedError(f"sprue.numpy.linalg.qr: the derivative of a QR decomposition is defined for"
                                   f" m >= n (and mode='complete' only for square matrices), as in JAX; got"
                                   f" {describe(a)} with mode={mode!r}{loc()}")
        q, r = S.qr(a, "reduced")
        dx_rinv = _upper_solve_right(r, da)
        qt_dx_rinv = mT(q) @ dx_rinv
        lower = jnp.tril(qt_dx_rinv, -1)
        do = lower - mT(lower)   # skew-symmetric
        dq = q @ (do - qt_dx_rinv) + dx_rinv
        dr = (qt_dx_rinv - do) @ r
        return (r, dr) if mode == "r" else ((q, r), (dq, dr))
    return qr_of


def _static(*sizes) -> bool:
    return all(isinstance(s, int) for s in sizes)


def qr(a, mode="reduced"):
    """numpy.linalg.qr by Householder reflections (LAPACK's signs: R and Q match numpy's):
    mode 'reduced' (Q (..., m, k), R (..., k, n), k = min(m, n)), 'complete' (Q (..., m, m)) or 'r'
    (R only); a QRResult(Q, R) for the first two, as numpy and JAX."""
    a = _floating("qr", a, 2)
    if mode not in ("reduced", "complete", "r"):
        raise value_error("linalg.qr", f"mode must be 'reduced', 'complete' or 'r', got {mode!r}"
                                       f" (numpy's 'raw' and 'economic' are not in jax.numpy either)")
    m, n = aval(a).shape[-2:]
    if mode != "complete" and _d.le(m, n) is None and _d.le(n, m) is None:
        raise ShapeError(f"sprue.numpy.linalg.qr: mode={mode!r} of {describe(a)} gives factors of min({m}, {n})"
                         f" rows or columns, and a result's size cannot be the smaller of two run-time sizes: give"
                         f" the two sizes one name (a square matrix), make one static, or use mode='complete'{loc()}")
    out = _qr_function(mode)(a)
    return out if mode == "r" else QRResult(*out)


# ---- eigh --------------------------------------------------------------------------------------

class EighResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


@custom_jvp
def _eigh(a):
    return S.eigh(a)


@_eigh.defjvp
def _eigh_jvp(primals, tangents):
    """JAX's _eigh_jvp_rule: with v^T da v = X, dw = diag(X) and dv = v (F o X), F_ij = 1 / (w_j - w_i)
    off the diagonal (infinite for repeated eigenvalues, as in JAX)."""
    (a,), (da,) = primals, tangents
    w, v = S.eigh(a)
    x = mT(v) @ da @ v
    eye = jnp.eye(aval(a).shape[-1], dtype=aval(a).dtype)
    f = 1 / (eye + w[..., None, :] - w[..., :, None]) - eye
    return (w, v), (jnp.diagonal(x, axis1=-2, axis2=-1), v @ (f * x))


def _symmetric_from(fname: str, a, UPLO, symmetrize_input: bool):
    a = _square(fname, a)
    if UPLO not in (None, "L", "U"):
        raise value_error(f"linalg.{fname}", f"UPLO must be 'L' or 'U', got {UPLO!r}")
    if symmetrize_input:
        a = (a + mT(a)) / 2
    # the triangle read (JAX's eigh reads one), mirrored
    lower = jnp.tril(a) if UPLO in (None, "L") else mT(jnp.triu(a))
    return lower + mT(jnp.tril(lower, -1))


def eigh(a, UPLO=None, symmetrize_input=True):
    """numpy.linalg.eigh (jax.numpy's: the input symmetrized first): EighResult(eigenvalues ascending,
    eigenvectors as columns), by cyclic Jacobi rotations; eigenvectors' signs are not defined."""
    return EighResult(*_eigh(_symmetric_from("eigh", a, UPLO, symmetrize_input)))


def eigvalsh(a, UPLO="L", symmetrize_input=True):
    """numpy.linalg.eigvalsh: eigh's eigenvalues."""
    return eigh(a, UPLO, symmetrize_input).eigenvalues


# ---- SVD ---------------------------------------------------------------------------------------

class SVDResult(NamedTuple):
    U: object
    S: object
    Vh: object


@custom_jvp
def _svd_reduced(a):
    s, u, vt = S.svd(a, False, True)
    return s, u, vt


@_svd_reduced.defjvp
def _svd_jvp(primals, tangents):
    """JAX's _svd_jvp_rule (full_matrices=False): from dS = U^T dA V, ds = diag(dS) and dU, dV by
    the 1 / (s_j^2 - s_i^2) matrix F, with the corrections for a non-square a."""
    (a,), (da,) = primals, tangents
    s, u, vt = S.svd(a, False, True)
    v = mT(vt)
    m, n = aval(a).shape[-2:]
    ds_matrix = mT(u) @ da @ v
    ds = jnp.diagonal(ds_matrix, axis1=-2, axis2=-1)
    row = s[..., None, :]
    eye = jnp.eye(aval(s).shape[-1], dtype=aval(s).dtype)
    f = 1 / ((row + mT(row)) * (row - mT(row)) + eye) - eye
    dss, sds = row * ds_matrix, mT(row) * ds_matrix
    s_zero = jnp.astype(s == 0, aval(s).dtype)
    s_inv = 1 / (s + s_zero) - s_zero
    du_dv_diagonal = 0.5 * (ds_matrix - mT(ds_matrix)) * (eye * s_inv[..., None, :])
    du = u @ (f * (dss + mT(dss)) + du_dv_diagonal)
    dv = v @ (f * (sds + mT(sds)))
    if m > n:
        dav = da @ v
        du = du + (dav - u @ (mT(u) @ dav)) / row
    if n > m:
        dahu = mT(da) @ u
        dv = dv + (dahu - v @ (vt @ dahu)) / row
    return (s, u, vt), (ds, du, mT(dv))


@custom_jvp
def _singular_values(a):
    return S.svd(a, False, False)[0]


@_singular_values.defjvp
def _singular_values_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    s, u, vt = S.svd(a, False, True)
    return s, jnp.diagonal(mT(u) @ da @ mT(vt), axis1=-2, axis2=-1)


@custom_jvp
def _svd_full(a):
    s, u, vt = S.svd(a, True, True)
    return s, u, vt


@_svd_full.defjvp
def _svd_full_jvp(primals, tangents):
    raise UnsupportedError(f"sprue.numpy.linalg.svd: the derivative of an SVD with full_matrices=True of a"
                           f" non-square {describe(primals[0])} is not defined (nor in JAX): pass"
                           f" full_matrices=False{loc()}")


def _hermitian_svd(a, compute_uv: bool):
    """JAX's svd(hermitian=True): from eigh, s = |w| descending, Vh = (U sign(w))^T."""
    w, v = eigh(a)
    order = jnp.argsort(-jnp.abs(w), axis=-1)
    s = K.take_along(jnp.abs(w), order, -1)
    if not compute_uv:
        return s
    u = K.take_along(v, order[..., None, :], -1)
    sign = jnp.where(K.take_along(w, order, -1) < 0, -1.0, 1.0)
    return SVDResult(u, s, mT(u * jnp.astype(sign, aval(a).dtype)[..., None, :]))


def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """numpy.linalg.svd: SVDResult(U, S, Vh) (S descending) or S alone, by one-sided Jacobi rotations
    (singular values to high relative accuracy); singular vectors' signs are not defined."""
    a = _floating("svd", a, 2)
    if hermitian:
        return _hermitian_svd(_square("svd", a), compute_uv)
    if not compute_uv:
        return _singular_values(a)
    m, n = aval(a).shape[-2:]
    s, u, vt = _svd_full(a) if full_matrices and not (_static(m, n) and m == n) else _svd_reduced(a)
    return SVDResult(u, s, vt)


def svdvals(x):
    """numpy.linalg.svdvals: the singular values, descending."""
    return svd(x, compute_uv=False)


# ---- pinv, lstsq, matrix_rank, cond --------------------------------------------------------------

def _eps(x) -> float:
    return float(np.finfo(aval(x).dtype).eps)


def _pinv_plain(a, rtol):
    m, n = aval(a).shape[-2:]
    s, u, vt = S.svd(a, False, True)
    cutoff = rtol * s[..., 0:1]
    s = jnp.where(s > cutoff, s, np.asarray(np.inf, aval(a).dtype))
    return mT(vt) @ (mT(u) / s[..., :, None])


def _pinv_rtol(a, rtol):
    """rtol as a number of a's dtype; None: JAX's default 10 max(m, n) eps (traced for run-time sizes)."""
    dt = aval(a).dtype
    if rtol is not None:
        return np.asarray(rtol, dt)
    m, n = aval(a).shape[-2:]
    return S._size_as(_d.dmax(m, n), dt) * np.asarray(10 * _eps(a), dt)


@functools.lru_cache(maxsize=None)
def _pinv_function(rtol: float | None):
    @custom_jvp
    def pinv_of(a):
        return _pinv_plain(a, _pinv_rtol(a, rtol))

    @pinv_of.defjvp
    def pinv_jvp(primals, tangents):
        """JAX's _pinv_jvp (Golub & Pereyra, The differentiation of pseudo-inverses and nonlinear
        least squares problems whose variables separate, 1973)."""
        (a,), (da,) = primals, tangents
        p = _pinv_plain(a, _pinv_rtol(a, rtol))
        m, n = aval(a).shape[-2:]
        if m >= n:
            s = (p @ mT(p)) @ mT(da)
            t = (mT(da) @ mT(p)) @ p
            return p, -(p @ da) @ p + s - (s @ a) @ p + t - (p @ a) @ t
        s = p @ (mT(p) @ mT(da))
        t = mT(da) @ (mT(p) @ p)
        return p, -p @ (da @ p) + s - s @ (a @ p) + t - p @ (a @ t)
    return pinv_of


def pinv(a, rtol=None, hermitian=False, *, rcond=None):
    """numpy.linalg.pinv from the SVD: singular values at or below rtol times the largest are dropped
    (rtol a Python number; by default JAX's 10 max(m, n) eps). JAX's derivative (Golub-Pereyra)."""
    a = _floating("pinv", a, 2)
    rtol = rcond if rtol is None else rtol
    if rtol is not None and not isinstance(rtol, (int, float, np.floating, np.integer)):
        raise type_error("linalg.pinv", f"rtol must be a Python number, got {type(rtol).__name__}")
    return _pinv_function(None if rtol is None else float(rtol))(a)


def matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    """numpy.linalg.matrix_rank: the number of singular values above tol (absolute) or, by default,
    rtol (default max(m, n) eps) times the largest; for a 1-D A, whether any entry is nonzero."""
    A = _floating("matrix_rank", A, 1)
    if aval(A).ndim < 2:
        return jnp.astype(jnp.any(A != 0), np.int64)
    s = svd(A, compute_uv=False, hermitian=hermitian)
    if tol is None:
        rtol = max(aval(A).shape[-2:]) * _eps(A) if rtol is None else rtol
        tol = jnp.max(s, axis=-1, keepdims=True) * np.asarray(rtol, aval(s).dtype)
    else:
        tol = jnp.expand_dims(jnp.astype(operand("linalg.matrix_rank", tol), aval(s).dtype), -1)
    return jnp.sum(jnp.astype(s > tol, np.int64), axis=-1)


def cond(x, p=None):
    """numpy.linalg.cond: s_max / s_min for p None or 2 (s_min / s_max for -2), else
    norm(x, p) norm(inv(x), p); NaN becomes inf where x has no NaN (as JAX)."""
    x = _floating("cond", x, 2)
    if p in (None, 2, -2):
        s = svdvals(x)
        r = s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
    else:
        x = _square("cond", x)
        r = norm(x, p, axis=(-2, -1)) * norm(inv(x), p, axis=(-2, -1))
    return jnp.where(jnp.isnan(r) & ~jnp.any(jnp.isnan(x), axis=(-2, -1)), np.asarray(np.inf, aval(r).dtype), r)


def lstsq(a, b, rcond=None, *, numpy_resid=False):
    """numpy.linalg.lstsq (jax.numpy's): (x, residuals, rank, s) from the SVD, singular values below
    rcond (default max(m, n) eps) times the largest dropped. As JAX by default, the residuals are
    |b - a x|^2 per column always (numpy gives an empty array when rank < n or m <= n); numpy_resid=True
    gives numpy's form where the rank is known (eagerly)."""
    a, b = _floating("lstsq", a, 2), _floating("lstsq", b, 1)
    dt = np.promote_types(aval(a).dtype, aval(b).dtype)
    a, b = jnp.astype(a, dt), jnp.astype(b, dt)
    if aval(a).ndim != 2 or aval(b).ndim not in (1, 2):
        raise value_error("linalg.lstsq", f"a must be 2-D and b 1-D or 2-D (as jax.numpy.linalg.lstsq), got"
                                          f" {describe(a, b)}")
    m, n = aval(a).shape
    vector = aval(b).ndim == 1
    if vector:
        b = b[:, None]
    a, b = contract_sizes("linalg.lstsq", a, b, [(0, 0)],
                          f"{describe(a)} and right-hand side {describe(b)} have different numbers of rows")
    if rcond is None:
        rcond = _eps(a) * max(m, n) if _static(m, n) else _eps(a)
    elif rcond < 0:
        rcond = _eps(a)
    u, s, vt = svd(a, full_matrices=False)
    mask = s >= np.asarray(rcond, dt) * s[0]
    rank = jnp.sum(jnp.astype(mask, np.int64))
    s_inv = jnp.where(mask, 1 / jnp.where(mask, s, np.asarray(1, dt)), np.asarray(0, dt))
    x = mT(vt) @ (s_inv[:, None] * (mT(u) @ b))
    r = b - a @ x
    resid = jnp.sum(r * r, axis=0)
    if numpy_resid:
        try:
            full = int(rank) == n and m > n
        except ConcretizationError as e:   # a traced rank: numpy's form has a data-dependent shape
            raise value_error("linalg.lstsq", "numpy_resid=True needs the rank known, which it is only eagerly"
                                              " (as in JAX)") from e
        if not full:
            resid = jnp.zeros((0,), dt)
    return (x[:, 0] if vector else x), resid, rank, s
