"""Tracing Python functions into jaxprs.

Every operation on a Tracer goes to the innermost active JaxprBuilder (as in mini-JAX, computations
stay in the dynamic scope where they were written). A tracer of an enclosing builder used inside a
nested one is *captured*: closure conversion turns it into a constvar of the nested jaxpr whose value
is the outer tracer. Numpy arrays met while tracing become constvars; Python and numpy scalars become
literals. With no builder active, primitives run their numpy reference rules (eager mode).
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import ConcretizationError, SprueError, SprueTypeError, at
from sprue.base.source_info import user_frame_summary
from sprue.ir.core import (
    ClosedJaxpr,
    Eqn,
    Jaxpr,
    Literal,
    Primitive,
    ShapedArray,
    SizeAval,
    Var,
    aval_of_value,
    check_fits_in_memory,
    dynamic_dim_params,
    impl_rules,
    shape_rules,
    trace_hooks,
)
from sprue.ir.dim_patterns import parse_dim_pattern
from sprue.ir.shapes import Dim, DimVar, check_dims_fit, dim_out_of_range, dim_vars_of
from sprue.ir.shapes import dim as dim_of
from sprue.trace.rows import RowShape, check_rows, rank_error, user_reads_row


class _TraceState(threading.local):
    def __init__(self):
        self.stack: list[JaxprBuilder] = []
        self.rows = 0   # traces under way whose arguments have rows: their equations are checked (rows.py)


_state = _TraceState()


def current_builder() -> "JaxprBuilder | None":
    return _state.stack[-1] if _state.stack else None


class Tracer:
    """A traced array: an abstract value standing for a variable of the jaxpr being built.
    Its numpy-like methods and operators are in sprue.numpy (attached by `_tracer_methods`)."""

    __slots__ = ("builder", "aval", "jvar", "dim_expr", "__weakref__")
    __array_priority__ = 1000
    __array_ufunc__ = None  # numpy defers to our reflected operators: np_array + tracer -> tracer

    def __init__(self, builder: "JaxprBuilder", aval: ShapedArray, var: Var):
        self.builder = builder
        self.aval = aval
        self.jvar = var  # the jaxpr Var (not `var`: that name is the numpy method x.var())
        # for an integer scalar that is a size: its symbolic value (see as_dim)
        self.dim_expr = None

    dtype = property(lambda self: self.aval.dtype)
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    @property
    def shape(self):
        shape = self.aval.shape
        if _state.rows and user_reads_row(shape):   # (the user's code sees the row as one entry)
            return RowShape(shape)
        return shape

    @property
    def ndim(self):
        if _state.rows and (row := user_reads_row(self.aval.shape)):
            raise rank_error("x.ndim", row)
        return self.aval.ndim

    def __len__(self):
        shape = self.aval.shape
        if not shape:
            raise SprueTypeError("len() of a 0-d array")
        if _state.rows and (row := user_reads_row(shape)):
            raise rank_error("len(x)", row)
        return shape[0]

    def _concrete(self, what: str):
        raise ConcretizationError(
            f"{what} needs a concrete value, but this is a traced array {self.aval.str_short()}"
            f"{at(user_frame_summary())}. Inside qjit, values depend on the arguments and are only known"
            f" when the compiled code runs: use sprue.cond (or sprue.lax.cond / sprue.lax.switch) instead"
            f" of Python `if`, sprue.while_loop / sprue.for_loop (or sprue.lax.while_loop / fori_loop)"
            f" instead of a Python loop on a traced value, sprue.numpy.where to pick elements, or mark"
            f" the argument static with static_argnums/static_argnames.")

    def __bool__(self):
        self._concrete("Python control flow on a traced value (`if`, `while`, `and`, `or`, bool())")

    def __int__(self):
        self._concrete("int()")

    def __float__(self):
        self._concrete("float()")

    def __complex__(self):
        self._concrete("complex()")

    def __index__(self):
        self._concrete("Using a traced value as a Python index or size")

    def __array__(self, *args, **kwargs):
        self._concrete("Converting a traced value to a numpy array")

    def tolist(self):
        self._concrete("tolist()")

    def item(self):
        self._concrete("item()")

    __hash__ = None  # arrays are unhashable, as in numpy and JAX

    def __repr__(self):
        return f"Traced<{self.aval.str_short()}>"

    def __format__(self, spec: str) -> str:
        if not spec:
            return repr(self)
        raise ConcretizationError(
            f"formatting a traced value with {{:{spec}}} needs its value, but this is a traced array"
            f" {self.aval.str_short()}{at(user_frame_summary())}, known only when the compiled code runs:"
            f" print it from the compiled code with sprue.debug.print(\"{{:{spec}}}\", x)")

    def __iter__(self):
        if not self.shape:
            raise SprueTypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))


class JaxprBuilder:
    """Collects the equations of one jaxpr being traced."""

    def __init__(self):
        self.invars: list[Var] = []
        self.eqns: list[Eqn] = []
        self.const_vars: dict[int, tuple[Var, Any]] = {}   # id(value) -> (constvar, value)
        self.captures: dict[int, tuple[Var, Tracer]] = {}  # id(outer tracer) -> (constvar, tracer)
        self.dim_values: dict = {}  # DimExpr -> a tracer of this trace holding its value
        self.named_dims: dict = {}  # size names of annotations (`"n"`, `"k*64"`) -> their dims
        self.named_where: dict = {}  # ... and where each was bound (for messages)
        self.active = True

    # -- inputs -------------------------------------------------------------------------------
    def new_arg(self, aval: ShapedArray) -> Tracer:
        v = Var(aval)
        self.invars.append(v)
        t = Tracer(self, aval, v)
        if aval.ndim == 0 and aval.dtype == dtypes.int64:
            bind_dim(t, DimVar())  # an int argument may be used as a size: `jnp.ones(n)`
        return t

    def atom(self, x) -> Var | Literal:
        """The jaxpr atom for an operand: a variable, a captured outer tracer, a const or a literal."""
        if isinstance(x, Tracer):
            if x.builder is self:
                return x.jvar
            if not x.builder.active:
                raise SprueError(
                    f"a traced value {x.aval.str_short()} escaped the function it was traced in (it was"
                    f" stored in a global or returned through a side channel){at(user_frame_summary())};"
                    f" return values from traced functions instead of storing them.")
            entry = self.captures.get(id(x))
            if entry is None:
                entry = (Var(x.aval), x)
                self.captures[id(x)] = entry
            return entry[0]
        if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
            return literal(x)
        if isinstance(x, (np.ndarray, np.generic)):
            if np.ndim(x) == 0:
                return Literal(np.asarray(x)[()], ShapedArray((), dtypes.canonicalize(x.dtype)))
            entry = self.const_vars.get(id(x))
            if entry is None:
                entry = (Var(aval_of_value(x)), x)
                self.const_vars[id(x)] = entry
            return entry[0]
        raise SprueTypeError(
            f"{type(x).__name__} object is not a valid array operand{at(user_frame_summary())};"
            f" expected an array, a Python or numpy scalar, or a traced value")

    # -- equations ------------------------------------------------------------------------------
    def const_value(self, var: Var):
        """The numpy value a constvar of this trace stands for (an array made by `jnp.array([...])`
        inside the trace), or None for any other variable."""
        return next((val for v, val in self.const_vars.values() if v is var), None)

    def add_eqn(self, prim: Primitive, args: Sequence, params: dict) -> Any:
        atoms = [self.atom(a) for a in args]
        data_avals, rule_params = resolve_dynamic_dims(prim, args, [a.aval for a in atoms], params)
        out = abstract_eval(prim, data_avals, rule_params)
        out_avals = list(out) if prim.multiple_results else [out]
        where = user_frame_summary()
        for a in out_avals:   # every array an equation makes (every op, every trace) must fit in memory
            check_fits_in_memory(a, prim.name, where)
        if _state.rows:
            check_rows(prim.name, data_avals, out_avals, rule_params, where)
        # a SizeAval output binds the fresh dimension variable the other outputs' types mention
        outvars = [Var(ShapedArray((), a.dtype), dim=a.binds) if isinstance(a, SizeAval) else Var(a)
                   for a in out_avals]
        self.eqns.append(Eqn(prim, atoms, outvars, params, where))
        tracers = [Tracer(self, v.aval, v) for v in outvars]
        for t in tracers:
            if t.jvar.dim is not None:
                bind_dim(t, t.jvar.dim)
        rule = dim_arith_rules.get(prim)
        if rule is not None and len(tracers) == 1:
            d = tracers[0].dim_expr = rule(args, params, tracers[0].aval)
            if d is not None:
                self.dim_values.setdefault(d, tracers[0])
        return tracers if prim.multiple_results else tracers[0]

    # -- dimensions -----------------------------------------------------------------------------
    def new_dim_arg(self, dv: DimVar) -> Tracer:
        """An implicit argument: the run-time value of the dimension variable dv."""
        t = self.new_arg(ShapedArray((), dtypes.int64))
        bind_dim(t, dv)
        dv.is_axis = True
        return t

    def close_dims(self):
        """Capture every dimension variable that the jaxpr's types mention but no variable of this
        jaxpr binds: its size becomes a const of this jaxpr (closure conversion of sizes)."""
        while True:
            bound = {v.dim for v in self._all_vars() if v.dim is not None}
            free = [dv for dv in self._mentioned_dims() if dv not in bound]
            if not free:
                return
            for dv in sorted(free, key=lambda d: d.id):
                if dv.tracer is None:
                    raise SprueError(f"internal: dimension {dv!r} has no value in any trace")
                v = self.atom(dv.tracer)
                v.dim = dv

    def _all_vars(self):
        yield from (v for v, _ in self.const_vars.values())
        yield from (v for v, _ in self.captures.values())
        yield from self.invars
        for e in self.eqns:
            yield from e.outvars

    def _mentioned_dims(self):
        seen = []
        for v in list(self._all_vars()):
            for d in v.aval.shape:
                for dv in dim_vars_of(d):
                    if dv not in seen:
                        seen.append(dv)
        return seen

    # -- result ---------------------------------------------------------------------------------
    def finish(self, outs: Sequence) -> ClosedJaxpr:
        """The traced jaxpr. Its consts are numpy arrays, then captured tracers of enclosing traces
        (including the sizes of captured dynamically-shaped values)."""
        outvars = [self.atom(o) for o in outs]
        self.close_dims()
        consts = [(v, val) for v, val in self.const_vars.values()]
        # captured sizes first, so that every type mentions only variables bound before it
        # (the seed's order: `{ lambda ; d:i64[] e:f64[d] ...`)
        captured = list(self.captures.values())
        consts += [(v, t) for v, t in captured if v.dim is not None]
        consts += [(v, t) for v, t in captured if v.dim is None]
        jaxpr = Jaxpr([v for v, _ in consts], list(self.invars), outvars, self.eqns)
        return ClosedJaxpr(jaxpr, [val for _, val in consts])


def literal(x) -> Literal:
    dt = dtypes.python_scalar_dtype(x)
    if dt == dtypes.int64 and not (-2**63 <= x < 2**63):
        raise SprueTypeError(f"Python int {x} does not fit in int64{at(user_frame_summary())}")
    return Literal(np.array(x, dt)[()], ShapedArray((), dt, weak_type=True))


def bind(prim: Primitive, args: Sequence, params: dict):
    builder = current_builder()
    if builder is None:
        for a in args:
            if isinstance(a, Tracer):  # a tracer leaked out of its trace: atom() explains
                JaxprBuilder().atom(a)
        return eval_eager(prim, args, params)
    return builder.add_eqn(prim, args, params)


trace_hooks.bind = bind   # Primitive.bind (sprue.ir.core) applies a primitive with it


def eval_eager(prim: Primitive, args: Sequence, params: dict):
    """Run the numpy reference rule; abstract-evaluate first so errors match the traced path."""
    avals = [aval_of_value(a) for a in args]
    data_avals, params = resolve_dynamic_dims(prim, args, avals, params)
    args = args[:len(data_avals)]
    out = abstract_eval(prim, data_avals, params)
    for a in (out if prim.multiple_results else [out]):   # numpy would raise MemoryError (or swap)
        check_fits_in_memory(a, prim.name, user_frame_summary())
    vals = [a if isinstance(a, np.ndarray) else np.asarray(a, av.dtype) for a, av in zip(args, data_avals)]
    result = impl_rules[prim](*vals, **params)
    if prim.multiple_results:
        return [np.asarray(r, o.dtype) for r, o in zip(result, out)]
    return np.asarray(result, out.dtype)


def abstract_eval(prim: Primitive, avals: Sequence[ShapedArray], params: dict):
    """The primitive's shape rule; its errors gain the user's source line. A result size beyond
    int64 (`jnp.zeros((0, 2**64))`) is an error here, at the user's line (shapes.MAX_DIM)."""
    try:
        out = shape_rules[prim](*avals, **params)
    except SprueError as e:
        where = user_frame_summary()
        if where and e.args and "(at " not in str(e):
            e.args = (f"{e.args[0]}{at(where)}", *e.args[1:])  # same exception, now naming the line
        raise
    for a in (out if prim.multiple_results else (out,)):
        if any(dim_out_of_range(d) is not None for d in a.shape):
            check_dims_fit(a.shape, f"{prim.name} makes an array of shape {a.str_short()}", user_frame_summary())
    return out


