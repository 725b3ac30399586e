"""sprue's linear-algebra primitives: the factorizations and the triangular solve behind
sprue.numpy.linalg for float32 and float64 matrices, each over any leading batch dimensions and
sizes known only at run time. They lower to calls of native routines sprue owns (C linked into a
library only when it calls them: lowering/linalg_runtime.py, rules_linalg.py), as XLA's lower to
LAPACK; other dtypes keep sprue.numpy's kernels written over sprue's primitives
(_linalg_kernels.py). Names of their own (`linalg_*`): JAX's `lu`, `cholesky` and
`triangular_solve` in a loaded jaxpr mean JAX's (io/jaxpr_linalg.py reads them onto these).

- linalg_cholesky a: L with L L^T = a, a's lower triangle read, L's upper triangle zero; a matrix
  that is not positive definite gives NaNs (all of its factor), as JAX gives LAPACK's failure.
- linalg_lu a: (packed, perm, swaps): P a = L U with partial pivoting (LAPACK's getrf: the first
  largest |entry| of a column is the pivot; a zero pivot leaves its column unscaled), L (unit
  diagonal implied) and U packed in one matrix, perm (int64: a's row perm[i] is row i of P a), the
  number of row swaps (int64, the permutation's parity).
- linalg_triangular_solve[lower transpose_a unit_diagonal] a b: x with op(a) x = b, op(a) = a or
  a^T, a (..., n, n) triangular (the other triangle, and the diagonal when unit_diagonal, not
  read), b (..., n, m) with the same batch dimensions.

Derivatives: sprue.numpy.linalg differentiates its functions by custom_jvp rules (JAX's), whose
tangents are triangular solves: the solve's reverse rule (in b: the solve with op(a)^T) is what
grad needs; the forward rules below (JAX's rules of lax.linalg) serve derivatives of those rules.
"""
from __future__ import annotations

import numpy as np

from sprue.base.errors import SprueTypeError, SprueValueError
from sprue.interp.ad_util import (
    aval_of,
    batch_rules,
    cost_rules,
    instantiate,
    is_zero,
    jvp_rules,
    not_transformable,
    vjp_rules,
    zero_of,
)
from sprue.interp.batching import batched_all
from sprue.ir.core import ShapedArray
from sprue.lax import elementwise as _ew
from sprue.lax import structural as _st
from sprue.lax._rules import define, require_equal
from sprue.lax.dot import dot_general

__all__ = ["linalg_cholesky", "linalg_cholesky_p", "linalg_lu", "linalg_lu_p", "linalg_triangular_solve",
           "linalg_triangular_solve_p"]

NATIVE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
MAX_RANK = 8   # up to 6 batch dimensions (the native routines are defined for each rank)


def _square_matrices(name: str, a: ShapedArray) -> None:
    if a.dtype not in NATIVE_DTYPES:
        raise SprueTypeError(f"{name} takes float32 or float64 matrices, got {a.str_short()}")
    if not 2 <= a.ndim <= MAX_RANK:
        raise SprueValueError(f"{name} takes matrices (..., n, n) of at most {MAX_RANK - 2} batch dimensions, got"
                              f" {a.str_short()}")
    require_equal(a.shape[-2], a.shape[-1], f"{name} takes square matrices, got {a.str_short()}")


# ---- helpers of the rules (sprue.lax only: this layer is below sprue.numpy) ----------------------

def _mT(x):
    nd = aval_of(x).ndim
    return _st.transpose(x, (*range(nd - 2), nd - 1, nd - 2))


def _matmul(x, y):
    nd = aval_of(x).ndim
    batch = tuple(range(nd - 2))
    return dot_general(x, y, (((nd - 1,), (nd - 2,)), (batch, batch)))


def _zeros(shape, dtype):
    return _st.broadcast_in_dim(np.zeros((), dtype), tuple(shape), ())


def _triangle(x, lower: bool, diagonal: bool):
    """x's lower (or upper) triangle, with or without its diagonal; zeros elsewhere."""
    av = aval_of(x)
    rows = _st.broadcasted_iota(np.int64, av.shape, av.ndim - 2)
    cols = _st.broadcasted_iota(np.int64, av.shape, av.ndim - 1)
    compare = (_ew.ge if diagonal else _ew.gt) if lower else (_ew.le if diagonal else _ew.lt)
    return _ew.select(compare(rows, cols), x, _zeros(av.shape, av.dtype))


def _identity_like(x):
    av = aval_of(x)
    rows = _st.broadcasted_iota(np.int64, av.shape, av.ndim - 2)
    cols = _st.broadcasted_iota(np.int64, av.shape, av.ndim - 1)
    return _ew.convert_element_type(_ew.eq(rows, cols), av.dtype)


# ---- linalg_triangular_solve ---------------------------------------------------------------------

