"""StableHLO modules with complex types, as JAX 0.10.2 lowers them (jax.jit(f).lower(...).as_text(),
x64 enabled; committed in data/), loaded with sprue.load and checked against numpy:

    jax_complex_sum.mlir:  f(z: c128[4], x: f64[4]) = (sum(exp(z) * x + conj(z) * 2j), abs(z) * 2, real(z) + imag(z))
    jax_complex_math.mlir: g(z, w: c64[3]) = (sin z + cos w, tan z, log1p z * sqrt w, z ** w, dot(z, w), tanh z,
                                              abs z < 1, z == w)

A complex dot_general becomes four real ones (legalize.lower_complex_dot); chlo's functions of complex
operands (chlo.atan, chlo.sinh, which JAX emits for arctan and sinh) are refused by name."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import sprue
from sprue.errors import UnsupportedError

DATA = Path(__file__).parent / "data"


def test_jax_complex_sum():
    k = sprue.load(DATA / "jax_complex_sum.mlir")
    z, x = np.array([1 + 2j, 3, -1j, 0.5 + 0.5j]), np.arange(4.0)
    total, mag, parts = k(z, x)
    assert isinstance(total, np.complex128)
    np.testing.assert_allclose(total, np.sum(np.exp(z) * x + np.conj(z) * 2j), rtol=1e-14)
    np.testing.assert_allclose(mag, np.abs(z) * 2, rtol=1e-15)
    np.testing.assert_array_equal(parts, z.real + z.imag)


def test_jax_complex_math():
    k = sprue.load(DATA / "jax_complex_math.mlir")
    rng = np.random.default_rng(1)
    z, w = ((rng.normal(size=3) + 1j * rng.normal(size=3)).astype(np.complex64) for _ in range(2))
    w[1] = z[1]
    want = (np.sin(z) + np.cos(w), np.tan(z), np.log1p(z) * np.sqrt(w), z ** w, np.dot(z, w), np.tanh(z),
            np.abs(z) < 1, z == w)
    for got, ref in zip(k(z, w), want):
        assert np.asarray(got).dtype == ref.dtype
        np.testing.assert_allclose(got, ref, rtol=2e-5, atol=1e-6)


def test_chlo_functions_of_complex_operands_are_refused_by_name(tmp_path):
    text = (DATA / "jax_complex_sum.mlir").read_text().replace(
        "%11 = stablehlo.abs %arg0 : (tensor<4xcomplex<f64>>) -> tensor<4xf64>",
        "%a = chlo.atan %arg0 : tensor<4xcomplex<f64>> -> tensor<4xcomplex<f64>>\n"
        "    %11 = stablehlo.abs %a : (tensor<4xcomplex<f64>>) -> tensor<4xf64>")
    (tmp_path / "atan.mlir").write_text(text)
    with pytest.raises(UnsupportedError, match="chlo.atan at .* on a non-float tensor is not supported"):
        sprue.load(tmp_path / "atan.mlir")
