"""Derivatives and batching of complex functions, with JAX's convention, against finite differences.

JAX's convention (its FAQ, "Complex numbers and differentiation"): a complex number z = x + iy is the
pair (x, y); jvp is the real-linear map of the tangent; vjp is its transpose under the pairing
<a, b> = Re(a b) (no conjugation). So:

- for a real-valued f of complex z,  grad(f)(z) = df/dx - i df/dy   (grad |z|^2 = 2 conj(z));
- for a holomorphic f, jvp(t) = f'(z) t, vjp(ct) = ct f'(z), and grad(f, holomorphic=True)(z) = f'(z),
  jacfwd/jacrev(f, holomorphic=True) the matrix of f'.

Each is checked compiled (qjit of the transformation) and eagerly.
"""
from __future__ import annotations

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax

H = 1e-6   # the finite-difference step


def rand_complex(shape, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=shape) + 1j * rng.normal(size=shape) + 0.3


def fd_grad_of_real(f, z):
    """df/dx - i df/dy per element, by central differences (JAX's grad of a real-valued f)."""
    g = np.zeros_like(z)
    for k in np.ndindex(z.shape):
        e = np.zeros_like(z)
        e[k] = H
        dx = (f(z + e) - f(z - e)) / (2 * H)
        dy = (f(z + 1j * e) - f(z - 1j * e)) / (2 * H)
        g[k] = dx - 1j * dy
    return g


def fd_holomorphic(f, z):
    """f'(z) elementwise for an elementwise holomorphic f: (f(z + h) - f(z - h)) / 2h."""
    return (f(z + H) - f(z - H)) / (2 * H)


def both(transformed):
    """The transformed function eagerly and compiled."""
    return [transformed, sprue.qjit(transformed)]


# real-valued functions of complex arrays: (sprue function, numpy function)
REAL_VALUED = {
    "abs2": (lambda z: jnp.sum(jnp.abs(z) ** 2), lambda z: np.sum(np.abs(z) ** 2)),
    "real_sin": (lambda z: jnp.sum(jnp.real(jnp.sin(z))), lambda z: np.sum(np.real(np.sin(z)))),
    "abs_exp": (lambda z: jnp.sum(jnp.abs(jnp.exp(z * z))), lambda z: np.sum(np.abs(np.exp(z * z)))),
    "imag_log_conj": (lambda z: jnp.sum(jnp.imag(jnp.log(z) * jnp.conj(z))),
                      lambda z: np.sum(np.imag(np.log(z) * np.conj(z)))),
    "angle": (lambda z: jnp.sum(jnp.angle(z)), lambda z: np.sum(np.angle(z))),
    "sqrt_times_z": (lambda z: jnp.real(jnp.sum(jnp.sqrt(z) * z)), lambda z: np.real(np.sum(np.sqrt(z) * z))),
    "abs_tanh": (lambda z: jnp.sum(jnp.abs(jnp.tanh(z))), lambda z: np.sum(np.abs(np.tanh(z)))),
    "lax_complex": (lambda z: jnp.sum(jnp.abs(lax.complex(jnp.real(z), 2 * jnp.imag(z)))),
                    lambda z: np.sum(np.abs(z.real + 2j * z.imag))),
    "matmul": (lambda z: jnp.sum(jnp.abs(z @ z.T)), lambda z: np.sum(np.abs(z @ z.T))),
    "power": (lambda z: jnp.real(jnp.sum(z ** 2.5 / (1 + z))), lambda z: np.real(np.sum(z ** 2.5 / (1 + z)))),
    "mixed_real": (lambda z: jnp.sum(jnp.real(z * jnp.cos(jnp.abs(z)))),
                   lambda z: np.sum(np.real(z * np.cos(np.abs(z))))),
}


@pytest.mark.parametrize("name", sorted(REAL_VALUED))
def test_grad_of_real_valued_function_is_jax_convention(name):
    ours, theirs = REAL_VALUED[name]
    z = rand_complex((2, 2), seed=len(name))
    want = fd_grad_of_real(lambda v: float(theirs(v)), z)
    for g in both(sprue.grad(ours)):
        got = g(z)
        assert got.dtype == np.complex128
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_grad_of_abs_squared_is_twice_the_conjugate():
    z = rand_complex((4,))
    np.testing.assert_allclose(sprue.grad(lambda z: jnp.sum(z * jnp.conj(z)).real)(z), 2 * np.conj(z))


def test_grad_of_complex64_input():
    z = rand_complex((3,)).astype(np.complex64)
    got = sprue.qjit(sprue.grad(lambda z: jnp.sum(jnp.abs(z) ** 2)))(z)
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, 2 * np.conj(z), rtol=1e-6)


HOLOMORPHIC = {
    "sin_times_z": (lambda z: jnp.sin(z) * z, lambda z: np.sin(z) * z),
    "exp_log": (lambda z: jnp.exp(z) + jnp.log(z), lambda z: np.exp(z) + np.log(z)),
    "tanh_sqrt": (lambda z: jnp.tanh(jnp.sqrt(z)), lambda z: np.tanh(np.sqrt(z))),
    "rational": (lambda z: (z ** 3 + 1j) / (z - 2.0), lambda z: (z ** 3 + 1j) / (z - 2.0)),
    "cosh_arctan": (lambda z: jnp.cosh(z) * jnp.arctan(z), lambda z: np.cosh(z) * np.arctan(z)),
}


