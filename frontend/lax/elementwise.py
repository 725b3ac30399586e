"""Elementwise primitives: unary math, binary arithmetic, comparisons, logic, select_n, clamp,
convert_element_type. Binary operands have equal shapes, or one is rank 0 (as JAX's lax permits
for scalar literals); they always share a dtype (sprue.numpy inserts the conversions)."""
from __future__ import annotations

import enum

import numpy as np

from .. import dtypes
from ..core import ShapedArray
from ..shapes import prove_equal
from ..errors import SprueTypeError, SprueValueError
from ._rules import define, require_equal, same_dtypes, shapes_equal, weak

FLOAT = "floating-point"
NUM = "numeric"
INT = "integer"
LOGIC = "integer or boolean"
ANY = "any"


def _kind_ok(kind: str, dt: np.dtype) -> bool:
    return {FLOAT: dtypes.is_float(dt), NUM: not dtypes.is_bool(dt), INT: dtypes.is_int(dt),
            LOGIC: dtypes.is_int(dt) or dtypes.is_bool(dt), ANY: True}[kind]


def _unary_rule(name: str, kind: str, out_dtype=None):
    def rule(x: ShapedArray, **params):
        if not _kind_ok(kind, x.dtype):
            raise SprueTypeError(f"{name} requires a {kind} operand, got {x.str_short()}")
        return x.update(dtype=out_dtype) if out_dtype is not None else x
    return rule


def _unary(name: str, kind: str, impl, out_dtype=None, accuracy: bool = False):
    return define(name, _unary_rule(name, kind, out_dtype), impl)


def _broadcast_shapes(name: str, *avals: ShapedArray) -> tuple:
    shaped = [a for a in avals if a.ndim]
    if not shaped:
        return ()
    first = shaped[0].shape
    for a in shaped[1:]:
        if a.ndim != len(first):
            raise SprueValueError(f"{name} requires operands of equal shapes (or rank 0), got "
                                  f"{', '.join(a.str_short() for a in avals)}")
        for d, e in zip(first, a.shape):
            require_equal(d, e, f"{name} requires operands of equal shapes (or rank 0), got "
                          + ", ".join(a.str_short() for a in avals))
    return first


def _require_same_shape(name: str, a: ShapedArray, b: ShapedArray):
    """Raise the not-provably-equal error when a and b have one rank but sizes only run time knows."""
    if a.ndim == b.ndim:
        for d, e in zip(a.shape, b.shape):
            if prove_equal(d, e) is None:
                require_equal(d, e, f"{name}: {a.str_short()} and {b.str_short()} must have one shape")


def _binary_rule(name: str, kind: str, out_dtype=None):
    def rule(x: ShapedArray, y: ShapedArray, **params):
        same_dtypes(name, x, y)
        if not _kind_ok(kind, x.dtype):
            raise SprueTypeError(f"{name} requires {kind} operands, got {x.str_short()}")
        shape = _broadcast_shapes(name, x, y)
        return ShapedArray(shape, out_dtype or x.dtype, weak_type=weak(x, y) and out_dtype is None)
    return rule


def _binary(name: str, kind: str, impl, out_dtype=None):
    return define(name, _binary_rule(name, kind, out_dtype), impl)


# -- numpy reference rules with lax's semantics (C-style integer division, no Python floor) --
def _int_guarded(a, b):
    """Divisor with zeros (and INT_MIN / -1) replaced by 1; these lanes give 0 (numpy's value)."""
    bad = b == 0
    if dtypes.is_signed(a.dtype):
        bad = bad | ((b == -1) & (a == np.iinfo(a.dtype).min))
    return np.where(bad, np.ones_like(b), b), bad


def _div_impl(a, b):
    if dtypes.is_float(a.dtype):
        with np.errstate(all="ignore"):
            return np.true_divide(a, b)
    b1, bad = _int_guarded(a, b)
    # C truncation from numpy's floor division (no abs(): abs(INT_MIN) overflows)
    q = np.floor_divide(a, b1)
    q = q + ((np.remainder(a, b1) != 0) & ((a < 0) != (b1 < 0))).astype(a.dtype)
    return np.where(bad, np.where(b == 0, np.zeros_like(a), a), q).astype(a.dtype)


