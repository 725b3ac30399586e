"""Array creation: asarray (array itself is in _promote: an operand given as a list is one),
zeros/ones/full/empty (and *_like), arange, linspace, eye, identity, tri, meshgrid, astype, and the
scalar types (float32(x), ...) usable as dtypes.
Values come from lax (broadcast_in_dim of a literal, iota). A size may be a traced integer (it
becomes a dimension, checked non-negative at run time) or a size of an array (x.shape[0] + 1);
arange and linspace with traced bounds or counts are in _creation_dynamic."""
from __future__ import annotations

import builtins
import math

import numpy as np

from sprue import lax
from sprue.base import dtypes
from sprue.numpy import _creation_dynamic as _cd
from sprue.numpy import _dims as _d
from sprue.numpy._avals import any_tracer, aval, const, describe, is_py_scalar, type_error, value_error
from sprue.numpy._promote import (
    array,
    as_result,
    broadcast_shapes,
    check_dtype,
    convert,
    operand,
    operands,
    result_type,
    static_int,
)
from sprue.numpy._promote import broadcast_to as _bcast
from sprue.numpy._shape import moveaxis
from sprue.numpy._ufuncs import _funcs as F
from sprue.numpy._ufuncs import power
from sprue.trace.tracing import Tracer

__all__ = ["array", "asarray", "copy", "astype", "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like",
           "empty_like", "arange", "linspace", "logspace", "eye", "identity", "tri", "meshgrid"]


def asarray(a, dtype=None, order=None, *, copy=None):
    """numpy.asarray: `a` itself (as an eager array, no copy) when it already is an array of that
    dtype, unless copy=True."""
    return array(a, dtype, copy=bool(copy), fname="asarray")


def copy(a, order="K"):
    """numpy.copy: eagerly a new array that shares no memory with `a`; traced, the value itself
    (traced arrays are values: nothing can write to the original)."""
    return array(a, copy=True, fname="copy")


def astype(x, dtype, /, *, copy=True):
    x = operand("astype", x)
    return as_result(convert(x, check_dtype("astype", dtype), strip_weak=True))


def _full(fname, shape, fill_value, dtype):
    shape = _d.shape_arg(fname, shape)
    v = operand(fname, fill_value)
    dt = check_dtype(fname, dtype) if dtype is not None else aval(v).dtype
    v = convert(v, dt, strip_weak=True)
    _d.check_allocation(fname, shape, dt)
    vs = aval(v).shape
    if len(vs) > len(shape) or builtins.any(isinstance(d, int) and isinstance(s, int) and d not in (1, s)
                                            for d, s in zip(vs[::-1], shape[::-1])):
        raise value_error(fname, f"fill value {describe(v)} does not broadcast to shape {_d.fmt(shape)}")
    _d.check_broadcast_to(fname, v, shape, "fill value")
    if not shape:
        return as_result(v)
    return as_result(_bcast(v, shape))


def full(shape, fill_value, dtype=None):
    return _full("full", shape, fill_value, dtype)


def zeros(shape, dtype=None):
    return _full("zeros", shape, 0, dtypes.float64 if dtype is None else dtype)


def ones(shape, dtype=None):
    return _full("ones", shape, 1, dtypes.float64 if dtype is None else dtype)


def empty(shape, dtype=None):
    """numpy.empty: zeros (sprue never exposes uninitialized memory)."""
    return _full("empty", shape, 0, dtypes.float64 if dtype is None else dtype)


def _like(fname, a, fill, dtype, shape):
    a = operand(fname, a)
    av = aval(a)
    return _full(fname, av.shape if shape is None else shape, fill, av.dtype if dtype is None else dtype)


def full_like(a, fill_value, dtype=None, shape=None):
    return _like("full_like", a, fill_value, dtype, shape)


def zeros_like(a, dtype=None, shape=None):
    return _like("zeros_like", a, 0, dtype, shape)


def ones_like(a, dtype=None, shape=None):
    return _like("ones_like", a, 1, dtype, shape)


