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
"""
from __future__ import annotations

import math
import re

from torch_mlir import ir

from sprue.lowering.matmul_operands import PLAIN_MAPS
from sprue.lowering.mlir_util import as_operation, tensor_dim


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
    kinds = re.findall(r"parallel|reduction", str(op.attributes["iterator_types"]))
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
        if -1 in used:
            return op
        sides.append((v, sorted(inputs), ops, used))
    if set(sides[0][1]) & set(sides[1][1]):
        return op
    if n in sides[0][3] or m in sides[1][3]:     # (Y * X: the product commutes)
        sides.reverse()
        if n in sides[0][3] or m in sides[1][3]:
            return op
    (xv, xin, xops, _), (yv, yin, yops, _) = sides
    k = loops - 1
    lhs_space = list(range(m)) + [m, k]           # A (batch..., m, k), B (batch..., k, n): _generic_batch's
    rhs_space = list(range(m)) + [k, n]
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
        collapsed = []
        for v, t in zip(op.operands, types):
            shape = [math.prod(t.shape[:batch])] + list(t.shape[batch:])
            ct = ir.RankedTensorType.get(shape, t.element_type)
            collapsed.append(ir.Operation.create("tensor.collapse_shape", results=[ct], operands=[v],
                                                 attributes={"reassociation": groups}).results[0])
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


__all__ = ["collapse_batch_dims", "split_fused_operands"]
