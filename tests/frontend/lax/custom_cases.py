"""Programs with custom derivatives, checkpointing and stop_gradient, written once against a
JAX-like namespace `api` (numpy, custom_jvp, custom_vjp, checkpoint, stop_gradient, grad, jvp,
vmap): make_custom_derivatives_data.py runs them with JAX 0.10.2 and records the results and the
printed jaxprs; test_custom_derivatives.py runs them with sprue and compares. Each case is
(name, build(api) -> function, arguments)."""
from __future__ import annotations

import numpy as np


def _softplus(api):
    jnp = api.numpy

    @api.custom_jvp
    def softplus(x):
        return jnp.log1p(jnp.exp(x))

    @softplus.defjvp
    def softplus_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return softplus(x), t / (1 + jnp.exp(-x))
    return softplus


def _clip_gradient(api):
    jnp = api.numpy

    @api.custom_vjp
    def clip_gradient(x, lo, hi):
        return x

    def fwd(x, lo, hi):
        return x, (lo, hi)

    def bwd(res, g):
        lo, hi = res
        return (jnp.clip(g, lo, hi), None, None)
    clip_gradient.defvjp(fwd, bwd)
    return clip_gradient


def _sin_times(api):
    jnp = api.numpy

    @api.custom_vjp
    def f(x, y):
        return jnp.sin(x) * y

    def f_fwd(x, y):
        return f(x, y), (jnp.cos(x), jnp.sin(x), y)

    def f_bwd(res, g):
        cos_x, sin_x, y = res
        return (cos_x * g * y, sin_x * g)
    f.defvjp(f_fwd, f_bwd)
    return f


def _cases():
    x = np.linspace(-3.0, 3.0, 7)
    big = np.array([-800.0, -1.0, 0.0, 2.0, 800.0])
    y = np.linspace(0.5, 2.0, 7)
    return [
        ("softplus", lambda api: _softplus(api), (x,)),
        ("sin_times", lambda api: _sin_times(api), (x, y)),
        ("checkpoint_plain", lambda api: api.checkpoint(lambda w: api.numpy.sin(api.numpy.sin(w)) * w), (x,)),
        ("stop_gradient_plain", lambda api: lambda v: api.stop_gradient(v) * v, (x,)),
        ("softplus_grad_big", lambda api: api.grad(lambda v: api.numpy.sum(_softplus(api)(v))), (big,)),
        ("softplus_hessian_diag", lambda api: api.vmap(api.grad(api.grad(_softplus(api)))), (x,)),
        ("softplus_jvp", lambda api: lambda v, t: api.jvp(_softplus(api), (v,), (t,)), (x, y)),
        ("softplus_grad_of_vmap", lambda api: api.grad(lambda v: api.numpy.sum(api.vmap(_softplus(api))(v) ** 2)),
         (x,)),
        ("clip_grad", lambda api: api.grad(lambda v: api.numpy.sum(_clip_gradient(api)(v, -0.5, 0.5) * 3.0 * v)),
         (x,)),
        ("clip_vmap_grad", lambda api: api.vmap(api.grad(lambda v: _clip_gradient(api)(v, -1.0, 1.0) * 4.0)), (x,)),
        ("sin_times_grads", lambda api: api.grad(lambda a, b: api.numpy.sum(_sin_times(api)(a, b)), argnums=(0, 1)),
         (x, y)),
        ("sin_times_vmap", lambda api: api.vmap(api.grad(_sin_times(api), argnums=(0, 1))), (x, y)),
        ("checkpoint_grad", lambda api: api.grad(lambda v: api.numpy.sum(
            api.checkpoint(lambda w: api.numpy.sin(api.numpy.sin(w)) * w)(v))), (x,)),
        ("checkpoint_vmap_grad", lambda api: api.vmap(api.grad(api.checkpoint(
            lambda w: api.numpy.tanh(w) ** 3))), (x,)),
        ("stop_gradient", lambda api: api.grad(lambda v: api.numpy.sum(api.stop_gradient(v) * v ** 2)), (x,)),
    ]


CASES = _cases()
