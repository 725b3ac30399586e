"""StableHLO written elsewhere (JAX's `jax.jit(f).lower(*args).as_text()`, sprue's own `.mlir`
stage, StableHLO's test files) -> a module sprue's pipeline compiles, and its runtime Signature.

    prepared = prepare("f.mlir")          # or the module's text
    # frontend/api/driver.py load_stablehlo compiles and loads it: f = sprue.load("f.mlir"); y = f(x)

Steps: read the text (MLIR bytecode is printed as text by a child process); take the blobs of
`dense_resource` constants out of the text; rewrite what this torch-mlir build cannot parse
(pretty-printed `chlo` ops, `sdy.mesh`); parse with unregistered dialects allowed (JAX's
`#sdy.sharding<...>` attributes); check every op, attribute and type against what a StableHLO
program may contain (stablehlo_validate.py: nothing else reaches MLIR's passes) and turn the
resource constants into dense ones; pick the entry function (@main, or the only public one); drop
the attributes JAX adds (layout modes, shardings, result info) and identity custom calls
(@Sharding); lower JAX's run-time windows (stablehlo_windows.py) and the chlo ops we know; inline private functions; read the runtime Signature from
the entry's types. The compile driver (frontend/api/driver.py) then builds it as it builds qjit's.

Every problem with the input is a SprueError: StableHLOInputError for text that does not parse or
has no entry point, StableHLOUnsupportedError (sprue.StableHLOUnsupportedError) for an op,
attribute, type or resource a StableHLO program may not contain, naming it and its location,
UnsupportedStableHLOOpError for a StableHLO op sprue cannot compile, and the pipeline's
LoweringError for what fails later.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from torch_mlir import ir, passmanager

from sprue.base.errors import ParseError, SprueMemoryError
from sprue.lowering import shape_assertions
from sprue.lowering.mlir_util import ops_where
from sprue.lowering.pipeline import LoweringError, make_pipeline_context
from sprue.lowering.stablehlo_chlo import (
    UnsupportedStableHLOOpError,
    call_decompositions,
    lower_chlo,
    mhlo_target,
    to_generic_form,
)
from sprue.lowering.stablehlo_fixups import apply_fixups
from sprue.lowering.stablehlo_validate import (
    BYTECODE_MAGIC,
    bytecode_to_text,
    check_module,
    drop_dialect_attributes,
    extract_resources,
    materialize_resources,
    refuse,
)
from sprue.lowering.stablehlo_validate import line_col as _line_col
from sprue.lowering.stablehlo_windows import lower_dynamic_windows
from sprue.runtime import Signature, TensorSpec
from sprue.runtime.c_names import module_symbol_problem


class StableHLOInputError(ParseError):
    """A StableHLO input that cannot be read: it does not parse, or has no entry function."""

    def __init__(self, message: str, diagnostics: list[str] | None = None):
        self.diagnostics = list(diagnostics or [])
        super().__init__(message + ("\n" + "\n".join(self.diagnostics) if self.diagnostics else ""))


# Custom calls that only annotate their operand (sharding, host placement): the value passes through.
IDENTITY_CUSTOM_CALLS = frozenset({
    "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "MoveToHost", "MoveToDevice",
    "annotate_device_placement", "xla_python_cpu_callback_sharding",
})

# Function attributes the pipeline understands; everything else (JAX's mhlo.*/jax.*/sdy.*) is dropped.
_KEPT_FUNC_ATTRS = frozenset({"sym_name", "function_type", "sym_visibility"})


# -- reading --------------------------------------------------------------------------------------
def read_source(path_or_text: str | bytes | os.PathLike) -> tuple[str, str]:
    """(text, a name for messages). A str holding MLIR (it has a newline or a brace) is the text,
    bytes are the file's content, anything else is a path. MLIR bytecode (a StableHLO portable
    artifact: `jax.export(f)(...).mlir_module_serialized`) becomes its text."""
    if isinstance(path_or_text, str) and ("\n" in path_or_text or "{" in path_or_text):
        return path_or_text, "<text>"
    if isinstance(path_or_text, (bytes, bytearray)):
        data, name = bytes(path_or_text), "<bytes>"
    elif isinstance(path_or_text, (str, os.PathLike)):
        path = Path(path_or_text)
        name = str(path)
        try:
            data = path.read_bytes()
        except OSError as err:
            raise StableHLOInputError(f"cannot read the StableHLO file {path}: {err}") from err
    else:
        raise StableHLOInputError(f"load_stablehlo expects a path, StableHLO text or bytes, got"
                                  f" {type(path_or_text).__name__}")
    if data.startswith(BYTECODE_MAGIC):
        try:
            return bytecode_to_text(data, name), name
        except ParseError as err:
            raise StableHLOInputError(str(err)) from None
    try:
        return data.decode("utf-8"), name
    except UnicodeDecodeError as err:
        raise StableHLOInputError(f"cannot read the StableHLO file {name}: byte {err.start} is not UTF-8"
                                  f" ({err.reason}), and the file is not MLIR bytecode") from None


# `sdy.mesh @mesh = <...>` declares a device mesh for Shardy shardings; one device needs none, and
# the sdy dialect's custom syntax does not parse here.
_SDY_MESH = re.compile(r"^[ \t]*sdy\.mesh[ \t]+@.*$", re.MULTILINE)   # [ \t], not \s: linear time


# MLIR's parser is recursive descent on the C++ stack: a few thousand nested brackets (`dense<[[[...`,
# `tensor<tensor<...`, regions in regions) overflow it and the process dies (SIGSEGV) instead of
# reporting an error. No real program nests anywhere near this deep.
MAX_NESTING = 256
_NESTING_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"?|//[^\n]*|->|[\[\](){}<>]')
_OPENERS, _CLOSERS = frozenset("[({<"), frozenset("])}>")


def check_text(text: str, name: str) -> None:
    """Rejects, with a StableHLOInputError naming line:col, what MLIR's parser would crash on
    rather than report: a NUL character, text that is not valid Unicode (lone surrogates), and
    brackets nested deeper than MAX_NESTING."""
    nul = text.find("\0")
    if nul >= 0:
        raise StableHLOInputError(f"{name}:{_line_col(text, nul)}: the text holds a NUL character (not a text file?)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise StableHLOInputError(f"{name}:{_line_col(text, err.start)}: the text is not valid Unicode"
                                  f" ({err.reason})") from None
    depth = 0
    for m in _NESTING_TOKENS.finditer(text):
        c = m.group()
        if c in _OPENERS:
            depth += 1
            if depth > MAX_NESTING:
                raise StableHLOInputError(f"{name}:{_line_col(text, m.start())}: brackets nested more than"
                                          f" {MAX_NESTING} deep")
        elif c in _CLOSERS:
            depth = max(0, depth - 1)


# Static sizes that the pipeline cannot handle: a constant is materialized element by element (a
# splat of 2**32 elements aborts the process: "LLVM ERROR: out of memory"; 10**8 takes half a
# minute), and sizes past 2**40 elements overflow the size computations.
MAX_CONSTANT_ELEMENTS = 1 << 26
MAX_TENSOR_ELEMENTS = 1 << 40


def _elements(t: ir.Type) -> int | None:
    """The element count of a static ranked tensor type, else None."""
    if not isinstance(t, ir.RankedTensorType):
        return None
    n = 1
    for d in range(t.rank):
        if t.is_dynamic_dim(d):
            return None
        n *= t.get_dim_size(d)
    return n


def check_sizes(module: ir.Module, name: str) -> None:
    """Rejects tensor types too large to compile (see MAX_CONSTANT_ELEMENTS) with a StableHLOInputError."""
    bad: list[str] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        types = [r.type for r in op.results]
        if op.name == "func.func":
            ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            types += list(ftype.inputs) + list(ftype.results)
        for t in types:
            n = _elements(t)
            if n is None:
                continue
            limit = MAX_CONSTANT_ELEMENTS if op.name in ("stablehlo.constant", "arith.constant") else MAX_TENSOR_ELEMENTS
            if n > limit:
                bad.append(f"{name}: {op.name} at {op.location}: the type {t} has {n} elements (more than"
                           f" {limit}{' for a constant' if limit == MAX_CONSTANT_ELEMENTS else ''})")
                # a byte count past int64 is no array at all: a memory error, as for jaxprs (core.MAX_ARRAY_BYTES)
                overflows.append(n * -(-getattr(ir.RankedTensorType(t).element_type, "width", 8) // 8) > 2 ** 63 - 1)
                return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE
    overflows: list[bool] = []
    module.operation.walk(visit)
    if bad:
        raise (SprueMemoryError if overflows[0] else StableHLOInputError)(
            bad[0] + (": its size overflows the 64-bit byte count of an array" if overflows[0] else ""))


def prepare_text(text: str) -> str:
    """The text with what cannot be parsed here rewritten or removed (see the module docstring)."""
    return to_generic_form(_SDY_MESH.sub("", text))


def _diagnostics(err: ir.MLIRError) -> list[str]:
    return [f"{d.location}: {d.message}" for d in err.error_diagnostics]


# No program has arrays of hundreds of axes, and MLIR's type parser takes time quadratic in the
# rank (a 200,000-axis tensor type: minutes): such a type is refused before MLIR reads the text.
MAX_RANK = 64
# (Linear time: a match starts only where a run of digits starts, and never backtracks into one.)
_HIGH_RANK = re.compile(r"(?<![\d?])(?:(?:\d++|\?)\s*+x\s*+){%d,}" % (MAX_RANK + 1))


def parse(ctx: ir.Context, text: str, name: str) -> ir.Module:
    m = _HIGH_RANK.search(text)
    if m:
        raise StableHLOInputError(f"{name}:{_line_col(text, m.start())}: a tensor type of more than {MAX_RANK} axes"
                                  f" (sprue compiles arrays of at most {MAX_RANK} axes)")
    try:
        return ir.Module.parse(text, ctx)
    except ir.MLIRError as err:
        raise StableHLOInputError(f"{name} is not a valid StableHLO module", _diagnostics(err)) from err


# -- cleaning up the module -----------------------------------------------------------------------
def _functions(module: ir.Module) -> list[ir.Operation]:
    return [op.operation for op in module.body.operations if op.operation.name == "func.func"]


def _visibility(func: ir.Operation) -> str:
    attrs = func.attributes
    return ir.StringAttr(attrs["sym_visibility"]).value if "sym_visibility" in attrs else "public"


def _name(func: ir.Operation) -> str:
    return ir.StringAttr(func.attributes["sym_name"]).value


def entry_function(module: ir.Module, name: str) -> ir.Operation:
    """@main, else the only public function with a body."""
    funcs = [f for f in _functions(module) if f.regions[0].blocks]
    for f in funcs:
        if _name(f) == "main":
            return f
    public = [f for f in funcs if _visibility(f) == "public"]
    if len(public) == 1:
        return public[0]
    names = ", ".join("@" + _name(f) for f in public) or "none"
    raise StableHLOInputError(f"{name}: no entry function: expected @main or a single public function"
                              f" (public functions: {names})")


def _result_names(entry: ir.Operation) -> list[str | None]:
    """JAX's `jax.result_info` per result (e.g. "result[0]"), before the attributes are dropped."""
    n = len(ir.FunctionType(ir.TypeAttr(entry.attributes["function_type"]).value).results)
    if "res_attrs" not in entry.attributes:
        return [None] * n
    names: list[str | None] = []
    for d in ir.ArrayAttr(entry.attributes["res_attrs"]):
        d = ir.DictAttr(d)
        names.append(ir.StringAttr(d["jax.result_info"]).value
                     if "jax.result_info" in d and isinstance(d["jax.result_info"], ir.StringAttr) else None)
    return names


