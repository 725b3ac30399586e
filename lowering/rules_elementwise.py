"""Lowering of the elementwise primitives except the functions composed in rules_math.py:
arithmetic, integer division, powers, comparisons, bitwise logic and shifts, select_n, clamp,
convert_element_type.

Everything here must match the numpy reference rules in sprue/lax/elementwise.py, including
where C would trap or be undefined: integer division by zero and INT_MIN / -1, float -> int
conversion of NaN and out-of-range values, shifts by the bit width or more. Those lanes get
their value by `select`, and the risky op only ever sees safe operands.
"""
from __future__ import annotations

import numpy as np

from sprue import lax
from sprue.ir.core import Eqn
from sprue.lowering.rules_common import (
    LoweringContext,
    Value,
    broadcast_like,
    compare,
    constant_like,
    convert,
    dtype_of,
    ew,
    full_like,
    int_max,
    int_min,
    is_bool,
    is_complex,
    is_float,
    is_nan,
    is_unsigned,
    logical_and,
    logical_or,
    lowering_rules,
    op1,
    select,
    shape_of,
    with_dtype,
)


def _operands(*xs: Value) -> list[Value]:
    """Binary lax ops allow one rank-0 operand beside an array: broadcast it (to the array's
    run-time shape when it has `?` dims)."""
    ref = max(xs, key=lambda x: len(shape_of(x)))
    return [broadcast_like(x, ref) for x in xs]


