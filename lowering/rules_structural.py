"""Lowering of the shape-changing primitives: broadcast_in_dim, reshape, transpose, squeeze, rev,
concatenate, pad, slice, dynamic_slice, dynamic_update_slice, iota, copy.

Most map onto the stablehlo op of the same meaning. dynamic_slice/dynamic_update_slice clamp
their start indices into range natively (StableHLO spec), which is the reference rule.
"""
from __future__ import annotations

import numpy as np

from .. import lax
from ..core import Eqn
from .rules_common import (LoweringContext, Value, aval_type, broadcast_in_dim, compare, constant_like,
                           i64, i64s, lowering_rules, op1, reshape, slice_, tensor_type, to_i64_index)


def _out_type(eqn: Eqn):
    return aval_type(eqn.outvars[0].aval)


def _broadcast_in_dim(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    return [broadcast_in_dim(x, eqn.params["shape"], eqn.params["broadcast_dimensions"])]


def _reshape(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    return [reshape(x, eqn.outvars[0].aval.shape)]


def _transpose(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    return [op1("stablehlo.transpose", [x], _out_type(eqn), {"permutation": i64s(eqn.params["permutation"])})]


def _rev(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    dims = eqn.params["dimensions"]
    if not dims:
        return [x]
    return [op1("stablehlo.reverse", [x], _out_type(eqn), {"dimensions": i64s(dims)})]


def _concatenate(ctx: LoweringContext, eqn: Eqn, *xs: Value) -> list[Value]:
    return [op1("stablehlo.concatenate", xs, _out_type(eqn), {"dimension": i64(eqn.params["dimension"])})]


def _pad(ctx: LoweringContext, eqn: Eqn, x: Value, value: Value) -> list[Value]:
    lo, hi, interior = zip(*eqn.params["padding_config"]) if eqn.params["padding_config"] else ((), (), ())
    attrs = {"edge_padding_low": i64s(lo), "edge_padding_high": i64s(hi), "interior_padding": i64s(interior)}
    return [op1("stablehlo.pad", [x, value], _out_type(eqn), attrs)]


def _slice(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    p = eqn.params
    return [slice_(x, p["start_indices"], p["limit_indices"], p["strides"])]


def _dynamic_slice(ctx: LoweringContext, eqn: Eqn, x: Value, *starts: Value) -> list[Value]:
    # Start indices must share one type: make them all i64.
    starts = [to_i64_index(s) for s in starts]
    return [op1("stablehlo.dynamic_slice", [x, *starts], _out_type(eqn),
                {"slice_sizes": i64s(eqn.params["slice_sizes"])})]


def _dynamic_update_slice(ctx: LoweringContext, eqn: Eqn, x: Value, update: Value, *starts: Value
                          ) -> list[Value]:
    starts = [to_i64_index(s) for s in starts]
    return [op1("stablehlo.dynamic_update_slice", [x, update, *starts], _out_type(eqn))]


def _iota(ctx: LoweringContext, eqn: Eqn) -> list[Value]:
    aval = eqn.outvars[0].aval
    attrs = {"iota_dimension": i64(eqn.params["dimension"])}
    if aval.dtype == np.bool_:  # counts as bool: 0 is false, the rest true
        counts = op1("stablehlo.iota", [], tensor_type(aval.shape, np.int64), attrs)
        return [compare(counts, constant_like(0, counts), "NE")]
    return [op1("stablehlo.iota", [], aval_type(aval), attrs)]


def _copy(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    return [x]  # values are immutable; bufferization decides about buffers


lowering_rules.update({
    lax.broadcast_in_dim_p: _broadcast_in_dim, lax.reshape_p: _reshape, lax.squeeze_p: _reshape,
    lax.transpose_p: _transpose, lax.rev_p: _rev, lax.concatenate_p: _concatenate, lax.pad_p: _pad,
    lax.slice_p: _slice, lax.dynamic_slice_p: _dynamic_slice,
    lax.dynamic_update_slice_p: _dynamic_update_slice, lax.iota_p: _iota, lax.copy_p: _copy,
})
