"""The transformations' API and their compositions: jvp, vjp, grad, value_and_grad, jacfwd, jacrev,
hessian, vmap — against analytic derivatives, central finite differences (float64), and Python
loops over numpy; under qjit, through control flow, over dynamic shapes."""
import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from tests.helpers.rule_checks import close, fd_grad

RNG = np.random.default_rng(7)


def fd_jac(f, x, eps=1e-6):
    """Central finite-difference Jacobian, shape out.shape + x.shape."""
    x = np.asarray(x, np.float64)
    out = np.asarray(f(x))
    jac = np.zeros(out.shape + x.shape)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = eps
        jac[(...,) + idx] = (np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps)
    return jac


X = np.linspace(0.2, 1.4, 5)


def f_smooth(x):
    return jnp.sum(jnp.sin(x) * x ** 2 + jnp.exp(-x))


def f_smooth_np(x):
    return np.sum(np.sin(x) * x ** 2 + np.exp(-x))


def f_smooth_grad(x):
    return np.cos(x) * x ** 2 + 2 * x * np.sin(x) - np.exp(-x)


# -- the API ------------------------------------------------------------------------------------
def test_grad_is_analytic():
    close(sprue.grad(f_smooth)(X), f_smooth_grad(X))


def test_value_and_grad():
    v, g = sprue.value_and_grad(f_smooth)(X)
    close(v, f_smooth_np(X))
    close(g, f_smooth_grad(X))


def test_grad_argnums_tuple_returns_tuple():
    def f(x, y, z):
        return jnp.sum(x * y) + jnp.sum(jnp.sin(z))
    y, z = X[::-1].copy(), X + 1
    gx, gz = sprue.grad(f, argnums=(0, 2))(X, y, z)
    close(gx, y)
    close(gz, np.cos(z))
    gy = sprue.grad(f, argnums=1)(X, y, z)
    close(gy, X)


def test_grad_has_aux():
    def f(x):
        return jnp.sum(x ** 3), {"mean": jnp.mean(x)}
    g, aux = sprue.grad(f, has_aux=True)(X)
    close(g, 3 * X ** 2)
    close(aux["mean"], X.mean())
    (v, aux2), g2 = sprue.value_and_grad(f, has_aux=True)(X)
    close(v, np.sum(X ** 3))
    close(g2, 3 * X ** 2)


def test_grad_of_pytree_argument():
    def loss(params, x):
        return jnp.sum((params["w"] * x + params["b"]) ** 2)
    params = {"w": np.float64(1.5), "b": np.array([0.1, -0.2, 0.3, 0.0, 0.5])}
    g = sprue.grad(loss)(params, X)
    r = params["w"] * X + params["b"]
    close(g["w"], np.sum(2 * r * X))
    close(g["b"], 2 * r)


def test_jvp_matches_finite_differences_with_pytrees():
    def f(a, b):
        return {"s": jnp.sin(a) * b[0], "t": (a * b[1], jnp.sum(b[0]))}
    a, b = X, (X + 1, X * 2)
    ta, tb = RNG.normal(size=5), (RNG.normal(size=5), RNG.normal(size=5))
    out, tout = sprue.jvp(f, (a, b), (ta, tb))
    close(out["s"], np.sin(a) * b[0])
    eps = 1e-6

    def at(s):
        return f(a + s * ta, (b[0] + s * tb[0], b[1] + s * tb[1]))
    hi, lo = at(eps), at(-eps)
    close(tout["s"], (np.asarray(hi["s"]) - np.asarray(lo["s"])) / (2 * eps), rtol=1e-6)
    close(tout["t"][0], (np.asarray(hi["t"][0]) - np.asarray(lo["t"][0])) / (2 * eps), rtol=1e-6)
    close(tout["t"][1], (np.asarray(hi["t"][1]) - np.asarray(lo["t"][1])) / (2 * eps), rtol=1e-6)


