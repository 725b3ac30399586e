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

from sprue.lowering.mlir_util import as_operation, ops_where

_BRANCHES = {"scf.if", "scf.index_switch"}                   # regions exclusive of each other
_PURE_READERS = {"linalg.generic", "tensor.extract"}         # read an operand, alias none of it
_SHAPE_READERS = {"tensor.dim"}                              # read only its sizes (a `?` dim), never elements
_RESHAPES = {"tensor.collapse_shape", "tensor.expand_shape"}
_VIEWS = {"tensor.extract_slice", *_RESHAPES}                 # alias their operand


def _carried_position(v: ir.Value) -> tuple[ir.Block, int] | None:
    """(loop body block, index in its terminator) when v is a carried argument of a loop body."""
    if not isinstance(v, ir.BlockArgument):
        return None
    block = v.owner
    loop = as_operation(block.owner)
    if loop is None:
        return None
    if loop.name == "scf.while" and block == loop.regions[1].blocks[0]:
        # The body's argument j is what the condition region forwards at j (scf.condition's operand
        # j + 1); the body's yield feeds the condition region's arguments. Where the condition
        # forwards its own argument k, argument j is the carry the yield's operand k becomes (a
        # while whose condition was computed at the end of the body forwards them shifted by its
        # flag: the run-time-size Newton iteration's carry was copied into a new buffer each trip).
        before = loop.regions[0].blocks[0]
        forwarded = list(before.operations)[-1].operands[1 + v.arg_number]
        if isinstance(forwarded, ir.BlockArgument) and forwarded.owner == before:
            return block, forwarded.arg_number
        return None
    if loop.name == "scf.for" and v.arg_number > 0:      # argument 0 is the induction variable
        return block, v.arg_number - 1
    return None


def _flows_to(value: ir.Value, block: ir.Block, position: int) -> bool:
    """value is what `block`'s terminator yields at `position`, directly, reshaped, or out of
    scf.if branches."""
    for _ in range(64):   # one step per reshape or enclosing conditional
        step = None
        for use in value.uses:
            user = as_operation(use.owner)
            if user.name in _RESHAPES:
                step = user.results[0]
                continue
            if user.name != "scf.yield":
                continue
            if user.block == block and use.operand_number == position:
                return True
            parent = as_operation(user.parent)
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
        parent = as_operation(chain[-1].parent)
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
            parent = as_operation(x.parent)
            return "exclusive" if parent is not None and parent.name in _BRANCHES else "after"
        return "before" if x.is_before_in_block(y) else "after"
    return "after"                     # one encloses the other


def _done_before(v: ir.Value, op: ir.Operation, top: ir.Block) -> bool:
    """Writing v's buffer at op clobbers nothing still to be read (see the module doc)."""
    for use in v.uses:
        user = as_operation(use.owner)
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
    maker = as_operation(out.owner) if isinstance(out, ir.OpResult) else None
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
    while isinstance(v, ir.OpResult) and as_operation(v.owner).name in _RESHAPES:
        v = as_operation(v.owner).operands[0]
    return v


def _sink(op: ir.Operation) -> bool:
    """Move op (with the reshapes of its result right after it) down to just before the first other
    op of its block that uses them, so that reads of its inputs placed after it can run first.
    Always legal: its operands are defined above its old place. Returns whether it moved."""
    chain, users, frontier = [op], [], list(op.results)
    while frontier:
        for use in frontier.pop().uses:
            user = as_operation(use.owner)
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


# -- prefix slices of elementwise results -----------------------------------------------------------
def _dense(op: ir.Operation, name: str) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def _slice_sizes(op: ir.Operation) -> list[ir.Value | int]:
    """The sizes of a tensor.extract_slice or insert_slice: an int where static, else its size
    operand (after the tensor operands, one or two, and the offsets)."""
    segments = _segments(op)
    first = sum(segments[:-3]) + segments[-3]
    dynamic = iter(list(op.operands)[first:first + segments[-2]])
    return [next(dynamic) if ir.ShapedType.is_dynamic_size(s) else s for s in _dense(op, "static_sizes")]


def _input_sizes(amap: ir.AffineMap, sizes: list) -> list | None:
    """The sizes of an input read through `amap` when the loops run over `sizes` (None unless each
    result of the map is a loop dim or the constant 0 of a broadcast unit dim)."""
    out = []
    for e in amap.results:
        if isinstance(e, ir.AffineDimExpr):
            out.append(sizes[e.position])
        elif isinstance(e, ir.AffineConstantExpr) and e.value == 0:
            out.append(1)
        else:
            return None
    return out


