"""sprue.cost: the estimated floating-point operations of a function at given arguments, counted by
the cost interpreter (sprue.interp.cost) over the function's jaxpr."""
from __future__ import annotations

import functools

from sprue.api.options import check_function
from sprue.api.traced import trace_function
from sprue.base.pytree import tree_flatten
from sprue.interp.cost import CostContext, Lazy
from sprue.ir.core import ShapedArray


def cost(fn):
    """`sprue.cost(f)(*args, **kwargs)`: the estimated floating-point operations of f at args
    (arrays, or ShapedArrays for an estimate that needs no values)."""
    check_function(fn, "cost")

    @functools.wraps(fn)
    def counted(*args, **kwargs):
        traced = trace_function(fn, args, kwargs)
        leaves, _ = tree_flatten((tuple(args), dict(kwargs)))
        jaxpr = traced.closed_jaxpr.jaxpr
        vals = [Lazy.abstract(v.aval) if isinstance(x, ShapedArray) else Lazy.known(x, v.aval)
                for v, x in zip(jaxpr.invars[len(jaxpr.invars) - len(leaves):], leaves)]
        implicit = [Lazy.abstract(v.aval) for v in jaxpr.invars[:len(jaxpr.invars) - len(leaves)]]
        consts = [Lazy.known(c) for c in traced.closed_jaxpr.consts]
        flops, _ = CostContext().jaxpr_cost(jaxpr, consts, [*implicit, *vals])
        return flops
    return counted
