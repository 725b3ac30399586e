"""Elementwise primitives compiled through StableHLO vs their numpy reference rules (and numpy),
over dtypes and the edge values where C and numpy part ways."""
import numpy as np
import pytest

import sprue.lax as lax
from tests.helpers.lowering_harness import Compiled, assert_same, check

FLOATS = ["float64", "float32"]
SIGNED = ["int64", "int32", "int16", "int8"]
UNSIGNED = ["uint64", "uint32", "uint16", "uint8"]
INTS = SIGNED + UNSIGNED


def float_edges(dt) -> np.ndarray:
    x = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -3.5, 1e-30, -1e-8, 0.3, 0.999, -0.9999, 1.5, 3.0, 10.0,
         -20.5, 100.0, 1e10, -1e30, np.inf, -np.inf, np.nan]
    return np.array(x, dt)


def int_edges(dt) -> np.ndarray:
    info = np.iinfo(dt)
    vals = [0, 1, 2, 3, 7, info.max, info.max - 1, info.min, info.min + 1]
    if info.min < 0:
        vals += [-1, -2, -3, -7]
    return np.array(vals, dt)


# -- unary float functions ----------------------------------------------------------------------
UNARY_FLOAT = {
    "neg": (lax.neg, np.negative), "sign": (lax.sign, np.sign), "floor": (lax.floor, np.floor),
    "ceil": (lax.ceil, np.ceil), "is_finite": (lax.is_finite, np.isfinite), "exp": (lax.exp, np.exp),
    "exp2": (lax.exp2, np.exp2), "log": (lax.log, np.log), "log1p": (lax.log1p, np.log1p),
    "expm1": (lax.expm1, np.expm1), "tanh": (lax.tanh, np.tanh),
    "logistic": (lax.logistic, lambda x: 1 / (1 + np.exp(-x))), "sin": (lax.sin, np.sin),
    "cos": (lax.cos, np.cos), "tan": (lax.tan, np.tan), "asin": (lax.asin, np.arcsin),
    "acos": (lax.acos, np.arccos), "atan": (lax.atan, np.arctan), "sinh": (lax.sinh, np.sinh),
    "cosh": (lax.cosh, np.cosh), "asinh": (lax.asinh, np.arcsinh), "acosh": (lax.acosh, np.arccosh),
    "atanh": (lax.atanh, np.arctanh), "sqrt": (lax.sqrt, np.sqrt), "rsqrt": (lax.rsqrt, lambda x: 1 / np.sqrt(x)),
    "cbrt": (lax.cbrt, np.cbrt), "abs": (lax.abs, np.abs), "square": (lax.square, np.square),
}


def _float_inputs(dt) -> np.ndarray:
    rng = np.random.default_rng(0)
    extra = np.concatenate([rng.uniform(-3, 3, 40), rng.uniform(-1, 1, 20) * 10.0 ** rng.integers(-12, 3, 20),
                            [710.3, -710.3, 709.0, 88.5, -89.0, 1e-310, 2.0 ** 30, 1e200, 1.0 + 1e-9]])
    with np.errstate(over="ignore"):
        return np.concatenate([float_edges(dt), extra.astype(dt)])


@pytest.mark.parametrize("dt", FLOATS)
def test_unary_float_functions_match_reference_and_numpy(dt):
    x = _float_inputs(dt)
    names = list(UNARY_FLOAT)
    fn = lambda a: tuple(UNARY_FLOAT[n][0](a) for n in names)
    got = Compiled(fn, x)(x)
    tight = {"neg", "sign", "floor", "ceil", "is_finite", "sqrt", "abs", "square"}
    for name, g in zip(names, got):
        with np.errstate(all="ignore"):
            want_np = np.asarray(UNARY_FLOAT[name][1](x))
            want_ref = np.asarray(UNARY_FLOAT[name][0](x))
        rtol = 0.0 if name in tight else (4e-15 if dt == "float64" else 1e-6)
        # exact zeros and denormal-range results compare absolutely
        atol = 0.0 if name in tight else float(np.finfo(dt).tiny)
        assert_same(g, want_ref.astype(g.dtype), rtol, atol, what=f"{name} vs reference")
        assert_same(g, want_np.astype(g.dtype), rtol, atol, what=f"{name} vs numpy")


@pytest.mark.parametrize("dt", FLOATS)
def test_odd_functions_keep_the_sign_of_zero(dt):
    x = np.array([0.0, -0.0], dt)
    fns = [lax.sinh, lax.asinh, lax.atanh, lax.asin, lax.atan, lax.tanh, lax.sin, lax.neg]
    got = Compiled(lambda a: tuple(f(a) for f in fns), x)(x)
    for f, g in zip(fns, got):
        np.testing.assert_array_equal(np.signbit(g), np.signbit(f(x)), err_msg=f.__name__)