# Primitives whose shape rule needs the symbolic values of their integer scalar operands (a call
# whose callee types its results by its size parameters): the rule gets `operand_dims`, one Dim
# (or None) per operand, beside the params stored in the equation.
operand_dims_prims: set[Primitive] = set()


def resolve_dynamic_dims(prim: Primitive, args: Sequence, avals: list, params: dict):
    """For a primitive with a dynamic-dims param (`shape=(None, 3)` + trailing size operands):
    the data operands' avals, and the params with each None replaced by its size as a Dim."""
    if prim in operand_dims_prims:
        dims = tuple(as_dim(a) if a_.ndim == 0 and dtypes.is_int(a_.dtype) and not dtypes.is_bool(a_.dtype)
                     else None for a, a_ in zip(args, avals))
        return avals, {**params, "operand_dims": dims}
    name = dynamic_dim_params.get(prim)
    if name is None or params.get(name) is None:
        return avals, params
    dims = params[name]
    n_dyn = sum(d is None for d in dims)
    if n_dyn == 0:
        return avals, params
    sizes = iter(as_dim(a) for a in args[len(args) - n_dyn:])
    resolved = tuple(next(sizes) if d is None else d for d in dims)
    return avals[:len(avals) - n_dyn], {**params, name: resolved}


# -- sizes as values and values as sizes ------------------------------------------------------
# dim_arith_rules[p](args, params, out_aval) -> the output's symbolic value when p computes a
# size from sizes (add, mul, ...), so that `jnp.ones(n + 1)` has the type f64[n+1].
dim_arith_rules: dict[Primitive, Callable] = {}


