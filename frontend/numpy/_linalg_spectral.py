"""The orthogonal factorizations behind sprue.numpy.linalg's qr, eigh and svd, written over sprue's
own primitives (no LAPACK), on real arrays with any leading batch dimensions (..., m, n):

- QR: Householder reflections, column by column, with LAPACK's conventions (dgeqrf/dlarfg: the
  reflector I - tau v v^T with v[j] = 1 maps the column onto beta e_j, beta = -sign(alpha) |x|,
  and tau = 0 where the column below the diagonal is already zero), so R and Q match numpy's to
  rounding. Q is accumulated backward from the reflectors (dorgqr).
- eigh: cyclic Jacobi (Golub & Van Loan, Matrix Computations, 4th ed., 8.5) in the parallel
  round-robin order of Brent & Luk (1985): each round rotates n/2 disjoint pairs at once, as
  whole-row and whole-column operations on the two halves of the matrix, then moves the indices
  one step round the circle (n - 1 rounds meet every pair once: a sweep). Sweeps repeat in a
  while_loop until the off-diagonal part is at rounding level (or a fixed number of sweeps).
- svd: one-sided Jacobi (Hestenes 1958; Demmel & Veselic 1992: singular values to high relative
  accuracy, so ill-conditioned matrices keep their small ones), the same rounds over column pairs
  of W = A V; singular values are W's column norms, U comes from a Householder QR of W (so U is
  orthonormal and complete even where singular values are zero).

Every loop is a fori_loop/while_loop over whole batched arrays (a batch converges together), so
vmap, static and run-time batch sizes work unchanged.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from sprue import lax
from sprue.base.errors import ShapeError
from sprue.numpy import _creation, _reductions, _shape, _sorting
from sprue.numpy import _dims as _d
from sprue.numpy import _linalg_kernels as K
from sprue.numpy._avals import loc
from sprue.numpy._linalg_kernels import _index_column, _index_row, _slice, mT, take_along
from sprue.numpy._ufuncs import _funcs as _ufuncs

# linalg_kernels' names and a few more (linalg.py uses this namespace too)
jnp = SimpleNamespace(**vars(K.jnp), full=_creation.full, maximum=_ufuncs["maximum"], isnan=_ufuncs["isnan"],
                      logical_and=_ufuncs["logical_and"], logical_or=_ufuncs["logical_or"], logical_not=_ufuncs["logical_not"], any=_reductions.any,
                      transpose=_shape.transpose, expand_dims=_shape.expand_dims, triu=_shape.triu,
                      argsort=_sorting.argsort)

MAX_SWEEPS = 30   # quadratic convergence takes 5-10 sweeps; this only bounds a pathological input


def _eps(dtype) -> float:
    return float(np.finfo(dtype).eps)


def _size_as(n, dtype):
    """A size as a number of dtype (a traced one for a size known only at run time)."""
    return np.asarray(n, dtype) if isinstance(n, int) else jnp.astype(_d.value(n), dtype)


# ---- Householder QR ----------------------------------------------------------------------------

def householder(a):
    """LAPACK's dgeqr2 on a (..., m, n): R (..., m, n) upper triangular, the reflectors' vectors V
    (..., m, k) (unit at the diagonal, zero above) and their taus (..., 1, k), k = min(m, n)."""
    m, n = a.shape[-2:]
    k = _d.dmin(m, n)
    rows, cols, kcols = _index_column(m), _index_row(n), _index_row(k)
    batch = tuple(a.shape[:-2])
    zero = np.asarray(0, a.dtype)

    def column(j, carry):
        r, vs, taus = carry
        x = _slice(r, 0, j, m, 1)
        below = rows > j
        alpha = _slice(r, j, j, 1, 1)
        sigma = jnp.sum(jnp.where(below, x * x, zero), axis=-2, keepdims=True)
        trivial = sigma == 0
        norm = jnp.sqrt(alpha * alpha + sigma)
        beta = jnp.where(trivial, alpha, jnp.where(alpha >= 0, -norm, norm))
        tau = jnp.where(trivial, zero, (beta - alpha) / jnp.where(trivial, 1, beta))
        scale = jnp.where(trivial, zero, 1 / jnp.where(trivial, 1, alpha - beta))
        v = jnp.where(below, x * scale, jnp.where(rows == j, np.asarray(1, a.dtype), zero))
        r = r - (tau * v) * (mT(v) @ r)
        # column j is exactly (R's column, beta, zeros): the product's rounding below is dropped
        r = jnp.where(cols == j, jnp.where(below, zero, jnp.where(rows == j, beta, r)), r)
        vs = jnp.where(kcols == j, v, vs)
        taus = jnp.where(kcols == j, tau, taus)
        return r, vs, taus
    init = (a, jnp.zeros(batch + (m, k), a.dtype), jnp.zeros(batch + (1, k), a.dtype))
    return lax.fori_loop(0, k, column, init)


def householder_q(vs, taus, ncols: int):
    """The first ncols columns of Q = H_0 H_1 ... H_{k-1} (dorg2r): the reflectors applied to the
    identity's columns, last first."""
    m, k = vs.shape[-2:]
    batch = tuple(vs.shape[:-2])
    kcols = _index_row(k)
    eye = jnp.broadcast_to(jnp.eye(m, ncols, dtype=vs.dtype), batch + (m, ncols))

    def reflect(i, q):
        j = k - 1 - i
        v = _slice(vs, 0, j, m, 1)
        tau = jnp.sum(jnp.where(kcols == j, taus, 0), axis=-1, keepdims=True)
        return q - (tau * v) * (mT(v) @ q)
    return lax.fori_loop(0, k, reflect, eye)