def strip_attributes(module: ir.Module) -> None:
    """Drops the module's and functions' attributes JAX adds: nothing in the pipeline reads them,
    and some (sdy shardings) belong to dialects this build does not have."""
    attrs = module.operation.attributes
    for key in [attrs[i].name for i in range(len(attrs))]:
        if key != "sym_name":
            del attrs[key]
    for f in _functions(module):
        fattrs = f.attributes
        for key in [fattrs[i].name for i in range(len(fattrs))]:
            if key not in _KEPT_FUNC_ATTRS:
                del fattrs[key]


def _custom_call_target(op: ir.Operation) -> str:
    target = op.attributes["call_target_name"]
    return ir.StringAttr(target).value


def remove_identity_ops(module: ir.Module) -> None:
    """@Sharding-style custom calls and optimization_barrier pass their operands through.
    Any other custom call cannot be compiled: an error naming its target and location."""
    found = ops_where(module.operation,
                      lambda op: op.name in ("stablehlo.custom_call", "stablehlo.optimization_barrier"))
    for op in found:
        if op.name == "stablehlo.custom_call":
            if mhlo_target(op) is not None:
                continue   # a chlo op in older JAX's spelling: lower_chlo lowers it
            target = _custom_call_target(op)
            if target not in IDENTITY_CUSTOM_CALLS or len(op.operands) != len(op.results):
                raise UnsupportedStableHLOOpError(f"stablehlo.custom_call @{target}", str(op.location))
        for old, new in zip(op.results, op.operands):
            old.replace_all_uses_with(new)
        op.erase()


