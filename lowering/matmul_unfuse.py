"""Products with elementwise producers fused into them, split back into the producers and a plain
product the register kernel takes (matmul.py).

A batched product with two batch dims reaches linalg as a generic (linalg-fuse-elementwise-ops
propagates the reshapes of dot_canonical.py into it), and the same pass then fuses elementwise
producers of its operands into it: multi-head attention's `p @ v` with `p = e / sum(e)` becomes
one generic computing `out += (e / s) * v`, which only the scalar loops run (4 x 8 x 128 x 128 @
... x 64: a third of the program's time). A named batch_matmul is never such a consumer. Here
the fused operand expression is computed again on its own, once per element of that operand
(what the unfused program did: the product reads its result), and the product reads it.

Only the form `out + X * Y` where X reads no loop of the result's columns and Y none of its rows
(the lhs and rhs sides of a product over the last three loops (m, n, k)); anything else is left.

Such a product over two or more batch loops is then a named batch_matmul over the batch loops
collapsed into one (collapse_batch_dims), which matmul.py packs. Multi-head attention, 4 x 8 heads
x 128 x 64 f64, one core: 5.2 ms -> 3.0 ms (JAX 2.9); both cores 2.7 -> 2.3 ms (JAX 3.0-3.9).

Every product generic is first put in one form (IREE's and linalg's generalize-then-specialize):
unit loops dropped (drop_unit_loops), loops in the result's order with the reduction last
(order_product_loops), operands stored transposed read through transposed copies the packing
folds back, and then the named product (name_product). Attention written per batch element
(`q[i] @ k[i].T` in a fori_loop, 8 x 256 x 64, one core) ran its products as scalar loops: 3.6 ->
1.7 ms (the batched form 1.8-2.0); the 4-D heads attention no longer copies k transposed before
packing it (3.4 -> 2.3 ms, JAX 2.0-2.7 in the same runs).
"""
from __future__ import annotations

import math
import re

from torch_mlir import ir

from sprue.lowering.fusion import _extents, generic_like
from sprue.lowering.layouts import defining_point, permuted_copy, transposed_copy
from sprue.lowering.matmul_operands import PLAIN_MAPS
from sprue.lowering.mlir_util import (
    as_operation,
    collapsed_type,
    empty_like,
    linalg_fill,
    reassociation_attr,
    tensor_dim,
)


def iterator_kinds(op: ir.Operation) -> list[str]:
    """A linalg op's iterator types, "parallel" or "reduction" per loop."""
    return re.findall(r"parallel|reduction", str(op.attributes["iterator_types"]))


def _inner_op(v: ir.Value, block: ir.Block) -> ir.Operation | None:
    """The op of `block` defining `v` (None for a block argument or a value from outside)."""
    if isinstance(v.owner, ir.Block):
        return None
    o = as_operation(v.owner)
    return o if o.parent is not None and o.block == block else None


def _side(v: ir.Value, block: ir.Block, n_ins: int) -> tuple[set[int], list[ir.Operation]] | None:
    """(inputs `v` depends on, the block's ops computing it in block order); None if it reads the
    accumulator."""
    inputs: set[int] = set()
    ops: list[ir.Operation] = []
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x.owner, ir.Block):
            if x.owner == block:
                if x.arg_number >= n_ins:
                    return None
                inputs.add(x.arg_number)
            continue
        o = _inner_op(x, block)
        if o is None or o in ops:
            continue
        if len(o.regions):
            return None
        ops.append(o)
        stack.extend(o.operands)
    # (in block order, defs before uses: Python's wrappers of one op are not the same object)
    return inputs, [o.operation for o in block.operations if o.operation in ops]


def _dims(amap: ir.AffineMap) -> list[int] | None:
    out = []
    for e in amap.results:
        e = e.maybe_downcast()
        if not isinstance(e, ir.AffineDimExpr):
            if isinstance(e, ir.AffineConstantExpr) and e.value == 0:
                continue
            return None
        out.append(e.position)
    return out


def _size(op: ir.Operation, maps: list[ir.AffineMap], d: int) -> tuple[int | None, ir.Value | None]:
    """Loop d's static size, or (None, an operand and its axis having it)."""
    for value, amap in zip(op.operands, maps):
        for axis, e in enumerate(amap.results):
            e = e.maybe_downcast()
            if isinstance(e, ir.AffineDimExpr) and e.position == d:
                t = ir.RankedTensorType(value.type)
                return (t.shape[axis], None) if not t.is_dynamic_dim(axis) else (None, tensor_dim(value, axis))
    raise AssertionError("no operand has loop %d" % d)


