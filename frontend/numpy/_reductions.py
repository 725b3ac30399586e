"""Reductions (sum, prod, max, min, any, all, mean, var, std, argmax, argmin, ...) and the
cumulative sum and product, with numpy's axis, keepdims, initial, where and dtype rules:
sums and products of bool and small integers are int64, means and variances of integers are
float64, float16 means are accumulated in float32."""
from __future__ import annotations

import builtins
import math

import numpy as np

from sprue import lax
from sprue.base import dtypes
from sprue.ir.shapes import prove_equal
from sprue.numpy import _dims as _d
from sprue.numpy._avals import aval, const, describe, loc, type_error, value_error
from sprue.numpy._promote import (
    as_result,
    broadcast_to,
    check_dtype,
    convert,
    normalize_axes,
    normalize_axis,
    operand,
    reshape,
)
from sprue.numpy._ufuncs import _funcs as F
from sprue.numpy._ufuncs import isclose
from sprue.numpy._ufuncs import where_xy as _where

__all__ = ["sum", "prod", "max", "min", "amax", "amin", "any", "all", "mean", "var", "std", "argmax", "argmin",
           "cumsum", "cumprod", "cumulative_sum", "cumulative_prod", "ptp", "count_nonzero", "nansum",
           "nanprod", "nanmax", "nanmin", "nanmean", "allclose", "array_equal"]


def _no_out(fname, out):
    if out is not None:
        raise type_error(fname, "out= is not supported (sprue arrays are immutable)")


def _sum_dtype(dt: np.dtype) -> np.dtype:
    """numpy's accumulator for sum/prod/cumsum: bool and small integers widen to 64 bits."""
    if dtypes.is_bool(dt) or (dtypes.is_signed(dt) and dt.itemsize < 8):
        return dtypes.int64
    if dtypes.is_int(dt) and dt.itemsize < 8:
        return np.dtype(np.uint64)
    return dt


def _keep(r, shape, axes, keepdims):
    if keepdims:
        r = reshape(r, tuple(1 if i in axes else d for i, d in enumerate(shape)))
    return as_result(r)


def lax_reduce(kind: str, x, axes):
    """One lax reduction (bool sums and maxima are reduce_or, products and minima reduce_and)."""
    if not axes:
        return x
    b = dtypes.is_bool(aval(x).dtype)
    fn = {"sum": lax.reduce_or if b else lax.reduce_sum, "prod": lax.reduce_and if b else lax.reduce_prod,
          "max": lax.reduce_or if b else lax.reduce_max, "min": lax.reduce_and if b else lax.reduce_min,
          "or": lax.reduce_or, "and": lax.reduce_and}[kind]
    return fn(x, axes)


def _mask(fname, x, where, fill):
    """x where `where` holds, else fill (where broadcasts to x's shape, as numpy's where= does)."""
    shape = aval(x).shape
    w = operand(fname, where)
    if aval(w).ndim > len(shape) or builtins.any(isinstance(d, int) and isinstance(s, int) and d not in (1, s)
                                                 for d, s in zip(aval(w).shape[::-1], shape[::-1])):
        raise value_error(fname, f"where= mask {describe(w)} does not broadcast to the operand {describe(x)}")
    _d.check_broadcast_to(fname, w, shape, "where= mask")
    w = broadcast_to(convert(w, dtypes.bool_), shape)
    fill = lax.broadcast_in_dim(convert(fill, aval(x).dtype), shape, ()) if shape else convert(fill, aval(x).dtype)
    return lax.select(w, x, fill), w


def _sum_like(fname, kind, a, axis, dtype, out, keepdims, initial, where):
    _no_out(fname, out)
    a = operand(fname, a)
    av = aval(a)
    axes = normalize_axes(fname, axis, av.ndim, a)
    dt = check_dtype(fname, dtype) if dtype is not None else _sum_dtype(av.dtype)
    x = convert(a, dt, strip_weak=True)
    if where is not None:
        x, _ = _mask(fname, x, where, 0 if kind == "sum" else 1)
    r = lax_reduce(kind, x, axes)
    if initial is not None:
        r = (F["add"] if kind == "sum" else F["multiply"])(r, convert(initial, dt))
    return _keep(convert(r, dt), av.shape, axes, keepdims)