def inline_calls(module: ir.Module, entry: ir.Operation) -> None:
    """Every function but the entry becomes private, calls are inlined and unused functions
    dropped: JAX outlines helpers (`func.func private @relu`, `call @relu`), and the pipeline
    exports every public function."""
    for f in _functions(module):
        if f != entry:
            f.attributes["sym_visibility"] = ir.StringAttr.get("private")
    try:
        pm = passmanager.PassManager.parse("builtin.module(inline,symbol-dce)", module.context)
        pm.run(module.operation)
    except ir.MLIRError as err:
        raise LoweringError("inline", "inlining the module's function calls failed", _diagnostics(err)) from err


def check_inlined(module: ir.Module, entry: ir.Operation, name: str) -> None:
    """After inline_calls only the entry may remain: a function still referenced (a call the
    inliner left, a stablehlo.composite's decomposition) would be compiled under its own symbol."""
    for f in _functions(module):
        if f != entry:
            bad: list[ir.Operation] = []

            def visit(op: ir.Operation) -> ir.WalkResult:
                attrs = op.attributes
                if op.name != "func.func" and any(f"@{_name(f)}" in str(attrs[i].attr) for i in range(len(attrs))):
                    bad.append(op)
                    return ir.WalkResult.INTERRUPT
                return ir.WalkResult.ADVANCE
            entry.walk(visit)
            what = f"{bad[0].name} refers to" if bad else "the module keeps"
            raise refuse(bad[0] if bad else f, name, f"{what} function @{_name(f)}, which is not inlined: sprue"
                                                     f" compiles a single function, calling others only through"
                                                     f" func.call")


