"""custom_jvp, custom_vjp, checkpoint (remat) and stop_gradient: against JAX 0.10.2's results
(custom_cases.py, recorded by make_custom_derivatives_data.py), against finite differences, eager
and compiled, under jvp, grad, vmap and their compositions; JAX's printed forms loaded by the
reader; errors by their text."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from sprue.io.jaxpr_lexer import JaxprError
from tests.frontend.lax.custom_cases import CASES

DATA = Path(__file__).with_name("custom_derivatives_data")
API = SimpleNamespace(numpy=jnp, custom_jvp=sprue.custom_jvp, custom_vjp=sprue.custom_vjp,
                      checkpoint=sprue.checkpoint, stop_gradient=lax.stop_gradient, grad=sprue.grad, jvp=sprue.jvp,
                      vmap=sprue.vmap)


def _compare(name, result):
    want = np.load(DATA / f"{name}.npz")
    leaves = sprue.tree_flatten(result)[0]
    assert len(leaves) == len(want.files)
    for i, got in enumerate(leaves):
        np.testing.assert_allclose(np.asarray(got), want[f"out{i}"], rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("name,build,args", CASES, ids=[c[0] for c in CASES])
def test_matches_jax_eager(name, build, args):
    _compare(name, build(API)(*args))


@pytest.mark.parametrize("name,build,args", CASES, ids=[c[0] for c in CASES])
def test_matches_jax_compiled(name, build, args):
    _compare(name, sprue.qjit(build(API))(*args))


def _fd(f, x, eps=1e-6):
    """Central differences of a scalar function, per element of x."""
    out = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = eps
        out.flat[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return out


@sprue.custom_jvp
def softplus(x):
    return jnp.log1p(jnp.exp(x))


@softplus.defjvp
def softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), t / (1 + jnp.exp(-x))


def test_custom_jvp_against_finite_differences():
    x = np.linspace(-4.0, 4.0, 9)
    loss = lambda v: jnp.sum(softplus(v) * jnp.cos(v))   # noqa: E731
    np.testing.assert_allclose(sprue.grad(loss)(x), _fd(lambda v: float(loss(v)), x), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(sprue.qjit(sprue.grad(loss))(x), _fd(lambda v: float(loss(v)), x), rtol=1e-7)
    d1 = sprue.grad(softplus)   # second order: autodiff of the rule, which calls softplus again
    np.testing.assert_allclose(sprue.vmap(sprue.grad(d1))(x), [(d1(v + 1e-6) - d1(v - 1e-6)) / 2e-6 for v in x],
                               rtol=1e-6)
    np.testing.assert_allclose(sprue.hessian(lambda v: jnp.sum(softplus(v)))(x),
                               np.diag(np.exp(-x) / (1 + np.exp(-x)) ** 2), rtol=1e-12, atol=1e-15)


def test_custom_jvp_rule_is_used():
    """Where autodiff of the body overflows (exp(800)), the rule's derivative is finite."""
    x = np.array([800.0, -800.0])
    g = sprue.qjit(sprue.grad(lambda v: jnp.sum(softplus(v))))(x)
    np.testing.assert_array_equal(g, [1.0, 0.0])
    plain = sprue.grad(lambda v: jnp.sum(jnp.log1p(jnp.exp(v))))(x)
    assert np.isnan(plain[0])


def test_custom_jvp_nondiff_argnums_and_defjvps():
    from functools import partial

    @partial(sprue.custom_jvp, nondiff_argnums=(0,))
    def scaled(k, x):
        return jnp.sin(x) * k

    @scaled.defjvp
    def scaled_jvp(k, primals, tangents):
        (x,), (t,) = primals, tangents
        return scaled(k, x), jnp.cos(x) * k * t

    x = np.linspace(0.0, 1.0, 4)
    np.testing.assert_allclose(sprue.grad(lambda v: jnp.sum(scaled(3.0, v)))(x), 3 * np.cos(x), rtol=1e-14)

    @sprue.custom_jvp
    def product(a, b):
        return a * b
    product.defjvps(lambda ta, out, a, b: ta * b, lambda tb, out, a, b: a * tb)
    ga, gb = sprue.grad(lambda a, b: jnp.sum(product(a, b)), argnums=(0, 1))(x, x + 1)
    np.testing.assert_allclose(ga, x + 1)
    np.testing.assert_allclose(gb, x)


@sprue.custom_vjp
def clip_gradient(x):
    return x