def test_vjp_returns_one_cotangent_per_primal():
    def f(x, y):
        return jnp.sin(x) * y
    out, vjp_fn = sprue.vjp(f, X, X + 1)
    close(out, np.sin(X) * (X + 1))
    ct = RNG.normal(size=5)
    gx, gy = vjp_fn(ct)
    close(gx, ct * np.cos(X) * (X + 1))
    close(gy, ct * np.sin(X))


def test_vjp_dot_product_identity():
    def f(x):
        return jnp.tanh(jnp.outer(x, x[::-1]) if False else x[:, None] * jnp.cos(x)[None, :])
    t, ct = RNG.normal(size=5), RNG.normal(size=(5, 5))
    _, jt = sprue.jvp(f, (X,), (t,))
    _, vjp_fn = sprue.vjp(f, X)
    (vct,) = vjp_fn(ct)
    close(np.sum(ct * jt), np.sum(vct * t), rtol=1e-12)


def test_jacobians_match_finite_differences():
    def f(x):
        return jnp.sin(x)[:, None] * x[None, :3] ** 2
    want = fd_jac(lambda x: np.sin(x)[:, None] * x[None, :3] ** 2, X)
    close(sprue.jacfwd(f)(X), want, rtol=1e-6)
    close(sprue.jacrev(f)(X), want, rtol=1e-6)
    close(sprue.jacobian(f)(X), want, rtol=1e-6)     # JAX's alias of jacrev
    assert np.shape(sprue.jacrev(f)(X)) == (5, 3, 5)


def test_jacobian_pytrees_follow_jax_structure():
    def f(x, y):
        return {"a": x * y[0], "b": jnp.sum(x)}
    x, y = X[:3], X[1:4]
    for jac in (sprue.jacfwd, sprue.jacrev):
        j = jac(f, argnums=(0, 1))(x, y)
        close(j["a"][0], np.eye(3) * y[0])
        want = np.zeros((3, 3))
        want[:, 0] = x
        close(j["a"][1], want)
        close(j["b"][0], np.ones(3))
        close(j["b"][1], np.zeros(3))


def test_hessian_is_analytic():
    def f(x):
        return jnp.sum(jnp.sin(x) * x[0] ** 2)
    x = X[:3]
    h = np.asarray(sprue.hessian(f)(x))
    want = np.zeros((3, 3))
    s, c = np.sin(x), np.cos(x)
    want[0, 0] = 2 * s.sum() + 4 * x[0] * c[0] - x[0] ** 2 * s[0]
    for j in range(1, 3):
        want[0, j] = want[j, 0] = 2 * x[0] * c[j]
        want[j, j] = -x[0] ** 2 * s[j]
    close(h, want, rtol=1e-10)


def test_vmap_matches_a_python_loop():
    def f(x, w):
        return jnp.tanh(x @ w) + jnp.sum(x)
    xs, w = RNG.normal(size=(6, 3)), RNG.normal(size=(3, 4))
    got = sprue.vmap(f, in_axes=(0, None))(xs, w)
    want = np.stack([np.tanh(x @ w) + x.sum() for x in xs])
    close(got, want, rtol=1e-12)


def test_vmap_in_axes_and_out_axes():
    def f(a, b):
        return a * 2 + b, jnp.sum(a)
    a, b = RNG.normal(size=(3, 4)), RNG.normal(size=(4, 3))
    got0, got1 = sprue.vmap(f, in_axes=(1, 0), out_axes=(1, 0))(a, b)
    want0 = np.stack([a[:, i] * 2 + b[i, :3] if False else a[:, i] * 2 + b[i] for i in range(4)], axis=1)
    close(got0, want0)
    close(got1, a.sum(axis=0))


