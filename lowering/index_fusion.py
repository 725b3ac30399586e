"""Arrays computed from their own indices (iotas: `arange`, masks built from it) recomputed where
they are read, and comparisons of small indices made on 32 bits.

A causal mask `where(i[:, None] >= i[None, :], s, -1e30)` with `i = arange(t)` reaches the linalg
stage as an iota (a generic whose payload is `linalg.index` and a cast) read through two
reshapes, [t, 1] and [1, t]. linalg-fuse-elementwise-ops does not fuse through reshapes, so the
iota is stored and the masked loop loads two int64 rows; with float32 scores the int64 lanes
halve the loop's vector width (16 floats, 8 int64s): causal attention ran 1.3x JAX (JAX without
x64 has int32 iotas). Here each reader recomputes the iota from its own loop indices (XLA's loop
fusion treats iota the same way: an index computation, never a buffer), and
`cmpi(index_cast(a), index_cast(b))` of two such indices compares them as int32 where both are
known to fit (a loop index of a static extent, a small constant): 1.02 -> 0.85 ms.

Runs on tensors at the end of the linalg stage: the iotas before MLIR's elementwise fusion (whose
canonicalization removes what they leave dead), the narrowing after it (it brings iotas read
through broadcasts into their readers).
"""
from __future__ import annotations

from torch_mlir import ir

from sprue.lowering.fusion import (
    _copy_payload,
    _dim_position,
    _extents,
    _maps,
    _n_outs,
    _payload,
    copy_ops,
    enabled,
    new_generic,
)
from sprue.lowering.mlir_util import as_operation, ops_where
from sprue.lowering.mlir_util import index as index_constant

# ops an iota's payload may hold (an index, cast and scaled)
_INDEX_OPS = frozenset({"linalg.index", "linalg.yield", "arith.index_cast", "arith.index_castui", "arith.sitofp",
                        "arith.uitofp", "arith.constant", "arith.addi", "arith.muli", "arith.trunci", "arith.extsi"})
_I32_MAX = 2 ** 31 - 1


def _is_iota(op: ir.Operation) -> bool:
    if op.name != "linalg.generic" or len(op.results) != 1 or len(op.operands) != 1 or _n_outs(op) != 1:
        return False
    t = op.results[0].type
    if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
        return False
    return "reduction" not in str(op.attributes["iterator_types"]) and \
        all(inner.name in _INDEX_OPS for inner in _payload(op))


def _readers(iota: ir.Operation) -> list[tuple[ir.Operation, int, list[ir.AffineExpr]]]:
    """(reader, input number, the reader's index expression for each of the iota's axes) for every
    generic reading the iota as an input, directly or through a static expand_shape."""
    found = []
    for use in iota.results[0].uses:
        owner = as_operation(use.owner)
        if owner.name == "linalg.generic":
            found.append((owner, use.operand_number, None))
        elif owner.name == "tensor.expand_shape" and ir.RankedTensorType(owner.results[0].type).has_static_shape:
            out = ir.RankedTensorType(owner.results[0].type)
            groups = [[ir.IntegerAttr(a).value for a in ir.ArrayAttr(g)]
                      for g in ir.ArrayAttr(owner.attributes["reassociation"])]
            carried = []    # the expanded axis that carries each source axis (the others are units)
            for g in groups:
                wide = [a for a in g if out.shape[a] != 1]
                if len(wide) > 1:
                    carried = None
                    break
                carried.append(wide[0] if wide else None)
            if carried is None:
                continue
            for inner in owner.results[0].uses:
                reader = as_operation(inner.owner)
                if reader.name == "linalg.generic":
                    found.append((reader, inner.operand_number, carried))
    out = []
    for reader, j, carried in found:
        if j >= len(reader.operands) - _n_outs(reader):
            continue           # written, not read
        exprs = list(_maps(reader)[j].results)
        axes = [exprs[a] if a is not None else ir.AffineConstantExpr.get(0) for a in carried] if carried else exprs
        if all(isinstance(e.maybe_downcast(), (ir.AffineDimExpr, ir.AffineConstantExpr)) for e in axes) \
                and _loops_sized_without(reader, j):
            out.append((reader, j, axes))
    return out


def _loops_sized_without(reader: ir.Operation, j: int) -> bool:
    """Whether the reader's other operands still give every loop its extent: a sum of an iota
    (`arange(5.0).sum()`) reads nothing else, and a generic with no operand indexed by its reduction
    loop is invalid (MLIR's fusion crashed on it)."""
    maps = _maps(reader)
    sized = {_dim_position(e) for k, m in enumerate(maps) if k != j for e in m.results}
    return all(d in sized for d in range(maps[0].n_dims))


