"""Register tiles for a merged sum of products (fusion_sums.py's generics: a convolution's taps).

fusion_sums.py makes `out + a0 * b0 + a1 * b1 + ...` (a 3x3 convolution's nine tap contractions)
one linalg.generic. Left to convert-linalg-to-loops and LLVM's loop vectorizer, its innermost loop
(the output's contiguous dim, a convolution's output channels) is vectorized alone: per reduction
step every output vector is loaded and stored, each product's `b` vector loaded for one output
row only (8x16x32x32 * 3x3x16x32 f64: 48.7 GFLOP/s against XLA's 65.8). Here it gets matmul.py's
register kernel, the tile IREE's and XLA's convolution emitters keep in registers across the taps
and input channels:

  - the generic is tiled by MR along its "row" loop (the innermost parallel loop every `a` operand
    indexes and no `b` operand does: a convolution's output pixels along a row) and by NR (a
    power-of-two number of vectors) along its column loop (every `b` operand's and the output's
    contiguous dim, which no `a` operand indexes: the output channels; after the row loop); its
    other parallel loops by 1;
  - its reduction loops (input channels; the taps are in the payload) by 1, which leaves an
    (MR, NR) tile whose unit dims fold away: an elementwise generic over broadcasts of MR `a`
    scalars and NR-wide `b` rows, vectorized, its output tile's read and write hoisted out of the
    reduction loops. Per reduction step and product: MR broadcasts, NR / lanes loads, MR * NR /
    lanes FMAs (BLIS's micro-kernel, per tap).

Only where the row and column loops have static extents the tiles divide (any other loop may be a
run-time size: the batch); the rest keep the plain loops. The outermost tiled loop is marked
PARALLEL_LOOP with one trip's work, so parallel.py splits it on the pool. Each output element's sum
is still accumulated in the payload's order per reduction step; the steps in order.

Measured (conv2d of benchmarks/programs.py, 8x16x32x32 NCHW, two layers, one core, CPU time):
4.26 -> 2.60 ms static, 5.20 -> 2.75 ms with a run-time batch (with parallel.py's chunks taking the
taps' one root buffer). Its first call's compile costs ~45 ms more (the tiled IR's bufferization
and LLVM lowering).
"""
from __future__ import annotations

import math

from torch_mlir import ir

from sprue.lowering.fusion import _dim_position, _extents, _maps, _payload
from sprue.lowering.matmul_scripts import ANY, apply_scripts, parallel
from sprue.lowering.mlir_util import as_operation, ops_where
from sprue.lowering.targets import host_vector_bytes

MARK = "sprue.sum_tile"
LOOP = "sprue.sum_tile_loop"   # (the tiled outer loop, for _rows_without_transposes)
# The tiled loops are vectorized already: LLVM's loop passes (vectorizer, unroller) leave them as
# they are (loop_hints.py carries the annotation to the LLVM IR).
ANNOTATION = "llvm.loop_annotation"
DONE = "#llvm.loop_annotation<disableNonforced = true>"
# Rows of the register tile, the first that divides the row loop's extent: 4 rows of NR = 2
# vectors are 8 accumulators. 8 rows (16 of AVX-512's registers) ran no faster (conv2d, 2 threads:
# 2.57 against 2.27 ms, within the noise) and cost 60 ms more compile time.
ROWS = (4, 2)
# Below this many flops the tiled loops are not worth the script's compile time.
MIN_FLOPS = 1 << 16


class _Plan:
    """Tile sizes of one generic: register level (rows, columns, other parallel loops by 1) and
    reduction level (each non-unit reduction loop by 1), and one trip's flops of the outer loop."""

    def __init__(self, register: list[int], reduction: list[int], trip_flops: int | None):
        self.register, self.reduction, self.trip_flops = register, reduction, trip_flops


def _products(op: ir.Operation) -> list[tuple[int, int]] | None:
    """The (a, b) operand numbers of each product of a payload `out + a0 * b0 + a1 * b1 + ...`
    (block arguments multiplied, the products added onto the output), or None."""
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    body = _payload(op)
    if not body or body[-1].name != "linalg.yield":
        return None
    pairs: list[tuple[int, int]] = []
    running = args[-1]
    for inner in body[:-1]:
        if inner.name == "arith.mulf":
            x, y = inner.operands[0], inner.operands[1]
            if x not in args[:-1] or y not in args[:-1]:
                return None
            pairs.append((args.index(x), args.index(y)))
        elif inner.name == "arith.addf" and running in (inner.operands[0], inner.operands[1]):
            running = inner.results[0]
        else:
            return None
    if body[-1].operands[0] != running or len(pairs) != sum(1 for o in body if o.name == "arith.addf"):
        return None
    return pairs


