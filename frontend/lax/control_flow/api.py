"""Structured control flow: loops and branches whose bodies are traced once into nested jaxprs.

Two spellings build the same four primitives (sprue.lax.control_flow.primitives):

    Catalyst style (sprue.*)              JAX style (sprue.lax.*)
    @for_loop(lower, upper, step)         fori_loop(lower, upper, body, init)      -> for_loop
    @while_loop(cond_fn)                  while_loop(cond_fn, body_fn, init)       -> while
    @cond(pred) / .else_if / .otherwise   cond(pred, true_fn, false_fn, *ops)      -> cond
                                          switch(index, branches, *ops)            -> cond
                                          scan(f, init, xs, length, reverse)       -> scan

A body is traced with abstract arguments (once, however many trips run); what it closes over —
numpy arrays and tracers of enclosing traces — is hoisted into leading parameters of its jaxpr and
passed as operands. Binding the primitive outside any trace runs its numpy reference rule, so
everything also works eagerly; Catalyst's cond and switch (Cond, Switch) outside any trace run the
branch taken as plain Python instead, as Catalyst does.

Typing follows numpy's weak scalars: a carry started as a Python scalar takes the type the body
gives it within its kind (`fori_loop(0, n, body, 0.0)` with a float32 body carries float32), but a
carry never changes kind or rank (an int carry that becomes float is an error). A carry keeps its
sizes — `f64[n]` in, `f64[n]` out, whatever n is at run time — unless the loop is given
`allow_array_resizing=True` (for_loop, while_loop, and lax.fori_loop / lax.while_loop): then an
iteration may return arrays of other sizes (see sprue.lax.control_flow.bodies for how the sizes
are settled).
Sizes work as scalars where control flow wants them: `for_loop(0, x.shape[0], 1)`. Branches of a
cond must agree on their results' sizes, and scan's per-step outputs must not change size.
"""
from __future__ import annotations

import functools
import operator
from typing import Callable, Sequence

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueTypeError, SprueValueError, check_callable
from sprue.base.pytree import tree_flatten, tree_unflatten
from sprue.ir.core import ClosedJaxpr, Jaxpr, ShapedArray, Var, aval_of_value
from sprue.ir.shapes import DimExpr
from sprue.lax import elementwise as _e
from sprue.lax.control_flow import primitives as cf
from sprue.lax.control_flow.bodies import Body, Carries, is_py_scalar, settle_carry, trace_body
from sprue.lax.control_flow.bodies import kind as _kind
from sprue.lax.control_flow.bodies import leaf_aval as _aval
from sprue.lax.control_flow.bodies import where as _where
from sprue.trace.tracing import Tracer, current_builder, dim_value


def _convert(x, dtype: np.dtype):
    """x as a strong `dtype` value: an equation for a tracer, numpy for a concrete value."""
    if isinstance(x, Tracer):
        return _e.convert_element_type_p.bind(x, new_dtype=np.dtype(dtype), weak_type=False, sharding=None)
    return np.asarray(x, dtype)


def _value(x):
    """A size used as a scalar (`x.shape[0]` as a loop bound or an index): its run-time value."""
    return dim_value(x) if isinstance(x, DimExpr) else x


def _cast_leaves(leaves: Sequence, avals: Sequence[ShapedArray], construct: str) -> list:
    return [x if _aval(construct, x, "a carry").dtype == a.dtype else _convert(x, a.dtype)
            for x, a in zip(leaves, avals)]


def _pack(out, n: int) -> tuple:
    """A Catalyst body's result as a tuple of n carries (one carry comes back bare)."""
    if n == 1:
        return (out,)
    if n == 0 and out is None:
        return ()
    return tuple(out) if isinstance(out, list) else out


def _unpack(carry: tuple):
    return None if not carry else carry[0] if len(carry) == 1 else carry


