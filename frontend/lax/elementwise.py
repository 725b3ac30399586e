"""Elementwise primitives: unary math, binary arithmetic, comparisons, logic, select_n, clamp,
convert_element_type. Binary operands have equal shapes, or one is rank 0 (as JAX's lax permits
for scalar literals); they always share a dtype (sprue.numpy inserts the conversions).

Each block is one primitive's (or one family's) whole story: shape rule and numpy reference, the
function that binds it, and its jvp, vjp, batching and cost rules (tables in sprue.interp.ad_util);
the lowering is in sprue.lowering.rules_elementwise and rules_math."""
from __future__ import annotations

import enum

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueTypeError, SprueValueError
from sprue.interp.ad_util import (
    Zero,
    aval_of,
    batch_rules,
    cost_rules,
    instantiate,
    is_zero,
    jvp_linear_in_first,
    jvp_rules,
    vjp_rules,
    zero_of,
)
from sprue.interp.batching import elementwise_batch_rule
from sprue.interp.cost import free, numel, per_output_element
from sprue.ir.core import ShapedArray
from sprue.ir.shapes import lower_bound, prove_equal
from sprue.lax._rules import define, require_equal, same_dtypes, shapes_equal, weak
from sprue.lax.structural import broadcast_in_dim, reduce_sum
from sprue.trace.tracing import Tracer, dim_arith_rules

# sprue.lax re-exports these (the package imports * from this module)
__all__ = [
    "RoundingMethod", "abs", "abs_p", "acos", "acos_p", "acosh", "acosh_p", "add", "add_p", "and_p",
    "asin", "asin_p", "asinh", "asinh_p", "atan", "atan2", "atan2_p", "atan_p", "atanh", "atanh_p",
    "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "cbrt", "cbrt_p", "ceil", "ceil_p",
    "clamp", "clamp_p", "convert_element_type", "convert_element_type_p", "cos", "cos_p", "cosh",
    "cosh_p", "div", "div_p", "eq", "eq_p", "exp", "exp2", "exp2_p", "exp_p", "expm1", "expm1_p",
    "floor", "floor_p", "ge", "ge_p", "gt", "gt_p", "integer_pow", "integer_pow_p", "is_finite",
    "is_finite_p", "le", "le_p", "log", "log1p", "log1p_p", "log_p", "logistic", "logistic_p", "lt",
    "lt_p", "max", "max_p", "min", "min_p", "mul", "mul_p", "ne", "ne_p", "neg", "neg_p", "not_p",
    "or_p", "pow", "pow_p", "rem", "rem_p", "round", "round_p", "rsqrt", "rsqrt_p", "select",
    "select_n", "select_n_p", "shift_left", "shift_left_p", "shift_right_arithmetic",
    "shift_right_arithmetic_p", "shift_right_logical", "shift_right_logical_p", "sign", "sign_p", "sin",
    "sin_p", "sinh", "sinh_p", "sqrt", "sqrt_p", "square", "square_p", "sub", "sub_p", "tan", "tan_p",
    "tanh", "tanh_p", "xor_p"
]

FLOAT = "floating-point"
INEXACT = "floating-point or complex"
NUM = "numeric"
REAL = "real (integer or floating-point)"     # ops with no meaning on complex numbers (ordering)
ORDERED = "ordered (not complex)"
INT = "integer"
LOGIC = "integer or boolean"
ANY = "any"


# == shape rules ====================================================================================
def _kind_ok(kind: str, dt: np.dtype) -> bool:
    return {FLOAT: dtypes.is_float(dt), INEXACT: dtypes.is_inexact(dt), NUM: not dtypes.is_bool(dt),
            REAL: not dtypes.is_bool(dt) and not dtypes.is_complex(dt), ORDERED: not dtypes.is_complex(dt),
            INT: dtypes.is_int(dt), LOGIC: dtypes.is_int(dt) or dtypes.is_bool(dt), ANY: True}[kind]


def _unary_rule(name: str, kind: str, out_dtype=None):
    def rule(x: ShapedArray, **params):
        if not _kind_ok(kind, x.dtype):
            raise SprueTypeError(f"{name} requires a {kind} operand, got {x.str_short()}")
        return x.update(dtype=out_dtype) if out_dtype is not None else x
    return rule


def _broadcast_shapes(name: str, *avals: ShapedArray) -> tuple:
    shaped = [a for a in avals if a.ndim]
    if not shaped:
        return ()
    first = shaped[0].shape
    for a in shaped[1:]:
        if a.shape == first:
            continue
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


