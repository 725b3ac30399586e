"""sprue.lax.linalg's primitives (the native Cholesky, LU and triangular solve) against numpy and
against the kernels written over sprue's primitives (_linalg_kernels' *_traced, what they
replace): compiled and eager, f32 and f64, sizes around the routines' 64-column blocks, batches,
sizes known only at run time, vmap, derivatives against central differences, failures as values."""
from __future__ import annotations

import functools
import os

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from sprue.base.errors import SprueTypeError, SprueValueError, UnsupportedError
from sprue.numpy import _linalg_kernels as K
from tests.helpers.linalg_checks import check_derivatives, close, spd, well_conditioned

RNG = np.random.default_rng(23)
SIZES = (1, 5, 63, 64, 65, 130)   # one column, a partial block, around one block of the C routines, several
TOL = {np.float64: 1e-10, np.float32: 3e-4}
FLAGS = [(lower, trans, unit) for lower in (True, False) for trans in (False, True) for unit in (False, True)]


_spd = functools.partial(spd, RNG)
_well_conditioned = functools.partial(well_conditioned, RNG)
_close = functools.partial(close, TOL)


def _triangular_reference(a, b, lower, trans, unit):
    t = np.tril(a) if lower else np.triu(a)
    if unit:
        n = a.shape[-1]
        t = t.copy()
        t[..., np.arange(n), np.arange(n)] = 1
    return np.linalg.solve(np.swapaxes(t, -1, -2) if trans else t, b)


def _check_lu(a, packed, perm, swaps, dtype):
    """P a = L U, perm a permutation of the given parity, |L| <= 1 (partial pivoting)."""
    n = a.shape[-1]
    lower = np.tril(packed, -1) + np.eye(n, dtype=dtype)
    _close(lower @ np.triu(packed), np.take_along_axis(a, perm[..., None], -2), dtype)
    assert np.all(np.abs(np.tril(packed, -1)) <= 1 + 1e-6)
    for index in np.ndindex(a.shape[:-2]):
        assert sorted(perm[index]) == list(range(n))
        sign = np.linalg.det(np.eye(n)[perm[index]])
        assert sign == (-1) ** swaps[index], (sign, swaps[index])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_factorizations_match_numpy_compiled_and_eager(dtype):
    chol = sprue.qjit(lax.linalg_cholesky)
    lu = sprue.qjit(lax.linalg_lu)
    for n in SIZES:
        s, a = _spd(2, n, n, dtype=dtype), _well_conditioned(2, n, n, dtype=dtype)
        for L in (chol(s), lax.linalg_cholesky(s)):
            _close(L, np.linalg.cholesky(s), dtype)
        for packed, perm, swaps in (lu(a), lax.linalg_lu(a)):
            assert perm.dtype == swaps.dtype == np.int64 and perm.shape == (2, n) and swaps.shape == (2,)
            _check_lu(a, packed, perm, swaps, dtype)


def test_the_same_factors_as_the_traced_kernels():
    """Both pivot as LAPACK's getrf (the first largest |entry|): the same permutation and factors."""
    n = 70
    s, a = _spd(3, n, n), _well_conditioned(3, n, n)
    traced = sprue.qjit(lambda p, q: (K.cholesky_traced(p), *K.lu_traced(q)))(s, a)
    native = sprue.qjit(lambda p, q: (lax.linalg_cholesky(p), *lax.linalg_lu(q)))(s, a)
    _close(native[0], traced[0])
    _close(native[1], traced[1])
    np.testing.assert_array_equal(native[2], traced[2])
    np.testing.assert_array_equal(native[3], traced[3])
    b = RNG.standard_normal((3, n, 4))
    for unit in (False, True):
        got, want = sprue.qjit(lambda p, q: (lax.linalg_triangular_solve(p, q, lower=True, unit_diagonal=unit),
                                             K.lower_solve_traced(p, q, unit)))(a, b)
        _close(got, want)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_triangular_solve_every_form(dtype):
    for n, m in ((1, 1), (5, 1), (64, 3), (100, 70)):
        a, b = _well_conditioned(2, n, n, dtype=dtype), RNG.standard_normal((2, n, m)).astype(dtype)
        for lower, trans, unit in FLAGS:
            want = _triangular_reference(a, b, lower, trans, unit)
            f = sprue.qjit(lambda p, q: lax.linalg_triangular_solve(p, q, lower=lower, transpose_a=trans,
                                                                    unit_diagonal=unit))
            _close(f(a, b), want, dtype)
            _close(lax.linalg_triangular_solve(a, b, lower=lower, transpose_a=trans, unit_diagonal=unit), want, dtype)


