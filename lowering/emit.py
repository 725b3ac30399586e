"""Emitting a jaxpr's equations through the rule table: the walk that every lowering shares.

`emit_jaxpr` emits a jaxpr's equations at the current insertion point, each through its
primitive's rule in `rules_common.lowering_rules`; `lower_region_body` does so for a nested jaxpr
(a region's body, a callee) in a child dimension scope. Rules whose primitives hold nested jaxprs
(rules_control_flow, rules_calls) call back into these, and stablehlo.py builds @main around them.
This module sits below the rule modules, which fill the table; stablehlo.py imports them all.
JAX's interpreters/mlir.py has the same shape: `register_lowering` fills a table keyed by primitive,
and `jaxpr_subcomp` walks the equations through it, knowing none of the rules.
"""
from __future__ import annotations

import re

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import tensor

from sprue.base.errors import UnsupportedError, at
from sprue.ir.core import ClosedJaxpr, Eqn, Jaxpr, Literal, Var
from sprue.lowering.rules_common import LoweringContext, Value, aval_type, const_array, lowering_rules

__all__ = ["emit_jaxpr", "lower_eqn", "lower_region_body", "numpy_consts"]

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
    outs = list(outs)
    for i, (v, out) in enumerate(zip(eqn.outvars, outs)):
        want = aval_type(v.aval)
        if out.type == want:
            continue
        if not _refines(out.type, want):
            raise AssertionError(f"the lowering of {eqn.primitive.name} made a {out.type} where the jaxpr"
                                 f" has {v.aval.str_short()}{at(eqn.source_info)}")
        # a size the jaxpr knows and the rule's params do not: a callee's size parameter bound to a
        # literal where a call was inlined (`iota[shape=(None,)] 2:i64[]` is i64[2])
        with _location(eqn):
            outs[i] = tensor.CastOp(want, out).result
    return outs


def _refines(got: ir.Type, want: ir.Type) -> bool:
    """Whether tensor types `got` and `want` differ only where one of them has a `?` size."""
    try:
        a, b = ir.RankedTensorType(got), ir.RankedTensorType(want)
    except ValueError:   # (not a ranked tensor type)
        return False
    return a.element_type == b.element_type and a.rank == b.rank and all(
        x == y or ir.ShapedType.is_dynamic_size(x) or ir.ShapedType.is_dynamic_size(y) for x, y in zip(a.shape, b.shape))


def _bind(ctx: LoweringContext, env: dict, variables, values) -> None:
    for v, x in zip(variables, values):
        env[v] = x
        if v.dim is not None:  # this i64[] variable holds a dimension's size
            ctx.bind_dim(v.dim, x)


def emit_jaxpr(ctx: LoweringContext, jaxpr: Jaxpr, consts: list[Value], args: list[Value]) -> list[Value]:
    """Emits the equations of `jaxpr` at the current insertion point, in ctx's current dimension
    scope; returns its outputs."""
    env: dict[Var, Value] = {}
    _bind(ctx, env, jaxpr.constvars, consts)
    _bind(ctx, env, jaxpr.invars, args)

    def read(a) -> Value:
        return _literal(a) if isinstance(a, Literal) else env[a]

    for eqn in jaxpr.eqns:
        outs = lower_eqn(ctx, eqn, [read(a) for a in eqn.invars])
        _bind(ctx, env, eqn.outvars, outs)
    return [read(a) for a in jaxpr.outvars]


def lower_region_body(ctx: LoweringContext, jaxpr: Jaxpr, consts: list[Value], args: list[Value],
                      status: Value | None) -> tuple[list[Value], Value | None]:
    """Emits a nested jaxpr (a region's body) at the current insertion point, in a child dimension
    scope; returns (its outputs, the check status at its end).

    `status` is the check status on entry: `ctx.status` itself for a branch (regions see the
    values above them), or a region argument for a loop body, where the status is one more carry.
    A rule whose nested jaxprs contain checks (`contains_checks`) while `ctx.status` is not None
    must thread it so: pass it in, return the result as an extra region result, and set
    `ctx.status` to the op's corresponding result afterwards. With status None, a check inside
    raises UnsupportedError instead of escaping its region."""
    outer = ctx.status
    ctx.status = status
    try:
        with ctx.nested_scope():
            outs = emit_jaxpr(ctx, jaxpr, consts, args)
        return outs, ctx.status
    finally:
        ctx.status = outer


def numpy_consts(closed_jaxpr: ClosedJaxpr) -> list[np.ndarray]:
    """The consts of `closed_jaxpr` as numpy arrays of their constvars' dtypes (what
    `const_array` emits), or UnsupportedError for a const that is not an array."""
    consts = []
    for v, c in zip(closed_jaxpr.jaxpr.constvars, closed_jaxpr.consts):
        if not isinstance(c, (np.ndarray, np.generic)):
            raise UnsupportedError(f"cannot lower a jaxpr whose const is a {type(c).__name__}; consts must"
                                   f" be numpy arrays (a jaxpr still closing over an outer trace?)")
        consts.append(np.asarray(c, dtype=v.aval.dtype))
    return consts