def empty_like(a, dtype=None, shape=None):
    return _like("empty_like", a, 0, dtype, shape)


def _static_number(fname, v, what):
    if isinstance(v, Tracer):
        raise type_error(fname, f"{what} must be static (a Python or numpy number), got a traced value"
                                f" {v.aval.str_short()}; array sizes must be known when compiling")
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]
    if not (is_py_scalar(v) or isinstance(v, (np.integer, np.floating, np.bool_))):
        raise type_error(fname, f"{what} must be a real number, got {type(v).__name__}")
    return v


def arange(start, stop=None, step=None, dtype=None):
    """numpy.arange with static bounds: numpy's length ceil((stop - start) / step) and dtype
    (at least int64, promoted with the arguments'); values iota * step + start. Traced or
    symbolic bounds: see _creation_dynamic.arange."""
    if _cd.is_dynamic(start, stop, step):
        return _cd.arange(start, stop, step, dtype)
    args = [("start", start), ("stop", stop), ("step", step)]
    vals = {k: _static_number("arange", v, k) for k, v in args if v is not None}
    if stop is None:
        vals = {"start": 0, "stop": vals["start"], **({"step": vals["step"]} if "step" in vals else {})}
    st, sp, step = vals["start"], vals["stop"], vals.get("step", 1)
    if step == 0:
        raise value_error("arange", "step must not be zero")
    if dtype is None:
        given = [v for k, v in args if v is not None]
        dt = check_dtype("arange", np.result_type(np.int64, *[np.asarray(v).dtype for v in given]))
    else:
        dt = check_dtype("arange", dtype)
    n = builtins.max(0, math.ceil((sp - st) / step))
    comp = dtypes.int64 if dtypes.is_bool(dt) else dt
    idx = lax.iota(comp, n)
    if dtypes.is_float(comp):
        first = comp.type(st)  # numpy's fill: delta = (start + step) - start, rounded in the dtype
        delta = comp.type(comp.type(st + step) - first)
        out = lax.add(lax.mul(idx, delta), first)
    else:
        first, delta = const(comp, int(st)), const(comp, int(st + step) - int(st))
        out = idx if delta == 1 else lax.mul(idx, delta)
        out = out if first == 0 else lax.add(out, first)
    return as_result(convert(out, dt))


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """numpy.linspace, with numpy's algorithm (iota * step + start, the last value set to stop);
    start and stop may be traced (and arrays); a traced or symbolic num: see _creation_dynamic."""
    if _cd.is_dynamic(num):
        return _cd.linspace(start, stop, num, endpoint, retstep, dtype, axis)
    num = static_int("linspace", num, "num")
    if num < 0:
        raise value_error("linspace", f"number of samples, {num}, must be non-negative")
    start, stop = operands("linspace", start, stop)
    dt, _ = result_type(start, stop)
    dt = dt if dtypes.is_inexact(dt) else dtypes.float64
    out_dt = check_dtype("linspace", dtype) if dtype is not None else dt
    shape = broadcast_shapes("linspace", start, stop)
    start, stop = (_bcast(convert(v, dt), shape) for v in (start, stop))  # numpy broadcasts them together
    div = num - 1 if endpoint else num
    delta = F["subtract"](stop, start)
    full_shape = (num,) + shape
    y = lax.broadcasted_iota(dtypes.real_dtype(dt), full_shape, 0)   # (complex: a real ramp times the step)
    bdims = tuple(range(1, len(full_shape)))
    if div > 0:
        step = F["divide"](delta, div)
        if not any_tracer(step) and np.any(np.asarray(step) == 0):
            y = F["multiply"](F["divide"](y, div), lax.broadcast_in_dim(delta, full_shape, bdims))
        else:
            y = F["multiply"](y, lax.broadcast_in_dim(step, full_shape, bdims))
    else:
        step = np.asarray(np.nan, dt)
        y = F["multiply"](y, lax.broadcast_in_dim(delta, full_shape, bdims))
    y = F["add"](y, lax.broadcast_in_dim(start, full_shape, bdims))
    if endpoint and num > 1:
        last = lax.eq(lax.broadcasted_iota(dtypes.int64, full_shape, 0), np.int64(num - 1))
        y = lax.select(last, lax.broadcast_in_dim(stop, full_shape, bdims), y)
    if axis != 0:
        y = moveaxis(y, 0, axis)
    if dtypes.is_int(out_dt):
        y = F["floor"](y)
    y = as_result(convert(y, out_dt))
    return (y, as_result(step)) if retstep else y


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    y = linspace(start, stop, num=num, endpoint=endpoint, axis=axis)
    out = power(base, y)
    return astype(out, dtype) if dtype is not None else out