def _index_value(expr: ir.AffineExpr, ip: ir.InsertionPoint, loc: ir.Location) -> ir.Value:
    index = ir.IndexType.get()
    d = _dim_position(expr)
    if d is not None:
        return ir.Operation.create("linalg.index", results=[index], attributes={
            "dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), d)}, loc=loc, ip=ip).results[0]
    with ip, loc:
        return index_constant(ir.AffineConstantExpr(expr.maybe_downcast()).value)


def _recompute_in(iota: ir.Operation, reader: ir.Operation, j: int, axes: list[ir.AffineExpr]) -> None:
    """`reader` without its input j: the iota's payload computed from `axes` in its place."""
    maps = _maps(reader)
    n_in = len(reader.operands) - _n_outs(reader)
    ins = [(reader.operands[k], maps[k]) for k in range(n_in) if k != j]
    outs = [(reader.operands[k], maps[k]) for k in range(n_in, len(reader.operands))]
    new, block = new_generic(ins, outs, reader.attributes["iterator_types"], reader)
    old = reader.regions[0].blocks[0]
    old_args = [a for k, a in enumerate(old.arguments) if k != j]
    mapping: dict[ir.Value, ir.Value] = dict(zip(old_args, block.arguments))
    ip = ir.InsertionPoint(block)
    index = [_index_value(e, ip, reader.location) for e in axes]
    # the iota's payload, its linalg.index ops replaced by the reader's indices
    inner_map = {inner.results[0]: index[ir.IntegerAttr(inner.attributes["dim"]).value]
                 for inner in _payload(iota) if inner.name == "linalg.index"}
    (mapping[old.arguments[j]],) = copy_ops([o for o in _payload(iota) if o.name != "linalg.index"], inner_map, ip)
    yielded = _copy_payload(reader, mapping, ip)
    ir.Operation.create("linalg.yield", operands=yielded, loc=reader.location, ip=ip)
    for a, b in zip(reader.results, new.results):
        a.replace_all_uses_with(b)
    reader.erase()


def _small(v: ir.Value, extents: list[int | None]) -> bool:
    """An index known to lie in [0, 2^31): a loop index of a static extent, or such a constant."""
    if isinstance(v.owner, ir.Block):
        return False
    op = as_operation(v.owner)
    if op.name == "linalg.index":
        extent = extents[ir.IntegerAttr(op.attributes["dim"]).value]
        return extent is not None and extent <= _I32_MAX
    if op.name == "arith.constant" and isinstance(v.type, ir.IndexType):
        return 0 <= ir.IntegerAttr(op.attributes["value"]).value <= _I32_MAX
    return False


def _narrow_compares(op: ir.Operation) -> None:
    """cmpi(index_cast(a), index_cast(b)) of small indices a, b: on int32."""
    compares = [inner for inner in _payload(op) if inner.name == "arith.cmpi" and str(inner.operands[0].type) != "i32"]
    if not compares:
        return
    maps = _maps(op)
    extents = _extents(op, maps, maps[0].n_dims)
    i32 = ir.IntegerType.get_signless(32)
    for inner in compares:
        sources = []
        for v in inner.operands:
            cast = None if isinstance(v.owner, ir.Block) else as_operation(v.owner)
            if cast is None or cast.name != "arith.index_cast" or not _small(cast.operands[0], extents):
                break
            sources.append(cast.operands[0])
        if len(sources) != 2:
            continue
        ip = ir.InsertionPoint(inner)
        narrow = [ir.Operation.create("arith.index_cast", results=[i32], operands=[s], loc=inner.location,
                                      ip=ip).results[0] for s in sources]
        for k, v in enumerate(narrow):
            inner.operands[k] = v


def fuse_index_producers(module: ir.Module) -> int:
    """Every static iota is recomputed in the generics reading it (see the module doc); returns how
    many readers changed."""
    if not enabled():
        return 0
    changed = 0
    for iota in ops_where(module.operation, _is_iota):
        # one reader at a time: a reader of two reshapes of the iota (a mask's rows and columns)
        # is replaced by the first rewrite, and found again through the second reshape
        readers = _readers(iota)
        while readers:
            reader, j, axes = readers[0]
            with reader.context, reader.location:
                _recompute_in(iota, reader, j, axes)
            changed += 1
            readers = _readers(iota)
    return changed


def narrow_index_compares(module: ir.Module) -> None:
    """In every generic, comparisons of small loop indices on int32 (after elementwise fusion,
    which brings iotas read through broadcasts into their readers)."""
    if enabled():
        for op in ops_where(module.operation, lambda o: o.name == "linalg.generic"):
            _narrow_compares(op)


__all__ = ["fuse_index_producers", "narrow_index_compares"]