@pytest.mark.parametrize("dt", FLOATS)
def test_inverse_and_hyperbolic_functions_are_accurate_near_zero_and_far_out(dt):
    tiny = np.array([1e-300 if dt == "float64" else 1e-37, 1e-20, -1e-12, 1e-7, -3e-5, 0.01, -0.2], dt)
    big = np.array([1e5, -1e5, 3e7, 1e15, 1e30, -1e38], dt)
    cases = {lax.sinh: tiny, lax.asinh: np.concatenate([tiny, big]), lax.atanh: tiny, lax.asin: tiny,
             lax.atan: np.concatenate([tiny, big]), lax.tan: tiny, lax.expm1: tiny, lax.log1p: tiny,
             lax.acosh: np.array([1.0, 1 + 1e-6, 1.5, 2.0, 2.5, 1e4, 3e8, 1e30], dt),
             lax.acos: np.array([1.0, 1 - 1e-6, -1 + 1e-6, -1.0, 0.0, 1e-9], dt),
             lax.cosh: np.array([0.0, 1e-8, 0.5, 19.9, 20.1, 85.0], dt)}
    rtol = 4e-15 if dt == "float64" else 1e-6
    for f, x in cases.items():
        numpy_fn = {lax.sinh: np.sinh, lax.asinh: np.arcsinh, lax.atanh: np.arctanh, lax.asin: np.arcsin,
                    lax.atan: np.arctan, lax.tan: np.tan, lax.expm1: np.expm1, lax.log1p: np.log1p,
                    lax.acosh: np.arccosh, lax.acos: np.arccos, lax.cosh: np.cosh}[f]
        got = Compiled(f, x)(x)[0]
        assert_same(got, numpy_fn(x), rtol, what=f.__name__)


@pytest.mark.parametrize("dt", FLOATS)
def test_cbrt(dt):
    x = np.array([27.0, -8.0, 0.0, -0.0, 1e-300 if dt == "float64" else 1e-30, 2.0, np.inf, -np.inf, np.nan], dt)
    got = check(lax.cbrt, x)
    assert_same(got[0], np.cbrt(x), what="cbrt vs numpy")


def test_exp2_is_exact_at_integers():
    k = np.arange(-1074, 1024, dtype=np.float64)
    got = Compiled(lax.exp2, k)(k)[0]
    np.testing.assert_array_equal(got, np.ldexp(1.0, k.astype(np.int64)))


def test_logistic_saturates_without_nan():
    x = np.array([-1000.0, -40.0, -1e-20, 0.0, 1e-20, 40.0, 1000.0, np.inf, -np.inf])
    got = check(lax.logistic, x)
    assert not np.isnan(got[0]).any()


def test_sinh_and_cosh_do_not_overflow_before_the_result_does():
    x = np.array([709.0, 710.0, 710.4, -710.4, 711.0, 1000.0])
    got = Compiled(lambda a: (lax.sinh(a), lax.cosh(a)), x)(x)
    with np.errstate(over="ignore"):
        assert_same(got[0], np.sinh(x), 1e-14)
        assert_same(got[1], np.cosh(x), 1e-14)


@pytest.mark.parametrize("dt", FLOATS)
def test_round_both_methods(dt):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.4, -0.6, 3.0, -0.0, 1e20, np.inf, np.nan, 7.5001], dt)
    check(lambda a: (lax.round(a, lax.RoundingMethod.AWAY_FROM_ZERO),
                     lax.round(a, lax.RoundingMethod.TO_NEAREST_EVEN)), x)


def test_round_away_from_zero_is_exact_where_floor_of_x_plus_half_is_not():
    # The largest double below 0.5 and odd integers past 2**52 round to themselves.
    x = np.array([0.49999999999999994, -0.49999999999999994, 2.0 ** 52 + 1, -(2.0 ** 52 + 1)])
    got = Compiled(lambda a: lax.round(a, lax.RoundingMethod.AWAY_FROM_ZERO), x)(x)[0]
    t = np.trunc(x)
    np.testing.assert_array_equal(got, np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t))


# -- arithmetic ----------------------------------------------------------------------------------
def _pairs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.meshgrid(values, values, indexing="ij")
    return a.ravel(), b.ravel()