def _index_dim(op: ir.Operation) -> int:
    return ir.IntegerAttr(op.attributes["dim"]).value


def _set_index_dim(op: ir.Operation, dim: int) -> None:
    op.attributes["dim"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim)


def _materialize(op: ir.Operation, maps: list[ir.AffineMap], inputs: list[int], body: list[ir.Operation],
                 value: ir.Value, space: list[int]) -> ir.Value:
    """`value` (computed by `body` from `inputs`) over the loops `space` of `op`: a new elementwise
    generic before op."""
    block = op.regions[0].blocks[0]
    elem = value.type
    static, dynamic = [], []
    for d in space:
        s, v = _size(op, maps, d)
        static.append(ir.ShapedType.get_dynamic_size() if s is None else s)
        if v is not None:
            dynamic.append(v)
    result_t = ir.RankedTensorType.get(static, elem)
    init = ir.Operation.create("tensor.empty", results=[result_t], operands=dynamic).results[0]
    renumber = {d: i for i, d in enumerate(space)}
    in_maps = []
    for i in inputs:
        results = [ir.AffineExpr.get_dim(renumber[e.maybe_downcast().position])
                   if isinstance(e.maybe_downcast(), ir.AffineDimExpr) else e for e in maps[i].results]
        in_maps.append(ir.AffineMap.get(len(space), 0, results))
    out_map = ir.AffineMap.get_identity(len(space))
    parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    generic = ir.Operation.create(
        "linalg.generic", results=[result_t], operands=[op.operands[i] for i in inputs] + [init], regions=1,
        attributes={"indexing_maps": ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in in_maps + [out_map]]),
                    "iterator_types": ir.ArrayAttr.get([parallel] * len(space)),
                    "operandSegmentSizes": ir.DenseI32ArrayAttr.get([len(inputs), 1])})
    new_block = generic.regions[0].blocks.append(*[block.arguments[i].type for i in inputs], elem)
    mapping = {block.arguments[i]: new_block.arguments[k] for k, i in enumerate(inputs)}
    with ir.InsertionPoint(new_block):
        for inner in body:
            copy = inner.clone()
            for j, v in enumerate(copy.operands):
                copy.operands[j] = mapping.get(v, v)
            if inner.name == "linalg.index":    # an iota fused into the side: its loop, renumbered
                _set_index_dim(copy, renumber[_index_dim(inner)])
            mapping.update(zip(inner.results, copy.results))
        ir.Operation.create("linalg.yield", operands=[mapping.get(value, value)])
    return generic.results[0]


def _multiply_add(region: ir.Region, elem: ir.Type, fastmath: ir.Attribute | None = None) -> None:
    """A product's payload in `region`: out + a * b."""
    block = region.blocks.append(elem, elem, elem)
    attrs = {} if fastmath is None else {"fastmath": fastmath}
    with ir.InsertionPoint(block):
        mul = ir.Operation.create("arith.mulf", results=[elem], operands=[block.arguments[0], block.arguments[1]],
                                  attributes=attrs)
        add = ir.Operation.create("arith.addf", results=[elem], operands=[block.arguments[2], mul.results[0]],
                                  attributes=attrs)
        ir.Operation.create("linalg.yield", operands=[add.results[0]])