class LaxOps:
    """The few sprue.lax operations that the layers below lax stage themselves: the tracer computes
    sizes as values (dim_value, as_dim: add, mul, div, rem, convert_element_type) and the
    transformation interpreters (sprue.interp) make zeros and move batch axes (broadcast_in_dim,
    transpose, add). sprue.lax, a layer above both, fills `lax_ops` when it is imported."""

    add: Callable[[Any, Any], Any]
    mul: Callable[[Any, Any], Any]
    div: Callable[[Any, Any], Any]
    rem: Callable[[Any, Any], Any]
    convert_element_type: Callable[[Any, Any], Any]
    broadcast_in_dim: Callable[[Any, Sequence, Sequence[int]], Any]
    transpose: Callable[[Any, Sequence[int]], Any]


lax_ops = LaxOps()


def bind_dim(t: Tracer, dv: DimVar):
    """Make tracer t the binder of the dimension variable dv."""
    t.jvar.dim = dv
    t.dim_expr = dim_of(dv)
    dv.tracer = t


def as_dim(x) -> Dim:
    """A size given as a value: a Python/numpy int, or a traced integer scalar (whose symbolic
    value is used when known; otherwise it becomes a fresh dimension variable)."""
    if isinstance(x, Tracer):
        if x.ndim != 0 or not dtypes.is_int(x.dtype):
            raise SprueTypeError(f"a size must be an integer scalar, got a traced {x.aval.str_short()}"
                                 f"{at(user_frame_summary())}")
        if x.dim_expr is None:
            if x.dtype != dtypes.int64:
                y = lax_ops.convert_element_type(x, dtypes.int64)
                bind_dim(y, DimVar())
                x.dim_expr = y.dim_expr
            else:
                bind_dim(x, DimVar())
        return x.dim_expr
    if isinstance(x, (np.integer, int)) and not isinstance(x, (bool, np.bool_)):
        return int(x)
    if isinstance(x, np.ndarray) and x.ndim == 0 and dtypes.is_int(x.dtype):
        return int(x)
    raise SprueTypeError(f"a size must be an integer, got {type(x).__name__}{at(user_frame_summary())}")


