"""Matrix products as calls of a library sprue compiles once: its own matmul code, with run-time sizes.

Every product the register kernel blocks (matmul.py) used to become its own loop nest in the
program: a tiled, packed, vectorized nest that LLVM's O3 and code generator then spend most of a
matmul-heavy program's first call on (attention's heads: ~0.1 s of 0.19 s; a product with
run-time sizes ~0.65 s of MLIR and LLVM). Here such a product becomes a call of a routine of a
small library instead, the way XLA's CPU backend calls Eigen's matmul and IREE its ukernels:

    _mlir_ciface_sprue_matmul_<form>_<f32|f64>(A *, B *, C *)   C += op(A) op(B), each a memref descriptor

form: nn (A B), tn (A^T B), nt (A B^T), bnn / bnt (the same per matrix of a batch, batch axis
first). The routines are sprue's own pipeline run on `linalg.matmul` / `linalg.batch_matmul` of
run-time sizes (library_text): the packed register kernel, its parallel split on sprue's pool
(_sprue_parallel_for of the runtime linked into every library), its checked allocations (a
failed one ends the calling kernel's call: the routine has no entry wrapper of its own). A, B:
any row stride, the last axis contiguous (strided<[?, 1]>); C too, holding the product's initial
value (zeros, or the bias of `x @ w + b`): destination passing, nothing copied around the call.

Built at installation for this machine's CPU (`make venv`, beside the runtime's C objects:
c_toolchain.PREBUILT_DIR), else compiled at the first use of a routine (for another CPU or after a
change of the lowering) and kept in the compile cache; linked into a library only when its code
calls it (backend.build_shared_library), so a library still needs only libc, libm and libpthread.
Building and finding the objects is matmul_library_build.py's (it runs the pipeline, which runs
this module's rewrites); matmul_prebuild.py is the installation's entry.

Which products call it (route_products marks them on tensors, before matmul.py tiles the rest;
call_routines calls the routines on their buffers after bufferization): f32/f64 linalg.matmul and
batch_matmul in one of the forms above, except
  - products whose sizes known at compile time are ones the inline code of those sizes runs
    faster: fewer than MIN_ROWS rows, a depth under MIN_DEPTH, columns that are no whole number of
    the kernel's column blocks, or all sizes static and m n k under MIN_VOLUME (measured: see
    there);
  - products whose B is the same on every trip of an enclosing loop (a recurrent scan's weights):
    the routine would pack it again on every trip, where the inline kernel reads it unpacked
    (matmul._pays_unguarded);
  - matvec and vecmat (one pass over the matrix, little code) and products of other maps
    (a generic with a broadcast batch operand, A and B both transposed): inline, as before.
A producer fused into the product (split_fused_operands) was split out before; a bias is C's
initial value, as in the inline kernel; an activation was never fused into the product's nest and
runs as the same separate loop as before.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from torch_mlir import ir

from sprue.lowering.matmul_operands import (
    BATCH_RHS_T_MAPS,
    MATMUL_MAPS,
    PLAIN_MAPS,
    fixed_across_loop,
    fold_rhs_transpose,
    is_transpose,
    transposed,
)
from sprue.lowering.mlir_util import as_operation, has_function, ops_where, private_function

SYMBOL_PREFIX = "sprue_matmul_"
# Sizes known at compile time from which a product calls the library (_routed). The routine's kernel
# is the one matmul.py makes for run-time sizes: B packed whole, N in blocks of matmul.PACK_NC (128)
# columns with a padded, copied last block, no narrow or half-width register tile. Against the
# inline code of static sizes, every product forced through the library (one thread, f64, CPU time
# per call, median of 11 interleaved in one process, AVX-512 EPYC, m x k x n): columns no block
# divides 1.2-2.3x (512x64x16 2.25, x32 1.24, x64 1.21, x100 1.22, 2048x64x64 2.30, 512x128x10
# 2.09); whole blocks 1.00-1.04x (512x64x256 1.00, 512x16x128 1.02, 512x10x128 1.04, 512x32x128
# 1.03, 64x128x128 1.02, 128x64x128 1.01, 128x1024x256 1.01 -- the long k that ran 1.59x in the
# twenty-third session now runs as the static one --, 256^3 1.01, 1024x256x128 1.01); few rows
# 32x128x128 1.16; small products 64^3 1.30, 96^3 1.20 (their n no block either). First calls of
# one product in a warm process, CPU: 70-85 ms inline, 35-70 ms calling the library.
MIN_ROWS = 64
MIN_DEPTH = 32
MIN_VOLUME = 1 << 20
# SPRUE_MATMUL_LIBRARY=0 keeps every product inline (what sprue did before): an A/B switch
_SWITCH = "SPRUE_MATMUL_LIBRARY"


@dataclass(frozen=True)
class Form:
    """A product's form: batched (rank 3, batch axis first) and which operands it reads transposed."""
    batched: bool
    lhs_t: bool
    rhs_t: bool

    @property
    def rank(self) -> int:
        return 3 if self.batched else 2

    def maps(self) -> str:
        if self.batched:
            return BATCH_RHS_T_MAPS if self.rhs_t else PLAIN_MAPS["linalg.batch_matmul"]
        return MATMUL_MAPS[(self.lhs_t, self.rhs_t)]

    def size_dims(self) -> tuple[int, int]:
        """(axis of A holding m, axis of B holding n)."""
        lead = 1 if self.batched else 0
        return lead + (1 if self.lhs_t else 0), lead + (0 if self.rhs_t else 1)