def split_fused_operands(op: ir.Operation) -> ir.Operation:
    """`op` (a batched-matmul-shaped generic computing out + X * Y) as elementwise generics for the
    computed sides and a plain product of them (module doc); `op` itself for anything else."""
    if op.name != "linalg.generic" or len(op.results) != 1:
        return op
    kinds = iterator_kinds(op)
    loops = len(kinds)
    if loops < 3 or kinds[-1] != "reduction" or "reduction" in kinds[:-1]:
        return op
    n_ins = len(op.operands) - 1
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    if _dims(maps[-1]) != list(range(loops - 1)) or len(maps[-1].results) != loops - 1:
        return op
    block = op.regions[0].blocks[0]
    body = list(block.operations)
    acc = body[-1].operands[0]
    add = _inner_op(acc, block)
    if add is None or add.name != "arith.addf" or block.arguments[n_ins] not in list(add.operands):
        return op
    prod = _inner_op(next(v for v in add.operands if v != block.arguments[n_ins]), block)
    if prod is None or prod.name != "arith.mulf" or len(body) == 3:
        return op                               # (a plain product already)
    m, n = loops - 3, loops - 2
    sides = []
    for v in prod.operands:
        found = _side(v, block, n_ins)
        if found is None:
            return op
        inputs, ops = found
        used = {d for i in inputs for d in (_dims(maps[i]) or [-1])}
        used |= {_index_dim(o) for o in ops if o.name == "linalg.index"}   # loops an iota reads
        if -1 in used:
            return op
        sides.append((v, sorted(inputs), ops, used))
    if set(sides[0][1]) & set(sides[1][1]):
        return op
    if n in sides[0][3] or m in sides[1][3]:     # (Y * X: the product commutes)
        sides.reverse()
        if n in sides[0][3] or m in sides[1][3]:
            return op
    (xv, xin, xops, x_used), (yv, yin, yops, y_used) = sides
    k = loops - 1
    # A (batch..., m, k), B (batch..., k, n): _generic_batch's, each with the batch loops it reads
    # (a layer norm fused into `x @ w` for a batch of sequences: w is not copied for every sequence)
    lhs_space = [d for d in range(m) if d in x_used] + [m, k]
    rhs_space = [d for d in range(m) if d in y_used] + [k, n]
    with ir.InsertionPoint(op), op.location:
        operands, new_maps = [], []
        for v, inputs, ops, space in ((xv, xin, xops, lhs_space), (yv, yin, yops, rhs_space)):
            if not ops and len(inputs) == 1 and _dims(maps[inputs[0]]) == space:
                operands.append(op.operands[inputs[0]])      # (a side read as it is)
                new_maps.append(maps[inputs[0]])
                continue
            operands.append(_materialize(op, maps, inputs, ops, v, space))
            new_maps.append(ir.AffineMap.get(loops, 0, [ir.AffineExpr.get_dim(d) for d in space]))
        elem = acc.type
        product = ir.Operation.create(
            "linalg.generic", results=[op.results[0].type], operands=operands + [op.operands[n_ins]], regions=1,
            attributes={"indexing_maps": ir.ArrayAttr.get([ir.AffineMapAttr.get(mp) for mp in new_maps + [maps[-1]]]),
                        "iterator_types": op.attributes["iterator_types"],
                        "operandSegmentSizes": ir.DenseI32ArrayAttr.get([2, 1])})
        _multiply_add(product.regions[0], elem, ir.Attribute.parse("#arith.fastmath<reassoc,contract>"))
    op.results[0].replace_all_uses_with(product.results[0])
    op.erase()
    return product


def _transposed_source(value: ir.Value, rank: int) -> ir.Value | None:
    """What `value` is a transposed copy of (layouts.transposed_copy: its last two dims swapped,
    nothing else read), or None."""
    if isinstance(value.owner, ir.Block):
        return None
    producer = as_operation(value.owner)
    if producer.name != "linalg.generic" or len(producer.operands) != 2:
        return None
    maps = [_dims(ir.AffineMapAttr(a).value) for a in ir.ArrayAttr(producer.attributes["indexing_maps"])]
    swapped = list(range(rank - 2)) + [rank - 1, rank - 2]
    body = list(producer.regions[0].blocks[0].operations)
    if maps != [swapped, list(range(rank))] or len(body) != 1 \
            or body[0].operands[0] != producer.regions[0].blocks[0].arguments[0]:
        return None
    return producer.operands[0]


