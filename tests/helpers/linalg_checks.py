"""The derivative check of the linalg tests: sprue's jvp against central differences of a numpy
function, reverse mode against forward (<grad, t> = <w, jvp t>), the compiled gradient against the
eager one."""
import numpy as np

import sprue
import sprue.numpy as jnp


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
