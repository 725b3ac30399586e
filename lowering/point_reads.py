"""Point reads: the scalar value of a tensor at one index, computed where it is needed.

A gather or a scatter visits its elements one at a time, in its own loop; what feeds it (the update
values `x[src] * w`, index arithmetic such as the negative-index wrap `where(i < 0, i + n, i)`, a
clamp, an `[n] -> [n, 1]` broadcast of the indices) would otherwise be computed by separate
loops over whole arrays, each writing a temporary the gather/scatter loop then reads back.
`PointReader` instead emits, inside the consumer's loop, the scalar code for `value[ivs]`,
pulling in the producers of `value` (XLA's producer fusion into scatter and gather, the
"loop fusion" of its fusion passes; MLIR's linalg elementwise fusion does the same for
linalg.generic consumers, which a scatter loop is not):

- elementwise StableHLO ops (every op of mlir_util's scalar table) read their operands at the
  same index;
- broadcast_in_dim / dynamic_broadcast_in_dim and reshapes that only add or drop unit dims read
  their operand at the mapped index (0 on an expanded dim);
- iota is its index; a splat constant its value;
- a gather (static or dynamic) is one read of its operand at the clamped start + offset, its
  start indices read by the same rules.

A producer is pulled in only when it sits in the consumer's block and every use of its results is
by the consumer or by ops already pulled in (then nothing else needs the array, and after the
rewrite it is dead: `erase_fused` removes it). Work is never duplicated: each consumer element
reads each producer element once, except through an expanding broadcast, whose operand is read
from its array (never recomputed per broadcast element) — and a gather's operand, read at
arbitrary positions, is always read from its array. Anything else is read with tensor.extract.
"""
from __future__ import annotations

from typing import Sequence

from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo
from torch_mlir.dialects import arith, scf

from sprue.lowering.mlir_util import (
    SCALAR_RULES,
    add,
    all_of,
    as_operation,
    cmp,
    const,
    elem_of,
    element_kind,
    extract,
    index,
    insert_at,
    select,
    signless,
    tensor_sizes,
    tensor_type,
    to_index,
    to_signless,
)

_STRUCTURAL = ("stablehlo.constant", "stablehlo.reshape", "stablehlo.broadcast_in_dim",
               "stablehlo.dynamic_broadcast_in_dim", "stablehlo.iota", "stablehlo.gather",
               "stablehlo.dynamic_gather")
_ELEMENTWISE = frozenset(SCALAR_RULES) - frozenset(_STRUCTURAL)
GATHERS = ("stablehlo.gather", "stablehlo.dynamic_gather")


def _shape(v: ir.Value) -> list[int]:
    return list(tensor_type(v).shape)


def _dynamic(n: int) -> bool:
    return ir.ShapedType.is_dynamic_size(n)


def _broadcast_dims(op: ir.Operation) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"]))


def _known_nonexpanding(op: ir.Operation) -> set[int]:
    attr = op.attributes["known_nonexpanding_dimensions"] if "known_nonexpanding_dimensions" in op.attributes \
        else None
    return set(ir.DenseI64ArrayAttr(attr)) if attr is not None else set()


def _same_size(op: ir.Operation, k: int, d: int) -> bool | None:
    """Whether operand dim k of a broadcast equals result dim d: True, False (expanded from 1),
    None (not known before run time)."""
    src, dst = _shape(op.operands[0])[k], _shape(op.results[0])[d]
    if not _dynamic(src):
        if src != 1:
            return True
        return True if dst == 1 else (False if not _dynamic(dst) else None)
    return True if k in _known_nonexpanding(op) else None   # a `?` operand dim: 1 or the result's size


def _expanding(op: ir.Operation) -> bool:
    """A broadcast that may repeat operand elements (its operand is then read, not recomputed)."""
    dims = _broadcast_dims(op)
    result_shape = _shape(op.results[0])
    if any(_same_size(op, k, d) is not True for k, d in enumerate(dims)):
        return True
    return any(d not in dims and result_shape[d] != 1 for d in range(len(result_shape)))


