"""Derivatives the user defines, and rematerialization: custom_jvp, custom_vjp, checkpoint/remat,
stop_gradient, with JAX's semantics (jax._src.custom_derivatives, jax._src.ad_checkpoint) and its
printed forms:

    b:f64[] = custom_jvp_call[call_jaxpr={ lambda ; c:f64[]. ... } jvp=softplus_jvp name=softplus
                              num_consts=0 symbolic_zeros=False] a
    b:f64[] = custom_vjp_call[bwd=g_bwd call_jaxpr={ ... } fwd=g_fwd name=g num_consts=0
                              symbolic_zeros=False] a c
    b:f64[] = remat2[differentiated=False jaxpr={ ... } policy=None prevent_cse=True] a

The function is traced when it is called, with the values it closes over hoisted into leading
operands (`num_consts`), so compiled code runs `call_jaxpr` like any body. The rules are kept as
the user's functions (`Rule`, printed by name, as JAX prints them): a transformation calls them on
its own values, or traces them where it needs a jaxpr (reverse mode of a JVP rule, vmap). Like
JAX's rule thunks they are traced lazily: a rule may call the function it differentiates (softplus's
rule calls softplus) without tracing itself forever. A rule therefore sees its arguments, Python
and numpy values and sizes, but not values traced by the function's caller (sprue reports those
as escaped tracers).

- custom_jvp: jvp runs the rule; reverse mode transposes the rule's tangent map (linear in the
  tangents) by running reverse mode over it, as JAX transposes its linearization; vmap batches the
  function and the rule, keeping the rule. As in JAX, differentiating with respect to a value the
  function closes over (not an argument) is an error, and its tangent rule must give tangents of
  the primal outputs' types.
- custom_vjp: reverse mode runs fwd in the forward pass (its residuals are what is kept) and bwd
  in the backward pass; jvp is an error, as in JAX; vmap batches the function, fwd and bwd.
- checkpoint (remat): reverse mode keeps only the body's inputs, and recomputes the body in the
  backward pass. Only policy=None (save nothing) is implemented.
"""
from __future__ import annotations

import functools
import re
from typing import Callable, Sequence

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueTypeError, UnsupportedError, check_callable
from sprue.base.pytree import tree_flatten, tree_map, tree_unflatten
from sprue.interp.ad_util import (
    aval_of,
    batch_rules,
    cost_rules,
    instantiate,
    is_zero,
    jvp_rules,
    nested_cost_rules,
    vjp_fwd_rules,
    vjp_rules,
    zero_of,
    zeros_like_aval,
)
from sprue.interp.batching import batch_jaxpr, batch_size, batched_all
from sprue.interp.cost import Lazy, free
from sprue.interp.jvp import jvp_jaxpr
from sprue.interp.vjp import vjp_jaxpr
from sprue.ir.core import ClosedJaxpr, Jaxpr, ShapedArray, Var
from sprue.lax._rules import define
from sprue.lax.control_flow.bodies import leaf_aval, trace_body, where
from sprue.trace.tracing import Tracer, eval_jaxpr

__all__ = ["Rule", "checkpoint", "custom_jvp", "custom_jvp_call_p", "custom_vjp", "custom_vjp_call_p", "remat",
           "remat_p", "stop_gradient", "stop_gradient_p"]


class Rule:
    """A user's rule as an equation param: a flat function of arrays (called by the transformations
    on their values), traced to a jaxpr where a transformation needs one (reverse mode of a JVP
    rule, vmap), once per argument types. Printed by the user function's name, as JAX prints
    `jvp=f_jvp`. The traced values a trace captures are sizes given at run time (the jaxpr takes
    them first)."""

    __slots__ = ("name", "fn", "_traced")

    def __init__(self, name: str, fn: Callable):
        self.name, self.fn, self._traced = name, fn, {}

    def __str__(self):
        return self.name

    __repr__ = __str__

    def __call__(self, *args) -> list:
        return list(self.fn(*args))

    def traced(self, avals: Sequence[ShapedArray]) -> tuple[ClosedJaxpr, list]:
        """The rule traced at avals, and the traced values it captured (sizes given at run time: the
        jaxpr takes them first). Kept per avals when it captured none."""
        key = tuple(avals)
        if key in self._traced:
            return self._traced[key], []
        closed, captured, _ = _trace(self.name, lambda *xs: list(self.fn(*xs)), avals)
        if not captured:
            self._traced[key] = closed
        return closed, captured

    def batched(self, size) -> "Rule":
        """This rule over arguments and results with a leading batch axis of `size`."""
        def run(*args):
            j, captured = self.traced([aval_of(a).update(shape=tuple(aval_of(a).shape[1:])) for a in args])
            outs, dims = batch_jaxpr(j.jaxpr, j.consts, [*captured, *args], [None] * len(captured) + [0] * len(args))
            return batched_all(outs, dims, size) if outs else []
        return Rule(self.name, run)


