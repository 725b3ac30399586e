"""The saved-program format: a jaxpr as text with what it needs to be compiled again (api/saved.py:
`sprue.save(f, path)` writes it, `sprue.load(path)` compiles it back).

The file is a jaxpr in JAX's text format (sprue's jaxpr printer) preceded by a header of `#`
comments that carries what JAX's printer leaves out. Any JAX jaxpr reader that skips `#` lines sees a jaxpr:

    # sprue saved program 1
    # args ["x", "y"]
    # implicit a=n
    # const b:f64[3] = 000000000000f03f0000000000000080000000000000f87f
    { lambda b:f64[3]; a:i64[] c:f64[a] d:f64[3]. let
        ...
      in (e,) }

    args      JSON list of the explicit arguments' names (used in error messages)
    implicit  a leading invar that is an implicit size argument, and the dimension's name: at call
              time its value is read from the shapes of the array arguments (as qjit does)
    const     the value of each constvar, in the order of the constvars: its type, then its raw bytes
              (little-endian, C order) in hex, so every bit survives (NaN payloads, -0.0)

String params (a run-time check's message) are written quoted ('...'). The program itself follows
the jaxpr language exactly; dimensions known only at run time print as the variables that hold
them (`c:f64[a]`). Scalar literals print as JAX does (`2.0:f64[]`); a NaN literal loses its payload;
a complex literal is written as `complex` of its two real parts (`c:c128[] = complex 1.0:f64[] 2.0:f64[]`).
"""
from __future__ import annotations

import json
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueTypeError, SprueValueError
from sprue.io.jaxpr_lexer import JaxprError, JaxprSyntaxError
from sprue.ir.core import ClosedJaxpr, Eqn, Jaxpr, Literal, ShapedArray, Var, encode_name, pp_jaxpr
from sprue.ir.shapes import dim_vars_of
from sprue.lax.complex_numbers import complex_p

__all__ = ["MAGIC", "parse_saved", "read_header", "to_text"]

MAGIC = "# sprue saved program 1"


class _Quoted(str):
    """A string param printed quoted, so that the text reads back."""

    def __str__(self):
        return repr(str.__str__(self))


def _quote_strings(jaxpr: Jaxpr) -> Jaxpr:
    def param(v):
        if isinstance(v, str) and not isinstance(v, _Quoted):
            return _Quoted(v)
        if isinstance(v, ClosedJaxpr):
            return ClosedJaxpr(_quote_strings(v.jaxpr), v.consts)
        if isinstance(v, Jaxpr):
            return _quote_strings(v)
        if isinstance(v, tuple):
            return tuple(param(x) for x in v)
        return v
    eqns = []
    for e in jaxpr.eqns:
        invars = [_complex_literal(a, eqns, e.source_info) for a in e.invars]
        eqns.append(Eqn(e.primitive, invars, e.outvars, {k: param(v) for k, v in e.params.items()}, e.source_info))
    outvars = [_complex_literal(a, eqns, None) for a in jaxpr.outvars]
    return Jaxpr(jaxpr.constvars, jaxpr.invars, outvars, eqns)


def _complex_literal(atom, eqns: list, source_info):
    """A complex literal (JAX prints `(1+2j):c128[]`, which the jaxpr reader does not read yet) as
    the result of an equation `complex re im` of its real literals, appended to eqns; others as they are."""
    if not isinstance(atom, Literal) or not dtypes.is_complex(atom.aval.dtype):
        return atom
    part = dtypes.real_dtype(atom.aval.dtype)
    value = complex(atom.val)
    out = Var(atom.aval)
    eqns.append(Eqn(complex_p, [Literal(np.array(value.real, part)[()], ShapedArray((), part)),
                                Literal(np.array(value.imag, part)[()], ShapedArray((), part))], [out], {}, source_info))
    return out


def _implicit_count(jaxpr: Jaxpr) -> int:
    """Leading i64[] invars whose dimension variable sizes a later invar."""
    later = set()
    for v in jaxpr.invars:
        for d in v.aval.shape:
            later |= dim_vars_of(d)
    n = 0
    for v in jaxpr.invars:
        if v.dim is not None and v.dim in later and v.aval.shape == () and v.aval.dtype == dtypes.int64:
            n += 1
        else:
            break
    return n


def to_text(closed: ClosedJaxpr, n_implicit: int | None = None, arg_names=None) -> str:
    """The saved-program text of a closed jaxpr (see the module docstring)."""
    jaxpr = closed.jaxpr
    if n_implicit is None:
        n_implicit = _implicit_count(jaxpr)
    lines = [MAGIC]
    explicit = len(jaxpr.invars) - n_implicit
    names = list(arg_names) if arg_names is not None else [f"arg{i}" for i in range(explicit)]
    lines.append(f"# args {json.dumps(names)}")
    nconst = len(jaxpr.constvars)
    for i, v in enumerate(jaxpr.invars[:n_implicit]):
        lines.append(f"# implicit {encode_name(nconst + i)}{v.suffix}={v.dim.name or encode_name(nconst + i)}")
    for i, (v, c) in enumerate(zip(jaxpr.constvars, closed.consts)):
        if not isinstance(c, (np.ndarray, np.generic)):
            raise SprueTypeError(f"sprue.save: constant {i} is a {type(c).__name__}, not an array (a jaxpr still"
                                 f" being traced cannot be saved)")
        arr = np.ascontiguousarray(c, dtype=v.aval.dtype)
        data = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        lines.append(f"# const {encode_name(i)}{v.suffix}:{v.aval.str_short()} = {data.hex()}")
    lines.append(pp_jaxpr(_quote_strings(jaxpr)))
    return "\n".join(lines) + "\n"


