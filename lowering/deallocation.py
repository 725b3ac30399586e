"""Buffer deallocation's common case, resolved in linear time before MLIR's simplification.

MLIR's ownership-based buffer deallocation ends each block with one `bufferization.dealloc` of
every buffer the block owns, retaining the values it passes on (a function's results); its
simplification pass then splits that op into one per buffer and, for each, asks alias analysis
about every retained value: buffers times results. A training step through 1,000 layers
(~4,000 buffers, 1,000 gradients returned) spent 14 of its 20 s of bufferization there.

The common case needs no alias analysis: every buffer of the op is a fresh allocation of its own
(a `memref.alloc`, or what a call of a function returning only fresh allocations of its own
returns: partition.py's parts; so no two alias), owned unconditionally (a constant `true`), and every
retained value is one of them or a view of one (then kept: the caller owns it), or comes from
something else no fresh allocation can alias (a function argument, a global, another
allocation). Then each buffer not kept is freed where the op was, and the op's results (whether
each retained value is owned) are constants. (MLIR left a chain of such parts a `dealloc_helper`
comparing every pointer with every result at run time.) Any other op (conditions computed at run time, a
retained value from a call or a loop that might alias a buffer) is left to MLIR's passes.
"""
from __future__ import annotations

from torch_mlir import ir

from sprue.lowering.mlir_util import as_operation, ops_where

# Ops whose result views (part of) their first operand's buffer.
_VIEWS = frozenset({"memref.subview", "memref.cast", "memref.collapse_shape", "memref.expand_shape",
                    "memref.reinterpret_cast", "memref.transpose", "memref.view"})
# Ops whose result is a buffer no fresh allocation of the block aliases.
_DISTINCT = frozenset({"memref.alloc", "memref.get_global", "memref.alloca"})


def _root(value: ir.Value) -> ir.Value:
    """The buffer `value` views (through _VIEWS and the base buffer of its strided metadata), or
    `value` itself."""
    while not isinstance(value.owner, ir.Block):
        op = as_operation(value.owner)
        if op.name not in _VIEWS and not (op.name == "memref.extract_strided_metadata" and value == op.results[0]):
            break
        value = op.operands[0]
    return value


def _callee(op: ir.Operation) -> str | None:
    return ir.FlatSymbolRefAttr(op.attributes["callee"]).value if op.name == "func.call" else None


def _fresh_results(module: ir.Module) -> set[str]:
    """The functions of `module` each of whose results is a fresh allocation of its own (through
    views), or a result of a call of such a function (partition.py's parts on StableHLO, whose
    bodies are parts in turn): a call of one returns buffers nothing else aliases, as a
    memref.alloc does. Found again until none is added: a caller may come before its callee."""
    candidates = {}
    for fn in map(as_operation, module.body.operations):
        if fn.name != "func.func" or len(fn.regions[0].blocks) != 1:
            continue
        returns = ops_where(fn, lambda op: op.name == "func.return")
        roots = [_root(v) for ret in returns for v in ret.operands]
        if len(returns) == 1 and len(set(roots)) == len(roots) and not any(isinstance(r.owner, ir.Block) for r in roots):
            candidates[ir.StringAttr(fn.attributes["sym_name"]).value] = [as_operation(r.owner) for r in roots]
    fresh: set[str] = set()
    while True:
        found = {name for name, ops in candidates.items() if name not in fresh and all(
            op.name == "memref.alloc" or _callee(op) in fresh for op in ops)}
        if not found:
            return fresh
        fresh |= found


def _is_fresh(root: ir.Value, fresh_functions: set[str]) -> bool:
    """Whether `root` is a buffer no other value aliases: an allocation, or a result of a call of a
    function returning fresh allocations."""
    if isinstance(root.owner, ir.Block):
        return False
    op = as_operation(root.owner)
    return op.name == "memref.alloc" or _callee(op) in fresh_functions


def _is_true(value: ir.Value) -> bool:
    if isinstance(value.owner, ir.Block):
        return False
    op = as_operation(value.owner)
    return op.name == "arith.constant" and str(op.attributes["value"]) == "true"


def _function_argument(value: ir.Value) -> bool:
    if not isinstance(value.owner, ir.Block):
        return False
    block = value.owner
    return as_operation(block.owner).name == "func.func" and block == block.owner.regions[0].blocks[0]


def _resolve(op: ir.Operation, fresh_functions: set[str]) -> bool:
    """Frees the buffers of a dealloc op of the common case (module doc) and erases it; False,
    and nothing changed, for any other."""
    n, m, r = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])
    operands = list(op.operands)
    buffers, conditions, retained = operands[:n], operands[n:n + m], operands[n + m:n + m + r]
    if not all(_is_true(c) for c in conditions):
        return False
    roots = [_root(b) for b in buffers]
    if not all(_is_fresh(root, fresh_functions) for root in roots) or len(set(roots)) != len(roots):
        return False
    fresh = dict(zip(roots, buffers))
    kept: set[ir.Value] = set()
    owned: list[bool] = []
    for value in retained:
        root = _root(value)
        if root in fresh:
            kept.add(fresh[root])
            owned.append(True)
        elif _function_argument(root) or _is_fresh(root, fresh_functions) or (
                not isinstance(root.owner, ir.Block) and as_operation(root.owner).name in _DISTINCT):
            owned.append(False)
        else:
            return False
    i1 = ir.IntegerType.get_signless(1)
    with ir.InsertionPoint(op), op.location:
        for buffer in buffers:
            if buffer not in kept:
                ir.Operation.create("memref.dealloc", operands=[buffer])
        constants = {flag: ir.Operation.create("arith.constant", results=[i1], attributes={
            "value": ir.IntegerAttr.get(i1, int(flag))}).results[0] for flag in set(owned)}
    for result, flag in zip(op.results, owned):
        result.replace_all_uses_with(constants[flag])
    op.erase()
    return True


def free_fresh_buffers(module: ir.Module) -> None:
    """Resolves every bufferization.dealloc of the common case (module doc)."""
    fresh_functions = _fresh_results(module)
    for op in ops_where(module.operation, lambda op: op.name == "bufferization.dealloc"):
        _resolve(op, fresh_functions)


def free_whole_buffers(module: ir.Module) -> None:
    """Each `memref.dealloc` of a buffer's base (`memref.extract_strided_metadata`'s first result,
    what MLIR's lowering of bufferization.dealloc frees) frees the buffer itself: both are the
    same allocated pointer, which is all the LLVM lowering of a dealloc reads. In the LLVM dialect
    the base is a descriptor rebuilt field by field from the buffer's: ~25 ops a buffer, most of a
    deep training step's entry function (533 buffers at 300 layers), which every later stage walks."""
    for dealloc in ops_where(module.operation, lambda op: op.name == "memref.dealloc"):
        base = dealloc.operands[0]
        owner = base.owner
        if isinstance(owner, ir.Block) or owner.name != "memref.extract_strided_metadata" or base != owner.results[0]:
            continue
        dealloc.operands[0] = owner.operands[0]
        if all(not list(r.uses) for r in owner.results):
            owner.erase()


__all__ = ["free_fresh_buffers", "free_whole_buffers"]