def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    return _sum_like("sum", "sum", a, axis, dtype, out, keepdims, initial, where)


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    return _sum_like("prod", "prod", a, axis, dtype, out, keepdims, initial, where)


def _extremum(fname, kind, a, axis, out, keepdims, initial, where):
    _no_out(fname, out)
    a = operand(fname, a)
    av = aval(a)
    axes = normalize_axes(fname, axis, av.ndim, a)
    op = "maximum" if kind == "max" else "minimum"
    if where is not None and initial is None:
        raise value_error(fname, f"reduction operation '{op}' does not have an identity, so to use a where mask"
                                 f" one has to specify 'initial'")
    if initial is None and builtins.any(isinstance(av.shape[i], int) and av.shape[i] == 0 for i in axes):
        raise value_error(fname, f"zero-size array {describe(a)} to reduction operation {op} which has no identity")
    if initial is None:
        _check_nonempty(fname, [av.shape[i] for i in axes],
                        f"zero-size array {describe(a)} to reduction operation {op} which has no identity")
    x = convert(a, av.dtype, strip_weak=True)
    if where is not None:
        x, _ = _mask(fname, x, where, initial)
    r = lax_reduce(kind, x, axes)
    if initial is not None:
        r = F[op](r, convert(initial, av.dtype))
    return _keep(r, av.shape, axes, keepdims)


def _check_nonempty(fname, dims, message: str):
    """numpy's error for an empty reduction without identity, at run time for sizes known then."""
    dyn = [d for d in dims if not isinstance(d, int) and _d.maybe_zero(d)]
    if dyn:
        _d.check(_d.all_of(*[lax.ne(_d.value(d), np.int64(0)) for d in dyn]), f"sprue.numpy.{fname}: {message}{loc()}")


def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    return _extremum("max", "max", a, axis, out, keepdims, initial, where)


def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    return _extremum("min", "min", a, axis, out, keepdims, initial, where)


amax, amin = max, min


def _logical(fname, kind, a, axis, out, keepdims, where):
    _no_out(fname, out)
    a = operand(fname, a)
    av = aval(a)
    axes = normalize_axes(fname, axis, av.ndim, a)
    x = convert(a, dtypes.bool_, strip_weak=True)
    if where is not None:
        x, _ = _mask(fname, x, where, kind == "and")
    return _keep(lax_reduce(kind, x, axes), av.shape, axes, keepdims)


def any(a, axis=None, out=None, keepdims=False, *, where=None):
    return _logical("any", "or", a, axis, out, keepdims, where)


def all(a, axis=None, out=None, keepdims=False, *, where=None):
    return _logical("all", "and", a, axis, out, keepdims, where)


def _float_acc(fname, a, dtype, upcast_f16: bool):
    """(computation dtype, result dtype) of mean/var: integers in float64; float16 means in float32."""
    in_dt = aval(a).dtype
    if dtype is not None:
        dt = check_dtype(fname, dtype)
        return dt, dt
    dt = in_dt if dtypes.is_inexact(in_dt) else dtypes.float64
    return (dtypes.float32 if upcast_f16 and dt == np.float16 else dt), dt


def _count(fname, x, axes, where, comp):
    """The number of elements reduced: a static int, or the sum of the where= mask."""
    shape = aval(x).shape
    if where is None:
        count = math.prod(shape[i] for i in axes)
        return x, const(comp, count) if isinstance(count, int) else convert(_d.value(count), comp)
    x, w = _mask(fname, x, where, 0)
    return x, lax_reduce("sum", convert(w, comp), axes)


