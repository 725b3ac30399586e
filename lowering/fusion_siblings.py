"""Reductions over the same loops, in one pass, with the elementwise op they alone read.

A Monte Carlo estimate sums two things of the same samples, `sum(where(r2 < 1, 1, 0))` and
`sum(exp(-r2))`: linalg-fuse-elementwise-ops fuses the cheap part of r2 into each sum but not the
hashes the samples come from (read by both sums, so never single-use), which are written to two
arrays, and each sum then reads them back in a pass of its own (one of them, too little work for
the pool alone, serial: parallel.py's estimate). XLA's sibling (multi-output) fusion makes such
reductions one loop nest; here:

  - two generics with the same iterator types that read one value through the same map covering
    all their loops (so their loops have the same extents, run-time ones too), the later one
    reading nothing the earlier one computes (every user of the earlier one comes after the later
    one), become one generic with both outputs, at the later one's place: the payloads one after
    the other, an operand both read passed once;
  - an elementwise generic whose every result only that merged generic reads, at its own loop
    indices, is computed in it: its payload copied in first, its results never written.

Each output is computed by the same payload ops in the same order as before; only the loop nest
is shared. Runs before bufferization, after the elementwise merges (fusion.py).
"""
from __future__ import annotations

from torch_mlir import ir

from sprue.lowering.fusion import _copy_payload, _Defs, _maps, _n_outs, _payload, enabled

# Merges per function at most (each rewrite walks the function again).
MAX_MERGES = 32


def _kinds(op: ir.Operation) -> str:
    return str(op.attributes["iterator_types"])


def _covers_all_loops(m: ir.AffineMap) -> bool:
    return m.is_permutation


def _reduction(op: ir.Operation) -> bool:
    return op.name == "linalg.generic" and "reduction" in _kinds(op) and \
        not any(len(o.regions) for o in _payload(op))


def _shared_domain(a: ir.Operation, b: ir.Operation) -> bool:
    """Whether a and b read one value through one map that is a permutation of their loops."""
    am, bm = _maps(a), _maps(b)
    if am[0].n_dims != bm[0].n_dims or _kinds(a) != _kinds(b):
        return False
    a_ins = list(zip(list(a.operands)[:len(am) - _n_outs(a)], am))
    b_ins = list(zip(list(b.operands)[:len(bm) - _n_outs(b)], bm))
    return any(v == w and m == n and _covers_all_loops(m) for v, m in a_ins for w, n in b_ins)


def _users_after(a: ir.Operation, b: ir.Operation) -> bool:
    """Every user of a's results is b's block's op after b (or inside one)."""
    for r in a.results:
        for use in r.uses:
            user = use.owner
            user = user.operation if isinstance(user, ir.OpView) else user
            while user is not None and user.block != b.block:
                parent = user.parent
                user = parent.operation if isinstance(parent, ir.OpView) else parent
                if user is not None and user.name == "func.func":
                    return False
            if user is None or user == b or not b.is_before_in_block(user):
                return False
    return True


def _create(ins: list[tuple[ir.Value, ir.AffineMap]], outs: list[tuple[ir.Value, ir.AffineMap]],
            kinds: ir.Attribute, at: ir.Operation) -> tuple[ir.Operation, list[ir.Value]]:
    operands = [v for v, _ in ins] + [v for v, _ in outs]
    maps = [m for _, m in ins] + [m for _, m in outs]
    op = ir.Operation.create(
        "linalg.generic", results=[v.type for v, _ in outs], operands=operands, regions=1, loc=at.location,
        attributes={"indexing_maps": ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                    "iterator_types": kinds,
                    "operandSegmentSizes": ir.Attribute.parse(f"array<i32: {len(ins)}, {len(outs)}>")},
        ip=ir.InsertionPoint(at))
    elem = [ir.ShapedType(v.type).element_type for v in operands]
    block = op.regions[0].blocks.append(*elem)
    return op, list(block.arguments)


def _merge_siblings(a: ir.Operation, b: ir.Operation) -> ir.Operation:
    am, bm = _maps(a), _maps(b)
    na, nb = len(am) - _n_outs(a), len(bm) - _n_outs(b)
    ins: list[tuple[ir.Value, ir.AffineMap]] = []
    index: list[int] = []            # each input of a, then of b: its position in `ins`
    for v, m in list(zip(list(a.operands)[:na], am)) + list(zip(list(b.operands)[:nb], bm)):
        k = next((i for i, (w, n) in enumerate(ins) if w == v and n == m), None)
        if k is None:
            k = len(ins)
            ins.append((v, m))
        index.append(k)
    outs = list(zip(list(a.operands)[na:], am[na:])) + list(zip(list(b.operands)[nb:], bm[nb:]))
    op, args = _create(ins, outs, a.attributes["iterator_types"], b)
    n = len(ins)
    ab, bb = a.regions[0].blocks[0], b.regions[0].blocks[0]
    inside = ir.InsertionPoint(op.regions[0].blocks[0])
    mapping = {x: args[index[i]] for i, x in enumerate(list(ab.arguments)[:na])}
    mapping.update(zip(list(ab.arguments)[na:], args[n:n + _n_outs(a)]))
    yielded = _copy_payload(a, mapping, inside)
    mapping = {x: args[index[na + i]] for i, x in enumerate(list(bb.arguments)[:nb])}
    mapping.update(zip(list(bb.arguments)[nb:], args[n + _n_outs(a):]))
    yielded += _copy_payload(b, mapping, inside)
    ir.Operation.create("linalg.yield", operands=yielded, loc=b.location, ip=inside)
    for old, new in zip(list(a.results) + list(b.results), op.results):
        old.replace_all_uses_with(new)
    a.erase()
    b.erase()
    return op


