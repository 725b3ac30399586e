"""lax.dynamic_slice and lax.dynamic_update_slice for operands whose sizes are known only at run
time, with JAX's clamping and without ever touching memory outside an array.

JAX requires slice (and update) sizes no larger than the operand's; with sizes known only at run
time that is a run-time check. The primitives themselves would read or write past the end when
the check fails (code after a failed check keeps running to the function's end), so an axis whose
size only run time can compare goes through a clamped gather (slice) or a scatter whose window is
dropped when it does not fit (update) instead. Sizes that tracing can compare keep the plain
primitive, so static programs are unchanged.
"""
from __future__ import annotations

import numpy as np

from sprue import lax
from sprue.base import dtypes
from sprue.lax import GatherScatterMode, ScatterDimensionNumbers
from sprue.lax._rules import runtime_size_ops
from sprue.numpy import _dims as _d
from sprue.numpy._avals import aval, loc
from sprue.numpy._promote import convert
from sprue.trace.tracing import Tracer


def _start(i):
    return convert(i, dtypes.int64) if isinstance(i, Tracer) else np.int64(i)


def _clamped_start(i, n, size):
    """JAX's start clamping, max(min(i, n - size), 0), as an i64 value."""
    hi = lax.sub(_val(n), _val(size))
    return lax.max(lax.min(_start(i), hi), np.int64(0))


def _val(d):
    return np.int64(d) if isinstance(d, int) else _d.value(d)


def _unsure(fname: str, sizes, shape) -> list[int]:
    """Axes whose size only run time can compare with the operand's; each gets a check."""
    out = []
    for ax, (s, n) in enumerate(zip(sizes, shape)):
        if _d.le(s, n) is None:
            _d.check(lax.le(_val(s), _val(n)), f"sprue.lax.{fname}: size {s} does not fit in axis {ax} of size {n}"
                                               f" of the operand{loc()}")
            out.append(ax)
    return out


def dynamic_slice(x, start_indices, slice_sizes):
    """lax.dynamic_slice; slice sizes may be dims or traced ints."""
    shape = aval(x).shape
    sizes = [_d.size_arg("dynamic_slice", s, "a slice size") for s in slice_sizes]
    unsure = _unsure("dynamic_slice", sizes, shape) if len(sizes) == len(shape) else []
    if not unsure:
        return lax.bind_dynamic_slice(x, start_indices, sizes)
    y = x
    if any(ax not in unsure and not _d.dims_equal(s, n) for ax, (s, n) in enumerate(zip(sizes, shape))):
        starts = [np.int64(0) if ax in unsure else i for ax, i in enumerate(start_indices)]
        y = lax.bind_dynamic_slice(x, starts, [n if ax in unsure else s for ax, (s, n) in enumerate(zip(sizes, shape))])
    for ax in unsure:  # iota(size) from the clamped start, each index clamped into the axis
        idx = lax.add(lax.iota(dtypes.int64, sizes[ax]), _clamped_start(start_indices[ax], shape[ax], sizes[ax]))
        y = _d.take_clamped(y, ax, idx)
    return y


def dynamic_update_slice(x, update, start_indices):
    """lax.dynamic_update_slice; an update only run time can fit is a scatter of one window."""
    shape, ushape = aval(x).shape, aval(update).shape
    unsure = _unsure("dynamic_update_slice", ushape, shape) if len(ushape) == len(shape) else []
    if not unsure:
        return lax.bind_dynamic_update_slice(x, update, start_indices)
    starts = [_clamped_start(i, n, u) for i, n, u in zip(start_indices, shape, ushape)]
    index = lax.concatenate([lax.broadcast_in_dim(s, (1,), ()) for s in starts], 0) if len(starts) > 1 \
        else lax.broadcast_in_dim(starts[0], (1,), ())
    rank = len(shape)
    dn = ScatterDimensionNumbers(update_window_dims=tuple(range(rank)), inserted_window_dims=(),
                                 scatter_dims_to_operand_dims=tuple(range(rank)))
    # FILL_OR_DROP: a window that does not fit (only after a failed check) is not written at all
    return lax.scatter(x, index, convert(update, aval(x).dtype), dn, mode=GatherScatterMode.FILL_OR_DROP)


def install_lax_hooks() -> None:
    """Give sprue.lax what it takes from sprue.numpy (sprue.lax._rules.RuntimeSizeOps)."""
    runtime_size_ops.dynamic_slice = dynamic_slice
    runtime_size_ops.dynamic_update_slice = dynamic_update_slice
    runtime_size_ops.take_clamped = _d.take_clamped
