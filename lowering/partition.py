"""Big functions split, on tensors, into parts of a bounded number of ops; equal parts share one.

What outline.py does for loop nests at the end of the pipeline, this does at its start (before
bufferization): a function with at least PARTITION_MIN_OPS ops in its body becomes a chain of
calls of private functions of about PART_OPS ops each. Two reasons, both from deep programs (an
unrolled network, a long gradient tape):
- cost: several of MLIR's passes and LLVM's code generator are superlinear in the size of one
  function (buffer deallocation's alias queries, convert-linalg-to-loops, instruction selection
  over one block): a 600-layer network spent 3x per layer what a 300-layer one did;
- sharing: parts that print the same (the same ops on the same types, taking and returning the
  same kinds of values) are one function, lowered and compiled once, like XLA compiling a
  repeated computation once. The parts are cut where the body repeats (`part_size`), so a deep
  network's layers fall into equal parts.

A part takes the values it uses from before it (arguments, earlier parts' results; constants,
empty tensors and fills of constants are copied in instead) and returns those used after it.
One-shot bufferization then works across the calls (bufferize-function-boundaries): a part
writes into a buffer it was given only where the caller no longer needs it, and returns the new
ones it allocates. The parts are noinline: LLVM would otherwise rebuild the one big function.
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import func

from sprue.lowering.mlir_util import as_operation, call_equal_function, captures, defining_op
from sprue.lowering.outline import new_private_function

# Below this many ops (not counting copied ones) a body stays whole: the realistic programs'
# largest have 195 (benchmarks/programs.py), and a part's buffers are pointer arguments, no longer
# fresh allocations LLVM knows do not alias (outline.py measured what that costs).
PARTITION_MIN_OPS = 256
PART_OPS = 64
# A cut passes at most this many values from one part to the next. Buffer deallocation is
# quadratic in the buffers a function holds times those it returns: a gradient's forward parts
# return every activation its backward pass needs (a 150-layer training step spent 14 s there);
# such a body has no cheap cut and stays whole.
MAX_LIVE = 8
_PREFIX = "__sprue_part_"
# Ops copied into each part that uses them rather than passed (their own operands passed or
# copied in turn): no side effects, cheap, and what later rewrites look for (static shapes,
# constant fills). Above all, a fill or an empty tensor is a destination: a passed one would be
# one buffer several parts write into.
_COPIED = frozenset({"arith.constant", "ub.poison", "tensor.empty", "linalg.fill"})


def _copied(op: ir.Operation) -> bool:
    return op.name in _COPIED


def _passed(captured: list[ir.Value]) -> list[ir.Value]:
    """What a part that uses `captured` takes as arguments: those values, and the operands of the
    copied ops among them (recursively), except the copied ones."""
    passed: dict[ir.Value, None] = {}

    def need(v: ir.Value) -> None:
        if isinstance(v.owner, ir.Block) or not _copied(defining_op(v)):
            passed.setdefault(v, None)
        else:
            for operand in defining_op(v).operands:
                need(operand)
    for v in captured:
        need(v)
    return list(passed)


def _signature(op: ir.Operation) -> str:
    return f"{op.name}:{','.join(str(r.type) for r in op.results)}"


def part_size(ops: list[ir.Operation]) -> tuple[int, int]:
    """(offset, size): where parts start and how many ops each holds. The size is a multiple of
    the body's period, the shortest p <= PART_OPS for which most ops equal the one p later (by
    name and result types); the offset, where that repetition starts."""
    sigs = [_signature(op) for op in ops]
    n = len(sigs)
    best, best_matches = 0, 0
    for p in range(1, PART_OPS + 1):
        matches = sum(sigs[i] == sigs[i + p] for i in range(n - p))
        if matches > best_matches * 1.05:   # a longer period must repeat clearly more
            best, best_matches = p, matches
    if best == 0 or best_matches < 0.9 * (n - best):
        return 0, PART_OPS
    start = next(i for i in range(n - best) if all(sigs[i + k] == sigs[i + k + best] for k in range(best)))
    return start, best * max(1, PART_OPS // best)


def _extract(part: list[ir.Operation], module: ir.Module, name: str, seen: dict[str, str]) -> None:
    """Moves the ops of `part` (consecutive, in order) into a new private function `name` (or,
    where one that prints the same exists, calls that one) and calls it in their place."""
    captured, uses = captures(part)
    inside: set[ir.Operation] = set()
    for op in part:
        op.walk(lambda o: inside.add(o) or ir.WalkResult.ADVANCE, ir.WalkOrder.PRE_ORDER)
    passed = _passed(captured)
    escaping = [(r, [(as_operation(u.owner), u.operand_number) for u in r.uses
                     if as_operation(u.owner) not in inside])
                for op in part for r in op.results]
    escaping = [(r, outside) for r, outside in escaping if outside]
    with part[0].location:
        fn, entry = new_private_function(module, name, [v.type for v in passed], [r.type for r, _ in escaping])
        replacement = dict(zip(passed, entry.arguments))
        with ir.InsertionPoint(entry):
            for v in captured:
                _copy_into(v, replacement)
        with ir.InsertionPoint(part[0]):
            call = func.CallOp([r.type for r, _ in escaping], name, passed)
        for k, (_, outside) in enumerate(escaping):
            for owner, i in outside:
                owner.operands[i] = call.results[k]
        for op in part:
            op.detach_from_parent()
            ir.InsertionPoint(entry).insert(op)
        with ir.InsertionPoint(entry):
            func.ReturnOp([r for r, _ in escaping])
    for op, i, value in uses:
        op.operands[i] = replacement[value]
    call_equal_function(fn, call, name, seen)


def _copy_into(value: ir.Value, replacement: dict[ir.Value, ir.Value]) -> None:
    """A copy of `value`'s defining op (and of the ops it needs) at the insertion point, unless
    `value` is passed or already copied."""
    if value in replacement:
        return
    op = defining_op(value)
    for v in op.operands:
        _copy_into(v, replacement)
    copy = op.clone()
    for i, v in enumerate(op.operands):
        copy.operands[i] = replacement[v]
    for old, new in zip(op.results, copy.results):
        replacement[old] = new


def _live_across(work: list[ir.Operation], owner: ir.Operation) -> list[int]:
    """For each position i, how many values the ops before work[i] define that work[i] or a
    later op (or the block's terminator) uses: what a cut before work[i] would pass on. `owner`
    is the op whose block holds `work`."""
    position = {op: i for i, op in enumerate(work)}
    starts = [0] * (len(work) + 2)

    def top(op: ir.Operation) -> int:
        """The position of the op of `work` that holds `op`, or len(work) for the block's other
        ops (its terminator)."""
        while op not in position:
            parent = as_operation(op.parent)
            if parent == owner:
                return len(work)
            op = parent
        return position[op]
    for i, op in enumerate(work):
        last = max((top(as_operation(u.owner)) for r in op.results for u in r.uses), default=i)
        if last > i:   # live on the positions i + 1 .. last
            starts[i + 1] += 1
            starts[last + 1] -= 1
    live, running = [], 0
    for i in range(len(work) + 1):
        running += starts[i]
        live.append(running)
    return live


def _bodies(fn: ir.Operation) -> list[ir.Block]:
    """The blocks of `fn` that hold its computation: its body, and the branches of the scf.if
    ops in it (the entry checks' guard around a kernel with run-time sizes)."""
    entry = fn.regions[0].blocks[0]
    branches = [block for op in map(as_operation, entry.operations) if op.name == "scf.if"
                for region in op.regions for block in region.blocks]
    return [entry, *branches]


def partition_functions(module: ir.Module) -> None:
    """Each block of a function's body (module doc: _bodies) with at least PARTITION_MIN_OPS ops
    (not counting copied ones) becomes a chain of calls of parts (module doc)."""
    functions = [op for op in map(as_operation, module.body.operations)
                 if op.name == "func.func" and len(op.regions[0].blocks)]
    seen: dict[str, str] = {}
    count = 0
    for block in [block for fn in functions for block in _bodies(fn)]:
        body = [as_operation(op) for op in block.operations][:-1]   # not the terminator
        copied = [op for op in body if _copied(op)]
        work = [op for op in body if not _copied(op)]
        if len(work) < PARTITION_MIN_OPS:
            continue
        offset, size = part_size(work)
        live = _live_across(work, as_operation(block.owner))
        cuts = [i for i in ([offset] if offset else []) + list(range(offset + size, len(work), size))
                if live[i] <= MAX_LIVE]
        if not cuts:
            continue
        bounds = [0, *cuts]
        for lo, hi in zip(bounds, bounds[1:] + [len(work)]):
            _extract(work[lo:hi], module, f"{_PREFIX}{count}", seen)
            count += 1
        for op in reversed(copied):   # those the parts no longer use (the others may be erased: shared)
            if all(not list(r.uses) for r in op.results):
                op.erase()


__all__ = ["MAX_LIVE", "PARTITION_MIN_OPS", "PART_OPS", "part_size", "partition_functions"]
