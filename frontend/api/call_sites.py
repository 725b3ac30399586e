"""Calls of qjit'd functions (and `sprue.kernel`s) inside traced code: call equations.

A qjit'd function called while another function is being traced is not inlined: it becomes one
`pjit` equation whose callee is traced once per signature and compiled as its own function.
 - A function whose every parameter has a type hint has a fixed signature (sizes named and
   related: `i8["n", "m*4"]`); its callee jaxpr is the one traced at decoration. The caller's
   argument shapes are matched against the signature (shape_signatures.match): constraints that
   provably hold leave nothing behind, provably violated ones are compile-time errors at the
   call's line, and the others become run-time checks in the caller.
 - Any other qjit'd function is traced for the caller's argument types, with each symbolic size of
   the caller becoming a size parameter of the callee (so the callee is generic in it) — once per
   distinct signature.
The result types are the callee's with the caller's sizes substituted (Relax's shape design, its tests A and C).
"""
from __future__ import annotations

from sprue import lax
from sprue.api.row_boundary import collapse_traced, row_of
from sprue.api.shape_signatures import emit_runtime_checks, match
from sprue.api.traced import abstractify, trace_function
from sprue.base.errors import SprueTypeError, at
from sprue.base.pytree import tree_flatten_with_path, tree_unflatten
from sprue.base.source_info import user_frame_summary
from sprue.ir.core import ClosedJaxpr, Jaxpr
from sprue.ir.shapes import DimExpr
from sprue.lax.calls import pjit_p
from sprue.trace.tracing import Tracer, dim_value


def call_in_trace(q, args, kwargs):
    """q(*args, **kwargs) inside a trace, as a pjit equation (a parameter's row reshaped into one
    axis before it, each result's row back after it)."""
    rows = None
    dynamic, static = q._bind(args, kwargs)
    leaves, paths, tree = tree_flatten_with_path(tuple(dynamic.values()))
    avals = [abstractify(x, p) for x, p in zip(leaves, paths)]
    where = user_frame_summary()
    if q.fsig is not None:
        traced = q._fixed.traced
        hinted = traced.in_tree.children[0]
        if tree != hinted:
            raise SprueTypeError(f"{q.name}(): arguments {tree} do not match the signature's {hinted}{at(where)}")
        rows = q._fixed.rows
        shapes = [a.shape for a in avals]
        if rows is not None:   # each row collapsed into one axis, as the callee was traced (row_boundary.py)
            shapes, row_dims, row_checks = collapse_traced(q.name, q.fsig.params, shapes, where)
            leaves = [x if tuple(a.shape) == s else lax.reshape(x, s) for x, a, s in zip(leaves, avals, shapes)]
        b = match(q.name, q.fsig.params, shapes, [a.dtype for a in avals], where=where)
        if rows is not None:
            b.runtime = row_checks + b.runtime
        emit_runtime_checks(b)
        sizes = [dim_value(b.env[n]) for n in q.fsig.names]
    else:
        names: dict = {}
        generic = []
        for a in avals:
            shape = []
            for d in a.shape:
                if isinstance(d, DimExpr):   # (a row keeps its name: the callee is checked for it too)
                    names.setdefault(d, row_of(d) or f"_s{len(names)}")
                    shape.append(names[d])
                else:
                    shape.append(d)
            generic.append(a.update(shape=tuple(shape)))
        key = ("call", q._static_key(static), tree, tuple(generic))
        traced = q._callees.get(key)
        if traced is None:
            arg_names = list(dynamic)
            traced = trace_function(lambda *vals: q._call_user(dict(zip(arg_names, vals)), static),
                                    tuple(tree_unflatten(tree, generic)), {}, arg_names)
            q._callees[key] = traced
        order = list(names)          # trace_flat makes one size parameter per name, in first-use order
        sizes = [dim_value(d) for d in order]
    closed = traced.closed_jaxpr
    if any(isinstance(c, Tracer) for c in closed.consts):   # it closed over the caller's values: inline
        return q.fn(*args, **kwargs)
    callee, consts = _hoisted(q, closed)
    outs = pjit_p.bind(*consts, *sizes, *leaves, jaxpr=callee, name=q.name)
    if q.fsig is not None and rows is not None:   # each result's row back in place
        outs = [o if row is None or row not in row_dims else lax.reshape(o, (*row_dims[row], *o.shape[1:]))
                for o, row in zip(outs, rows.results)]
    return tree_unflatten(traced.out_tree, outs)


def _hoisted(q, closed: ClosedJaxpr) -> tuple[ClosedJaxpr, list]:
    """The callee without consts of its own: they become its leading parameters and the call's
    leading operands (so a saved caller carries their values, as for control flow). One callee
    object per traced signature, so that the lowering emits it once."""
    cache = q.__dict__.setdefault("_hoisted", {})
    entry = cache.get(id(closed))
    if entry is None or entry[0] is not closed:
        j = closed.jaxpr
        callee = ClosedJaxpr(Jaxpr([], [*j.constvars, *j.invars], j.outvars, j.eqns), [])
        entry = cache[id(closed)] = (closed, callee)
    return entry[1], list(closed.consts)


__all__ = ["call_in_trace"]