# The C symbol of the compiled entry: anything else (`@"a b"`, `@"../x"`, which would also name the
# library file) is renamed, as are names the lowering or runtime declare themselves.
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# -- the signature --------------------------------------------------------------------------------
def _dtype(t: ir.Type, where: str) -> str:
    """The runtime's short element-type name for an MLIR element type."""
    if isinstance(t, ir.IntegerType):
        if t.width == 1:
            return "bool"
        if t.width in (8, 16, 32, 64):
            return f"{'u' if t.is_unsigned else 'i'}{t.width}"
    elif isinstance(t, ir.F64Type):
        return "f64"
    elif isinstance(t, ir.F32Type):
        return "f32"
    elif isinstance(t, ir.F16Type):
        return "f16"
    elif isinstance(t, ir.ComplexType) and isinstance(t.element_type, (ir.F32Type, ir.F64Type)):
        return "c64" if isinstance(t.element_type, ir.F32Type) else "c128"
    raise UnsupportedStableHLOOpError(f"element type {t}", where, "cannot cross the compiled function's boundary")


def _spec(name: str, t: ir.Type, where: str) -> TensorSpec:
    if not isinstance(t, ir.RankedTensorType):
        raise UnsupportedStableHLOOpError(f"type {t}", where, "is not supported (only ranked tensors)")
    shape = [None if t.is_dynamic_dim(d) else t.get_dim_size(d) for d in range(t.rank)]
    return TensorSpec(name, _dtype(t.element_type, where), shape)


