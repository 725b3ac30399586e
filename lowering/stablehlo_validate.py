"""What a foreign StableHLO module may contain, checked before anything compiles it.

A `.mlir` file is code: parsed with unregistered dialects allowed (JAX's `#sdy` attributes, the
`chlo` ops of stablehlo_chlo.py) and lowered by MLIR's pipelines, anything MLIR can parse would be
compiled: an `llvm.inline_asm` (LLVM aborts: "Inline asm not supported"), an `llvm.load` through a
null pointer, a call to a `func.func private @free` declaration, a `dense_resource` constant whose
blob is missing or too short (translation reads past it: SIGSEGV). So the module is checked
against allow-lists, walking every op, nested regions included, every attribute (recursively) and
every type, before any pass runs:

  ops          stablehlo (registered ops), chlo (the ones stablehlo_chlo.RULES lowers, with the
               operand/result structure those rules assume), func.func/call/return, and the
               arith/tensor ops of sprue's own shape computations (SHAPE_OPS); at the module's top
               level only func.func (with a body) and JAX's `sdy.mesh`
  attributes   builtin data (strings, numbers, arrays, dicts, dense elements, types, symbol
               references to functions the module defines) and StableHLO's own; dialect
               attributes (`ns.name`) only of the namespaces JAX writes (DROPPED_NAMESPACES, which
               prepare drops) -- `llvm.emit_c_interface`, `llvm.linkage`, ... are refused
  types        ranked tensors (no encoding) of integer/float/complex/index elements, scalars of
               those, !stablehlo.token, tuples and function types of them
  calls        only to functions defined in the module, and never recursive (they are inlined)
  resources    `dense_resource<key>` only as a constant's value; its blob is read here from the
               file's `{-# dialect_resources: {builtin: {...}} #-}` section (then removed from the
               text, so MLIR never reads a blob) and must hold exactly the bytes its type needs
               after a power-of-two alignment header; the constant becomes a plain `dense<...>`.

Anything else is a StableHLOUnsupportedError (a ParseError) naming the op and its location.

MLIR bytecode (a StableHLO portable artifact, as jax.export serializes it) is read in a child
process (`bytecode_to_text`): MLIR's bytecode reader crashes or hangs on some damaged files, and
the interpreter must not. The child prints the module as text, which then takes the text's path.
"""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np
from torch_mlir import ir
from torch_mlir._mlir_libs import _mlir, _stablehlo
from torch_mlir._mlir_libs._mlir import register_type_caster

from sprue.base.errors import ParseError, StableHLOUnsupportedError
from sprue.lowering.legalize import COUNTED
from sprue.lowering.rules_special import CHLO_BINARY
from sprue.lowering.stablehlo_chlo import RULES as CHLO_RULES

# Ops outside stablehlo/chlo that sprue's own StableHLO stage emits (rules_common.size_value,
# rules_calls, rules_control_flow): sizes read at run time and casts between static and `?` dims.
SHAPE_OPS = frozenset({"arith.constant", "arith.index_cast", "tensor.cast", "tensor.dim", "tensor.from_elements"})
FUNC_OPS = frozenset({"func.func", "func.call", "func.return"})

# Namespaces of the dialect attributes JAX writes on modules, functions, arguments and ops
# (jax.result_info, mhlo.sharding, mhlo.layout_mode, sdy.sharding, xla.sdy.meshes, ...): nothing
# in the pipeline reads them, and prepare drops them.
DROPPED_NAMESPACES = frozenset({"jax", "mhlo", "sdy", "xla"})

# Dialects a JAX export may hold that sprue does not compile: refused with "not supported"
# rather than "not StableHLO".
_KNOWN_UNSUPPORTED = frozenset({"sdy", "mhlo", "shape", "vhlo"})

_RESOURCE_OPS = frozenset({"stablehlo.constant", "arith.constant"})
_MAX_ALIGNMENT = 4096
_CHLO_PREDICATES = frozenset({"chlo.is_inf", "chlo.is_pos_inf", "chlo.is_neg_inf"})


def _namespace(name: str) -> str:
    return name.split(".", 1)[0] if "." in name else ""


# -- errors -----------------------------------------------------------------------------------
_FILE_LOC = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')


