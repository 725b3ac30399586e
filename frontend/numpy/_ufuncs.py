"""Elementwise functions (numpy's ufuncs), written as tables over sprue.lax.

Types follow numpy exactly: each function asks numpy's own ufunc type resolution
(`ufunc.resolve_dtypes`, on dtypes only, with Python scalars as weak `int`/`float`) which loop
numpy would run, converts the operands to that loop's dtype and broadcasts them, then applies the
lax implementation. So `sin(int32)` is float64, `sin(bool)` float16, `floor(int32)` int32,
`bool // bool` int8 and `-bool` a TypeError, all as in numpy.
"""
from __future__ import annotations

import builtins
import functools

import numpy as np

from sprue import lax
from sprue.base import dtypes
from sprue.ir.core import ShapedArray
from sprue.lax import RoundingMethod
from sprue.numpy._avals import aval, const, describe, is_py_scalar, type_error, value_error
from sprue.numpy._promote import as_result, broadcast_shapes, broadcast_to, convert, operand, operands, promote

_DEFAULTS = (dtypes.bool_, dtypes.int64, dtypes.float64, dtypes.complex128)


# -- numpy's loop selection --------------------------------------------------------------------
def _np_key(a: ShapedArray):
    """How numpy's type resolution sees an operand: weak scalars as the Python types int/float."""
    if a.weak_type and a.dtype in _DEFAULTS and a.dtype.kind != "b":
        return {"i": int, "f": float, "c": complex}[a.dtype.kind]
    return a.dtype


@functools.lru_cache(maxsize=None)
def _resolve_cached(uf: np.ufunc, key: tuple):
    return uf.resolve_dtypes(key + (None,))


def resolve(fname: str, uf: np.ufunc, xs) -> tuple[list[np.dtype], np.dtype]:
    """The input dtypes and the output dtype of numpy's loop for these operands."""
    avs = [aval(x) for x in xs]
    # all operands weak (Python scalars, or values traced from them): numpy computes them at their
    # default dtypes; resolving (int, int) as Python types would pick numpy's object loop
    key = tuple(a.dtype for a in avs) if builtins.all(a.weak_type for a in avs) else tuple(_np_key(a) for a in avs)
    try:
        *ins, out = _resolve_cached(uf, key)
    except TypeError as e:  # numpy has no loop for these types (e.g. -bool, float & float)
        raise type_error(fname, f"not supported for operands {describe(*xs)} (numpy: {e})") from None
    if len(set(ins)) > 1:  # mixed loops (uint64 < int64): compare in the common type
        ins = [np.result_type(*ins)] * len(ins)
    for dt in (*ins, out):
        if dt not in dtypes.SUPPORTED:
            raise type_error(fname, f"operands {describe(*xs)} would compute in {dt}, which sprue does not support")
    return ins, out


def apply(fname: str, uf: np.ufunc, impl, xs, full_broadcast: bool = False):
    """Run `impl` (lax ops) on operands converted to numpy's loop dtype and broadcast together.
    Rank-0 literals stay scalars unless `full_broadcast` (impls that use select need equal shapes)."""
    xs = operands(fname, *xs)
    shape = broadcast_shapes(fname, *xs)
    ins, out_dt = resolve(fname, uf, xs)
    weak = builtins.all(aval(x).weak_type for x in xs)
    xs = [convert(x, dt, weak) for x, dt in zip(xs, ins)]
    xs = [broadcast_to(x, shape, keep_scalar=not full_broadcast) for x in xs]
    out = impl(*xs)
    if aval(out).dtype != out_dt:
        out = convert(out, out_dt)
    return as_result(out)


# -- helpers for the implementations -------------------------------------------------------------
def dtype_of(x) -> np.dtype:
    return aval(x).dtype


def like(x, v):
    """The constant v typed like x: a weak Python scalar beside a weak x, else a numpy scalar."""
    a = aval(x)
    if a.weak_type and a.dtype in _DEFAULTS:
        return {"b": bool, "i": int, "f": float, "c": complex}[a.dtype.kind](v)
    return const(a.dtype, v)


