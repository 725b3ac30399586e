"""JAX's linear-algebra and FFT primitives as a printed jaxpr has them (`lu`, `triangular_solve`,
`lu_pivots_to_permutation`, `cholesky`, `qr`, `eigh`, `svd`, `tridiagonal_solve`, `fft`), read into sprue.numpy.linalg's and sprue.numpy.fft's
computations of the same factorizations and transforms.

Why rewrites: jax.numpy.linalg and jax.numpy.fft bind these (LAPACK's and ducc's kernels in JAX);
sprue computes each with its own kernels (so a C host links no LAPACK or FFT library): lu,
cholesky and triangular_solve of float32/float64 with sprue.lax.linalg's primitives (native
routines sprue links into the library: the same code and speed as sprue.numpy.linalg's), the
others with sprue primitives, which sprue lowers, differentiates and batches. The printed jaxpr already holds JAX's derivatives of them (a `grad` of a solve is a
`custom_linear_solve` whose transpose is spelled out), so only the forward computations are
needed. Each rule takes (operands, params as Python values, the declared output avals) and
returns the outputs, as jaxpr_compat's.

Where a factorization is not unique its factors may differ from JAX's by signs (eigenvectors,
singular vectors) as LAPACK's may differ between machines; LU and QR follow LAPACK's pivoting and
signs.
"""
from __future__ import annotations

import numpy as np

from sprue import lax
from sprue import numpy as jnp
from sprue.numpy import _linalg_kernels as K
from sprue.numpy import fft as _fft
from sprue.numpy import linalg as _linalg
from sprue.scipy import linalg as _scipy_linalg
from sprue.trace.tracing import Tracer


def _shape(x) -> tuple:
    return tuple(x.aval.shape) if isinstance(x, Tracer) else np.shape(x)


def _static_square(x, what: str) -> int:
    shape = _shape(x)
    if len(shape) < 2 or not all(isinstance(d, int) for d in shape[-2:]) or shape[-1] != shape[-2]:
        raise NotImplementedError(f"{what} of a {list(shape)} array (sprue factors square matrices of static sizes)")
    return shape[-1]


def lu(args, params, outs):
    """`lu` a: (L and U packed, LAPACK's pivots, the permutation), int32 as JAX's (partial pivoting,
    the first largest magnitude in each column, as LAPACK's getrf)."""
    a, = args
    _static_square(a, "lu")
    packed, perm, _ = K.lu(a)
    pivots = _scipy_linalg._pivots_of(perm)
    return [packed, lax.convert_element_type(pivots, outs[1].dtype), lax.convert_element_type(perm, outs[2].dtype)]


def triangular_solve(args, params, outs):
    """`triangular_solve[left_side lower transpose_a conjugate_a unit_diagonal]` a b."""
    a, b = args
    return [_linalg.triangular_solve(a, b, left_side=params.get("left_side", False), lower=params.get("lower", False),
                                     transpose_a=params.get("transpose_a", False),
                                     conjugate_a=params.get("conjugate_a", False),
                                     unit_diagonal=params.get("unit_diagonal", False))]


def lu_pivots_to_permutation(args, params, outs):
    """`lu_pivots_to_permutation[permutation_size]` pivots (..., k): the permutation (..., size) that
    LAPACK's row exchanges make of 0..size-1, row i exchanged with row pivots[i] for i = 0..k-1 in
    order (jax.scipy.linalg.lu_solve of lu_factor's pivots)."""
    pivots, = args
    size, k = int(params["permutation_size"]), _shape(pivots)[-1]
    if not isinstance(k, int):
        raise NotImplementedError(f"lu_pivots_to_permutation of {list(_shape(pivots))} pivots (a run-time count)")
    batch = _shape(pivots)[:-1]
    idx = lax.broadcasted_iota(np.int32, (*batch, size), len(batch))
    pivots, perm = jnp.asarray(pivots).astype(np.int32), idx
    for i in range(k):   # k static and small (a matrix's rows): the exchanges unrolled, in order
        j = pivots[..., i:i + 1]                                                # (..., 1)
        at_i = perm[..., i:i + 1]
        at_j = jnp.sum(jnp.where(idx == j, perm, 0), axis=-1, keepdims=True)
        perm = jnp.where(idx == i, at_j, jnp.where(idx == j, at_i, perm))
    return [lax.convert_element_type(perm, outs[0].dtype)]


def cholesky(args, params, outs):
    """`cholesky` a: the lower factor of a (JAX symmetrizes the input before, in the jaxpr; NaNs for
    a matrix that is not positive definite, as JAX's)."""
    a, = args
    _static_square(a, "cholesky")
    return [_linalg.cholesky(a, symmetrize_input=bool(params.get("symmetrize_input", False)))]


def qr(args, params, outs):
    """`qr[pivoting full_matrices use_magma]` a: (q, r) by Householder reflections with LAPACK's signs."""
    a, = args
    if params.get("pivoting"):
        raise NotImplementedError("qr with pivoting=True (scipy's column-pivoted QR)")
    q, r = _linalg.qr(a, mode="complete" if params.get("full_matrices", True) else "reduced")
    return [q, r]