def _reader() -> SimpleNamespace:
    """The jaxpr reader (parser and evaluator), imported at the first read."""
    # deferred: the reader would add ~20 ms (3%) to `import sprue` and `sprue --help`; only a read needs it
    from sprue.io import jaxpr_eval, jaxpr_parser
    return SimpleNamespace(Parser=jaxpr_parser.Parser, parse_program=jaxpr_parser.parse_program,
                           build=jaxpr_eval.build, bf16_arguments=jaxpr_eval.bf16_arguments,
                           bf16_results=jaxpr_eval.bf16_results, leading_constvars=jaxpr_eval.leading_constvars)


# -- reading ------------------------------------------------------------------------------------
def read_header(text: str, filename: str) -> dict:
    """{'args': [...] or None, 'implicit': {name: dim} or None, 'consts': [(name, type, hex, line)] or None}."""
    args, implicit, consts, saved = None, None, None, False
    for lineno, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        if not s.startswith("#"):
            break
        body = s[1:].strip()
        if s == MAGIC:
            saved, implicit, consts = True, {}, []
        elif not saved:
            continue
        elif body.startswith("args "):
            try:
                args = json.loads(body[5:])
            except (ValueError, RecursionError):
                args = None
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise JaxprSyntaxError("bad '# args' header line: expected a JSON list of strings", filename,
                                       lineno, 1) from None
        elif body.startswith("implicit "):
            name, _, dim = body[9:].strip().partition("=")
            implicit[name.strip()] = dim.strip() or name.strip()
        elif body.startswith("const "):
            decl, eq, hexdata = body[6:].partition("=")
            name, colon, typ = decl.strip().partition(":")
            if not eq or not colon:
                raise JaxprSyntaxError("bad '# const' header line: expected '# const name:type = hex'", filename,
                                       lineno, 1)
            consts.append((name, typ.strip(), hexdata.strip(), lineno))
    return {"args": args, "implicit": implicit, "consts": consts}


def _const_value(name: str, typ: str, hexdata: str, filename: str, lineno: int) -> np.ndarray:
    try:
        p = _reader().Parser(typ, filename)
        t = p.type_()
        if p.tok.kind != "EOF":
            raise p.error(f"unexpected {p.tok.text!r} after the type")
    except JaxprSyntaxError as e:
        raise JaxprSyntaxError(f"constant '{name}': bad type {typ!r}: {e.detail}", filename, lineno, 1) from None
    try:
        dt = dtypes.from_short_name(t.dtype)
        shape = tuple(d[1] for d in t.dims if d[0] == "int")
        if len(shape) != len(t.dims):
            raise SprueValueError("a constant's shape must be static")
        data = bytes.fromhex(hexdata)
        return np.frombuffer(data, dt.newbyteorder("<")).reshape(shape).astype(dt)
    except (ValueError, SprueValueError) as e:
        raise JaxprSyntaxError(f"constant '{name}': {e}", filename, lineno, 1) from None
    except Exception as e:
        raise JaxprSyntaxError(f"constant '{name}': {e}", filename, lineno, 1) from None


class PrintedBoundary(NamedTuple):
    """What a JAX-printed jaxpr's arguments and results are beyond their types: the constvars that
    lead the arguments (their values not printed), and the arguments and results (by position among
    the explicit ones) that are bfloat16 passed as their bits."""
    constvars: list[str]
    bf16_arguments: set[int]
    bf16_results: set[int]


def parse_saved(text: str, filename: str = "<jaxpr>", *, with_boundary: bool = False):
    """(closed_jaxpr, n_implicit, arg_names) of a saved program's text, or of a jaxpr as JAX prints it;
    with_boundary: and its PrintedBoundary."""
    header = read_header(text, filename)
    prog = _reader().parse_program(text, filename)
    consts = None
    if header["consts"] is not None:
        declared = [b.name for b in prog.main.constvars]
        names = [c[0] for c in header["consts"]]
        if names != declared:
            raise JaxprError(f"the header's constants {names} do not match the jaxpr's constvars {declared}",
                             filename)
        consts = [_const_value(*c[:3], filename, c[3]) for c in header["consts"]]
    closed, n_implicit = _reader().build(prog, consts=consts, implicit=header["implicit"])
    explicit = len(closed.jaxpr.invars) - n_implicit
    names = header["args"]
    reader = _reader()
    leading = reader.leading_constvars(prog, consts is not None)
    if names is None or len(names) != explicit:
        # a JAX-printed jaxpr's constvars (their values not printed) are its leading parameters
        names = [b.name for b in [*leading, *prog.main.invars[n_implicit:]]]
    if with_boundary:
        return closed, n_implicit, names, PrintedBoundary([b.name for b in leading],
                                                          reader.bf16_arguments(prog, n_implicit, consts is not None),
                                                          reader.bf16_results(prog.main))
    return closed, n_implicit, names
