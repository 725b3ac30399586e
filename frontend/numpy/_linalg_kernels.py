"""The factorizations and substitutions behind sprue.numpy.linalg, on arrays with any leading batch
dimensions (..., n, n). For float32 and float64 they are sprue.lax.linalg's primitives, which
lower to native routines sprue owns (C linked into the library: a C host links nothing else; a
first call compiles no unrolled blocks, ~0.1 s instead of seconds at n = 100). For other dtypes,
more batch dimensions than those routines take, or batch axes only run time can compare, they are
written over sprue's own primitives (the *_traced functions, also the reference of the tests):

- Blocks of BLOCK columns: the work is matrix products (dot_general, compiled to fast loops),
  and the only column-by-column loops run inside one BLOCK x BLOCK diagonal block, as LAPACK's
  blocked potrf/trsm/getrf do (Golub & Van Loan, Matrix Computations, 4th ed., 4.2.9, 3.2.11).
- A static size is unrolled over its blocks (each product of exactly the trailing matrix's size);
  a size known only at run time is padded to whole blocks with the identity and run in a
  fori_loop over blocks whose products cover the whole padded matrix with the finished part masked
  (about 3x the flops of the unrolled form, but one compilation for every size).
- Failures are values, as in JAX: a matrix that is not positive definite or is singular gives
  NaNs or infinities (the caller decides which), never an exception at run time.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from sprue import lax
from sprue.lax._rules import shapes_equal
from sprue.numpy import _creation, _nonzero, _reductions, _shape
from sprue.numpy._ufuncs import _funcs as _ufuncs

# the sprue.numpy functions sprue.numpy.linalg uses, by their public names (the package imports
# linalg, so linalg cannot import the package)
jnp = SimpleNamespace(
    abs=_ufuncs["absolute"], sqrt=_ufuncs["sqrt"], log=_ufuncs["log"], sign=_ufuncs["sign"], isfinite=_ufuncs["isfinite"], where=_nonzero.where,
    zeros=_creation.zeros, zeros_like=_creation.zeros_like, eye=_creation.eye, ones=_creation.ones,
    astype=_creation.astype, sum=_reductions.sum, prod=_reductions.prod, max=_reductions.max, min=_reductions.min, all=_reductions.all,
    argmax=_reductions.argmax,
    swapaxes=_shape.swapaxes, broadcast_to=_shape.broadcast_to, tril=_shape.tril, concatenate=_shape.concatenate,
    flip=_shape.flip, reshape=_shape.reshape, squeeze=_shape.squeeze, diagonal=_shape.diagonal)

BLOCK = 32   # measured: 512^2 Cholesky 1.25 ms at 32, 1.70 at 48, 2.25 at 64, 8.4 at 128, 4.3 at 16


def mT(x):
    """The matrix transpose of the last two axes."""
    return jnp.swapaxes(x, -1, -2)


def _static(*sizes) -> bool:
    return all(isinstance(s, int) for s in sizes)


def _slice(x, r0, c0, nr, nc):
    """x[..., r0:r0+nr, c0:c0+nc] at traced starts (batch axes whole)."""
    batch = tuple(x.shape[:-2])
    return lax.dynamic_slice(x, (0,) * len(batch) + (r0, c0), batch + (nr, nc))


def _update(x, u, r0, c0):
    return lax.dynamic_update_slice(x, u, (0,) * (x.ndim - 2) + (r0, c0))


def _iota(shape, axis: int):
    """An index grid made by the iota primitive, not numpy.arange: a numpy array would be a constant
    of the custom_jvp functions of linalg.py, which keep such constants in their call_jaxpr, and
    sprue.save cannot write a nested jaxpr's constants."""
    return lax.broadcasted_iota(np.int64, tuple(shape), axis)


def _arange(n):
    return _iota((n,), 0)


def _index_column(n):
    """[[0], [1], ..., [n-1]]: row numbers, for masks."""
    return _iota((n, 1), 0)


def _index_row(n):
    return _iota((1, n), 1)


def take_along(x, indices, axis: int):
    """numpy.take_along_axis(x, indices, axis) (indices broadcast against x's other axes), its
    other axes' index grids made by iota (see _iota)."""
    nd = x.ndim
    axis = axis % nd
    grids = tuple(indices if d == axis else _iota([x.shape[d] if k == d else 1 for k in range(nd)], d)
                  for d in range(nd))
    return x[grids]


# ---- one diagonal block, column by column -------------------------------------------------------

