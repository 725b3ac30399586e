"""Complex numbers: real, imag, conj, complex, and the complex cases of abs and sign (JAX's lax).

Derivatives follow JAX's convention (JAX's FAQ, "Complex numbers and differentiation"): a complex
value is a pair of reals, the jvp is the real-linear map of the tangent, and the vjp is its
*transpose* under the pairing <a, b> = Re(a * b) (no conjugation). For a holomorphic primitive the
rules in elementwise.py need nothing more (the vjp multiplies by f'(z), as for reals); for a
real-valued f of z = x + iy the cotangent of 1 comes back as df/dx - i df/dy. The rules here are
the non-holomorphic ones: real, imag, conj, complex and abs.

Each block is one primitive's whole story (shape rule, numpy reference, jvp, vjp, batching, cost);
the lowering is in sprue.lowering.rules_elementwise."""
from __future__ import annotations

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueTypeError
from sprue.interp.ad_util import Zero, batch_rules, cost_rules, instantiate, is_zero, jvp_rules, vjp_rules, zero_of
from sprue.interp.batching import elementwise_batch_rule
from sprue.interp.cost import free, per_output_element
from sprue.ir.core import ShapedArray, shape_rules
from sprue.lax import elementwise as ew
from sprue.lax._rules import define, same_dtypes, weak
from sprue.lax.elementwise import _bcast_to, _broadcast_shapes, _unbcast, aval_of

__all__ = ["complex", "complex_p", "conj", "conj_p", "imag", "imag_p", "real", "real_p"]


def _complex_operand(name: str, x: ShapedArray) -> ShapedArray:
    if not dtypes.is_complex(x.dtype):
        raise SprueTypeError(f"{name} requires a complex operand, got {x.str_short()}")
    return x


# -- real, imag: complex -> its real type; linear --------------------------------------------------
def _part_rule(name: str):
    def rule(x: ShapedArray):
        return _complex_operand(name, x).update(dtype=dtypes.real_dtype(x.dtype))
    return rule


real_p = define("real", _part_rule("real"), np.real)
imag_p = define("imag", _part_rule("imag"), np.imag)


def real(x):
    return real_p.bind(x)


def imag(x):
    return imag_p.bind(x)


def _linear_jvp(p):
    def rule(primals, tangents, **params):
        out = p.bind(*primals, **params)
        return out, zero_of(out) if is_zero(tangents[0]) else p.bind(tangents[0], **params)
    return rule


def _zeros_like(x):
    return instantiate(Zero(aval_of(x).strip_weak_type()))


jvp_rules[real_p], jvp_rules[imag_p] = _linear_jvp(real_p), _linear_jvp(imag_p)
# The transposes (JAX's deflinear2 of real_p and imag_p): ct -> ct + 0i and ct -> 0 - ct i.
vjp_rules[real_p] = lambda cts, primals, outs: [complex_p.bind(cts[0], _zeros_like(cts[0]))]
vjp_rules[imag_p] = lambda cts, primals, outs: [complex_p.bind(_zeros_like(cts[0]), ew.neg_p.bind(cts[0]))]
for _p in (real_p, imag_p):
    batch_rules[_p], cost_rules[_p] = elementwise_batch_rule(_p), free


# -- complex(x, y) = x + iy: two reals of one type (or one rank 0) -> complex ------------------------
def _complex_rule(x: ShapedArray, y: ShapedArray):
    same_dtypes("complex", x, y)
    if not dtypes.is_float(x.dtype) or x.dtype == np.float16:
        raise SprueTypeError(f"complex requires float32 or float64 operands, got {x.str_short()}, {y.str_short()}")
    return ShapedArray(_broadcast_shapes("complex", x, y), dtypes.complex_dtype(x.dtype), weak_type=weak(x, y))


def _complex_impl(x, y):
    return (x + np.multiply(y, 1j)).astype(dtypes.complex_dtype(x.dtype))


complex_p = define("complex", _complex_rule, _complex_impl)


def complex(x, y):
    """x + iy (JAX's lax.complex)."""
    return complex_p.bind(x, y)