def _name(fn) -> str:
    """A function's name as a bare identifier (the printer prints it unquoted)."""
    return re.sub(r"\W", "_", getattr(fn, "__name__", type(fn).__name__)) or "fn"


def _trace(construct: str, fn: Callable, avals: Sequence[ShapedArray]):
    """fn(*args) traced at avals: (a ClosedJaxpr over (the traced values fn captured, *args) whose
    consts are the numpy values it captured, those traced values, the output tree)."""
    body = trace_body(construct, fn, avals)
    j, n = body.jaxpr.jaxpr, len(body.consts)
    traced = [i for i, c in enumerate(body.consts) if isinstance(c, Tracer)]
    concrete = [i for i in range(n) if i not in traced]
    closed = ClosedJaxpr(Jaxpr([j.invars[i] for i in concrete], [*(j.invars[i] for i in traced), *j.invars[n:]],
                               list(j.outvars), j.eqns), [body.consts[i] for i in concrete])
    return closed, [body.consts[i] for i in traced], body.out_tree


def _batched(closed: ClosedJaxpr, size) -> ClosedJaxpr:
    """closed with every parameter and result given a leading batch axis of `size`."""
    avals = [a.update(shape=(size, *a.shape)) for a in closed.in_avals]

    def run(*args):
        outs, dims = batch_jaxpr(closed.jaxpr, closed.consts, args, [0] * len(args))
        return batched_all(outs, dims, size) if outs else []
    batched, traced, _ = _trace("vmap", run, avals)
    assert not traced, "a batched jaxpr captured a traced value"
    return batched


def _leaves(construct: str, args) -> tuple[list, object, list[ShapedArray]]:
    leaves, tree = tree_flatten(tuple(args))
    return leaves, tree, [leaf_aval(construct, x, f"argument leaf {i}") for i, x in enumerate(leaves)]


def _split(args, nondiff_argnums):
    """(the nondiff arguments, the others, a function rebuilding the full argument list)."""
    fixed = {i % len(args) if args else i for i in nondiff_argnums}
    nondiff = [args[i] for i in sorted(fixed)]
    diff = [a for i, a in enumerate(args) if i not in fixed]

    def rebuild(diff_args):
        it = iter(diff_args)
        return [args[i] if i in fixed else next(it) for i in range(len(args))]
    return nondiff, diff, rebuild


def _check_same_types(what: str, got: Sequence[ShapedArray], want: Sequence[ShapedArray]):
    for k, (g, w) in enumerate(zip(got, want)):
        if g.dtype != w.dtype or len(g.shape) != len(w.shape) or any(
                not (a == b) for a, b in zip(g.shape, w.shape)):
            raise SprueTypeError(f"{what}: output {k} is {g.str_short()} where the primal output is"
                                 f" {w.str_short()}; they must have one shape and dtype{where()}")


def _call_shape_rule(*avals, call_jaxpr: ClosedJaxpr, **params):
    return [a.strip_weak_type() for a in call_jaxpr.out_avals]


def _call_impl(*args, call_jaxpr: ClosedJaxpr, **params):
    return eval_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, *args[:len(call_jaxpr.in_avals)])


def _call_cost(ctx, eqn, ins):
    cj = eqn.params.get("call_jaxpr") or eqn.params["jaxpr"]
    return ctx.jaxpr_cost(cj.jaxpr, [Lazy.known(c) for c in cj.consts], ins[:len(cj.in_avals)])


# == custom_jvp ========================================================================================
custom_jvp_call_p = define("custom_jvp_call", _call_shape_rule, _call_impl, multiple_results=True)