def collapse_batch_dims(op: ir.Operation, batch: int) -> ir.Operation:
    """A product generic over `batch` leading batch loops (two or more) that every operand indexes
    first, in order (multi-head attention's (b, h)): a linalg.batch_matmul over their collapsed
    product, which packs B (matmul.py's packed kernel takes named products only; the generic ran
    the unpacked one at ~30 GFLOP/s). Static batch sizes only (a collapse of run-time ones is a
    run-time product). `op` itself where that does not hold."""
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    if batch < 2 or any(_dims(m) is None or _dims(m)[:batch] != list(range(batch)) or len(_dims(m)) != batch + 2
                        or len(m.results) != batch + 2 for m in maps):
        return op
    types = [ir.RankedTensorType(v.type) for v in op.operands]
    if any(t.is_dynamic_dim(d) for t in types for d in range(batch)):
        return op
    rest = [_dims(m)[batch:] for m in maps]
    if rest != [[batch, batch + 2], [batch + 2, batch + 1], [batch, batch + 1]]:
        return op                               # (A (m, k), B (k, n), C (m, n) per batch element)
    groups = ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(ir.IntegerType.get_signless(64), d)
                                                  for d in range(batch)])] +
                              [ir.ArrayAttr.get([ir.IntegerAttr.get(ir.IntegerType.get_signless(64), batch + i)])
                               for i in range(2)])
    with ir.InsertionPoint(op), op.location:
        def collapse(v: ir.Value) -> ir.Value:
            t = ir.RankedTensorType(v.type)
            shape = [math.prod(t.shape[:batch])] + list(t.shape[batch:])
            ct = ir.RankedTensorType.get(shape, t.element_type)
            return ir.Operation.create("tensor.collapse_shape", results=[ct], operands=[v],
                                       attributes={"reassociation": groups}).results[0]
        collapsed = [collapse(v) for v in op.operands]
        # B as a transposed copy (name_product's): the copy made of the collapsed B, a batch of
        # matrices transposed, which fold_rhs_transpose folds into the packing
        source = _transposed_source(op.operands[1], batch + 2)
        if source is not None:
            collapsed[1] = transposed_copy(collapse(source))
        elem = types[0].element_type
        product = ir.Operation.create("linalg.batch_matmul", results=[collapsed[2].type], operands=collapsed,
                                      attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([2, 1]),
                                                  "indexing_maps": ir.Attribute.parse(PLAIN_MAPS["linalg.batch_matmul"])},
                                      regions=1)
        _multiply_add(product.regions[0], elem)
        out_t = types[2]
        dynamic = [tensor_dim(op.operands[2], d) for d in range(out_t.rank) if out_t.is_dynamic_dim(d)]
        expanded = ir.Operation.create(
            "tensor.expand_shape", results=[op.results[0].type], operands=[product.results[0], *dynamic],
            attributes={"reassociation": groups, "static_output_shape": ir.DenseI64ArrayAttr.get(list(out_t.shape))})
    op.results[0].replace_all_uses_with(expanded.results[0])
    op.erase()
    return product


def _collapse(value: ir.Value, groups: list[list[int]]) -> ir.Value:
    if all(len(g) == 1 for g in groups):
        return value
    return ir.Operation.create("tensor.collapse_shape", results=[collapsed_type(ir.RankedTensorType(value.type), groups)],
                               operands=[value], attributes={"reassociation": reassociation_attr(groups)}).results[0]


def _same_loops(op: ir.Operation, other: ir.Operation) -> bool:
    """Whether `other` is a product generic over the loops of `op` (same iterator types, same
    output map): a link of a chain fusion_sums.py can merge with it."""
    return other.name == "linalg.generic" and len(other.results) == 1 and _accumulates_products(other) and \
        str(other.attributes["iterator_types"]) == str(op.attributes["iterator_types"]) and \
        ir.ArrayAttr(other.attributes["indexing_maps"])[len(other.operands) - 1] == \
        ir.ArrayAttr(op.attributes["indexing_maps"])[len(op.operands) - 1]


def _a_tap(op: ir.Operation) -> bool:
    """Whether a product adds into the result of another over the same loops, or another into its
    own: a convolution's taps, which fusion_sums.py merges into one loop nest. A product adding
    into anything else (a residual `x + a @ w`, accumulate_sums's, x an argument, an elementwise
    result or a different product's result) is no tap."""
    init = op.operands[len(op.operands) - 1]
    if not isinstance(init.owner, ir.Block) and _same_loops(op, as_operation(init.owner)):
        return True
    return any(u.operand_number == len(u.owner.operands) - 1 and _same_loops(op, as_operation(u.owner))
               for u in op.results[0].uses)


