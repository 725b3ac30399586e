"""What sprue.numpy puts in a jaxpr: typed literals for Python scalars, broadcast_in_dim for
broadcasting, integer_pow for static exponents, slice/rev/dynamic_slice/gather/scatter for
indexing, weak-type promotion — checked on the equations and avals, as JAX would build them."""
import numpy as np
import pytest

import sprue.numpy as jnp
from sprue.api.traced import make_jaxpr
from sprue.lax import GatherScatterMode
from sprue.trace.tracing import eval_jaxpr
from tests.helpers.jaxprs import prims

f32, f64, i32, i64 = np.float32, np.float64, np.int32, np.int64


def test_python_scalar_becomes_typed_literal():
    cj = make_jaxpr(lambda b: b * 2.0)(np.ones(3, f32))
    assert "mul a 2.0:f32[]" in str(cj)
    assert cj.out_avals[0].str_short() == "f32[3]"
    cj = make_jaxpr(lambda b: b + 1)(np.ones(3, i32))
    assert "add a 1:i32[]" in str(cj)
    cj = make_jaxpr(lambda b: b / 2)(np.ones(3, i32))  # true division of ints is float64
    assert prims(cj) == ["convert_element_type", "div"] and "2.0:f64[]" in str(cj)
    assert cj.consts == []


def test_broadcasting_inserts_broadcast_in_dim():
    cj = make_jaxpr(lambda x, y: x + y)(np.ones((3, 1), f32), np.ones(4, f32))
    bc = [e for e in cj.eqns if e.primitive.name == "broadcast_in_dim"]
    assert [(e.params["shape"], e.params["broadcast_dimensions"]) for e in bc] == [((3, 4), (0, 1)), ((3, 4), (1,))]
    cj = make_jaxpr(lambda x, s: x + s)(np.ones(3, f32), np.float32(2))  # a rank-0 tracer is broadcast
    assert prims(cj) == ["broadcast_in_dim", "add"]


def test_weak_types():
    cj = make_jaxpr(lambda s, x: s * x)(2.0, np.ones(3, f32))
    assert cj.in_avals[0].weak_type and cj.out_avals[0].dtype == f32
    assert cj.eqns[0].primitive.name == "convert_element_type" and cj.eqns[0].params["new_dtype"] == f32
    cj = make_jaxpr(lambda s: s * 2)(3.0)
    assert cj.out_avals[0].weak_type and cj.out_avals[0].dtype == f64
    cj = make_jaxpr(lambda x: jnp.sin(x))(np.ones(3, i32))
    assert cj.out_avals[0].dtype == f64 and not cj.out_avals[0].weak_type


def test_static_integer_power_is_integer_pow():
    cj = make_jaxpr(lambda x: (x ** 2, x ** -1, jnp.power(x, 3), x ** 2.5))(np.ones(3, f32))
    pows = [(e.primitive.name, e.params.get("y")) for e in cj.eqns]
    assert pows == [("integer_pow", 2), ("integer_pow", -1), ("integer_pow", 3), ("pow", None)]
    cj = make_jaxpr(lambda x, n: x ** n)(np.ones(3, f32), np.int32(3))
    assert "pow" in prims(cj) and cj.out_avals[0].dtype == f64  # numpy: f32 ** int32 array is float64


def test_static_slices_lower_to_slice_and_rev():
    cj = make_jaxpr(lambda x: x[1:5:2, ::-1])(np.ones((6, 4), f32))
    assert prims(cj) == ["slice", "rev"]
    s = cj.eqns[0].params
    assert (s["start_indices"], s["limit_indices"], s["strides"]) == ((1, 0), (4, 4), (2, 1))
    cj = make_jaxpr(lambda x: x[2, None])(np.ones((6, 4), f32))
    assert prims(cj) == ["slice", "squeeze", "reshape"] and cj.out_avals[0].shape == (1, 4)
    assert prims(make_jaxpr(lambda x: x[:, ...])(np.ones(3, f32))) == []


def test_traced_int_index_is_dynamic_slice():
    cj = make_jaxpr(lambda x, i: x[i])(np.ones((6, 4), f32), np.int64(-1))
    assert prims(cj) == ["lt", "add", "select_n", "dynamic_slice", "squeeze"]
    assert cj.eqns[3].params["slice_sizes"] == (1, 4)
    x = np.arange(24.0).reshape(6, 4)
    for i in (-6, -1, 0, 5):
        (out,) = eval_jaxpr(cj.jaxpr, cj.consts, x, np.int64(i))
        np.testing.assert_array_equal(out, x[i])