class custom_jvp:
    """A function with a user-defined JVP (jax.custom_jvp):

        @sprue.custom_jvp
        def softplus(x):
            return jnp.log1p(jnp.exp(x))

        @softplus.defjvp
        def softplus_jvp(primals, tangents):
            (x,), (t,) = primals, tangents
            return softplus(x), t * jax.nn.sigmoid(x)
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        check_callable(fun, "custom_jvp")
        functools.update_wrapper(self, fun)
        self.fun, self.nondiff_argnums, self.jvp = fun, tuple(nondiff_argnums), None

    def defjvp(self, jvp: Callable, symbolic_zeros: bool = False) -> Callable:
        if symbolic_zeros:
            raise UnsupportedError("custom_jvp: symbolic_zeros=True is not implemented in sprue: tangents reach"
                                   " the rule as arrays (zeros where an input has no tangent)")
        check_callable(jvp, "custom_jvp.defjvp", "the JVP rule")
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps: Callable | None):
        """One rule per argument: jvps[i](tangent_i, primal_out, *primals) (None: no dependence)."""
        def jvp(primals, tangents):
            out = self(*primals)
            parts = [fn(t, out, *primals) for fn, t in zip(jvps, tangents) if fn is not None]
            total = parts[0]
            for p in parts[1:]:
                total = tree_map(lambda a, b: a + b, total, p)
            return out, total
        jvp.__name__ = f"{_name(self.fun)}_jvps"
        self.defjvp(jvp)

    def __call__(self, *args):
        name = _name(self.fun)
        if self.jvp is None:
            raise SprueTypeError(f"custom_jvp {name}: no JVP rule; define one with @{name}.defjvp before calling"
                                 f" it{where()}")
        nondiff, diff, rebuild = _split(args, self.nondiff_argnums)
        leaves, in_tree, avals = _leaves(f"custom_jvp {name}", diff)
        n = len(leaves)
        call, consts, out_tree = _trace(f"custom_jvp {name}",
                                        lambda *xs: self.fun(*rebuild(tree_unflatten(in_tree, xs))), avals)

        def flat_jvp(*xs_ts):
            primals, tangents = tree_unflatten(in_tree, xs_ts[:n]), tree_unflatten(in_tree, xs_ts[n:])
            result = self.jvp(*nondiff, tuple(primals), tuple(tangents))
            if not (isinstance(result, (tuple, list)) and len(result) == 2):
                raise SprueTypeError(f"custom_jvp {name}: the JVP rule {_name(self.jvp)} must return a pair"
                                     f" (primal_out, tangent_out){where()}")
            outs, outs_tree = tree_flatten(result[0])
            touts, touts_tree = tree_flatten(result[1])
            if outs_tree != out_tree or touts_tree != out_tree:
                raise SprueTypeError(f"custom_jvp {name}: the JVP rule {_name(self.jvp)} returned outputs of another"
                                     f" structure than {name} ({outs_tree} and {touts_tree}, not {out_tree}){where()}")
            return [*outs, *touts]
        outs = custom_jvp_call_p.bind(*consts, *leaves, call_jaxpr=call, jvp=Rule(_name(self.jvp), flat_jvp),
                                      name=name, num_consts=len(consts), symbolic_zeros=False)
        return tree_unflatten(out_tree, outs)


def _closure_error(name: str) -> UnsupportedError:
    return UnsupportedError(f"{name}: differentiation with respect to a value it closes over (a custom derivative"
                            f" rule gives derivatives with respect to the function's arguments only): pass the"
                            f" value as an argument, as JAX requires")


def _custom_jvp_jvp(primals, tangents, *, call_jaxpr, jvp, name, num_consts, symbolic_zeros):
    if not all(is_zero(t) for t in tangents[:num_consts]):
        raise _closure_error(name)
    xs = primals[num_consts:]
    outs = jvp(*xs, *(instantiate(t, x) for t, x in zip(tangents[num_consts:], xs)))
    m = len(call_jaxpr.out_avals)
    _check_same_types(f"custom_jvp {name}: the JVP rule {jvp}'s tangents", [aval_of(t) for t in outs[m:]],
                      [aval_of(o) for o in outs[:m]])
    return outs[:m], outs[m:]


def _custom_jvp_vjp(cts, primals, outs, *, call_jaxpr, jvp, name, num_consts, symbolic_zeros):
    """The transpose of the rule's tangent map (linear in the tangents): reverse mode over the
    rule's jaxpr with only the tangents active, at zero tangents (JAX transposes its linearization)."""
    xs = primals[num_consts:]
    avals = [aval_of(x).strip_weak_type() for x in xs]
    rule, captured = jvp.traced([*avals, *avals])
    m = len(call_jaxpr.out_avals)
    _check_same_types(f"custom_jvp {name}: the JVP rule {jvp}'s tangents", rule.out_avals[m:], rule.out_avals[:m])
    zeros = [zeros_like_aval(a) for a in avals]
    active = [False] * (len(captured) + len(xs)) + [dtypes.is_float(a.dtype) for a in avals]
    _, backward = vjp_jaxpr(_outputs_from(rule.jaxpr, m), rule.consts, [*captured, *xs, *zeros], active)
    cts_in = backward(cts)[len(captured) + len(xs):]
    return [*_closed_over(name, num_consts), *cts_in]


