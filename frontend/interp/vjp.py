"""Reverse mode: a forward pass that keeps every value, then a backward pass over the equations in
reverse order (as in mini-JAX: each equation is visited once, after every use of its outputs has added
to their cotangents, so the reverse pass costs a constant factor of the forward one).

The forward pass binds the primitives (eagerly, or into the active trace); the backward pass calls
each primitive's vjp rule, which binds primitives too, so grad composes with everything, itself
included. Only *active* values get cotangents: those computed from the inputs being differentiated
(floating-point ones). A rule may return thunks instead of cotangents; they are called only for
operands that are active, so `x * c` never computes c's cotangent.
"""
from __future__ import annotations

from typing import Callable, Sequence

from sprue.base import dtypes
from sprue.base.errors import UnsupportedError
from sprue.interp.ad_util import (
    Zero,
    add_tangents,
    aval_of,
    is_zero,
    located,
    not_transformable,
    vjp_fwd_rules,
    vjp_rules,
    zero_of,
)
from sprue.ir.core import Jaxpr, Literal, Var
from sprue.trace.tracing import bind


def vjp_jaxpr(jaxpr: Jaxpr, consts: Sequence, primals: Sequence, active_inputs: Sequence[bool] | None = None
              ) -> tuple[list, Callable]:
    """Run jaxpr forward at `primals`; return its outputs and `backward(cts) -> cotangents`, one per
    invar (Zero for inactive ones). `cts` has one entry per output (a value, Zero or None)."""
    env: dict[Var, object] = {}
    active: set[Var] = set()
    residuals: dict[int, object] = {}

    def read(a):
        return a.val if isinstance(a, Literal) else env[a]

    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for k, (v, x) in enumerate(zip(jaxpr.invars, primals)):
        env[v] = x
        if (active_inputs is None or active_inputs[k]) and dtypes.is_inexact(aval_of(x).dtype):
            active.add(v)
    for i, eqn in enumerate(jaxpr.eqns):
        ps = [read(a) for a in eqn.invars]
        is_active = any(isinstance(a, Var) and a in active for a in eqn.invars)
        fwd = vjp_fwd_rules.get(eqn.primitive) if is_active else None
        if fwd is not None:
            outs, residuals[i] = fwd(ps, **eqn.params)
        else:
            outs = bind(eqn.primitive, ps, eqn.params)
        outs = list(outs) if eqn.primitive.multiple_results else [outs]
        for v, x in zip(eqn.outvars, outs):
            env[v] = x
            if is_active and dtypes.is_inexact(aval_of(x).dtype):
                active.add(v)

    def backward(cts: Sequence) -> list:
        ct_env: dict[Var, object] = {}

        def accumulate(v, ct):
            if isinstance(v, Var) and v in active and not is_zero(ct):
                ct_env[v] = add_tangents(ct_env.get(v), ct)

        for v, ct in zip(jaxpr.outvars, cts):
            accumulate(v, ct)
        for i in range(len(jaxpr.eqns) - 1, -1, -1):
            eqn = jaxpr.eqns[i]
            cts_out = [ct_env.pop(v, None) for v in eqn.outvars]
            if all(is_zero(c) for c in cts_out):
                continue
            if not any(isinstance(a, Var) and a in active for a in eqn.invars):
                continue
            rule = vjp_rules.get(eqn.primitive)
            if rule is None:
                raise located(not_transformable("differentiable", eqn.primitive), eqn)
            cts_out = [zero_of(env[v]) if is_zero(c) else c for v, c in zip(eqn.outvars, cts_out)]
            outs = residuals[i] if i in residuals else [env[v] for v in eqn.outvars]
            try:
                cts_in = rule(cts_out, [read(a) for a in eqn.invars], outs, **eqn.params)
            except UnsupportedError as e:   # a rule refusing a case: name the user's line
                raise located(e, eqn)
            for a, ct in zip(eqn.invars, cts_in):
                if isinstance(a, Var) and a in active and ct is not None:
                    accumulate(a, ct() if callable(ct) else ct)
        return [ct_env.get(v) if v in ct_env else zero_of(env[v]) for v in jaxpr.invars]

    return [read(a) for a in jaxpr.outvars], backward


__all__ = ["vjp_jaxpr", "Zero"]