def _clip_fwd(x):
    return x, None


def _clip_bwd(res, g):
    return (jnp.clip(g, -1.0, 1.0),)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


def test_custom_vjp_rule_is_used_and_composes():
    x = np.linspace(-2.0, 2.0, 5)
    loss = lambda v: jnp.sum(clip_gradient(v) * 5.0 * v)   # noqa: E731
    # d/dv of clip(v)*5v with the clipped cotangent: clip(5v, -1, 1) + 5v
    want = np.clip(5 * x, -1, 1) + 5 * x
    np.testing.assert_allclose(sprue.grad(loss)(x), want)
    np.testing.assert_allclose(sprue.qjit(sprue.grad(loss))(x), want)
    np.testing.assert_allclose(sprue.vmap(sprue.grad(lambda v: clip_gradient(v) * 5.0 * v))(x), want)
    np.testing.assert_allclose(sprue.jacrev(lambda v: clip_gradient(v) * 5.0)(x), np.diag(np.clip(np.full(5, 5.0), -1, 1)))
    np.testing.assert_array_equal(clip_gradient(x), x)


def test_checkpoint_recomputes_in_the_backward_pass():
    f = sprue.checkpoint(lambda w: jnp.sin(jnp.sin(w)) * w)
    x = np.linspace(-1.0, 1.0, 6)
    loss = lambda v: jnp.sum(f(v))   # noqa: E731
    np.testing.assert_allclose(sprue.grad(loss)(x), _fd(lambda v: float(loss(v)), x), rtol=1e-7)
    text = str(sprue.make_jaxpr(sprue.grad(loss))(x))
    assert "remat2[" in text and text.count("sin ") >= 4   # the body's two sins, forward and again backward
    np.testing.assert_allclose(sprue.jvp(f, (x,), (np.ones(6),))[1], sprue.grad(loss)(x), rtol=1e-14)
    g = sprue.checkpoint(lambda w, n: w ** n, static_argnums=(1,))
    np.testing.assert_allclose(sprue.grad(lambda v: g(v, 3))(2.0), 12.0)


def test_stop_gradient():
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(sprue.grad(lambda v: jnp.sum(lax.stop_gradient(v) * v))(x), x)
    np.testing.assert_allclose(sprue.qjit(sprue.vmap(sprue.grad(lambda v: lax.stop_gradient(v) ** 2 + v)))(x), 1.0)
    tree = lax.stop_gradient({"a": x, "n": np.arange(3)})
    np.testing.assert_array_equal(tree["a"], x)
    assert sprue.jvp(lambda v: lax.stop_gradient(v) * 2.0, (1.0,), (1.0,))[1] == 0.0


@pytest.fixture(scope="module")
def reads_bare_broadcast(tmp_path_factory) -> bool:
    probe = tmp_path_factory.mktemp("probe") / "p.jaxpr"
    probe.write_text("{ lambda ; a:f64[]. let b:f64[1] = broadcast_in_dim a in (b,) }")
    try:
        sprue.load(probe)
    except JaxprError:
        return False
    return True


@pytest.mark.parametrize("name,build,args", CASES, ids=[c[0] for c in CASES])
def test_jax_printed_forms_load(name, build, args, reads_bare_broadcast):
    text = (DATA / f"{name}.jaxpr").read_text()
    if "broadcast_in_dim " in text.replace("broadcast_in_dim[", "") and not reads_bare_broadcast:
        pytest.skip(f"{name}.jaxpr prints a bare broadcast_in_dim, which the reader reads once issue 15's reader"
                    f" forms are merged")
    f = sprue.load(DATA / f"{name}.jaxpr")
    _compare(name, f(*args))


@pytest.mark.parametrize("call,message", [
    (lambda: sprue.custom_jvp(lambda x: x)(1.0), "custom_jvp _lambda_: no JVP rule; define one with"),
    (lambda: sprue.custom_vjp(lambda x: x)(1.0), "custom_vjp _lambda_: no VJP rule; define one with"),
    (lambda: sprue.jvp(clip_gradient, (1.0,), (1.0,)), "clip_gradient: forward-mode differentiation (jvp, jacfwd)"
                                                       " of a custom_vjp function is not defined"),
    (lambda: sprue.checkpoint(lambda x: x, policy=lambda *a: True), "sprue implements policy=None only"),
])
def test_errors(call, message):
    with pytest.raises(sprue.SprueError) as e:
        call()
    assert message in str(e.value)


