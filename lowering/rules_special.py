"""Lowering of the special functions and bit operations of sprue.lax.special.

erf and erfc are the C library's (a tensor.generate whose element is a `math` op: StableHLO has no
erf, and MLIR's math-to-libm conversion makes the call). erf_inv, lgamma and digamma are composed
from StableHLO arithmetic, in float64 whatever the operand's float type (then rounded once):

- erf_inv: Giles' double-precision polynomials ("Approximating the erfinv function", 2011), as
  XLA's ErfInv64, of w = -log((1 - |x|)(1 + |x|)): within ~6e-16 over all of (-1, 1);
- lgamma and digamma: Lanczos' approximation with g = 7 and 9 terms (as XLA's chlo decompositions,
  within ~1e-15 relative of Gamma for x >= 1/2) and the reflection formulas below 1/2.

clz and population_count are stablehlo.count_leading_zeros and popcnt; bitcast_convert_type is
stablehlo.bitcast_convert; nextafter steps the integer that holds x's bits by one (as XLA does).
"""
from __future__ import annotations

import math

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import arith, tensor
from torch_mlir.dialects import math as math_dialect

from sprue import lax
from sprue.ir.core import Eqn
from sprue.lax.special import ERF_INV_F64_GE_16, ERF_INV_F64_LT_6_25, ERF_INV_F64_LT_16, LANCZOS, LANCZOS_G
from sprue.lax.special_gamma import I0E_A, I0E_B, I1E_A, I1E_B, gamma_lowered, random_gamma_grad_lowered
from sprue.lowering.emit import emit_jaxpr, numpy_consts
from sprue.lowering.rules_common import (
    LoweringContext,
    Value,
    aval_type,
    broadcast_like,
    compare,
    const_array,
    constant_like,
    convert,
    dtype_of,
    ew,
    logical_and,
    logical_or,
    lowering_rules,
    op1,
    select,
)
from sprue.trace.tracing import trace_flat


def _c(value: float, x: Value) -> Value:
    return constant_like(value, x)


def _each(x: Value, scalar) -> Value:
    """tensor.generate of x's type applying `scalar` (an ir.Value -> ir.Value builder) to each element."""
    t = ir.RankedTensorType(x.type)
    index = ir.IndexType.get()
    sizes = [tensor.DimOp(x, arith.ConstantOp(index, d).result).result for d in range(t.rank) if t.is_dynamic_dim(d)]
    gen = tensor.GenerateOp(t, sizes)
    block = gen.regions[0].blocks.append(*([index] * t.rank))
    with ir.InsertionPoint(block):
        tensor.YieldOp(scalar(tensor.ExtractOp(x, list(block.arguments)).result))
    return gen.result