def cholesky_unblocked(a):
    """Lower L with L L^T = a, left-looking: column j is a[:, j] minus L (whose columns >= j are
    still zero) times L's row j, scaled by the square root of its diagonal entry. Reads a's lower
    triangle only."""
    b = a.shape[-1]
    rows = _index_column(b)

    def column(j, L):
        v = _slice(a, 0, j, b, 1) - L @ mT(_slice(L, j, 0, 1, b))
        d = _slice(v, j, 0, 1, 1)
        return _update(L, jnp.where(rows >= j, v / jnp.sqrt(d), 0), 0, j)
    return lax.fori_loop(0, b, column, jnp.zeros_like(a))


def lower_solve_unblocked(L, rhs):
    """X with L X = rhs for a lower triangular L (..., b, b), row by row (rows of X not yet solved
    are zero, so L's whole row times X is the sum over the solved ones)."""
    b = L.shape[-1]
    m = rhs.shape[-1]

    def row(i, X):
        r = _slice(rhs, i, 0, 1, m) - _slice(L, i, 0, 1, b) @ X
        return _update(X, r / _slice(L, i, i, 1, 1), i, 0)
    return lax.fori_loop(0, b, row, jnp.zeros(tuple(L.shape[:-2]) + (b, m), rhs.dtype))


def _lower_inverse(L):
    b = L.shape[-1]
    return lower_solve_unblocked(L, jnp.broadcast_to(jnp.eye(b, dtype=L.dtype), L.shape))


# ---- padding a run-time size to whole blocks -----------------------------------------------------

def _padded(a, npad, diagonal: bool):
    """a (..., n, k) in the top-left of a (..., npad, npad or k) array: zeros elsewhere, and ones on
    the padding's diagonal if `diagonal` (so that the padded matrix factors into the padded factor)."""
    batch = tuple(a.shape[:-2])
    if diagonal:
        base = jnp.broadcast_to(jnp.eye(npad, dtype=a.dtype), batch + (npad, npad))
    else:
        base = jnp.zeros(batch + (npad, a.shape[-1]), a.dtype)
    return _update(base, a, 0, 0)


def _blocks(n):
    nb = (n + BLOCK - 1) // BLOCK
    return nb, nb * BLOCK


# ---- Cholesky ----------------------------------------------------------------------------------

def _cholesky_unrolled(a):
    """Right-looking blocked Cholesky of a static size: factor the diagonal block, solve the panel
    below it (a product with the block's inverse), subtract the panel's outer product from the
    trailing matrix (one matmul), continue on the trailing matrix."""
    n = a.shape[-1]
    batch = tuple(a.shape[:-2])
    trailing, panels = a, []
    for k0 in range(0, n, BLOCK):
        bs = min(BLOCK, n - k0)
        lkk = cholesky_unblocked(trailing[..., :bs, :bs])
        panel = lkk
        if k0 + bs < n:
            l21 = trailing[..., bs:, :bs] @ mT(_lower_inverse(lkk))
            trailing = trailing[..., bs:, bs:] - l21 @ mT(l21)
            panel = jnp.concatenate([lkk, l21], axis=-2)
        if k0:
            panel = jnp.concatenate([jnp.zeros(batch + (k0, bs), a.dtype), panel], axis=-2)
        panels.append(panel)
    return panels[0] if len(panels) == 1 else jnp.concatenate(panels, axis=-1)


def _cholesky_looped(a):
    """The same for a run-time size: the padded matrix, a loop over its blocks; each trailing update
    is the product of the whole panel (rows of the finished part masked to zero)."""
    n = a.shape[-1]
    nb, npad = _blocks(n)
    rows = _index_column(npad)

    def block(k, m):
        k0 = k * BLOCK
        lkk = cholesky_unblocked(_slice(m, k0, k0, BLOCK, BLOCK))
        l21 = jnp.where(rows >= k0 + BLOCK, _slice(m, 0, k0, npad, BLOCK) @ mT(_lower_inverse(lkk)), 0)
        m = m - l21 @ mT(l21)
        return _update(m, _update(l21, lkk, k0, 0), 0, k0)
    m = lax.fori_loop(0, nb, block, _padded(a, npad, True))
    return jnp.tril(_slice(m, 0, 0, n, n))


def _native(*xs) -> bool:
    """Whether sprue.lax.linalg's primitives take these operands: float32 or float64, of at most
    MAX_RANK dimensions, with batch axes of one shape (provably: else the traced kernels, whose
    broadcasting is checked at run time)."""
    first = xs[0]
    return (np.dtype(first.dtype) in lax.linalg.NATIVE_DTYPES and first.ndim <= lax.linalg.MAX_RANK
            and all(x.dtype == first.dtype and x.ndim == first.ndim and shapes_equal(x.shape[:-2], first.shape[:-2])
                    for x in xs))