def collapse_reductions(op: ir.Operation) -> ir.Operation:
    """A product generic with operands fused into it (a layer norm's `x * g + b` in a weight
    gradient `h.T @ dq`) that reduces over several loops (the batch and the sequence, both run-time
    sizes, which dot_canonical.py cannot merge without a dynamic reshape): the reduction loops as
    one, every operand reading them read through a tensor.collapse_shape of their axes, so that
    split_fused_operands and the packed kernel take it (it ran as scalar loops: a transformer
    block's training step with a run-time batch and length, 6x its static version). Only where
    each operand reads all the reduction loops or none, on adjacent axes in loop order, and the
    payload reads no loop index. `op` itself otherwise."""
    if op.name != "linalg.generic" or len(op.results) != 1 or not _accumulates_products(op) or _a_tap(op):
        return op
    kinds = iterator_kinds(op)
    red = [d for d, k in enumerate(kinds) if k == "reduction"]
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    dims = [_dims(m) for m in maps]
    if len(red) < 2 or any(d is None or len(d) != len(m.results) for d, m in zip(dims, maps)) or \
            any(o.name == "linalg.index" for o in (x.operation for x in op.regions[0].blocks[0].operations)):
        return op
    groups_of = []
    for ds in dims:
        where = [ds.index(d) for d in red if d in ds]
        if where and (len(where) != len(red) or where != list(range(where[0], where[0] + len(red)))):
            return op
        groups, a = [], 0
        while a < len(ds):
            if where and a == where[0]:
                groups.append(where)
                a += len(red)
            else:
                groups.append([a])
                a += 1
        groups_of.append(groups)
    keep = [d for d in range(len(kinds)) if d not in red[1:]]     # (the first reduction stands for all)
    renumber = {d: i for i, d in enumerate(keep)}
    with ir.InsertionPoint(op), op.location:
        operands = [_collapse(v, g) if isinstance(v.type, ir.RankedTensorType) else v
                    for v, g in zip(op.operands, groups_of)]
        new_maps = [ir.AffineMap.get(len(keep), 0, [ir.AffineExpr.get_dim(renumber[d]) for d in ds if d not in red[1:]])
                    for ds in dims]
        iterators = ir.ArrayAttr(op.attributes["iterator_types"])
        product = generic_like(op, operands, new_maps, [iterators[d] for d in keep])
    op.results[0].replace_all_uses_with(product.results[0])
    op.erase()
    return product


def collapse_contraction_dims(op: ir.Operation) -> ir.Operation:
    """A product generic (out + a * b) over several row, column or reduction loops: `(h @ wq)
    .reshape(b, t, heads, d)` reaches here as one generic over (b, t, heads, k, d), its rows (b, t)
    and columns (heads, d) each two loops, and `(a.transpose(0, 2, 1, 3).reshape(b, t, n) @ wo`
    reduces over (heads, d). No kernel takes those (they ran as scalar loops: a transformer block
    1.8x JAX); IREE collapses such contraction dims. Here each kind of loop -- rows (in a and the
    result), columns (in b and the result), reductions (in a and b), besides batch loops in all
    three -- becomes one loop: the operands reshaped (tensor.collapse_shape) where a kind's axes
    are adjacent in them, a and b first copied into (batch, rows, reductions) and (batch,
    reductions, columns) order where they are not; the result's must be, in (batch, rows,
    columns) order. `op` itself where nothing changes or the form differs."""
    if op.name != "linalg.generic" or len(op.operands) != 3 or not _is_multiply_add(op):
        return op
    if _a_tap(op):
        return op
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    dims = [_dims(m) for m in maps]
    if any(d is None or len(d) != len(m.results) for d, m in zip(dims, maps)):
        return op
    kinds = iterator_kinds(op)
    a, b, c = (set(d) for d in dims)
    batch, rows, cols, red = a & b & c, (a & c) - b, (b & c) - a, (a & b) - c
    if a | b | c != batch | rows | cols | red or not rows or not cols or not red or \
            any(kinds[d] != "reduction" for d in red) or any(kinds[d] != "parallel" for d in batch | rows | cols):
        return op
    nb = len(batch)
    out = dims[2]
    order_b, order_m, order_n = out[:nb], out[nb:nb + len(rows)], out[nb + len(rows):]
    if set(order_b) != batch or set(order_m) != rows or set(order_n) != cols:
        return op
    order_k = [d for d in dims[0] if d in red]

    def grouped(ds: list[int], first: list[int], second: list[int]) -> list[int]:
        """`ds`'s batch loops first, then its two groups in the order `ds` has them (name_product
        takes a stored transpose of a whole operand as it is)."""
        ahead = ds.index(first[0]) < ds.index(second[0])
        return order_b + (first + second if ahead else second + first)
    wanted = (grouped(dims[0], order_m, order_k), grouped(dims[1], order_k, order_n), out)
    if max(len(rows), len(cols), len(red)) < 2 and dims[0] == wanted[0] and dims[1] == wanted[1]:
        return op     # (one loop of each kind, the batch loops leading: name_product's form)
    def group_sizes(w: list[int], one: set[int], other: set[int]) -> list[int]:
        first, second = (one, other) if w[nb] in one else (other, one)
        return [1] * nb + [len(first), len(second)]
    kinds_of = [group_sizes(wanted[0], rows, red), group_sizes(wanted[1], red, cols), group_sizes(wanted[2], rows, cols)]
    with ir.InsertionPoint(op), op.location:
        operands = []
        for i, v in enumerate(op.operands):
            if dims[i] != wanted[i]:
                with defining_point(v), op.location:   # (a loop's fixed weights: copied once)
                    v = permuted_copy(v, [dims[i].index(d) for d in wanted[i]])
            groups, start = [], 0
            for n in kinds_of[i]:
                groups.append(list(range(start, start + n)))
                start += n
            operands.append((_collapse(v, groups), groups))
        # C: a fill of its own (the original fill may be CSE's one for several products, which
        # inplace.split_shared_fills tells apart only where products read it directly)
        c, groups = operands[2]
        init = op.operands[2]
        if c is not init and not isinstance(init.owner, ir.Block) and as_operation(init.owner).name == "linalg.fill":
            operands[2] = (linalg_fill(as_operation(init.owner).operands[0], empty_like(c)), groups)
        loops = nb + 3
        m, n, k = nb, nb + 1, nb + 2
        pairs = [[m, k] if wanted[0][nb] in rows else [k, m], [k, n] if wanted[1][nb] in red else [n, k], [m, n]]
        new_maps = [ir.AffineMap.get(loops, 0, [ir.AffineExpr.get_dim(d) for d in list(range(nb)) + pair])
                    for pair in pairs]
        parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
        reduction = ir.Attribute.parse("#linalg.iterator_type<reduction>")
        product = ir.Operation.create(
            "linalg.generic", results=[operands[2][0].type], operands=[v for v, _ in operands], regions=1,
            attributes={"indexing_maps": ir.ArrayAttr.get([ir.AffineMapAttr.get(mp) for mp in new_maps]),
                        "iterator_types": ir.ArrayAttr.get([parallel] * (loops - 1) + [reduction]),
                        "operandSegmentSizes": ir.DenseI32ArrayAttr.get([2, 1])})
        elem = ir.RankedTensorType(op.results[0].type).element_type
        _multiply_add(product.regions[0], elem)
        result = product.results[0]
        out_t = ir.RankedTensorType(op.results[0].type)
        if result.type != out_t:
            dynamic = [tensor_dim(op.operands[2], d) for d in range(out_t.rank) if out_t.is_dynamic_dim(d)]
            result = ir.Operation.create(
                "tensor.expand_shape", results=[out_t], operands=[result, *dynamic],
                attributes={"reassociation": reassociation_attr(operands[2][1]),
                            "static_output_shape": ir.DenseI64ArrayAttr.get(list(out_t.shape))}).results[0]
    op.results[0].replace_all_uses_with(result)
    op.erase()
    return product