def _libm(op_class):
    def rule(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
        return [_each(x, lambda v: op_class(v).result)]
    return rule


def _in_float64(compute):
    """A rule computing `compute(x)` in float64 and rounding the result to x's type."""
    def rule(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
        return [convert(compute(convert(x, np.float64)), dtype_of(x))]
    return rule


def _horner(coeffs, t: Value) -> Value:
    p = _c(coeffs[0], t)
    for c in coeffs[1:]:
        p = ew("add", ew("multiply", p, t), _c(c, t))
    return p


def _erf_inv(x: Value) -> Value:
    """Giles' double-precision polynomials on a = |x| (lax/special.py: w from (1 - a)(1 + a)), the
    three ranges' coefficients selected per term (as XLA's ErfInv64), x's sign put back last."""
    one = _c(1.0, x)
    a = ew("abs", x)
    w = ew("negate", ew("log", ew("multiply", ew("subtract", one, a), ew("add", one, a))))
    small, mid = compare(w, _c(6.25, x), "LT"), compare(w, _c(16.0, x), "LT")
    root = ew("sqrt", w)
    t = select(small, ew("subtract", w, _c(3.125, x)),
               select(mid, ew("subtract", root, _c(3.25, x)), ew("subtract", root, _c(5.0, x))))
    n = len(ERF_INV_F64_LT_6_25)
    ranges = [(0.0,) * (n - len(cs)) + tuple(cs) for cs in (ERF_INV_F64_LT_6_25, ERF_INV_F64_LT_16, ERF_INV_F64_GE_16)]
    p = _c(0.0, x)
    for lo, middle, hi in zip(*ranges):
        p = ew("add", ew("multiply", p, t), select(small, _c(lo, x), select(mid, _c(middle, x), _c(hi, x))))
    y = ew("multiply", p, a)
    y = select(compare(x, _c(0.0, x), "LT"), ew("negate", y), y)
    inf = select(compare(x, _c(0.0, x), "LT"), _c(-np.inf, x), _c(np.inf, x))
    y = select(compare(a, one, "EQ"), inf, y)
    return select(compare(a, one, "GT"), _c(np.nan, x), y)


def _lanczos(z: Value) -> tuple[Value, Value, Value]:
    """(sum c_i/(z+i) with c_0, -sum c_i/(z+i)^2, t = z + g + 1/2) of Lanczos' series at z = x - 1."""
    den, num = _c(LANCZOS[0], z), _c(0.0, z)
    for i, c in enumerate(LANCZOS[1:], 1):
        zi = ew("add", z, _c(float(i), z))
        q = ew("divide", _c(c, z), zi)
        den = ew("add", den, q)
        num = ew("subtract", num, ew("divide", q, zi))
    return den, num, ew("add", z, _c(LANCZOS_G + 0.5, z))


def _reflect(x: Value) -> tuple[Value, Value]:
    """(whether x < 1/2, the point the series is summed at: x or 1 - x)."""
    below = compare(x, _c(0.5, x), "LT")
    return below, select(below, ew("subtract", _c(1.0, x), x), x)


def _is_pole(x: Value) -> Value:
    return logical_and(compare(x, _c(0.0, x), "LE"), compare(ew("floor", x), x, "EQ"))


def _lgamma(x: Value) -> Value:
    below, r = _reflect(x)
    z = ew("subtract", r, _c(1.0, x))
    den, _, t = _lanczos(z)
    # log t = log(g + 1/2) + log1p(z / (g + 1/2)): exact near z = 0
    log_t = ew("add", _c(math.log(LANCZOS_G + 0.5), x),
               ew("log_plus_one", ew("divide", z, _c(LANCZOS_G + 0.5, x))))
    series = ew("add", ew("add", _c(0.5 * math.log(2 * math.pi), x),
                          ew("multiply", ew("add", z, _c(0.5, x)), log_t)),
                ew("subtract", ew("log", den), t))
    # lgamma(x) = log(pi) - log|sin(pi x)| - lgamma(1 - x) below 1/2
    sin_pi = ew("abs", ew("sine", ew("multiply", _c(math.pi, x), ew("subtract", x, ew("floor", x)))))
    reflected = ew("subtract", ew("subtract", _c(math.log(math.pi), x), ew("log", sin_pi)), series)
    out = select(below, reflected, series)
    out = select(_is_pole(x), _c(np.inf, x), out)
    return select(compare(ew("abs", x), _c(np.inf, x), "EQ"), _c(np.inf, x), out)


def _digamma(x: Value) -> Value:
    below, r = _reflect(x)
    z = ew("subtract", r, _c(1.0, x))
    den, num, t = _lanczos(z)
    series = ew("subtract", ew("add", ew("log", t), ew("divide", num, den)), ew("divide", _c(LANCZOS_G, x), t))
    # digamma(x) = digamma(1 - x) - pi / tan(pi x) below 1/2 (tan of the fraction: exact period)
    tan_pi = ew("tan", ew("multiply", _c(math.pi, x), ew("subtract", x, ew("floor", x))))
    reflected = ew("subtract", series, ew("divide", _c(math.pi, x), tan_pi))
    out = select(below, reflected, series)
    return select(_is_pole(x), _c(np.nan, x), out)


def _traced(fn):
    """A rule emitting fn (sprue operations) traced at the equation's operand types, inline."""
    def rule(ctx: LoweringContext, eqn: Eqn, *args: Value) -> list[Value]:
        closed = trace_flat(lambda *xs: [fn(*xs)], [v.aval for v in eqn.invars])
        return emit_jaxpr(ctx, closed.jaxpr, [const_array(c) for c in numpy_consts(closed)], list(args))
    return rule


def _chebyshev(t: Value, coeffs) -> Value:
    """Cephes' chbevl (Clenshaw's recurrence): 0.5 (b0 - b2)."""
    b0, b1, b2 = _c(0.0, t), _c(0.0, t), _c(0.0, t)
    for c in coeffs:
        b2, b1 = b1, b0
        b0 = ew("add", ew("subtract", ew("multiply", t, b1), b2), _c(c, t))
    return ew("multiply", _c(0.5, t), ew("subtract", b0, b2))


def _bessel_ie(order: int):
    """exp(-|x|) I0(x) or I1(x): sprue.lax.special_gamma.bessel_ie's expansions, here as StableHLO."""
    near_coeffs, far_coeffs = (I0E_A, I0E_B) if order == 0 else (I1E_A, I1E_B)

    def compute(x: Value) -> Value:
        z = ew("abs", x)
        near = compare(z, _c(8.0, z), "LE")
        far_z = select(near, _c(8.0, z), z)
        small = _chebyshev(ew("subtract", ew("multiply", _c(0.5, z), z), _c(2.0, z)), near_coeffs)
        large = ew("divide", _chebyshev(ew("subtract", ew("divide", _c(32.0, z), far_z), _c(2.0, z)), far_coeffs),
                   ew("sqrt", far_z))
        if order == 1:
            small = ew("multiply", z, small)
        out = select(near, small, large)
        return ew("multiply", ew("sign", x), out) if order == 1 else out
    return compute


def _bitcast(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    return [op1("stablehlo.bitcast_convert", [x], aval_type(eqn.outvars[0].aval))]


_INT_OF = {np.dtype(np.float64): np.int64, np.dtype(np.float32): np.int32, np.dtype(np.float16): np.int16}


def _nextafter(ctx: LoweringContext, eqn: Eqn, x: Value, y: Value) -> list[Value]:
    """XLA's NextAfter: the integer holding x's bits moves one away from or towards zero (floats are
    sign and magnitude); from zero, the smallest subnormal with y's sign; NaN if either is NaN. A
    rank-0 operand beside an array is broadcast to it (sprue's shape rule allows it, as for add)."""
    x, y = broadcast_like(x, y), broadcast_like(y, x)
    dt = dtype_of(x)
    it = _INT_OF[dt]
    bits = lambda v: op1("stablehlo.bitcast_convert", [v], ir.RankedTensorType.get(
        ir.RankedTensorType(v.type).shape, _int_type(it)))
    xb, yb = bits(x), bits(y)
    sign_mask = constant_like(np.iinfo(it).min, xb)
    x_mag, y_sign = ew("and", xb, ew("not", sign_mask)), ew("and", yb, sign_mask)
    tiny = ew("or", y_sign, constant_like(1, xb))
    away = ew("xor", compare(x, _c(0.0, x), "GT"), compare(x, y, "LT"))   # towards zero when these differ
    step = select(away, constant_like(-1, xb), constant_like(1, xb))
    moved = ew("add", xb, step)
    out = select(compare(x_mag, constant_like(0, xb), "EQ"), tiny, moved)
    out = op1("stablehlo.bitcast_convert", [out], x.type)
    out = select(compare(x, y, "EQ"), y, out)
    nan = logical_or(compare(x, x, "NE"), compare(y, y, "NE"))
    return [select(nan, _c(np.nan, x), out)]


def _int_type(it) -> ir.Type:
    return ir.IntegerType.get_signless(np.dtype(it).itemsize * 8)


def _float64(compute):
    """compute(x) in float64, rounded to x's type (for a value outside a jaxpr: foreign chlo ops)."""
    return lambda x: convert(compute(convert(x, np.float64)), dtype_of(x))


# JAX's chlo ops in foreign StableHLO (sprue.lowering.stablehlo_chlo) by the same builders
CHLO_UNARY = {"chlo.lgamma": _float64(_lgamma), "chlo.digamma": _float64(_digamma),
              "chlo.erf_inv": _float64(_erf_inv), "chlo.bessel_i0e": _float64(_bessel_ie(0)),
              "chlo.bessel_i1e": _float64(_bessel_ie(1))}
CHLO_BINARY = {"chlo.next_after": lambda x, y: _nextafter(None, None, x, y)[0]}

lowering_rules.update({
    lax.erf_p: _libm(math_dialect.ErfOp), lax.erfc_p: _libm(math_dialect.ErfcOp),
    lax.erf_inv_p: _in_float64(_erf_inv), lax.lgamma_p: _in_float64(_lgamma), lax.digamma_p: _in_float64(_digamma),
    lax.clz_p: lambda ctx, eqn, x: [ew("count_leading_zeros", x)],
    lax.population_count_p: lambda ctx, eqn, x: [ew("popcnt", x)],
    lax.bitcast_convert_type_p: _bitcast, lax.nextafter_p: _nextafter,
    # sprue.lax.special_gamma: float64 algorithms written in sprue's operations, traced
    lax.igamma_p: _traced(gamma_lowered(False, False)), lax.igammac_p: _traced(gamma_lowered(True, False)),
    lax.igamma_grad_a_p: _traced(gamma_lowered(False, True)),
    lax.random_gamma_grad_p: _traced(random_gamma_grad_lowered),
    lax.bessel_i0e_p: _in_float64(_bessel_ie(0)), lax.bessel_i1e_p: _in_float64(_bessel_ie(1)),
})