def cholesky(a):
    """Lower L with L L^T = a (a's lower triangle read); NaNs where a is not positive definite."""
    return lax.linalg_cholesky(a) if _native(a) else cholesky_traced(a)


def cholesky_traced(a):
    n = a.shape[-1]
    if _static(n):
        return _cholesky_unrolled(a) if n else a
    return _cholesky_looped(a)


# ---- triangular solve --------------------------------------------------------------------------

def lower_solve(L, rhs, unit_diagonal: bool = False):
    """X with L X = rhs, L (..., n, n) lower triangular (its upper triangle ignored; with
    unit_diagonal its diagonal too), rhs (..., n, m) with the same batch axes."""
    if _native(L, rhs):
        return lax.linalg_triangular_solve(L, rhs, lower=True, unit_diagonal=unit_diagonal)
    return lower_solve_traced(L, rhs, unit_diagonal)


def lower_solve_traced(L, rhs, unit_diagonal: bool = False):
    """lower_solve over sprue's primitives. Blocked forward
    substitution: each block of rows is rhs's block minus L's block row times the solved rows (a
    matmul), then solved against the diagonal block."""
    n, m = L.shape[-1], rhs.shape[-1]
    L = jnp.tril(L, -1) + jnp.eye(n, dtype=L.dtype) if unit_diagonal else jnp.tril(L)
    if _static(n) and n <= BLOCK:
        return lower_solve_unblocked(L, rhs)
    nb, npad = _blocks(n)
    lp, bp = _padded(L, npad, True), _padded(rhs, npad, False)

    def block(k, x):
        k0 = k * BLOCK
        r = _slice(bp, k0, 0, BLOCK, m) - _slice(lp, k0, 0, BLOCK, npad) @ x
        return _update(x, lower_solve_unblocked(_slice(lp, k0, k0, BLOCK, BLOCK), r), k0, 0)
    x = lax.fori_loop(0, nb, block, jnp.zeros_like(bp))
    return _slice(x, 0, 0, n, m)


# ---- LU with partial pivoting ------------------------------------------------------------------

def _select_row(x, is_row):
    """The row of x (..., N, k) where is_row (..., N, 1) holds (exactly: the others are not added)."""
    return jnp.sum(jnp.where(is_row, x, 0), axis=-2, keepdims=True)


def _pivot_magnitude(x):
    """What LAPACK's getrf compares to choose a pivot: |x|, for complex x |re x| + |im x| (its icamax)."""
    if np.dtype(x.dtype).kind == "c":
        return jnp.abs(lax.real(x)) + jnp.abs(lax.imag(x))
    return jnp.abs(x)


def _panel_lu(panel, perm, k0):
    """LU of the columns k0:k0+BLOCK of the padded matrix (panel (..., N, BLOCK), its rows < k0
    finished), column by column: the largest |entry| at or below the diagonal is swapped up (its
    row of the panel and its entry of perm), the multipliers stored below the pivot, and the rows
    below updated by a rank-1 product. Returns the panel, perm and the number of swaps made."""
    n, b = panel.shape[-2], panel.shape[-1]
    rows, cols = _index_column(n), _index_row(b)

    def column(j, carry):
        p, perm, swaps = carry
        r = k0 + j
        col = _slice(p, 0, j, n, 1)
        pivot_row = jnp.argmax(jnp.where(rows >= r, _pivot_magnitude(col), -1), axis=-2, keepdims=True)
        is_r, is_p = rows == r, rows == pivot_row
        p = jnp.where(is_r, _select_row(p, is_p), jnp.where(is_p, _select_row(p, is_r), p))
        pr, pp = perm[..., None], _select_row(perm[..., None], is_p)
        perm = jnp.where(is_r, pp, jnp.where(is_p, _select_row(pr, is_r), pr))[..., 0]
        swaps = swaps + (pivot_row[..., 0, 0] != r)
        col = _slice(p, 0, j, n, 1)
        multipliers = jnp.where(rows > r, col / _slice(p, r, j, 1, 1), 0)
        p = p - multipliers * jnp.where(cols > j, _slice(p, r, 0, 1, b), 0)
        return jnp.where((rows > r) & (cols == j), multipliers, p), perm, swaps
    zero = jnp.zeros(tuple(panel.shape[:-2]), dtype=np.int64)
    return lax.fori_loop(0, b, column, (panel, perm, zero))


def lu(a):
    """P a = L U with partial pivoting (LAPACK's getrf, right-looking by blocks): returns L and U
    packed in one matrix (L's unit diagonal implied), perm (a's row perm[i] is row i of P a) and
    the number of row swaps (the permutation's parity). A singular a gives a zero on U's diagonal
    (and infinities or NaNs after it)."""
    return lax.linalg_lu(a) if _native(a) else lu_traced(a)


