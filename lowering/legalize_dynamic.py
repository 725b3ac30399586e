"""Rewrites of stablehlo ops with `?` dims that stablehlo-legalize-to-linalg does not lower.

With static shapes these ops are left to the upstream pass. With run-time sizes:

  stablehlo.dynamic_reshape       -> a view when it only adds or drops unit dims, else
                                     tensor.reshape with the shape operand (the upstream pass has
                                     no pattern for it; bufferization copies a non-contiguous
                                     source first)
  stablehlo.concatenate           -> tensor.from_elements for small integer shape vectors
  stablehlo.reverse               -> tensor.generate reading x[n - 1 - i] along a `?` reversed dim
  stablehlo.dynamic_update_slice  -> tensor.insert_slice at clamped offsets
(gathers, static and dynamic, are legalize_scatter.py's: point reads in a linalg.generic)

Memory safety: every index read or written is inside its tensor for any run-time sizes, even
sizes the frontend promises never to make (a window larger than its dim), so that code running
after a failed check cannot touch memory outside an array:
- dynamic_update_slice writes min(update size, dim) elements per dim, at start clamped to
  [0, dim - that size].
Element types go through signless casts, as in the other Python legalizations.
"""

from __future__ import annotations

from typing import Callable, Sequence

from torch_mlir import ir
from torch_mlir.dialects import arith, tensor

from sprue.lowering.mlir_util import (
    elem_of,
    element_kind,
    extract,
    from_signless,
    index,
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
def _unit_groups(shape: Sequence[int]) -> list[list[int]]:
    """Reassociation of `shape` onto its dims other than static 1s: each such dim with the unit
    dims before it, trailing unit dims with the last group ([] when every dim is a unit)."""
    groups: list[list[int]] = []
    pending: list[int] = []
    for d, size in enumerate(shape):
        pending.append(d)
        if size != 1:
            groups.append(pending)
            pending = []
    if pending and groups:
        groups[-1].extend(pending)
    return groups


def _core(shape: Sequence[int]) -> list[int]:
    return [s for s in shape if s != 1]


def _is_unit_reshape(src: Sequence[int], res: Sequence[int]) -> bool:
    """The reshape only adds or drops static unit dims: the other dims agree one for one. A `?` is
    then equal to its partner because the element counts agree, when it is the only `?` and no
    static dim is 0 (a 0 makes both counts 0 whatever the `?`)."""
    a, b = _core(src), _core(res)
    dynamic = ir.ShapedType.is_dynamic_size
    return (a == b and sum(dynamic(s) for s in a) <= 1 and all(dynamic(s) or s > 0 for s in a))


def _as_unit_reshape(x: ir.Value, result: ir.RankedTensorType) -> ir.Value:
    """x viewed as `result` (see lower_dynamic_reshape). Unit dims are dropped by a rank-reducing
    tensor.extract_slice of all of x, not tensor.collapse_shape: collapsing `1 x ?` whose `?` has
    stride 1 gives a `?` stride (MLIR's computeCollapsedLayoutMap: the `?` might be 1 at run time),
    and a loop over a row of unknown stride is neither vectorized nor a memcpy."""
    src = tensor_type(x)
    core_shape = _core(src.shape)
    core = x
    if list(src.shape) != core_shape:
        rank = src.rank
        dyn = ir.ShapedType.get_dynamic_size()
        sizes = [tensor.DimOp(x, index(d)).result for d in range(rank) if src.is_dynamic_dim(d)]
        core_type = ir.RankedTensorType.get(core_shape, src.element_type)
        core = tensor.ExtractSliceOp(core_type, x, [], sizes, [], [0] * rank,
                                     [dyn if src.is_dynamic_dim(d) else s for d, s in enumerate(src.shape)],
                                     [1] * rank).result
    if list(result.shape) == core_shape:
        return core
    sizes = tensor_sizes(core)
    core_dims = [d for d, s in enumerate(result.shape) if s != 1]
    output = [sizes[core_dims.index(d)] for d, s in enumerate(result.shape) if ir.ShapedType.is_dynamic_size(s)]
    return tensor.ExpandShapeOp(result, core, _reassociation(_unit_groups(result.shape)), output,
                                list(result.shape)).result


def _reassociation(groups: list[list[int]]) -> ir.ArrayAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) for d in g]) for g in groups])


# A dynamic_reshape rules_structural.py marks as only adding or dropping unit dims: with two or more
# run-time sizes that cannot be told from the shape operand, and it was a tensor.reshape, which no
# fusion looks through (attention with a run-time batch and length ran its softmax over the whole
# batch, not per element: batch_fusion.py).
UNIT_RESHAPE = "sprue.unit_reshape"


def lower_dynamic_reshape(op: ir.Operation) -> None:
    """A reshape that only adds or drops unit dims (a scan's row `1 x ?` <-> `?`; with several
    run-time sizes, one the jaxpr's shapes mark so: UNIT_RESHAPE) is a view
    (rank-reducing extract_slice / expand_shape, as the upstream pass makes views of static
    reshapes); any other is a
    tensor.reshape by the shape operand, which bufferization turns into a copy of a
    non-contiguous source (a row sliced out of a matrix: a generic element-by-element
    memref.copy into a fresh buffer, on every trip of a scan)."""
    x, result = op.operands[0], tensor_type(op.results[0])
    with ir.InsertionPoint(op), op.location:
        if _is_unit_reshape(tensor_type(x).shape, result.shape) or (
                UNIT_RESHAPE in op.attributes and _core(tensor_type(x).shape) == _core(result.shape)):
            new = _as_unit_reshape(x, result)
        else:
            new = tensor.ReshapeOp(result, x, op.operands[1]).result
    _replace(op, new)