def where(loc: ir.Location, name: str) -> tuple[str, int]:
    """(`file:line:col` of a location, the line in the input or 0). A position in the input
    itself (MLIR names it "-") is `name:line:col`; a source location a producer attached (JAX's
    `loc("f.py":3:0)`) is `name: at f.py:3:0`."""
    m = _FILE_LOC.search(str(loc))
    if m is None:
        return f"{name}: at an unknown location", 0
    if m.group(1) == "-":
        return f"{name}:{m.group(2)}:{m.group(3)}", int(m.group(2))
    return f"{name}: at {m.group(1)}:{m.group(2)}:{m.group(3)}", 0


def unsupported(message: str, op: str | None, name: str, line: int = 0) -> StableHLOUnsupportedError:
    """The error, with `.op`, and `.filename`/`.line` (the CLI prints such a message as it is)."""
    err = StableHLOUnsupportedError(message)
    err.op = op
    if line:
        err.filename, err.line = name, line
    return err


def refuse(op: ir.Operation, name: str, what: str) -> StableHLOUnsupportedError:
    loc, line = where(op.location, name)
    return unsupported(f"{loc}: {what}", op.name, name, line)


# -- resources in the text ----------------------------------------------------------------------
@dataclass(frozen=True)
class Blob:
    alignment: int
    data: bytes
    where: str      # name:line:col of its key


_SCAN = re.compile(r'"(?:[^"\\\n]|\\.)*"?|//[^\n]*|\{-#')
_META_TOKEN = re.compile(r'\s+|//[^\n]*|(?P<tok>#-\}|[{}:,]|[A-Za-z_][A-Za-z0-9_$.]*|"(?:[^"\\\n]|\\.)*")')
_ESCAPE = re.compile(r'\\(?:([0-9A-Fa-f]{2})|(.))')


def unescape(s: str) -> str:
    """An MLIR string literal's value (without its quotes): \\", \\\\, \\n, \\t and \\XX hex."""
    def one(m: re.Match) -> str:
        if m.group(1):
            return chr(int(m.group(1), 16))
        return {"n": "\n", "t": "\t"}.get(m.group(2), m.group(2))
    return _ESCAPE.sub(one, s)


def line_col(text: str, pos: int) -> str:
    """`line:column` (both from 1) of offset `pos` in `text`."""
    return f"{text.count(chr(10), 0, pos) + 1}:{pos - (text.rfind(chr(10), 0, pos) + 1) + 1}"


class _Metadata:
    """A strict reader of one `{-# ... #-}` block: only `dialect_resources: {builtin: {key: "0x..."}}`."""

    def __init__(self, text: str, start: int, name: str, blobs: dict[str, Blob]):
        self.text, self.pos, self.name, self.blobs = text, start, name, blobs

    def fail(self, what: str, pos: int | None = None) -> StableHLOUnsupportedError:
        pos = self.pos if pos is None else pos
        lc = line_col(self.text, pos)
        return unsupported(f"{self.name}:{lc}: {what}", None, self.name, int(lc.split(":")[0]))

    def token(self) -> tuple[str, int]:
        while True:
            m = _META_TOKEN.match(self.text, self.pos)
            if m is None:
                raise self.fail("malformed resource section (`{-# ... #-}`)")
            self.pos = m.end()
            if m.group("tok") is not None:
                return m.group("tok"), m.start()

    def expect(self, want: str) -> None:
        tok, at = self.token()
        if tok != want:
            raise self.fail(f"malformed resource section: expected `{want}`, got `{tok[:40]}`", at)

    def key(self) -> tuple[str, int]:
        tok, at = self.token()
        if tok.startswith('"') and tok.endswith('"') and len(tok) >= 2:
            return unescape(tok[1:-1]), at
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$.]*", tok):
            return tok, at
        raise self.fail(f"malformed resource section: expected a name, got `{tok[:40]}`", at)

    def entries(self, each) -> None:
        """`{ entry, entry, ... }` (possibly empty), calling each() per entry."""
        self.expect("{")
        save = self.pos
        tok, _ = self.token()
        if tok == "}":
            return
        self.pos = save
        while True:
            each()
            tok, at = self.token()
            if tok == "}":
                return
            if tok != ",":
                raise self.fail(f"malformed resource section: expected `,` or `}}`, got `{tok[:40]}`", at)

    def read(self) -> int:
        """Reads the block; returns the position after its `#-}`."""
        while True:
            tok, at = self.token()
            if tok == "#-}":
                return self.pos
            if tok == ",":
                continue
            if tok != "dialect_resources":
                raise self.fail(f"`{tok[:40]}` in the file's metadata: only `dialect_resources` (the blobs of"
                                f" dense_resource constants) may appear in StableHLO input", at)
            self.expect(":")
            self.entries(self.dialect)

    def dialect(self) -> None:
        dialect, at = self.key()
        if dialect != "builtin":
            raise self.fail(f"resources of the {dialect!r} dialect: only builtin blobs (dense_resource"
                            f" constants) may appear in StableHLO input", at)
        self.expect(":")
        self.entries(self.blob)

    def blob(self) -> None:
        key, at = self.key()
        self.expect(":")
        value, vat = self.token()
        where_ = f"{self.name}:{line_col(self.text, at)}"
        if key in self.blobs:
            raise self.fail(f"resource {key!r} is defined twice", at)
        if not (value.startswith('"0x') and value.endswith('"')):
            raise self.fail(f"resource {key!r}: expected a hex blob \"0x...\", got `{value[:40]}`", vat)
        try:
            raw = bytes.fromhex(value[3:-1])
        except ValueError:
            raise self.fail(f"resource {key!r}: the blob is not an even number of hex digits", vat) from None
        if len(raw) < 4:
            raise self.fail(f"resource {key!r}: the blob has no alignment header (4 bytes, little-endian)", vat)
        alignment = int.from_bytes(raw[:4], "little")
        if alignment == 0 or alignment & (alignment - 1) or alignment > _MAX_ALIGNMENT:
            raise self.fail(f"resource {key!r}: alignment {alignment} in the blob's header is not a power of"
                            f" two up to {_MAX_ALIGNMENT}", vat)
        self.blobs[key] = Blob(alignment, raw[4:], where_)


