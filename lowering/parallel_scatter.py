"""Scatters that combine (`x.at[i].add(v)`, segment sums, a PageRank step, histograms) on the pool.

A scatter whose update region combines (legalize_scatter.py) reaches the buffer stage as an
scf.for over its update indices that loads an element of its destination at a computed index,
combines an update into it and stores it back. Two trips may hit the same element, so the trips
cannot simply be split. As OpenMP's array reductions do (and parallel.py's split reductions),
each chunk of trips gets a destination of its own: chunk 0 updates the destination itself, chunk
c > 0 a partial result it starts from the combiner's identity, and the partial results are then
folded into the destination in chunk order (an elementwise linalg.generic each, itself split over
the pool by parallel.py when big).

The number of chunks follows from the sizes alone (a power of two, at most MAX_PARTIALS, with
the partial results' fills and folds at most 1/8 of the trips' estimated work), never from
the number of threads: the results are the same bits with any number of threads. Against the serial loop the
updates of an element are reassociated (exact for integers, max and min; a float sum is within
the rounding of its chunks' sums, as with split reductions). Run-time sizes: the same choice at
run time, behind a test of the trip count (small scatters run the serial loop, with no call).

What qualifies: an scf.for with no results whose body holds only arithmetic, loads, stores,
inner loops and branches, whose stores all write `combine(load(d[i...]), v)` back to the same
d[i...] of buffers defined outside it (combine an op with an identity, parallel._IDENTITY), which
it reads nowhere else.
"""
from __future__ import annotations

import math

from torch_mlir import ir
from torch_mlir.dialects import arith, func, memref, scf
from torch_mlir.dialects import math as math_dialect

from sprue.lowering.mlir_util import (
    as_operation,
    captures,
    defined_inside,
    index,
    is_inside,
    loop_nest,
    ops_where,
    static_trips,
    store,
    view_root,
)
from sprue.lowering.parallel import (
    _IDENTITY,
    MAX_PARTIALS,
    PARALLEL_MIN_NS,
    _chunk_function,
    _copied,
    _identity,
    _if_true,
    _op_ns,
    _sizes,
    _slot,
)

_PREFIX = "__sprue_par_s"
# One trip's loads and stores at computed indices (mostly cache hits), and a partial result's cost
# per element (filled, then read and combined into the destination, moving through L3: a chunk's
# partial result evicts the last one's), measured at one thread: a PageRank step's scatter (5e5
# edges into 5e4 nodes, x[src] * w added at dst) ~1.2 ns a trip serial; with 8 chunks, 0.6 ns
# more per element of each partial result. The partial results may take 1/_FOLD_SHARE of the
# trips' work at most: that step runs in 2 chunks (1 thread 5% slower than the serial loop, 2
# threads ~1.8x faster).
_NS_ACCESS = 0.15
_NS_FOLD = 0.6
_FOLD_SHARE = 8
_PURE = {"scf.for", "scf.if", "scf.yield", "memref.load", "memref.store", "memref.dim", "ub.poison",
         "affine.apply", "affine.min", "affine.max"}


def _block_ns(block: ir.Block) -> float:
    """One thread's time for one pass over `block` (an inner loop's body counted its static trips,
    16 where they are known at run time only; a branch its costlier side)."""
    ns = 0.0
    for op in block.operations:
        if op.name == "scf.for":
            trips = static_trips(op)
            ns += (16 if trips is None else trips) * _block_ns(op.regions[0].blocks[0])
        elif op.name == "scf.if":
            ns += max(sum(_block_ns(b) for b in r.blocks) for r in op.regions)
        else:
            ns += _NS_ACCESS if op.name in ("memref.load", "memref.store") else _op_ns(op)
    return ns


def _combined_buffers(loop: ir.Operation) -> list[tuple[ir.Value, str]] | None:
    """(destination, combiner) of each buffer `loop` combines into (module doc), or None if the
    loop is not such a scatter."""
    if len(loop.results) or any(not (o.name in _PURE or o.name.startswith(("arith.", "math.", "index.")))
                                for o in ops_where(loop, lambda o: o != loop)):
        return None
    stores = ops_where(loop, lambda o: o.name == "memref.store")
    found: dict[ir.Value, str] = {}
    matched_loads = set()
    for st in stores:
        value, dest, at = st.operands[0], st.operands[1], list(st.operands)[2:]
        if isinstance(value.owner, ir.Block) or defined_inside(dest, loop):
            return None
        combine = as_operation(value.owner)
        if combine.name not in _IDENTITY or len(list(combine.operands)) != 2 or sum(1 for _ in value.uses) != 1:
            return None
        loads = [v for v in combine.operands if not isinstance(v.owner, ir.Block)
                 and as_operation(v.owner).name == "memref.load" and as_operation(v.owner).operands[0] == dest
                 and list(as_operation(v.owner).operands)[1:] == at and sum(1 for _ in v.uses) == 1]
        if len(loads) != 1 or found.setdefault(dest, combine.name) != combine.name:
            return None
        matched_loads.add(as_operation(loads[0].owner))
    if not found:
        return None
    # the destinations: read only by the matched loads, no other view of them used in the loop
    for v in captures([loop])[0]:
        if isinstance(v.type, ir.MemRefType) and v not in found and any(view_root(v) == view_root(d) for d in found):
            return None
    for ld in ops_where(loop, lambda o: o.name == "memref.load" and o.operands[0] in found):
        if ld not in matched_loads:
            return None
    for dest in found:
        t = ir.MemRefType(dest.type)
        strides, _ = t.get_strides_and_offset()
        if list(strides) != _row_major(t.shape) or any(u.name not in ("memref.load", "memref.store", "memref.dim")
                                                        for u in (as_operation(x.owner) for x in dest.uses)
                                                        if is_inside(u, loop)):
            return None
    return list(found.items())


