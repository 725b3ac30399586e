"""Sums of zero-padded pieces that do not overlap, concatenated instead of added.

Reverse-mode differentiation turns every slice of an array into a pad of its cotangent with zeros
back to the array's shape (the transpose of slice), and adds up those pads: the gradient of
`ws[i]` for each of a deep network's N layers stacked in one array, of `q, k, v = jnp.split(x, 3)`,
of a loop over a sequence's steps unrolled in Python. Added pad by pad, that is N full-size
temporaries and N full-size additions (O(N^2) work for N slices of one array), and as many ops for
every later stage to lower and compile: a 100-layer training step over stacked weights took 3-4 s
to compile, as long as `jax.jit`'s. Where the pieces' windows span the whole array along every
axis but one and do not overlap along it, the sum is their concatenation along that axis (zeros
in the gaps): one op of the result's size, as XLA's algebraic simplifier writes pad chains as
concatenates where it can.

Runs on StableHLO before partitioning (pipeline.lower_module), so it serves programs traced by sprue
and programs read from JAX (`add_any` of `pad`s) alike; the pads and adds it replaces are erased as
unread by partition.py. The sum differs from the concatenation only in a zero's sign (a piece's
-0.0 plus the other pads' +0.0 is +0.0).
"""
from __future__ import annotations

from torch_mlir import ir

from sprue.lowering.mlir_util import as_operation, constant_scalar, ops_where

Piece = tuple[ir.Value, tuple[int, ...]]   # an operand of a pad, and where its window starts


def _zero_constant(value: ir.Value) -> bool:
    """Whether `value` is a stablehlo.constant scalar zero (float or integer; not a boolean)."""
    scalar = constant_scalar(value)
    return scalar is not None and not isinstance(scalar, bool) and scalar == 0


def _array(op: ir.Operation, name: str) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def _pad_piece(op: ir.Operation) -> Piece | None:
    """The piece of a pad with zeros at its edges only (no interior, nothing cut off)."""
    if op.name != "stablehlo.pad" or not _zero_constant(op.operands[1]):
        return None
    low, high = _array(op, "edge_padding_low"), _array(op, "edge_padding_high")
    if any(_array(op, "interior_padding")) or min(low + high, default=0) < 0:
        return None
    return op.operands[0], tuple(low)


class _Sums:
    """The pieces of values that are pads or sums of them (memoized), or None."""

    def __init__(self) -> None:
        self.known: dict[ir.Value, list[Piece] | None] = {}

    def of(self, value: ir.Value) -> list[Piece] | None:
        if value in self.known:
            return self.known[value]
        pieces = None
        if isinstance(value, ir.OpResult):
            op = as_operation(value.owner)
            piece = _pad_piece(op)
            if piece is not None:
                pieces = [piece]
            elif op.name == "stablehlo.add":
                lhs, rhs = self.of(op.operands[0]), self.of(op.operands[1])
                pieces = lhs + rhs if lhs is not None and rhs is not None else None
        self.known[value] = pieces
        return pieces


def _concatenation(pieces: list[Piece], shape: list[int]) -> tuple[int, list[Piece]] | None:
    """(axis, pieces in order along it) where every window spans the whole shape but along one
    axis and no two windows overlap; None otherwise."""
    extents = [(list(ir.RankedTensorType(v.type).shape), start) for v, start in pieces]
    axes = {d for sizes, start in extents for d in range(len(shape)) if start[d] != 0 or sizes[d] != shape[d]}
    if len(axes) > 1:
        return None
    axis = axes.pop() if axes else 0
    order = sorted(range(len(pieces)), key=lambda i: pieces[i][1][axis])
    end = 0
    for i in order:
        sizes, start = extents[i]
        if start[axis] < end:
            return None   # overlapping windows: a sum, not a concatenation
        end = start[axis] + sizes[axis]
    return axis, [pieces[i] for i in order]


def _zeros(like: ir.Value, zero: ir.Value, shape: list[int]) -> ir.Value:
    element = ir.RankedTensorType(like.type).element_type
    return ir.Operation.create("stablehlo.broadcast_in_dim", results=[ir.RankedTensorType.get(shape, element)],
                               operands=[zero], attributes={"broadcast_dimensions": ir.DenseI64ArrayAttr.get([])}
                               ).result


