"""Let loop bodies update their carried tensors in place.

stablehlo-legalize-to-linalg gives every elementwise op a fresh `tensor.empty` destination, so a
loop body computing `x = r * x * (1 - x)` yields a new tensor each trip. One-shot bufferization
then cannot treat the loop's carried buffer as updated in place: it allocates per trip, and for
scf.while it also copies every carry whose yield is not equivalent to its block argument in the
"before" region, on every trip.

The rewrite here, run on the linalg IR just before bufferization, makes an elementwise
linalg.generic whose result becomes the next value of a carry write into that carry instead
(`outs(%carry)` for `outs(tensor.empty())`), when nothing reads the carry after it in the trip.
It never changes meaning — the payload does not read its output, and one-shot bufferization still
copies if writing in place would clobber a value read later — it only says which buffer to reuse.

"After it in the trip": every other use of the carry must run before the generic (a pure read,
or a view whose own uses run before), or sit in another branch of a conditional that holds it.
When a read comes after it (`c, y = c + x, c * x`), the generic is first moved down to just
before the first use of its result, which is always legal in SSA form.

Counted loops (for_loop, scan) are scf.for by now and general ones scf.while; both benefit: without
the rewrite, scf.for allocates a new carry per trip, and scf.while also copies it.
"""
from __future__ import annotations

from torch_mlir import ir

_BRANCHES = {"scf.if", "scf.index_switch"}                   # regions exclusive of each other
_PURE_READERS = {"linalg.generic", "tensor.extract"}         # read an operand, alias none of it
_SHAPE_READERS = {"tensor.dim"}                              # read only its sizes (a `?` dim), never elements
_RESHAPES = {"tensor.collapse_shape", "tensor.expand_shape"}
_VIEWS = {"tensor.extract_slice", *_RESHAPES}                 # alias their operand


def _operation(x) -> ir.Operation | None:
    """The Operation of an op or op view (value owners may be either)."""
    return getattr(x, "operation", x) if x is not None else None


def _carried_position(v: ir.Value) -> tuple[ir.Block, int] | None:
    """(loop body block, index in its terminator) when v is a carried argument of a loop body."""
    if not isinstance(v, ir.BlockArgument):
        return None
    block = v.owner
    loop = _operation(block.owner)
    if loop is None:
        return None
    if loop.name == "scf.while" and block == loop.regions[1].blocks[0]:
        return block, v.arg_number
    if loop.name == "scf.for" and v.arg_number > 0:      # argument 0 is the induction variable
        return block, v.arg_number - 1
    return None


def _flows_to(value: ir.Value, block: ir.Block, position: int) -> bool:
    """value is what `block`'s terminator yields at `position`, directly, reshaped, or out of
    scf.if branches."""
    for _ in range(64):   # one step per reshape or enclosing conditional
        step = None
        for use in value.uses:
            user = _operation(use.owner)
            if user.name in _RESHAPES:
                step = user.results[0]
                continue
            if user.name != "scf.yield":
                continue
            if user.block == block and use.operand_number == position:
                return True
            parent = _operation(user.parent)
            if parent is not None and parent.name in _BRANCHES:
                step = parent.results[use.operand_number]
        if step is None:
            return False
        value = step
    return False


def _path(op: ir.Operation, top: ir.Block) -> list[ir.Operation]:
    """The ops enclosing `op` (itself included) from the one directly in `top` down to `op`."""
    chain = [op]
    while chain[-1].block != top:
        parent = _operation(chain[-1].parent)
        if parent is None:
            return []
        chain.append(parent)
    return chain[::-1]


