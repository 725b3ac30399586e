"""Fewer passes over memory and fewer temporaries on the linalg IR; six rewrites, in pipeline order:

  accumulate_sums            dot(a, b) + y: the dot accumulates into y (end of the 'linalg' stage,
                             before linalg-fuse-elementwise-ops)
  duplicate_cheap_producers  a cheap elementwise op read by several generics is cloned per reader,
                             so each fuses its own copy (same place)
  merge_reductions_with_producers
                             a reduction and the multi-reader elementwise op it reads: one generic
                             with two results (same place)
  reuse_dying_inputs         an elementwise result is written over an input read for the last time
                             (before bufferization)
  merge_elementwise_chains   an elementwise consumer and the producer whose result it reads, also read
                             elsewhere: one generic with several results (same place)
  interchange_loops          each generic's innermost loop walks memory contiguously (before
                             bufferization, after matmul.py: interchange.py)

fusion_sums.py then merges the links of accumulate_sums' chains into one generic (before
bufferization, after matmul.py). Each is described at its section below; SPRUE_FUSION=0 turns all
off (an A/B switch, part of the compile cache's key).
"""
from __future__ import annotations

import os
from typing import Iterator

from torch_mlir import ir

from sprue.lowering.mlir_util import operation_of
from sprue.lowering.unit_dims import drop_unit_expansions


def enabled() -> bool:
    """SPRUE_FUSION=0 turns the six rewrites off (an A/B switch for benchmarks)."""
    return os.environ.get("SPRUE_FUSION", "1") not in ("0", "")


def _maps(op: ir.Operation) -> list[ir.AffineMap]:
    # Parsed from text: iterating the ArrayAttr would import torch_mlir.dialects.linalg (~50 ms)
    # to downcast its elements.
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]


def _dim_position(expr: ir.AffineExpr) -> int | None:
    expr = expr.maybe_downcast()
    return expr.position if isinstance(expr, ir.AffineDimExpr) else None


def _extents(op: ir.Operation, maps: list[ir.AffineMap], n_dims: int) -> list[int | None]:
    """Each loop's static extent where an operand's shape gives it, else None."""
    out: list[int | None] = [None] * n_dims
    for value, amap in zip(op.operands, maps):
        t = value.type
        if not isinstance(t, ir.RankedTensorType):
            continue
        for axis, expr in enumerate(amap.results):
            d = _dim_position(expr)
            if d is not None and not t.is_dynamic_dim(axis):
                out[d] = t.shape[axis]
    return out


# -- sums of contractions accumulate in one buffer ----------------------------------------------
_CONTRACTIONS = {"linalg.matmul", "linalg.batch_matmul", "linalg.matvec", "linalg.vecmat", "linalg.generic"}
_RESHAPES = {"tensor.expand_shape", "tensor.collapse_shape"}
_PURE_PREFIXES = ("linalg.", "tensor.", "arith.")


class _Defs:
    """Defining op of every value of a function (ir.Operation, never an op view: building views of
    linalg ops would import torch_mlir.dialects.linalg, ~50 ms of a first compilation)."""

    def __init__(self, root: ir.Operation):
        self.of: dict[ir.Value, ir.Operation] = {}
        self.ops: list[ir.Operation] = []

        def visit(op: ir.Operation) -> ir.WalkResult:
            self.ops.append(op)
            for r in op.results:
                self.of[r] = op
            return ir.WalkResult.ADVANCE
        root.walk(visit)

    def get(self, v: ir.Value) -> ir.Operation | None:
        return self.of.get(v)

    def forget(self, *ops: ir.Operation) -> None:
        """Drops ops about to be erased: a value is keyed by its address, which a new op may reuse,
        and would then find the erased op ('the operation has been invalidated')."""
        for op in ops:
            for r in op.results:
                self.of.pop(r, None)


def _one_use(v: ir.Value) -> bool:
    return len(list(v.uses)) == 1


def _is_zero_fill(defs: _Defs, v: ir.Value) -> bool:
    op = defs.get(v)
    if op is None or op.name != "linalg.fill":
        return False
    c = defs.get(op.operands[0])
    if c is None or c.name != "arith.constant":
        return False
    value = c.attributes["value"]
    return isinstance(value, ir.FloatAttr) and value.value == 0.0


def _payload(op: ir.Operation) -> list[ir.Operation]:
    inner: list[ir.Operation] = []

    def visit(o: ir.Operation) -> ir.WalkResult:
        if o != op:
            inner.append(o)
        return ir.WalkResult.ADVANCE
    op.walk(visit)
    return inner


