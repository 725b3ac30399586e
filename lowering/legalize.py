"""Python legalization of StableHLO ops the upstream passes do not handle.

`stablehlo-legalize-to-linalg` leaves `sort` and `scatter` alone (and this
build has no StableHLO control-flow-to-SCF pass), so before the pass pipeline
runs we rewrite those ops ourselves.  Each rule replaces one op in place:

  stablehlo.sort     -> merge sort loops              (legalize_sort.py)
  stablehlo.scatter  -> scatter loops                 (legalize_scatter.py)
  stablehlo.while    -> scf.while                     (below)
  stablehlo.if       -> scf.if                        (below)
  stablehlo.case     -> scf.index_switch              (below)

Regions of sort/scatter become scalar code (mlir_util.inline_scalar_region);
regions of control-flow ops keep their tensor ops, which the later
`stablehlo-legalize-to-linalg` converts where they now stand.
"""

from __future__ import annotations

from typing import Callable

from torch_mlir import ir
from torch_mlir.dialects import scf

from .legalize_scatter import lower_scatter
from .legalize_sort import lower_sort
from .mlir_util import LegalizeError, extract, element_kind, elem_of, to_index, to_signless


def _move_region(src: ir.Region, dst_block: ir.Block, terminator: Callable[[list[ir.Value]], None]) -> None:
    """Moves the single block of `src` into `dst_block` (which has matching
    arguments) and replaces its stablehlo.return by `terminator(operands)`."""
    block = src.blocks[0]
    for old, new in zip(block.arguments, dst_block.arguments):
        old.replace_all_uses_with(new)
    ops = list(block.operations)
    for o in ops[:-1]:
        dst_block.append(o)
    ret = ops[-1]
    with ir.InsertionPoint(dst_block), ret.location:
        terminator(list(ret.operands))
    ret.erase()


def _scalar_of(t: ir.Value) -> ir.Value:
    return extract(to_signless(t), [])


def _replace(op: ir.Operation, new: ir.Operation) -> None:
    for old, res in zip(op.results, new.results):
        old.replace_all_uses_with(res)
    op.erase()


def lower_while(op: ir.Operation) -> None:
    """stablehlo.while(cond, body) -> scf.while; the 0-d i1 predicate is extracted."""
    types = [r.type for r in op.results]
    with ir.InsertionPoint(op), op.location:
        loop = scf.WhileOp(types, list(op.operands))
    before = loop.before.blocks.append(*types)
    after = loop.after.blocks.append(*types)
    carried = list(before.arguments)
    _move_region(op.regions[0], before,
                 lambda ops: scf.ConditionOp(_scalar_of(ops[0]), carried))
    _move_region(op.regions[1], after, lambda ops: scf.YieldOp(ops))
    _replace(op, loop)


def lower_if(op: ir.Operation) -> None:
    """stablehlo.if(pred) {true} {false} -> scf.if."""
    types = [r.type for r in op.results]
    with ir.InsertionPoint(op), op.location:
        branch = scf.IfOp(_scalar_of(op.operands[0]), types, has_else=True)
    _move_region(op.regions[0], branch.then_block, lambda ops: scf.YieldOp(ops))
    _move_region(op.regions[1], branch.else_block, lambda ops: scf.YieldOp(ops))
    _replace(op, branch)


def lower_case(op: ir.Operation) -> None:
    """stablehlo.case(index) -> scf.index_switch.

    The spec runs the last branch for an index outside [0, N), which is
    exactly index_switch's `default` region."""
    types = [r.type for r in op.results]
    count = len(op.regions)
    with ir.InsertionPoint(op), op.location:
        selector = to_index(_scalar_of(op.operands[0]), element_kind(elem_of(op.operands[0])))
        switch = scf.IndexSwitchOp(types, selector, list(range(count - 1)))
    targets = list(switch.caseRegions) + [switch.defaultRegion]
    for src, dst in zip(op.regions, targets):
        # The IndexSwitchOp builder may already have given each region a block.
        block = dst.blocks[0] if len(dst.blocks) else dst.blocks.append()
        _move_region(src, block, lambda ops: scf.YieldOp(ops))
    _replace(op, switch)


# Op name -> rewrite.  sort/scatter run before control flow so their scalar
# regions are translated wherever they sit.
RULES: dict[str, Callable[[ir.Operation], None]] = {
    "stablehlo.sort": lower_sort,
    "stablehlo.scatter": lower_scatter,
    "stablehlo.while": lower_while,
    "stablehlo.if": lower_if,
    "stablehlo.case": lower_case,
}


def _collect(module: ir.Module, names: tuple[str, ...]) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in names:
            found.append(op)
        return ir.WalkResult.ADVANCE
    # Post-order: nested ops come before the ops holding them, so an outer
    # rewrite only ever moves inner ops that are already rewritten.
    module.operation.walk(visit, ir.WalkOrder.POST_ORDER)
    return found


def legalize(module: ir.Module) -> None:
    """Rewrites every op in RULES, in place.  Raises LegalizeError."""
    with module.context:
        for group in (("stablehlo.sort", "stablehlo.scatter"),
                      ("stablehlo.while", "stablehlo.if", "stablehlo.case")):
            for op in _collect(module, group):
                RULES[op.name](op)


__all__ = ["LegalizeError", "RULES", "legalize", "lower_case", "lower_if", "lower_scatter",
           "lower_sort", "lower_while"]
