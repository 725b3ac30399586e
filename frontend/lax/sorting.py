"""sort: sorts operands together along `dimension` by the first `num_keys` of them
(lexicographically), stable when is_stable. Floats order as numpy does: NaNs last."""
from __future__ import annotations

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueValueError
from sprue.interp.ad_util import aval_of, batch_rules, cost_rules, instantiate, is_zero, jvp_rules, vjp_rules, zero_of
from sprue.interp.batching import batched_all
from sprue.interp.cost import free
from sprue.lax._rules import check_axes, define, require_equal
from sprue.lax.structural import broadcasted_iota, require_ordered


def _sort_rule(*xs, dimension, is_stable=True, num_keys=1):
    if not xs:
        raise SprueValueError("sort needs at least one operand")
    for x in xs:
        if x.ndim != xs[0].ndim:
            raise SprueValueError("sort: operands must share one shape, got " + ", ".join(x.str_short() for x in xs))
        for d, e in zip(xs[0].shape, x.shape):
            require_equal(d, e, "sort: operands must share one shape, got " + ", ".join(x.str_short() for x in xs))
    check_axes((dimension,), xs[0].ndim, "sort")
    for k in xs[:num_keys]:
        require_ordered("sort", k)
    if not 1 <= num_keys <= len(xs):
        raise SprueValueError(f"sort: num_keys={num_keys} must be between 1 and {len(xs)}")
    return list(xs)


def _sort_impl(*xs, dimension, is_stable=True, num_keys=1):
    keys = [np.moveaxis(k, dimension, -1) for k in xs[:num_keys]]
    # np.lexsort sorts by the last key first; it is stable and puts NaNs last
    order = np.lexsort(keys[::-1], axis=-1) if keys[0].ndim else np.zeros((), np.int64)
    outs = []
    for x in xs:
        moved = np.moveaxis(x, dimension, -1)
        outs.append(np.moveaxis(np.take_along_axis(moved, order, axis=-1), -1, dimension))
    return outs


sort_p = define("sort", _sort_rule, _sort_impl, multiple_results=True)


def sort(operands, dimension: int = -1, is_stable: bool = True, num_keys: int = 1):
    single = not isinstance(operands, (tuple, list))
    ops = [operands] if single else list(operands)
    nd = np.ndim(ops[0]) if not hasattr(ops[0], "ndim") else ops[0].ndim
    outs = sort_p.bind(*ops, dimension=dimension % max(nd, 1), is_stable=is_stable, num_keys=num_keys)
    return outs[0] if single else tuple(outs)


# == transformation rules (tables in sprue.interp.ad_util): jvp, vjp, batching, cost ===============
# sort permutes its operands: the tangents are sorted along with them (extra operands after the
# keys, so the permutation is the same), and the cotangents are permuted back by sorting them by
# the permutation (an iota sorted along with the keys). Every rule binds sort itself, so the
# rules compose (grad of grad) without needing gather or scatter.


def _sort_jvp(primals, tangents, *, dimension, is_stable=True, num_keys=1):
    moving = [k for k, t in enumerate(tangents) if not is_zero(t) and dtypes.is_float(aval_of(primals[k]).dtype)]
    outs = sort_p.bind(*primals, *(instantiate(tangents[k], primals[k]) for k in moving), dimension=dimension,
                       is_stable=is_stable, num_keys=num_keys)
    n = len(primals)
    touts = [zero_of(o) for o in outs[:n]]
    for j, k in enumerate(moving):
        touts[k] = outs[n + j]
    return list(outs[:n]), touts


def _sort_vjp(cts, primals, outs, *, dimension, is_stable=True, num_keys=1):
    needed = [k for k, c in enumerate(cts) if not is_zero(c) and dtypes.is_float(aval_of(primals[k]).dtype)]
    cache: list = []

    def unsorted():
        if not cache:
            shape = aval_of(primals[0]).shape
            iota = broadcasted_iota(np.int64, shape, dimension)
            perm = sort_p.bind(*primals[:num_keys], iota, dimension=dimension, is_stable=is_stable,
                               num_keys=num_keys)[-1]
            back = sort_p.bind(perm, *(cts[k] for k in needed), dimension=dimension, is_stable=True, num_keys=1)
            cache.append(dict(zip(needed, back[1:])))
        return cache[0]
    return [(lambda k=k: unsorted()[k]) if k in needed else None for k in range(len(primals))]


def _sort_batch(args, dims, *, dimension, **params):
    nd = aval_of(args[0]).ndim - (dims[0] is not None)
    outs = sort_p.bind(*batched_all(args, dims), dimension=dimension % nd + 1, **params)
    return outs, [0] * len(outs)


jvp_rules[sort_p], vjp_rules[sort_p], batch_rules[sort_p] = _sort_jvp, _sort_vjp, _sort_batch
cost_rules[sort_p] = free
