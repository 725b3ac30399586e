"""Lowering of `pjit`: the callee becomes a private `func.func` of the module (once per callee
jaxpr) and the equation a `func.call`; operands and results are `tensor.cast` between the caller's
types and the callee's (the callee is generic in its sizes: `tensor<?x?xi8>`, while the caller may
know them: `tensor<8x16xi8>`). A callee containing run-time checks is emitted inline instead, so
that its checks join the caller's status."""
from __future__ import annotations

import re

from torch_mlir import ir

from sprue import lax
from sprue.ir.core import Eqn
from sprue.lowering.emit import emit_jaxpr, lower_region_body, numpy_consts
from sprue.lowering.mlir_util import private_function
from sprue.lowering.rules_checks import contains_checks
from sprue.lowering.rules_common import LoweringContext, Value, aval_type, const_array, lowering_rules
from sprue.runtime.c_names import safe_internal_symbol


def _cast(v: Value, ty: ir.Type) -> Value:
    if v.type == ty:
        return v
    return ir.Operation.create("tensor.cast", results=[ty], operands=[v]).result


def _symbol(ctx: LoweringContext, name: str) -> str:
    """A private symbol for the callee `name` (a Python function's name): unique in the module (the
    entry function may have any name: `sprue compile --name`), and prefixed (`sprue_fn_free`) when
    it is a symbol the lowering declares itself (free, aligned_alloc, libm's sin, ...), which would
    crash MLIR's translation or make the kernel call itself (runtime/c_names.py)."""
    base = re.sub(r"\W", "_", name) or "callee"
    taken = set(ctx.callees.values()) | {"main"} | {
        ir.StringAttr(op.attributes["sym_name"]).value for op in ctx.module.body.operations
        if "sym_name" in op.attributes}
    sym, k = safe_internal_symbol(base), 1
    while sym in taken:
        sym, k = safe_internal_symbol(f"{base}_{k}"), k + 1
    return sym


def _define(ctx: LoweringContext, closed, name: str) -> tuple[str, list, list]:
    """The private function for a callee (created at the first call); its name and types."""
    jaxpr = closed.jaxpr
    arg_types = [aval_type(v.aval) for v in jaxpr.invars]
    result_types = [aval_type(v.aval) for v in jaxpr.outvars]
    key = id(closed)
    if key not in ctx.callees:
        sym = _symbol(ctx, name)
        ctx.callees[key] = sym
        with ir.InsertionPoint.at_block_begin(ctx.module.body):
            fn = private_function(sym, arg_types, result_types)
        block = fn.regions[0].blocks.append(*arg_types)
        with ir.InsertionPoint(block):
            sub = LoweringContext(ctx.module, callees=ctx.callees)
            consts = [const_array(c) for c in numpy_consts(closed)]
            outs = emit_jaxpr(sub, jaxpr, consts, list(block.arguments))
            ir.Operation.create("func.return", operands=[_cast(o, t) for o, t in zip(outs, result_types)])
    return ctx.callees[key], arg_types, result_types


def _pjit(ctx: LoweringContext, eqn: Eqn, *operands: Value) -> list[Value]:
    closed, name = eqn.params["jaxpr"], eqn.params["name"]
    out_types = [aval_type(v.aval) for v in eqn.outvars]
    if contains_checks(closed.jaxpr):
        consts = [const_array(c) for c in numpy_consts(closed)]
        outs, ctx.status = lower_region_body(ctx, closed.jaxpr, consts, list(operands), ctx.status)
        return [_cast(o, t) for o, t in zip(outs, out_types)]
    sym, arg_types, result_types = _define(ctx, closed, name)
    call = ir.Operation.create("func.call", results=result_types,
                               operands=[_cast(v, t) for v, t in zip(operands, arg_types)],
                               attributes={"callee": ir.FlatSymbolRefAttr.get(sym)})
    return [_cast(r, t) for r, t in zip(call.results, out_types)]


lowering_rules[lax.pjit_p] = _pjit