def test_strided_operands_are_read_through_their_strides():
    """A transposed operand (a view, not a copy, inside the program), a slice of wider rows, and
    several batch axes."""
    a, b = _well_conditioned(2, 3, 40, 40), RNG.standard_normal((2, 3, 40, 5))
    f = sprue.qjit(lambda p, q: (lax.linalg_cholesky(jnp.swapaxes(p @ jnp.swapaxes(p, -1, -2), -1, -2)),
                                 lax.linalg_triangular_solve(jnp.swapaxes(p, -1, -2), q, lower=True)))
    L, x = f(a, b)
    _close(L, np.linalg.cholesky(a @ np.swapaxes(a, -1, -2)))
    _close(x, _triangular_reference(np.swapaxes(a, -1, -2), b, True, False, False))
    wide = np.concatenate([_well_conditioned(2, 3, 40, 40), RNG.standard_normal((2, 3, 40, 6))], -1)   # rows 46 apart
    g = sprue.qjit(lambda p, q: lax.linalg_triangular_solve(p[..., :, :40], q, lower=True, unit_diagonal=True))
    _close(g(wide, b), _triangular_reference(wide[..., :, :40], b, True, False, True))


def test_run_time_sizes_compile_once():
    f = sprue.qjit(lambda s, a, b: (lax.linalg_cholesky(s), *lax.linalg_lu(a),
                                    lax.linalg_triangular_solve(a, b, lower=False, transpose_a=True)),
                   abstracted_axes=({0: "k", 1: "n", 2: "n"}, {0: "k", 1: "n", 2: "n"}, {0: "k", 1: "n"}))
    for k, n in ((1, 3), (2, 64), (3, 97)):
        s, a, b = _spd(k, n, n), _well_conditioned(k, n, n), RNG.standard_normal((k, n, 2))
        L, packed, perm, swaps, x = f(s, a, b)
        _close(L, np.linalg.cholesky(s))
        _check_lu(a, packed, perm, swaps, np.float64)
        _close(x, _triangular_reference(a, b, False, True, False))
    assert f.compile_count == 1


def test_inside_compiled_loops():
    """A Riccati-like recursion (a Kalman filter's covariance) in a scan, an inverse in a fori_loop:
    the routine's wrapper called from loop bodies."""
    n = 20
    a, q = RNG.standard_normal((n, n)) / 10 + np.eye(n), np.eye(n)

    def step(N, p):
        s = a @ p @ a.T + q
        return s / N.linalg.slogdet(s)[1], N.sum(N.linalg.cholesky(s)) + N.sum(N.linalg.solve(s, a))
    p, ys = sprue.qjit(lambda p0: lax.scan(lambda c, _: step(jnp, c), p0, None, length=5))(np.eye(n))
    want_p, want_ys = np.eye(n), []
    for _ in range(5):
        want_p, y = step(np, want_p)
        want_ys.append(y)
    _close(p, want_p)
    _close(ys, np.array(want_ys))
    inverse = sprue.qjit(lambda m: lax.fori_loop(0, 3, lambda i, x: jnp.linalg.inv(x + jnp.eye(n)), m))(q)
    want = q
    for _ in range(3):
        want = np.linalg.inv(want + np.eye(n))
    _close(inverse, want)


def test_vmap_matches_a_loop():
    s, a, b = _spd(3, 9, 9), _well_conditioned(3, 9, 9), RNG.standard_normal((9, 2))
    f = sprue.vmap(lambda p, q, r: (lax.linalg_cholesky(p), *lax.linalg_lu(q),
                                    lax.linalg_triangular_solve(q, r, lower=True)), in_axes=(0, 0, None))
    for got_f in (f, sprue.qjit(f)):
        got = got_f(s, a, b)
        for i in range(3):
            _close(got[0][i], np.linalg.cholesky(s[i]))
            _check_lu(a[i], got[1][i], got[2][i], got[3][i], np.float64)
            _close(got[4][i], _triangular_reference(a[i], b, True, False, False))


