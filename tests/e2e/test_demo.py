"""The issue's acceptance program: softmax + matmul + reduction over a dict of inputs."""
import importlib.util
import re

import numpy as np

import sprue
import sprue.numpy as jnp
from tests.helpers.system import REPO


def test_demo_runs_and_matches_numpy(capsys):
    spec = importlib.util.spec_from_file_location("demo", REPO / "examples" / "demo.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    demo.main()  # asserts against numpy itself
    out = capsys.readouterr().out
    assert "matches numpy" in out


def test_softmax_matmul_reduction_over_dict_prints_jax_format():
    @sprue.qjit
    def f(inputs):
        h = inputs["x"] @ inputs["w"]
        e = jnp.exp(h - jnp.max(h, axis=1, keepdims=True))
        s = e / jnp.sum(e, axis=1, keepdims=True)
        return jnp.sum(s * inputs["v"])
    rng = np.random.default_rng(1)
    inputs = {"x": rng.standard_normal((5, 3)), "w": rng.standard_normal((3, 4)), "v": rng.standard_normal(4)}
    h = inputs["x"] @ inputs["w"]
    e = np.exp(h - h.max(1, keepdims=True))
    np.testing.assert_allclose(f(inputs), (e / e.sum(1, keepdims=True) * inputs["v"]).sum(), rtol=1e-12)
    text = str(f.jaxpr)
    # JAX's grammar: { lambda consts ; invars . let eqns in (outs) }, typed binders, sorted params
    assert re.match(r"\{ lambda ; a:f64\[4\] b:f64\[3,4\] c:f64\[5,3\]\. let\n", text), text
    assert re.search(r"= dot_general\[dimension_numbers=\(\(\(1,\), \(0,\)\), \(\(\), \(\)\)\)\s", text), text
    assert re.search(r"= reduce_max\[axes=\(1,\) out_sharding=None\] ", text)
    assert re.search(r"= exp(\[accuracy=None\])? ", text)
    assert re.search(r"\n  in \([a-z]+,\) \}$", text), text
