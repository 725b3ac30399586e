"""Lowering of gather and the scatter family (scatter, scatter-add/mul/min/max).

Out-of-bounds windows follow `mode`, as the reference rules in sprue/lax/indexing.py:
- CLIP and PROMISE_IN_BOUNDS (treated as CLIP, so nothing ever reads or writes outside an array)
  clamp each start index into [0, dim - window]. stablehlo.gather clamps by itself; for scatter
  we clamp the indices first, since stablehlo.scatter skips out-of-bounds updates instead.
- FILL_OR_DROP: gather returns the fill value for every window that does not fit entirely
  (mask computed here, then a select); scatter skips such windows entirely: we move their start
  index to the end of the operand, past where any window fits, so the update is dropped under
  both the spec's per-element skip and XLA's whole-window skip.
Indices are converted to i64 first (every stablehlo index operand then has one type).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from torch_mlir._mlir_libs import _stablehlo

from .. import lax
from ..core import Eqn
from ..lax import GatherScatterMode
from ..lax.indexing import default_fill
from .rules_common import (LoweringContext, Value, aval_type, boolean, broadcast_in_dim, build_region,
                           compare, const_array, constant, dtype_of, ew, i64s, logical_and, lowering_rules,
                           op, reduce, scalar_type, select, shape_of, to_i64_index, unsupported)

_MODE_NAMES = {"clip": GatherScatterMode.CLIP, "fill": GatherScatterMode.FILL_OR_DROP,
               "drop": GatherScatterMode.FILL_OR_DROP,
               "promise_in_bounds": GatherScatterMode.PROMISE_IN_BOUNDS}


def _mode(eqn: Eqn, default: GatherScatterMode) -> GatherScatterMode:
    """The equation's mode; None means what the reference rule does with None."""
    mode = eqn.params.get("mode")
    if mode is None:
        return default
    if isinstance(mode, str) and mode.lower() in _MODE_NAMES:
        return _MODE_NAMES[mode.lower()]
    if not isinstance(mode, GatherScatterMode) or mode == GatherScatterMode.ONE_HOT:
        raise unsupported(eqn, f"mode {mode!r} is not supported; use CLIP, FILL_OR_DROP or PROMISE_IN_BOUNDS")
    return mode


def _along_last_axis(vector: np.ndarray, indices: Value) -> Value:
    """A per-index-component constant (shape [k]) broadcast to the indices' shape [..., k]."""
    shape = shape_of(indices)
    return broadcast_in_dim(const_array(vector.astype(np.int64)), shape, [len(shape) - 1])


def _window_limits(operand_shape: Sequence[int], window: Sequence[int], index_map: Sequence[int]) -> np.ndarray:
    """The largest start index at which a window fits, per index component."""
    return np.array([operand_shape[d] - window[d] for d in index_map], np.int64)


def _windows_fit(indices: Value, limits: np.ndarray) -> Value:
    """A bool per index vector (shape indices.shape[:-1]): 0 <= index <= limit in every component."""
    inside = logical_and(compare(indices, _along_last_axis(np.zeros_like(limits), indices), "GE"),
                         compare(indices, _along_last_axis(limits, indices), "LE"))
    rank = len(shape_of(indices))
    return reduce([inside], [constant(True, np.bool_)], [rank - 1], lambda a: [logical_and(a[0], a[1])])[0]


# -- gather -------------------------------------------------------------------------------------
def _gather(ctx: LoweringContext, eqn: Eqn, operand: Value, indices: Value) -> list[Value]:
    p, dn = eqn.params, eqn.params["dimension_numbers"]
    mode = _mode(eqn, GatherScatterMode.CLIP)
    indices = to_i64_index(indices)
    index_rank = len(shape_of(indices))
    dims = _stablehlo.GatherDimensionNumbers.get(
        offset_dims=list(dn.offset_dims), collapsed_slice_dims=list(dn.collapsed_slice_dims),
        operand_batching_dims=list(dn.operand_batching_dims),
        start_indices_batching_dims=list(dn.start_indices_batching_dims),
        start_index_map=list(dn.start_index_map), index_vector_dim=index_rank - 1)
    out_aval = eqn.outvars[0].aval
    attrs = {"dimension_numbers": dims, "slice_sizes": i64s(p["slice_sizes"]),
             "indices_are_sorted": boolean(p.get("indices_are_sorted", False))}
    out = op("stablehlo.gather", [operand, indices], [aval_type(out_aval)], attrs).result
    if mode != GatherScatterMode.FILL_OR_DROP or not dn.start_index_map:
        return [out]
    fits = _windows_fit(indices, _window_limits(shape_of(operand), p["slice_sizes"], dn.start_index_map))
    batch_dims = [d for d in range(out_aval.ndim) if d not in dn.offset_dims]
    mask = broadcast_in_dim(fits, out_aval.shape, batch_dims)
    fill_value = p.get("fill_value")
    fill = constant(default_fill(out_aval.dtype) if fill_value is None else fill_value, out_aval.dtype,
                    out_aval.shape)
    return [select(mask, out, fill)]


