"""sprue.numpy programs on dynamically-shaped arrays, for the eager check against numpy
(tests/frontend/numpy/test_dynamic_numpy.py) and the compiled path
(tests/e2e/test_dynamic_numpy_compiled.py: `sprue.qjit(case.fn, abstracted_axes=case.axes)`).

Each case: a name, `fn` (written over sprue.numpy), `make_args(n)` (the arguments at size n),
`axes` (qjit's abstracted_axes: which axes of the array arguments are dynamic), and `ref`, the
same program over numpy itself. Python int arguments are traced as i64 scalars (dimensions when
used as sizes). At some sizes numpy raises (operands that do not broadcast, an index out of
bounds): sprue must then raise SprueValueError from a run-time check.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import numpy as np

import sprue.numpy as jnp
from sprue.base.pytree import tree_flatten

SIZES = (0, 1, 2, 5)


class Case(NamedTuple):
    name: str
    fn: Callable
    make_args: Callable[[int], tuple]
    axes: Any
    ref: Callable


def _rng(n: int, *shape, seed: int = 0, dtype=np.float64):
    r = np.random.default_rng(seed * 1000 + n)
    x = r.standard_normal(shape or (n,))
    return x.astype(dtype)


def vec(n):            # one f64[n]
    return (_rng(n, n),)


def vec_i(n):          # one i64[n]
    return (np.random.default_rng(n).integers(-5, 5, n),)


def mat(n):            # one f64[n, 3]
    return (_rng(n, n, 3),)


def square(n):         # one f64[n, n]
    return (_rng(n, n, n),)


def two_vecs(n):       # f64[n], f64[n] (one dimension "n")
    return _rng(n, n), _rng(n, n, seed=1)


def vec_and_3(n):      # f64[n] against a static f64[3]
    return _rng(n, n), _rng(3, 3, seed=1)


def vec_and_mat(n):    # f64[n] and f64[n, 3]
    return _rng(n, n), _rng(n, n, 3, seed=1)


def size(n):           # the Python int n
    return (n,)


N = {0: "n"}           # axis 0 of every array argument is the dimension "n" (int arguments are scalars)
NM = {0: "n", 1: "n"}  # both axes of a square matrix
SEP = ({0: "n"}, {0: "m"})  # two arguments with independent sizes


def _both(body):
    """fn over sprue.numpy and ref over numpy from one body(xp, *args). Partials keep the body's
    parameters, which qjit's per-argument abstracted_axes refer to."""
    return functools.partial(body, jnp), functools.partial(body, np)


def case(name, body, make_args, axes=N, ref=None):
    fn, same = _both(body)
    return Case(name, fn, make_args, axes, ref or same)


def _clamped(i: int, n: int) -> int:
    """A traced index as sprue (and JAX) reads it: negative from the end, then clamped; numpy's
    IndexError on an empty axis."""
    if n == 0:
        raise IndexError("index into an empty axis")
    return min(max(i + n if i < 0 else i, 0), n - 1)


def _at_set(x, idx, v):
    y = x.copy()
    y[idx] = v
    return y


def _at_add(x, idx, v):
    y = x.copy()
    np.add.at(y, idx, v)
    return y


