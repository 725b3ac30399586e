"""A chain of contractions accumulating into each other's results, as one generic.

fusion.accumulate_sums makes `einsum(p0, k0) + einsum(p1, k1) + ...` (a 'valid' 3x3 convolution
written as nine shifted einsums, an im2col-free conv) accumulate into one buffer: each contraction's
init is the previous one's result. Each is still its own loop nest, so every output element is
loaded and stored once per contraction and reduction step (nine times eight for the CNN's second
layer, K = 8): the output stream, not the multiplications, bounds them. When consecutive links have
the same loops (equal static extents, same iterator types, same output map), they become one generic
reading every link's operands, whose payload adds each link's product to the running value in turn
(`out + a0 * b0 + a1 * b1 + ...`): what a convolution generic over (dy, dx, c) does (IREE's and
XLA's convolution emitters keep the output tile in registers across the filter taps). The sum's
order changes (taps interleaved per reduction step); reductions carry reassoc (fastmath.py) and a
sum of products is no more exact in one order than in another.

Runs just before bufferization, after matmul.py has taken the products it tiles. The merged
generics then get a register tile where their loops fit one (sum_tiles.py).
"""
from __future__ import annotations

from torch_mlir import ir

from sprue.lowering.fusion import _accumulates, _copy_payload, _Defs, _extents, _maps, _n_outs, _payload, enabled
from sprue.lowering.sum_tiles import tile_sums


def _link(defs: _Defs, op: ir.Operation, sums: list[ir.Value]) -> ir.Operation | None:
    """The contraction `op` accumulates onto, when the two can be one generic (see above); `sums`
    are the results of generics merged here (their payloads add several products to the init)."""
    if op.name != "linalg.generic" or _n_outs(op) != 1 or not _accumulates(op, defs):
        return None
    init = op.operands[len(op.operands) - 1]
    prev = defs.get(init)
    if prev is None or prev.name != "linalg.generic" or prev.block != op.block or _n_outs(prev) != 1 or \
            len(list(init.uses)) != 1 or not (init in sums or _accumulates(prev, defs)) or \
            str(prev.attributes["iterator_types"]) != str(op.attributes["iterator_types"]):
        return None
    maps, pmaps = _maps(op), _maps(prev)
    # payload ops with regions are not copied op by op (_copy_payload)
    if maps[-1] != pmaps[-1] or any(len(o.regions) for o in _payload(op) + _payload(prev)):
        return None
    if maps[0].n_dims != pmaps[0].n_dims:
        return None
    # a loop indexing the output runs over the output's extent in both (op's init is prev's result,
    # so dynamic sizes agree too); the reduction loops must have equal static extents
    ext, pext = _extents(op, maps, maps[0].n_dims), _extents(prev, pmaps, pmaps[0].n_dims)
    out_dims = {e.maybe_downcast().position for e in maps[-1].results
                if isinstance(e.maybe_downcast(), ir.AffineDimExpr)}
    same = all(d in out_dims or (ext[d] is not None and ext[d] == pext[d]) for d in range(len(ext)))
    return prev if same else None


def _merge(prev: ir.Operation, op: ir.Operation) -> ir.Operation:
    pmaps, maps = _maps(prev), _maps(op)
    p_in, o_in = len(prev.operands) - 1, len(op.operands) - 1
    operands = list(prev.operands)[:p_in] + list(op.operands)[:o_in] + [prev.operands[p_in]]
    new_maps = pmaps[:p_in] + maps[:o_in] + [pmaps[p_in]]
    attrs = {name: op.attributes[name] for name in op.attributes}
    attrs["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in new_maps])
    attrs["operandSegmentSizes"] = ir.Attribute.parse(f"array<i32: {p_in + o_in}, 1>")
    merged = ir.Operation.create("linalg.generic", results=[op.results[0].type], operands=operands,
                                 attributes=attrs, regions=1, loc=op.location, ip=ir.InsertionPoint(op))
    pb, ob = prev.regions[0].blocks[0], op.regions[0].blocks[0]
    block = merged.regions[0].blocks.append(*([a.type for a in list(pb.arguments)[:p_in]] +
                                              [a.type for a in list(ob.arguments)[:o_in]] +
                                              [pb.arguments[p_in].type]))
    args = list(block.arguments)
    inside = ir.InsertionPoint(block)
    mapping = dict(zip(list(pb.arguments), args[:p_in] + [args[-1]]))
    running = _copy_payload(prev, mapping, inside)[0]
    mapping = dict(zip(list(ob.arguments), args[p_in:p_in + o_in] + [running]))
    total = _copy_payload(op, mapping, inside)[0]
    ir.Operation.create("linalg.yield", operands=[total], loc=op.location, ip=inside)
    op.results[0].replace_all_uses_with(merged.results[0])
    op.erase()
    prev.erase()
    return merged


def merge_accumulating_chains(module: ir.Module) -> int:
    """Merges each accumulating contraction with the one it accumulates onto, then tiles the merged
    generics (sum_tiles.py); returns how many merges."""
    if not enabled():
        return 0
    merged: list[ir.Value] = []
    chains: list[ir.Operation] = []   # the merged generics (a link merged on drops out)
    defs = _Defs(module.operation)
    # in block order: each link merges onto the chain merged so far, which stands where the link stood
    for op in [o for o in defs.ops if o.name == "linalg.generic"]:
        prev = _link(defs, op, merged)
        if prev is None:
            continue
        chains = [c for c in chains if c != prev]
        defs.forget(prev, op)   # erased by _merge: their values' addresses may be reused
        chain = _merge(prev, op)
        defs.of[chain.results[0]] = chain
        merged.append(chain.results[0])
        chains.append(chain)
    tile_sums(module, chains)
    return len(merged)

__all__ = ["merge_accumulating_chains"]
