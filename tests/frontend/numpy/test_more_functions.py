"""numpy functions added for jax.numpy's coverage (issue 18 item 6, frontend/numpy/_more.py): each
against numpy on the same values, eagerly and compiled (qjit); jax.numpy's static-length rules
where numpy's sizes depend on values (bincount's length)."""
import numpy as np
import pytest

import sprue
import sprue.numpy as jnp

rng = np.random.default_rng(3)
x5 = rng.normal(size=5)
m34 = rng.normal(size=(3, 4))
m44 = rng.normal(size=(4, 4))
v3a, v3b = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
ints = rng.integers(0, 7, 20)
sorted10 = np.sort(rng.normal(size=10))
phases = np.cumsum(rng.uniform(-4, 4, 12))

# name -> (function of the namespace, arguments); compared with the same call on numpy
CASES = {
    "diff": (lambda N, a: N.diff(a), (m34,)),
    "diff_n2_axis0_prepend": (lambda N, a: N.diff(a, n=2, axis=0, prepend=0.5), (m34,)),
    "diff_bool": (lambda N, a: N.diff(a > 0), (x5,)),
    "ediff1d": (lambda N, a: N.ediff1d(a, to_begin=[9.0], to_end=[-1.0, 2.0]), (x5,)),
    "cross3": (lambda N, a, b: N.cross(a, b), (v3a, v3b)),
    "cross2": (lambda N, a, b: N.cross(a, b), (v3a[:, :2], v3b[:, :2])),
    "average": (lambda N, a: N.average(a, axis=1), (m34,)),
    "average_weights": (lambda N, a, w: N.average(a, axis=1, weights=w), (m34, np.arange(1.0, 5.0))),
    "cov": (lambda N, a: N.cov(a), (m34,)),
    "cov_cols_bias": (lambda N, a: N.cov(a, rowvar=False, bias=True), (m34,)),
    "corrcoef": (lambda N, a: N.corrcoef(a), (m34,)),
    "sinc": (lambda N, a: N.sinc(a), (np.array([0.0, 0.5, -1.25, 3.0]),)),
    "logaddexp2": (lambda N, a, b: N.logaddexp2(a, b), (x5, x5[::-1])),
    "fabs": (lambda N, a: N.fabs(a), (np.array([-3, 2, 0]),)),
    "rot90": (lambda N, a: N.rot90(a), (m34,)),
    "rot90_k3": (lambda N, a: N.rot90(a, 3), (m34,)),
    "rot90_k2_axes": (lambda N, a: N.rot90(a, 2, axes=(1, 0)), (m34,)),
    "rollaxis": (lambda N, a: N.rollaxis(a, 2, 0), (rng.normal(size=(2, 3, 4)),)),
    "diagflat": (lambda N, a: N.diagflat(a, 1), (x5,)),
    "vander": (lambda N, a: N.vander(a, 4), (x5,)),
    "vander_increasing": (lambda N, a: N.vander(a, increasing=True), (x5,)),
    "polyval": (lambda N, p, a: N.polyval(p, a), (np.array([2.0, -1.0, 0.5]), x5)),
    "polyadd": (lambda N, p, q: N.polyadd(p, q), (np.array([1.0, 2.0]), np.array([3.0, 4.0, 5.0]))),
    "polysub": (lambda N, p, q: N.polysub(p, q), (np.array([1.0, 2.0]), np.array([3.0, 4.0, 5.0]))),
    "polymul": (lambda N, p, q: N.polymul(p, q), (np.array([1.0, 2.0]), np.array([3.0, 4.0, 5.0]))),
    "polyder": (lambda N, p: N.polyder(p, 2), (np.array([1.0, 2.0, 3.0, 4.0]),)),
    "polyint": (lambda N, p: N.polyint(p, 2, k=[1.0, 2.0]), (np.array([1.0, 2.0, 3.0]),)),
    "trapezoid": (lambda N, a: N.trapezoid(a, dx=0.5), (m34,)),
    "trapezoid_x": (lambda N, a, t: N.trapezoid(a, t), (m34, np.array([0.0, 0.5, 1.5, 3.0]))),
    "searchsorted": (lambda N, a, v: N.searchsorted(a, v), (sorted10, np.r_[x5, sorted10[3], -9, 9])),
    "searchsorted_right": (lambda N, a, v: N.searchsorted(a, v, side="right"), (sorted10, np.r_[x5, sorted10[3]])),
    "digitize": (lambda N, a, b: N.digitize(a, b), (x5, np.array([-1.0, 0.0, 1.0]))),
    "digitize_right_decreasing": (lambda N, a, b: N.digitize(a, b, right=True), (x5, np.array([1.0, 0.0, -1.0]))),
    "interp": (lambda N, a, xp, fp: N.interp(a, xp, fp), (np.linspace(-1, 5, 13), np.array([0.0, 1.0, 3.0]), np.array([1.0, -1.0, 2.0]))),
    "interp_left_right": (lambda N, a, xp, fp: N.interp(a, xp, fp, left=-9.0, right=9.0),
                          (np.linspace(-1, 5, 13), np.array([0.0, 1.0, 3.0]), np.array([1.0, -1.0, 2.0]))),
    "bincount": (lambda N, a: N.bincount(a, length=9), (ints,)),
    "bincount_weights": (lambda N, a, w: N.bincount(a, w, length=7), (ints, rng.normal(size=20))),
    "histogram": (lambda N, a: N.histogram(a, 4), (rng.normal(size=50),)),
    "histogram_range_weights": (lambda N, a, w: N.histogram(a, 5, range=(-1.0, 1.0), weights=w),
                                (rng.normal(size=50), rng.uniform(size=50))),
    "histogram_density": (lambda N, a: N.histogram(a, 3, density=True), (rng.normal(size=30),)),
    "isin": (lambda N, a, t: N.isin(a, t), (ints, np.array([1, 3, 5]))),
    "isin_invert": (lambda N, a, t: N.isin(a, t, invert=True), (ints, np.array([1, 3, 5]))),
    "select": (lambda N, a: N.select([a < -0.5, a > 0.5], [a * 10, a * 100], default=-1.0), (x5,)),
    "choose": (lambda N, i, a, b: N.choose(i, [a, b]), (np.array([0, 1, 1, 0, 1]), x5, -x5)),
    "ldexp": (lambda N, a, e: N.ldexp(a, e), (x5, np.array([0, 1, -2, 3, 4]))),
    "frexp": (lambda N, a: N.frexp(a), (np.array([0.0, 1.0, -3.5, 1e-300, 7e300, 0.75]),)),
    "modf": (lambda N, a: N.modf(a), (np.array([2.5, -3.75, 0.0, 7.0]),)),
    "isneginf": (lambda N, a: N.isneginf(a), (np.array([-np.inf, np.inf, 0.0, np.nan]),)),
    "isposinf": (lambda N, a: N.isposinf(a), (np.array([-np.inf, np.inf, 0.0, np.nan]),)),
    "unravel_index": (lambda N, i: N.unravel_index(i, (3, 4, 5)), (np.array([0, 7, 59, 33]),)),
    "ravel_multi_index": (lambda N, i, j: N.ravel_multi_index((i, j), (3, 4)), (np.array([0, 2, 1]), np.array([3, 0, 2]))),
    "geomspace": (lambda N: N.geomspace(1.0, 1000.0, 4), ()),
    "bartlett": (lambda N: N.bartlett(7), ()),
    "blackman": (lambda N: N.blackman(6), ()),
    "hamming": (lambda N: N.hamming(5), ()),
    "hanning": (lambda N: N.hanning(8), ()),
    "append": (lambda N, a, b: N.append(a, b), (m34, x5)),
    "append_axis": (lambda N, a: N.append(a, a, axis=0), (m34,)),
    "hsplit": (lambda N, a: N.hsplit(a, 2), (m34,)),
    "vsplit": (lambda N, a: N.vsplit(a, [1]), (m34,)),
    "array_equiv": (lambda N, a: N.array_equiv(a, a[:1]), (np.ones((3, 4)),)),
    "matvec": (lambda N, a, v: N.matvec(a, v), (m34, rng.normal(size=4))),
    "vecmat": (lambda N, v, a: N.vecmat(v, a), (rng.normal(size=3), m34)),
    "gcd": (lambda N, a, b: N.gcd(a, b), (np.array([12, 18, 0, -21, 7]), np.array([8, 27, 5, 14, 0]))),
    "lcm": (lambda N, a, b: N.lcm(a, b), (np.array([12, 18, 0, -21, 7]), np.array([8, 27, 5, 14, 3]))),
    "block": (lambda N, a, b: N.block([[a, b], [b, a]]), (np.ones((2, 2)), np.zeros((2, 2)))),
    "gradient": (lambda N, a: N.gradient(a), (rng.normal(size=(4, 5)),)),
    "gradient_spacing_axis": (lambda N, a: N.gradient(a, 0.5, axis=1), (rng.normal(size=(4, 5)),)),
    "unwrap": (lambda N, p: N.unwrap(p), (np.mod(phases, 2 * np.pi),)),
    "insert": (lambda N, a: N.insert(a, 2, 9.0), (x5,)),
    "insert_axis": (lambda N, a: N.insert(a, 1, 0.5, axis=1), (m34,)),
    "delete": (lambda N, a: N.delete(a, [0, 3]), (x5,)),
    "delete_axis": (lambda N, a: N.delete(a, 1, axis=0), (m34,)),
    "resize": (lambda N, a: N.resize(a, (3, 7)), (x5,)),
    "piecewise": (lambda N, a: N.piecewise(a, [a < 0, a > 1], [lambda v: -v, lambda v: v * 2, 0.5]), (x5,)),
    "ix_": (lambda N, a: a[N.ix_(np.array([0, 2]), np.array([1, 3]))], (m34,)),
    "tril_indices": (lambda N, a: a[N.tril_indices(4, -1)], (m44,)),
    "triu_indices_from": (lambda N, a: a[N.triu_indices_from(a, 1)], (m34,)),
    "diag_indices_from": (lambda N, a: a[N.diag_indices_from(a)], (m44,)),
}