def full_like_shape(x, value, dtype):
    shape = aval(x).shape
    c = const(dtype, value)
    return lax.broadcast_in_dim(c, shape, ()) if shape else c


def _identity(x):
    return x


def _is_float(x):
    return dtypes.is_float(dtype_of(x))


def _if_float(f):
    """Apply f to float operands; integer and bool operands are their own result (floor(int))."""
    return lambda x: f(x) if _is_float(x) else x


def _abs(x):
    dt = dtype_of(x)
    return x if dtypes.is_bool(dt) or (dtypes.is_int(dt) and not dtypes.is_signed(dt)) else lax.abs(x)


def _log_base(b):
    return lambda x: lax.div(lax.log(x), like(x, np.log(dtype_of(x).type(b))))


def _scale(c):
    return lambda x: lax.mul(x, like(x, c))


def _trunc(x):
    return lax.select(lax.lt(x, like(x, 0)), lax.ceil(x), lax.floor(x))


def _rint(x):
    return lax.round(x, RoundingMethod.TO_NEAREST_EVEN)


def _reciprocal(x):
    return lax.div(like(x, 1), x)


def _is_complex(x):
    return dtypes.is_complex(dtype_of(x))


def _by_parts(combine, f):
    """A complex number's test from its parts' (numpy's: isnan if either part is NaN, ...)."""
    return lambda x: combine(f(lax.real(x)), f(lax.imag(x))) if _is_complex(x) else f(x)


def _isnan(x):
    return lax.ne(x, x) if _is_float(x) else full_like_shape(x, False, dtypes.bool_)


def _isinf(x):
    return lax.eq(lax.abs(x), like(x, np.inf)) if _is_float(x) else full_like_shape(x, False, dtypes.bool_)


def _isfinite(x):
    return lax.is_finite(x) if _is_float(x) else full_like_shape(x, True, dtypes.bool_)


def _conjugate(x):
    return lax.conj(x) if _is_complex(x) else x


def _exp2(x):
    return lax.exp(lax.mul(x, like(x, np.log(2.0)))) if _is_complex(x) else lax.exp2(x)


def _ordered(name, impl):
    """Ordering has no meaning on complex numbers: JAX's lax refuses them, and so does sprue (numpy
    orders them lexicographically)."""
    def f(*xs):
        if _is_complex(xs[0]):
            raise type_error(name, f"ordering comparisons of complex numbers are not supported (as in JAX's"
                                   f" lax), got {describe(*xs)}; compare real parts (real(z)) or magnitudes (abs(z))")
        return impl(*xs)
    return f


def _signbit(x):
    if not _is_float(x):
        return lax.lt(x, like(x, 0)) if dtypes.is_signed(dtype_of(x)) else full_like_shape(x, False, dtypes.bool_)
    # negative numbers and -0.0 (1 / -0.0 is -inf); NaNs count as positive
    return lax.bitwise_or(lax.lt(x, like(x, 0)), lax.lt(lax.div(like(x, 1), x), like(x, 0)))


def _add(x, y):
    return lax.bitwise_or(x, y) if dtypes.is_bool(dtype_of(x)) else lax.add(x, y)


def _mul(x, y):
    return lax.bitwise_and(x, y) if dtypes.is_bool(dtype_of(x)) else lax.mul(x, y)


def _float_divmod(x, y):
    """numpy's npy_divmod: floor quotient and remainder with the sign of the divisor."""
    mod = lax.rem(x, y)
    div = lax.div(lax.sub(x, mod), y)
    fix = lax.bitwise_and(lax.ne(mod, like(mod, 0)), lax.ne(lax.lt(y, like(y, 0)), lax.lt(mod, like(mod, 0))))
    mod = lax.select(fix, lax.add(mod, y), mod)
    div = lax.select(fix, lax.sub(div, like(div, 1)), div)
    return lax.select(lax.eq(y, like(y, 0)), lax.div(x, y), lax.round(div)), mod


