"""Big functions split, on tensors, into parts of a bounded number of ops; equal parts share one.

What outline.py does for loop nests at the end of the pipeline, this does at its start (before
bufferization): a function with at least PARTITION_MIN_OPS ops in its body (or PERIODIC_MIN_OPS,
if it is one sequence of ops repeated) becomes a chain of calls of private functions of about
PART_OPS ops each, and what is left after the last whole part one period per call. Two reasons,
both from deep programs (an unrolled network, a long gradient tape):
- cost: several of MLIR's passes and LLVM's code generator are superlinear in the size of one
  function (convert-linalg-to-loops, instruction selection over one block): a 600-layer network
  spent 3x per layer what a 300-layer one did;
- sharing: parts that print the same (the same ops on the same types, taking and returning the
  same kinds of values) are one function, lowered and compiled once, like XLA compiling a
  repeated computation once. The parts are cut where the body repeats (`part_size`), so a deep
  network's layers, and a training step's forward and backward layers, fall into equal parts.

A part takes the values it uses from before it (arguments, earlier parts' results; constants,
empty tensors and fills of constants are copied in instead) and returns those used after it
(a training step's forward parts return the activations its backward parts read: values that
merely pass a cut stay in the caller). One-shot bufferization then works across the calls
(bufferize-function-boundaries): a part writes into a buffer it was given only where the caller
no longer needs it, and returns the new ones it allocates; deallocation.py frees what the parts
return in linear time, and entry_results.py passes a part's many results through memory (as one
struct their LLVM IR grew as n^2, and LLVM's IPSCCP with it: 38 s at 300 layers). The parts are
noinline: LLVM would otherwise rebuild the one big function.
"""
from __future__ import annotations

from torch_mlir import ir

from sprue.lowering.mlir_util import as_operation
from sprue.lowering.outline import (
    PART_PREFIXES,
    function_bodies,
    part_size,
    repeats_throughout,
    signature_codes,
    split_bodies,
)

# Below this many ops (not counting copied ones) a body stays whole: the realistic programs'
# largest have 195 (benchmarks/programs.py), and a part's buffers are pointer arguments, no longer
# fresh allocations LLVM knows do not alias (outline.py measured what that costs).
PARTITION_MIN_OPS = 256
# Parts of about PART_OPS ops, or of more where a body would make more than MAX_PARTS of them
# (each call of a part is glue). Training steps of `tanh(x @ w)` layers (their backward layers are
# not their forward ones, so their parts hold whole periods of ~7 ops): parts of 32 rather than 64
# compiled 30 and 100 layers 9% faster (more of each part is one layer, shared), 300 layers 3% (its
# calls 1-3% longer); 1,000 layers 4% slower and their calls 3% longer, hence the growth past
# MAX_PARTS (1,000 layers: parts of ~54 ops, as fast as before; with MAX_PARTS 32, 300 and 1,000
# layers compiled 6% and 15% slower).
PART_OPS = 32
MAX_PARTS = 128
# On StableHLO a body has more ops than it will have in the linalg stage (broadcasts, reshapes and
# slices that fuse into their readers): the CNN program's 629 StableHLO ops are fewer than
# PARTITION_MIN_OPS linalg ops. Bodies that do not repeat are cut there from this many.
STABLEHLO_PARTITION_MIN_OPS = 1024
# A body that repeats is cut on StableHLO into parts of about this many ops (whole periods, at
# least one): every part is then the same few layers, the entry a chain of calls of it, and the
# stages after convert, outline and optimize one small function. 100 layers of `tanh(x @ w)`: first
# call 0.20-0.21 -> 0.16 s, 300 layers 0.29-0.32 -> 0.26 s, the same run time (277-285 and 816-833
# us both ways). Other bodies keep parts of PART_OPS: a training step's (its backward layers are
# not its forward ones) ran ~10% longer in parts of 8 and compiled longer too.
PERIODIC_PART_OPS = 8
# ... and of more, whole periods, where a body would make more than this many of them: each call
# of a part is glue (its arguments and results in the entry), and a thousand repeated scalar ops
# (a sum over a 1,000-leaf dict) in parts of 8 took 1.28 -> 1.75 s to compile.
PERIODIC_MAX_PARTS = 32
# ... or from PERIODIC_MIN_OPS ops where the body is one sequence of ops repeated at least
# PERIODIC_MIN_REPEATS times (a deep network unrolled in Python: 100 layers of `tanh(x @ w)` are
# 200 ops), which no realistic program's body is (none of the 22 of benchmarks/programs.py, static
# or dynamic): it is then lowered and compiled about once. From 12 layers of `tanh(x @ w)`: their
# first call 0.31-0.40 -> 0.17 s, 30 layers 0.22-0.29 -> 0.19 s, the same run time (in one
# process, interleaved: 44 and 93-95 us both ways); it was 64 ops and 16 repeats.
PERIODIC_MIN_OPS = 24
PERIODIC_MIN_REPEATS = 8
_PREFIX, _STABLEHLO_PREFIX = PART_PREFIXES   # (outline.py outlines the nests of every part)
# Ops copied into each part that uses them rather than passed (their own operands passed or
# copied in turn): no side effects, cheap, and what later rewrites look for (static shapes,
# constant fills). Above all, a fill or an empty tensor is a destination: a passed one would be
# one buffer several parts write into.
_COPIED = frozenset({"arith.constant", "ub.poison", "tensor.empty", "linalg.fill", "stablehlo.constant"})
# So are the entry checks' views of the arguments (stablehlo.py _static_view: a tensor.reshape to the
# checked sizes, read with tensor.dim): passed, each part would take a static view as a function
# result of another part, which bufferization copies (the 101 weights of a 100-layer network
# compiled for C).
_VIEWS = frozenset({"tensor.reshape", "tensor.from_elements", "tensor.dim", "arith.index_cast"})


