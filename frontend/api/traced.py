"""Tracing a Python function with pytree arguments: make_jaxpr, and the flattening shared with qjit."""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from sprue.api import options
from sprue.base import dtypes
from sprue.base.errors import SprueTypeError
from sprue.base.pytree import TreeDef, tree_flatten, tree_flatten_with_path, tree_unflatten
from sprue.base.tracebacks import api_boundary
from sprue.ir.core import ClosedJaxpr, ShapedArray
from sprue.ir.shapes import DimExpr
from sprue.trace.tracing import Tracer, dim_value, trace_flat


def abstractify(x, path: str = "?") -> ShapedArray:
    """The abstract value a qjit argument is traced with (Python scalars are weakly typed)."""
    if isinstance(x, Tracer):
        return x.aval
    if isinstance(x, ShapedArray):
        return x
    if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
        return ShapedArray((), dtypes.python_scalar_dtype(x), weak_type=True)
    if isinstance(x, (np.ndarray, np.generic)):
        try:
            return ShapedArray(np.shape(x), dtypes.canonicalize(x.dtype))
        except SprueTypeError as e:
            raise SprueTypeError(f"argument '{path}': {e}") from None
    if hasattr(x, "__array__") and hasattr(x, "dtype") and hasattr(x, "shape"):
        return abstractify(np.asarray(x), path)
    raise SprueTypeError(f"argument '{path}': {type(x).__name__} is not a valid argument; expected an array (numpy's,"
                         f" or any object with __dlpack__, __array__, __array_interface__ or the buffer protocol),"
                         f" a Python or numpy scalar, or a tuple/list/dict of them ({type(x)} is not a valid JAX type)")


# Arguments numpy takes without a conversion of ours; anything else that holds an array is read
# through one of Python's array protocols, zero-copy where its layout allows.
_NATIVE = (np.ndarray, np.generic, bool, int, float, Tracer, ShapedArray)


def as_array_argument(x, path: str = "?"):
    """A qjit argument leaf as numpy sees it: arrays of other libraries through DLPack
    (`__dlpack__`: JAX, torch, CuPy on the CPU; zero-copy), numpy's array interface or `__array__`,
    and buffers (`memoryview`, `array.array`); anything else as it is (abstractify refuses it)."""
    if isinstance(x, _NATIVE) or isinstance(x, (str, bytes, bytearray)):
        return x
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        try:
            return np.from_dlpack(x)
        except (BufferError, TypeError, RuntimeError, ValueError) as e:
            raise SprueTypeError(f"argument '{path}': a {type(x).__name__} could not be read through DLPack ({e});"
                                 f" pass an array in the CPU's memory (e.g. np.asarray of it)") from None
    if hasattr(x, "__array_interface__") or hasattr(x, "__array_struct__") or hasattr(x, "__array__"):
        return np.asarray(x)
    try:
        view = memoryview(x)
    except TypeError:
        return x
    return np.asarray(view)


@dataclass
class TracedFunction:
    """A function traced for one signature: its closed jaxpr and the pytree structures around it."""
    closed_jaxpr: ClosedJaxpr
    in_tree: TreeDef
    in_paths: list[str]
    out_tree: TreeDef


def trace_function(fn: Callable, args: Sequence, kwargs: dict, arg_names: Sequence[str] | None = None
                   ) -> TracedFunction:
    """Trace fn(*args, **kwargs) with every leaf abstracted; non-array leaves raise."""
    leaves, paths, in_tree = tree_flatten_with_path((tuple(args), dict(kwargs)))
    paths = [pretty_path(p, arg_names) for p in paths]
    in_avals = [abstractify(x, p) for x, p in zip(leaves, paths)]
    out_tree_box = []

    def flat_fn(*flat):
        a, kw = tree_unflatten(in_tree, flat)
        out = fn(*a, **kw)
        out_leaves, out_tree = tree_flatten(out)
        out_tree_box.append(out_tree)
        # a size known only at run time (`x.shape[0]`) is returned as its i64 value
        out_leaves = [dim_value(o) if isinstance(o, DimExpr) else o for o in out_leaves]
        for i, o in enumerate(out_leaves):
            if not isinstance(o, (Tracer, np.ndarray, np.generic, bool, int, float, complex)):
                raise SprueTypeError(f"{getattr(fn, '__name__', 'function')} returned a {type(o).__name__} at"
                                     f" output {i}; traced functions return arrays, scalars, or"
                                     f" tuples/lists/dicts of them")
        return out_leaves

    closed = trace_flat(flat_fn, in_avals)
    return TracedFunction(closed, in_tree, paths, out_tree_box[0])


def pretty_path(path: str, names: Sequence[str] | None) -> str:
    """'[0][1]['w']' (args tuple, then kwargs dict) -> "y['w']" using the parameter names."""
    if path.startswith("[0]["):
        i_end = path.index("]", 4)
        i = int(path[4:i_end])
        rest = path[i_end + 1:]
        name = names[i] if names and i < len(names) else f"args[{i}]"
        return name + rest
    if path.startswith("[1]["):
        return param_path(path[3:])
    return path


def param_path(path: str) -> str:
    """"['x'][0]" (a path into a dict of arguments by parameter name) -> "x[0]"."""
    if path.startswith("['"):
        end = path.index("']")
        return path[2:end] + path[end + 2:]
    return path


def parameter_names(fn: Callable) -> list[str]:
    try:
        return [p.name for p in inspect.signature(fn).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def make_jaxpr(fn: Callable, static_argnums: Sequence[int] = ()):
    """`make_jaxpr(f)(*args)` is the closed jaxpr of f traced at args' shapes and dtypes."""
    options.check_function(fn, "make_jaxpr")
    static = options.int_tuple(static_argnums, "make_jaxpr", "static_argnums")

    @api_boundary
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        static_vals = {i % len(args): args[i] for i in static if -len(args) <= i < len(args)}
        dyn = [a for i, a in enumerate(args) if i not in static_vals]

        def call(*dyn_args, **kw):
            it = iter(dyn_args)
            full = [static_vals[i] if i in static_vals else next(it) for i in range(len(args))]
            return fn(*full, **kw)
        names = [n for i, n in enumerate(parameter_names(fn)) if i not in static_vals]
        return trace_function(call, dyn, kwargs, names).closed_jaxpr
    return wrapped
