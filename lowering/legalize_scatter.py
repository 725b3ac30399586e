"""stablehlo.scatter -> loops over scatter indices and update windows; stablehlo.gather and
dynamic_gather -> a linalg.generic reading one operand element per result element.

Both read their indices and updates element by element where the loop needs them
(point_reads.PointReader): the elementwise ops, broadcasts and gathers computing them run inside
the loop rather than into temporaries. Bounds: a gather clamps each start index (the spec's
rule); a scatter tests `0 <= start <= dim - window` per index with the limit computed before the
loops (no `start + window` that a huge index would overflow).

Follows the StableHLO spec's index arithmetic (`scatter`):
  update_scatter_dims = dims of updates not in update_window_dims
  start_index         = scatter_indices[usi..., :, ...] (`:` at index_vector_dim)
  full_start_index    = start_index scattered by scatter_dims_to_operand_dims
  full_batching_index = usi[...] at input_batching_dims
  full_window_index   = window index with 0 at inserted/batching dims
  result_index        = full_start + full_batching + full_window
  results[result_index] = update_computation(results[result_index], updates[update_index])

Out of bounds: the spec leaves it to the implementation to skip only the
elements whose result_index is out of bounds; we follow XLA/JAX instead and
skip a whole update window unless it fits entirely (what `x.at[i].add(v)`
with mode="drop" promises).  For the usual windows (full rows, single
elements) the two rules agree; the whole-window check is also one test per
scatter index rather than one per element.  Updates apply in index order, so
a "set" with duplicate indices keeps the last update.
"""

from __future__ import annotations

from typing import Callable

from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo
from torch_mlir.dialects import arith, scf

from sprue.lowering.mlir_util import (
    LegalizeError,
    add,
    all_of,
    cmp,
    elem_of,
    element_kind,
    extract,
    from_signless,
    if_carried,
    index,
    inline_scalar_region,
    insert,
    insert_at,
    loop_nest_carried,
    signless_tensor_type,
    tensor_sizes,
    tensor_type,
    to_index,
    to_signless,
)
from sprue.lowering.point_reads import PointReader


class _Dims:
    """scatter_dimension_numbers as plain Python lists."""

    def __init__(self, op: ir.Operation):
        dn = _stablehlo.ScatterDimensionNumbers(op.attributes["scatter_dimension_numbers"])
        self.update_window = list(dn.update_window_dims)
        self.inserted_window = list(dn.inserted_window_dims)
        self.input_batching = list(dn.input_batching_dims)
        self.indices_batching = list(dn.scatter_indices_batching_dims)
        self.to_operand = list(dn.scattered_dims_to_operand_dims)
        self.index_vector_dim = dn.index_vector_dim


def lower_scatter(op: ir.Operation) -> None:
    """Replaces one stablehlo.scatter by loops; the op is erased.

    The indices and updates are read element by element where the loop needs them
    (point_reads.PointReader): elementwise producers, broadcasts and point gathers feeding them
    are computed inside the scatter loop instead of into temporaries (`agg.at[dst].add(x[src] *
    w)` is one loop over the edges: read dst and src, load x[src], multiply, add into agg)."""
    where = f"stablehlo.scatter at {op.location}"
    n = len(op.results)
    operands = list(op.operands)
    if len(operands) != 2 * n + 1:
        raise LegalizeError(f"{where}: expected {n} inputs, indices and {n} updates")
    dims = _Dims(op)
    rank = tensor_type(operands[0]).rank
    indices_rank = tensor_type(operands[n]).rank
    index_kind = element_kind(elem_of(operands[n]))
    # Operand dims covered by the update window, in update_window_dims order.
    window_dims = [d for d in range(rank)
                   if d not in dims.inserted_window and d not in dims.input_batching]
    reader = PointReader(op, range(n, 2 * n + 1), destinations=operands[:n])

    with ir.InsertionPoint(reader.hoist), op.location:
        inputs = [to_signless(v) for v in operands[:n]]
        input_sizes = tensor_sizes(inputs[0])
        update_sizes = reader.sizes(operands[n + 1])
        scatter_dims = [d for d in range(len(update_sizes)) if d not in dims.update_window]
        extent = [index(1)] * rank
        for k, d in enumerate(window_dims):
            extent[d] = update_sizes[dims.update_window[k]]
        # The last start at which a window fits, per operand dim (loop-invariant). The test
        # `start <= limit` rather than `start + extent <= size`: the sum overflows for a huge index.
        limits = [arith.SubIOp(input_sizes[d], extent[d]).result for d in range(rank)]
        # 0 <= start <= limit is one unsigned comparison where limit >= 0 (a window no larger than
        # the operand; checked once, outside the loops): LLVM left two signed ones and their `or`
        # per update where the sizes are run-time values (a PageRank step's scatter 1.23x slower
        # than with static sizes)
        limits_ok = all_of([cmp("sge", limit, index(0)) for limit in limits])

    with ir.InsertionPoint(op), op.location:
        def window_start(sivs: list[ir.Value]) -> list[ir.Value]:
            """full_start_index + full_batching_index for one scatter index."""
            start = [index(0)] * rank
            for d_start, d_input in enumerate(dims.to_operand):
                at = (insert_at(sivs, dims.index_vector_dim, index(d_start))
                      if dims.index_vector_dim < indices_rank else sivs)
                start[d_input] = to_index(reader.read(operands[n], at), index_kind)
            for d_input, d_start in zip(dims.input_batching, dims.indices_batching):
                start[d_input] = sivs[d_start - (0 if d_start < dims.index_vector_dim else 1)]
            return start

        def apply_update(sivs: list[ir.Value], wivs: list[ir.Value], start: list[ir.Value],
                         results: list[ir.Value]) -> list[ir.Value]:
            update_index: list[ir.Value] = [index(0)] * len(update_sizes)
            for d, v in zip(scatter_dims, sivs):
                update_index[d] = v
            for d, v in zip(dims.update_window, wivs):
                update_index[d] = v
            result_index = list(start)
            for k, d in enumerate(window_dims):
                result_index[d] = add(start[d], wivs[k])
            current = [extract(r, result_index) for r in results]
            new = [reader.read(u, update_index) for u in operands[n + 1:]]
            combined = inline_scalar_region(op.regions[0], current + new, where)
            return [insert(v, r, result_index) for r, v in zip(results, combined)]

        def scatter_one(sivs: list[ir.Value], results: list[ir.Value]) -> list[ir.Value]:
            start = window_start(sivs)
            fits = arith.AndIOp(limits_ok, all_of([cmp("ule", start[d], limits[d]) for d in range(rank)])).result
            window_bounds = [update_sizes[d] for d in dims.update_window]
            return if_carried(fits, lambda rs: loop_nest_carried(
                window_bounds, lambda wivs, rs2: apply_update(sivs, wivs, start, rs2), rs), results)

        # Destination-passing style: the operands are threaded through the loops as tensors and
        # updated with tensor.insert, so bufferization writes into the operand's buffer when it is
        # dead afterwards (a loop carry updated with x.at[i].set) and copies it once otherwise.
        def loops(guarded: bool) -> list[ir.Value]:
            reader.begin(guarded)
            return loop_nest_carried([update_sizes[d] for d in scatter_dims], scatter_one, inputs)

        results = _versioned(reader, loops, [v.type for v in inputs])
        new_results = [from_signless(r, t.type) for r, t in zip(results, op.results)]

    for old, new in zip(op.results, new_results):
        old.replace_all_uses_with(new)
    op.erase()
    reader.erase_fused()