def _set_maps(op: ir.Operation, maps: list[ir.AffineMap]) -> None:
    op.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps])


def _accumulates_products(op: ir.Operation) -> bool:
    """Whether a generic's payload adds to its (one) output something that a multiplication
    computes: a product, its operands maybe fused into it."""
    block = op.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    last = body[-1].operands[0] if body and len(body[-1].operands) == 1 else None
    add = None if last is None or isinstance(last.owner, ir.Block) else as_operation(last.owner)
    return add is not None and add.name == "arith.addf" and block.arguments[len(block.arguments) - 1] in list(add.operands) \
        and any(o.name == "arith.mulf" for o in body)


def order_product_loops(op: ir.Operation) -> None:
    """A product generic over one reduction loop whose loops are in another order than its
    result's (a product of slices, `q[i] @ k[i].T` in a loop, with its unit loops dropped leaves
    (m, k, n) or (k, m, n) orders): its loops renumbered into the result's order, the reduction
    last, the order _generic_batch and split_fused_operands read. One reduction loop: each result
    element still accumulates along k in order, so nothing else changes."""
    if op.name != "linalg.generic" or len(op.results) != 1 or not _accumulates_products(op):
        return
    kinds = iterator_kinds(op)
    if kinds.count("reduction") != 1 or len(kinds) < 3:
        return
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    out = _dims(maps[-1])
    if out is None or len(out) != len(maps[-1].results) or len(out) != len(kinds) - 1:
        return
    order = out + [kinds.index("reduction")]
    if order == list(range(len(kinds))):
        return
    where = {old: new for new, old in enumerate(order)}
    new_maps = [ir.AffineMap.get(len(kinds), 0, [e if not isinstance(e.maybe_downcast(), ir.AffineDimExpr) else
                                                 ir.AffineExpr.get_dim(where[e.maybe_downcast().position])
                                                 for e in m.results]) for m in maps]
    _set_maps(op, new_maps)
    for inner in op.regions[0].blocks[0].operations:
        if inner.name == "linalg.index":        # a fused iota reads the loops by their new numbers
            _set_index_dim(inner, where[_index_dim(inner)])
    parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    reduction = ir.Attribute.parse("#linalg.iterator_type<reduction>")
    op.attributes["iterator_types"] = ir.ArrayAttr.get([parallel] * (len(kinds) - 1) + [reduction])


