"""`sprue.qjit`: trace a function per call signature, compile it ahead of time to a native shared
library, and call it through the cffi runtime.

A signature is the pytree structure of the arguments, each leaf's shape/dtype/weak-type, and the
values of static arguments. With type hints on every parameter the signature is fixed, the function
compiles at decoration time, and calls that do not fit the hints raise instead of recompiling.

Calls whose arguments are ndarrays and Python/numpy scalars (positionally, by keyword or by default)
take a fast path after the first call with the same types, dtypes, shapes and static values: a
caller generated for that signature (sprue.runtime.fastcall) checks exactly those and calls the
kernel with preallocated descriptors, without binding, flattening or abstracting. Everything else
(pytrees, array-likes, out=, calls while tracing, any mismatch) takes the general path, which
raises every error. The fast path is safe for concurrent calls from several threads.
"""
from __future__ import annotations

import functools
import inspect
import os
import threading
import warnings
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from sprue.api import options
from sprue.api.call_arguments import (
    check_argument_dtypes,
    refuse_masked,
    same_static,
    static_key,
    static_matcher,
    unhashable_part,
)
from sprue.api.call_sites import call_in_trace
from sprue.api.container_args import (
    CONTAINERS,
    container_key,
    flattener,
    is_container,
    leaf_key,
    leaves_of,
)
from sprue.api.driver import ImplicitDim, compile_closed_jaxpr, out_dir_for, size_of
from sprue.api.hints import hint_to_avals, is_hint, named_rows
from sprue.api.pickle_format import (
    decode_aval,
    decode_signature,
    decode_tree,
    encode_aval,
    encode_signature,
    encode_tree,
    malformed,
    program_entry,
    read_program,
    reference_of,
    remember,
    remembered,
    resolve,
    source_reference,
)
from sprue.api.pickle_format import dumps as dump_payload
from sprue.api.pickle_format import loads as load_payload
from sprue.api.row_boundary import RowBoundary
from sprue.api.shape_functions import flat_destinations
from sprue.api.shape_inference import infer_hints, needs_inference
from sprue.api.shape_signatures import (
    Binding,
    FunctionSignature,
    check_results,
    function_signature,
    match,
    signature_of_hints,
)
from sprue.api.traced import TracedFunction, abstractify, as_array_argument, trace_function
from sprue.base import timing
from sprue.base.errors import AheadOfTimeWarning, SprueError, SprueTypeError, SprueValueError, at
from sprue.base.pytree import TreeDef, none_paths, tree_flatten, tree_flatten_with_path, tree_unflatten
from sprue.base.source_info import user_frame_of, user_frame_summary
from sprue.base.tracebacks import api_boundary
from sprue.runtime.build_folders import folder_name
from sprue.runtime.fastcall import MISS, SINGLE, Array, Const, Scalar, Skip
from sprue.runtime.fastcall_c import dispatcher_base
from sprue.trace.tracing import _state as _trace_state
from sprue.trace.tracing import current_builder

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_KEYWORD_ONLY = (inspect.Parameter.KEYWORD_ONLY,)
_NONE: frozenset = frozenset()
_DEFAULTED = "<the parameter's default>"   # a left-out parameter's static key: the default object is fixed
_MAX_PLANS = 1024   # fast-path entries per function (one per distinct argument shapes); then start over


def _no_plan(args):
    return MISS


@dataclass
class Compiled:
    """One compiled signature of a qjit'd function."""
    traced: TracedFunction
    stablehlo: str
    library: Path
    function: Callable  # the runtime's CompiledFunction: flat arrays in, flat results out
    implicit: list[ImplicitDim]
    signature: FunctionSignature | None = None   # from type hints with size expressions
    static: dict = field(default_factory=dict)    # the static arguments' values, by name (for pickling)
    rows: RowBoundary | None = None   # parameters with rows: collapsed on the way in, restored on the way out

    def call(self, leaves: list, paths: list[str], fn_name: str, out=None) -> list:
        if self.rows is not None:
            leaves, sizes = self.rows.collapse(leaves, paths, fn_name)
        args = self.flat_args(leaves, paths, fn_name)
        if out is None:
            outs = self.function(*args)
        else:
            dests = flat_destinations(out, self.traced.out_tree, fn_name)
            if self.rows is not None:
                dests = self.rows.collapse_destinations(dests, sizes, fn_name)
            outs = self.function(*args, out=dests)
        return outs if self.rows is None else self.rows.restore(list(outs), sizes)

    def result_shapes(self, leaves: list, paths: list[str], fn_name: str) -> list:
        """The flat results' shapes for these leaves, from the shape function (no kernel run)."""
        if self.rows is not None:
            leaves, sizes = self.rows.collapse(leaves, paths, fn_name)
            return self.rows.restore_shapes(self.function.result_shapes(*self.flat_args(leaves, paths, fn_name)),
                                            sizes)
        return self.function.result_shapes(*self.flat_args(leaves, paths, fn_name))

    def flat_args(self, leaves: list, paths: list[str], fn_name: str) -> list:
        """The compiled function's flat arguments: the implicit sizes, then the leaves (with any
        rows collapsed already: call)."""
        if self.signature is not None:
            return [*_sizes_from_signature(self.signature, leaves), *leaves]
        if not self.implicit:
            return leaves
        return [*(size_of(dim, leaves, paths, fn_name) for dim in self.implicit), *leaves]