def _errstate(f):
    def g(*args, **params):
        with np.errstate(all="ignore"):
            return f(*args)
    return g


# == transformation rules: helpers =================================================================
# Unary: d(x, y) is the derivative at x (y = the primal output, when it is cheaper to use);
# jvp is t * d and vjp is ct * d. Binary rules handle a rank-0 operand against an array (a
# rank-0 tangent is broadcast forward; an array cotangent is summed back into it).
def _c(x, v):
    """The constant v in x's dtype (a literal that fits x's operations)."""
    return np.array(v, aval_of(x).dtype)[()]


def _mul(a, b):
    return mul_p.bind(a, b)


def _bcast_to(t, out):
    """Tangent t (maybe of a rank-0 operand) at the shape of `out`."""
    ta, oa = aval_of(t), aval_of(out)
    return broadcast_in_dim(t, oa.shape, ()) if ta.ndim == 0 and oa.ndim else t


def _unbcast(ct, x):
    """Cotangent ct of an output, summed to the shape of operand x (rank 0 when x was)."""
    if aval_of(x).ndim == 0 and aval_of(ct).ndim:
        return reduce_sum(ct, tuple(range(aval_of(ct).ndim)))
    return ct


def _bcast_like(c, like):
    return broadcast_in_dim(c, aval_of(like).shape, ()) if aval_of(like).ndim else c


def out_shape(x, y):
    return aval_of(x).shape if aval_of(x).ndim else aval_of(y).shape


def _full(v, like, shape):
    c = _c(like, v)
    return broadcast_in_dim(c, shape, ()) if shape else c


def _b(pred, shape):
    return broadcast_in_dim(pred, shape, ()) if shape and aval_of(pred).ndim == 0 else pred


def _unary_ad(p, d):
    def jvp(primals, tangents, **params):
        (x,), (t,) = primals, tangents
        y = p.bind(x, **params)
        return y, _mul(t, d(x, y))

    def vjp(cts, primals, outs, **params):
        return [_mul(cts[0], d(primals[0], outs[0]))]
    jvp_rules[p], vjp_rules[p] = jvp, vjp


def _binary_ad(p, dx, dy):
    """jvp/vjp of a binary p from its partial derivatives dx(x, y, out), dy(x, y, out)."""
    def jvp(primals, tangents):
        x, y = primals
        out = p.bind(x, y)
        terms = [_bcast_to(_mul(t, d(x, y, out)), out) for t, d in zip(tangents, (dx, dy)) if not is_zero(t)]
        t_out = terms[0] if len(terms) == 1 else add_p.bind(*terms)
        return out, t_out

    def vjp(cts, primals, outs):
        (ct,), (x, y), (out,) = cts, primals, outs
        return [lambda: _unbcast(_mul(ct, dx(x, y, out)), x), lambda: _unbcast(_mul(ct, dy(x, y, out)), y)]
    jvp_rules[p], vjp_rules[p] = jvp, vjp


def _zero_derivative(p):
    """Piecewise-constant or non-float results: no tangent, no cotangent."""
    def jvp(primals, tangents, **params):
        out = p.bind(*primals, **params)
        return out, ([zero_of(o) for o in out] if p.multiple_results else zero_of(out))
    jvp_rules[p] = jvp
    vjp_rules[p] = lambda cts, primals, outs, **params: [None] * len(primals)
    return p


def _comparison_cost(in_avals, out_avals, **params):
    return numel(out_avals[0]) if dtypes.is_inexact(in_avals[0].dtype) else 0


# == definitions ===================================================================================
def _unary(name: str, kind: str, impl, derivative=None, out_dtype=None, cost=per_output_element):
    """The unary primitive `name` on operands of `kind`, its jvp/vjp from derivative(x, y) (when it
    has one), batching and cost."""
    p = define(name, _unary_rule(name, kind, out_dtype), impl)
    if derivative is not None:
        _unary_ad(p, derivative)
    batch_rules[p], cost_rules[p] = elementwise_batch_rule(p), cost
    return p


def _binary(name: str, kind: str, impl, out_dtype=None, cost=per_output_element):
    p = define(name, _binary_rule(name, kind, out_dtype), impl)
    batch_rules[p], cost_rules[p] = elementwise_batch_rule(p), cost
    return p