def _row_major(shape: list[int]) -> list[int]:
    """A contiguous buffer's strides (the dynamic marker where a run-time size makes one run-time)."""
    strides, step = [], 1
    for s in reversed(shape):
        strides.append(step)
        step = step * s if step is not None and not ir.ShapedType.is_dynamic_size(s) else None
    dyn = ir.ShapedType.get_dynamic_stride_or_offset()
    return [dyn if s is None else s for s in reversed(strides)]


def _view_type(dest: ir.Value) -> ir.Type:
    """The type a chunk sees its destination as: the destination itself (chunk 0) or its slot of
    the partial results (parallel._slot), contiguous at a run-time offset."""
    t = ir.MemRefType(dest.type)
    dims = "".join(f"{'?' if ir.ShapedType.is_dynamic_size(s) else s}x" for s in t.shape)
    dyn = ir.ShapedType.get_dynamic_stride_or_offset()
    strides = ", ".join("?" if s == dyn else str(s) for s in _row_major(t.shape))
    return ir.Type.parse(f"memref<{dims}{t.element_type}, strided<[{strides}], offset: ?>>")


def _static_chunks(work_ns: float, elements: int) -> int:
    """The number of chunks (module doc): a power of two, at most MAX_PARTIALS, and a partial
    result each costs at most 1/_FOLD_SHARE of the work (0: stay serial)."""
    most = min(MAX_PARTIALS, int(work_ns // (_FOLD_SHARE * _NS_FOLD * max(elements, 1))))
    return 0 if most < 1 else 1 << (most.bit_length() - 1)


def _chunks(n: ir.Value, trip_ns: float, elements: ir.Value) -> ir.Value:
    """Run-time sizes: _static_chunks of n trips of trip_ns (at least 1), in picoseconds."""
    work = arith.MulIOp(n, index(max(1, round(1000 * trip_ns)))).result
    per_chunk = arith.MulIOp(arith.MaxUIOp(elements, index(1)).result,   # (an empty destination)
                             index(round(1000 * _FOLD_SHARE * _NS_FOLD))).result
    most = arith.MinUIOp(index(MAX_PARTIALS), arith.MaxUIOp(arith.DivUIOp(work, per_chunk).result, index(1)).result).result
    i64 = ir.IntegerType.get_signless(64)
    leading = math_dialect.CountLeadingZerosOp(arith.IndexCastUIOp(i64, most).result).result
    shift = arith.IndexCastUIOp(ir.IndexType.get(), arith.SubIOp(arith.ConstantOp(i64, 63).result, leading).result).result
    return arith.ShLIOp(index(1), shift).result


def _outline_scatter(loop: ir.Operation, dests: list[tuple[ir.Value, str]], module: ir.Module, name: str) -> None:
    """`loop` becomes a call of `name` over chunks of its trips, each combining into its own
    destination (module doc); left as it is where it stays serial (too little work, too few trips
    for two chunks)."""
    lb, ub, step = list(loop.operands)[:3]
    trips = static_trips(loop)
    elements = [math.prod(ir.MemRefType(d.type).shape) if ir.MemRefType(d.type).has_static_shape else None
                for d, _ in dests]
    trip_ns = _block_ns(loop.regions[0].blocks[0])
    least = math.ceil(PARALLEL_MIN_NS / max(trip_ns, 1e-3))
    with loop.location, ir.InsertionPoint(loop):
        if trips is not None and None not in elements:
            chunks = _static_chunks(trips * trip_ns, sum(elements))
            if trips < least or chunks < 2:
                return
            n, count, anchor = index(trips), index(chunks), loop
        else:
            n = arith.CeilDivUIOp(arith.SubIOp(ub, lb).result, step).result
            total = index(0)
            for d, _ in dests:
                size = index(1)
                for v in _sizes(d):
                    size = arith.MulIOp(size, v).result
                total = arith.AddIOp(total, size).result
            count = _chunks(n, trip_ns, total)
            enough = arith.AndIOp(arith.CmpIOp(arith.CmpIPredicate.uge, n, index(least)).result,
                                  arith.CmpIOp(arith.CmpIPredicate.uge, count, index(2)).result).result
            anchor = _if_true(enough, loop)
    with loop.location, ir.InsertionPoint(anchor):
        grain = arith.CeilDivUIOp(n, count).result
        partials = []
        for d, _ in dests:   # (chunk 0's is the destination)
            t = ir.MemRefType(d.type)
            if anchor == loop:
                shape, sizes = [chunks - 1] + list(t.shape), []
            else:
                shape = [ir.ShapedType.get_dynamic_size()] + list(t.shape)
                sizes = [arith.SubIOp(count, index(1)).result] + [
                    v for v, s in zip(_sizes(d), t.shape) if ir.ShapedType.is_dynamic_size(s)]
            partials.append(memref.AllocOp(ir.MemRefType.get(shape, t.element_type), sizes, []).result)
    captured = captures([loop])[0]
    params = [v for v in captured if not _copied(v)] + partials
    with loop.location:
        fn, entry = _chunk_function(module, name, params)
        lo, hi, chunk_grain = entry.arguments[0], entry.arguments[1], entry.arguments[2]
        with ir.InsertionPoint(entry):
            mapping = dict(zip(params, list(entry.arguments)[3:]))
            for v in captured:
                if _copied(v):
                    mapping[v] = as_operation(v.owner).clone().results[0]
            slot = arith.DivUIOp(lo, chunk_grain).result
            first = arith.CmpIOp(arith.CmpIPredicate.eq, slot, index(0)).result
            for (dest, combine), partial in zip(dests, partials):
                view_t = _view_type(dest)
                choice = scf.IfOp(first, [view_t], has_else=True)
                with ir.InsertionPoint(choice.then_block):
                    scf.YieldOp([memref.CastOp(view_t, mapping[dest]).result])
                with ir.InsertionPoint(choice.else_block):
                    mine = _slot(mapping[partial], arith.SubIOp(slot, index(1)).result)
                    start = _identity(combine, ir.MemRefType(view_t).element_type)
                    loop_nest(_sizes(mine), lambda ivs, mine=mine: store(start, mine, ivs))
                    scf.YieldOp([memref.CastOp(view_t, mine).result])
                mapping[dest] = choice.results[0]
            first_trip, end = (arith.AddIOp(mapping[lb], arith.MulIOp(a, mapping[step]).result).result for a in (lo, hi))
            copy = loop.clone()
            copy.operands[0], copy.operands[1] = first_trip, end
            for inner, i, v in captures([copy])[1]:
                if inner != as_operation(copy) or i >= 2:
                    inner.operands[i] = mapping[v]
            func.ReturnOp([])
        with ir.InsertionPoint(anchor):
            func.CallOp([], name, [index(0), n, grain, *params])
            for (dest, combine), partial in zip(dests, partials):
                _fold_partials(dest, combine, partial)
                memref.DeallocOp(partial)
    if anchor == loop:
        loop.erase()


def _fold_partials(dest: ir.Value, combine: str, partials: ir.Value) -> None:
    """for c in order: dest = combine(dest, partials[c]), an elementwise generic each (contiguous
    and vectorized; parallel.py splits it when big). (One generic reducing the partial results
    innermost read them a stride of the destination apart, unvectorized: 1.4 ns an element.)"""
    rank = ir.MemRefType(dest.type).rank
    identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))
    parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    elem = ir.MemRefType(dest.type).element_type
    chunk_loop = scf.ForOp(index(0), _sizes(partials)[0], index(1))
    with ir.InsertionPoint(chunk_loop.body):
        # (built generically: torch_mlir's linalg module costs ~300 ms to import, test_dialects.py)
        generic = ir.Operation.create("linalg.generic", results=[], regions=1, attributes={
            "indexing_maps": ir.ArrayAttr.get([identity, identity]),
            "iterator_types": ir.ArrayAttr.get([parallel] * rank),
            "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1])},
            operands=[_slot(partials, chunk_loop.induction_variable), dest])
        block = generic.regions[0].blocks.append(elem, elem)
        with ir.InsertionPoint(block):
            combined = ir.Operation.create(combine, results=[elem], operands=[block.arguments[1], block.arguments[0]])
            ir.Operation.create("linalg.yield", operands=[combined.results[0]])
        scf.YieldOp([])


def parallelize_scatters(module: ir.Module) -> None:
    """Scatters that combine, big enough: calls of functions the pool runs in chunks (module doc)."""
    found: list[tuple[ir.Operation, list[tuple[ir.Value, str]]]] = []
    for loop in ops_where(module.operation, lambda o: o.name == "scf.for", ir.WalkOrder.PRE_ORDER):
        if any(is_inside(loop, outer) for outer, _ in found):
            continue
        dests = _combined_buffers(loop)
        if dests is not None:
            found.append((loop, dests))
    for k, (loop, dests) in enumerate(found):
        _outline_scatter(loop, dests, module, f"{_PREFIX}{k}")


__all__ = ["parallelize_scatters"]
