"""Invalid arguments to sprue's own API are sprue errors naming what was wrong, raised when the
decorator or transformation is applied (issue 22: `qjit(static_argnums=1.0)` and `grad("string!")`
were Python's own errors from inside sprue), except qjit's static_argnums, raised at the first call
as Catalyst raises it. Also: static_argnums pointing into *args, and
abstracted_axes beside type hints."""
import inspect
import re

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp

HERE = r"test_api_arguments\.py:\d+"


def f2(x, y):
    return x * y


@pytest.mark.parametrize("make, exc, pattern", [
    (lambda: sprue.qjit(static_argnames=3), sprue.SprueTypeError,
     r"qjit: static_argnames must be a parameter name or a tuple of names, got int 3"),
    (lambda: sprue.qjit(abstracted_axes=[0]), sprue.SprueTypeError,
     r"qjit: abstracted_axes entries must be dicts \{axis: \"name\"\} \(or None\), got 0"),
    (lambda: sprue.qjit(abstracted_axes={0: "not a name"}), sprue.SprueTypeError, r"abstracted_axes entries"),
    (lambda: sprue.qjit(f2, static_argnames="z"), sprue.SprueValueError,
     r"qjit\(f2\): static_argnames 'z' is not a parameter of f2 \(x, y\)"),
    (lambda: sprue.qjit(f2, cast_arguments="yes"), sprue.SprueTypeError,
     r"qjit\(f2\): cast_arguments must be True or False, got str 'yes'"),
    (lambda: sprue.qjit(f2, keep_intermediate=3), sprue.SprueTypeError,
     r"qjit\(f2\): keep_intermediate must be True/False or a directory, got int 3"),
    (lambda: sprue.qjit("string!"), sprue.SprueTypeError, r"qjit expects a function, got str"),
    (lambda: sprue.grad("string!"), sprue.SprueTypeError, r"grad: 'string!' is not a callable object: expected a function to transform, got str"),
    (lambda: sprue.value_and_grad(3), sprue.SprueTypeError, r"value_and_grad: 3 is not a callable object: expected a function to transform, got int"),
    (lambda: sprue.jacfwd(None), sprue.SprueTypeError, r"jacfwd: None is not a callable object: expected a function to transform, got NoneType"),
    (lambda: sprue.jacrev([]), sprue.SprueTypeError, r"jacrev: \[\] is not a callable object: expected a function to transform, got list"),
    (lambda: sprue.hessian(1.0), sprue.SprueTypeError, r"hessian: .* is not a callable object: expected a function to transform"),
    (lambda: sprue.vmap("f"), sprue.SprueTypeError, r"vmap: 'f' is not a callable object: expected a function to transform, got str"),
    (lambda: sprue.jvp(1, (1.0,), (1.0,)), sprue.SprueTypeError, r"jvp: 1 is not a callable object: expected a function to transform, got int"),
    (lambda: sprue.vjp(1, 1.0), sprue.SprueTypeError, r"vjp: 1 is not a callable object: expected a function to transform, got int"),
    (lambda: sprue.make_jaxpr(2), sprue.SprueTypeError, r"make_jaxpr: .* is not a callable object: expected a function to transform"),
    (lambda: sprue.cost(2), sprue.SprueTypeError, r"cost: .* is not a callable object: expected a function to transform"),
    (lambda: sprue.grad(f2, argnums=1.0), sprue.SprueTypeError,
     r"grad: argnums must be an int or a tuple of ints, got float 1\.0"),
    (lambda: sprue.grad(f2, argnums="x"), sprue.SprueTypeError, r"grad: argnums must be an int or a tuple of ints"),
    (lambda: sprue.grad(f2, argnums=()), sprue.SprueValueError, r"grad: argnums is empty"),
    (lambda: sprue.jacrev(f2, argnums=(0, 0)), sprue.SprueValueError, r"jacrev: argnums \(0, 0\) names an argument twice"),
    (lambda: sprue.jacfwd(f2, argnums=[1.5]), sprue.SprueTypeError, r"jacfwd: argnums must be an int"),
    (lambda: sprue.grad(f2, has_aux="no"), sprue.SprueTypeError, r"grad: has_aux must be True or False, got str 'no'"),
    (lambda: sprue.vmap(f2, in_axes=1.0), sprue.SprueTypeError,
     r"vmap: in_axes must be an int, None, or a tuple/list/dict of those, got float 1\.0"),
    (lambda: sprue.vmap(f2, in_axes=(0, "x")), sprue.SprueTypeError, r"vmap: in_axes must be .* \(it holds str 'x'\)"),
    (lambda: sprue.vmap(f2, out_axes=[0.5]), sprue.SprueTypeError, r"vmap: out_axes must be an int, None"),
    (lambda: sprue.vmap(f2, axis_size=-1), sprue.SprueTypeError, r"vmap: axis_size must be None or a non-negative int"),
    (lambda: sprue.make_jaxpr(f2, static_argnums="0"), sprue.SprueTypeError,
     r"make_jaxpr: static_argnums must be an int or a tuple of ints"),
])
def test_invalid_api_arguments_raise_sprue_errors_at_the_users_line(make, exc, pattern):
    with pytest.raises(exc) as info:
        make()
    assert re.search(pattern, str(info.value)), str(info.value)
    assert re.search(HERE, str(info.value)), str(info.value)