# -- scalars: predicates, indices, bounds ------------------------------------------------------
def _scalar_aval(construct: str, x, what: str) -> ShapedArray:
    if isinstance(x, Tracer):
        a = x.aval
    elif is_py_scalar(x) or isinstance(x, (np.ndarray, np.generic)):
        a = aval_of_value(x)
    else:
        raise SprueTypeError(f"{construct}: {what} must be a scalar, got a {type(x).__name__}{_where()}")
    if a.ndim:
        raise SprueTypeError(f"{construct}: {what} must be a scalar, got {a.str_short()}{_where()}")
    return a


def predicate(construct: str, p, what: str = "the predicate", catalyst: bool = False):
    """p as a bool scalar (integers mean p != 0); floats and arrays are errors. With `catalyst`
    (sprue.cond), as Catalyst's CondCallable._convert_predicate_to_bool: a float means p != 0 too
    (`astype(bool)`: NaN is true), and a one-element 1-D array is a scalar."""
    p = _value(p)
    if catalyst and isinstance(p, (Tracer, np.ndarray)) and np.shape(p) == (1,):
        p = p[0]
    a = _scalar_aval(construct, p, what)
    if dtypes.is_bool(a.dtype):
        return p if isinstance(p, Tracer) else bool(p)
    if not dtypes.is_int(a.dtype) and not (catalyst and dtypes.is_float(a.dtype)):
        raise SprueTypeError(f"{construct}: {what} must be a boolean{', integer or float' if catalyst else ' or integer'}"
                             f" scalar, got {a.str_short()}{_where()}")
    if isinstance(p, Tracer):
        return _e.ne_p.bind(p, np.zeros((), a.dtype)[()])
    return bool(p != 0)


def _integer_aval(construct: str, x, what: str) -> ShapedArray:
    a = _scalar_aval(construct, x, what)
    if not dtypes.is_int(a.dtype):
        raise SprueTypeError(f"{construct}: {what} must be an integer scalar, got {a.str_short()}{_where()}")
    return a


def _fit_int(construct: str, x, dtype: np.dtype, what: str):
    """A concrete integer as a numpy scalar of `dtype`, or an error if it does not fit."""
    info = np.iinfo(dtype)
    if not info.min <= int(x) <= info.max:
        raise SprueValueError(f"{construct}: {what} {int(x)} does not fit the loop index type {dtype}{_where()}")
    return np.asarray(int(x), dtype)[()]


def loop_bounds(construct: str, lower, upper, step) -> tuple[list, ShapedArray]:
    """lower, upper, step as scalars of one integer type, and the aval of the loop index.
    All Python ints give a weak int64 index, as `range` gives Python ints."""
    names = ("the lower bound", "the upper bound", "the step")
    bounds = [_value(lower), _value(upper), _value(step)]
    step = bounds[2]
    avals = [_integer_aval(construct, b, n) for b, n in zip(bounds, names)]
    dt, weak = dtypes.result_type(*[(a.dtype, a.weak_type) for a in avals])
    if not dtypes.is_int(dt):
        raise SprueTypeError(f"{construct}: lower, upper and step ({', '.join(a.str_short() for a in avals)}) have"
                             f" no common integer type; convert them to one{_where()}")
    if not isinstance(step, Tracer) and int(step) == 0:
        raise SprueValueError(f"{construct}: the step must not be zero{_where()}")
    out = []
    for b, a, n in zip(bounds, avals, names):
        if isinstance(b, Tracer):
            out.append(b if a.dtype == dt else _convert(b, dt))
        else:
            out.append(int(b) if weak else _fit_int(construct, b, dt, n))
    return out, ShapedArray((), dt, weak_type=weak)


