"""Operands of sprue.numpy functions: checking them, numpy's dtype promotion (NEP 50, Python
scalars weak), broadcasting, and conversion — all on abstract values, with lax ops for the data.

An *operand* is a Tracer, a numpy array or scalar, or a Python bool/int/float (weak). Nothing here
computes on a traced value with numpy: numpy only sees dtypes, shapes and static constants.
"""
from __future__ import annotations

import operator

import numpy as np

from sprue.base import dtypes
from sprue import lax
from sprue.ir.core import ShapedArray, impl_rules
from sprue.base.errors import SprueTypeError, SprueValueError, UnsupportedError, at
from sprue.lax import elementwise as _e
from sprue.base.source_info import user_frame_summary
from sprue.ir.shapes import DimExpr
from sprue.trace.tracing import Tracer

PY_SCALARS = (bool, int, float)


def loc() -> str:
    """' (at file.py:12 (fn))' for the user's innermost frame."""
    return at(user_frame_summary())


def type_error(fname: str, msg: str) -> SprueTypeError:
    return SprueTypeError(f"sprue.numpy.{fname}: {msg}{loc()}")


def value_error(fname: str, msg: str) -> SprueValueError:
    return SprueValueError(f"sprue.numpy.{fname}: {msg}{loc()}")


def unsupported(fname: str, msg: str) -> UnsupportedError:
    return UnsupportedError(f"sprue.numpy.{fname}: {msg}{loc()}")


def is_py_scalar(x) -> bool:
    return isinstance(x, PY_SCALARS) and not isinstance(x, np.generic)


def is_tracer(x) -> bool:
    return isinstance(x, Tracer)


def any_tracer(*xs) -> bool:
    return any(isinstance(x, Tracer) for x in xs)


def aval(x) -> ShapedArray:
    """The abstract value of an operand (checked by `operand`)."""
    if isinstance(x, Tracer):
        return x.aval
    if is_py_scalar(x):
        return ShapedArray((), dtypes.python_scalar_dtype(x), weak_type=True)
    return ShapedArray(np.shape(x), x.dtype)


def describe(*xs) -> str:
    """'f64[3] and f64[4]' / 'f64[3], i32[] and bool[2]' for error messages."""
    parts = [aval(x).str_short() if isinstance(x, (Tracer, np.ndarray, np.generic)) or is_py_scalar(x)
             else type(x).__name__ for x in xs]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def operand(fname: str, x):
    """Check that x is an array operand sprue supports; lists and tuples become arrays."""
    if isinstance(x, Tracer):
        return x
    if isinstance(x, DimExpr):  # a size used as a number (x.shape[0] * 2.0): its run-time value
        from sprue.numpy._dims import weak_value
        return weak_value(x)
    if is_py_scalar(x):
        if isinstance(x, int) and not isinstance(x, bool) and not -2**63 <= x < 2**63:
            raise value_error(fname, f"Python int {x} does not fit in int64")
        return x
    if isinstance(x, (np.ndarray, np.generic)):
        if x.dtype not in dtypes.SUPPORTED:
            raise type_error(fname, f"an operand has dtype {x.dtype} (shape {tuple(np.shape(x))}), which sprue"
                                    f" does not support; sprue compiles "
                                    f"{', '.join(sorted(str(d) for d in dtypes.SUPPORTED))}")
        return x
    if isinstance(x, (list, tuple)):
        from sprue.numpy._creation import array
        return array(x, fname=fname)
    raise type_error(fname, f"{type(x).__name__} object is not a valid array operand; expected an array, a"
                            f" Python or numpy scalar (bool, int, float), or a traced array")


def operands(fname: str, *xs) -> list:
    return [operand(fname, x) for x in xs]


def check_dtype(fname: str, dtype) -> np.dtype:
    """A user's dtype argument as a supported numpy dtype."""
    try:
        return dtypes.canonicalize(dtype)
    except SprueTypeError as e:
        raise type_error(fname, str(e)) from None


def result_type(*xs) -> tuple[np.dtype, bool]:
    """numpy's promotion of the operands' dtypes: (dtype, weak)."""
    avs = [aval(x) for x in xs]
    return dtypes.result_type(*[(a.dtype, a.weak_type) for a in avs])


def static_int(fname: str, v, what: str) -> int:
    if isinstance(v, Tracer):
        raise type_error(fname, f"{what} must be a static int, got a traced value {v.aval.str_short()}")
    try:
        return operator.index(v)
    except TypeError:
        raise type_error(fname, f"{what} must be an int, got {type(v).__name__} {v!r}") from None


def static_shape(fname: str, shape) -> tuple[int, ...]:
    if isinstance(shape, (list, tuple)):
        dims = tuple(static_int(fname, d, "a shape dimension") for d in shape)
    else:
        dims = (static_int(fname, shape, "shape"),)
    if any(d < 0 for d in dims):
        raise value_error(fname, f"negative dimensions are not allowed: {dims}")
    return dims


def normalize_axis(fname: str, axis, ndim: int, x=None) -> int:
    a = static_int(fname, axis, "axis")
    if not -ndim <= a < ndim:
        what = describe(x) if x is not None else f"an array of rank {ndim}"
        raise value_error(fname, f"axis {a} is out of bounds for {what} (rank {ndim})")
    return a % ndim