def _accumulates(op: ir.Operation, defs: _Defs) -> bool:
    """A contraction whose single result is its init plus the products: linalg's named contractions,
    or a generic with a reduction loop whose payload yields `out + x`."""
    if op.name not in _CONTRACTIONS or len(op.results) != 1:
        return False
    if op.name != "linalg.generic":
        return True
    if "reduction" not in str(op.attributes["iterator_types"]) or _n_outs(op) != 1:
        return False
    out_arg = op.regions[0].blocks[0].arguments[-1]
    body = _payload(op)
    if not body or body[-1].name != "linalg.yield":
        return False
    acc = defs.get(body[-1].operands[0])
    return acc is not None and acc.name == "arith.addf" and out_arg in (acc.operands[0], acc.operands[1]) \
        and sum(1 for u in out_arg.uses) == 1


def _n_outs(op: ir.Operation) -> int:
    return int(str(op.attributes["operandSegmentSizes"]).split(",")[-1].strip(" >]"))


def _is_plain_add(op: ir.Operation) -> bool:
    """An elementwise `a + b` of two same-shaped tensors, nothing else (no broadcast)."""
    if op.name != "linalg.generic" or len(op.operands) != 3 or len(op.results) != 1:
        return False
    if "reduction" in str(op.attributes["iterator_types"]) or _n_outs(op) != 1:
        return False
    if not all(m.is_permutation and list(m.results) == list(ir.AffineMap.get_identity(m.n_dims).results)
               for m in _maps(op)):
        return False
    body = _payload(op)
    if len(body) != 2 or body[0].name != "arith.addf" or body[1].name != "linalg.yield":
        return False
    args = op.regions[0].blocks[0].arguments
    return {body[0].operands[0], body[0].operands[1]} == {args[0], args[1]} and \
        body[1].operands[0] == body[0].results[0] and \
        op.operands[0].type == op.operands[1].type == op.results[0].type


def _through_reshape(defs: _Defs, v: ir.Value) -> tuple[ir.Operation | None, ir.Operation | None]:
    """(contraction, expand_shape between it and v or None) for a single-use chain, else (None, None)."""
    op = defs.get(v)
    reshape = None
    if op is not None and op.name == "tensor.expand_shape" and _one_use(v):
        reshape, v = op, op.operands[0]
        op = defs.get(v)
    if op is None or not _one_use(v) or not _accumulates(op, defs):
        return None, None
    return op, reshape


def _root(defs: _Defs, op: ir.Operation) -> ir.Operation | None:
    """The first contraction of a chain accumulating into each other's results, if its init is zeros."""
    seen = 0
    while seen < 64:
        init = op.operands[len(op.operands) - 1]
        if _is_zero_fill(defs, init):
            return op
        prev = defs.get(init)
        if prev is None or not _one_use(init) or not _accumulates(prev, defs) or prev.block != op.block:
            return None
        op, seen = prev, seen + 1
    return None


def _dominates(defs: _Defs, v: ir.Value, at: ir.Operation) -> bool:
    d = defs.get(v)
    if d is None:   # a block argument: of `at`'s block or an enclosing one
        return True
    if d.block == at.block:
        return d.is_before_in_block(at)
    # defined in an enclosing block (values of sibling regions are not visible here anyway)
    parent = at.parent
    while parent is not None:
        if d.block == parent.block:
            return d.is_before_in_block(parent)
        parent = parent.parent
    return False


def _hoist(defs: _Defs, v: ir.Value, at: ir.Operation, depth: int = 0) -> bool:
    """Makes `v` available before `at`, moving its pure producers up the block if need be."""
    if _dominates(defs, v, at):
        return True
    d = defs.get(v)
    if d is None or depth > 6 or d.block != at.block or not d.name.startswith(_PURE_PREFIXES):
        return False
    if not all(_hoist(defs, x, at, depth + 1) for x in d.operands):
        return False
    d.move_before(at)
    return True


def _collapse_like(defs: _Defs, y: ir.Value, expand: ir.Operation, at: ir.Operation) -> ir.Value:
    """`y` in the shape of `expand`'s source (the inverse reshape), created before `at`."""
    y_def = defs.get(y)
    reassoc = expand.attributes["reassociation"]
    if y_def is not None and y_def.name == "tensor.expand_shape" and str(y_def.attributes["reassociation"]) == \
            str(reassoc) and y_def.operands[0].type == expand.operands[0].type:
        source = y_def.operands[0]
        if not list(y.uses):
            defs.forget(y_def)
            y_def.erase()
        return source
    collapse = ir.Operation.create("tensor.collapse_shape", results=[expand.operands[0].type], operands=[y],
                                   attributes={"reassociation": reassoc}, ip=ir.InsertionPoint(at))
    defs.of[collapse.results[0]] = collapse
    return collapse.results[0]