def extract_resources(text: str, name: str) -> tuple[str, dict[str, Blob]]:
    """(the text with every `{-# ... #-}` block blanked out -- newlines kept, so line numbers
    hold --, the builtin blobs those blocks define). A block that is not exactly a section of
    builtin hex blobs with a valid alignment header is a StableHLOUnsupportedError."""
    blobs: dict[str, Blob] = {}
    if "{-#" not in text:
        return text, blobs
    pieces: list[str] = []
    pos = done = 0
    while True:
        m = _SCAN.search(text, pos)
        if m is None:
            break
        if m.group() != "{-#":
            pos = m.end()
            continue
        end = _Metadata(text, m.end(), name, blobs).read()
        pieces += [text[done:m.start()], re.sub(r"[^\n]", " ", text[m.start():end])]
        pos = done = end
    if not pieces:
        return text, blobs
    return "".join(pieces) + text[done:], blobs


# -- reading attributes without aborting -----------------------------------------------------------
# The Python bindings downcast every attribute they return (`op.attributes[i].attr`, an ArrayAttr's
# elements) with a caster registered per attribute kind, and the casters of dense elements and
# dense arrays raise for element types they have no class for (`dense<(1.0, 2.0)> :
# tensor<complex<f32>>`, `array<bf16: 1.0>`; a location as a value). The raise happens where C++ cannot pass it on:
# std::terminate, the process aborts. So those kinds get casters that never raise: the class
# when one fits, else the plain Attribute. (Process-wide, and only ever more lenient.)
# A failed try costs ~14 us (the binding raises): the class that fitted last is tried first, since
# one kind comes in runs (a module's array<i64> sizes and offsets; 4 failed tries each before, 0.6
# of a 300-layer gradient's 8.7 s compile). The order is swapped whole, so a thread never sees a
# half-reordered one.
def _safe_caster(classes: tuple[type, ...]):
    order = [tuple(classes)]

    def cast(attr: ir.Attribute) -> ir.Attribute:
        current = order[0]
        for i, cls in enumerate(current):
            try:
                out = cls(attr)
            except Exception:    # not this class: try the next; the plain attribute in the end
                continue
            if i:
                order[0] = (cls,) + current[:i] + current[i + 1:]
            return out
        return attr
    return cast


def _scratch_context():
    """A context for parsing builtin attributes: the bindings' own class (torch_mlir's site
    initializer keeps it as `_Context`), not torch_mlir's ir.Context, whose every dialect
    registered and thread pool cost ~5 ms to make and ~1.5 ms to destroy (0.1 ms here)."""
    return _mlir.ir._Context()