def _unary_function(p):
    def f(x):
        return p.bind(x)
    f.__name__ = p.name
    return f


def _binary_function(p):
    def f(x, y):
        return p.bind(x, y)
    f.__name__ = p.name
    return f


# -- symbolic sizes: integer scalar arithmetic on sizes keeps its symbolic value ----------------
# (`jnp.ones(n + 1)` then has the type f64[n+1], provably equal to other n+1 sizes.) Registered
# for add, sub, mul, neg, div, rem and convert_element_type in sprue.trace.tracing.dim_arith_rules.
def _size_operand(x):
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


# -- neg: linear ---------------------------------------------------------------------------------
neg_p = _unary("neg", NUM, lambda x: np.negative(x))
neg = _unary_function(neg_p)
jvp_rules[neg_p] = jvp_linear_in_first(neg_p)
vjp_rules[neg_p] = lambda cts, primals, outs: [neg_p.bind(cts[0])]
dim_arith_rules[neg_p] = _size_rule(lambda a: -a)


# -- sign, floor, ceil, round, is_finite, not: piecewise constant or not float: no derivative -----
def _sign_impl(x):
    if dtypes.is_bool(x.dtype):
        return x
    return np.sign(x)


class RoundingMethod(enum.IntEnum):
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def _round_impl(x, rounding_method=1):
    if rounding_method == RoundingMethod.TO_NEAREST_EVEN:
        return np.round(x)
    # half away from zero, exactly: the fraction x - trunc(x) is exact in floating point
    t = np.trunc(x)
    with np.errstate(invalid="ignore"):
        return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t).astype(x.dtype)


sign_p = _zero_derivative(_unary("sign", NUM, _sign_impl, cost=free))
floor_p = _zero_derivative(_unary("floor", FLOAT, np.floor))
ceil_p = _zero_derivative(_unary("ceil", FLOAT, np.ceil))
round_p = _zero_derivative(_unary("round", FLOAT, _round_impl))
is_finite_p = _zero_derivative(_unary("is_finite", FLOAT, np.isfinite, out_dtype=dtypes.bool_, cost=_comparison_cost))
not_p = _zero_derivative(_unary("not", LOGIC, np.invert, cost=free))
sign = _unary_function(sign_p); floor = _unary_function(floor_p); ceil = _unary_function(ceil_p)
is_finite = _unary_function(is_finite_p); bitwise_not = _unary_function(not_p)


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):
    return round_p.bind(x, rounding_method=RoundingMethod(rounding_method))


# -- unary math functions: name, operand kind, numpy reference, derivative(x, y) -----------------------
def _logistic(x):
    with np.errstate(all="ignore"):
        return 1 / (1 + np.exp(-x))


exp_p = _unary("exp", INEXACT, _errstate(np.exp), lambda x, y: y)
exp2_p = _unary("exp2", FLOAT, _errstate(np.exp2), lambda x, y: _mul(y, _c(x, np.log(2.0))))
log_p = _unary("log", INEXACT, _errstate(np.log), lambda x, y: div_p.bind(_c(x, 1), x))
log1p_p = _unary("log1p", INEXACT, _errstate(np.log1p), lambda x, y: div_p.bind(_c(x, 1), add_p.bind(x, _c(x, 1))))
expm1_p = _unary("expm1", INEXACT, _errstate(np.expm1), lambda x, y: add_p.bind(y, _c(x, 1)))
tanh_p = _unary("tanh", INEXACT, np.tanh, lambda x, y: sub_p.bind(_c(x, 1), _mul(y, y)))
logistic_p = _unary("logistic", FLOAT, _logistic, lambda x, y: _mul(y, sub_p.bind(_c(x, 1), y)))
sin_p = _unary("sin", INEXACT, _errstate(np.sin), lambda x, y: cos_p.bind(x))
cos_p = _unary("cos", INEXACT, _errstate(np.cos), lambda x, y: neg_p.bind(sin_p.bind(x)))
tan_p = _unary("tan", INEXACT, _errstate(np.tan), lambda x, y: add_p.bind(_c(x, 1), _mul(y, y)))
asin_p = _unary("asin", INEXACT, _errstate(np.arcsin), lambda x, y: rsqrt_p.bind(sub_p.bind(_c(x, 1), _mul(x, x))))
acos_p = _unary("acos", INEXACT, _errstate(np.arccos),
                lambda x, y: neg_p.bind(rsqrt_p.bind(sub_p.bind(_c(x, 1), _mul(x, x)))))