def _outputs_from(j: Jaxpr, start: int) -> Jaxpr:
    """j computing its outputs from `start` on only: the equations they need (a JVP rule's tangents
    without its primal outputs, which reverse mode over the rule would compute for nothing)."""
    needed = {v for v in j.outvars[start:] if isinstance(v, Var)}
    kept = []
    for e in reversed(j.eqns):
        if any(o in needed for o in e.outvars):
            kept.append(e)
            needed.update(a for a in e.invars if isinstance(a, Var))
    return Jaxpr(j.constvars, j.invars, list(j.outvars[start:]), kept[::-1])


def _closed_over(name: str, n: int) -> list:
    """The cotangents of captured values: thunks (called only for an active operand, sprue.interp.vjp)
    that raise, as JAX refuses to differentiate a custom rule's function by what it closes over."""
    def refuse():
        raise _closure_error(name)
    return [refuse] * n


def _custom_jvp_batch(args, dims, *, call_jaxpr, jvp, name, num_consts, symbolic_zeros):
    size = batch_size(args, dims)
    outs = custom_jvp_call_p.bind(*batched_all(args, dims, size), call_jaxpr=_batched(call_jaxpr, size),
                                  jvp=jvp.batched(size), name=name, num_consts=num_consts,
                                  symbolic_zeros=symbolic_zeros)
    return outs, [0] * len(outs)


jvp_rules[custom_jvp_call_p] = _custom_jvp_jvp
vjp_rules[custom_jvp_call_p] = _custom_jvp_vjp
batch_rules[custom_jvp_call_p] = _custom_jvp_batch
nested_cost_rules[custom_jvp_call_p] = _call_cost


# == custom_vjp ========================================================================================
custom_vjp_call_p = define("custom_vjp_call", _call_shape_rule, _call_impl, multiple_results=True)