def _rem_impl(a, b):
    if dtypes.is_float(a.dtype):
        with np.errstate(all="ignore"):
            return np.fmod(a, b)
    b1, bad = _int_guarded(a, b)
    return np.where(bad, 0, np.fmod(a, b1)).astype(a.dtype)


def _pow_impl(a, b):
    with np.errstate(all="ignore"):
        if dtypes.is_int(a.dtype):
            # integer powers: negative exponents give 0 except for bases 1 and -1 (as XLA does)
            out = np.power(a, np.maximum(b, np.zeros_like(b)))
            if not dtypes.is_signed(a.dtype):
                return out
            one = np.ones_like(a)
            neg_one_pow = np.where(b % 2 == 0, one, -one)
            small = np.where(a == 1, one, np.where(a == -1, neg_one_pow, np.zeros_like(a)))
            return np.where(b < 0, small, out).astype(a.dtype)
        return np.power(a, b)


def _errstate(f):
    def g(*args, **params):
        with np.errstate(all="ignore"):
            return f(*args)
    return g


def _round_impl(x, rounding_method=1):
    if rounding_method == RoundingMethod.TO_NEAREST_EVEN:
        return np.round(x)
    # half away from zero, exactly: the fraction x - trunc(x) is exact in floating point
    t = np.trunc(x)
    with np.errstate(invalid="ignore"):
        return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t).astype(x.dtype)


class RoundingMethod(enum.IntEnum):
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def _shift_impl(kind):
    def impl(a, b):
        bits = a.dtype.itemsize * 8
        oob = (b < 0) | (b >= bits)
        b1 = np.where(oob, 0, b)
        if kind == "left":
            out = np.left_shift(a, b1)
            return np.where(oob, 0, out).astype(a.dtype)
        if kind == "arith":
            out = np.right_shift(a, b1)
            fill = np.where(a < 0, np.full_like(a, -1), np.zeros_like(a)) if dtypes.is_signed(a.dtype) \
                else np.zeros_like(a)
            return np.where(oob, fill, out).astype(a.dtype)
        ua = a.view(np.dtype(f"u{a.dtype.itemsize}"))
        return np.where(oob, 0, np.right_shift(ua, b1.astype(ua.dtype)).view(a.dtype)).astype(a.dtype)
    return impl


def _sign_impl(x):
    if dtypes.is_bool(x.dtype):
        return x
    return np.sign(x)


def _logistic(x):
    with np.errstate(all="ignore"):
        return 1 / (1 + np.exp(-x))