atan_p = _unary("atan", INEXACT, np.arctan, lambda x, y: div_p.bind(_c(x, 1), add_p.bind(_c(x, 1), _mul(x, x))))
sinh_p = _unary("sinh", INEXACT, _errstate(np.sinh), lambda x, y: cosh_p.bind(x))
cosh_p = _unary("cosh", INEXACT, _errstate(np.cosh), lambda x, y: sinh_p.bind(x))
asinh_p = _unary("asinh", INEXACT, np.arcsinh, lambda x, y: rsqrt_p.bind(add_p.bind(_mul(x, x), _c(x, 1))))
acosh_p = _unary("acosh", INEXACT, _errstate(np.arccosh),
                 lambda x, y: rsqrt_p.bind(_mul(sub_p.bind(x, _c(x, 1)), add_p.bind(x, _c(x, 1)))))
atanh_p = _unary("atanh", INEXACT, _errstate(np.arctanh),
                 lambda x, y: div_p.bind(_c(x, 1), sub_p.bind(_c(x, 1), _mul(x, x))))
sqrt_p = _unary("sqrt", INEXACT, _errstate(np.sqrt), lambda x, y: div_p.bind(_c(x, 0.5), y))
rsqrt_p = _unary("rsqrt", INEXACT, _errstate(lambda x: 1 / np.sqrt(x)), lambda x, y: _mul(_c(x, -0.5), div_p.bind(y, x)))
cbrt_p = _unary("cbrt", FLOAT, np.cbrt, lambda x, y: div_p.bind(_c(x, 1 / 3), _mul(y, y)))
abs_p = _unary("abs", NUM, np.abs, lambda x, y: sign_p.bind(x))
square_p = _unary("square", NUM, _errstate(np.square), lambda x, y: _mul(_c(x, 2), x))

exp = _unary_function(exp_p); exp2 = _unary_function(exp2_p); log = _unary_function(log_p)
log1p = _unary_function(log1p_p); expm1 = _unary_function(expm1_p); tanh = _unary_function(tanh_p)
logistic = _unary_function(logistic_p); sin = _unary_function(sin_p); cos = _unary_function(cos_p)
tan = _unary_function(tan_p); asin = _unary_function(asin_p); acos = _unary_function(acos_p)
atan = _unary_function(atan_p); sinh = _unary_function(sinh_p); cosh = _unary_function(cosh_p)
asinh = _unary_function(asinh_p); acosh = _unary_function(acosh_p); atanh = _unary_function(atanh_p)
sqrt = _unary_function(sqrt_p); rsqrt = _unary_function(rsqrt_p); cbrt = _unary_function(cbrt_p)
abs = _unary_function(abs_p); square = _unary_function(square_p)


# -- integer_pow: x ** y for a static integer y ------------------------------------------------------
def _integer_pow_impl(x, *, y):
    if y >= 0:
        return _errstate(np.power)(x, x.dtype.type(y))
    if dtypes.is_inexact(x.dtype):
        return _errstate(np.power)(x, x.dtype.type(y))
    return _pow_impl(x, np.full_like(x, y))   # ints: 0 except for bases 1 and -1, as XLA does


integer_pow_p = define("integer_pow", _unary_rule("integer_pow", NUM), _integer_pow_impl)


def integer_pow(x, y: int):
    return integer_pow_p.bind(x, y=int(y))


def _integer_pow_derivative(x, n: int):
    if n == 0:
        return _c(x, 0)
    return _c(x, n) if n == 1 else _mul(_c(x, n), integer_pow_p.bind(x, y=n - 1))


def _integer_pow_jvp(primals, tangents, *, y):
    out = integer_pow_p.bind(primals[0], y=y)
    return out, _mul(tangents[0], _integer_pow_derivative(primals[0], y))


jvp_rules[integer_pow_p] = _integer_pow_jvp
vjp_rules[integer_pow_p] = lambda cts, primals, outs, *, y: [_mul(cts[0], _integer_pow_derivative(primals[0], y))]
batch_rules[integer_pow_p], cost_rules[integer_pow_p] = elementwise_batch_rule(integer_pow_p), per_output_element


