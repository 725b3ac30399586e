"""Per-loop hints to LLVM's loop passes, attached to scf.for and carried to the LLVM IR's `!llvm.loop`.

Loops around other loops are not unrolled. LLVM's full unroller weighs a loop nest by its size before
vectorization, when the inner loop is still a short scalar body: a batch loop of 8 around a 256-wide
row loop looks small, is copied 8 times, and each copy's inner loop is then vectorized with its
prologue, interleaved body and remainder (attention's optimized IR grew 1,000 -> 5,800 lines, most of
its 1.1 s of LLVM time). Unrolling an outer loop buys nothing a vectorized inner loop does not already
have. Innermost loops stay LLVM's to unroll (up to backend.FULL_UNROLL_MAX_TRIPS trips): k-means' loop
over 16 centres and an 8-wide feature axis gain from it.

The hint is MLIR's `#llvm.loop_annotation`: set as a discardable attribute on the scf.for,
convert-scf-to-cf moves it to the loop's latch branch, still under its discardable name, where the
translation to LLVM IR does not look; `apply_loop_annotations` makes it the llvm.br's own
`loop_annotation`, which the translation emits as `!llvm.loop` metadata.
"""

from __future__ import annotations

from torch_mlir import ir

from sprue.lowering.mlir_util import as_operation, ops_where, static_trips
from sprue.lowering.outline import NEST_PREFIX

_ANNOTATION = "llvm.loop_annotation"
_NO_UNROLL = "#llvm.loop_annotation<unroll = #llvm.loop_unroll<disable = true>>"


def _has_inner_loop(loop: ir.Operation) -> bool:
    found = False

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal found
        if op != loop and op.name in ("scf.for", "scf.while"):
            found = True
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE
    loop.walk(visit)
    return found


def keep_outer_loops_rolled(module: ir.Module) -> int:
    """Marks every scf.for holding another loop 'do not unroll'; returns how many."""
    loops = ops_where(module.operation, lambda op: op.name == "scf.for" and _ANNOTATION not in op.attributes)
    outer = [loop for loop in loops if _has_inner_loop(loop)]
    if outer:
        hint = ir.Attribute.parse(_NO_UNROLL, module.context)
        for loop in outer:
            loop.attributes[_ANNOTATION] = hint
    return len(outer)


# An outlined nest's innermost loop of at least this many trips stays rolled after vectorization:
# LLVM fully unrolls a vector loop of up to backend.FULL_UNROLL_MAX_TRIPS trips, so a 16 x 16
# elementwise nest of a deep network (256 elements, 16 trips of two 8-wide vectors) became 320 lines
# of straight code. Kept rolled, a 100-layer training step's kernels took 4% less of its first call
# and it ran as fast (0.47 ms a call both ways). Only outlined nests (outline.py): a program small
# enough to keep its nests inline keeps LLVM's choice, loop by loop (the realistic programs' code
# is unchanged).
NEST_ROLLED_MIN_TRIPS = 64


def keep_nest_loops_rolled(module: ir.Module) -> int:
    """Marks each innermost scf.for of the outlined nests (functions named NEST_PREFIX...) with at
    least NEST_ROLLED_MIN_TRIPS static trips 'do not unroll'; returns how many."""
    hint = None
    count = 0
    for fn in map(as_operation, module.body.operations):
        if fn.name != "func.func" or not ir.StringAttr(fn.attributes["sym_name"]).value.startswith(NEST_PREFIX):
            continue
        for loop in ops_where(fn, lambda op: op.name == "scf.for" and _ANNOTATION not in op.attributes):
            trips = static_trips(loop)
            if trips is not None and trips >= NEST_ROLLED_MIN_TRIPS and not _has_inner_loop(loop):
                hint = hint or ir.Attribute.parse(_NO_UNROLL, module.context)
                loop.attributes[_ANNOTATION] = hint
                count += 1
    return count


