"""Operands of sprue.numpy functions: checking them, numpy's dtype promotion (NEP 50, Python
scalars weak), broadcasting, and conversion — all on abstract values, with lax ops for the data —
and numpy.array, which makes an operand of nested lists (an operand given as a list is one).

An *operand* is a Tracer, a numpy array or scalar, or a Python bool/int/float (weak). Nothing here
computes on a traced value with numpy: numpy only sees dtypes, shapes and static constants.
"""
from __future__ import annotations

import operator

import numpy as np

from sprue import lax
from sprue.base import dtypes
from sprue.base.eager_array import eager
from sprue.base.errors import SprueTypeError, SprueValueError
from sprue.ir.core import impl_rules
from sprue.ir.shapes import DimExpr
from sprue.lax import elementwise as _e
from sprue.numpy import _dims as _d
from sprue.numpy._avals import any_tracer, aval, describe, is_py_scalar, loc, type_error, value_error
from sprue.trace.tracing import Tracer, current_builder


def operand(fname: str, x):
    """Check that x is an array operand sprue supports; lists and tuples become arrays."""
    if isinstance(x, Tracer):
        return x
    if isinstance(x, DimExpr):  # a size used as a number (x.shape[0] * 2.0): its run-time value
        return _d.weak_value(x)
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
        return array(x, fname=fname)
    raise type_error(fname, f"{type(x).__name__} object is not a valid array operand; expected an array, a"
                            f" Python or numpy scalar (bool, int, float, complex), or a traced array")


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
        if weak and dtype in (dtypes.bool_, dtypes.int64, dtypes.float64, dtypes.complex128):  # a weak literal
            return {"b": bool, "i": int, "f": float, "c": complex}[dtype.kind](x)
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
    return eager(np.asarray(x, dtype if dtype is not None else None))


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
            out.append(_d.broadcast_dim(fname, dims, xs))
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
    for i, d in enumerate(xs):
        if _d.needs_resize(d, shape[nd - len(xs) + i]):
            x = _d.resize_axis(x, i, shape[nd - len(xs) + i])
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


# -- numpy.array: nested lists of scalars, numpy arrays and traced arrays ----------------------------
def _const_tracer(x):
    """Inside a trace, a numpy array made by array()/asarray() becomes a traced array standing for
    its jaxpr constant, so it has the traced-array methods (`.at`, ...). Eagerly it stays numpy."""
    b = current_builder()
    if b is None or isinstance(x, Tracer) or np.ndim(x) == 0:
        return x
    var = b.atom(x)
    return Tracer(b, var.aval, var)


def nested_leaves(obj, out=None) -> list:
    """The scalars and arrays of a nested list/tuple, in order."""
    out = [] if out is None else out
    if isinstance(obj, (list, tuple)):
        for o in obj:
            nested_leaves(o, out)
    else:
        out.append(obj)
    return out


def _strong_dtype(fname, x):
    x = _d.value(x) if isinstance(x, DimExpr) else operand(fname, x)
    return aval(x).dtype


def _build(fname, obj, dt):
    """A nested list/tuple holding traced arrays: convert the leaves, stack level by level."""
    if not isinstance(obj, (list, tuple)):
        return convert(operand(fname, obj), dt)
    if not obj:
        raise value_error(fname, "an empty list inside a list of traced arrays")
    parts = [_build(fname, o, dt) for o in obj]
    shapes = {aval(p).shape for p in parts}
    if len(shapes) != 1:
        raise value_error(fname, f"inhomogeneous nested sequence: elements of shapes {describe(*parts)}")
    (shape,) = shapes
    parts = [lax.broadcast_in_dim(p, (1,) + shape, tuple(range(1, len(shape) + 1))) for p in parts]
    return parts[0] if len(parts) == 1 else lax.concatenate(parts, 0)


def array(object, dtype=None, *, copy=True, order="K", ndmin=0, fname="array"):
    """numpy.array: nested lists of scalars, numpy arrays and traced arrays. Python scalars inside
    lists are strong, as in numpy (array([1.0, x_f32]) is float64)."""
    dt = check_dtype(fname, dtype) if dtype is not None else None
    if copy is not None and not isinstance(copy, (bool, np.bool_)):
        raise type_error(fname, f"copy must be True, False or None, got {copy!r}")
    if not copy and isinstance(object, np.ndarray) and (dt is None or object.dtype == dt) and ndmin <= object.ndim \
            and current_builder() is None and object.dtype in dtypes.SUPPORTED:
        return eager(object)   # numpy's copy=False/None: the same memory (a view with .at)
    if isinstance(object, DimExpr):  # a size (x.shape[0]): numpy makes the Python int an int64 array
        object = _d.value(object)
    if isinstance(object, Tracer):
        out = object if dt is None else convert(object, dt)
    elif isinstance(object, (list, tuple)):
        leaves = nested_leaves(object)
        if any_tracer(*leaves) or any(isinstance(v, DimExpr) for v in leaves):
            if dt is None:
                dt = np.result_type(*[_strong_dtype(fname, v) for v in leaves])
                dt = check_dtype(fname, dt)
            out = _build(fname, object, dt)
        else:
            out = _static_array(fname, object, dt)
    elif is_py_scalar(object) or isinstance(object, (np.ndarray, np.generic)):
        out = _static_array(fname, operand(fname, object), dt)
    else:
        raise type_error(fname, f"cannot make an array from a {type(object).__name__} object")
    nd = static_int(fname, ndmin, "ndmin")
    if aval(out).ndim < nd:
        out = lax.reshape(out, (1,) * (nd - aval(out).ndim) + aval(out).shape)
    return _const_tracer(as_result(out))


def _static_array(fname, obj, dt):
    try:
        arr = np.array(obj)   # a copy, always
    except (ValueError, TypeError) as e:
        raise value_error(fname, f"cannot make an array from this sequence: {e}") from None
    if arr.dtype == object or arr.dtype not in dtypes.SUPPORTED:
        raise type_error(fname, f"elements of dtype {arr.dtype} are not supported; sprue compiles "
                                f"{', '.join(sorted(str(d) for d in dtypes.SUPPORTED))}")
    return arr if dt is None or arr.dtype == dt else convert(arr, dt)