def _triangular_solve_rule(a, b, *, lower, transpose_a, unit_diagonal):
    name = "linalg_triangular_solve"
    _square_matrices(name, a)
    if b.dtype != a.dtype or b.ndim != a.ndim:
        raise SprueValueError(f"{name} takes a right-hand side (..., n, m) of the matrix's dtype and batch axes,"
                              f" got {a.str_short()} and {b.str_short()}")
    for d, e in zip((*a.shape[:-2], a.shape[-1]), b.shape[:-1]):
        require_equal(d, e, f"{name}: {a.str_short()} and right-hand side {b.str_short()} do not match")
    return ShapedArray(b.shape, b.dtype)


def _triangular_solve_impl(a, b, *, lower, transpose_a, unit_diagonal):
    t = np.tril(a) if lower else np.triu(a)
    n = t.shape[-1]
    if unit_diagonal:
        t = t.copy()
        t[..., np.arange(n), np.arange(n)] = 1
    if transpose_a:
        t, lower = np.swapaxes(t, -1, -2), not lower
    x = np.zeros(np.shape(b), t.dtype)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for i in (range(n) if lower else reversed(range(n))):
            # (rows not yet solved are zero: the whole row of t times x is the sum over the solved)
            r = b[..., i, :] - np.einsum("...k,...km->...m", t[..., i, :], x)
            x[..., i, :] = r / t[..., i, i, None]
    return x


linalg_triangular_solve_p = define("linalg_triangular_solve", _triangular_solve_rule, _triangular_solve_impl)


def linalg_triangular_solve(a, b, *, lower: bool, transpose_a: bool = False, unit_diagonal: bool = False):
    """x with op(a) x = b (op(a) = a^T if transpose_a), a (..., n, n) lower or upper triangular,
    b (..., n, m) with a's batch dimensions."""
    return linalg_triangular_solve_p.bind(a, b, lower=bool(lower), transpose_a=bool(transpose_a),
                                          unit_diagonal=bool(unit_diagonal))


def _read_triangle(x, lower, unit_diagonal):
    """The part of a matrix the solve reads."""
    return _triangle(x, lower, not unit_diagonal)


def _triangular_solve_jvp(primals, tangents, **params):
    """dx = op(a)^-1 (db - op(da) x) (JAX's _triangular_solve_jvp_rule_a and the rule for b)."""
    (a, b), (da, db) = primals, tangents
    x = linalg_triangular_solve_p.bind(a, b, **params)
    if is_zero(da) and is_zero(db):
        return x, zero_of(x)
    rhs = instantiate(db, b)
    if not is_zero(da):
        dop = _read_triangle(da, params["lower"], params["unit_diagonal"])
        rhs = _ew.sub(rhs, _matmul(_mT(dop) if params["transpose_a"] else dop, x))
    return x, linalg_triangular_solve_p.bind(a, rhs, **params)


def _triangular_solve_vjp(cts, primals, outs, *, lower, transpose_a, unit_diagonal):
    """The solve is linear in b: b's cotangent is the solve with op(a)^T, and a's (from
    dx = -op(a)^-1 op(da) x) is -(ct_b x^T), transposed for a^T, in the triangle read."""
    (ct,), (a, _), (x,) = cts, primals, outs
    if is_zero(ct):
        return [None, None]
    ct_b = linalg_triangular_solve_p.bind(a, ct, lower=lower, transpose_a=not transpose_a,
                                          unit_diagonal=unit_diagonal)
    outer = _matmul(x, _mT(ct_b)) if transpose_a else _matmul(ct_b, _mT(x))
    return [_ew.neg(_read_triangle(outer, lower, unit_diagonal)), ct_b]


def _triangular_solve_batch(args, dims, **params):
    return linalg_triangular_solve_p.bind(*batched_all(args, dims), **params), 0


def _triangular_solve_cost(in_avals, out_avals, **params):
    a, b = in_avals
    return int(np.prod(b.shape)) * int(a.shape[-1])   # n^2 m per matrix: a multiply and an add per term, halved


jvp_rules[linalg_triangular_solve_p], vjp_rules[linalg_triangular_solve_p] = _triangular_solve_jvp, _triangular_solve_vjp
batch_rules[linalg_triangular_solve_p] = _triangular_solve_batch
cost_rules[linalg_triangular_solve_p] = _triangular_solve_cost


# ---- linalg_cholesky ---------------------------------------------------------------------------

def _cholesky_rule(a):
    _square_matrices("linalg_cholesky", a)
    return ShapedArray(a.shape, a.dtype)


def _cholesky_impl(a):
    a = np.asarray(a)
    symmetric = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)   # (the lower triangle is what is read)
    out = np.empty_like(a)
    for index in np.ndindex(a.shape[:-2]):
        try:
            out[index] = np.linalg.cholesky(symmetric[index])
        except np.linalg.LinAlgError:
            out[index] = np.nan
    return out


linalg_cholesky_p = define("linalg_cholesky", _cholesky_rule, _cholesky_impl)


def linalg_cholesky(a):
    """L lower triangular with L L^T = a (a's lower triangle read); NaNs where a is not positive definite."""
    return linalg_cholesky_p.bind(a)


