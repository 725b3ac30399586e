"""Rewrites of foreign StableHLO that sprue's own lowering never produces but other producers do.

  add/multiply on i1       -> or/and: the spec defines boolean add as OR and multiply as AND,
                              while stablehlo-legalize-to-linalg emits arith.addi/muli (XOR/AND)
  dot_general `algorithm`  -> dropped: the linalg conversion rejects dots that carry it, and on
                              the CPU we compute in the operands' own type anyway
  get_dimension_size       -> a constant for a static dim, else tensor.dim (no linalg lowering)
  dynamic_broadcast_in_dim -> tensor.generate when the result has `?` dims (JAX's shape-polymorphic
                              export broadcasts every scalar this way); the upstream pass only
                              lowers static results
  dynamic_pad              -> pad, when its low/high/interior operands are constants
  reduce_window padded     -> pad (by the init value; base dilation as interior padding), then the
                              reduce_window unpadded: the upstream pass lowers only windows with no
                              padding and no base dilation (JAX's cumsum, pooling with SAME)

Run on the parsed input before the pipeline (stablehlo_input.prepare).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import arith, tensor

from sprue.lowering.mlir_util import (
    cmp,
    elem_of,
    element_kind,
    extract,
    from_signless,
    index,
    ops_where,
    select,
    signless_tensor_type,
    tensor_sizes,
    to_index,
    to_signless,
)


def _is_bool_tensor(v: ir.Value) -> bool:
    t = v.type
    return (isinstance(t, ir.RankedTensorType) and isinstance(t.element_type, ir.IntegerType)
            and t.element_type.width == 1)


def _rename(op: ir.Operation, new_name: str) -> None:
    """Replaces `op` by an op of the same operands, results and attributes under another name."""
    with ir.InsertionPoint(op), op.location:
        new = ir.Operation.create(new_name, results=[r.type for r in op.results], operands=list(op.operands),
                                  attributes={a.name: a.attr for a in op.attributes})
    for old, res in zip(op.results, new.results):
        old.replace_all_uses_with(res)
    op.erase()


def _bool_arith(op: ir.Operation) -> None:
    if _is_bool_tensor(op.results[0]):
        _rename(op, {"stablehlo.add": "stablehlo.or", "stablehlo.multiply": "stablehlo.and"}[op.name])


def _drop_algorithm(op: ir.Operation) -> None:
    if "algorithm" in op.attributes:
        del op.attributes["algorithm"]


def _get_dimension_size(op: ir.Operation) -> None:
    operand = ir.RankedTensorType(op.operands[0].type)
    dim = ir.IntegerAttr(op.attributes["dimension"]).value
    result = ir.RankedTensorType(op.results[0].type)
    with ir.InsertionPoint(op), op.location:
        if operand.is_dynamic_dim(dim):
            size = tensor.DimOp(op.operands[0], arith.ConstantOp(ir.IndexType.get(), dim).result).result
            size = arith.IndexCastOp(ir.IntegerType.get_signless(32), size).result
            value = tensor.FromElementsOp(result, [size]).result   # the spec's result is tensor<i32>
        else:
            attr = ir.DenseElementsAttr.get_splat(result, ir.IntegerAttr.get(result.element_type,
                                                                              operand.get_dim_size(dim)))
            value = ir.Operation.create("stablehlo.constant", results=[result],
                                        attributes={"value": attr}).result
    op.results[0].replace_all_uses_with(value)
    op.erase()


def _generate(result: ir.RankedTensorType, sizes: list[ir.Value],
              element: Callable[[list[ir.Value]], ir.Value]) -> ir.Value:
    """tensor.generate of `result` (signless) with sizes[d] for each `?` dim, element(ivs) per element."""
    gen = tensor.GenerateOp(result, [sizes[d] for d in range(result.rank) if result.is_dynamic_dim(d)])
    block = gen.regions[0].blocks.append(*([ir.IndexType.get()] * result.rank))
    with ir.InsertionPoint(block):
        tensor.YieldOp(element(list(block.arguments)))
    return gen.result


def _dynamic_broadcast_in_dim(op: ir.Operation) -> None:
    result = ir.RankedTensorType(op.results[0].type)
    if result.has_static_shape:
        return   # the upstream pass lowers it
    x, shape = op.operands[0], op.operands[1]
    dims = list(ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"]))
    x, dims = _through_unit_broadcast(x, dims)
    with ir.InsertionPoint(op), op.location:
        xs = to_signless(x)
        kind = element_kind(elem_of(shape))
        shape_s = to_signless(shape)
        sizes = [index(result.get_dim_size(d)) if not result.is_dynamic_dim(d)
                 else to_index(extract(shape_s, [index(d)]), kind) for d in range(result.rank)]
        x_sizes = tensor_sizes(xs)
        # An operand dim of size 1 is expanded: its index is always 0 (decided at run time when `?`).
        x_type = ir.RankedTensorType(x.type)
        expanded = [None if x_type.is_dynamic_dim(i) else x_type.get_dim_size(i) == 1 for i in range(x_type.rank)]
        ones = [cmp("eq", n, index(1)) if e is None else None for n, e in zip(x_sizes, expanded)]

        def element(ivs: list[ir.Value]) -> ir.Value:
            at = []
            for i, d in enumerate(dims):
                if expanded[i] is None:
                    at.append(select(ones[i], index(0), ivs[d]))
                else:
                    at.append(index(0) if expanded[i] else ivs[d])
            return extract(xs, at)
        out = _generate(signless_tensor_type(result), sizes, element)
        new = from_signless(out, result)
    op.results[0].replace_all_uses_with(new)
    op.erase()


def _through_unit_broadcast(x: ir.Value, dims: list[int]) -> tuple[ir.Value, list[int]]:
    """(x, dims), or -- when x is a static broadcast_in_dim that only adds size-1 dims (JAX's
    `b[None, :]` before a dynamic broadcast: a bias added to a batch) -- its operand and the dims
    the two broadcasts compose to: the element read then comes from a value defined outside the
    pipeline's rewrites (a tensor.generate reading a stablehlo op's result fails to legalize)."""
    owner = x.owner
    if not isinstance(owner, ir.OpView) or owner.operation.name != "stablehlo.broadcast_in_dim":
        return x, dims
    inner = list(ir.DenseI64ArrayAttr(owner.operation.attributes["broadcast_dimensions"]))
    mid = ir.RankedTensorType(x.type)
    if not mid.has_static_shape or any(mid.get_dim_size(d) != 1 for d in range(mid.rank) if d not in inner):
        return x, dims
    return owner.operation.operands[0], [dims[d] for d in inner]


def _constant_ints(v: ir.Value) -> list[int] | None:
    owner = v.owner
    if not isinstance(owner, ir.OpView) or owner.operation.name not in ("stablehlo.constant", "arith.constant"):
        return None
    return [int(x) for x in ir.DenseIntElementsAttr(owner.operation.attributes["value"])]


def _dynamic_pad(op: ir.Operation) -> None:
    x, value, *pads = op.operands
    known = [_constant_ints(p) for p in pads]
    if any(k is None for k in known):
        return   # left for the linalg check to name
    low, high, interior = known
    x_type = ir.RankedTensorType(x.type)
    shape = [None if x_type.is_dynamic_dim(d) else x_type.get_dim_size(d) for d in range(x_type.rank)]
    if None in shape:
        return
    out = [lo + hi + n + max(n - 1, 0) * i for n, lo, hi, i in zip(shape, low, high, interior)]
    result = ir.RankedTensorType.get(out, x_type.element_type)
    with ir.InsertionPoint(op), op.location:
        attrs = {k: ir.DenseI64ArrayAttr.get(v) for k, v in
                 (("edge_padding_low", low), ("edge_padding_high", high), ("interior_padding", interior))}
        new = ir.Operation.create("stablehlo.pad", results=[result], operands=[x, value], attributes=attrs).result
        if result != op.results[0].type:   # the op declared `?` sizes: cast back for its users
            new = tensor.CastOp(op.results[0].type, new).result
    op.results[0].replace_all_uses_with(new)
    op.erase()


def _dims(t: ir.RankedTensorType) -> list[int | None]:
    return [None if t.is_dynamic_dim(d) else t.get_dim_size(d) for d in range(t.rank)]


def _reduce_window_padding(op: ir.Operation) -> None:
    attrs = op.attributes
    n = len(op.operands) // 2
    rank = ir.RankedTensorType(op.operands[0].type).rank
    padding = _pairs(ir.DenseIntElementsAttr(attrs["padding"]), rank) if "padding" in attrs else [[0, 0]] * rank
    base = list(ir.DenseI64ArrayAttr(attrs["base_dilations"])) if "base_dilations" in attrs else [1] * rank
    if all(p == [0, 0] for p in padding) and all(b == 1 for b in base):
        return
    low, high, interior = [p[0] for p in padding], [p[1] for p in padding], [b - 1 for b in base]
    with ir.InsertionPoint(op), op.location:
        for k in range(n):
            x, init = op.operands[k], op.operands[n + k]
            t = ir.RankedTensorType(x.type)
            out = [ir.ShapedType.get_dynamic_size() if d is None else lo + hi + d + max(d - 1, 0) * i
                   for d, lo, hi, i in zip(_dims(t), low, high, interior)]
            pad_attrs = {key: ir.DenseI64ArrayAttr.get(v) for key, v in
                         (("edge_padding_low", low), ("edge_padding_high", high), ("interior_padding", interior))}
            op.operands[k] = ir.Operation.create("stablehlo.pad", results=[ir.RankedTensorType.get(out, t.element_type)],
                                                 operands=[x, init], attributes=pad_attrs).result
        i64 = ir.IntegerType.get_signless(64)
        attrs["padding"] = ir.DenseIntElementsAttr.get(
            np.zeros((rank, 2), np.int64), type=ir.RankedTensorType.get([rank, 2], i64))
        attrs["base_dilations"] = ir.DenseI64ArrayAttr.get([1] * rank)


def _pairs(attr: ir.DenseIntElementsAttr, rank: int) -> list[list[int]]:
    flat = [int(v) for v in attr]
    return [flat[2 * d:2 * d + 2] for d in range(rank)]


RULES: dict[str, Callable[[ir.Operation], None]] = {
    "stablehlo.reduce_window": _reduce_window_padding,
    "stablehlo.add": _bool_arith,
    "stablehlo.multiply": _bool_arith,
    "stablehlo.dot_general": _drop_algorithm,
    "stablehlo.get_dimension_size": _get_dimension_size,
    "stablehlo.dynamic_broadcast_in_dim": _dynamic_broadcast_in_dim,
    "stablehlo.dynamic_pad": _dynamic_pad,
}


def apply_fixups(module: ir.Module) -> None:
    found = ops_where(module.operation, lambda op: op.name in RULES)
    with module.context:
        for op in found:
            RULES[op.name](op)


__all__ = ["RULES", "apply_fixups"]
