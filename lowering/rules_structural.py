"""Lowering of the shape-changing primitives: broadcast_in_dim, reshape, transpose, squeeze, rev,
concatenate, pad, slice, dynamic_slice, dynamic_update_slice, iota, copy.

Most map onto the stablehlo op of the same meaning. dynamic_slice/dynamic_update_slice clamp
their start indices into range natively (StableHLO spec), which is the reference rule.

Sizes known only at run time (`?` dims): broadcast_in_dim, reshape, iota and dynamic_slice take
them as trailing i64 operands (None in their shape param); the other rules evaluate the symbolic
dims of their params and avals (ctx.size) or read their operands' sizes (dims_of). Ops whose
stablehlo form does not lower through stablehlo-legalize-to-linalg with `?` dims (reshape,
reverse, dynamic_update_slice) are emitted as stablehlo anyway and rewritten by
legalize_dynamic.py before the pass pipeline.
"""
from __future__ import annotations

import numpy as np
from torch_mlir import ir

from sprue import lax
from sprue.ir.core import Eqn, Literal
from sprue.lowering.legalize_dynamic import UNIT_RESHAPE
from sprue.lowering.rules_common import (
    LoweringContext,
    Value,
    aval_type,
    axes_param,
    broadcast_in_dim,
    compare,
    constant_like,
    dims_of,
    ew,
    i64,
    i64s,
    iota,
    is_static,
    lowering_rules,
    op1,
    reshape,
    shape_of,
    size_value,
    slice_,
    tensor_type,
    to_i64_index,
)


def _out_type(eqn: Eqn):
    return aval_type(eqn.outvars[0].aval)


def _broadcast_in_dim(ctx: LoweringContext, eqn: Eqn, x: Value, *sizes: Value) -> list[Value]:
    shape = ctx.param_sizes(eqn.params["shape"], sizes)
    return [broadcast_in_dim(x, shape, eqn.params["broadcast_dimensions"])]


# A reshape whose sizes other than 1 are its operand's, in order (keepdims' `(b, t) -> (b, t, 1)`,
# a squeeze), as the jaxpr's shapes say: marked UNIT_RESHAPE (legalize_dynamic.py makes it a view).
def _reshape(ctx: LoweringContext, eqn: Eqn, x: Value, *sizes: Value) -> list[Value]:
    if sizes:  # reshape with run-time sizes
        out = reshape(x, ctx.param_sizes(eqn.params["new_sizes"], sizes))
    else:      # squeeze, or reshape to a DimExpr shape
        out = reshape(x, ctx.sizes(eqn.outvars[0].aval.shape))
    before, after = eqn.invars[0].aval.shape, eqn.outvars[0].aval.shape
    owner = out.owner if isinstance(out, ir.OpResult) else None
    if owner is not None and owner.name == "stablehlo.dynamic_reshape" and \
            [d for d in before if not _is_one(d)] == [d for d in after if not _is_one(d)]:
        owner.attributes[UNIT_RESHAPE] = ir.UnitAttr.get()
    return [out]


def _is_one(d) -> bool:
    return isinstance(d, (int, np.integer)) and d == 1


