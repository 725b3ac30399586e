"""Data-dependent shapes: nonzero, flatnonzero, argwhere, extract, compress, and where (whose
one-argument form is nonzero).

The results have a size only run time knows (the number of true/nonzero entries): the `filter`
primitive (sprue.lax.filtering) computes it and makes it a fresh dimension, which every result of
one call shares (nonzero's index arrays have one size). `size=` (JAX's option) gives a static size
instead: the first `size` results, padded with `fill_value`."""
from __future__ import annotations

import math

import numpy as np

from sprue import lax
from sprue.base import dtypes
from sprue.ir.shapes import DimExpr, format_dim, prove_equal
from sprue.numpy import _dims as _d
from sprue.numpy._avals import aval, const, describe, index_error, loc, type_error, value_error
from sprue.numpy._indexing import getitem
from sprue.numpy._promote import as_result, normalize_axis, operand, reshape, static_int
from sprue.numpy._shape import ravel
from sprue.numpy._ufuncs import where_xy
from sprue.trace.tracing import Tracer

__all__ = ["nonzero", "flatnonzero", "argwhere", "extract", "compress", "where"]


def _truth(fname: str, a):
    """a != 0 as bool (a bool array as it is)."""
    if dtypes.is_bool(aval(a).dtype):
        return a
    return lax.ne(a, const(aval(a).dtype, 0)) if isinstance(a, Tracer) or np.ndim(a) else np.asarray(a != 0)


def _sized(fname: str, y, axis: int, size, fill_value):
    """y along axis cut or padded (with fill_value) to the static `size` (None: y as it is)."""
    if size is None:
        return y
    size = static_int(fname, size, "size")
    if size < 0:
        raise value_error(fname, f"size must be non-negative, got {size}")
    fill = 0 if fill_value is None else fill_value
    if size == 0:  # nothing to gather (a fill-mode gather of no indices does not compile)
        shape = aval(y).shape
        return lax.broadcast_in_dim(np.zeros((), aval(y).dtype), shape[:axis] + (0,) + shape[axis + 1:], ())
    pos = np.arange(size, dtype=np.int64)
    full = (slice(None),) * axis + (pos,)
    return getitem(y, full, mode="fill", fill_value=fill)


def _fills(fname: str, fill_value, n: int) -> list:
    """One fill value per result (JAX accepts a scalar or a tuple of n)."""
    if isinstance(fill_value, (tuple, list)):
        if len(fill_value) != n:
            raise value_error(fname, f"fill_value must be a scalar or a tuple of length {n}, got length"
                                     f" {len(fill_value)}")
        return list(fill_value)
    return [fill_value] * n


def nonzero(a, *, size=None, fill_value=None):
    """numpy.nonzero: a tuple of int64 index arrays, one per axis, of the true (nonzero) entries in
    row-major order. Their common length is a size known at run time (one fresh dimension), or the
    static `size` (the first `size` entries, padded with fill_value, 0 by default) as in JAX."""
    a = operand("nonzero", a)
    shape = aval(a).shape
    if not shape:
        raise value_error("nonzero", "calling nonzero on 0d arrays is not allowed; use"
                                     " jnp.atleast_1d(x).nonzero() instead")
    total = math.prod(shape)
    mask = reshape(_truth("nonzero", a), (total,))
    iotas = [reshape(lax.broadcasted_iota(dtypes.int64, shape, k), (total,)) for k in range(len(shape))]
    _, idx = lax.filter(mask, *iotas)
    fills = _fills("nonzero", fill_value, len(idx))
    return tuple(as_result(_sized("nonzero", i, 0, size, f)) for i, f in zip(idx, fills))


def flatnonzero(a, *, size=None, fill_value=None):
    """numpy.flatnonzero: the indices of the nonzero entries of ravel(a) (a size known at run time,
    or the static `size` as in nonzero)."""
    return nonzero(ravel(operand("flatnonzero", a)), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    """numpy.argwhere: the indices of the nonzero entries as rows of an int64[count, a.ndim] (count
    known at run time, or the static `size` as in nonzero)."""
    a = operand("argwhere", a)
    shape = aval(a).shape
    total = math.prod(shape)
    mask = reshape(_truth("argwhere", a), (total,))
    if not shape:  # numpy: one row of no columns when the scalar is nonzero, else none
        rows = lax.broadcast_in_dim(np.int64(0), (1, 0), ())
    else:
        rows = lax.concatenate([reshape(lax.broadcasted_iota(dtypes.int64, shape + (1,), k), (total, 1))
                                for k in range(len(shape))], 1)
    _, (out,) = lax.filter(mask, rows)
    return as_result(_sized("argwhere", out, 0, size, fill_value))


def _fit_condition(fname: str, c, n, axis: int):
    """A 1-d bool condition brought to length n, numpy's way: a shorter one is padded with False; a
    longer one may only have False beyond n (numpy's IndexError otherwise; a run-time check when
    the condition is traced)."""
    nc = aval(c).shape[0]
    if prove_equal(nc, n):
        return c
    i = lax.iota(dtypes.int64, n)
    fitted = lax.bitwise_and(_d.take_clamped(c, 0, i), lax.lt(i, _d.value(nc) if isinstance(nc, DimExpr) else
                                                              np.int64(nc)))
    if _d.le(nc, n) is not True:
        count = lax.reduce_sum(lax.convert_element_type(c, dtypes.int64), (0,))
        kept = lax.reduce_sum(lax.convert_element_type(fitted, dtypes.int64), (0,))
        ok = lax.eq(count, kept)
        msg = (f"sprue.numpy.{fname}: the condition has a true entry at an index out of bounds for axis {axis}"
               f" with size {format_dim(n)}")
        if not isinstance(ok, Tracer):
            if not bool(ok):
                raise index_error(msg[len(f"sprue.numpy.{fname}: "):])
        else:
            _d.check(ok, msg + loc())
    return fitted


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """numpy.compress: the slices of a along axis (of ravel(a) when axis is None) where the 1-d
    condition is true; its length is a size known at run time (or the static `size`, as in JAX).
    A condition shorter than the axis counts as False beyond its end."""
    if out is not None:
        raise type_error("compress", "out= is not supported (sprue arrays are immutable)")
    c = operand("compress", condition)
    a = operand("compress", a)
    if aval(c).ndim != 1:
        raise value_error("compress", f"condition must be a 1-d array, got {describe(c)}")
    if axis is None:
        a, ax = ravel(a), 0
    else:
        ax = normalize_axis("compress", axis, aval(a).ndim, a)
    c = _fit_condition("compress", _truth("compress", c), aval(a).shape[ax], ax)
    _, (y,) = lax.filter(c, a, axis=ax)
    return as_result(_sized("compress", y, ax, size, fill_value))


def extract(condition, arr, *, size=None, fill_value=0):
    """numpy.extract: the entries of ravel(arr) where ravel(condition) is nonzero (a size known at
    run time, or the static `size` as in JAX)."""
    return compress(ravel(_truth("extract", operand("extract", condition))), ravel(operand("extract", arr)),
                    size=size, fill_value=fill_value)


def where(condition, x=None, y=None, /):
    """numpy.where(condition, x, y): select with numpy's promotion and broadcasting. The one-argument
    form is nonzero(condition): index arrays of a size computed at run time."""
    if x is None or y is None:
        if x is None and y is None:
            return nonzero(condition)
        raise type_error("where", "either both or neither of x and y must be given")
    return where_xy(condition, x, y)
