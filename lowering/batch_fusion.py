"""Chains of ops over one batch run a batch element at a time, their intermediates in cache.

Attention over (batch, heads) runs a batched product, a softmax over its result and a second
product. Op by op over the whole batch, the scores go through memory five times (4 MB of them at
4 x 8 heads of 128 x 128: written, read for the max, read and written for exp, read and written
for the division, read by the product); per batch element, the 128 KB of one head's scores stay
in L2 from one op to the next. XLA fuses such chains along their shared loops (its loop fusion),
and slinky, which runs XNNPACK's/YNNPACK's attention, pipelines them over a shared dimension the
same way.

`fuse_batches` finds, in each block, groups of tensor ops linked by their results along the same
leading batch loops:
- linalg.generic ops whose first k loops are parallel, each indexing the first k axes of its
  outputs in order, and of each input in order, or none of them (an operand broadcast over the
  batch); a product (a generic accumulating products) only with its batch loops in both inputs,
  for a product broadcast over a batch is one big matrix product, the packed kernel's;
- linalg.fill, and tensor.expand_shape/collapse_shape that keep the first k axes as they are;
- tensor.empty is not a member: every use gets a fresh one of one element's shape.
A group with a product, another generic, and intermediates of at most _TRIP_BYTES per element
becomes an scf.for over the batch elements (their number, the first k sizes multiplied): each op
is cloned over one element's slices (tensor.extract_slice, rank-reducing, of the operands from
outside; a fresh tensor.empty for an init), and a result used after the group is inserted into a
whole tensor the loop carries (tensor.insert_slice, which one-shot-bufferize computes in place).
The loop is marked PARALLEL_LOOP with one trip's floating-point work: its trips write disjoint
slices, and parallel.py runs it in chunks on the pool (each chunk with its own intermediates).
"""
from __future__ import annotations

import math

from torch_mlir import ir
from torch_mlir.dialects import arith, scf

from sprue.lowering.fusion import _extents, _maps, _n_outs, generic_like
from sprue.lowering.matmul_scripts import PACK_ROWS_GUESS, PARALLEL_LOOP
from sprue.lowering.matmul_unfuse import _accumulates_products, _multiply_add, iterator_kinds
from sprue.lowering.mlir_util import as_operation, index, linalg_fill, ops_where, reassociation_attr, tensor_dim

_RESHAPES = ("tensor.expand_shape", "tensor.collapse_shape")
# One batch element's intermediates must stay in a core's caches for the chain to gain; larger, the
# ops run over the whole batch as they did. Measured on Zen 5 (1 MB of L2): attention's 8 x 256 x
# 256 scores, 1.03 MB of intermediates an element, 1.80-2.08 ms at one core unfused, 1.65-1.69 fused.
_TRIP_BYTES = 4 << 20


class _Unfusable(Exception):
    """A group whose sizes cannot be read outside it (it stays as it is)."""


def _dims_in(expr: ir.AffineExpr) -> set[int]:
    expr = expr.maybe_downcast()
    if isinstance(expr, ir.AffineDimExpr):
        return {expr.position}
    if isinstance(expr, ir.AffineBinaryExpr):
        return _dims_in(expr.lhs) | _dims_in(expr.rhs)
    return set()


def _indexes(amap: ir.AffineMap, d: int) -> bool:
    """Whether `amap`'s result d is loop d, which no other result uses."""
    results = list(amap.results)
    return [p for p, e in enumerate(results) if d in _dims_in(e)] == [d] and \
        isinstance(results[d].maybe_downcast(), ir.AffineDimExpr)


# Named batched products: their maps are in their indexing_maps; a group's are written as the
# generics they stand for (_generalize) before they are cloned per element.
_NAMED = ("linalg.batch_matmul", "linalg.batch_matvec", "linalg.batch_vecmat")


def _named_product(op: ir.Operation) -> bool:
    return op.name in _NAMED and "indexing_maps" in op.attributes and len(op.results) == 1 and \
        isinstance(op.results[0].type, ir.RankedTensorType) and \
        isinstance(ir.RankedTensorType(op.results[0].type).element_type, ir.FloatType)


def _kinds(op: ir.Operation) -> list[str]:
    """A generic's iterator kinds; a named product's: the loops its result is indexed by are parallel."""
    if op.name == "linalg.generic":
        return iterator_kinds(op)
    maps = _maps(op)
    out = {d for e in maps[-1].results for d in _dims_in(e)}
    return ["parallel" if d in out else "reduction" for d in range(maps[0].n_dims)]