class custom_vjp:
    """A function with a user-defined VJP (jax.custom_vjp):

        @sprue.custom_vjp
        def f(x, y):
            return jnp.sin(x) * y

        def f_fwd(x, y):
            return f(x, y), (jnp.cos(x), jnp.sin(x), y)     # output, residuals

        def f_bwd(res, g):
            cos_x, sin_x, y = res
            return (cos_x * g * y, sin_x * g)               # one cotangent per argument

        f.defvjp(f_fwd, f_bwd)
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        check_callable(fun, "custom_vjp")
        functools.update_wrapper(self, fun)
        self.fun, self.nondiff_argnums, self.fwd, self.bwd = fun, tuple(nondiff_argnums), None, None

    def defvjp(self, fwd: Callable, bwd: Callable, symbolic_zeros: bool = False, optimize_remat: bool = False):
        if symbolic_zeros:
            raise UnsupportedError("custom_vjp: symbolic_zeros=True is not implemented in sprue")
        check_callable(fwd, "custom_vjp.defvjp", "fwd")
        check_callable(bwd, "custom_vjp.defvjp", "bwd")
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args):
        name = _name(self.fun)
        if self.fwd is None:
            raise SprueTypeError(f"custom_vjp {name}: no VJP rule; define one with {name}.defvjp(fwd, bwd) before"
                                 f" calling it{where()}")
        nondiff, diff, rebuild = _split(args, self.nondiff_argnums)
        leaves, in_tree, avals = _leaves(f"custom_vjp {name}", diff)
        call, consts, out_tree = _trace(f"custom_vjp {name}",
                                        lambda *xs: self.fun(*rebuild(tree_unflatten(in_tree, xs))), avals)
        m = len(call.out_avals)
        res_tree = []   # the residuals' structure, known once fwd has run
        arg_trees = [tree_flatten(a)[1] for a in diff]

        def flat_fwd(*xs):
            result = self.fwd(*rebuild(tree_unflatten(in_tree, xs)))
            if not (isinstance(result, (tuple, list)) and len(result) == 2):
                raise SprueTypeError(f"custom_vjp {name}: fwd {_name(self.fwd)} must return a pair (output,"
                                     f" residuals){where()}")
            outs, tree = tree_flatten(result[0])
            if tree != out_tree:
                raise SprueTypeError(f"custom_vjp {name}: fwd {_name(self.fwd)} returned an output of another"
                                     f" structure than {name} ({tree}, not {out_tree}){where()}")
            res, rt = tree_flatten(result[1])
            res_tree[:] = [rt]
            return [*outs, *res]

        def flat_bwd(*res_cts):
            n_res = len(res_cts) - m
            result = self.bwd(*nondiff, tree_unflatten(res_tree[0], res_cts[:n_res]),
                              tree_unflatten(out_tree, res_cts[n_res:]))
            if not isinstance(result, (tuple, list)) or len(result) != len(diff):
                got = f"a tuple of {len(result)}" if isinstance(result, (tuple, list)) else type(result).__name__
                raise SprueTypeError(f"custom_vjp {name}: bwd {_name(self.bwd)} must return a tuple of {len(diff)}"
                                     f" cotangents, one per argument of {name}, got {got}{where()}")
            flat, k = [], 0
            for arg_tree, ct in zip(arg_trees, result):
                n = arg_tree.num_leaves
                if ct is None:   # no cotangent: zeros of the argument's type
                    flat.extend(zeros_like_aval(a.strip_weak_type()) for a in avals[k:k + n])
                else:
                    ct_leaves, ct_tree = tree_flatten(ct)
                    if ct_tree != arg_tree:
                        raise SprueTypeError(f"custom_vjp {name}: bwd {_name(self.bwd)} returned a cotangent of"
                                             f" structure {ct_tree} for an argument of structure {arg_tree}{where()}")
                    flat.extend(ct_leaves)
                k += n
            return flat
        outs = custom_vjp_call_p.bind(*consts, *leaves, call_jaxpr=call, fwd=Rule(_name(self.fwd), flat_fwd),
                                      bwd=Rule(_name(self.bwd), flat_bwd), name=name, num_consts=len(consts),
                                      symbolic_zeros=False)
        return tree_unflatten(out_tree, outs)


def _custom_vjp_jvp(primals, tangents, *, name, **params):
    raise UnsupportedError(f"custom_vjp {name}: forward-mode differentiation (jvp, jacfwd) of a custom_vjp"
                           f" function is not defined (as in JAX): use reverse mode (grad, vjp, jacrev), or"
                           f" define the derivative with custom_jvp")


def _custom_vjp_fwd(primals, *, call_jaxpr, fwd, bwd, name, num_consts, symbolic_zeros):
    """The forward pass runs fwd; its residuals are what reverse mode keeps."""
    outs_res = fwd(*primals[num_consts:])
    m = len(call_jaxpr.out_avals)
    _check_same_types(f"custom_vjp {name}: fwd {fwd}", [aval_of(o) for o in outs_res[:m]],
                      [a.strip_weak_type() for a in call_jaxpr.out_avals])
    return outs_res[:m], outs_res[m:]


def _custom_vjp_vjp(cts, primals, residuals, *, call_jaxpr, fwd, bwd, name, num_consts, symbolic_zeros):
    xs = primals[num_consts:]
    cts = [zeros_like_aval(a.strip_weak_type()) if is_zero(c) else c for c, a in zip(cts, call_jaxpr.out_avals)]
    cts_in = bwd(*residuals, *cts)
    want = [aval_of(x).strip_weak_type() for x in xs]
    _check_same_types(f"custom_vjp {name}: bwd {bwd}'s cotangents", [aval_of(c) for c in cts_in], want)
    cts_in = [c if dtypes.is_float(a.dtype) else None for c, a in zip(cts_in, want)]
    return [*_closed_over(name, num_consts), *cts_in]


def _custom_vjp_batch(args, dims, *, call_jaxpr, fwd, bwd, name, num_consts, symbolic_zeros):
    size = batch_size(args, dims)
    outs = custom_vjp_call_p.bind(*batched_all(args, dims, size), call_jaxpr=_batched(call_jaxpr, size),
                                  fwd=fwd.batched(size), bwd=bwd.batched(size), name=name,
                                  num_consts=num_consts, symbolic_zeros=symbolic_zeros)
    return outs, [0] * len(outs)


jvp_rules[custom_vjp_call_p] = _custom_vjp_jvp
vjp_fwd_rules[custom_vjp_call_p] = _custom_vjp_fwd
vjp_rules[custom_vjp_call_p] = _custom_vjp_vjp
batch_rules[custom_vjp_call_p] = _custom_vjp_batch
nested_cost_rules[custom_vjp_call_p] = _call_cost


# == checkpoint / remat ===================================================================================
def _remat_rule(*avals, jaxpr: ClosedJaxpr, prevent_cse=True, differentiated=False, policy=None):
    return [a.strip_weak_type() for a in jaxpr.out_avals]


def _remat_impl(*args, jaxpr: ClosedJaxpr, **params):
    return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)


# JAX 0.10 names its checkpoint primitive remat2 (jax._src.ad_checkpoint.remat_p)
remat_p = define("remat2", _remat_rule, _remat_impl, multiple_results=True)


def checkpoint(fun: Callable | None = None, *, prevent_cse: bool = True, policy=None,
               static_argnums: int | Sequence[int] = ()):
    """fun, whose intermediate values reverse mode recomputes in the backward pass instead of
    keeping them (jax.checkpoint; only policy=None, which saves nothing)."""
    if fun is None:
        return functools.partial(checkpoint, prevent_cse=prevent_cse, policy=policy, static_argnums=static_argnums)
    check_callable(fun, "checkpoint")
    if policy is not None:
        raise UnsupportedError("checkpoint: sprue implements policy=None only (save nothing, recompute the body)")
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    @functools.wraps(fun)
    def rematerialized(*args):
        _, diff, rebuild = _split(args, static)
        leaves, in_tree, avals = _leaves("checkpoint", diff)
        body, consts, out_tree = _trace("checkpoint", lambda *xs: fun(*rebuild(tree_unflatten(in_tree, xs))), avals)
        outs = remat_p.bind(*consts, *leaves, jaxpr=body, prevent_cse=prevent_cse, differentiated=False, policy=None)
        return tree_unflatten(out_tree, outs)
    return rematerialized


remat = checkpoint


def _remat_jvp(primals, tangents, *, jaxpr, **params):
    return jvp_jaxpr(jaxpr.jaxpr, jaxpr.consts, primals, tangents)


def _remat_fwd(primals, *, jaxpr, **params):
    """The forward pass keeps the body's inputs only."""
    return remat_p.bind(*primals, jaxpr=jaxpr, **params), list(primals)