def test_vmap_of_unbatched_output_broadcasts():
    got = sprue.vmap(lambda x, c: c * 2.0, in_axes=(0, None))(np.ones((3, 2)), np.arange(2.0))
    close(got, np.tile(np.arange(2.0) * 2, (3, 1)))
    got_none = sprue.vmap(lambda x, c: (x + c, c * 2.0), in_axes=(0, None), out_axes=(0, None))(np.ones((3, 2)),
                                                                                             np.arange(2.0))
    close(got_none[1], np.arange(2.0) * 2)


def test_vmap_with_pytree_in_axes():
    def f(p):
        return p["x"] * p["y"]
    p = {"x": np.arange(6.0).reshape(3, 2), "y": np.array([1.0, -1.0])}
    got = sprue.vmap(f, in_axes=({"x": 0, "y": None},))(p)
    close(got, p["x"] * p["y"])


# -- compositions -------------------------------------------------------------------------------
def test_grad_of_grad():
    d2 = sprue.grad(sprue.grad(lambda x: jnp.sin(x) * x ** 3))
    for x in (0.3, 1.7):
        close(d2(x), -np.sin(x) * x ** 3 + 6 * x ** 2 * np.cos(x) + 6 * x * np.sin(x), rtol=1e-10)


def test_third_derivative():
    d3 = sprue.grad(sprue.grad(sprue.grad(jnp.exp)))
    close(d3(0.7), np.exp(0.7), rtol=1e-12)


def test_jacfwd_of_jacrev():
    def f(x):
        return jnp.sum(jnp.cos(x) * x)
    x = X[:4]
    h = sprue.jacfwd(sprue.jacrev(f))(x)
    close(h, np.diag(-2 * np.sin(x) - x * np.cos(x)), rtol=1e-10)


def test_vmap_of_grad():
    xs = RNG.normal(size=(4, 5))
    got = sprue.vmap(sprue.grad(f_smooth))(xs)
    close(got, np.stack([f_smooth_grad(x) for x in xs]))


def test_grad_of_vmap():
    def f(xs):
        return jnp.sum(sprue.vmap(lambda r: jnp.sum(jnp.sin(r)) * r[0])(xs))
    xs = RNG.normal(size=(3, 4))
    close(sprue.grad(f)(xs), fd_grad(lambda a: np.sum(np.sin(a).sum(1) * a[:, 0]), xs), rtol=1e-6)


def test_vmap_of_vmap():
    xs = RNG.normal(size=(2, 3, 4))
    got = sprue.vmap(sprue.vmap(lambda r: jnp.sum(r * r)))(xs)
    close(got, (xs * xs).sum(-1))


def test_grad_inside_qjit():
    @sprue.qjit
    def step(x):
        return x - 0.1 * sprue.grad(f_smooth)(x)
    close(step(X), X - 0.1 * f_smooth_grad(X))


def test_qjit_of_grad():
    g = sprue.qjit(sprue.grad(f_smooth))
    close(g(X), f_smooth_grad(X))
    assert g.compile_count == 1


def test_grad_of_qjit_compiles_the_transformed_body():
    f = sprue.qjit(f_smooth)
    g = sprue.grad(f)
    assert isinstance(g, sprue.QJIT)      # lazy jit: the gradient is compiled, not run eagerly
    close(g(X), f_smooth_grad(X))
    assert g.compile_count == 1
    assert "cos" in str(g.jaxpr)


def test_jvp_vjp_vmap_of_qjit():
    f = sprue.qjit(lambda x: jnp.sin(x) * x)
    out, t = sprue.jvp(f, (X,), (np.ones(5),))
    close(t, np.cos(X) * X + np.sin(X))
    out, vjp_fn = sprue.vjp(f, X)
    close(vjp_fn(np.ones(5))[0], np.cos(X) * X + np.sin(X))
    v = sprue.vmap(f)
    assert isinstance(v, sprue.QJIT)
    close(v(np.stack([X, X])), np.stack([np.sin(X) * X] * 2))


def test_qjit_called_inside_grad_is_differentiated():
    inner = sprue.qjit(lambda x: jnp.sin(x) * x)

    def f(x):
        return jnp.sum(inner(x) * 2)
    close(sprue.grad(f)(X), 2 * (np.cos(X) * X + np.sin(X)))