def _check(got, want):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _check(g, w)
        return
    want = np.asarray(want)
    got = np.asarray(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    else:
        np.testing.assert_array_equal(got, want)


def _numpy_reference(name, f, args):
    if name.startswith("bincount"):   # (numpy's length: the largest value + 1, at least minlength)
        return np.bincount(*args, minlength={"bincount": 9, "bincount_weights": 7}[name])
    return f(np, *args)


@pytest.mark.parametrize("name", list(CASES))
def test_against_numpy_eager_and_compiled(name):
    f, args = CASES[name]
    want = _numpy_reference(name, f, args)
    _check(f(jnp, *args), want)
    _check(sprue.qjit(lambda *a: f(jnp, *a))(*args), want)


def test_fill_diagonal_and_put_return_new_arrays():
    a = m44.copy()
    want = a.copy()
    np.fill_diagonal(want, 7.0)
    _check(sprue.qjit(lambda v: jnp.fill_diagonal(v, 7.0, inplace=False))(a), want)
    want = a.copy()
    np.put(want, [0, 5, -1], [1.0, 2.0, 3.0])
    _check(sprue.qjit(lambda v: jnp.put(v, np.array([0, 5, -1]), np.array([1.0, 2.0, 3.0]), inplace=False))(a), want)
    with pytest.raises(sprue.SprueValueError, match="sprue arrays are immutable: pass inplace=False"):
        jnp.fill_diagonal(a, 1.0)


def test_bincount_needs_a_static_length_when_traced():
    with pytest.raises(sprue.SprueValueError, match="inside qjit the result's length must be static: pass length="):
        sprue.qjit(lambda v: jnp.bincount(v))(ints)
    _check(jnp.bincount(ints), np.bincount(ints))   # eagerly numpy's length


def test_apply_along_axis_and_vectorize_map_with_vmap():
    a = rng.normal(size=(2, 3, 4))
    for axis in (0, 1, 2, -1):
        want = np.apply_along_axis(lambda v: v.sum() * v, axis, a)
        _check(jnp.apply_along_axis(lambda v: v.sum() * v, axis, a), want)
        _check(sprue.qjit(lambda x: jnp.apply_along_axis(lambda v: jnp.sum(v) * v, axis, x))(a), want)
    _check(sprue.qjit(lambda x: jnp.apply_along_axis(jnp.sort, 2, x))(a), np.apply_along_axis(np.sort, 2, a))
    step = jnp.vectorize(lambda x, y: jnp.where(x > y, x - y, x + y))
    want = np.vectorize(lambda x, y: x - y if x > y else x + y)(np.arange(4.0)[:, None], np.arange(3.0))
    _check(sprue.qjit(step)(np.arange(4.0)[:, None], np.arange(3.0)), want)
    matvec = jnp.vectorize(lambda m, v: m @ v, signature="(n,n),(n)->(n)")
    M, V = rng.normal(size=(5, 3, 3)), rng.normal(size=(3,))
    _check(sprue.qjit(matvec)(M, V), np.einsum("bij,j->bi", M, V))
    with pytest.raises(sprue.SprueValueError, match="not a valid gufunc signature"):
        jnp.vectorize(lambda v: v, signature="(n->()")


def _f32(x):
    return x.astype(np.float32) if isinstance(x, np.ndarray) and x.dtype == np.float64 else x


FLOAT_CASES = [n for n, (_, args) in CASES.items() if any(isinstance(a, np.ndarray) and a.dtype == np.float64 for a in args)]


# where numpy computes in float64 whatever the input (its C loops), sprue keeps float32 as jax.numpy does
JAX_DTYPE = {"cov", "cov_cols_bias", "corrcoef", "interp", "interp_left_right", "bincount_weights", "vander",
             "vander_increasing", "histogram_density"}


@pytest.mark.parametrize("name", FLOAT_CASES)
def test_float32_against_numpy(name):
    """The same calls on float32 data: numpy's values to float32 rounding, and numpy's result dtype
    (jax.numpy's float32 where numpy's C code computes in float64: JAX_DTYPE)."""
    f, args = CASES[name]
    args = tuple(_f32(a) for a in args)
    want = _numpy_reference(name, f, args)
    got = sprue.qjit(lambda *a: f(jnp, *a))(*args)

    def close(g, w):
        if isinstance(w, (tuple, list)):
            for gi, wi in zip(g, w):
                close(gi, wi)
            return
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype == (np.float32 if name in JAX_DTYPE and w.dtype == np.float64 else w.dtype), (g.dtype, w.dtype)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5 * max(1.0, float(np.abs(w).max(initial=0))))
        else:
            np.testing.assert_array_equal(g, w)
    close(got, want)