def _complex_jvp(primals, tangents):
    out = complex_p.bind(*primals)
    if all(is_zero(t) for t in tangents):
        return out, zero_of(out)
    tx, ty = (_bcast_to(instantiate(t, p), out) for t, p in zip(tangents, primals))
    return out, complex_p.bind(tx, ty)


def _complex_vjp(cts, primals, outs):
    (ct,), (x, y) = cts, primals
    return [lambda: _unbcast(real_p.bind(ct), x), lambda: _unbcast(ew.neg_p.bind(imag_p.bind(ct)), y)]


jvp_rules[complex_p], vjp_rules[complex_p] = _complex_jvp, _complex_vjp
batch_rules[complex_p], cost_rules[complex_p] = elementwise_batch_rule(complex_p), free


# -- conj: complex -> complex; of a real, the complex number with that real part (as JAX's lax) ----
def _conj_rule(x: ShapedArray, *, input_dtype=None):
    if not dtypes.is_inexact(x.dtype):
        raise SprueTypeError(f"conj requires a floating-point or complex operand, got {x.str_short()}")
    return x.update(dtype=dtypes.complex_dtype(x.dtype))


def _conj_impl(x, *, input_dtype=None):
    return np.conj(x).astype(dtypes.complex_dtype(x.dtype))


conj_p = define("conj", _conj_rule, _conj_impl)


def conj(x):
    """The complex conjugate (JAX's lax.conj: a real operand gives a complex result)."""
    return conj_p.bind(x, input_dtype=aval_of(x).dtype)


def _conj_vjp(cts, primals, outs, *, input_dtype=None):
    # JAX's _conj_transpose_rule: conj of a complex cotangent, or its real part for a real input
    ct = cts[0]
    if dtypes.is_complex(aval_of(primals[0]).dtype):
        return [conj_p.bind(ct, input_dtype=aval_of(ct).dtype)]
    return [real_p.bind(ct)]


jvp_rules[conj_p], vjp_rules[conj_p] = _linear_jvp(conj_p), _conj_vjp
batch_rules[conj_p], cost_rules[conj_p] = elementwise_batch_rule(conj_p), free


# -- abs of a complex number: its (real) modulus; not holomorphic ---------------------------------
_real_abs_rule = shape_rules[ew.abs_p]
_real_abs_jvp, _real_abs_vjp = jvp_rules[ew.abs_p], vjp_rules[ew.abs_p]


def _abs_rule(x: ShapedArray, **params):
    return x.update(dtype=dtypes.real_dtype(x.dtype)) if dtypes.is_complex(x.dtype) else _real_abs_rule(x)


def _abs_direction(x, out):
    """conj(x) / |x|, and 0 at x = 0 (JAX's _abs_jvp_rule divides by |x| with 0 replaced by 1)."""
    mag = ew.convert_element_type_p.bind(out, new_dtype=aval_of(x).dtype, weak_type=False, sharding=None)
    zero = ew.eq_p.bind(mag, np.zeros((), aval_of(x).dtype))
    safe = ew.select_n_p.bind(zero, mag, ew._bcast_like(np.ones((), aval_of(x).dtype), mag))
    return ew.div_p.bind(conj_p.bind(x, input_dtype=aval_of(x).dtype), safe)


def _abs_jvp(primals, tangents, **params):
    (x,), (t,) = primals, tangents
    if not dtypes.is_complex(aval_of(x).dtype):
        return _real_abs_jvp(primals, tangents, **params)
    out = ew.abs_p.bind(x)
    if is_zero(t):
        return out, zero_of(out)
    return out, real_p.bind(ew.mul_p.bind(t, _abs_direction(x, out)))     # Re(t conj(x)) / |x|


def _abs_vjp(cts, primals, outs, **params):
    (ct,), (x,) = cts, primals
    if not dtypes.is_complex(aval_of(x).dtype):
        return _real_abs_vjp(cts, primals, outs, **params)
    # the transpose of t -> Re(t w): ct -> (ct + 0i) w
    return [ew.mul_p.bind(complex_p.bind(ct, _zeros_like(ct)), _abs_direction(x, outs[0]))]


shape_rules[ew.abs_p] = _abs_rule
jvp_rules[ew.abs_p], vjp_rules[ew.abs_p] = _abs_jvp, _abs_vjp
cost_rules[ew.abs_p] = per_output_element