CASES = [
    # -- sizes from traced ints and from shapes --------------------------------------------------
    case("ones_n", lambda xp, n: xp.ones(n), size, None),
    case("zeros_n_plus_1_by_2", lambda xp, n: xp.zeros((n + 1, 2)), size, None),
    case("full_n", lambda xp, n: xp.full(n, 2.5), size, None),
    case("empty_n_int", lambda xp, n: xp.empty(n, dtype=np.int32) * 0, size, None),
    case("arange_n", lambda xp, n: xp.arange(n), size, None),
    case("arange_0_n_1", lambda xp, n: xp.arange(0, n, 1), size, None),
    case("arange_n_float", lambda xp, n: xp.arange(n, dtype=float), size, None),
    case("arange_2_n", lambda xp, n: xp.arange(2, n), size, None),
    case("arange_n_0_minus1", lambda xp, n: xp.arange(n, 0, -1), size, None),
    case("arange_1_n_3", lambda xp, n: xp.arange(1, n, 3), size, None),
    case("arange_float_bounds", lambda xp, n: xp.arange(0.5, n * 1.5, 0.5), size, None),
    case("linspace_n", lambda xp, n: xp.linspace(0.0, 1.0, n), size, None),
    case("linspace_n_no_endpoint", lambda xp, n: xp.linspace(-1.0, 2.0, n, endpoint=False), size, None),
    case("eye_n", lambda xp, n: xp.eye(n), size, None),
    case("eye_n_m_k", lambda xp, n: xp.eye(n, n + 2, 1), size, None),
    case("identity_n", lambda xp, n: xp.identity(n, dtype=np.int64), size, None),
    case("tri_n", lambda xp, n: xp.tri(n, k=-1), size, None),
    case("like", lambda xp, x: (xp.zeros_like(x), xp.ones_like(x, dtype=np.int32), xp.full_like(x, 7.0)), vec),
    case("zeros_of_shape", lambda xp, x: xp.zeros(x.shape) + xp.ones((x.shape[0], 3)).sum(axis=1), vec),
    case("shape_arithmetic", lambda xp, x: xp.ones(x.shape[0] + 1)[: x.shape[0]] * x, vec),
    case("shape_as_value", lambda xp, x: (x.shape[0] * 2.0, x * x.shape[0], x.shape[0] / 4, xp.asarray(x.shape[0])),
         vec),
    case("arange_plus_ones", lambda xp, n: xp.arange(n) + xp.ones(n), size, None),
    case("data_dependent_size", lambda xp, x: xp.ones(xp.sum(x > 0)), vec),
    case("meshgrid", lambda xp, x: xp.meshgrid(x, x[:2], indexing="ij"), vec),
    # -- elementwise and broadcasting --------------------------------------------------------------
    case("unary_math", lambda xp, x: xp.exp(xp.sin(x)) + xp.sqrt(xp.abs(x)) - xp.floor(x), vec),
    case("binary_same_dim", lambda xp, x, y: x * y + xp.maximum(x, y), two_vecs, N),
    case("bcast_static_1", lambda xp, x: x[:, None] * xp.ones((1, 4)), vec),
    case("bcast_row", lambda xp, x: x + xp.arange(3.0), mat),
    case("bcast_col", lambda xp, x, m: m * x[:, None], vec_and_mat),
    case("bcast_against_static_3", lambda xp, x, y: x + y, vec_and_3, (N, None)),
    case("bcast_independent", lambda xp, x, y: x - y, lambda n: (_rng(n, n), _rng(1, 1, seed=2)), SEP),
    case("bcast_unknown_pair", lambda xp, x, y: x * y, lambda n: (_rng(n, n), _rng(n, n, seed=2)), SEP),
    case("bcast_unknown_mismatch", lambda xp, x, y: x * y, lambda n: (_rng(n, n), _rng(2, 2, seed=2)), SEP),
    case("where", lambda xp, x: xp.where(x > 0, x, 0.0), vec),
    case("where_3", lambda xp, x, y: xp.where(x > 0, x, y), vec_and_3, (N, None)),
    case("clip_isclose", lambda xp, x: (xp.clip(x, -0.5, 0.5), xp.isclose(x, x + 1e-9)), vec),
    case("int_ops", lambda xp, x: (x // 3, x % 3, x << 1, -x, x ** 2), vec_i),
    case("compare_logic", lambda xp, x, y: xp.logical_and(x > y, x < 1.0), two_vecs),
    case("astype", lambda xp, x: x.astype(np.float32) * np.float32(2), vec),
    # -- reductions -------------------------------------------------------------------------------
    case("sum_mean", lambda xp, x: (x.sum(), x.mean(), x.sum(axis=0), x.mean(axis=0), x.mean(axis=1)), mat),
    case("var_std", lambda xp, x: (x.var(axis=0), x.std(), x.var(ddof=1, axis=1)), mat),
    case("prod_any_all", lambda xp, x: (xp.prod(x), xp.any(x > 1), xp.all(x < 3)), vec),
    case("max_min", lambda xp, x: (x.max(), x.min(axis=0), xp.max(x, axis=1)), mat),
    case("max_initial", lambda xp, x: xp.max(x, initial=-10.0), vec),
    case("argmax", lambda xp, x: (xp.argmax(x), xp.argmin(x, axis=0), xp.argmax(x, axis=1)), mat),
    case("cumsum", lambda xp, x: (xp.cumsum(x), xp.cumsum(x, axis=0), xp.cumprod(x, axis=1)), mat),
    case("count_nonzero", lambda xp, x: xp.count_nonzero(x > 0), vec),
    case("sum_where", lambda xp, x: xp.sum(x, where=x > 0), vec),
    case("nanmean", lambda xp, x: xp.nanmean(x, axis=0), mat),
    case("array_equal", lambda xp, x, y: (xp.array_equal(x, y), xp.array_equal(x, x)),
         lambda n: (_rng(n, n), _rng(n, n)), SEP),
    case("ptp_cumulative", lambda xp, x: (xp.ptp(x, axis=1), xp.cumulative_sum(x, axis=0, include_initial=True)), mat),
    case("nan_reductions", lambda xp, x: (xp.nanmax(xp.where(x > 1, xp.nan, x), axis=1), xp.nansum(x)), mat),
    # -- sort -------------------------------------------------------------------------------------
    case("sort", lambda xp, x: (xp.sort(x), xp.argsort(x), xp.sort(x, axis=0)), mat),
    case("argsort_descending", lambda xp, x: xp.argsort(x, stable=True, descending=True), vec_i,
         ref=lambda x: (len(x) - 1 - np.argsort(x[::-1], kind="stable"))[::-1]),
    # -- products ---------------------------------------------------------------------------------
    case("matvec", lambda xp, m, v: m @ v, lambda n: (_rng(n, 4, n), _rng(n, n, seed=1)), ({1: "n"}, {0: "n"})),
    case("matmul_dynamic_batch", lambda xp, m: m.T @ m, mat),
    case("dot_vectors", lambda xp, x, y: xp.dot(x, y), two_vecs),
    case("dot_unknown", lambda xp, x, y: xp.dot(x, y), lambda n: (_rng(n, n), _rng(n, n, seed=3)), SEP),
    case("dot_unknown_mismatch", lambda xp, x, y: xp.dot(x, y), lambda n: (_rng(n, n), _rng(2, 2, seed=3)), SEP),
    case("matmul_square", lambda xp, a: a @ a + xp.eye(a.shape[0]), square, NM),
    case("einsum", lambda xp, m: (xp.einsum("ij,ij->i", m, m), xp.einsum("ij->j", m)), mat),
    case("einsum_trace", lambda xp, a: xp.einsum("ii->", a), square, NM),
    case("outer_inner", lambda xp, x, y: (xp.outer(x, y), xp.inner(x, y), xp.vdot(x, y)), two_vecs),
    case("tensordot", lambda xp, m: xp.tensordot(m, m, axes=([0], [0])), mat),
    case("kron", lambda xp, x: xp.kron(x, xp.arange(2.0)), vec),
    # -- shapes -----------------------------------------------------------------------------------
    case("reshape_minus1", lambda xp, x: (x.reshape(-1), x.reshape(-1, 3), x.reshape(3, -1), x.ravel()), mat),
    case("reshape_pairs", lambda xp, x: x.reshape(-1, 2), lambda n: (_rng(n, 2 * n),)),
    case("reshape_check", lambda xp, x: x.reshape(-1, 2), vec),
    case("reshape_to_traced", lambda xp, x, k: x.reshape(k, 3), lambda n: (_rng(n, n, 3), n), N),
    case("transpose", lambda xp, x: (x.T, xp.swapaxes(x[None], 0, 2), xp.moveaxis(x, 0, -1)), mat),
    case("expand_squeeze", lambda xp, x: xp.squeeze(xp.expand_dims(x, 1), axis=1), vec),
    case("squeeze_dynamic", lambda xp, x: xp.squeeze(x, axis=0), mat),
    case("concatenate", lambda xp, x: xp.concatenate([x, x[::-1], xp.zeros(2)]), vec),
    case("concatenate_axis1", lambda xp, x, m: xp.concatenate([m, x[:, None]], axis=1), vec_and_mat),
    case("concatenate_unknown", lambda xp, a, b: xp.concatenate([a, b], axis=1),
         lambda n: (_rng(n, n, 2), _rng(n, n, 3, seed=1)), SEP),
    case("stack", lambda xp, x, y: (xp.stack([x, y]), xp.stack([x, y], axis=1), xp.hstack([x, y]), xp.vstack([x, y])),
         two_vecs),
    case("column_stack", lambda xp, x: xp.column_stack([x, x * 2]), vec),
    case("broadcast_to", lambda xp, x: xp.broadcast_to(x[:, None], (x.shape[0], 4)), vec),
    case("broadcast_arrays", lambda xp, x, m: xp.broadcast_arrays(x[:, None], m), vec_and_mat),
    case("flip_roll", lambda xp, x: (xp.flip(x), xp.roll(x, 2), xp.roll(x, -1), xp.fliplr(x[None])), vec),
    case("roll_axis", lambda xp, x: xp.roll(x, 1, axis=0), mat),
    case("diagonal", lambda xp, a: (xp.diagonal(a), xp.diagonal(a, 1), xp.diagonal(a, -1), xp.trace(a)), square, NM),
    case("diag_vector", lambda xp, x: (xp.diag(x), xp.diag(x, 1)), vec),
    case("tril_triu", lambda xp, a: (xp.tril(a), xp.triu(a, 1)), square, NM),
    case("repeat_tile", lambda xp, x: (xp.repeat(x, 2), xp.tile(x, 2), xp.tile(x, (2, 1))), vec),
    case("split_indices", lambda xp, x: xp.split(x, [1, 3]), vec),
    case("array_split", lambda xp, x: xp.array_split(x, 3), vec),
    case("split_sections", lambda xp, x: xp.split(x, 2), lambda n: (_rng(n, 2 * n),)),
    case("split_sections_check", lambda xp, x: xp.split(x, 2), vec),
    case("atleast", lambda xp, x: (xp.atleast_2d(x), xp.atleast_3d(x)), vec),
    case("reshape_by_dims", lambda xp, x: (x.reshape(x.shape[0], -1), x.reshape(-1, x.shape[0]).sum(0)), mat),
    case("split_at_half", lambda xp, x: xp.split(x, [x.shape[0] // 2]), vec),
    case("repeat_counts", lambda xp, x: xp.repeat(x, [1, 0, 2]), vec),
    case("roll_flat_2d", lambda xp, x: xp.roll(x, 4), mat),
    case("nan_to_num", lambda xp, x: xp.nan_to_num(xp.log(x)), vec),
    # -- indexing ---------------------------------------------------------------------------------
    case("slice_static", lambda xp, x: (x[1:], x[:-1], x[::2], x[1::2], x[::-1], x[-2::-3]), vec),
    case("diff", lambda xp, x: x[1:] - x[:-1], vec),
    case("slice_clamped", lambda xp, x: (x[:5], x[-3:], x[5:1:-1], x[2:2]), vec),
    case("slice_by_dims", lambda xp, x: (x[: x.shape[0] - 2], x[x.shape[0] // 2:], x[x.shape[0] // 2::-1]), vec),
    case("slice_2d", lambda xp, x: (x[1:, ::2], x[:, 1], x[::-1, -1], x[None, :2, 1:]), mat),
    case("slice_traced", lambda xp, x, k: (x[:k], x[k:], x[-k:], x[k::2]), lambda n: (_rng(n, n), n // 2),
         N),
    case("slice_traced_bounds", lambda xp, x, i, j: (x[i:j], x[j:i:-1]), lambda n: (_rng(n, n), -3, n - 1),
         N),
    case("index_int", lambda xp, x: (x[0], x[-1]), vec),
    case("index_int_2d", lambda xp, x: (x[1], x[-1, 2], x[:, 0]), mat),
    case("index_traced", lambda xp, x, i: (x[i], x[i - 1]), lambda n: (_rng(n, n), 1), N,
         ref=lambda x, i: (x[_clamped(i, len(x))], x[_clamped(i - 1, len(x))])),
    case("index_array", lambda xp, x: (x[np.array([0, 2])], x[np.array([-1, 0])]), vec),
    case("index_traced_array", lambda xp, x: x[xp.argsort(x)], vec),
    case("index_array_2d", lambda xp, x: (x[np.array([0, 1]), 1:], x[:, np.array([2, 0])]), mat),
    case("take", lambda xp, x: (xp.take(x, np.array([0, 4]), mode="clip"), xp.take(x, np.array([3, -1]), mode="wrap")),
         vec),
    case("getitem_fill", lambda xp, x: x.at[np.array([0, 3, -1, 7])].get(mode="fill", fill_value=-1.0), vec,
         ref=lambda x: np.array([x[i] if -len(x) <= i < len(x) else -1.0 for i in (0, 3, -1, 7)])),
    case("take_along_axis", lambda xp, x: xp.take_along_axis(x, xp.argsort(x, axis=0), axis=0), mat),
    case("at_set", lambda xp, x: x.at[0].set(9.0), vec, ref=lambda x: _at_set(x, 0, 9.0)),
    case("at_slice_add", lambda xp, x: x.at[1:].add(1.0), vec, ref=lambda x: _at_add(x, np.s_[1:], 1.0)),
    case("at_strided_set", lambda xp, x: x.at[::2].set(x[::2] * 2), vec,
         ref=lambda x: _at_set(x, np.s_[::2], x[::2] * 2)),
    case("at_array_add", lambda xp, x: x.at[np.array([0, 0, 1])].add(1.0), vec,
         ref=lambda x: _at_add(x, np.array([0, 0, 1]), 1.0)),
    case("at_row_set", lambda xp, x: x.at[:, 1].set(x[:, 0]), mat, ref=lambda x: _at_set(x, np.s_[:, 1], x[:, 0])),
    case("at_traced_set", lambda xp, x, i: x.at[i].set(-1.0), lambda n: (_rng(n, n), 2), N,
         ref=lambda x, i: _at_set(x, i, -1.0) if -x.shape[0] <= i < x.shape[0] else x),
]


def assert_leaves_match(got: list, want):
    """got (sprue's result leaves) equals want (numpy's result, a value or a tuple) leaf by leaf in
    shape, dtype and value (floats to 1e-12)."""
    want_leaves, _ = tree_flatten(want if isinstance(want, (tuple, list)) else (want,))
    assert len(got) == len(want_leaves)
    for g, w in zip(got, want_leaves):
        w = np.asarray(w)
        g = np.asarray(g)
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        if g.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
        else:
            np.testing.assert_array_equal(g, w)
