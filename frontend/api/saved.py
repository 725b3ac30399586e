"""Saved programs: `sprue.save(f, path)` writes a jaxpr as text, `sprue.load(path)` compiles it back.

The file is a jaxpr in JAX's text format (sprue.pretty) preceded by a header of `#` comments that
carries what JAX's printer leaves out. Any JAX jaxpr reader that skips `#` lines sees a jaxpr:

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
them (`c:f64[a]`). Scalar literals print as JAX does (`2.0:f64[]`); a NaN literal loses its payload.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from sprue.base import dtypes
from sprue.ir.core import ClosedJaxpr, Eqn, Jaxpr
from sprue.base.errors import SprueTypeError, SprueValueError
from sprue.io.jaxpr_lexer import JaxprError, JaxprSyntaxError
from sprue.ir.shapes import dim_vars_of

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
    eqns = [Eqn(e.primitive, e.invars, e.outvars, {k: param(v) for k, v in e.params.items()}, e.source_info)
            for e in jaxpr.eqns]
    return Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.outvars, eqns)


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
    from sprue.ir.core import encode_name, pp_jaxpr
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


def save(fn_or_jaxpr, path: str | os.PathLike) -> Path:
    """Write a qjit'd function's latest jaxpr (or a ClosedJaxpr) to `path`, with its constants'
    values and its dynamic-dimension signature. Returns the path."""
    from sprue.api.qjit import QJIT
    if isinstance(fn_or_jaxpr, QJIT):
        closed = fn_or_jaxpr.jaxpr   # raises a clear error before the first call
        traced = fn_or_jaxpr._latest("jaxpr").traced
        n_implicit = len(closed.jaxpr.invars) - len(traced.in_paths)
        text = to_text(closed, n_implicit, list(traced.in_paths))
    elif isinstance(fn_or_jaxpr, ClosedJaxpr):
        text = to_text(fn_or_jaxpr)
    elif isinstance(fn_or_jaxpr, Jaxpr):
        if fn_or_jaxpr.constvars:
            raise SprueTypeError("sprue.save: a Jaxpr with constvars needs their values: pass the ClosedJaxpr")
        text = to_text(ClosedJaxpr(fn_or_jaxpr, []))
    else:
        raise SprueTypeError(f"sprue.save expects a qjit'd function (sprue.qjit, called once or with type hints)"
                             f" or a ClosedJaxpr (sprue.make_jaxpr), got {type(fn_or_jaxpr).__name__}")
    path = Path(path)
    path.write_text(text)
    return path


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
    from sprue.io.jaxpr_parser import Parser
    try:
        p = Parser(typ, filename)
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


def parse_saved(text: str, filename: str = "<jaxpr>"):
    """(closed_jaxpr, n_implicit, arg_names) of a saved program's text, or of a jaxpr as JAX prints it."""
    from sprue.io.jaxpr_parser import parse_program
    from sprue.io.jaxpr_eval import build
    header = read_header(text, filename)
    prog = parse_program(text, filename)
    consts = None
    if header["consts"] is not None:
        declared = [b.name for b in prog.main.constvars]
        names = [c[0] for c in header["consts"]]
        if names != declared:
            raise JaxprError(f"the header's constants {names} do not match the jaxpr's constvars {declared}",
                             filename)
        consts = [_const_value(*c[:3], filename, c[3]) for c in header["consts"]]
    closed, n_implicit = build(prog, consts=consts, implicit=header["implicit"])
    explicit = len(closed.jaxpr.invars) - n_implicit
    names = header["args"]
    if names is None or len(names) != explicit:
        names = [b.name for b in prog.main.invars[n_implicit:]]
    return closed, n_implicit, names