def _install_safe_casters() -> None:
    array_classes = tuple(getattr(ir, f"Dense{k}ArrayAttr") for k in ("Bool", "I8", "I16", "I32", "I64", "F32", "F64"))
    with _scratch_context():
        for sample, classes in (("dense<1> : tensor<i32>", (ir.DenseIntElementsAttr, ir.DenseFPElementsAttr)),
                                ("array<i64: 1>", array_classes)):
            register_type_caster(ir.Attribute.parse(sample).typeid, replace=True)(_safe_caster(classes))
    # A location used as an attribute's value (`{a = loc("x":1:1)}`) reaches the location classes'
    # casters, which accept only an ir.Location: `op.location` still gets its class.
    for cls in (ir.FileLineColLoc, ir.NameLoc, ir.CallSiteLoc, ir.FusedLoc, ir.UnknownLoc):
        register_type_caster(cls.static_typeid, replace=True)(_safe_caster((cls,)))


_install_safe_casters()


# -- the module ---------------------------------------------------------------------------------
def _sample_typeids() -> dict[str, Any]:
    """TypeIDs of the builtin attribute kinds whose Python classes have no static_typeid (TypeIDs
    are process-wide: a scratch context's samples name them for every context)."""
    with _scratch_context():
        return {kind: ir.Attribute.parse(src).typeid for kind, src in (
            ("dense", "dense<1> : tensor<i32>"), ("array", "array<i64: 1>"), ("symbol", "@s"),
            ("resource", "dense_resource<probe> : tensor<i32>"))}


_TYPEIDS: dict[str, Any] = {}


def _attr_kind(attr: ir.Attribute) -> str:
    if not _TYPEIDS:
        _TYPEIDS.update(_sample_typeids())
        for kind, cls in (("string", ir.StringAttr), ("integer", ir.IntegerAttr), ("float", ir.FloatAttr),
                          ("unit", ir.UnitAttr), ("list", ir.ArrayAttr), ("dict", ir.DictAttr), ("type", ir.TypeAttr)):
            _TYPEIDS[kind] = cls.static_typeid
    tid = attr.typeid
    for kind, known in _TYPEIDS.items():
        if tid == known:
            return kind
    return "other"


def _type_problem(t: ir.Type) -> str | None:
    """Why `t` may not appear in StableHLO input, or None."""
    t = t.maybe_downcast()
    if isinstance(t, ir.RankedTensorType):
        if t.encoding is not None:
            return f"the tensor type {t} has an encoding ({t.encoding}), which sprue does not support"
        return _type_problem(t.element_type)
    if isinstance(t, (ir.IntegerType, ir.IndexType, ir.FloatType)):
        return None
    if isinstance(t, ir.ComplexType):
        return _type_problem(t.element_type)
    if isinstance(t, ir.FunctionType):
        return next((p for p in (_type_problem(x) for x in [*t.inputs, *t.results]) if p), None)
    if isinstance(t, ir.TupleType):
        return next((p for p in (_type_problem(t.get_type(i)) for i in range(t.num_types)) if p), None)
    if _stablehlo.TokenType.isinstance(t):
        return None
    return f"the type {t} is not a StableHLO type"


@dataclass
class ResourceUse:
    op: ir.Operation
    key: str             # the resource's key
    type: ir.Type


