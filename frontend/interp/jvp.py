"""Forward mode: the JVP interpreter over jaxprs (mini-JAX's Jvp.eval_operator).

Each equation is evaluated with its primitive's jvp rule on (primal, tangent) pairs; the rules bind
primitives, so the interpreter runs eagerly on numpy values or stages into whatever trace is active
(that is what makes jvp compose with grad, vmap, qjit and itself). Tangents start as symbolic
zeros: an equation none of whose operands has a tangent is evaluated as it is.
"""
from __future__ import annotations

from typing import Sequence

from sprue.base import dtypes
from sprue.base.errors import UnsupportedError
from sprue.interp.ad_util import Zero, aval_of, is_zero, jvp_rules, located, not_transformable, zero_of
from sprue.ir.core import Jaxpr, Literal, Var
from sprue.trace.tracing import bind


def jvp_jaxpr(jaxpr: Jaxpr, consts: Sequence, primals: Sequence, tangents: Sequence) -> tuple[list, list]:
    """Evaluate jaxpr at `primals` with `tangents` (values or Zero, one per invar; consts have none).
    Returns the outputs and their tangents (Zero where they do not depend on the inputs)."""
    env: dict[Var, object] = {}
    tenv: dict[Var, object] = {}

    def read(a):
        return a.val if isinstance(a, Literal) else env[a]

    def read_tangent(a):
        if isinstance(a, Literal):
            return zero_of(a.val)
        t = tenv.get(a)
        return zero_of(env[a]) if t is None else t

    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x, t in zip(jaxpr.invars, primals, tangents):
        env[v] = x
        if not is_zero(t) and dtypes.is_inexact(aval_of(x).dtype):
            tenv[v] = t
    for eqn in jaxpr.eqns:
        ps = [read(a) for a in eqn.invars]
        ts = [read_tangent(a) for a in eqn.invars]
        multiple = eqn.primitive.multiple_results
        if all(is_zero(t) for t in ts):
            outs = bind(eqn.primitive, ps, eqn.params)
            touts = None
        else:
            rule = jvp_rules.get(eqn.primitive)
            if rule is None:
                raise located(not_transformable("differentiable", eqn.primitive), eqn)
            try:
                outs, touts = rule(ps, ts, **eqn.params)
            except UnsupportedError as e:   # a rule refusing a case: name the user's line
                raise located(e, eqn)
        outs = list(outs) if multiple else [outs]
        touts = [None] * len(outs) if touts is None else (list(touts) if multiple else [touts])
        for v, x, t in zip(eqn.outvars, outs, touts):
            env[v] = x
            if not is_zero(t) and dtypes.is_inexact(aval_of(x).dtype):
                tenv[v] = t
    return [read(a) for a in jaxpr.outvars], [read_tangent(a) for a in jaxpr.outvars]


__all__ = ["jvp_jaxpr", "Zero"]