def test_grad_of_closure_over_outer_tracer():
    def f(x):
        return sprue.grad(lambda y: jnp.sum(y * x * x))(x)   # x is a constant inside
    close(sprue.jacfwd(f)(X[:3]), np.diag(2 * X[:3]))


# -- control flow -------------------------------------------------------------------------------
def cond_fn(x):
    return jnp.sum(lax.cond(jnp.sum(x) > 2.0, lambda a: jnp.sin(a) * a, lambda a: a ** 3, x))


def cond_np(x):
    return np.sum(np.sin(x) * x if x.sum() > 2.0 else x ** 3)


@pytest.mark.parametrize("scale", [1.0, 0.1])
def test_cond_grad_and_jvp(scale):
    x = X * scale
    want = fd_grad(cond_np, x)
    close(sprue.grad(cond_fn)(x), want, rtol=1e-6)
    t = RNG.normal(size=5)
    close(sprue.jvp(cond_fn, (x,), (t,))[1], want @ t, rtol=1e-6)
    close(sprue.qjit(sprue.grad(cond_fn))(x), want, rtol=1e-6)


def test_cond_vmap_batched_predicate_selects():
    xs = np.stack([X, X * 0.1, X * 2])
    close(sprue.vmap(cond_fn)(xs), [cond_np(x) for x in xs])
    close(sprue.qjit(sprue.vmap(cond_fn))(xs), [cond_np(x) for x in xs])
    jaxpr = sprue.make_jaxpr(sprue.vmap(cond_fn))(xs)
    assert "select_n" in str(jaxpr) and "cond[" not in str(jaxpr)


def test_cond_vmap_unbatched_predicate_keeps_cond():
    def f(x, p):
        return lax.cond(p > 0, lambda a: a * 2, lambda a: -a, x)
    xs = RNG.normal(size=(3, 4))
    close(sprue.vmap(f, in_axes=(0, None))(xs, 1.0), xs * 2)
    assert "cond[" in str(sprue.make_jaxpr(sprue.vmap(f, in_axes=(0, None)))(xs, 1.0))


def switch_fn(k, x):
    return lax.switch(k, [lambda a: jnp.sum(jnp.sin(a)), lambda a: jnp.sum(a * a), lambda a: jnp.sum(jnp.exp(a))], x)


def test_switch_grad_jvp_vmap():
    refs = [lambda a: np.sum(np.sin(a)), lambda a: np.sum(a * a), lambda a: np.sum(np.exp(a))]
    for k in range(3):
        close(sprue.grad(switch_fn, argnums=1)(k, X), fd_grad(refs[k], X), rtol=1e-6)
    ks = np.array([2, 0, 1, 5], np.int32)
    xs = RNG.normal(size=(4, 5))
    close(sprue.vmap(switch_fn)(ks, xs), [refs[min(k, 2)](x) for k, x in zip(ks, xs)])
    g = sprue.vmap(sprue.grad(switch_fn, argnums=1))(ks, xs)
    close(g, [fd_grad(refs[min(k, 2)], x) for k, x in zip(ks, xs)], rtol=1e-6)


def loop_np(x, n, lo=0, step=1):
    c = x.copy()
    for i in range(lo, n, step):
        c = c * np.cos(c) + 0.1 * i * x
    return np.sum(c)


def loop_fn(x, n, lo=0, step=1):
    @sprue.for_loop(lo, n, step)
    def body(i, c):
        return c * jnp.cos(c) + 0.1 * i * x
    return jnp.sum(body(x))


