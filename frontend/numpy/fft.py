"""sprue.numpy.fft: numpy's (and jax.numpy's) discrete Fourier transforms, any length, over
sprue's own kernels (_fft_kernels.py: direct products, Cooley-Tukey, Bluestein), so a C host
links no FFT library. Real inputs give complex results of the matching precision (float32 ->
complex64); `norm` is numpy's ("backward", "ortho", "forward"). Lengths must be static; the
derivatives are those of the linear maps the kernels are made of."""
from __future__ import annotations

import numpy as np

from sprue import lax
from sprue.numpy import _fft_kernels as K
from sprue.numpy._avals import aval, value_error
from sprue.numpy._more import jnp
from sprue.numpy._promote import normalize_axis, operand, static_int

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn",
           "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = ("backward", "ortho", "forward", None)
# hfft and ihfft are the real transforms of the other direction, their norms swapped (numpy's)
_SWAPPED_NORM = {"backward": "forward", "forward": "backward", "ortho": "ortho", None: "forward"}


def _complex_of(x):
    """x as a complex array of its precision (float32 -> complex64; integers -> complex128)."""
    dt = np.dtype(aval(x).dtype)
    if dt.kind == "c":
        return x
    return x.astype(np.complex64 if dt == np.float32 or dt == np.float16 else np.complex128)


def _scale(n: int, norm, inverse: bool) -> float:
    if norm not in _NORMS:
        raise value_error("fft", f'Invalid norm value {norm}; should be "backward", "ortho" or "forward".')
    norm = norm or "backward"
    if norm == "ortho":
        return 1.0 / np.sqrt(n)
    return 1.0 / n if (norm == "backward") == inverse else 1.0


def _resized(x, n, axis):
    """x cut or zero-padded to n along axis (numpy's `n`)."""
    have = aval(x).shape[axis]
    if n is None or n == have:
        return x
    if n < have:
        lo, hi = [0] * aval(x).ndim, list(aval(x).shape)
        hi[axis] = n
        return lax.slice(x, lo, hi)
    shape = list(aval(x).shape)
    shape[axis] = n - have
    return jnp.concatenate([x, jnp.zeros(tuple(shape), aval(x).dtype)], axis=axis)


def _transform(x, axis, inverse, norm):
    """The complex transform of complex x along axis."""
    x = jnp.moveaxis(x, axis, -1)
    n = aval(x).shape[-1]
    if not isinstance(n, (int, np.integer)):
        raise value_error("fft", "a transform's length must be static (here it is known only at run time)")
    if n == 0:
        raise value_error("fft", "Invalid number of FFT data points (0) specified.")
    re, im = K.dft(jnp.real(x), jnp.imag(x), inverse)
    s = _scale(int(n), norm, inverse)
    if s != 1.0:
        re, im = re * s, im * s
    return jnp.moveaxis(lax.complex(re, im), -1, axis)


def fft(a, n=None, axis=-1, norm=None):
    a = _complex_of(operand("fft", a))
    axis = normalize_axis("fft", axis, aval(a).ndim, a)
    return _transform(_resized(a, None if n is None else static_int("fft", n, "n"), axis), axis, False, norm)


def ifft(a, n=None, axis=-1, norm=None):
    a = _complex_of(operand("ifft", a))
    axis = normalize_axis("ifft", axis, aval(a).ndim, a)
    return _transform(_resized(a, None if n is None else static_int("ifft", n, "n"), axis), axis, True, norm)


def rfft(a, n=None, axis=-1, norm=None):
    a = operand("rfft", a)
    if np.dtype(aval(a).dtype).kind == "c":
        raise value_error("rfft", "rfft takes a real input; use fft for complex ones")
    axis = normalize_axis("rfft", axis, aval(a).ndim, a)
    a = _resized(a, None if n is None else static_int("rfft", n, "n"), axis)
    full = _transform(_complex_of(a), axis, False, norm)
    m = aval(a).shape[axis] // 2 + 1
    lo, hi = [0] * aval(full).ndim, list(aval(full).shape)
    hi[axis] = m
    return lax.slice(full, lo, hi)


