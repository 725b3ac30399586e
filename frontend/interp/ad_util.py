"""What the transformation rules share: symbolic zeros, the rule tables, small helpers.

The rule tables are keyed by primitive, like core.shape_rules; each primitive's entries are written
beside its definition in sprue.lax (grep a primitive's name to see its whole story):

    jvp_rules[p](primals, tangents, **params) -> (primal_out, tangent_out)
        Forward mode. `tangents` has one entry per operand, a value or Zero; for a primitive with
        multiple results both outputs are lists. The rule binds primitives (so it is traceable and
        composes with every other transformation).
    vjp_rules[p](cts, primals, outs, **params) -> list of cotangents, one per operand
        Reverse mode, directly (mini-JAX's choice, not JAX's transposition): `cts` are the
        cotangents of the outputs (a list; entries may be Zero), `primals` the operand values and
        `outs` the output values of the forward pass (a list). An entry of the result may be None
        or Zero when the operand gets no cotangent (integers, indices, sizes).
    vjp_fwd_rules[p](primals, **params) -> (outs, residuals)   (optional)
        For primitives whose reverse pass needs more than their operands and results (loops keep
        the carry of every trip): then vjp_rules[p] receives the residuals in place of `outs`.
    batch_rules[p](args, dims, **params) -> (out, out_dim)
        vmap: dims[i] is 0 when args[i] carries the batch as its leading axis, None when it is
        unbatched (the interpreter keeps every batched value's batch axis at 0). Called only when
        some operand is batched. Multiple results: lists.
    cost_rules[p](in_avals, out_avals, **params) -> number of floating-point operations
    nested_cost_rules[p](ctx, eqn, values) -> flops, for primitives holding jaxprs (see sprue.interp.cost)

Cotangents and tangents have the dtype and shape of their primal; integer and boolean values have
none (always Zero), as JAX's float0.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueError, UnsupportedError, at
from sprue.ir.core import Primitive, ShapedArray, aval_of_value
from sprue.trace.tracing import Tracer, lax_ops, resolve_dynamic_dims

jvp_rules: dict[Primitive, Callable] = {}
vjp_rules: dict[Primitive, Callable] = {}
vjp_fwd_rules: dict[Primitive, Callable] = {}
batch_rules: dict[Primitive, Callable] = {}
cost_rules: dict[Primitive, Callable] = {}
nested_cost_rules: dict[Primitive, Callable] = {}


class Zero:
    """A symbolic zero tangent or cotangent of a value of type `aval` (never materialized unless a
    rule needs an array: `instantiate`)."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"Zero({self.aval.str_short()})"


def aval_of(x) -> ShapedArray:
    """The abstract value of a tracer or a concrete value."""
    if isinstance(x, (Tracer, Zero)):
        return x.aval
    return aval_of_value(x)


def is_zero(t) -> bool:
    return t is None or isinstance(t, Zero)


def differentiable(x) -> bool:
    """Floating-point and complex values have tangents; integers and booleans do not."""
    return dtypes.is_inexact(aval_of(x).dtype)


def zeros_like_aval(aval: ShapedArray):
    """An array of zeros of type aval (shapes may be symbolic: their sizes are run-time operands)."""
    zero = np.zeros((), aval.dtype)
    if not aval.shape:
        return zero
    return lax_ops.broadcast_in_dim(zero, aval.shape, ())


def zeros_like(x):
    return zeros_like_aval(aval_of(x).strip_weak_type())


def instantiate(t, like=None):
    """A tangent as an array: Zero becomes zeros (of `like`'s type when given)."""
    if isinstance(t, Zero):
        return zeros_like_aval(aval_of(like).strip_weak_type() if like is not None else t.aval)
    if t is None:
        return zeros_like(like)
    return t


def add_tangents(a, b):
    """a + b where either may be a symbolic zero."""
    if is_zero(a):
        return b
    if is_zero(b):
        return a
    return lax_ops.add(a, b)


def zero_of(x) -> Zero:
    return Zero(aval_of(x).strip_weak_type())


def not_transformable(what: str, p: Primitive):
    """The error for a primitive without a rule for a transformation."""
    hint = {"differentiable": " (it has no derivative rule)",
            "batchable": " (it has no batching rule)"}.get(what, "")
    return UnsupportedError(f"not {what}: {p.name}{hint}")


def located(err: SprueError, eqn) -> SprueError:
    """The error, naming the user's line that made the equation (the interpreters raise it when a
    rule is missing or refuses a case)."""
    if eqn.source_info and err.args and "(at " not in str(err.args[0]):
        err.args = (f"{err.args[0]}{at(eqn.source_info)}", *err.args[1:])
    return err


def defjvp_linear(p: Primitive):
    """A primitive linear in all its operands: the tangent is p applied to the tangents."""
    def rule(primals, tangents, **params):
        out = p.bind(*primals, **params)
        if all(is_zero(t) for t in tangents):
            return out, zero_of(out)
        ts = [instantiate(t, x) for t, x in zip(tangents, primals)]
        return out, p.bind(*ts, **params)
    jvp_rules[p] = rule


def jvp_linear_in_first(p: Primitive) -> Callable:
    """The jvp rule of a primitive linear in its first operand, the others (sizes, indices, axes)
    passed along unchanged: the tangent is p applied to the first operand's tangent."""
    def rule(primals, tangents, **params):
        out = p.bind(*primals, **params)
        if is_zero(tangents[0]):
            return out, zero_of(out)
        return out, p.bind(tangents[0], *primals[1:], **params)
    return rule


def register(table: dict, *prims: Primitive) -> Callable:
    """Decorator: `@register(jvp_rules, sin_p)` stores the rule for each primitive."""
    def deco(fn):
        for p in prims:
            table[p] = fn
        return fn
    return deco


Value = Any


def resolved(p: Primitive, args, params: dict) -> tuple[list, dict]:
    """For a primitive with a dynamic-dims param (`shape=(None, 3)` + trailing size operands): the
    data operands, and the params with each None replaced by its size (an int or a DimExpr), ready
    for the sprue.lax wrappers, which split them again."""
    avals = [aval_of(a) for a in args]
    data, rp = resolve_dynamic_dims(p, args, avals, params)
    return list(args[:len(data)]), rp