def accumulate_sums(module: ir.Module) -> int:
    """`dot(a, b) + y` -> the dot accumulates into y (its init, instead of zeros) — see `_accumulate`."""
    if not enabled():
        return 0
    # One pass in program order: a rewrite only replaces the add it matched, so the adds after it
    # (the next term of a chain) see its result; the definitions map learns the reshapes it creates.
    defs = _Defs(module.operation)
    return sum(_accumulate(defs, op) for op in [op for op in defs.ops if _is_plain_add(op)])


def _accumulate(defs: _Defs, add: ir.Operation) -> bool:
    """One rewrite of `add` = x + y where x is a chain of single-use contractions started from zeros:
    the chain's first contraction starts from y instead (BLAS's C = A B + C, XLA's dot-addend output
    fusion), so neither the products nor the sum need a buffer of their own. In `(d1 + d2) + d3`
    (9 shifted einsums of a convolution, x @ w + h @ u + b of an LSTM gate) every term accumulates
    into one buffer. The sum is reassociated (y first), as with any accumulating GEMM."""
    for x_pos in (0, 1):
        x, y = add.operands[x_pos], add.operands[1 - x_pos]
        last, expand = _through_reshape(defs, x)
        if last is None:
            continue
        root = _root(defs, last)
        if root is None or root.block != add.block or y == x:
            continue
        if not _hoist(defs, y, root):
            continue
        init = y if expand is None else _collapse_like(defs, y, expand, root)
        root.operands[len(root.operands) - 1] = init
        add.results[0].replace_all_uses_with(x)
        defs.forget(add)
        add.erase()
        return True
    return False


# -- cheap elementwise producers are recomputed by each consumer ---------------------------------
# linalg-fuse-elementwise-ops fuses a producer only into its single consumer; a producer read by two
# ops (softmax's scaled scores feed both the max and the exp) stays a full temporary, written once
# and read twice. A producer whose payload is a few arith ops (a multiply, a broadcast) is cloned
# per consumer instead (XLA's instruction fusion duplicates producers that are not "expensive" the
# same way), so each clone fuses and no temporary is left -- only when every user is a
# linalg.generic of the same block (all of them can fuse), and never a math.* call (recomputing an
# exp costs more than the memory pass it saves). Runs after cse (which would merge the clones) and
# before linalg-fuse-elementwise-ops. The clone is built with ir.Operation.create, not
# Operation.clone: clone returns a view of the op, and building a linalg op view imports
# torch_mlir.dialects.linalg (~0.3 s of a first compilation).
MAX_CHEAP_OPS = 3
MAX_CLONES = 4


def _users(defs: _Defs) -> dict[ir.Value, list[ir.Operation]]:
    users: dict[ir.Value, list[ir.Operation]] = {}
    for op in defs.ops:
        for v in op.operands:
            users.setdefault(v, []).append(op)
    return users


def _is_cheap_elementwise(op: ir.Operation) -> bool:
    if op.name != "linalg.generic" or len(op.results) != 1 or "reduction" in str(op.attributes["iterator_types"]):
        return False
    body = _payload(op)
    return len(body) - 1 <= MAX_CHEAP_OPS and all(o.name.startswith("arith.") and not len(o.regions)
                                                   for o in body[:-1])


def _is_scalar_broadcast(op: ir.Operation) -> bool:
    """A generic filling a tensor from scalars (rank-0 inputs or none): free to recompute anywhere."""
    n_ins = len(op.operands) - _n_outs(op)
    return all(isinstance(op.operands[i].type, ir.RankedTensorType) and op.operands[i].type.rank == 0
               for i in range(n_ins))


def _is_broadcast(op: ir.Operation) -> bool:
    """A generic only copying its one input along new dimensions (a per-channel mean broadcast to
    a batch's shape): as free to recompute anywhere as a scalar broadcast."""
    if op.name != "linalg.generic" or len(op.operands) != 2:
        return False
    body = _payload(op)
    block = op.regions[0].blocks[0]
    amap = _maps(op)[0]
    dims = [e for e in amap.results if _dim_position(e) is not None]   # (0s: size-1 dims)
    return len(body) == 1 and list(body[0].operands) == [block.arguments[0]] and len(dims) < amap.n_dims