def _floor_divide(x, y):
    dt = dtype_of(x)
    if dtypes.is_float(dt):
        return _float_divmod(x, y)[0]
    if not dtypes.is_signed(dt):
        return lax.div(x, y)
    # lax.div truncates toward zero (and x // 0 is 0, numpy's value); step down when signs differ
    q = lax.div(x, y)
    fix = lax.bitwise_and(lax.ne(lax.sign(x), lax.sign(y)), lax.ne(lax.rem(x, y), like(x, 0)))
    return lax.select(fix, lax.sub(q, like(q, 1)), q)


def _remainder(x, y):
    dt = dtype_of(x)
    rem = lax.rem(x, y)  # sign of the dividend (C fmod); x % 0 is 0 for integers
    if dtypes.is_int(dt) and not dtypes.is_signed(dt):
        return rem
    fix = lax.bitwise_and(lax.ne(lax.lt(rem, like(rem, 0)), lax.lt(y, like(y, 0))), lax.ne(rem, like(rem, 0)))
    return lax.select(fix, lax.add(rem, y), rem)


def _fmax_fmin(op):
    def impl(x, y):
        if not _is_float(x):
            return op(x, y)
        return lax.select(lax.ne(y, y), x, lax.select(lax.ne(x, x), y, op(x, y)))
    return impl


def _logical(op):
    """numpy's logical ufuncs have loops for every type (dd->?): test the operands against zero."""
    def impl(*xs):
        return op(*[convert(x, dtypes.bool_) for x in xs])
    return impl


def _right_shift(x, y):
    if dtypes.is_signed(dtype_of(x)):
        return lax.shift_right_arithmetic(x, y)
    return lax.shift_right_logical(x, y)


def _heaviside(x, y):
    zero, one = full_like_shape(x, 0, dtype_of(x)), full_like_shape(x, 1, dtype_of(x))
    return lax.select(lax.lt(x, like(x, 0)), zero, lax.select(lax.gt(x, like(x, 0)), one, y))


def _copysign(x, y):
    mag = lax.abs(x)
    return lax.select(_signbit(y), lax.neg(mag), mag)


def _hypot(x, y):
    """sqrt(x**2 + y**2), scaled by the larger magnitude so that it does not overflow."""
    a, b = lax.abs(x), lax.abs(y)
    big, small = lax.max(a, b), lax.min(a, b)
    safe = lax.select(lax.eq(big, like(big, 0)), full_like_shape(big, 1, dtype_of(big)), big)
    r = lax.div(small, safe)
    out = lax.mul(big, lax.sqrt(lax.add(like(r, 1), lax.mul(r, r))))
    return lax.select(lax.eq(big, like(big, np.inf)), big, out)


def _logaddexp(x, y):
    m = lax.max(x, y)
    d = lax.sub(x, y)
    out = lax.add(m, lax.log1p(lax.exp(lax.neg(lax.abs(d)))))
    return lax.select(lax.ne(d, d), lax.add(x, y), out)  # inf and inf, NaNs: numpy's values