def _empty_sizes(empty: ir.Operation) -> list[ir.Value | int]:
    shape = ir.RankedTensorType(empty.results[0].type).shape
    dynamic = iter(list(empty.operands))
    return [next(dynamic) if ir.ShapedType.is_dynamic_size(s) else s for s in shape]


def _as_value(size: ir.Value | int) -> ir.Value:
    if isinstance(size, int):
        return ir.Operation.create("arith.constant", results=[ir.IndexType.get()],
                                   attributes={"value": ir.IntegerAttr.get(ir.IndexType.get(), size)}).result
    return size


def _prefix_slice(x: ir.Value, sizes: list) -> ir.Value:
    """tensor.extract_slice x[0, ...][sizes][1, ...] (same rank)."""
    t = ir.RankedTensorType(x.type)
    dyn = ir.ShapedType.get_dynamic_size()
    static = [dyn if isinstance(s, ir.Value) else s for s in sizes]
    values = [s for s in sizes if isinstance(s, ir.Value)]
    rank = len(sizes)
    attrs = {"static_offsets": ir.DenseI64ArrayAttr.get([0] * rank), "static_sizes": ir.DenseI64ArrayAttr.get(static),
             "static_strides": ir.DenseI64ArrayAttr.get([1] * rank),
             "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 0, len(values), 0])}
    return ir.Operation.create("tensor.extract_slice", results=[ir.RankedTensorType.get(static, t.element_type)],
                               operands=[x, *values], attributes=attrs).result


def _sliceable(s: ir.Operation) -> ir.Operation | None:
    """The elementwise linalg.generic whose result a prefix slice `s` takes, if the slice can be
    computed by running it over the slice only (see bubble_prefix_slices)."""
    src = s.operands[0]
    g = as_operation(src.owner) if isinstance(src, ir.OpResult) else None
    if g is None or g.name != "linalg.generic" or g.block != s.block:
        return None
    if any(_dense(s, "static_offsets")) or any(v != 1 for v in _dense(s, "static_strides")):
        return None
    if ir.RankedTensorType(s.results[0].type).rank != ir.RankedTensorType(src.type).rank:
        return None     # rank-reducing
    n_in, n_out = _segments(g)
    if n_out != 1 or "reduction" in str(g.attributes["iterator_types"]):
        return None
    init = g.operands[n_in]
    empty = as_operation(init.owner) if isinstance(init, ir.OpResult) else None
    if empty is None or empty.name != "tensor.empty" or len(list(g.regions[0].blocks[0].arguments[n_in].uses)):
        return None
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(g.attributes["indexing_maps"])]
    if maps[n_in] != ir.AffineMap.get_identity(maps[n_in].n_dims):
        return None
    if any(_input_sizes(m, [0] * m.n_dims) is None for m in maps[:n_in]):
        return None
    if any(as_operation(u.owner) != s and not _constant_dim(as_operation(u.owner)) for u in src.uses):
        return None
    return g


def _constant_dim(op: ir.Operation) -> bool:
    """op is a tensor.dim at a constant index."""
    if op.name not in _SHAPE_READERS:
        return False
    at = op.operands[1]
    return isinstance(at, ir.OpResult) and as_operation(at.owner).name == "arith.constant"


def _bubble(s: ir.Operation, g: ir.Operation) -> None:
    n_in = _segments(g)[0]
    src = g.results[0]
    empty = as_operation(g.operands[n_in].owner)
    full = _empty_sizes(empty)
    for use in list(src.uses):                     # the result's sizes are the init's
        dim = as_operation(use.owner)
        if dim != s:
            with ir.InsertionPoint(dim), dim.location:
                index_op = as_operation(dim.operands[1].owner)
                d = ir.IntegerAttr(index_op.attributes["value"]).value
                dim.results[0].replace_all_uses_with(_as_value(full[d]))
            dim.erase()
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(g.attributes["indexing_maps"])]
    with ir.InsertionPoint(s), s.location:
        sizes = _slice_sizes(s)
        for k in range(n_in):
            x = g.operands[k]
            if isinstance(x.type, ir.RankedTensorType):
                g.operands[k] = _prefix_slice(x, _input_sizes(maps[k], sizes))
        t = ir.RankedTensorType(s.results[0].type)
        g.operands[n_in] = ir.Operation.create("tensor.empty", results=[t],
                                               operands=[v for v in sizes if isinstance(v, ir.Value)]).result
    src.set_type(s.results[0].type)
    g.move_before(s)
    s.results[0].replace_all_uses_with(src)
    s.erase()
    if not len(list(empty.results[0].uses)):
        empty.erase()