def irfft(a, n=None, axis=-1, norm=None):
    a = _complex_of(operand("irfft", a))
    axis = normalize_axis("irfft", axis, aval(a).ndim, a)
    m = aval(a).shape[axis]
    n = 2 * (m - 1) if n is None else static_int("irfft", n, "n")
    half = n // 2 + 1
    a = _resized(a, half, axis)
    # the Hermitian spectrum of a real signal: X[n - k] = conj(X[k])
    a = jnp.moveaxis(a, axis, -1)
    tail = jnp.conj(jnp.flip(a[..., 1:n - half + 1], -1))
    full = jnp.concatenate([a, tail], axis=-1)
    out = _transform(full, -1, True, norm)
    return jnp.moveaxis(jnp.real(out), -1, axis)


def hfft(a, n=None, axis=-1, norm=None):
    a = _complex_of(operand("hfft", a))
    m = aval(a).shape[axis]
    n = 2 * (m - 1) if n is None else static_int("hfft", n, "n")
    return irfft(jnp.conj(a), n, axis, _SWAPPED_NORM[norm])


def ihfft(a, n=None, axis=-1, norm=None):
    return jnp.conj(rfft(a, n, axis, _SWAPPED_NORM[norm]))


def _axes_and_sizes(fname, a, s, axes):
    nd = aval(a).ndim
    if axes is None:
        axes = tuple(range(nd)) if s is None else tuple(range(nd - len(s), nd))
    axes = tuple(normalize_axis(fname, ax, nd, a) for ax in axes)
    sizes = [None] * len(axes) if s is None else [static_int(fname, v, "s") for v in s]
    if len(sizes) != len(axes):
        raise value_error(fname, "Shape and axes have different lengths.")
    return axes, sizes


def fftn(a, s=None, axes=None, norm=None):
    a = _complex_of(operand("fftn", a))
    axes, sizes = _axes_and_sizes("fftn", a, s, axes)
    for ax, n in zip(axes, sizes):
        a = _transform(_resized(a, n, ax), ax, False, norm)
    return a


def ifftn(a, s=None, axes=None, norm=None):
    a = _complex_of(operand("ifftn", a))
    axes, sizes = _axes_and_sizes("ifftn", a, s, axes)
    for ax, n in zip(axes, sizes):
        a = _transform(_resized(a, n, ax), ax, True, norm)
    return a


def rfftn(a, s=None, axes=None, norm=None):
    a = operand("rfftn", a)
    axes, sizes = _axes_and_sizes("rfftn", a, s, axes)
    out = rfft(a, sizes[-1], axes[-1], norm)
    for ax, n in zip(axes[:-1], sizes[:-1]):
        out = _transform(_resized(out, n, ax), ax, False, norm)
    return out


def irfftn(a, s=None, axes=None, norm=None):
    a = _complex_of(operand("irfftn", a))
    axes, sizes = _axes_and_sizes("irfftn", a, s, axes)
    for ax, n in zip(axes[:-1], sizes[:-1]):
        a = _transform(_resized(a, n, ax), ax, True, norm)
    return irfft(a, sizes[-1], axes[-1], norm)


def fft2(a, s=None, axes=(-2, -1), norm=None):
    return fftn(a, s, axes, norm)


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    return ifftn(a, s, axes, norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    return rfftn(a, s, axes, norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    return irfftn(a, s, axes, norm)


def fftfreq(n, d=1.0, *, dtype=None, device=None):
    n = static_int("fftfreq", n, "n")
    return jnp.asarray(np.fft.fftfreq(n, d).astype(dtype or np.float64))


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    n = static_int("rfftfreq", n, "n")
    return jnp.asarray(np.fft.rfftfreq(n, d).astype(dtype or np.float64))


def fftshift(x, axes=None):
    x = operand("fftshift", x)
    axes = tuple(range(aval(x).ndim)) if axes is None else (axes if isinstance(axes, (tuple, list)) else (axes,))
    return jnp.roll(x, [aval(x).shape[ax] // 2 for ax in axes], axes)


def ifftshift(x, axes=None):
    x = operand("ifftshift", x)
    axes = tuple(range(aval(x).ndim)) if axes is None else (axes if isinstance(axes, (tuple, list)) else (axes,))
    return jnp.roll(x, [-(aval(x).shape[ax] // 2) for ax in axes], axes)

