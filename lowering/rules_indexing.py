"""Lowering of gather and the scatter family (scatter, scatter-add/mul/min/max).

Out-of-bounds windows follow `mode`, as the reference rules in sprue/lax/indexing.py:
- CLIP and PROMISE_IN_BOUNDS (treated as CLIP, so nothing ever reads or writes outside an array)
  clamp each start index into [0, dim - window]. stablehlo.gather clamps by itself; for scatter
  we clamp the indices first, since stablehlo.scatter skips out-of-bounds updates instead.
- FILL_OR_DROP: gather returns the fill value for every window that does not fit entirely
  (mask computed here, then a select); scatter skips such windows entirely, which the scatter
  loops (legalize_scatter.py) do with the raw indices, as XLA does with a stablehlo.scatter.
Indices are converted to i64 first (every stablehlo index operand then has one type).

Run-time sizes: a gather with `?` dims (or a window over a `?` dim: slice size None in the param,
its value a trailing operand) is a stablehlo.dynamic_gather, rewritten by legalize_dynamic.py,
which never reads outside the operand: from an operand too small for the window (an empty one),
every window is zeros (the reference rule's value), or the fill value with FILL_OR_DROP. The
window limits dim - window are computed at run time from the operand's and updates' sizes.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from torch_mlir._mlir_libs import _stablehlo

from sprue import lax
from sprue.ir.core import Eqn
from sprue.lax import GatherScatterMode
from sprue.lax.dimension_numbers import default_fill
from sprue.lowering.rules_common import (
    LoweringContext,
    Size,
    Value,
    aval_type,
    boolean,
    broadcast_in_dim,
    build_region,
    compare,
    constant,
    dims_of,
    dtype_of,
    ew,
    full,
    i64s,
    is_static,
    logical_and,
    lowering_rules,
    op,
    reduce,
    scalar_type,
    select,
    shape_of,
    shape_tensor,
    size_value,
    to_i64_index,
    unsupported,
)

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


Vector = Sequence[Size]  # one size per index component


def _along_last_axis(vector: Vector, indices: Value) -> Value:
    """A per-index-component vector (shape [k]) broadcast to the indices' shape [..., k]."""
    rank = len(shape_of(indices))
    return broadcast_in_dim(shape_tensor(vector), _sizes(indices), [rank - 1])


def _sizes(x: Value) -> list[Size]:
    return list(shape_of(x)) if is_static(x) else dims_of(x)


def _window_limits(operand: Value, window: Sequence[Size], index_map: Sequence[int]) -> Vector:
    """The largest start index at which a window fits, per index component."""
    dims = _sizes(operand)
    return [_minus(dims[d], window[d]) for d in index_map]


def _minus(a: Size, b: Size) -> Size:
    if isinstance(a, int) and isinstance(b, int):
        return a - b
    return ew("subtract", size_value(a), size_value(b))


def _max0(a: Size) -> Size:
    return max(a, 0) if isinstance(a, int) else ew("maximum", a, constant(0, np.int64))


def _windows_fit(indices: Value, limits: Vector) -> Value:
    """A bool per index vector (shape indices.shape[:-1]): 0 <= index <= limit in every component."""
    inside = logical_and(compare(indices, _along_last_axis([0] * len(limits), indices), "GE"),
                         compare(indices, _along_last_axis(limits, indices), "LE"))
    rank = len(shape_of(indices))
    return reduce([inside], [constant(True, np.bool_)], [rank - 1], lambda a: [logical_and(a[0], a[1])])[0]


# -- gather -------------------------------------------------------------------------------------
def _gather(ctx: LoweringContext, eqn: Eqn, operand: Value, indices: Value, *sizes: Value) -> list[Value]:
    p, dn = eqn.params, eqn.params["dimension_numbers"]
    slice_sizes = ctx.param_sizes(p["slice_sizes"], sizes)
    mode = _mode(eqn, GatherScatterMode.CLIP)
    indices = to_i64_index(indices)
    index_rank = len(shape_of(indices))
    dims = _stablehlo.GatherDimensionNumbers.get(
        offset_dims=list(dn.offset_dims), collapsed_slice_dims=list(dn.collapsed_slice_dims),
        operand_batching_dims=list(dn.operand_batching_dims),
        start_indices_batching_dims=list(dn.start_indices_batching_dims),
        start_index_map=list(dn.start_index_map), index_vector_dim=index_rank - 1)
    out_aval = eqn.outvars[0].aval
    attrs = {"dimension_numbers": dims, "indices_are_sorted": boolean(p.get("indices_are_sorted", False))}
    if is_static(operand) and is_static(indices) and all(isinstance(s, int) for s in slice_sizes):
        out = op("stablehlo.gather", [operand, indices], [aval_type(out_aval)],
                 {**attrs, "slice_sizes": i64s(slice_sizes)}).result
    else:  # legalize_dynamic.py lowers it, never reading outside the operand
        out = op("stablehlo.dynamic_gather", [operand, indices, shape_tensor(slice_sizes)], [aval_type(out_aval)],
                 attrs).result
    if mode != GatherScatterMode.FILL_OR_DROP or not dn.start_index_map:
        return [out]
    fits = _windows_fit(indices, _window_limits(operand, slice_sizes, dn.start_index_map))
    batch_dims = [d for d in range(out_aval.ndim) if d not in dn.offset_dims]
    out_sizes = ctx.sizes(out_aval.shape)
    mask = broadcast_in_dim(fits, out_sizes, batch_dims)
    fill_value = p.get("fill_value")
    fill = full(default_fill(out_aval.dtype) if fill_value is None else fill_value, out_aval.dtype, out_sizes)
    return [select(mask, out, fill)]


lowering_rules[lax.gather_p] = _gather


# -- scatter ------------------------------------------------------------------------------------
def _scatter_window(rank: int, updates: Value, dn) -> list[Size]:
    """The update window's extent along each operand dimension (1 on inserted dimensions)."""
    window: list[Size] = [1] * rank
    update_sizes = _sizes(updates)
    window_dims = [d for d in range(rank) if d not in dn.inserted_window_dims]
    for d, u in zip(window_dims, dn.update_window_dims):
        window[d] = update_sizes[u]
    return window


def _scatter_indices(indices: Value, operand: Value, updates: Value, dn, mode: GatherScatterMode) -> Value:
    """Indices with the mode applied. CLIP clamps them. FILL_OR_DROP leaves them: the scatter
    loops (legalize_scatter.py) skip every window that does not fit entirely, which is what XLA
    does with a stablehlo.scatter and what JAX's mode="drop" promises (JAX emits the scatter with
    its raw indices too). (Clamped into an operand smaller than the window, a start is 0 and the
    window still does not fit: the loops skip it, so nothing is written outside.)"""
    if mode == GatherScatterMode.FILL_OR_DROP:
        return indices
    window = _scatter_window(len(shape_of(operand)), updates, dn)
    limits = _window_limits(operand, window, dn.scatter_dims_to_operand_dims)
    lo = _along_last_axis([0] * len(limits), indices)
    return ew("minimum", ew("maximum", indices, lo), _along_last_axis([_max0(n) for n in limits], indices))


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
