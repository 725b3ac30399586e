"""The jaxpr language: abstract values, variables, literals, equations, jaxprs, primitives, and
their printed form (JAX's text format, at the end of this module).

A primitive is one object; everything about it lives in tables keyed by it (autodidax style):
`shape_rules` (abstract evaluation), `impl_rules` (the numpy reference used eagerly), and, in
sprue.lowering, its StableHLO lowering. Later transformations add their own tables the same way.
"""
from __future__ import annotations

import enum
import functools
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueMemoryError, SprueTypeError, at
from sprue.base.source_info import user_frame_summary
from sprue.ir.shapes import Dim, format_dim  # a dim is an int or a symbolic DimExpr (sprue.ir.shapes)
from sprue.runtime.element_types import is_masked_array
from sprue.runtime.results import format_bytes, human_bytes

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
    if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
        return ShapedArray((), dtypes.python_scalar_dtype(x), weak_type=True)
    if is_masked_array(x):   # an operand or a captured constant: refused as qjit's arguments are
        raise SprueTypeError(f"a numpy masked array is not a valid operand (its mask would be dropped)"
                             f"{at(user_frame_summary())}: pass x.filled(fill_value) to replace the masked"
                             f" entries, or x.data to ignore the mask")
    if isinstance(x, (np.ndarray, np.generic)):
        return ShapedArray(np.shape(x), dtypes.canonicalize(x.dtype))
    raise SprueTypeError(f"{type(x).__name__} is not an array or a numeric scalar")


# -- arrays too large to exist -------------------------------------------------------------------
# numpy and the compiled code count bytes in int64 (sizes are `index`/i64 in MLIR): no array may
# hold more, or its size computation wraps around and a small allocation gets written past its end.
MAX_ARRAY_BYTES = 2 ** 63 - 1