def dim_value(d: Dim):
    """The run-time value of a dim as an operand: an int, or an i64 scalar tracer computed from the
    tracers binding its dimension variables."""
    if isinstance(d, int):
        return d
    builder = current_builder()
    known = builder.dim_values.get(d) if builder is not None else None
    if known is not None:
        return known
    if len(d.terms) == 1 and d.terms[0][1] == 1 and len(d.terms[0][0]) == 1 and d.terms[0][0][0][1] == 1:
        atom = d.terms[0][0][0][0]
        if isinstance(atom, DimVar):
            return atom.tracer  # a dimension variable: its binder (captured if from an outer trace)
    total = None
    for mono, coef in d.terms:
        term = None
        for atom, power in mono:
            if not isinstance(atom, DimVar):
                inner = dim_value(atom.expr)
                divide = lax_ops.div if atom.op == "floordiv" else lax_ops.rem
                val = divide(inner, np.int64(atom.c))
            else:
                val = atom.tracer
            for _ in range(power):
                term = val if term is None else lax_ops.mul(term, val)
        term = np.int64(coef) if term is None else (term if coef == 1 else lax_ops.mul(term, np.int64(coef)))
        total = term if total is None else lax_ops.add(total, term)
    if isinstance(total, Tracer):
        total.dim_expr = d
        if builder is not None:
            builder.dim_values[d] = total
    return total