neg_p = _unary("neg", NUM, lambda x: np.negative(x))
sign_p = _unary("sign", NUM, _sign_impl)
floor_p = _unary("floor", FLOAT, np.floor)
ceil_p = _unary("ceil", FLOAT, np.ceil)
round_p = _unary("round", FLOAT, _round_impl)
is_finite_p = _unary("is_finite", FLOAT, np.isfinite, out_dtype=dtypes.bool_)
exp_p = _unary("exp", FLOAT, _errstate(np.exp))
exp2_p = _unary("exp2", FLOAT, _errstate(np.exp2))
log_p = _unary("log", FLOAT, _errstate(np.log))
log1p_p = _unary("log1p", FLOAT, _errstate(np.log1p))
expm1_p = _unary("expm1", FLOAT, _errstate(np.expm1))
tanh_p = _unary("tanh", FLOAT, np.tanh)
logistic_p = _unary("logistic", FLOAT, _logistic)
sin_p = _unary("sin", FLOAT, _errstate(np.sin))
cos_p = _unary("cos", FLOAT, _errstate(np.cos))
tan_p = _unary("tan", FLOAT, _errstate(np.tan))
asin_p = _unary("asin", FLOAT, _errstate(np.arcsin))
acos_p = _unary("acos", FLOAT, _errstate(np.arccos))
atan_p = _unary("atan", FLOAT, np.arctan)
sinh_p = _unary("sinh", FLOAT, _errstate(np.sinh))
cosh_p = _unary("cosh", FLOAT, _errstate(np.cosh))
asinh_p = _unary("asinh", FLOAT, np.arcsinh)
acosh_p = _unary("acosh", FLOAT, _errstate(np.arccosh))
atanh_p = _unary("atanh", FLOAT, _errstate(np.arctanh))
sqrt_p = _unary("sqrt", FLOAT, _errstate(np.sqrt))
rsqrt_p = _unary("rsqrt", FLOAT, _errstate(lambda x: 1 / np.sqrt(x)))
cbrt_p = _unary("cbrt", FLOAT, np.cbrt)
abs_p = _unary("abs", NUM, np.abs)
not_p = _unary("not", LOGIC, np.invert)
square_p = _unary("square", NUM, _errstate(np.square))
def _integer_pow_impl(x, *, y):
    if y >= 0:
        return _errstate(np.power)(x, x.dtype.type(y))
    if dtypes.is_float(x.dtype):
        return _errstate(np.power)(x, x.dtype.type(y))
    return _pow_impl(x, np.full_like(x, y))   # ints: 0 except for bases 1 and -1, as XLA does


integer_pow_p = define("integer_pow", _unary_rule("integer_pow", NUM), _integer_pow_impl)

add_p = _binary("add", ANY, lambda a, b: np.logical_or(a, b) if a.dtype == bool else _errstate(np.add)(a, b))
sub_p = _binary("sub", NUM, _errstate(np.subtract))
mul_p = _binary("mul", ANY, lambda a, b: np.logical_and(a, b) if a.dtype == bool else _errstate(np.multiply)(a, b))
div_p = _binary("div", NUM, _div_impl)
rem_p = _binary("rem", NUM, _rem_impl)
pow_p = _binary("pow", NUM, _pow_impl)
max_p = _binary("max", ANY, np.maximum)
min_p = _binary("min", ANY, np.minimum)
atan2_p = _binary("atan2", FLOAT, np.arctan2)
and_p = _binary("and", LOGIC, np.bitwise_and)
or_p = _binary("or", LOGIC, np.bitwise_or)
xor_p = _binary("xor", LOGIC, np.bitwise_xor)
shift_left_p = _binary("shift_left", INT, _shift_impl("left"))
shift_right_arithmetic_p = _binary("shift_right_arithmetic", INT, _shift_impl("arith"))
shift_right_logical_p = _binary("shift_right_logical", INT, _shift_impl("logical"))
eq_p = _binary("eq", ANY, np.equal, out_dtype=dtypes.bool_)
ne_p = _binary("ne", ANY, np.not_equal, out_dtype=dtypes.bool_)
lt_p = _binary("lt", ANY, np.less, out_dtype=dtypes.bool_)
le_p = _binary("le", ANY, np.less_equal, out_dtype=dtypes.bool_)
gt_p = _binary("gt", ANY, np.greater, out_dtype=dtypes.bool_)
ge_p = _binary("ge", ANY, np.greater_equal, out_dtype=dtypes.bool_)


# -- select_n(which, *cases): cases[which]; `which` is bool (2 cases) or int32 ----------------
def _select_n_rule(which: ShapedArray, *cases: ShapedArray):
    if not cases:
        raise SprueValueError("select_n needs at least one case")
    same_dtypes("select_n", *cases)
    for c in cases[1:]:
        if not shapes_equal(c.shape, cases[0].shape):
            _require_same_shape("select_n cases", c, cases[0])
            raise SprueValueError(f"select_n cases must have one shape, got {', '.join(c.str_short() for c in cases)}")
    if which.ndim and not shapes_equal(which.shape, cases[0].shape):
        _require_same_shape("select_n predicate", which, cases[0])
        raise SprueValueError(f"select_n predicate {which.str_short()} must be rank 0 or match {cases[0].str_short()}")
    if not (dtypes.is_bool(which.dtype) or which.dtype == np.int32):
        raise SprueTypeError(f"select_n predicate must be bool or int32, got {which.str_short()}")
    if dtypes.is_bool(which.dtype) and len(cases) > 2:
        raise SprueValueError("select_n with a bool predicate takes at most 2 cases")
    return cases[0].update(weak_type=weak(*cases))


