"""Parallel loops: big linalg ops and the blocks of matrix products run in chunks on the pool.

Two rewrites, on either side of the LLVM conversion (the pool: parallel_runtime.py):

- `parallelize_loops` (buffers, before convert-linalg-to-loops) makes calls
  `__sprue_par_K(lo, hi, grain, operands...)` of private functions that run the chunk [lo, hi)
  of a loop, for
  * a linalg.generic whose first loop is parallel (elementwise ops, broadcasts, row reductions:
    softmax's max and sum) and which every output indexes (a chunk writes its own rows); its
    operands index it through projected permutations (0s allowed: broadcast size-1 dims);
  * a linalg.generic whose first loop reduces (a full sum, `sum(axis=0)`), each output folded by
    one op with an identity (`_combiners`: add, mul, max, min, and, or, xor): each chunk reduces its
    rows into a partial result of its own, started from the identity, and the caller folds the
    partial results into the outputs in chunk order;
  * an scf.for that matmul_scripts.py marked PARALLEL_LOOP (a product's batch elements, its blocks
    of B's columns, or A's register rows), its trips independent: each chunk allocates its own
    copy of a buffer only the loop uses (the packing buffer that buffer-loop-hoisting moved out).
  Ops that read an output's buffer through another view stay as they are; a body's index of the
  split loop is shifted by its chunk's start.
  Static sizes: the op runs on the pool from an estimated PARALLEL_MIN_NS of one thread's work
  (PARALLEL_MIN_FLOPS for a marked loop), chunks of at least CHUNK_ELEMENTS iterations (CHUNK_FLOPS), at most
  MAX_PARTIALS of them. Run-time sizes: the same test at run time, the op (or loop) kept in the
  else branch, so small sizes pay no call (an LSTM's steps ran 2x slower outlined unguarded).
  Inside a chunk everything is serial (a marked loop inside a chosen one stays a loop); loops
  and branches around an op do not matter.
- `call_parallel_bodies` (LLVM dialect): each call of such a function becomes a call of the pool,
  `_sprue_parallel_for(task, ctx, n, grain)`: its operands are stored in a struct on the caller's
  stack (`ctx`), and `__sprue_task_K(lo, hi, ctx)` loads them back and calls the body.

The chunks' bounds follow from the sizes alone, never from the number of threads, each chunk
writes only its own rows (or partial result), and partial results are folded in chunk order: the
results are the same bits with any number of threads. (A split reduction's bits differ from the
serial loop's, as any reassociation does: a sum is within the rounding of its chunks' sums.)
Not split here: reductions whose outputs are not folded by one op (an argmax along a short static
axis), scans; scatters that combine are parallel_scatter.py's. Of a product with run-time sizes,
A's register rows are split, or with a small static C its blocks of k (matmul_scripts.py).
"""
from __future__ import annotations

import functools
import math

from torch_mlir import ir
from torch_mlir.dialects import arith, func, memref, scf

from sprue.lowering.entry_results import _gep, _not_atomic, member_offsets
from sprue.lowering.matmul_scripts import PARALLEL_LOOP, PARALLEL_SUM
from sprue.lowering.mlir_util import (
    as_operation,
    captures,
    constant_int,
    enclosing,
    index,
    is_inside,
    load,
    loop_nest,
    ops_where,
    static_trips,
    store,
    view_root,
)
from sprue.lowering.outline import new_private_function
from sprue.lowering.parallel_runtime import PARALLEL_SYMBOL
from sprue.lowering.targets import host_vector_bytes

# An op runs on the pool when one thread would take at least PARALLEL_MIN_NS: below, waking the
# workers and handing out chunks costs more than it saves. The time is estimated from a cost per
# iteration (_iteration_ns), measured at one thread on a 2-core EPYC with AVX2 (Zen 2/3), in
# benchmarks/threads.py's sweep: a sum streams 8 bytes with an add, 0.22 ns an element (1e5:
# 22 us); sin(x) * 2 + x * x 16 bytes and a sine, 1.6 ns; op costs scale with the vector width
# (_vector_scale: on AVX-512 half). With 65,536 iterations as the threshold, sums of 7e4 and 1e5
# elements and sum(axis=0) of 136 x 512 and 195 x 512 ran 1.3-1.9x slower at two threads (a
# call of ~20-30 us); from ~100 us of work every kernel in the sweep ran faster.
PARALLEL_MIN_NS = 100_000
_NS_PER_BYTE = 0.025
_NS_OP = 0.05
_NS_DIVIDE = 0.3     # divisions, square roots
_NS_MATH = 1.2       # exp, log, sin, tanh, ...: libm's or their vector forms
_DIVIDES = {"arith.divf", "arith.remf", "math.sqrt", "math.rsqrt", "arith.divsi", "arith.divui",
            "arith.remsi", "arith.remui"}
_CHEAP_MATH = {"math.absf", "math.absi", "math.fma", "math.copysign", "math.floor", "math.ceil",
               "math.round", "math.roundeven", "math.trunc"}
# Each chunk does at least this many iterations, and there are at most MAX_PARTIALS chunks
# (partial results to fold; larger chunks made no measurable difference at 1e7 elements, where
# this machine's memory bandwidth caps two threads at ~1.55x one: a C streaming loop, 14.3 vs 22
# GB/s).
CHUNK_ELEMENTS = 1 << 14
MAX_PARTIALS = 64
# A parallel loop (a matrix product's blocks, matmul_scripts.PARALLEL_LOOP) runs on the pool from
# this many floating-point operations, in chunks of at least CHUNK_FLOPS.
PARALLEL_MIN_FLOPS = 1 << 21
CHUNK_FLOPS = 1 << 18
_PREFIX = "__sprue_par_"
_TASK = "__sprue_task_"
_NOALIAS_ALIGNED = "sprue.noalias_aligned"