def _only_read_by(prod: ir.Operation, op: ir.Operation) -> bool:
    """An elementwise generic with op's loops, identity maps out and in op, whose every result op
    alone reads."""
    if prod.name != "linalg.generic" or "reduction" in _kinds(prod):
        return False
    pm, maps = _maps(prod), _maps(op)
    if pm[0].n_dims != maps[0].n_dims or prod.block != op.block or any(len(o.regions) for o in _payload(prod)):
        return False
    identity = ir.AffineMap.get_identity(pm[0].n_dims)
    n_ins = len(maps) - _n_outs(op)
    outs = prod.regions[0].blocks[0].arguments[len(pm) - _n_outs(prod):]
    if any(pm[len(pm) - _n_outs(prod) + k] != identity or list(o.uses) for k, o in enumerate(outs)):
        return False
    for r in prod.results:
        for use in r.uses:
            owner = use.owner.operation if isinstance(use.owner, ir.OpView) else use.owner
            if owner != op or use.operand_number >= n_ins or maps[use.operand_number] != identity:
                return False
    return True


def _inlined_inputs(op: ir.Operation, prod: ir.Operation) -> tuple[list[int], list[tuple[ir.Value, ir.AffineMap]], list[int]]:
    """The inputs op has once it computes prod's results itself: op's own inputs other than prod's
    results (their positions `kept`), then prod's inputs not among them (`p_index`: each of prod's
    inputs' position)."""
    maps, pm = _maps(op), _maps(prod)
    n_ins, p_ins = len(maps) - _n_outs(op), len(pm) - _n_outs(prod)
    results = list(prod.results)
    kept = [k for k in range(n_ins) if op.operands[k] not in results]
    ins = [(op.operands[k], maps[k]) for k in kept]
    p_index = []
    for v, m in zip(list(prod.operands)[:p_ins], pm[:p_ins]):
        k = next((i for i, (w, n) in enumerate(ins) if w == v and n == m), None)
        if k is None:
            k = len(ins)
            ins.append((v, m))
        p_index.append(k)
    return kept, ins, p_index


def _inlinable(op: ir.Operation, prod: ir.Operation) -> bool:
    """prod only op reads (_only_read_by), and op keeps an input read through a permutation of its
    loops once prod is inlined: linalg derives a generic's loop extents by inverting its maps, which
    a reversed read alone (`(d0) -> (-d0 + 7)`, a `rev` that linalg-fuse-elementwise-ops folded
    into prod) and reduced outputs (`(d0) -> ()`) do not allow (ndcg's two sums, one of them of a
    reversed sort: "invalid indexing maps are non-invertible")."""
    return _only_read_by(prod, op) and any(_covers_all_loops(m) for _, m in _inlined_inputs(op, prod)[1])


def _inline_producer(op: ir.Operation, prod: ir.Operation) -> ir.Operation:
    """op computing prod's results itself (_inlinable)."""
    maps, pm = _maps(op), _maps(prod)
    n_ins, p_ins = len(maps) - _n_outs(op), len(pm) - _n_outs(prod)
    results = list(prod.results)
    kept, ins, p_index = _inlined_inputs(op, prod)
    outs = list(zip(list(op.operands)[n_ins:], maps[n_ins:]))
    new, args = _create(ins, outs, op.attributes["iterator_types"], op)
    n = len(ins)
    inside = ir.InsertionPoint(new.regions[0].blocks[0])
    pb, ob = prod.regions[0].blocks[0], op.regions[0].blocks[0]
    values = _copy_payload(prod, {x: args[p_index[i]] for i, x in enumerate(list(pb.arguments)[:p_ins])}, inside)
    mapping = {ob.arguments[k]: args[j] for j, k in enumerate(kept)}
    mapping.update({ob.arguments[k]: values[results.index(op.operands[k])]
                    for k in range(n_ins) if op.operands[k] in results})
    mapping.update(zip(list(ob.arguments)[n_ins:], args[n:]))
    ir.Operation.create("linalg.yield", operands=_copy_payload(op, mapping, inside), loc=op.location, ip=inside)
    for old, r in zip(op.results, new.results):
        old.replace_all_uses_with(r)
    op.erase()
    prod.erase()
    return new


def _merge_one(root: ir.Operation) -> bool:
    defs = _Defs(root)
    reds = [op for op in defs.ops if _reduction(op)]
    for i, a in enumerate(reds):
        for b in reds[i + 1:]:
            if a.block != b.block or not a.is_before_in_block(b) or not _shared_domain(a, b) or \
                    not _users_after(a, b):
                continue
            merged = _merge_siblings(a, b)
            while True:
                prod = next((p for p in (defs.get(v) for v in merged.operands)
                             if p is not None and _inlinable(merged, p)), None)
                if prod is None:
                    return True
                defs.forget(prod)
                merged = _inline_producer(merged, prod)
    return False


def merge_sibling_reductions(module: ir.Module) -> int:
    """Merges reductions over the same loops and the producers they alone read; returns how many
    merges."""
    if not enabled():
        return 0
    merged = 0
    while merged < MAX_MERGES and _merge_one(module.operation):
        merged += 1
    return merged


__all__ = ["merge_sibling_reductions"]
