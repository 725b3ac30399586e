"""An entry function's results stored through its C interface's result pointer, one by one.

MLIR's func-to-llvm returns several results as one struct: the function builds it with an
`llvm.insertvalue` per result and its C interface (`_mlir_ciface_<name>`) stores the struct
through the pointer it is given. Each insertvalue names the whole struct type, so the LLVM IR of
a function with n results is O(n^2) text: a 300-layer training step (300 gradients) printed
5 MB for its entry function alone, and translating, reading and parsing that text grew as fast
(a function of 2,000 results spent most of its compile time there).

Here, on the LLVM dialect, the entry function takes the result pointer as one more parameter and
stores each result (a memref descriptor) at its offset in the struct, where it returned it: the
same bytes in the same places, written by the same kind of stores, and no aggregate at all. Its C
interface passes its own result pointer on. Descriptors are made of pointers and i64s (every
field 8 bytes wide and aligned), so a result's offset is 8 times the fields before it.
"""
from __future__ import annotations

import re

from torch_mlir import ir

from sprue.lowering.mlir_util import as_operation, ops_where

_CIFACE = "_mlir_ciface_"
_FIELD = re.compile(r"ptr|i64|array<(\d+) x i64>")


def _members(struct: str) -> list[str] | None:
    """The member types of `!llvm.struct<(...)>` text, split at its top level; None otherwise."""
    if not (struct.startswith("!llvm.struct<(") and struct.endswith(")>")):
        return None
    inner, members, depth, start = struct[len("!llvm.struct<("):-2], [], 0, 0
    for i, ch in enumerate(inner):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            members.append(inner[start:i].strip())
            start = i + 1
    members.append(inner[start:].strip())
    return members


def _descriptor_words(member: str) -> int | None:
    """How many 8-byte words a memref descriptor `struct<(ptr, ptr, i64, array<r x i64>, ...)>`
    holds; None for any other type."""
    if not (member.startswith("struct<(") and member.endswith(")>")):
        return None
    fields = [f.strip() for f in member[len("struct<("):-2].split(",")]
    words = 0
    for f in fields:
        m = _FIELD.fullmatch(f)
        if m is None:
            return None
        words += int(m.group(1)) if m.group(1) else 1
    return words


def _inserted(value: ir.Value, count: int) -> list[ir.Value] | None:
    """The values a chain of llvm.insertvalue ops (one per member, from a poison or undef struct)
    puts into `value`, by member; None if it is built any other way."""
    found: list[ir.Value | None] = [None] * count
    while True:
        if isinstance(value.owner, ir.Block):
            return None
        op = as_operation(value.owner)
        if op.name in ("llvm.mlir.poison", "llvm.mlir.undef"):
            break
        if op.name != "llvm.insertvalue":
            return None
        position = list(ir.DenseI64ArrayAttr(op.attributes["position"]))
        if len(position) != 1 or found[position[0]] is not None:
            return None
        found[position[0]] = op.operands[1]
        value = op.operands[0]
    return None if any(v is None for v in found) else found


def _erase_chain(value: ir.Value) -> None:
    """Erases the insertvalue chain (and its poison) that built `value`, now unused."""
    while not isinstance(value.owner, ir.Block):
        op = as_operation(value.owner)
        if list(op.results[0].uses) or op.name not in ("llvm.insertvalue", "llvm.mlir.poison", "llvm.mlir.undef"):
            return
        value = op.operands[0] if op.name == "llvm.insertvalue" else None
        op.erase()
        if value is None:
            return


def _store_results(fn: ir.Operation, count: int, words: list[int]) -> bool:
    """Rewrites `fn` (count results) to store them through a new last parameter; False, and `fn`
    untouched, where a return is not a plain insertvalue chain."""
    returns = ops_where(fn, lambda op: op.name == "llvm.return")
    chains = [_inserted(ret.operands[0], count) if len(ret.operands) == 1 else None for ret in returns]
    if not returns or any(c is None for c in chains):
        return False
    ptr = ir.Type.parse("!llvm.ptr")
    block = fn.regions[0].blocks[0]
    params = [str(a.type) for a in block.arguments] + ["!llvm.ptr"]
    out = block.add_argument(ptr, fn.location)
    fn.attributes["function_type"] = ir.TypeAttr.get(ir.Type.parse(f"!llvm.func<void ({', '.join(params)})>"))
    if "arg_attrs" in fn.attributes:
        attrs = list(ir.ArrayAttr(fn.attributes["arg_attrs"])) + [ir.DictAttr.get({})]
        fn.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)
    offsets = [8 * sum(words[:i]) for i in range(count)]
    i8 = ir.IntegerType.get_signless(8)
    for ret, values in zip(returns, chains):
        with ir.InsertionPoint(ret), ret.location:
            for offset, value in zip(offsets, values):
                gep = ir.Operation.create("llvm.getelementptr", results=[ptr], operands=[out], attributes={
                    "elem_type": ir.TypeAttr.get(i8),
                    "noWrapFlags": ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 3),   # inbounds
                    "rawConstantIndices": ir.DenseI32ArrayAttr.get([offset])})
                ir.Operation.create("llvm.store", operands=[value, gep.results[0]], attributes={
                    "ordering": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)})
            ir.Operation.create("llvm.return")
        built = ret.operands[0]
        ret.erase()
        _erase_chain(built)
    return True


def store_entry_results(module: ir.Module) -> None:
    """Each function that a C interface calls and that returns several memrefs stores them
    through the interface's result pointer instead (module doc)."""
    functions = {ir.StringAttr(op.attributes["sym_name"]).value: op
                 for op in map(as_operation, module.body.operations) if op.name == "llvm.func"}
    for name, ciface in functions.items():
        if not name.startswith(_CIFACE) or len(ciface.regions[0].blocks) == 0:
            continue
        fn = functions.get(name[len(_CIFACE):])
        calls = ops_where(ciface, lambda op: op.name == "llvm.call" and "callee" in op.attributes
                          and ir.FlatSymbolRefAttr(op.attributes["callee"]).value == name[len(_CIFACE):])
        if fn is None or len(calls) != 1 or len(calls[0].results) != 1:
            continue
        call = calls[0]
        uses = list(call.results[0].uses)
        if len(uses) != 1 or as_operation(uses[0].owner).name != "llvm.store" or uses[0].operand_number != 0:
            continue
        store = as_operation(uses[0].owner)
        members = _members(str(call.results[0].type))
        words = [_descriptor_words(m) for m in members] if members else None
        if not words or len(words) < 2 or None in words or not _store_results(fn, len(words), words):
            continue
        attrs = {a.name: a.attr for a in (call.attributes[i] for i in range(len(call.attributes)))}
        operands = list(call.operands) + [store.operands[1]]
        attrs["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get([len(operands), 0])
        with ir.InsertionPoint(call), call.location:
            ir.Operation.create("llvm.call", operands=operands, attributes=attrs)
        store.erase()
        call.erase()


__all__ = ["store_entry_results"]
