"""sprue.numpy.linalg against numpy.linalg: compiled and eager, f32 and f64, batched, sizes known
only at run time, several block counts (the kernels work in blocks of _linalg_kernels.BLOCK
columns: sizes below, at and past a block boundary); derivatives against central differences of
numpy's functions; failures as values (NaNs, infinities), as JAX gives them."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.base.errors import SprueTypeError, SprueValueError
from sprue.numpy import _linalg_kernels
from tests.helpers.linalg_checks import check_derivatives, close, spd, well_conditioned

BLOCK = _linalg_kernels.BLOCK
SIZES = (1, 5, BLOCK, 2 * BLOCK + 7)   # one column, one partial block, one whole block, several
RNG = np.random.default_rng(18)
TOL = {np.float64: 1e-10, np.float32: 2e-4}


_spd = functools.partial(spd, RNG)
_well_conditioned = functools.partial(well_conditioned, RNG)
_close = functools.partial(close, TOL)


# ---- norm --------------------------------------------------------------------------------------

VECTOR_ORDS = (None, 1, 2, np.inf, -np.inf, 0, 3, 0.5, -1)
MATRIX_ORDS = (None, "fro", 1, -1, np.inf, -np.inf)


def _norm_cases(x):
    cases = [(None, None, False), (None, None, True), (2, None, False)]
    cases += [(o, ax, k) for o in VECTOR_ORDS for ax in (0, -1) for k in (False, True)]
    cases += [(o, ax, k) for o in MATRIX_ORDS for ax in ((0, 1), (2, 0), (-1, -2)) for k in (False, True)]
    return cases


def test_norm_matches_numpy_eager_and_compiled():
    x = RNG.standard_normal((3, 4, 5))
    x[0, 0, 0] = 0.0     # ord 0 counts it, negative ords divide by it (numpy warns, as sprue's eager run)
    cases = _norm_cases(x)
    cases = [c for c in cases if not (c[1] is None and c[0] is not None)] + [(1, None, False), (np.inf, None, False)]
    with np.errstate(divide="ignore"):
        wants = [np.linalg.norm(x if ax is not None or o is None else x[0], o, ax, k) for o, ax, k in cases]
        eager = [jnp.linalg.norm(x if ax is not None or o is None else x[0], o, ax, k) for o, ax, k in cases]
    compiled = sprue.qjit(lambda y: [jnp.linalg.norm(y if ax is not None or o is None else y[0], o, ax, k)
                                     for o, ax, k in cases])(x)
    for case, w, e, c in zip(cases, wants, eager, compiled):
        _close(e, w), _close(c, w)


def test_norm_f32_ints_and_gradient():
    x32 = RNG.standard_normal((6, 7)).astype(np.float32)
    _close(sprue.qjit(lambda y: jnp.linalg.norm(y, axis=1))(x32), np.linalg.norm(x32, axis=1), np.float32)
    xi = np.arange(12).reshape(3, 4)
    _close(jnp.linalg.norm(xi, "fro"), np.linalg.norm(xi, "fro"))
    x = RNG.standard_normal(9)
    for ord in (None, 1, 3):
        _check_derivatives(lambda y: jnp.linalg.norm(y, ord), lambda y: np.linalg.norm(y, ord), [x])


def test_norm_errors_say_what_to_do():
    with pytest.raises(SprueValueError, match=r"linalg.norm: invalid norm order 'fro' for vectors"):
        jnp.linalg.norm(np.ones(3), "fro")
    with pytest.raises(SprueValueError, match=r"ord=1 with axis=None needs a 1-D or 2-D array, got f64\[2,2,2\]"):
        jnp.linalg.norm(np.ones((2, 2, 2)), 1)
    with pytest.raises(SprueValueError, match=r"improper number of dimensions to norm"):
        jnp.linalg.norm(np.ones((2, 2, 2)), None, (0, 1, 2))


# ---- Cholesky ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cholesky_matches_numpy_compiled_eager_batched(dtype):
    chol = sprue.qjit(lambda a: jnp.linalg.cholesky(a))
    for n in SIZES:
        a = _spd(2, 3, n, n, dtype=dtype)
        _close(chol(a), np.linalg.cholesky(a), dtype)
    a = _spd(BLOCK + 3, BLOCK + 3, dtype=dtype)
    _close(jnp.linalg.cholesky(a), np.linalg.cholesky(a), dtype)
    _close(jnp.linalg.cholesky(a, upper=True), np.linalg.cholesky(a, upper=True), dtype)


def test_cholesky_of_many_blocks_compiled():
    # 14 blocks unrolled: a long body, which the lowering cuts into parts (partition.py)
    a = _spd(13 * BLOCK + 5, 13 * BLOCK + 5)
    _close(sprue.qjit(lambda m: jnp.linalg.cholesky(m))(a), np.linalg.cholesky(a))


def test_lu_of_many_blocks_compiled():
    # a static LU unrolled over 12 blocks: this long body once compiled to NaNs (session 20's
    # partition miscompile, notes/s20_round2_b_outline_miscompile_repro.py), so LU stayed looped
    a, b = _well_conditioned(12 * BLOCK, 12 * BLOCK), RNG.standard_normal((12 * BLOCK, 3))
    x, d = sprue.qjit(lambda m, r: (jnp.linalg.solve(m, r), jnp.linalg.slogdet(m)[1]))(a, b)
    _close(x, np.linalg.solve(a, b))
    _close(d, np.linalg.slogdet(a)[1])


def test_cholesky_of_a_run_time_size_compiles_once():
    chol = sprue.qjit(lambda a: jnp.linalg.cholesky(a), abstracted_axes={1: "n", 2: "n"})
    for n in SIZES:
        a = _spd(2, n, n)
        _close(chol(a), np.linalg.cholesky(a))
    assert chol.compile_count == 1


def test_cholesky_of_a_matrix_not_positive_definite_is_nan_as_jax():
    a = _spd(3, 40, 40)
    a[1, 30, 30] = -5.0
    for got in (sprue.qjit(lambda m: jnp.linalg.cholesky(m))(a), jnp.linalg.cholesky(a)):
        assert np.isnan(got[1]).all()
        _close(got[[0, 2]], np.linalg.cholesky(a[[0, 2]]))


def test_cholesky_reads_the_symmetrized_input_as_jax():
    a = _spd(9, 9)
    skew = np.triu(RNG.standard_normal((9, 9)), 1)
    _close(jnp.linalg.cholesky(a + skew - skew.T), np.linalg.cholesky(a))


# ---- triangular solves -------------------------------------------------------------------------

def _triangular_reference(a, b, trans, lower, unit):
    t = np.tril(a) if lower else np.triu(a)
    if unit:
        t = t - np.diag(np.diag(t)) + np.eye(len(t), dtype=a.dtype)
    return np.linalg.solve(t.T if trans else t, b)


FLAGS = [(trans, lower, unit) for trans in (0, 1) for lower in (False, True) for unit in (False, True)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_solve_triangular_matches_numpy(dtype):
    n = 2 * BLOCK + 5
    a, b = _well_conditioned(2, n, n, dtype=dtype), RNG.standard_normal((2, n, 3)).astype(dtype)
    solve = sprue.qjit(lambda p, q: [jnp.linalg.solve_triangular(p, q, trans=t, lower=lo, unit_diagonal=u)
                                     for t, lo, u in FLAGS])
    for (t, lo, u), got in zip(FLAGS, solve(a, b)):
        want = np.stack([_triangular_reference(a[i], b[i], t, lo, u) for i in range(2)])
        _close(got, want, dtype)
    # vector right-hand sides (b.ndim == a.ndim - 1, as JAX reads them), eagerly
    want = np.stack([_triangular_reference(a[i], b[i, :, 0], 0, True, False) for i in range(2)])
    _close(jnp.linalg.solve_triangular(a, b[:, :, 0], lower=True), want, dtype)


def test_complex_solve_triangular_in_every_mode():
    # trans=2 ('C') solves with a^H; triangular_solve's conjugate_a conjugates a (jax.lax.linalg's)
    n = BLOCK + 3
    a = _well_conditioned(n, n) + 1j * RNG.standard_normal((n, n)) * 0.1
    b = RNG.standard_normal((n, 2)) + 1j * RNG.standard_normal((n, 2))
    for trans, op in ((0, np.triu(a)), (1, np.triu(a).T), ("C", np.triu(a).conj().T)):
        _close(sprue.qjit(lambda p, q: jnp.linalg.solve_triangular(p, q, trans=trans))(a, b), np.linalg.solve(op, b))
    got = jnp.linalg.triangular_solve(a, b.T, left_side=False, lower=True, conjugate_a=True)
    _close(got, np.linalg.solve(np.tril(a).conj().T, b).T)   # x conj(a) = b^T  <=>  a^H x^T = b


def test_triangular_solve_on_the_right_and_a_run_time_size():
    n = BLOCK + 9
    a, b = _well_conditioned(n, n), RNG.standard_normal((4, n))
    got = jnp.linalg.triangular_solve(a, b, left_side=False, lower=True, transpose_a=True)
    _close(got, np.linalg.solve(np.tril(a), b.T).T)    # x a^T = b  <=>  a x^T = b^T
    solve = sprue.qjit(lambda p, q: jnp.linalg.solve_triangular(p, q, lower=True),
                       abstracted_axes=({0: "n", 1: "n"}, {0: "n"}))
    for n in SIZES:
        a, b = _well_conditioned(n, n), RNG.standard_normal((n, 2))
        _close(solve(a, b), np.linalg.solve(np.tril(a), b))
    assert solve.compile_count == 1


# ---- LU: solve, inv, det, slogdet, matrix_power ------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_lu_functions_match_numpy_compiled_and_eager(dtype):
    fns = sprue.qjit(lambda a, b, v: (jnp.linalg.solve(a, b), jnp.linalg.solve(a[0, 0], v), jnp.linalg.inv(a),
                                      jnp.linalg.det(a), *jnp.linalg.slogdet(a)))
    for n in SIZES if dtype == np.float64 else (5, 2 * BLOCK + 7):
        a, b = _well_conditioned(2, 3, n, n, dtype=dtype), RNG.standard_normal((2, 3, n, 2)).astype(dtype)
        a[..., 0, :] *= -1     # some determinants negative
        v = RNG.standard_normal(n).astype(dtype)
        sign, logdet = np.linalg.slogdet(a)
        wants = (np.linalg.solve(a, b), np.linalg.solve(a[0, 0], v), np.linalg.inv(a), np.linalg.det(a), sign, logdet)
        for got, want in zip(fns(a, b, v), wants):
            _close(got, want, dtype)
    a, b = _well_conditioned(BLOCK + 2, BLOCK + 2), RNG.standard_normal((3, BLOCK + 2, 1))
    _close(jnp.linalg.solve(a, b), np.linalg.solve(a, b))      # a broadcast against b's batch
    _close(jnp.linalg.det(a), np.linalg.det(a))


@pytest.mark.parametrize("name", ["solve", "inv", "det"])
def test_lu_functions_of_a_run_time_size_compile_once(name):
    fn = sprue.qjit(lambda a, b: {"solve": lambda: jnp.linalg.solve(a, b), "inv": lambda: jnp.linalg.inv(a),
                                  "det": lambda: jnp.linalg.det(a)}[name](), abstracted_axes=({0: "n", 1: "n"}, {0: "n"}))
    for n in SIZES:
        a, b = _well_conditioned(n, n), RNG.standard_normal((n, 3))
        _close(fn(a, b), {"solve": np.linalg.solve(a, b), "inv": np.linalg.inv(a), "det": np.linalg.det(a)}[name])
    assert fn.compile_count == 1


def test_two_solves_of_a_run_time_size_in_one_program():
    """The body repeats, partition.py cuts it, and an empty tensor of a size one part computes is no
    longer copied into the next (its call read a value moved into the first part)."""
    fns = sprue.qjit(lambda a, b: (jnp.linalg.solve(a, b), jnp.linalg.solve(a, 2 * b)),
                     abstracted_axes=({0: "n", 1: "n"}, {0: "n"}))
    a, b = _well_conditioned(5, 5), RNG.standard_normal((5, 3))
    for got, want in zip(fns(a, b), (np.linalg.solve(a, b), np.linalg.solve(a, 2 * b))):
        _close(got, want)


def test_pivoting_is_needed_and_done():
    a = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [4.0, -3.0, 8.0]])   # a zero first pivot
    b = np.array([1.0, 2.0, 3.0])
    _close(sprue.qjit(lambda p, q: jnp.linalg.solve(p, q))(a, b), np.linalg.solve(a, b))
    _close(jnp.linalg.det(a), np.linalg.det(a))


def test_singular_matrices_give_values_not_exceptions():
    a = np.array([[[1.0, 2.0], [2.0, 4.0]], [[2.0, 0.0], [0.0, 3.0]]])
    f = sprue.qjit(lambda m: (jnp.linalg.det(m), *jnp.linalg.slogdet(m), jnp.linalg.inv(m)))
    for det, sign, logdet, inverse in (f(a), (jnp.linalg.det(a), *jnp.linalg.slogdet(a), jnp.linalg.inv(a))):
        np.testing.assert_array_equal(det, [0.0, 6.0])
        np.testing.assert_array_equal(sign, [0.0, 1.0])
        assert logdet[0] == -np.inf and np.isclose(logdet[1], np.log(6.0))
        assert not np.isfinite(inverse[0]).all()
        _close(inverse[1], np.linalg.inv(a[1]))


def test_matrix_power_matches_numpy():
    a = _well_conditioned(2, 6, 6) / 2
    f = sprue.qjit(lambda m: [jnp.linalg.matrix_power(m, k) for k in (0, 1, 2, 5, -3)])
    for k, got in zip((0, 1, 2, 5, -3), f(a)):
        _close(got, np.linalg.matrix_power(a, k))
    with pytest.raises(SprueTypeError, match=r"linalg.matrix_power: exponent must be an integer known when tracing"):
        jnp.linalg.matrix_power(a, 1.5)


def test_shapes_and_dtypes_are_checked_with_the_function_named():
    with pytest.raises(SprueValueError, match=r"linalg.cholesky: last 2 dimensions of the array must be square,"
                                              r" got f64\[3,4\]"):
        jnp.linalg.cholesky(np.ones((3, 4)))
    with pytest.raises(SprueValueError, match=r"linalg.det: needs an array of at least 2 dimensions, got f64\[3\]"):
        jnp.linalg.det(np.ones(3))
    with pytest.raises(SprueValueError, match=r"linalg.solve: batch dimensions of f64\[2,3,3\] and f64\[4,3,1\]"
                                              r" cannot be broadcast together"):
        jnp.linalg.solve(np.ones((2, 3, 3)), np.ones((4, 3, 1)))
    with pytest.raises(SprueValueError, match=r"linalg.solve_triangular: f64\[4,4\] and right-hand side f64\[3,1\]"
                                              r" have different sizes: 4 is not 3"):
        jnp.linalg.solve_triangular(np.eye(4), np.ones((3, 1)))
    with pytest.raises(SprueValueError, match=r"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got 'X'"):
        jnp.linalg.solve_triangular(np.eye(2), np.ones(2), trans="X")


# ---- derivatives -------------------------------------------------------------------------------

def _check_derivatives(f, f_numpy, args):
    check_derivatives(f, f_numpy, args, RNG)


def test_cholesky_derivatives():
    for n in (4, BLOCK + 5):
        a = _spd(2, n, n)
        _check_derivatives(lambda m: jnp.linalg.cholesky(m),
                           lambda m: np.linalg.cholesky((m + np.swapaxes(m, -1, -2)) / 2), [a])


def test_triangular_solve_derivatives():
    n = BLOCK + 5
    a, b = _well_conditioned(n, n), RNG.standard_normal((n, 2))
    for trans, lower, unit in FLAGS[::3]:
        _check_derivatives(lambda p, q: jnp.linalg.solve_triangular(p, q, trans=trans, lower=lower, unit_diagonal=unit),
                           lambda p, q: _triangular_reference(p, q, trans, lower, unit), [a, b])


def test_lu_function_derivatives():
    a, b = _well_conditioned(2, 7, 7), RNG.standard_normal((2, 7, 3))
    _check_derivatives(lambda p, q: jnp.linalg.solve(p, q), np.linalg.solve, [a, b])
    _check_derivatives(lambda p: jnp.linalg.inv(p), np.linalg.inv, [a])
    _check_derivatives(lambda p: jnp.linalg.det(p), np.linalg.det, [a])
    _check_derivatives(lambda p: jnp.linalg.slogdet(p)[1], lambda p: np.linalg.slogdet(p)[1], [a])
    _check_derivatives(lambda p: jnp.linalg.matrix_power(p, 3), lambda p: np.linalg.matrix_power(p, 3), [a])


def test_second_derivative_of_cholesky_against_differences():
    a, t = _spd(6, 6), RNG.standard_normal((6, 6))
    t = t + t.T
    f = lambda m: jnp.sum(jnp.log(jnp.diagonal(jnp.linalg.cholesky(m))))   # log det / 2  # noqa: E731
    hvp = sprue.jvp(sprue.grad(f), (a,), (t,))[1]
    grad_numpy = lambda m: np.linalg.inv(m) / 2   # noqa: E731  (d/dm of log det(m) / 2, m symmetric)
    np.testing.assert_allclose(hvp, (grad_numpy(a + 1e-6 * t) - grad_numpy(a - 1e-6 * t)) / 2e-6, rtol=1e-5,
                               atol=1e-7)


def test_vmap_matches_a_loop():
    a, b = _spd(3, 9, 9), RNG.standard_normal((3, 9))
    got = sprue.vmap(lambda m, v: (jnp.linalg.cholesky(m), jnp.linalg.solve(m, v), jnp.linalg.det(m)))(a, b)
    wants = [np.stack(x) for x in zip(*[(np.linalg.cholesky(a[i]), np.linalg.solve(a[i], b[i]),
                                         np.linalg.det(a[i])) for i in range(3)])]
    for g, w in zip(got, wants):
        _close(g, w)


def test_a_saved_program_loads_and_runs(tmp_path):
    # the kernels hold no numpy constants inside their custom_jvp functions (sprue.save could not
    # write them): index grids are iota
    a, b = _spd(BLOCK + 4, BLOCK + 4), RNG.standard_normal((BLOCK + 4, 2))
    f = sprue.qjit(lambda m, r: (jnp.linalg.solve(m, r), jnp.linalg.cholesky(m), jnp.linalg.slogdet(m)[1],
                                 jnp.linalg.solve_triangular(m, r, lower=True)))
    wants = f(a, b)
    sprue.save(f, tmp_path / "linalg.jaxpr")
    for got, want in zip(sprue.load(tmp_path / "linalg.jaxpr")(a, b), wants):
        np.testing.assert_array_equal(got, want)
    _close(wants[0], np.linalg.solve(a, b))
