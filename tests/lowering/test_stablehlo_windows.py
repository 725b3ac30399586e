"""JAX's shape-polymorphic windows (lowering/stablehlo_windows.py), written as jax.export writes
them, compiled once and run at several sizes against numpy references: a run-time window
(cumulative product along the run-time axis), run-time padding of either sign with interior
padding (dynamic_pad), max pooling's gradient with run-time sizes (select_and_scatter) and a
two-operand window (max pooling's tangent). The corpus's symbolic exports run them as JAX wrote them."""
from __future__ import annotations

import numpy as np
import pytest

from sprue.api.driver import load_stablehlo

# jnp.cumprod(x, axis=0) of x: f32[b, 3] as jax.export writes it: a window of b rows, b - 1 padded above
CUMPROD = """\
func.func @main(%x: tensor<?x3xf32>) -> tensor<?x3xf32> {
  %one = stablehlo.constant dense<1.0> : tensor<f32>
  %c1 = stablehlo.constant dense<1> : tensor<1xi32>
  %c0 = stablehlo.constant dense<0> : tensor<1xi32>
  %cm = stablehlo.constant dense<-1> : tensor<i32>
  %b = stablehlo.get_dimension_size %x, dim = 0 : (tensor<?x3xf32>) -> tensor<i32>
  %bm = stablehlo.add %b, %cm : tensor<i32>
  %bm1 = stablehlo.reshape %bm : (tensor<i32>) -> tensor<1xi32>
  %p0 = stablehlo.concatenate %bm1, %c0, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  %p0r = stablehlo.reshape %p0 : (tensor<2xi32>) -> tensor<1x2xi32>
  %p1 = stablehlo.concatenate %c0, %c0, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  %p1r = stablehlo.reshape %p1 : (tensor<2xi32>) -> tensor<1x2xi32>
  %pad = stablehlo.concatenate %p0r, %p1r, dim = 0 : (tensor<1x2xi32>, tensor<1x2xi32>) -> tensor<2x2xi32>
  %b1 = stablehlo.reshape %b : (tensor<i32>) -> tensor<1xi32>
  %win = stablehlo.concatenate %b1, %c1, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  %ones = stablehlo.concatenate %c1, %c1, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  %r = stablehlo.custom_call @stablehlo.dynamic_reduce_window(%x, %one, %win, %ones, %ones, %ones, %pad) {api_version = 2 : i32, called_computations = [@reducer]} : (tensor<?x3xf32>, tensor<f32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>, tensor<2x2xi32>) -> tensor<?x3xf32>
  return %r : tensor<?x3xf32>
}
func.func private @reducer(%a: tensor<f32>, %b: tensor<f32>) -> tensor<f32> {
  %0 = stablehlo.multiply %a, %b : tensor<f32>
  return %0 : tensor<f32>
}
"""

# a dynamic_pad by run-time amounts: low = n - 3 (negative for n < 3: cropping), high = 1, interior = 1
DYNAMIC_PAD = """\
func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  %v = stablehlo.constant dense<-1.0> : tensor<f32>
  %n = stablehlo.get_dimension_size %x, dim = 0 : (tensor<?xf32>) -> tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %lo0 = stablehlo.subtract %n, %c3 : tensor<i32>
  %lo = stablehlo.reshape %lo0 : (tensor<i32>) -> tensor<1xi32>
  %one = stablehlo.constant dense<1> : tensor<1xi32>
  %r = stablehlo.dynamic_pad %x, %v, %lo, %one, %one : (tensor<?xf32>, tensor<f32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}
"""

# the gradient of max pooling (window 3x2, strides 2x2, no padding) with run-time rows
SELECT_AND_SCATTER = """\
func.func @main(%x: tensor<?x6xf32>, %s: tensor<?x3xf32>) -> tensor<?x6xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = "stablehlo.select_and_scatter"(%x, %s, %z) <{window_dimensions = array<i64: 3, 2>, window_strides = array<i64: 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<?x6xf32>, tensor<?x3xf32>, tensor<f32>) -> tensor<?x6xf32>
  return %r : tensor<?x6xf32>
}
"""