# -- the tables: name -> (numpy ufunc giving the types, lax implementation[, full broadcast]) ----
UNARY = {
    "negative": (np.negative, lax.neg),
    "positive": (np.positive, _identity),
    "absolute": (np.absolute, _abs),
    "sign": (np.sign, lax.sign),
    "exp": (np.exp, lax.exp),
    "exp2": (np.exp2, _exp2),
    "expm1": (np.expm1, lax.expm1),
    "log": (np.log, lax.log),
    "log2": (np.log2, _log_base(2)),
    "log10": (np.log10, _log_base(10)),
    "log1p": (np.log1p, lax.log1p),
    "sin": (np.sin, lax.sin),
    "cos": (np.cos, lax.cos),
    "tan": (np.tan, lax.tan),
    "arcsin": (np.arcsin, lax.asin),
    "arccos": (np.arccos, lax.acos),
    "arctan": (np.arctan, lax.atan),
    "sinh": (np.sinh, lax.sinh),
    "cosh": (np.cosh, lax.cosh),
    "tanh": (np.tanh, lax.tanh),
    "arcsinh": (np.arcsinh, lax.asinh),
    "arccosh": (np.arccosh, lax.acosh),
    "arctanh": (np.arctanh, lax.atanh),
    "sqrt": (np.sqrt, lax.sqrt),
    "cbrt": (np.cbrt, lax.cbrt),
    "square": (np.square, lax.square),
    "reciprocal": (np.reciprocal, _reciprocal),
    "floor": (np.floor, _if_float(lax.floor)),
    "ceil": (np.ceil, _if_float(lax.ceil)),
    "trunc": (np.trunc, _if_float(_trunc)),
    "rint": (np.rint, _rint),
    "deg2rad": (np.deg2rad, _scale(np.pi / 180)),
    "rad2deg": (np.rad2deg, _scale(180 / np.pi)),
    "isfinite": (np.isfinite, _by_parts(lax.bitwise_and, _isfinite)),
    "isnan": (np.isnan, _by_parts(lax.bitwise_or, _isnan)),
    "isinf": (np.isinf, _by_parts(lax.bitwise_or, _isinf)),
    "signbit": (np.signbit, _signbit),
    "logical_not": (np.logical_not, _logical(lax.bitwise_not)),
    "invert": (np.invert, lax.bitwise_not),
    "conjugate": (np.conjugate, _conjugate),
}

BINARY = {
    "add": (np.add, _add),
    "subtract": (np.subtract, lax.sub),
    "multiply": (np.multiply, _mul),
    "divide": (np.divide, lax.div),
    "floor_divide": (np.floor_divide, _floor_divide),
    "remainder": (np.remainder, _remainder),
    "fmod": (np.fmod, lax.rem),
    "float_power": (np.float_power, lax.pow),
    "maximum": (np.maximum, _ordered("maximum", lax.max)),
    "minimum": (np.minimum, _ordered("minimum", lax.min)),
    "fmax": (np.fmax, _ordered("fmax", _fmax_fmin(lax.max)), True),
    "fmin": (np.fmin, _ordered("fmin", _fmax_fmin(lax.min)), True),
    "arctan2": (np.arctan2, lax.atan2),
    "hypot": (np.hypot, _hypot, True),
    "copysign": (np.copysign, _copysign, True),
    "heaviside": (np.heaviside, _heaviside, True),
    "logaddexp": (np.logaddexp, _logaddexp, True),
    "equal": (np.equal, lax.eq),
    "not_equal": (np.not_equal, lax.ne),
    "less": (np.less, _ordered("less", lax.lt)),
    "less_equal": (np.less_equal, _ordered("less_equal", lax.le)),
    "greater": (np.greater, _ordered("greater", lax.gt)),
    "greater_equal": (np.greater_equal, _ordered("greater_equal", lax.ge)),
    "logical_and": (np.logical_and, _logical(lax.bitwise_and)),
    "logical_or": (np.logical_or, _logical(lax.bitwise_or)),
    "logical_xor": (np.logical_xor, _logical(lax.bitwise_xor)),
    "bitwise_and": (np.bitwise_and, lax.bitwise_and),
    "bitwise_or": (np.bitwise_or, lax.bitwise_or),
    "bitwise_xor": (np.bitwise_xor, lax.bitwise_xor),
    "left_shift": (np.left_shift, lax.shift_left),
    "right_shift": (np.right_shift, _right_shift),
}

