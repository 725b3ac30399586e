"""The params of gather, scatter and convolution, as JAX's: the out-of-bounds mode (and what it does to a window's
start) and the dimension numbers. Their primitives are in indexing.py and scatter_reductions.py;
sprue.io.jaxpr_params reads these params from jaxpr text."""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueTypeError, SprueValueError
from sprue.ir.core import ShapedArray


class GatherScatterMode(enum.Enum):
    CLIP = 0
    FILL_OR_DROP = 1
    PROMISE_IN_BOUNDS = 2
    ONE_HOT = 3


class _PrintedLikeJax:
    """`Name(field=(...), ...)`, as JAX prints dimension numbers in jaxpr params."""

    def __str__(self):
        fields = ", ".join(f"{k}={tuple(getattr(self, k))}" for k in self.__dataclass_fields__)
        return f"{type(self).__name__}({fields})"


@dataclass(frozen=True)
class GatherDimensionNumbers(_PrintedLikeJax):
    offset_dims: tuple
    collapsed_slice_dims: tuple
    start_index_map: tuple
    operand_batching_dims: tuple = ()
    start_indices_batching_dims: tuple = ()


@dataclass(frozen=True)
class ScatterDimensionNumbers(_PrintedLikeJax):
    update_window_dims: tuple
    inserted_window_dims: tuple
    scatter_dims_to_operand_dims: tuple
    operand_batching_dims: tuple = ()
    scatter_indices_batching_dims: tuple = ()


@dataclass(frozen=True)
class ConvDimensionNumbers(_PrintedLikeJax):
    """The layout of a convolution (sprue.lax.convolution): lhs_spec = (batch, feature, spatial...),
    rhs_spec = (out feature, in feature, spatial...), out_spec = (batch, feature, spatial...); it
    unpacks as JAX's NamedTuple does."""
    lhs_spec: tuple
    rhs_spec: tuple
    out_spec: tuple

    def __post_init__(self):
        for k in self.__dataclass_fields__:
            object.__setattr__(self, k, tuple(int(d) for d in getattr(self, k)))

    def __iter__(self):
        return iter((self.lhs_spec, self.rhs_spec, self.out_spec))


_MODE_NAMES = {"clip": GatherScatterMode.CLIP, "fill": GatherScatterMode.FILL_OR_DROP,
               "drop": GatherScatterMode.FILL_OR_DROP, "promise_in_bounds": GatherScatterMode.PROMISE_IN_BOUNDS}


def _mode(mode, default: GatherScatterMode) -> GatherScatterMode:
    """A mode param as the enum; None is what the reference rules do with None (gathers clamp,
    scatters drop)."""
    if mode is None:
        return default
    if isinstance(mode, str):
        return _MODE_NAMES[mode.lower()]
    return GatherScatterMode(mode)


def gather_mode(mode) -> GatherScatterMode:
    return _mode(mode, GatherScatterMode.CLIP)


def scatter_mode(mode) -> GatherScatterMode:
    return _mode(mode, GatherScatterMode.FILL_OR_DROP)


def default_fill(dtype):
    """The value a FILL_OR_DROP gather gives a window out of bounds when its fill_value is None."""
    dtype = np.dtype(dtype)
    if dtypes.is_float(dtype):
        return np.nan
    if dtypes.is_bool(dtype):
        return True
    return np.iinfo(dtype).min if dtypes.is_signed(dtype) else np.iinfo(dtype).max


def check_indices(name, indices: ShapedArray, nmap: int):
    if not dtypes.is_int(indices.dtype):
        raise SprueTypeError(f"{name}: indices must be integers, got {indices.str_short()}")
    if indices.ndim == 0 or indices.shape[-1] != nmap:
        raise SprueValueError(f"{name}: the last axis of indices {indices.str_short()} must have size {nmap}")


def window_starts(operand_shape, window_shape, starts, mode):
    """Clamped starts (CLIP) and, for FILL_OR_DROP, a mask of the windows that fit."""
    limit = np.asarray(operand_shape) - np.asarray(window_shape)
    fits = np.all((starts >= 0) & (starts <= limit), axis=-1)
    clamped = np.clip(starts, 0, np.maximum(limit, 0))
    return clamped, fits
