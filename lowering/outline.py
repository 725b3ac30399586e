"""Big functions split into one function per outermost loop nest, identical nests sharing one.

LLVM's function passes are superlinear in a function's size (the loop vectorizer's and GVN's
analyses, constraint elimination, instruction selection over one huge block list), and so are
some of MLIR's conversions to the LLVM dialect: a 100-layer network (`tanh(x @ w)` on 16 x 16)
lowered to one function of 16k lines of LLVM IR spent 6.6 s in LLVM's O3 passes and 3.4 s in
instruction selection, and its per-layer cost grew fivefold from 100 to 300 layers. XLA compiles
such a program as many small kernels, each fusion its own function, and compiles a kernel once
however often the program runs it; IREE's dispatch regions are the same idea.

Here, on loops over buffers (the pipeline's "loops" stage, before the LLVM conversion): in a
function with at least OUTLINE_MIN_NESTS outermost loop nests, each nest (an scf.for, scf.while
or scf.parallel no loop encloses) becomes a private function taking the values it uses from
outside (buffers, run-time sizes, scalars; constants are copied in, so that bounds stay static)
and returning what the nest returns, and a call replaces it. Nests whose functions print the same
(the same ops on the same types: a deep network's layers, an unrolled loop, a gradient's repeated
steps) share one function, compiled once. The functions are `noinline` (LLVM would otherwise
inline them back into one function), so LLVM optimizes each on its own. What is lost: optimizing
across nests (each nest reads and writes memory, so little is), a call per nest per run
(nanoseconds), and LLVM's knowledge that a nest's buffers, fresh allocations, do not alias (see
OUTLINE_MIN_NESTS): a function of fewer nests keeps everything inline.
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import func

from sprue.lowering.mlir_util import LOOP_OPS, as_operation, call_equal_function, captures, defining_op

# Values defined by these ops (no operands, no side effects) are copied into the outlined function
# instead of being passed: loop bounds and steps stay constants there.
_COPIED = frozenset({"arith.constant", "memref.get_global", "ub.poison"})
# From 48 nests: below, the realistic programs' biggest functions (up to 30 nests: a CNN with
# run-time sizes) ran slower outlined (that CNN 2.0 -> 2.8 ms, min of 31, one core): in a function
# of its own a nest's buffers are pointer arguments, no longer fresh allocations LLVM knows do not
# alias, and its vectorized loops check for overlap or are not vectorized. Deep unrolled
# programs (a 24-layer network has ~50 nests) are where one function's size costs superlinearly.
OUTLINE_MIN_NESTS = 48
_PREFIX = "__sprue_nest_"


def _outermost_nests(fn: ir.Operation) -> list[ir.Operation]:
    """The loops of `fn` that no other loop encloses, in program order."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in LOOP_OPS:
            found.append(op)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE
    fn.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


# A static buffer is passed to (and returned from) a private function as its aligned pointer
# alone, not as a descriptor of 3 + 2 * rank values (MLIR's bare-pointer calling convention, per
# function and call in convert-func-to-llvm): a deep network's glue function built, unpacked and
# passed 21 values per 2-D product; what LLVM had to clean up from them was half its time at 300
# layers.
_BARE_PTR = "llvm.bareptr"


def _bare_pointer_ok(t: ir.Type) -> bool:
    """Whether a value of type `t` may be passed as a bare pointer: not a buffer, or one whose
    shape, strides and offset are static (its type says all but the pointer)."""
    if isinstance(t, ir.UnrankedMemRefType):
        return False
    if not isinstance(t, ir.MemRefType):
        return True
    t = ir.MemRefType(t)
    strides, offset = t.get_strides_and_offset()
    return (t.has_static_shape and t.memory_space is None
            and not any(t.is_dynamic_stride_or_offset(x) for x in [*strides, offset]))


