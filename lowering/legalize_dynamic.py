"""Rewrites of stablehlo ops with `?` dims that stablehlo-legalize-to-linalg does not lower.

With static shapes these ops are left to the upstream pass. With run-time sizes:

  stablehlo.dynamic_reshape       -> tensor.reshape with the shape operand (the upstream pass has
                                     no pattern for it; bufferization copies a non-contiguous
                                     source first)
  stablehlo.reverse               -> tensor.generate reading x[n - 1 - i] along a `?` reversed dim
  stablehlo.dynamic_update_slice  -> tensor.insert_slice at clamped offsets
  stablehlo.gather/dynamic_gather -> tensor.generate reading operand[clamped start + offset]

Memory safety: every index read or written is inside its tensor for any run-time sizes, even
sizes the frontend promises never to make (a window larger than its dim), so that code running
after a failed check cannot touch memory outside an array:
- dynamic_update_slice writes min(update size, dim) elements per dim, at start clamped to
  [0, dim - that size];
- gather clamps each start to [0, dim - slice size]; when some operand dim is smaller than its
  slice size (an empty operand), no window fits anywhere and the result is all zeros (the
  reference rule's value for gathers from an empty operand; FILL_OR_DROP then masks them to the
  fill value in the lowering rule).
Element types go through signless casts, as in the other Python legalizations.
"""

from __future__ import annotations

from typing import Callable, Sequence

from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo
from torch_mlir.dialects import arith, scf, tensor

from sprue.lowering.mlir_util import (
    add,
    all_of,
    cmp,
    const,
    elem_of,
    element_kind,
    extract,
    from_signless,
    index,
    insert_at,
    signless_tensor_type,
    tensor_sizes,
    tensor_type,
    to_index,
    to_signless,
)


def _dynamic(*values: ir.Value) -> bool:
    return any(not tensor_type(v).has_static_shape for v in values)


def _replace(op: ir.Operation, new: ir.Value) -> None:
    op.results[0].replace_all_uses_with(new)
    op.erase()


