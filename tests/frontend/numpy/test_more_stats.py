"""numpy's sorting-based functions added for jax.numpy's coverage (issue 18 item 6,
frontend/numpy/_more_stats.py), against numpy eagerly and compiled: quantiles, NaN-skipping
reductions, unique and the set operations (a run-time size inside qjit, or `size=` padded),
bit packing, multi-dimensional histograms."""
import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from tests.frontend.numpy.test_more_functions import _check

rng = np.random.default_rng(5)
m = rng.normal(size=(4, 7))
withnan = m.copy()
withnan[1, 2] = withnan[3, 0] = np.nan
withnan[2, :] = np.nan
vals = np.array([3.0, 1.0, 2.0, 3.0, 1.0, 7.0, 2.0, 2.0])
ints = rng.integers(0, 9, 15)

CASES = {
    "median": (lambda N, a: N.median(a), (m,)),
    "median_axis_keepdims": (lambda N, a: N.median(a, axis=1, keepdims=True), (m,)),
    "quantile": (lambda N, a: N.quantile(a, [0.1, 0.5, 0.9], axis=0), (m,)),
    "quantile_methods": (lambda N, a: [N.quantile(a, 0.3, method=k) for k in ("lower", "higher", "nearest", "midpoint")], (m,)),
    "percentile": (lambda N, a: N.percentile(a, 75, axis=1), (m,)),
    "median_nan_propagates": (lambda N, a: N.median(a, axis=1), (withnan,)),
    "nanmedian": (lambda N, a: N.nanmedian(a[:2], axis=1), (withnan,)),
    "nanquantile": (lambda N, a: N.nanquantile(a[:2], [0.2, 0.8], axis=1), (withnan,)),
    "nanpercentile": (lambda N, a: N.nanpercentile(a[:2], 40), (withnan,)),
    "nanargmax": (lambda N, a: N.nanargmax(a[:2], axis=1), (withnan,)),
    "nanargmin": (lambda N, a: N.nanargmin(a), (withnan,)),
    "nancumsum": (lambda N, a: N.nancumsum(a, axis=1), (withnan,)),
    "nancumprod": (lambda N, a: N.nancumprod(a[:, :3], axis=0), (withnan,)),
    "nanvar": (lambda N, a: N.nanvar(a[:2], axis=1), (withnan,)),
    "nanstd_ddof": (lambda N, a: N.nanstd(a[:2], ddof=1), (withnan,)),
    "lexsort": (lambda N, a, b: N.lexsort((a, b)), (ints, ints % 3)),
    "unique_size": (lambda N, a: N.unique(a, size=6, fill_value=-1.0), (vals,)),
    "unique_counts_index_inverse_size": (lambda N, a: N.unique(a, return_index=True, return_inverse=True, return_counts=True,
                                                               size=4), (vals,)),
    "union1d_size": (lambda N, a, b: N.union1d(a, b, size=7, fill_value=0), (ints[:5], ints[5:9])),
    "setdiff1d_size": (lambda N, a, b: N.setdiff1d(a, b, size=3, fill_value=0), (np.array([5, 1, 3, 9, 1]), np.array([1, 2, 9]))),
    "intersect1d_size": (lambda N, a, b: N.intersect1d(a, b, size=2), (np.array([5, 1, 3, 9, 1]), np.array([1, 2, 9]))),
    "bitwise_count": (lambda N, a: N.bitwise_count(a), (np.array([0, 1, 7, 255, 256, -3], np.int32),)),
    "packbits": (lambda N, a: N.packbits(a), (rng.integers(0, 2, 13),)),
    "packbits_axis_little": (lambda N, a: N.packbits(a, axis=1, bitorder="little"), (rng.integers(0, 2, (3, 10)),)),
    "unpackbits": (lambda N, a: N.unpackbits(a), (np.array([3, 255, 128], np.uint8),)),
    "unpackbits_count": (lambda N, a: N.unpackbits(a, count=11, bitorder="little"), (np.array([3, 255, 128], np.uint8),)),
    "apply_over_axes": (lambda N, a: N.apply_over_axes(N.sum, a, [0, 1]), (m,)),
    "histogram2d": (lambda N, a, b: N.histogram2d(a, b, bins=3), (rng.normal(size=40), rng.normal(size=40))),
    "histogramdd": (lambda N, s: N.histogramdd(s, bins=(2, 3), range=[(-1, 1), (-2, 2)]), (rng.normal(size=(30, 2)),)),
    "mgrid": (lambda N: N.mgrid[0:3, 0:4], ()),
    "ogrid": (lambda N: N.ogrid[0:3, 0:2], ()),
}
# numpy's own spelling where jax.numpy's differs (size=, fill_value=): trimmed or padded like it
NUMPY = {
    "unique_size": lambda a: np.concatenate([np.unique(a), [-1.0, -1.0]]),
    "unique_counts_index_inverse_size": lambda a: np.unique(a, return_index=True, return_inverse=True, return_counts=True),
    "union1d_size": lambda a, b: np.pad(np.union1d(a, b), (0, 7 - len(np.union1d(a, b)))),
    "setdiff1d_size": lambda a, b: np.pad(np.setdiff1d(a, b), (0, 1)),
    "intersect1d_size": lambda a, b: np.intersect1d(a, b),
}