def _duplicable(defs: _Defs, op: ir.Operation, users: dict[ir.Value, list[ir.Operation]]) -> bool:
    """Cheap, and reading only values that stay materialized anyway (arguments, products, reductions,
    expensive elementwise ops), broadcasts (scalar or not), or cheap ops only it reads (a causal
    mask's comparison, read by its `where` alone). Without that rule duplication would cascade up a
    chain of cheap ops: in `x ^ (x >> 16)` repeated, each level reads its input twice, and cloning
    every level recomputes the chain 2^depth times (a hash-based RNG ran 3x slower)."""
    if not _is_cheap_elementwise(op):
        return False
    # a broadcast (of scalars or of a smaller tensor) computes nothing: its clones only read its
    # input, whatever made that (per-example gradients' outer products: the (512, 64, 10)
    # broadcast of the output gradient was written out for its two readers, and read back with
    # gathers)
    if _is_scalar_broadcast(op) or _is_broadcast(op):
        return True
    for i in range(len(op.operands) - _n_outs(op)):
        d = defs.get(op.operands[i])
        if d is not None and _is_cheap_elementwise(d) and not _is_scalar_broadcast(d) and not _is_broadcast(d) \
                and set(users.get(op.operands[i], [])) != {op}:
            return False
    return True


def _clone_generic(op: ir.Operation, ip: ir.InsertionPoint) -> ir.Operation:
    attrs = {name: op.attributes[name] for name in op.attributes}
    new = ir.Operation.create("linalg.generic", results=[r.type for r in op.results], operands=list(op.operands),
                              attributes=attrs, regions=1, loc=op.location, ip=ip)
    old_block = op.regions[0].blocks[0]
    block = new.regions[0].blocks.append(*[a.type for a in old_block.arguments])
    mapping: dict[ir.Value, ir.Value] = dict(zip(old_block.arguments, block.arguments))
    inside = ir.InsertionPoint(block)
    for inner in _payload(op):
        if inner.name == "linalg.yield":
            ir.Operation.create("linalg.yield", operands=[mapping.get(v, v) for v in inner.operands],
                                loc=inner.location, ip=inside)
            continue
        copy = inner.clone(ip=inside).operation     # arith ops: their dialect module is loaded already
        for i, v in enumerate(copy.operands):
            if v in mapping:
                copy.operands[i] = mapping[v]
        mapping.update(zip(inner.results, copy.results))
    return new


def duplicate_cheap_producers(module: ir.Module) -> int:
    """Clones each cheap elementwise producer for every extra consumer; returns the clones made."""
    if not enabled():
        return 0
    defs = _Defs(module.operation)
    users = _users(defs)
    made = 0
    # consumers first: a clone's own operands gain readers (the broadcast scale of `x * scale`)
    for op in reversed(defs.ops):
        if not _duplicable(defs, op, users):
            continue
        readers = list(dict.fromkeys(users.get(op.results[0], [])))
        if not 1 < len(readers) <= MAX_CLONES or \
                not all(r.name == "linalg.generic" and r.block == op.block for r in readers):
            continue
        for reader in readers[1:]:
            clone = _clone_generic(op, ir.InsertionPoint(reader))
            for i, v in enumerate(reader.operands):
                if v == op.results[0]:
                    reader.operands[i] = clone.results[0]
            for v in clone.operands:
                users.setdefault(v, []).append(clone)
            made += 1
    return made


# -- a reduction and the elementwise producer it reads, in one pass -------------------------------
# softmax's `e = exp(s - max)` is read by its row sum and by the division: the elementwise fusion
# cannot merge e into the sum (e stays needed), so e is written in one pass and read back in another.
# Merged into one generic with two results (XLA's multi-output fusion, IREE's producer-consumer
# fusion of a root with its reduction), each e element is summed as it is written. Only when the
# reduction reads the producer's result at its own loop indices (identity map; the producer's loops
# are the reduction's, the reduced one included), and every other reader of e comes after the
# reduction. Runs before linalg-fuse-elementwise-ops, which then fuses `s - max` into the merged op.
def _merge_one(defs: _Defs, users: dict[ir.Value, list[ir.Operation]], red: ir.Operation) -> bool:
    n_ins = len(red.operands) - 1
    maps = _maps(red)
    identity = list(ir.AffineMap.get_identity(maps[0].n_dims).results)
    for i in range(n_ins):
        v = red.operands[i]
        prod = defs.get(v)
        if prod is None or prod.name != "linalg.generic" or prod.block != red.block or len(prod.results) != 1 \
                or _n_outs(prod) != 1 or "reduction" in str(prod.attributes["iterator_types"]) \
                or list(maps[i].results) != identity or sum(1 for x in red.operands if x == v) != 1:
            continue
        pmaps = _maps(prod)
        if pmaps[0].n_dims != maps[0].n_dims or list(pmaps[-1].results) != identity or \
                list(prod.regions[0].blocks[0].arguments[-1].uses):
            continue
        readers = users.get(v, [])
        if len(readers) < 2 or not all(r == red or (r.block == red.block and red.is_before_in_block(r))
                                        for r in readers):
            continue
        _build_merged(prod, pmaps, red, maps, i)
        return True
    return False