# -- the four constructs -----------------------------------------------------------------------
def for_loop_carry(construct: str, body_fn: Callable, lower, upper, step, init: tuple,
                   single: bool = False, resizing: bool = False) -> tuple:
    """body_fn(i, *init) -> tuple of carries, for i in range(lower, upper, step)."""
    (lower, upper, step), index = loop_bounds(construct, lower, upper, step)
    leaves, tree = tree_flatten(tuple(init))
    avals = [_aval(construct, x, "the initial carry") for x in leaves]

    def trace(carries: Carries) -> Body:
        return trace_body(construct, lambda i, *c: body_fn(i, *tree_unflatten(tree, c)), [index, *carries.specs()],
                          carries.new_sizes)

    body, carries = settle_carry(construct, trace, avals, tree, lambda b: (b.out_tree, b.out_avals), single,
                                 resizing)
    sizes = carries.entry_sizes()
    outs = cf.for_loop_p.bind(*body.consts, lower, upper, step, *sizes,
                              *_cast_leaves(leaves, carries.avals, construct),
                              body_jaxpr=body.jaxpr, body_nconsts=len(body.consts), apply_reverse_transform=False,
                              nimplicit=len(sizes), preserve_dimensions=not resizing)
    return tree_unflatten(tree, outs[len(sizes):])


def while_carry(construct: str, cond_fn: Callable, body_fn: Callable, init: tuple, single: bool = False,
                resizing: bool = False) -> tuple:
    """Loop body_fn(*carry) -> tuple of carries while cond_fn(*carry)."""
    leaves, tree = tree_flatten(tuple(init))
    avals = [_aval(construct, x, "the initial carry") for x in leaves]

    def trace(carries: Carries) -> Body:
        return trace_body(construct, lambda *c: body_fn(*tree_unflatten(tree, c)), carries.specs(),
                          carries.new_sizes)

    body, carries = settle_carry(construct, trace, avals, tree, lambda b: (b.out_tree, b.out_avals), single,
                                 resizing)
    # the cond function sees the carries as the body does (its own variables for the resized sizes)
    cond = trace_body(construct, lambda *c: predicate(construct, cond_fn(*tree_unflatten(tree, c)),
                                                      "the condition function's result"), carries.specs())
    sizes = carries.entry_sizes()
    # a resizing while records it as for_loop does; others keep JAX's params
    resize_params = dict(nimplicit=len(sizes), preserve_dimensions=False) if resizing else {}
    outs = cf.while_p.bind(*cond.consts, *body.consts, *sizes, *_cast_leaves(leaves, carries.avals, construct),
                           cond_jaxpr=cond.jaxpr, cond_nconsts=len(cond.consts),
                           body_jaxpr=body.jaxpr, body_nconsts=len(body.consts), **resize_params)
    return tree_unflatten(tree, outs[len(sizes):])


def _join_consts(bodies: Sequence[Body]) -> tuple[list, list[ClosedJaxpr]]:
    """One operand list for every branch: the union of their consts; each branch takes them all."""
    joint: list = []
    avals: list[ShapedArray] = []
    # a size const binds its dimension variable in every branch, also one that does not use it: the
    # types of the other consts mention it there too (and the printer names it by its binder)
    dims: list = []
    seen: dict[int, int] = {}
    for b in bodies:
        for c, v in zip(b.consts, b.jaxpr.jaxpr.invars):
            if id(c) not in seen:
                seen[id(c)] = len(joint)
                joint.append(c)
                avals.append(v.aval)
                dims.append(v.dim)
    jaxprs = []
    for b in bodies:
        j, n = b.jaxpr.jaxpr, len(b.consts)
        mine = {id(c): v for c, v in zip(b.consts, j.invars[:n])}
        params = [mine.get(id(c)) or Var(a, dim=d) for c, a, d in zip(joint, avals, dims)]
        jaxprs.append(ClosedJaxpr(Jaxpr([], [*params, *j.invars[n:]], j.outvars, j.eqns), []))
    return joint, jaxprs