def _transpose(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    return [op1("stablehlo.transpose", [x], _out_type(eqn), {"permutation": i64s(eqn.params["permutation"])})]


def _rev(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    dims = axes_param(eqn, "dimensions")
    if not dims:
        return [x]
    return [op1("stablehlo.reverse", [x], _out_type(eqn), {"dimensions": i64s(dims)})]


def _concatenate(ctx: LoweringContext, eqn: Eqn, *xs: Value) -> list[Value]:
    return [op1("stablehlo.concatenate", xs, _out_type(eqn), {"dimension": i64(eqn.params["dimension"])})]


def _pad(ctx: LoweringContext, eqn: Eqn, x: Value, value: Value) -> list[Value]:
    """stablehlo.pad. It lowers with `?` dims only for non-negative edges, so with run-time sizes
    a negative edge (a crop) pads by 0 there and slices the crop off afterwards."""
    config = eqn.params["padding_config"]
    lo, hi, interior = zip(*config) if config else ((), (), ())
    crop = not is_static(x) and any(e < 0 for e in lo + hi)
    pad_lo, pad_hi = ([max(e, 0) for e in lo], [max(e, 0) for e in hi]) if crop else (lo, hi)
    attrs = {"edge_padding_low": i64s(pad_lo), "edge_padding_high": i64s(pad_hi), "interior_padding": i64s(interior)}
    padded_type = _out_type(eqn) if not crop else tensor_type(
        [n + a + b + max(n - 1, 0) * i if n >= 0 else None for n, a, b, i in zip(shape_of(x), pad_lo, pad_hi, interior)],
        eqn.outvars[0].aval.dtype)
    padded = op1("stablehlo.pad", [x, value], padded_type, attrs)
    if not crop:
        return [padded]
    sizes = dims_of(padded)
    limits = [ew("subtract", size_value(n), size_value(max(-e, 0))) for n, e in zip(sizes, hi)]
    return [slice_(padded, [max(-e, 0) for e in lo], limits, None, _out_type(eqn))]


def _slice(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    """Static starts and strides; a limit may be symbolic (a slice to the end of a `?` dim)."""
    p = eqn.params
    return [slice_(x, ctx.sizes(p["start_indices"]), ctx.sizes(p["limit_indices"]), p["strides"], _out_type(eqn))]


def _dynamic_slice(ctx: LoweringContext, eqn: Eqn, x: Value, *operands: Value) -> list[Value]:
    rank = len(eqn.params["slice_sizes"])
    starts, trailing = [to_i64_index(s) for s in operands[:rank]], operands[rank:]
    if not trailing and all(isinstance(s, int) for s in eqn.params["slice_sizes"]):
        # stablehlo.dynamic_slice clamps its starts itself (also against `?` operand dims)
        return [op1("stablehlo.dynamic_slice", [x, *starts], _out_type(eqn),
                    {"slice_sizes": i64s(eqn.params["slice_sizes"])})]
    # Run-time slice sizes: real_dynamic_slice from the starts clamped as JAX does,
    # start = clamp(start, 0, dim - size), taking the upper bound first so that a start is never
    # negative (a size above its dim, which the frontend never makes, would read past the end).
    sizes = ctx.param_sizes(eqn.params["slice_sizes"], trailing)
    dims = dims_of(x)
    clamped: list = []
    limits: list = []
    for d, (start, dim, size) in enumerate(zip(starts, dims, sizes)):
        known = _known_start(eqn, d)
        if _whole_axis(eqn, d):
            # the slice keeps the axis's whole run-time size (`x[:, 1:3]` of a `?` axis): its start
            # clamps to 0 and its limit is the operand's own size, which later rewrites can see
            # is the operand's (a limit computed from the size operand cannot be matched to it,
            # and elementwise fusion then fails between the slice and its neighbours)
            clamped.append(0)
            limits.append(dim)
        elif known is not None and isinstance(dim, int) and isinstance(size, int):
            clamped.append(max(min(known, dim - size), 0))
            limits.append(clamped[-1] + size)
        else:
            clamped.append(_clamp_start(start, size_value(dim), size_value(size)))
            limits.append(ew("add", clamped[-1], size_value(size)))
    return [slice_(x, clamped, limits, None, _out_type(eqn))]


def _whole_axis(eqn: Eqn, d: int) -> bool:
    """Whether axis d of a dynamic_slice's result has its operand's symbolic (run-time) size."""
    before, after = eqn.invars[0].aval.shape[d], eqn.outvars[0].aval.shape[d]
    return not isinstance(before, (int, np.integer)) and not isinstance(after, (int, np.integer)) \
        and bool(before == after)


def _known_start(eqn: Eqn, d: int) -> int | None:
    """A dynamic_slice's start index d when it is a literal of the jaxpr, else None."""
    start = eqn.invars[1 + d]
    return int(start.val) if isinstance(start, Literal) and np.ndim(start.val) == 0 else None


def _clamp_start(start: Value, dim: Value, size: Value) -> Value:
    """max(min(start, dim - size), 0), all tensor<i64>."""
    return ew("maximum", ew("minimum", start, ew("subtract", dim, size)), constant_like(0, start))


def _dynamic_update_slice(ctx: LoweringContext, eqn: Eqn, x: Value, update: Value, *starts: Value
                          ) -> list[Value]:
    # With `?` dims this is rewritten by legalize_dynamic.py (tensor.insert_slice, clamped starts).
    starts = [to_i64_index(s) for s in starts]
    return [op1("stablehlo.dynamic_update_slice", [x, update, *starts], _out_type(eqn))]


def _iota(ctx: LoweringContext, eqn: Eqn, *sizes: Value) -> list[Value]:
    aval = eqn.outvars[0].aval
    shape = ctx.param_sizes(eqn.params["shape"], sizes)
    dimension = eqn.params["dimension"]
    if aval.dtype == np.bool_:  # counts as bool: 0 is false, the rest true
        counts = iota(np.int64, shape, dimension)
        return [compare(counts, constant_like(0, counts), "NE")]
    return [iota(aval.dtype, shape, dimension)]


def _copy(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    return [x]  # values are immutable; bufferization decides about buffers


lowering_rules.update({
    lax.broadcast_in_dim_p: _broadcast_in_dim, lax.reshape_p: _reshape, lax.squeeze_p: _reshape,
    lax.transpose_p: _transpose, lax.rev_p: _rev, lax.concatenate_p: _concatenate, lax.pad_p: _pad,
    lax.slice_p: _slice, lax.dynamic_slice_p: _dynamic_slice,
    lax.dynamic_update_slice_p: _dynamic_update_slice, lax.iota_p: _iota, lax.copy_p: _copy,
})
