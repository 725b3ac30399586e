"""Printing jaxprs in JAX's text format:

    { lambda a:f64[3]; b:f64[3] c:f64[]. let
        d:f64[3] = mul b c
        e:f64[3] = add d a
      in (e,) }

Names are a, b, ..., z, ba, bb, ... in order of definition, restarting in each nested jaxpr, and
never a word the reader reserves (`in`, `let`, `lambda`, `inf`, `nan`: encode_name skips them);
params are sorted by name; literals print with their type (`2.0:f64[]`).
"""
from __future__ import annotations

import enum
import math

import numpy as np

from sprue.ir.core import ClosedJaxpr, DropVar, Jaxpr, Literal, Var
from sprue.io.jaxpr_lexer import RESERVED_NAMES


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
    return str(value)


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