def new_private_function(module: ir.Module, name: str, inputs: list[ir.Type],
                         results: list[ir.Type]) -> tuple[func.FuncOp, ir.Block]:
    """A new private, noinline, internal function `name` at the end of `module`, and its entry block."""
    with ir.InsertionPoint(module.body):
        fn = func.FuncOp(name, ir.FunctionType.get(inputs, results), visibility="private")
        # func-to-llvm keeps llvm.-prefixed attributes: never inlined back, and internal (a
        # private func.func would be exported: two kernels linked into one program clash)
        fn.attributes["llvm.no_inline"] = ir.UnitAttr.get()
        fn.attributes["llvm.linkage"] = ir.Attribute.parse("#llvm.linkage<internal>")
        return fn, fn.add_entry_block()


def _outline(nest: ir.Operation, module: ir.Module, name: str, seen: dict[str, str]) -> None:
    """Moves `nest` into a new private function `name` (or, where one that prints the same exists,
    drops it and calls that one) and calls it in the nest's place."""
    captured, uses = captures([nest])
    copied = [v for v in captured if not isinstance(v.owner, ir.Block) and defining_op(v).name in _COPIED]
    kept = set(copied)
    passed = [v for v in captured if v not in kept]
    results = [r.type for r in nest.results]
    with nest.location:
        fn, entry = new_private_function(module, name, [v.type for v in passed], results)
        with ir.InsertionPoint(entry):
            replacement = {v: a for v, a in zip(passed, entry.arguments)}
            for v in copied:
                replacement[v] = defining_op(v).clone().results[0]
        with ir.InsertionPoint(nest):
            call = func.CallOp(results, name, passed)
        for old, new in zip(nest.results, call.results):
            old.replace_all_uses_with(new)
        nest.detach_from_parent()
        ir.InsertionPoint(entry).insert(nest)
        with ir.InsertionPoint(entry):
            func.ReturnOp(list(nest.results))
    for op, i, value in uses:
        op.operands[i] = replacement[value]
    call_equal_function(fn, call, name, seen)


def pass_bare_pointers(module: ir.Module) -> None:
    """Private functions whose buffers all have static shapes, strides and offsets (outlined nests,
    partition.py's parts) and their calls take and return bare pointers."""
    bare: set[str] = set()
    for op in map(as_operation, module.body.operations):
        attrs = op.attributes
        if (op.name == "func.func" and len(op.regions[0].blocks) and "sym_visibility" in attrs
                and ir.StringAttr(attrs["sym_visibility"]).value == "private"):
            ftype = ir.FunctionType(ir.TypeAttr(attrs["function_type"]).value)
            if all(_bare_pointer_ok(t) for t in [*ftype.inputs, *ftype.results]):
                attrs[_BARE_PTR] = ir.UnitAttr.get()
                bare.add(ir.StringAttr(attrs["sym_name"]).value)

    def mark(op: ir.Operation) -> ir.WalkResult:
        if op.name == "func.call" and ir.FlatSymbolRefAttr(op.attributes["callee"]).value in bare:
            op.attributes[_BARE_PTR] = ir.UnitAttr.get()
        return ir.WalkResult.ADVANCE
    if bare:
        module.operation.walk(mark)


def outline_loop_nests(module: ir.Module) -> None:
    """Each outermost loop nest of a function with at least OUTLINE_MIN_NESTS of them becomes a
    call of a private, noinline function; nests that print the same share one (module doc)."""
    functions = [op for op in map(as_operation, module.body.operations)
                 if op.name == "func.func" and len(op.regions[0].blocks)]
    seen: dict[str, str] = {}
    count = 0
    for fn in functions:
        nests = _outermost_nests(fn)
        if len(nests) < OUTLINE_MIN_NESTS:
            continue
        for nest in nests:
            _outline(nest, module, f"{_PREFIX}{count}", seen)
            count += 1


__all__ = ["OUTLINE_MIN_NESTS", "new_private_function", "outline_loop_nests", "pass_bare_pointers"]