# max pooling's tangent: the tangent at each 2x2 window's first maximum, a window of two operands
PAIRED_WINDOW = """\
func.func @main(%x: tensor<?x4xf32>, %t: tensor<?x4xf32>) -> tensor<?x3xf32> {
  %lo = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r:2 = "stablehlo.reduce_window"(%x, %t, %lo, %z) <{window_dimensions = array<i64: 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %at: tensor<f32>, %b: tensor<f32>, %bt: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %m = stablehlo.select %c, %a, %b : tensor<i1>, tensor<f32>
    %mt = stablehlo.select %c, %at, %bt : tensor<i1>, tensor<f32>
    stablehlo.return %m, %mt : tensor<f32>, tensor<f32>
  }) : (tensor<?x4xf32>, tensor<?x4xf32>, tensor<f32>, tensor<f32>) -> (tensor<?x3xf32>, tensor<?x3xf32>)
  return %r#1 : tensor<?x3xf32>
}
"""


def test_a_window_as_long_as_the_run_time_axis():
    f = load_stablehlo(CUMPROD)
    for rows in (1, 4, 7):
        x = np.random.RandomState(rows).uniform(0.5, 1.5, (rows, 3)).astype(np.float32)
        np.testing.assert_allclose(f(x), np.cumprod(x, axis=0), rtol=1e-6)


def test_run_time_padding_of_either_sign_with_interior_padding():
    f = load_stablehlo(DYNAMIC_PAD)
    for n in (1, 2, 3, 5):
        x = np.arange(1, n + 1, dtype=np.float32)
        spaced = np.full(2 * n - 1, -1.0, np.float32)
        spaced[::2] = x
        low = n - 3
        # a negative low edge crops the interior-padded operand and the high edge after it (StableHLO's pad)
        want = np.concatenate([np.full(max(low, 0), -1.0, np.float32), spaced, [-1.0]])[max(-low, 0):]
        np.testing.assert_array_equal(f(x), want.astype(np.float32))


def _max_pool_grad(x, s, window=(3, 2), strides=(2, 2)):
    out = np.zeros_like(x)
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            patch = x[i * strides[0]:i * strides[0] + window[0], j * strides[1]:j * strides[1] + window[1]]
            a, b = np.unravel_index(np.argmax(patch), patch.shape)   # the first maximum, row-major
            out[i * strides[0] + a, j * strides[1] + b] += s[i, j]
    return out


@pytest.mark.parametrize("rows", [3, 5, 8])
def test_max_pooling_gradient_with_run_time_rows(rows):
    f = load_stablehlo(SELECT_AND_SCATTER)
    rng = np.random.RandomState(rows)
    x = rng.uniform(-2, 2, (rows, 6)).astype(np.float32)
    x[0, :2] = 1.0   # a tie: the first maximum takes it
    s = rng.uniform(-2, 2, ((rows - 3) // 2 + 1, 3)).astype(np.float32)
    np.testing.assert_allclose(f(x, s), _max_pool_grad(x, s), rtol=1e-6)


def test_a_window_of_two_operands_with_run_time_rows():
    f = load_stablehlo(PAIRED_WINDOW)
    for rows in (2, 3, 6):
        rng = np.random.RandomState(rows)
        x, t = rng.uniform(-2, 2, (2, rows, 4)).astype(np.float32)
        want = np.zeros((rows - 1, 3), np.float32)
        for i in range(rows - 1):
            for j in range(3):
                patch = x[i:i + 2, j:j + 2]
                a, b = np.unravel_index(np.argmax(patch), patch.shape)
                want[i, j] = t[i + a, j + b]
        np.testing.assert_array_equal(f(x, t), want)
