"""Lowering of conv_general_dilated (sprue.lax.convolution), one of two ways:

- im2col (the default): `lax.conv_as_matmul` traced to a jaxpr and emitted inline: the lhs
  channels-last, one pad, then per kernel tap a strided slice times the tap's (c, o) kernel,
  summed (or, where the output has fewer positions than the kernel has taps, per output position
  its window times the whole kernel, stacked), so the contractions run on the packed matmul
  kernels (matmul.py) and fusion_sums.py accumulates the taps in one buffer;
- direct: `stablehlo.convolution`, which stablehlo-legalize-to-linalg makes a linalg.conv_* op or
  a linalg.generic over (out, taps, features), run by the scalar loops.

Measured (f32, 2 shared cores, ms; notes/s20_round2_a.md): NHWC 8x32x32x16 * 3x3x16x32 0.49
im2col, 13.0 direct (JAX 0.36); NCHW 1.0 against 8.7 (JAX 0.48); depthwise 8x32x32x32 0.12
against 0.65 (JAX 5.0); a 1-channel 1x1x100000 * 64 0.26 against 0.17 (JAX 1.4). So im2col
always; SPRUE_CONV_LOWERING=stablehlo forces the direct form (part of the compile cache's key),
for measuring and testing both."""
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
    direct = os.environ.get("SPRUE_CONV_LOWERING", "").strip() == "stablehlo"
    return (_stablehlo_convolution if direct else _im2col)(ctx, eqn, lhs, rhs)


lowering_rules[lax.conv_general_dilated_p] = _convolution
