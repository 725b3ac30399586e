"""The jaxpr data structures, the tracer and the printer (JAX's text format)."""
import re

import numpy as np
import pytest

import sprue
import sprue.lax as lax
from sprue.base.errors import ConcretizationError, SprueError, SprueTypeError
from sprue.base.pytree import tree_flatten, tree_unflatten
from sprue.ir.core import Literal, encode_name
from sprue.trace.tracing import eval_jaxpr


def test_print_format_matches_jax():
    def f(x, y):
        return lax.add(x, lax.mul(y, 2.0))
    text = str(sprue.make_jaxpr(f)(np.ones(3), np.ones(3)))
    assert text == ("{ lambda ; a:f64[3] b:f64[3]. let\n"
                    "    c:f64[3] = mul b 2.0:f64[]\n"
                    "    d:f64[3] = add a c\n"
                    "  in (d,) }")


def test_params_sorted_and_printed_like_jax():
    text = str(sprue.make_jaxpr(lambda x: lax.reduce_sum(lax.broadcast_in_dim(x, (2, 3), (1,)), (0,)))(np.ones(3)))
    assert "broadcast_in_dim[broadcast_dimensions=(1,) shape=(2, 3) sharding=None] a" in text
    assert "reduce_sum[axes=(0,) out_sharding=None]" in text


def test_names_continue_past_z():
    assert [encode_name(i) for i in (0, 25, 26, 27, 51, 52)] == ["a", "z", "ba", "bb", "bz", "ca"]


def test_closure_over_array_becomes_constvar_and_scalar_becomes_literal():
    c = np.arange(3.0)
    k = 5.0
    cj = sprue.make_jaxpr(lambda x: lax.mul(lax.add(x, c), k))(np.ones(3))
    assert len(cj.jaxpr.constvars) == 1 and cj.consts[0] is c
    assert any(isinstance(a, Literal) and a.val == 5.0 for e in cj.eqns for a in e.invars)
    assert str(cj).startswith("{ lambda a:f64[3]; b:f64[3]. let")
    x = np.random.rand(3)
    np.testing.assert_allclose(eval_jaxpr(cj.jaxpr, cj.consts, x)[0], (x + c) * k)


def test_pytrees_flatten_in_and_rebuild_out():
    tree = {"b": (1, [2, None]), "a": np.zeros(2)}
    leaves, td = tree_flatten(tree)
    assert len(leaves) == 3 and leaves[0] is tree["a"]  # dict keys sorted, None has no leaves
    rebuilt = tree_unflatten(td, leaves)
    assert rebuilt["b"] == (1, [2, None]) and rebuilt["a"] is tree["a"]

    def f(p):
        return {"s": lax.add(p["x"], p["y"][0]), "t": (p["y"][1],)}
    cj = sprue.make_jaxpr(f)({"x": np.ones(2), "y": (np.ones(2), np.ones(4))})
    assert [str(a.str_short()) for a in cj.in_avals] == ["f64[2]", "f64[2]", "f64[4]"]
    assert len(cj.jaxpr.outvars) == 2


def test_static_argnums_select_python_control_flow():
    def f(x, n):
        for _ in range(n):
            x = lax.sin(x)
        return x
    assert len(sprue.make_jaxpr(f, static_argnums=1)(np.ones(2), 3).eqns) == 3


def test_every_equation_records_the_user_source_line():
    def f(x):
        return lax.exp(x)  # this line
    cj = sprue.make_jaxpr(f)(np.ones(2))
    line = f.__code__.co_firstlineno + 1
    assert cj.eqns[0].source_info.endswith(f"test_jaxpr.py:{line} (f)")


def test_python_if_on_traced_value_names_the_line():
    def f(x):
        if lax.gt(x, 0.0):
            return x
        return lax.neg(x)
    with pytest.raises(ConcretizationError, match=r"Python control flow on a traced value .*test_jaxpr\.py:\d+"):
        sprue.make_jaxpr(f)(1.0)


def test_escaped_tracer_is_an_error_not_a_crash():
    box = []
    sprue.make_jaxpr(lambda x: box.append(x) or x)(np.ones(2))
    with pytest.raises(SprueError, match="escaped the function it was traced in"):
        lax.sin(box[0])


def test_bad_operand_type_names_the_line():
    with pytest.raises(SprueTypeError, match=r"str object is not a valid array operand \(at .*test_jaxpr\.py"):
        sprue.make_jaxpr(lambda x: lax.add(x, "a"))(1.0)


def test_bad_return_value_is_explained():
    with pytest.raises(SprueTypeError, match=r"returned a str at output 0"):
        sprue.make_jaxpr(lambda x: "hello")(1.0)


def test_shape_rule_errors_are_sprue_errors():
    with pytest.raises(SprueError, match=r"add requires operands of equal shapes .*f64\[3\], f64\[4\]"):
        sprue.make_jaxpr(lambda x, y: lax.add(x, y))(np.ones(3), np.ones(4))


def test_eager_lax_matches_numpy():
    x = np.random.rand(4, 3)
    np.testing.assert_allclose(lax.reduce_sum(lax.sin(x), (1,)), np.sin(x).sum(1))
    assert lax.add(np.int32(2), np.int32(3)).dtype == np.int32


def test_nested_jaxpr_params_print_inline():
    inner = sprue.make_jaxpr(lambda x: lax.sin(x))(1.0)
    from sprue.ir.core import Eqn, Jaxpr, Primitive, Var, pp_jaxpr
    p = Primitive("test_call_print")  # not registered: only printed
    a = Var(inner.in_avals[0]); b = Var(inner.out_avals[0])
    text = pp_jaxpr(Jaxpr([], [a], [b], [Eqn(p, [a], [b], {"jaxpr": inner, "name": "inner"})]))
    assert re.search(r"test_call_print\[jaxpr=\{ lambda ; a:f64\[\]\. let\n\s+b:f64\[\] = sin a\n\s+in \(b,\) \}\n\s+name=inner\] a", text), text
