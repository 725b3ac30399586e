"""Catalyst's `sprue.cond` (issue 22): branches returning int and bool, or bool and float, are
promoted to their common type; a float predicate means `pred != 0` (Catalyst's `astype(bool)`: NaN
is true), a one-element array is a scalar. Compiled and under grad and vmap; shapes and structures
that differ still raise with both types at the user's line. Outside any trace the branch taken runs
as plain Python (Catalyst's interpretation), so its value is returned as it is."""
import numpy as np
import pytest

import sprue
import sprue.numpy as jnp


def pick(pred, a, b):
    """Catalyst's cond on `pred`, returning a() or b()."""
    @sprue.cond(pred)
    def yes():
        return a()

    @yes.otherwise
    def no():
        return b()
    return yes()


@pytest.mark.parametrize("p", [True, False])
@pytest.mark.parametrize("a, b, dtype", [(lambda: 3, lambda: True, np.int64),
                                         (lambda: False, lambda: 2.5, np.float64),
                                         (lambda: np.int32(7), lambda: np.True_, np.int32),
                                         (lambda: np.float32(1.5), lambda: np.int64(4), np.float64)])
def test_branches_of_different_kinds_are_promoted(p, a, b, dtype):
    taken = a() if p else b()
    want = np.asarray(taken).astype(dtype)
    got = sprue.qjit(lambda p: pick(p, a, b))(p)
    assert np.asarray(got).dtype == dtype and got == want
    interpreted = pick(p, a, b)      # outside any trace: the branch's own value, as Catalyst returns it
    assert type(interpreted) is type(taken) and interpreted == taken


def test_catalysts_documented_example():
    """From Catalyst's cond docstring: `x ** 2` against `6` gives a float64 6.0."""
    @sprue.qjit
    def f(x: float):
        @sprue.cond(x > 1.5)
        def cond_fn():
            return x ** 2

        @cond_fn.otherwise
        def else_branch():
            return 6
        return cond_fn()

    assert f(1.5) == 6.0 and np.asarray(f(1.5)).dtype == np.float64
    assert f(2.0) == 4.0


@pytest.mark.parametrize("p", [0.0, -0.0, 0.25, -3.0, np.nan, np.inf, np.float32(0.0), np.float32(2.0)])
def test_float_predicates_mean_nonzero(p):
    x = np.linspace(-1.0, 1.0, 5)
    want = x * 2.0 if bool(p != 0) or np.isnan(p) else x - 1.0

    def f(p, x):
        return pick(p, lambda: x * 2.0, lambda: x - 1.0)
    np.testing.assert_allclose(f(p, x), want, rtol=1e-15)
    np.testing.assert_allclose(sprue.qjit(f)(p, x), want, rtol=1e-15)
    np.testing.assert_allclose(sprue.qjit(f)(np.array([p]), x), want, rtol=1e-15)   # a one-element array


def test_else_if_with_a_float_predicate_under_grad_and_vmap():
    def f(x):
        @sprue.cond(x[0] - 1.0)          # taken unless x[0] == 1
        def a():
            return jnp.sin(x)

        @a.else_if(x[1])
        def b():
            return x * x

        @a.otherwise
        def c():
            return jnp.zeros(2, np.int64)   # promoted to float64
        return jnp.sum(a())

    for x in (np.array([0.5, 0.0]), np.array([1.0, 2.0]), np.array([1.0, 0.0])):
        want = np.sin(x).sum() if x[0] != 1 else (x * x).sum() if x[1] else 0.0
        dwant = np.cos(x) if x[0] != 1 else 2 * x if x[1] else np.zeros(2)
        np.testing.assert_allclose(f(x), want, rtol=1e-14)
        np.testing.assert_allclose(sprue.qjit(f)(x), want, rtol=1e-14)
        np.testing.assert_allclose(sprue.grad(f)(x), dwant, rtol=1e-14)
        np.testing.assert_allclose(sprue.qjit(sprue.grad(f))(x), dwant, rtol=1e-14)
    xs = np.array([[0.5, 0.0], [1.0, 2.0], [1.0, 0.0]])
    np.testing.assert_allclose(sprue.vmap(f)(xs), [np.sin(xs[0]).sum(), (xs[1] ** 2).sum(), 0.0], rtol=1e-14)


def test_no_promotion_for_shapes_or_structures():
    def shapes(x):
        return pick(x[0] > 0, lambda: x, lambda: 1)

    def structures(x):
        return pick(x[0] > 0, lambda: (x, x), lambda: x)

    x = np.ones(3)
    with pytest.raises(sprue.SprueTypeError, match=r"cond branches return different types: output 0: f64\[3\] vs"
                                                   r" i64\[\].*test_control_flow_cond_promotion\.py:\d+"):
        sprue.qjit(shapes)(x)
    with pytest.raises(sprue.SprueTypeError, match=r"cond branches return different pytree structures: \(\*, \*\)"
                                                   r" vs \*.*test_control_flow_cond_promotion\.py:\d+"):
        sprue.qjit(structures)(x)
    np.testing.assert_array_equal(shapes(x), x)   # outside a trace only the branch taken runs: nothing to compare
    assert shapes(-x) == 1 and len(structures(x)) == 2
    with pytest.raises(sprue.SprueTypeError, match=r"cond: the predicate must be a scalar, got f64\[2\]"):
        pick(np.zeros(2), lambda: 1, lambda: 2)


def test_lax_cond_stays_jaxs():
    """jax.lax.cond does not promote: its branches must agree."""
    with pytest.raises(sprue.SprueTypeError, match=r"cond branches return different types: output 0: i64\[\] vs"
                                                   r" bool\[\]"):
        sprue.qjit(lambda p: sprue.lax.cond(p, lambda: np.int64(3), lambda: np.True_))(True)