def _versioned(reader: PointReader, build: Callable[[bool], list[ir.Value]],
               types: list[ir.Type]) -> list[ir.Value]:
    """build(guarded) once when no read needs a guard, else twice under scf.if on the reader's
    conditions: the unguarded loops where they hold (the common case, no branch per element)."""
    conds = reader.conditions()
    if not conds:
        return build(False)
    branch = scf.IfOp(all_of(conds), types, has_else=True)
    with ir.InsertionPoint(branch.then_block):
        scf.YieldOp(build(False))
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp(build(True))
    return list(branch.results)


def _generic(result_type: ir.RankedTensorType, sizes: list[ir.Value],
             element: Callable[[list[ir.Value]], ir.Value]) -> ir.Value:
    """A linalg.generic with no inputs computing element(ivs) at every index of a new tensor.

    linalg.generic rather than tensor.generate: linalg-fuse-elementwise-ops then fuses its
    elementwise consumers into it (`x[idx] * w` is one loop). Built generically, as matmul.py
    and fusion.py do, since importing the linalg dialect's Python module costs first-call time."""
    rank = result_type.rank
    dynamic = [sizes[d] for d in range(rank) if ir.ShapedType.is_dynamic_size(result_type.shape[d])]
    init = ir.Operation.create("tensor.empty", results=[result_type], operands=dynamic).result
    maps = ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))])
    iterators = ir.Attribute.parse("[" + ", ".join(["#linalg.iterator_type<parallel>"] * rank) + "]")
    generic = ir.Operation.create(
        "linalg.generic", results=[result_type], operands=[init], regions=1,
        attributes={"indexing_maps": maps, "iterator_types": iterators,
                    "operandSegmentSizes": ir.DenseI32ArrayAttr.get([0, 1])})
    block = generic.regions[0].blocks.append(result_type.element_type)
    i64 = ir.IntegerType.get_signless(64)
    with ir.InsertionPoint(block):
        ivs = [ir.Operation.create("linalg.index", results=[ir.IndexType.get()],
                                   attributes={"dim": ir.IntegerAttr.get(i64, d)}).result for d in range(rank)]
        ir.Operation.create("linalg.yield", operands=[element(ivs)])
    return generic.result


def lower_gather(op: ir.Operation) -> None:
    """stablehlo.gather / dynamic_gather -> a linalg.generic reading operand[clamped start +
    offset] per result element (point_reads._GatherPlan: the spec's index arithmetic, zeros from
    an operand smaller than the window), its start indices computed in place from their
    producers (a negative-index wrap, a convert, a broadcast to [n, 1])."""
    reader = PointReader(op, (), extra=[op])
    result_type = signless_tensor_type(tensor_type(op.results[0]))
    with ir.InsertionPoint(reader.hoist), op.location:
        sizes = reader.sizes(op.results[0])
    def build(guarded: bool) -> list[ir.Value]:
        reader.begin(guarded)
        return [_generic(result_type, sizes, lambda ivs: reader.read(op.results[0], ivs))]

    with ir.InsertionPoint(op), op.location:
        out = from_signless(_versioned(reader, build, [result_type])[0], op.results[0].type)
    op.results[0].replace_all_uses_with(out)
    reader.erase_fused()


__all__ = ["lower_gather", "lower_scatter"]