class trace_scope:
    """Context manager pushing a fresh builder for the duration of a trace."""

    def __enter__(self) -> JaxprBuilder:
        self.builder = JaxprBuilder()
        _state.stack.append(self.builder)
        return self.builder

    def __exit__(self, *exc):
        popped = _state.stack.pop()
        assert popped is self.builder
        popped.active = False
        return False


def trace_flat(fn: Callable, in_avals: Sequence[ShapedArray]) -> ClosedJaxpr:
    """Trace fn(*flat_tracers) -> flat list of outputs into a closed jaxpr.

    Avals may give dynamic dimensions as strings: names (`f64["n", 3]`) or expressions over names
    (`i8["n", "m*4"]`, dim_patterns.py). Each name bound somewhere (standing alone or as `c*name`)
    becomes a dimension variable whose size is an implicit i64 argument, placed before the explicit
    ones (the seed's expanded argument list: `{ lambda ; a:i64[] b:f64[a,3]. ... }`); the axes are
    typed by the expressions (`i8[a,4*b]`). The names stay known to the trace (sprue.assert_shape).
    A row (`"*b"`, `"...x"`: OCANNL's row variables) is one such size, the product of the row's
    sizes; while a function with rows is traced, every equation is checked (rows.py)."""
    with trace_scope() as b:
        names: dict[str, DimVar] = {}
        for aval in in_avals:
            for d in aval.shape:
                if isinstance(d, str):
                    binder = parse_dim_pattern(d).binder
                    if binder is not None and binder[1] not in names:
                        names[binder[1]] = DimVar(binder[1])
        for dv in names.values():
            b.new_dim_arg(dv)
        env = {n: dim_of(dv) for n, dv in names.items()}

        def resolve(d):
            if not isinstance(d, str):
                return d
            p = parse_dim_pattern(d)
            unbound = [n for n in p.names if n not in env]
            if unbound:
                raise SprueTypeError(f"the size {unbound[0]} in '{d}' is not bound: a size name must appear alone"
                                     f" (\"n\") or times a constant (\"m*4\") in some argument's type")
            return p.evaluate(env)
        b.named_dims.update(env)
        b.named_where.update({n: "the function's argument types" for n in env})
        args = [b.new_arg(a.update(shape=tuple(resolve(d) for d in a.shape))) for a in in_avals]
        rows = any(n.startswith(("*", "...")) for n in names)
        _state.rows += rows
        try:
            outs = fn(*args)
        finally:
            _state.rows -= rows
        return b.finish(outs)


def eval_jaxpr(jaxpr: Jaxpr, consts: Sequence, *args) -> list:
    """Evaluate a jaxpr by binding its primitives: eagerly with numpy, or inlined into a trace."""
    env: dict[Var, Any] = {}

    def read(a):
        return a.val if isinstance(a, Literal) else env[a]

    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    for eqn in jaxpr.eqns:
        outs = bind(eqn.primitive, [read(a) for a in eqn.invars], eqn.params)
        if not eqn.primitive.multiple_results:
            outs = [outs]
        for v, x in zip(eqn.outvars, outs):
            env[v] = x
    return [read(a) for a in jaxpr.outvars]