def _generalize(op: ir.Operation) -> ir.Operation:
    """A named batched product as the linalg.generic it stands for."""
    kinds = _kinds(op)
    with op.location, ir.InsertionPoint(op):
        generic = ir.Operation.create(
            "linalg.generic", results=[op.results[0].type], operands=list(op.operands), regions=1,
            attributes={"indexing_maps": op.attributes["indexing_maps"],
                        "iterator_types": ir.Attribute.parse(
                            "[" + ", ".join(f"#linalg.iterator_type<{k}>" for k in kinds) + "]"),
                        "operandSegmentSizes": ir.DenseI32ArrayAttr.get([2, 1])})
        _multiply_add(generic.regions[0], ir.RankedTensorType(op.results[0].type).element_type)
    op.results[0].replace_all_uses_with(generic.results[0])
    op.erase()
    return generic


def _is_product(op: ir.Operation) -> bool:
    if op.name != "linalg.generic":
        return _named_product(op)
    return "reduction" in iterator_kinds(op) and _n_outs(op) == 1 and _accumulates_products(op)


def _generic_depth(op: ir.Operation) -> int:
    if not all(isinstance(r.type, ir.RankedTensorType) for r in op.results) or not op.results:
        return 0
    kinds, maps = _kinds(op), _maps(op)
    n_in = len(maps) - _n_outs(op)
    product = _is_product(op)
    depth = 0
    for d, kind in enumerate(kinds):
        if kind != "parallel" or not all(
                _indexes(m, d) or (i < n_in and not product and not any(d in _dims_in(e) for e in m.results))
                for i, m in enumerate(maps)):
            break
        depth += 1
    return depth


def _reassociation(op: ir.Operation) -> list[list[int]]:
    return [[ir.IntegerAttr(a).value for a in ir.ArrayAttr(g)] for g in ir.ArrayAttr(op.attributes["reassociation"])]


def _batch_depth(op: ir.Operation) -> int:
    """How many leading loops (axes) of `op` a group may run one element at a time (module doc)."""
    if op.name == "linalg.generic" or _named_product(op):
        return _generic_depth(op)
    if op.name == "linalg.fill" and isinstance(op.results[0].type, ir.RankedTensorType):
        return ir.RankedTensorType(op.results[0].type).rank
    if op.name in _RESHAPES:
        groups = _reassociation(op)
        n = 0
        while n < len(groups) and groups[n] == [n]:
            n += 1
        return n
    return 0


def _read_per_element(member: ir.Operation, number: int, k: int) -> bool:
    """Whether `member` reads its operand `number` one batch element at a time (else whole)."""
    if member.name != "linalg.generic" and not _named_product(member):
        return number == (1 if member.name == "linalg.fill" else 0)
    amap = _maps(member)[number]
    return all(_indexes(amap, d) for d in range(k))


def _fresh(v: ir.Value) -> bool:
    """Whether `v` is a tensor.empty, maybe reshaped: its contents are never read."""
    while isinstance(v, ir.OpResult):
        op = as_operation(v.owner)
        if op.name == "tensor.empty":
            return True
        if op.name not in _RESHAPES:
            return False
        v = op.operands[0]
    return False


def _groups(block: ir.Block) -> list[tuple[list[ir.Operation], int]]:
    """The block's candidate groups (members in block order, batch depth k)."""
    ops = [as_operation(o) for o in block.operations]
    depth = {op: d for op in ops for d in [_batch_depth(op)] if d > 0}
    parent = {op: op for op in depth}

    def root(op: ir.Operation) -> ir.Operation:
        while parent[op] != op:
            parent[op] = parent[parent[op]]
            op = parent[op]
        return op
    for op in depth:
        for number, v in enumerate(op.operands):
            owner = as_operation(v.owner) if isinstance(v, ir.OpResult) else None
            if owner in depth and _read_per_element(op, number, 1):
                parent[root(op)] = root(owner)
    groups: dict[ir.Operation, list[ir.Operation]] = {}
    for op in ops:
        if op in depth:
            groups.setdefault(root(op), []).append(op)
    return [(members, min(depth[m] for m in members)) for members in groups.values() if len(members) > 1]