class _Checker:
    def __init__(self, module: ir.Module, name: str):
        self.module, self.name = module, name
        self.resources: list[ResourceUse] = []
        self.calls: dict[str, list[tuple[str, ir.Operation]]] = {}   # function -> [(callee, op)]
        self.functions: dict[str, ir.Operation] = {}
        self._types: dict[str, str | None] = {}

    # types
    def type(self, op: ir.Operation, t: ir.Type, what: str) -> None:
        key = str(t)
        if key not in self._types:
            self._types[key] = _type_problem(t)
        if self._types[key]:
            raise refuse(op, self.name, f"{op.name}: {what}: {self._types[key]}")

    # attributes
    def attr(self, op: ir.Operation, attr: ir.Attribute, path: str, func: str | None, top: bool) -> None:
        kind = _attr_kind(attr)
        if kind in ("string", "integer", "float", "unit", "array"):
            return
        if kind == "list":
            for i, a in enumerate(ir.ArrayAttr(attr)):
                self.attr(op, a, f"{path}[{i}]", func, False)
        elif kind == "dict":
            d = ir.DictAttr(attr)
            for i in range(len(d)):
                self.attr(op, d[i].attr, f"{path}.{d[i].name}", func, False)
        elif kind == "type":
            self.type(op, ir.TypeAttr(attr).value, f"attribute {path}")
        elif kind == "dense":
            self.type(op, attr.type, f"attribute {path}")
        elif kind == "symbol":
            self.symbol(op, attr, path, func)
        elif kind == "resource":
            if not (top and path == "value" and op.name in _RESOURCE_OPS):
                raise refuse(op, self.name, f"{op.name}: a dense_resource in attribute {path}: StableHLO input"
                                            f" may use dense_resource only as a constant's value")
            self.type(op, attr.type, f"attribute {path}")
            self.resources.append(ResourceUse(op, _resource_key(attr), attr.type))
        elif not str(attr).startswith(("#stablehlo<", "#stablehlo.")):
            raise refuse(op, self.name, f"{op.name}: attribute {path} = {_short(attr)} is not a StableHLO"
                                        f" attribute")

    def symbol(self, op: ir.Operation, attr: ir.Attribute, path: str, func: str | None) -> None:
        text = str(attr)
        m = re.fullmatch(r'@("(?:[^"\\]|\\.)*"|[A-Za-z_][A-Za-z0-9_$.]*)', text)
        callee = (unescape(m.group(1)[1:-1]) if m.group(1).startswith('"') else m.group(1)) if m else None
        if callee is None or callee not in self.functions:
            raise refuse(op, self.name, f"{op.name}: attribute {path} refers to {text}, which is not a function"
                                        f" defined in this module; sprue calls nothing outside the module")
        if func is not None:
            self.calls.setdefault(func, []).append((callee, op))

    def discardable(self, op: ir.Operation, key: str, owner: str) -> None:
        """A dialect attribute (`ns.name`): of JAX's namespaces (dropped), or sprue's counted-loop mark."""
        if _namespace(key) in DROPPED_NAMESPACES or (key == COUNTED and op.name == "stablehlo.while"):
            return
        raise refuse(op, self.name, f"{op.name}: attribute {key!r}{owner}: {_namespace(key) or 'this'} attributes"
                                    f" may not appear in StableHLO input (accepted: those of"
                                    f" {', '.join(sorted(DROPPED_NAMESPACES))}, which sprue ignores)")

    def attributes(self, op: ir.Operation, func: str | None) -> None:
        skip_chlo = op.name.startswith("chlo.") and op.name not in CHLO_RULES   # lower_chlo refuses those
        attrs = op.attributes
        for named in (attrs[i] for i in range(len(attrs))):
            key = named.name
            if "." in key:
                self.discardable(op, key, "")
            elif op.name == "func.func" and key in ("arg_attrs", "res_attrs"):
                for i, d in enumerate(ir.ArrayAttr(named.attr)):
                    d = ir.DictAttr(d)
                    for j in range(len(d)):
                        self.discardable(op, d[j].name, f" of {key[:3]} {i}")
            elif not skip_chlo:
                self.attr(op, named.attr, key, func, True)

    # ops
    def op(self, op: ir.Operation, func: str | None) -> None:
        name = op.name
        if name in FUNC_OPS or name in SHAPE_OPS:
            pass
        elif name.startswith("stablehlo.") and op.context.is_registered_operation(name):
            pass
        elif name.startswith("chlo.") and not op.context.is_registered_operation(name):
            self.chlo(op)
        else:
            raise refuse(op, self.name, _foreign(name))
        if name == "func.func":
            raise refuse(op, self.name, "func.func inside another op: functions must be at the module's top level")
        if op.successors:
            raise refuse(op, self.name, f"{name} has successor blocks (branches), which StableHLO does not have")
        if name == "tensor.dim":
            self.dim_index(op)

    def chlo(self, op: ir.Operation) -> None:
        """The structure stablehlo_chlo's rules assume: unregistered ops are not verified, and a
        result type that disagrees with the operand would make the rewrite read out of bounds."""
        if op.name not in CHLO_RULES:
            return          # lower_chlo names it as unsupported
        n = 2 if op.name.startswith("chlo.broadcast_") or op.name in CHLO_BINARY else 1
        n_results = 2 if op.name == "chlo.top_k" else 1
        types = [v.type for v in op.operands] + [r.type for r in op.results]
        if (len(op.operands) != n or len(op.results) != n_results or len(op.regions) or len(op.successors)
                or not all(isinstance(t.maybe_downcast(), ir.RankedTensorType) for t in types)):
            raise refuse(op, self.name, f"{op.name} must have {n} tensor operand{'s' if n > 1 else ''},"
                                        f" {'two tensor results' if n_results == 2 else 'one tensor result'}"
                                        f" and no regions")
        x, r = ir.RankedTensorType(types[0]), ir.RankedTensorType(types[n])
        if op.name == "chlo.top_k":
            i = ir.RankedTensorType(types[-1])
            if (r.rank != x.rank or r.rank == 0 or r.shape[:-1] != x.shape[:-1] or r.shape[-1] > x.shape[-1]
                    or r.element_type != x.element_type or i.shape != r.shape or str(i.element_type) != "i32"):
                raise refuse(op, self.name, f"chlo.top_k: the result types {r}, {i} do not fit the operand type {x}")
        elif n == 1 and (x.shape != r.shape or (op.name in _CHLO_PREDICATES) != (str(r.element_type) == "i1")
                         or (op.name not in _CHLO_PREDICATES and x.element_type != r.element_type)):
            raise refuse(op, self.name, f"{op.name}: the result type {r} does not fit the operand type {x}")

    def dim_index(self, op: ir.Operation) -> None:
        """tensor.dim with an index outside [0, rank) is undefined behaviour: a constant in range only."""
        source, index = op.operands[0].type.maybe_downcast(), _defined_by(op.operands[1], "arith.constant")
        ok = False
        if index is not None:
            value = index.attributes["value"]
            ok = (_attr_kind(value) == "integer" and isinstance(source, ir.RankedTensorType)
                  and 0 <= ir.IntegerAttr(value).value < source.rank)
        if not ok:
            raise refuse(op, self.name, "tensor.dim: the dimension must be a constant within the tensor's rank")

    def run(self) -> None:
        top = self.module.operation
        attrs = top.attributes
        for a in (attrs[i] for i in range(len(attrs))):
            if "." in a.name:
                self.discardable(top, a.name, " of the module")
            elif a.name not in ("sym_name", "sym_visibility"):
                raise refuse(top, self.name, f"builtin.module: attribute {a.name!r} is not allowed")
        for op in self.module.body.operations:
            op = op.operation
            if op.name == "sdy.mesh":     # a Shardy mesh (generic form, e.g. from bytecode): dropped
                continue
            if op.name != "func.func":
                raise refuse(op, self.name, f"{_foreign(op.name)} (at the module's top level only func.func"
                                            f" may appear)")
            fname = ir.StringAttr(op.attributes["sym_name"]).value
            if not op.regions[0].blocks:
                raise refuse(op, self.name, f"func.func @{fname} is a declaration without a body: sprue compiles"
                                            f" only functions defined in the module and calls nothing else")
            self.functions[fname] = op
        for fname, func in self.functions.items():
            self.attributes(func, None)
            self.walk(func, fname)
        self.acyclic()

    def walk(self, func: ir.Operation, fname: str) -> None:
        stack = [func]
        while stack:
            op = stack.pop()
            if op is not func:
                self.op(op, fname)
                self.attributes(op, fname)
            for r in op.results:
                self.type(op, r.type, "a result")
            for region in op.regions:
                for block in region.blocks:
                    for arg in block.arguments:
                        self.type(op, arg.type, "a block argument")
                    stack.extend(o.operation for o in reversed(list(block.operations)))

    def acyclic(self) -> None:
        """Calls are inlined, so they may not recurse (a cycle would also overflow the stack).
        Depth-first with an explicit stack: a chain of thousands of calls is no RecursionError."""
        done: set[str] = set()
        for root in self.functions:
            if root in done:
                continue
            path, on_path = [root], {root}
            todo = [iter(self.calls.get(root, []))]
            while todo:
                step = next(todo[-1], None)
                if step is None:
                    finished = path.pop()
                    on_path.discard(finished)
                    done.add(finished)
                    todo.pop()
                    continue
                callee, op = step
                if callee in on_path:
                    names = ["@" + g for g in path[path.index(callee):] + [callee]]
                    cycle = " -> ".join(names if len(names) <= 8 else [*names[:3], "...", *names[-3:]])
                    raise refuse(op, self.name, f"{op.name}: recursive call ({cycle}); StableHLO functions"
                                                f" may not recurse")
                if callee not in done:
                    path.append(callee)
                    on_path.add(callee)
                    todo.append(iter(self.calls.get(callee, [])))


