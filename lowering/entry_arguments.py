"""The entry function reads its arguments through its C interface's pointers, not as fields.

MLIR's func-to-llvm gives an entry function `f` taking memrefs one parameter per descriptor field
(7 for a 2-D array) and a C interface `_mlir_ciface_f` taking a pointer per descriptor: the
interface loads each descriptor, takes it apart and calls `f`, and `f` builds each descriptor
again, one `llvm.insertvalue` per field, to take out the one or two fields it reads. All of it
folds away once LLVM inlines `f`, but until then it is the largest text of a program with many
arguments: a 1,000-layer network's two entry functions were 1.47 of its 1.56 MB of LLVM IR, 0.4 s
of parsing alone (LLVM's lexer compares every identifier with its keywords), and 5,000 arguments
spent seconds in each of MLIR's conversion, the text, parsing, O3 and instruction selection.

Here, on the LLVM dialect (after store_entry_results): `f` becomes the C interface itself. It takes
the interface's parameters; each field it reads is one load at its offset in the descriptor the
caller passed (the same bytes the interface loaded), extracts of a descriptor `f` built from its
parameters take the parameter, and what the interface did with `f`'s result (store it through its
pointer, return it) `f` does at its returns. The exported symbol, its parameters and the bytes
read and written are the interface's as before; the raw `f` no longer exists (no library exported
it: backend's `internal`). An interface that does anything else is left as it is.
"""
from __future__ import annotations

import functools

from torch_mlir import ir

from sprue.lowering.entry_results import _CIFACE, _gep, _member_type, _members, _not_atomic, _offsets
from sprue.lowering.mlir_util import as_operation, returns_of


def _position(op: ir.Operation) -> tuple[int, ...]:
    return tuple(ir.DenseI64ArrayAttr(op.attributes["position"]))


@functools.lru_cache(maxsize=None)
def _field_offset(struct: str, position: tuple[int, ...]) -> tuple[int, str] | None:
    """(byte offset, member type text) of the field at `position` ([k] or [k, i] into an array of
    i64) of a descriptor struct written as text; None for any other."""
    members, offsets = _members(struct), _offsets(struct)
    if members is None or offsets is None or not 1 <= len(position) <= 2 or position[0] >= len(members):
        return None
    member, offset = members[position[0]], offsets[position[0]][0]
    if len(position) == 1:
        return offset, member
    if member.startswith("array<") and member.endswith(" x i64>") and position[1] < int(member[6:].split(" ")[0]):
        return offset + 8 * position[1], "i64"
    return None


def _sources(ciface: ir.Operation, call: ir.Operation) -> list[tuple[int, tuple[int, ...] | None, str]] | None:
    """For each operand of the interface's call of the raw function: (interface parameter,
    position of the field in the descriptor it points to, or None for the parameter itself,
    descriptor struct text); None where an operand comes from anywhere else."""
    out = []
    loads: dict[ir.Value, tuple[int, str]] = {}   # each descriptor's type printed once
    for value in call.operands:
        if isinstance(value, ir.BlockArgument):
            out.append((value.arg_number, None, ""))
            continue
        extract = as_operation(value.owner)
        if extract.name != "llvm.extractvalue" or isinstance(extract.operands[0], ir.BlockArgument):
            return None
        loaded = extract.operands[0]
        if loaded not in loads:
            load = as_operation(loaded.owner)
            if load.name != "llvm.load" or not isinstance(load.operands[0], ir.BlockArgument):
                return None
            loads[loaded] = (load.operands[0].arg_number, str(loaded.type))
        param, struct = loads[loaded]
        out.append((param, _position(extract), struct))
    return out


def _epilogue(ciface: ir.Operation, call: ir.Operation) -> tuple[str, int | None] | None:
    """What the interface does after the call, as ("return", None) (returns nothing or the call's
    result) or ("store", parameter) (stores the result through its parameter, returns nothing);
    None for anything else."""
    ops = list(ciface.regions[0].blocks[0].operations)
    after = [as_operation(op) for op in ops[[as_operation(o) for o in ops].index(call) + 1:]]
    result = call.results[0] if len(call.results) == 1 else None
    if len(after) == 1 and after[0].name == "llvm.return":
        returned = list(after[0].operands)
        if returned == ([] if result is None else [result]):
            return ("return", None)
    if (len(after) == 2 and after[0].name == "llvm.store" and after[1].name == "llvm.return" and result is not None
            and not list(after[1].operands) and after[0].operands[0] == result
            and isinstance(after[0].operands[1], ir.BlockArgument) and len(list(result.uses)) == 1):
        return ("store", after[0].operands[1].arg_number)
    return None


