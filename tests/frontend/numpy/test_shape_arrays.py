"""Shapes given as 1-D integer arrays (Catalyst's dynamic arrays, issue 22): `zeros(jnp.array([2, 1,
3]))`, `ones(shape_array)`, `empty`, `full`, eager and compiled, against numpy (which takes such arrays
too). A traced shape array makes each entry a run-time size: one compilation for every shape of its
rank; a constant one (numpy's, or jnp.array of Python ints inside the trace) gives static sizes.
Errors by their text."""
import numpy as np
import pytest

import sprue
import sprue.numpy as jnp

SHAPES = [np.array([2, 1, 3]), np.array([4]), np.array([0, 5]), np.array([3, 2], np.int32)]


def assert_same(got, want):
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_creation_from_a_shape_array_matches_numpy(shape):
    makers = [
        (lambda s: jnp.zeros(s), lambda s: np.zeros(s)),
        (lambda s: jnp.ones(s, np.int32), lambda s: np.ones(s, np.int32)),
        (lambda s: jnp.full(s, 2.5), lambda s: np.full(s, 2.5)),
        (lambda s: jnp.full(s, np.float32(-1.0), np.float32), lambda s: np.full(s, -1.0, np.float32)),
        (lambda s: jnp.empty(s) * 0.0, lambda s: np.zeros(s)),   # empty's contents are unspecified
    ]
    for ours, numpy_ref in makers:
        want = numpy_ref(shape)
        assert_same(ours(shape), want)                     # eager, a concrete shape array
        assert_same(sprue.qjit(ours)(shape), want)         # compiled, a traced shape array
        assert_same(ours(jnp.array(list(shape))), want)


def test_a_traced_shape_array_gives_run_time_sizes():
    @sprue.qjit
    def make(shape, v):
        return jnp.full(shape, v) + jnp.ones(shape)

    for shape in ([2, 3], [5, 1], [0, 4], [7, 7]):
        assert_same(make(np.array(shape), 1.5), np.full(shape, 2.5))
    assert make.compile_count == 1
    out_aval = make.jaxpr.jaxpr.outvars[0].aval
    assert all(not isinstance(d, int) for d in out_aval.shape), out_aval


def test_a_shape_array_made_in_the_trace_from_ints_is_static():
    @sprue.qjit
    def make():
        return jnp.zeros(jnp.array([2, 1, 3]))

    assert_same(make(), np.zeros((2, 1, 3)))
    assert make.jaxpr.jaxpr.outvars[0].aval.shape == (2, 1, 3)


def test_sizes_from_a_shape_array_work_with_the_arrays_they_make():
    @sprue.qjit
    def f(shape, x):
        z = jnp.zeros(shape) + 1.0
        return jnp.sum(z, axis=0) * x[0], z.shape[1]

    got, n = f(np.array([4, 3]), np.arange(3.0) + 1.0)
    np.testing.assert_allclose(got, np.full(3, 4.0))
    assert int(n) == 3


def test_errors():
    with pytest.raises(sprue.SprueTypeError, match=r"sprue.numpy.zeros: a shape given as an array must have an"
                                                   r" integer dtype, got f64\[2\].*test_shape_arrays\.py"):
        jnp.zeros(np.array([2.0, 3.0]))
    with pytest.raises(sprue.SprueTypeError, match=r"sprue.numpy.ones: a shape given as an array must be 1-D"
                                                   r" \(one size per axis\), got i64\[1,2\]"):
        sprue.qjit(lambda s: jnp.ones(s))(np.array([[1, 2]]))
    with pytest.raises(sprue.SprueTypeError, match=r"sprue.numpy.full: a shape given as an array must have a"
                                                   r" length known when tracing"):
        sprue.qjit(lambda s: jnp.full(s, 1.0), abstracted_axes={0: "n"})(np.array([1, 2]))
    with pytest.raises(sprue.SprueValueError, match=r"sprue.numpy.zeros: negative dimensions are not allowed"):
        jnp.zeros(np.array([2, -1]))
    with pytest.raises(sprue.SprueValueError, match=r"sprue.numpy.zeros: negative dimensions are not allowed \(a"
                                                    r" size given at run time is negative\)"):
        sprue.qjit(lambda s: jnp.zeros(s))(np.array([2, -1]))
    with pytest.raises(ValueError):   # numpy agrees
        np.zeros(np.array([2, -1]))
