"""JAX's linear-algebra primitives as a printed jaxpr has them (io/jaxpr_linalg.py), written by hand
in JAX 0.10's style, compiled with sprue.load and compared with numpy's dense solves."""
import numpy as np
import pytest

import sprue
from sprue.io.jaxpr_lexer import JaxprUnsupportedError


def load(tmp_path, text):
    p = tmp_path / "prog.jaxpr"
    p.write_text(text)
    return sprue.load(p)


def _dense(dl, d, du):
    """The tridiagonal matrices, batched over the leading axes (dl[..., 0] and du[..., -1] unused)."""
    m = d.shape[-1]
    a = np.zeros(d.shape + (m,), d.dtype)
    i = np.arange(m)
    a[..., i, i] = d
    a[..., i[1:], i[:-1]] = dl[..., 1:]
    a[..., i[:-1], i[1:]] = du[..., :-1]
    return a


def test_tridiagonal_solve_batched_with_several_right_hand_sides(tmp_path):
    # lax.linalg.tridiagonal_solve (jax.scipy's spline and implicit-stencil solves); dl[0] and du[-1]
    # hold garbage that must not be read
    f = load(tmp_path, "{ lambda ; a:f64[2,5] b:f64[2,5] c:f64[2,5] d:f64[2,5,3]. let\n"
                       "    e:f64[2,5,3] = tridiagonal_solve[perturb_singular=False] a b c d\n  in (e,) }")
    r = np.random.RandomState(0)
    dl, du = r.uniform(-1, 1, (2, 5)), r.uniform(-1, 1, (2, 5))
    d = r.uniform(2.5, 4, (2, 5))
    dl[:, 0], du[:, -1] = 1e3, -1e3
    b = r.uniform(-1, 1, (2, 5, 3))
    np.testing.assert_allclose(f(dl, d, du, b), np.linalg.solve(_dense(dl, d, du), b), rtol=1e-12, atol=1e-14)


def test_tridiagonal_solve_with_perturbed_singular_pivots_is_refused(tmp_path):
    with pytest.raises(JaxprUnsupportedError, match=r"prog.jaxpr:2:5: tridiagonal_solve: tridiagonal_solve with"
                                                    r" perturb_singular=True .* is not supported"):
        load(tmp_path, "{ lambda ; a:f32[4] b:f32[4] c:f32[4] d:f32[4,1]. let\n"
                       "    e:f32[4,1] = tridiagonal_solve[perturb_singular=True] a b c d\n  in (e,) }")
