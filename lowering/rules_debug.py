"""Lowering of `debug_print` (sprue.debug.print): calls of the library's print routine.

`debug_print[fmt='loss {0:.4f} at {1}'] a b` becomes, in program order,

    func.call @sprue_print_text(<"loss ">)      the literal text, an i8 tensor constant
    func.call @sprue_print_f64_2(%a, <".4f">)   a value (of rank 2 here, any sizes) and its spec
    func.call @sprue_print_text(<" at ">)
    func.call @sprue_print_i64_0(%b, <"">)
    func.call @sprue_print_end()                the line, written at once

to private declarations with MLIR's C interface (`llvm.emit_c_interface`: each tensor reaches C
as a pointer to its memref descriptor) whose operands are only read (`bufferization.access = "read"`,
so bufferization neither copies them nor assumes they change). The routines are C, linked into
the library when it calls them (print_runtime.py). Calls of external functions stay where they
are and in order: MLIR treats them as having unknown side effects."""
from __future__ import annotations

import string

import numpy as np
from torch_mlir import ir

from sprue import lax
from sprue.ir.core import Eqn
from sprue.lowering.mlir_util import has_function, private_function
from sprue.lowering.rules_common import (
    LoweringContext,
    Value,
    const_array,
    convert,
    dtype_of,
    lowering_rules,
    op1,
    with_dtype,
)

PRINT_PREFIX = "sprue_print_"
MAX_RANK = 8   # (print_runtime.py defines the routines of ranks 0 to 8)


def _routine(dtype) -> tuple[str, np.dtype]:
    """The print routine for a value of `dtype`, and the dtype it is converted to first."""
    dt = np.dtype(dtype)
    if dt == np.float64 or dt == np.float32:
        return f"{PRINT_PREFIX}f{dt.itemsize * 8}", dt
    if dt.kind == "f":   # (float16, bfloat16: printed as their float32 values)
        return f"{PRINT_PREFIX}f32", np.dtype(np.float32)
    if dt.kind == "b":
        return f"{PRINT_PREFIX}bool", np.dtype(np.int8)
    if dt.kind == "u":
        return f"{PRINT_PREFIX}u64", np.dtype(np.uint64)
    return f"{PRINT_PREFIX}i64", np.dtype(np.int64)


def _declare(ctx: LoweringContext, name: str, arg_types: list[ir.Type]) -> None:
    if has_function(ctx.module, name):
        return
    read = ir.DictAttr.get({"bufferization.access": ir.StringAttr.get("read")})
    with ir.InsertionPoint.at_block_begin(ctx.module.body):
        private_function(name, arg_types, arg_attrs=ir.ArrayAttr.get([read] * len(arg_types)),
                         **{"llvm.emit_c_interface": ir.UnitAttr.get()})


def _dynamic(v: Value) -> Value:
    """v as a tensor of run-time sizes (`tensor<?x?xf64>`): one declaration serves every shape of
    a rank. (Not unranked: a part of a partitioned body (partition.py) may return the value it
    passes, and an unranked buffer crossing there cannot be copied.)"""
    t = ir.RankedTensorType(v.type)
    dyn = ir.RankedTensorType.get([ir.ShapedType.get_dynamic_size()] * t.rank, t.element_type)
    return v if t == dyn else ir.Operation.create("tensor.cast", results=[dyn], operands=[v]).result


def _call(ctx: LoweringContext, name: str, operands: list[Value]) -> None:
    _declare(ctx, name, [v.type for v in operands])
    ir.Operation.create("func.call", operands=operands, attributes={"callee": ir.FlatSymbolRefAttr.get(name)})


def _text(text: str) -> Value:
    data = np.frombuffer(text.encode("utf-8"), np.int8) if text else np.zeros(0, np.int8)
    return _dynamic(const_array(data))


def _debug_print(ctx: LoweringContext, eqn: Eqn, *operands: Value) -> list[Value]:
    for literal, field, spec, _ in string.Formatter().parse(eqn.params["fmt"]):
        if literal:
            _call(ctx, f"{PRINT_PREFIX}text", [_text(literal)])
        if field is None:
            continue
        x = operands[int(field)]
        name, dtype = _routine(dtype_of(x))
        x = convert(x, dtype)
        if dtype == np.uint64:   # (the routine reads its bits as uint64_t; StableHLO's types stay signless)
            x = op1("stablehlo.bitcast_convert", [x], with_dtype(x, np.int64))
        _call(ctx, f"{name}_{ir.RankedTensorType(x.type).rank}", [_dynamic(x), _text(spec or "")])
    _call(ctx, f"{PRINT_PREFIX}end", [])
    return []


lowering_rules[lax.debug_print_p] = _debug_print