def _sizes_from_signature(sig: FunctionSignature, leaves) -> list[int]:
    """The implicit sizes of a hinted function, from its arguments' shapes: every size expression
    is checked (`m*4` must divide, `n+1` must agree), with messages naming the parameter and axis."""
    shapes = [np.shape(x) for x in leaves]
    b = match(sig.fn_name, sig.params, shapes, [s.dtype if s.dtype is not None else np.asarray(x).dtype
                                                 for s, x in zip(sig.params, leaves)])
    return [b.env[n] for n in sig.names]


_INSTANCES: "weakref.WeakSet[QJIT]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """os.fork() copies only the calling thread: a lock another thread held (compiling) would stay
    held in the child for ever. The locks here guard Python state only, so fresh ones are safe (the
    build root is compile_cache's, which makes the child its own)."""
    for f in list(_INSTANCES):
        f._lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


class _DispatchInPython:
    """QJIT's call where the C Dispatcher (runtime/fastcall_c.py) is not built: its `_dispatch`."""

    @api_boundary
    def __call__(self, *args, **kwargs):
        return self._dispatch(*args, **kwargs)


# The C Dispatcher takes a call with exactly the function's number of positional arguments, outside
# any trace, straight to the last fast caller (`_mono`): a scalar call's ~0.3 us of Python
# (__call__'s frame, its kwargs dict, the attribute reads) is not paid. Anything else calls
# `_dispatch`, the same path in Python.
_CallBase = dispatcher_base(_trace_state, MISS) or _DispatchInPython


class QJIT(_CallBase):
    """A function compiled ahead of time, once per call signature."""

    def __init__(self, fn: Callable, *, static_argnums: Sequence[int] = (), static_argnames: Sequence[str] = (),
                 keep_intermediate: bool | str | os.PathLike = False, abstracted_axes=None,
                 cast_arguments: bool = False, _ahead_of_time: bool = True):
        if not callable(fn):
            raise SprueTypeError(f"qjit expects a function, got {type(fn).__name__}{at(user_frame_summary())}")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = getattr(fn, "__name__", "function")
        self.signature = inspect.signature(fn)
        params = list(self.signature.parameters.values())
        self.static_names = options.static_argnames(self.signature, static_argnames, self.name)
        # An invalid static_argnums is raised by the first call, as Catalyst raises it (its users'
        # code expects it there); the function is not compiled at decoration then.
        self._static_error: SprueError | None = None
        try:
            numbered, self._static_varargs = options.static_argnums(self.signature, static_argnums, self.name)
        except SprueError as e:
            self._static_error, numbered, self._static_varargs = e, set(), frozenset()
        self.static_names |= numbered
        self.keep_intermediate = options.check_intermediate(keep_intermediate, self.name)
        self.cast_arguments = options.check_flag(cast_arguments, f"qjit({self.name})", "cast_arguments")
        self.abstracted_axes = options.check_abstracted_axes(abstracted_axes, f"qjit({self.name})")
        self.compile_count = 0  # how many times this function was traced and compiled
        self._cache: dict[Any, Compiled] = {}
        self._lock = threading.Lock()   # reset in a forked child (_after_fork_in_child)
        _INSTANCES.add(self)
        self._last: Compiled | None = None
        self._fixed: Compiled | None = None
        self._callees: dict = {}   # signature -> the traced callee of calls inside other traces
        # The fast path (see __call__): positional calls whose arguments are plain arrays and scalars.
        self._plans: dict = {}      # _fast_key(args) -> caller (runtime/fastcall.py) of one Compiled
        self._mono: Callable = _no_plan   # the most recently used caller: tried first, no key built
        self._positional = all(p.kind in _POSITIONAL for p in params)
        self._nparams = len(params)
        self._param_names = tuple(p.name for p in params)
        self._varargs_name = next((p.name for p in params if p.kind is inspect.Parameter.VAR_POSITIONAL), None)
        self._static_pos = frozenset(i for i, p in enumerate(params) if p.name in self.static_names)
        self._by_keyword = tuple(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params)
        self._defaults = tuple(p.default for p in params)
        # Parameters a call leaves out keep their default as a Python value, static, as under
        # jax.jit (`def f(x, axis=-1)`: axis is an int in the trace), unless the function compiles
        # from type hints (its parameters are all arguments then).
        self._default_of = {p.name: p.default for p in params
                            if p.default is not inspect.Parameter.empty and p.kind in _POSITIONAL + _KEYWORD_ONLY}
        # _complete's common case, a positional call leaving out trailing parameters: per count of
        # arguments, the defaults that follow (None where some parameter there has none)
        self._tails = [tuple(self._defaults[i:]) if all(d is not inspect.Parameter.empty for d in self._defaults[i:])
                       else None for i in range(len(params) + 1)]
        self.fsig = None
        self._hint_avals = self._hints()   # every parameter's hinted abstract value, or None
        self._aot_failure: str | None = None
        self._inference_error: Exception | None = None
        self.inferred_hints: dict | None = None   # the hints inferred from use (api/shape_inference.py)
        if self._hint_avals is not None:
            self.fsig = function_signature(fn, self.name)
            options.check_axes_against_hints(self.abstracted_axes, self._hint_avals, self.name)
        elif (_ahead_of_time and not self.static_names and self._static_error is None and not _trace_state.stack
              and needs_inference(self.signature)):
            self._infer_shapes()
        if (_ahead_of_time and (self._hint_avals is not None or not params) and not _trace_state.stack
                and self._static_error is None):
            self._compile_ahead()
        elif _ahead_of_time and self._hint_avals is None:
            self._warn_unusable_annotation()

    def _infer_shapes(self) -> None:
        """OCANNL's shape inference: the shapes of parameters with partial hints or none, from the
        program's constraints (api/shape_inference.py); a failure is the AOT warning, and the error
        of every call."""
        try:
            hints = infer_hints(self.fn, self.name, self.signature)
        except Exception as e:   # reported now as a warning, raised again by every call
            self._inference_error = e
            code = getattr(self.fn, "__code__", None)
            warnings.warn_explicit(
                f"qjit({self.name}): inferring the shapes of its parameters failed: {e}. Calling {self.name} raises"
                f" the error", AheadOfTimeWarning, code.co_filename if code else "<unknown>",
                code.co_firstlineno if code else 0)
            return
        self.inferred_hints = hints
        self._hint_avals = {n: hint_to_avals(named_rows(h, n)) for n, h in hints.items()}
        self.fsig = signature_of_hints(self.fn, self.name, hints)

    def _compile_ahead(self) -> None:
        """Catalyst's ahead-of-time compilation: a function whose parameters are all annotated (or
        which has none) is compiled when decorated, so f.jaxpr and f.mlir are there before a call.
        A failure is a warning here, naming the error and its line (a module that defines the
        function still imports); the call compiles again and raises it. (Inside another trace the
        compilation waits for the call: the function may close over that trace's values.)"""
        try:
            if self._hint_avals is not None:
                self._fixed = self._compile(self._hint_avals, {})
            else:
                self._last = self._lookup({}, {})[0]
        except Exception as e:   # reported now as a warning, raised again by the call
            where = user_frame_of(e.__traceback__)
            text = str(e) if isinstance(e, SprueError) or not where else f"{type(e).__name__}: {e}{at(where)}"
            self._aot_failure = text
            why = "every parameter is annotated" if self._nparams else "it takes no parameters"
            self._warn_ahead(f"({why}, so it is compiled when decorated): {text}. Calling {self.name} compiles it"
                             f" again and raises the error")

    def _warn_unusable_annotation(self) -> None:
        """Catalyst compiles a function whose every parameter is annotated with a type, and warns
        that it failed when one of them cannot be traced (`x: str`). sprue compiles at decoration
        only from its own type hints; a function annotated for documentation (`x: np.ndarray`) is
        compiled at the call, without a warning. It warns as Catalyst does where an annotation
        says the parameter cannot be an argument at all (a string, bytes): the call will fail."""
        params = list(self.signature.parameters.values())
        if self.static_names or self._static_varargs or self._static_error or not params or any(
                p.annotation is inspect.Parameter.empty for p in params):
            return
        bad = next((p for p in params if isinstance(p.annotation, type)
                    and issubclass(p.annotation, (str, bytes, bytearray))), None)
        if bad is not None:
            self._warn_ahead(f"(every parameter is annotated, so it is compiled when decorated): parameter"
                             f" '{bad.name}' is annotated {bad.annotation.__name__}, which a compiled function cannot"
                             f" take (it takes arrays, scalars and pytrees of them): mark it static"
                             f" (static_argnames='{bad.name}') or annotate it with an array type (sprue.f64[3])")

    def _warn_ahead(self, text: str) -> None:
        code = getattr(self.fn, "__code__", None)
        warnings.warn_explicit(f"qjit({self.name}): ahead-of-time (AOT) compilation at decoration failed {text}",
                               AheadOfTimeWarning, code.co_filename if code else "<unknown>",
                               code.co_firstlineno if code else 0)

    # -- signatures -------------------------------------------------------------------------
    def _hints(self) -> dict | None:
        """Per-parameter abstract values when every parameter has a sprue type hint."""
        params = self.signature.parameters.values()
        if self.static_names or self._static_varargs or self._static_error or not params:
            return None
        out = {}
        for p in params:
            if p.kind not in _POSITIONAL or p.annotation is inspect.Parameter.empty or not is_hint(p.annotation):
                return None
            out[p.name] = hint_to_avals(named_rows(p.annotation, p.name))
        return out

    def _bind(self, args, kwargs) -> tuple[dict, dict]:
        """Split a call's arguments into (dynamic by name, static by name)."""
        if self._static_error is not None:   # (a new exception each call: its traceback is this call's)
            raise type(self._static_error)(str(self._static_error))
        if not kwargs and self._positional and len(args) == self._nparams:   # what bind() would do
            dynamic, static = {}, {}
            for name, v in zip(self._param_names, args):
                (static if name in self.static_names else dynamic)[name] = v
            return dynamic, static
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise SprueTypeError(f"{self.name}(): {e}") from None
        passed = set(bound.arguments)
        bound.apply_defaults()
        defaulted = set(bound.arguments) - passed if self._hint_avals is None else set()
        dynamic, static = {}, {}
        for k, v in bound.arguments.items():
            (static if k in self.static_names or k in defaulted and k in self._default_of else dynamic)[k] = v
        if self._static_varargs:
            name = self._varargs_name
            values = dynamic.get(name, ())
            # static positions of *args: their values are compiled in, None stands in their place
            static["*" + name] = tuple((i, values[i]) for i in sorted(self._static_varargs) if i < len(values))
            dynamic[name] = tuple(None if i in self._static_varargs else v for i, v in enumerate(values))
        return dynamic, static

    def _static_key(self, static: dict):
        key = []
        for k in sorted(static):
            if k in self._default_of and same_static(static[k], self._default_of[k]):
                key.append((k, _DEFAULTED))   # (the default: hashable or not; also as unpickled)
                continue
            try:
                hash(static[k])
            except TypeError as e:
                bad = unhashable_part(static[k])
                inner = "" if bad is static[k] else f" (it holds a {type(bad).__name__})"
                raise SprueTypeError(
                    f"{self.name}(): static argument '{k}' must be hashable, got {type(static[k]).__name__}{inner}:"
                    f" {e}. A static argument is compiled in and looked up by its value: pass a tuple for a"
                    f" list, or make '{k}' a non-static argument for an array") from None
            key.append((k, static_key(static[k])))
        return tuple(key)

    # -- compilation ------------------------------------------------------------------------
    def _compile(self, dynamic: dict, static: dict) -> Compiled:
        with timing.profiled(self.name):
            return self._trace_and_compile(dynamic, static)

    def _trace_and_compile(self, dynamic: dict, static: dict) -> Compiled:
        names = list(dynamic)   # parameters in positional order: the jaxpr's invars follow it
        with timing.step("trace"):
            traced = trace_function(lambda *vals: self._call_user(dict(zip(names, vals)), static),
                                    tuple(dynamic.values()), {}, names)
        compiled = self._compile_traced(traced, static)
        self.compile_count += 1
        return compiled

    def _compile_traced(self, traced: TracedFunction, static: dict) -> Compiled:
        """The library of a traced signature: from the compile cache, else compiled."""
        out_dir = self._out_dir()
        # one file name per signature: dlopen returns an already-loaded library for a path it has seen
        name = folder_name(self.name)   # (a file name: any Python name, any length)
        stem = name if not self._cache else f"{name}_{len(self._cache)}"
        if self.keep_intermediate:
            (out_dir / f"{stem}.jaxpr").write_text(str(traced.closed_jaxpr) + "\n")
        n_implicit = len(traced.closed_jaxpr.jaxpr.invars) - len(traced.in_paths)
        text, library, function, implicit = compile_closed_jaxpr(
            traced.closed_jaxpr, n_implicit, list(traced.in_paths), out_dir, stem, bool(self.keep_intermediate))
        return Compiled(traced, text, library, function, implicit, self.fsig if self.fsig and self.fsig.names else None,
                        dict(static), RowBoundary.of(traced.closed_jaxpr.jaxpr, n_implicit))

    def _call_user(self, dyn: dict, static: dict):
        """The user's function on traced dynamic arguments and the static ones, by name."""
        if self._static_varargs:   # the static values back in their places of *args
            name = self._varargs_name
            static = dict(static)
            values = list(dyn.get(name, ()))
            for i, v in static.pop("*" + name):
                values[i] = v
            dyn = {**dyn, name: tuple(values)}
        bound = inspect.BoundArguments(self.signature, {**static, **dyn})
        ordered = {k: bound.arguments[k] for k in self.signature.parameters if k in bound.arguments}
        bound.arguments = ordered
        try:
            out = self.fn(*bound.args, **bound.kwargs)
        except TypeError as e:
            nones = [] if isinstance(e, SprueError) else [p for k, v in dyn.items() for p in none_paths(v, k)]
            if not nones:
                raise
            # `None * 2` on an argument that is None: Python's TypeError names neither the line nor why
            raise SprueTypeError(
                f"{self.name}(): {e}{at(user_frame_of(e.__traceback__))}: argument{'s' if len(nones) > 1 else ''}"
                f" {', '.join(nones)} {'is' if len(nones) == 1 else 'are'} None, which reaches the function as None"
                f" (an empty pytree), not as an array") from e
        if self.fsig is not None and self.fsig.results is not None:
            self._check_results(out)
        return out

    def _check_results(self, out) -> None:
        """The return annotation, checked in the trace (run-time constraints become checks)."""
        builder = current_builder()
        env = dict(builder.named_dims)
        binding = Binding(env, self.fsig.bound_at())
        check_results(self.name, self.fsig.results, tree_flatten(out)[0], binding, where=user_frame_summary())

    def _out_dir(self) -> Path:
        return out_dir_for(self.name, self.keep_intermediate)

    def _lookup(self, dynamic: dict, static: dict) -> tuple[Compiled, list]:
        if self._inference_error is not None:
            raise self._inference_error
        names = list(dynamic)
        leaves, paths, tree = tree_flatten_with_path(tuple(dynamic.values()))
        paths = [_named_path(p, names) for p in paths]
        refuse_masked(leaves, paths, self.name)
        leaves = [as_array_argument(x, p) for x, p in zip(leaves, paths)]
        if self._fixed is None and self._hint_avals is not None:   # compiling at decoration failed:
            with self._lock:                                           # compile (and raise) here
                if self._fixed is None:
                    self._fixed = self._compile(self._hint_avals, {})
        if self._fixed is not None:
            self._check_fits_hints(tree, leaves, paths)
            return self._fixed, leaves
        avals = tuple(abstractify(x, p) for x, p in zip(leaves, paths))
        if self.abstracted_axes is not None:
            avals = options.abstract_axes(self.abstracted_axes, dynamic, avals, self.name)
        key = (self._static_key(static), tree, avals)
        compiled = self._cache.get(key)
        if compiled is None:
            with self._lock:
                compiled = self._cache.get(key)
                if compiled is None:
                    compiled = self._compile(dict(zip(names, tree_unflatten(tree, avals))), static)
                    self._cache[key] = compiled
        return compiled, leaves

    def _check_fits_hints(self, tree: TreeDef, leaves, paths):
        hinted = self._fixed.traced.in_tree.children[0]  # in_tree is ((hints by position), {})
        if tree != hinted:
            raise SprueTypeError(f"{self.name}(): arguments {tree} do not match the type hints {hinted};"
                                 f" functions compiled from type hints do not recompile")
        if not self.cast_arguments:
            self._check_hinted_dtypes(leaves, paths)

    def _check_hinted_dtypes(self, leaves, paths) -> None:
        """A hinted parameter takes arrays and numpy scalars of exactly its dtype (see
        check_argument_dtypes); qjit(cast_arguments=True) converts safe casts instead."""
        invars = self._fixed.traced.closed_jaxpr.jaxpr.invars
        avals = [v.aval for v in invars[len(invars) - len(leaves):]]
        specs = self.fsig.params if self.fsig is not None else [None] * len(leaves)
        declared = [f"hinted sprue.{spec.type_text_for(a.dtype)}" if spec is not None and spec.dtype is not None
                    else f"hinted {({'b': 'bool', 'i': 'int', 'f': 'float'}.get(a.dtype.kind, a.dtype.name))}"
                    for spec, a in zip(specs, avals)]
        check_argument_dtypes(self.name, leaves, paths, avals, declared,
                              "or compile with qjit(cast_arguments=True) to convert")

    # -- calling ------------------------------------------------------------------------------
    @api_boundary   # (the C Dispatcher's way in, when its fast caller does not take the call)
    def _dispatch(self, *args, **kwargs):
        # The fast path: positional arguments that are ndarrays and Python/numpy scalars, with the
        # types, dtypes, shapes and static values of a call that went through the general path
        # before. Its caller (runtime/fastcall.py) checks exactly those and fills preallocated
        # descriptors; the implicit sizes are constants of the shapes. Anything else, or MISS,
        # takes the general path, which raises every error it always did.
        if not _trace_state.stack:
            full, defaulted = (args, _NONE) if not kwargs and len(args) == self._nparams \
                else self._complete(args, kwargs)
            if full is not None:
                res = self._mono(full)
                if res is not MISS:
                    return res
                key = self._fast_key(full, defaulted)
                if key is not None:
                    try:
                        plan = self._plans.get(key)
                    except TypeError:   # an unhashable static argument: the general path says so
                        plan = None
                    if plan is not None:
                        res = plan(full)
                        if res is not MISS:
                            self._mono, self._last = plan, plan.compiled
                            return res
        return self._call(args, kwargs)

    def _complete(self, args: tuple, kwargs: dict) -> tuple[tuple | None, frozenset]:
        """Every parameter's value in order, as signature.bind + apply_defaults would find them,
        with the positions filled from defaults (static: _bind), when all parameters are
        positional; (None, _) otherwise (and for any call bind refuses)."""
        n = self._nparams
        if not self._positional or len(args) > n or ("out" in kwargs and "out" not in self._param_names):
            return None, _NONE
        if not kwargs and (tail := self._tails[len(args)]) is not None:
            return args + tail, frozenset(range(len(args), n)) if self._hint_avals is None else _NONE
        rest, used, defaulted = [], 0, []
        for i in range(len(args), n):
            name = self._param_names[i]
            if name in kwargs:
                if not self._by_keyword[i]:
                    return None, _NONE
                rest.append(kwargs[name])
                used += 1
            elif self._defaults[i] is not inspect.Parameter.empty:
                rest.append(self._defaults[i])
                defaulted.append(i)
            else:
                return None, _NONE
        if used != len(kwargs):   # unknown names, or a parameter passed twice
            return None, _NONE
        return args + tuple(rest), frozenset(defaulted) if defaulted and self._hint_avals is None else _NONE

    def _call(self, args, kwargs):
        """The general path of a call."""
        if current_builder() is not None:
            # called while tracing another function: a call equation (compiled as its own function)
            return call_in_trace(self, args, kwargs)
        # out=: destinations shaped like the results (runtime/function.py), unless `out` is a parameter
        out = kwargs.pop("out", None) if "out" not in self.signature.parameters else None
        dynamic, static = self._bind(args, kwargs)
        compiled, leaves = self._lookup(dynamic, static)
        self._last = compiled
        self._mono = _no_plan
        full, defaulted = None, _NONE
        if out is None:
            full, defaulted = (args, _NONE) if not kwargs and len(args) == self._nparams \
                else self._complete(args, kwargs)
        if full is not None and compiled.rows is None:   # (rows: reshaped on each call, by the general path)
            key = self._fast_key(full, defaulted)
            if key is not None:
                args_list = compiled.flat_args(leaves, compiled.traced.in_paths, self.name)
                plan = self._plan(full, key, compiled, args_list, defaulted)
                if plan is not None:
                    self._mono = plan
                outs = compiled.function(*args_list)
                return tree_unflatten(compiled.traced.out_tree, outs)
        outs = compiled.call(leaves, compiled.traced.in_paths, self.name, out)
        return tree_unflatten(compiled.traced.out_tree, outs)

    def _fast_key(self, args, defaulted: frozenset = _NONE) -> tuple | None:
        """The fast path's key of a positional call: per argument its static value's key
        (static_key: type and value; also for the `defaulted` positions, left out by the call),
        or (dtype, shape) of an ndarray, or the type of a Python/numpy scalar; None when some
        argument is anything else (a pytree, an array-like, an ndarray subclass)."""
        if len(args) != self._nparams or not self._positional:
            return None
        key = []
        static = self._static_pos | defaulted if defaulted else self._static_pos
        for i, a in enumerate(args):
            t = type(a)
            if i in static:
                key.append(static_key(a))
            elif (entry := container_key(a) if t in CONTAINERS else leaf_key(a)) is not None or \
                    is_container(t) and (entry := container_key(a)) is not None:   # a registered pytree class
                key.append(entry)
            else:
                return None
        return tuple(key)

    def _plan(self, args, key: tuple, compiled: Compiled, flat: list, defaulted: frozenset = _NONE):
        """Make and remember the fast caller for calls with this key (after the general path found
        `compiled` and its flat arguments `flat` for `args`, whose `defaulted` positions the call
        left out); None when the runtime has none."""
        try:
            hash(key)
        except TypeError:
            return None
        static = self._static_pos | defaulted if defaulted else self._static_pos
        # a container argument (container_args.py): its entries, flattened by the plan
        layout = [key[i] if i not in static and is_container(type(a)) else None for i, a in enumerate(args)]
        leaves = [leaves_of(a, lay) if lay is not None else [a] for a, lay in zip(args, layout)]
        n_implicit = len(flat) - sum(len(v) for i, v in enumerate(leaves) if i not in static)
        if not all(type(v) is int or isinstance(v, np.integer) for v in flat[:n_implicit]):
            return None
        kinds = [Const(int(v)) for v in flat[:n_implicit]]
        for i, a in enumerate(args):
            if i in static:
                kinds.append(Skip(a, static_matcher(a)))
            else:
                kinds += [Array(v.dtype, v.shape) if isinstance(v, np.ndarray) else Scalar(type(v)) for v in leaves[i]]
        out_tree = compiled.traced.out_tree
        finish = SINGLE if out_tree.kind == "leaf" else functools.partial(tree_unflatten, out_tree)
        specialize = getattr(compiled.function, "specialize", None)
        plan = None if specialize is None else specialize(kinds, finish)
        if plan is None:
            return None
        if any(lay is not None for lay in layout):
            plan = _flattening(plan, flattener(layout))
        plan.compiled = compiled
        if len(self._plans) >= _MAX_PLANS:
            self._plans.clear()
        self._plans[key] = plan
        return plan

    def result_shapes(self, *args, **kwargs):
        """The shapes of the results of `self(*args, **kwargs)`, shaped like the results, from the
        compiled shape function without running the kernel (compiling first if no compiled
        signature fits, as a call would). Raises NoShapeFunctionError when a result's size is
        computed from data."""
        dynamic, static = self._bind(args, kwargs)
        compiled, leaves = self._lookup(dynamic, static)
        shapes = compiled.result_shapes(leaves, compiled.traced.in_paths, self.name)
        return tree_unflatten(compiled.traced.out_tree, shapes)

    # -- inspection ---------------------------------------------------------------------------
    def _latest(self, what: str) -> Compiled:
        c = self._last or self._fixed
        if c is None and self._aot_failure is not None:
            raise SprueValueError(f"{self.name}.{what} is not available: compiling {self.name} at decoration failed:"
                                  f" {self._aot_failure}")
        if c is None:
            raise SprueValueError(f"{self.name}.{what} is not available yet: call the function once (or give"
                                  f" every parameter a type hint) so that it is traced and compiled")
        return c

    @property
    def jaxpr(self):
        """The closed jaxpr of the most recent compilation."""
        return self._latest("jaxpr").traced.closed_jaxpr

    @property
    def mlir(self) -> str:
        """The StableHLO module of the most recent compilation."""
        return self._latest("mlir").stablehlo

    def __repr__(self):
        return f"<sprue.qjit {self.name}>"

    # -- pickling (api/pickle_format.py) ----------------------------------------------------------
    def __reduce__(self):
        """Pickled by program: each compiled signature's jaxpr, not the Python function; a function
        never compiled, by reference to its module and name (as pickle does a function)."""
        compiled = ([(None, self._fixed)] if self._fixed is not None else []) + list(self._cache.items())
        reference, why_not = reference_of(self, self.fn)
        if not compiled and reference is None:
            raise SprueTypeError(
                f"{self.name} cannot be pickled yet: it has no compiled signature to carry (it was never called,"
                f" and not every parameter has a type hint), and it cannot travel by reference: {why_not}. Call it"
                f" once with arguments like those it will get (with abstracted_axes, one compilation fits every"
                f" size) before pickling it, or define it at the top level of a module the receiver can import")
        objects: list = [self.abstracted_axes]
        body = {"name": self.name, "reference": reference, "why_not": why_not,
                "doc": self.__doc__ if isinstance(self.__doc__, str) else None,
                "signature": encode_signature(self.signature, objects), "static_names": sorted(self.static_names),
                "static_varargs": sorted(self._static_varargs),
                "cast_arguments": self.cast_arguments, "hinted": self.fsig is not None,
                "compiled": [_pickled_signature(key, c, objects) for key, c in compiled]}
        return unpickle_qjit, (dump_payload("qjit", body), tuple(objects))


def _pickled_signature(key, c: Compiled, objects: list) -> dict:
    """What a pickled QJIT carries of one compiled signature (`key`: its _cache key; None: _fixed)."""
    traced = c.traced
    closed = traced.closed_jaxpr
    n_implicit = len(closed.jaxpr.invars) - len(traced.in_paths)
    objects.append(c.static)
    return {**program_entry(closed, n_implicit, list(traced.in_paths), {"opt_level": 3, "cpu": "host"}),
            "static": len(objects) - 1, "fixed": key is None,
            "key_tree": None if key is None else encode_tree(key[1], objects),
            "key_avals": None if key is None else [encode_aval(a) for a in key[2]],
            "in_tree": encode_tree(traced.in_tree, objects), "out_tree": encode_tree(traced.out_tree, objects)}


def unpickle_qjit(payload: bytes, objects: tuple) -> QJIT:
    """A QJIT from its pickle (QJIT.__reduce__): its programs loaded from the compile cache, or
    compiled from the carried jaxprs; or, pickled by reference, the function that names."""
    body = load_payload(payload, "qjit")
    again = remembered(payload, objects)
    if again is not None:
        return again
    q = _rebuilt(body, objects)
    remember(payload, objects, q)
    return q


def _argnums_of(fn: Callable, varargs: list[int]) -> tuple[int, ...]:
    """The static_argnums of static positions inside fn's *args."""
    n = sum(p.kind in _POSITIONAL for p in inspect.signature(fn).parameters.values())
    return tuple(n + i for i in varargs)


def _rebuilt(body: dict, objects: tuple) -> QJIT:
    name = str(body.get("name"))
    try:
        reference, why_not, entries = body["reference"], str(body["why_not"]), list(body["compiled"])
        settings = {"static_argnames": tuple(str(n) for n in body["static_names"]), "abstracted_axes": objects[0],
                    "cast_arguments": bool(body["cast_arguments"])}
        varargs = [int(i) for i in body.get("static_varargs", ())]
        if entries:
            signature = decode_signature(body["signature"], objects, hints=False)
            annotated = decode_signature(body["signature"], objects, hints=True)
            decoded = [(e, objects[e["static"]], decode_tree(e["in_tree"], objects), decode_tree(e["out_tree"], objects),
                        None if e["fixed"] else (decode_tree(e["key_tree"], objects),
                                                 tuple(decode_aval(a) for a in e["key_avals"])))
                       for e in entries]
    except (KeyError, TypeError, IndexError, ValueError, AttributeError) as e:
        raise malformed(name, e) from None
    if not entries:   # by reference
        found = resolve(reference, name, why_not)
        return found if isinstance(found, QJIT) else QJIT(found, **settings, static_argnums=_argnums_of(found, varargs))
    carried = "; ".join("its type hints" if k is None else f"({', '.join(a.str_short() for a in k[1])})"
                        for *_, k in decoded)
    fn = source_reference(reference, why_not, name, signature, carried, lambda f: f.fn if isinstance(f, QJIT) else f)
    q = QJIT(fn, **settings, static_argnums=_argnums_of(fn, varargs), _ahead_of_time=False)   # its programs travelled
    q.__doc__ = body["doc"] if isinstance(body["doc"], str) else None
    q.__signature__ = fn.__signature__ = annotated   # (update_wrapper copied the plain one)
    if body["hinted"]:
        q.fsig = function_signature(fn, q.name)
    for entry, static, in_tree, out_tree, key in decoded:
        closed, _, in_paths = read_program(entry, name)
        compiled = q._compile_traced(TracedFunction(closed, in_tree, in_paths, out_tree), static)
        if key is None:
            q._fixed = compiled
        else:
            q._cache[(q._static_key(static), *key)] = compiled
    return q


def _flattening(plan: Callable[[tuple], Any], flatten: Callable[[tuple], tuple | None]) -> Callable[[tuple], Any]:
    """`plan` (a fast caller of flat arguments) for calls whose containers `flatten` takes apart."""
    def call(full: tuple) -> Any:
        flat = flatten(full)
        return MISS if flat is None else plan(flat)
    return call


def _named_path(path: str, names: list[str]) -> str:
    """'[1]['w']' (a path into the tuple of arguments) -> "params['w']"."""
    end = path.index("]")
    return names[int(path[1:end])] + path[end + 1:]


def qjit(fn: Callable | None = None, *, static_argnums: Sequence[int] = (), static_argnames: Sequence[str] = (),
         keep_intermediate: bool | str | os.PathLike = False, abstracted_axes=None, cast_arguments: bool = False):
    """Compile `fn` ahead of time. Usable as `@qjit` or `@qjit(static_argnums=..., ...)`.

    `abstracted_axes` makes sizes dynamic (one compilation for every size): `{0: "n"}` for every
    array argument, or a tuple with one dict per argument; a name used twice is one size.
    A parameter with a type hint (`x: sprue.f64[3]`) takes arrays of exactly that dtype;
    `cast_arguments=True` converts those whose dtype casts safely (f32 or i32 into f64), on each
    call. Without hints there is no conversion: another dtype is another compilation.
    `f.compile_count` counts the compilations."""
    if fn is None:   # the options are checked now, where they are written (static_argnums: at the call)
        options.str_tuple(static_argnames, "qjit", "static_argnames")
        options.check_abstracted_axes(abstracted_axes, "qjit")
        return functools.partial(qjit, static_argnums=static_argnums, static_argnames=static_argnames,
                                 keep_intermediate=keep_intermediate, abstracted_axes=abstracted_axes,
                                 cast_arguments=cast_arguments)
    return QJIT(fn, static_argnums=static_argnums, static_argnames=static_argnames,
                keep_intermediate=keep_intermediate, abstracted_axes=abstracted_axes,
                cast_arguments=cast_arguments)