def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    _no_out("mean", out)
    a = operand("mean", a)
    av = aval(a)
    axes = normalize_axes("mean", axis, av.ndim, a)
    comp, dt = _float_acc("mean", a, dtype, True)
    x, n = _count("mean", convert(a, comp, strip_weak=True), axes, where, comp)
    r = lax.div(lax_reduce("sum", x, axes), n)
    return _keep(convert(r, dt), av.shape, axes, keepdims)


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None, correction=None):
    return _var("var", a, axis, dtype, out, ddof, keepdims, where, mean, correction, False)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None, correction=None):
    return _var("std", a, axis, dtype, out, ddof, keepdims, where, mean, correction, True)


def _var(fname, a, axis, dtype, out, ddof, keepdims, where, mean_, correction, sqrt):
    _no_out(fname, out)
    if mean_ is not None:
        raise type_error(fname, "mean= is not supported; the mean is computed")
    if correction is not None:
        ddof = correction
    a = operand(fname, a)
    av = aval(a)
    axes = normalize_axes(fname, axis, av.ndim, a)
    comp, dt = _float_acc(fname, a, dtype, False)
    x, n = _count(fname, convert(a, comp, strip_weak=True), axes, where, comp)
    keep_shape = tuple(1 if i in axes else d for i, d in enumerate(av.shape))
    m = reshape(lax.div(lax_reduce("sum", x, axes), n), keep_shape)
    d = F["subtract"](x, m)
    if where is not None:
        d, _ = _mask(fname, d, where, 0)
    if dtypes.is_complex(comp):   # numpy's: the mean of |x - mean|^2, a real number
        comp, dt = dtypes.real_dtype(comp), dtypes.real_dtype(dt)
        n, square = (np.real(n) if isinstance(n, np.generic) else lax.real(n)), lax.real(lax.mul(d, lax.conj(d)))
    else:
        square = lax.mul(d, d)
    if isinstance(n, np.generic):  # a static count
        dof = const(comp, builtins.max(n - ddof, 0))
    else:
        dof = F["maximum"](F["subtract"](n, ddof), const(comp, 0))
    r = lax.div(lax_reduce("sum", square, axes), dof)
    if sqrt:
        r = lax.sqrt(r)
    return _keep(convert(r, dt), av.shape, axes, keepdims)


def _arg(fname, a, axis, out, keepdims):
    _no_out(fname, out)
    a = operand(fname, a)
    av = aval(a)
    if axis is None:
        x, ax = reshape(a, (av.size,)), 0
        size = av.size
    else:
        ax = normalize_axis(fname, axis, av.ndim, a)
        x, size = a, av.shape[ax]
    if isinstance(size, int) and size == 0:
        raise value_error(fname, f"attempt to get {fname} of an empty sequence ({describe(a)})")
    _check_nonempty(fname, [size], f"attempt to get {fname} of an empty sequence ({describe(a)})")
    r = (lax.argmax if fname == "argmax" else lax.argmin)(x, ax, dtypes.int64)
    if keepdims:
        r = reshape(r, (1,) * av.ndim if axis is None else tuple(1 if i == ax else d for i, d in enumerate(av.shape)))
    return as_result(r)


def argmax(a, axis=None, out=None, *, keepdims=False):
    return _arg("argmax", a, axis, out, keepdims)


def argmin(a, axis=None, out=None, *, keepdims=False):
    return _arg("argmin", a, axis, out, keepdims)


def _cumulative(fname, a, axis, dtype, out):
    _no_out(fname, out)
    a = operand(fname, a)
    av = aval(a)
    if axis is None:
        a, ax = reshape(a, (av.size,)), 0
    else:
        ax = normalize_axis(fname, axis, av.ndim, a)
    dt = check_dtype(fname, dtype) if dtype is not None else _sum_dtype(av.dtype)
    x = convert(a, dt, strip_weak=True)
    return as_result((lax.cumsum if fname in ("cumsum", "cumulative_sum") else lax.cumprod)(x, ax))


def cumsum(a, axis=None, dtype=None, out=None):
    return _cumulative("cumsum", a, axis, dtype, out)