def _branch_types(construct: str, bodies: Sequence[Body], order: Sequence[int],
                  promote: bool = False) -> list[ShapedArray] | None:
    """The common output types of the branches, promoting weak outputs within their kind (with
    `promote`, Catalyst's switch: to the common type of any kinds, `1`, `True` and `1.2` to float64);
    None when every branch already returns them. Type errors list the branches in the user's order."""
    cols = [bodies[k].out_avals for k in order]
    if not cf.type_mismatches(*cols):
        return None
    target = []
    for row in zip(*cols):
        if promote and all(a.shape == row[0].shape for a in row):
            dt, weak = dtypes.result_type(*[(a.dtype, a.weak_type) for a in row])
            target.append(ShapedArray(row[0].shape, dt, weak_type=weak))
            continue
        strong = {(a.shape, a.dtype) for a in row if not a.weak_type}
        if len(strong) == 1:
            shape, dt = strong.pop()
            if all(a.shape == shape and (a.dtype == dt or _kind(a.dtype) == _kind(dt)) for a in row):
                target.append(ShapedArray(shape, dt))
                continue
        if len({(a.shape, a.dtype) for a in row}) == 1:
            target.append(row[0])
            continue
        # (Catalyst's constructs also say it as Catalyst does, for code that matches its message)
        cf.check_types(f"{construct} branches return different types", *cols,
                       note=". Control flow requires a consistent array shape per result across all branches: make"
                            " every branch return arrays of the same shapes" if promote else "")
    return target


def _no_local_sizes(construct: str, body: Body) -> None:
    """A branch's results may not have sizes made inside it (`jnp.ones(k)` for an operand k): the
    cond's results are typed outside, by sizes known there."""
    local = body.local_dims()
    for a in body.out_avals:
        if any(isinstance(d, DimExpr) and d.dim_vars() & local for d in a.shape):
            raise SprueTypeError(f"{construct}: a branch returns {a.str_short()}, whose size is computed inside the"
                                 f" branch; branches must return arrays whose sizes are known before the"
                                 f" {construct} (compute the size outside and pass it in){_where()}")


def cond_branches(construct: str, index, fns: Sequence[Callable], operands: tuple,
                  order: Sequence[int] | None = None, missing_otherwise: str | None = None, promote: bool = False):
    """Bind cond(index, fns[0], fns[1], ...)(*operands); index is an integer scalar, clamped.
    `missing_otherwise` names a Catalyst cond whose fns[0] stands in for an absent `otherwise`."""
    order = list(order) if order is not None else list(range(len(fns)))
    leaves, tree = tree_flatten(tuple(operands))
    avals = [_aval(construct, x, "an operand") for x in leaves]

    def trace(fn, cast=None):
        def branch(*ls):
            out = fn(*tree_unflatten(tree, ls))
            if cast is None:
                return out
            out_leaves, out_tree = tree_flatten(out)
            return tree_unflatten(out_tree, [o if _aval(construct, o, "a result").dtype == t.dtype
                                             else _convert(o, t.dtype) for o, t in zip(out_leaves, cast)])
        return trace_body(construct, branch, avals)

    bodies = [trace(f) for f in fns]
    if missing_otherwise and any(b.out_tree.num_leaves for b in bodies[1:]):
        raise SprueTypeError(f"{construct}: the branches return values, so the cond needs an `otherwise` branch"
                             f" for when no predicate holds (decorate it with @{missing_otherwise}.otherwise)"
                             f"{_where()}")
    for k in order:
        _no_local_sizes(construct, bodies[k])
    trees = [bodies[k].out_tree for k in order]
    if any(t != trees[0] for t in trees):
        note = (". Control flow requires a consistent return structure across all branches: make every branch"
                " return the same tuples, lists and dicts") if promote else ""
        raise SprueTypeError(f"{construct} branches return different pytree structures: "
                             f"{' vs '.join(str(t) for t in trees)}{note}{_where()}")
    target = _branch_types(construct, bodies, order, promote)
    if target is not None:
        bodies = [trace(f, target) for f in fns]
    consts, jaxprs = _join_consts(bodies)
    outs = cf.cond_p.bind(index, *consts, *leaves, branches=tuple(jaxprs))
    return tree_unflatten(bodies[0].out_tree, outs)


def _as_index(x):
    """A bool/int predicate or index as an int32 cond index."""
    if isinstance(x, Tracer):
        return x if x.aval.dtype == dtypes.int32 else _convert(x, dtypes.int32)
    return np.int32(x)