def _unit_reshape(op: ir.Operation) -> bool:
    """A reshape that only adds or drops unit dims (static shapes)."""
    src, dst = _shape(op.operands[0]), _shape(op.results[0])
    if any(_dynamic(n) for n in src + dst):
        return False
    return [n for n in src if n != 1] == [n for n in dst if n != 1]


def _fusible_operands(op: ir.Operation, defs: dict) -> list[int]:
    """Operand positions whose producers may be pulled into a read of op's result."""
    name = op.name
    if name in _ELEMENTWISE:
        return list(range(len(op.operands)))
    if name in ("stablehlo.broadcast_in_dim", "stablehlo.dynamic_broadcast_in_dim"):
        return [] if _expanding(op) else [0]
    if name == "stablehlo.reshape":
        return [0]
    if name in GATHERS:
        # The start indices; the operand is read at arbitrary positions, so only a pad (index
        # arithmetic and a select, no work per element) is computed in place there.
        source = defs.get(op.operands[0])
        return [1, 0] if source is not None and source.name == "stablehlo.pad" else [1]
    if name == "stablehlo.pad":
        return [0]
    return []


def _readable(op: ir.Operation) -> bool:
    """Ops a point read can compute (each result element from operand elements)."""
    name = op.name
    if len(op.results) != 1 or len(op.regions) != 0:
        return False
    if name in _ELEMENTWISE:
        return True
    if name == "stablehlo.constant":
        return ir.DenseElementsAttr(op.attributes["value"]).is_splat
    if name == "stablehlo.reshape":
        return _unit_reshape(op)
    if name == "stablehlo.pad":
        return not any(ir.DenseI64ArrayAttr(op.attributes["interior_padding"]))
    return name in ("stablehlo.broadcast_in_dim", "stablehlo.dynamic_broadcast_in_dim", "stablehlo.iota") + GATHERS


