"""What the linalg tests share: well-posed random matrices, a closeness check scaled to the result,
and the derivative check (sprue's jvp against central differences of a numpy function, reverse mode
against forward (<grad, t> = <w, jvp t>), the compiled gradient against the eager one)."""
import numpy as np

import sprue
import sprue.numpy as jnp


def spd(rng, *shape, dtype=np.float64):
    """Symmetric positive definite matrices (..., n, n): a a^T / n + I."""
    n = shape[-1]
    a = rng.standard_normal(shape)
    return (a @ np.swapaxes(a, -1, -2) / n + np.eye(n)).astype(dtype)


def well_conditioned(rng, *shape, dtype=np.float64):
    """Matrices (..., n, n) near 2 I: random entries of size 1/sqrt(n) on top."""
    n = shape[-1]
    return (rng.standard_normal(shape) / np.sqrt(n) + 2 * np.eye(n)).astype(dtype)


def close(tolerances, got, want, dtype=np.float64):
    """got == want in shape and dtype, and in value to tolerances[dtype] relative, the absolute
    tolerance scaled by want's largest magnitude."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=tolerances[dtype], atol=tolerances[dtype] * scale)


def check_derivatives(f, f_numpy, args, rng, h=1e-6, rtol=1e-5):
    tangents = [rng.standard_normal(np.shape(x)) for x in args]
    fd = (np.asarray(f_numpy(*[x + h * t for x, t in zip(args, tangents)]))
          - np.asarray(f_numpy(*[x - h * t for x, t in zip(args, tangents)]))) / (2 * h)
    out, tangent_out = sprue.jvp(f, tuple(args), tuple(tangents))
    np.testing.assert_allclose(tangent_out, fd, rtol=rtol, atol=rtol / 10 * max(1.0, float(np.max(np.abs(fd)))))
    w = rng.standard_normal(np.shape(out))
    argnums = tuple(range(len(args)))
    loss = lambda *xs: jnp.sum(f(*xs) * w)   # noqa: E731
    grads = sprue.grad(loss, argnums=argnums)(*args)
    np.testing.assert_allclose(sum(np.sum(g * t) for g, t in zip(grads, tangents)), np.sum(w * tangent_out),
                               rtol=1e-9, atol=1e-9)
    for g, cg in zip(grads, sprue.qjit(sprue.grad(loss, argnums=argnums))(*args)):
        np.testing.assert_allclose(cg, g, rtol=1e-9, atol=1e-12)