FORMS = {"nn": Form(False, False, False), "tn": Form(False, True, False), "nt": Form(False, False, True),
         "bnn": Form(True, False, False), "bnt": Form(True, False, True)}
DTYPES = ("f32", "f64")


def routine(form: str, dtype: str) -> str:
    return f"{SYMBOL_PREFIX}{form}_{dtype}"


def enabled() -> bool:
    return os.environ.get(_SWITCH, "1") not in ("0", "")


# -- the library ---------------------------------------------------------------------------------
# marks the library's own module: its products are the routines, compiled inline
_LIBRARY_ATTR = "sprue.matmul_library"


def operand_type(rank: int, dtype: str) -> str:
    """Each operand's memref type: run-time sizes and row strides, the last axis contiguous."""
    strides = "?, " * (rank - 1) + "1"
    return f"memref<{'x'.join('?' * rank)}x{dtype}, strided<[{strides}], offset: ?>>"


def library_text(form_name: str, dtype: str) -> str:
    """The routine as a module of the pipeline's input: its operands as tensors of their buffers,
    C += op(A) op(B) of run-time sizes materialized in C's buffer (one-shot bufferization then
    accumulates there; the kernel's padded last column block copies its part in and out)."""
    form = FORMS[form_name]
    memref = operand_type(form.rank, dtype)
    tensor = f"tensor<{'x'.join('?' * form.rank)}x{dtype}>"
    op = "linalg.batch_matmul" if form.batched else "linalg.matmul"
    return f"""module attributes {{{_LIBRARY_ATTR}}} {{
func.func public @{routine(form_name, dtype)}(%a: {memref}, %b: {memref}, %c: {memref}) {{
  %ta = bufferization.to_tensor %a restrict : {memref} to {tensor}
  %tb = bufferization.to_tensor %b restrict : {memref} to {tensor}
  %tc = bufferization.to_tensor %c restrict writable : {memref} to {tensor}
  %r = {op} indexing_maps = {form.maps()} ins(%ta, %tb : {tensor}, {tensor}) outs(%tc : {tensor}) -> {tensor}
  bufferization.materialize_in_destination %r in restrict writable %c : ({tensor}, {memref}) -> ()
  return
}}
}}
"""


# -- the calls ---------------------------------------------------------------------------------
# The routine a product calls, marked on it by route_products (on tensors: the sizes and forms
# matmul.py sees) and kept through bufferization; call_routines then calls it on the product's
# buffers (destination passing: C holds the product's initial value, zeros or a bias).
ROUTINE_ATTR = "sprue.matmul_routine"


def _dtype(t: ir.Type) -> str | None:
    elem = str(ir.ShapedType(t).element_type)
    return elem if elem in DTYPES else None


def _producer(value: ir.Value) -> ir.Operation | None:
    return None if isinstance(value.owner, ir.Block) else as_operation(value.owner)


def _form(op: ir.Operation) -> str | None:
    if op.name not in PLAIN_MAPS or transposed(op) is None:
        return None
    lhs_t, rhs_t = transposed(op)
    batched = op.name == "linalg.batch_matmul"
    producer = _producer(op.operands[1])
    if not rhs_t and not lhs_t and producer is not None and is_transpose(producer, batched):
        rhs_t = True          # read B (N, K) as it is: fold_rhs_transpose, once the product is routed
    return next((name for name, f in FORMS.items() if f == Form(batched, lhs_t, rhs_t)), None)


def _dims(t: ir.Type) -> list[int | None]:
    shaped = ir.ShapedType(t)
    return [None if shaped.is_dynamic_dim(i) else shaped.get_dim_size(i) for i in range(shaped.rank)]