def _added(x, y):
    return x + y


def _hinted(x: float, y: float):
    return x + y


def _without_parameters():
    return 1.0


# qjit's static_argnums: checked when qjit is applied, raised by the first call (Catalyst's timing),
# also for functions that would compile at decoration (fully annotated, or without parameters)
@pytest.mark.parametrize("fn, argnums, exc, pattern", [
    (_added, 1.0, sprue.SprueTypeError, r"qjit\(_added\): static_argnums must be an int or a tuple of ints, got float"
                                        r" 1\.0 \(The `static_argnums` argument to `qjit` must be an int"),
    (_added, (0, "1"), sprue.SprueTypeError, r"static_argnums must be an int or a tuple of ints, got tuple \(0, '1'\)"),
    (_added, True, sprue.SprueTypeError, r"static_argnums must be an int or a tuple of ints, got bool True"),
    (_added, 2, sprue.SprueValueError, r"qjit\(_added\): static_argnums 2 is beyond the valid range \[-2, 2\) of"
                                       r" _added's 2 positional parameters"),
    (_added, -3, sprue.SprueValueError, r"static_argnums -3 is beyond the valid range \[-2, 2\)"),
    (_hinted, 5, sprue.SprueValueError, r"qjit\(_hinted\): static_argnums 5 is beyond the valid range \[-2, 2\)"),
    (_hinted, [1.0], sprue.SprueTypeError, r"qjit\(_hinted\): static_argnums must be an int or a tuple of ints"),
    (_without_parameters, 0, sprue.SprueValueError, r"static_argnums 0 is beyond the valid range \[0, 0\) of"
                                                    r" _without_parameters's 0 positional parameters"),
])
def test_invalid_static_argnums_raise_at_the_first_call(fn, argnums, exc, pattern, recwarn):
    for apply in (lambda: sprue.qjit(fn, static_argnums=argnums), lambda: sprue.qjit(static_argnums=argnums)(fn)):
        f = apply()                          # nothing raised, nothing compiled, no warning
        assert f.compile_count == 0 and not recwarn.list
        args = (1.0, 2.0)[:len(inspect.signature(fn).parameters)]
        for _ in range(2):                   # every call raises it, naming the line qjit was applied at
            with pytest.raises(exc) as info:
                f(*args)
            assert re.search(pattern, str(info.value)), str(info.value)
            assert re.search(HERE, str(info.value)), str(info.value)
        with pytest.raises(exc, match=pattern):     # also where it is called from another trace
            sprue.qjit(lambda *a: f(*a))(*args)
        assert f.compile_count == 0


