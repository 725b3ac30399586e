"""Prefix scans written as a reduce_window spanning an axis (JAX's encoding of cumsum & co., and
sprue's own for static sizes) computed in one pass (lowering/legalize_scan.py), against numpy."""
from __future__ import annotations

import numpy as np
import pytest
from torch_mlir import ir

import sprue
import sprue.lax as lax
from sprue.api.driver import load_stablehlo
from sprue.lowering.legalize_scan import prefix_axis
from sprue.lowering.pipeline import make_pipeline_context, parse_module


def _window_module(shape: str, elem: str, init: str, op: str, window: str, padding: str) -> str:
    """A reduce_window as JAX prints it for `cumsum(x, axis)` (`op` the region's combining op)."""
    t = f"tensor<{shape}x{elem}>"
    return f"""module @jit_f {{
  func.func public @main(%arg0: {t}) -> ({t} {{jax.result_info = ""}}) {{
    %cst = stablehlo.constant dense<{init}> : tensor<{elem}>
    %0 = "stablehlo.reduce_window"(%arg0, %cst) <{{padding = dense<{padding}> : tensor<{padding.count('[') - 1}x2xi64>, window_dimensions = array<i64: {window}>}}> ({{
    ^bb0(%a: tensor<{elem}>, %b: tensor<{elem}>):
      %1 = {op} %a, %b : tensor<{elem}>
      stablehlo.return %1 : tensor<{elem}>
    }}) : ({t}, tensor<{elem}>) -> {t}
    return %0 : {t}
  }}
}}"""


@pytest.mark.parametrize("axis, reverse", [(0, False), (1, False), (2, False), (1, True), (2, True)])
def test_jax_cumsum_window_matches_numpy(axis, reverse):
    shape = (3, 7, 5)
    window = ", ".join(str(n if d == axis else 1) for d, n in enumerate(shape))
    n = shape[axis]
    pads = ", ".join(("[0, %d]" % (n - 1) if reverse else "[%d, 0]" % (n - 1)) if d == axis else "[0, 0]"
                     for d in range(3))
    f = load_stablehlo(_window_module("3x7x5", "f64", "0.000000e+00", "stablehlo.add", window, f"[{pads}]"))
    x = np.random.default_rng(axis).standard_normal(shape)
    want = np.flip(np.cumsum(np.flip(x, axis), axis), axis) if reverse else np.cumsum(x, axis)
    np.testing.assert_allclose(f(x), want, rtol=1e-12)


@pytest.mark.parametrize("elem, init, op, ref", [
    ("i32", "-2147483648", "stablehlo.maximum", np.maximum.accumulate),
    ("i32", "2147483647", "stablehlo.minimum", np.minimum.accumulate),
    ("f32", "0xFF800000", "stablehlo.maximum", np.maximum.accumulate),
    ("i64", "1", "stablehlo.multiply", np.multiply.accumulate),
])
def test_other_monoids_match_numpy(elem, init, op, ref):
    f = load_stablehlo(_window_module("9", elem, init, op, "9", "[[8, 0]]"))
    dtype = {"i32": np.int32, "i64": np.int64, "f32": np.float32}[elem]
    x = np.array([3, -1, 4, 1, -5, 9, 2, -6, 5], dtype=dtype)
    np.testing.assert_array_equal(f(x), ref(x))


def test_a_window_whose_init_is_not_the_identity_keeps_its_meaning():
    # init 1 is not add's identity: every padded place adds 1 (the generic lowering's result)
    f = load_stablehlo(_window_module("5", "f64", "1.000000e+00", "stablehlo.add", "5", "[[4, 0]]"))
    x = np.arange(5.0)
    want = np.cumsum(x) + 1 + (4 - np.arange(5))   # init, and the 4 - i padded inits in the window
    np.testing.assert_allclose(f(x), want)


def test_compiled_cumulative_ops_on_long_axes_match_numpy():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3000))
    b = rng.random((4, 3000)) < 0.3

    @sprue.qjit
    def f(x, b):
        return (lax.cumsum(x, 1), lax.cumsum(x, 0, True), lax.cummax(x, 1, True), lax.cumprod(x[:, :40], 1),
                lax.cumsum(b, 1))

    got = f(x, b)
    np.testing.assert_allclose(got[0], np.cumsum(x, 1), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got[1], np.flip(np.cumsum(np.flip(x, 0), 0), 0), rtol=1e-12)
    np.testing.assert_array_equal(got[2], np.flip(np.maximum.accumulate(np.flip(x, 1), 1), 1))
    np.testing.assert_allclose(got[3], np.cumprod(x[:, :40], 1), rtol=1e-12)
    np.testing.assert_array_equal(got[4], np.logical_or.accumulate(b, 1))