def bubble_prefix_slices(module: ir.Module) -> None:
    """A slice [0, n) of an elementwise result is computed by running the op over [0, n) only
    (MLIR's linalg bubble-up-extract-slice pattern, for prefixes). Why: a dynamic_update_slice
    of a row computed in the body of a scan writes `min(row size, dim)` elements, clamped for
    memory safety (legalize_dynamic.py), so with `?` sizes it inserts a slice of the row; as a
    slice of a fresh buffer that is a copy per trip through MLIR's generic memrefCopy, element by
    element. Computed over the slice, the row has the inserted size, and eliminate-empty-tensors
    then has the op write it straight into the output (as it does for static shapes)."""
    slices = ops_where(module.operation, lambda op: op.name == "tensor.extract_slice")
    for s in slices:
        g = _sliceable(s)
        if g is not None:
            _bubble(s, g)


def _known_sizes(op: ir.Operation) -> list[ir.Value | int] | None:
    """The sizes of the result of a tensor.empty or tensor.expand_shape, from its operands."""
    if op.name == "tensor.empty":
        return _empty_sizes(op)
    if op.name == "tensor.expand_shape":
        dynamic = iter(list(op.operands)[1:])
        return [next(dynamic) if ir.ShapedType.is_dynamic_size(s) else s for s in _dense(op, "static_output_shape")]
    return None


def fold_known_dims(module: ir.Module) -> None:
    """tensor.dim of a tensor.empty or expand_shape -> the size it was built with, and the empty
    tensors and reshapes then unused are erased. Reshape fusion (linalg-fuse-elementwise-ops) sizes
    a new `?` buffer by the dim of an expanded empty tensor; left alone, bufferization allocates
    that empty tensor on every trip of a loop only to read its size."""
    dims = ops_where(module.operation, lambda op: op.name == "tensor.dim")
    for dim in dims:
        src, at = dim.operands[0], dim.operands[1]
        maker = as_operation(src.owner) if isinstance(src, ir.OpResult) else None
        sizes = _known_sizes(maker) if maker is not None else None
        index_op = as_operation(at.owner) if isinstance(at, ir.OpResult) else None
        if sizes is None or index_op is None or index_op.name != "arith.constant":
            continue
        size = sizes[ir.IntegerAttr(index_op.attributes["value"]).value]
        if isinstance(size, ir.Value) and not _dominates(size, dim):
            continue
        with ir.InsertionPoint(dim), dim.location:
            dim.results[0].replace_all_uses_with(_as_value(size))
        dim.erase()
        while maker is not None and maker.name in ("tensor.empty", "tensor.expand_shape") \
                and not len(list(maker.results[0].uses)):
            src = maker.operands[0] if maker.name == "tensor.expand_shape" else None
            maker.erase()
            maker = as_operation(src.owner) if isinstance(src, ir.OpResult) else None


def _dominates(v: ir.Value, op: ir.Operation) -> bool:
    """v is defined before op in op's block or in a block enclosing it."""
    owner = v.owner
    block = owner if isinstance(owner, ir.Block) else as_operation(owner).block
    at = op
    while at is not None:
        if at.block == block:
            return isinstance(owner, ir.Block) or as_operation(owner).is_before_in_block(at)
        at = as_operation(at.parent)
    return False


def _fresh_empty(v: ir.Value) -> ir.Value | None:
    """A new copy of v, placed before its uses, when v is a tensor.empty or a tensor.cast of one."""
    chain = []
    while isinstance(v, ir.OpResult) and as_operation(v.owner).name == "tensor.cast":
        chain.append(as_operation(v.owner))
        v = as_operation(v.owner).operands[0]
    if not isinstance(v, ir.OpResult) or as_operation(v.owner).name != "tensor.empty":
        return None
    new = as_operation(v.owner).clone(ip=ir.InsertionPoint(as_operation(v.owner)))
    for cast in reversed(chain):
        copy = cast.clone(ip=ir.InsertionPoint(cast))
        copy.operands[0] = new.results[0]
        new = copy
    return new.results[0]