def signature_of(entry: ir.Operation, result_names: list[str | None], entry_name: str | None = None) -> Signature:
    """The runtime Signature from the entry function's type: `?` dims are None. Messages name the
    function `entry_name` (its name in the input, when prepare renamed it)."""
    ftype = ir.FunctionType(ir.TypeAttr(entry.attributes["function_type"]).value)
    where = f"@{entry_name or _name(entry)}"
    args = [_spec(f"arg{i}", t, f"{where} argument {i}") for i, t in enumerate(ftype.inputs)]
    results = [_spec(result_names[i] or f"result[{i}]", t, f"{where} result {i}")
               for i, t in enumerate(ftype.results)]
    return Signature(args, results)


# -- the whole way --------------------------------------------------------------------------------
@dataclass
class PreparedModule:
    """A foreign module made ready for sprue's pipeline."""
    text: str            # StableHLO text build_shared_library accepts
    entry: str           # the entry function's symbol
    signature: Signature
    assertions: list = field(default_factory=list)   # JAX's shape assertions (shape_assertions.py)


def prepare(path_or_text: str | os.PathLike, rename_to: str | None = None) -> PreparedModule:
    """The module read, checked and made ready for the pipeline (the module docstring), its entry
    function renamed `rename_to` when given (a C name: sprue compile's kernel name)."""
    text, name = read_source(path_or_text)
    ctx = make_pipeline_context()
    # Unregistered dialects parse in generic form: JAX's #sdy/#mhlo attributes and the chlo ops
    # rewritten by prepare_text; strip_attributes and lower_chlo then remove every one of them.
    ctx.allow_unregistered_dialects = True
    with ctx, ir.Location.unknown():
        check_text(text, name)
        text, blobs = extract_resources(text, name)     # MLIR never reads a blob
        module = parse(ctx, prepare_text(text), name)
        resources = check_module(module, name)
        check_sizes(module, name)
        materialize_resources(resources, blobs, name)
        entry = entry_function(module, name)
        entry_name = _name(entry)
        names = _result_names(entry)
        assertions = shape_assertions.take(entry)
        strip_attributes(module)
        drop_dialect_attributes(module)
        lower_dynamic_windows(module)
        remove_identity_ops(module)
        call_decompositions(module)
        lower_chlo(module)
        apply_fixups(module)
        inline_calls(module, entry)
        entry = entry_function(module, name)
        check_inlined(module, entry, name)
        _rename_entry(module, entry, rename_to)
        signature = signature_of(entry, names, entry_name)
        return PreparedModule(str(module), _name(entry), signature, assertions)


def _rename_entry(module: ir.Module, entry: ir.Operation, wanted: str | None) -> None:
    """The entry function renamed `wanted` when given; else renamed main (main_2, ... when taken)
    when its name is not a C identifier or is one the lowering or the runtime declare themselves
    (@free, @sin)."""
    old = _name(entry)
    table = ir.SymbolTable(module.operation)
    if wanted is None:
        if _C_IDENTIFIER.fullmatch(old) and module_symbol_problem(old) is None:
            return
        wanted, k = "main", 1
        while wanted in table:
            wanted, k = f"main_{k + 1}", k + 1
    elif wanted == old:
        return
    elif wanted in table:
        raise StableHLOInputError(f"--name {wanted!r}: the module already has a function @{wanted}")
    ir.SymbolTable.replace_all_symbol_uses(old, wanted, module.operation)
    ir.SymbolTable.set_symbol_name(entry, wanted)


__all__ = ["IDENTITY_CUSTOM_CALLS", "PreparedModule", "StableHLOInputError", "UnsupportedStableHLOOpError",
           "prepare"]
