"""sprue.numpy.fft (issue 18 item 3) against numpy's pocketfft: every function, any length (powers
of two, composite, prime), norms, n/s/axes, real and complex, f32 and f64, eager and compiled;
a derivative against finite differences and vmap against a loop."""
import numpy as np
import pytest

import sprue
import sprue.numpy as jnp

rng = np.random.default_rng(21)
c = rng.normal(size=(3, 12)) + 1j * rng.normal(size=(3, 12))
c2 = rng.normal(size=(6, 10)) + 1j * rng.normal(size=(6, 10))
r = rng.normal(size=(4, 10))
r3 = rng.normal(size=(3, 4, 6))

CASES = {
    "fft": (lambda F, a: F.fft(a), c),
    "fft_prime_97": (lambda F, a: F.fft(a), rng.normal(size=97) + 0j),
    "fft_n_pad": (lambda F, a: F.fft(a, n=20), c),
    "fft_n_cut_axis0": (lambda F, a: F.fft(a, n=2, axis=0), c),
    "ifft": (lambda F, a: F.ifft(a), c),
    "ifft_ortho": (lambda F, a: F.ifft(a, norm="ortho"), c),
    "fft_forward": (lambda F, a: F.fft(a, norm="forward"), c),
    "fft_real_input": (lambda F, a: F.fft(a), r),
    "rfft": (lambda F, a: F.rfft(a), r),
    "rfft_odd_n": (lambda F, a: F.rfft(a, n=9), r),
    "irfft": (lambda F, a: F.irfft(a), np.fft.rfft(r)),
    "irfft_odd_n": (lambda F, a: F.irfft(a, n=9), np.fft.rfft(r, 9)),
    "hfft": (lambda F, a: F.hfft(a), c[:, :7]),
    "ihfft": (lambda F, a: F.ihfft(a), r),
    "fft2": (lambda F, a: F.fft2(a), c2),
    "ifft2": (lambda F, a: F.ifft2(a, s=(4, 8)), c2),
    "fftn": (lambda F, a: F.fftn(a, axes=(0, 2)), r3 + 1j),
    "ifftn": (lambda F, a: F.ifftn(a), r3 + 0.5j),
    "rfft2": (lambda F, a: F.rfft2(a), r3),
    "irfft2": (lambda F, a: F.irfft2(a, s=(4, 6)), np.fft.rfft2(r3)),
    "rfftn": (lambda F, a: F.rfftn(a, axes=(0, 1)), r3),
    "irfftn": (lambda F, a: F.irfftn(a, s=(3, 4, 6), axes=(0, 1, 2)), np.fft.rfftn(r3)),
    "fftshift": (lambda F, a: F.fftshift(a), r),
    "ifftshift_axis": (lambda F, a: F.ifftshift(a, axes=1), r),
}


@pytest.mark.parametrize("name", list(CASES))
def test_against_numpy(name):
    f, a = CASES[name]
    want = f(np.fft, a)
    for got in (f(jnp.fft, a), sprue.qjit(lambda v: f(jnp.fft, v))(a)):
        got = np.asarray(got)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(want).max()))


def test_float32_gives_complex64_within_float32_rounding():
    a = rng.normal(size=(2, 360)).astype(np.float32)
    got = sprue.qjit(lambda v: jnp.fft.rfft(v))(a)
    assert got.dtype == np.complex64
    want = np.fft.rfft(a.astype(np.float64))
    assert np.abs(got - want).max() / np.abs(want).max() < 3e-6


def test_frequencies():
    np.testing.assert_array_equal(jnp.fft.fftfreq(9, 0.5), np.fft.fftfreq(9, 0.5))
    np.testing.assert_array_equal(jnp.fft.rfftfreq(8), np.fft.rfftfreq(8))


def test_gradient_of_spectral_energy_matches_finite_differences():
    w = np.exp(-np.arange(6))   # a real loss of the spectrum: sum_k w_k |X_k|^2

    def energy(x):
        return jnp.sum(w * jnp.abs(jnp.fft.rfft(x)) ** 2)
    x = rng.normal(size=10)
    g = sprue.qjit(sprue.grad(energy))(x)
    eps = 1e-6
    fd = np.array([(energy(x + eps * e) - energy(x - eps * e)) / (2 * eps) for e in np.eye(10)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_vmap_matches_a_loop():
    batch = rng.normal(size=(5, 16))
    got = sprue.qjit(sprue.vmap(lambda v: jnp.abs(jnp.fft.fft(v))))(batch)
    np.testing.assert_allclose(got, np.stack([np.abs(np.fft.fft(v)) for v in batch]), rtol=1e-12, atol=1e-12)


def test_errors():
    with pytest.raises(sprue.SprueValueError, match='Invalid norm value bad; should be "backward", "ortho" or "forward"'):
        jnp.fft.fft(c, norm="bad")
    with pytest.raises(sprue.SprueValueError, match="rfft takes a real input; use fft for complex ones"):
        jnp.fft.rfft(c)


def test_run_time_batch_sizes_compile_once():
    f = sprue.qjit(lambda v: jnp.fft.rfft(v), abstracted_axes={0: "b"})
    for b in (1, 3, 7):
        x = rng.normal(size=(b, 24))
        np.testing.assert_allclose(f(x), np.fft.rfft(x), rtol=1e-12, atol=1e-12)
    assert f.compile_count == 1
    g = sprue.qjit(lambda v: jnp.fft.fft(v, axis=0), abstracted_axes={1: "b"})
    x = rng.normal(size=(12, 5)) + 1j * rng.normal(size=(12, 5))
    np.testing.assert_allclose(g(x), np.fft.fft(x, axis=0), rtol=1e-12, atol=1e-12)


def test_run_time_transform_length_is_a_clear_error():
    f = sprue.qjit(lambda v: jnp.fft.fft(v), abstracted_axes={0: "n"})
    with pytest.raises(sprue.SprueValueError, match="a transform's length must be static"):
        f(np.ones(8))
