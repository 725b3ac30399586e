"""The transformation rules of the control-flow primitives (for_loop, while, cond, scan): jvp,
vjp, batching and cost, in sprue.interp.ad_util's tables. Each rule builds the transformed construct
with the builders of sprue.lax.control_flow.api, its bodies running the interpreters (jvp_jaxpr, vjp_jaxpr,
batch_jaxpr) over the original bodies — so the transformed loops are loops again, and compile to
native loops.

Reverse mode keeps what the backward pass needs, and no more than a constant factor of work:
 - for_loop and scan: the forward loop also stores each trip's incoming carry (a stack of
   trip-count rows, allocated once; its size may be known only at run time); the backward loop
   runs the trips in reverse, recomputing each trip's body from its stored carry to get its
   cotangents (one body evaluation per trip, as jax.checkpoint on the body would).
 - cond: the backward pass is a cond over the same index whose branches are the branches' vjps.
 - while: refused (its trip count is known only when it ends; use a for_loop with a bound).
vmap of a cond with a batched predicate runs every branch and selects (mini-JAX's where_ge); a
while loop whose predicate is batched runs while any element's predicate holds, and elements
that are done keep their carry.
"""
from __future__ import annotations

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import UnsupportedError
from sprue.interp.ad_util import (
    Zero,
    add_tangents,
    aval_of,
    batch_rules,
    instantiate,
    is_zero,
    jvp_rules,
    nested_cost_rules,
    vjp_fwd_rules,
    vjp_rules,
    zero_of,
)
from sprue.interp.batching import batch_jaxpr, batch_size, batched_outputs, broadcast_batch, move_batch_axis
from sprue.interp.cost import DataDependentCost, Lazy, ProbeNeedsValues
from sprue.interp.jvp import jvp_jaxpr
from sprue.interp.vjp import vjp_jaxpr
from sprue.ir.core import Jaxpr
from sprue.lax.control_flow.api import cond_branches, for_loop_carry, scan_carry, while_carry
from sprue.lax.control_flow.primitives import cond_p, for_loop_p, scan_p, trip_count, while_p
from sprue.lax.elementwise import abs as lax_abs  # (Python's abs and max stay what they are here)
from sprue.lax.elementwise import add, clamp, convert_element_type, div, gt, lt, mul, ne, select, select_n, sub
from sprue.lax.elementwise import max as lax_max
from sprue.lax.indexing import bind_dynamic_slice, bind_dynamic_update_slice
from sprue.lax.reductions import reduce_or
from sprue.lax.structural import broadcast_in_dim, reshape
from sprue.trace.tracing import Tracer, eval_jaxpr


def _is_float(x) -> bool:
    return dtypes.is_float(aval_of(x).dtype)


def _no_resizing(name: str, nimplicit: int):
    if nimplicit:
        raise UnsupportedError(f"{name}: loops that resize their arrays (allow_array_resizing=True) cannot be"
                               f" differentiated or batched yet")


def _tangents_for(values, tangents):
    """Tangent arrays for the float values (zeros where symbolic), None for the others."""
    return [instantiate(t, x) if _is_float(x) else None for x, t in zip(values, tangents)]


def _batched_carries(jaxpr, before: list[bool], carry: list[bool], after: list[bool] = ()) -> list[bool]:
    """Which carries a batched loop must carry batched: those that start batched, and those the body
    makes batched, to a fixed point (the body's parameters are `before`, the carries, `after`)."""
    while True:
        out = batched_outputs(jaxpr, [*before, *carry, *after])[:len(carry)]
        new = [a or b for a, b in zip(carry, out)]
        if new == carry:
            return carry
        carry = new


# == for_loop ========================================================================================
def _for_split(args, body_nconsts):
    return list(args[:body_nconsts]), list(args[body_nconsts:body_nconsts + 3]), list(args[body_nconsts + 3:])


