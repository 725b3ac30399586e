"""The FFT kernels behind sprue.numpy.fft (frontend/numpy/_fft_kernels.py) on (real, imaginary)
pairs, against numpy's pocketfft: direct lengths, Cooley-Tukey's composite lengths (two levels
deep), Bluestein's primes, forward and inverse, batched, eager and compiled, f64 and f32."""
import numpy as np
import pytest

import sprue
from sprue.numpy import _fft_kernels as K

rng = np.random.default_rng(11)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 16, 17, 36, 97, 360, 1024, 1009])
@pytest.mark.parametrize("inverse", [False, True], ids=["fft", "ifft"])
def test_dft_matches_numpy(n, inverse):
    x = rng.normal(size=(3, n)) + 1j * rng.normal(size=(3, n))
    want = np.fft.ifft(x) * n if inverse else np.fft.fft(x)
    scale = max(np.abs(want).max(), 1.0)
    for f in (lambda a, b: K.dft(a, b, inverse), sprue.qjit(lambda a, b: K.dft(a, b, inverse))):
        re, im = f(x.real.copy(), x.imag.copy())
        assert np.abs(re + 1j * np.asarray(im) - want).max() / scale < 1e-12


def test_float32_stays_float32():
    x = rng.normal(size=(2, 240)).astype(np.float32)
    re, im = sprue.qjit(lambda a, b: K.dft(a, b, False))(x, np.zeros_like(x))
    assert re.dtype == np.float32 and im.dtype == np.float32
    want = np.fft.fft(x.astype(np.float64))
    assert np.abs(re + 1j * im - want).max() / np.abs(want).max() < 2e-6