def _is_multiply_add(op: ir.Operation) -> bool:
    """A payload out + in0 * in1 (either order of each), floats."""
    block = op.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    if len(body) != 3 or body[0].name != "arith.mulf" or body[1].name != "arith.addf":
        return False
    args = list(block.arguments)
    return {*body[0].operands} == {args[0], args[1]} and {*body[1].operands} == {args[2], body[0].results[0]} \
        and body[2].operands[0] == body[1].results[0]


def name_product(op: ir.Operation) -> ir.Operation:
    """A product generic (out + a * b over loops (batch..., m, n, k), order_product_loops's order)
    whose operands are stored transposed, (batch..., k, m) or (batch..., n, k): it reads transposed
    copies (matmul_operands.py's folds take them back where the kernel reads the operand better as
    it is stored). Then, where every operand has every batch loop, the named product the packed
    kernel takes: linalg.matmul, linalg.batch_matmul, or collapse_batch_dims's for two or more
    batch loops. `op` itself (its maps maybe changed) or the named product."""
    if op.name != "linalg.generic" or len(op.operands) != 3 or not _is_multiply_add(op):
        return op
    kinds = iterator_kinds(op)
    loops = len(kinds)
    if loops < 3 or kinds[-1] != "reduction" or "reduction" in kinds[:-1]:
        return op
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    dims = [_dims(m) for m in maps]
    if any(d is None or len(d) != len(m.results) for d, m in zip(dims, maps)) or dims[2] != list(range(loops - 1)):
        return op
    m, n, k = loops - 3, loops - 2, loops - 1
    wanted = ([m, k], [k, n])
    changed = False
    for i in (0, 1):
        lead, last = dims[i][:-2], dims[i][-2:]
        if lead != sorted(set(lead)) or any(d >= m for d in lead):
            return op
        if last == wanted[i][::-1]:
            rank = len(dims[i])
            source = _transposed_source(op.operands[i], rank)
            if source is not None:     # a transposed copy read transposed: the copy's source as it is
                op.operands[i] = source
            else:
                with defining_point(op.operands[i]), op.location:
                    op.operands[i] = transposed_copy(op.operands[i])
            dims[i] = lead + wanted[i]
            changed = True
        elif last != wanted[i]:
            return op
    if changed:
        _set_maps(op, [ir.AffineMap.get(loops, 0, [ir.AffineExpr.get_dim(d) for d in ds]) for ds in dims])
    batch = loops - 3
    if dims[0][:-2] != list(range(batch)) or dims[1][:-2] != list(range(batch)):
        return op
    if batch >= 2:
        return collapse_batch_dims(op, batch)
    kind = "linalg.batch_matmul" if batch else "linalg.matmul"
    elem = ir.RankedTensorType(op.operands[2].type).element_type
    with ir.InsertionPoint(op), op.location:
        product = ir.Operation.create(kind, results=[op.results[0].type], operands=list(op.operands),
                                      attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([2, 1]),
                                                  "indexing_maps": ir.Attribute.parse(PLAIN_MAPS[kind])},
                                      regions=1)
        _multiply_add(product.regions[0], elem)
    op.results[0].replace_all_uses_with(product.results[0])
    op.erase()
    return product


def _reassociation(kept: list[int], rank: int) -> list[list[int]]:
    """Groups of axes collapsing `rank` axes onto the `kept` ones: each dropped (unit) axis joins the
    kept axis before it, or the first one."""
    if not kept:
        return []
    groups = [[a] for a in kept]
    for axis in range(rank):
        if axis not in kept:
            before = [i for i, a in enumerate(kept) if a < axis]
            groups[before[-1] if before else 0].append(axis)
    return [sorted(g) for g in groups]