def _for_loop_jvp(primals, tangents, *, body_jaxpr, body_nconsts, nimplicit=0, **params):
    _no_resizing("for_loop", nimplicit)
    consts, (lo, hi, st), init = _for_split(primals, body_nconsts)
    const_ts, _, init_ts = _for_split(tangents, body_nconsts)
    jaxpr = body_jaxpr.jaxpr
    tmask = [_is_float(x) for x in init]
    nc = len(init)

    def body(i, *carry):
        xs, ts = carry[:nc], list(carry[nc:])
        full_ts = [ts.pop(0) if m else Zero(aval_of(x)) for x, m in zip(xs, tmask)]
        outs, touts = jvp_jaxpr(jaxpr, [], [*consts, i, *xs], [*const_ts, Zero(aval_of(i)), *full_ts])
        return (*outs, *(instantiate(t, o) for t, o, m in zip(touts, outs, tmask) if m))

    init_t = [t for t in _tangents_for(init, init_ts) if t is not None]
    res = for_loop_carry("for_loop", body, lo, hi, st, (*init, *init_t))
    outs, ts = list(res[:nc]), list(res[nc:])
    return outs, [ts.pop(0) if m else zero_of(o) for o, m in zip(outs, tmask)]


def _trips(lo, hi, st):
    """len(range(lo, hi, st)) as a value (an int when the bounds are concrete)."""
    if not any(isinstance(b, Tracer) for b in (lo, hi, st)):
        return trip_count(int(lo), int(hi), int(st))
    lo, hi = _i64(lo), _i64(hi)
    one, zero = np.int64(1), np.int64(0)

    def up(span, step):   # ceil(span / step) for span >= 0, step >= 1
        return div(add(span, sub(step, one)), step)
    if not isinstance(st, Tracer):
        step = int(st)
        span = sub(hi, lo) if step > 0 else sub(lo, hi)
        return up(lax_max(span, zero), np.int64(abs(step))) if step else zero
    st = _i64(st)
    mag = lax_max(lax_abs(st), one)
    fwd = up(lax_max(sub(hi, lo), zero), mag)
    bwd = up(lax_max(sub(lo, hi), zero), mag)
    return select(gt(st, zero), fwd, select(lt(st, zero), bwd, zero))


def _i64(x):
    return x if aval_of(x).dtype == np.int64 and not aval_of(x).weak_type else convert_element_type(x, np.int64)


def _index_at(lo, st, k):
    """lo + k * st in the loop index's type."""
    dt = aval_of(lo).dtype
    i = add(_i64(lo), mul(_i64(k), _i64(st)))
    return i if dt == np.int64 else convert_element_type(i, dt)


def _empty_stack(n, x):
    a = aval_of(x)
    return broadcast_in_dim(np.zeros((), a.dtype), (n, *a.shape), ())


def _push(stack, k, x):
    """stack with row k set to x (k is always in range: no run-time check is needed)."""
    a = aval_of(x)
    row = broadcast_in_dim(x, (1, *a.shape), tuple(range(1, a.ndim + 1)))
    return bind_dynamic_update_slice(stack, row, [_i64(k), *([np.int64(0)] * a.ndim)])


def _row(stack, k):
    a = aval_of(stack)
    row = bind_dynamic_slice(stack, [_i64(k), *([np.int64(0)] * (a.ndim - 1))], (1, *a.shape[1:]))
    return reshape(row, a.shape[1:])


def _for_loop_fwd(primals, *, body_jaxpr, body_nconsts, nimplicit=0, **params):
    """The loop, also stacking each trip's incoming carry for the backward pass."""
    _no_resizing("for_loop", nimplicit)
    consts, (lo, hi, st), init = _for_split(primals, body_nconsts)
    n = _trips(lo, hi, st)
    nc = len(init)
    if isinstance(n, int) and n == 0:    # no trips: the outputs are the inputs
        return list(init), None

    def body(k, *carry):
        xs, stacks = carry[:nc], carry[nc:]
        stacks = [_push(s, k, x) for s, x in zip(stacks, xs)]
        outs = eval_jaxpr(body_jaxpr.jaxpr, [], *consts, _index_at(lo, st, k), *xs)
        return (*outs, *stacks)

    res = for_loop_carry("for_loop", body, 0, n, 1, (*init, *(_empty_stack(n, x) for x in init)))
    return list(res[:nc]), (consts, lo, st, n, list(res[nc:]))