def unary(name: str):
    def rule(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
        return [ew(name, x)]
    return rule


def binary(name: str, bool_name: str | None = None):
    """stablehlo.<name>, or stablehlo.<bool_name> on booleans: add and max are or, mul and min are
    and (as i1 arithmetic, add would be xor, and a signed max would rank true = -1 below false)."""
    def rule(ctx: LoweringContext, eqn: Eqn, x: Value, y: Value) -> list[Value]:
        x, y = _operands(x, y)
        return [ew(bool_name if bool_name and is_bool(x) else name, x, y)]
    return rule


def comparison(direction: str):
    def rule(ctx: LoweringContext, eqn: Eqn, x: Value, y: Value) -> list[Value]:
        return [compare(*_operands(x, y), direction)]
    return rule


# -- simple one-to-one ops ----------------------------------------------------------------------
for _p, _name in [(lax.neg_p, "negate"), (lax.floor_p, "floor"), (lax.ceil_p, "ceil"),
                  (lax.exp_p, "exponential"), (lax.tanh_p, "tanh"),   # log, logistic: rules_math
                  (lax.sin_p, "sine"), (lax.cos_p, "cosine"),
                  (lax.tan_p, "tan"), (lax.sqrt_p, "sqrt"), (lax.rsqrt_p, "rsqrt"),
                  (lax.not_p, "not")]:
    lowering_rules[_p] = unary(_name)

for _p, _name, _bool_name in [(lax.add_p, "add", "or"), (lax.sub_p, "subtract", None),
                              (lax.mul_p, "multiply", "and"), (lax.max_p, "maximum", "or"),
                              (lax.min_p, "minimum", "and"), (lax.atan2_p, "atan2", None),
                              (lax.and_p, "and", None), (lax.or_p, "or", None), (lax.xor_p, "xor", None)]:
    lowering_rules[_p] = binary(_name, _bool_name)

for _p, _dir in [(lax.eq_p, "EQ"), (lax.ne_p, "NE"), (lax.lt_p, "LT"), (lax.le_p, "LE"),
                 (lax.gt_p, "GT"), (lax.ge_p, "GE")]:
    lowering_rules[_p] = comparison(_dir)


def _abs(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    # stablehlo.abs rejects unsigned types; |x| = x there.
    return [x if is_unsigned(x) or is_bool(x) else ew("abs", x)]


def _sign(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    if is_bool(x):
        return [x]
    if is_unsigned(x):  # stablehlo.sign rejects unsigned types: 1 where x != 0
        return [convert(compare(x, constant_like(0, x), "NE"), dtype_of(x))]
    return [ew("sign", x)]


def _is_finite(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    return [op1("stablehlo.is_finite", [x], with_dtype(x, np.bool_))]


def _round(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    method = lax.RoundingMethod(eqn.params.get("rounding_method", lax.RoundingMethod.AWAY_FROM_ZERO))
    name = "round_nearest_even" if method == lax.RoundingMethod.TO_NEAREST_EVEN else "round_nearest_afz"
    return [ew(name, x)]


def _exp2(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    # pow(2, x) is exact at integers, unlike exp(x * ln 2), whose error grows with |x|.
    return [ew("power", constant_like(2.0, x), x)]


def _square(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    return [ew("multiply", x, x)]


lowering_rules.update({lax.abs_p: _abs, lax.sign_p: _sign, lax.is_finite_p: _is_finite,
                       lax.round_p: _round, lax.exp2_p: _exp2, lax.square_p: _square})


# -- integer division, remainder, powers --------------------------------------------------------
def _division_guard(x: Value, y: Value) -> tuple[Value, Value, Value]:
    """(y with the trapping lanes replaced by 1, y == 0, the lanes giving 0): C's division traps
    on y == 0 and on INT_MIN / -1, so those lanes divide by 1 and the caller selects their result."""
    zero = compare(y, constant_like(0, y), "EQ")
    bad = zero
    if not is_unsigned(x):
        bad = logical_or(zero, logical_and(compare(x, constant_like(int_min(dtype_of(x)), x), "EQ"),
                                           compare(y, constant_like(-1, y), "EQ")))
    return select(bad, constant_like(1, y), y), zero, bad


def _div(ctx: LoweringContext, eqn: Eqn, x: Value, y: Value) -> list[Value]:
    x, y = _operands(x, y)
    if is_float(x) or is_complex(x):
        return [ew("divide", x, y)]
    safe, zero, _ = _division_guard(x, y)
    q = ew("divide", x, safe)  # INT_MIN / 1 = INT_MIN: the wrapped quotient of INT_MIN / -1
    return [select(zero, constant_like(0, x), q)]


def _rem(ctx: LoweringContext, eqn: Eqn, x: Value, y: Value) -> list[Value]:
    x, y = _operands(x, y)
    if is_float(x):
        return [ew("remainder", x, y)]  # fmod: the sign of x
    safe, _, bad = _division_guard(x, y)
    return [select(bad, constant_like(0, x), ew("remainder", x, safe))]


def _int_pow_negative(x: Value, y: Value, result: Value) -> Value:
    """Integer x**y for y < 0 (as XLA): 1 for x == 1, +-1 for x == -1 by y's parity, else 0."""
    if is_unsigned(y):
        return result
    one, zero = constant_like(1, x), constant_like(0, x)
    neg = compare(y, constant_like(0, y), "LT")
    odd = compare(ew("and", y, constant_like(1, y)), constant_like(0, y), "NE")
    minus_one = select(odd, constant_like(-1, x), one)
    small = select(compare(x, one, "EQ"), one,
                   select(compare(x, constant_like(-1, x), "EQ"), minus_one, zero))
    return select(neg, small, result)


def _int_pow_by_bits(x: Value, y: Value) -> Value:
    """x**y for integers y >= 0, wrapping like numpy: square-and-multiply over every bit of y,
    unrolled. (stablehlo.power's legalization only looks at the low 6 bits of y, which is wrong
    for y >= 64 whenever x is odd, and even for x = 0 or 2 it gives 1.)"""
    bits = 8 * dtype_of(y).itemsize - (0 if is_unsigned(y) else 1)
    one_y = constant_like(1, y)
    result, base = constant_like(1, x), x
    for i in range(bits):
        bit = compare(ew("and", ew("shift_right_logical", y, constant_like(i, y)), one_y), one_y, "EQ")
        result = select(bit, ew("multiply", result, base), result)
        if i + 1 < bits:
            base = ew("multiply", base, base)
    return result


def _pow(ctx: LoweringContext, eqn: Eqn, x: Value, y: Value) -> list[Value]:
    x, y = _operands(x, y)
    if is_float(x) or is_complex(x):
        return [ew("power", x, y)]
    safe_y = y if is_unsigned(y) else ew("maximum", y, constant_like(0, y))
    return [_int_pow_negative(x, y, _int_pow_by_bits(x, safe_y))]


def _power_by_squaring(x: Value, n: int) -> Value:
    """x**n for n >= 1 with about 2*log2(n) multiplications."""
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else ew("multiply", result, base)
        n >>= 1
        if n:
            base = ew("multiply", base, base)
    return result


def _integer_pow(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    y = int(eqn.params["y"])
    if y == 0:
        return [constant_like(1, x)]
    p = _power_by_squaring(x, abs(y))
    if y > 0:
        return [p]
    if is_float(x) or is_complex(x):
        return [ew("divide", constant_like(1.0, x), p)]
    # integers: 1/x**|y| truncates to 0 except for x = +-1 (see _int_pow_negative)
    return [_int_pow_negative(x, full_like(y, x, np.int64), p)]


lowering_rules.update({lax.div_p: _div, lax.rem_p: _rem, lax.pow_p: _pow, lax.integer_pow_p: _integer_pow})


# -- shifts ------------------------------------------------------------------------------------
def _shift(name: str):
    """Shifts by a negative amount or by the bit width or more give 0 (arithmetic right shifts:
    the sign fill, 0 or -1) whatever the hardware does; the shift itself sees amount 0 there."""
    def rule(ctx: LoweringContext, eqn: Eqn, x: Value, y: Value) -> list[Value]:
        x, y = _operands(x, y)
        bits = 8 * dtype_of(x).itemsize
        oob = compare(y, constant_like(bits, y), "GE")
        if not is_unsigned(y):
            oob = logical_or(oob, compare(y, constant_like(0, y), "LT"))
        arithmetic = name == "shift_right_arithmetic" and not is_unsigned(x)
        # numpy's >> on unsigned values is logical
        op_name = "shift_right_logical" if name == "shift_right_arithmetic" and is_unsigned(x) else name
        shifted = ew(op_name, x, select(oob, constant_like(0, y), y))
        fill = constant_like(0, x)
        if arithmetic:  # the sign fills in
            fill = select(compare(x, fill, "LT"), constant_like(-1, x), fill)
        return [select(oob, fill, shifted)]
    return rule


for _p, _name in [(lax.shift_left_p, "shift_left"), (lax.shift_right_logical_p, "shift_right_logical"),
                  (lax.shift_right_arithmetic_p, "shift_right_arithmetic")]:
    lowering_rules[_p] = _shift(_name)


# -- select_n, clamp ----------------------------------------------------------------------------
def _select_n(ctx: LoweringContext, eqn: Eqn, which: Value, *cases: Value) -> list[Value]:
    which = broadcast_like(which, cases[0])
    if len(cases) == 1:
        return [cases[0]]
    if is_bool(which):
        return [select(which, cases[1], cases[0])]
    # int32 `which`, clipped to [0, n-1] like the reference: the last select that fires wins.
    out = cases[-1]
    for i in range(len(cases) - 2, -1, -1):
        out = select(compare(which, constant_like(i, which), "LE"), cases[i], out)
    return [out]


def _clamp(ctx: LoweringContext, eqn: Eqn, lo: Value, x: Value, hi: Value) -> list[Value]:
    # min(max(x, lo), hi), as the reference: NaN anywhere propagates.
    return [ew("minimum", ew("maximum", x, broadcast_like(lo, x)), broadcast_like(hi, x))]


lowering_rules.update({lax.select_n_p: _select_n, lax.clamp_p: _clamp})


# -- convert_element_type -----------------------------------------------------------------------
def _float_to_int(x: Value, dtype: np.dtype) -> Value:
    """Saturating, truncating float -> int with NaN -> 0 (fptosi of anything else is poison)."""
    bits = 8 * dtype.itemsize
    lo = -(2 ** (bits - 1)) if dtype.kind == "i" else 0
    hi = 2 ** (bits - 1) if dtype.kind == "i" else 2 ** bits  # first integer past the range
    # As floats, lo is exact (a power of two or 0) or -inf and hi is exact or +inf, so
    # x <= lo and x >= hi are exactly the lanes whose truncation saturates.
    too_low = compare(x, constant_like(lo, x), "LE")
    too_high = compare(x, constant_like(hi, x), "GE")
    nan = is_nan(x)
    safe = select(logical_or(too_low, too_high, nan), constant_like(0.0, x), x)
    out = convert(safe, dtype)
    out = select(too_low, constant_like(int_min(dtype), out), out)
    out = select(too_high, constant_like(int_max(dtype), out), out)
    return select(nan, constant_like(0, out), out)


def convert_element(x: Value, dtype) -> Value:
    dtype = np.dtype(dtype)
    src = dtype_of(x)
    if src == dtype:
        return x
    if dtype == np.bool_:  # nonzero is true; NaN too (unordered NE)
        return compare(x, constant_like(0, x), "NE")
    if src.kind == "f" and dtype.kind in "iu":
        return _float_to_int(x, dtype)
    return convert(x, dtype)  # bool -> 0/1; ints wrap, extend by their own signedness


def _convert_element_type(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    return [convert_element(x, eqn.params["new_dtype"])]


lowering_rules[lax.convert_element_type_p] = _convert_element_type