def _plan(op: ir.Operation) -> _Plan | None:
    types = [v.type for v in op.operands]
    if not all(isinstance(t, ir.RankedTensorType) for t in types):
        return None
    elems = {str(ir.RankedTensorType(t).element_type) for t in types}
    if elems not in ({"f64"}, {"f32"}):
        return None
    pairs = _products(op)
    if not pairs:
        return None
    maps = _maps(op)
    n_loops = maps[0].n_dims
    kinds = [k.strip(' "') for k in str(op.attributes["iterator_types"]).strip("[]").split(",")]
    kinds = ["reduction" if "reduction" in k else "parallel" for k in kinds]
    dims = [[_dim_position(e) for e in m.results] for m in maps]
    if any(None in d for d in dims):
        return None
    out = dims[-1]
    if not out:
        return None
    col = out[-1]
    ext = _extents(op, maps, n_loops)
    # the column loop: parallel, the output's and every b's last dim, in no a
    lhs, rhs = [], []
    for a, b in pairs:
        if dims[b] and dims[b][-1] == col and col not in dims[a]:
            lhs.append(dims[a]), rhs.append(dims[b])
        elif dims[a] and dims[a][-1] == col and col not in dims[b]:
            lhs.append(dims[b]), rhs.append(dims[a])
        else:
            return None
    if kinds[col] != "parallel":
        return None
    # (before the column loop: the folded tile's vectors then run along the columns)
    rows = [d for d in out[:-1] if d < col and kinds[d] == "parallel" and all(d in a for a in lhs) and
            not any(d in b for b in rhs)]
    if not rows:
        return None
    row = max(rows)
    itemsize = 8 if elems == {"f64"} else 4
    vb = host_vector_bytes()
    lanes = vb // itemsize
    if ext[col] is None or ext[row] is None or ext[col] % lanes:
        return None
    nr = 2 * lanes if ext[col] % (2 * lanes) == 0 else lanes
    mr = next((r for r in ROWS if ext[row] % r == 0), None)
    if mr is None:
        return None
    register = [0] * n_loops
    reduction = [0] * n_loops
    for d in range(n_loops):
        if d == row:
            register[d] = mr
        elif d == col:
            register[d] = nr
        elif kinds[d] == "parallel" and ext[d] != 1:
            register[d] = 1
        elif kinds[d] == "reduction" and ext[d] != 1:
            reduction[d] = 1
    if any(kinds[d] == "reduction" and e is None for d, e in enumerate(ext)):
        return None
    static = [e for e in ext if e is not None]
    flops = 2 * len(pairs) * math.prod(static)
    if None not in ext and flops < MIN_FLOPS:
        return None
    outer = next(d for d in range(n_loops) if register[d])
    rest = [e for d, e in enumerate(ext) if d != outer]
    # (one trip: MR rows where the rows are the outermost tiled loop)
    trip = None if None in rest else 2 * len(pairs) * math.prod(rest) * register[outer]
    return _Plan(register, reduction, trip)


def _filled(op: ir.Operation) -> bool:
    """Whether op's output starts as a linalg.fill that nothing else reads (a sum's zeros)."""
    init = op.operands[len(op.operands) - 1]
    if isinstance(init.owner, ir.Block):
        return False
    fill = as_operation(init.owner)
    return fill.name == "linalg.fill" and len(list(init.uses)) == 1