@pytest.mark.parametrize("lo,n,step", [(0, 4, 1), (1, 8, 3), (6, 0, -2), (3, 3, 1)])
def test_for_loop_grad_jvp_static_bounds(lo, n, step):
    want = fd_grad(lambda x: loop_np(x, n, lo, step), X)
    close(sprue.grad(lambda x: loop_fn(x, n, lo, step))(X), want, rtol=1e-6)
    t = RNG.normal(size=5)
    close(sprue.jvp(lambda x: loop_fn(x, n, lo, step), (X,), (t,))[1], want @ t, rtol=1e-6)


@pytest.mark.parametrize("n", [0, 1, 5])
def test_fori_loop_grad_with_a_traced_trip_count(n):
    def f(x, n):
        return jnp.sum(lax.fori_loop(0, n, lambda i, c: c * jnp.cos(c) + 0.1 * i * x, x))
    want = fd_grad(lambda x: loop_np(x, n), X)
    close(sprue.grad(f)(X, n), want, rtol=1e-6)
    g = sprue.qjit(sprue.grad(f))
    close(g(X, n), want, rtol=1e-6)
    close(g(X, n + 2), fd_grad(lambda x: loop_np(x, n + 2), X), rtol=1e-6)
    assert g.compile_count == 1


def test_loop_vmap_matches_python_loop():
    xs = RNG.normal(size=(3, 5))
    close(sprue.vmap(lambda x: loop_fn(x, 4))(xs), [loop_np(x, 4) for x in xs], rtol=1e-12)
    close(sprue.vmap(lambda x: loop_fn(x, 4, 1, 2), in_axes=0)(xs), [loop_np(x, 4, 1, 2) for x in xs], rtol=1e-12)


def test_loop_vmap_carry_batched_by_the_body():
    # the carry starts unbatched and becomes batched inside: the loop carries it batched
    def f(x):
        return lax.fori_loop(0, 3, lambda i, c: c + x, jnp.zeros(2))
    xs = RNG.normal(size=(4, 2))
    close(sprue.vmap(f)(xs), 3 * xs)


def test_nested_loops_with_cond_grad():
    def f(x):
        def outer(i, c):
            def inner(j, d):
                return lax.cond(j % 2 == 0, lambda e: jnp.sin(e) * 1.1, lambda e: e * e * 0.5 + 0.1, d)
            return lax.fori_loop(0, 3, inner, c) + x * 0.01 * i
        return jnp.sum(lax.fori_loop(0, 2, outer, x))

    def f_np(x):
        c = x.copy()
        for i in range(2):
            d = c
            for j in range(3):
                d = np.sin(d) * 1.1 if j % 2 == 0 else d * d * 0.5 + 0.1
            c = d + x * 0.01 * i
        return np.sum(c)
    close(f(X), f_np(X), rtol=1e-12)
    close(sprue.grad(f)(X), fd_grad(f_np, X), rtol=1e-6)
    close(sprue.qjit(sprue.grad(f))(X), fd_grad(f_np, X), rtol=1e-6)


def scan_fn(x, reverse=False):
    def step(c, xi):
        c = c * jnp.cos(xi) + jnp.sin(c) * xi
        return c, c * xi
    carry, ys = lax.scan(step, 0.5, x, reverse=reverse)
    return carry + jnp.sum(ys * ys)


def scan_np(x, reverse=False):
    c, ys = 0.5, []
    for xi in (x[::-1] if reverse else x):
        c = c * np.cos(xi) + np.sin(c) * xi
        ys.append(c * xi)
    return c + np.sum(np.array(ys) ** 2)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_grad_jvp_vmap(reverse):
    want = fd_grad(lambda x: scan_np(x, reverse), X)
    close(sprue.grad(lambda x: scan_fn(x, reverse))(X), want, rtol=1e-6)
    t = RNG.normal(size=5)
    close(sprue.jvp(lambda x: scan_fn(x, reverse), (X,), (t,))[1], want @ t, rtol=1e-6)
    xs = RNG.normal(size=(3, 5))
    close(sprue.vmap(lambda x: scan_fn(x, reverse))(xs), [scan_np(x, reverse) for x in xs], rtol=1e-12)
    close(sprue.qjit(sprue.grad(lambda x: scan_fn(x, reverse)))(X), want, rtol=1e-6)


