"""Operands read across the vectorized loop: a transposed copy, read contiguously.

A generic whose innermost loop is a short reduction (`sum((x[:, None, :] - z[None]) ** 2, -1)`:
pairwise distances over 8-32 features, k-means' and a Gaussian kernel's) reaches LLVM as a loop
nest whose innermost loop LLVM unrolls whole (backend.FULL_UNROLL_MAX_TRIPS), so it vectorizes
the loop around it, j. An operand stored (j, k), k contiguous, is then read a row apart per
lane: a gather per k step (Zen 5: the 2000 x 1000 x 16 Gaussian kernel's distances at 4.8 ns a
pair, 16 gathers per 8 pairs). Where that operand is read again across another loop (z, for
every row of x), it is copied once transposed, (k, j), and read contiguously (XLA's layout
assignment and IREE's data tiling choose a layout for such an operand the same way).
The same holds where the vectorized loop is a long (or run-time) innermost reduction over an
operand's second-last axis (_strided_across_long_reduction: n-body's forces, 1.4x -> 1.0x of the
static time with a run-time n, the static version 2.3 -> 1.85 ms too).
Runs on tensors after elementwise fusion (which would fuse the copy back into its reader).
"""
from __future__ import annotations

import math

from torch_mlir import ir

from sprue.lowering.fusion import _extents
from sprue.lowering.mlir_util import as_operation, ops_where, tensor_dim

# The innermost reduction's most trips (LLVM unrolls it whole: backend.FULL_UNROLL_MAX_TRIPS), and
# how many times the operand must be read whole for its copy to pay.
MAX_REDUCED = 16
MIN_REUSE = 8


def _results(amap: ir.AffineMap) -> list[str]:
    return [str(e) for e in amap.results]


def _strided_operands(op: ir.Operation) -> list[int]:
    """The inputs of `op` to read transposed (module doc)."""
    iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    n = len(iterators)
    if n < 3 or "reduction" not in iterators[-1] or "parallel" not in iterators[-2]:
        return []
    if not all(isinstance(v.type, ir.RankedTensorType) for v in op.operands):
        return []
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    sizes = _extents(op, maps, n)
    n_ins = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[0]
    if sizes[-1] is None or sizes[-1] > MAX_REDUCED:
        return _strided_across_long_reduction(maps, sizes, n, n_ins)
    if not 2 <= sizes[-1]:
        return []
    j, k = f"d{n - 2}", f"d{n - 1}"
    found = []
    for i in range(n_ins):
        results = _results(maps[i])
        if results[-2:] == [j, k] and len(set(results)) == len(results) and _read_again(results, sizes, n - 2):
            found.append(i)
    return found


def _read_again(results: list[str], sizes: list[int | None], outer: int) -> bool:
    """Whether an operand indexed by `results` is read whole again across the loops among the
    first `outer` that do not index it: at least MIN_REUSE times, or a run-time number of times."""
    others = [d for d in range(outer) if f"d{d}" not in results]
    reuse = math.prod(1 if sizes[d] is None else sizes[d] for d in others)
    return bool(others) and (reuse >= MIN_REUSE or None in (sizes[d] for d in others))


def _strided_across_long_reduction(maps: list[ir.AffineMap], sizes: list[int | None], n: int,
                                   n_ins: int) -> list[int]:
    """The other case: a long (or run-time) innermost reduction, the loop LLVM vectorizes, over an
    operand's second-last axis while its last, contiguous axis is another loop's (n-body's forces
    `sum(diff * inv[:, :, None], axis=1)` read p (j, c) along j, three apart): LLVM gathered its
    lanes where the row length is known at run time only (with static sizes it shuffled whole
    rows: n-body with a run-time n 1.4x its static time). Read again across another loop, the
    operand is copied transposed, (c, j), and read contiguously."""
    j = f"d{n - 1}"
    found = []
    for i in range(n_ins):
        results = _results(maps[i])
        if len(results) >= 2 and results[-2] == j and results[-1] != j and len(set(results)) == len(results) \
                and results[-1].startswith("d") and _read_again(results, sizes, n - 1):
            found.append(i)
    return found


def permuted_copy(value: ir.Value, perm: list[int]) -> ir.Value:
    """A copy of `value` whose axis j is its axis perm[j] (a generic, built generically: torch_mlir's
    linalg module costs ~300 ms to import)."""
    t = ir.RankedTensorType(value.type)
    result_t = ir.RankedTensorType.get([t.shape[a] for a in perm], t.element_type)
    init = ir.Operation.create("tensor.empty", results=[result_t],
                               operands=[tensor_dim(value, a) for a in perm if t.is_dynamic_dim(a)]).results[0]
    read = [ir.AffineExpr.get_dim(perm.index(a)) for a in range(t.rank)]
    parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    copy = ir.Operation.create("linalg.generic", results=[result_t], operands=[value, init], regions=1, attributes={
        "indexing_maps": ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get(t.rank, 0, read)),
                                           ir.AffineMapAttr.get(ir.AffineMap.get_identity(t.rank))]),
        "iterator_types": ir.ArrayAttr.get([parallel] * t.rank),
        "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1])})
    block = copy.regions[0].blocks.append(t.element_type, t.element_type)
    with ir.InsertionPoint(block):
        ir.Operation.create("linalg.yield", operands=[block.arguments[0]])
    return copy.results[0]


def transposed_copy(value: ir.Value) -> ir.Value:
    """A copy of `value` with its last two dimensions swapped."""
    rank = ir.RankedTensorType(value.type).rank
    return permuted_copy(value, list(range(rank - 2)) + [rank - 1, rank - 2])


def defining_point(value: ir.Value) -> ir.InsertionPoint:
    """Just after `value` is defined: a copy of it made there is made once, not on every trip of a
    loop the op reading it is in (a recurrent scan's weights, Sinkhorn's `k.T @ u` in a fori_loop:
    with run-time sizes its kernel matrix was transposed on each of 30 trips, 3.4 -> 17 ms)."""
    if isinstance(value.owner, ir.Block):
        return ir.InsertionPoint.at_block_begin(value.owner)
    return ir.InsertionPoint.after(as_operation(value.owner))


def transpose_strided_reads(module: ir.Module) -> None:
    """Inputs read a row apart per lane of the vectorized loop, and read again across another
    loop, read from a transposed copy (module doc)."""
    for op in ops_where(module.operation, lambda o: o.name == "linalg.generic"):
        operands = _strided_operands(op)
        if not operands:
            continue
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
        for i in operands:
            with defining_point(op.operands[i]), op.location:
                op.operands[i] = transposed_copy(op.operands[i])
            results = list(maps[i].results)
            results[-2], results[-1] = results[-1], results[-2]
            maps[i] = ir.AffineMap.get(maps[i].n_dims, maps[i].n_symbols, results)
        op.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps])


__all__ = ["defining_point", "permuted_copy", "transpose_strided_reads", "transposed_copy"]
