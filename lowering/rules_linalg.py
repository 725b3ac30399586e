"""Lowering of sprue.lax.linalg's primitives (linalg_cholesky, linalg_lu, linalg_triangular_solve):
calls of the native routines of linalg_runtime.py, linked into the library when it calls them.

Each equation becomes a call of a private function of tensors, one per routine, dtype and rank,
whose body gives the routine a fresh buffer to write (the C routine writes memory; a tensor is a
value): its operands' buffers (`bufferization.to_buffer`, read only, any layout: the routine
reads them through their strides), a `memref.alloc` per result, the call with MLIR's C interface
(`llvm.emit_c_interface`: a pointer to each descriptor), and the results as tensors of those
buffers (`bufferization.to_tensor restrict writable`: nothing else aliases them). One-shot
bufferization takes this as it is, the allocations are freed as any other's, and the calling
code stays StableHLO and a func.call, as a partitioned body's parts are.

    func.func private @sprue_linalg_cholesky_f64_r3(%a: tensor<?x?x?xf64>) -> tensor<?x?x?xf64> {
      %in = bufferization.to_buffer %a read_only : ... to memref<?x?x?xf64, strided<[?, ?, ?], offset: ?>>
      %out = memref.alloc(%d0, %d1, %d2) : memref<?x?x?xf64>
      func.call @sprue_linalg_cholesky_f64_3(%out, %in)
      %r = bufferization.to_tensor %out restrict writable
      func.return %r
    }
"""
from __future__ import annotations

import numpy as np
from torch_mlir import ir

from sprue import lax
from sprue.ir.core import Eqn
from sprue.lowering.linalg_runtime import LOWER, TRANSPOSE_A, UNIT_DIAGONAL
from sprue.lowering.mlir_util import has_function, private_function
from sprue.lowering.rules_common import DYNAMIC, LoweringContext, Value, aval_type, element_type, lowering_rules


def _buffer_type(t: ir.RankedTensorType, strided: bool) -> ir.MemRefType:
    """A memref of t's rank and element type, of run-time sizes; `strided`: any strides and offset."""
    layout = None
    if strided:
        layout = ir.StridedLayoutAttr.get(DYNAMIC, [DYNAMIC] * t.rank)
    return ir.MemRefType.get([DYNAMIC] * t.rank, t.element_type, layout=layout)


def _index(value: int) -> Value:
    return ir.Operation.create("arith.constant", results=[ir.IndexType.get()],
                               attributes={"value": ir.IntegerAttr.get(ir.IndexType.get(), value)}).result


def _i64(value: int) -> Value:
    i64 = ir.IntegerType.get_signless(64)
    return ir.Operation.create("arith.constant", results=[i64], attributes={"value": ir.IntegerAttr.get(i64, value)}).result


def _wrapper(ctx: LoweringContext, routine: str, flags: int | None, operands: list[ir.RankedTensorType],
             results: list[tuple[ir.RankedTensorType, int, int]]) -> str:
    """The private function calling `routine` (its C name), declared (with it) once per module.
    results: (type, operand whose sizes it has, how many of them: its rank)."""
    name = f"{routine}_r{operands[0].rank}" + ("" if flags is None else f"_{flags}")
    if has_function(ctx.module, name):
        return name
    result_types = [t for t, _, _ in results]
    buffers = [_buffer_type(t, False) for t in result_types]
    inputs = [_buffer_type(t, True) for t in operands]
    i64 = ir.IntegerType.get_signless(64)
    callee = f"{routine}_{operands[0].rank}"
    call_types = ([i64] if flags is not None else []) + buffers + inputs
    with ir.InsertionPoint.at_block_begin(ctx.module.body):
        if not has_function(ctx.module, callee):
            private_function(callee, call_types, **{"llvm.emit_c_interface": ir.UnitAttr.get()})
        fn = private_function(name, operands, result_types)
    block = fn.regions[0].blocks.append(*operands)
    with ir.InsertionPoint(block):
        ins = [ir.Operation.create("bufferization.to_buffer", results=[t], operands=[a],
                                   attributes={"read_only": ir.UnitAttr.get()}).result
               for a, t in zip(block.arguments, inputs)]
        outs = []
        for (t, source, rank), buffer in zip(results, buffers):
            sizes = [ir.Operation.create("memref.dim", results=[ir.IndexType.get()],
                                         operands=[ins[source], _index(d)]).result for d in range(rank)]
            outs.append(ir.Operation.create("memref.alloc", results=[buffer], operands=sizes,
                                            attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([rank, 0]),
                                                        "alignment": ir.IntegerAttr.get(i64, 64)}).result)
        args = ([_i64(flags)] if flags is not None else []) + outs + ins
        ir.Operation.create("func.call", operands=args, attributes={"callee": ir.FlatSymbolRefAttr.get(callee)})
        values = [ir.Operation.create("bufferization.to_tensor", results=[t], operands=[b],
                                      attributes={"restrict": ir.UnitAttr.get(), "writable": ir.UnitAttr.get()}).result
                  for t, b in zip(result_types, outs)]
        ir.Operation.create("func.return", operands=values)
    return name


