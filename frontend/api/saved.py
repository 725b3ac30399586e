"""Saved programs: `sprue.save(f, path)` writes a jaxpr as text, `sprue.load(path)` compiles it back
(the format: io/saved_format.py; a `.mlir` file is StableHLO, compiled by the driver's
load_stablehlo)."""
from __future__ import annotations

import os
from pathlib import Path

from sprue.api import driver
from sprue.api.call_arguments import check_argument_dtypes
from sprue.api.pickle_format import dumps as dump_payload
from sprue.api.pickle_format import loads as load_payload
from sprue.api.pickle_format import malformed, program_entry, read_program, remember, remembered
from sprue.api.qjit import QJIT
from sprue.api.row_boundary import RowBoundary
from sprue.base import dtypes
from sprue.base.errors import SprueTypeError, SprueValueError
from sprue.io.jax_exported import read_exported
from sprue.io.jaxpr_lexer import JaxprSyntaxError
from sprue.io.saved_format import PrintedBoundary, parse_saved, to_text
from sprue.ir.core import ClosedJaxpr, Jaxpr


def save(fn_or_jaxpr, path: str | os.PathLike) -> Path:
    """Write a qjit'd function's latest jaxpr (or a ClosedJaxpr) to `path`, with its constants'
    values and its dynamic-dimension signature. Returns the path."""
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


class LoadedProgram:
    """A compiled saved program: call it with the jaxpr's explicit arguments, flat and positional."""

    def __init__(self, closed: ClosedJaxpr, n_implicit: int, arg_names: list[str], path: Path,
                 keep_intermediate=False, cast_arguments=False, boundary: PrintedBoundary | None = None):
        self.path = path
        boundary = boundary or PrintedBoundary([], set(), set())
        # a JAX-printed jaxpr's constvars, whose values its text lacks: the leading arguments
        self.constvars = list(boundary.constvars)
        # its bfloat16 arguments and results (by position), passed as their bits (uint16: an ml_dtypes
        # bfloat16 array's .view(np.uint16); a result's .view(ml_dtypes.bfloat16) makes one again)
        self.bf16_arguments, self.bf16_results = set(boundary.bf16_arguments), set(boundary.bf16_results)
        self.name = path.stem
        self.jaxpr = closed
        self.arg_names = list(arg_names)
        self.n_implicit = n_implicit
        self.cast_arguments = bool(cast_arguments)
        self._avals = [v.aval for v in closed.jaxpr.invars[n_implicit:]]
        stem = "".join(c if c.isalnum() or c == "_" else "_" for c in self.name) or "program"
        out_dir = driver.out_dir_for(stem, keep_intermediate)
        self.mlir, self.library, self._function, self._implicit = driver.compile_closed_jaxpr(
            closed, n_implicit, self.arg_names, out_dir, stem, bool(keep_intermediate))
        self._rows = RowBoundary.of(closed.jaxpr, n_implicit)   # sizes named `*b`, `...x`: rows
        self.compile_count = 1

    def __call__(self, *args, **kwargs):
        """Positional arguments in the jaxpr's order (`.arg_names`; qjit orders a function's
        parameters by name), or keyword arguments by those names. Arrays must have the jaxpr's
        dtypes (no silent conversion), unless loaded with cast_arguments=True."""
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
                                 f" ({', '.join(self.arg_names)}), got {len(args)}{self._constvars_hint()}")
        leaves = list(args)
        if not self.cast_arguments:
            check_argument_dtypes(self.name, leaves, self.arg_names, self._avals,
                                  [f"declared {dtypes.short_name(a.dtype)} by the saved program" for a in self._avals],
                                  "or load with sprue.load(path, cast_arguments=True) to convert")
        if self._rows is not None:
            leaves, rows = self._rows.collapse(leaves, self.arg_names, self.name)
        sizes = [driver.size_of(d, leaves, self.arg_names, self.name) for d in self._implicit]
        outs = self._function(*sizes, *leaves)
        if self._rows is not None:
            outs = self._rows.restore(list(outs), rows)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _constvars_hint(self) -> str:
        if not self.constvars:
            return ""
        k = len(self.constvars)
        return (f"; the first {k} ({', '.join(self.constvars)}) are the jaxpr's constvars, whose values JAX's"
                " printer drops: pass the ClosedJaxpr's consts first (closed.consts, in order; then those of"
                " the jaxprs it calls, which the text declares after, in its order), then the function's"
                " arguments, as jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *args) takes them")

    def __repr__(self):
        return f"<sprue.load {self.path}>"

    def __reduce__(self):
        """Pickled by program (api/pickle_format.py): the jaxpr travels, not the file's path; the
        receiver loads it from its compile cache or compiles it."""
        body = {"name": self.name, "path": str(self.path), "cast_arguments": self.cast_arguments,
                "constvars": self.constvars, "bf16": [sorted(self.bf16_arguments), sorted(self.bf16_results)],
                **program_entry(self.jaxpr, self.n_implicit, self.arg_names, {"opt_level": 3, "cpu": "host"})}
        return unpickle_program, (dump_payload("program", body),)