# -- concatenate of a shape vector -----------------------------------------------------------------
MAX_SHAPE_VECTOR = 8


def _element(piece: ir.Value, j: int) -> ir.Value:
    """Element j of a 1-D integer tensor as a signless scalar: the scalar itself when the piece is
    a reshaped 0-d size, else a tensor.extract (of a constant, canonicalization folds it)."""
    owner = piece.owner if isinstance(piece, ir.OpResult) else None
    if owner is not None and owner.name == "stablehlo.reshape" and tensor_type(owner.operands[0]).rank == 0:
        return extract(to_signless(owner.operands[0]), [])
    return extract(to_signless(piece), [index(j)])


def lower_concatenate(op: ir.Operation) -> None:
    """A small 1-D integer concatenate (the shape vector of a dynamic broadcast, slice or reshape,
    assembled from scalar sizes) -> tensor.from_elements of the scalars. The upstream pass makes it
    a linalg.generic writing a buffer that its users then read back, with a branch per element;
    from_elements lets canonicalization hand each user its scalar (XLA and IREE compute shapes as
    scalars too). In a scan body this ran on every trip."""
    result = tensor_type(op.results[0])
    pieces = list(op.operands)
    if (result.rank != 1 or not result.has_static_shape or result.shape[0] > MAX_SHAPE_VECTOR
            or not isinstance(result.element_type, ir.IntegerType)
            or not all(tensor_type(p).has_static_shape for p in pieces)):
        _concatenate_by_slices(op)
        return
    with ir.InsertionPoint(op), op.location:
        elems = [_element(p, j) for p in pieces for j in range(tensor_type(p).shape[0])]
        out = tensor.FromElementsOp(signless_tensor_type(result), elems).result
        new = from_signless(out, op.results[0].type)
    _replace(op, new)


def _concatenate_by_slices(op: ir.Operation) -> None:
    """A concatenate along the last axis -> each piece inserted into its slice of an empty result
    (as IREE lowers concatenation): a copy per piece, contiguous and vectorized, and a piece
    computed only to be concatenated is computed straight into its slice (eliminate-empty-tensors).
    The upstream pass's linalg.generic picks each element's piece by a chain of branches, and
    along the last axis those branches sit in the innermost loop, which then runs scalar, its
    fused readers with it (one core, interleaved: `concatenate([a, b], axis=1)` of 1000 x 500 and
    1000 x 300 0.58 -> 0.49 ms, with elementwise pieces and reader 4.0 -> 3.5 ms, `stack` of three
    1000 x 300 then a sum 3.45 -> 3.18 ms). Along an outer axis the branch is per outer trip and
    the generic fuses with its readers into one vectorized pass, which the copies would not
    (concatenate along axis 0 then scale: 0.35 ms as a generic, 0.50 as copies): it stays."""
    axis = ir.IntegerAttr(op.attributes["dimension"]).value
    result = tensor_type(op.results[0])
    if axis != result.rank - 1:
        return
    dyn = ir.ShapedType.get_dynamic_size()
    with ir.InsertionPoint(op), op.location:
        pieces = [to_signless(p) for p in op.operands]
        sizes = [tensor_sizes(p) for p in pieces]
        total = sizes[0][axis]
        for s in sizes[1:]:
            total = arith.AddIOp(total, s[axis]).result
        out_sizes = [n if not ir.ShapedType.is_dynamic_size(n) else (total if d == axis else sizes[0][d])
                     for d, n in enumerate(result.shape)]
        out = tensor.EmptyOp(out_sizes, signless_tensor_type(result).element_type).result
        offset: int | ir.Value = 0
        for piece, size in zip(pieces, sizes):
            shape = tensor_type(piece).shape
            if 0 in shape or 0 in result.shape:
                continue       # nothing to insert (and a slice at offset 0 of a 0-size axis does not verify)
            static_sizes = [dyn if ir.ShapedType.is_dynamic_size(n) else n for n in shape]
            dynamic_sizes = [v for v, n in zip(size, shape) if ir.ShapedType.is_dynamic_size(n)]
            static_offsets = [offset if d == axis and isinstance(offset, int) else (dyn if d == axis else 0)
                              for d in range(result.rank)]
            dynamic_offsets = [] if isinstance(offset, int) else [offset]
            out = tensor.InsertSliceOp(piece, out, dynamic_offsets, dynamic_sizes, [], static_offsets, static_sizes,
                                       [1] * result.rank).result
            if isinstance(offset, int) and not ir.ShapedType.is_dynamic_size(shape[axis]):
                offset += shape[axis]
            else:
                offset = arith.AddIOp(index(offset) if isinstance(offset, int) else offset, size[axis]).result
        new = from_signless(out, op.results[0].type)
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


RULES: dict[str, Callable[[ir.Operation], None]] = {
    "stablehlo.concatenate": lower_concatenate,
    "stablehlo.dynamic_reshape": lower_dynamic_reshape,
    "stablehlo.reverse": lower_reverse,
    "stablehlo.dynamic_update_slice": lower_dynamic_update_slice,
}

__all__ = ["RULES", "lower_concatenate", "lower_dynamic_reshape", "lower_dynamic_update_slice", "lower_reverse"]
