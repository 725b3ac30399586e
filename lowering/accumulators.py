"""Reduction accumulators kept in registers: loop-invariant load/store pairs become loop-carried values.

convert-linalg-to-loops lowers a reduction (a matrix-vector product's row, a sum) to a loop that
loads the accumulator from the output buffer, adds to it and stores it back on every trip:

    scf.for %k = ... {  %a = memref.load %out[%i]  ...  memref.store %s, %out[%i]  }

LLVM's LICM keeps such an accumulator in a register (and the loop vectorizer then splits it into
vector lanes) only when it can prove that no other access of the loop touches `%out[%i]`. Outside
loops it can: the output is a fresh allocation. Inside a `fori_loop` or `scan` body it cannot: the
inputs are loop-carried buffers, phis of earlier allocations, and LLVM's alias analysis gives up on
a phi that may hold the same allocation as one made in an earlier trip. The reduction then runs
scalar, a load and a store per element (a 1000x1000 matrix-vector product inside `fori_loop`: 1.4 ms
a step against 0.44 ms outside it).

This rewrite does LICM's scalar promotion itself, on the scf loops, where the provenance of buffers
is still plain: a store to an invariant location of a buffer that is *freshly allocated*
(a memref.alloc, possibly seen through views) whose loads all read that same location earlier in
the body is turned into an `iter_args` value — loaded once before the loop, stored once after it.
A fresh allocation aliases nothing made before it, so the other buffers the loop reads cannot be the
accumulator's, except views of the same allocation (then the loop is left alone), and loop-carried
buffers of a loop that encloses the allocation (made in an earlier trip, before the allocation).
Inner loops are rewritten first, so a nest that reduces to one location (a full sum) is promoted at
every level. A function argument marked llvm.noalias (a chunk of a parallel loop, parallel.py,
writing its rows of the caller's buffer) counts as fresh: no other argument reaches its memory.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import memref, scf

from sprue.lowering.mlir_util import as_operation, defined_inside, is_inside, ops_where, view_root

# Views: the same allocation under another shape or offset.
_ALLOCS = {"memref.alloc", "memref.alloca"}
# Ops that touch memory other than the loads and stores examined, or whose effects are unknown.
_PURE_DIALECTS = ("arith.", "math.", "index.", "affine.apply", "affine.min", "affine.max", "ub.poison")


def _noalias_argument(value: ir.Value) -> bool:
    """Whether `value` is a function's argument marked llvm.noalias (parallel.py's chunk bodies):
    no other argument's accesses reach its memory, as for a fresh allocation."""
    if not isinstance(value, ir.BlockArgument):
        return False
    fn = as_operation(value.owner.owner)
    if fn.name != "func.func" or "arg_attrs" not in fn.attributes:
        return False
    return "llvm.noalias" in ir.DictAttr(ir.ArrayAttr(fn.attributes["arg_attrs"])[value.arg_number])


def _fresh(root: ir.Value) -> bool:
    """Whether the buffer `root` aliases nothing made before it: a fresh allocation or a noalias argument."""
    return (isinstance(root, ir.OpResult) and root.owner.name in _ALLOCS) or _noalias_argument(root)


def _may_alias(read: ir.Value, fresh: ir.Value) -> bool:
    """Whether a buffer the loop reads may share memory with the fresh buffer `fresh` (_fresh)."""
    root = view_root(read)
    if isinstance(root, ir.OpResult):
        if root == fresh:
            return True
        return root.owner.name not in _ALLOCS and root.owner.name != "memref.get_global"
    owner = as_operation(root.owner.owner)   # the op whose region the block argument belongs to
    if owner.name == "func.func":
        return root == fresh   # the caller's buffers: allocated before this call, or noalias
    if isinstance(fresh, ir.BlockArgument):
        return True
    # A value carried by a loop enclosing the allocation was made in an earlier trip.
    return not (owner.name in ("scf.for", "scf.while") and is_inside(as_operation(fresh.owner), owner))


def _body_ops(loop: ir.Operation) -> list[ir.Operation] | None:
    """Every op of the loop's body, nested ones included, or None when one has effects this
    rewrite does not model (calls, allocation, copies, vector memory ops)."""
    ops: list[ir.Operation] = []
    ok = True

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal ok
        if op == loop:
            return ir.WalkResult.ADVANCE
        name = op.name
        if not (name in ("memref.load", "memref.store", "scf.for", "scf.if", "scf.yield")
                or name.startswith(_PURE_DIALECTS)):
            ok = False
            return ir.WalkResult.INTERRUPT
        ops.append(op)
        return ir.WalkResult.ADVANCE
    loop.walk(visit)
    return ops if ok else None


def _accumulators(loop: ir.Operation) -> list[tuple[ir.Operation, list[ir.Operation]]] | None:
    """(store, the loads it updates) for each accumulator of `loop`, or None when the loop does not
    qualify (see the module doc)."""
    ops = _body_ops(loop)
    if ops is None:
        return None
    block = loop.regions[0].blocks[0]
    top = [op.operation for op in block.operations]   # OpViews -> Operations, as walk gives them
    position = {op: i for i, op in enumerate(top)}
    stores = [op for op in ops if op.name == "memref.store"]
    loads = [op for op in ops if op.name == "memref.load"]
    found = []
    for store in stores:
        buf, indices = store.operands[1], list(store.operands[2:])
        root = view_root(buf)
        if store not in position or not _fresh(root):
            return None
        if any(defined_inside(i, loop) for i in indices) or defined_inside(buf, loop):
            return None
        mine = []
        for load in loads:
            if view_root(load.operands[0]) != root:
                if _may_alias(load.operands[0], root):
                    return None
                continue
            same = load.operands[0] == buf and list(load.operands[1:]) == indices
            if not (same and load in position and position[load] < position[store]):
                return None
            mine.append(load)
        if any(other is not store and view_root(other.operands[1]) == root for other in stores):
            return None
        found.append((store, mine))
    return found


def _promote(loop: ir.Operation, accs: list[tuple[ir.Operation, list[ir.Operation]]]) -> None:
    old_block = loop.regions[0].blocks[0]
    lb, ub, step = loop.operands[0], loop.operands[1], loop.operands[2]
    with ir.InsertionPoint(loop), loop.location:
        inits = [memref.LoadOp(s.operands[1], list(s.operands[2:])).result for s, _ in accs]
        new = scf.ForOp(lb, ub, step, inits)
    with ir.InsertionPoint(new.body), loop.location:
        scf.YieldOp([s.operands[0] for s, _ in accs])
    new_yield = list(new.body.operations)[-1]
    old_block.arguments[0].replace_all_uses_with(new.induction_variable)
    for op in list(old_block.operations)[:-1]:   # the old scf.yield stays and goes with the loop
        op.operation.move_before(new_yield)
    for (store, loads), carried in zip(accs, new.inner_iter_args):
        for load in loads:
            load.results[0].replace_all_uses_with(carried)
            load.erase()
    with ir.InsertionPoint.after(new.operation), loop.location:
        for (store, _), result in zip(accs, new.results):
            memref.StoreOp(result, store.operands[1], list(store.operands[2:]))
    for store, _ in accs:
        store.erase()
    loop.erase()


def promote_accumulators(module: ir.Module) -> int:
    """Rewrites every qualifying scf.for of the module, innermost first; returns how many."""
    loops = ops_where(module.operation, lambda op: op.name == "scf.for" and len(op.results) == 0,
                      ir.WalkOrder.POST_ORDER)
    promoted = 0
    for loop in loops:
        accs = _accumulators(loop)
        if accs:
            _promote(loop, accs)
            promoted += 1
    return promoted
