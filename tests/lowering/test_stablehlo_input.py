"""StableHLO input: modules written elsewhere (JAX's printing, sprue's own stage) compile and run.

The JAX texts are written out here as `jax.jit(f).lower(*args).as_text()` prints them (jax is not
a dependency), with the attributes, locations and helper functions JAX adds.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.api.driver import load_stablehlo
from sprue.base.errors import SprueError, UnsupportedError
from sprue.lowering.stablehlo_input import StableHLOInputError, UnsupportedStableHLOOpError

# jax.jit(f).lower(x, y).as_text() for f(x, y) = (erf(relu(sin(x))), sum(y)), with a Shardy mesh,
# sharding attributes, a @Sharding custom call, an outlined private function and locations.
JAX_MODULE = """\
module @jit_f attributes {jax.uses_shape_polymorphism = false, mhlo.frontend_attributes = {xla.sdy.meshes = "{}"}, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=1]>
  func.func public @main(%arg0: tensor<3xf32> {mhlo.layout_mode = "default", mhlo.sharding = "{replicated}", sdy.sharding = #sdy.sharding<@mesh, [{}]>}, %arg1: tensor<3xf32> {mhlo.layout_mode = "default"}) -> (tensor<3xf32> {jax.result_info = "[0]", mhlo.layout_mode = "default"}, tensor<f32> {jax.result_info = "[1]"}) {
    %0 = stablehlo.sine %arg0 : tensor<3xf32> loc(#loc3)
    %1 = call @relu(%0) : (tensor<3xf32>) -> tensor<3xf32> loc(#loc4)
    %2 = chlo.erf %1 : tensor<3xf32> -> tensor<3xf32> loc(#loc4)
    %3 = stablehlo.custom_call @Sharding(%2) {mhlo.sharding = "{replicated}"} : (tensor<3xf32>) -> tensor<3xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %4 = stablehlo.reduce(%arg1 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<3xf32>, tensor<f32>) -> tensor<f32>
    return %3, %4 : tensor<3xf32>, tensor<f32>
  } loc(#loc)
  func.func private @relu(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %1 = stablehlo.maximum %arg0, %0 : tensor<3xf32>
    return %1 : tensor<3xf32>
  }
} loc(#loc)
#loc = loc(unknown)
#loc1 = loc("f.py":3:0)
#loc2 = loc("f.py":4:0)
#loc3 = loc("jit(f)/jit(main)/sin"(#loc1))
#loc4 = loc("jit(f)/jit(main)/relu"(#loc2))
"""


def _module(signature: str, body: str) -> str:
    """A JAX-style module around one @main."""
    return ("module @jit_g attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
            f"  func.func public @main{signature} {{\n{body}\n  }}\n}}\n")


def test_jax_module_runs_and_matches_numpy() -> None:
    f = load_stablehlo(JAX_MODULE)
    x = np.array([0.5, -1.0, 2.0], np.float32)
    y = np.array([1.0, 2.0, 3.0], np.float32)
    out, total = f(x, y)
    expected = np.array([math.erf(max(math.sin(v), 0.0)) for v in x.astype(np.float64)], np.float32)
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    assert out.dtype == np.float32 and total == np.float32(6.0)
    # names from jax.result_info; the private helper was inlined away
    assert [r.name for r in f.signature.results] == ["[0]", "[1]"]
    assert "@relu" not in f.mlir and "sdy" not in f.mlir


def test_loads_from_a_file_and_through_sprue_load(tmp_path) -> None:
    path = tmp_path / "f.mlir"
    path.write_text(JAX_MODULE)
    x = np.array([0.25, 0.5, 1.0], np.float32)
    for f in (load_stablehlo(path), load_stablehlo(str(path)), sprue.load(str(path))):
        out, total = f(x, x)
        assert out.shape == (3,) and total == np.float32(1.75)


def test_single_result_is_bare() -> None:
    f = load_stablehlo(_module("(%arg0: tensor<2x3xf64>) -> (tensor<3x2xf64> {jax.result_info = \"\"})",
                               "    %0 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<2x3xf64>) -> tensor<3x2xf64>\n"
                               "    return %0 : tensor<3x2xf64>"))
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(f(x), x.T)


def test_dynamic_dims_are_any_size() -> None:
    # jax.export with shape polymorphism: `?` dims, the size read with get_dimension_size
    f = load_stablehlo(_module(
        "(%arg0: tensor<?xf32> {mhlo.layout_mode = \"default\"}) -> (tensor<?xf32>, tensor<i32>)",
        "    %0 = stablehlo.multiply %arg0, %arg0 : tensor<?xf32>\n"
        "    %1 = stablehlo.get_dimension_size %arg0, dim = 0 : (tensor<?xf32>) -> tensor<i32>\n"
        "    return %0, %1 : tensor<?xf32>, tensor<i32>"))
    assert f.signature.args[0].shape == (None,)
    for n in (1, 5, 17):
        x = np.linspace(-2, 2, n).astype(np.float32)
        sq, size = f(x)
        np.testing.assert_array_equal(sq, x * x)
        assert size == n and size.dtype == np.int32


def test_element_types_cross_the_boundary() -> None:
    # unsigned, bool (i1) and f16 arguments and results
    f = load_stablehlo(_module(
        "(%arg0: tensor<4xui8>, %arg1: tensor<4xi1>, %arg2: tensor<2xf16>) -> (tensor<4xui32>, tensor<4xi1>, tensor<2xf16>)",
        "    %0 = stablehlo.convert %arg0 : (tensor<4xui8>) -> tensor<4xui32>\n"
        "    %1 = stablehlo.not %arg1 : tensor<4xi1>\n"
        "    %2 = stablehlo.add %arg2, %arg2 : tensor<2xf16>\n"
        "    return %0, %1, %2 : tensor<4xui32>, tensor<4xi1>, tensor<2xf16>"))
    a = np.array([0, 1, 200, 255], np.uint8)
    b = np.array([True, False, True, False])
    c = np.array([1.5, -2.0], np.float16)
    u, n, h = f(a, b, c)
    assert u.dtype == np.uint32 and n.dtype == np.bool_ and h.dtype == np.float16
    np.testing.assert_array_equal(u, a.astype(np.uint32))
    np.testing.assert_array_equal(n, ~b)
    np.testing.assert_array_equal(h, c + c)


def test_boolean_add_is_or() -> None:
    # the spec's i1 add is logical OR (the upstream linalg lowering would compute XOR)
    f = load_stablehlo(_module("(%arg0: tensor<2xi1>, %arg1: tensor<2xi1>) -> tensor<2xi1>",
                               "    %0 = stablehlo.add %arg0, %arg1 : tensor<2xi1>\n"
                               "    return %0 : tensor<2xi1>"))
    np.testing.assert_array_equal(f(np.array([True, False]), np.array([True, True])), [True, True])


@pytest.mark.parametrize("op, fn", [("erf", math.erf), ("sinh", math.sinh), ("cosh", math.cosh),
                                    ("tan", math.tan), ("asin", math.asin), ("atan", math.atan),
                                    ("asinh", math.asinh), ("atanh", math.atanh)])
def test_chlo_unary_ops(op: str, fn) -> None:
    f = load_stablehlo(_module("(%arg0: tensor<3xf64>) -> tensor<3xf64>",
                               f"    %0 = chlo.{op} %arg0 : tensor<3xf64> -> tensor<3xf64>\n"
                               "    return %0 : tensor<3xf64>"))
    x = np.array([-0.5, 0.125, 0.75])
    np.testing.assert_allclose(f(x), [fn(v) for v in x], rtol=1e-14)


def test_chlo_is_inf_and_square() -> None:
    f = load_stablehlo(_module(
        "(%arg0: tensor<4xf32>) -> (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xf32>)",
        "    %0 = chlo.is_inf %arg0 : tensor<4xf32> -> tensor<4xi1>\n"
        "    %1 = chlo.is_pos_inf %arg0 : tensor<4xf32> -> tensor<4xi1>\n"
        "    %2 = chlo.is_neg_inf %arg0 : tensor<4xf32> -> tensor<4xi1>\n"
        "    %3 = chlo.square %arg0 : tensor<4xf32>\n"
        "    return %0, %1, %2, %3 : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xf32>"))
    x = np.array([np.inf, -np.inf, np.nan, 3.0], np.float32)
    inf, pos, neg, sq = f(x)
    np.testing.assert_array_equal(inf, np.isinf(x))
    np.testing.assert_array_equal(pos, np.isposinf(x))
    np.testing.assert_array_equal(neg, np.isneginf(x))
    np.testing.assert_array_equal(sq, x * x)


def test_sprue_own_stablehlo_stage_loads_and_matches() -> None:
    @sprue.qjit
    def g(x, y):
        return jnp.sum(jnp.sin(x) * y, axis=0), jnp.maximum(x, 0.0)

    x = np.linspace(-1, 1, 12).reshape(4, 3)
    y = np.arange(12.0).reshape(4, 3)
    expected = g(x, y)
    f = load_stablehlo(g.mlir)
    got = f(x, y)
    assert len(got) == 2
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-15)


def test_entry_is_the_only_public_function() -> None:
    text = ("func.func private @helper(%a: tensor<f64>) -> tensor<f64> {\n"
            "  %0 = stablehlo.negate %a : tensor<f64>\n  func.return %0 : tensor<f64>\n}\n"
            "func.func @compute(%a: tensor<f64>) -> tensor<f64> {\n"
            "  %0 = func.call @helper(%a) : (tensor<f64>) -> tensor<f64>\n  func.return %0 : tensor<f64>\n}\n")
    assert load_stablehlo(text)(2.5) == -2.5


# -- errors ---------------------------------------------------------------------------------------
def test_unparseable_text_names_the_location() -> None:
    with pytest.raises(StableHLOInputError, match=r"not a valid StableHLO module(.|\n)*:2:") as info:
        load_stablehlo("func.func @main() -> tensor<f32> {\n  %0 = stablehlo.bogus_op : tensor<f32>\n}\n")
    assert isinstance(info.value, SprueError)


def test_missing_file_is_an_input_error(tmp_path) -> None:
    with pytest.raises(StableHLOInputError, match="cannot read"):
        load_stablehlo(tmp_path / "missing.mlir")


def test_unknown_custom_call_names_its_target() -> None:
    text = _module("(%arg0: tensor<3xf32>) -> tensor<3xf32>",
                   "    %0 = stablehlo.custom_call @lapack_sgesdd(%arg0) : (tensor<3xf32>) -> tensor<3xf32>\n"
                   "    return %0 : tensor<3xf32>")
    with pytest.raises(UnsupportedStableHLOOpError, match=r"custom_call @lapack_sgesdd at loc\(\"-\":3"):
        load_stablehlo(text)


def test_unsupported_chlo_op_names_it() -> None:
    text = _module("(%arg0: tensor<3xf32>) -> tensor<3xf32>",
                   "    %0 = chlo.polygamma %arg0, %arg0 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>\n"
                   "    return %0 : tensor<3xf32>")
    with pytest.raises(UnsupportedError, match=r"chlo\.polygamma at loc\(\"-\":3"):
        load_stablehlo(text)
    text = _module("(%arg0: tensor<3xf32>) -> (tensor<2xf32>, tensor<2xi32>)",
                   "    %0:2 = chlo.top_k(%arg0, k = 2) : tensor<3xf32> -> (tensor<2xf32>, tensor<2xi32>)\n"
                   "    return %0#0, %0#1 : tensor<2xf32>, tensor<2xi32>")
    with pytest.raises(UnsupportedError, match=r"chlo\.top_k at line 3"):
        load_stablehlo(text)


def test_no_entry_function() -> None:
    text = ("func.func @a(%x: tensor<f32>) -> tensor<f32> {\n  func.return %x : tensor<f32>\n}\n"
            "func.func @b(%x: tensor<f32>) -> tensor<f32> {\n  func.return %x : tensor<f32>\n}\n")
    with pytest.raises(StableHLOInputError, match=r"no entry function.*@a, @b"):
        load_stablehlo(text)


def test_unsupported_element_type() -> None:
    text = _module("(%arg0: tensor<2xcomplex<f16>>) -> tensor<2xcomplex<f16>>",
                   "    return %arg0 : tensor<2xcomplex<f16>>")
    with pytest.raises(UnsupportedError, match=r"complex<f16>.*@main argument 0"):
        load_stablehlo(text)


def test_shape_polymorphic_jax_export() -> None:
    # jax.export with shapes ("n", "m"): scalars are broadcast with dynamic_broadcast_in_dim to a
    # shape assembled from get_dimension_size; an operand dim of size 1 (`?` here) is expanded.
    f = load_stablehlo(_module(
        "(%arg0: tensor<?x?xf32>, %arg1: tensor<?x1xf32>) -> tensor<?x?xf32>",
        "    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>\n"
        "    %0 = stablehlo.get_dimension_size %arg0, dim = 0 : (tensor<?x?xf32>) -> tensor<i32>\n"
        "    %1 = stablehlo.reshape %0 : (tensor<i32>) -> tensor<1xi32>\n"
        "    %2 = stablehlo.get_dimension_size %arg0, dim = 1 : (tensor<?x?xf32>) -> tensor<i32>\n"
        "    %3 = stablehlo.reshape %2 : (tensor<i32>) -> tensor<1xi32>\n"
        "    %4 = stablehlo.concatenate %1, %3, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>\n"
        "    %5 = stablehlo.dynamic_broadcast_in_dim %cst, %4, dims = [] : (tensor<f32>, tensor<2xi32>) -> tensor<?x?xf32>\n"
        "    %6 = stablehlo.add %arg0, %5 : tensor<?x?xf32>\n"
        "    %8 = stablehlo.dynamic_broadcast_in_dim %arg1, %4, dims = [0, 1] : (tensor<?x1xf32>, tensor<2xi32>) -> tensor<?x?xf32>\n"
        "    %9 = stablehlo.multiply %6, %8 : tensor<?x?xf32>\n"
        "    return %9 : tensor<?x?xf32>"))
    for n, m in ((2, 3), (4, 1), (1, 5)):
        x = np.arange(n * m, dtype=np.float32).reshape(n, m)
        y = np.arange(1, n + 1, dtype=np.float32).reshape(n, 1)
        np.testing.assert_array_equal(f(x, y), (x + 1) * y)


@pytest.mark.parametrize("signature, body, args, expected", [
    # pad with interior padding, and negative (cropping) edge padding
    ("(%a: tensor<3xf32>) -> tensor<10xf32>",
     "%c = stablehlo.constant dense<7.0> : tensor<f32>\n"
     "%0 = stablehlo.pad %a, %c, low = [1], high = [2], interior = [2] : (tensor<3xf32>, tensor<f32>) -> tensor<10xf32>\n"
     "return %0 : tensor<10xf32>",
     [np.array([1, 2, 3], np.float32)], np.array([7, 1, 7, 7, 2, 7, 7, 3, 7, 7], np.float32)),
    ("(%a: tensor<3xf32>) -> tensor<?xf32>",
     "%c = stablehlo.constant dense<0.0> : tensor<f32>\n%l = stablehlo.constant dense<[1]> : tensor<1xi64>\n"
     "%0 = stablehlo.dynamic_pad %a, %c, %l, %l, %l : (tensor<3xf32>, tensor<f32>, tensor<1xi64>, tensor<1xi64>,"
     " tensor<1xi64>) -> tensor<?xf32>\nreturn %0 : tensor<?xf32>",
     [np.array([1, 2, 3], np.float32)], np.array([0, 1, 0, 2, 0, 3, 0], np.float32)),
    # bitcast_convert, also between widths
    ("(%a: tensor<2xf64>) -> tensor<2x2xi32>",
     "%0 = stablehlo.bitcast_convert %a : (tensor<2xf64>) -> tensor<2x2xi32>\nreturn %0 : tensor<2x2xi32>",
     [np.array([1.0, -2.0])], np.array([1.0, -2.0]).view(np.int32).reshape(2, 2)),
    # ui64 constants above 2**63 and unsigned arithmetic
    ("(%a: tensor<2xui64>) -> tensor<2xui64>",
     "%c = stablehlo.constant dense<[18446744073709551615, 9223372036854775808]> : tensor<2xui64>\n"
     "%0 = stablehlo.divide %c, %a : tensor<2xui64>\nreturn %0 : tensor<2xui64>",
     [np.array([3, 2], np.uint64)], np.array([2**64 // 3, 2**62], np.uint64)),
    # JAX's while form with two carries
    ("(%a: tensor<i32>) -> tensor<i32>",
     "%c = stablehlo.constant dense<0> : tensor<i32>\n"
     "%0:2 = stablehlo.while(%it = %c, %acc = %a) : tensor<i32>, tensor<i32>\ncond {\n"
     "%c10 = stablehlo.constant dense<10> : tensor<i32>\n"
     "%p = stablehlo.compare LT, %it, %c10, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
     "stablehlo.return %p : tensor<i1>\n} do {\n%one = stablehlo.constant dense<1> : tensor<i32>\n"
     "%n = stablehlo.add %it, %one : tensor<i32>\n%m = stablehlo.add %acc, %it : tensor<i32>\n"
     "stablehlo.return %n, %m : tensor<i32>, tensor<i32>\n}\nreturn %0#1 : tensor<i32>",
     [np.int32(5)], np.int32(50)),
])
def test_ops_beyond_the_conformance_cases(signature: str, body: str, args: list, expected: np.ndarray) -> None:
    got = load_stablehlo(f"func.func @main{signature} {{\n{body}\n}}\n")(*args)
    assert np.asarray(got).dtype == np.asarray(expected).dtype
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("rank", [65, 200_000])
def test_types_of_too_many_axes_are_refused_before_mlir_reads_them(rank) -> None:
    # MLIR's type parser is quadratic in the rank: a fuzzed 200,000-axis type took minutes
    dims = "x".join(["1"] * rank)
    text = f"func.func @main(%a: tensor<{dims}xf32>) -> tensor<{dims}xf32> {{\n  return %a : tensor<{dims}xf32>\n}}\n"
    with pytest.raises(StableHLOInputError, match=r"<text>:1:\d+: a tensor type of more than 64 axes"):
        load_stablehlo(text)


def test_a_type_of_64_axes_loads() -> None:
    shape = (1,) * 62 + (2, 3)
    dims = "x".join(map(str, shape))
    f = load_stablehlo(f"func.func @main(%a: tensor<{dims}xf64>) -> tensor<{dims}xf64> {{\n"
                       f"  %0 = stablehlo.add %a, %a : tensor<{dims}xf64>\n  return %0 : tensor<{dims}xf64>\n}}\n")
    x = np.arange(6.0).reshape(shape)
    np.testing.assert_array_equal(f(x), x + x)