def unpickle_program(payload: bytes) -> LoadedProgram:
    """A LoadedProgram from its pickle (LoadedProgram.__reduce__)."""
    body = load_payload(payload, "program")
    again = remembered(payload, ())
    if again is not None:
        return again
    name = str(body.get("name"))
    try:
        path, cast = Path(str(body["path"])), bool(body["cast_arguments"])
        constvars = [str(c) for c in body.get("constvars", [])]
        bf16_args, bf16_results = ({int(k) for k in ks} for ks in body.get("bf16", [[], []]))
        closed, n_implicit, names = read_program(body, name)
    except (KeyError, TypeError, IndexError, AttributeError) as e:
        raise malformed(name, e) from None
    program = LoadedProgram(closed, n_implicit, names, path, cast_arguments=cast,
                            boundary=PrintedBoundary(constvars, bf16_args, bf16_results))
    remember(payload, (), program)
    return program


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise SprueValueError(f"sprue.load: cannot read {str(path)!r}: {e.strerror or e}") from None


def _is_mlir(path: Path, text: str) -> bool:
    if path.suffix in (".mlir", ".mlirbc"):
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
    like a qjit'd function: positional arguments are the jaxpr's explicit invars, led by its
    constvars when JAX printed it (its printer drops their values: pass `closed_jaxpr.consts` first,
    as jax.core.eval_jaxpr takes them; `.constvars` names them); `.jaxpr`,
    `.mlir` and `compile_count` as on qjit. Arrays must have the jaxpr's dtypes, as for a hinted
    qjit function; `cast_arguments=True` converts those that cast safely. A `.mlir` file (StableHLO) goes to
    the compile driver's load_stablehlo."""
    if not isinstance(path, (str, os.PathLike)):
        raise SprueTypeError(f"sprue.load expects the path of a saved program (a str or a pathlib.Path), got"
                             f" {type(path).__name__}")
    path = Path(path)
    if path.suffix == ".jax_exported":   # jax.export's serialized artifact: its StableHLO module
        return driver.load_stablehlo(read_exported(_read_bytes(path), str(path)).mlir_module)
    if path.suffix in (".mlir", ".mlirbc"):
        text = ""   # load_stablehlo reads (and checks) the file itself (text or bytecode)
    else:
        text = read_program_text(path)
    if _is_mlir(path, text):
        return driver.load_stablehlo(path)
    closed, n_implicit, names, boundary = parse_saved(text, str(path), with_boundary=True)
    return LoadedProgram(closed, n_implicit, names, path, keep_intermediate, cast_arguments, boundary)


__all__ = ["save", "load", "read_program_text", "LoadedProgram", "unpickle_program"]