def _descriptor_chains(block: ir.Block) -> list[ir.Operation]:
    """The insertvalue ops of the chains that build a struct from `block`'s arguments, in order
    along each chain."""
    found: list[ir.Operation] = []
    seen: set[ir.Operation] = set()
    for arg in block.arguments:
        for use in arg.uses:
            op = as_operation(use.owner)
            while op.name == "llvm.insertvalue" and op not in seen:   # down the chain
                seen.add(op)
                found.append(op)
                nxt = [as_operation(u.owner) for u in op.results[0].uses if u.operand_number == 0]
                if len(nxt) != 1:
                    break
                op = nxt[0]
    return found


def _fold_extracts(block: ir.Block) -> None:
    """Each `llvm.extractvalue` of a field that a chain of insertvalues from `block`'s arguments
    set takes that value; the chains left unused are erased."""
    chains = _descriptor_chains(block)
    extracts = [as_operation(u.owner) for op in chains for u in op.results[0].uses]
    for extract in extracts:
        if extract.name != "llvm.extractvalue":
            continue
        want, value = _position(extract), extract.operands[0]
        while not isinstance(value, ir.BlockArgument):
            insert = as_operation(value.owner)
            if insert.name != "llvm.insertvalue":
                break
            got = _position(insert)
            if got == want:
                extract.results[0].replace_all_uses_with(insert.operands[1])
                extract.erase()
                break
            if got[:len(want)] == want or want[:len(got)] == got:   # overlapping: not one field
                break
            value = insert.operands[0]
    for op in reversed(chains):
        if any(True for _ in op.results[0].uses):
            continue
        root = op.operands[0]
        op.erase()
        if not isinstance(root, ir.BlockArgument) and not any(True for _ in root.uses):
            owner = as_operation(root.owner)
            if owner.name in ("llvm.mlir.poison", "llvm.mlir.undef"):
                owner.erase()


def _read_through_pointers(fn: ir.Operation, ciface: ir.Operation, call: ir.Operation) -> bool:
    """Makes `fn` the interface (module doc); False, both untouched, where the interface does more."""
    sources, epilogue = _sources(ciface, call), _epilogue(ciface, call)
    block = fn.regions[0].blocks[0]
    if sources is None or epilogue is None or len(sources) != len(block.arguments):
        return False
    fields = [None if pos is None else _field_offset(struct, pos) for _, pos, struct in sources]
    if any(f is None and pos is not None for f, (_, pos, _) in zip(fields, sources)):
        return False
    _fold_extracts(block)
    old = len(block.arguments)
    params = [block.add_argument(a.type, fn.location) for a in ciface.regions[0].blocks[0].arguments]
    first = block.operations[0] if len(block.operations) else None
    for i, ((param, pos, _), field) in enumerate(zip(sources, fields)):
        arg = block.arguments[i]
        if pos is None:
            arg.replace_all_uses_with(params[param])
        elif any(True for _ in arg.uses):
            with ir.InsertionPoint(first), fn.location:
                offset, member = field
                loaded = ir.Operation.create("llvm.load", results=[_member_type(member)],
                                             operands=[_gep(params[param], offset)], attributes=_not_atomic())
            arg.replace_all_uses_with(loaded.results[0])
    for i in reversed(range(old)):
        block.erase_argument(i)
    if epilogue[0] == "store":
        out = params[epilogue[1]]
        for ret in returns_of(fn):
            with ir.InsertionPoint(ret), ret.location:
                ir.Operation.create("llvm.store", operands=[ret.operands[0], out], attributes=_not_atomic())
                ir.Operation.create("llvm.return")
            ret.erase()
    for name in ("function_type", "arg_attrs", "res_attrs"):
        if name in ciface.attributes:
            fn.attributes[name] = ciface.attributes[name]
        elif name in fn.attributes:
            del fn.attributes[name]
    for name in ("always_inline", "llvm.emit_c_interface"):
        if name in fn.attributes:
            del fn.attributes[name]
    fn.attributes["sym_name"] = ciface.attributes["sym_name"]
    ciface.erase()
    return True


def read_entry_arguments(module: ir.Module) -> None:
    """Each entry function whose C interface only unpacks descriptors, calls it and stores or
    returns its result becomes that interface (module doc). Only its interface calls an entry
    function (func-to-llvm made the one from the other, and the parts and runs outlined from its
    body call what was outlined): the interface's body is all there is to read, not the module
    (a walk over a deep training step's ops was a third of this rewrite's time)."""
    functions = {ir.StringAttr(op.attributes["sym_name"]).value: op
                 for op in map(as_operation, module.body.operations) if op.name == "llvm.func"}
    for name, ciface in functions.items():
        raw = name[len(_CIFACE):] if name.startswith(_CIFACE) else None
        fn = functions.get(raw) if raw else None
        if fn is None or not ciface.regions[0].blocks or not fn.regions[0].blocks:
            continue
        sites = [op for op in map(as_operation, ciface.regions[0].blocks[0].operations)
                 if op.name == "llvm.call" and "callee" in op.attributes
                 and ir.FlatSymbolRefAttr(op.attributes["callee"]).value == raw]
        if len(sites) == 1:
            _read_through_pointers(fn, ciface, sites[0])


__all__ = ["read_entry_arguments"]