@pytest.mark.parametrize("name", sorted(HOLOMORPHIC))
def test_holomorphic_grad_jacobians_jvp_vjp(name):
    ours, theirs = HOLOMORPHIC[name]
    z = rand_complex((3,), seed=len(name))
    deriv = fd_holomorphic(theirs, z)
    for g in both(sprue.grad(lambda z: jnp.sum(ours(z)), holomorphic=True)):
        np.testing.assert_allclose(g(z), deriv, rtol=1e-6, atol=1e-7)
    for jac in (sprue.jacfwd, sprue.jacrev):
        for j in both(jac(ours, holomorphic=True)):
            np.testing.assert_allclose(j(z), np.diag(deriv), rtol=1e-6, atol=1e-7)
    t = rand_complex((3,), seed=9)
    primal, tangent = sprue.jvp(ours, (z,), (t,))
    np.testing.assert_allclose(primal, theirs(z), rtol=1e-12)
    np.testing.assert_allclose(tangent, deriv * t, rtol=1e-6, atol=1e-7)
    _, vjp_fn = sprue.vjp(ours, z)
    np.testing.assert_allclose(vjp_fn(t)[0], t * deriv, rtol=1e-6, atol=1e-7)   # the transpose: no conj


def test_jvp_of_non_holomorphic_functions():
    z, t = rand_complex((4,)), rand_complex((4,), seed=1)
    for f, ref in [(jnp.abs, np.abs), (jnp.conj, np.conj), (jnp.real, np.real), (jnp.imag, np.imag),
                   (jnp.angle, np.angle)]:
        _, got = sprue.jvp(f, (z,), (t,))
        np.testing.assert_allclose(got, (ref(z + H * t) - ref(z - H * t)) / (2 * H), rtol=1e-6, atol=1e-7)


def test_vjp_is_the_transpose_of_jvp():
    """<ct, jvp(t)> == <vjp(ct), t> under JAX's pairing <a, b> = Re(a b), for a non-holomorphic map."""
    def f(z):
        return jnp.conj(z) * jnp.abs(z) + lax.complex(jnp.imag(z), jnp.real(z) ** 2)
    z, t, ct = rand_complex((5,)), rand_complex((5,), 1), rand_complex((5,), 2)
    _, jt = sprue.jvp(f, (z,), (t,))
    _, vjp_fn = sprue.vjp(f, z)
    np.testing.assert_allclose(np.sum(np.real(ct * jt)), np.sum(np.real(vjp_fn(ct)[0] * t)), rtol=1e-10)


def test_real_to_complex_functions():
    """A complex function of real inputs: jacfwd (real inputs) and the grad of its modulus."""
    x = np.array([0.3, -1.2, 2.0])
    f = lambda x: jnp.exp(1j * x) * x    # noqa: E731
    for j in both(sprue.jacfwd(f)):
        np.testing.assert_allclose(j(x), np.diag((1j * x + 1) * np.exp(1j * x)), rtol=1e-12)
    g = sprue.grad(lambda x: jnp.sum(jnp.abs(f(x)) ** 2 + jnp.real(f(x))))
    want = 2 * x + np.real((1j * x + 1) * np.exp(1j * x))
    for gg in both(g):
        got = gg(x)
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_vmap_against_a_loop():
    zs = rand_complex((4, 3))
    f = lambda z: (jnp.sum(z * jnp.conj(z)), jnp.exp(z) @ z, jnp.angle(z))   # noqa: E731
    for v in both(sprue.vmap(f)):
        got = v(zs)
        for k, z in enumerate(zs):
            np.testing.assert_allclose(got[0][k], np.sum(z * np.conj(z)), rtol=1e-12)
            np.testing.assert_allclose(got[1][k], np.exp(z) @ z, rtol=1e-12)
            np.testing.assert_allclose(got[2][k], np.angle(z), rtol=1e-12)
    g = sprue.vmap(sprue.grad(lambda z: jnp.sum(jnp.abs(z) ** 2)))
    np.testing.assert_allclose(g(zs), 2 * np.conj(zs))


@pytest.mark.parametrize("call, message", [
    (lambda z: sprue.grad(lambda z: jnp.sum(z * z))(z),
     "grad requires <lambda> to return a real floating-point scalar, got c128.*pass holomorphic=True"),
    (lambda z: sprue.grad(lambda x: jnp.sum(x), holomorphic=True)(np.ones(3)),
     "grad with holomorphic=True requires complex inputs, but argument 'x' of <lambda> is f64"),
    (lambda z: sprue.grad(lambda z: jnp.sum(jnp.abs(z)), holomorphic=True)(z),
     "grad with holomorphic=True requires <lambda> to return a complex scalar, got f64"),
    (lambda z: sprue.jacfwd(jnp.sin)(z), "jacfwd requires real inputs, got c128.*pass holomorphic=True"),
    (lambda z: sprue.jacrev(jnp.abs, holomorphic=True)(z),
     "jacrev with holomorphic=True requires complex outputs, got f64"),
    (lambda z: sprue.jacrev(jnp.sin)(z), "jacrev requires real floating-point outputs, got c128"),
    (lambda z: sprue.jvp(jnp.sin, (z,), (np.ones(3),)), "tangent 0 has type f64.3. but its primal is c128.3."),
])
def test_errors(call, message):
    with pytest.raises(TypeError, match=message):
        call(rand_complex((3,)))


def test_holomorphic_hessian():
    z = rand_complex((2,))
    # f(z) = sum(z0^2 z1 + exp(z1)): d2f = [[2 z1, 2 z0], [2 z0, exp(z1)]]
    want = np.array([[2 * z[1], 2 * z[0]], [2 * z[0], np.exp(z[1])]])
    for h in both(sprue.hessian(lambda z: z[0] ** 2 * z[1] + jnp.exp(z[1]), holomorphic=True)):
        np.testing.assert_allclose(h(z), want, rtol=1e-12)