def _for_loop_vjp(cts, primals, residuals, *, body_jaxpr, body_nconsts, nimplicit=0, **params):
    init = primals[body_nconsts + 3:]
    if residuals is None:
        return [None] * (body_nconsts + 3) + [c if _is_float(x) else None for c, x in zip(cts, init)]
    consts, lo, st, n, stacks = residuals
    cmask = [_is_float(c) for c in consts]
    xmask = [_is_float(x) for x in init]
    jaxpr = body_jaxpr.jaxpr

    def back(j, *state):
        ct_x, ct_c = list(state[:sum(xmask)]), list(state[sum(xmask):])
        k = sub(sub(_i64(n), np.int64(1)), _i64(j))
        xs = [_row(s, k) for s in stacks]
        _, backward = vjp_jaxpr(jaxpr, [], [*consts, _index_at(lo, st, k), *xs], [*cmask, False, *xmask])
        it = iter(ct_x)
        cin = backward([next(it) if m else None for m in xmask])
        new_c = [add_tangents(a, instantiate(g, c)) for a, g, c in zip(ct_c, [g for g, m in zip(cin[:body_nconsts], cmask) if m],
                                                                [c for c, m in zip(consts, cmask) if m])]
        new_x = [instantiate(g, x) for g, x, m in zip(cin[body_nconsts + 1:], xs, xmask) if m]
        return (*new_x, *new_c)

    ct_x0 = [instantiate(c, x) for c, x, m in zip(cts, init, xmask) if m]
    ct_c0 = [instantiate(Zero(aval_of(c).strip_weak_type())) for c, m in zip(consts, cmask) if m]
    res = for_loop_carry("for_loop", back, 0, n, 1, (*ct_x0, *ct_c0))
    ct_x, ct_c = iter(res[:len(ct_x0)]), iter(res[len(ct_x0):])
    return [*(next(ct_c) if m else None for m in cmask), None, None, None, *(next(ct_x) if m else None for m in xmask)]


def _for_loop_batch(args, dims, *, body_jaxpr, body_nconsts, nimplicit=0, **params):
    _no_resizing("for_loop", nimplicit)
    if any(d is not None for d in dims[body_nconsts:body_nconsts + 3]):
        raise UnsupportedError("not batchable: a for_loop whose bounds differ between batch elements (vmap over"
                               " the loop bounds); use a while_loop, or the largest bound with sprue.cond inside")
    size = batch_size(args, dims)
    consts, (lo, hi, st), init = _for_split(args, body_nconsts)
    cdims, _, xdims = _for_split(dims, body_nconsts)
    jaxpr = body_jaxpr.jaxpr
    xb = _batched_carries(jaxpr, [d is not None for d in cdims] + [False], [d is not None for d in xdims])
    init = [broadcast_batch(x, size) if b and d is None else x for x, b, d in zip(init, xb, xdims)]

    def body(i, *xs):
        outs, odims = batch_jaxpr(jaxpr, [], [*consts, i, *xs], [*cdims, None, *(0 if b else None for b in xb)])
        return tuple(broadcast_batch(o, size) if b and d is None else o for o, d, b in zip(outs, odims, xb))

    outs = for_loop_carry("for_loop", body, lo, hi, st, tuple(init))
    return list(outs), [0 if b else None for b in xb]


jvp_rules[for_loop_p] = _for_loop_jvp
vjp_fwd_rules[for_loop_p] = _for_loop_fwd
vjp_rules[for_loop_p] = _for_loop_vjp
batch_rules[for_loop_p] = _for_loop_batch


# == while ===========================================================================================
def _while_split(args, cond_nconsts, body_nconsts):
    return (list(args[:cond_nconsts]), list(args[cond_nconsts:cond_nconsts + body_nconsts]),
            list(args[cond_nconsts + body_nconsts:]))


def _while_jvp(primals, tangents, *, cond_jaxpr, cond_nconsts, body_jaxpr, body_nconsts, nimplicit=0, **params):
    _no_resizing("while_loop", nimplicit)
    cconsts, bconsts, init = _while_split(primals, cond_nconsts, body_nconsts)
    _, bconst_ts, init_ts = _while_split(tangents, cond_nconsts, body_nconsts)
    tmask = [_is_float(x) for x in init]
    nc = len(init)

    def cond(*carry):
        return eval_jaxpr(cond_jaxpr.jaxpr, [], *cconsts, *carry[:nc])[0]

    def body(*carry):
        xs, ts = carry[:nc], list(carry[nc:])
        full_ts = [ts.pop(0) if m else Zero(aval_of(x)) for x, m in zip(xs, tmask)]
        outs, touts = jvp_jaxpr(body_jaxpr.jaxpr, [], [*bconsts, *xs], [*bconst_ts, *full_ts])
        return (*outs, *(instantiate(t, o) for t, o, m in zip(touts, outs, tmask) if m))

    init_t = [t for t in _tangents_for(init, init_ts) if t is not None]
    res = while_carry("while_loop", cond, body, (*init, *init_t))
    outs, ts = list(res[:nc]), list(res[nc:])
    return outs, [ts.pop(0) if m else zero_of(o) for o, m in zip(outs, tmask)]


