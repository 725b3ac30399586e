"""Lowering of the custom-derivative and rematerialization calls (sprue.lax.custom_derivatives):
custom_jvp_call, custom_vjp_call and remat2 compute their body, emitted inline (their rules shape
derivatives and batches, which are jaxprs by the time anything is compiled; the operands after the
body's parameters are the rules' captured values, unused here). XLA inlines them too."""
from __future__ import annotations

from sprue import lax
from sprue.ir.core import Eqn
from sprue.lowering.emit import lower_region_body, numpy_consts
from sprue.lowering.rules_common import LoweringContext, Value, const_array, lowering_rules


def _inline(param: str):
    def rule(ctx: LoweringContext, eqn: Eqn, *operands: Value) -> list[Value]:
        closed = eqn.params[param]
        consts = [const_array(c) for c in numpy_consts(closed)]
        args = list(operands[:len(closed.jaxpr.invars)])
        outs, ctx.status = lower_region_body(ctx, closed.jaxpr, consts, args, ctx.status)
        return outs
    return rule


lowering_rules.update({lax.custom_jvp_call_p: _inline("call_jaxpr"), lax.custom_vjp_call_p: _inline("call_jaxpr"),
                       lax.remat_p: _inline("jaxpr"), lax.stop_gradient_p: lambda ctx, eqn, x: [x]})