# Blocked (LAPACK's dgeqrf/dorgqr with the compact WY form of Schreiber & Van Loan 1989): a panel of
# BLOCK columns is factored column by column, its reflectors H_1 ... H_b are I - V T V^T (T upper
# triangular, dlarft's recurrence), and the trailing columns get them as three matrix products.

def _panel(r, k0, k):
    """Factors the BLOCK columns of r (..., m, N) from k0 (reflectors only for columns < k): the
    panel's R part, its V (..., m, BLOCK) and taus (..., 1, BLOCK)."""
    m, b = r.shape[-2], K.BLOCK
    rows, bcols = _index_column(m), _index_row(b)
    zero, one = np.asarray(0, r.dtype), np.asarray(1, r.dtype)
    batch = tuple(r.shape[:-2])

    def column(j, carry):
        p, vs, taus = carry
        jj = k0 + j
        x = _slice(p, 0, j, m, 1)
        below = rows > jj
        alpha = jnp.sum(jnp.where(rows == jj, x, zero), axis=-2, keepdims=True)
        sigma = jnp.sum(jnp.where(below, x * x, zero), axis=-2, keepdims=True)
        trivial = jnp.logical_or(sigma == 0, jj >= k)
        norm = jnp.sqrt(alpha * alpha + sigma)
        beta = jnp.where(trivial, alpha, jnp.where(alpha >= 0, -norm, norm))
        tau = jnp.where(trivial, zero, (beta - alpha) / jnp.where(trivial, 1, beta))
        scale = jnp.where(trivial, zero, 1 / jnp.where(trivial, 1, alpha - beta))
        v = jnp.where(below, x * scale, jnp.where(rows == jj, one, zero))
        v = jnp.where(jj < k, v, zero)
        p = p - (tau * v) * (mT(v) @ p)
        fixed = jnp.where(below, zero, jnp.where(rows == jj, beta, p))
        p = jnp.where(jnp.logical_and(bcols == j, jj < k), fixed, p)
        return p, jnp.where(bcols == j, v, vs), jnp.where(bcols == j, tau, taus)
    init = (_slice(r, 0, k0, m, b), jnp.zeros(batch + (m, b), r.dtype), jnp.zeros(batch + (1, b), r.dtype))
    return lax.fori_loop(0, b, column, init)


def _block_reflector(vs, taus):
    """T (..., b, b) with H_1 ... H_b = I - V T V^T (dlarft, forward, columnwise):
    T[:j, j] = -tau_j T[:j, :j] V[:, :j]^T v_j, T[j, j] = tau_j."""
    b = vs.shape[-1]
    brows, bcols = _index_column(b), _index_row(b)
    gram = mT(vs) @ vs

    def column(j, t):
        tau = jnp.sum(jnp.where(bcols == j, taus, 0), axis=-1, keepdims=True)
        w = jnp.where(brows < j, _slice(gram, 0, j, b, 1), 0)
        col = jnp.where(brows == j, tau, -tau * (t @ w))
        return jnp.where(bcols == j, col, t)
    return lax.fori_loop(0, b, column, jnp.zeros_like(gram))