def scan_carry(construct: str, f: Callable, init, xs, length, reverse: bool, unroll) -> tuple:
    """(final carry, stacked ys) of carry, y = f(carry, x) over the leading axis of xs."""
    x_leaves, x_tree = tree_flatten(xs)
    x_avals = [_aval(construct, x, "xs") for x in x_leaves]
    for a in x_avals:
        if not a.ndim:
            raise SprueValueError(f"{construct}: every leaf of xs needs a leading axis to scan over, got"
                                  f" {a.str_short()}{_where()}")
    lengths = list(dict.fromkeys(a.shape[0] for a in x_avals))   # ints and sizes known at run time
    if length is not None:
        if isinstance(length, Tracer):
            raise SprueTypeError(f"{construct}: length must be a static int (or an array's size), got a traced"
                                 f" value{_where()}")
        length = length if isinstance(length, DimExpr) else operator.index(length)
        lengths = list(dict.fromkeys([*lengths, length]))
    if not lengths:
        raise SprueValueError(f"{construct}: nothing to scan over: give xs (arrays with a leading axis) or"
                              f" length={_where()}")
    if len(lengths) > 1:
        ordered = sorted(d for d in lengths if isinstance(d, int)) + [d for d in lengths if not isinstance(d, int)]
        raise SprueValueError(f"{construct}: the leading axes of xs (and length=) disagree: lengths"
                              f" [{', '.join(map(str, ordered))}]{_where()}")
    n = lengths[0]
    if isinstance(n, DimExpr) and not x_avals:
        raise SprueValueError(f"{construct}: a length known only at run time ({n}) needs xs to scan over; use"
                              f" fori_loop to count{_where()}")
    if isinstance(unroll, bool):
        unroll = n if unroll and isinstance(n, int) else 1
    if not isinstance(unroll, int) or unroll < 1:
        raise SprueValueError(f"{construct}: unroll must be a positive int or a bool, got {unroll!r}{_where()}")
    slices = [a.update(shape=a.shape[1:]) for a in x_avals]
    c_leaves, c_tree = tree_flatten(init)
    nc = len(c_leaves)
    c_avals = [_aval(construct, x, "the initial carry") for x in c_leaves]

    def step(*ls):
        out = f(tree_unflatten(c_tree, ls[:nc]), tree_unflatten(x_tree, ls[nc:]))
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise SprueTypeError(f"{construct}: the body must return a pair (carry, y), got"
                                 f" {type(out).__name__}{_where()}")
        return tuple(out)

    def carry_of(b: Body):
        return b.out_tree.children[0], b.out_avals[:nc]

    body, carries = settle_carry(construct, lambda c: trace_body(construct, step, [*c.specs(), *slices]), c_avals,
                                 c_tree, carry_of, resizing=None)
    for y in body.out_avals[nc:]:
        if any(isinstance(d, DimExpr) and d.dim_vars() & body.local_dims() for d in y.shape):
            raise SprueValueError(f"{construct}: the body returns a per-step output {y.str_short()} whose size is"
                                  f" computed in the step, so the outputs cannot be stacked{_where()}")
    operands = [*body.consts, *_cast_leaves(c_leaves, carries.avals, construct), *x_leaves]
    # a length known only at run time is xs's leading size: the equation says None (see lax.control_flow)
    outs = cf.scan_p.bind(*operands, jaxpr=body.jaxpr, length=n if isinstance(n, int) else None,
                          reverse=bool(reverse),
                          linear=(False,) * len(operands), num_consts=len(body.consts), num_carry=nc,
                          unroll=unroll, _split_transpose=False)
    return tree_unflatten(c_tree, outs[:nc]), tree_unflatten(body.out_tree.children[1], outs[nc:])