def _cholesky_jvp(primals, tangents):
    """JAX's _cholesky_jvp_rule (Murray, Differentiation of the Cholesky decomposition,
    arXiv:1602.07527): dL = L phi(L^-1 da L^-T), phi the lower triangle with its diagonal halved;
    da symmetric from its lower triangle, the part read."""
    (a,), (da,) = primals, tangents
    L = linalg_cholesky_p.bind(a)
    if is_zero(da):
        return L, zero_of(L)
    lower = _triangle(da, True, True)
    sym = _ew.add(lower, _mT(_triangle(da, True, False)))
    y = linalg_triangular_solve(L, sym, lower=True)
    z = linalg_triangular_solve(L, _mT(y), lower=True)
    half = _ew.mul(_identity_like(z), np.asarray(0.5, aval_of(z).dtype))
    phi = _ew.sub(_triangle(z, True, True), _ew.mul(half, z))
    return L, _matmul(L, phi)


def _cholesky_vjp(cts, primals, outs):
    raise not_transformable("differentiable in reverse mode (sprue.numpy.linalg.cholesky is: it differentiates"
                            " the factor by its custom_jvp rule)", linalg_cholesky_p)


def _single_batch(p):
    def rule(args, dims, **params):
        out = p.bind(*args, **params)
        return out, ([0] * len(out) if p.multiple_results else 0)
    return rule


jvp_rules[linalg_cholesky_p], vjp_rules[linalg_cholesky_p] = _cholesky_jvp, _cholesky_vjp
batch_rules[linalg_cholesky_p] = _single_batch(linalg_cholesky_p)
cost_rules[linalg_cholesky_p] = lambda in_avals, out_avals: int(np.prod(in_avals[0].shape)) * int(
    in_avals[0].shape[-1]) // 3


# ---- linalg_lu ---------------------------------------------------------------------------------

def _lu_rule(a):
    _square_matrices("linalg_lu", a)
    return [ShapedArray(a.shape, a.dtype), ShapedArray(a.shape[:-1], np.int64), ShapedArray(a.shape[:-2], np.int64)]


def _lu_impl(a):
    packed = np.array(a, copy=True)
    n, batch = packed.shape[-1], packed.shape[:-2]
    perm = np.array(np.broadcast_to(np.arange(n, dtype=np.int64), batch + (n,)))
    swaps = np.zeros(batch, np.int64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for index in np.ndindex(batch):
            m, p = packed[index], perm[index]
            for j in range(n):
                pivot = j + int(np.argmax(np.abs(m[j:, j])))
                if pivot != j:
                    m[[j, pivot]], p[[j, pivot]] = m[[pivot, j]], p[[pivot, j]]
                    swaps[index] += 1
                if m[j, j] != 0:
                    m[j + 1:, j] /= m[j, j]
                m[j + 1:, j + 1:] -= np.outer(m[j + 1:, j], m[j, j + 1:])
    return [packed, perm, swaps]


linalg_lu_p = define("linalg_lu", _lu_rule, _lu_impl, multiple_results=True)


def linalg_lu(a):
    """(packed L and U, perm, swaps) of P a = L U with partial pivoting (see the module's docstring)."""
    return tuple(linalg_lu_p.bind(a))


def _lu_jvp(primals, tangents):
    """JAX's _lu_jvp_rule (square matrices): with x = P da, l^-1 x u^-1 = lau, dL = l tril(lau, -1),
    dU = triu(lau) u; the permutation and the swap count have no tangent."""
    (a,), (da,) = primals, tangents
    packed, perm, swaps = linalg_lu_p.bind(a)
    outs = [packed, perm, swaps]
    if is_zero(da):
        return outs, [zero_of(o) for o in outs]
    av = aval_of(a)
    cols = _st.broadcasted_iota(np.int64, av.shape, av.ndim - 1)
    rows_of = _st.broadcast_in_dim(perm, av.shape, tuple(range(av.ndim - 1)))
    permutation = _ew.convert_element_type(_ew.eq(rows_of, cols), av.dtype)   # P[i, j] = (perm[i] == j)
    x = _matmul(permutation, da)
    la = linalg_triangular_solve(packed, x, lower=True, unit_diagonal=True)
    lau = _mT(linalg_triangular_solve(packed, _mT(la), lower=False, transpose_a=True))
    l_unit = _ew.add(_triangle(packed, True, False), _identity_like(packed))
    dpacked = _ew.add(_matmul(l_unit, _triangle(lau, True, False)), _matmul(_triangle(lau, False, True),
                                                                          _triangle(packed, False, True)))
    return outs, [dpacked, zero_of(perm), zero_of(swaps)]


def _lu_vjp(cts, primals, outs):
    raise not_transformable("differentiable in reverse mode (sprue.numpy.linalg's functions are: they differentiate"
                            " the factorization by custom_jvp rules)", linalg_lu_p)


jvp_rules[linalg_lu_p], vjp_rules[linalg_lu_p] = _lu_jvp, _lu_vjp
batch_rules[linalg_lu_p] = _single_batch(linalg_lu_p)
cost_rules[linalg_lu_p] = lambda in_avals, out_avals: 2 * int(np.prod(in_avals[0].shape)) * int(
    in_avals[0].shape[-1]) // 3