def _foreign(name: str) -> str:
    ns = _namespace(name) or name
    if ns in _KNOWN_UNSUPPORTED:
        return f"{name} is not supported (sprue compiles stablehlo, chlo and func ops)"
    if ns in ("arith", "tensor", "func"):
        allowed = ", ".join(sorted(o for o in SHAPE_OPS | FUNC_OPS if o.startswith(ns + ".")))
        return f"{name} is not allowed in StableHLO input (of the {ns} dialect only {allowed})"
    return (f"{name} is not allowed in StableHLO input: the {ns} dialect is not StableHLO (accepted: stablehlo,"
            f" chlo, func, and the arith/tensor ops of shape computations)")


def _short(attr: ir.Attribute) -> str:
    s = str(attr)
    return s if len(s) <= 80 else s[:77] + "..."


def _resource_key(attr: ir.Attribute) -> str:
    m = re.match(r'dense_resource<("(?:[^"\\]|\\.)*"|[^>]*)>', str(attr))
    key = m.group(1) if m else ""
    return unescape(key[1:-1]) if key.startswith('"') else key


def check_module(module: ir.Module, name: str) -> list[ResourceUse]:
    """Checks the whole module against the allow-lists (see the module docstring); returns the
    dense_resource constants, for materialize_resources. Raises StableHLOUnsupportedError."""
    checker = _Checker(module, name)
    checker.run()
    return checker.resources