def eigh(args, params, outs):
    """`eigh[lower sort_eigenvalues subset_by_index algorithm]` a: (eigenvectors as columns, eigenvalues
    ascending); the triangle `lower` names is the one read."""
    a, = args
    _static_square(a, "eigh")
    if params.get("subset_by_index") not in (None, (0, _shape(a)[-1])):
        raise NotImplementedError(f"eigh with subset_by_index={params['subset_by_index']}")
    w, v = _linalg.eigh(a, UPLO="L" if params.get("lower", True) else "U", symmetrize_input=False)
    return [v, w]


def svd(args, params, outs):
    """`svd[full_matrices compute_uv subset_by_index algorithm]` a: (s) or (s, u, vt), s descending."""
    a, = args
    if params.get("subset_by_index") not in (None, (0, min(_shape(a)[-2:]))):
        raise NotImplementedError(f"svd with subset_by_index={params['subset_by_index']}")
    if not params.get("compute_uv", True):
        return [_linalg.svd(a, compute_uv=False)]
    u, s, vt = _linalg.svd(a, full_matrices=params.get("full_matrices", True))
    return [s, u, vt]


def tridiagonal_solve(args, params, outs):
    """`tridiagonal_solve[perturb_singular]` dl d du b: x with the tridiagonal (dl below, d on, du above
    the diagonal; dl[0] and du[-1] unused) times x = b, b (..., m, n), by Thomas's algorithm: a forward
    sweep eliminating dl, a backward one substituting (LAPACK's gtsv, which XLA's CPU calls, pivots
    rows where |dl| > |d|; for the diagonally dominant systems splines and implicit stencils give it
    takes no pivot and the two agree to rounding)."""
    dl, d, du, b = args
    if params.get("perturb_singular"):
        raise NotImplementedError("tridiagonal_solve with perturb_singular=True (LAPACK's gtsv perturbs zero pivots)")
    rank = len(_shape(b))
    if rank < 2 or _shape(d)[-1] != _shape(b)[-2] or not isinstance(_shape(b)[-2], int):
        raise NotImplementedError(f"tridiagonal_solve of a {list(_shape(b))} right-hand side")
    diagonals = [lax.transpose(v, (rank - 2, *range(rank - 2))) for v in (dl, d, du)]   # m first
    rhs = lax.transpose(b, (rank - 2, *range(rank - 2), rank - 1))
    first = lax.broadcast_in_dim(jnp.arange(_shape(b)[-2]) == 0, _shape(diagonals[0]), (0,))
    lower = jnp.where(first, 0, diagonals[0])

    def forward(carry, row):
        c_prev, y_prev = carry
        l, dd, u, r = row
        denom = dd - l * c_prev
        c, y = u / denom, (r - l[..., None] * y_prev) / denom[..., None]
        return (c, y), (c, y)
    _, (c, y) = lax.scan(forward, (jnp.zeros_like(diagonals[1][0]), jnp.zeros_like(rhs[0])), (lower, diagonals[1], diagonals[2], rhs))

    def backward(x_next, row):
        c_i, y_i = row
        x = y_i - c_i[..., None] * x_next
        return x, x
    _, x = lax.scan(backward, jnp.zeros_like(rhs[0]), (c, y), reverse=True)
    return [lax.transpose(x, (*range(1, rank - 1), 0, rank - 1))]


# JAX's FftType, printed as its value (JAX >= 0.4.32) or its name (`FftType.RFFT`, older jaxlibs)
_FFT_TYPES = {0: "FFT", 1: "IFFT", 2: "RFFT", 3: "IRFFT"}


def _fft_type(value) -> str:
    if isinstance(value, (int, np.integer)):
        return _FFT_TYPES[int(value)]
    name = str(value).rsplit(".", 1)[-1].upper()
    if name not in _FFT_TYPES.values():
        raise NotImplementedError(f"fft_type={value}")
    return name


def fft(args, params, outs):
    """`fft[fft_type fft_lengths]`: the transform over the last len(fft_lengths) axes, numpy's
    scaling (the inverse ones divided by the length, as XLA's)."""
    x, = args
    kind = _fft_type(params["fft_type"])
    lengths = tuple(params["fft_lengths"])
    axes = tuple(range(-len(lengths), 0))
    if kind == "FFT":
        return [_fft.fftn(x, axes=axes)]
    if kind == "IFFT":
        return [_fft.ifftn(x, axes=axes)]
    if kind == "RFFT":
        return [_fft.rfftn(x, axes=axes)]
    return [_fft.irfftn(x, s=lengths, axes=axes)]


REWRITES = {"lu": lu, "triangular_solve": triangular_solve, "cholesky": cholesky, "qr": qr, "eigh": eigh,
            "svd": svd, "fft": fft, "tridiagonal_solve": tridiagonal_solve,
            "lu_pivots_to_permutation": lu_pivots_to_permutation}

__all__ = ["REWRITES"]