def _dim_positions(op: ir.Operation, dim: int) -> list[int | None] | None:
    """For each operand, where its indexing map puts loop dimension `dim` (None: not there); None if
    a map is not a projected permutation (constant 0s allowed)."""
    out = []
    for attr in ir.ArrayAttr(op.attributes["indexing_maps"]):
        results = [str(e) for e in ir.AffineMapAttr(attr).value.results]
        dims = [e for e in results if e != "0"]   # (a 0: a broadcast size-1 dimension)
        if len(set(dims)) != len(dims) or not all(d[:1] == "d" and d[1:].isdigit() for d in dims):
            return None
        out.append(results.index(f"d{dim}") if f"d{dim}" in results else None)
    return out


def _loop_sizes(op: ir.Operation) -> list[int | None]:
    """The static size of each loop dimension of `op` (None where only run-time sizes give it)."""
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    sizes: list[int | None] = [None] * maps[0].n_dims
    for value, amap in zip(op.operands, maps):
        shape = ir.MemRefType(value.type).shape
        for i, e in enumerate(amap.results):
            d = str(e)
            if d.startswith("d") and d[1:].isdigit() and not ir.ShapedType.is_dynamic_size(shape[i]):
                sizes[int(d[1:])] = shape[i]
    return sizes


def _copied(v: ir.Value) -> bool:
    """Whether a value a chunk's body uses from outside is copied into its function (a constant)."""
    return not isinstance(v.owner, ir.Block) and as_operation(v.owner).name in ("arith.constant", "ub.poison")


@functools.cache
def _vector_scale() -> float:
    """The op costs were measured with AVX2's 32-byte vectors: a wider vector does proportionally
    more per op (not per byte streamed). On AVX-512 (Zen 5) the elementwise kernel's 1e5
    elements took 59 us at one thread, estimated 160 at AVX2's costs, and ran 0.89x slower at
    two threads; its 3e5 1.84x faster. (PARALLEL_MIN_FLOPS stays: products of 2-4 MFLOP ran
    alike either way, and a vector-matrix product's are bytes streamed.)"""
    return host_vector_bytes() / 32


def _op_ns(op: ir.Operation) -> float:
    """One thread's time for one arith or math op (0 for any other)."""
    if not op.name.startswith(("arith.", "math.")):
        return 0.0
    return (_NS_DIVIDE if op.name in _DIVIDES else
            _NS_MATH if op.name.startswith("math.") and op.name not in _CHEAP_MATH else _NS_OP) / _vector_scale()