def _settled_before(use_op: ir.Operation, op: ir.Operation, top: ir.Block) -> str:
    """'before' if use_op runs before op in a trip of `top`, 'exclusive' if they sit in different
    branches of one conditional, else 'after'."""
    a, b = _path(use_op, top), _path(op, top)
    if not a or not b:
        return "after"
    for x, y in zip(a, b):
        if x == y:
            continue
        if x.block != y.block:        # first divergence is across regions of their common parent
            parent = _operation(x.parent)
            return "exclusive" if parent is not None and parent.name in _BRANCHES else "after"
        return "before" if x.is_before_in_block(y) else "after"
    return "after"                     # one encloses the other


def _done_before(v: ir.Value, op: ir.Operation, top: ir.Block) -> bool:
    """Writing v's buffer at op clobbers nothing still to be read (see the module doc)."""
    for use in v.uses:
        user = _operation(use.owner)
        if user == op or user.name in _SHAPE_READERS:  # writing in place keeps the sizes
            continue
        where = _settled_before(user, op, top)
        if where == "exclusive":
            continue
        if where != "before":
            return False
        if user.name in _VIEWS:
            if not _done_before(user.results[0], op, top):
                return False
        elif user.name not in _PURE_READERS or _writes(user, use.operand_number):
            return False
    return True


def _writes(op: ir.Operation, operand: int) -> bool:
    """The operand is a destination (`outs`) of a linalg op."""
    return op.name.startswith("linalg.") and operand >= _segments(op)[0]


def _segments(op: ir.Operation) -> list[int]:
    """(inputs, outputs) of a linalg op."""
    return list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))


def _tie(op: ir.Operation) -> None:
    n_in, n_out = _segments(op)
    # all parallel (read as text: iterating the elements would import torch_mlir.dialects.linalg)
    if n_out != 1 or "reduction" in str(op.attributes["iterator_types"]):
        return
    out = op.operands[n_in]
    maker = _operation(out.owner) if isinstance(out, ir.OpResult) else None
    if maker is None or maker.name != "tensor.empty":
        return
    if len(list(op.regions[0].blocks[0].arguments[n_in].uses)):
        return     # the payload reads its output
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    for k in range(n_in):
        v = op.operands[k]
        carry = _unreshaped(v)
        carried = _carried_position(carry)
        if carried is None or v.type != out.type or maps[k] != maps[n_in]:
            continue
        block, position = carried
        if not _flows_to(op.results[0], block, position):
            continue
        # A read of the carry placed after op blocks the reuse; moving op down past it may help.
        safe = _done_before(carry, op, block) or (_sink(op) and _done_before(carry, op, block))
        if safe:
            op.operands[n_in] = v
            return


def _unreshaped(v: ir.Value) -> ir.Value:
    """v with reshapes peeled off (the fusion pass works on reshaped views of carries)."""
    while isinstance(v, ir.OpResult) and _operation(v.owner).name in _RESHAPES:
        v = _operation(v.owner).operands[0]
    return v


def _sink(op: ir.Operation) -> bool:
    """Move op (with the reshapes of its result right after it) down to just before the first other
    op of its block that uses them, so that reads of its inputs placed after it can run first.
    Always legal: its operands are defined above its old place. Returns whether it moved."""
    chain, users, frontier = [op], [], list(op.results)
    while frontier:
        for use in frontier.pop().uses:
            user = _operation(use.owner)
            if user.block == op.block and user.name in _RESHAPES:
                chain.append(user)
                frontier.append(user.results[0])
            else:
                path = _path(user, op.block)
                if not path:
                    return False
                users.append(path[0])
    if not users:
        return False
    first = users[0]
    for u in users[1:]:
        if u.is_before_in_block(first):
            first = u
    ops = list(op.block.operations)
    if ops.index(first) <= ops.index(op) + len(chain):   # nothing in between to let pass
        return False
    for c in chain:
        c.move_before(first)
    return True


def tie_loop_outputs(module: ir.Module) -> None:
    """Rewrite every eligible elementwise linalg.generic inside a loop body (see the module doc)."""
    generics: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "linalg.generic":
            generics.append(op)
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    for op in generics:
        _tie(op)


__all__ = ["tie_loop_outputs"]