def _trip_bytes(members: list[ir.Operation], k: int) -> int | None:
    """One batch element's bytes of the group's generic results read inside it (None if a size is
    known at run time only)."""
    inside, total = set(members), 0
    for m in members:
        if m.name != "linalg.generic" and not _named_product(m):
            continue
        for r in m.results:
            if any(as_operation(u.owner) in inside for u in r.uses):
                t = ir.RankedTensorType(r.type)
                if any(t.is_dynamic_dim(d) for d in range(k, t.rank)):
                    return None
                total += math.prod(t.shape[k:]) * t.element_type.width // 8
    return total


def _worth_it(members: list[ir.Operation], k: int) -> bool:
    """A product whose result another member reads (a product fed only by a transposed copy is
    the batched kernel's, which packs it), and one element's intermediates in L2; with run-time
    sizes the group is fused too (sizes written as run-time values are seldom huge ones)."""
    products = {r for m in members if _is_product(m) for r in m.results}
    if not any(v in products for m in members for v in m.operands):
        return False
    size = _trip_bytes(members, k)
    return size is None or size <= _TRIP_BYTES


def _used_after(members: list[ir.Operation], k: int) -> list[ir.Value] | None:
    """The members' results read outside the group, or None if one is read before its last
    member (where the loop goes) or a member reads another's result whole, not per element."""
    inside, last = set(members), members[-1]
    block_ops = [as_operation(o) for o in last.block.operations]
    after = set(block_ops[block_ops.index(last) + 1:])
    out = []
    for m in members:
        if any(isinstance(v, ir.OpResult) and as_operation(v.owner) in inside and not _read_per_element(m, n, k)
               for n, v in enumerate(m.operands)):
            return None
        for r in m.results:
            outside = [u for u in (as_operation(x.owner) for x in r.uses) if u not in inside]
            for u in outside:
                while u is not None and u.block != last.block:
                    u = as_operation(u.parent)
                if u not in after:
                    return None
            if outside:
                out.append(r)
    return out


def _outer_dim(v: ir.Value, d: int, inside: set[ir.Operation]) -> ir.Value:
    """The size of axis d of `v` (a member's result or an operand), as a value computed before the
    group: static sizes as constants, the others read through the members to what they start from."""
    t = ir.RankedTensorType(v.type)
    if not t.is_dynamic_dim(d):
        return index(t.shape[d])
    op = as_operation(v.owner) if isinstance(v, ir.OpResult) else None
    if op not in inside:
        return tensor_dim(v, d)
    if op.name == "linalg.generic":
        n_in = len(op.operands) - _n_outs(op)
        return _outer_dim(op.operands[n_in + ir.OpResult(v).result_number], d, inside)
    if op.name == "linalg.fill":
        return _outer_dim(op.operands[1], d, inside)
    if op.name == "tensor.expand_shape":
        before = sum(1 for a in range(d) if t.is_dynamic_dim(a))
        size = op.operands[1 + before]
        if isinstance(size, ir.OpResult) and as_operation(size.owner) in inside:
            raise _Unfusable
        return size
    size = index(1)
    for a in _reassociation(op)[d]:
        size = arith.MulIOp(size, _outer_dim(op.operands[0], a, inside)).result
    return size


def _shifted(amap: ir.AffineMap, k: int, per_element: bool) -> ir.AffineMap:
    """`amap` over the loops after the first k (renumbered from 0), without its first k results
    if it reads the operand per element."""
    n = amap.n_dims
    shift = ir.AffineMap.get(n - k, 0, [ir.AffineExpr.get_constant(0)] * k +
                             [ir.AffineExpr.get_dim(d) for d in range(n - k)])
    results = list(amap.results)[k if per_element else 0:]
    return ir.AffineMap.get(n - k, 0, [e.compose(shift) for e in results])


def _slice_attrs(t: ir.RankedTensorType, k: int, values: list[ir.Value], operands: list[int]) -> dict:
    """The attributes of a slice of one batch element of `t` (offsets the first k operands, sizes
    the rest of t's: `values` are the run-time ones) and its operands' segment sizes."""
    shape = list(t.shape[k:])
    return {"static_offsets": ir.DenseI64ArrayAttr.get([ir.ShapedType.get_dynamic_stride_or_offset()] * k + [0] * (t.rank - k)),
            "static_sizes": ir.DenseI64ArrayAttr.get([1] * k + shape),
            "static_strides": ir.DenseI64ArrayAttr.get([1] * t.rank),
            "operandSegmentSizes": ir.DenseI32ArrayAttr.get([*operands, k, len(values), 0])}


def _run_time(sizes: list[ir.Value], shape: list[int]) -> list[ir.Value]:
    return [s for s, n in zip(sizes, shape) if n == ir.ShapedType.get_dynamic_size()]


