"""Tangents and cotangents are typed as in JAX (issue 22): a tangent has its primal's shape and dtype
(float0 for an integer or boolean primal), a cotangent its output's; a Python int is not the
tangent of a float, and a Python float (float64) not that of a float32. jax.jvp raises TypeError for
each of these (checked against jax 0.10.2 with x64 on, by hand); sprue raises SprueTypeError (a
TypeError) saying which leaf, both types, the user's line and what to write instead."""
import numpy as np
import pytest

import sprue
import sprue.numpy as jnp


def cube(x):
    return x * x * x


def scaled(x, n):
    return jnp.sin(x) * n


X = np.linspace(-1.0, 1.0, 5)


@pytest.mark.parametrize("how", ["eager", "qjit'd function", "inside qjit"])
def test_an_int_tangent_of_a_float_primal_is_a_type_error(how):
    msg = (r"jvp: tangent 0 has type i64\[\] but its primal is f64\[\]: a tangent must have its primal's shape"
           r" and dtype \(at .*test_tangent_types\.py:\d+ .*; write the tangent as a Python float or np\.float64")
    with pytest.raises(TypeError, match=msg):
        if how == "eager":
            sprue.jvp(cube, (1.0,), (1,))
        elif how == "qjit'd function":
            sprue.jvp(sprue.qjit(cube), (1.0,), (1,))
        else:
            sprue.qjit(lambda x: sprue.jvp(cube, (x,), (1,)))(1.0)


def test_a_tangent_of_another_float_dtype_is_a_type_error():
    with pytest.raises(sprue.SprueTypeError, match=r"tangent 0 has type f32\[5\] but its primal is f64\[5\].*"
                                                   r"np\.asarray\(t, np\.float64\)"):
        sprue.jvp(cube, (X,), (X.astype(np.float32),))
    with pytest.raises(sprue.SprueTypeError, match=r"tangent 0 has type f64\[\] but its primal is f32\[\].*"
                                                   r"np\.float32\(t\)"):
        sprue.jvp(cube, (np.float32(2.0),), (1.0,))


def test_an_integer_primal_takes_a_float0_tangent():
    with pytest.raises(sprue.SprueTypeError, match=r"tangent 1 has type i64\[\] but its primal is i64\[\]: .*"
                                                   r"\(sprue\.float0 for an integer or boolean primal, as in JAX\).*"
                                                   r"np\.zeros\(\(\), sprue\.float0\)"):
        sprue.jvp(scaled, (X, 3), (np.ones(5), 0))
    t = np.cos(X) * 3 * 0.5
    for jvp_of in (lambda: sprue.jvp(scaled, (X, 3), (np.full(5, 0.5), np.zeros((), sprue.float0))),
                   lambda: sprue.jvp(sprue.qjit(scaled), (X, 3), (np.full(5, 0.5), np.zeros((), sprue.float0))),
                   lambda: sprue.qjit(lambda x: sprue.jvp(scaled, (x, 3), (np.full(5, 0.5),
                                                                         np.zeros((), sprue.float0))))(X)):
        out, tangent = jvp_of()
        np.testing.assert_allclose(out, np.sin(X) * 3, rtol=1e-14)
        np.testing.assert_allclose(tangent, t, rtol=1e-14)
    assert sprue.float0 == np.dtype([("float0", np.void, 0)])


def test_a_python_float_tangent_of_a_float64_primal_is_accepted():
    out, tangent = sprue.jvp(cube, (2.0,), (0.5,))
    assert (out, tangent) == (8.0, 3 * 4.0 * 0.5)


@pytest.mark.parametrize("how", ["eager", "qjit'd function", "inside qjit"])
def test_an_int_cotangent_of_a_float_output_is_a_type_error(how):
    msg = (r"vjp_fn: cotangent 0 has type i64\[\] but the function's output is f64\[\]: a cotangent must have"
           r" its output's shape and dtype \(at .*test_tangent_types\.py:\d+ .*; write it as a Python float")
    with pytest.raises(TypeError, match=msg):
        if how == "eager":
            sprue.vjp(cube, 2.0)[1](1)
        elif how == "qjit'd function":
            sprue.vjp(sprue.qjit(cube), 2.0)[1](1)
        else:
            sprue.qjit(lambda x: sprue.vjp(cube, x)[1](1))(2.0)


def test_cotangent_dtypes_and_shapes():
    with pytest.raises(sprue.SprueTypeError, match=r"cotangent 0 has type f64\[\] but the function's output is"
                                                   r" f32\[\].*np\.float32\(t\)"):
        sprue.vjp(cube, np.float32(2.0))[1](1.0)
    with pytest.raises(sprue.SprueTypeError, match=r"cotangent 0 has type f64\[3\] but the function's output is"
                                                   r" f64\[5\]"):
        sprue.vjp(cube, X)[1](np.ones(3))
    (g,) = sprue.vjp(cube, X)[1](np.full(5, 2.0))
    np.testing.assert_allclose(g, 3 * X * X * 2.0, rtol=1e-14)
    (g,) = sprue.vjp(cube, np.float32(2.0))[1](np.float32(1.0))
    assert g.dtype == np.float32 and g == np.float32(12.0)


def test_an_integer_output_takes_any_cotangent_of_its_shape():
    # JAX's vjp accepts float0 or (its "temporary exception") any dtype for an integer output
    def f(x, n):
        return x * 2.0, n + 1

    x = np.arange(3.0)
    for ct_n in (np.zeros((), sprue.float0), 0, np.zeros((), np.int32)):
        gx, gn = sprue.vjp(f, x, 4)[1]((np.ones(3), ct_n))
        np.testing.assert_array_equal(gx, np.full(3, 2.0))
        assert np.asarray(gn).dtype == np.int64 and gn == 0
    with pytest.raises(sprue.SprueTypeError, match=r"cotangent 1 has type i64\[2\] but the function's output is"
                                                   r" i64\[\]"):
        sprue.vjp(f, x, 4)[1]((np.ones(3), np.zeros(2, np.int64)))
