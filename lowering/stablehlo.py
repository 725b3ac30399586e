"""jaxpr -> StableHLO: `lower_jaxpr(closed_jaxpr)` is a module holding `func.func @main`.

The function takes one tensor per jaxpr invar and returns one tensor per outvar. Each equation
becomes the ops its primitive's rule emits (`lowering_rules`, one rule per primitive, defined in
the rules_*.py modules by theme); consts become `stablehlo.constant`s holding the numpy arrays
bit for bit, literals become rank-0 constants. Each equation's ops carry the user's source
location (file:line) from `eqn.source_info`, so MLIR diagnostics point at user code.
"""
from __future__ import annotations

import re

import numpy as np
from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo

from ..core import ClosedJaxpr, Eqn, Jaxpr, Literal, Var
from ..errors import UnsupportedError, at
# Importing the rule modules fills the table.
from . import rules_elementwise, rules_indexing, rules_math, rules_reductions, rules_structural  # noqa: F401
from . import rules_control_flow  # noqa: F401  (its regions call back into lower_jaxpr_body below)
from .rules_common import LoweringContext, aval_type, const_array, lowering_rules

__all__ = ["lower_jaxpr", "lowering_rules", "LoweringContext", "make_context"]


def make_context() -> ir.Context:
    ctx = ir.Context()
    _stablehlo.register_dialect(ctx)
    ctx.allow_unregistered_dialects = False
    return ctx


_SOURCE_INFO = re.compile(r"^(?P<file>.*):(?P<line>\d+)(?: \((?P<fn>.*)\))?$")


def _location(eqn: Eqn) -> ir.Location:
    """`primitive`("file.py":line:0), or just the name when the source is unknown."""
    m = _SOURCE_INFO.match(eqn.source_info or "")
    if m is None:
        return ir.Location.name(eqn.primitive.name)
    return ir.Location.name(eqn.primitive.name, ir.Location.file(m["file"], int(m["line"]), 0))


def _literal(lit: Literal) -> ir.Value:
    return const_array(np.asarray(lit.val, dtype=lit.aval.dtype))


def lower_eqn(ctx: LoweringContext, eqn: Eqn, operands: list[ir.Value]) -> list[ir.Value]:
    rule = lowering_rules.get(eqn.primitive)
    if rule is None:
        raise UnsupportedError(f"sprue cannot compile the primitive '{eqn.primitive.name}' yet: it has no"
                               f" StableHLO lowering{at(eqn.source_info)}")
    with _location(eqn):
        outs = rule(ctx, eqn, *operands)
    if len(outs) != len(eqn.outvars):
        raise AssertionError(f"the lowering of {eqn.primitive.name} returned {len(outs)} values for"
                             f" {len(eqn.outvars)} outputs")
    for v, out in zip(eqn.outvars, outs):
        if out.type != aval_type(v.aval):
            raise AssertionError(f"the lowering of {eqn.primitive.name} made a {out.type} where the jaxpr"
                                 f" has {v.aval.str_short()}{at(eqn.source_info)}")
    return outs


def lower_jaxpr_body(ctx: LoweringContext, jaxpr: Jaxpr, consts: list[ir.Value], args: list[ir.Value]
                     ) -> list[ir.Value]:
    """Emits the equations of `jaxpr` at the current insertion point; returns its outputs."""
    env: dict[Var, ir.Value] = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))

    def read(a) -> ir.Value:
        return _literal(a) if isinstance(a, Literal) else env[a]

    for eqn in jaxpr.eqns:
        outs = lower_eqn(ctx, eqn, [read(a) for a in eqn.invars])
        env.update(zip(eqn.outvars, outs))
    return [read(a) for a in jaxpr.outvars]


def _check_consts(closed_jaxpr: ClosedJaxpr) -> list[np.ndarray]:
    consts = []
    for v, c in zip(closed_jaxpr.jaxpr.constvars, closed_jaxpr.consts):
        if not isinstance(c, (np.ndarray, np.generic)):
            raise UnsupportedError(f"cannot lower a jaxpr whose const is a {type(c).__name__}; consts must"
                                   f" be numpy arrays (a jaxpr still closing over an outer trace?)")
        consts.append(np.asarray(c, dtype=v.aval.dtype))
    return consts


def lower_jaxpr(closed_jaxpr: ClosedJaxpr, name: str = "main", *, debug_info: bool = True) -> str:
    """The StableHLO module (text) of `closed_jaxpr` as `func.func @<name>`.

    With debug_info the text keeps each op's location (primitive name and user file:line), so
    that diagnostics of later passes parsing it still point at the user's code."""
    consts = _check_consts(closed_jaxpr)
    jaxpr = closed_jaxpr.jaxpr
    with make_context(), ir.Location.unknown():
        module = ir.Module.create()
        arg_types = [aval_type(v.aval) for v in jaxpr.invars]
        result_types = [aval_type(v.aval) for v in jaxpr.outvars]
        with ir.InsertionPoint(module.body):
            fn = ir.Operation.create(
                "func.func", regions=1,
                attributes={"sym_name": ir.StringAttr.get(name),
                            "function_type": ir.TypeAttr.get(ir.FunctionType.get(arg_types, result_types))})
        block = fn.regions[0].blocks.append(*arg_types)
        with ir.InsertionPoint(block):
            ctx = LoweringContext(module)
            const_values = [const_array(c) for c in consts]
            outs = lower_jaxpr_body(ctx, jaxpr, const_values, list(block.arguments))
            ir.Operation.create("func.return", operands=outs)
        if not module.operation.verify():
            raise AssertionError("the lowered StableHLO module does not verify")
        return module.operation.get_asm(enable_debug_info=debug_info)