# -- add, sub -------------------------------------------------------------------------------------
add_p = _binary("add", ANY, lambda a, b: np.logical_or(a, b) if a.dtype == bool else _errstate(np.add)(a, b))
sub_p = _binary("sub", NUM, _errstate(np.subtract))
add = _binary_function(add_p); sub = _binary_function(sub_p)
dim_arith_rules[add_p] = _size_rule(lambda a, b: a + b)
dim_arith_rules[sub_p] = _size_rule(lambda a, b: a - b)


def _add_jvp(primals, tangents):
    out = add_p.bind(*primals)
    ts = [_bcast_to(t, out) for t in tangents if not is_zero(t)]
    return out, (ts[0] if len(ts) == 1 else add_p.bind(*ts))


def _sub_jvp(primals, tangents):
    out = sub_p.bind(*primals)
    tx, ty = tangents
    if is_zero(ty):
        return out, _bcast_to(tx, out)
    if is_zero(tx):
        return out, _bcast_to(neg_p.bind(ty), out)
    return out, sub_p.bind(_bcast_to(tx, out), _bcast_to(ty, out))


jvp_rules[add_p] = _add_jvp
vjp_rules[add_p] = lambda cts, primals, outs: [lambda: _unbcast(cts[0], primals[0]),
                                               lambda: _unbcast(cts[0], primals[1])]
jvp_rules[sub_p] = _sub_jvp
vjp_rules[sub_p] = lambda cts, primals, outs: [lambda: _unbcast(cts[0], primals[0]),
                                               lambda: _unbcast(neg_p.bind(cts[0]), primals[1])]


# -- mul, div, rem: lax's semantics (C-style integer division, no Python floor) -------------------
def _int_guarded(a, b):
    """Divisor with zeros (and INT_MIN / -1) replaced by 1; these lanes give 0 (numpy's value)."""
    bad = b == 0
    if dtypes.is_signed(a.dtype):
        bad = bad | ((b == -1) & (a == np.iinfo(a.dtype).min))
    return np.where(bad, np.ones_like(b), b), bad


def _div_impl(a, b):
    if dtypes.is_inexact(a.dtype):
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


mul_p = _binary("mul", ANY, lambda a, b: np.logical_and(a, b) if a.dtype == bool else _errstate(np.multiply)(a, b))
div_p = _binary("div", NUM, _div_impl)
rem_p = _binary("rem", REAL, _rem_impl)
mul = _binary_function(mul_p); div = _binary_function(div_p); rem = _binary_function(rem_p)
dim_arith_rules[mul_p] = _size_rule(lambda a, b: a * b)
_binary_ad(mul_p, lambda x, y, o: y, lambda x, y, o: x)
_binary_ad(div_p, lambda x, y, o: div_p.bind(_c(x, 1), y), lambda x, y, o: neg_p.bind(div_p.bind(o, y)))
_binary_ad(rem_p, lambda x, y, o: _c(x, 1),
           lambda x, y, o: neg_p.bind(_mul(sign_p.bind(div_p.bind(x, y)), floor_p.bind(abs_p.bind(div_p.bind(x, y))))))


def _floor_rule(combine):
    """div and rem of a size by a positive constant (how the tracer stages `n//2`, tracing.dim_value):
    C's truncation is floor division when the size cannot be negative."""
    return _size_rule(lambda a, b: combine(a, b) if isinstance(b, int) and b > 0 and lower_bound(a) >= 0
                      else None)