def _select_n_impl(which, *cases):
    idx = which.astype(np.int64)
    return np.choose(np.clip(idx, 0, len(cases) - 1), np.broadcast_arrays(*cases)) if len(cases) > 1 else cases[0]


select_n_p = define("select_n", _select_n_rule, _select_n_impl)


def _clamp_rule(lo: ShapedArray, x: ShapedArray, hi: ShapedArray):
    same_dtypes("clamp", lo, x, hi)
    for b in (lo, hi):
        if b.ndim and not shapes_equal(b.shape, x.shape):
            _require_same_shape("clamp bounds", b, x)
            raise SprueValueError(f"clamp bounds must be rank 0 or match the operand {x.str_short()}, got {b.str_short()}")
    return x


clamp_p = define("clamp", _clamp_rule, lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi))


def _convert_rule(x: ShapedArray, *, new_dtype, weak_type=False, sharding=None):
    return ShapedArray(x.shape, dtypes.canonicalize(new_dtype), weak_type=weak_type)


def _convert_impl(x, *, new_dtype, weak_type=False, sharding=None):
    new_dtype = np.dtype(new_dtype)
    if dtypes.is_float(x.dtype) and dtypes.is_int(new_dtype):
        # float -> int saturates and maps NaN to 0 (defined, unlike C's cast). The bounds are
        # compared in float64 against 2**bits exactly, since INT_MAX itself may round up in float.
        info = np.iinfo(new_dtype)
        xf = x.astype(np.float64)
        too_big = ~(xf < float(info.max) + 1.0)          # also true for +inf
        too_small = xf < float(info.min)
        nan = np.isnan(xf)
        safe = np.where(too_big | too_small | nan, 0.0, np.trunc(xf)).astype(new_dtype)
        out = np.where(too_big & ~nan, np.array(info.max, new_dtype), safe)
        return np.where(too_small, np.array(info.min, new_dtype), out).astype(new_dtype)
    if dtypes.is_bool(new_dtype):
        return x != 0
    return x.astype(new_dtype)


convert_element_type_p = define("convert_element_type", _convert_rule, _convert_impl)


# -- symbolic sizes: integer scalar arithmetic on sizes keeps its symbolic value ----------------
# (`jnp.ones(n + 1)` then has the type f64[n+1], provably equal to other n+1 sizes.)
def _size_operand(x):
    from ..tracing import Tracer
    if isinstance(x, Tracer):
        return x.dim_expr if x.ndim == 0 and dtypes.is_int(x.dtype) else None
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        return int(x)
    if isinstance(x, np.ndarray) and x.ndim == 0 and dtypes.is_int(x.dtype):
        return int(x)
    return None


def _size_rule(combine):
    def rule(args, params, out_aval):
        if out_aval.ndim or not dtypes.is_int(out_aval.dtype):
            return None
        dims = [_size_operand(a) for a in args]
        if any(d is None for d in dims) or all(isinstance(d, int) for d in dims):
            return None
        return combine(*dims)
    return rule


def _register_size_rules():
    from ..tracing import dim_arith_rules
    dim_arith_rules[add_p] = _size_rule(lambda a, b: a + b)
    dim_arith_rules[sub_p] = _size_rule(lambda a, b: a - b)
    dim_arith_rules[mul_p] = _size_rule(lambda a, b: a * b)
    dim_arith_rules[neg_p] = _size_rule(lambda a: -a)
    dim_arith_rules[convert_element_type_p] = _size_rule(lambda a: a)


_register_size_rules()