def _remat_vjp(cts, primals, residuals, *, jaxpr, **params):
    """The backward pass runs the body again (from the inputs it kept), then back through it."""
    _, backward = vjp_jaxpr(jaxpr.jaxpr, jaxpr.consts, residuals)
    return backward(cts)


def _remat_batch(args, dims, *, jaxpr, **params):
    size = batch_size(args, dims)
    outs = remat_p.bind(*batched_all(args, dims, size), jaxpr=_batched(jaxpr, size), **params)
    return outs, [0] * len(outs)


def _remat_cost(ctx, eqn, ins):
    cj = eqn.params["jaxpr"]
    return ctx.jaxpr_cost(cj.jaxpr, [Lazy.known(c) for c in cj.consts], ins)


jvp_rules[remat_p], vjp_fwd_rules[remat_p], vjp_rules[remat_p] = _remat_jvp, _remat_fwd, _remat_vjp
batch_rules[remat_p], nested_cost_rules[remat_p] = _remat_batch, _remat_cost


# == stop_gradient: the value, without derivative ==========================================================
stop_gradient_p = define("stop_gradient", lambda x: x, lambda x: np.asarray(x))


def stop_gradient(x):
    """x (a pytree) unchanged, with no tangent or cotangent flowing through it (jax.lax.stop_gradient)."""
    return tree_map(lambda leaf: stop_gradient_p.bind(leaf) if dtypes.is_float(aval_of(leaf).dtype) else leaf, x)


jvp_rules[stop_gradient_p] = lambda primals, tangents: (stop_gradient_p.bind(*primals), zero_of(primals[0]))
vjp_rules[stop_gradient_p] = lambda cts, primals, outs: [None]
batch_rules[stop_gradient_p] = lambda args, dims: (stop_gradient_p.bind(*args), dims[0])
cost_rules[stop_gradient_p] = free