def normalize_axes(fname: str, axis, ndim: int, x=None) -> tuple[int, ...]:
    """axis None / int / tuple of ints -> sorted tuple of distinct non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (list, tuple)):
        axes = [normalize_axis(fname, a, ndim, x) for a in axis]
        if len(set(axes)) != len(axes):
            raise value_error(fname, f"repeated axis in {tuple(axis)}")
        return tuple(sorted(axes))
    return (normalize_axis(fname, axis, ndim, x),)


def const(dtype, value):
    """A typed scalar constant (a strong literal in a jaxpr: `1:i32[]`)."""
    return np.array(value, dtype)[()]


def convert(x, dtype, weak: bool = False, strip_weak: bool = False):
    """x as `dtype`. Python scalars stay weak literals when `weak`; numpy values are converted
    statically with lax's reference semantics; tracers get a convert_element_type."""
    dtype = np.dtype(dtype)
    if isinstance(x, Tracer):
        if x.dtype == dtype and not (strip_weak and x.weak_type):
            return x
        if x.weak_type and dtypes.is_int(x.dtype) and dtypes.is_int(dtype) and dtype != x.dtype:
            _check_weak_int_fits(x, dtype)
        return _e.convert_element_type_p.bind(x, new_dtype=dtype, weak_type=weak, sharding=None)
    if is_py_scalar(x):
        if weak and dtype in (dtypes.bool_, dtypes.int64, dtypes.float64):  # a weak literal of its kind
            return {"b": bool, "i": int, "f": float}[dtype.kind](x)
        if dtypes.is_int(dtype) and isinstance(x, int) and not isinstance(x, bool):
            info = np.iinfo(dtype)
            if not info.min <= x <= info.max:
                raise SprueValueError(f"Python int {x} is out of bounds for {dtype}{loc()}")
        x = np.asarray(x)
    if x.dtype == dtype:
        return x
    out = impl_rules[_e.convert_element_type_p](np.asarray(x), new_dtype=dtype)
    return np.asarray(out, dtype) if np.ndim(x) else np.asarray(out, dtype)[()]


def _check_weak_int_fits(x, dtype) -> None:
    """A weakly typed int known only at run time (a Python int argument, or one computed from it)
    must fit the integer type it is converted to, as a literal must (convert, above) and as numpy 2
    requires (NEP 50: `int8_array * 300` raises OverflowError): a run-time check, not a wrap."""
    info, wide = np.iinfo(dtype), np.iinfo(x.dtype)
    lo, hi = max(int(info.min), int(wide.min)), min(int(info.max), int(wide.max))
    ok = lax.bitwise_and(lax.ge(x, np.array(lo, x.dtype)[()]), lax.le(x, np.array(hi, x.dtype)[()]))
    if ok.aval.ndim:
        ok = lax.reduce_and(ok, tuple(range(ok.aval.ndim)))
    lax.check(ok, f"a Python int is out of bounds for {dtype} (it must be in [{lo}, {hi}]){loc()}: its value"
                  f" comes from a Python int argument, and meets a value of type {dtype} here (numpy 2 raises"
                  f" OverflowError, as sprue does for a literal); pass a value that fits, or convert the other"
                  f" operand to a wider type first")


def as_result(x, dtype=None):
    """Eager results are numpy arrays (never Python scalars); tracers pass through."""
    if isinstance(x, Tracer):
        return x
    return np.asarray(x, dtype if dtype is not None else None)


def broadcast_shapes(fname: str, *xs) -> tuple:
    """numpy's broadcast of the operands' shapes; raises naming the operands. Sizes known only at
    run time that tracing cannot compare get a run-time check and a size computed at run time
    (see _dims.broadcast_dim); broadcast_to then resizes the operands safely."""
    shapes = [aval(x).shape for x in xs]
    nd = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(nd):
        dims = [s[len(s) - nd + i] for s in shapes if len(s) - nd + i >= 0]
        if any(not isinstance(d, int) for d in dims):
            from sprue.numpy._dims import broadcast_dim
            out.append(broadcast_dim(fname, dims, xs))
            continue
        dims = set(dims)
        dims.discard(1)
        if len(dims) > 1:
            raise value_error(fname, f"operands could not be broadcast together: {describe(*xs)}")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast_to(x, shape, keep_scalar: bool = False):
    """x broadcast to `shape` (trailing dims aligned) with broadcast_in_dim; a rank-0 literal
    (a non-traced scalar) stays a scalar when `keep_scalar` (lax binary ops accept it). An axis
    whose size only run time can compare with the target's (checked by the caller) is resized by
    a clamped index-based broadcast first, never by broadcast_in_dim."""
    shape = tuple(shape)
    xs = aval(x).shape
    if xs == shape or (keep_scalar and not xs and not isinstance(x, Tracer)):
        return x
    nd = len(shape)
    from sprue.numpy._dims import needs_resize, resize_axis
    for i, d in enumerate(xs):
        if needs_resize(d, shape[nd - len(xs) + i]):
            x = resize_axis(x, i, shape[nd - len(xs) + i])
    if aval(x).shape == shape:
        return x
    return lax.broadcast_in_dim(x, shape, tuple(range(nd - len(xs), nd)))


def promote(fname: str, *xs, shape: bool = True, keep_scalar: bool = True):
    """Operands converted to their common dtype (and broadcast to one shape when `shape`)."""
    xs = operands(fname, *xs)
    dt, weak = result_type(*xs)
    out_shape = broadcast_shapes(fname, *xs) if shape else None
    xs = [convert(x, dt, weak) for x in xs]
    if shape:
        xs = [broadcast_to(x, out_shape, keep_scalar) for x in xs]
    return xs


def reshape(x, shape):
    """lax.reshape that skips no-op reshapes."""
    shape = tuple(shape)
    if aval(x).shape == shape:
        return x
    return lax.reshape(x, shape)
