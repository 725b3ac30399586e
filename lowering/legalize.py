"""Python legalization of StableHLO ops the upstream passes do not handle.

`stablehlo-legalize-to-linalg` leaves `sort` and `scatter` alone (and this
build has no StableHLO control-flow-to-SCF pass), so before the pass pipeline
runs we rewrite those ops ourselves.  Each rule replaces one op in place:

  ops with `?` dims that the upstream pass rejects -> legalize_dynamic.py
  (dynamic_reshape, reverse, dynamic_update_slice, gather)
  stablehlo.sort     -> merge sort loops              (legalize_sort.py)
  stablehlo.reduce_window spanning an axis (cumsum & co.) -> one pass (legalize_scan.py)
  a broadcast marked OVERWRITTEN -> tensor.empty     (below)
  stablehlo.scatter  -> scatter loops                 (legalize_scatter.py)
  stablehlo.gather   -> a generic of point reads      (legalize_scatter.py, before the `?` rules)
  stablehlo.while    -> scf.while, or scf.for when marked counted (below)
  stablehlo.if       -> scf.if                        (below)
  stablehlo.case     -> scf.index_switch              (below)
  stablehlo.dot_general of complex operands -> four real ones (below)

Regions of sort/scatter become scalar code (mlir_util.inline_scalar_region);
regions of control-flow ops keep their tensor ops, which the later
`stablehlo-legalize-to-linalg` converts where they now stand.
"""

from __future__ import annotations

from typing import Callable

from torch_mlir import ir
from torch_mlir.dialects import arith, scf, tensor

from sprue.lowering.legalize_dynamic import RULES as DYNAMIC_RULES
from sprue.lowering.legalize_scan import lower_prefix_call, lower_prefix_window
from sprue.lowering.legalize_scatter import lower_gather, lower_scatter
from sprue.lowering.legalize_sort import lower_sort
from sprue.lowering.mlir_util import (
    LegalizeError,
    elem_of,
    element_kind,
    extract,
    from_signless,
    index,
    ops_where,
    signless,
    to_index,
    to_signless,
)


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


# A stablehlo.while marked with this unit attribute is a counted loop (sprue's for_loop and scan
# lowerings make them): its first carry k starts at 0, its cond region is exactly
# `compare LT, k, %trips` with %trips defined above the loop, and its body yields k + 1 first.
COUNTED = "sprue.counted_loop"


def lower_counted_while(op: ir.Operation) -> None:
    """A counted stablehlo.while -> scf.for over [0, trips) carrying the other values.

    scf.for rather than scf.while: one-shot bufferization copies every carry whose new value is
    not computed in place in scf.while's "before" region on every trip, and scf.for has none."""
    cond_block = op.regions[0].blocks[0]
    compare = list(cond_block.operations)[0]
    if compare.name != "stablehlo.compare" or compare.operands[0] != cond_block.arguments[0]:
        raise LegalizeError(f"stablehlo.while at {op.location}: marked {COUNTED} but its cond region is not"
                            f" `compare LT, k, trips`")
    trips = compare.operands[1]
    types = [r.type for r in op.results]
    with ir.InsertionPoint(op), op.location:
        kind = element_kind(elem_of(trips))
        upper = to_index(_scalar_of(trips), kind)
        loop = scf.ForOp(index(0), upper, index(1), list(op.operands[1:]))
    body = loop.body
    with ir.InsertionPoint(body), op.location:
        k_type = ir.RankedTensorType(types[0])
        k_elem = signless(k_type.element_type)
        k = tensor.FromElementsOp(ir.RankedTensorType.get([], k_elem),
                                  [arith.IndexCastOp(k_elem, loop.induction_variable).result]).result
        k = from_signless(k, k_type)
    src = op.regions[1].blocks[0]
    src.arguments[0].replace_all_uses_with(k)
    for old, new in zip(list(src.arguments)[1:], loop.inner_iter_args):
        old.replace_all_uses_with(new)
    ops = list(src.operations)
    for o in ops[:-1]:
        body.append(o)
    ret = ops[-1]
    with ir.InsertionPoint(body), ret.location:
        scf.YieldOp(list(ret.operands)[1:])
    ret.erase()
    op.results[0].replace_all_uses_with(trips)   # k ends at trips (never negative)
    for old, new in zip(list(op.results)[1:], loop.results):
        old.replace_all_uses_with(new)
    op.erase()


def lower_while(op: ir.Operation) -> None:
    """stablehlo.while(cond, body) -> scf.while; the 0-d i1 predicate is extracted."""
    if COUNTED in op.attributes:
        lower_counted_while(op)
        return
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


# A broadcast every element of which is written before it is read: scan's stacked outputs (trip k
# writes row k), which start as zeros in StableHLO as in JAX's, a full pass of writes over memory
# the loop writes again (two EMAs over 20000 x 64 steps: a 5 MB memset, 22% of a call). The
# scan rule marks their broadcast with this discardable attribute (the StableHLO stays portable:
# `sprue compile --emit stablehlo`); it becomes a tensor.empty of the broadcast's type.
OVERWRITTEN = "sprue.overwritten"


