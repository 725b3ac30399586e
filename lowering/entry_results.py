"""Several results passed through memory, not as one struct: an entry function's through its C
interface's result pointer, an internal function's (parts, runs) through its caller's stack.

MLIR's func-to-llvm returns several results as one struct: the function builds it with an
`llvm.insertvalue` per result and the caller takes it apart with an `llvm.extractvalue` per
result (a C interface, `_mlir_ciface_<name>`, stores it through the pointer it is given). Each of
those ops names the whole struct type, so the LLVM IR of a function with n results is O(n^2)
text: a 300-layer training step (300 gradients) printed 5 MB for its entry function alone, and
translating, reading and parsing that text grew as fast (a function of 2,000 results spent most
of its compile time there); a part returning 64 activations, called 20 times, cost LLVM's IPSCCP
38 s.

Here, on the LLVM dialect:
- the entry function takes the result pointer as one more parameter and stores each result at
  its offset in the struct, where it returned it: the same bytes in the same places, and no
  aggregate at all; its C interface passes its own result pointer on;
- an internal function returning MANY_RESULTS or more does the same through a pointer to one
  stack buffer of each caller (at its entry, as big as the largest such struct it receives), and
  each call loads the results it uses right after it, before the next call writes there.
Offsets follow the x86-64 / AArch64 data layout (scalars aligned to their size, structs to their
widest member); a function whose results or calls look otherwise is left as it is.
"""
from __future__ import annotations

import functools
import re
from typing import Callable

from torch_mlir import ir

from sprue.lowering.allocation import split_top_level
from sprue.lowering.mlir_util import as_operation, enclosing, ops_where, returns_of

_CIFACE = "_mlir_ciface_"
# Internal functions returning this many results or more return them through memory; their
# struct may be at most MAX_RESULT_BYTES (a stack buffer in each caller: allocation.py refuses
# stack buffers over 64 KiB).
MANY_RESULTS = 8
MAX_RESULT_BYTES = 32 << 10
_FIELD = re.compile(r"ptr|i64|array<(\d+) x i64>")


def _members(struct: str) -> list[str] | None:
    """The member types of `!llvm.struct<(...)>` text, split at its top level; None otherwise."""
    if not (struct.startswith("!llvm.struct<(") and struct.endswith(")>")):
        return None
    return split_top_level(struct[len("!llvm.struct<("):-2])