def _iota_mask(N, M, k, cmp):
    rows = lax.broadcasted_iota(dtypes.int64, (N, M), 0)
    cols = lax.broadcasted_iota(dtypes.int64, (N, M), 1)
    return cmp(lax.add(rows, np.int64(k)) if k else rows, cols)


def eye(N, M=None, k=0, dtype=None):
    N = _d.size_arg("eye", N, "N")
    M = N if M is None else _d.size_arg("eye", M, "M")
    k = static_int("eye", k, "k")
    if builtins.any(isinstance(d, int) and d < 0 for d in (N, M)):
        raise value_error("eye", f"negative dimensions are not allowed: ({N}, {M})")
    dt = check_dtype("eye", dtypes.float64 if dtype is None else dtype)
    _d.check_allocation("eye", (N, M), np.int64)   # the index grids are i64
    return as_result(convert(_iota_mask(N, M, k, lax.eq), dt))


def identity(n, dtype=None):
    return eye(n, dtype=dtype)


def tri(N, M=None, k=0, dtype=None):
    N = _d.size_arg("tri", N, "N")
    M = N if M is None else _d.size_arg("tri", M, "M")
    if builtins.any(isinstance(d, int) and d < 0 for d in (N, M)):
        raise value_error("tri", f"negative dimensions are not allowed: ({N}, {M})")
    dt = check_dtype("tri", dtypes.float64 if dtype is None else dtype)
    _d.check_allocation("tri", (N, M), np.int64)
    return as_result(convert(_iota_mask(N, M, static_int("tri", k, "k"), lax.ge), dt))


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise value_error("meshgrid", "indexing must be 'xy' or 'ij'")
    xs = [lax.reshape(x, (aval(x).size,)) for x in operands("meshgrid", *xi)]
    n = len(xs)
    shape = [aval(x).shape[0] for x in xs]
    if indexing == "xy" and n > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        d = (1 - i if i < 2 else i) if indexing == "xy" and n > 1 else i
        if sparse:
            out.append(as_result(lax.reshape(x, tuple(s if j == d else 1 for j, s in enumerate(shape)))))
        else:
            out.append(as_result(lax.broadcast_in_dim(x, tuple(shape), (d,))))
    return tuple(out)


# -- scalar types: jnp.float32 is a dtype (np.dtype(jnp.float32) is float32) and a converter ------
class _ScalarMeta(type):
    def __call__(cls, x=0):
        return astype(x, cls.dtype) if isinstance(x, Tracer) else array(x, cls.dtype, fname=cls.__name__)

    def __instancecheck__(cls, inst):
        return isinstance(inst, cls.dtype.type)

    def __repr__(cls):
        return f"sprue.numpy.{cls.__name__}"


def _scalar_type(name: str, np_type) -> type:
    return _ScalarMeta(name, (), {"dtype": np.dtype(np_type), "__doc__": f"The {np.dtype(np_type)} scalar type:"
                                  f" a dtype, and a converter {name}(x)."})


SCALAR_TYPES = {name: _scalar_type(name, getattr(np, name)) for name in
                ("float64", "float32", "float16", "int64", "int32", "int16", "int8",
                 "uint64", "uint32", "uint16", "uint8", "bool_", "complex64", "complex128")}
SCALAR_TYPES["bool"] = SCALAR_TYPES["bool_"]
