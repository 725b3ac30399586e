"""Lowering of `filter` (sprue.lax.filtering), the primitive with a data-dependent result size.

    filter[axis=a] mask x1 ... xk  ->  count, y1 ... yk      (each y: its x, size count along a)

1. count: a stablehlo.reduce (add) of the mask converted to i64.
2. Each result starts as zeros of its run-time shape (dynamic_broadcast_in_dim: x's sizes with
   count along `axis`), allocated once.
3. One counted loop over i in [0, n) (rules_control_flow's while marked counted, an scf.for after
   legalization) carries the next free position j and the results; a `stablehlo.if` on mask[i]
   copies the slab x[..., i, ...] (dynamic_slice, or real_dynamic_slice when other sizes are run-
   time ones) into y[..., j, ...] (dynamic_update_slice) and increments j.

Memory safety: i stays in [0, n); j < count whenever mask[i] is true (count is the number of true
entries), and dynamic_update_slice clamps its start into the result anyway (legalize_dynamic's
rewrite writes at most the result's size), so no access leaves an array for any run-time values.
The `count` result binds the equation's fresh dimension variable (emit._bind) after the rule.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from sprue import lax
from sprue.ir.core import Eqn
from sprue.lowering.rules_common import (
    LoweringContext,
    Size,
    Value,
    aval_type,
    broadcast_in_dim,
    build_region,
    constant,
    constant_like,
    convert,
    dtype_of,
    ew,
    has_zero,
    i64s,
    lowering_rules,
    op,
    op1,
    reduce,
    reshape,
    shape_of,
    size_value,
    slice_,
    tensor_type,
)
from sprue.lowering.rules_control_flow import counted_loop


def _slab(x: Value, i: Value, axis: int, sizes: Sequence[Size], shape: Sequence) -> Value:
    """x[..., i:i+1, ...] along axis (i a tensor<i64> inside the axis); `sizes` are x's sizes and
    `shape` its jaxpr shape (for the result type)."""
    zero = constant_like(0, i)
    dt = dtype_of(x)
    slab_shape = [1 if d == axis else s for d, s in enumerate(shape)]
    if all(isinstance(s, int) for d, s in enumerate(sizes) if d != axis):
        slice_sizes = [1 if d == axis else s for d, s in enumerate(sizes)]
        return op1("stablehlo.dynamic_slice", [x, *(i if d == axis else zero for d in range(len(sizes)))],
                   tensor_type(slice_sizes, dt), {"slice_sizes": i64s(slice_sizes)})
    starts = [i if d == axis else 0 for d in range(len(sizes))]
    limits = [ew("add", i, constant_like(1, i)) if d == axis else s for d, s in enumerate(sizes)]
    return slice_(x, starts, limits, None, tensor_type(slab_shape, dt))


def _put(buf: Value, slab: Value, j: Value, axis: int) -> Value:
    """buf with the slab written at position j along axis."""
    zero = constant_like(0, j)
    rank = len(shape_of(buf))
    return op1("stablehlo.dynamic_update_slice", [buf, slab, *(j if d == axis else zero for d in range(rank))],
               buf.type)


def _filter(ctx: LoweringContext, eqn: Eqn, mask: Value, *xs: Value) -> list[Value]:
    axis = eqn.params["axis"]
    out_types = [aval_type(v.aval) for v in eqn.outvars]
    n = ctx.size(eqn.invars[0].aval.shape[0])
    flags = convert(mask, np.int64)
    if has_zero(mask):
        count = constant(0, np.int64)
    else:
        count = reduce([flags], [constant(0, np.int64)], [0], lambda a: [ew("add", a[0], a[1])])[0]
    in_shapes = [v.aval.shape for v in eqn.invars[1:]]
    in_sizes = [ctx.sizes(s) for s in in_shapes]
    # results start as zeros (fresh tensors, written in place by the loop), size count along axis
    bufs = [broadcast_in_dim(constant(0, dtype_of(x)), [count if d == axis else s for d, s in enumerate(sizes)], [])
            for x, sizes in zip(xs, in_sizes)]
    # results whose slabs are statically empty (another axis of size 0) need no copying
    live = [k for k, sizes in enumerate(in_sizes)
            if not any(isinstance(s, int) and s == 0 for d, s in enumerate(sizes) if d != axis)]
    if isinstance(n, int) and n == 0 or not live:
        return [count, *bufs]
    one = constant(1, np.int64)

    def body(i: Value, carry: list[Value]) -> list[Value]:
        j, ys = carry[0], carry[1:]
        keep = reshape(_slab(mask, i, 0, [n], eqn.invars[0].aval.shape), [])
        node = op("stablehlo.if", [keep], [c.type for c in carry], regions=2)

        def taken(_):
            slabs = [_slab(xs[k], i, axis, in_sizes[k], in_shapes[k]) for k in live]
            return [ew("add", j, one), *(_put(y, s, j, axis) for y, s in zip(ys, slabs))]

        build_region(node, [], taken, 0)
        build_region(node, [], lambda _: carry, 1)
        return list(node.results)

    results = counted_loop(size_value(n), [constant(0, np.int64), *(bufs[k] for k in live)], body,
                       [tensor_type((), np.int64), *(out_types[1 + k] for k in live)])
    for k, y in zip(live, results[1:]):
        bufs[k] = y
    return [count, *bufs]


lowering_rules[lax.filter_p] = _filter