def _while_vjp(cts, primals, outs, **params):
    raise UnsupportedError(
        "not differentiable in reverse mode: while_loop (grad/vjp/jacrev). Its number of trips is known only"
        " when it ends, so the carries the backward pass needs cannot be stored; rewrite it as sprue.for_loop or"
        " sprue.lax.fori_loop with a fixed number of trips (jvp and jacfwd do support while_loop)")


def _while_batch(args, dims, *, cond_jaxpr, cond_nconsts, body_jaxpr, body_nconsts, nimplicit=0, **params):
    _no_resizing("while_loop", nimplicit)
    size = batch_size(args, dims)
    cconsts, bconsts, init = _while_split(args, cond_nconsts, body_nconsts)
    cdims, bdims, xdims = _while_split(dims, cond_nconsts, body_nconsts)
    xb = _batched_carries(body_jaxpr.jaxpr, [d is not None for d in bdims], [d is not None for d in xdims])
    pred_batched = batched_outputs(cond_jaxpr.jaxpr, [d is not None for d in cdims] + xb)[0]
    if pred_batched:
        xb = [True] * len(xb)   # elements finish at different trips: every carry is per element
    init = [broadcast_batch(x, size) if b and d is None else x for x, b, d in zip(init, xb, xdims)]
    xd = [0 if b else None for b in xb]

    def pred(xs):
        (p,), (d,) = batch_jaxpr(cond_jaxpr.jaxpr, [], [*cconsts, *xs], [*cdims, *xd])
        return p

    def step(xs):
        outs, odims = batch_jaxpr(body_jaxpr.jaxpr, [], [*bconsts, *xs], [*bdims, *xd])
        return [broadcast_batch(o, size) if b and d is None else o for o, d, b in zip(outs, odims, xb)]

    if not pred_batched:
        res = while_carry("while_loop", lambda *xs: pred(xs), lambda *xs: tuple(step(xs)), tuple(init))
        return list(res), xd

    def body(*xs):
        p = pred(xs)
        new = step(xs)
        return tuple(select(broadcast_in_dim(p, aval_of(n).shape, (0,)), n, x) for n, x in zip(new, xs))

    res = while_carry("while_loop", lambda *xs: reduce_or(pred(xs), (0,)), body, tuple(init))
    return list(res), xd


jvp_rules[while_p] = _while_jvp
vjp_rules[while_p] = _while_vjp
batch_rules[while_p] = _while_batch


# == cond ============================================================================================
def _cond_jvp(primals, tangents, *, branches):
    index, ops = primals[0], list(primals[1:])
    op_ts = list(tangents[1:])
    nz = [not is_zero(t) and _is_float(x) for t, x in zip(op_ts, ops)]
    out_float = [dtypes.is_float(a.dtype) for a in branches[0].out_avals]
    n = len(ops)

    def branch(b):
        def fn(*args):
            xs, ts = args[:n], list(args[n:])
            full_ts = [ts.pop(0) if m else Zero(aval_of(x)) for x, m in zip(xs, nz)]
            outs, touts = jvp_jaxpr(b.jaxpr, [], xs, full_ts)
            return (*outs, *(instantiate(t, o) for t, o, f in zip(touts, outs, out_float) if f))
        return fn

    res = cond_branches("cond", index, [branch(b) for b in branches],
                        (*ops, *(t for t, m in zip(op_ts, nz) if m)))
    k = len(out_float)
    outs, ts = list(res[:k]), list(res[k:])
    return outs, [ts.pop(0) if f else zero_of(o) for o, f in zip(outs, out_float)]