def split_shared_yields(module: ir.Module) -> None:
    """A branch yielding one empty tensor for several results (the entry checks' `else`, whose
    empty results CSE merged) gets an empty tensor per result. One-shot bufferization takes the
    results of a conditional to alias when one branch yields the same value for them, so a
    result computed in place of a dying input in the other branch was a conflict there: a dynamic
    Black-Scholes allocated a third 16 MB buffer the static one does without."""
    yields = ops_where(module.operation,
                       lambda op: op.name == "scf.yield" and as_operation(op.parent).name in _BRANCHES)
    for op in yields:
        values = list(op.operands)
        for i, v in enumerate(values):
            if isinstance(v.type, ir.RankedTensorType) and any(v == w for w in values[:i]):
                fresh = _fresh_empty(v)
                if fresh is not None:
                    op.operands[i] = fresh


def _writers(value: ir.Value) -> list[tuple[ir.Operation, int]]:
    """The ops that take `value` as a destination: (op, operand number), in use order."""
    return [(owner, use.operand_number) for use in value.uses
            for owner in [as_operation(use.owner)]
            if "operandSegmentSizes" in owner.attributes and _writes(owner, use.operand_number)
            or owner.name == "scf.for" and use.operand_number >= 3     # a tiled product's init
            # (a packing transpose's block, one empty for every product's after CSE: shared, a
            # parallel loop's chunks would all pack into one buffer)
            or owner.name in ("linalg.transpose", "linalg.broadcast") and use.operand_number == 1]


def _written_into(value: ir.Value, target: ir.Value) -> bool:
    """Whether `value` is `target` written into (insert_slice destinations, linalg outs, the
    results of loops that carry it): a tensor of the same sizes."""
    while value != target:
        if not isinstance(value, ir.OpResult):
            return False
        owner = as_operation(value.owner)
        number = ir.OpResult(value).result_number
        if owner.name == "tensor.insert_slice":
            value = owner.operands[1]
        elif owner.name.startswith("linalg.") and "operandSegmentSizes" in owner.attributes \
                and number < _segments(owner)[1]:
            value = owner.operands[_segments(owner)[0] + number]
        elif owner.name == "scf.for":
            value = _carried_init(owner, number)
            if value is None:
                return False
        else:
            return False
    return True


def _carried_init(loop: ir.Operation, number: int) -> ir.Value | None:
    """The init of scf.for `loop`'s iter_arg `number` where the loop yields that iter_arg written
    into (a tensor of the init's sizes on every trip), else None (it yields a new tensor)."""
    body = loop.regions[0].blocks[0]
    yielded = list(body.operations)[-1].operands[number]
    return loop.operands[3 + number] if _written_into(yielded, body.arguments[1 + number]) else None


def _size_of(value: ir.Value, d: int) -> ir.Value | int | None:
    """Dim d of tensor `value`: an int where static, else the size operand of the tensor.empty it
    was made in (through the destinations of the linalg ops that wrote it, the slices inserted
    into it and the loops that carry it), else None."""
    size = ir.RankedTensorType(value.type).shape[d]
    if not ir.ShapedType.is_dynamic_size(size):
        return size
    if isinstance(value, ir.BlockArgument):
        loop = as_operation(value.owner.owner)
        number = ir.BlockArgument(value).arg_number - 1
        init = _carried_init(loop, number) if loop is not None and loop.name == "scf.for" and number >= 0 else None
        return None if init is None else _size_of(init, d)
    if not isinstance(value, ir.OpResult):
        return None
    owner = as_operation(value.owner)
    if owner.name == "scf.for":
        init = _carried_init(owner, ir.OpResult(value).result_number)
        return None if init is None else _size_of(init, d)
    if owner.name == "tensor.empty":
        return _empty_sizes(owner)[d]
    if owner.name == "tensor.insert_slice":
        return _size_of(owner.operands[1], d)
    if owner.name == "tensor.expand_shape":     # (a packed product's C: matmul.py)
        shape = _dense(owner, "static_output_shape")
        return list(owner.operands)[1:][sum(ir.ShapedType.is_dynamic_size(n) for n in shape[:d])]
    if owner.name == "tensor.collapse_shape":
        group = [ir.IntegerAttr(i).value for i in ir.ArrayAttr(ir.ArrayAttr(owner.attributes["reassociation"])[d])]
        source = ir.RankedTensorType(owner.operands[0].type).shape
        wide = [i for i in group if source[i] != 1]
        return _size_of(owner.operands[0], wide[0]) if len(wide) == 1 else None
    if owner.name.startswith("linalg.") and "operandSegmentSizes" in owner.attributes:
        n_in, n_out = _segments(owner)
        number = ir.OpResult(value).result_number
        return _size_of(owner.operands[n_in + number], d) if number < n_out else None
    return None


