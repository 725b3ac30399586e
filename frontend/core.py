"""The jaxpr language: abstract values, variables, literals, equations, jaxprs, primitives.

A primitive is one object; everything about it lives in tables keyed by it (autodidax style):
`shape_rules` (abstract evaluation), `impl_rules` (the numpy reference used eagerly), and, in
sprue.lowering, its StableHLO lowering. Later transformations add their own tables the same way.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from . import dtypes
from .errors import SprueTypeError, at

from .shapes import Dim, DimExpr, format_dim  # a dim is an int or a symbolic DimExpr (shapes.py)
from .source_info import user_frame_summary

Shape = tuple


class ShapedArray:
    """The abstract value of an array: its shape and dtype. `weak_type` marks Python scalars."""

    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape: Sequence[Dim], dtype, weak_type: bool = False):
        # numpy integers (sizes computed with numpy) are plain ints in types
        self.shape = tuple(int(d) if isinstance(d, np.integer) else d for d in shape)
        self.dtype = np.dtype(dtype)
        self.weak_type = bool(weak_type)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def update(self, shape=None, dtype=None, weak_type=None) -> "ShapedArray":
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type)

    def strip_weak_type(self) -> "ShapedArray":
        return self.update(weak_type=False) if self.weak_type else self

    def str_short(self, name_of=repr) -> str:
        """`f64[3,n]`; name_of names dimension variables (the printer passes binder names)."""
        return f"{dtypes.short_name(self.dtype)}[{','.join(format_dim(d, name_of) for d in self.shape)}]"

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    def __eq__(self, other):
        return (isinstance(other, ShapedArray) and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))

    def __repr__(self):
        return f"ShapedArray({self.str_short()}{', weak' if self.weak_type else ''})"


class SizeAval(ShapedArray):
    """The abstract value a shape rule gives an output that is a new size (the final length of an
    array a loop resized): an i64 scalar whose variable binds the fresh dimension variable `binds`,
    which the rule's other outputs may mention (`f64[binds]`). The tracer turns it into a plain
    i64[] Var with `dim` set; in eager mode it is just i64[]."""

    __slots__ = ("binds",)

    def __init__(self, binds):
        super().__init__((), np.int64)
        self.binds = binds


def aval_of_value(x) -> ShapedArray:
    """The abstract value of a concrete Python/numpy value."""
    if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
        return ShapedArray((), dtypes.python_scalar_dtype(x), weak_type=True)
    if isinstance(x, np.ma.MaskedArray):   # an operand or a captured constant: refused as qjit's arguments are
        raise SprueTypeError(f"a numpy masked array is not a valid operand (its mask would be dropped)"
                             f"{at(user_frame_summary())}: pass x.filled(fill_value) to replace the masked"
                             f" entries, or x.data to ignore the mask")
    if isinstance(x, (np.ndarray, np.generic)):
        return ShapedArray(np.shape(x), dtypes.canonicalize(x.dtype))
    raise SprueTypeError(f"{type(x).__name__} is not an array or a numeric scalar")


class Var:
    """A jaxpr variable. Its printed name is given by the printer, not stored. `dim` is set when
    the variable binds a dimension variable (it holds that size at run time, an i64 scalar)."""

    __slots__ = ("aval", "suffix", "dim")

    def __init__(self, aval: ShapedArray, suffix: str = "", dim=None):
        self.aval = aval
        self.suffix = suffix
        self.dim = dim

    def __repr__(self):
        return f"Var(id={id(self) & 0xffff:x}):{self.aval.str_short()}"


class DropVar(Var):
    """An equation output nobody uses, printed `_`."""

    __slots__ = ()


class Literal:
    """A scalar constant kept inline in an equation (printed `2.0:f64[]`)."""

    __slots__ = ("val", "aval")

    def __init__(self, val, aval: ShapedArray):
        self.val = val
        self.aval = aval

    def __repr__(self):
        return f"Literal({self.val!r})"


Atom = Var | Literal


@dataclass
class Eqn:
    primitive: "Primitive"
    invars: list[Atom]
    outvars: list[Var]
    params: dict[str, Any]
    source_info: str | None = None  # "file.py:12 (fn)": where the user's code made this equation


@dataclass
class Jaxpr:
    constvars: list[Var]
    invars: list[Var]
    outvars: list[Atom]
    eqns: list[Eqn]

    @property
    def in_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.invars]

    @property
    def out_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.outvars]

    def __str__(self):
        from .pretty import pp_jaxpr
        return pp_jaxpr(self)

    __repr__ = __str__


@dataclass
class ClosedJaxpr:
    """A jaxpr with values for its constvars: numpy arrays (or, transiently during tracing of a
    nested function, tracers of an enclosing trace — the closure-converted captures)."""

    jaxpr: Jaxpr
    consts: list = field(default_factory=list)

    @property
    def in_avals(self):
        return self.jaxpr.in_avals

    @property
    def out_avals(self):
        return self.jaxpr.out_avals

    @property
    def eqns(self):
        return self.jaxpr.eqns

    def __str__(self):
        from .pretty import pp_jaxpr
        return pp_jaxpr(self.jaxpr)

    __repr__ = __str__


class Primitive:
    """A primitive operation. Its rules live in the tables below, keyed by the object."""

    def __init__(self, name: str, multiple_results: bool = False):
        self.name = name
        self.multiple_results = multiple_results

    def bind(self, *args, **params):
        from .tracing import bind
        return bind(self, args, params)

    def __repr__(self):
        return self.name


# Rule tables keyed by Primitive.
# shape_rules[p](*avals, **params) -> ShapedArray (or a list when p.multiple_results)
shape_rules: dict[Primitive, Callable[..., Any]] = {}
# impl_rules[p](*numpy_values, **params) -> numpy value(s): the eager reference semantics
impl_rules: dict[Primitive, Callable[..., Any]] = {}

# dynamic_dim_params[p] = "shape": the param of p that may hold None entries, one per dimension
# known only at run time, whose sizes are p's trailing i64 operands (JAX's dynamic-shape convention:
# `broadcast_in_dim[broadcast_dimensions=() shape=(None,)] 1.0 a`). Rules see the param resolved.
dynamic_dim_params: dict[Primitive, str] = {}

primitives: dict[str, Primitive] = {}


def primitive(name: str, *, multiple_results: bool = False) -> Primitive:
    """Create and register a primitive by its JAX name."""
    p = Primitive(name, multiple_results)
    primitives[name] = p
    return p
