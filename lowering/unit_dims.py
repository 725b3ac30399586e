"""An elementwise generic whose inputs are other values with unit dims inserted (tensor.expand_shape)
runs over the values' own dims, its result expanded instead.

A row written into a bigger tensor (a scan's stacked output: `ys[k] = f(carry)`, a
dynamic_update_slice) is the row with a leading unit dim; linalg-fuse-elementwise-ops moves that
expand_shape above the elementwise op computing the row, which then runs over (1, n) and reads its
inputs through expand_shapes. merge_elementwise_chains (fusion.py) merges a consumer with the
producers whose results it reads at its own indices, so the row's op and the carries' updates it
reads stayed three loops per trip (two EMAs and their crossover signal: each loop's set-up and
alias checks on every one of 20000 trips, with run-time sizes 1.2x the static time). Rewritten
over (n), the op reads the carries' values themselves and merges with their producers.

`drop_unit_expansions(op)` does it for one generic: every loop parallel, every map the identity,
at least one input an expand_shape of a value of the generic's shape without those unit dims (the
same reassociation the rewrite uses: each unit dim grouped with the next non-unit dim, the trailing
ones with the last), or the whole of one (an extract_slice at zero offsets of its own sizes: what
a dynamic_update_slice with run-time sizes leaves). Other inputs are collapsed (a collapse of an
expansion is its source), a tensor.empty destination is made without the unit dims, and the
result is expanded back for its readers; when its one reader is the insert_slice writing the row
into the stacked output, the insert_slice takes the row itself (rank-reduced), so that
eliminate-empty-tensors still computes it in place.

The two-EMA crossover scan (20000 x 64 f32, one core): static 151 -> 117 us, run-time sizes 180 ->
143 us (with the canonicalization after loop_facts.trip_facts that gives the dynamic program's row
its static unit dim).
"""
from __future__ import annotations

from typing import Callable

from torch_mlir import ir

from sprue.lowering.mlir_util import as_operation, collapsed_type, operation_of, reassociation_attr, tensor_dim

REASSOCIATION = "reassociation"


def _groups(shape: list[int]) -> list[list[int]] | None:
    """Each static unit dim grouped with the next non-unit dim (trailing ones with the last); None
    when there is no unit dim to drop or no other dim to keep."""
    keep = [i for i, n in enumerate(shape) if n != 1]
    if not keep or len(keep) == len(shape):
        return None
    groups: list[list[int]] = []
    pending: list[int] = []
    for i in range(len(shape)):
        pending.append(i)
        if i in keep:
            groups.append(pending)
            pending = []
    groups[-1].extend(pending)
    return groups


def _identity_elementwise(op: ir.Operation) -> bool:
    if op.name != "linalg.generic" or "reduction" in str(op.attributes["iterator_types"]):
        return False
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    return all(m.is_permutation and list(m.results) == list(ir.AffineMap.get_identity(m.n_dims).results)
               for m in maps)


def _expansion(v: ir.Value) -> ir.Operation | None:
    """The expand_shape v is, or of which v is the whole (an extract_slice at offsets 0, strides 1,
    of the expansion's own sizes: what the lowering of a dynamic_update_slice with run-time sizes
    leaves of a scan's row once its sizes are folded)."""
    op = operation_of(v)
    if op is not None and op.name == "tensor.extract_slice":
        source = operation_of(op.operands[0])
        if source is None or source.name != "tensor.expand_shape" or op.results[0].type != source.results[0].type:
            return None
        offsets, strides = (list(ir.DenseI64ArrayAttr(op.attributes[k])) for k in ("static_offsets", "static_strides"))
        # no dynamic offset or stride: the operands after the source are the dynamic sizes
        if any(offsets) or any(s != 1 for s in strides) or list(op.operands)[1:] != list(source.operands)[1:]:
            return None
        op = source
    return op if op is not None and op.name == "tensor.expand_shape" else None


def _collapsed(v: ir.Value, groups: list[list[int]], attr: ir.Attribute, at: ir.Operation) -> ir.Value:
    """v without the unit dims: an expand_shape's source when it inserted exactly them, else a
    tensor.collapse_shape before `at`."""
    owner = _expansion(v)
    if owner is not None and owner.attributes[REASSOCIATION] == attr:
        return owner.operands[0]
    t = ir.RankedTensorType(v.type)
    return ir.Operation.create("tensor.collapse_shape", results=[collapsed_type(t, groups)],
                               operands=[v], attributes={REASSOCIATION: attr}, loc=at.location,
                               ip=ir.InsertionPoint(at)).results[0]