dim_arith_rules[div_p] = _floor_rule(lambda a, b: a // b)
dim_arith_rules[rem_p] = _floor_rule(lambda a, b: a % b)


# -- pow, atan2 ------------------------------------------------------------------------------------
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


def _pow_dx(x, y, out):
    # y * x**(y-1), and 0 where y == 0 (x**0 is constant even at x == 0)
    safe = pow_p.bind(x, sub_p.bind(y, _c(y, 1)))
    return select_n_p.bind(eq_p.bind(y, _c(y, 0)), _mul(y, safe), _bcast_like(_c(x, 0), safe))


def _pow_dy(x, y, out):
    # log(x) * x**y, and 0 where x == 0 (as JAX: the limit for y > 0)
    lg = log_p.bind(select_n_p.bind(eq_p.bind(x, _c(x, 0)), x, _bcast_like(_c(x, 1), x)))
    return _mul(lg, out)


def _atan2_denominator(x, y):
    return add_p.bind(_mul(x, x), _mul(y, y))


pow_p = _binary("pow", NUM, _pow_impl)
atan2_p = _binary("atan2", FLOAT, np.arctan2)
pow = _binary_function(pow_p); atan2 = _binary_function(atan2_p)
_binary_ad(pow_p, _pow_dx, _pow_dy)
_binary_ad(atan2_p, lambda x, y, o: div_p.bind(y, _atan2_denominator(x, y)),
           lambda x, y, o: neg_p.bind(div_p.bind(x, _atan2_denominator(x, y))))


# -- max, min --------------------------------------------------------------------------------------
def _minmax_weights(picks_x):
    """max/min: the derivative goes to the operand picked; ties split it evenly (as JAX)."""
    def weight(x, y, mine: bool):
        a, b = (x, y) if mine else (y, x)
        shape_of = out_shape(x, y)
        win = picks_x(a, b)
        tie = eq_p.bind(a, b)
        one, half, zero = (_full(v, x, shape_of) for v in (1.0, 0.5, 0.0))
        return select_n_p.bind(_b(win, shape_of), select_n_p.bind(_b(tie, shape_of), zero, half), one)
    return (lambda x, y, o: weight(x, y, True)), (lambda x, y, o: weight(x, y, False))


max_p = _binary("max", ORDERED, np.maximum)
min_p = _binary("min", ORDERED, np.minimum)
max = _binary_function(max_p); min = _binary_function(min_p)
_binary_ad(max_p, *_minmax_weights(lambda a, b: gt_p.bind(a, b)))
_binary_ad(min_p, *_minmax_weights(lambda a, b: lt_p.bind(a, b)))


# -- bitwise logic and shifts: integer results, no derivative ---------------------------------------
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


and_p = _zero_derivative(_binary("and", LOGIC, np.bitwise_and))
or_p = _zero_derivative(_binary("or", LOGIC, np.bitwise_or))
xor_p = _zero_derivative(_binary("xor", LOGIC, np.bitwise_xor))
shift_left_p = _zero_derivative(_binary("shift_left", INT, _shift_impl("left")))
shift_right_arithmetic_p = _zero_derivative(_binary("shift_right_arithmetic", INT, _shift_impl("arith")))
shift_right_logical_p = _zero_derivative(_binary("shift_right_logical", INT, _shift_impl("logical")))
bitwise_and = _binary_function(and_p); bitwise_or = _binary_function(or_p)
bitwise_xor = _binary_function(xor_p); shift_left = _binary_function(shift_left_p)
shift_right_arithmetic = _binary_function(shift_right_arithmetic_p)
shift_right_logical = _binary_function(shift_right_logical_p)


# -- comparisons: bool results, no derivative; a float comparison costs one operation --------------
eq_p = _zero_derivative(_binary("eq", ANY, np.equal, out_dtype=dtypes.bool_, cost=_comparison_cost))
ne_p = _zero_derivative(_binary("ne", ANY, np.not_equal, out_dtype=dtypes.bool_, cost=_comparison_cost))
lt_p = _zero_derivative(_binary("lt", ORDERED, np.less, out_dtype=dtypes.bool_, cost=_comparison_cost))
le_p = _zero_derivative(_binary("le", ORDERED, np.less_equal, out_dtype=dtypes.bool_, cost=_comparison_cost))
gt_p = _zero_derivative(_binary("gt", ORDERED, np.greater, out_dtype=dtypes.bool_, cost=_comparison_cost))
ge_p = _zero_derivative(_binary("ge", ORDERED, np.greater_equal, out_dtype=dtypes.bool_, cost=_comparison_cost))
eq = _binary_function(eq_p); ne = _binary_function(ne_p); lt = _binary_function(lt_p); le = _binary_function(le_p)
gt = _binary_function(gt_p); ge = _binary_function(ge_p)


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


def select_n(which, *cases):
    return select_n_p.bind(which, *cases)


def select(pred, on_true, on_false):
    """pred ? on_true : on_false (JAX's lax.select)."""
    return select_n_p.bind(pred, on_false, on_true)


def _select_n_jvp(primals, tangents):
    which, *cases = primals
    out = select_n_p.bind(which, *cases)
    if all(is_zero(t) for t in tangents[1:]):
        return out, zero_of(out)
    return out, select_n_p.bind(which, *(instantiate(t, c) for t, c in zip(tangents[1:], cases)))


def _select_n_vjp(cts, primals, outs):
    (ct,), (which, *cases) = cts, primals
    zero = instantiate(Zero(aval_of(ct)))

    def case_ct(k):
        return select_n_p.bind(which, *(ct if j == k else zero for j in range(len(cases))))
    return [None, *(lambda k=k: case_ct(k) for k in range(len(cases)))]


jvp_rules[select_n_p], vjp_rules[select_n_p] = _select_n_jvp, _select_n_vjp
batch_rules[select_n_p] = elementwise_batch_rule(select_n_p, lambda i: i == 0)   # cases share one shape
cost_rules[select_n_p] = free


# -- clamp(lo, x, hi) ------------------------------------------------------------------------------
def _clamp_rule(lo: ShapedArray, x: ShapedArray, hi: ShapedArray):
    same_dtypes("clamp", lo, x, hi)
    if dtypes.is_complex(x.dtype):
        raise SprueTypeError(f"clamp requires ordered (not complex) operands, got {x.str_short()}")
    for b in (lo, hi):
        if b.ndim and not shapes_equal(b.shape, x.shape):
            _require_same_shape("clamp bounds", b, x)
            raise SprueValueError(f"clamp bounds must be rank 0 or match the operand {x.str_short()}, got {b.str_short()}")
    return x


clamp_p = define("clamp", _clamp_rule, lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi))