def _cond_vjp(cts, primals, outs, *, branches):
    index, ops = primals[0], list(primals[1:])
    omask = [_is_float(x) for x in ops]
    cmask = [_is_float(o) for o in outs]
    n = len(ops)

    def branch(b):
        def fn(*args):
            xs, cs = args[:n], list(args[n:])
            _, backward = vjp_jaxpr(b.jaxpr, [], xs, omask)
            g = backward([cs.pop(0) if m else None for m in cmask])
            return tuple(instantiate(gi, x) for gi, x, m in zip(g, xs, omask) if m)
        return fn

    cts_in = [instantiate(c, o) for c, o, m in zip(cts, outs, cmask) if m]
    res = iter(cond_branches("cond", index, [branch(b) for b in branches], (*ops, *cts_in)))
    return [None, *(next(res) if m else None for m in omask)]


def _cond_batch(args, dims, *, branches):
    size = batch_size(args, dims)
    index, ops = args[0], list(args[1:])
    odims = list(dims[1:])

    def run(b, xs):
        outs, ds = batch_jaxpr(b.jaxpr, [], xs, odims)
        return tuple(broadcast_batch(o, size) if d is None else o for o, d in zip(outs, ds))

    if dims[0] is None:
        res = cond_branches("cond", index, [lambda *xs, b=b: run(b, xs) for b in branches], tuple(ops))
        return list(res), [0] * len(res)
    # a batched predicate: every branch runs, and each element picks its branch's result
    per_branch = [run(b, ops) for b in branches]
    k = clamp(np.int32(0), index, np.int32(len(branches) - 1))
    outs = []
    for results in zip(*per_branch):
        shape = aval_of(results[0]).shape
        which = broadcast_in_dim(k, shape, (0,)) if len(shape) > 1 else k
        if len(results) == 2:
            which = ne(which, np.int32(0))
        outs.append(select_n(which, *results) if len(results) > 1 else results[0])
    return outs, [0] * len(outs)


jvp_rules[cond_p] = _cond_jvp
vjp_rules[cond_p] = _cond_vjp
batch_rules[cond_p] = _cond_batch


# == scan ============================================================================================
def _scan_split(args, num_consts, num_carry):
    return (list(args[:num_consts]), list(args[num_consts:num_consts + num_carry]),
            list(args[num_consts + num_carry:]))


def _scan_jvp(primals, tangents, *, jaxpr, num_consts, num_carry, length, reverse, unroll=1, **params):
    consts, init, xs = _scan_split(primals, num_consts, num_carry)
    const_ts, init_ts, xs_ts = _scan_split(tangents, num_consts, num_carry)
    cmask = [_is_float(x) for x in init]
    xmask = [not is_zero(t) and _is_float(x) for t, x in zip(xs_ts, xs)]
    ymask = [dtypes.is_float(a.dtype) for a in jaxpr.out_avals[num_carry:]]

    def f(carry, x):
        cs, tcs = carry
        xv, txs = x
        tcs, txs = list(tcs), list(txs)
        ct_full = [tcs.pop(0) if m else Zero(aval_of(c)) for c, m in zip(cs, cmask)]
        xt_full = [txs.pop(0) if m else Zero(aval_of(v).strip_weak_type()) for v, m in zip(xv, xmask)]
        outs, touts = jvp_jaxpr(jaxpr.jaxpr, [], [*consts, *cs, *xv], [*const_ts, *ct_full, *xt_full])
        new_c = outs[:num_carry]
        new_t = [instantiate(t, o) for t, o, m in zip(touts[:num_carry], new_c, cmask) if m]
        ys = outs[num_carry:]
        ys_t = [instantiate(t, o) for t, o, m in zip(touts[num_carry:], ys, ymask) if m]
        return (list(new_c), new_t), (list(ys), ys_t)

    init_t = [t for t in _tangents_for(init, init_ts) if t is not None]
    x_t = [t for t, m in zip(xs_ts, xmask) if m]
    (c, ct), (ys, yts) = scan_carry("scan", f, (init, init_t), (xs, x_t), length, reverse, unroll)
    ct, yts = list(ct), list(yts)
    return [*c, *ys], [*(ct.pop(0) if m else zero_of(o) for o, m in zip(c, cmask)),
                       *(yts.pop(0) if m else zero_of(o) for o, m in zip(ys, ymask))]