def _every_operand_batched(maps: list[ir.AffineMap]) -> bool:
    """Whether a two-input generic's maps are a product's whose operands each have every batch
    loop: lhs (batch, m, k), rhs (batch, k, n), result (batch, m, n), in any order (the products
    name_product makes named ones; a convolution's taps, `nhwc,cd->nhwd`, are merged by
    fusion_sums.py instead)."""
    if len(maps) != 3:
        return False
    lhs, rhs, out = ({e.maybe_downcast().position for e in m.results} for m in maps)
    k = (lhs & rhs) - out
    return len(k) == 1 and len(out - rhs) == 1 and len(out - lhs) == 1 and lhs - k <= out and rhs - k <= out


def drop_unit_loops(op: ir.Operation) -> ir.Operation:
    """A product generic (one reduction loop, two or more parallel ones, besides loops of size 1)
    over unit loops: the same generic without them, its operands' unit axes collapsed
    (tensor.collapse_shape) and its result expanded back. linalg-fuse-elementwise-ops folds the
    reshapes around a product of slices into it (`q[i] @ k[i].T` in a loop: (1, m, 1, n, k) and
    (m, 1, 1, n) loops), and no kernel takes those forms; linalg's FoldUnitExtentDims, on products
    only (run on every op, it also cut the in-place row writes of scans). `op` where nothing
    changes."""
    if op.name != "linalg.generic" or len(op.results) != 1 or len(op.regions[0].blocks) != 1:
        return op
    if any(inner.name == "linalg.index" for inner in op.regions[0].blocks[0].operations):
        # an iota fused into the product reads loop numbers that this renumbering would not update
        # ('linalg.index' op expected dim (4) to be lower than the number of loops (2))
        return op
    kinds = iterator_kinds(op)
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    types = [v.type for v in op.operands]
    if not all(isinstance(t, ir.RankedTensorType) for t in types):
        return op
    unit = {d for d, size in enumerate(_extents(op, maps, len(kinds))) if size == 1}
    keep = [d for d in range(len(kinds)) if d not in unit]
    if not unit or [kinds[d] for d in keep].count("reduction") != 1 or len(keep) < 3:
        return op
    renumber = {d: i for i, d in enumerate(keep)}
    new_maps, kept_axes = [], []
    for amap, t in zip(maps, types):
        rt = ir.RankedTensorType(t)
        kept, results = [], []
        for axis, e in enumerate(amap.results):
            e = e.maybe_downcast()
            if isinstance(e, ir.AffineDimExpr) and e.position not in unit:
                kept.append(axis)
                results.append(ir.AffineExpr.get_dim(renumber[e.position]))
            elif rt.is_dynamic_dim(axis) or rt.shape[axis] != 1:
                return op                     # (an index into a longer axis: not a unit axis)
        new_maps.append(ir.AffineMap.get(len(keep), 0, results))
        kept_axes.append(kept)
    if not _every_operand_batched(new_maps):
        return op
    with ir.InsertionPoint(op), op.location:
        operands = []
        for v, t, kept in zip(op.operands, types, kept_axes):
            rt = ir.RankedTensorType(t)
            if len(kept) == rt.rank:
                operands.append(v)
                continue
            shape = [rt.shape[a] for a in kept]
            ct = ir.RankedTensorType.get(shape, rt.element_type)
            operands.append(ir.Operation.create("tensor.collapse_shape", results=[ct], operands=[v], attributes={
                "reassociation": reassociation_attr(_reassociation(kept, rt.rank))}).results[0])
        iterators = ir.ArrayAttr(op.attributes["iterator_types"])
        generic = generic_like(op, operands, new_maps, [iterators[d] for d in keep])
        out_t = ir.RankedTensorType(types[-1])
        result = generic.results[0]
        if len(kept_axes[-1]) != out_t.rank:
            dynamic = [tensor_dim(op.operands[-1], d) for d in range(out_t.rank) if out_t.is_dynamic_dim(d)]
            result = ir.Operation.create(
                "tensor.expand_shape", results=[out_t], operands=[result, *dynamic],
                attributes={"reassociation": reassociation_attr(_reassociation(kept_axes[-1], out_t.rank)),
                            "static_output_shape": ir.DenseI64ArrayAttr.get(list(out_t.shape))}).results[0]
    op.results[0].replace_all_uses_with(result)
    op.erase()
    return generic


__all__ = ["collapse_batch_dims", "collapse_contraction_dims", "collapse_reductions", "drop_unit_loops", "iterator_kinds", "name_product", "order_product_loops", "split_fused_operands"]