@pytest.mark.parametrize("make, pattern", [
    (lambda: sprue.for_loop(0, 3, 1)(5), r"for_loop: the loop body must be a function, got int 5"),
    (lambda: sprue.while_loop(3), r"while_loop: the condition must be a function, got int 3"),
    (lambda: sprue.while_loop(lambda c: c < 3)("x"), r"while_loop: the loop body must be a function, got str 'x'"),
    (lambda: sprue.cond(True)(3), r"cond: the branch must be a function, got int 3"),
    (lambda: sprue.cond(True)(lambda: 1).otherwise(3), r"cond: the otherwise branch must be a function"),
    (lambda: sprue.cond(True)(lambda: 1).else_if(False)(None), r"cond: the else_if branch must be a function"),
    (lambda: sprue.lax.cond(True, 1, 2), r"cond: true_fun must be a function, got int 1"),
    (lambda: sprue.lax.fori_loop(0, 3, "body", 0.0), r"fori_loop: body_fun must be a function, got str 'body'"),
    (lambda: sprue.lax.while_loop(3, lambda c: c, 0.0), r"while_loop: cond_fun must be a function, got int 3"),
    (lambda: sprue.lax.scan(3, 0.0, np.ones(3)), r"scan: f must be a function, got int 3"),
    (lambda: sprue.custom_jvp(3), r"custom_jvp: the function must be a function, got int 3"),
    (lambda: sprue.custom_jvp(np.sin).defjvp("rule"), r"custom_jvp\.defjvp: the JVP rule must be a function"),
    (lambda: sprue.custom_vjp(3), r"custom_vjp: the function must be a function, got int 3"),
    (lambda: sprue.custom_vjp(np.sin).defvjp(np.sin, 2), r"custom_vjp\.defvjp: bwd must be a function, got int 2"),
    (lambda: sprue.checkpoint(3), r"checkpoint: the function must be a function, got int 3"),
])
def test_control_flow_and_custom_derivatives_take_functions(make, pattern):
    with pytest.raises(sprue.SprueTypeError) as info:
        make()
    assert re.search(pattern, str(info.value)), str(info.value)
    assert re.search(HERE, str(info.value)), str(info.value)


def test_load_takes_a_path():
    with pytest.raises(sprue.SprueTypeError, match=r"sprue.load expects the path of a saved program \(a str or a"
                                                   r" pathlib.Path\), got int"):
        sprue.load(3)


def test_argnums_out_of_range_at_the_call():
    with pytest.raises(sprue.SprueValueError, match=r"argnums 2 is out of range: f2 was called with 2 positional"):
        sprue.grad(f2, argnums=2)(1.0, 2.0)


# -- static_argnums into *args --------------------------------------------------------------------
def test_static_argnums_pointing_into_varargs():
    @sprue.qjit(static_argnums=(1, 3))
    def f(x, *rest):
        n, y, mode = rest[0], rest[1], rest[2]
        out = jnp.tile(x, n) * y            # n must be static: it makes a shape
        return out + 1.0 if mode == "plus" else out - 1.0

    x, y = np.arange(3.0), 2.0
    np.testing.assert_allclose(f(x, 2, y, "plus"), np.tile(x, 2) * y + 1.0)
    np.testing.assert_allclose(f(x, 2, 3.0, "plus"), np.tile(x, 2) * 3.0 + 1.0)
    assert f.compile_count == 1                      # y is traced: one compilation for both
    np.testing.assert_allclose(f(x, 3, y, "minus"), np.tile(x, 3) * y - 1.0)
    assert f.compile_count == 2
    np.testing.assert_allclose(f(x, 2, y, "plus"), np.tile(x, 2) * y + 1.0)
    assert f.compile_count == 2


def test_static_argnums_into_varargs_survive_pickling():
    import pickle
    f = sprue.qjit(_tiled, static_argnums=1)
    x = np.arange(3.0)
    np.testing.assert_allclose(f(x, 2), np.tile(x, 2))
    g = pickle.loads(pickle.dumps(f))
    np.testing.assert_allclose(g(x, 2), np.tile(x, 2))
    np.testing.assert_allclose(g(x, 3), np.tile(x, 3))     # traced again, by reference


def _tiled(x, *rest):
    return jnp.tile(x, rest[0])


def test_negative_static_argnums_with_varargs_are_refused():
    f = sprue.qjit(_tiled, static_argnums=-1)
    with pytest.raises(sprue.SprueValueError, match=r"qjit\(_tiled\): static_argnums -1 is negative, which with \*args"
                                                    r" is ambiguous: count from the first argument"):
        f(np.arange(3.0), 2)


