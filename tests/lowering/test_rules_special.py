"""The special functions and bit operations (lax/special.py, lowering/rules_special.py), compiled
and compared with independent references: Python's math module (erf, erfc, lgamma), identities
(digamma's recurrence and known values, erf of erf_inv), numpy (nextafter, bitcasts) and Python's
integers (clz, popcount)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import sprue
from sprue import lax

EULER_GAMMA = 0.5772156649015329


def _compiled(f, *args):
    return np.asarray(sprue.qjit(f)(*args))


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-15), (np.float32, 1e-6)])
def test_erf_and_erfc_are_the_c_librarys(dtype, rtol):
    x = np.linspace(-6, 6, 241).astype(dtype)
    np.testing.assert_allclose(_compiled(lax.erf, x), [math.erf(v) for v in x.astype(float)], rtol=rtol, atol=1e-300)
    np.testing.assert_allclose(_compiled(lax.erfc, x), [math.erfc(v) for v in x.astype(float)], rtol=rtol * 4)


def test_lgamma_matches_math_lgamma_with_reflection_and_poles():
    x = np.concatenate([np.arange(-9.75, -0.2, 0.5), np.linspace(0.01, 40, 400), [1e5, 1e250]])
    want = np.array([math.lgamma(v) for v in x])
    np.testing.assert_allclose(_compiled(lax.lgamma, x), want, rtol=1e-12, atol=1e-13)
    got = _compiled(lax.lgamma, np.array([0.0, -1.0, -3.0, np.inf, -np.inf]))
    assert np.all(got == np.inf), got
    np.testing.assert_allclose(_compiled(lax.lgamma, x[:-1].astype(np.float32)), want[:-1].astype(np.float32), rtol=1e-6,
                               atol=1e-6)


def test_digamma_by_its_recurrence_known_values_and_lgammas_slope():
    x = np.concatenate([np.linspace(-7.7, -0.3, 20), np.linspace(0.05, 30, 200)])
    f = sprue.qjit(lax.digamma)
    np.testing.assert_allclose(np.asarray(f(x + 1)) - np.asarray(f(x)), 1 / x, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(f(np.array([1.0, 0.5])), [-EULER_GAMMA, -EULER_GAMMA - 2 * math.log(2)], rtol=1e-14)
    h = 1e-5
    slope = np.array([(math.lgamma(v + h) - math.lgamma(v - h)) / (2 * h) for v in x])
    np.testing.assert_allclose(f(x), slope, rtol=1e-6, atol=1e-6)
    assert np.all(np.isnan(np.asarray(f(np.array([0.0, -2.0])))))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_erf_inv_inverts_erf(dtype):
    x = np.concatenate([np.linspace(-0.999999, 0.999999, 301), [1e-300, -1e-8, 0.0]]).astype(dtype)
    y = _compiled(lax.erf_inv, x)
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose([math.erf(v) for v in y.astype(float)], x, rtol=4 * eps, atol=4 * eps)
    edges = _compiled(lax.erf_inv, np.array([1.0, -1.0, 1.5], dtype))
    assert edges[0] == np.inf and edges[1] == -np.inf and np.isnan(edges[2])


@pytest.mark.parametrize("compiled", [True, False])
def test_erf_inv_is_accurate_in_the_tails(compiled):
    """Near +-1 the answer is checked through erfc, which is well conditioned there: erfc(y) must
    give back 1 - |x| (exact in floating point) to a few ulps, which holds y to ~1e-15 relative
    (a y error d moves log erfc by ~2 y d). The single-precision polynomials with Newton steps on
    erf(y) = x stopped at ~1e-9 relative near 1 - 1e-10 and at 8% at 1 - 2^-52."""
    a = 1.0 - np.concatenate([np.geomspace(0.5, 1e-15, 80), [2.0 ** -52, 2.0 ** -53]])
    x = np.concatenate([a, -a])
    y = _compiled(lax.erf_inv, x) if compiled else np.asarray(lax.erf_inv(x))
    np.testing.assert_array_equal(np.sign(y), np.sign(x))
    back = np.array([math.erfc(abs(v)) for v in y.astype(float)])
    np.testing.assert_allclose(back, 1.0 - np.abs(x), rtol=1e-13)   # (1 - |x| exact: Sterbenz)


def test_derivatives_of_erf_lgamma_and_erf_inv():
    x = np.array([-1.5, 0.3, 2.0])
    np.testing.assert_allclose(sprue.vmap(sprue.grad(lax.erf))(x), 2 / np.sqrt(np.pi) * np.exp(-x * x), rtol=1e-14)
    np.testing.assert_allclose(sprue.vmap(sprue.grad(lax.lgamma))(np.array([2.5])), sprue.qjit(lax.digamma)(np.array([2.5])))
    u = np.array([-0.5, 0.1, 0.9])
    y = np.asarray(lax.erf_inv(u))
    np.testing.assert_allclose(sprue.vmap(sprue.grad(lax.erf_inv))(u), np.sqrt(np.pi) / 2 * np.exp(y * y), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_clz_and_population_count(dtype):
    info = np.iinfo(dtype)
    x = np.array([0, 1, 2, 3, 255 % (info.max + 1), info.max, info.min, 12345 % info.max], dtype)
    bits = np.dtype(dtype).itemsize * 8
    unsigned = [int(v) % (1 << bits) for v in x]
    assert _compiled(lax.clz, x).tolist() == [bits - v.bit_length() for v in unsigned]
    assert _compiled(lax.population_count, x).tolist() == [bin(v).count("1") for v in unsigned]


def test_bitcast_convert_type_reads_the_same_bits():
    x = np.array([1.0, -0.0, np.inf, 3.5e-310, np.nan], np.float64)
    np.testing.assert_array_equal(_compiled(lambda v: lax.bitcast_convert_type(v, np.int64), x), x.view(np.int64))
    i = np.array([0x3F800000, -1, 1], np.int32)
    np.testing.assert_array_equal(_compiled(lambda v: lax.bitcast_convert_type(v, np.float32), i), i.view(np.float32))
    with pytest.raises(sprue.errors.SprueTypeError, match="changes the width"):
        sprue.make_jaxpr(lambda v: lax.bitcast_convert_type(v, np.int32))(x)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nextafter_is_numpys(dtype):
    tiny = np.finfo(dtype).smallest_subnormal
    x = np.array([1.0, 1.0, -1.0, -1.0, 0.0, -0.0, 0.0, 2.0, np.nan, 1.0, np.inf, tiny, -tiny, np.finfo(dtype).max],
                 dtype)
    y = np.array([2.0, 0.0, -2.0, 0.0, 1.0, -1.0, -0.0, 2.0, 1.0, np.nan, 0.0, 0.0, 0.0, np.inf], dtype)
    got = _compiled(lax.nextafter, x, y)
    with np.errstate(over="ignore"):
        want = np.nextafter(x, y)
    np.testing.assert_array_equal(got.view(f"i{np.dtype(dtype).itemsize}")[~np.isnan(want)],
                                  want.view(f"i{np.dtype(dtype).itemsize}")[~np.isnan(want)])
    assert np.array_equal(np.isnan(got), np.isnan(want))


@pytest.mark.parametrize("f", [lax.erf, lax.erfc, lax.erf_inv, lax.lgamma, lax.digamma])
def test_numpy_references_agree_with_the_compiled_code(f):
    """Outside qjit the primitives run their numpy references (lax/special.py)."""
    x = np.array([-0.9, -0.3, 0.2, 0.7, 2.5 if f not in (lax.erf_inv,) else 0.95])
    np.testing.assert_allclose(f(x), _compiled(f, x), rtol=1e-13)


def test_digamma_derivative_is_trigamma():
    """d/dx digamma by central differences of the compiled digamma, and trigamma(1) = pi^2/6."""
    x = np.array([-2.5, -0.7, 0.3, 1.0, 2.2, 7.5, 40.0])
    slope = sprue.vmap(sprue.grad(lax.digamma))(x)
    h = 1e-5
    f = sprue.qjit(lax.digamma)
    np.testing.assert_allclose(slope, (np.asarray(f(x + h)) - np.asarray(f(x - h))) / (2 * h), rtol=1e-6)
    np.testing.assert_allclose(sprue.grad(lax.digamma)(1.0), np.pi ** 2 / 6, rtol=1e-10)


def test_nextafter_of_an_array_and_a_scalar():
    """A rank-0 operand beside an array (sprue's rule allows it, as add's does) is broadcast."""
    x = np.array([1.0, -2.0, 0.0, np.inf], np.float32)
    towards = sprue.qjit(lambda v: lax.nextafter(v, np.float32(0)))(x)
    away = sprue.qjit(lambda v: lax.nextafter(np.float32(0), v))(x)
    np.testing.assert_array_equal(towards, np.nextafter(x, np.float32(0)))
    np.testing.assert_array_equal(away, np.nextafter(np.float32(0), x))