def _iteration_ns(op: ir.Operation) -> float:
    """One thread's time for one iteration of a generic (PARALLEL_MIN_NS): its body's ops and the
    bytes of the operands it streams (those indexed by its innermost loop)."""
    ns = sum(_op_ns(inner) for inner in ops_where(op, lambda o: o.name.startswith(("arith.", "math."))))
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    innermost = f"d{maps[0].n_dims - 1}"
    for value, amap in zip(op.operands, maps):
        if innermost in [str(e) for e in amap.results]:
            t = ir.MemRefType(value.type)
            ns += _NS_PER_BYTE * max(1, (t.element_type.width if hasattr(t.element_type, "width") else 64) // 8)
    return ns


def _min_iterations(op: ir.Operation) -> int:
    """The iterations of `op` from which it runs on the pool (PARALLEL_MIN_NS), two chunks at least."""
    return max(2 * CHUNK_ELEMENTS, math.ceil(PARALLEL_MIN_NS / max(_iteration_ns(op), 1e-3)))


def _eligible(op: ir.Operation) -> tuple[int, list[int | None], list[int | None], list[str] | None] | None:
    """(the loop split into chunks, where each operand has it, the loop sizes, and for a reduction
    over that loop each output's combiner) of an op to run on the pool (module doc); None for any
    other."""
    if op.name != "linalg.generic" or len(op.results):
        return None
    if not all(isinstance(v.type, ir.MemRefType) for v in op.operands):
        return None
    iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    sizes = _loop_sizes(op)
    # the loop split into chunks: the outermost one not of size 1 (a batchnorm's per-channel
    # reductions reach here as (1, C, 1, 1, N, H, W))
    dim = next((d for d, size in enumerate(sizes) if size != 1), 0)
    positions = _dim_positions(op, dim)
    if not iterators or positions is None:
        return None
    n_ins = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[0]
    combiners = None
    if "parallel" not in iterators[dim]:   # each output folds the rows: partial results
        combiners = _combiners(op, n_ins)
        if combiners is None or any(p is not None for p in positions[n_ins:]):
            return None
    elif any(p is None for p in positions[n_ins:]):
        return None
    operands = list(op.operands)
    outs = {view_root(v) for v in operands[n_ins:]}
    # values the body reads from outside: constants (copied), and scalars and buffers it reads
    # (a gather's table, passed along) when it writes no memory and reads none of the outputs
    writes = ops_where(op, lambda o: o.name in _WRITES or o.name.startswith("linalg.")
                       and o.name not in ("linalg.yield", "linalg.index", "linalg.generic"))
    if any(not _copied(v) and (writes or isinstance(v.type, ir.MemRefType) and view_root(v) in outs)
           for v in captures([op])[0] if v not in operands):
        return None
    seen: dict[ir.Value, int | None] = {}
    for v, p in zip(operands, positions):
        if seen.setdefault(v, p) != p:   # one buffer, its rows along two dimensions
            return None
    for k, v in enumerate(operands[:n_ins]):   # an output's buffer read through another view
        if view_root(v) in outs and (combiners or not any(v == o and positions[k] == positions[n_ins + j]
                                                          for j, o in enumerate(operands[n_ins:]))):
            return None
    if None in sizes:   # run-time sizes: the call is guarded by the size (_outline)
        return dim, positions, sizes, combiners
    total = 1
    for s in sizes:
        total *= s
    if total < _min_iterations(op) or sizes[dim] < 2:
        return None
    return dim, positions, sizes, combiners


def _subview(value: ir.Value, dim: int, lo: ir.Value, size: ir.Value) -> ir.Value:
    """The rows [lo, lo + size) of `value` along `dim`."""
    t = ir.MemRefType(value.type)
    strides, _ = t.get_strides_and_offset()
    dyn = ir.ShapedType.get_dynamic_size()
    dyn_offset = ir.ShapedType.get_dynamic_stride_or_offset()
    shape = list(t.shape)
    shape[dim] = dyn
    dims = "x".join("?" if ir.ShapedType.is_dynamic_size(s) else str(s) for s in shape)
    layout = ", ".join("?" if s == dyn_offset else str(s) for s in strides)
    result = ir.Type.parse(f"memref<{dims}x{t.element_type}, strided<[{layout}], offset: ?>>")
    sizes_dyn = []
    static_sizes = []
    for i, s in enumerate(t.shape):
        if i == dim:
            static_sizes.append(dyn)
            sizes_dyn.append(size)
        elif ir.ShapedType.is_dynamic_size(s):
            static_sizes.append(dyn)
            sizes_dyn.append(ir.Operation.create("memref.dim", results=[ir.IndexType.get()], operands=[
                value, arith.ConstantOp(ir.IndexType.get(), i).result]).results[0])
        else:
            static_sizes.append(s)
    offsets = [dyn_offset if i == dim else 0 for i in range(t.rank)]
    return ir.Operation.create("memref.subview", results=[result], operands=[value, lo, *sizes_dyn], attributes={
        "static_offsets": ir.DenseI64ArrayAttr.get(offsets),
        "static_sizes": ir.DenseI64ArrayAttr.get(static_sizes),
        "static_strides": ir.DenseI64ArrayAttr.get([1] * t.rank),
        "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1, len(sizes_dyn), 0])}).results[0]


def _chunk_function(module: ir.Module, name: str, params: list[ir.Value]) -> tuple[ir.Operation, ir.Block]:
    """The function `name(lo, hi, grain, params...)` a chunk runs (inlined into its task); a buffer
    no other parameter views is noalias: LLVM vectorizes without overlap checks, and
    accumulators.py keeps a reduction's accumulator in a register."""
    index_t = ir.IndexType.get()
    fn, entry = new_private_function(module, name, [index_t, index_t, index_t] + [v.type for v in params], [])
    del fn.attributes["llvm.no_inline"]   # into its task, its only caller
    roots = [view_root(v) for v in params]
    unique = [isinstance(v.type, ir.MemRefType) and roots.count(r) == 1 for v, r in zip(params, roots)]
    fn.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get({})] * 3 + [
        ir.DictAttr.get({"llvm.noalias": ir.UnitAttr.get()} if u else {}) for u in unique])
    # convert-func-to-llvm keeps llvm.noalias only on a bare pointer (static buffers); a buffer
    # passed as a descriptor (run-time sizes) gets it on its aligned pointer after the conversion
    # (call_parallel_bodies): the position of each in the descriptors' expanded arguments
    aligned, position = [], 3
    for v, u in zip(params, unique):
        if isinstance(v.type, ir.MemRefType):
            if u:
                aligned.append(position + 1)
            position += 3 + 2 * ir.MemRefType(v.type).rank
        else:
            position += 1
    fn.attributes[_NOALIAS_ALIGNED] = ir.DenseI32ArrayAttr.get([position] + aligned)   # (all the arguments first)
    return fn, entry


# A reduction over the first loop: each chunk's partial result starts from its combiner's identity.
_IDENTITY = {"arith.addf": -0.0, "arith.mulf": 1.0, "arith.maximumf": -math.inf, "arith.minimumf": math.inf,
             "arith.maxnumf": math.nan, "arith.minnumf": math.nan, "arith.addi": 0, "arith.muli": 1,
             "arith.ori": 0, "arith.xori": 0, "arith.andi": -1, "arith.maxui": 0, "arith.minui": -1,
             "arith.maxsi": "min", "arith.minsi": "max"}


def _combiners(op: ir.Operation, n_ins: int) -> list[str] | None:
    """For each output of a generic, the op that folds a value into it (`out = addf(out, v)`), or
    None unless every output is such an accumulation with an identity (_IDENTITY)."""
    block = op.regions[0].blocks[0]
    yielded = list(list(block.operations)[-1].operands)
    found = []
    for j, out in enumerate(list(block.arguments)[n_ins:]):
        v = yielded[j]
        if isinstance(v.owner, ir.Block):
            return None
        combine = as_operation(v.owner)
        others = [x for x in combine.operands if x != out]
        if combine.name not in _IDENTITY or len(list(combine.operands)) != 2 or len(others) != 1 \
                or sum(1 for _ in out.uses) != 1:
            return None
        found.append(combine.name)
    return found


def _identity(name: str, elem: ir.Type) -> ir.Value:
    value = _IDENTITY[name]
    if isinstance(elem, ir.FloatType):
        return arith.ConstantOp(elem, float(value)).result
    width = ir.IntegerType(elem).width
    value = {"min": -(1 << (width - 1)), "max": (1 << (width - 1)) - 1}.get(value, value)
    return arith.ConstantOp(elem, value).result


def _sizes(value: ir.Value) -> list[ir.Value]:
    """Each size of a buffer as an index value (a constant where static)."""
    return [ir.Operation.create("memref.dim", results=[ir.IndexType.get()], operands=[value, index(i)]).results[0]
            if ir.ShapedType.is_dynamic_size(s) else index(s) for i, s in enumerate(ir.MemRefType(value.type).shape)]


def _slot(partial: ir.Value, slot: ir.Value) -> ir.Value:
    """partial[slot]: one chunk's partial result (a view with the output's shape)."""
    t = ir.MemRefType(partial.type)
    shape = list(t.shape)[1:]
    dyn, dyn_offset = ir.ShapedType.get_dynamic_size(), ir.ShapedType.get_dynamic_stride_or_offset()
    strides = ["?" if s == dyn_offset else str(s) for s in t.get_strides_and_offset()[0][1:]]
    dims = "".join(f"{'?' if s == dyn else s}x" for s in shape)
    result = ir.Type.parse(f"memref<{dims}{t.element_type}, strided<[{', '.join(strides)}], offset: ?>>")
    run_time = [v for v, s in zip(_sizes(partial)[1:], shape) if s == dyn]
    return ir.Operation.create("memref.subview", results=[result], operands=[partial, slot, *run_time], attributes={
        "static_offsets": ir.DenseI64ArrayAttr.get([dyn_offset] + [0] * len(shape)),
        "static_sizes": ir.DenseI64ArrayAttr.get([1] + shape),
        "static_strides": ir.DenseI64ArrayAttr.get([1] * t.rank),
        "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1, len(run_time), 0])}).results[0]


def _fold(combine: str, into: ir.Value, partials: ir.Value, chunk: ir.Value) -> None:
    """into[i...] = combine(into[i...], partials[chunk, i...]) over into's elements."""
    def body(ivs: list[ir.Value]) -> None:
        a = load(into, ivs)
        b = load(partials, [chunk] + ivs)
        store(ir.Operation.create(combine, results=[a.type], operands=[a, b]).results[0], into, ivs)
    loop_nest(_sizes(into), body)


def _run_time_size(op: ir.Operation, dim: int) -> ir.Value:
    """The size of loop `dim` of `op`, read from an operand that has it."""
    for value, attr in zip(op.operands, ir.ArrayAttr(op.attributes["indexing_maps"])):
        results = [str(e) for e in ir.AffineMapAttr(attr).value.results]
        if f"d{dim}" in results:
            return ir.Operation.create("memref.dim", results=[ir.IndexType.get()], operands=[
                value, index(results.index(f"d{dim}"))]).results[0]
    raise AssertionError(f"no operand of {op.name} has loop {dim}")


def _run_time_grain(op: ir.Operation, dim: int, n: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Run-time sizes: (the iterations of a chunk of loop `dim`, as the static sizes would give
    them; all the iterations of `op`)."""
    inner = index(1)
    for d in range(len(ir.ArrayAttr(op.attributes["iterator_types"]))):
        if d != dim:
            inner = arith.MulIOp(inner, _run_time_size(op, d)).result
    inner = arith.MaxUIOp(inner, index(1)).result
    grain = arith.MaxUIOp(arith.CeilDivUIOp(index(CHUNK_ELEMENTS), inner).result,
                          arith.CeilDivUIOp(n, index(MAX_PARTIALS)).result).result
    return grain, arith.MulIOp(n, inner).result


def _if_at_least(size: ir.Value, least: int, op: ir.Operation) -> ir.Operation:
    """`if (size >= least) {...} else op`: `op` (an op or loop known to run as it is here) moves
    into the else branch, so small sizes run it as before, with no call (an LSTM's steps with
    run-time sizes ran 2x slower outlined). Returns the then branch's yield, to insert before."""
    return _if_true(arith.CmpIOp(arith.CmpIPredicate.uge, size, index(least)).result, op)


def _if_true(condition: ir.Value, op: ir.Operation) -> ir.Operation:
    """`if (condition) {...} else op` (_if_at_least)."""
    branch = scf.IfOp(condition, [], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        then_end = scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp([])
    op.move_before(list(branch.else_block.operations)[-1])
    return then_end.operation


def _shift_indices(op: ir.Operation, dim: int, lo: ir.Value) -> None:
    """In a chunk's copy of a generic, the index of the split loop counts from the chunk's start:
    it is shifted by `lo` (a gather reads its indices' array at linalg.index 0)."""
    for index_op in ops_where(op, lambda o: o.name == "linalg.index" and ir.IntegerAttr(o.attributes["dim"]).value == dim):
        with ir.InsertionPoint.after(index_op), index_op.location:
            shifted = arith.AddIOp(index_op.results[0], lo)
        index_op.results[0].replace_all_uses_except(shifted.result, shifted.operation)


def _outline(op: ir.Operation, dim: int, positions: list[int | None], sizes: list[int | None], module: ir.Module,
             name: str, combiners: list[str] | None = None) -> None:
    """`op` becomes a call of `name` over the rows of its loop `dim` (module doc). With `combiners`
    (a reduction over that loop, _combiners), each chunk reduces its rows into a partial result of
    its own, which the caller folds into the outputs in chunk order. Run-time sizes: the call is
    guarded by the size (_if_at_least), the partial results allocated behind the guard."""
    operands = list(op.operands)
    n_ins = len(operands) - len(combiners) if combiners else len(operands)
    partials: list[ir.Value] = []
    with op.location, ir.InsertionPoint(op):
        n = _run_time_size(op, dim)
        if None in sizes:
            grain, total = _run_time_grain(op, dim, n)
            anchor = _if_at_least(total, _min_iterations(op), op)
        else:
            inner = math.prod(sizes) // sizes[dim]
            static_grain = max(1, -(-CHUNK_ELEMENTS // inner), -(-sizes[dim] // MAX_PARTIALS))
            grain, anchor = index(static_grain), op
    with op.location, ir.InsertionPoint(anchor):
        for out in operands[n_ins:] if combiners else []:
            t = ir.MemRefType(out.type)
            if None in sizes:
                chunks = [arith.CeilDivUIOp(n, grain).result]
                dyn = [v for v, s in zip(_sizes(out), t.shape) if ir.ShapedType.is_dynamic_size(s)]
                shape = [ir.ShapedType.get_dynamic_size()] + list(t.shape)
            else:
                chunks, dyn, shape = [], [], [-(-sizes[dim] // static_grain)] + list(t.shape)
            partials.append(memref.AllocOp(ir.MemRefType.get(shape, t.element_type), chunks + dyn, []).result)
    # each buffer passed once: an op updating a buffer in place reads and writes it through one
    # pointer (two equal pointers LLVM cannot tell apart fail its vectorizer's overlap check at
    # run time: the GELU of a transformer block ran scalar, 1.35x slower)
    where = {v: positions[k] for k, v in enumerate(operands)}
    captured, uses = captures([op])
    # an operand's buffer read inside the body too (a gather fused into it loads from the whole
    # buffer at absolute indices) is passed whole, beside its view
    in_body = {v for user, _, v in uses if user != op}
    outside = [v for v in captured if v not in where or v in in_body]
    params = list(dict.fromkeys(operands[:n_ins] + [v for v in outside if not _copied(v)])) + partials
    with op.location:
        fn, entry = _chunk_function(module, name, params)
        lo, hi = entry.arguments[0], entry.arguments[1]
        with ir.InsertionPoint(entry):
            size = arith.SubIOp(hi, lo).result
            args = dict(zip(params, list(entry.arguments)[3:]))
            views = {v: args[v] if where[v] is None else _subview(args[v], where[v], lo, size)
                     for v in dict.fromkeys(operands[:n_ins])}
            if combiners:
                slot = arith.DivUIOp(lo, entry.arguments[2]).result
                for out, partial, combine in zip(operands[n_ins:], partials, combiners):
                    views[out] = view = _slot(args[partial], slot)
                    start = _identity(combine, ir.MemRefType(view.type).element_type)
                    loop_nest(_sizes(view), lambda ivs: store(start, view, ivs))
            inside = {v: as_operation(v.owner).clone().results[0] if _copied(v) else args[v] for v in outside}
            copy = op.clone()
            for k, v in enumerate(operands):
                copy.operands[k] = views[v]
            for inner_op, i, v in captures([copy])[1]:
                if v in inside:
                    inner_op.operands[i] = inside[v]
            _shift_indices(copy, dim, lo)
            func.ReturnOp([])
        # the call site: rows [0, n), `grain` a chunk
        with ir.InsertionPoint(anchor):
            func.CallOp([], name, [index(0), n, grain, *params])
            for out, partial, combine in zip(operands[n_ins:], partials, combiners or []):
                chunk_loop = scf.ForOp(index(0), _sizes(partial)[0], index(1))
                with ir.InsertionPoint(chunk_loop.body):
                    _fold(combine, out, partial, chunk_loop.induction_variable)
                    scf.YieldOp([])
                memref.DeallocOp(partial)
    if anchor == op:
        op.erase()


def _mark(loop: ir.Operation) -> str | None:
    return next((m for m in (PARALLEL_LOOP, PARALLEL_SUM) if m in loop.attributes), None)


_WRITES = {"vector.transfer_write": 1, "memref.store": 1, "vector.store": 1}


def _sum_buffer(loop: ir.Operation, private: list[ir.Value]) -> ir.Value | None:
    """The one buffer a PARALLEL_SUM loop's trips add into: every write inside the loop, but to its
    loop-only buffers, goes to a view of it; it has static sizes and the loop reads it as it is."""
    roots = {view_root(o.operands[_WRITES[o.name]]) for o in ops_where(loop, lambda o: o.name in _WRITES)}
    for o in ops_where(loop, lambda o: o.name.startswith("linalg.") and "operandSegmentSizes" in o.attributes):
        n_ins = list(ir.DenseI32ArrayAttr(o.attributes["operandSegmentSizes"]))[0]
        roots |= {view_root(v) for v in list(o.operands)[n_ins:]}   # (a packing copy's buffer)
    roots -= set(private)
    if len(roots) != 1:
        return None
    (root,) = roots
    seen = [v for v in captures([loop])[0] if view_root(v) == root]   # (C, or the packed kernel's view of it)
    if len(seen) != 1:
        return None
    t = ir.MemRefType(seen[0].type)
    return seen[0] if t.has_static_shape and "strided" not in str(t.layout) else None


def _loop_plan(loop: ir.Operation) -> tuple[int | None, int, ir.Value | None] | None:
    """(trips, trips a chunk, for PARALLEL_SUM the buffer added into) of an scf.for marked to run
    on the pool: at least PARALLEL_MIN_FLOPS of work (the mark's value: a trip's), no loop-carried
    values; trips None where the bounds are known at run time only (the call is guarded:
    _outline_loop). None for any other loop."""
    mark = _mark(loop)
    if mark is None or len(loop.results):
        return None
    step = constant_int(loop.operands[2])
    work = ir.IntegerAttr(loop.attributes[mark]).value
    grain = max(1, -(-CHUNK_FLOPS // max(work, 1)))
    private = _private_buffers(loop, captures([loop])[0])
    if not step:
        return None
    total = static_trips(loop)
    if total is not None and (total < 2 or total * work < PARALLEL_MIN_FLOPS):
        return None
    if mark == PARALLEL_LOOP:
        return total, grain, None
    target = _sum_buffer(loop, private)
    if target is None:
        return None
    return total, grain if total is None else max(grain, -(-total // MAX_PARTIALS)), target


def _loop_only(v: ir.Value, loop: ir.Operation) -> bool:
    """Whether `v` is a buffer allocated before `loop` (buffer-loop-hoisting moved a packing buffer
    there) that only the loop uses, besides its deallocation."""
    if isinstance(v.owner, ir.Block) or as_operation(v.owner).name not in ("memref.alloc", "memref.alloca"):
        return False
    return all(u.name == "memref.dealloc" or is_inside(u, loop) for u in (as_operation(x.owner) for x in v.uses))


def _private_buffers(loop: ir.Operation, captured: list[ir.Value]) -> list[ir.Value]:
    """The loop-only buffers (_loop_only) of `loop`: each chunk allocates its own (with run-time
    sizes, from the sizes the caller passes)."""
    return [v for v in captured if _loop_only(v, loop)]


# Views whose only operand is their source (static offsets, sizes and strides).
_VIEWS = frozenset({"memref.subview", "memref.expand_shape", "memref.collapse_shape"})


def _is_view(v: ir.Value) -> bool:
    return not isinstance(v.owner, ir.Block) and as_operation(v.owner).name in _VIEWS


def _views(captured: list[ir.Value]) -> tuple[list[ir.Value], list[ir.Value]]:
    """(the values a chunk takes, the views it makes again from them, sources first): views among
    `captured` are replaced by their root buffers and their run-time offsets and sizes. Nine views
    of one padded buffer (a 3x3 convolution's taps, sum_tiles.py) are then one pointer LLVM sees
    them share, their reads one base plus constant offsets, not nine pointers loaded from the
    chunk's context (which cost Loop Strength Reduction 50 ms and spilled the kernel's pointers)."""
    chain: list[ir.Value] = []
    taken: list[ir.Value] = []
    pending = list(captured)
    while pending:
        v = pending.pop(0)
        if not _is_view(v):
            if v not in taken:
                taken.append(v)
            continue
        if v in chain:
            continue
        sources = list(as_operation(v.owner).operands)
        unseen = [x for x in sources if _is_view(x) and x not in chain]
        if unseen:   # (its sources first)
            pending[:0] = unseen + [v]
            continue
        chain.append(v)
        pending.extend(sources)
    return taken, chain


def _outline_loop(loop: ir.Operation, trips: int | None, grain: int, target: ir.Value | None, module: ir.Module,
                  name: str) -> None:
    """`loop` becomes a call `name(0, trips, grain, captured...)` of a function running its trips
    [lo, hi) (module doc); a PARALLEL_SUM loop's chunks add into buffers of their own, `partials`,
    which the caller adds into `target` in chunk order. Run-time bounds: the call is guarded by the
    number of trips (on the pool from PARALLEL_MIN_FLOPS, else the loop as it was, with its
    buffers), the partial sums allocated behind the guard."""
    captured, _ = captures([loop])
    captured, views = _views(captured)
    private = _private_buffers(loop, captured)
    copied = [v for v in captured if v in private or (not isinstance(v.owner, ir.Block)
                                                      and as_operation(v.owner).name in ("arith.constant", "ub.poison"))]
    params = [v for v in captured if v not in copied and (target is None or v != target)]
    # (the run-time sizes of private buffers: constants are copied like the others')
    for size in (x for v in private for x in as_operation(v.owner).operands):
        if size not in params and size not in copied:
            (copied if not isinstance(size.owner, ir.Block) and as_operation(size.owner).name == "arith.constant"
             else params).append(size)
    lb, step = loop.operands[0], loop.operands[2]
    mark = _mark(loop)
    with loop.location, ir.InsertionPoint(loop):
        if trips is None:
            n = arith.CeilDivUIOp(arith.SubIOp(loop.operands[1], lb).result, step).result
            grain_value = index(grain) if target is None else \
                arith.MaxUIOp(index(grain), arith.CeilDivUIOp(n, index(MAX_PARTIALS)).result).result
            work = ir.IntegerAttr(loop.attributes[mark]).value
            least = -(-PARALLEL_MIN_FLOPS // max(work, 1))
            # (one trip worth the pool: no guard, and no serial copy of the loop for its else
            # branch; the pool runs no chunk for n = 0)
            anchor = _if_at_least(n, least, loop) if least > 1 else loop
        else:
            n, grain_value, anchor = index(trips), index(grain), loop
    del loop.attributes[mark]
    partials = None
    if target is not None:
        t = ir.MemRefType(target.type)
        with loop.location, ir.InsertionPoint(anchor):
            if trips is None:
                chunks = [arith.CeilDivUIOp(n, grain_value).result]
                shape = [ir.ShapedType.get_dynamic_size()] + list(t.shape)
            else:
                chunks, shape = [], [-(-trips // grain)] + list(t.shape)
            partials = memref.AllocOp(ir.MemRefType.get(shape, t.element_type), chunks, []).result
        params.append(partials)
    with loop.location:
        fn, entry = _chunk_function(module, name, params)
        with ir.InsertionPoint(entry):
            mapping = dict(zip(params, list(entry.arguments)[3:]))
            for v in sorted(copied, key=lambda v: v in private) + views:   # (constants first: buffers' sizes)
                clone = as_operation(v.owner).clone()
                for i, x in enumerate(clone.operands):
                    clone.operands[i] = mapping[x]
                mapping[v] = clone.results[0]
            if target is not None:   # this chunk's sum, from the identity (-0.0 + x is x)
                mapping[target] = mine = memref.AllocOp(ir.MemRefType(target.type), [], []).result
                zero = arith.ConstantOp(ir.MemRefType(target.type).element_type, -0.0).result
                loop_nest(_sizes(target), lambda ivs: store(zero, mine, ivs))
            lo, hi = (arith.AddIOp(mapping[lb], arith.MulIOp(a, mapping[step]).result).result
                      for a in (entry.arguments[0], entry.arguments[1]))
            copy = loop.clone()
            copy.operands[0], copy.operands[1] = lo, hi
            for inner, i, v in captures([copy])[1]:
                if inner != as_operation(copy) or i >= 3:
                    inner.operands[i] = mapping[v]
            copy.operands[2] = mapping[step]
            if target is not None:
                slot = _slot(mapping[partials], arith.DivUIOp(entry.arguments[0], entry.arguments[2]).result)
                loop_nest(_sizes(target), lambda ivs: store(load(mine, ivs), slot, ivs))
                memref.DeallocOp(mine)
            for v in private:
                memref.DeallocOp(mapping[v])
            func.ReturnOp([])
        with ir.InsertionPoint(anchor):
            func.CallOp([], name, [index(0), n, grain_value, *params])
            if partials is not None:
                chunk_loop = scf.ForOp(index(0), _sizes(partials)[0], index(1))
                with ir.InsertionPoint(chunk_loop.body):
                    _fold("arith.addf", target, partials, chunk_loop.induction_variable)
                    scf.YieldOp([])
                memref.DeallocOp(partials)
    if anchor != loop:
        return   # (the loop and its buffers stay, for the else branch)
    loop.erase()
    for v in private:
        for u in list(v.uses):
            as_operation(u.owner).erase()
        as_operation(v.owner).erase()


def _parallel_loops(module: ir.Module) -> list[tuple[ir.Operation, tuple[int | None, int, ir.Value | None]]]:
    """The outermost marked loops that run on the pool; the marks of the others go."""
    marked = ops_where(module.operation, lambda o: o.name == "scf.for" and _mark(o) is not None,
                       ir.WalkOrder.PRE_ORDER)
    chosen: list[tuple[ir.Operation, tuple[int | None, int, ir.Value | None]]] = []
    for loop in marked:   # (outer loops first: a nest's inner marked loops run serially in a chunk)
        plan = _loop_plan(loop)
        if plan is not None and not any(is_inside(loop, outer) for outer, _ in chosen):
            chosen.append((loop, plan))
    for loop in marked:
        if all(loop != c for c, _ in chosen):
            del loop.attributes[_mark(loop)]
    return chosen


def parallelize_loops(module: ir.Module) -> None:
    """Big linalg ops with a parallel first loop: calls of functions the pool runs in chunks
    (module doc)."""
    loops = _parallel_loops(module)
    found = [(op, plan) for op in ops_where(module.operation, lambda o: o.name == "linalg.generic")
             if not any(is_inside(op, loop) for loop, _ in loops)   # (serial in a chunk)
             for plan in [_eligible(op)] if plan is not None]
    for k, (op, (dim, positions, sizes, combiners)) in enumerate(found):
        _outline(op, dim, positions, sizes, module, f"{_PREFIX}{k}", combiners)
    for k, (loop, (trips, grain, target)) in enumerate(loops, start=len(found)):
        _outline_loop(loop, trips, grain, target, module, f"{_PREFIX}{k}")


# -- after the LLVM conversion -------------------------------------------------------------------
def _llvm_func(module: ir.Module, name: str, params: list[str]) -> tuple[ir.Operation, ir.Block]:
    with ir.InsertionPoint(module.body), ir.Location.unknown():
        fn = ir.Operation.create("llvm.func", regions=1, attributes={
            "sym_name": ir.StringAttr.get(name),
            "function_type": ir.TypeAttr.get(ir.Type.parse(f"!llvm.func<void ({', '.join(params)})>")),
            "linkage": ir.Attribute.parse("#llvm.linkage<internal>")})
    block = fn.regions[0].blocks.append(*[ir.Type.parse(p) for p in params])
    return fn, block


def _task(module: ir.Module, callee: str, types: list[ir.Type], offsets: list[int]) -> str:
    """`__sprue_task_K(lo, hi, ctx)`: loads the body's operands from ctx and calls it."""
    name = _TASK + callee[len(_PREFIX):]
    fn, block = _llvm_func(module, name, ["i64", "i64", "!llvm.ptr"])
    with ir.InsertionPoint(block), ir.Location.unknown():
        loaded = [ir.Operation.create("llvm.load", results=[t], operands=[_gep(block.arguments[2], off)],
                                      attributes=_not_atomic()).results[0] for t, off in zip(types, offsets)]
        ir.Operation.create("llvm.call", operands=[block.arguments[0], block.arguments[1], *loaded], attributes={
            "callee": ir.FlatSymbolRefAttr.get(callee),
            "operandSegmentSizes": ir.DenseI32ArrayAttr.get([2 + len(loaded), 0]),
            "op_bundle_sizes": ir.DenseI32ArrayAttr.get([])})
        ir.Operation.create("llvm.return")
    return name


def _noalias_descriptors(fn: ir.Operation) -> None:
    """llvm.noalias on the aligned pointer of each descriptor argument of chunk body `fn` whose
    buffer no other argument views (_chunk_function): without it a chunk with run-time sizes ran
    its loads and stores in program order (a scatter's trips 1.6x slower than with static sizes)."""
    if _NOALIAS_ALIGNED not in fn.attributes:
        return
    expanded, *aligned = ir.DenseI32ArrayAttr(fn.attributes[_NOALIAS_ALIGNED])
    del fn.attributes[_NOALIAS_ALIGNED]
    n_args = len(fn.regions[0].blocks[0].arguments)
    if n_args != expanded or not aligned:
        return   # (bare pointers: convert-func-to-llvm kept the attribute)
    attrs = list(ir.ArrayAttr(fn.attributes["arg_attrs"])) if "arg_attrs" in fn.attributes else \
        [ir.DictAttr.get({})] * n_args
    for i in aligned:
        attrs[i] = ir.DictAttr.get({"llvm.noalias": ir.UnitAttr.get()})
    fn.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)


def call_parallel_bodies(module: ir.Module) -> None:
    """Each call of a parallel body: a call of the pool with its operands in a stack struct (module doc)."""
    bodies = {ir.StringAttr(op.attributes["sym_name"]).value: op for op in map(as_operation, module.body.operations)
              if op.name == "llvm.func" and ir.StringAttr(op.attributes["sym_name"]).value.startswith(_PREFIX)}
    if not bodies:   # (no walk of the whole module: a deep program's glue is most of it)
        return
    calls = ops_where(module.operation, lambda o: o.name == "llvm.call" and "callee" in o.attributes
                      and ir.FlatSymbolRefAttr(o.attributes["callee"]).value.startswith(_PREFIX))
    if not calls:
        return
    ptr, i64 = ir.Type.parse("!llvm.ptr"), ir.IntegerType.get_signless(64)
    tasks: dict[str, str] = {}
    with ir.InsertionPoint(module.body), ir.Location.unknown():
        ir.Operation.create("llvm.func", regions=1, attributes={
            "sym_name": ir.StringAttr.get(PARALLEL_SYMBOL),
            "function_type": ir.TypeAttr.get(ir.Type.parse("!llvm.func<void (ptr, ptr, i64, i64)>"))})
    for call in calls:
        callee = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
        operands = list(call.operands)
        n, grain, rest = operands[1], operands[2], operands[2:]   # (the body takes grain too)
        types = [v.type for v in rest]
        layout = member_offsets([str(t).removeprefix("!llvm.") for t in types])
        offsets, end = [o for o, _ in layout[:-1]], layout[-1][0]
        if callee not in tasks:
            tasks[callee] = _task(module, callee, types, offsets)
            _noalias_descriptors(bodies[callee])
        # the struct at the caller's entry, not where the call is: in a loop body (a scan's step)
        # an alloca there would grow the stack at every trip
        entry = enclosing(call, "llvm.func").regions[0].blocks[0]
        with ir.InsertionPoint.at_block_begin(entry), call.location:
            one = ir.Operation.create("llvm.mlir.constant", results=[i64], attributes={"value": ir.IntegerAttr.get(i64, 1)})
            ctx = ir.Operation.create("llvm.alloca", results=[ptr], operands=[one.results[0]], attributes={
                "elem_type": ir.TypeAttr.get(ir.Type.parse(f"!llvm.array<{max(end, 1)} x i8>")),
                "alignment": ir.IntegerAttr.get(i64, 16)}).results[0]
        with ir.InsertionPoint(call), call.location:
            for v, off in zip(rest, offsets):
                ir.Operation.create("llvm.store", operands=[v, _gep(ctx, off)], attributes=_not_atomic())
            task = ir.Operation.create("llvm.mlir.addressof", results=[ptr], attributes={
                "global_name": ir.FlatSymbolRefAttr.get(tasks[callee])}).results[0]
            ir.Operation.create("llvm.call", operands=[task, ctx, n, grain], attributes={
                "callee": ir.FlatSymbolRefAttr.get(PARALLEL_SYMBOL),
                "operandSegmentSizes": ir.DenseI32ArrayAttr.get([4, 0]),
                "op_bundle_sizes": ir.DenseI32ArrayAttr.get([])})
        call.erase()


__all__ = ["CHUNK_ELEMENTS", "PARALLEL_MIN_NS", "call_parallel_bodies", "parallelize_loops"]