# -- JAX style: sprue.lax ------------------------------------------------------------------------
def fori_loop(lower, upper, body_fun: Callable, init_val, *, allow_array_resizing: bool = False):
    check_callable(body_fun, "fori_loop", "body_fun")
    """body_fun(i, val) -> val for i in range(lower, upper); returns the final val. With
    allow_array_resizing, an iteration may return arrays of other sizes."""
    return for_loop_carry("fori_loop", lambda i, c: (body_fun(i, c),), lower, upper, 1, (init_val,), True,
                          _flag(allow_array_resizing))[0]


def while_loop(cond_fun: Callable, body_fun: Callable, init_val, *, allow_array_resizing: bool = False):
    check_callable(cond_fun, "while_loop", "cond_fun")
    check_callable(body_fun, "while_loop", "body_fun")
    """val = body_fun(val) while cond_fun(val); returns the final val. With allow_array_resizing,
    an iteration may return arrays of other sizes."""
    return while_carry("while_loop", cond_fun, lambda c: (body_fun(c),), (init_val,), True,
                       _flag(allow_array_resizing))[0]


def _flag(x) -> bool:
    if not isinstance(x, (bool, np.bool_)):
        raise SprueTypeError(f"allow_array_resizing must be a bool, got {type(x).__name__}{_where()}")
    return bool(x)


def cond(pred, true_fun: Callable, false_fun: Callable, *operands):
    check_callable(true_fun, "cond", "true_fun")
    check_callable(false_fun, "cond", "false_fun")
    """true_fun(*operands) if pred else false_fun(*operands), both traced (JAX's lax.cond)."""
    p = predicate("cond", pred)
    return cond_branches("cond", _as_index(p), [false_fun, true_fun], operands, order=[1, 0])


def switch(index, branches: Sequence[Callable], *operands):
    """branches[clamp(index, 0, len(branches) - 1)](*operands) (JAX's lax.switch)."""
    branches = list(branches)
    if not branches or not all(callable(b) for b in branches):
        raise SprueTypeError(f"switch: branches must be a non-empty sequence of functions{_where()}")
    index = _value(index)
    a = _integer_aval("switch", index, "the index")
    hi = len(branches) - 1
    if isinstance(index, Tracer):
        lo_b, hi_b = np.zeros((), a.dtype)[()], np.asarray(min(hi, np.iinfo(a.dtype).max), a.dtype)[()]
        index = _as_index(_e.clamp_p.bind(lo_b, index, hi_b))
    else:
        index = np.int32(min(max(int(index), 0), hi))
    return cond_branches("switch", index, branches, operands)


def scan(f: Callable, init, xs=None, length: int | None = None, reverse: bool = False, unroll: int | bool = 1):
    check_callable(f, "scan", "f")
    """carry, y = f(carry, x) over the leading axis of xs; returns (carry, ys stacked)."""
    return scan_carry("scan", f, init, xs, length, reverse, unroll)


# -- Catalyst style: sprue.* ---------------------------------------------------------------------
def for_loop(lower, upper, step, *, allow_array_resizing: bool = False):
    """Decorate body(i, *carry) -> carry; `loop(*init)` runs it for i in range(lower, upper, step).
    With allow_array_resizing, an iteration may return arrays of other sizes."""
    resizing = _flag(allow_array_resizing)

    def decorator(body: Callable):
        check_callable(body, "for_loop", "the loop body")

        @functools.wraps(body)
        def loop(*init):
            n = len(init)
            return _unpack(for_loop_carry("for_loop", lambda i, *c: _pack(body(i, *c), n), lower, upper, step,
                                          init, n == 1, resizing))
        return loop
    return decorator


def while_loop_decorator(cond_fn: Callable, *, allow_array_resizing: bool = False):
    """Decorate body(*carry) -> carry; `loop(*init)` runs it while cond_fn(*carry).
    With allow_array_resizing, an iteration may return arrays of other sizes."""
    resizing = _flag(allow_array_resizing)
    check_callable(cond_fn, "while_loop", "the condition")

    def decorator(body: Callable):
        check_callable(body, "while_loop", "the loop body")

        @functools.wraps(body)
        def loop(*init):
            n = len(init)
            return _unpack(while_carry("while_loop", cond_fn, lambda *c: _pack(body(*c), n), init, n == 1,
                                       resizing))
        return loop
    return decorator