def _routed(op: ir.Operation, column_block: int) -> str | None:
    """The routine this product calls, or None where it keeps its inline code (module doc)."""
    form_name = _form(op)
    dtype = _dtype(op.operands[2].type) if form_name else None
    if dtype is None or any(_dtype(v.type) != dtype for v in op.operands[:2]) \
            or fixed_across_loop(op.operands[1], op):
        return None
    a, c = _dims(op.operands[0].type), _dims(op.operands[2].type)
    m, n, k = c[-2], c[-1], a[-2] if FORMS[form_name].lhs_t else a[-1]
    if (m is not None and m < MIN_ROWS) or (k is not None and k < MIN_DEPTH) \
            or (n is not None and n % column_block != 0):
        return None
    if None not in (m, n, k) and m * n * k < MIN_VOLUME:
        return None
    return routine(form_name, dtype)


def route_products(module: ir.Module, found: list[ir.Operation], column_block: int) -> list[ir.Operation]:
    """Marks each product of `found` (matmul.tile_matmuls' contractions, in their named forms) that
    calls the library (module doc) with its routine; returns the others, which tile_matmuls blocks.
    column_block: the columns of the kernel's blocks of B for run-time sizes (matmul.PACK_NC)."""
    if not enabled() or _LIBRARY_ATTR in module.operation.attributes:
        return found
    kept = []
    for op in found:
        name = _routed(op, column_block) if op.name in PLAIN_MAPS else None
        if name is None:
            kept.append(op)
            continue
        if FORMS[name[len(SYMBOL_PREFIX):].rsplit("_", 1)[0]].rhs_t and not transposed(op)[1]:
            fold_rhs_transpose(op)
        op.attributes[ROUTINE_ATTR] = ir.StringAttr.get(name)
    return kept


def _contiguous_rows(t: ir.MemRefType) -> bool:
    """Whether a memref's last axis is contiguous (its layout says so)."""
    try:
        strides, _ = t.get_strides_and_offset()
    except ValueError:
        return False
    return strides[-1] == 1


def _as_operand(value: ir.Value, operand: ir.MemRefType) -> tuple[ir.Value, ir.Value | None]:
    """value as the routine's operand type: cast, or (a layout the routine cannot read: a strided
    view) a contiguous copy (C's written back after the call); (operand, the copy or None)."""
    t = ir.MemRefType(value.type)
    if _contiguous_rows(t):
        return ir.Operation.create("memref.cast", results=[operand], operands=[value]).result, None
    sizes = [ir.Operation.create("memref.dim", results=[ir.IndexType.get()], operands=[value, _index(d)]).result
             for d in range(t.rank) if t.is_dynamic_dim(d)]
    copy = ir.Operation.create("memref.alloc", results=[ir.MemRefType.get(t.shape, t.element_type)], operands=sizes,
                               attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([len(sizes), 0]),
                                           "alignment": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 64)})
    ir.Operation.create("memref.copy", operands=[value, copy.result])
    cast = ir.Operation.create("memref.cast", results=[operand], operands=[copy.result]).result
    return cast, copy.result


def _index(value: int) -> ir.Value:
    return ir.Operation.create("arith.constant", results=[ir.IndexType.get()],
                               attributes={"value": ir.IntegerAttr.get(ir.IndexType.get(), value)}).result


def call_routines(module: ir.Module) -> None:
    """Each product marked by route_products, now on buffers, replaced by the call of its routine
    (declared with MLIR's C interface: a pointer to each descriptor)."""
    found = ops_where(module.operation, lambda op: ROUTINE_ATTR in op.attributes)
    for op in found:
        name = ir.StringAttr(op.attributes[ROUTINE_ATTR]).value
        rank = ir.MemRefType(op.operands[2].type).rank
        operand = ir.MemRefType(ir.Type.parse(operand_type(rank, name.rsplit("_", 1)[1])))
        if not has_function(module, name):
            with ir.InsertionPoint.at_block_begin(module.body), ir.Location.unknown():
                private_function(name, [operand] * 3, **{"llvm.emit_c_interface": ir.UnitAttr.get()})
        with ir.InsertionPoint(op), op.location:
            args, copies = zip(*(_as_operand(v, operand) for v in op.operands))
            ir.Operation.create("func.call", operands=list(args), attributes={"callee": ir.FlatSymbolRefAttr.get(name)})
            if copies[2] is not None:
                ir.Operation.create("memref.copy", operands=[copies[2], op.operands[2]])
            for copy in copies:
                if copy is not None:
                    ir.Operation.create("memref.dealloc", operands=[copy])
        op.erase()


__all__ = ["DTYPES", "FORMS", "MIN_VOLUME", "ROUTINE_ATTR", "SYMBOL_PREFIX", "call_routines", "enabled",
           "library_text", "route_products", "routine"]