def _script(ident: int, p: _Plan, filled: bool) -> str:
    """`filled`: the output's fill is tiled with it (transform.structured.fuse, which fuses a
    destination's producer through the loops' iter_args, as fuse_into_containing_op does not):
    each tile starts from the fill's value in registers, where the whole output was set (a memset
    of 2 MB for conv2d's first layer) and read back."""
    n_outer = sum(1 for s in p.register if s)
    n_red = sum(1 for s in p.reduction if s)
    types = ", ".join([ANY] * (n_outer + 1))
    outer = f"%sl{ident}" + ("#0" if n_outer > 1 else "")
    tile = "fuse" if filled else "tile_using_for"
    s = f"""
    %s{ident} = transform.structured.match ops{{["linalg.generic"]}} attributes{{{MARK} = {ident} : i64}} in %root : ({ANY}) -> {ANY}
    %f{ident} = transform.get_parent_op %s{ident} {{op_name = "func.func"}} : ({ANY}) -> {ANY}
    %t{ident}, %sl{ident}{f":{n_outer}" if n_outer > 1 else ""} = transform.structured.{tile} %s{ident} tile_sizes {p.register} : ({ANY}) -> ({types})
    transform.annotate {outer} "{LOOP}" : {ANY}
{parallel(outer, p.trip_flops) if p.trip_flops else ""}"""
    if filled:   # (a generic, so that its unit dims fold as the product's: its tile's zeros, written
        # as the vector the product's accumulators then read, fold into their start)
        s += f"""    %fl{ident} = transform.structured.match ops{{["linalg.fill"]}} in {outer} : ({ANY}) -> {ANY}
    %fg{ident} = transform.structured.generalize %fl{ident} : ({ANY}) -> {ANY}
"""
    inner = outer
    if n_red:
        rtypes = ", ".join([ANY] * (n_red + 1))
        s += f"""    %u{ident}, %ul{ident}{f":{n_red}" if n_red > 1 else ""} = transform.structured.tile_using_for %t{ident} tile_sizes {p.reduction} : ({ANY}) -> ({rtypes})
"""
        reds = [f"%ul{ident}#{i}" for i in range(n_red)] if n_red > 1 else [f"%ul{ident}"]
    else:
        reds = []
    s += f"""    transform.apply_patterns to {outer} {{
      transform.apply_patterns.linalg.fold_unit_extent_dims_via_slices
    }} : {ANY}
    %c{ident} = transform.structured.match ops{{["linalg.generic"]}} in {inner} : ({ANY}) -> {ANY}
"""
    # (matmul_scripts.VECTORIZE's steps without the contraction's, on the tiled loops only: the
    # function's other ops are not walked again)
    s += f"""    transform.structured.vectorize %c{ident} : {ANY}
    transform.apply_patterns to %f{ident} {{
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
      transform.apply_patterns.canonicalization
    }} : {ANY}
    transform.apply_cse to %f{ident} : {ANY}
"""
    for loop in reversed(reds):   # (the output tile's read and write out of each reduction loop)
        s += f"    transform.loop.hoist_loop_invariant_subsets {loop} : {ANY}\n"
    s += f"""    transform.apply_patterns to {outer} {{
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.vector.lower_transfer max_transfer_rank = 1
      transform.apply_patterns.canonicalization
    }} : {ANY}"""
    return s


def _rows_without_transposes(loop: ir.Operation) -> None:
    """The vectorizer reads an `a` operand's MR scalars as one vector<MR>, broadcasts it to
    (NR, MR) and transposes that to the tile's (MR, NR): a transpose convert-vector-to-llvm unrolls
    into MR * NR element extracts and inserts per product (4600 ops for a 3x3 convolution's tile,
    most of the module's LLVM time). The same rows as a broadcast of the vector<MR x 1>, which
    lowers to one splat per row."""
    for op in ops_where(loop, lambda o: o.name == "vector.transpose"):
        if isinstance(op.operands[0].owner, ir.Block):
            continue
        src = as_operation(op.operands[0].owner)
        if src.name != "vector.broadcast" or str(op.attributes["permutation"]) != "array<i64: 1, 0>":
            continue
        v = src.operands[0]
        if not isinstance(v.type, ir.VectorType) or ir.VectorType(v.type).rank != 1:
            continue
        out = ir.VectorType(op.results[0].type)
        column = ir.VectorType.get([out.shape[0], 1], out.element_type)
        at = ir.InsertionPoint(op)
        cast = ir.Operation.create("vector.shape_cast", results=[column], operands=[v], loc=op.location, ip=at)
        rows = ir.Operation.create("vector.broadcast", results=[out], operands=[cast.results[0]],
                                   loc=op.location, ip=at)
        op.results[0].replace_all_uses_with(rows.results[0])
        op.erase()
        if not list(src.results[0].uses):
            src.erase()


def tile_sums(module: ir.Module, merged: list[ir.Operation]) -> int:
    """Tiles each of `merged` (fusion_sums' generics) that _plan takes; returns how many."""
    parts = []
    i64 = ir.IntegerType.get_signless(64)
    for op in merged:
        p = _plan(op)
        if p is None:
            continue
        ident = len(parts)
        op.attributes[MARK] = ir.IntegerAttr.get(i64, ident)
        parts.append(_script(ident, p, _filled(op)))
    if parts:
        apply_scripts(module, parts)
        done = ir.Attribute.parse(DONE, module.context)
        for loop in ops_where(module.operation, lambda o: LOOP in o.attributes):
            _rows_without_transposes(loop)
            del loop.attributes[LOOP]
            for inner in ops_where(loop, lambda o: o.name == "scf.for"):
                inner.attributes[ANNOTATION] = done
    return len(parts)


__all__ = ["tile_sums"]