def _whole(op: ir.Operation, whole: ir.Value) -> bool:
    """Whether slice op `op` (extract_slice or insert_slice) covers all of `whole`: zero offsets,
    unit strides, `whole`'s sizes."""
    if any(_dense(op, "static_offsets")) or any(v != 1 for v in _dense(op, "static_strides")):
        return False
    if ir.RankedTensorType(op.results[0].type).rank != ir.RankedTensorType(whole.type).rank:
        return False
    for d, n in enumerate(_slice_sizes(op)):
        size = _size_of(whole, d)
        if size is None or not size == n:
            return False
    return True


def fold_whole_slices(module: ir.Module) -> None:
    """An extract_slice that takes all of a tensor is that tensor, and an insert_slice that fills
    all of its destination is the inserted tensor, also where the sizes are run-time values that
    the canonicalizer cannot compare (it folds static ones only): the size a slice names and the
    size the tensor was made with are the same SSA value. A tiled product of run-time rows
    (matmul.py) starts its loops from such a slice of its zeros and ends with such an insert; left
    in, CSE merges two products' slices of the one fill and each product's result is then copied in
    and out (the fills themselves are split again by split_shared_fills)."""
    for op in ops_where(module.operation, lambda op: op.name in ("tensor.extract_slice", "tensor.insert_slice")):
        whole = op.operands[0 if op.name == "tensor.extract_slice" else 1]
        if op.results[0].type != whole.type or op.name == "tensor.insert_slice" and op.operands[0].type != whole.type:
            continue
        if _whole(op, whole):
            op.results[0].replace_all_uses_with(whole if op.name == "tensor.extract_slice" else op.operands[0])
            op.erase()


def split_shared_fills(module: ir.Module) -> None:
    """A linalg.fill or tensor.empty that several ops write into (CSE merges every product's
    zeros, and every elementwise op's empty destination of one type) gets a copy per writer,
    placed before it (a fill with its own empty tensor). One-shot bufferization gives each writer
    its own buffer either way, but with one fill it filled one and copied it into every other (a
    100-layer network: 100 copies, each a loop nest to compile and a pass over the result to
    run), and one value under hundreds of writers made empty-tensor elimination and its conflict
    analysis quadratic (300 layers of tanh(x @ w): 5 s with a fill and an empty per writer, 14 s
    with one empty under all the fills)."""
    for op in ops_where(module.operation, lambda op: op.name in ("linalg.fill", "tensor.empty")):
        source = op.operands[1].owner if op.name == "linalg.fill" else None
        init = as_operation(source) if source is not None and not isinstance(source, ir.Block) else None
        for owner, number in _writers(op.results[0])[1:]:
            with ir.InsertionPoint(owner):
                empty = init.clone() if init is not None and init.name == "tensor.empty" else None
                copy = op.clone()
                if empty is not None:
                    copy.operands[1] = empty.results[0]
            owner.operands[number] = copy.results[0]


def tie_loop_outputs(module: ir.Module) -> None:
    """Rewrite every eligible elementwise linalg.generic inside a loop body (see the module doc),
    after computing prefix slices of elementwise results in place (bubble_prefix_slices),
    reading sizes from the operands that built the tensors (fold_known_dims), giving each
    result of a branch its own empty tensor (split_shared_yields) and each writer of a shared
    fill its own (split_shared_fills; again after the matmul tiling's CSE: pipeline.py)."""
    bubble_prefix_slices(module)
    fold_known_dims(module)
    split_shared_yields(module)
    split_shared_fills(module)
    generics = ops_where(module.operation, lambda op: op.name == "linalg.generic")
    for op in generics:
        _tie(op)


__all__ = ["bubble_prefix_slices", "fold_known_dims", "fold_whole_slices", "split_shared_fills", "split_shared_yields", "tie_loop_outputs"]