def test_scan_with_array_carry_and_consts():
    w = RNG.normal(size=(3, 3)) * 0.5

    def f(h0, xs):
        def cell(h, x):
            h = jnp.tanh(w @ h + x)
            return h, jnp.sum(h)
        h, ys = lax.scan(cell, h0, xs)
        return jnp.sum(h) + jnp.sum(ys)

    def f_np(h0, xs):
        h, tot = h0, 0.0
        for x in xs:
            h = np.tanh(w @ h + x)
            tot += h.sum()
        return h.sum() + tot
    h0, xs = RNG.normal(size=3), RNG.normal(size=(4, 3))
    gh, gx = sprue.grad(f, argnums=(0, 1))(h0, xs)
    close(gh, fd_grad(lambda h: f_np(h, xs), h0), rtol=1e-6)
    close(gx, fd_grad(lambda x: f_np(h0, x), xs), rtol=1e-6)


def while_fn(x):
    return jnp.sum(lax.while_loop(lambda c: jnp.sum(c) < 10.0, lambda c: c * 1.5 + x, x))


def while_np(x):
    c = x.copy()
    while c.sum() < 10.0:
        c = c * 1.5 + x
    return c.sum()


def test_while_loop_jvp_and_jacfwd():
    t, x = RNG.normal(size=5), X * 0.9   # sum 3.6: 2 trips, far from a third
    want = fd_grad(while_np, x)
    close(sprue.jvp(while_fn, (x,), (t,))[1], want @ t, rtol=1e-6)
    close(sprue.jacfwd(while_fn)(x), want, rtol=1e-6)


def test_while_loop_vmap_with_a_batched_predicate():
    def newton(a):
        return lax.while_loop(lambda c: jnp.abs(c * c - a) > 1e-12 * a, lambda c: 0.5 * (c + a / c), a)
    a = np.array([2.0, 9.0, 1e6, 0.25])
    close(sprue.vmap(newton)(a), np.sqrt(a), rtol=1e-12)
    close(sprue.qjit(sprue.vmap(newton))(a), np.sqrt(a), rtol=1e-12)
    xs = np.stack([X, X * 3, X * 0.2])
    close(sprue.vmap(while_fn)(xs), [while_np(x) for x in xs])


def test_while_loop_grad_is_refused_by_name():
    with pytest.raises(sprue.UnsupportedError, match=r"not differentiable in reverse mode: while_loop .*"
                       r"sprue\.for_loop or sprue\.lax\.fori_loop.*test_transforms\.py"):
        sprue.grad(while_fn)(X)


# -- dynamic shapes -----------------------------------------------------------------------------
def test_grad_jvp_vmap_over_dynamic_shapes_compile_once():
    g = sprue.qjit(sprue.grad(f_smooth), abstracted_axes={0: "n"})
    for n in (3, 8, 1):
        x = np.linspace(0.1, 1, n)
        close(g(x), f_smooth_grad(x))
    assert g.compile_count == 1

    @sprue.qjit(abstracted_axes={0: "n"})
    def tangent(x):
        return sprue.jvp(lambda x: jnp.sin(x) * x, (x,), (jnp.ones_like(x),))[1]
    for n in (2, 6):
        x = np.linspace(0.1, 1, n)
        close(tangent(x), np.cos(x) * x + np.sin(x))
    assert tangent.compile_count == 1

    @sprue.qjit(abstracted_axes={0: "n"})
    def rows(x):
        return sprue.vmap(lambda r: jnp.sum(r * r))(x)
    for n in (4, 9):
        x = RNG.normal(size=(n, 3))
        close(rows(x), (x * x).sum(1))
    assert rows.compile_count == 1


