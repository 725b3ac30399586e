"""Saved programs with complex numbers: complex arguments, results and literals (written as `complex`
of their real parts, which the jaxpr reader reads) survive sprue.save / sprue.load."""
from __future__ import annotations

import numpy as np

import sprue
from sprue import lax


def test_save_and_load_complex_literals(tmp_path):
    def f(z):
        return z * 2j + (1 + 1j), lax.cond(z[0].real > 0, lambda: z * (0.5 - 1j), lambda: z), 1j
    z = np.array([1 + 1j, 2], np.complex64)
    path = tmp_path / "f.sprue"
    sprue.save(sprue.make_jaxpr(f)(z), path)
    text = path.read_text()
    assert "complex 0.5:f32[] -1.0:f32[]" in text and "(1+1j)" not in text
    loaded = sprue.load(path)
    for got, want in zip(loaded(z), f(z)):
        np.testing.assert_array_equal(got, want)
        assert np.asarray(got).dtype == np.asarray(want).dtype or isinstance(want, complex)