# -- resources -> dense constants ------------------------------------------------------------------
def _resource_dtype(t: ir.Type) -> np.dtype | None:
    """The numpy dtype whose bytes a blob of element type t holds (i1: one byte, 0 or 1), or None."""
    t = t.maybe_downcast()
    if isinstance(t, ir.IntegerType) and t.width in (1, 8, 16, 32, 64):
        return np.dtype(np.uint8) if t.width == 1 else np.dtype(f"u{t.width // 8}")
    for cls, dtype in ((ir.F16Type, "u2"), (ir.BF16Type, "u2"), (ir.F32Type, "u4"), (ir.F64Type, "u8")):
        if isinstance(t, cls):
            return np.dtype(dtype)
    return None


def materialize_resources(uses: list[ResourceUse], blobs: dict[str, Blob], name: str) -> None:
    """Replaces every dense_resource constant by the same data as a dense<...> attribute, after
    checking its blob exists and holds exactly the bytes its type needs. Run after check_sizes
    (which bounds the element count)."""
    for use in uses:
        op, key, t = use.op, use.key, ir.RankedTensorType(use.type)
        blob = blobs.get(key)
        if blob is None:
            why = (" (`__elided__`: the module was printed with large constants elided)" if key == "__elided__"
                   else "")
            raise refuse(op, name, f"{op.name}: dense_resource<{key}> has no data: the file defines no blob"
                                   f" {key!r} in its `{{-# dialect_resources #-}}` section{why}")
        dtype = _resource_dtype(t.element_type)
        if dtype is None or not t.has_static_shape:
            raise refuse(op, name, f"{op.name}: a dense_resource of type {t} is not supported (static shapes"
                                   f" of 1-64-bit integers and f16/bf16/f32/f64 are)")
        shape = [t.get_dim_size(d) for d in range(t.rank)]
        need = prod(shape) * dtype.itemsize
        if len(blob.data) != need:
            raise refuse(op, name, f"{op.name}: dense_resource<{key}> holds {len(blob.data)} bytes (defined at"
                                   f" {blob.where}) but {t} needs {need}")
        values = np.frombuffer(blob.data, dtype)
        if str(t.element_type) == "i1":
            if values.size and values.max() > 1:
                raise refuse(op, name, f"{op.name}: dense_resource<{key}> of i1 holds bytes other than 0 and 1")
            values = values.astype(np.bool_)
        with op.context:
            op.attributes["value"] = ir.DenseElementsAttr.get(values, type=t.element_type, shape=shape)


# -- after the checks ------------------------------------------------------------------------------
def _defined_by(v: ir.Value, name: str) -> ir.Operation | None:
    """The op defining v if it is named `name` (None for a block argument or another op)."""
    owner = v.owner
    op = getattr(owner, "operation", None) if not isinstance(owner, ir.Block) else None
    return op if op is not None and op.name == name else None