@functools.lru_cache(maxsize=1)
def memory_bytes() -> int:
    """This machine's physical memory. No array may be larger: its allocation fails or, where the
    kernel overcommits memory, the process is killed once the pages are touched."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):   # no sysconf names (not POSIX): 64 TiB
        return 2 ** 46


def too_large_message(shape, dtype, nbytes: int) -> str:
    """What is wrong with an array of nbytes bytes that cannot exist (see check_fits_in_memory)."""
    shape_text = "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    what = f"an array of shape {shape_text} and dtype {name} would take {format_bytes(nbytes)}"
    if nbytes > MAX_ARRAY_BYTES:
        return f"{what}: its size overflows the 64-bit byte count of an array (at most 2**63-1 bytes)"
    return f"{what}: more than this machine's memory ({human_bytes(memory_bytes())})"


def check_fits_in_memory(aval: ShapedArray, made_by: str, where: str | None) -> None:
    """Raises SprueMemoryError when aval has a static shape whose byte count overflows int64 or
    exceeds this machine's memory (made_by names the operation, where the user's source line).
    A shape with a size known only at run time passes (that size may be 0): sprue.numpy checks
    such sizes at run time (numpy/_dims.py check_allocation), and every allocation of the
    compiled code is checked when it is made (lowering/backend.py)."""
    n = aval.dtype.itemsize
    for d in aval.shape:
        if type(d) is not int:
            return
        n *= d
    if n > MAX_ARRAY_BYTES or n > memory_bytes():
        raise SprueMemoryError(f"{too_large_message(aval.shape, aval.dtype, n)}; it is made by {made_by}"
                               f"{at(where)}. Make it smaller, or compute it in pieces (a loop over blocks).")


def check_static_type(dtype_name: str, dims: Sequence[int], where: str) -> None:
    """Raises SprueMemoryError for a type read from text (a jaxpr's `f64[...]`) whose static shape
    has a byte count that overflows int64; `where` (file:line:col) starts the message. Only the
    overflow: an argument's type describes the caller's array, and the arrays a program makes are
    checked against this machine's memory when its equations are traced (check_fits_in_memory)."""
    if any(d < 0 for d in dims):
        return   # a negative size: the reader reports it
    try:
        dtype = dtypes.from_short_name(dtype_name)
    except SprueTypeError:   # not an element type sprue knows (the reader reports it): count 1 byte
        dtype = dtype_name
    n = (dtype.itemsize if isinstance(dtype, np.dtype) else 1) * math.prod(dims)
    if n > MAX_ARRAY_BYTES:
        raise SprueMemoryError(f"{where}: the type {dtype_name}[{','.join(map(str, dims))}]:"
                               f" {too_large_message(dims, dtype, n)}")


# MLIR rounds an aligned allocation's size up to a multiple of its alignment (16 to 64 bytes in
# sprue's kernels; finalize-memref-to-llvm): a failed allocation of n bytes is for an array of
# between n - ALIGNMENT_SLACK and n bytes.
ALIGNMENT_SLACK = 4096


def allocation_sites(jaxpr: "Jaxpr", nbytes: int) -> str | None:
    """What an allocation of nbytes that failed in jaxpr's compiled code was for: the arrays (of
    static shape, made by its equations, nested jaxprs included) of that byte count, allowing for
    MLIR's rounding, and the source lines making them; None when no such array is found (a size
    known only at run time, or a temporary of the lowering). The closest size wins."""
    found: dict[int, list[tuple[ShapedArray, str | None]]] = {}

    def walk(j: "Jaxpr") -> None:
        for e in j.eqns:
            for v in e.outvars:
                a = v.aval
                if a.is_static and a.ndim:
                    n = math.prod(a.shape) * a.dtype.itemsize
                    if n <= nbytes < n + ALIGNMENT_SLACK:
                        found.setdefault(n, []).append((a, e.source_info))
            for p in e.params.values():
                for sub in (p if isinstance(p, (tuple, list)) else (p,)):
                    if isinstance(sub, ClosedJaxpr):
                        walk(sub.jaxpr)
                    elif isinstance(sub, Jaxpr):
                        walk(sub)
    walk(jaxpr)
    if not found:
        return None
    arrays = found[max(found)]
    shapes = list(dict.fromkeys(a.str_short() for a, _ in arrays))
    lines = list(dict.fromkeys(w for _, w in arrays if w))
    what = f"an array {' or '.join(shapes[:3])}" + (" made at " + "; at ".join(lines[:3]) if lines else "")
    return what + (f" (and {len(lines) - 3} more places)" if len(lines) > 3 else "")


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
        return pp_jaxpr(self.jaxpr)

    __repr__ = __str__


class Primitive:
    """A primitive operation. Its rules live in the tables below, keyed by the object."""

    def __init__(self, name: str, multiple_results: bool = False):
        self.name = name
        self.multiple_results = multiple_results

    def bind(self, *args, **params):
        return trace_hooks.bind(self, args, params)

    def __repr__(self):
        return self.name


class TraceHooks:
    """What applying a primitive means is the tracer's business (sprue.trace.tracing.bind: stage an
    equation into the innermost trace, or run the numpy reference rule eagerly); the tracer, a layer
    above this one, installs it here when it is imported, so that `p.bind(...)` works everywhere."""

    bind: Callable[[Primitive, Sequence, dict], Any]


trace_hooks = TraceHooks()


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


# == the printed form ==============================================================================
# Jaxprs print in JAX's text format:
#
#     { lambda a:f64[3]; b:f64[3] c:f64[]. let
#         d:f64[3] = mul b c
#         e:f64[3] = add d a
#       in (e,) }
#
# Names are a, b, ..., z, ba, bb, ... in order of definition, restarting in each nested jaxpr, and
# never a word the reader reserves (RESERVED_NAMES: encode_name skips them); params are sorted by
# name; literals print with their type (`2.0:f64[]`).

# Words the reader gives a meaning of their own: the jaxpr keywords, the names that read as literals
# in an atom's place, and the dropped output. sprue's printer never names a variable with one of these
# (encode_name skips them); JAX's printer does not avoid them (jax/_src/core.py, JaxprPpContext: names
# come from _encode_digits_alphabetic, skipping only shared jaxprs' names), so the 221st variable of a
# JAX jaxpr is `in` and the reader (sprue.io.jaxpr_parser) reads these as variables wherever the
# grammar allows a variable there.
KEYWORDS = frozenset({"lambda", "let", "in"})
LITERAL_NAMES = frozenset({"True", "False", "inf", "nan"})
RESERVED_NAMES = KEYWORDS | LITERAL_NAMES | {"_", "None"}


def _alphabetic(n: int) -> str:
    """The n-th name of JAX's sequence a..z, ba..zz, baa.. (jax/_src/core.py, _encode_digits_alphabetic)."""
    s = ""
    while not s or n:
        n, i = divmod(n, 26)
        s = chr(97 + i) + s
    return s


def _alphabetic_index(name: str) -> int | None:
    """The n with _alphabetic(n) == name, or None if the sequence never reaches `name`."""
    if not name or not all("a" <= c <= "z" for c in name) or (len(name) > 1 and name[0] == "a"):
        return None
    n = 0
    for c in name:
        n = n * 26 + ord(c) - 97
    return n


# The reader's own words (`in`, `let`, `lambda`, `inf`, `nan`, ...) in the order the sequence
# reaches them: a variable named `in` would end the equations when read back.
_SKIPPED = sorted(i for i in map(_alphabetic_index, RESERVED_NAMES) if i is not None)


def encode_name(n: int) -> str:
    """The n-th variable name: JAX's sequence without the names the jaxpr reader reserves."""
    for i in _SKIPPED:
        if i > n:
            break
        n += 1
    return _alphabetic(n)


class _Names:
    def __init__(self):
        self.names: dict[int, str] = {}
        self.dim_name = repr

    def __call__(self, v: Var) -> str:
        if isinstance(v, DropVar):
            return "_"
        name = self.names.get(id(v))
        if name is None:
            name = self.names[id(v)] = encode_name(len(self.names)) + v.suffix
        return name


def pp_literal(lit: Literal) -> str:  # literals are scalars: no dims to name
    return f"{format_scalar(lit.val)}:{lit.aval.str_short()}"


def format_scalar(x) -> str:
    x = np.asarray(x)[()]
    if isinstance(x, (np.bool_, bool)):
        return "True" if x else "False"
    if isinstance(x, np.floating):
        f = float(x)
        if math.isnan(f):
            return "nan"
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return repr(f) if x.dtype == np.float64 else str(x)
    if isinstance(x, np.complexfloating):   # as JAX prints them: (1+2j)
        return repr(complex(x))
    return str(int(x))


def pp_param(value, indent: int) -> str:
    if isinstance(value, (Jaxpr, ClosedJaxpr)):
        jaxpr = value.jaxpr if isinstance(value, ClosedJaxpr) else value
        return pp_jaxpr(jaxpr, indent)
    if isinstance(value, tuple):
        if value and all(isinstance(v, (Jaxpr, ClosedJaxpr)) for v in value):
            inner = ("\n" + " " * (indent + 1)).join(pp_param(v, indent + 1) for v in value)
            return f"({inner})"
        items = [pp_param(v, indent) for v in value]
        return "(" + items[0] + ",)" if len(items) == 1 else "(" + ", ".join(items) + ")"
    if isinstance(value, np.dtype):
        return value.name
    if isinstance(value, type) and issubclass(value, np.generic):
        return np.dtype(value).name
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, (np.generic, float)):
        return format_scalar(value)
    if isinstance(value, str) and (not _BARE_STRING.fullmatch(value) or value in RESERVED_NAMES):
        return repr(value)   # a message with spaces or ':' reads back only quoted (sprue.io.jaxpr_lexer)
    return str(value)