ALIASES = {
    "abs": "absolute", "conj": "conjugate", "bitwise_not": "invert", "bitwise_invert": "invert",
    "true_divide": "divide", "mod": "remainder", "radians": "deg2rad", "degrees": "rad2deg",
    "bitwise_left_shift": "left_shift", "bitwise_right_shift": "right_shift",
    "asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh", "acosh": "arccosh",
    "atanh": "arctanh", "atan2": "arctan2",
}


def _make_unary(name, uf, impl, full=False):
    def f(x, /):
        return apply(name, uf, impl, (x,), full)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"numpy.{uf.__name__} over sprue.lax (numpy's dtype rules)."
    return f


def _make_binary(name, uf, impl, full=False):
    def f(x1, x2, /):
        return apply(name, uf, impl, (x1, x2), full)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"numpy.{uf.__name__} over sprue.lax (numpy's dtype promotion and broadcasting)."
    return f


_funcs = {}
for _n, _row in UNARY.items():
    _funcs[_n] = _make_unary(_n, *_row)
for _n, _row in BINARY.items():
    _funcs[_n] = _make_binary(_n, *_row)
for _a, _n in ALIASES.items():
    _funcs[_a] = _funcs[_n]
globals().update(_funcs)
__all__ = sorted(_funcs) + ["power", "pow", "divmod", "round", "around", "clip", "isclose",
                            "fix", "nan_to_num", "real", "imag", "angle", "iscomplexobj", "isrealobj",
                            "iscomplex", "isreal"]


# -- the functions that are not a plain table row -------------------------------------------------
def _static_int_exponent(x):
    """The value of a static integer exponent (Python int, numpy integer scalar or 0-d array)."""
    if isinstance(x, bool) or isinstance(x, np.bool_):
        return None
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, np.ndarray) and x.ndim == 0 and dtypes.is_int(x.dtype):
        return int(x)
    return None


def power(x1, x2, /):
    """numpy.power. A static integer exponent (`x ** 2`) becomes lax.integer_pow, as in JAX;
    integer ** integer stays integer and a static negative integer exponent raises, as in numpy."""
    x1, x2 = operands("power", x1, x2)
    n = _static_int_exponent(x2)
    if n is None:
        return apply("power", np.power, lax.pow, (x1, x2))
    (in1, _), out_dt = resolve("power", np.power, (x1, x2))
    if dtypes.is_int(out_dt) and n < 0:
        raise value_error("power", f"integers to negative integer powers are not allowed ({describe(x1)} ** {n})")
    weak = aval(x1).weak_type and is_py_scalar(x2)
    x = convert(x1, in1, weak)
    return as_result(convert(lax.integer_pow(x, n), out_dt))


pow = power


def divmod(x1, x2, /):
    return _funcs["floor_divide"](x1, x2), _funcs["remainder"](x1, x2)


def round(a, decimals: int = 0, out=None):
    """numpy.round: half to even, at `decimals` digits (negative: to tens, hundreds, ...)."""
    if out is not None:
        raise type_error("round", "out= is not supported (arrays are immutable)")
    a = operand("round", a)
    if not isinstance(decimals, (int, np.integer)) or isinstance(decimals, bool):
        raise type_error("round", f"decimals must be a static int, got {type(decimals).__name__}")
    decimals = int(decimals)
    dt = aval(a).dtype
    if dtypes.is_complex(dt):   # numpy rounds each part
        return as_result(lax.complex(round(lax.real(a), decimals), round(lax.imag(a), decimals)))
    if dtypes.is_int(dt) and decimals >= 0:
        return as_result(a, dt)
    if decimals == 0:
        return _funcs["rint"](a)
    if dtypes.is_bool(dt):
        raise type_error("round", f"cannot round {describe(a)} to {decimals} decimals (numpy cannot either)")
    scale = 10.0 ** builtins.abs(decimals)
    mul, div = _funcs["multiply"], _funcs["divide"]
    if decimals > 0:
        y = div(_funcs["rint"](mul(a, scale)), scale)
    else:
        y = mul(_funcs["rint"](div(a, scale)), scale)
    return as_result(convert(y, dt)) if dtypes.is_int(dt) else y