def _sub(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.SubIOp(a, b).result


def _min(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.MinSIOp(a, b).result


def _max(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.MaxSIOp(a, b).result


def _generate(result: ir.RankedTensorType, sizes: Sequence[ir.Value],
              element: Callable[[list[ir.Value]], ir.Value]) -> ir.Value:
    """tensor.generate of `result` (signless), sizes[d] for each `?` dim, element(ivs) per element."""
    extents = [sizes[d] for d in range(result.rank) if result.is_dynamic_dim(d)]
    gen = tensor.GenerateOp(result, extents)
    block = gen.regions[0].blocks.append(*([ir.IndexType.get()] * result.rank))
    with ir.InsertionPoint(block):
        tensor.YieldOp(element(list(block.arguments)))
    return gen.result


# -- dynamic_reshape ------------------------------------------------------------------------------
def lower_dynamic_reshape(op: ir.Operation) -> None:
    with ir.InsertionPoint(op), op.location:
        new = tensor.ReshapeOp(op.results[0].type, op.operands[0], op.operands[1]).result
    _replace(op, new)


# -- reverse --------------------------------------------------------------------------------------
def lower_reverse(op: ir.Operation) -> None:
    x = op.operands[0]
    dims = list(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
    if all(not tensor_type(x).is_dynamic_dim(d) for d in dims):
        return  # static reversed dims: the upstream pass lowers it
    with ir.InsertionPoint(op), op.location:
        xs = to_signless(x)
        sizes = tensor_sizes(xs)
        last = [_sub(n, index(1)) for n in sizes]

        def element(ivs: list[ir.Value]) -> ir.Value:
            return extract(xs, [_sub(last[d], iv) if d in dims else iv for d, iv in enumerate(ivs)])
        out = _generate(signless_tensor_type(tensor_type(op.results[0])), sizes, element)
        new = from_signless(out, op.results[0].type)
    _replace(op, new)


# -- dynamic_update_slice -------------------------------------------------------------------------
def lower_dynamic_update_slice(op: ir.Operation) -> None:
    x, update, *starts = op.operands
    if not _dynamic(x, update):
        return
    with ir.InsertionPoint(op), op.location:
        xs, us = to_signless(x), to_signless(update)
        dims, usizes = tensor_sizes(xs), tensor_sizes(us)
        counts = [_min(u, d) for u, d in zip(usizes, dims)]      # never more than fits
        offsets = [_max(_min(to_index(extract(to_signless(s), []), element_kind(elem_of(s))), _sub(d, c)), index(0))
                   for s, d, c in zip(starts, dims, counts)]
        rank = len(dims)
        dyn = [ir.ShapedType.get_dynamic_size()] * rank
        part_type = ir.RankedTensorType.get(dyn, tensor_type(us).element_type)
        part = tensor.ExtractSliceOp(part_type, us, [], counts, [], [0] * rank, dyn, [1] * rank).result
        out = tensor.InsertSliceOp(part, xs, offsets, counts, [], dyn, dyn, [1] * rank).result
        new = from_signless(out, op.results[0].type)
    _replace(op, new)


# -- gather ---------------------------------------------------------------------------------------
class _GatherDims:
    def __init__(self, op: ir.Operation):
        dn = _stablehlo.GatherDimensionNumbers(op.attributes["dimension_numbers"])
        self.offset = list(dn.offset_dims)
        self.collapsed = list(dn.collapsed_slice_dims)
        self.operand_batching = list(dn.operand_batching_dims)
        self.indices_batching = list(dn.start_indices_batching_dims)
        self.start_map = list(dn.start_index_map)
        self.index_vector_dim = dn.index_vector_dim


def _slice_sizes(op: ir.Operation, rank: int) -> list[ir.Value]:
    if op.name == "stablehlo.dynamic_gather":
        sizes = to_signless(op.operands[2])
        kind = element_kind(elem_of(op.operands[2]))
        return [to_index(extract(sizes, [index(d)]), kind) for d in range(rank)]
    return [index(s) for s in ir.DenseI64ArrayAttr(op.attributes["slice_sizes"])]


def lower_gather(op: ir.Operation) -> None:
    """stablehlo.gather (or dynamic_gather) with `?` dims, by the spec's index arithmetic."""
    operand, indices = op.operands[0], op.operands[1]
    if op.name == "stablehlo.gather" and not _dynamic(operand, indices, op.results[0]):
        return
    dn = _GatherDims(op)
    rank = tensor_type(operand).rank
    result_type = signless_tensor_type(tensor_type(op.results[0]))
    batch_dims = [d for d in range(result_type.rank) if d not in dn.offset]
    window_dims = [d for d in range(rank) if d not in dn.collapsed and d not in dn.operand_batching]
    kind = element_kind(elem_of(indices))
    has_vector = dn.index_vector_dim < tensor_type(indices).rank  # else: an implicit trailing 1
    with ir.InsertionPoint(op), op.location:
        xs, ids = to_signless(operand), to_signless(indices)
        dims, slices = tensor_sizes(xs), _slice_sizes(op, rank)
        index_sizes = [n for d, n in enumerate(tensor_sizes(ids)) if d != dn.index_vector_dim]
        sizes = [index(0)] * result_type.rank
        for d, n in zip(batch_dims, index_sizes):
            sizes[d] = n
        for d, w in zip(dn.offset, window_dims):
            sizes[d] = slices[w]
        limits = [_sub(n, s) for n, s in zip(dims, slices)]     # the last start where a window fits

        def element(ivs: list[ir.Value]) -> ir.Value:
            batch = [ivs[d] for d in batch_dims]
            full = [index(0)] * rank
            for k, d in enumerate(dn.start_map):
                at = insert_at(batch, dn.index_vector_dim, index(k)) if has_vector else batch
                full[d] = _max(_min(to_index(extract(ids, at), kind), limits[d]), index(0))
            for d, b in zip(dn.operand_batching, dn.indices_batching):
                full[d] = batch[b if b < dn.index_vector_dim else b - 1]
            for d, o in zip(window_dims, dn.offset):
                full[d] = add(full[d], ivs[o])
            return extract(xs, full)

        # No window fits anywhere when a dim is smaller than its slice (an empty operand): zeros.
        fits = all_of([cmp("sge", n, s) for n, s in zip(dims, slices)])
        branch = scf.IfOp(fits, [result_type], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            scf.YieldOp([_generate(result_type, sizes, element)])
        with ir.InsertionPoint(branch.else_block):
            zero = const(result_type.element_type, 0)
            scf.YieldOp([_generate(result_type, sizes, lambda ivs: zero)])
        new = from_signless(branch.results[0], op.results[0].type)
    _replace(op, new)


RULES: dict[str, Callable[[ir.Operation], None]] = {
    "stablehlo.dynamic_reshape": lower_dynamic_reshape,
    "stablehlo.reverse": lower_reverse,
    "stablehlo.dynamic_update_slice": lower_dynamic_update_slice,
    "stablehlo.gather": lower_gather,
    "stablehlo.dynamic_gather": lower_gather,
}

__all__ = ["RULES", "lower_dynamic_reshape", "lower_dynamic_update_slice", "lower_gather", "lower_reverse"]
