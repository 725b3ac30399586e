"""Lowering of conv_general_dilated (sprue.lax.convolution), one of two ways:

- im2col: `lax.conv_as_matmul` (the lhs channels-last, one pad, a strided slice per kernel offset
  stacked as patches (n, *out, K, c), one dot_general over (K, c)) traced to a jaxpr and emitted
  inline, so the contraction runs on the packed matmul kernels (matmul.py) every dot_general gets;
- direct: `stablehlo.convolution`, which stablehlo-legalize-to-linalg makes a linalg.conv_* op or
  a linalg.generic over (out, taps, features).

im2col wins where each group has several input features (NHWC 8x32x32x16 * 3x3x16x32 in f32:
0.66 ms against 11 ms direct; NCHW 3.9 against 8.6 ms; 3 input features 0.70 against 0.90 ms);
with one input feature per group (depthwise, a 1-channel jnp.convolve) the patches copy the input
K times for a matrix-vector product and direct wins (1x1x100000 * 64: 0.21 ms direct, 18 ms
im2col; depthwise 8x32x32x32: 0.63 against 1.25 ms). So: direct when the kernel has one input
feature, else im2col. SPRUE_CONV_LOWERING=im2col or =stablehlo forces one (part of the compile
cache's key), for measuring and testing both."""
from __future__ import annotations

import os

import numpy as np
from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo

from sprue import lax
from sprue.ir.core import Eqn
from sprue.lowering.emit import emit_jaxpr, numpy_consts
from sprue.lowering.rules_common import LoweringContext, Value, const_array, convert, lowering_rules, op1, tensor_type
from sprue.trace.tracing import trace_flat


def _im2col(ctx: LoweringContext, eqn: Eqn, lhs: Value, rhs: Value) -> list[Value]:
    params = eqn.params
    closed = trace_flat(lambda x, w: [lax.conv_as_matmul(x, w, **params)], [v.aval for v in eqn.invars])
    return emit_jaxpr(ctx, closed.jaxpr, [const_array(c) for c in numpy_consts(closed)], [lhs, rhs])


def _stablehlo_convolution(ctx: LoweringContext, eqn: Eqn, lhs: Value, rhs: Value) -> list[Value]:
    p = eqn.params
    ls, rs, os_ = p["dimension_numbers"]
    out = eqn.outvars[0].aval
    lhs, rhs = convert(lhs, np.dtype(out.dtype)), convert(rhs, np.dtype(out.dtype))
    dims = _stablehlo.ConvDimensionNumbers.get(
        input_batch_dimension=ls[0], input_feature_dimension=ls[1], input_spatial_dimensions=list(ls[2:]),
        kernel_output_feature_dimension=rs[0], kernel_input_feature_dimension=rs[1],
        kernel_spatial_dimensions=list(rs[2:]), output_batch_dimension=os_[0],
        output_feature_dimension=os_[1], output_spatial_dimensions=list(os_[2:]))
    i64 = ir.IntegerType.get_signless(64)
    padding = np.asarray(p["padding"], np.int64).reshape(-1, 2)
    return [op1("stablehlo.convolution", [lhs, rhs], tensor_type(out.shape, np.dtype(out.dtype)), {
        "dimension_numbers": dims,
        "window_strides": ir.DenseI64ArrayAttr.get(list(p["window_strides"])),
        "padding": ir.DenseIntElementsAttr.get(padding, type=ir.RankedTensorType.get(list(padding.shape), i64)),
        "lhs_dilation": ir.DenseI64ArrayAttr.get(list(p["lhs_dilation"])),
        "rhs_dilation": ir.DenseI64ArrayAttr.get(list(p["rhs_dilation"])),
        "feature_group_count": ir.IntegerAttr.get(i64, p["feature_group_count"]),
        "batch_group_count": ir.IntegerAttr.get(i64, p["batch_group_count"])})]


def _convolution(ctx: LoweringContext, eqn: Eqn, lhs: Value, rhs: Value) -> list[Value]:
    forced = os.environ.get("SPRUE_CONV_LOWERING", "").strip()
    _, rs, _ = eqn.params["dimension_numbers"]
    direct = eqn.invars[1].aval.shape[rs[1]] == 1 if forced not in ("im2col", "stablehlo") else forced == "stablehlo"
    return (_stablehlo_convolution if direct else _im2col)(ctx, eqn, lhs, rhs)


lowering_rules[lax.conv_general_dilated_p] = _convolution
