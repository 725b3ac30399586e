"""Distances between floats in units in the last place."""
from __future__ import annotations

import numpy as np


def ordered(x: np.ndarray) -> np.ndarray:
    """Floats as integers in the same order, adjacent floats one apart (+0 and -0 both 0)."""
    itype = np.int64 if x.dtype == np.float64 else np.int32
    bits = x.view(itype).astype(np.int64)
    magnitude = bits & np.int64(np.iinfo(itype).max)
    return np.where(bits < 0, -magnitude, magnitude)


def ulp_distance(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """How many floats of the dtype lie between got and want; 0 for two nans, inf for one nan."""
    d = np.abs(ordered(got) - ordered(want)).astype(np.float64)   # int64: no overflow for <= 32-bit
    if got.dtype == np.float64:   # orderings of doubles span 2^64: avoid int64 wrap-around
        far = np.abs(ordered(got).astype(np.float64) - ordered(want).astype(np.float64)) > 2.0 ** 40
        d = np.where(far, np.inf, d)
    both_nan = np.isnan(got) & np.isnan(want)
    d = np.where(both_nan, 0.0, d)
    return np.where(np.isnan(got) != np.isnan(want), np.inf, d)