@pytest.mark.parametrize("name", list(CASES))
def test_against_numpy_eager_and_compiled(name):
    f, args = CASES[name]
    want = NUMPY[name](*args) if name in NUMPY else f(np, *args)
    _check(f(jnp, *args), want)
    if name not in ("mgrid", "ogrid"):
        _check(sprue.qjit(lambda *a: f(jnp, *a))(*args), want)


def test_partition_is_a_valid_partition():
    a = rng.normal(size=(3, 9))
    for k in (0, 4, 8):
        p = sprue.qjit(lambda v: jnp.partition(v, k, axis=1))(a)
        i = sprue.qjit(lambda v: jnp.argpartition(v, k, axis=1))(a)
        np.testing.assert_array_equal(p[:, k], np.partition(a, k, axis=1)[:, k])
        assert (p[:, :k] <= p[:, k:k + 1]).all() and (p[:, k + 1:] >= p[:, k:k + 1]).all()
        np.testing.assert_array_equal(np.take_along_axis(a, i, axis=1)[:, k], p[:, k])


def test_unique_without_size_has_a_run_time_size_inside_qjit():
    f = sprue.qjit(lambda v: jnp.unique(v, return_counts=True), abstracted_axes={0: "n"})
    for a in (vals, ints, np.array([4.0])):
        got = f(a)
        want = np.unique(a, return_counts=True)
        _check(got, want)
    assert f.compile_count <= 2   # (f64 and i64)


def test_setxor_and_trim_zeros_run_time_sizes():
    a, b = np.array([1, 2, 2, 5, 7]), np.array([2, 3, 7, 8])
    _check(sprue.qjit(jnp.setxor1d)(a, b), np.setxor1d(a, b))
    z = np.array([0.0, 0.0, 1.5, 0.0, 2.0, 0.0])
    for trim in ("fb", "f", "b"):
        _check(sprue.qjit(lambda v: jnp.trim_zeros(v, trim))(z), np.trim_zeros(z, trim))


def test_eager_only_helpers():
    assert jnp.array_str(m) == np.array_str(m) and jnp.array_repr(m) == np.array_repr(m)
    assert jnp.einsum_path("ij,jk->ik", m, m.T)[0] == np.einsum_path("ij,jk->ik", m, m.T)[0]
    assert jnp.ComplexWarning is np.exceptions.ComplexWarning