def lu_traced(a):
    return _lu_unrolled(a) if _static(a.shape[-1]) else _lu_looped(a)


def _unit_lower(l11):
    b = l11.shape[-1]
    return jnp.tril(l11, -1) + jnp.eye(b, dtype=l11.dtype)


def _rows_taken(x, rows):
    """x[..., rows, :] (an empty x as it is: sprue's gather of a zero-size operand does not verify)."""
    return take_along(x, rows[..., None], -2) if x.shape[-1] else x


def _lu_unrolled(a):
    """Static size: the rows not yet finished (their L part `left`, their trailing part `trailing`)
    shrink by one block per step; a block's panel is factored with pivoting, its swaps applied to
    those rows, U's block row solved from the panel's unit lower block, and the trailing matrix
    updated by one matmul (the Schur complement)."""
    n = a.shape[-1]
    batch = tuple(a.shape[:-2])
    left, trailing = a[..., :, :0], a
    perm = jnp.broadcast_to(_arange(n), batch + (n,))
    swaps = jnp.zeros(batch, dtype=np.int64)
    rows, perms = [], []
    for k0 in range(0, n, BLOCK):
        m, bs = n - k0, min(BLOCK, n - k0)
        panel, local, s = _panel_lu(trailing[..., :bs], jnp.broadcast_to(_arange(m), batch + (m,)), 0)
        swaps = swaps + s
        perm = take_along(perm, local, -1)
        left, right = _rows_taken(left, local), _rows_taken(trailing[..., bs:], local)
        u12 = lower_solve_unblocked(_unit_lower(panel[..., :bs, :]), right[..., :bs, :])
        rows.append(jnp.concatenate([left[..., :bs, :], panel[..., :bs, :], u12], axis=-1))
        perms.append(perm[..., :bs])
        l21 = panel[..., bs:, :]
        left = jnp.concatenate([left[..., bs:, :], l21], axis=-1)
        trailing, perm = right[..., bs:, :] - l21 @ u12, perm[..., bs:]
    return jnp.concatenate(rows, axis=-2), jnp.concatenate(perms, axis=-1), swaps


def _lu_looped(a):
    """Run-time size: the padded matrix, a loop over its blocks (swaps applied to whole rows, the
    Schur complement a product over the padded matrix with the finished part masked)."""
    n = a.shape[-1]
    batch = tuple(a.shape[:-2])
    nb, npad = _blocks(n)
    rows, cols = _index_column(npad), _index_row(npad)
    unit = jnp.eye(BLOCK, dtype=a.dtype)
    strict = jnp.tril(jnp.ones((BLOCK, BLOCK), dtype=a.dtype), -1)

    def block(k, carry):
        m, perm, swaps = carry
        k0, k1 = k * BLOCK, k * BLOCK + BLOCK
        panel, new_perm, s = _panel_lu(_slice(m, 0, k0, npad, BLOCK), _arange(npad) + jnp.zeros(batch + (1,),
                                                                                                    np.int64), k0)
        m = _update(take_along(m, new_perm[..., None], -2), panel, 0, k0)
        perm = take_along(perm, new_perm, -1)
        l11 = _slice(panel, k0, 0, BLOCK, BLOCK) * strict + unit
        row_block = _slice(m, k0, 0, BLOCK, npad)
        u12 = jnp.where(cols >= k1, lower_solve_unblocked(l11, row_block), 0)
        m = _update(m, jnp.where(cols >= k1, u12, row_block), k0, 0)
        m = m - jnp.where(rows >= k1, panel, 0) @ u12
        return m, perm, swaps + s
    perm0 = jnp.broadcast_to(_arange(npad), batch + (npad,))
    m, perm, swaps = lax.fori_loop(0, nb, block, (_padded(a, npad, True), perm0,
                                                  jnp.zeros(batch, dtype=np.int64)))
    return _slice(m, 0, 0, n, n), perm[..., :n], swaps


def upper_solve(U, rhs):
    """U^-1 rhs for an upper triangular U (traced: the lower solve with rows and columns reversed)."""
    if _native(U, rhs):
        return lax.linalg_triangular_solve(U, rhs, lower=False)
    return jnp.flip(lower_solve(jnp.flip(U, axis=(-2, -1)), jnp.flip(rhs, axis=-2)), axis=-2)


def lu_solve(packed, perm, rhs):
    """a^-1 rhs from a's LU (rhs (..., n, k) with a's batch axes)."""
    if packed.shape[-1] == 0:   # (nothing to solve; a gather of an empty axis does not verify)
        return rhs
    y = lower_solve(packed, take_along(rhs, perm[..., None], -2), unit_diagonal=True)
    return upper_solve(packed, y)