def test_grad_through_a_loop_over_dynamic_shapes():
    def f(x):
        return jnp.sum(lax.fori_loop(0, 3, lambda i, c: c * jnp.cos(c), x))

    def f_np(x):
        c = x
        for _ in range(3):
            c = c * np.cos(c)
        return c.sum()
    g = sprue.qjit(sprue.grad(f), abstracted_axes={0: "n"})
    for n in (2, 5):
        x = np.linspace(0.1, 1, n)
        close(g(x), fd_grad(f_np, x), rtol=1e-6)
    assert g.compile_count == 1


def test_grad_with_sizes_from_an_int_argument():
    @sprue.qjit
    def f(n, a):
        return sprue.grad(lambda a: jnp.sum(jnp.ones(n) * jnp.sin(a)))(a)
    for n in (3, 6):
        close(f(n, 0.4), n * np.cos(0.4))


# -- reverse mode stays linear ------------------------------------------------------------------
def _chain(n):
    def f(z, a):
        for _ in range(n):
            z = a * (z + z)
        return z
    return f


def test_reverse_mode_size_is_linear_in_the_forward_size():
    sizes = {n: len(sprue.make_jaxpr(sprue.grad(_chain(n), argnums=(0, 1)))(1.0, 2.0).eqns) for n in (50, 100)}
    assert 1.9 <= sizes[100] / sizes[50] <= 2.1, sizes
    gz, ga = sprue.grad(_chain(50), argnums=(0, 1))(1.0, 1.01)
    close(gz, (2 * 1.01) ** 50, rtol=1e-12)
    close(ga, 50 * 2 ** 50 * 1.01 ** 49, rtol=1e-12)


def test_grad_of_grad_size_stays_linear():
    def sizes(n):
        return len(sprue.make_jaxpr(sprue.grad(sprue.grad(_chain(n))))(1.0, 2.0).eqns)
    assert 1.8 <= sizes(100) / sizes(50) <= 2.2


# -- errors -------------------------------------------------------------------------------------
def test_grad_needs_a_scalar_output():
    with pytest.raises(sprue.SprueTypeError, match=r"grad requires <lambda> to return a floating-point scalar, got"
                       r" f64\[5\].*use jacrev or vjp"):
        sprue.grad(lambda x: x * 2)(X)


def test_grad_needs_float_inputs():
    with pytest.raises(sprue.SprueTypeError, match=r"grad requires floating-point inputs, but argument 'n' of f is"
                       r" i64\[\].*test_transforms\.py"):
        def f(n):
            return n * 2.0
        sprue.grad(f)(3)


def test_argnums_out_of_range():
    with pytest.raises(sprue.SprueValueError, match=r"argnums 2 is out of range: <lambda> was called with 1"
                       r" positional argument"):
        sprue.grad(lambda x: jnp.sum(x), argnums=2)(X)


def test_vmap_inconsistent_sizes_name_both_arguments():
    with pytest.raises(sprue.SprueValueError, match=r"vmap\(f\) got inconsistent sizes for the mapped axis \(Invalid"
                       r" batch sizes; expected the batch size to be the same for all arguments\): argument"
                       r" 'a' of type f64\[3\] has size 3 along axis 0, argument 'b' of type f64\[4,2\] has size 4"
                       r" along axis 0"):
        def f(a, b):
            return a
        sprue.vmap(f)(np.ones(3), np.ones((4, 2)))


def test_vmap_needs_a_batched_argument():
    with pytest.raises(sprue.SprueValueError, match=r"in_axes None maps no argument"):
        sprue.vmap(lambda x: x, in_axes=None)(X)


def test_vmap_out_axes_none_for_a_batched_output():
    with pytest.raises(sprue.SprueValueError, match=r"out_axes is None for output 0, but it depends on the batched"
                       r" arguments"):
        sprue.vmap(lambda x: x * 2, out_axes=None)(np.ones((2, 3)))


def test_vmap_in_axes_out_of_range():
    with pytest.raises(sprue.SprueValueError, match=r"in_axes 2 is out of range for argument 'x' of type f64\[2,3\]"):
        def f(x):
            return x
        sprue.vmap(f, in_axes=2)(np.ones((2, 3)))