def _destination(op: ir.Operation, groups: list[list[int]], attr: ir.Attribute) -> ir.Value:
    """The rewritten generic's destination: a tensor.empty of its shape where the old one was one
    (eliminate-empty-tensors then finds it under an insert_slice), else the old one collapsed."""
    init = op.operands[len(op.operands) - 1]
    empty = operation_of(init)
    if empty is None or empty.name != "tensor.empty":
        return _collapsed(init, groups, attr, op)
    # the dropped dims are static 1s: the dynamic sizes are the same, in the same order
    return ir.Operation.create("tensor.empty", results=[collapsed_type(ir.RankedTensorType(init.type), groups)],
                               operands=list(empty.operands), loc=op.location, ip=ir.InsertionPoint(op)).results[0]


def _insert_directly(back: ir.Operation) -> None:
    """An expansion read only as the row an insert_slice writes: the insert_slice writes the row
    itself (rank-reduced), so that the row is computed in place in the destination."""
    uses = list(back.results[0].uses)
    if len(uses) != 1:
        return
    user = as_operation(uses[0].owner)
    if user.name != "tensor.insert_slice" or uses[0].operand_number != 0:
        return
    user.operands[0] = back.operands[0]
    back.erase()


def drop_unit_expansions(op: ir.Operation, forget: Callable[[ir.Operation], None]) -> ir.Operation | None:
    """The generic rewritten over its dims without the unit ones (module doc), or None (unchanged);
    `forget(op)` is called before `op` is erased."""
    if len(op.results) != 1 or not _identity_elementwise(op):
        return None
    old_block = op.regions[0].blocks[0]
    if any(inner.name == "linalg.index" for inner in old_block.operations):   # per dimension
        return None
    out_type = ir.RankedTensorType(op.results[0].type)
    groups = _groups(list(out_type.shape))
    if groups is None:
        return None
    attr = reassociation_attr(groups)
    inputs = list(op.operands)[:-1]
    if not any(e is not None and e.attributes[REASSOCIATION] == attr for e in map(_expansion, inputs)):
        return None
    readers = [operation_of(v) for v in inputs]   # what may be left unread after
    operands = [_collapsed(v, groups, attr, op) for v in inputs] + [_destination(op, groups, attr)]
    n_ins = len(inputs)
    rank = len(groups)
    identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))
    attrs = {"indexing_maps": ir.ArrayAttr.get([identity] * len(operands)),
             "iterator_types": ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * rank),
             "operandSegmentSizes": ir.Attribute.parse(f"array<i32: {n_ins}, 1>")}
    new = ir.Operation.create("linalg.generic", results=[operands[-1].type], operands=operands, attributes=attrs,
                              regions=1, loc=op.location, ip=ir.InsertionPoint(op))
    # the payload moves as it is: its block arguments are per operand, not per dimension
    block = new.regions[0].blocks.append(*[a.type for a in old_block.arguments])
    for old_arg, arg in zip(old_block.arguments, block.arguments):
        old_arg.replace_all_uses_with(arg)
    for inner in list(old_block.operations):
        block.append(inner)
    with ir.InsertionPoint(op), op.location:
        dims = [tensor_dim(op.operands[-1], i) for i, n in enumerate(out_type.shape) if ir.ShapedType.is_dynamic_size(n)]
    static = ir.DenseI64ArrayAttr.get(list(out_type.shape))
    back = ir.Operation.create("tensor.expand_shape", results=[out_type], operands=[new.results[0], *dims],
                               attributes={REASSOCIATION: attr, "static_output_shape": static},
                               loc=op.location, ip=ir.InsertionPoint(op))
    op.results[0].replace_all_uses_with(back.results[0])
    forget(op)
    op.erase()
    _insert_directly(back)
    # slices and expansions read by nothing now (they would count as readers), and their sources
    # in turn; an op read twice (`mul x x`) or the source of another is pending once, and leaves
    # the list before it is erased (comparing an erased op is an error)
    pending: list = []
    for r in readers:
        if r is not None and not any(r == p for p in pending):
            pending.append(r)
    while pending:
        e = pending.pop()
        if e.name not in ("tensor.extract_slice", "tensor.expand_shape") or list(e.results[0].uses):
            continue
        source = operation_of(e.operands[0])
        pending = [p for p in pending if not p == e]
        forget(e)
        e.erase()
        if source is not None and not any(source == p for p in pending):
            pending.append(source)
    return new


__all__ = ["drop_unit_expansions"]