# a string param prints bare (as JAX prints `name=f`) when the reader reads it back as one name
_BARE_STRING = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def pp_eqn(eqn, names: _Names, indent: int) -> str:
    for v in eqn.outvars:
        names(v)  # an output may bind a dimension its neighbours' types mention
    lhs = " ".join(f"{names(v)}:{v.aval.str_short(names.dim_name)}" if not isinstance(v, DropVar) else "_"
                   for v in eqn.outvars)
    head = f"{lhs} = {eqn.primitive.name}" if eqn.outvars else eqn.primitive.name
    if eqn.params:
        width = indent + len(head) + 1
        parts = [f"{k}={pp_param(v, width + len(k) + 1)}" for k, v in sorted(eqn.params.items())]
        one_line = " ".join(parts)
        sep = "\n" + " " * width if ("\n" in one_line or len(one_line) > 80) else " "
        head += "[" + sep.join(parts) + "]"
    args = " ".join(pp_atom(a, names) for a in eqn.invars)
    return f"{head} {args}" if args else head


def pp_atom(a, names: _Names) -> str:
    return pp_literal(a) if isinstance(a, Literal) else names(a)


def _dim_namer(jaxpr: Jaxpr, names: _Names):
    """Dimension variables print as the names of the variables binding them in this jaxpr."""
    binders = {}
    for v in [*jaxpr.constvars, *jaxpr.invars, *(o for e in jaxpr.eqns for o in e.outvars)]:
        if v.dim is not None:
            binders.setdefault(v.dim, v)
    return lambda d: names(binders[d]) if d in binders else f"{d!r}?"


def pp_jaxpr(jaxpr: Jaxpr, indent: int = 0) -> str:
    names = _Names()
    for v in [*jaxpr.constvars, *jaxpr.invars]:
        names(v)  # binders are named in order of appearance, before any type mentions them
    dim_name = _dim_namer(jaxpr, names)
    names.dim_name = dim_name
    binders = lambda vs: " ".join(f"{names(v)}:{v.aval.str_short(dim_name)}" for v in vs)
    consts = binders(jaxpr.constvars)
    ins = binders(jaxpr.invars)
    pad = " " * indent
    lines = [f"{{ lambda {consts}; {ins}. let"]
    for eqn in jaxpr.eqns:
        lines.append(pad + "    " + pp_eqn(eqn, names, indent + 4))
    outs = ", ".join(pp_atom(a, names) for a in jaxpr.outvars)
    outs = f"({outs},)" if len(jaxpr.outvars) == 1 else f"({outs})"
    lines.append(f"{pad}  in {outs} }}")
    return "\n".join(lines)
