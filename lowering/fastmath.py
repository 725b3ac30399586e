"""Fast-math flags where reordering is the point: the accumulation of reductions.

A sum written as a loop (`acc = acc + x[i]`) is a serial chain of dependent fadds: LLVM may not
reorder it, so it neither vectorizes nor hides the add latency (3x slower than numpy's pairwise
sum). With `reassoc` on the accumulating add, LLVM's loop vectorizer keeps several vector
accumulators and adds them up at the end — which is also more accurate than the serial order (the
partial sums are shorter). Only the ops of a linalg reduction's payload are marked, and only
`reassoc` (no `nnan`/`ninf`: NaN and infinity propagate as before); `contract` lets a product feeding
the accumulator become an FMA (one rounding instead of two).

Runs on the linalg IR (tensors), before bufferization: every linalg.generic with a reduction
iterator, and the contraction named ops (matmul, batch_matmul, ...), are generalized first where
needed so that their payload is explicit.
"""
from __future__ import annotations

from torch_mlir import ir

_FLAGS = "#arith.fastmath<reassoc,contract>"
_MARKED = {"arith.addf", "arith.mulf", "arith.subf"}


def _is_reduction(op: ir.Operation) -> bool:
    attrs = op.attributes
    if "iterator_types" not in attrs:
        return False
    # the text, not the elements: iterating would import torch_mlir.dialects.linalg (~50 ms)
    return "reduction" in str(attrs["iterator_types"])


def mark_reductions(module: ir.Module) -> None:
    # One walk over plain Operations: iterating a block's operations would build op views and so
    # import torch_mlir.dialects.linalg (~50 ms of a first compilation).
    marked: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in _MARKED:
            parent = op.parent
            if parent is not None and parent.name == "linalg.generic" and _is_reduction(parent):
                marked.append(op)
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    if marked:
        flags = ir.Attribute.parse(_FLAGS)
        for op in marked:
            op.attributes["fastmath"] = flags


__all__ = ["mark_reductions"]