def lower_overwritten_broadcast(op: ir.Operation) -> None:
    """A broadcast marked OVERWRITTEN -> tensor.empty of its type; other broadcasts stay."""
    if OVERWRITTEN not in op.attributes:
        return
    t = ir.RankedTensorType(op.results[0].type)
    with ir.InsertionPoint(op), op.location:
        # dynamic_broadcast_in_dim's operand 1: the shape, tensor<rank x i64>
        sizes = [arith.IndexCastOp(ir.IndexType.get(), extract(op.operands[1], [index(i)])).result
                 if ir.ShapedType.is_dynamic_size(n) else n for i, n in enumerate(t.shape)]
        value = from_signless(tensor.EmptyOp(sizes, signless(t.element_type)).result, t)
    op.results[0].replace_all_uses_with(value)
    op.erase()


def lower_complex_dot(op: ir.Operation) -> None:
    """A dot_general of complex operands as four real ones, (a+ib)(c+id) = (ac-bd) + i(ad+bc), as
    rules_complex.py lowers sprue's own (a StableHLO module read from a file has them too): the
    linalg.matmul that stablehlo-legalize-to-linalg makes of a complex one has a body that
    complex-to-standard rewrites into one that linalg no longer accepts, and matmul.py tiles real
    types only. Other dot_generals are left as they are."""
    out_type = ir.RankedTensorType(op.results[0].type)
    lhs, rhs = op.operands
    if not (isinstance(out_type.element_type, ir.ComplexType)
            and all(isinstance(ir.RankedTensorType(v.type).element_type, ir.ComplexType) for v in (lhs, rhs))):
        return
    attrs = {op.attributes[i].name: op.attributes[i].attr for i in range(len(op.attributes))}

    def real_type(t: ir.Type) -> ir.RankedTensorType:
        t = ir.RankedTensorType(t)
        return ir.RankedTensorType.get(t.shape, ir.ComplexType(t.element_type).element_type)

    def new(name: str, operands: list, result: ir.Type, attributes=None) -> ir.Value:
        return ir.Operation.create(name, results=[result], operands=operands, attributes=attributes or {}).result

    with ir.InsertionPoint(op), op.location:
        a, b = (new(f"stablehlo.{k}", [lhs], real_type(lhs.type)) for k in ("real", "imag"))
        c, d = (new(f"stablehlo.{k}", [rhs], real_type(rhs.type)) for k in ("real", "imag"))
        part = real_type(out_type)

        def dot(x: ir.Value, y: ir.Value) -> ir.Value:
            return new(op.name, [x, y], part, attrs)
        re = new("stablehlo.subtract", [dot(a, c), dot(b, d)], part)
        im = new("stablehlo.add", [dot(a, d), dot(b, c)], part)
        out = new("stablehlo.complex", [re, im], out_type)
    op.results[0].replace_all_uses_with(out)
    op.erase()


# Op name -> rewrite.  sort/scatter run before control flow so their scalar
# regions are translated wherever they sit.
RULES: dict[str, Callable[[ir.Operation], None]] = {
    **DYNAMIC_RULES,
    "stablehlo.sort": lower_sort,
    "stablehlo.reduce_window": lower_prefix_window,   # prefix scans only (legalize_scan.py)
    "stablehlo.custom_call": lower_prefix_call,       # sprue's own prefix scans only (legalize_scan.py)
    "stablehlo.broadcast_in_dim": lower_overwritten_broadcast,          # marked ones only (above)
    "stablehlo.dynamic_broadcast_in_dim": lower_overwritten_broadcast,
    "stablehlo.scatter": lower_scatter,
    "stablehlo.gather": lower_gather,           # static and dynamic: legalize_scatter.py
    "stablehlo.dynamic_gather": lower_gather,
    "stablehlo.while": lower_while,
    "stablehlo.if": lower_if,
    "stablehlo.case": lower_case,
    "stablehlo.dot_general": lower_complex_dot,   # complex ones only (above)
    "stablehlo.dot": lower_complex_dot,
}


def _collect(module: ir.Module, names: tuple[str, ...]) -> list[ir.Operation]:
    # Post-order: nested ops come before the ops holding them, so an outer
    # rewrite only ever moves inner ops that are already rewritten.
    return ops_where(module.operation, lambda op: op.name in names, ir.WalkOrder.POST_ORDER)


def legalize(module: ir.Module) -> None:
    """Rewrites every op in RULES, in place.  Raises LegalizeError."""
    with module.context:
        # Scatters first, so that they find the gathers feeding their updates (computed in the
        # scatter loop), then the other gathers, before the rules for `?` dims.
        for group in (("stablehlo.scatter",), ("stablehlo.gather", "stablehlo.dynamic_gather"),
                      tuple(DYNAMIC_RULES),
                      ("stablehlo.sort", "stablehlo.reduce_window", "stablehlo.custom_call",
                       "stablehlo.broadcast_in_dim", "stablehlo.dynamic_broadcast_in_dim",
                       "stablehlo.dot_general", "stablehlo.dot"),
                      ("stablehlo.while", "stablehlo.if", "stablehlo.case")):
            for op in _collect(module, group):
                RULES[op.name](op)


__all__ = ["COUNTED", "LegalizeError", "OVERWRITTEN", "RULES", "legalize", "lower_case", "lower_counted_while", "lower_if",
           "lower_scatter", "lower_sort", "lower_while"]