def _scan_fwd(primals, *, jaxpr, num_consts, num_carry, length, reverse, unroll=1, **params):
    consts, init, xs = _scan_split(primals, num_consts, num_carry)

    def f(carry, x):
        outs = eval_jaxpr(jaxpr.jaxpr, [], *consts, *carry, *x)
        return list(outs[:num_carry]), (list(outs[num_carry:]), list(carry))

    final, (ys, stacks) = scan_carry("scan", f, init, xs, length, reverse, unroll)
    return [*final, *ys], (consts, xs, list(stacks))


def _scan_vjp(cts, primals, residuals, *, jaxpr, num_consts, num_carry, length, reverse, unroll=1, **params):
    consts, xs, stacks = residuals
    init = primals[num_consts:num_consts + num_carry]
    kmask = [_is_float(c) for c in consts]
    cmask = [_is_float(c) for c in init]
    xmask = [_is_float(x) for x in xs]
    y_avals = jaxpr.out_avals[num_carry:]
    ymask = [dtypes.is_float(a.dtype) for a in y_avals]
    ct_carry, ct_ys = cts[:num_carry], cts[num_carry:]

    def g(state, x):
        ct_c, ct_k = list(state[0]), list(state[1])
        xk, ck, cyk = x
        _, backward = vjp_jaxpr(jaxpr.jaxpr, [], [*consts, *ck, *xk], [*kmask, *cmask, *xmask])
        it_c, it_y = iter(ct_c), iter(cyk)
        cin = backward([next(it_c) if m else None for m in cmask] + [next(it_y) if m else None for m in ymask])
        g_k = [instantiate(gi, c) for gi, c, m in zip(cin[:num_consts], consts, kmask) if m]
        new_k = [add_tangents(a, b) for a, b in zip(ct_k, g_k)]
        new_c = [instantiate(gi, c) for gi, c, m in zip(cin[num_consts:num_consts + num_carry], ck, cmask) if m]
        ct_x = [instantiate(gi, v) for gi, v, m in zip(cin[num_consts + num_carry:], xk, xmask) if m]
        return (new_c, new_k), ct_x

    c0 = [instantiate(c, x) for c, x, m in zip(ct_carry, init, cmask) if m]
    k0 = [instantiate(Zero(aval_of(c).strip_weak_type())) for c, m in zip(consts, kmask) if m]
    cy = [instantiate(c) for c, m in zip(ct_ys, ymask) if m]
    (ct_c, ct_k), ct_xs = scan_carry("scan", g, (c0, k0), (list(xs), stacks, cy), length, not reverse, unroll)
    ic, ik, ix = iter(ct_c), iter(ct_k), iter(ct_xs)
    return [*(next(ik) if m else None for m in kmask), *(next(ic) if m else None for m in cmask),
            *(next(ix) if m else None for m in xmask)]


def _scan_batch(args, dims, *, jaxpr, num_consts, num_carry, length, reverse, unroll=1, **params):
    size = batch_size(args, dims)
    consts, init, xs = _scan_split(args, num_consts, num_carry)
    kd, cd, xd = _scan_split(dims, num_consts, num_carry)
    xb = [d is not None for d in xd]
    cb = _batched_carries(jaxpr.jaxpr, [d is not None for d in kd], [d is not None for d in cd], xb)
    yb = batched_outputs(jaxpr.jaxpr, [d is not None for d in kd] + cb + xb)[num_carry:]
    init = [broadcast_batch(x, size) if b and d is None else x for x, b, d in zip(init, cb, cd)]
    xs = [move_batch_axis(x, 0, size, 1) if b else x for x, b in zip(xs, xb)]   # scan runs along axis 0

    def f(carry, x):
        outs, ods = batch_jaxpr(jaxpr.jaxpr, [], [*consts, *carry, *x],
                                [*kd, *(0 if b else None for b in cb), *(0 if b else None for b in xb)])
        fixed = [broadcast_batch(o, size) if b and d is None else o
                 for o, d, b in zip(outs, ods, [*cb, *yb])]
        return fixed[:num_carry], fixed[num_carry:]

    c, ys = scan_carry("scan", f, init, xs, length, reverse, unroll)
    ys = [move_batch_axis(y, 1, size, 0) if b else y for y, b in zip(ys, yb)]
    return [*c, *ys], [*(0 if b else None for b in cb), *(0 if b else None for b in yb)]