@pytest.mark.parametrize("dt", FLOATS)
def test_float_binary_ops(dt):
    x, y = _pairs(float_edges(dt))
    fn = lambda a, b: (lax.add(a, b), lax.sub(a, b), lax.mul(a, b), lax.div(a, b), lax.rem(a, b),
                       lax.pow(a, b), lax.max(a, b), lax.min(a, b), lax.atan2(a, b))
    rtol = 4.5e-16 if dt == "float64" else 2.4e-7  # 2 ulp (pow and atan2 come from libm)
    got = check(fn, x, y, rtol=rtol)
    with np.errstate(all="ignore"):  # and vs numpy itself
        for g, f in zip(got, [np.add, np.subtract, np.multiply, np.divide, np.fmod, np.power, np.maximum,
                              np.minimum, np.arctan2]):
            assert_same(g, f(x, y), rtol, what=f.__name__)


def c_div_rem(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """C's truncating division with lax's guards, in exact Python integers: x / 0 = 0, x % 0 = 0,
    and INT_MIN / -1 wraps to INT_MIN (remainder 0)."""
    dt = x.dtype
    q, r = [], []
    for a, b in zip(x.tolist(), y.tolist()):
        if b == 0:
            q.append(0), r.append(0)
            continue
        t = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        q.append(t), r.append(a - t * b)
    wrap = lambda v: np.array([int(i) % 2 ** (8 * dt.itemsize) for i in v], np.uint64).astype(dt)
    return wrap(q), wrap(r)


@pytest.mark.parametrize("dt", INTS)
def test_integer_arithmetic_never_traps_and_matches_reference(dt):
    x, y = _pairs(int_edges(dt))
    fn = lambda a, b: (lax.add(a, b), lax.sub(a, b), lax.mul(a, b), lax.rem(a, b), lax.max(a, b),
                       lax.min(a, b), lax.bitwise_and(a, b), lax.bitwise_or(a, b), lax.bitwise_xor(a, b))
    check(fn, x, y)
    # div against exact C semantics: the reference rule takes |INT_MIN| and gets x / INT_MIN wrong
    q, r = Compiled(lambda a, b: (lax.div(a, b), lax.rem(a, b)), x, y)(x, y)
    want_q, want_r = c_div_rem(x, y)
    np.testing.assert_array_equal(q, want_q)
    np.testing.assert_array_equal(r, want_r)


@pytest.mark.parametrize("dt", SIGNED)
def test_integer_division_truncates_toward_zero(dt):
    x = np.array([7, -7, 7, -7, 0, 5, np.iinfo(dt).min, np.iinfo(dt).min, 1], dt)
    y = np.array([2, 2, -2, -2, 3, 0, -1, 0, np.iinfo(dt).min], dt)
    q, r = Compiled(lambda a, b: (lax.div(a, b), lax.rem(a, b)), x, y)(x, y)
    safe = np.where(y == 0, 1, y).astype(np.int64)
    exact_q = np.trunc(x.astype(np.float64) / safe)
    expect_q = np.where(y == 0, 0, exact_q).astype(np.int64).astype(dt)  # INT_MIN / -1 wraps to INT_MIN
    np.testing.assert_array_equal(q, expect_q)
    np.testing.assert_array_equal(r, np.where(y == 0, 0, np.fmod(x.astype(np.int64), safe)).astype(dt))


@pytest.mark.parametrize("dt", INTS)
def test_integer_pow_and_pow_with_negative_exponents(dt):
    base = np.array([0, 1, 2, 3, 5, -1, -2, -3] if dt in SIGNED else [0, 1, 2, 3, 5, 7, 250, 255], dt)
    exps = np.array([0, 1, 2, 3, 7, -1, -2, -3] if dt in SIGNED else [0, 1, 2, 3, 7, 8, 13, 64], dt)
    x, y = _pairs(base)
    _, e = _pairs(exps)
    got = Compiled(lax.pow, x, e)(x, e)[0]
    mod = 2 ** (8 * np.dtype(dt).itemsize)
    exact = [pow(a, b, mod) if b >= 0 else (1 if a == 1 else (-1) ** (-b) if a == -1 else 0)
             for a, b in zip(x.tolist(), e.tolist())]
    np.testing.assert_array_equal(got, np.array([v % mod for v in exact], np.uint64).astype(dt))
    if dt != "uint64":  # the reference rule detours uint64 through float64 in its np.where
        check(lax.pow, x, e)
    ys = [0, 1, 2, 3, 4, 5, 7, 8, 13]
    check(lambda a: tuple(lax.integer_pow(a, k) for k in ys), x)


def test_integer_pow_negative_exponent_on_ints_is_zero_except_units():
    x = np.array([1, -1, 2, -2, 5], np.int64)
    got = Compiled(lambda a: (lax.integer_pow(a, -1), lax.integer_pow(a, -2)), x)(x)
    np.testing.assert_array_equal(got[0], [1, -1, 0, 0, 0])
    np.testing.assert_array_equal(got[1], [1, 1, 0, 0, 0])


@pytest.mark.parametrize("dt", FLOATS)
def test_integer_pow_on_floats(dt):
    x = np.array([0.0, -0.0, 1.5, -2.0, 0.1, 3.0, np.inf, -np.inf, np.nan, 1e-3], dt)
    ys = [-5, -2, -1, 0, 1, 2, 3, 6, 11]
    check(lambda a: tuple(lax.integer_pow(a, k) for k in ys), x, rtol=4e-15 if dt == "float64" else 2e-6)


def exact_shifts(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """lax's shifts in Python integers: amounts outside [0, bits) give 0, or the sign fill for an
    arithmetic right shift; >> on unsigned values is logical."""
    bits = 8 * x.dtype.itemsize
    mod = 2 ** bits
    left, logical, arith = [], [], []
    for a, b in zip(x.tolist(), y.tolist()):
        oob = not 0 <= b < bits
        left.append(0 if oob else (a << b) % mod)
        logical.append(0 if oob else (a % mod) >> b)
        arith.append((-1 if a < 0 else 0) if oob else a >> b)
    as_dt = lambda v: np.array([i % mod for i in v], np.uint64).astype(x.dtype)
    return as_dt(left), as_dt(logical), as_dt(arith)


@pytest.mark.parametrize("dt", INTS)
def test_shifts_by_any_amount(dt):
    bits = np.dtype(dt).itemsize * 8
    vals = int_edges(dt)
    amounts = np.array([0, 1, 3, bits - 1, bits, bits + 1] + ([-1, -bits] if dt in SIGNED else [2 * bits, 127]), dt)
    x, y = (a.ravel() for a in np.meshgrid(vals, amounts, indexing="ij"))
    fn = lambda a, b: (lax.shift_left(a, b), lax.shift_right_logical(a, b), lax.shift_right_arithmetic(a, b))
    got = Compiled(fn, x, y)(x, y)
    for g, want in zip(got, exact_shifts(x, y)):
        np.testing.assert_array_equal(g, want)
    if dt != "uint64":  # the reference rule detours uint64 through float64 in its np.where
        check(fn, x, y)


@pytest.mark.parametrize("dt", INTS + ["bool"])
def test_integer_and_bool_unary(dt):
    x = int_edges(dt) if dt != "bool" else np.array([True, False])
    fns = [lax.bitwise_not] + ([lax.neg, lax.abs, lax.sign, lax.square] if dt != "bool" else [])
    got = check(lambda a: tuple(f(a) for f in fns), x)
    np.testing.assert_array_equal(got[0], np.invert(x))


def test_bool_arithmetic_is_logic():
    x, y = _pairs(np.array([False, True]))
    fn = lambda a, b: (lax.add(a, b), lax.mul(a, b), lax.max(a, b), lax.min(a, b), lax.bitwise_and(a, b),
                       lax.bitwise_or(a, b), lax.bitwise_xor(a, b))
    got = check(fn, x, y)
    for g, want in zip(got, [x | y, x & y, x | y, x & y, x & y, x | y, x ^ y]):
        np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("dt", FLOATS + INTS + ["bool"])
def test_comparisons(dt):
    vals = float_edges(dt) if dt in FLOATS else int_edges(dt) if dt != "bool" else np.array([False, True])
    x, y = _pairs(vals)
    got = check(lambda a, b: (lax.eq(a, b), lax.ne(a, b), lax.lt(a, b), lax.le(a, b), lax.gt(a, b),
                              lax.ge(a, b)), x, y)
    for g, f in zip(got, [np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal]):
        np.testing.assert_array_equal(g, f(x, y))


def test_rank0_operand_beside_an_array():
    x = np.arange(6.0).reshape(2, 3)
    check(lambda a: (lax.add(a, 2.0), lax.sub(1.0, a), lax.lt(a, 2.5), lax.max(a, np.float64(np.nan)),
                     lax.pow(2.0, a)), x)
    i = np.arange(6).reshape(3, 2)
    check(lambda a: (lax.div(a, 0), lax.rem(7, a), lax.shift_left(a, 70), lax.select_n(True, a, lax.neg(a))), i)


def test_scalar_functions():
    check(lambda a, b: (lax.mul(a, b), lax.div(b, a), lax.sinh(a)), np.float64(0.25), np.float64(-3.0))


# -- select_n, clamp ----------------------------------------------------------------------------
def test_select_n_bool_and_int32():
    rng = np.random.default_rng(1)
    cases = [rng.normal(size=(3, 4)) for _ in range(4)]
    pred = rng.random((3, 4)) > 0.5
    which = rng.integers(-2, 6, (3, 4)).astype(np.int32)
    check(lambda p, w, a, b, c, d: (lax.select_n(p, a, b), lax.select_n(w, a, b, c, d), lax.select_n(w, a),
                                    lax.select_n(w, a, b), lax.select(p, c, d)), pred, which, *cases)


def test_select_n_with_scalar_predicate():
    a, b = np.arange(4.0), -np.arange(4.0)
    for p in (True, False):
        check(lambda q, x, y: lax.select_n(q, x, y), np.bool_(p), a, b)
    check(lambda q, x, y, z: lax.select_n(q, x, y, z), np.int32(7), a, b, a * 2)


@pytest.mark.parametrize("dt", ["float64", "int32", "uint8"])
def test_clamp(dt):
    x = np.array([0, 1, 5, 9, 200, 3], dt)
    check(lambda a: lax.clamp(np.array(2, dt), a, np.array(8, dt)), x)
    lo, hi = np.array([0, 2, 2, 2, 1, 4], dt), np.array([1, 2, 6, 10, 250, 3], dt)
    check(lax.clamp, lo, x, hi)
    if dt == "float64":
        check(lax.clamp, np.array([0.0, np.nan, 1.0]), np.array([np.nan, 1.0, 0.5]), np.array([1.0, 2.0, np.nan]))


# -- convert_element_type ------------------------------------------------------------------------
ALL = FLOATS + ["float16"] + INTS + ["bool"]


def _edge_values(dt) -> np.ndarray:
    if dt == "bool":
        return np.array([True, False])
    if dt in INTS:
        return int_edges(dt)
    big = [2.0 ** 63, -(2.0 ** 63), 2.0 ** 64, 2.0 ** 31, -(2.0 ** 31) - 1, 2.0 ** 32, 255.7, 256.0, -128.9,
           -129.0, 32767.5, 65535.9, 65536.0, -0.999, 0.999, 1e19, 4294967295.0, 9.2e18, -9.3e18, 3e38]
    with np.errstate(over="ignore"):
        return np.concatenate([float_edges(dt), np.array(big).astype(dt)])


def exact_float_to_int(x: np.ndarray, dt) -> np.ndarray:
    """Truncation saturating at the integer range, NaN -> 0, in exact Python arithmetic."""
    info = np.iinfo(dt)
    out = [0 if np.isnan(v) else info.max if v >= info.max else info.min if v <= info.min else int(v)
           for v in x.astype(np.float64).tolist()]
    return np.array(out, dtype=object).astype(dt)


@pytest.mark.parametrize("src", ALL)
def test_convert_element_type_from_every_dtype_to_every_dtype(src):
    x = _edge_values(src)
    got = Compiled(lambda a: tuple(lax.convert_element_type(a, d) for d in ALL), x)(x)
    for d, g in zip(ALL, got):
        what = f"{src} -> {d}"
        if np.dtype(src).kind == "f" and np.dtype(d).kind in "iu":
            np.testing.assert_array_equal(g, exact_float_to_int(x, d), err_msg=what)
            # The reference rule clips at INT_MAX as a float, which overflows its cast where the
            # float type rounds INT_MAX up (float32 -> int32, float64 -> int64, ...).
            with np.errstate(over="ignore"):
                top = np.dtype(src).type(np.iinfo(d).max)
                if np.isfinite(top) and int(top) == np.iinfo(d).max:
                    assert_same(g, lax.convert_element_type(x, d), what=what)
        elif d == "bool":
            np.testing.assert_array_equal(g, x != 0, err_msg=what)
        else:
            with np.errstate(all="ignore"):
                assert_same(g, x.astype(d), what=what)
                assert_same(g, lax.convert_element_type(x, d), what=what)


def test_float16_computes_like_the_reference():
    x = np.array([0.0, -0.0, 0.5, -1.5, 2.0, 10.0, 0.999, -0.3, np.inf, np.nan, 1e-4], np.float16)
    y = np.array([1.5, -2.0, 0.0, 3.0, np.nan, np.inf, -0.5, 7.0, 1.0, 2.0, -3.0], np.float16)
    names = list(UNARY_FLOAT)
    check(lambda a: tuple(UNARY_FLOAT[n][0](a) for n in names), x, rtol=4e-3, atol=1e-6)
    check(lambda a, b: (lax.add(a, b), lax.div(a, b), lax.pow(a, b), lax.rem(a, b), lax.max(a, b),
                        lax.convert_element_type(a, np.int8)), x, y, rtol=4e-3)