def _dynamic(v: Value) -> Value:
    """v as a tensor of run-time sizes: one function serves every shape of a rank."""
    t = ir.RankedTensorType(v.type)
    dynamic = ir.RankedTensorType.get([DYNAMIC] * t.rank, t.element_type)
    return v if t == dynamic else ir.Operation.create("tensor.cast", results=[dynamic], operands=[v]).result


def _call(ctx: LoweringContext, eqn: Eqn, routine: str, flags: int | None, operands: list[Value],
          results: list[tuple[int, int]]) -> list[Value]:
    """Calls `routine` (sprue_linalg_<what>_<f32|f64>) on operands: the equation's outputs, each
    (operand whose leading sizes it has, its rank)."""
    dynamic = [_dynamic(v) for v in operands]
    out_types = [ir.RankedTensorType.get([DYNAMIC] * r, element_type(v.aval.dtype))
                 for (_, r), v in zip(results, eqn.outvars)]
    name = _wrapper(ctx, routine, flags, [ir.RankedTensorType(v.type) for v in dynamic],
                    [(t, source, r) for t, (source, r) in zip(out_types, results)])
    call = ir.Operation.create("func.call", results=out_types, operands=dynamic,
                               attributes={"callee": ir.FlatSymbolRefAttr.get(name)})
    return [ir.Operation.create("tensor.cast", results=[aval_type(v.aval)], operands=[r]).result
            for r, v in zip(call.results, eqn.outvars)]


def _suffix(eqn: Eqn) -> str:
    return "f64" if np.dtype(eqn.invars[0].aval.dtype) == np.float64 else "f32"


def _cholesky(ctx: LoweringContext, eqn: Eqn, a: Value) -> list[Value]:
    rank = len(eqn.invars[0].aval.shape)
    return _call(ctx, eqn, f"sprue_linalg_cholesky_{_suffix(eqn)}", None, [a], [(0, rank)])


def _lu(ctx: LoweringContext, eqn: Eqn, a: Value) -> list[Value]:
    rank = len(eqn.invars[0].aval.shape)
    return _call(ctx, eqn, f"sprue_linalg_lu_{_suffix(eqn)}", None, [a], [(0, rank), (0, rank - 1), (0, rank - 2)])


def _triangular_solve(ctx: LoweringContext, eqn: Eqn, a: Value, b: Value) -> list[Value]:
    p = eqn.params
    flags = LOWER * p["lower"] + TRANSPOSE_A * p["transpose_a"] + UNIT_DIAGONAL * p["unit_diagonal"]
    rank = len(eqn.invars[1].aval.shape)
    return _call(ctx, eqn, f"sprue_linalg_triangular_solve_{_suffix(eqn)}", flags, [a, b], [(1, rank)])


lowering_rules[lax.linalg_cholesky_p] = _cholesky
lowering_rules[lax.linalg_lu_p] = _lu
lowering_rules[lax.linalg_triangular_solve_p] = _triangular_solve
