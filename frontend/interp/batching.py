"""vmap: the batching interpreter over jaxprs (mini-JAX's VMAP).

Every value is either unbatched or carries the batch as its leading axis (dim 0); an equation with
no batched operand is evaluated as it is, otherwise its primitive's batch rule runs. Rules bind
primitives, so vmap composes with grad, jvp, qjit and itself, and the batch size may be a size
known only at run time.
"""
from __future__ import annotations

from typing import Sequence

from sprue.base.errors import UnsupportedError
from sprue.interp.ad_util import aval_of, batch_rules, located, not_transformable
from sprue.ir.core import Jaxpr, Literal, Var
from sprue.trace.tracing import bind, lax_ops


def batch_jaxpr(jaxpr: Jaxpr, consts: Sequence, args: Sequence, dims: Sequence) -> tuple[list, list]:
    """Evaluate jaxpr on args, args[i] batched along axis 0 when dims[i] == 0 (None: unbatched)."""
    env: dict[Var, object] = {}
    denv: dict[Var, object] = {}

    def read(a):
        return a.val if isinstance(a, Literal) else env[a]

    def read_dim(a):
        return None if isinstance(a, Literal) else denv.get(a)

    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x, d in zip(jaxpr.invars, args, dims):
        env[v] = x
        if d is not None:
            denv[v] = 0
    for eqn in jaxpr.eqns:
        xs = [read(a) for a in eqn.invars]
        ds = [read_dim(a) for a in eqn.invars]
        multiple = eqn.primitive.multiple_results
        if all(d is None for d in ds):
            outs = bind(eqn.primitive, xs, eqn.params)
            out_dims = [None] * len(outs) if multiple else None
        else:
            rule = batch_rules.get(eqn.primitive)
            if rule is None:
                raise located(not_transformable("batchable", eqn.primitive), eqn)
            try:
                outs, out_dims = rule(xs, ds, **eqn.params)
            except UnsupportedError as e:   # a rule refusing a case: name the user's line
                raise located(e, eqn)
        outs, out_dims = (list(outs), list(out_dims)) if multiple else ([outs], [out_dims])
        for v, x, d in zip(eqn.outvars, outs, out_dims):
            env[v] = x
            if d is not None:
                assert d == 0, f"batch rule of {eqn.primitive} returned batch dim {d}"
                denv[v] = 0
    return [read(a) for a in jaxpr.outvars], [read_dim(a) for a in jaxpr.outvars]


# -- helpers for batch rules --------------------------------------------------------------------
def batch_size(args: Sequence, dims: Sequence):
    """The batch size: the leading size of any batched operand."""
    for x, d in zip(args, dims):
        if d is not None:
            return aval_of(x).shape[0]
    raise ValueError("batch_size: no batched operand")


def broadcast_batch(x, size, out_shape=None):
    """Unbatched x as a batched value: x broadcast along a new leading axis of `size` (and, when
    out_shape is given, to that per-example shape, x being rank 0 or of that shape)."""
    aval = aval_of(x)
    shape = tuple(aval.shape) if out_shape is None else tuple(out_shape)
    dims = tuple(range(1 + len(shape) - aval.ndim, 1 + len(shape)))
    return lax_ops.broadcast_in_dim(x, (size, *shape), dims)


def move_batch_axis(x, d, size, to: int = 0):
    """x batched at dim d (None: unbatched, then broadcast) with its batch axis moved to `to`."""
    if d is None:
        x = broadcast_batch(x, size)
        d = 0
    nd = aval_of(x).ndim
    to = to % nd
    if d == to:
        return x
    perm = [i for i in range(nd) if i != d]
    perm.insert(to, d)
    return lax_ops.transpose(x, perm)


def batched_all(args: Sequence, dims: Sequence, size=None) -> list:
    """Every operand batched at 0 (unbatched ones broadcast)."""
    size = batch_size(args, dims) if size is None else size
    return [x if d is not None else broadcast_batch(x, size) for x, d in zip(args, dims)]


def elementwise_batch_rule(p, scalar_ok=lambda i: True):
    """Batching for a primitive acting elementwise on operands of one shape (or rank 0): operands
    are brought to one batched shape, then p applies as it is. An unbatched rank-0 operand stays
    rank 0 where the primitive accepts one (`scalar_ok(position)`: select_n's cases do not)."""
    def rule(args, dims, **params):
        size = batch_size(args, dims)
        shape = ()
        for x, d in zip(args, dims):
            s = aval_of(x).shape
            s = s[1:] if d is not None else s
            if len(s) > len(shape):
                shape = s
        xs = []
        for i, (x, d) in enumerate(zip(args, dims)):
            nd = aval_of(x).ndim - (d is not None)
            if d is None and nd == 0 and scalar_ok(i):
                xs.append(x)                       # a rank-0 operand broadcasts by itself
            elif d is None and nd < len(shape):
                xs.append(broadcast_batch(x, size, shape))
            elif d is None:
                xs.append(broadcast_batch(x, size))
            elif nd < len(shape):                  # a batched scalar against arrays
                xs.append(lax_ops.broadcast_in_dim(x, (size, *shape), (0,)))
            else:
                xs.append(x)
        out = p.bind(*xs, **params)
        return out, ([0] * len(out) if p.multiple_results else 0)
    return rule


__all__ = ["batch_jaxpr", "batch_size", "broadcast_batch", "move_batch_axis", "batched_all",
           "elementwise_batch_rule"]


def batched_outputs(jaxpr, in_batched: Sequence[bool]) -> list[bool]:
    """Which outputs of jaxpr depend on its batched inputs (what batching would make batched, taken
    conservatively: an equation with a batched operand has batched outputs)."""
    b: set = {v for v, x in zip(jaxpr.invars, in_batched) if x}
    for eqn in jaxpr.eqns:
        if any(isinstance(a, Var) and a in b for a in eqn.invars):
            b.update(eqn.outvars)
    return [isinstance(a, Var) and a in b for a in jaxpr.outvars]