class PointReader:
    """Reads of `roots` (operands of `anchor` at `root_positions`) element by element.

    Build it with the insertion point before `anchor` (loop-invariant values such as a gather's
    limits are computed there), call `read(value, ivs)` inside the loops, then `erase_fused()`
    once `anchor` is gone."""

    def __init__(self, anchor: ir.Operation, root_positions: Sequence[int], extra: Sequence[ir.Operation] = (),
                 destinations: Sequence[ir.Value] = ()):
        """`extra`: ops computed by reads even though `anchor` does not use them directly (a
        gather lowered on its own); `destinations`: the tensors the anchor's loop updates in place."""
        self.anchor = anchor
        with ir.InsertionPoint(anchor), anchor.location:
            # Loop-invariant values go before this marker, the consumer's loops after it.
            self.hoist = index(0).owner
        self._allowed = {(anchor, p) for p in root_positions}
        self._index(anchor)
        extra = [as_operation(o) for o in extra]
        roots = [anchor.operands[p] for p in root_positions] + [o.operands[p] for o in extra
                                                                for p in _fusible_operands(o, self._defs)]
        # A pulled-in op that reads (a view of) a destination would read it while the loop writes
        # it: bufferization then copies the destination, or every view read (heat's stencil over
        # slices of the array it updates). Such ops stay outside, computed before the loop.
        blocked: list[ir.Operation] = []
        while True:
            self.fused: list[ir.Operation] = list(extra)    # users before producers
            self._dims: list[ir.Operation] = []             # tensor.dim users of candidates (_replace_dims)
            self._grow(list(roots), blocked)
            reading = [f for f in self.fused[len(extra):]
                       if any(_may_alias(v, destinations, self._defs) for v in self._array_reads(f))]
            if not reading:
                break
            blocked.extend(reading)
            # ... and so do their pulled-in users: the whole computation then stays one array op
            # (which linalg fusion makes one loop) instead of splitting at the blocked ops.
            grown = True
            while grown:
                grown = False
                for f in self.fused[len(extra):]:
                    if not any(f == b for b in blocked) and any(
                            self._defs.get(v) is not None and any(self._defs[v] == b for b in blocked)
                            for v in f.operands):
                        blocked.append(f)
                        grown = True
        self._signless: dict = {}
        self._memo: dict = {}       # reads in the loop being built
        self._hoisted: dict = {}    # values computed before the loops
        self.guarded = True         # see begin()
        self._gathers = [(op, _GatherPlan(op, self)) for op in self.fused if op.name in GATHERS]
        self._replace_dims()

    # -- which producers are pulled in ----------------------------------------------------------
    def _index(self, anchor: ir.Operation) -> None:
        """Definitions and uses of the values around the anchor, from one walk of the op holding
        its block (every use of a value defined there is inside it). Value.owner and
        OpOperand.owner would wrap each op in its dialect's Python view, which for stablehlo ops
        means a failed module import per call (~0.5 ms)."""
        self._defs: dict = {}
        self._users: dict = {}

        def visit(op: ir.Operation) -> ir.WalkResult:
            for r in op.results:
                self._defs[r] = op
            for k, v in enumerate(op.operands):
                self._users.setdefault(v, []).append((op, k))
            return ir.WalkResult.ADVANCE
        anchor.parent.walk(visit)

    def _is_fused_use(self, use: tuple) -> bool:
        owner, position = use
        constant = self._defs.get(owner.operands[1]) if owner.name == "tensor.dim" else None
        if constant is not None and constant.name == "arith.constant":
            if not any(owner == d for d in self._dims):
                self._dims.append(owner)
            return True
        if any(owner == f for f in self.fused):
            return True
        return any(owner == a and position == p for a, p in self._allowed)

    def _array_reads(self, op: ir.Operation) -> list[ir.Value]:
        """The operands a pulled-in op reads from their arrays (those not computed in place)."""
        return [v for v in op.operands if self._producer(v) is None]

    def _grow(self, values: list[ir.Value], blocked: list[ir.Operation]) -> None:
        pending = list(values)
        changed = True
        while changed:
            changed = False
            for v in list(pending):
                producer = self._defs.get(v)
                if producer is None or producer.block != self.anchor.block:
                    pending.remove(v)
                    continue
                if any(producer == f for f in self.fused):
                    pending.remove(v)
                    continue
                if not _readable(producer) or any(producer == b for b in blocked):
                    pending.remove(v)
                    continue
                if all(self._is_fused_use(u) for u in self._users.get(producer.results[0], [])):
                    self.fused.append(producer)
                    pending.remove(v)
                    pending.extend(producer.operands[p] for p in _fusible_operands(producer, self._defs))
                    changed = True

    def _producer(self, v: ir.Value) -> ir.Operation | None:
        owner = self._defs.get(v)
        if owner is not None and any(owner == f for f in self.fused):
            return owner
        return None

    # -- emission -------------------------------------------------------------------------------
    def read(self, v: ir.Value, ivs: Sequence[ir.Value]) -> ir.Value:
        """The signless scalar v[ivs], emitted at the current insertion point."""
        key = (v, tuple(ivs))
        if key not in self._memo:
            self._memo[key] = self._compute(v, list(ivs))
        return self._memo[key]

    def array(self, v: ir.Value) -> ir.Value:
        """v as a signless tensor (the cast made once, before the anchor)."""
        if v not in self._signless:
            with ir.InsertionPoint(self.hoist), self.anchor.location:
                self._signless[v] = to_signless(v)
        return self._signless[v]

    def _compute(self, v: ir.Value, ivs: list[ir.Value]) -> ir.Value:
        op = self._producer(v)
        if op is None and not ivs:     # a 0-d value: read once, before the loops (LLVM could not
            if v not in self._hoisted:  # hoist the load past the scatter's stores)
                with ir.InsertionPoint(self.hoist), self.anchor.location:
                    self._hoisted[v] = extract(self.array(v), [])
            return self._hoisted[v]
        if op is None:
            return extract(self.array(v), ivs)
        name = op.name
        with op.location:
            if name == "stablehlo.constant":
                return SCALAR_RULES[name](op, [])
            if name == "stablehlo.iota":
                dim = ir.IntegerAttr(op.attributes["iota_dimension"]).value
                return _from_index(ivs[dim], signless(elem_of(v)), element_kind(elem_of(v)))
            if name in ("stablehlo.broadcast_in_dim", "stablehlo.dynamic_broadcast_in_dim"):
                return self.read(op.operands[0], self._broadcast_ivs(op, ivs))
            if name == "stablehlo.reshape":
                src = _shape(op.operands[0])
                outer = iter([iv for iv, n in zip(ivs, _shape(v)) if n != 1])
                return self.read(op.operands[0], [index(0) if n == 1 else next(outer) for n in src])
            if name in GATHERS:
                return next(plan for g, plan in self._gathers if g == op).element(self, ivs)
            if name == "stablehlo.pad":
                return self._pad_element(op, ivs)
            args = [self.read(o, ivs if tensor_type(o).rank else []) for o in op.operands]
            return SCALAR_RULES[name](op, args)

    # -- versions: reads that may not touch memory ---------------------------------------------
    def conditions(self) -> list[ir.Value]:
        """Run-time conditions (i1, computed before the loops) under which no read needs a
        guard: every gather's operand holds its window, every padded operand is non-empty.
        Consumers build their loops twice, `begin(guarded=False)` under these conditions and
        `begin(guarded=True)` otherwise (loop versioning, as LLVM's LoopVersioning), so the
        common case has no branch per element."""
        conds = [plan.fits for _, plan in self._gathers if plan.fits is not None]
        with ir.InsertionPoint(self.hoist), self.anchor.location:
            for op in self.fused:
                if op.name == "stablehlo.pad":
                    operand = op.operands[0]
                    conds += [cmp("sge", self._size(operand, k), index(1))
                              for k, n in enumerate(_shape(operand)) if _dynamic(n)]
        return conds

    def in_branch(self, emit):
        """emit() inside a nested block: what it reads there is not reused outside."""
        saved = dict(self._memo)
        try:
            return emit()
        finally:
            self._memo = saved

    def begin(self, guarded: bool) -> None:
        """Starts a new version of the consumer's loops (reads are not shared between them)."""
        self.guarded = guarded
        self._memo = {}

    def _pad_element(self, op: ir.Operation, ivs: list[ir.Value]) -> ir.Value:
        operand = op.operands[0]
        low = list(ir.DenseI64ArrayAttr(op.attributes["edge_padding_low"]))
        with ir.InsertionPoint(self.hoist), self.anchor.location:
            sizes = [self._size(operand, k) for k in range(len(low))]
        high = list(ir.DenseI64ArrayAttr(op.attributes["edge_padding_high"]))
        inner = [arith.SubIOp(iv, index(lo)).result if lo else iv for iv, lo in zip(ivs, low)]
        # A read is always inside the padded array (reads are at valid indices only), so no low
        # padding means inner >= 0 and no high padding inner < n: those tests are left out.
        inside = all_of([c for j, n, lo, hi in zip(inner, sizes, low, high)
                         for c in ([cmp("sge", j, index(0))] if lo > 0 else []) + ([cmp("slt", j, n)] if hi > 0 else [])])
        fill = self.read(op.operands[1], [])
        if self.guarded:    # the operand may be empty: read it only where inside
            branch = scf.IfOp(inside, [fill.type], has_else=True)
            with ir.InsertionPoint(branch.then_block):
                scf.YieldOp([self.in_branch(lambda: self.read(operand, inner))])
            with ir.InsertionPoint(branch.else_block):
                scf.YieldOp([fill])
            return branch.results[0]
        clamped = []
        for j, n, lo, hi in zip(inner, sizes, low, high):
            if hi > 0:
                j = arith.MinSIOp(j, arith.SubIOp(n, index(1)).result).result
            clamped.append(arith.MaxSIOp(j, index(0)).result if lo > 0 else j)
        return select(inside, self.read(operand, clamped), fill)

    def _broadcast_ivs(self, op: ir.Operation, ivs: list[ir.Value]) -> list[ir.Value]:
        out: list[ir.Value] = []
        for k, d in enumerate(_broadcast_dims(op)):
            same = _same_size(op, k, d)
            if same is True:
                out.append(ivs[d])
            elif same is False:
                out.append(index(0))
            else:   # a `?` operand dim: 1 (broadcast) or the result's size
                size = self._dim_of(op.operands[0], k)
                out.append(select(cmp("eq", size, index(1)), index(0), ivs[d]))
        return out

    def sizes(self, v: ir.Value) -> list[ir.Value]:
        """v's sizes as index values, computed before the loops without keeping a pulled-in
        producer alive (a tensor.dim of its result would)."""
        with ir.InsertionPoint(self.hoist), self.anchor.location:
            return [self._size(v, k) for k in range(tensor_type(v).rank)]

    def _size(self, v: ir.Value, k: int) -> ir.Value:
        """Size k of v from values that are not pulled in, at the current insertion point (which
        every non-pulled-in operand of the fused ops dominates)."""
        n = _shape(v)[k]
        if not _dynamic(n):
            return index(n)
        op = self._producer(v)
        if op is None:
            return tensor_sizes(v)[k]
        if op.name in _ELEMENTWISE:
            return self._size(next(o for o in op.operands if tensor_type(o).rank), k)
        if op.name == "stablehlo.dynamic_broadcast_in_dim":
            shape = to_signless(op.operands[1])
            return to_index(extract(shape, [index(k)]), element_kind(elem_of(op.operands[1])))
        if op.name in GATHERS:
            return next(plan for g, plan in self._gathers if g == op).sizes(self)[k]
        if op.name == "stablehlo.pad":
            low = ir.DenseI64ArrayAttr(op.attributes["edge_padding_low"])[k]
            high = ir.DenseI64ArrayAttr(op.attributes["edge_padding_high"])[k]
            return arith.AddIOp(self._size(op.operands[0], k), index(low + high)).result
        return tensor_sizes(v)[k]   # not reached: the other producers have static shapes

    def _replace_dims(self) -> None:
        """tensor.dim of a pulled-in result (the frontend's size arithmetic for dynamic
        broadcasts) -> the same size from the values it derives from, so that the dim does not
        keep the producer alive."""
        for dim_op in self._dims:
            source = dim_op.operands[0]
            if self._producer(source) is None:
                continue
            k = ir.IntegerAttr(self._defs[dim_op.operands[1]].attributes["value"]).value
            with ir.InsertionPoint(dim_op), dim_op.location:
                size = self._size(source, k)
            dim_op.results[0].replace_all_uses_with(size)
            dim_op.erase()

    def _dim_of(self, v: ir.Value, k: int) -> ir.Value:
        key = ("dim", v, k)
        if key not in self._hoisted:
            with ir.InsertionPoint(self.hoist), self.anchor.location:
                self._hoisted[key] = tensor_sizes(v)[k]
        return self._hoisted[key]

    def erase_fused(self) -> None:
        """Erases the pulled-in producers (dead once the anchor is replaced). They were pulled in
        users first, so one pass in that order erases them all."""
        for op in self.fused:
            if all(len(list(r.uses)) == 0 for r in op.results):
                op.erase()


