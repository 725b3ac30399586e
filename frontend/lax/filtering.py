"""Data-dependent shapes: `filter`, the primitive whose result size is computed at run time.

    filter[axis=a] mask x1 ... xk   ->   count:i64[]  y1 ... yk

`mask` is a bool[n]; every x has size n along `axis`. Each y is its x with only the entries
(rows, columns, ...) along `axis` where mask is true, in order: its size along `axis` is `count`,
the number of true entries, a *fresh* dimension variable bound by the `count` result (the shape
rule returns a core.SizeAval, as a loop that resizes its arrays does), so every y shares it:

    b:i64[] c:f64[b] d:i64[b] = filter[axis=0] mask x idx

Several operands in one equation share one fresh size: sprue.numpy.nonzero filters one index
array per axis at once (all of size b), and the jvp filters a value and its tangent together,
so the tangent has its primal's type.

Reference rule: numpy.compress. The lowering (sprue.lowering.rules_filtering) counts the true
entries with a reduction, allocates each result with that size, and fills it in one loop over n.

Transformations: jvp filters the tangent with the same mask; vjp places the cotangent back at the
kept positions (zeros elsewhere: a clamped gather at cumsum(mask) - 1 and a select, so grad of
grad works with the existing rules); vmap works when the mask is the same for every batch element
(the batched operands filter along axis + 1) and refuses a batched mask, since each batch element
would keep a different number of entries; the cost is nothing (data movement).
"""
from __future__ import annotations

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueTypeError, SprueValueError, UnsupportedError
from sprue.interp.ad_util import aval_of, batch_rules, cost_rules, is_zero, jvp_rules, vjp_rules, zero_of
from sprue.interp.batching import batch_size, batched_all
from sprue.interp.cost import free
from sprue.ir.core import ShapedArray, SizeAval
from sprue.ir.shapes import DimVar, dim
from sprue.lax._rules import define, require_equal, runtime_size_ops
from sprue.lax.elementwise import convert_element_type, select, sub
from sprue.lax.reductions import cumsum
from sprue.lax.structural import broadcast_in_dim

__all__ = ["filter_p"]


def _filter_rule(mask: ShapedArray, *xs: ShapedArray, axis: int):
    if mask.ndim != 1 or mask.dtype != dtypes.bool_:
        raise SprueTypeError(f"filter: the mask must be a 1-d bool array, got {mask.str_short()}")
    if not xs:
        raise SprueValueError("filter needs at least one array operand after the mask")
    n = mask.shape[0]
    for x in xs:
        if not isinstance(axis, int) or not 0 <= axis < x.ndim:
            raise SprueValueError(f"filter: axis {axis} is out of bounds for {x.str_short()}")
        require_equal(x.shape[axis], n, f"filter: the mask {mask.str_short()} does not fit axis {axis} of"
                                        f" {x.str_short()}")
    count = SizeAval(DimVar())
    b = dim(count.binds)
    return [count, *(x.update(shape=x.shape[:axis] + (b,) + x.shape[axis + 1:]) for x in xs)]


def _filter_impl(mask, *xs, axis: int):
    m = np.asarray(mask, bool)
    return [np.int64(np.count_nonzero(m)), *(np.compress(m, x, axis=axis) for x in xs)]


filter_p = define("filter", _filter_rule, _filter_impl, multiple_results=True)


def filter(mask, *xs, axis: int = 0):
    """(count, [x with only the entries along `axis` where mask is true, for each x]): the results
    share one size, `count`, known only at run time (a fresh dimension)."""
    count, *ys = filter_p.bind(mask, *xs, axis=int(axis))
    return count, ys


# == transformation rules (tables in sprue.interp.ad_util): jvp, vjp, batching, cost ===============


def _filter_jvp(primals, tangents, *, axis):
    mask, *xs = primals
    active = [k for k, t in enumerate(tangents[1:]) if not is_zero(t)]
    outs = filter_p.bind(mask, *xs, *(tangents[1 + k] for k in active), axis=axis)
    count, ys, filtered = outs[0], outs[1:1 + len(xs)], outs[1 + len(xs):]
    touts = [zero_of(y) for y in ys]
    for k, t in zip(active, filtered):
        touts[k] = t
    return [count, *ys], [zero_of(count), *touts]


def unfilter(ct, mask, axis: int):
    """The transpose of filter: ct (size count along axis) placed at the positions where mask is
    true, zeros elsewhere (size n along axis). Entry i of the result reads ct at cumsum(mask)[i] - 1,
    clamped (and from ct padded by one when count may be 0), then the mask selects it."""
    pos = sub(cumsum(convert_element_type(mask, np.int64), 0), np.int64(1))
    g = runtime_size_ops.take_clamped(ct, axis, pos)
    shape = aval_of(g).shape
    keep = broadcast_in_dim(mask, shape, (axis,))
    zeros = broadcast_in_dim(np.zeros((), aval_of(g).dtype), shape, ())
    return select(keep, g, zeros)


def _filter_vjp(cts, primals, outs, *, axis):
    mask, *xs = primals
    return [None, *(None if is_zero(ct) else (lambda ct=ct: unfilter(ct, mask, axis)) for ct in cts[1:])]


def _filter_batch(args, dims, *, axis):
    if dims[0] is not None:
        raise UnsupportedError(
            "not batchable: filter (the number of kept elements differs between batch elements, so the"
            " results would be ragged arrays); keep the shape with jnp.where(mask, x, fill) (and count with"
            " jnp.sum(mask)), or loop over the batch with a Python or sprue.for_loop loop")
    xs = batched_all(args[1:], dims[1:], batch_size(args, dims))
    count, *ys = filter_p.bind(args[0], *xs, axis=axis + 1)
    return [count, *ys], [None, *([0] * len(ys))]


jvp_rules[filter_p] = _filter_jvp
vjp_rules[filter_p] = _filter_vjp
batch_rules[filter_p] = _filter_batch
cost_rules[filter_p] = free