def _build_merged(prod: ir.Operation, pmaps: list[ir.AffineMap], red: ir.Operation, maps: list[ir.AffineMap],
                  i: int) -> None:
    p_ins = list(prod.operands)[:-1]
    r_other = [k for k in range(len(red.operands) - 1) if k != i]
    operands = p_ins + [red.operands[k] for k in r_other] + [prod.operands[len(prod.operands) - 1],
                                                              red.operands[len(red.operands) - 1]]
    new_maps = pmaps[:-1] + [maps[k] for k in r_other] + [pmaps[-1], maps[-1]]
    attrs = {
        "indexing_maps": ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in new_maps]),
        "iterator_types": red.attributes["iterator_types"],
        "operandSegmentSizes": ir.Attribute.parse(f"array<i32: {len(operands) - 2}, 2>"),
    }
    merged = ir.Operation.create("linalg.generic", results=[prod.results[0].type, red.results[0].type],
                                 operands=operands, attributes=attrs, regions=1, loc=red.location,
                                 ip=ir.InsertionPoint(red))
    pb, rb = prod.regions[0].blocks[0], red.regions[0].blocks[0]
    types = [a.type for a in pb.arguments][:-1] + [rb.arguments[k].type for k in r_other] + \
        [pb.arguments[len(pb.arguments) - 1].type, rb.arguments[len(rb.arguments) - 1].type]
    block = merged.regions[0].blocks.append(*types)
    args = list(block.arguments)
    n_p = len(p_ins)
    mapping: dict[ir.Value, ir.Value] = dict(zip(list(pb.arguments)[:-1], args[:n_p]))
    inside = ir.InsertionPoint(block)
    value = _copy_payload(prod, mapping, inside)[0]
    mapping = {rb.arguments[k]: args[n_p + j] for j, k in enumerate(r_other)}
    mapping[rb.arguments[i]] = value
    mapping[rb.arguments[len(rb.arguments) - 1]] = args[-1]
    total = _copy_payload(red, mapping, inside)[0]
    ir.Operation.create("linalg.yield", operands=[value, total], loc=red.location, ip=inside)
    red.results[0].replace_all_uses_with(merged.results[1])
    red.erase()
    prod.results[0].replace_all_uses_with(merged.results[0])
    prod.erase()


def _copy_payload(op: ir.Operation, mapping: dict[ir.Value, ir.Value], ip: ir.InsertionPoint) -> list[ir.Value]:
    """Copies `op`'s payload (but its yield) at `ip`, block arguments renamed by `mapping`; returns
    the yielded values as copied."""
    return copy_ops(_payload(op), mapping, ip)


def copy_ops(ops: list[ir.Operation], mapping: dict[ir.Value, ir.Value], ip: ir.InsertionPoint) -> list[ir.Value]:
    """Copies `ops` (a payload's, up to its linalg.yield) at `ip`, operands renamed by `mapping`,
    which learns the copies' results; returns the yielded values as copied. An op with regions (an
    scf.if chain reading a fused concatenate) is cloned whole, the ops inside it skipped (they come
    first in the walk's post-order) and the values from outside that they read renamed too."""
    owner = next((o.parent for o in ops if o.name == "linalg.yield"), None)
    for inner in ops:
        if inner.name == "linalg.yield":
            return [mapping.get(v, v) for v in inner.operands]
        if owner is not None and inner.parent != owner:
            continue
        copy = inner.clone(ip=ip).operation     # arith/math ops: their dialect modules are loaded already
        _rename_operands(copy, mapping)
        mapping.update(zip(inner.results, copy.results))
    raise ValueError("a linalg.generic payload without linalg.yield")


def _rename_operands(op: ir.Operation, mapping: dict[ir.Value, ir.Value]) -> None:
    def visit(o: ir.Operation) -> ir.WalkResult:
        for k, v in enumerate(o.operands):
            if v in mapping:
                o.operands[k] = mapping[v]
        return ir.WalkResult.ADVANCE
    op.walk(visit)


