"""Big functions split into one function per outermost loop nest, identical nests sharing one.

LLVM's function passes are superlinear in a function's size (the loop vectorizer's and GVN's
analyses, constraint elimination, instruction selection over one huge block list), and so are
some of MLIR's conversions to the LLVM dialect: a 100-layer network (`tanh(x @ w)` on 16 x 16)
lowered to one function of 16k lines of LLVM IR spent 6.6 s in LLVM's O3 passes and 3.4 s in
instruction selection, and its per-layer cost grew fivefold from 100 to 300 layers. XLA compiles
such a program as many small kernels, each fusion its own function, and compiles a kernel once
however often the program runs it; IREE's dispatch regions are the same idea.

Here, on loops over buffers (the pipeline's "loops" stage, before the LLVM conversion): in a
function with at least OUTLINE_MIN_NESTS outermost loop nests, each nest (an scf.for, scf.while
or scf.parallel no loop encloses) becomes a private function taking the values it uses from
outside (buffers, run-time sizes, scalars; constants are copied in, so that bounds stay static)
and returning what the nest returns, and a call replaces it. Nests whose functions print the same
(the same ops on the same types: a deep network's layers, an unrolled loop, a gradient's repeated
steps) share one function, compiled once. The functions are `noinline` (LLVM would otherwise
inline them back into one function), so LLVM optimizes each on its own. What is lost: optimizing
across nests (each nest reads and writes memory, so little is), a call per nest per run
(nanoseconds), and LLVM's knowledge that a nest's buffers, fresh allocations, do not alias (see
OUTLINE_MIN_NESTS): a function of fewer nests keeps everything inline.
"""
from __future__ import annotations

from collections import Counter
from typing import Callable

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import func

from sprue.lowering.mlir_util import (
    LOOP_OPS,
    as_operation,
    call_equal_function,
    captures,
    defining_op,
    enclosing,
    ops_where,
    view_root,
)

# Values defined by these ops (no operands, no side effects) are copied into the outlined function
# instead of being passed: loop bounds and steps stay constants there.
_COPIED = frozenset({"arith.constant", "memref.get_global", "ub.poison"})
# From 48 nests: below, the realistic programs' biggest functions (up to 30 nests: a CNN with
# run-time sizes) ran slower outlined (that CNN 2.0 -> 2.8 ms, min of 31, one core): in a function
# of its own a nest's buffers are pointer arguments, no longer fresh allocations LLVM knows do not
# alias, and its vectorized loops check for overlap or are not vectorized. Deep unrolled
# programs (a 24-layer network has ~50 nests) are where one function's size costs superlinearly.
OUTLINE_MIN_NESTS = 48
# ... and in every part of a deep program (partition.py: no realistic program has them), however
# few its nests: then the nests that print the same across parts are one function, which O3
# optimizes once. A training step through 30 layers, whose parts are cut after the linalg stage
# with 20-30 nests each, spent 0.31 s in O3 on them: first call 0.70-0.83 -> 0.40 s, the same
# run time (157-170 and 158-159 us); 100 layers 0.58-0.63 -> 0.53 s.
PART_PREFIXES = ("__sprue_part_", "__sprue_hlo_part_")
NEST_PREFIX = "__sprue_nest_"
# What is left of a big function once its nests are functions is straight-line code: calls,
# allocations, frees, views. A long gradient tape keeps thousands of such ops in one block
# (partition.py cannot cut it: every activation is live from the forward pass to the backward
# one), and LLVM's schedulers, register allocator and dead-store elimination are superlinear in a
# block's length. Such a body is cut into runs of SPLIT_OPS ops, each a function.
SPLIT_MIN_OPS = 512
SPLIT_OPS = 128
# ... and a run ends early where more than RUN_MAX_RESULTS of its values would be read after it:
# a run returns those (entry_results.py passes them through a stack buffer of its caller, at most
# MAX_RESULT_BYTES: 512 rank-2 descriptors of 7 words fit in it). Past that the run returned them
# as one struct, whose LLVM IR is O(n^2) text: a 2,000-layer training step's run of 128 forward
# calls kept 2,112 activations for the backward pass, and its compilation went from 6.6 s at
# 1,000 layers to 87 s (180 MB of LLVM IR, 1.9 GB of memory).
RUN_MAX_RESULTS = 512
_CHUNK_PREFIX = "__sprue_run_"
_STAYS = frozenset({"memref.alloca", "memref.alloca_scope"})