jvp_rules[scan_p] = _scan_jvp
vjp_fwd_rules[scan_p] = _scan_fwd
vjp_rules[scan_p] = _scan_vjp
batch_rules[scan_p] = _scan_batch


# == cost: loops multiply their body's count by the trip count ======================================
def _body_cost(ctx, jaxpr, consts, params_avals, trips: int, iterate):
    """trips * the body's count when it does not depend on the values of the carry; otherwise the
    count of each trip, running the trips (`iterate`)."""
    try:
        per, _ = ctx.jaxpr_cost(jaxpr, consts, [Lazy.abstract(a, probe=True) for a in params_avals])
        return trips * per, None
    except ProbeNeedsValues:
        return iterate()


def _for_loop_cost(ctx, eqn, ins):
    p = eqn.params
    nconsts, jaxpr = p["body_nconsts"], p["body_jaxpr"].jaxpr
    consts, bounds, init = ins[:nconsts], ins[nconsts:nconsts + 3], ins[nconsts + 3:]
    lo, hi, st = (int(b.value("the trip count of a for_loop")) for b in bounds)
    n = trip_count(lo, hi, st)
    dt = eqn.invars[nconsts].aval.dtype

    def iterate():
        total, carry = 0, list(init)
        for k in range(n):
            c, carry = ctx.jaxpr_cost(_without_consts(jaxpr, nconsts), consts,
                                      [Lazy.known(np.asarray(lo + k * st, dt)), *carry])
            total += c
        return total, carry

    total, outs = _body_cost(ctx, _without_consts(jaxpr, nconsts), consts,
                             [v.aval for v in jaxpr.invars[nconsts:]], n, iterate)
    return total, outs if outs is not None else ctx.outputs(eqn, ins)


def _without_consts(jaxpr, n):
    """The same jaxpr with its first n invars as constvars (cost passes hoisted consts as consts)."""
    return Jaxpr(jaxpr.invars[:n], jaxpr.invars[n:], jaxpr.outvars, jaxpr.eqns)


def _while_cost(ctx, eqn, ins):
    p = eqn.params
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    cconsts, bconsts, carry = ins[:nc], ins[nc:nc + nb], list(ins[nc + nb:])
    total = 0
    while True:
        c, (pred,) = ctx.jaxpr_cost(_without_consts(p["cond_jaxpr"].jaxpr, nc), cconsts, carry)
        total += c
        if not bool(pred.value("the number of trips of a while_loop")):
            return total, carry
        c, carry = ctx.jaxpr_cost(_without_consts(p["body_jaxpr"].jaxpr, nb), bconsts, carry)
        total += c


def _cond_cost(ctx, eqn, ins):
    branches = eqn.params["branches"]
    try:
        k = int(ins[0].value("which branch a cond takes"))
    except DataDependentCost:   # abstract arguments: the most expensive branch
        return max(ctx.jaxpr_cost(b.jaxpr, [], ins[1:])[0] for b in branches), ctx.outputs(eqn, ins)
    return ctx.jaxpr_cost(branches[min(max(k, 0), len(branches) - 1)].jaxpr, [], ins[1:])


def _scan_cost(ctx, eqn, ins):
    p = eqn.params
    nk, nc, jaxpr = p["num_consts"], p["num_carry"], p["jaxpr"].jaxpr
    consts, init, xs = ins[:nk], ins[nk:nk + nc], ins[nk + nc:]
    n = p["length"]
    if n is None:
        n = int(np.shape(xs[0].value("the length of a scan"))[0])

    def iterate():
        total, carry = 0, list(init)
        order = range(n - 1, -1, -1) if p["reverse"] else range(n)
        for k in order:
            sl = [Lazy(lambda x=x, k=k: np.asarray(x.value())[k], None) for x in xs]
            c, outs = ctx.jaxpr_cost(_without_consts(jaxpr, nk), consts, [*carry, *sl])
            total += c
            carry = outs[:nc]
        return total, None

    total, _ = _body_cost(ctx, _without_consts(jaxpr, nk), consts, [v.aval for v in jaxpr.invars[nk:]], n, iterate)
    return total, ctx.outputs(eqn, ins)


nested_cost_rules[for_loop_p] = _for_loop_cost
nested_cost_rules[while_p] = _while_cost
nested_cost_rules[cond_p] = _cond_cost
nested_cost_rules[scan_p] = _scan_cost