class Cond:
    """A Catalyst-style conditional: `@cond(pred)` on the true branch, then `@f.else_if(pred)` and
    `@f.otherwise` register further branches (whatever their names), and `f()` runs the first branch
    whose predicate holds."""

    def __init__(self, pred, fn: Callable):
        check_callable(fn, "cond", "the branch")
        self._preds = [predicate("cond", pred, catalyst=True)]
        self._fns = [fn]
        self._otherwise: Callable | None = None
        functools.update_wrapper(self, fn)

    def else_if(self, pred):
        p = predicate("cond", pred, "the else_if predicate", catalyst=True)

        def register(fn: Callable) -> "Cond":
            check_callable(fn, "cond", "the else_if branch")
            self._preds.append(p)
            self._fns.append(fn)
            return self
        return register

    def otherwise(self, fn: Callable) -> "Cond":
        check_callable(fn, "cond", "the otherwise branch")
        if self._otherwise is not None:
            raise SprueValueError(f"cond: this cond already has an `otherwise` branch{_where()}")
        self._otherwise = fn
        return self

    def _index(self):
        """The branch to run: k + 1 for the first true predicate k, else 0 (otherwise)."""
        if len(self._preds) == 1:
            return _as_index(self._preds[0])
        index = np.int32(0)
        for k in reversed(range(len(self._preds))):
            p = self._preds[k]
            if not isinstance(p, Tracer):
                index = np.int32(k + 1) if p else index
            else:
                index = _e.select_n_p.bind(p, index, np.int32(k + 1))
        return index

    def __call__(self, *operands):
        if _interpreted(self._preds):   # Catalyst's cond outside qjit: the branch runs as Python
            fn = next((f for p, f in zip(self._preds, self._fns) if p), self._otherwise)
            return None if fn is None else fn(*operands)
        otherwise = self._otherwise or (lambda *_: None)
        order = [*range(1, len(self._fns) + 1), 0]
        missing = getattr(self, "__name__", "cond") if self._otherwise is None else None
        return cond_branches("cond", self._index(), [otherwise, *self._fns], operands, order, missing, promote=True)


def _interpreted(scalars: Sequence) -> bool:
    """Whether a Catalyst cond or switch runs its branch as plain Python: called outside any trace
    (no qjit, no transformation) with concrete predicates or index, as Catalyst's
    `_call_during_interpretation` runs it there. Its branches may then return anything (a string),
    and only the branch taken runs; inside a trace every branch is traced and their results
    promoted, whatever the index."""
    return current_builder() is None and not any(isinstance(x, Tracer) for x in scalars)


def _fn_name(fn) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