def test_rule_errors():
    @sprue.custom_jvp
    def f(x):
        return x * 2.0

    @f.defjvp
    def f_jvp(primals, tangents):
        return f(primals[0]), jnp.zeros(3)
    with pytest.raises(sprue.SprueTypeError, match=r"the JVP rule f_jvp's tangents: output 0 is f64\[3\] where the"
                                                    r" primal output is f64\[\]"):
        sprue.grad(f)(1.0)

    @sprue.custom_vjp
    def h(x, y):
        return x * y
    h.defvjp(lambda x, y: (h(x, y), (x, y)), lambda res, g: (g,))
    with pytest.raises(sprue.SprueTypeError, match="bwd _lambda_ must return a tuple of 2 cotangents, one per"
                                                   " argument of h, got a tuple of 1"):
        sprue.grad(h)(1.0, 2.0)

    def closes_over(y):
        @sprue.custom_jvp
        def g(x):
            return x * y

        @g.defjvp
        def g_jvp(p, t):
            return p[0] * 2.0, t[0] * 2.0
        return g(1.0)
    for transform in (sprue.grad, lambda fn: lambda v: sprue.jvp(fn, (v,), (1.0,))):
        with pytest.raises(sprue.UnsupportedError, match="differentiation with respect to a value it closes over"):
            transform(closes_over)(3.0)


def test_dynamic_sizes_and_loops():
    """One compilation for every size; custom rules inside a loop body under grad."""
    g = sprue.qjit(sprue.grad(lambda v: jnp.sum(softplus(v) + sprue.checkpoint(jnp.sin)(clip_gradient(v)))),
                   abstracted_axes={0: "n"})
    for n in (1, 5, 33):
        x = np.linspace(-1.0, 1.0, n)
        np.testing.assert_allclose(g(x), 1 / (1 + np.exp(-x)) + np.clip(np.cos(x), -1, 1), rtol=1e-14)
    assert g.compile_count == 1

    def loop(v):
        return lax.fori_loop(0, 3, lambda i, acc: softplus(acc) * 0.5, v)
    x = np.linspace(-1.0, 1.0, 4)
    want = [(float(np.sum(loop(x + e))) - float(np.sum(loop(x - e)))) / 2e-6 for e in np.eye(4) * 1e-6]
    np.testing.assert_allclose(sprue.qjit(sprue.grad(lambda v: jnp.sum(loop(v))))(x), want, rtol=1e-7)


def test_saved_program_round_trip(tmp_path):
    """sprue's printed forms (custom_jvp_call, custom_vjp_call, remat2, stop_gradient) read back: the
    rules are printed by name, so the loaded program computes the bodies."""
    f = sprue.qjit(lambda v: softplus(v) + clip_gradient(v) + sprue.checkpoint(jnp.sin)(lax.stop_gradient(v)))
    x = np.linspace(-1.0, 1.0, 5)
    want = f(x)
    text = sprue.save(f, tmp_path / "f.jaxpr").read_text()
    for form in ("custom_jvp_call[", "jvp=softplus_jvp", "custom_vjp_call[", "bwd=_clip_bwd", "remat2[", "stop_gradient "):
        assert form in text, form
    np.testing.assert_allclose(sprue.load(tmp_path / "f.jaxpr")(x), want, rtol=1e-15)


def test_older_printed_names_load(tmp_path):
    """JAX before 0.5 printed checkpoint as `checkpoint[...]` and custom_jvp_call with jvp_jaxpr_thunk
    and num_consts: the reader runs their bodies."""
    p = tmp_path / "old.jaxpr"
    p.write_text("{ lambda ; a:f64[3]. let\n"
                 "    b:f64[3] = checkpoint[differentiated=False jaxpr={ lambda ; c:f64[3]. let d:f64[3] = sin c"
                 " in (d,) } policy=None prevent_cse=True] a\n"
                 "    e:f64[3] = custom_jvp_call[call_jaxpr={ lambda ; f:f64[3]. let g:f64[3] = exp f in (g,) }"
                 " jvp_jaxpr_thunk=<function f at 0x7f> num_consts=0 symbolic_zeros=False] b\n"
                 "  in (e,) }\n")
    x = np.array([0.0, 1.0, 2.0])
    np.testing.assert_allclose(sprue.load(p)(x), np.exp(np.sin(x)), rtol=1e-15)