around = round


def fix(x, /):
    """numpy.fix: round toward zero."""
    return _funcs["trunc"](x)


def clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None):
    """numpy.clip: maximum(a, a_min) then minimum(., a_max), with numpy's promotion."""
    if out is not None:
        raise type_error("clip", "out= is not supported (arrays are immutable)")
    lo = a_min if a_min is not None else min
    hi = a_max if a_max is not None else max
    a = operand("clip", a)
    if lo is not None:
        a = _funcs["maximum"](a, lo)
    if hi is not None:
        a = _funcs["minimum"](a, hi)
    return as_result(a)


def where_xy(condition, x, y, /):
    """numpy.where(condition, x, y): select with numpy's promotion and broadcasting. (The public
    numpy.where, whose one-argument form is nonzero, is in _nonzero.)"""
    c, x, y = operands("where", condition, x, y)
    shape = broadcast_shapes("where", c, x, y)
    c = convert(c, dtypes.bool_)
    x, y = promote("where", x, y, shape=False)
    c, x, y = (broadcast_to(v, shape, keep_scalar=(v is c)) for v in (c, x, y))
    return as_result(lax.select(c, x, y))


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """numpy.isclose: |a - b| <= atol + rtol * |b|, with infinities equal only to themselves."""
    a, b = operands("isclose", a, b)
    dt, weak = dtypes.result_type((aval(a).dtype, aval(a).weak_type), (aval(b).dtype, aval(b).weak_type),
                                  (dtypes.float64, True))
    a, b = convert(a, dt, weak), convert(b, dt, weak)
    F = _funcs
    finite = F["logical_and"](F["isfinite"](a), F["isfinite"](b))
    close = F["less_equal"](F["absolute"](F["subtract"](a, b)),
                            F["add"](atol, F["multiply"](rtol, F["absolute"](b))))
    out = F["logical_or"](F["logical_and"](finite, close), F["logical_and"](F["logical_not"](finite), F["equal"](a, b)))
    if equal_nan:
        out = F["logical_or"](out, F["logical_and"](F["isnan"](a), F["isnan"](b)))
    return out


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    F = _funcs
    x = operand("nan_to_num", x)
    dt = aval(x).dtype
    if dtypes.is_complex(dt):   # numpy's: each part
        parts = (nan_to_num(f(x), copy, nan, posinf, neginf) for f in (lax.real, lax.imag))
        return as_result(lax.complex(*parts))
    if not dtypes.is_float(dt):
        return as_result(x)
    info = np.finfo(dt)
    x = where_xy(F["isnan"](x), nan, x)
    x = where_xy(F["equal"](x, np.inf), info.max if posinf is None else posinf, x)
    return where_xy(F["equal"](x, -np.inf), info.min if neginf is None else neginf, x)


def real(x, /):
    x = operand("real", x)
    return as_result(lax.real(x) if _is_complex(x) else x)


def imag(x, /):
    x = operand("imag", x)
    if _is_complex(x):
        return as_result(lax.imag(x))
    return as_result(full_like_shape(x, 0, aval(x).dtype))


def angle(z, deg: bool = False):
    """numpy.angle: atan2(imag z, real z), in radians (degrees with deg=True); float64 for integers."""
    z = operand("angle", z)
    dt = aval(z).dtype
    if not dtypes.is_inexact(dt):
        z = convert(z, dtypes.float64)
    a = _funcs["arctan2"](imag(z), real(z))
    return _funcs["multiply"](a, 180 / np.pi) if deg else a


def iscomplexobj(x):
    return dtypes.is_complex(aval(operand("iscomplexobj", x)).dtype)


def isrealobj(x):
    return not iscomplexobj(x)


def iscomplex(x):
    return _funcs["not_equal"](imag(x), 0)


def isreal(x):
    return _funcs["equal"](imag(x), 0)
