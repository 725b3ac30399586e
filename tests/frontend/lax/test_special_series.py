"""sprue.lax.zeta, polygamma and betainc (lax/special_series.py), compiled, against closed forms and
the functions' identities (no scipy in the test environment): zeta(2, 1) = pi^2/6 and
zeta(x, q) - zeta(x, q + 1) = q^-x; polygamma's recurrence and polygamma(0) = digamma;
I_x(a, 1) = x^a, I_x(1, b) = 1 - (1 - x)^b, I_x(2, 3) = 6x^2 - 8x^3 + 3x^4 and the symmetry
I_x(a, b) = 1 - I_(1-x)(b, a); the edges of their domains as JAX's (inf, nan, 0, 1)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import sprue
from sprue import lax


@sprue.qjit
def _zeta(x, q):
    return lax.zeta(x, q)


@sprue.qjit
def _polygamma(n, x):
    return lax.polygamma(n, x)


@sprue.qjit
def _betainc(a, b, x):
    return lax.betainc(a, b, x)


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 2e-6)])
def test_zeta_closed_forms_and_its_recurrence(dtype, rtol):
    x = np.array([2.0, 4.0, 3.5, 7.0], dtype)
    q = np.array([1.0, 1.0, 0.3, 2.5], dtype)
    got = _zeta(x, q)
    assert got.dtype == dtype
    np.testing.assert_allclose(got[:2], [math.pi ** 2 / 6, math.pi ** 4 / 90], rtol=rtol)
    np.testing.assert_allclose(got - _zeta(x, q + 1), q.astype(np.float64) ** -x, rtol=rtol * 10)
    edge = _zeta(np.array([1.0, 0.5, 2.0, 2.0], dtype), np.array([1.0, 1.0, -2.0, -1.5], dtype))
    assert edge[0] == np.inf and np.isnan(edge[1]) and edge[2] == np.inf and edge[3] > 0   # integer x, q < 0


def test_polygamma_recurrence_and_its_orders():
    x = np.array([0.4, 1.0, 2.7, 9.0])
    for n in (1, 2, 3):
        step = (-1) ** n * math.factorial(n) / x ** (n + 1)
        np.testing.assert_allclose(_polygamma(np.full(4, float(n)), x + 1), _polygamma(np.full(4, float(n)), x) + step,
                                   rtol=1e-10)
    np.testing.assert_allclose(_polygamma(np.ones(1), np.ones(1)), [math.pi ** 2 / 6], rtol=1e-12)
    np.testing.assert_allclose(_polygamma(np.zeros(4), x), np.asarray(sprue.qjit(lax.digamma)(x)), rtol=1e-12)
    assert np.isnan(_polygamma(np.array([1.5, -1.0]), np.array([2.0, 2.0]))).all()   # n not a natural number


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-10), (np.float32, 2e-5)])
def test_betainc_closed_forms_and_symmetry(dtype, rtol):
    x = np.array([0.05, 0.3, 0.5, 0.8, 0.97], dtype)
    a = np.array([0.5, 2.0, 3.5, 1.3, 9.0], dtype)
    ones = np.ones_like(x)
    np.testing.assert_allclose(_betainc(a, ones, x), x.astype(np.float64) ** a, rtol=rtol)
    np.testing.assert_allclose(_betainc(ones, a, x), 1 - (1 - x.astype(np.float64)) ** a, rtol=rtol)
    np.testing.assert_allclose(_betainc(np.full_like(x, 2), np.full_like(x, 3), x),
                               6 * x ** 2 - 8 * x ** 3 + 3 * x ** 4, rtol=rtol)
    b = a[::-1].copy()
    np.testing.assert_allclose(_betainc(a, b, x), 1 - _betainc(b, a, (1 - x).astype(dtype)), rtol=rtol * 50, atol=rtol)
    edge = _betainc(np.array([2.0, 2.0, 2.0, -1.0], dtype), np.array([3.0, 3.0, 3.0, 2.0], dtype),
                    np.array([0.0, 1.0, 1.5, 0.5], dtype))
    assert edge[0] == 0 and edge[1] == 1 and np.isnan(edge[2]) and np.isnan(edge[3])


def test_a_rank_0_order_beside_an_array():
    """JAX prints `polygamma 1.0:f32[] a`: the scalar is broadcast to the array's shape."""
    x = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_allclose(sprue.qjit(lambda x: lax.polygamma(np.float32(1.0), x))(x),
                               _polygamma(np.ones(3, np.float32), x), rtol=1e-6)