def cumprod(a, axis=None, dtype=None, out=None):
    return _cumulative("cumprod", a, axis, dtype, out)


def cumulative_sum(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    return _cumulative_initial("cumulative_sum", x, axis, dtype, out, include_initial, 0)


def cumulative_prod(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    return _cumulative_initial("cumulative_prod", x, axis, dtype, out, include_initial, 1)


def _cumulative_initial(fname, x, axis, dtype, out, include_initial, identity):
    x = operand(fname, x)
    if axis is None and aval(x).ndim > 1:
        raise value_error(fname, f"axis must be given for a multi-dimensional array {describe(x)}")
    r = _cumulative(fname, x, 0 if axis is None else axis, dtype, out)
    if not include_initial:
        return r
    ax = normalize_axis(fname, 0 if axis is None else axis, aval(r).ndim, r)
    shape = list(aval(r).shape)
    shape[ax] = 1
    first = lax.broadcast_in_dim(const(aval(r).dtype, identity), tuple(shape), ())
    return as_result(lax.concatenate([first, r], ax))


def ptp(a, axis=None, out=None, keepdims=False):
    return F["subtract"](max(a, axis, out, keepdims), min(a, axis, out, keepdims))


def count_nonzero(a, axis=None, *, keepdims=False):
    a = operand("count_nonzero", a)
    return sum(convert(a, dtypes.bool_), axis=axis, keepdims=keepdims)


def _nan_filled(fname, a, fill):
    a = operand(fname, a)
    if not dtypes.is_float(aval(a).dtype):
        return a, None
    isnan = F["isnan"](a)
    return _where(isnan, fill, a), isnan


def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    return sum(_nan_filled("nansum", a, 0)[0], axis, dtype, out, keepdims, initial, where)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    return prod(_nan_filled("nanprod", a, 1)[0], axis, dtype, out, keepdims, initial, where)


def _nan_extremum(fname, a, axis, out, keepdims):
    filled, isnan = _nan_filled(fname, a, -np.inf if fname == "nanmax" else np.inf)
    r = (max if fname == "nanmax" else min)(filled, axis, out, keepdims)
    if isnan is None:
        return r
    return _where(all(isnan, axis, keepdims=keepdims), np.nan, r)  # all-NaN slices are NaN, as in numpy


def nanmax(a, axis=None, out=None, keepdims=False):
    return _nan_extremum("nanmax", a, axis, out, keepdims)


def nanmin(a, axis=None, out=None, keepdims=False):
    return _nan_extremum("nanmin", a, axis, out, keepdims)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False):
    filled, isnan = _nan_filled("nanmean", a, 0)
    if isnan is None:
        return mean(filled, axis, dtype, out, keepdims)
    return mean(filled, axis, dtype, out, keepdims, where=F["logical_not"](isnan))


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """numpy.allclose as a bool array (a traced bool inside a trace: no Python `if` on it)."""
    return all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1, a2, equal_nan=False):
    a1, a2 = operand("array_equal", a1), operand("array_equal", a2)
    s1, s2 = aval(a1).shape, aval(a2).shape
    if len(s1) != len(s2) or builtins.any(p is False for p in map(prove_equal, s1, s2)):
        return np.asarray(False)
    # sizes only run time can compare: equal shapes is part of the answer, and the values are
    # compared on the common part (both cut to the smaller size, which never reads outside either)
    same = _d.all_of(*[_d.eq_value(p, q) for p, q in zip(s1, s2)])
    for ax, (p, q) in enumerate(zip(s1, s2)):
        if not _d.dims_equal(p, q):
            r = _d.dmin(p, q)
            a1, a2 = _d.fit_axis(a1, ax, r), _d.fit_axis(a2, ax, r)
    eq = F["equal"](a1, a2)
    if equal_nan:
        eq = F["logical_or"](eq, F["logical_and"](F["isnan"](a1), F["isnan"](a2)))
    return all(eq) if same is True else F["logical_and"](all(eq), same)