# A reduction's innermost loop inside another loop (a matrix-vector product's row, a batch norm's
# column sums) that LLVM fully unrolls once vectorized (up to backend.FULL_UNROLL_MAX_TRIPS vector
# trips of a 4-way interleave) into more vectors than the host has registers: the unrolled body's
# loads of the operand the outer loop does not change are hoisted out of it (62 vectors for a
# float32 row of 1,000; AVX-512 has 32 registers), then spilled and reloaded on every row (the
# power iteration's float32 products ran at 1.41x JAX's time, slower than its own run-time-sized
# version, whose loop LLVM cannot unroll). Such a loop stays rolled, interleaved 4 times as LLVM
# interleaves it when it may (a 'do not unroll' hint alone makes LLVM interleave once), when its
# row is REDUCTION_ROW_BYTES long: from 32 registers of 64 bytes to 16 trips of 4 x 64 bytes
# (AVX-512's sizes, this machine's: an AVX2 host's smaller rows are left to LLVM). One core, each
# realistic program in fresh processes, interleaved, medians of 3: power iteration float32 0.66x,
# batch norm float32 0.79x, n-body float32 0.91x, per-example gradients 0.91-0.95x; the others'
# loops are untouched. (Every long reduction so kept: a cross-entropy over rows of 32,000 float64,
# which LLVM interleaves less, ran 1.13x; every long inner loop: the transformer block 1.10x.)
REDUCTION_ROW_BYTES = (2048, 4096)
_ROLLED_INTERLEAVED = ("#llvm.loop_annotation<interleave = #llvm.loop_interleave<count = 4 : i32>, "
                       "unroll = #llvm.loop_unroll<disable = true>>")


def _scalar_bytes(t: ir.Type) -> int | None:
    """The bytes of a scalar integer, index or float type (at least 1), None for any other."""
    if isinstance(t, ir.IndexType):
        return 8
    if isinstance(t, (ir.IntegerType, ir.FloatType)):
        return max(1, t.width // 8)
    return None


def keep_long_reductions_rolled(module: ir.Module) -> int:
    """Marks each innermost scf.for that carries scalars (a reduction), sits in another loop and
    runs over a row of REDUCTION_ROW_BYTES 'interleave 4, do not unroll'; returns how many."""
    low, high = REDUCTION_ROW_BYTES
    hint = None
    count = 0
    for loop in ops_where(module.operation, lambda op: op.name == "scf.for" and len(op.results) > 0
                          and _ANNOTATION not in op.attributes):
        width = [_scalar_bytes(r.type) for r in loop.results]
        trips = static_trips(loop)
        if (None in width or trips is None or not low <= trips * sum(width) <= high
                or loop.parent.name not in ("scf.for", "scf.parallel", "scf.while") or _has_inner_loop(loop)):
            continue
        hint = hint or ir.Attribute.parse(_ROLLED_INTERLEAVED, module.context)
        loop.attributes[_ANNOTATION] = hint
        count += 1
    return count


def keep_rolled(loop: ir.Operation) -> None:
    """Marks one scf.for 'do not unroll' (a loop whose body is already wide: transpose_blocks.py's
    8 x 8 blocks, unrolled 4 times, cost LLVM's loop strength reduction 25 ms more)."""
    loop.attributes[_ANNOTATION] = ir.Attribute.parse(_NO_UNROLL, loop.context)


def apply_loop_annotations(module: ir.Module) -> None:
    """On the LLVM dialect module: each branch's discardable loop annotation becomes its own. (Only
    functions of several blocks can hold a loop: a deep program's glue, a single block of calls,
    is not walked; a 1,000-layer training step's whole-module walk took 0.15 s.)"""
    branches = [op for fn in map(as_operation, module.body.operations) if len(fn.regions) and len(fn.regions[0].blocks) > 1
                for op in ops_where(fn, lambda op: _ANNOTATION in op.attributes)]
    for op in branches:
        hint = op.attributes[_ANNOTATION]
        del op.attributes[_ANNOTATION]
        if op.name == "llvm.br" or op.name == "llvm.cond_br":
            op.attributes["loop_annotation"] = hint


__all__ = ["apply_loop_annotations", "keep_nest_loops_rolled", "keep_outer_loops_rolled"]
