"""Parallel loops: the outer dimension of big elementwise linalg ops runs in chunks on the pool.

Two rewrites, on either side of the LLVM conversion (the pool: parallel_runtime.py):

- `parallelize_loops` (buffers, before convert-linalg-to-loops): a linalg.generic whose loops are
  all parallel (elementwise ops, broadcasts, transposes), whose operands all index it through projected permutations (each output indexing
  it: a chunk writes its own rows) and which does at least PARALLEL_MIN_ELEMENTS iterations
  becomes a call `__sprue_par_K(lo, hi, grain, operands...)` of a private function doing the op on
  the rows [lo, hi) of each operand that has that dimension (subviews); the call site covers
  [0, n) with `grain` rows a chunk, at least CHUNK_ELEMENTS iterations each. Ops that read an
  output's buffer through another view, or use linalg.index, stay as they are; so, for now, do
  ops with run-time sizes and ops inside loops and branches: outlined, they ran slower on one
  thread (an LSTM scan's steps with run-time sizes 2x, an MLP training loop's steps 1.3x: the
  call per step and what later rewrites no longer see across the call), which the measured
  thresholds for them must first win back.
- `call_parallel_bodies` (LLVM dialect): each call of such a function becomes a call of the pool,
  `_sprue_parallel_for(task, ctx, n, grain)`: its operands are stored in a struct on the caller's
  stack (`ctx`), and `__sprue_task_K(lo, hi, ctx)` loads them back and calls the body.

The chunks' bounds follow from n and grain only, and each writes only its own rows, so results
are the same bits with any number of threads. Reductions over the first dimension, products and
scans are not split yet.
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, func

from sprue.lowering.entry_results import _gep, _not_atomic, _parent_function, member_offsets
from sprue.lowering.mlir_util import LOOP_OPS, as_operation, captures, ops_where, view_root
from sprue.lowering.outline import new_private_function
from sprue.lowering.parallel_runtime import PARALLEL_SYMBOL

# Below this many iterations of a loop nest, a parallel call costs more than it saves (the
# workers' wake-up is several microseconds).
PARALLEL_MIN_ELEMENTS = 1 << 16
# Each chunk does at least this many iterations.
CHUNK_ELEMENTS = 1 << 14
_PREFIX = "__sprue_par_"
_TASK = "__sprue_task_"
def _dim_positions(op: ir.Operation) -> list[int | None] | None:
    """For each operand, where its indexing map puts loop dimension 0 (None: not there); None if a
    map is not a projected permutation."""
    out = []
    for attr in ir.ArrayAttr(op.attributes["indexing_maps"]):
        amap = ir.AffineMapAttr(attr).value
        if not amap.is_projected_permutation:
            return None
        pos = [i for i, e in enumerate(amap.results) if str(e) == "d0"]
        out.append(pos[0] if pos else None)
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


def _eligible(op: ir.Operation) -> tuple[list[int | None], list[int]] | None:
    """(where each operand has the first loop dimension, the loop sizes) of an op to run on the
    pool (module doc); None for any other."""
    if op.name != "linalg.generic" or len(op.results):
        return None
    if not all(isinstance(v.type, ir.MemRefType) for v in op.operands):
        return None
    iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    if not iterators or not all("parallel" in i for i in iterators):
        return None   # (reductions: their accumulators, kept in registers by accumulators.py, not on subviews yet)
    positions = _dim_positions(op)
    n_ins = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[0]
    if positions is None or any(p is None for p in positions[n_ins:]):
        return None
    if ops_where(op, lambda o: o.name == "linalg.index"):
        return None
    operands = list(op.operands)
    if any(v not in operands and (isinstance(v.owner, ir.Block) or as_operation(v.owner).name != "arith.constant")
           for v in captures([op])[0]):   # the body reads a value from outside: constants only (copied)
        return None
    seen: dict[ir.Value, int | None] = {}
    for v, p in zip(operands, positions):
        if seen.setdefault(v, p) != p:   # one buffer, its rows along two dimensions
            return None
    outs = {view_root(v) for v in operands[n_ins:]}
    for k, v in enumerate(operands[:n_ins]):   # an output's buffer read through another view
        if view_root(v) in outs and not any(v == o and positions[k] == positions[n_ins + j]
                                            for j, o in enumerate(operands[n_ins:])):
            return None
    sizes = _loop_sizes(op)
    if any(s is None for s in sizes) or _in_loop(op):
        return None
    total = 1
    for s in sizes:
        total *= s
    if total < PARALLEL_MIN_ELEMENTS or sizes[0] < 2:
        return None
    return positions, sizes


def _in_loop(op: ir.Operation) -> bool:
    """Whether a loop or a branch encloses `op` in its function."""
    parent = as_operation(op.parent)
    while parent.name not in ("func.func", "builtin.module"):
        if parent.name in LOOP_OPS or parent.name == "scf.if":
            return True
        parent = as_operation(parent.parent)
    return False


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


def _outline(op: ir.Operation, positions: list[int | None], sizes: list[int], module: ir.Module, name: str) -> None:
    index = ir.IndexType.get()
    operands = list(op.operands)
    # each buffer passed once: an op updating a buffer in place reads and writes it through one
    # pointer (two equal pointers LLVM cannot tell apart fail its vectorizer's overlap check at
    # run time: the GELU of a transformer block ran scalar, 1.35x slower)
    params = list(dict.fromkeys(operands))
    where = {v: positions[k] for k, v in enumerate(operands)}
    with op.location:
        fn, entry = new_private_function(module, name, [index, index, index] + [v.type for v in params], [])
        del fn.attributes["llvm.no_inline"]   # into its task, its only caller
        roots = [view_root(v) for v in params]
        arg_attrs = [ir.DictAttr.get({})] * 3
        for r in roots:   # a buffer no other operand views: LLVM may vectorize without overlap checks
            alone = sum(1 for o in roots if o == r) == 1
            arg_attrs.append(ir.DictAttr.get({"llvm.noalias": ir.UnitAttr.get()} if alone else {}))
        fn.attributes["arg_attrs"] = ir.ArrayAttr.get(arg_attrs)
        lo, hi = entry.arguments[0], entry.arguments[1]
        with ir.InsertionPoint(entry):
            size = arith.SubIOp(hi, lo).result
            views = {v: entry.arguments[3 + k] if where[v] is None else _subview(entry.arguments[3 + k], where[v], lo, size)
                     for k, v in enumerate(params)}
            constants = {}
            for v in captures([op])[0]:
                if v not in where:
                    constants[v] = as_operation(v.owner).clone().results[0]
            copy = op.clone()
            for k, v in enumerate(operands):
                copy.operands[k] = views[v]
            if constants:
                for inner, i, v in captures([copy])[1]:
                    if v in constants:
                        inner.operands[i] = constants[v]
            func.ReturnOp([])
        # the call site: rows [0, n), `grain` a chunk
        with ir.InsertionPoint(op):
            k = positions.index(next(p for p in positions if p is not None))
            zero = arith.ConstantOp(index, 0).result
            n = ir.Operation.create("memref.dim", results=[index], operands=[
                operands[k], arith.ConstantOp(index, positions[k]).result]).results[0]
            inner = 1
            for s in sizes[1:]:
                inner *= s
            grain = arith.ConstantOp(index, max(1, -(-CHUNK_ELEMENTS // inner))).result
            func.CallOp([], name, [zero, n, grain, *params])
    op.erase()


def parallelize_loops(module: ir.Module) -> None:
    """Big linalg ops with a parallel first loop: calls of functions the pool runs in chunks
    (module doc)."""
    found = [(op, plan) for op in ops_where(module.operation, lambda o: o.name == "linalg.generic")
             for plan in [_eligible(op)] if plan is not None]
    for k, (op, (positions, sizes)) in enumerate(found):
        _outline(op, positions, sizes, module, f"{_PREFIX}{k}")


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


def call_parallel_bodies(module: ir.Module) -> None:
    """Each call of a parallel body: a call of the pool with its operands in a stack struct (module doc)."""
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
        # the struct at the caller's entry, not where the call is: in a loop body (a scan's step)
        # an alloca there would grow the stack at every trip
        entry = _parent_function(call).regions[0].blocks[0]
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


__all__ = ["CHUNK_ELEMENTS", "PARALLEL_MIN_ELEMENTS", "call_parallel_bodies", "parallelize_loops"]
