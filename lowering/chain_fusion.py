"""Long chains of elementwise ops fused in one step, in linear time.

linalg-fuse-elementwise-ops fuses a producer into its consumer one pair at a time, each time
building a new generic with the inputs and payloads of both: a chain of n elementwise ops (a sum
of 5,000 arguments, thousands of chained updates of one array) becomes one generic of n inputs
after n fusions of growing size, O(n^2) ops built (the sum of 2,000 arrays: 4.8 s in that pass;
of 5,000, most of a minute). Here, just before that pass, each chain of at least MIN_CHAIN
elementwise generics, each read only by the next and at its loop indices, becomes that one generic
directly, and so does each tree of them (a chain whose steps also read single-use elementwise
producers: broadcasts of their other operands): its inputs are the tree's other inputs with their
own indexing maps, its payload the tree's payloads in program order, its destination the root's.
What the pass would have built, built once; smaller trees are left to the pass.
"""
from __future__ import annotations

from torch_mlir import ir

from sprue.lowering.fusion import _copy_payload, _Defs, _elementwise_identity_outs, _maps, _n_outs, enabled, new_generic

# From 64 ops: below, MLIR's pairwise fusion costs little. (The one tree of 16 or more in the
# realistic programs, the Mandelbrot program's, fused here gives the same IR as the pass, constants
# aside: the 2x an in-process A/B once showed was the process, not the code.)
MIN_CHAIN = 64


def _links(defs: _Defs, op: ir.Operation) -> dict[int, ir.Operation]:
    """Input position -> producer, for each input that `op`, an elementwise generic of one result,
    reads at its loop indices from the one result of an elementwise generic over the same loops
    that nothing else reads."""
    if op.name != "linalg.generic" or len(op.results) != 1:
        return {}
    # the structural tests first: most inputs fail them, and the maps are costly to read
    candidates = []
    for k in range(len(op.operands) - _n_outs(op)):
        prod = defs.get(op.operands[k])
        if prod is not None and prod.name == "linalg.generic" and len(prod.results) == 1 and prod.block == op.block \
                and len(list(op.operands[k].uses)) == 1:
            candidates.append((k, prod))
    if not candidates or not _elementwise_identity_outs(op):
        return {}
    maps = _maps(op)
    identity = list(ir.AffineMap.get_identity(maps[0].n_dims).results)
    found = {}
    for k, prod in candidates:
        if list(maps[k].results) != identity or not _elementwise_identity_outs(prod) \
                or _maps(prod)[0].n_dims != maps[0].n_dims \
                or str(prod.attributes["iterator_types"]) != str(op.attributes["iterator_types"]):
            continue
        found[k] = prod
    return found


def _fuse(cluster: list[ir.Operation], links: dict[ir.Operation, dict[int, ir.Operation]]) -> None:
    """Replaces `cluster` (in program order, its root last; links: op -> input position -> the
    cluster op it reads there) by one generic."""
    root = cluster[-1]
    ins: list[tuple[ir.Value, ir.AffineMap]] = []
    position: dict[tuple[ir.Value, str], int] = {}
    for op in cluster:
        maps = _maps(op)
        for k in range(len(op.operands) - 1):
            key = (op.operands[k], str(maps[k]))
            if k not in links[op] and key not in position:   # one load per element for an operand read alike
                position[key] = len(ins)
                ins.append((op.operands[k], maps[k]))
    out = (root.operands[len(root.operands) - 1], _maps(root)[-1])
    fused, block = new_generic(ins, [out], root.attributes["iterator_types"], root)
    args = list(block.arguments)
    inside = ir.InsertionPoint(block)
    value_of: dict[ir.Operation, ir.Value] = {}
    for op in cluster:
        maps = _maps(op)
        own = op.regions[0].blocks[0].arguments
        mapping = {own[k]: (value_of[links[op][k]] if k in links[op] else args[position[(op.operands[k], str(maps[k]))]])
                   for k in range(len(op.operands) - 1)}
        (value_of[op],) = _copy_payload(op, mapping, inside)
    ir.Operation.create("linalg.yield", operands=[value_of[root]], loc=root.location, ip=inside)
    root.results[0].replace_all_uses_with(fused.results[0])
    for op in reversed(cluster):
        op.erase()


def fuse_long_chains(module: ir.Module) -> int:
    """Fuses every tree of at least MIN_CHAIN elementwise generics, each read only by the next,
    into one (module doc); returns how many."""
    if not enabled():
        return 0
    defs = _Defs(module.operation)
    generics = [op for op in defs.ops if op.name == "linalg.generic"]
    order = {op: i for i, op in enumerate(generics)}
    links = {op: _links(defs, op) for op in generics}
    producers = {prod for found in links.values() for prod in found.values()}
    clusters = []   # all found before any is fused: fusing erases ops the others' lookups would hash
    for root in generics:
        if root in producers or not links[root]:
            continue          # read by a fusable consumer, or reads no fusable producer
        cluster, todo = [], [root]
        while todo:
            op = todo.pop()
            cluster.append(op)
            todo.extend(links[op].values())
        if len(cluster) >= MIN_CHAIN:
            clusters.append(sorted(cluster, key=order.__getitem__))
    for cluster in clusters:
        _fuse(cluster, links)
    return len(clusters)


__all__ = ["MIN_CHAIN", "fuse_long_chains"]