class Switch:
    """Catalyst's index switch: `@switch(i)` on the branch taken when no case matches (Catalyst's
    default branch, also case 0 when another function is the `.default()` and no branch is case 0),
    `@switch(i, case=c)` on the branch of case c, `@f.branch(k)` for any other integer case k (in any
    order, negative too), `@f.default()` for every other index. `f(*args, **kwargs)` calls the
    branch; every branch is traced, their results promoted to a common type. A cond equation whose
    branch index is computed from the cases (no clamping, unlike lax.switch). An index that is a
    float matches the case it equals (2.0 is case 2; 2.5 none), as Catalyst's dictionary of cases
    does (`{2: f}.get(2.0)`)."""

    def __init__(self, index, case, fn: Callable):
        index = _value(index)
        a = _scalar_aval("switch", index, "the index")
        if not (dtypes.is_int(a.dtype) or dtypes.is_float(a.dtype)):
            raise SprueTypeError(f"switch: the index must be an integer (or float) scalar, got {a.str_short()}"
                                 f"{_where()}")
        self._dtype = a.dtype
        self._index = index
        self._cases: list[int | None] = []   # None: the first branch's implicit case (0, or the default)
        self._fns: list[Callable] = []
        self._default: Callable | None = None
        self._add(case, fn)
        functools.update_wrapper(self, fn)

    def _add(self, case, fn: Callable) -> "Switch":
        if case is not None and (isinstance(case, (bool, np.bool_)) or not isinstance(case, (int, np.integer))):
            raise SprueTypeError(f"switch: a case must be a Python integer, got {case!r}{_where()}")
        if not callable(fn):
            what = "the first branch" if case is None else f"case {int(case)}'s branch"
            raise SprueTypeError(f"switch: {what} must be a function, got {type(fn).__name__}{_where()}")
        if case is not None and int(case) in self._cases:
            first = self._fns[self._cases.index(int(case))]
            raise SprueValueError(f"switch: case {int(case)} has two branches ({_fn_name(first)} and {_fn_name(fn)})"
                                  f"{_where()}")
        self._cases.append(None if case is None else int(case))
        self._fns.append(fn)
        return self

    def branch(self, case):
        """Decorate the branch taken when the index equals `case`."""
        if case is None:
            raise SprueTypeError(f"switch: a case must be a Python integer, got None{_where()}")
        return lambda fn: self._add(case, fn)

    def default(self, fn: Callable | None = None):
        """Decorate the branch taken when no case matches (`@f.default()`, or `@f.default`)."""
        def register(fn: Callable) -> "Switch":
            if self._default is not None:
                raise SprueValueError(f"switch: this switch already has a default branch{_where()}")
            if not callable(fn):
                raise SprueTypeError(f"switch: the default branch must be a function, got {type(fn).__name__}"
                                     f"{_where()}")
            self._default = fn
            return self
        return register if fn is None else register(fn)

    def _table(self) -> tuple[list[tuple[int, int]], list[Callable], int]:
        """((case, branch position) pairs, the branches in the order written, the default's position)."""
        fns = list(self._fns) + ([self._default] if self._default is not None else [])
        cases = [(c, k) for k, c in enumerate(self._cases) if c is not None]
        if self._default is None:
            return cases, fns, 0
        if self._cases[0] is None and 0 not in self._cases:
            cases.insert(0, (0, 0))
        return cases, fns, len(fns) - 1

    def _branch_index(self, cases: list[tuple[int, int]], none: int):
        """The position of the branch whose case equals the index; `none` when no case does."""
        if dtypes.is_int(self._dtype):
            info = np.iinfo(self._dtype)
            cases = [(c, k) for c, k in cases if info.min <= c <= info.max]
        if not isinstance(self._index, Tracer):
            return np.int32(next((k for c, k in cases if c == self._index), none))
        index = np.int32(none)
        for c, k in reversed(cases):
            hit = _e.eq_p.bind(self._index, np.asarray(c, self._dtype)[()])
            index = _e.select_n_p.bind(hit, index, np.int32(k))
        return index

    def __call__(self, *args, **kwargs):
        cases, fns, none = self._table()
        if _interpreted([self._index]):   # Catalyst's switch outside qjit: the branch runs as Python
            return fns[int(self._branch_index(cases, none))](*args, **kwargs)
        return cond_branches("switch", self._branch_index(cases, none),
                             [lambda a, kw, f=f: f(*a, **kw) for f in fns], (args, kwargs), promote=True)


def switch_decorator(index, case=None):
    """`@switch(index)` turns the decorated function into the first branch (the default, or case
    `case`) of a Catalyst switch (see Switch)."""
    return lambda fn: Switch(index, case, fn)


def cond_decorator(pred):
    """`@cond(pred)` turns the decorated zero-argument function into the true branch of a Cond."""
    return lambda fn: Cond(pred, fn)


__all__ = ["fori_loop", "while_loop", "cond", "switch", "scan", "for_loop", "while_loop_decorator",
           "cond_decorator", "Cond", "switch_decorator", "Switch", "trace_body", "Body", "settle_carry"]