# Ops whose result may be a view of their first operand after bufferization.
_VIEWS = ("stablehlo.slice", "stablehlo.reshape", "stablehlo.transpose", "stablehlo.dynamic_slice",
          "stablehlo.real_dynamic_slice", "stablehlo.dynamic_reshape", "stablehlo.bitcast_convert",
          "builtin.unrealized_conversion_cast", "tensor.extract_slice", "tensor.cast", "tensor.reshape",
          "tensor.collapse_shape", "tensor.expand_shape")


def _may_alias(v: ir.Value, destinations: Sequence[ir.Value], defs: dict) -> bool:
    """Whether v is one of `destinations` or may be a view of one."""
    while True:
        if any(v == d for d in destinations):
            return True
        owner = defs.get(v)
        if owner is None or owner.name not in _VIEWS:
            return False
        v = owner.operands[0]


def _from_index(i: ir.Value, t: ir.Type, kind: str) -> ir.Value:
    if kind == "f":
        as_int = arith.IndexCastOp(ir.IntegerType.get_signless(64), i).result
        return arith.SIToFPOp(t, as_int).result
    return arith.IndexCastOp(t, i).result


class _GatherPlan:
    """One gather's index arithmetic (the StableHLO spec's `gather`), its loop-invariant parts
    computed before the anchor: each start index clamped to [0, dim - slice size] (the spec's
    clamp; a window always fits), read from an operand too small for the window as 0 (as the
    reference rule and legalize_dynamic's gather)."""

    def __init__(self, op: ir.Operation, reader: PointReader):
        self.op = op
        dn = _stablehlo.GatherDimensionNumbers(op.attributes["dimension_numbers"])
        self.offset = list(dn.offset_dims)
        self.collapsed = list(dn.collapsed_slice_dims)
        self.operand_batching = list(dn.operand_batching_dims)
        self.indices_batching = list(dn.start_indices_batching_dims)
        self.start_map = list(dn.start_index_map)
        self.index_vector_dim = dn.index_vector_dim
        operand, indices = op.operands[0], op.operands[1]
        self.rank = tensor_type(operand).rank
        self.result_rank = tensor_type(op.results[0]).rank
        self.has_vector = self.index_vector_dim < tensor_type(indices).rank
        self.kind = element_kind(elem_of(indices))
        self.batch_dims = [d for d in range(self.result_rank) if d not in self.offset]
        self.window_dims = [d for d in range(self.rank)
                            if d not in self.collapsed and d not in self.operand_batching]
        with ir.InsertionPoint(reader.hoist), op.location:
            dims = [reader._size(operand, d) for d in range(self.rank)]
            self.slices = self._slice_sizes()
            self.limits = [arith.SubIOp(n, s).result for n, s in zip(dims, self.slices)]
            static = all(not _dynamic(n) for n in _shape(operand)) and op.name == "stablehlo.gather"
            # Statically the verifier guarantees slice <= dim; at run time an empty operand can
            # have none that fits.
            self.fits = None if static else all_of([cmp("sge", n, s) for n, s in zip(dims, self.slices)])

    def _slice_sizes(self) -> list[ir.Value]:
        op = self.op
        if op.name == "stablehlo.dynamic_gather":
            sizes = to_signless(op.operands[2])
            kind = element_kind(elem_of(op.operands[2]))
            return [to_index(extract(sizes, [index(d)]), kind) for d in range(self.rank)]
        return [index(s) for s in ir.DenseI64ArrayAttr(op.attributes["slice_sizes"])]

    def sizes(self, reader: PointReader) -> list[ir.Value]:
        """The result's sizes, computed at the current insertion point."""
        indices = self.op.operands[1]
        index_sizes = [reader._size(indices, d) for d in range(tensor_type(indices).rank)
                       if d != self.index_vector_dim]
        slices = self._slice_sizes()
        sizes = [index(0)] * self.result_rank
        for d, n in zip(self.batch_dims, index_sizes):
            sizes[d] = n
        for d, w in zip(self.offset, self.window_dims):
            sizes[d] = slices[w]
        return sizes

    def element(self, reader: PointReader, ivs: list[ir.Value]) -> ir.Value:
        batch = [ivs[d] for d in self.batch_dims]
        full = [index(0)] * self.rank
        indices = self.op.operands[1]
        for k, d in enumerate(self.start_map):
            at = insert_at(batch, self.index_vector_dim, index(k)) if self.has_vector else batch
            start = to_index(reader.read(indices, at), self.kind)
            full[d] = arith.MaxSIOp(arith.MinSIOp(start, self.limits[d]).result, index(0)).result
        for d, b in zip(self.operand_batching, self.indices_batching):
            full[d] = batch[b if b < self.index_vector_dim else b - 1]
        for d, o in zip(self.window_dims, self.offset):
            full[d] = add(full[d], ivs[o])
        operand = self.op.operands[0]
        if self.fits is None or not reader.guarded:
            return reader.read(operand, full)
        elem = signless(elem_of(self.op.results[0]))
        branch = scf.IfOp(self.fits, [elem], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            scf.YieldOp([reader.in_branch(lambda: reader.read(operand, full))])
        with ir.InsertionPoint(branch.else_block):
            scf.YieldOp([const(elem, 0)])
        return branch.results[0]


__all__ = ["GATHERS", "PointReader"]
