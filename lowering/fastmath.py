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

from sprue.lowering.fusion import _copy_payload

_FLAGS = "#arith.fastmath<reassoc,contract>"
_MARKED = {"arith.addf", "arith.mulf", "arith.subf"}


def _is_reduction(op: ir.Operation) -> bool:
    attrs = op.attributes
    if "iterator_types" not in attrs:
        return False
    # the text, not the elements: iterating would import torch_mlir.dialects.linalg (~50 ms)
    return "reduction" in str(attrs["iterator_types"])


def _generalize_dot(dot: ir.Operation) -> None:
    """linalg.dot (a 1-D inner product, `jnp.dot(a, b)`) as the linalg.generic it is: a sum
    reduction, which is then marked (below) and which parallel.py splits. As a named op its payload
    was never marked: a serial chain of FMAs, 1e6 elements 0.52 ms against numpy's 0.17 (and
    `sum(a * b)`'s 0.16). Built generically: torch_mlir's linalg module costs ~300 ms to import."""
    a, b, acc = dot.operands
    d0 = ir.AffineExpr.get_dim(0)
    maps = ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get(1, 0, [d0])),
                             ir.AffineMapAttr.get(ir.AffineMap.get(1, 0, [d0])),
                             ir.AffineMapAttr.get(ir.AffineMap.get(1, 0, []))])
    with ir.InsertionPoint(dot), dot.location:
        generic = ir.Operation.create(
            "linalg.generic", results=[r.type for r in dot.results], operands=[a, b, acc], regions=1, attributes={
                "indexing_maps": maps, "iterator_types": ir.Attribute.parse("[#linalg.iterator_type<reduction>]"),
                "operandSegmentSizes": ir.DenseI32ArrayAttr.get([2, 1])})
    old = dot.regions[0].blocks[0]
    block = generic.regions[0].blocks.append(*[arg.type for arg in old.arguments])
    inside = ir.InsertionPoint(block)
    yielded = _copy_payload(dot, dict(zip(old.arguments, block.arguments)), inside)
    ir.Operation.create("linalg.yield", operands=yielded, ip=inside)
    for old_result, new_result in zip(dot.results, generic.results):
        old_result.replace_all_uses_with(new_result)
    dot.erase()


def mark_reductions(module: ir.Module) -> None:
    # One walk over plain Operations: iterating a block's operations would build op views and so
    # import torch_mlir.dialects.linalg (~50 ms of a first compilation).
    dots: list[ir.Operation] = []
    module.operation.walk(lambda op: (dots.append(op) if op.name == "linalg.dot" else None, ir.WalkResult.ADVANCE)[1])
    for dot in dots:
        _generalize_dot(dot)
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