def _copied(op: ir.Operation) -> bool:
    """Whether `op` is copied into each part that uses it: one of those kinds, reading only the
    function's arguments and other such ops. Not one that reads a value some part computes (an
    empty tensor of a computed size): its copy could not be made before that part runs (two
    solves of a run-time size left a part's call reading a value moved into another part)."""
    return (op.name in _COPIED or op.name in _VIEWS) and all(map(_available, op.operands))


def _available(value: ir.Value) -> bool:
    """Whether `value` exists before any part runs: an argument, or a result of a copied op."""
    return isinstance(value, ir.BlockArgument) or _copied(as_operation(value.owner))


def _parts(work: list[ir.Operation], min_ops: int = PARTITION_MIN_OPS,
           periodic_ops: int | None = None) -> list[list[ir.Operation]]:
    """The parts of a body (module doc), or none where it is smaller than `min_ops` and does not
    repeat enough; with `periodic_ops`, a body that is one sequence repeated to its end is cut into
    parts of about that many ops (whole periods, at least one)."""
    if len(work) < PERIODIC_MIN_OPS:
        return []
    codes = signature_codes(work)
    offset, size, period, repeats = _repetition(work, codes)
    periodic = repeats >= PERIODIC_MIN_REPEATS
    if len(work) < min_ops and not periodic:
        return []
    if periodic_ops is not None and periodic and repeats_throughout(work, offset, period, codes):
        size = period * max(1, max(periodic_ops, len(work) // PERIODIC_MAX_PARTS) // period)
    starts = list(range(offset + size, len(work), size))
    # after the last whole part, whole periods one by one: a part of its own (one layer, shared)
    # rather than a last part unlike the others, which would be lowered and compiled on its own
    rest = offset + size * ((len(work) - offset) // size)
    if period and rest < len(work):
        starts = [i for i in starts if i <= rest] + list(range(rest + period, len(work), period))
    cuts = ([offset] if offset else []) + starts
    if not cuts:
        return []
    bounds = [0, *cuts]
    return [work[lo:hi] for lo, hi in zip(bounds, bounds[1:] + [len(work)])]


def _calls_a_part(op: ir.Operation) -> bool:
    return op.name == "func.call" and ir.FlatSymbolRefAttr(op.attributes["callee"]).value.startswith(_STABLEHLO_PREFIX)


def _parts_of_uncut(work: list[ir.Operation]) -> list[list[ir.Operation]]:
    """_parts, but none of a body cut on StableHLO already (its calls of parts would be cut again)."""
    return [] if any(map(_calls_a_part, work)) else _parts(work)


def partition_functions(module: ir.Module) -> None:
    """Each block of a function's body (function_bodies) with at least PARTITION_MIN_OPS ops, or
    PERIODIC_MIN_OPS repeated (not counting copied ones), becomes a chain of calls of parts
    (module doc): not the parts cut on StableHLO, nor the bodies that call them."""
    split_bodies(module, _PREFIX, _copied, _parts_of_uncut, skip=(_STABLEHLO_PREFIX,))


def partition_stablehlo(module: ir.Module) -> None:
    """The same on the StableHLO module, before the linalg stage: then MLIR's conversion to linalg,
    its fusion and the Python rewrites of that stage, which run before partition_functions, see a
    deep program's parts once too, not every layer (a 300-layer training step's linalg stage: 0.34
    s). Cut at the same places (where the body repeats, whole periods); what it leaves whole,
    partition_functions may still cut after the linalg stage. Ops whose results nothing reads (a
    gradient's unused by-products) are erased first: cut off into a part, they would be a call
    nothing removes."""
    for fn in map(as_operation, module.body.operations):
        if fn.name == "func.func" and len(fn.regions[0].blocks):
            for block in function_bodies(fn):
                _erase_unread(block)
    split_bodies(module, _STABLEHLO_PREFIX, _copied, _stablehlo_parts)


# Views of the arguments a part may take instead of making them itself: a deep network's layers
# that each slice their weights out of one stacked array (`ws[i]`) differ only in the slice's
# offsets, so no two such parts print the same; sliced before the parts, each layer is the same
# part again, taking its slice (copied to a buffer of its own at the call: a part's arguments have
# the identity layout). 100 layers of `tanh(x @ ws[i])`, training step: 3.4 -> 0.5 s of CPU.
_ARGUMENT_VIEWS = frozenset({"stablehlo.slice", "stablehlo.reshape"})


def _argument_views(work: list[ir.Operation]) -> list[ir.Operation]:
    """The ops of `work` that are views (_ARGUMENT_VIEWS) of the function's arguments, or of such
    views, in order."""
    views: list[ir.Operation] = []
    made: set[ir.Value] = set()
    for op in work:
        if op.name in _ARGUMENT_VIEWS and all(isinstance(v, ir.BlockArgument) or v in made for v in op.operands):
            views.append(op)
            made.update(op.results)
    return views


# ... only where the body then repeats this many times: a deep network, not the nine taps of a
# convolution summed from shifted slices (the CNN program), whose one fused pass would be cut.
VIEWS_MIN_REPEATS = 32


def _repetition(work: list[ir.Operation], codes=None) -> tuple[int, int, int, int]:
    """part_size's (offset, size, period) at the parts' length, and how many whole periods follow
    the offset (0 where nothing repeats)."""
    offset, size, period = part_size(work, max(PART_OPS, len(work) // MAX_PARTS), codes)
    return offset, size, period, (len(work) - offset) // period if period else 0


def _periodic(work: list[ir.Operation], repeats: int = PERIODIC_MIN_REPEATS) -> bool:
    """Whether `work` repeats a period `repeats` times or more (as _parts finds it)."""
    return len(work) >= PERIODIC_MIN_OPS and _repetition(work)[3] >= repeats


def _stablehlo_parts(work: list[ir.Operation]) -> list[list[ir.Operation]]:
    """partition_stablehlo's parts of a body; where the body repeats only once its views of the
    arguments are taken out (_ARGUMENT_VIEWS), those move before it and the parts take them."""
    views = _argument_views(work)
    if views:
        taken = set(views)
        rest = [op for op in work if op not in taken]
        if rest and not _periodic(work) and _periodic(rest, VIEWS_MIN_REPEATS):
            runs = _parts(rest, min_ops=STABLEHLO_PARTITION_MIN_OPS, periodic_ops=PERIODIC_PART_OPS)
            if runs:   # (a body left whole keeps its order: later rewrites see it as written)
                for op in views:
                    op.move_before(rest[0])
                return runs
    return _parts(work, min_ops=STABLEHLO_PARTITION_MIN_OPS, periodic_ops=PERIODIC_PART_OPS)


# StableHLO ops with effects beyond their results (or regions that may have some): never erased.
_EFFECTS = frozenset({"stablehlo.custom_call", "stablehlo.while", "stablehlo.case", "stablehlo.if",
                      "stablehlo.send", "stablehlo.recv", "stablehlo.outfeed", "stablehlo.infeed",
                      "stablehlo.rng_bit_generator", "stablehlo.optimization_barrier"})


def _erase_unread(block: ir.Block) -> None:
    """Erases, last first, the StableHLO ops of `block` whose results nothing reads."""
    for op in reversed([as_operation(op) for op in block.operations]):
        if op.name.startswith("stablehlo.") and op.name not in _EFFECTS and not len(op.regions) \
                and len(op.results) and all(not list(r.uses) for r in op.results):
            op.erase()


__all__ = ["PARTITION_MIN_OPS", "PART_OPS", "PERIODIC_MIN_OPS", "PERIODIC_MIN_REPEATS", "partition_functions",
           "partition_stablehlo"]