def _slice(v: ir.Value, ivs: list[ir.Value], sizes: list[ir.Value]) -> ir.Value:
    """v[ivs..., :, ...] without its first len(ivs) axes (tensor.extract_slice, rank-reducing)."""
    t, k = ir.RankedTensorType(v.type), len(ivs)
    values = _run_time(sizes, list(t.shape[k:]))
    return ir.Operation.create("tensor.extract_slice", results=[ir.RankedTensorType.get(list(t.shape[k:]), t.element_type)],
                               operands=[v, *ivs, *values], attributes=_slice_attrs(t, k, values, [1])).result


def _insert(part: ir.Value, whole: ir.Value, ivs: list[ir.Value], sizes: list[ir.Value]) -> ir.Value:
    """`part` written as whole[ivs..., :, ...] (tensor.insert_slice)."""
    t, k = ir.RankedTensorType(whole.type), len(ivs)
    values = _run_time(sizes, list(t.shape[k:]))
    return ir.Operation.create("tensor.insert_slice", results=[whole.type], operands=[part, whole, *ivs, *values],
                               attributes=_slice_attrs(t, k, values, [1, 1])).result


def _empty(t: ir.RankedTensorType, sizes: list[ir.Value]) -> ir.Value:
    return ir.Operation.create("tensor.empty", results=[t], operands=_run_time(sizes, list(t.shape))).result


def _drop_axes(t: ir.Type, k: int) -> ir.RankedTensorType:
    rt = ir.RankedTensorType(t)
    return ir.RankedTensorType.get(list(rt.shape[k:]), rt.element_type)


class _Element:
    """The group's ops cloned over one batch element, inside the loop's body."""

    def __init__(self, members: list[ir.Operation], k: int, ivs: list[ir.Value],
                 sizes: dict[ir.Value, list[ir.Value]]):
        self.inside, self.k, self.ivs, self.sizes = set(members), k, ivs, sizes
        self.mapping: dict[ir.Value, ir.Value] = {}
        self.sliced: dict[ir.Value, ir.Value] = {}
        self.destinations: dict[tuple[ir.Operation, int], tuple[ir.Value, ir.Value | None]] = {}

    def write_into(self, result: ir.Value, whole: ir.Value) -> None:
        """A product's result read after the group is computed in its slice of `whole` (the loop's
        carried tensor): its init, fresh or a fill of a fresh tensor, becomes that slice (filled).
        (Its packed result, a collapse_shape of the packed layout, is not traced back to an empty
        by eliminate-empty-tensors: it was copied into the slice. Elementwise results are, and
        reuse_dying_inputs may write them over an input instead.)"""
        op = as_operation(result.owner) if isinstance(result, ir.OpResult) else None
        if op is None or op.name != "linalg.generic" or not _is_product(op):
            return
        number = len(op.operands) - 1
        init = op.operands[number]
        fill = as_operation(init.owner) if isinstance(init, ir.OpResult) else None
        if _fresh(init):
            self.destinations[(op, number)] = (whole, None)
        elif fill is not None and fill.name == "linalg.fill" and fill in self.inside and _fresh(fill.operands[1]):
            # (a fill CSE made one for two products of a shape: this product gets one of its own)
            self.destinations[(op, number)] = (whole, fill.operands[0])

    def operand(self, member: ir.Operation, number: int) -> ir.Value:
        v = member.operands[number]
        if (member, number) in self.destinations:
            whole, value = self.destinations[(member, number)]
            part = _slice(whole, self.ivs, self.sizes[v][self.k:])
            if value is None:
                return part
            return linalg_fill(value, part)
        if v in self.mapping:
            return self.mapping[v]
        per_element = _read_per_element(member, number, self.k)
        if not per_element or not isinstance(v.type, ir.RankedTensorType):
            return v
        rest = self.sizes[v][self.k:]
        if _fresh(v):      # (one per use: bufferization gives each its own buffer anyway)
            return _empty(_drop_axes(v.type, self.k), rest)
        if v not in self.sliced:
            self.sliced[v] = _slice(v, self.ivs, rest)
        return self.sliced[v]

    def clone(self, op: ir.Operation) -> None:
        operands = [self.operand(op, n) for n in range(len(op.operands))]
        if op.name == "linalg.generic":
            new = self._generic(op, operands)
        elif op.name == "linalg.fill":
            new = as_operation(linalg_fill(*operands).owner)
        else:
            groups = [[a - self.k for a in g] for g in _reassociation(op)[self.k:]]
            t = _drop_axes(op.results[0].type, self.k)
            attrs = {"reassociation": reassociation_attr(groups)}
            extra = []
            if op.name == "tensor.expand_shape":
                attrs["static_output_shape"] = ir.DenseI64ArrayAttr.get(list(t.shape))
                extra = _run_time(self.sizes[op.results[0]][self.k:], list(t.shape))
            new = ir.Operation.create(op.name, results=[t], operands=[operands[0], *extra], attributes=attrs)
        self.mapping.update(zip(op.results, new.results))

    def _generic(self, op: ir.Operation, operands: list[ir.Value]) -> ir.Operation:
        k = self.k
        maps = [_shifted(m, k, _read_per_element(op, n, k) and isinstance(op.operands[n].type, ir.RankedTensorType))
                for n, m in enumerate(_maps(op))]
        new = generic_like(op, operands, maps, list(ir.ArrayAttr(op.attributes["iterator_types"]))[k:])
        for inner in ops_where(new, lambda o: o.name == "linalg.index"):
            d = ir.IntegerAttr(inner.attributes["dim"]).value
            if d < k:
                inner.results[0].replace_all_uses_with(self.ivs[d])
                inner.erase()
            else:
                inner.attributes["dim"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), d - k)
        return new