def householder_blocked(a):
    """householder's (R, V, taus) by panels of BLOCK columns, plus the panels' T factors stacked
    (..., kp, BLOCK) and V padded to kp columns (kp: k rounded up to whole panels)."""
    m, n = a.shape[-2:]
    k, b = min(m, n), K.BLOCK
    nb = -(-k // b)
    kp = nb * b
    batch = tuple(a.shape[:-2])
    width = max(n, kp)
    r = a if width == n else jnp.concatenate([a, jnp.zeros(batch + (m, width - n), a.dtype)], axis=-1)
    cols = _index_row(width)

    def panel(i, carry):
        r, vs, taus, ts = carry
        k0 = i * b
        p, v, tau = _panel(r, k0, k)
        t = _block_reflector(v, tau)
        # the trailing columns: (H_1 ... H_b)^T r = r - V T^T V^T r
        r = jnp.where(cols >= k0 + b, r - v @ (mT(t) @ (mT(v) @ r)), r)
        return (K._update(r, p, 0, k0), K._update(vs, v, 0, k0), K._update(taus, tau, 0, k0),
                K._update(ts, t, k0, 0))
    init = (r, jnp.zeros(batch + (m, kp), a.dtype), jnp.zeros(batch + (1, kp), a.dtype),
            jnp.zeros(batch + (kp, b), a.dtype))
    r, vs, taus, ts = lax.fori_loop(0, nb, panel, init)
    return r[..., :n], vs, taus, ts


def householder_q_blocked(vs, ts, ncols: int):
    """Q's first ncols columns from the panels' (V, T): (I - V_1 T_1 V_1^T) ... applied to the
    identity's columns, last panel first."""
    m, kp = vs.shape[-2:]
    b = K.BLOCK
    nb = kp // b
    batch = tuple(vs.shape[:-2])
    eye = jnp.broadcast_to(jnp.eye(m, ncols, dtype=vs.dtype), batch + (m, ncols))

    def panel(i, q):
        k0 = (nb - 1 - i) * b
        v, t = _slice(vs, 0, k0, m, b), _slice(ts, k0, 0, b, b)
        return q - v @ (t @ (mT(v) @ q))
    return lax.fori_loop(0, nb, panel, eye)


def qr(a, mode: str):
    """(Q, R) with numpy's modes: 'reduced' Q (..., m, k), R (..., k, n); 'complete' Q (..., m, m),
    R (..., m, n); 'r' R (..., k, n) only (returned as (None, R))."""
    m, n = a.shape[-2:]
    k = _d.dmin(m, n)
    if isinstance(k, int) and k > K.BLOCK:   # static: by panels (3x faster at 512)
        r, vs, _, ts = householder_blocked(a)

        def q_of(ncols):
            return householder_q_blocked(vs, ts, ncols)
    else:
        r, vs, taus = householder(a)

        def q_of(ncols):
            return householder_q(vs, taus, ncols)
    if mode == "complete":
        return q_of(m), r
    r = _part(r, -2, 0, k)
    return (None if mode == "r" else q_of(k)), r


# ---- Jacobi rounds -----------------------------------------------------------------------------

def _rotation(app, aqq, apq):
    """cos and sin of the Jacobi rotation that zeroes apq of the symmetric [[app, apq], [apq, aqq]]
    (Rutishauser's formulas, Golub & Van Loan 8.5.2: the smaller angle, t = tan in [-1, 1])."""
    zero = apq == 0
    theta = (aqq - app) / (2 * jnp.where(zero, 1, apq))
    t = jnp.where(theta >= 0, 1, -1) / (jnp.abs(theta) + jnp.sqrt(1 + theta * theta))
    t = jnp.where(zero, 0, t)   # theta * theta overflowing gives t = 0: apq is below rounding then
    c = 1 / jnp.sqrt(1 + t * t)
    return c, t * c


def _round_robin(first, second, axis: int):
    """The halves' entries in the next round's order (Brent & Luk's circle: position 0 stays, the
    others move one step round first[1:], reversed second): first' = [first0, second0, first1 ..
    first(h-2)], second' = [second1 .. second(h-1), first(h-1)]; returned concatenated."""
    h = first.shape[axis]
    if h == 1:
        return jnp.concatenate([first, second], axis=axis)
    pieces = [_part(first, axis, 0, 1), _part(second, axis, 0, 1), _part(first, axis, 1, h - 2),
              _part(second, axis, 1, h - 1), _part(first, axis, h - 1, 1)]
    return jnp.concatenate([p for p in pieces if p.shape[axis] != 0], axis=axis)


def _rotate(first, second, c, s):
    return c * first - s * second, s * first + c * second


def _part(x, axis: int, start, size):
    """x's rows (axis -2) or columns (-1) start .. start+size (sizes may be known only at run time)."""
    m, n = x.shape[-2:]
    start = start if isinstance(start, int) else _d.value(start)
    return _slice(x, start, 0, size, n) if axis == -2 else _slice(x, 0, start, m, size)


def _halves(x, axis: int):
    h = x.shape[axis] // 2
    return _part(x, axis, 0, h), _part(x, axis, h, h)


def _pad_even(a, square: bool):
    """a with zero columns (and rows, if square) appended to an even count: decoupled indices, never
    rotated (their off-diagonal entries stay exactly zero). One for an odd static size; for a
    run-time one two or three, so that the halves have at least 2 entries whatever the size (the
    round-robin's pieces then have sizes >= 0)."""
    n = a.shape[-1]
    if isinstance(n, int):
        big = n + n % 2
    else:
        big = 2 * ((n + 2) // 2) + 2
    if isinstance(n, int) and big == n:
        return a
    batch, m = tuple(a.shape[:-2]), a.shape[-2]
    zeros = jnp.zeros(batch + ((big if square else m), big), a.dtype)
    return K._update(zeros, a, 0, 0)


def _order_without_padding(values, vectors, n, descending: bool):
    """The permutation (..., n) that sorts values (..., N) (ascending or descending), leaving out the
    padded indices (the columns of vectors with a 1 in a row >= n)."""
    key = values
    if not (isinstance(n, int) and vectors.shape[-1] == n):
        padded = jnp.any(jnp.where(_index_column(vectors.shape[-2]) >= _d.value(n), vectors == 1, False), axis=-2)
        key = jnp.where(padded, np.asarray(-np.inf if descending else np.inf, values.dtype), values)
    order = _sorting.argsort(key, axis=-1, descending=descending)
    return _slice(order[..., None, :], 0, 0, 1, n)[..., 0, :]


def _sweeps(body, init, done):
    """body (one sweep) repeated while not done(carry) and fewer than MAX_SWEEPS sweeps ran."""
    def cond(carry):
        return jnp.logical_and(carry[0] < MAX_SWEEPS, jnp.logical_not(done(carry[1:])))

    def step(carry):
        return (carry[0] + 1,) + tuple(body(carry[1:]))
    return lax.while_loop(cond, step, (np.int64(0),) + tuple(init))[1:]


# ---- eigh: two-sided cyclic Jacobi -------------------------------------------------------------

def _eigh_round(a, v):
    h = a.shape[-1] // 2
    d = jnp.diagonal(a, axis1=-2, axis2=-1)
    c, s = _rotation(d[..., :h], d[..., h:], jnp.diagonal(a[..., :h, h:], axis1=-2, axis2=-1))
    top, bot = _rotate(*_halves(a, -2), c[..., :, None], s[..., :, None])
    a = _round_robin(top, bot, -2)
    left, right = _rotate(*_halves(a, -1), c[..., None, :], s[..., None, :])
    vl, vr = _rotate(*_halves(v, -1), c[..., None, :], s[..., None, :])
    return _round_robin(left, right, -1), _round_robin(vl, vr, -1)


def eigh(a):
    """Eigenvalues ascending (..., n) and orthonormal eigenvectors as columns (..., n, n) of the
    symmetric a (both triangles read)."""
    n = a.shape[-1]
    batch = tuple(a.shape[:-2])
    if isinstance(n, int) and n == 0:
        return jnp.zeros(batch + (0,), a.dtype), a
    work = _pad_even(a, True)
    N = work.shape[-1]
    v = jnp.broadcast_to(jnp.eye(N, dtype=a.dtype), work.shape)
    fro2 = jnp.sum(work * work, axis=(-2, -1))
    tol2 = (_size_as(N, a.dtype) * np.asarray(_eps(a.dtype), a.dtype)) ** 2
    offdiagonal = 1 - jnp.eye(N, dtype=a.dtype)

    def sweep(carry):
        return lax.fori_loop(0, N - 1, lambda _, av: _eigh_round(*av), tuple(carry))

    def done(carry):
        off2 = jnp.sum((carry[0] * offdiagonal) ** 2, axis=(-2, -1))
        return jnp.all(off2 <= tol2 * fro2)
    work, v = _sweeps(sweep, (work, v), done)
    w = jnp.diagonal(work, axis1=-2, axis2=-1)
    order = _order_without_padding(w, v, n, descending=False)
    return take_along(w, order, -1), take_along(_part(v, -2, 0, n), order[..., None, :], -1)


# ---- svd: one-sided Jacobi ---------------------------------------------------------------------

def _svd_round(w, v, worst):
    left, right = _halves(w, -1)
    alpha, beta = jnp.sum(left * left, axis=-2), jnp.sum(right * right, axis=-2)
    gamma = jnp.sum(left * right, axis=-2)
    norms = jnp.sqrt(alpha) * jnp.sqrt(beta)
    cosine = jnp.abs(gamma) / jnp.where(norms == 0, 1, norms)
    worst = jnp.maximum(worst, jnp.max(cosine, axis=-1))
    c, s = _rotation(alpha, beta, gamma)
    c, s = c[..., None, :], s[..., None, :]
    wl, wr = _rotate(left, right, c, s)
    vl, vr = _rotate(*_halves(v, -1), c, s)
    return _round_robin(wl, wr, -1), _round_robin(vl, vr, -1), worst


def _tall_svd(a, full_matrices: bool, compute_uv: bool):
    m, n = a.shape[-2:]
    batch = tuple(a.shape[:-2])
    w = _pad_even(a, False)
    N = w.shape[-1]
    v = jnp.broadcast_to(jnp.eye(N, dtype=a.dtype), batch + (N, N))
    tol = _size_as(m, a.dtype) * np.asarray(_eps(a.dtype), a.dtype)
    start = jnp.full(batch, np.inf, a.dtype)

    def sweep(carry):
        w, v, _ = carry
        return lax.fori_loop(0, N - 1, lambda _, c: _svd_round(*c), (w, v, jnp.zeros_like(start)))
    w, v, _ = _sweeps(sweep, (w, v, start), lambda carry: jnp.all(carry[2] <= tol))
    s = jnp.sqrt(jnp.sum(w * w, axis=-2))
    order = _order_without_padding(s, v, n, descending=True)
    s, v = take_along(s, order, -1), take_along(_part(v, -2, 0, n), order[..., None, :], -1)
    if not compute_uv:
        return s, None, None
    # W = U diag(s) with orthogonal columns: U is the Q of W's QR, each column signed by R's diagonal
    q, r = qr(take_along(w, order[..., None, :], -1), "complete" if full_matrices else "reduced")
    d = jnp.diagonal(r, axis1=-2, axis2=-1)
    sign = jnp.where(d < 0, np.asarray(-1, a.dtype), np.asarray(1, a.dtype))[..., None, :]
    u = _part(q, -1, 0, n) * sign
    if full_matrices and not (isinstance(m, int) and isinstance(n, int) and m == n):
        u = jnp.concatenate([u, _part(q, -1, n, m - n)], axis=-1)
    return s, u, mT(v)


def svd(a, full_matrices: bool, compute_uv: bool):
    """(s, U, Vt) of a (..., m, n): s descending (..., k); U (..., m, k or m) and Vt (..., k or n, n)
    if compute_uv (else None), k = min(m, n). A wide a is the transpose of a tall one."""
    m, n = a.shape[-2:]
    tall = _d.le(n, m)
    if tall is None:
        raise ShapeError(f"sprue.numpy.linalg.svd: whether {a.aval.str_short() if hasattr(a, 'aval') else a.shape}"
                         f" has at least as many rows as columns depends on sizes known only at run time: give"
                         f" both the same size name, or one a static size{loc()}")
    if tall:
        return _tall_svd(a, full_matrices, compute_uv)
    s, u, vt = _tall_svd(mT(a), full_matrices, compute_uv)
    return s, (None if vt is None else mT(vt)), (None if u is None else mT(u))