def _is_counted(op: ir.Operation) -> bool:
    """Whether a stablehlo.while has the form legalize.lower_counted_while assumes of a loop
    marked COUNTED: k starts at a constant 0, the cond region is `compare LT, k, trips` with trips
    from outside the loop, the body yields k + 1 first, and k's final value is unused."""
    if not op.operands or any(True for _ in op.results[0].uses):
        return False
    k0 = _defined_by(op.operands[0], "stablehlo.constant")
    if k0 is None or not re.fullmatch(r"dense<0> : tensor<[a-z]*i\d+>", str(k0.attributes["value"])):
        return False
    cond = op.regions[0].blocks[0]
    ops = [o.operation for o in cond.operations]
    if len(ops) != 2 or ops[0].name != "stablehlo.compare" or ops[1].name != "stablehlo.return":
        return False
    compare = ops[0]
    if (compare.operands[0] != cond.arguments[0] or any(compare.operands[1] == a for a in cond.arguments)
            or "LT" not in str(compare.attributes["comparison_direction"])
            or ops[1].operands[0] != compare.results[0]):
        return False
    body = op.regions[1].blocks[0]
    ret = [o.operation for o in body.operations][-1]
    step = _defined_by(ret.operands[0], "stablehlo.add") if len(ret.operands) else None
    if step is None:
        return False
    a, b = step.operands
    one = b if a == body.arguments[0] else a if b == body.arguments[0] else None
    one = _defined_by(one, "stablehlo.constant") if one is not None else None
    return one is not None and re.fullmatch(r"dense<1> : tensor<[a-z]*i\d+>", str(one.attributes["value"])) is not None


def drop_dialect_attributes(module: ir.Module) -> None:
    """Removes every dialect attribute check_module let through (JAX's, and sprue's counted-loop
    mark where the loop does not have the counted form) and the top-level `sdy.mesh` ops."""
    for op in list(module.body.operations):
        if op.operation.name == "sdy.mesh":
            op.operation.erase()
    ops: list[ir.Operation] = []
    module.operation.walk(lambda o: ops.append(o) or ir.WalkResult.ADVANCE)
    for op in ops:
        attrs = op.attributes
        for key in [attrs[i].name for i in range(len(attrs))]:
            if "." in key and not (key == COUNTED and op.name == "stablehlo.while" and _is_counted(op)):
                del attrs[key]


# -- bytecode -----------------------------------------------------------------------------------
BYTECODE_MAGIC = b"ML\xefR"
BYTECODE_TIMEOUT = 120.0

# Run by `python -I -c`: no current directory or PYTHON* variables on the path; the parent's
# sys.path (argv[1]) then finds the same torch_mlir.
_CHILD = r"""
import json, sys
sys.path[:] = json.loads(sys.argv[1])
from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo
from torch_mlir._mlir_libs._mlir import register_type_caster
_stablehlo.register_stablehlo_passes()
ctx = ir.Context()
_stablehlo.register_dialect(ctx)
ctx.allow_unregistered_dialects = True
try:
    module = _stablehlo.deserialize_portable_artifact(ctx, sys.stdin.buffer.read())
except Exception as err:
    sys.stderr.write(str(err))
    sys.exit(3)
sys.stdout.write(module.operation.get_asm(enable_debug_info=True))
"""


def bytecode_to_text(data: bytes, name: str) -> str:
    """The text of an MLIR bytecode module (a StableHLO portable artifact, or plain bytecode),
    read in a child process. Raises ParseError if the child fails, crashes or hangs."""
    try:
        proc = subprocess.run([sys.executable, "-I", "-c", _CHILD, json.dumps(sys.path)], input=data,
                              capture_output=True, timeout=BYTECODE_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise ParseError(f"{name}: reading the MLIR bytecode did not finish in {BYTECODE_TIMEOUT:.0f} s (a damaged"
                         f" file?)") from None
    if proc.returncode < 0:
        sig = signal.Signals(-proc.returncode).name if -proc.returncode in signal.valid_signals() else -proc.returncode
        raise ParseError(f"{name}: MLIR's bytecode reader crashed ({sig}) on this file: it is not a valid StableHLO"
                         f" portable artifact")
    if proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ParseError(f"{name} is not a valid MLIR bytecode module: " + (" ".join(detail[-3:]) or
                                                                            f"exit status {proc.returncode}"))
    try:
        return proc.stdout.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ParseError(f"{name}: the bytecode module printed as text is not UTF-8 ({err.reason})") from None


__all__ = ["BYTECODE_MAGIC", "Blob", "DROPPED_NAMESPACES", "ResourceUse", "SHAPE_OPS", "bytecode_to_text",
           "check_module", "drop_dialect_attributes", "extract_resources", "line_col", "materialize_resources",
           "unescape", "unsupported", "where"]