def clamp(lo, x, hi):
    return clamp_p.bind(lo, x, hi)


def _clamp_jvp(primals, tangents):
    lo, x, hi = primals
    out = clamp_p.bind(lo, x, hi)
    below, above = lt_p.bind(x, lo), gt_p.bind(x, hi)
    shape = aval_of(out).shape
    t_lo, t_x, t_hi = (_bcast_to(instantiate(t, p), out) for t, p in zip(tangents, primals))
    t = select_n_p.bind(_b(below, shape), select_n_p.bind(_b(above, shape), t_x, t_hi), t_lo)
    return out, t


def _clamp_vjp(cts, primals, outs):
    (ct,), (lo, x, hi) = cts, primals
    shape = aval_of(ct).shape
    zero = instantiate(Zero(aval_of(ct)))
    below, above = _b(lt_p.bind(x, lo), shape), _b(gt_p.bind(x, hi), shape)
    return [lambda: _unbcast(select_n_p.bind(below, zero, ct), lo),
            lambda: select_n_p.bind(below, select_n_p.bind(above, ct, zero), zero),
            lambda: _unbcast(select_n_p.bind(above, zero, ct), hi)]


def _clamp_cost(in_avals, out_avals, **params):
    return 2 * per_output_element(in_avals, out_avals)


jvp_rules[clamp_p], vjp_rules[clamp_p] = _clamp_jvp, _clamp_vjp
batch_rules[clamp_p] = elementwise_batch_rule(clamp_p, lambda i: i != 1)         # the operand sets it
cost_rules[clamp_p] = _clamp_cost


# -- convert_element_type --------------------------------------------------------------------------
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
    if dtypes.is_complex(x.dtype) and not dtypes.is_complex(new_dtype):
        return _convert_impl(np.real(x), new_dtype=new_dtype)   # the real part, as JAX (and numpy)
    return x.astype(new_dtype)


convert_element_type_p = define("convert_element_type", _convert_rule, _convert_impl)


def convert_element_type(x, new_dtype):
    return convert_element_type_p.bind(x, new_dtype=dtypes.canonicalize(new_dtype), weak_type=False, sharding=None)


def _convert_jvp(primals, tangents, *, new_dtype, weak_type=False, sharding=None):
    out = convert_element_type_p.bind(*primals, new_dtype=new_dtype, weak_type=weak_type, sharding=sharding)
    if not dtypes.is_inexact(aval_of(out).dtype) or is_zero(tangents[0]):
        return out, zero_of(out)
    return out, convert_element_type_p.bind(tangents[0], new_dtype=new_dtype, weak_type=weak_type, sharding=sharding)


def _convert_vjp(cts, primals, outs, *, new_dtype, weak_type=False, sharding=None):
    x = primals[0]
    if not dtypes.is_inexact(aval_of(outs[0]).dtype):
        return [None]
    return [convert_element_type_p.bind(cts[0], new_dtype=aval_of(x).dtype, weak_type=False, sharding=None)]


jvp_rules[convert_element_type_p], vjp_rules[convert_element_type_p] = _convert_jvp, _convert_vjp
batch_rules[convert_element_type_p] = elementwise_batch_rule(convert_element_type_p)
cost_rules[convert_element_type_p] = free
dim_arith_rules[convert_element_type_p] = _size_rule(lambda a: a)