def _outermost_nests(fn: ir.Operation) -> list[ir.Operation]:
    """The loops of `fn` that no other loop encloses, in program order."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in LOOP_OPS:
            found.append(op)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE
    fn.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


# A static buffer is passed to (and returned from) a private function as its aligned pointer
# alone, not as a descriptor of 3 + 2 * rank values (MLIR's bare-pointer calling convention, per
# function and call in convert-func-to-llvm): a deep network's glue function built, unpacked and
# passed 21 values per 2-D product; what LLVM had to clean up from them was half its time at 300
# layers.
_BARE_PTR = "llvm.bareptr"


def _bare_pointer_ok(t: ir.Type) -> bool:
    """Whether a value of type `t` may be passed as a bare pointer: not a buffer, or one whose
    shape, strides and offset are static (its type says all but the pointer)."""
    if isinstance(t, ir.UnrankedMemRefType):
        return False
    if not isinstance(t, ir.MemRefType):
        return True
    t = ir.MemRefType(t)
    strides, offset = t.get_strides_and_offset()
    return (t.has_static_shape and t.memory_space is None
            and not any(t.is_dynamic_stride_or_offset(x) for x in [*strides, offset]))


def new_private_function(module: ir.Module, name: str, inputs: list[ir.Type],
                         results: list[ir.Type]) -> tuple[func.FuncOp, ir.Block]:
    """A new private, noinline, internal function `name` at the end of `module`, and its entry block."""
    with ir.InsertionPoint(module.body):
        fn = func.FuncOp(name, ir.FunctionType.get(inputs, results), visibility="private")
        # func-to-llvm keeps llvm.-prefixed attributes: never inlined back, and internal (a
        # private func.func would be exported: two kernels linked into one program clash)
        fn.attributes["llvm.no_inline"] = ir.UnitAttr.get()
        fn.attributes["llvm.linkage"] = ir.Attribute.parse("#llvm.linkage<internal>")
        return fn, fn.add_entry_block()


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


def extract_function(ops: list[ir.Operation], module: ir.Module, name: str, seen: dict[str, str],
                     copied: Callable[[ir.Operation], bool]) -> None:
    """Moves `ops` (consecutive in one block, in order) into a new private function `name` (or,
    where one that prints the same exists, calls that one) and calls it in their place. The
    function takes the values the ops use from before them, except those whose defining ops
    `copied` accepts (cloned into it, with what they use in turn: constants stay constants), and
    returns those used after them."""
    captured, uses = captures(ops)
    inside: set[ir.Operation] = set()
    for op in ops:
        op.walk(lambda o: inside.add(o) or ir.WalkResult.ADVANCE, ir.WalkOrder.PRE_ORDER)
    passed: dict[ir.Value, None] = {}

    def need(v: ir.Value) -> None:
        if isinstance(v.owner, ir.Block) or not copied(defining_op(v)):
            passed.setdefault(v, None)
        else:
            for operand in defining_op(v).operands:
                need(operand)
    for v in captured:
        need(v)
    escaping = [(r, [(as_operation(u.owner), u.operand_number) for u in r.uses
                     if as_operation(u.owner) not in inside])
                for op in ops for r in op.results]
    escaping = [(r, outside) for r, outside in escaping if outside]
    with ops[0].location:
        fn, entry = new_private_function(module, name, [v.type for v in passed], [r.type for r, _ in escaping])
        replacement = dict(zip(passed, entry.arguments))
        with ir.InsertionPoint(entry):
            for v in captured:
                _copy_into(v, replacement)
        with ir.InsertionPoint(ops[0]):
            call = func.CallOp([r.type for r, _ in escaping], name, list(passed))
        for k, (_, outside) in enumerate(escaping):
            for owner, i in outside:
                owner.operands[i] = call.results[k]
        for op in ops:
            op.detach_from_parent()
            ir.InsertionPoint(entry).insert(op)
        with ir.InsertionPoint(entry):
            func.ReturnOp([r for r, _ in escaping])
    for op, i, value in uses:
        op.operands[i] = replacement[value]
    call_equal_function(fn, call, name, seen)


def _copied(op: ir.Operation) -> bool:
    return op.name in _COPIED


# Views of a constant stay out of the runs (split_long_bodies) and are copied into those that read
# them, like the constant. Inside a run, one read after it was returned: as a bare pointer, and
# MLIR's func-to-llvm returns a buffer's allocated pointer, not its aligned one, which for a
# memref.get_global is the dead value 0xdeadbeef; the next run read through it and crashed (the
# gradient of sprue.scipy.linalg.expm). (A nest takes them as arguments, which are passed aligned:
# nests over different constants still print the same.)
_VIEWS = frozenset({"memref.collapse_shape", "memref.expand_shape", "memref.cast", "memref.reinterpret_cast",
                    "memref.subview", "memref.transpose"})


def _copied_into_runs(op: ir.Operation) -> bool:
    if op.name in _COPIED:
        return True
    return op.name in _VIEWS and all(not isinstance(v.owner, ir.Block) and _copied_into_runs(defining_op(v))
                                     for v in op.operands)


_CONSTANTS = frozenset({"stablehlo.constant", "arith.constant"})


def _signature(op: ir.Operation) -> str:
    """An op's name, result types and the values of the constants it reads: ops of equal
    signatures print the same once the constants are copied in (a sum of leaves each times its own
    weight does not repeat: its parts, each with other constants, would be no fewer functions)."""
    constants = [str(v.owner.attributes["value"]) for v in op.operands
                 if isinstance(v, ir.OpResult) and v.owner.name in _CONSTANTS]
    return f"{op.name}:{','.join(str(r.type) for r in op.results)}:{','.join(constants)}"


def signature_codes(ops: list[ir.Operation]) -> np.ndarray:
    """Each op's signature (_signature) as a small integer, equal for equal ones: the
    period searches below compare whole shifted arrays (a body of thousands of ops, ~100 periods:
    ~300,000 string comparisons in Python otherwise)."""
    codes: dict[str, int] = {}
    return np.array([codes.setdefault(_signature(op), len(codes)) for op in ops], dtype=np.int64)


def repeats_throughout(ops: list[ir.Operation], offset: int, period: int, codes: np.ndarray | None = None) -> bool:
    """Whether every op of `ops` from `offset` on equals the one `period` later (by name and result
    types): one sequence repeated to the end (a network unrolled in Python; not a training step,
    whose backward layers differ from its forward ones). `codes`: signature_codes(ops), if known."""
    sigs = (signature_codes(ops) if codes is None else codes)[offset:]
    return period > 0 and bool((sigs[:-period] == sigs[period:]).all())


def part_size(ops: list[ir.Operation], most: int, codes: np.ndarray | None = None) -> tuple[int, int, int]:
    """(offset, size, period): where runs of `ops` start and how many ops each holds, about `most`.
    The size is a multiple of the ops' period, the shortest p <= most for which most ops equal the
    one p later (by name and result types; 0 where there is none); the offset, where that repetition
    starts. Cut there, the runs of a repeated body (a deep network's layers) print the same and
    share one function. `codes`: signature_codes(ops), if known."""
    sigs = signature_codes(ops) if codes is None else codes
    n = len(sigs)
    best, best_matches = 0, 0
    for p in range(1, most + 1):
        matches = int((sigs[:n - p] == sigs[p:]).sum()) if p < n else 0
        if matches > best_matches * 1.05:   # a longer period must repeat clearly more
            best, best_matches = p, matches
    if best == 0 or best_matches < 0.9 * (n - best) or n < 2 * best:
        return 0, most, 0
    # the first whole period equal to the next (none: most ops match their next period's, but no
    # whole period does): i where the next `best` ops all equal the ones `best` later
    equal = np.concatenate([[0], np.cumsum(sigs[:n - best] == sigs[best:])])
    whole = np.flatnonzero(equal[best:n - best + 1] - equal[:n - 2 * best + 1] == best)
    if not len(whole):
        return 0, most, 0
    return int(whole[0]), best * max(1, most // best), best


# The attribute of a function whose entry block checks its arguments' sizes and runs its body in
# an if on them (stablehlo.lower's entry checks): its few scalar ops per argument stay whole, not
# cut into parts that would pass the arguments' descriptors around (a 100-layer network compiled
# for C: 101 arguments, 1,200 such ops).
ENTRY_CHECKS = "sprue.entry_checks"


def function_bodies(fn: ir.Operation, with_checks: bool = True) -> list[ir.Block]:
    """The blocks of `fn` that hold its computation: its body, and the branches of the if ops in it
    (the entry checks' guard around a kernel with run-time sizes or called from C: scf.if, or
    stablehlo.if before the linalg stage); not the entry checks' block unless `with_checks`."""
    entry = fn.regions[0].blocks[0]
    branches = [block for op in map(as_operation, entry.operations) if op.name in ("scf.if", "stablehlo.if")
                for region in op.regions for block in region.blocks]
    return [entry, *branches] if with_checks or ENTRY_CHECKS not in fn.attributes else branches


def split_bodies(module: ir.Module, prefix: str, copied: Callable[[ir.Operation], bool],
                 runs_of: Callable[[list[ir.Operation]], list[list[ir.Operation]]], skip: tuple[str, ...] = ()) -> None:
    """Each body (function_bodies) of the module's functions (but those whose names start with one
    of `skip`): `runs_of`, given its ops but the terminator and those `copied` accepts, names the
    runs of consecutive ops that become functions (extract_function, named `prefix` and a number;
    equal ones share one); the copied ops no run uses any more are then erased. partition.py's
    parts and split_long_bodies' runs."""
    functions = [op for op in map(as_operation, module.body.operations)
                 if op.name == "func.func" and len(op.regions[0].blocks)
                 and not ir.StringAttr(op.attributes["sym_name"]).value.startswith(skip)]
    seen: dict[str, str] = {}
    count = 0
    # a function's branches before its entry block, each function's when its turn comes: a run cut
    # from an entry block may take an scf.if with it into a function that, equal to one seen
    # before, is erased, and its branches with it (a 600-argument sum crashed reading them)
    for block in (block for fn in functions for block in reversed(function_bodies(fn, with_checks=False))):
        body = [as_operation(op) for op in block.operations][:-1]   # not the terminator
        kept = [op for op in body if copied(op)]   # listed first: the others may be erased (shared)
        runs = runs_of([op for op in body if not copied(op)])
        for run in runs:
            extract_function(run, module, f"{prefix}{count}", seen, copied)
            count += 1
        if runs:
            for op in reversed(kept):   # those no run uses any more
                if all(not list(r.uses) for r in op.results):
                    op.erase()


def _long_body_runs(work: list[ir.Operation]) -> list[list[ir.Operation]]:
    """Runs of about SPLIT_OPS ops, cut where the body repeats and around stack buffers, of a body of
    at least SPLIT_MIN_OPS ops; none of a shorter one."""
    if len(work) < SPLIT_MIN_OPS:
        return []
    offset, size, _ = part_size(work, SPLIT_OPS)
    last = _last_reads(work)
    runs: list[list[ir.Operation]] = [[]]
    live, ending = 0, Counter()   # the current run's values read after it; how many end at each op
    for i, op in enumerate(work):
        if op.name in _STAYS:
            runs.append([])
            live, ending = 0, Counter()
            continue
        if i >= offset and (i - offset) % size == 0:
            runs.append([])
            live, ending = 0, Counter()
        live -= ending.pop(i, 0)
        later = [j for j in last[i] if j > i]
        if runs[-1] and live + len(later) > RUN_MAX_RESULTS:
            runs.append([])
            live, ending = 0, Counter()
        runs[-1].append(op)
        live += len(later)
        ending.update(later)
    return [run for run in runs if run]


def _last_reads(work: list[ir.Operation]) -> list[list[int]]:
    """For each op of `work` (consecutive ops of one block), for each of its results, the position
    in `work` of the last op that reads it (an op nested in it counts as the op); len(work) where
    something else reads it (the terminator, a copied op)."""
    position = {op: i for i, op in enumerate(work)}
    end = len(work)

    def reader(owner: ir.Operation) -> int:
        while owner is not None:
            if owner in position:
                return position[owner]
            owner = as_operation(owner.parent)
        return end
    return [[max((reader(as_operation(use.owner)) for use in result.uses), default=-1) for result in op.results]
            for op in work]


def split_long_bodies(module: ir.Module) -> None:
    """Each body (function_bodies) of at least SPLIT_MIN_OPS ops, after its nests were outlined,
    becomes calls of private functions of about SPLIT_OPS ops each, cut where the body repeats;
    equal ones share one (module doc). Stack buffers (memref.alloca) stay where they are, between
    two runs: they live in their function's frame."""
    split_bodies(module, _CHUNK_PREFIX, _copied_into_runs, _long_body_runs)


def pass_bare_pointers(module: ir.Module) -> None:
    """Private functions whose buffers all have static shapes, strides and offsets (outlined nests,
    partition.py's parts) and their calls take and return bare pointers."""
    bare: set[str] = set()
    for op in map(as_operation, module.body.operations):
        attrs = op.attributes
        if (op.name == "func.func" and len(op.regions[0].blocks) and "sym_visibility" in attrs
                and ir.StringAttr(attrs["sym_visibility"]).value == "private"):
            ftype = ir.FunctionType(ir.TypeAttr(attrs["function_type"]).value)
            if all(_bare_pointer_ok(t) for t in [*ftype.inputs, *ftype.results]):
                attrs[_BARE_PTR] = ir.UnitAttr.get()
                bare.add(ir.StringAttr(attrs["sym_name"]).value)

    def mark(op: ir.Operation) -> ir.WalkResult:
        if op.name == "func.call" and ir.FlatSymbolRefAttr(op.attributes["callee"]).value in bare:
            op.attributes[_BARE_PTR] = ir.UnitAttr.get()
        return ir.WalkResult.ADVANCE
    if bare:
        module.operation.walk(mark)


def outline_loop_nests(module: ir.Module) -> None:
    """Each outermost loop nest of a function with at least OUTLINE_MIN_NESTS of them, or of a
    part with two or more, becomes a call of a private, noinline function; nests that print the
    same share one (module doc)."""
    functions = [op for op in map(as_operation, module.body.operations)
                 if op.name == "func.func" and len(op.regions[0].blocks)]
    seen: dict[str, str] = {}
    count = 0
    for fn in functions:
        nests = _outermost_nests(fn)
        part = ir.StringAttr(fn.attributes["sym_name"]).value.startswith(PART_PREFIXES)
        if len(nests) < OUTLINE_MIN_NESTS and not (part and len(nests) > 1):
            continue
        for nest in nests:
            extract_function([nest], module, f"{NEST_PREFIX}{count}", seen, _copied)
            count += 1
    if seen:
        mark_unaliased_buffers(module, set(seen.values()))


# Buffers whose memory no other buffer of a call can reach: fresh allocations of the caller, and
# what is provably apart from them (other fresh allocations, constants, the caller's own arguments,
# which existed before it allocated anything). A loop-carried buffer, a call's result or a view
# of the same allocation may be the same memory.
_FRESH = ("memref.alloc", "memref.alloca")


def _apart(root: ir.Value, fresh: ir.Value, caller: ir.Operation) -> bool:
    """Whether buffer `root` cannot reach the memory of `fresh`, a fresh allocation in `caller`."""
    if isinstance(root, ir.BlockArgument):   # an argument of the caller (not of a loop in it)
        return as_operation(root.owner.owner) == caller
    return root != fresh and root.owner.name in (*_FRESH, "memref.get_global")


def mark_unaliased_buffers(module: ir.Module, names: set[str]) -> None:
    """llvm.noalias on each buffer parameter of the functions `names` (outlined nests) that, at
    every call, is a view of a fresh allocation of the caller apart (_apart) from every other
    buffer the call passes. Outlined, a nest lost what LLVM knew inline (its buffers, fresh
    allocations, do not overlap): its loop vectorizer checked overlaps at run time, with a scalar
    copy of every loop for when they do (a 100-layer training step's kernels: 2,747 optimized lines
    and 84 ms of LLVM; 1,867 lines and 57 ms with the parameters noalias)."""
    calls: dict[str, list[ir.Operation]] = {}
    for call in ops_where(module.operation, lambda op: op.name == "func.call"):
        callee = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
        if callee in names:
            calls.setdefault(callee, []).append(call)
    functions = {ir.StringAttr(op.attributes["sym_name"]).value: op
                 for op in map(as_operation, module.body.operations) if op.name == "func.func"}
    for name, sites in calls.items():
        fn = functions[name]
        ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
        unaliased = [isinstance(t, ir.MemRefType) for t in ftype.inputs]
        for call in sites:
            caller = enclosing(call, "func.func")
            roots = [view_root(v) if isinstance(v.type, ir.MemRefType) else None for v in call.operands]
            for i, root in enumerate(roots):
                unaliased[i] = unaliased[i] and (
                    isinstance(root, ir.OpResult) and root.owner.name in _FRESH
                    and all(j == i or other is None or _apart(other, root, caller) for j, other in enumerate(roots)))
        if any(unaliased):
            fn.attributes["arg_attrs"] = ir.ArrayAttr.get([
                ir.DictAttr.get({"llvm.noalias": ir.UnitAttr.get()} if u else {}) for u in unaliased])


__all__ = ["NEST_PREFIX", "OUTLINE_MIN_NESTS", "PART_PREFIXES", "SPLIT_MIN_OPS", "SPLIT_OPS", "extract_function", "function_bodies",
           "mark_unaliased_buffers", "new_private_function", "outline_loop_nests", "part_size", "pass_bare_pointers",
           "repeats_throughout", "signature_codes", "split_bodies", "split_long_bodies"]
