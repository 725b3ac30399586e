"""Lowering of complex numbers: real, imag, complex, conj, and the complex cases of the elementwise
math, conversions and abs.

StableHLO has complex element types and `stablehlo.real/imag/complex`; its legalization to linalg
maps the arithmetic, exp, log, log_plus_one, exponential_minus_one, sqrt, rsqrt, tanh, power, sign
and abs of complex operands to the complex dialect, which MLIR's complex-to-standard turns into
arith and math (pipeline.py runs it only when complex ops are left) and convert-to-llvm lowers the
rest (complex<fN> is an LLVM struct {fN, fN}, numpy's and C99's layout).

The functions it does not map (sin, cos, tan, sinh, cosh and the inverse functions) are written
here from the real functions of the parts (the identities of Abramowitz & Stegun 4.3.55-56 and
4.5.49-50) or from complex log and sqrt, as numpy's npymath composes them. Each table entry wraps
the real rule: real operands go to it unchanged.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from sprue import lax
from sprue.ir.core import Eqn
from sprue.lowering import rules_elementwise, rules_math, rules_reductions  # noqa: F401  (their real rules are wrapped here)
from sprue.lowering.rules_common import (
    LoweringContext,
    Value,
    broadcast_like,
    compare,
    constant_like,
    convert,
    dtype_of,
    ew,
    is_complex,
    lowering_rules,
    op1,
    select,
    unsupported,
    with_dtype,
)


def _part_type(x: Value):
    return with_dtype(x, np.dtype(f"f{dtype_of(x).itemsize // 2}"))


def re(x: Value) -> Value:
    return op1("stablehlo.real", [x], _part_type(x))


def im(x: Value) -> Value:
    return op1("stablehlo.imag", [x], _part_type(x))


def make(a: Value, b: Value) -> Value:
    a, b = broadcast_like(a, b), broadcast_like(b, a)
    dtype = np.dtype(f"c{2 * dtype_of(a).itemsize}")
    return op1("stablehlo.complex", [a, b], with_dtype(a, dtype))


def _mul_i(z: Value, sign: float = 1.0) -> Value:
    """sign * i * z."""
    b = im(z)
    return make(ew("negate", b) if sign > 0 else b, re(z) if sign > 0 else ew("negate", re(z)))


# -- real, imag, complex, conj ----------------------------------------------------------------------
def _conj(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    if not is_complex(x):   # lax.conj of a real: that real as a complex number
        a = convert(x, np.dtype(f"f{np.dtype(eqn.outvars[0].aval.dtype).itemsize // 2}"))
        return [make(a, constant_like(0.0, a))]
    return [make(re(x), ew("negate", im(x)))]


lowering_rules.update({
    lax.real_p: lambda ctx, eqn, x: [re(x)],
    lax.imag_p: lambda ctx, eqn, x: [im(x)],
    lax.complex_p: lambda ctx, eqn, x, y: [make(x, y)],
    lax.conj_p: _conj,
})


# -- the math functions of complex operands ---------------------------------------------------------
def _real_rule(p):
    rule = lowering_rules[p]
    return lambda ctx, eqn, x: rule(ctx, eqn, x)[0]


def _sinh_cosh(ctx, eqn, a: Value) -> tuple[Value, Value]:
    return _real_rule(lax.sinh_p)(ctx, eqn, a), _real_rule(lax.cosh_p)(ctx, eqn, a)


def _sin(ctx, eqn, z):   # sin(a + ib) = sin a cosh b + i cos a sinh b
    a, b = re(z), im(z)
    sh, ch = _sinh_cosh(ctx, eqn, b)
    return make(ew("multiply", ew("sine", a), ch), ew("multiply", ew("cosine", a), sh))


def _cos(ctx, eqn, z):   # cos(a + ib) = cos a cosh b - i sin a sinh b
    a, b = re(z), im(z)
    sh, ch = _sinh_cosh(ctx, eqn, b)
    return make(ew("multiply", ew("cosine", a), ch), ew("negate", ew("multiply", ew("sine", a), sh)))


def _sinh(ctx, eqn, z):  # sinh(a + ib) = sinh a cos b + i cosh a sin b
    a, b = re(z), im(z)
    sh, ch = _sinh_cosh(ctx, eqn, a)
    return make(ew("multiply", sh, ew("cosine", b)), ew("multiply", ch, ew("sine", b)))


def _cosh(ctx, eqn, z):  # cosh(a + ib) = cosh a cos b + i sinh a sin b
    a, b = re(z), im(z)
    sh, ch = _sinh_cosh(ctx, eqn, a)
    return make(ew("multiply", ch, ew("cosine", b)), ew("multiply", sh, ew("sine", b)))


def _tan(ctx, eqn, z):   # tan z = -i tanh(iz)
    return _mul_i(ew("tanh", _mul_i(z)), -1.0)


def _asinh(ctx, eqn, z):  # log(z + sqrt(z^2 + 1))
    return ew("log", ew("add", z, ew("sqrt", ew("add", ew("multiply", z, z), constant_like(1.0, z)))))


def _asin(ctx, eqn, z):   # -i asinh(iz)
    return _mul_i(_asinh(ctx, eqn, _mul_i(z)), -1.0)


def _acos(ctx, eqn, z):   # pi/2 - asin z
    return ew("subtract", constant_like(np.pi / 2, z), _asin(ctx, eqn, z))


def _acosh(ctx, eqn, z):  # log(z + sqrt(z + 1) sqrt(z - 1))
    one = constant_like(1.0, z)
    root = ew("multiply", ew("sqrt", ew("add", z, one)), ew("sqrt", ew("subtract", z, one)))
    return ew("log", ew("add", z, root))


def _atanh(ctx, eqn, z):  # (log1p z - log1p(-z)) / 2
    d = ew("subtract", ew("log_plus_one", z), ew("log_plus_one", ew("negate", z)))
    return ew("multiply", d, constant_like(0.5, z))


def _atan(ctx, eqn, z):   # -i atanh(iz)
    return _mul_i(_atanh(ctx, eqn, _mul_i(z)), -1.0)


def _direct(name: str):
    return lambda ctx, eqn, z: ew(name, z)


def _complex_case(p, complex_rule):
    """p's rule, with complex operands going to complex_rule."""
    real_rule = lowering_rules[p]

    def rule(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
        return [complex_rule(ctx, eqn, x)] if is_complex(x) else real_rule(ctx, eqn, x)
    return rule


for _p, _rule in [(lax.sin_p, _sin), (lax.cos_p, _cos), (lax.tan_p, _tan), (lax.sinh_p, _sinh),
                  (lax.cosh_p, _cosh), (lax.asinh_p, _asinh), (lax.asin_p, _asin), (lax.acos_p, _acos),
                  (lax.acosh_p, _acosh), (lax.atanh_p, _atanh), (lax.atan_p, _atan),
                  (lax.log_p, _direct("log")), (lax.log1p_p, _direct("log_plus_one")),
                  (lax.expm1_p, _direct("exponential_minus_one"))]:
    lowering_rules[_p] = _complex_case(_p, _rule)


# -- abs, sign, conversions -------------------------------------------------------------------------
def _abs_of_complex(ctx, eqn, z):
    return op1("stablehlo.abs", [z], _part_type(z))


def _sign_of_complex(ctx, eqn, z):  # z / |z|, and 0 at 0 (numpy 2's sign)
    mag = _abs_of_complex(ctx, eqn, z)
    zero = constant_like(0.0, mag)
    safe = select(compare(mag, zero, "EQ"), constant_like(1.0, mag), mag)
    return ew("divide", z, make(safe, zero))


lowering_rules[lax.abs_p] = _complex_case(lax.abs_p, _abs_of_complex)
lowering_rules[lax.sign_p] = _complex_case(lax.sign_p, _sign_of_complex)

_real_convert = lowering_rules[lax.convert_element_type_p]


def _convert(ctx: LoweringContext, eqn: Eqn, x: Value) -> list[Value]:
    """Conversions to and from complex through the parts: complex -> real takes the real part (as
    JAX and numpy), real -> complex has imaginary part 0, complex -> complex converts both parts."""
    new = np.dtype(eqn.params["new_dtype"])
    src = dtype_of(x)
    if src.kind != "c" and new.kind != "c":
        return _real_convert(ctx, eqn, x)
    if new == src:
        return [x]
    if src.kind == "c" and new == np.bool_:   # nonzero when either part is
        zero = constant_like(0, x)
        return [compare(x, zero, "NE")]
    part = np.dtype(f"f{new.itemsize // 2}") if new.kind == "c" else new
    if src.kind == "c":
        a, b = rules_elementwise.convert_element(re(x), part if part.kind == "f" else new), im(x)
        if new.kind != "c":
            return [a]
        return [make(a, convert(b, part))]
    if new.kind != "c":
        raise unsupported(eqn, f"no conversion from {src} to {new}")
    a = rules_elementwise.convert_element(x, part)
    return [make(a, constant_like(0.0, a))]


lowering_rules[lax.convert_element_type_p] = _convert


# -- dot_general: four real products ----------------------------------------------------------------
# (a + ib)(c + id) = (ac - bd) + i(ad + bc), each product on the real matmul kernels (matmul.py
# tiles and vectorizes real element types only; a complex linalg.matmul has no body it accepts).
_real_dot = lowering_rules[lax.dot_general_p]


def _dot_general(ctx: LoweringContext, eqn: Eqn, lhs: Value, rhs: Value) -> list[Value]:
    out = eqn.outvars[0].aval
    if np.dtype(out.dtype).kind != "c":
        return _real_dot(ctx, eqn, lhs, rhs)
    lhs, rhs = convert(lhs, out.dtype), convert(rhs, out.dtype)
    part = out.update(dtype=np.dtype(f"f{np.dtype(out.dtype).itemsize // 2}"))
    real_eqn = SimpleNamespace(params=eqn.params, outvars=[SimpleNamespace(aval=part)],
                               source_info=eqn.source_info, primitive=eqn.primitive)

    def dot(x: Value, y: Value) -> Value:
        return _real_dot(ctx, real_eqn, x, y)[0]
    a, b, c, d = re(lhs), im(lhs), re(rhs), im(rhs)
    return [make(ew("subtract", dot(a, c), dot(b, d)), ew("add", dot(a, d), dot(b, c)))]


lowering_rules[lax.dot_general_p] = _dot_general
