"""Loop order. convert-linalg-to-loops nests a generic's loops in the order of its dimensions (d0 outermost), and
stablehlo-legalize-to-linalg orders them parallel dimensions first, reductions last. A reduction over
a leading axis (a bias gradient: sum over the rows of 512x128, a mean over (h, w) of an NHWC image)
then has its innermost loop striding through memory by a whole row, and a contraction written as a
generic (an einsum the matmul kernel does not take: 'nhwc,cd->nhwd' with c = 8) accumulates a
short scalar dot product per output element. LLVM's loop vectorizer only works on the innermost
loop and does not interchange loops itself (its LoopInterchange pass is off by default), so those
nests stay scalar and cache-hostile.

`interchange_loops` permutes each generic's dimensions (what MLIR's
transform.structured.interchange / linalg::interchangeGenericOp do) so the innermost one is the
dimension most operands have as their last, contiguous index: each operand whose last index is the
dimension votes for it, each operand that uses it at another index (a stride of a row or more) votes
against it. A dimension absent from an operand is loop-invariant for it (held in a register or
broadcast) and does not vote. The current innermost dimension stays unless another one has strictly
more votes, so row reductions and plain elementwise ops keep their order; a dimension of static
extent below MIN_INNER is never moved inward (too short to vectorize). The moved dimension goes
innermost, the others keep their relative order. The generic's payload is unchanged (its block
arguments are per operand, not per dimension) except `linalg.index`, which is renumbered.

Runs on tensors before bufferization, after matmul.py has taken the contractions it tiles;
SPRUE_FUSION=0 turns it off with fusion.py's rewrites.
"""
from __future__ import annotations

from torch_mlir import ir

from sprue.lowering.fusion import _dim_position, _extents, _maps, enabled
from sprue.lowering.mlir_util import ops_where

MIN_INNER = 4


def _votes(maps: list[ir.AffineMap], n_dims: int) -> list[int]:
    votes = [0] * n_dims
    for amap in maps:
        results = list(amap.results)
        for axis, expr in enumerate(results):
            d = _dim_position(expr)
            if d is None:
                continue
            votes[d] += 1 if axis == len(results) - 1 else -1
    return votes


def choose_order(maps: list[ir.AffineMap], extents: list[int | None]) -> list[int] | None:
    """The new loop order (old dimension per new position), or None to keep the current one."""
    n = len(extents)
    if n < 2 or not all(m.is_projected_permutation or _only_dims_and_constants(m) for m in maps):
        return None
    votes = _votes(maps, n)
    inner = n - 1
    best = inner
    for d in range(n - 1):
        if extents[d] is not None and extents[d] < MIN_INNER:
            continue
        if votes[d] > votes[best]:
            best = d
    if best == inner:
        return None
    return [d for d in range(n) if d != best] + [best]


def _only_dims_and_constants(amap: ir.AffineMap) -> bool:
    # (d0, 0): a broadcast row stays a plain access
    return all(isinstance(e.maybe_downcast(), (ir.AffineDimExpr, ir.AffineConstantExpr)) for e in amap.results)


def _permuted(amap: ir.AffineMap, new_of_old: list[int]) -> ir.AffineMap:
    n = amap.n_dims
    rename = ir.AffineMap.get(n, amap.n_symbols, [ir.AffineDimExpr.get(new_of_old[i]) for i in range(n)])
    return ir.AffineMap.get(n, amap.n_symbols, [e.compose(rename) for e in amap.results])


def _apply(op: ir.Operation, maps: list[ir.AffineMap], order: list[int]) -> None:
    new_of_old = [0] * len(order)
    for new, old in enumerate(order):
        new_of_old[old] = new
    op.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(_permuted(m, new_of_old)) for m in maps])
    kinds = str(op.attributes["iterator_types"]).strip("[]").split(", ")
    op.attributes["iterator_types"] = ir.Attribute.parse("[" + ", ".join(kinds[old] for old in order) + "]")
    i64 = ir.IntegerType.get_signless(64)

    def renumber(inner: ir.Operation) -> ir.WalkResult:
        if inner.name == "linalg.index":
            old = ir.IntegerAttr(inner.attributes["dim"]).value
            inner.attributes["dim"] = ir.IntegerAttr.get(i64, new_of_old[old])
        return ir.WalkResult.ADVANCE
    op.walk(renumber)


def interchange_loops(module: ir.Module) -> int:
    """Reorders the loops of every linalg.generic of `module` (see the module doc); returns how many."""
    if not enabled():
        return 0
    generics = ops_where(module.operation, lambda op: op.name == "linalg.generic")
    changed = 0
    for op in generics:
        maps = _maps(op)
        if not maps:
            continue
        n_dims = maps[0].n_dims
        order = choose_order(maps, _extents(op, maps, n_dims))
        if order is not None:
            with op.context, op.location:
                _apply(op, maps, order)
            changed += 1
    return changed


__all__ = ["MIN_INNER", "choose_order", "interchange_loops"]
