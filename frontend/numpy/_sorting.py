"""sort and argsort (stable, NaNs last as in numpy) over lax.sort, plus searchsorted-free helpers."""
from __future__ import annotations

import numpy as np

from sprue import lax
from sprue.base import dtypes
from sprue.lax import sort_p
from sprue.numpy import _dims as _d
from sprue.numpy._avals import aval, value_error
from sprue.numpy._promote import as_result, normalize_axis, operand, reshape

__all__ = ["sort", "argsort"]


def _prepare(fname, a, axis):
    a = operand(fname, a)
    av = aval(a)
    if axis is None:
        return reshape(a, (av.size,)), 0
    if av.ndim == 0:
        raise value_error(fname, f"axis {axis} is out of bounds for a rank-0 array")
    return a, normalize_axis(fname, axis, av.ndim, a)


def _check_kind(fname, kind, order):
    if order is not None:
        raise value_error(fname, "order= (structured arrays) is not supported")
    if kind not in (None, "quicksort", "mergesort", "heapsort", "stable"):
        raise value_error(fname, f"unknown sort kind {kind!r}")


def sort(a, axis=-1, kind=None, order=None, *, stable=None, descending=False):
    """numpy.sort: a sorted copy along `axis` (None: flattened); NaNs sort last."""
    _check_kind("sort", kind, order)
    x, ax = _prepare("sort", a, axis)
    out = lax.sort(x, dimension=ax, is_stable=True)
    return as_result(lax.rev(out, (ax,)) if descending else out)


def argsort(a, axis=-1, kind=None, order=None, *, stable=None, descending=False):
    """numpy.argsort: the stable permutation that sorts `a` (int64), NaNs last."""
    _check_kind("argsort", kind, order)
    x, ax = _prepare("argsort", a, axis)
    shape = aval(x).shape
    iota = lax.broadcasted_iota(dtypes.int64, shape, ax)
    if descending:  # stable descending: sort the reversed array, map indices back
        n = shape[ax]
        _, perm = sort_p.bind(lax.rev(x, (ax,)), iota, dimension=ax, is_stable=True, num_keys=1)
        last = dtypes.int64.type(n - 1) if isinstance(n, int) else lax.sub(_d.value(n), np.int64(1))
        return as_result(lax.rev(lax.sub(last, perm), (ax,)))
    _, perm = sort_p.bind(x, iota, dimension=ax, is_stable=True, num_keys=1)
    return as_result(perm)