def generic_like(op: ir.Operation, operands: list[ir.Value], maps: list[ir.AffineMap],
                 iterators: list[ir.Attribute]) -> ir.Operation:
    """A linalg.generic computing `op`'s payload over other operands, maps and loops (its results
    typed as its inits, the last _n_outs(op) operands), at the current insertion point."""
    n_out = _n_outs(op)
    new = ir.Operation.create(
        "linalg.generic", results=[v.type for v in operands[len(operands) - n_out:]], operands=operands, regions=1,
        attributes={"indexing_maps": ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                    "iterator_types": ir.ArrayAttr.get(iterators),
                    "operandSegmentSizes": op.attributes["operandSegmentSizes"]})
    block = op.regions[0].blocks[0]
    body = new.regions[0].blocks.append(*[a.type for a in block.arguments])
    with ir.InsertionPoint(body):
        yielded = _copy_payload(op, dict(zip(block.arguments, body.arguments)), ir.InsertionPoint(body))
        ir.Operation.create("linalg.yield", operands=yielded)
    return new


def merge_reductions_with_producers(module: ir.Module) -> int:
    """Merges each reduction with the multi-reader elementwise producer it reads; returns how many."""
    if not enabled():
        return 0
    merged = 0
    while merged < 64:
        defs = _Defs(module.operation)
        users = _users(defs)
        reds = [op for op in defs.ops if op.name == "linalg.generic" and len(op.results) == 1
                and _n_outs(op) == 1 and "reduction" in str(op.attributes["iterator_types"])]
        if not any(_merge_one(defs, users, r) for r in reds):
            return merged
        merged += 1
    return merged


# -- elementwise results written over an operand that dies there ---------------------------------
# stablehlo-legalize-to-linalg gives every elementwise op a fresh tensor.empty destination, so each
# becomes a new allocation: softmax's exp and its division by the row sums are two buffers of the
# scores' size, a fresh, page-faulting mmap each for large arrays. When an input of the same type
# is read at the same index (identity map), was computed in this block by a linalg op (its buffer is
# a writable allocation) and nothing reads it after this op, the op writes into it (`outs(%input)`),
# the in-place reuse IREE's dispatch-region formation and XLA's buffer assignment make. One-shot
# bufferization still decides: an elementwise op reading and writing the same buffer at the same
# index is no conflict for it. inplace.py does the same for loop-carried values.
_VIEW_OPS = {"tensor.expand_shape", "tensor.collapse_shape", "tensor.extract_slice"}


def _ancestor_in(op: ir.Operation, block: ir.Block) -> ir.Operation | None:
    while op is not None and op.block != block:
        op = op.parent
    return op


def _dead_after(users: dict[ir.Value, list[ir.Operation]], v: ir.Value, at: ir.Operation, depth: int = 0) -> bool:
    for u in users.get(v, []):
        if u == at:
            continue
        a = _ancestor_in(u, at.block)
        if a is None or a == at or not a.is_before_in_block(at):
            return False
        if u.name in _VIEW_OPS and (depth > 4 or not _dead_after(users, u.results[0], at, depth + 1)):
            return False
    return True


def reuse_dying_inputs(module: ir.Module) -> int:
    """Points elementwise generics' outputs at a dying input's buffer; returns how many."""
    if not enabled():
        return 0
    defs = _Defs(module.operation)
    users = _users(defs)
    reused = 0
    for op in defs.ops:
        if op.name != "linalg.generic" or len(op.results) != 1 or _n_outs(op) != 1 or \
                "reduction" in str(op.attributes["iterator_types"]):
            continue
        out = op.operands[len(op.operands) - 1]
        empty = defs.get(out)
        if empty is None or empty.name != "tensor.empty" or list(op.regions[0].blocks[0].arguments[-1].uses):
            continue
        maps = _maps(op)
        identity = list(ir.AffineMap.get_identity(maps[0].n_dims).results)
        for i in range(len(op.operands) - 1):
            v = op.operands[i]
            producer = defs.get(v)
            if v.type != op.results[0].type or list(maps[i].results) != identity or producer is None or \
                    not producer.name.startswith("linalg.") or producer.block != op.block or \
                    any(v == op.operands[j] for j in range(i)) or not _dead_after(users, v, op):
                continue
            op.operands[len(op.operands) - 1] = v
            reused += 1
            break
    return reused