@pytest.mark.parametrize("init, window, padding, expected", [
    ("0.000000e+00", "5", "[[4, 0]]", (0, False)),
    ("0.000000e+00", "5", "[[0, 4]]", (0, True)),
    ("1.000000e+00", "5", "[[4, 0]]", None),    # not the identity
    ("0.000000e+00", "3", "[[2, 0]]", None),    # a sliding window, not a prefix
])
def test_which_windows_are_prefix_scans(init, window, padding, expected):
    module = parse_module(make_pipeline_context(),
                          _window_module("5", "f64", init, "stablehlo.add", window, padding))
    found = []

    def visit(op):
        if op.name == "stablehlo.reduce_window":
            found.append(op)
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    assert prefix_axis(found[0]) == expected


@pytest.mark.parametrize("n", [0, 1, 2, 257])
def test_cumulative_ops_with_run_time_sizes_match_numpy(n):
    # `?` sizes: sprue's prefix-scan custom_call, the same one pass as a static scan (legalize_scan.py)
    rng = np.random.default_rng(n)
    x = rng.standard_normal((3, n))

    @sprue.qjit(abstracted_axes=({0: "b", 1: "n"},))
    def f(x):
        return (lax.cumsum(x, 1), lax.cumsum(x, 1, True), lax.cummax(x, 0), lax.cummin(x, 1, True),
                lax.cumprod(x, 1))

    got = f(x)
    flip = np.flip
    np.testing.assert_allclose(got[0], np.cumsum(x, 1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[1], flip(np.cumsum(flip(x, 1), 1), 1), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(got[2], np.maximum.accumulate(x, 0))
    np.testing.assert_array_equal(got[3], flip(np.minimum.accumulate(flip(x, 1), 1), 1))
    np.testing.assert_allclose(got[4], np.cumprod(x, 1), rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.uint8, np.bool_])
def test_run_time_sized_scans_along_every_axis_and_type_match_numpy(axis, dtype):
    # the last axis carries the running value in a register; the others step row after row; an
    # axis empty at run time reads nothing (the same compiled function for every size)
    @sprue.qjit(abstracted_axes=({0: "a", 1: "b", 2: "c"},))
    def f(x):
        return (sprue.numpy.cumsum(x, axis), lax.cumsum(x, axis, True), lax.cummax(x, axis),
                lax.cummin(x, axis, True))

    rng = np.random.default_rng(axis)
    flip = np.flip
    for shape in ((3, 4, 5), (1, 7, 2), (2, 0, 3), (0, 2, 2), (2, 2, 0)):
        x = (rng.standard_normal(shape) * 4).astype(dtype)
        got = f(x)
        acc = np.add if dtype != np.bool_ else np.logical_or
        want_rev = flip(acc.accumulate(flip(x, axis), axis), axis) if x.size else x
        np.testing.assert_array_equal(got[0], np.cumsum(x, axis), err_msg=str(shape))
        np.testing.assert_array_equal(got[1], want_rev.astype(got[1].dtype), err_msg=str(shape))
        np.testing.assert_array_equal(got[2], np.maximum.accumulate(x, axis), err_msg=str(shape))
        np.testing.assert_array_equal(got[3], flip(np.minimum.accumulate(flip(x, axis), axis), axis), err_msg=str(shape))


def test_run_time_sized_cumsum_keeps_negative_zero_and_nan_order():
    # element after element from the first (not from an added identity): -0.0 stays -0.0
    f = sprue.qjit(lambda x: sprue.numpy.cumsum(x, axis=1), abstracted_axes=({0: "a", 1: "b"},))
    x = np.array([[-0.0, -0.0, 1.0], [np.nan, 1.0, 2.0]])
    got = f(x)
    np.testing.assert_array_equal(got, np.cumsum(x, axis=1))
    assert np.signbit(got[0, :2]).all()


def test_a_users_module_cannot_call_sprues_own_prefix_scan():
    # the custom_call is sprue's internal form: a StableHLO file naming it is refused like any other
    text = """module @jit_f {
  func.func public @main(%arg0: tensor<4xf64>) -> tensor<4xf64> {
    %0 = "stablehlo.custom_call"(%arg0) <{call_target_name = "sprue.prefix_scan"}> {sprue.axis = 0 : i64, sprue.combine = "stablehlo.add", sprue.reverse = false} : (tensor<4xf64>) -> tensor<4xf64>
    return %0 : tensor<4xf64>
  }
}"""
    with pytest.raises(sprue.SprueError, match=r"attribute 'sprue.axis': sprue attributes may not appear in StableHLO input"):
        load_stablehlo(text)
    bare = text.replace(' {sprue.axis = 0 : i64, sprue.combine = "stablehlo.add", sprue.reverse = false}', "")
    with pytest.raises(sprue.SprueError, match=r"stablehlo.custom_call @sprue.prefix_scan"):
        load_stablehlo(bare)


@pytest.mark.parametrize("op", ["cumsum", "cummax"])
def test_float16_prefix_scans(op):
    """A float16 init constant is read (MLIR's indexing of a dense f16 attribute is not)."""
    x = np.random.default_rng(3).uniform(-2, 2, 10).astype(np.float16)
    got = sprue.qjit(lambda v: getattr(lax, op)(v, axis=0))(x)
    want = np.cumsum(x, dtype=np.float32) if op == "cumsum" else np.maximum.accumulate(x)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-3, atol=2e-3)
