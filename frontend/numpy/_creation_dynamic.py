"""arange and linspace whose lengths are known only at run time (traced bounds or counts, or sizes
of dynamically-shaped arrays). sprue.numpy.arange / linspace come here when a bound or the count
is traced or symbolic; static calls keep their static code."""
from __future__ import annotations

import numpy as np

from sprue import lax
from sprue.base import dtypes
from sprue.ir.shapes import DimExpr
from sprue.numpy import _dims as _d
from sprue.numpy._avals import aval, const, type_error, value_error
from sprue.numpy._promote import as_result, broadcast_shapes, broadcast_to, check_dtype, convert, operands, result_type
from sprue.numpy._shape import moveaxis
from sprue.numpy._ufuncs import _funcs as F
from sprue.trace.tracing import Tracer, as_dim


def is_dynamic(*vs) -> bool:
    return any(isinstance(v, (Tracer, DimExpr)) for v in vs)


def _operand(fname, v):
    """A bound as an operand: a dim becomes its run-time value (a weak int, as numpy sees x.shape[0])."""
    if isinstance(v, DimExpr):
        return _d.weak_value(v)
    if isinstance(v, Tracer):
        if v.ndim != 0:
            raise type_error(fname, f"bounds must be scalars, got a traced {v.aval.str_short()}")
        return v
    return v


def _static_dim(v):
    """A bound usable in size arithmetic: a static int or a dim (a size of an array); else None."""
    if isinstance(v, DimExpr):
        return v
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        return int(v)
    return None


def _int_length(start, stop, step: int):
    """numpy's arange length max(0, ceil((stop - start) / step)) of integer bounds, at run time."""
    a = convert(start, dtypes.int64)
    b = convert(stop, dtypes.int64)
    diff = lax.sub(b, a) if step > 0 else lax.sub(a, b)
    diff = lax.max(diff, np.int64(0))
    k = abs(step)
    return diff if k == 1 else lax.div(lax.add(diff, np.int64(k - 1)), np.int64(k))


def _float_length(start, stop, step):
    q = lax.ceil(lax.div(lax.sub(convert(stop, dtypes.float64), convert(start, dtypes.float64)), np.float64(step)))
    return lax.convert_element_type(lax.max(q, np.float64(0)), dtypes.int64)


def arange(start, stop, step, dtype):
    """numpy.arange with a traced or symbolic bound: `arange(n)` of a size n (or a traced int n,
    which becomes a dimension, checked non-negative) has length n; other bounds have numpy's length
    computed at run time. The step is static."""
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    if isinstance(step, (Tracer, DimExpr)):
        raise type_error("arange", "the step must be static (a Python or numpy number) when a bound is traced")
    if isinstance(step, np.ndarray):
        step = step[()]
    if step == 0:
        raise value_error("arange", "step must not be zero")
    given = [v for v in (start, stop, step)]
    if dtype is None:
        kinds = [dtypes.int64 if isinstance(v, DimExpr) else np.asarray(v).dtype if not isinstance(v, Tracer)
                 else v.dtype for v in given]
        dt = check_dtype("arange", np.result_type(np.int64, *kinds))
    else:
        dt = check_dtype("arange", dtype)
    lo, hi = _static_dim(start), _static_dim(stop)
    if hi is None and lo == 0 and step == 1 and isinstance(stop, Tracer) and dtypes.is_int(stop.dtype):
        hi = _d.size_arg("arange", stop, "the stop of arange")   # arange(n): n is a size
    if lo is not None and hi is not None and abs(step) == 1 and isinstance(step, (int, np.integer)):
        diff = hi - lo if step > 0 else lo - hi
        n = diff if _d.nonneg(diff) else _d.dmax(diff, 0)
    else:
        a, b = _operand("arange", start), _operand("arange", stop)
        floats = any(dtypes.is_float(aval(v).dtype) for v in (a, b)) or isinstance(step, (float, np.floating))
        n = as_dim(_float_length(a, b, step) if floats else _int_length(a, b, int(step)))
    comp = dtypes.int64 if dtypes.is_bool(dt) else dt
    _d.check_allocation("arange", (n,), np.int64)
    idx = lax.iota(comp, n)
    first = convert(_operand("arange", start), comp)
    if dtypes.is_float(comp):  # numpy's fill: delta = (start + step) - start, rounded in the dtype
        delta = lax.sub(lax.add(first, comp.type(step)), first) if isinstance(first, Tracer) \
            else comp.type(comp.type(first + step) - first)
        out = lax.add(lax.mul(idx, delta), first)
    else:
        out = idx if step == 1 else lax.mul(idx, const(comp, int(step)))
        if isinstance(first, Tracer) or first != 0:
            out = lax.add(out, first)
    return as_result(convert(out, dt))


def linspace(start, stop, num, endpoint, retstep, dtype, axis):
    """numpy.linspace with a traced or symbolic count: numpy's algorithm with its branches on the
    count (num - 1 == 0, a step that underflows to 0) taken at run time."""
    n = _d.size_arg("linspace", num, "the number of samples")
    _d.check_allocation("linspace", (n,), np.float64)
    start, stop = operands("linspace", start, stop)
    dt, _ = result_type(start, stop)
    dt = dt if dtypes.is_inexact(dt) else dtypes.float64
    out_dt = check_dtype("linspace", dtype) if dtype is not None else dt
    shape = broadcast_shapes("linspace", start, stop)
    start, stop = (broadcast_to(convert(v, dt), shape) for v in (start, stop))
    nv = _d.value(n)
    div = lax.sub(nv, np.int64(1)) if endpoint else nv
    divf = lax.convert_element_type(div, dt)
    full_shape = (n,) + shape
    bdims = tuple(range(1, len(full_shape)))

    def bc(v):  # a value of the broadcast shape of start and stop, along the samples axis
        return lax.broadcast_in_dim(v, full_shape, bdims)

    delta = F["subtract"](stop, start)
    y = lax.broadcasted_iota(dtypes.real_dtype(dt), full_shape, 0)
    step = F["divide"](delta, divf)
    step_zero = F["equal"](step, 0)
    any_zero = lax.reduce_or(step_zero, tuple(range(len(shape)))) if shape else step_zero
    y_step = lax.select(any_zero, lax.mul(lax.div(y, divf), bc(delta)), lax.mul(y, bc(step)))
    positive = lax.gt(div, np.int64(0))
    y = lax.select(positive, y_step, lax.mul(y, bc(delta)))
    y = lax.add(y, bc(start))
    if endpoint:
        last = lax.eq(lax.broadcasted_iota(dtypes.int64, full_shape, 0), lax.sub(nv, np.int64(1)))
        last = lax.bitwise_and(last, lax.gt(nv, np.int64(1)))
        y = lax.select(last, bc(stop), y)
    if axis != 0:
        y = moveaxis(y, 0, axis)
    if dtypes.is_int(out_dt):
        y = F["floor"](y)
    y = as_result(convert(y, out_dt))
    if not retstep:
        return y
    nan = lax.broadcast_in_dim(np.asarray(np.nan, dt)[()], shape, ()) if shape else np.asarray(np.nan, dt)[()]
    return y, as_result(lax.select(positive, step, nan))