lowering_rules[lax.gather_p] = _gather


# -- scatter ------------------------------------------------------------------------------------
def _scatter_window(operand_shape: Sequence[int], updates_shape: Sequence[int], dn) -> list[int]:
    """The update window's extent along each operand dimension (1 on inserted dimensions)."""
    window = [1] * len(operand_shape)
    window_dims = [d for d in range(len(operand_shape)) if d not in dn.inserted_window_dims]
    for d, u in zip(window_dims, dn.update_window_dims):
        window[d] = updates_shape[u]
    return window


def _scatter_indices(indices: Value, operand: Value, updates: Value, dn, mode: GatherScatterMode) -> Value:
    """Indices with the mode applied: clamped (CLIP), or non-fitting windows moved out (DROP)."""
    window = _scatter_window(shape_of(operand), shape_of(updates), dn)
    limits = _window_limits(shape_of(operand), window, dn.scatter_dims_to_operand_dims)
    if mode in (GatherScatterMode.CLIP, GatherScatterMode.PROMISE_IN_BOUNDS):
        lo = _along_last_axis(np.zeros_like(limits), indices)
        return ew("minimum", ew("maximum", indices, lo), _along_last_axis(np.maximum(limits, 0), indices))
    fits = _windows_fit(indices, limits)
    rank = len(shape_of(indices))
    past_end = np.array([shape_of(operand)[d] for d in dn.scatter_dims_to_operand_dims], np.int64)
    mask = broadcast_in_dim(fits, shape_of(indices), list(range(rank - 1)))
    return select(mask, indices, _along_last_axis(past_end, indices))


def _scatter(combine: Callable[[Value, Value], Value]):
    """combine(current, update) -> new value, on rank-0 tensors (the update region)."""
    def rule(ctx: LoweringContext, eqn: Eqn, operand: Value, indices: Value, updates: Value) -> list[Value]:
        p, dn = eqn.params, eqn.params["dimension_numbers"]
        mode = _mode(eqn, GatherScatterMode.FILL_OR_DROP)
        indices = to_i64_index(indices)
        if dn.scatter_dims_to_operand_dims:
            indices = _scatter_indices(indices, operand, updates, dn, mode)
        dims = _stablehlo.ScatterDimensionNumbers.get(
            update_window_dims=list(dn.update_window_dims), inserted_window_dims=list(dn.inserted_window_dims),
            input_batching_dims=list(dn.operand_batching_dims),
            scatter_indices_batching_dims=list(dn.scatter_indices_batching_dims),
            scattered_dims_to_operand_dims=list(dn.scatter_dims_to_operand_dims),
            index_vector_dim=len(shape_of(indices)) - 1)
        attrs = {"scatter_dimension_numbers": dims,
                 "indices_are_sorted": boolean(p.get("indices_are_sorted", False)),
                 "unique_indices": boolean(p.get("unique_indices", False))}
        scatter_op = op("stablehlo.scatter", [operand, indices, updates], [operand.type], attrs, regions=1)
        scalar = scalar_type(dtype_of(operand))
        build_region(scatter_op, [scalar, scalar], lambda a: [combine(a[0], a[1])])
        return [scatter_op.result]
    return rule


def _bool_aware(name: str, bool_name: str) -> Callable[[Value, Value], Value]:
    return lambda cur, upd: ew(bool_name if dtype_of(cur) == np.bool_ else name, cur, upd)


lowering_rules.update({
    lax.scatter_p: _scatter(lambda cur, upd: upd),
    lax.scatter_add_p: _scatter(_bool_aware("add", "or")),
    lax.scatter_mul_p: _scatter(_bool_aware("multiply", "and")),
    lax.scatter_min_p: _scatter(_bool_aware("minimum", "and")),
    lax.scatter_max_p: _scatter(_bool_aware("maximum", "or")),
})