def test_triangular_solve_derivatives_in_both_operands():
    a, b = _well_conditioned(2, 37, 37), RNG.standard_normal((2, 37, 3))
    for lower, trans, unit in FLAGS:
        check_derivatives(lambda p, q: lax.linalg_triangular_solve(p, q, lower=lower, transpose_a=trans,
                                                                   unit_diagonal=unit),
                          lambda p, q: _triangular_reference(p, q, lower, trans, unit), [a, b], RNG)


def _central_difference(f, a, t, h=1e-6):
    return (np.asarray(f(a + h * t)) - np.asarray(f(a - h * t))) / (2 * h)


def test_gradients_at_run_time_sizes():
    """Reverse mode through sprue.numpy.linalg at sizes known only at run time: the compiled
    gradient against the eager one, and b's against its closed form (a^-T times the ones)."""
    def loss(a, b):
        spd = a @ a.T + 3 * jnp.eye(a.shape[0])
        return jnp.sum(jnp.linalg.solve(a, b)) + jnp.sum(jnp.linalg.cholesky(spd))
    grad = sprue.grad(loss, argnums=(0, 1))
    compiled = sprue.qjit(grad, abstracted_axes=({0: "n", 1: "n"}, {0: "n"}))
    for n in (3, 70):
        a, b = _well_conditioned(n, n), RNG.standard_normal((n, 2))
        (ga, gb), (ea, eb) = compiled(a, b), grad(a, b)
        _close(ga, np.asarray(ea))
        _close(gb, np.asarray(eb))
        _close(gb, np.linalg.solve(a.T, np.ones((n, 2))))
    assert compiled.compile_count == 1


def test_factorization_tangents_against_differences():
    """The forward rules (JAX's), which derivatives of sprue.numpy.linalg's derivative rules use."""
    s, a, t = _spd(2, 37, 37), _well_conditioned(2, 37, 37), RNG.standard_normal((2, 37, 37))
    lower_read = lambda m: np.tril(m) + np.swapaxes(np.tril(m, -1), -1, -2)   # noqa: E731  (what is read)
    for f in (lambda m: lax.linalg_cholesky(m), sprue.qjit(lambda m: lax.linalg_cholesky(m))):
        tangent = sprue.jvp(f, (s,), (t,))[1]
        np.testing.assert_allclose(tangent, _central_difference(lambda m: np.linalg.cholesky(lower_read(m)), s, t),
                                   rtol=1e-5, atol=1e-6)
    tangent = sprue.jvp(lambda m: lax.linalg_lu(m)[0], (a,), (t,))[1]
    np.testing.assert_allclose(tangent, _central_difference(lambda m: lax.linalg_lu(m)[0], a, t), rtol=1e-5, atol=1e-6)


def test_hessian_vector_product_of_log_det():
    """Second derivatives of sprue.numpy.linalg's functions differentiate their derivative rules,
    whose factorizations are these primitives."""
    a, t = _spd(6, 6), RNG.standard_normal((6, 6))
    t = t + t.T
    f = lambda m: jnp.linalg.slogdet(m)[1]   # noqa: E731
    hvp = sprue.jvp(sprue.grad(f), (a,), (t,))[1]
    inverse_transposed = lambda m: np.linalg.inv(m).T   # noqa: E731  (d/dm of log |det m|)
    np.testing.assert_allclose(hvp, _central_difference(inverse_transposed, a, t), rtol=1e-5, atol=1e-7)


def test_failures_are_values():
    s = _spd(3, 70, 70)
    s[1, 50, 50] = -5.0
    singular = _well_conditioned(2, 70, 70)
    singular[0, :, 9] = 0.0   # a zero column: an exact zero pivot
    for L, (packed, perm, swaps) in ((sprue.qjit(lax.linalg_cholesky)(s), sprue.qjit(lax.linalg_lu)(singular)),
                                     (lax.linalg_cholesky(s), lax.linalg_lu(singular))):
        assert np.isnan(L[1]).all()
        _close(L[[0, 2]], np.linalg.cholesky(s[[0, 2]]))
        u = np.diagonal(packed, axis1=-2, axis2=-1)
        assert np.isfinite(packed).all()
        assert np.any(u[0] == 0) and np.all(u[1] != 0)   # an exact zero: a zero pivot is not divided by
        _check_lu(singular, packed, perm, swaps, np.float64)