def test_array_index_is_gather_clip():
    cj = make_jaxpr(lambda x, i: x[:, i])(np.ones((6, 4), f32), np.array([0, -1]))
    g = [e for e in cj.eqns if e.primitive.name == "gather"]
    assert len(g) == 1 and g[0].params["mode"] == GatherScatterMode.CLIP
    assert "select_n" in prims(cj)  # negative indices wrapped first
    dn = g[0].params["dimension_numbers"]
    assert (dn.offset_dims, dn.collapsed_slice_dims, dn.start_index_map) == ((0,), (1,), (1,))
    # static index arrays are checked and wrapped at trace time: a constant, no select
    cj = make_jaxpr(lambda x: x[[0, -1]])(np.ones((6, 4), f32))
    assert prims(cj) == ["gather"] and cj.consts[0].tolist() == [[0], [5]]


def test_updates_are_scatters():
    cj = make_jaxpr(lambda x, i: (x.at[i].add(1.0), x.at[0].set(2.0), x.at[i].multiply(3.0), x.at[i].min(0.0),
                                  x.at[i].max(0.0)))(np.ones(4, f32), np.array([0, 0, 1]))
    scatters = [e for e in cj.eqns if e.primitive.name.startswith("scatter")]
    assert [e.primitive.name for e in scatters] == ["scatter-add", "scatter", "scatter-mul", "scatter-min", "scatter-max"]
    assert all(e.params["mode"] == GatherScatterMode.FILL_OR_DROP for e in scatters)
    outs = eval_jaxpr(cj.jaxpr, cj.consts, np.ones(4, f32), np.array([0, 0, 1]))
    np.testing.assert_array_equal(outs[0], [3, 2, 1, 1])  # duplicates accumulate


def test_reductions_and_creation():
    cj = make_jaxpr(lambda m: jnp.sum(m))(np.ones((2, 3), bool))
    assert prims(cj) == ["convert_element_type", "reduce_sum"] and cj.out_avals[0].dtype == i64
    cj = make_jaxpr(lambda: (jnp.zeros(3), jnp.arange(5), jnp.eye(2)))()
    assert "broadcast_in_dim[broadcast_dimensions=() shape=(3,) sharding=None] 0.0:f64[]" in str(cj)
    assert cj.eqns[1].primitive.name == "iota" and cj.consts == []
    cj = make_jaxpr(lambda x: jnp.mean(x, axis=0, keepdims=True))(np.ones((2, 3), i32))
    assert [a.str_short() for a in cj.out_avals] == ["f64[1,3]"]


def test_products_are_dot_general():
    cj = make_jaxpr(lambda a, b: (a @ b, jnp.einsum("bij,bjk->bik", a, b), jnp.dot(a[0], b[0, :, 0])))(
        np.ones((5, 2, 3), f32), np.ones((5, 3, 4), f32))
    dots = [e for e in cj.eqns if e.primitive.name == "dot_general"]
    assert len(dots) == 3
    assert dots[0].params["dimension_numbers"] == (((2,), (1,)), ((0,), (0,)))
    assert [a.str_short() for a in cj.out_avals] == ["f32[5,2,4]", "f32[5,2,4]", "f32[2]"]


def test_no_numpy_compute_on_traced_values():
    """Operations on traced arrays all become equations: only index arrays are constants."""
    def f(x):
        y = jnp.sort(jnp.abs(x) + jnp.sin(x) ** 2).cumsum()
        return jnp.where(y > 1, y, -y)[::2].sum()
    cj = make_jaxpr(f)(np.ones(6, f32))
    assert cj.consts == [] and cj.out_avals[0].str_short() == "f32[]"


def test_array_inside_trace_is_a_traced_constant():
    def f(x):
        c = jnp.array([1.0, 2.0, 3.0])
        return c.at[0].set(x[0]), jnp.array([x[0], 2.0])
    cj = make_jaxpr(f)(np.ones(3, f64))
    assert cj.consts[0].tolist() == [1.0, 2.0, 3.0]  # (then the scatter's index array)
    outs = eval_jaxpr(cj.jaxpr, cj.consts, np.array([7.0, 0, 0]))
    np.testing.assert_array_equal(outs[0], [7.0, 2.0, 3.0])
    np.testing.assert_array_equal(outs[1], [7.0, 2.0])


@pytest.mark.parametrize("dt", [f32, f64, i32, i64, np.bool_])
def test_eager_returns_numpy_arrays(dt):
    x = np.ones((2, 3), dt)
    for out in (jnp.abs(x), jnp.sum(x), jnp.reshape(x, -1), jnp.zeros(2), jnp.floor(x), jnp.astype(x, dt),
                jnp.squeeze(x), jnp.sin(2), jnp.maximum(1, 2)):
        assert type(out) is jnp.EagerArray and isinstance(out, np.ndarray)   # numpy arrays with .at


def test_scalar_types():
    assert np.dtype(jnp.float32) == np.float32 and jnp.zeros(2, jnp.int32).dtype == np.int32
    assert jnp.float32(2.5).dtype == np.float32 and isinstance(np.float32(1), jnp.float32)
    cj = make_jaxpr(lambda x: jnp.int32(x))(np.ones(2, f64))
    assert cj.out_avals[0].dtype == i32
    assert jnp.issubdtype(jnp.float32, jnp.floating) and np.ones(1, f32).dtype == jnp.float32