def _concatenate(root: ir.Operation, axis: int, pieces: list[Piece], zero: ir.Value) -> ir.Value:
    """The concatenation of `pieces` along `axis`, the gaps between them zeros, before `root`."""
    shape = list(ir.RankedTensorType(root.results[0].type).shape)
    operands, at = [], 0
    with ir.InsertionPoint(root), root.location:
        for value, start in pieces:
            if start[axis] > at:
                operands.append(_zeros(value, zero, shape[:axis] + [start[axis] - at] + shape[axis + 1:]))
            operands.append(value)
            at = start[axis] + ir.RankedTensorType(value.type).shape[axis]
        if at < shape[axis]:
            operands.append(_zeros(root.results[0], zero, shape[:axis] + [shape[axis] - at] + shape[axis + 1:]))
        if len(operands) == 1:
            return operands[0]
        i64 = ir.IntegerType.get_signless(64)
        return ir.Operation.create("stablehlo.concatenate", results=[root.results[0].type], operands=operands,
                                   attributes={"dimension": ir.IntegerAttr.get(i64, axis)}).result


def _index(k: int) -> ir.Value:
    i64 = ir.IntegerType.get_signless(64)
    t = ir.RankedTensorType.get([], i64)
    return ir.Operation.create("stablehlo.constant", results=[t],
                               attributes={"value": ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(i64, k))}).result


# From this many operands a concatenate is written piece by piece (write_long_concatenates).
LONG_CONCATENATE = 8


def write_long_concatenates(module: ir.Module) -> None:
    """Each static concatenate of LONG_CONCATENATE operands or more becomes a chain of
    dynamic_update_slice into a buffer of its result's type, which bufferization runs in place:
    one copy per operand. stablehlo-legalize-to-linalg makes a concatenate one loop nest that picks
    among all its operands for every element (a 100-piece gradient's: 2,100 lines of LLVM IR).
    Runs after partitioning, which sees the one op (its parts stay equal)."""
    for op in ops_where(module.operation, lambda o: o.name == "stablehlo.concatenate"):
        result = op.results[0]
        t = ir.RankedTensorType(result.type)
        if len(op.operands) < LONG_CONCATENATE or not t.has_static_shape or isinstance(t.element_type, ir.ComplexType) \
                or not all(ir.RankedTensorType(v.type).has_static_shape for v in op.operands):
            continue
        axis = ir.IntegerAttr(op.attributes["dimension"]).value
        with ir.InsertionPoint(op), op.location:
            zero = ir.Operation.create("stablehlo.constant", results=[ir.RankedTensorType.get([], t.element_type)],
                                       attributes={"value": ir.DenseElementsAttr.get_splat(
                                           ir.RankedTensorType.get([], t.element_type), _zero_of(t.element_type))}).result
            acc = _zeros(result, zero, list(t.shape))
            at = 0
            for value in op.operands:
                start = [at if d == axis else 0 for d in range(t.rank)]
                acc = ir.Operation.create("stablehlo.dynamic_update_slice", results=[result.type],
                                          operands=[acc, value, *map(_index, start)]).result
                at += ir.RankedTensorType(value.type).shape[axis]
        result.replace_all_uses_with(acc)
        op.erase()


def _zero_of(element: ir.Type) -> ir.Attribute:
    if isinstance(element, ir.IntegerType):
        return ir.IntegerAttr.get(element, 0)
    return ir.FloatAttr.get(element, 0.0)


def concatenate_pad_sums(module: ir.Module) -> None:
    """Each sum of two or more zero-padded pieces (module doc) read by anything but another such
    sum becomes their concatenation, where their windows allow one."""
    sums = _Sums()
    adds = ops_where(module.operation, lambda op: op.name == "stablehlo.add")
    for op in adds:
        result = op.results[0]
        pieces = sums.of(result)
        if pieces is None or len(pieces) < 2 or not ir.RankedTensorType(result.type).has_static_shape:
            continue
        if all(as_operation(use.owner).name == "stablehlo.add" and sums.of(as_operation(use.owner).results[0])
               for use in result.uses):
            continue   # part of a bigger sum: its root takes the pieces
        plan = _concatenation(pieces, list(ir.RankedTensorType(result.type).shape))
        if plan is None:
            continue
        result.replace_all_uses_with(_concatenate(op, *plan, _first_pad(op).operands[1]))


def _first_pad(op: ir.Operation) -> ir.Operation:
    """A pad of the sum `op` (whose padding value is the zero the gaps take)."""
    while op.name == "stablehlo.add":
        op = as_operation(op.operands[0].owner)
    return op


__all__ = ["LONG_CONCATENATE", "concatenate_pad_sums", "write_long_concatenates"]
