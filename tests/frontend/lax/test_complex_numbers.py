"""sprue.lax's complex primitives (real, imag, conj, complex) and the complex cases of the others:
shape rules (dtypes), numpy references, the printed jaxpr (JAX's forms), costs and the errors."""
from __future__ import annotations

import numpy as np
import pytest

import sprue
from sprue import lax
from sprue.base import dtypes
from sprue.base.errors import SprueTypeError

Z = np.array([1 + 2j, -0.5 + 0j, 3 - 4j])


@pytest.mark.parametrize("fn, want", [
    (lax.real, np.real(Z)), (lax.imag, np.imag(Z)), (lax.conj, np.conj(Z)), (lax.abs, np.abs(Z)),
    (lambda z: lax.complex(lax.real(z), lax.imag(z)), Z), (lax.sign, Z / np.abs(Z)),
    (lambda z: lax.convert_element_type(z, np.float32), np.real(Z).astype(np.float32)),
    (lambda z: lax.convert_element_type(z, np.complex64), Z.astype(np.complex64)),
])
def test_reference_rules_and_dtypes(fn, want):
    got = fn(Z)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-15)
    out = sprue.make_jaxpr(fn)(Z).jaxpr.outvars[0].aval
    assert out.dtype == want.dtype and out.shape == want.shape


def test_conj_of_a_real_operand_is_complex_as_in_jax():
    assert lax.conj(np.float32(2.0)).dtype == np.complex64
    assert str(sprue.make_jaxpr(lax.conj)(np.ones(2))).count("conj[input_dtype=float64]") == 1


def test_printed_forms_are_jaxs():
    text = str(sprue.make_jaxpr(lambda z, x: (lax.conj(z) * 1j, lax.complex(x, x), lax.real(z)))(Z, np.ones(3)))
    for piece in ("a:c128[3]", "conj[input_dtype=complex128] a", "1j:c128[]", "complex b b", "f64[3] = real a"):
        assert piece in text, text


def test_complex_promotion_of_weak_scalars():
    assert dtypes.result_type((np.dtype(np.float32), False), (dtypes.complex128, True)) == (dtypes.complex64, False)
    assert dtypes.result_type((dtypes.complex64, False), (dtypes.float64, True)) == (dtypes.complex64, False)
    assert dtypes.result_type((dtypes.complex128, True), (dtypes.int64, True)) == (dtypes.complex128, True)
    assert dtypes.python_scalar_dtype(1j) == dtypes.complex128 and dtypes.short_name(dtypes.complex64) == "c64"


def test_costs_count_complex_math():
    assert sprue.cost(lambda z: lax.exp(z))(Z) == 3 and sprue.cost(lambda z: lax.eq(z, z))(Z) == 3


@pytest.mark.parametrize("fn, message", [
    (lambda: lax.real(np.ones(2)), "real requires a complex operand, got f64"),
    (lambda: lax.imag(np.ones(2, np.int32)), "imag requires a complex operand, got i32"),
    (lambda: lax.complex(np.ones(2, np.int32), np.ones(2, np.int32)), "complex requires float32 or float64 operands"),
    (lambda: lax.complex(np.ones(2), np.ones(2, np.float32)), "complex requires operands of one dtype"),
    (lambda: lax.conj(np.ones(2, np.int64)), "conj requires a floating-point or complex operand, got i64"),
    (lambda: lax.max(Z, Z), "max requires ordered \\(not complex\\) operands"),
    (lambda: lax.floor(Z), "floor requires a floating-point operand, got c128"),
    (lambda: lax.exp2(Z), "exp2 requires a floating-point operand, got c128"),
    (lambda: lax.sort(Z), "sort requires ordered \\(not complex\\) operands"),
    (lambda: lax.cummax(Z, 0), "cummax requires ordered \\(not complex\\) operands"),
])
def test_errors(fn, message):
    with pytest.raises(SprueTypeError, match=message):
        fn()
    with pytest.raises(SprueTypeError, match=message):
        sprue.make_jaxpr(fn)()