class LoadedProgram:
    """A compiled saved program: call it with the jaxpr's explicit arguments, flat and positional."""

    def __init__(self, closed: ClosedJaxpr, n_implicit: int, arg_names: list[str], path: Path,
                 keep_intermediate=False, cast_arguments=False):
        from sprue.api.qjit import compile_closed_jaxpr, out_dir_for
        self.path = path
        self.name = path.stem
        self.jaxpr = closed
        self.arg_names = list(arg_names)
        self.n_implicit = n_implicit
        self.cast_arguments = bool(cast_arguments)
        self._avals = [v.aval for v in closed.jaxpr.invars[n_implicit:]]
        stem = "".join(c if c.isalnum() or c == "_" else "_" for c in self.name) or "program"
        out_dir = out_dir_for(stem, keep_intermediate)
        self.mlir, self.library, self._function, self._implicit = compile_closed_jaxpr(
            closed, n_implicit, self.arg_names, out_dir, stem, bool(keep_intermediate))
        self.compile_count = 1

    def __call__(self, *args, **kwargs):
        """Positional arguments in the jaxpr's order (`.arg_names`; qjit orders a function's
        parameters by name), or keyword arguments by those names. Arrays must have the jaxpr's
        dtypes (no silent conversion), unless loaded with cast_arguments=True."""
        from sprue.api.qjit import _size_of, check_argument_dtypes
        if kwargs:
            unknown = [k for k in kwargs if k not in self.arg_names[len(args):]]
            if unknown:
                raise SprueTypeError(f"{self.name}(): unexpected keyword arguments {unknown}; the arguments are"
                                     f" {', '.join(self.arg_names)}")
            missing = [k for k in self.arg_names[len(args):] if k not in kwargs]
            if missing:
                raise SprueTypeError(f"{self.name}(): missing arguments {missing}")
            args = (*args, *(kwargs[k] for k in self.arg_names[len(args):]))
        if len(args) != len(self.arg_names):
            raise SprueTypeError(f"{self.name}(): takes {len(self.arg_names)} arguments"
                                 f" ({', '.join(self.arg_names)}), got {len(args)}")
        leaves = list(args)
        if not self.cast_arguments:
            check_argument_dtypes(self.name, leaves, self.arg_names, self._avals,
                                  [f"declared {dtypes.short_name(a.dtype)} by the saved program" for a in self._avals],
                                  "or load with sprue.load(path, cast_arguments=True) to convert")
        sizes = [_size_of(d, leaves, self.arg_names, self.name) for d in self._implicit]
        outs = self._function(*sizes, *leaves)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __repr__(self):
        return f"<sprue.load {self.path}>"


def _is_mlir(path: Path, text: str) -> bool:
    if path.suffix == ".mlir":
        return True
    head = "\n".join(l for l in text.splitlines() if not l.strip().startswith(("#", "//")))[:2000].lstrip()
    return head.startswith(("module", "func.func", '"builtin.module"'))


def read_program_text(path: str | os.PathLike) -> str:
    """A saved program's text. Not UTF-8 (or holding a NUL) is a JaxprSyntaxError naming the
    line and column of the first bad byte; a file that cannot be read is a SprueValueError."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SprueValueError(f"sprue.load: cannot read {str(path)!r}: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise JaxprSyntaxError(f"the file is not UTF-8 text (byte 0x{data[e.start]:02x}: {e.reason})",
                               str(path), line, col) from None
    nul = text.find("\0")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise JaxprSyntaxError("the file holds a NUL character (not a text file?)", str(path), line,
                               nul - (text.rfind("\n", 0, nul) + 1) + 1)
    return text


def load(path: str | os.PathLike, *, keep_intermediate=False, cast_arguments=False):
    """Compile a saved program (sprue.save, or a jaxpr as JAX prints it) and return a callable
    like a qjit'd function: positional arguments are the jaxpr's explicit invars; `.jaxpr`,
    `.mlir` and `compile_count` as on qjit. Arrays must have the jaxpr's dtypes, as for a hinted
    qjit function; `cast_arguments=True` converts those that cast safely. A `.mlir` file (StableHLO) goes to
    sprue.lowering.stablehlo_input.load_stablehlo."""
    path = Path(path)
    if path.suffix == ".mlir":
        text = ""   # load_stablehlo reads (and checks) the file itself
    else:
        text = read_program_text(path)
    if _is_mlir(path, text):
        try:
            from sprue.lowering.stablehlo_input import load_stablehlo
        except ImportError as e:
            from sprue.base.errors import UnsupportedError
            raise UnsupportedError(f"sprue.load({str(path)!r}): loading StableHLO (.mlir) needs"
                                   f" sprue.lowering.stablehlo_input, which is not available: {e}") from None
        return load_stablehlo(path)
    closed, n_implicit, names = parse_saved(text, str(path))
    return LoadedProgram(closed, n_implicit, names, path, keep_intermediate, cast_arguments)


__all__ = ["save", "load", "read_program_text", "to_text", "parse_saved", "LoadedProgram", "MAGIC"]