def test_polyfit_matches_numpy():
    x = np.linspace(-1, 2, 12)
    y = 1.5 * x ** 3 - x + 0.25 + 0.01 * rng.normal(size=12)
    for deg in (1, 3):
        _check(sprue.qjit(lambda a, b: jnp.polyfit(a, b, deg))(x, y), np.polyfit(x, y, deg))
    w = rng.uniform(0.5, 2.0, 12)
    _check(jnp.polyfit(x, np.stack([y, 2 * y], axis=1), 2, w=w), np.polyfit(x, np.stack([y, 2 * y], axis=1), 2, w=w))


PAD_CASES = [((2, 3), "constant", {}), (((1, 2), (0, 3)), "constant", {"constant_values": ((7, 8), (9, 1))}),
             (2, "edge", {}), (5, "wrap", {}), (5, "reflect", {}), (2, "reflect", {"reflect_type": "odd"}),
             (5, "symmetric", {}), (3, "symmetric", {"reflect_type": "odd"}),
             ((2, 3), "linear_ramp", {"end_values": (5, -2)}), (2, "maximum", {}), (2, "mean", {"stat_length": 2}),
             (2, "median", {}), (1, "minimum", {"stat_length": ((1, 2), (3, 1))})]


@pytest.mark.parametrize("width,mode,kwargs", PAD_CASES, ids=[f"{m}{i}" for i, (_, m, _) in enumerate(PAD_CASES)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_pad_every_mode_against_numpy(width, mode, kwargs, dtype):
    a = (np.arange(12) * 1.5 - 4).reshape(3, 4).astype(dtype)
    want = np.pad(a, width, mode, **kwargs)
    for got in (jnp.pad(a, width, mode, **kwargs), sprue.qjit(lambda v: jnp.pad(v, width, mode, **kwargs))(a)):
        got = np.asarray(got)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-12, atol=0)


def test_pad_refuses_what_it_cannot_do():
    with pytest.raises(sprue.SprueValueError, match="mode 'foo' is not supported"):
        jnp.pad(np.ones(3), 1, "foo")
    with pytest.raises(sprue.SprueValueError, match="pad_width must be non-negative static ints"):
        jnp.pad(np.ones(3), -1)


def test_bessel_window_spacing_poly_and_complex_sort():
    x = np.array([-3.0, -0.5, 0.0, 0.7, 4.0, 1e-300])
    for got in (jnp.i0(x), sprue.qjit(lambda v: jnp.i0(v))(x)):
        np.testing.assert_allclose(got, np.i0(x), rtol=1e-13)
    np.testing.assert_allclose(jnp.kaiser(9, 5.0), np.kaiser(9, 5.0), rtol=1e-13)
    np.testing.assert_array_equal(sprue.qjit(lambda v: jnp.nextafter(v, 10.0))(x), np.nextafter(x, 10.0))
    np.testing.assert_array_equal(sprue.qjit(lambda v: jnp.spacing(v))(x), np.spacing(x))
    np.testing.assert_array_equal(jnp.spacing(np.float32([1.0, -2.0])), np.spacing(np.float32([1.0, -2.0])))
    np.testing.assert_allclose(sprue.qjit(lambda r: jnp.poly(r))(np.array([1.0, 2.0, -3.0])), np.poly([1.0, 2.0, -3.0]))
    z = np.array([1 + 2j, 1 - 1j, -1 + 0j, 1 + 0j, -1 - 5j])
    np.testing.assert_array_equal(sprue.qjit(lambda v: jnp.sort_complex(v))(z), np.sort_complex(z))
    np.testing.assert_array_equal(jnp.sort_complex(np.array([3.0, 1.0, 2.0])), np.sort_complex(np.array([3.0, 1.0, 2.0])))
    for a, b in zip(jnp.mask_indices(4, np.triu, 1), np.mask_indices(4, np.triu, 1)):
        np.testing.assert_array_equal(a, b)
    assert jnp.cdouble is jnp.complex128 and jnp.csingle is jnp.complex64