def test_empty_matrices():
    a, b = np.zeros((2, 0, 0)), np.zeros((2, 0, 3))
    f = sprue.qjit(lambda p, q: (jnp.linalg.cholesky(p), *lax.linalg_lu(p), jnp.linalg.solve(p, q), jnp.linalg.det(p)))
    for got in (f(a, b), f.fn(a, b)):
        assert [np.shape(x) for x in got] == [(2, 0, 0), (2, 0, 0), (2, 0), (2,), (2, 0, 3), (2,)]
        np.testing.assert_array_equal(got[-1], np.linalg.det(a))


def test_bad_operands_are_refused_with_the_primitive_named():
    with pytest.raises(SprueTypeError, match=r"linalg_cholesky takes float32 or float64 matrices, got i64\[3,3\]"):
        lax.linalg_cholesky(np.ones((3, 3), np.int64))
    with pytest.raises(SprueValueError, match=r"linalg_lu takes square matrices, got f64\[3,4\]"):
        lax.linalg_lu(np.ones((3, 4)))
    with pytest.raises(SprueValueError, match=r"linalg_triangular_solve: f64\[3,3\] and right-hand side f64\[4,1\]"
                                              r" do not match"):
        lax.linalg_triangular_solve(np.eye(3), np.ones((4, 1)), lower=True)
    with pytest.raises(UnsupportedError, match=r"not differentiable in reverse mode .*: linalg_lu"):
        sprue.grad(lambda m: jnp.sum(lax.linalg_lu(m)[0]))(np.eye(3))


def test_more_batch_axes_than_the_routines_take_keep_the_traced_kernels():
    a = _spd(1, 1, 1, 1, 1, 1, 1, 4, 4)   # 7 batch axes: rank 9
    _close(sprue.qjit(lambda m: jnp.linalg.cholesky(m))(a), np.linalg.cholesky(a))
    with pytest.raises(SprueValueError, match=r"linalg_cholesky takes matrices \(\.\.\., n, n\) of at most 6 batch"):
        lax.linalg_cholesky(a)



# Sizes whose factorizations and solves the routines share out on sprue's pool (linalg_runtime.py:
# from 2^21 flops): one big matrix (its updates' tiles, its solves' pieces of columns) and batches
# of small ones (whole matrices per chunk). Each matrix is computed by the same operations whichever
# thread runs it, so every thread count gives the same bits.
@pytest.fixture
def threads_restored():
    yield
    sprue.set_num_threads(len(os.sched_getaffinity(0)))   # the default


def _same_bits_each_thread_count(f, *args):
    got = []
    for n in (1, 2, 4):
        sprue.set_num_threads(n)
        got.append([np.asarray(r) for r in f(*args)])
    for g in got[1:]:
        for x, y in zip(g, got[0]):
            np.testing.assert_array_equal(x, y)
    return got[0]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(300, 300), (130, 40, 40)], ids=["one matrix", "a batch"])
def test_shared_on_the_pool_the_same_bits_at_any_thread_count(threads_restored, dtype, shape):
    s, a = _spd(*shape, dtype=dtype), _well_conditioned(*shape, dtype=dtype)
    b = RNG.standard_normal((*shape[:-1], 150)).astype(dtype)
    f = sprue.qjit(lambda s, a, b: (lax.linalg_cholesky(s), *lax.linalg_lu(a),
                                    lax.linalg_triangular_solve(a, b, lower=True),
                                    lax.linalg_triangular_solve(a, b, lower=False, transpose_a=True)))
    chol, packed, perm, swaps, lower_x, upper_x = _same_bits_each_thread_count(f, s, a, b)
    _close(chol, np.linalg.cholesky(s), dtype)
    _check_lu(a, packed, perm, swaps, dtype)
    _close(lower_x, _triangular_reference(a, b, True, False, False), dtype)
    _close(upper_x, _triangular_reference(a, b, False, True, False), dtype)
