"""stablehlo.sort -> a stable bottom-up merge sort per lane (scf + memref).

Semantics (StableHLO spec, `sort`): every 1-D lane along `dimension` of the
operands is sorted together; `comparator(lhs0, rhs0, lhs1, rhs1, ...)` says
whether lhs goes strictly before rhs.  A merge sort that takes the right
run's element only when it is strictly before the left one is stable, so
it serves `is_stable = true` and `false` alike, in O(n log n) per lane.

Buffers: one output buffer per operand (full shape, the result) and one
scratch buffer per operand for a single lane.  Merge passes go
out -> scratch -> out in pairs, so the sorted lane always ends in `out`
and no buffer swapping through loop-carried memrefs is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from torch_mlir import ir
from torch_mlir.dialects import arith

from sprue.lowering.mlir_util import (
    LegalizeError,
    add,
    alloc,
    as_tensor,
    attr_int,
    cmp,
    extract,
    for_loop,
    index,
    inline_scalar_region,
    insert_at,
    load,
    loop_nest,
    min_index,
    select,
    store,
    tensor_sizes,
    tensor_type,
    to_signless,
    while_loop,
)

Less = Callable[[list[ir.Value], list[ir.Value]], ir.Value]


@dataclass
class _Lane:
    """One lane of several buffers, addressed by its position k along it."""
    bufs: list[ir.Value]
    at: Callable[[ir.Value], list[ir.Value]]

    def load(self, k: ir.Value) -> list[ir.Value]:
        return [load(b, self.at(k)) for b in self.bufs]

    def store(self, values: list[ir.Value], k: ir.Value) -> None:
        for b, v in zip(self.bufs, values):
            store(v, b, self.at(k))


def _merge_pass(src: _Lane, dst: _Lane, width: ir.Value, n: ir.Value, less: Less) -> None:
    """Merges adjacent sorted runs of `width` from src into runs of 2*width in dst."""
    two_width = add(width, width)
    one = index(1)

    def merge_runs(lo: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
        mid = min_index(add(lo, width), n)
        hi = min_index(add(lo, two_width), n)
        last_left = arith.SubIOp(mid, one).result
        last_right = arith.SubIOp(hi, one).result

        def step(k: ir.Value, ij: list[ir.Value]) -> list[ir.Value]:
            i, j = ij
            # Branch-free: clamped reads are always in bounds (mid > lo, so
            # both clamps land inside [lo, hi)); the flags decide what counts.
            left = src.load(min_index(i, last_left))
            right = src.load(min_index(j, last_right))
            right_first = less(right, left)
            left_open = cmp("slt", i, mid)
            right_done = cmp("sge", j, hi)
            not_right_first = arith.XOrIOp(right_first, _true()).result
            take_left = arith.AndIOp(left_open, arith.OrIOp(right_done, not_right_first).result).result
            dst.store([select(take_left, lv, rv) for lv, rv in zip(left, right)], k)
            return [select(take_left, add(i, one), i), select(take_left, j, add(j, one))]

        for_loop(lo, hi, one, [lo, mid], step)
        return []

    for_loop(index(0), n, two_width, [], merge_runs)


def _true() -> ir.Value:
    i1 = ir.IntegerType.get_signless(1)
    return arith.ConstantOp(i1, ir.IntegerAttr.get(i1, 1)).result


def _comparator(op: ir.Operation, where: str) -> Less:
    def less(lhs: list[ir.Value], rhs: list[ir.Value]) -> ir.Value:
        args = [v for pair in zip(lhs, rhs) for v in pair]   # lhs0, rhs0, lhs1, rhs1, ...
        (result,) = inline_scalar_region(op.regions[0], args, where)
        return result
    return less


def lower_sort(op: ir.Operation) -> None:
    """Replaces one stablehlo.sort by loops; the op is erased."""
    where = f"stablehlo.sort at {op.location}"
    shape_type = tensor_type(op.operands[0])
    rank = shape_type.rank
    dim = attr_int(op, "dimension", -1)
    dim = dim + rank if dim < 0 else dim
    if not 0 <= dim < rank:
        raise LegalizeError(f"{where}: dimension {dim} out of range for rank {rank}")
    less = _comparator(op, where)

    with ir.InsertionPoint(op), op.location:
        values = [to_signless(v) for v in op.operands]
        elems = [tensor_type(v).element_type for v in values]
        sizes = tensor_sizes(values[0])
        n = sizes[dim]
        outs = [alloc(shape_type.shape, e, sizes) for e in elems]
        scratch = [alloc([shape_type.shape[dim]], e, [n]) for e in elems]

        def sort_lane(lane_ivs: list[ir.Value]) -> None:
            def at(k: ir.Value) -> list[ir.Value]:
                return insert_at(lane_ivs, dim, k)
            out = _Lane(outs, at)
            tmp = _Lane(scratch, lambda k: [k])

            def copy(k: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
                out.store([extract(v, at(k)) for v in values], k)
                return []
            for_loop(index(0), n, index(1), [], copy)

            def two_passes(ws: list[ir.Value]) -> list[ir.Value]:
                width = ws[0]
                _merge_pass(out, tmp, width, n, less)
                doubled = add(width, width)
                _merge_pass(tmp, out, doubled, n, less)
                return [add(doubled, doubled)]
            while_loop([index(1)], lambda ws: cmp("slt", ws[0], n), two_passes)

        loop_nest(sizes[:dim] + sizes[dim + 1:], sort_lane)
        results = [as_tensor(b, tensor_type(r)) for b, r in zip(outs, op.results)]

    for old, new in zip(op.results, results):
        old.replace_all_uses_with(new)
    op.erase()


__all__ = ["lower_sort"]