# -- elementwise producers and consumers over one iteration space, in one pass --------------------
# A value read by several elementwise generics stays a buffer after linalg-fuse-elementwise-ops
# (it fuses a producer into its consumer only when that is its single use): a Mandelbrot step's
# zr*zr - zi*zi + cr is read by the escape test and by the `where` updating zr, the test's i1 mask by
# three `where`s, and each is written in one pass and read back in another: six passes over the
# arrays per trip where XLA's loop fusion (multi-output fusion of siblings sharing operands) and
# IREE's dispatch-region formation make one loop writing the three carries. Here a consumer reading
# a producer's result at its own indices (identity maps, all loops parallel) is merged with it into
# one generic with several results, placed at the consumer; the producer's results read by nothing
# else are dropped (never written). Legal when every other reader of them comes after the consumer.
# Runs just before bufferization, after the outputs were tied to carries and dying inputs, which the
# merged generic keeps: one-shot bufferization lets an elementwise op write the buffer it reads at the
# same index, and convert-linalg-to-loops loads every input of an element before storing any result.
MAX_MERGED_OPS = 256


def _elementwise_identity_outs(op: ir.Operation) -> bool:
    """All loops parallel, each output at the loop indices, no payload read of an output."""
    if op.name != "linalg.generic" or "reduction" in str(op.attributes["iterator_types"]):
        return False
    n_outs = _n_outs(op)
    maps = _maps(op)
    identity = list(ir.AffineMap.get_identity(maps[0].n_dims).results)
    args = list(op.regions[0].blocks[0].arguments)
    # payload ops with regions (an scf.if) are not copied op by op (_copy_payload)
    return all(list(m.results) == identity for m in maps[len(maps) - n_outs:]) and \
        not any(list(a.uses) for a in args[len(args) - n_outs:]) and \
        not any(len(o.regions) for o in _payload(op))


def new_generic(ins: list[tuple[ir.Value, ir.AffineMap]], outs: list[tuple[ir.Value, ir.AffineMap]],
                iterator_types: ir.Attribute, at: ir.Operation) -> tuple[ir.Operation, ir.Block]:
    """A linalg.generic before `at` (at its location) reading `ins` and writing `outs` (value and
    indexing map each), and its payload block, empty: an argument per operand, its element type."""
    attrs = {
        "indexing_maps": ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for _, m in ins + outs]),
        "iterator_types": iterator_types,
        "operandSegmentSizes": ir.Attribute.parse(f"array<i32: {len(ins)}, {len(outs)}>"),
    }
    op = ir.Operation.create("linalg.generic", results=[v.type for v, _ in outs], operands=[v for v, _ in ins + outs],
                             attributes=attrs, regions=1, loc=at.location, ip=ir.InsertionPoint(at))

    def element_type(v: ir.Value) -> ir.Type:
        return ir.ShapedType(v.type).element_type if isinstance(v.type, ir.ShapedType) else v.type
    return op, op.regions[0].blocks.append(*[element_type(v) for v, _ in ins + outs])


def _merge_pair(prod: ir.Operation, cons: ir.Operation) -> ir.Operation:
    p_in, c_in = len(prod.operands) - _n_outs(prod), len(cons.operands) - _n_outs(cons)
    pmaps, cmaps = _maps(prod), _maps(cons)
    keep = [r for r, res in enumerate(prod.results) if any(u != cons for u in _readers(res))]
    p_results = list(prod.results)
    ins: list[tuple[ir.Value, ir.AffineMap]] = []
    for v, m in [(prod.operands[k], pmaps[k]) for k in range(p_in)] + \
            [(cons.operands[k], cmaps[k]) for k in range(c_in) if cons.operands[k] not in p_results]:
        if (v, m) not in ins:       # one load per element for an operand both read alike
            ins.append((v, m))

    def destination(v: ir.Value) -> ir.Value:
        # a consumer told to write over the producer's result (reuse_dying_inputs) writes over the
        # producer's destination instead: the result itself is no longer computed before
        return prod.operands[p_in + p_results.index(v)] if v in p_results else v
    outs = [(prod.operands[p_in + r], pmaps[p_in + r]) for r in keep] + \
        [(destination(cons.operands[c_in + r]), cmaps[c_in + r]) for r in range(len(cons.results))]
    merged, block = new_generic(ins, outs, cons.attributes["iterator_types"], cons)
    args = list(block.arguments)
    pb, cb = prod.regions[0].blocks[0], cons.regions[0].blocks[0]
    inside = ir.InsertionPoint(block)
    mapping = {pb.arguments[k]: args[ins.index((prod.operands[k], pmaps[k]))] for k in range(p_in)}
    p_values = _copy_payload(prod, mapping, inside)
    mapping = {}
    for k in range(c_in):
        v = cons.operands[k]
        if v in p_results:
            mapping[cb.arguments[k]] = p_values[p_results.index(v)]
        else:
            mapping[cb.arguments[k]] = args[ins.index((v, cmaps[k]))]
    c_values = _copy_payload(cons, mapping, inside)
    ir.Operation.create("linalg.yield", operands=[p_values[r] for r in keep] + c_values, loc=cons.location,
                        ip=inside)
    for j, r in enumerate(keep):
        prod.results[r].replace_all_uses_with(merged.results[j])
    for r in range(len(cons.results)):
        cons.results[r].replace_all_uses_with(merged.results[len(keep) + r])
    cons.erase()
    prod.erase()
    return merged


