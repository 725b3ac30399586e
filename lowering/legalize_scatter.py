"""stablehlo.scatter -> loops over scatter indices and update windows.

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

from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo

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
    tensor_sizes,
    tensor_type,
    to_index,
    to_signless,
)


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
    """Replaces one stablehlo.scatter by loops; the op is erased."""
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

    with ir.InsertionPoint(op), op.location:
        inputs = [to_signless(v) for v in operands[:n]]
        indices = to_signless(operands[n])
        updates = [to_signless(v) for v in operands[n + 1:]]
        input_sizes = tensor_sizes(inputs[0])
        update_sizes = tensor_sizes(updates[0])
        scatter_dims = [d for d in range(len(update_sizes)) if d not in dims.update_window]
        extent = [index(1)] * rank
        for k, d in enumerate(window_dims):
            extent[d] = update_sizes[dims.update_window[k]]

        def window_start(sivs: list[ir.Value]) -> list[ir.Value]:
            """full_start_index + full_batching_index for one scatter index."""
            start = [index(0)] * rank
            for d_start, d_input in enumerate(dims.to_operand):
                at = (insert_at(sivs, dims.index_vector_dim, index(d_start))
                      if dims.index_vector_dim < indices_rank else sivs)
                start[d_input] = to_index(extract(indices, at), index_kind)
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
            new = [extract(u, update_index) for u in updates]
            combined = inline_scalar_region(op.regions[0], current + new, where)
            return [insert(v, r, result_index) for r, v in zip(results, combined)]

        def scatter_one(sivs: list[ir.Value], results: list[ir.Value]) -> list[ir.Value]:
            start = window_start(sivs)
            fits = all_of([cond for d in range(rank) for cond in (
                cmp("sge", start[d], index(0)),
                cmp("sle", add(start[d], extent[d]), input_sizes[d]))])
            window_bounds = [update_sizes[d] for d in dims.update_window]
            return if_carried(fits, lambda rs: loop_nest_carried(
                window_bounds, lambda wivs, rs2: apply_update(sivs, wivs, start, rs2), rs), results)

        # Destination-passing style: the operands are threaded through the loops as tensors and
        # updated with tensor.insert, so bufferization writes into the operand's buffer when it is
        # dead afterwards (a loop carry updated with x.at[i].set) and copies it once otherwise.
        results = loop_nest_carried([update_sizes[d] for d in scatter_dims], scatter_one, inputs)
        new_results = [from_signless(r, t.type) for r, t in zip(results, op.results)]

    for old, new in zip(op.results, new_results):
        old.replace_all_uses_with(new)
    op.erase()


__all__ = ["lower_scatter"]
