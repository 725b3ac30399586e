"""pjit: a call of a function compiled as its own function (JAX's name for jit calls in jaxprs).

    d:i32[4*k] = pjit[jaxpr={ lambda ; a:i64[] b:i64[] c:i8[a,4*b]. ... } name=ff] k 4 e

The operands are the callee's parameters: first the sizes that bind its dimension variables, then
its arrays. The shape rule substitutes the caller's sizes for the callee's variables in the
callee's result types — Relax's shape design, its test C: an argument i8[k,16] gives i32[k*4] — and rejects
arguments whose shapes provably do not fit (the call site, sprue.api.call_sites, has already
turned the constraints only run time can decide into checks). Transformations transform the
callee's body.
"""
from __future__ import annotations

from sprue.base.errors import SprueTypeError, SprueValueError
from sprue.interp.ad_util import batch_rules, jvp_rules, nested_cost_rules, vjp_rules
from sprue.interp.batching import batch_jaxpr
from sprue.interp.cost import Lazy
from sprue.interp.jvp import jvp_jaxpr
from sprue.interp.vjp import vjp_jaxpr
from sprue.ir.core import ClosedJaxpr
from sprue.ir.shapes import DimVar, prove_equal, substitute
from sprue.lax._rules import define
from sprue.trace.tracing import eval_jaxpr, operand_dims_prims


def callee_mapping(jaxpr, operand_dims) -> dict[DimVar, object]:
    """The caller's size for each dimension variable a callee parameter binds."""
    return {v.dim: d for v, d in zip(jaxpr.invars, operand_dims) if v.dim is not None and d is not None}


def _pjit_rule(*avals, jaxpr: ClosedJaxpr, name: str, operand_dims=None, **params):
    j = jaxpr.jaxpr
    if len(avals) != len(j.invars):
        raise SprueTypeError(f"pjit {name}: {len(avals)} operands for a callee of {len(j.invars)} parameters")
    mapping = callee_mapping(j, operand_dims or [None] * len(avals))
    for k, (v, a) in enumerate(zip(j.invars, avals)):
        want = v.aval
        if want.dtype != a.dtype or want.ndim != a.ndim:
            raise SprueTypeError(f"{name}(): parameter {k} is {want.str_short()}, the argument is {a.str_short()}")
        for axis, (dw, da) in enumerate(zip(want.shape, a.shape)):
            if prove_equal(substitute(dw, mapping), da) is False:
                raise SprueValueError(f"{name}(): parameter {k} is {want.str_short()}, the argument is"
                                      f" {a.str_short()}: axis {axis} cannot fit")
    return [a.update(shape=tuple(substitute(d, mapping) for d in a.shape), weak_type=False) for a in j.out_avals]


def _pjit_impl(*args, jaxpr: ClosedJaxpr, name: str, **params):
    return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)


pjit_p = define("pjit", _pjit_rule, _pjit_impl, multiple_results=True)
operand_dims_prims.add(pjit_p)


# -- transformations go into the callee's body --------------------------------------------------------
def _pjit_jvp(primals, tangents, *, jaxpr, name, **params):
    return jvp_jaxpr(jaxpr.jaxpr, jaxpr.consts, primals, tangents)


def _pjit_vjp(cts, primals, outs, *, jaxpr, name, **params):
    _, backward = vjp_jaxpr(jaxpr.jaxpr, jaxpr.consts, primals)
    return backward(cts)


def _pjit_batch(args, dims, *, jaxpr, name, **params):
    return batch_jaxpr(jaxpr.jaxpr, jaxpr.consts, args, dims)


def _pjit_cost(ctx, eqn, ins):
    cj = eqn.params["jaxpr"]
    return ctx.jaxpr_cost(cj.jaxpr, [Lazy.known(c) for c in cj.consts], ins)


jvp_rules[pjit_p] = _pjit_jvp
vjp_rules[pjit_p] = _pjit_vjp
batch_rules[pjit_p] = _pjit_batch
nested_cost_rules[pjit_p] = _pjit_cost

__all__ = ["pjit_p", "callee_mapping"]