def _trip_flops(members: list[ir.Operation], k: int) -> int:
    """One batch element's floating-point operations (a product's multiply-add two); a run-time
    size counts as PACK_ROWS_GUESS, as the batch loops of products do (matmul_scripts.py)."""
    flops = 0
    for m in members:
        if m.name == "linalg.generic":
            maps = _maps(m)
            sizes = _extents(m, maps, maps[0].n_dims)
            flops += (2 if _is_product(m) else 1) * math.prod(sizes[d] or PACK_ROWS_GUESS
                                                             for d in range(k, maps[0].n_dims))
    return flops


def _fuse(members: list[ir.Operation], k: int, outputs: list[ir.Value]) -> None:
    inside, last = set(members), members[-1]
    with last.location, ir.InsertionPoint(last):
        values = {v for m in members for v in list(m.operands) + list(m.results) if isinstance(v.type, ir.RankedTensorType)}
        # (only run-time sizes are values: static ones are in the types)
        sizes = {v: [_outer_dim(v, d, inside) if t.is_dynamic_dim(d) else None for d in range(t.rank)]
                 for v in values for t in [ir.RankedTensorType(v.type)]}
        first = members[0].results[0]
        batch = [s or index(ir.RankedTensorType(first.type).shape[d]) for d, s in enumerate(sizes[first][:k])]
        trips = batch[0]
        for s in batch[1:]:
            trips = arith.MulIOp(trips, s).result
        inits = [_empty(ir.RankedTensorType(r.type), sizes[r]) for r in outputs]
        loop = scf.ForOp(index(0), trips, index(1), inits)
        loop.operation.attributes[PARALLEL_LOOP] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                                      max(1, _trip_flops(members, k)))
        with ir.InsertionPoint(loop.body):
            ivs, rest = [], loop.induction_variable
            for s in reversed(batch[1:]):
                ivs.insert(0, arith.RemUIOp(rest, s).result)
                rest = arith.DivUIOp(rest, s).result
            ivs.insert(0, rest)
            element = _Element(members, k, ivs, sizes)
            for r, whole in zip(outputs, loop.inner_iter_args):
                element.write_into(r, whole)
            for m in members:
                element.clone(m)
            scf.YieldOp([_insert(element.mapping[r], whole, ivs, sizes[r][k:])
                         for r, whole in zip(outputs, loop.inner_iter_args)])
    for r, result in zip(outputs, loop.results):
        r.replace_all_uses_with(result)
    for m in reversed(members):
        m.erase()


def fuse_batches(module: ir.Module) -> None:
    """Every group of the module's blocks that pays runs one batch element at a time (module doc)."""
    blocks: list[ir.Block] = []
    for op in ops_where(module.operation, lambda o: o.name.startswith("linalg.") and _is_product(o)):
        if op.block not in blocks:
            blocks.append(op.block)
    for block in blocks:
        for members, k in _groups(block):
            if _used_after(members, k) is None or not _worth_it(members, k):
                continue
            members = [_generalize(m) if _named_product(m) else m for m in members]
            try:
                _fuse(members, k, _used_after(members, k) or [])
            except _Unfusable:
                continue


__all__ = ["fuse_batches"]