def _mergeable(cons: ir.Operation) -> ir.Operation | None:
    """The producer `cons` merges with (see above), or None."""
    c_in = len(cons.operands) - _n_outs(cons)
    cmaps = _maps(cons)
    identity = list(ir.AffineMap.get_identity(cmaps[0].n_dims).results)
    for k in range(c_in):
        v = cons.operands[k]
        prod = operation_of(v)
        if prod is None or prod.block != cons.block or list(cmaps[k].results) != identity or \
                not _elementwise_identity_outs(prod) or _maps(prod)[0].n_dims != cmaps[0].n_dims:
            continue
        p_results = list(prod.results)
        if any(cons.operands[i] in p_results and list(cmaps[i].results) != identity for i in range(c_in)):
            # cons also reads prod's result at other indices (`b + b.T`): merged, that read would
            # take the value computed at its own indices (_merge_pair maps every read of the result
            # to it), and the other element is not computed yet
            continue
        if all(u == cons or _after(u, cons) for res in prod.results for u in _readers(res)):
            return prod
    return None


def _after(u: ir.Operation, cons: ir.Operation) -> bool:
    """Whether `u` (or the op of cons's block that holds it) comes after `cons`."""
    a = _ancestor_in(u, cons.block)
    return a is not None and a != cons and cons.is_before_in_block(a)


def _splat_value(defs: _Defs, v: ir.Value) -> ir.Value | None:
    """The scalar every element of v is, when v is a linalg.fill or a generic without inputs
    yielding a value from outside it (stablehlo-legalize-to-linalg's broadcast of a constant)."""
    op = defs.get(v)
    if op is None:
        return None
    if op.name == "linalg.fill":
        return op.operands[0]
    if op.name != "linalg.generic" or len(op.operands) != 1 or len(op.results) != 1:
        return None
    body = _payload(op)
    if len(body) != 1 or defs.get(body[0].operands[0]) is None:   # yields a block argument
        return None
    value = body[0].operands[0]
    return value if defs.get(value).parent != op else None


def _fold_splat_inputs(defs: _Defs, op: ir.Operation) -> None:
    """A generic reading a splat (a zeros_like carried into `where(mask, 1.0, 0.0)`) uses its scalar
    instead: one load stream less; the unused operand's load is dead code for LLVM."""
    args = op.regions[0].blocks[0].arguments
    for k in range(len(op.operands) - _n_outs(op)):
        scalar = _splat_value(defs, op.operands[k])
        if scalar is not None and list(args[k].uses) and _dominates(defs, scalar, op):
            args[k].replace_all_uses_with(scalar)


def _readers(v: ir.Value) -> Iterator[ir.Operation]:
    """The ops that read `v`, lazily: a value with hundreds of readers (a gradient's shared
    constant) is asked once per consumer, and the first reader that settles the question ends it."""
    return (getattr(u.owner, "operation", u.owner) for u in v.uses)


def merge_elementwise_chains(module: ir.Module) -> int:
    """Merges elementwise consumers with the producers they read (see above); returns how many.
    One walk: a merged generic stands where its consumer stood, and producers come before it."""
    if not enabled():
        return 0
    merged = 0
    defs = _Defs(module.operation)
    # generics only: the payload ops of merged (erased) generics must not be touched again
    for cons in [op for op in defs.ops if op.name == "linalg.generic"]:
        _fold_splat_inputs(defs, cons)
        flat = drop_unit_expansions(cons, defs.forget)   # a row of unit dims reading the values it combines
        if flat is not None:
            cons = flat
            defs.of.update((r, cons) for r in cons.results)
        while merged < MAX_MERGED_OPS and _elementwise_identity_outs(cons):
            prod = _mergeable(cons)
            if prod is None:
                break
            defs.forget(prod, cons)
            cons = _merge_pair(prod, cons)
            defs.of.update((r, cons) for r in cons.results)
            merged += 1
    return merged


__all__ = ["accumulate_sums", "duplicate_cheap_producers", "enabled", "merge_elementwise_chains",
           "merge_reductions_with_producers", "new_generic", "reuse_dying_inputs"]