# -- abstracted_axes beside type hints ------------------------------------------------------------
def test_abstracted_axes_and_hints_that_agree_both_apply():
    @sprue.qjit(abstracted_axes={0: "n"})
    def f(x: sprue.f64["n", 2], y: sprue.f64["n"]):  # noqa: F821
        return x.sum(axis=1) * y

    assert str(f.jaxpr).startswith("{ lambda ; a:i64[] b:f64[a,2] c:f64[a]. let")   # compiled at decoration
    for n in (1, 4, 9):
        x, y = np.random.rand(n, 2), np.random.rand(n)
        np.testing.assert_allclose(f(x, y), x.sum(axis=1) * y)
    assert f.compile_count == 1


def test_abstracted_axes_that_conflict_with_a_hint_name_the_parameter():
    with pytest.raises(sprue.SprueValueError, match=r"qjit\(f\): abstracted_axes makes axis 0 of parameter 'y' the size"
                                                    r" \"n\", but its type hint f64\[3\] makes it 3: hint that axis as"
                                                    r" \"n\""):
        @sprue.qjit(abstracted_axes=({0: "n"}, {0: "n"}))
        def f(x: sprue.f64["n"], y: sprue.f64[3]):  # noqa: F821
            return x.sum() + y.sum()
    with pytest.raises(sprue.SprueValueError, match=r"parameter 'x' the size \"n\", but its type hint f64\[m\] makes it"
                                                    r" 'm'"):
        @sprue.qjit(abstracted_axes={0: "n"})
        def g(x: sprue.f64["m"]):  # noqa: F821
            return x
    with pytest.raises(sprue.SprueValueError, match=r"abstracted axis 1 is out of range for parameter 'x', hinted"
                                                    r" f64\[n\]"):
        @sprue.qjit(abstracted_axes={1: "n"})
        def h(x: sprue.f64["n"]):  # noqa: F821
            return x


# -- grad of a one-leaf pytree (Catalyst) -----------------------------------------------------------
@pytest.mark.parametrize("wrap", [lambda v: [v], lambda v: {"k": v}, lambda v: (v,), lambda v: {"a": [v]}])
def test_grad_of_a_one_leaf_pytree_output(wrap):
    def f(x):
        return wrap(jnp.sum(jnp.sin(x) * x))

    x = np.linspace(0.1, 1.0, 4)
    want = np.cos(x) * x + np.sin(x)
    for g in (sprue.grad(f), sprue.qjit(sprue.grad(f)), sprue.grad(sprue.qjit(f))):
        np.testing.assert_allclose(g(x), want, rtol=1e-14)
    value, g = sprue.value_and_grad(f)(x)
    assert type(value) is type(wrap(0.0))                       # the value keeps its structure
    np.testing.assert_allclose(sprue.tree_flatten(value)[0][0], np.sum(np.sin(x) * x), rtol=1e-14)
    np.testing.assert_allclose(g, want, rtol=1e-14)


def test_grad_of_a_pytree_with_more_leaves_still_raises():
    with pytest.raises(sprue.SprueTypeError, match=r"grad requires f to return a floating-point scalar, got a structure"
                                                   r" \[\*, \*\]"):
        def f(x):
            return [x.sum(), x.sum()]
        sprue.grad(f)(np.ones(2))
    with pytest.raises(sprue.SprueTypeError, match=r"got a structure \[\*\] of f64\[2\]"):
        sprue.grad(lambda x: [x * 2.0])(np.ones(2))


def test_arguments_outside_argnums_may_be_any_python_object():
    """As JAX's argnums_partial: a function, a string or any object outside argnums is a fixed value."""
    def loss(w, model, tag):
        assert tag == "run"
        return jnp.sum(model(w) ** 2)

    w = np.linspace(0.1, 1.0, 3)
    want = 2 * np.sin(w) * np.cos(w)
    np.testing.assert_allclose(sprue.grad(loss)(w, jnp.sin, "run"), want, rtol=1e-14)
    np.testing.assert_allclose(sprue.grad(loss)(w, sprue.qjit(jnp.sin), "run"), want, rtol=1e-14)
    value, g = sprue.value_and_grad(loss, argnums=(0,))(w, jnp.sin, "run")
    np.testing.assert_allclose(value, np.sum(np.sin(w) ** 2), rtol=1e-14)
    np.testing.assert_allclose(g[0], want, rtol=1e-14)
    for jac in (sprue.jacrev, sprue.jacfwd):
        np.testing.assert_allclose(jac(lambda x, f: f(x), argnums=0)(w, jnp.exp), np.diag(np.exp(w)), rtol=1e-14)
