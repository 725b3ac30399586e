"""JAX's `lu`, `cholesky` and `triangular_solve` in a loaded jaxpr compute with sprue.lax.linalg's
native primitives (the same code and speed as sprue.numpy.linalg's), compared with numpy."""
import numpy as np

import sprue

PROGRAM = """{ lambda ; a:f64[70,70] b:f64[70,70] c:f64[70,3]. let
    d:f64[70,70] e:i32[70] f:i32[70] = lu a
    g:f64[70,70] = cholesky b
    h:f64[70,3] = triangular_solve[left_side=True lower=True transpose_a=True conjugate_a=False unit_diagonal=False] g c
  in (d, f, g, h) }"""


def test_factorizations_of_a_loaded_jaxpr_are_the_native_primitives(tmp_path):
    path = tmp_path / "prog.jaxpr"
    path.write_text(PROGRAM)
    f = sprue.load(path)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((70, 70)) / 9 + 2 * np.eye(70)
    s = a @ a.T
    c = rng.standard_normal((70, 3))
    text = str(f.jaxpr)
    assert all(name in text for name in ("linalg_lu", "linalg_cholesky", "linalg_triangular_solve")), text
    packed, perm, L, x = f(a, s, c)
    assert perm.dtype == np.int32
    np.testing.assert_allclose((np.tril(packed, -1) + np.eye(70)) @ np.triu(packed), a[perm], atol=1e-12)
    np.testing.assert_allclose(L, np.linalg.cholesky(s), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(x, np.linalg.solve(L.T, c), rtol=1e-10, atol=1e-12)