_SCALARS = {"ptr": 8, "i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8}


def _layout(t: str) -> tuple[int, int] | None:
    """(size, alignment) in bytes of an LLVM dialect type written as text (no `!llvm.` prefix
    inside structs), by the x86-64 and AArch64 data layouts: scalars aligned to their size, arrays
    to their element, structs to their widest member and padded to it; None for any other type."""
    t = t.removeprefix("!llvm.")
    if t in _SCALARS:
        return _SCALARS[t], _SCALARS[t]
    m = re.fullmatch(r"array<(\d+) x (.+)>", t)
    if m:
        inner = _layout(m.group(2))
        return None if inner is None else (int(m.group(1)) * inner[0], inner[1])
    if t.startswith("struct<(") and t.endswith(")>"):
        offsets = _offsets(f"!llvm.{t}")
        if offsets is None:
            return None
        end, align = offsets[-1]
        return -(-end // align) * align, align
    return None


def _offsets(struct: str) -> list[tuple[int, int]] | None:
    """Each member's offset in `!llvm.struct<(...)>` text, then (the end of the last, the struct's
    alignment); None where a member's layout is unknown."""
    members = _members(struct)
    return None if members is None else member_offsets(members)


def member_offsets(members: list[str]) -> list[tuple[int, int]] | None:
    """Each member's offset in a struct of `members` (types as text), then (the end of the last,
    the struct's alignment); None where a member's layout is unknown."""
    out, end, align = [], 0, 1
    for member in members:
        lay = _layout(member)
        if lay is None:
            return None
        size, a = lay
        end = -(-end // a) * a
        out.append((end, a))
        end += size
        align = max(align, a)
    out.append((end, align))
    return out


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


def _store_results(fn: ir.Operation, offsets: list[int]) -> bool:
    """Rewrites `fn` (a result struct of members at `offsets`) to store them through a new last
    parameter; False, and `fn` untouched, where a return is not a plain insertvalue chain."""
    count = len(offsets)
    returns = returns_of(fn)
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
    gep, plain = _addresses(), _not_atomic()
    for ret, values in zip(returns, chains):
        with ir.InsertionPoint(ret), ret.location:
            for offset, value in zip(offsets, values):
                for at, leaf in _leaves(value, offset):
                    ir.Operation.create("llvm.store", operands=[leaf, gep(out, at)], attributes=plain)
            ir.Operation.create("llvm.return")
        built = ret.operands[0]
        ret.erase()
        _erase_chain(built)
        for value in dict.fromkeys(values):   # (a value returned twice is erased once)
            _erase_chain(value)
    return True


def _leaves(value: ir.Value, offset: int) -> list[tuple[int, ir.Value]]:
    """(byte offset, scalar) for each member of the struct `value` at `offset` (a memref
    descriptor), when a chain of llvm.insertvalue ops puts every one in; else [(offset, value)].
    Stored member by member, the glue's module has no aggregate stores, which LLVM's instruction
    selector at O0 (the glue's: codegen_levels.py) cannot select fast: a 300-result training step's
    glue emitted in 78 ms with them, 19 ms once InstCombine (46 ms) had taken them apart."""
    leaves = _scalar_offsets(str(value.type).removeprefix("!llvm."))
    if not leaves or () in leaves:   # an unknown layout, or a scalar
        return [(offset, value)]
    found: dict[tuple[int, ...], ir.Value] = {}
    v = value
    while True:
        if isinstance(v.owner, ir.Block):
            return [(offset, value)]
        op = as_operation(v.owner)
        if op.name in ("llvm.mlir.poison", "llvm.mlir.undef"):
            break
        position = tuple(ir.DenseI64ArrayAttr(op.attributes["position"])) if op.name == "llvm.insertvalue" else None
        if position not in leaves:   # another op, or a whole member inserted at once
            return [(offset, value)]
        found.setdefault(position, op.operands[1])   # (walking back: the last insert of a position wins)
        v = op.operands[0]
    if len(found) != len(leaves):
        return [(offset, value)]
    return [(offset + leaves[p], found[p]) for p in sorted(found, key=leaves.__getitem__)]


@functools.lru_cache(maxsize=64)
def _scalar_offsets(t: str) -> dict[tuple[int, ...], int] | None:
    """The scalars of a type written as text inside a struct (`ptr`, `i64`, `array<2 x i64>`,
    `struct<(...)>`), by position (as llvm.insertvalue and llvm.extractvalue give it) -> byte
    offset; None where the layout is unknown."""
    if t in _SCALARS:
        return {(): 0}
    array = re.fullmatch(r"array<(\d+) x (.+)>", t)
    if array is not None:
        inner, layout = _scalar_offsets(array.group(2)), _layout(array.group(2))
        if inner is None or layout is None:
            return None
        return {(k, *p): k * layout[0] + o for k in range(int(array.group(1))) for p, o in inner.items()}
    members = _members(f"!llvm.{t}")
    offsets = None if members is None else member_offsets(members)
    if offsets is None:
        return None
    out: dict[tuple[int, ...], int] = {}
    for i, (member, (at, _)) in enumerate(zip(members, offsets)):
        inner = _scalar_offsets(member)
        if inner is None:
            return None
        out.update({(i, *p): at + o for p, o in inner.items()})
    return out


def _not_atomic() -> dict[str, ir.Attribute]:
    """The attributes of a plain (non-atomic) llvm.load or llvm.store."""
    return {"ordering": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)}


def _gep(base: ir.Value, offset: int) -> ir.Value:
    """`base + offset` bytes (llvm.getelementptr inbounds i8), at the insertion point."""
    return _addresses()(base, offset)


def _addresses() -> Callable[[ir.Value, int], ir.Value]:
    """_gep with its type and attributes made once, for a loop making thousands (a 300-result
    entry's stores: ~5,000)."""
    ptr, attributes = ir.Type.parse("!llvm.ptr"), {
        "elem_type": ir.TypeAttr.get(ir.IntegerType.get_signless(8)),
        "noWrapFlags": ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 3)}   # inbounds
    create, indices = ir.Operation.create, ir.DenseI32ArrayAttr.get

    def gep(base: ir.Value, offset: int) -> ir.Value:
        return create("llvm.getelementptr", results=[ptr], operands=[base],
                      attributes={**attributes, "rawConstantIndices": indices([offset])}).results[0]
    return gep


def _call_passing(call: ir.Operation, extra: ir.Value) -> ir.Operation:
    """A copy of `call` that also passes `extra` and returns nothing, before it."""
    attrs = {a.name: a.attr for a in (call.attributes[i] for i in range(len(call.attributes)))}
    operands = list(call.operands) + [extra]
    attrs["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get([len(operands), 0])
    with ir.InsertionPoint(call), call.location:
        return ir.Operation.create("llvm.call", operands=operands, attributes=attrs)


def _result_plan(fn: ir.Operation) -> tuple[str, list[int], int] | None:
    """(struct type, member offsets, size) of the struct `fn` returns, where every member's layout is
    known; None for a function returning anything else."""
    returns = returns_of(fn)
    if not returns or len(returns[0].operands) != 1:
        return None
    struct = str(returns[0].operands[0].type)
    offsets = _offsets(struct)
    if offsets is None:
        return None
    end, align = offsets[-1]
    return struct, [o for o, _ in offsets[:-1]], -(-end // align) * align


def _store_entry_results(functions: dict[str, ir.Operation]) -> None:
    """Each function a C interface calls and that returns several memrefs stores them through the
    interface's result pointer instead (module doc)."""
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
        plan = _result_plan(fn)
        if plan is None or len(plan[1]) < 2 or not _store_results(fn, plan[1]):
            continue
        _call_passing(call, store.operands[1])
        store.erase()
        call.erase()


def _calls_of(module: ir.Module) -> dict[str, list[ir.Operation]]:
    calls: dict[str, list[ir.Operation]] = {}
    for op in ops_where(module.operation, lambda op: op.name == "llvm.call" and "callee" in op.attributes):
        calls.setdefault(ir.FlatSymbolRefAttr(op.attributes["callee"]).value, []).append(op)
    return calls


def _extracted(call: ir.Operation, members: list[str], offsets: list[int]) -> list[tuple[ir.Operation, int]] | None:
    """(extractvalue op, byte offset of what it reads) for every use of `call`'s result, a struct
    of `members` at `offsets`; None if one is not an llvm.extractvalue of a member, or of a part
    of one (MLIR's canonicalizer folds an extractvalue of an extractvalue into one of both)."""
    found = []
    for use in call.results[0].uses:
        op = as_operation(use.owner)
        if op.name != "llvm.extractvalue":
            return None
        position = tuple(ir.DenseI64ArrayAttr(op.attributes["position"]))
        if not 0 <= position[0] < len(members):
            return None
        inner = _offset_within(members[position[0]], position[1:])
        if inner is None:
            return None
        found.append((op, offsets[position[0]] + inner))
    return found


@functools.lru_cache(maxsize=256)
def _offset_within(member: str, position: tuple[int, ...]) -> int | None:
    """The byte offset of what `position` names inside a struct member written as text (a scalar,
    or the first of the scalars of an array or struct it names), or None where there is none or
    the layout is unknown."""
    found = [o for p, o in (_scalar_offsets(member) or {}).items() if p[:len(position)] == position]
    return min(found) if found else None


def _buffer_of(caller: ir.Operation, size: int, buffers: dict[ir.Operation, list]) -> ir.Value:
    """The caller's one stack buffer for the results of its calls (at its entry, grown to `size`):
    each call's results are loaded right after it, before the next call writes there."""
    if caller not in buffers:
        entry = caller.regions[0].blocks[0]
        i64 = ir.IntegerType.get_signless(64)
        with ir.InsertionPoint.at_block_begin(entry), caller.location:
            one = ir.Operation.create("llvm.mlir.constant", results=[i64], attributes={"value": ir.IntegerAttr.get(i64, 1)})
            alloca = ir.Operation.create("llvm.alloca", results=[ir.Type.parse("!llvm.ptr")], operands=[one.results[0]],
                                         attributes={"elem_type": ir.TypeAttr.get(ir.Type.parse("!llvm.array<1 x i8>")),
                                                     "alignment": ir.IntegerAttr.get(i64, 16)})
        buffers[caller] = [alloca, 1]
    alloca, known = buffers[caller]
    if size > known:
        alloca.attributes["elem_type"] = ir.TypeAttr.get(ir.Type.parse(f"!llvm.array<{size} x i8>"))
        buffers[caller][1] = size
    return alloca.results[0]


def _load_internal_results(module: ir.Module, functions: dict[str, ir.Operation]) -> None:
    """Each internal function returning a struct of at least MANY_RESULTS members (outlined nests,
    parts, runs) stores them through a pointer to its caller's stack buffer, and each call loads
    them back right after it (module doc)."""
    plans = {}
    for name, fn in functions.items():
        if "linkage" not in fn.attributes or "internal" not in str(fn.attributes["linkage"]) or not fn.regions[0].blocks:
            continue
        plan = _result_plan(fn)
        if plan is not None and len(plan[1]) >= MANY_RESULTS and plan[2] <= MAX_RESULT_BYTES:
            plans[name] = plan
    calls = _calls_of(module) if plans else {}   # (a walk of the whole module)
    buffers: dict[ir.Operation, list] = {}
    for name, (struct, offsets, size) in plans.items():
        fn = functions[name]
        sites = calls.get(name, [])
        members = _members(struct)
        uses = [_extracted(call, members, offsets) for call in sites]
        if any(u is None for u in uses) or not _store_results(fn, offsets):
            continue
        gep, plain = _addresses(), _not_atomic()
        for call, extracts in zip(sites, uses):
            buffer = _buffer_of(enclosing(call, "llvm.func"), size, buffers)
            _call_passing(call, buffer)
            loaded: dict[tuple[int, str], ir.Value] = {}
            with ir.InsertionPoint(call), call.location:   # right after the new call, before the next
                for op, at in sorted(extracts, key=lambda e: e[1]):
                    t = op.results[0].type
                    if (at, str(t)) not in loaded:
                        loaded[at, str(t)] = ir.Operation.create("llvm.load", results=[t], operands=[gep(buffer, at)],
                                                                 attributes=plain).results[0]
            for op, at in extracts:
                op.results[0].replace_all_uses_with(loaded[at, str(op.results[0].type)])
                op.erase()
            call.erase()


def _member_type(t: str) -> ir.Type:
    """The type of a struct member written as text inside the struct (`ptr`, `i64`, `struct<...>`)."""
    if t in _SCALARS:
        return ir.Type.parse("!llvm.ptr" if t == "ptr" else t)
    return ir.Type.parse(f"!llvm.{t}")


def store_entry_results(module: ir.Module) -> None:
    """Results through memory, not as one struct (module doc): the entry functions' through their C
    interface's pointer, internal functions' with many results through their caller's stack buffer."""
    functions = {ir.StringAttr(op.attributes["sym_name"]).value: op
                 for op in map(as_operation, module.body.operations) if op.name == "llvm.func"}
    _store_entry_results(functions)
    _load_internal_results(module, functions)


__all__ = ["store_entry_results"]