def test_jvp_tangent_must_match_its_primal():
    with pytest.raises(sprue.SprueTypeError, match=r"jvp: tangent 0 has type f64\[3\] but its primal is f64\[5\]"):
        sprue.jvp(lambda x: x, (X,), (np.ones(3),))


def test_has_aux_needs_a_pair():
    with pytest.raises(sprue.SprueTypeError, match=r"has_aux=True: <lambda> must return a pair"):
        sprue.grad(lambda x: jnp.sum(x), has_aux=True)(X)


def test_a_primitive_without_rules_is_named():
    from sprue.ir.core import impl_rules, primitive, primitives, shape_rules
    p = primitive("mystery_op")
    shape_rules[p] = lambda x: x
    impl_rules[p] = lambda x: x
    try:
        for transform, text in ((lambda f: sprue.grad(lambda x: jnp.sum(f(x)))(X), "not differentiable: mystery_op"),
                                (lambda f: sprue.vmap(f)(np.ones((2, 3))), "not batchable: mystery_op"),
                                (lambda f: sprue.cost(f)(X), "not costable: mystery_op")):
            with pytest.raises(sprue.UnsupportedError, match=text + r".*test_transforms\.py"):
                transform(lambda x: p.bind(x))
    finally:   # the registry is global: other tests enumerate it
        del primitives["mystery_op"], shape_rules[p], impl_rules[p]


# -- the transformed programs compile -----------------------------------------------------------
def test_compiled_transformed_control_flow_matches_eager():
    ks, xs = np.array([2, 0, 1, 5], np.int32), RNG.normal(size=(4, 5))
    close(sprue.qjit(sprue.vmap(switch_fn))(ks, xs), sprue.vmap(switch_fn)(ks, xs), rtol=1e-12)
    g = sprue.vmap(sprue.grad(switch_fn, argnums=1))
    close(sprue.qjit(g)(ks, xs), g(ks, xs), rtol=1e-12)
    close(sprue.qjit(sprue.jacfwd(while_fn))(X * 0.9), fd_grad(while_np, X * 0.9), rtol=1e-6)
    close(sprue.qjit(sprue.hessian(f_smooth))(X), sprue.hessian(f_smooth)(X), rtol=1e-12)
    both = np.stack([X, X * 3])
    close(sprue.qjit(sprue.vmap(while_fn))(both), [while_np(x) for x in both])
    x3 = RNG.normal(size=(3, 5))
    close(sprue.qjit(sprue.vmap(lambda x: scan_fn(x, True)))(x3), [scan_np(x, True) for x in x3], rtol=1e-12)
    close(sprue.qjit(sprue.vmap(lambda x: loop_fn(x, 4, 1, 2)))(x3), [loop_np(x, 4, 1, 2) for x in x3], rtol=1e-12)


def test_vmap_axis_size_without_batched_arguments():
    close(sprue.vmap(lambda x: x * 2, in_axes=None, axis_size=3)(np.ones(2)), np.full((3, 2), 2.0))
    with pytest.raises(sprue.SprueValueError, match=r"vmap\(<lambda>\): axis_size=3 but argument 'x' of type f64\[2\]"
                       r" has size 2 along axis 0"):
        sprue.vmap(lambda x: x * 2, axis_size=3)(np.ones(2))


def test_every_primitive_has_its_transformation_rules():
    from sprue.interp.ad_util import batch_rules, cost_rules, jvp_rules, nested_cost_rules, vjp_rules
    from sprue.ir.core import primitives
    missing = [f"{name}: {table}" for name, p in sorted(primitives.items()) 
               for table, rules in (("jvp", jvp_rules), ("vjp", vjp_rules), ("batch", batch_rules),
                                    ("cost", {**cost_rules, **nested_cost_rules}))
               if p not in rules]
    assert not missing, missing
