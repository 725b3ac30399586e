"""The discrete Fourier transform behind sprue.numpy.fft, over pairs of real arrays (the real and
imaginary parts), along the last axis, of any static length, written over sprue's own primitives
(no FFT library for a C host to link):

- a length of at most DIRECT_MAX is one product with the DFT matrix (a constant), on the matmul
  kernels;
- a composite length n = n1 * n2 (n1 the divisor nearest sqrt(n)) is Cooley & Tukey's: transforms
  of length n1 down the columns of the n1 x n2 matrix the input reshapes to, twiddle factors, then
  transforms of length n2 along its rows (the "four-step" FFT of Bailey, 1990), each recursively;
- a prime length above DIRECT_MAX is Bluestein's chirp z-transform: a convolution, done with
  transforms of a power-of-two length of at least 2n - 1.
The twiddles and chirps are computed in float64 by numpy when tracing and rounded to the data's
type, as pocketfft computes its twiddles in higher precision."""
from __future__ import annotations

import numpy as np

from sprue import lax
from sprue.numpy._avals import aval

DIRECT_MAX = 16


def _mm(re, im, wr, wi):
    """(re + i im) @ (wr + i wi) over the last axis (wr, wi: numpy constants), as one real product
    [re im] @ [[wr, wi], [-wi, wr]]: one matmul of twice the size runs faster on the matmul
    kernels than four small ones."""
    dt = aval(re).dtype
    n, m = np.shape(wr)
    w = lax.convert_element_type(np.block([[np.asarray(wr), np.asarray(wi)], [-np.asarray(wi), np.asarray(wr)]]), dt)
    nd = aval(re).ndim
    x = lax.concatenate([re, im], nd - 1)
    y = lax.dot_general(x, w, (((nd - 1,), (0,)), ((), ())))
    lead = tuple(aval(y).shape[:-1])
    lo = (0,) * nd
    return lax.slice(y, lo, lead + (m,)), lax.slice(y, lo[:-1] + (m,), lead + (2 * m,))


def _cmul_const(re, im, cr, ci):
    """(re + i im) * (cr + i ci), cr and ci numpy constants broadcast over the leading axes."""
    dt = aval(re).dtype
    shape = aval(re).shape
    cr = lax.broadcast_in_dim(lax.convert_element_type(np.asarray(cr), dt), shape,
                              tuple(range(len(shape) - np.ndim(cr), len(shape))))
    ci = lax.broadcast_in_dim(lax.convert_element_type(np.asarray(ci), dt), shape,
                              tuple(range(len(shape) - np.ndim(ci), len(shape))))
    return lax.sub(lax.mul(re, cr), lax.mul(im, ci)), lax.add(lax.mul(re, ci), lax.mul(im, cr))


def _swap_last(x):
    nd = aval(x).ndim
    return lax.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _split(n: int) -> int | None:
    """The divisor of n nearest sqrt(n) from below (None for a prime)."""
    for d in range(int(np.sqrt(n)), 1, -1):
        if n % d == 0:
            return d
    return None


def dft(re, im, inverse: bool):
    """The unnormalized transform of re + i im along the last axis (sign + for the inverse)."""
    n = aval(re).shape[-1]
    if n <= 1:
        return re, im
    sign = 1.0 if inverse else -1.0
    if n <= DIRECT_MAX:
        k = np.arange(n)
        w = np.exp(sign * 2j * np.pi * np.outer(k, k) / n)
        return _mm(re, im, w.real, w.imag)
    n1 = _split(n)
    if n1 is None:
        return _bluestein(re, im, inverse)
    n2 = n // n1
    lead = tuple(aval(re).shape[:-1])
    # x[j1*n2 + j2] as a (n1, n2) matrix: transform its columns (over j1), twiddle, then its rows
    re, im = (lax.reshape(v, lead + (n1, n2)) for v in (re, im))
    re, im = dft(_swap_last(re), _swap_last(im), inverse)            # (..., j2, k1)
    j2, k1 = np.arange(n2)[:, None], np.arange(n1)[None, :]
    tw = np.exp(sign * 2j * np.pi * j2 * k1 / n)
    re, im = _cmul_const(re, im, tw.real, tw.imag)
    re, im = dft(_swap_last(re), _swap_last(im), inverse)            # (..., k1, k2)
    # X[k1 + n1*k2]: the (k2, k1) matrix, flattened
    return tuple(lax.reshape(_swap_last(v), lead + (n,)) for v in (re, im))


def _next_pow2(m: int) -> int:
    return 1 << (m - 1).bit_length()


def _bluestein(re, im, inverse: bool):
    n = aval(re).shape[-1]
    m = _next_pow2(2 * n - 1)
    sign = 1.0 if inverse else -1.0
    j = np.arange(n)
    chirp = np.exp(sign * 1j * np.pi * (j * j % (2 * n)) / n)        # (j^2 mod 2n: exact angles)
    lead = tuple(aval(re).shape[:-1])
    are, aim = _cmul_const(re, im, chirp.real, chirp.imag)
    zeros = lax.broadcast_in_dim(lax.convert_element_type(np.zeros((), np.float64), aval(re).dtype),
                                 lead + (m - n,), ())
    are, aim = (lax.concatenate([v, zeros], len(lead)) for v in (are, aim))
    b = np.zeros(m, complex)
    b[:n] = np.conj(chirp)
    b[m - n + 1:] = np.conj(chirp[1:][::-1])
    bf = np.fft.fft(b)                                                # (a constant: its transform too)
    fre, fim = dft(are, aim, False)
    fre, fim = _cmul_const(fre, fim, bf.real, bf.imag)
    cre, cim = dft(fre, fim, True)
    cre, cim = (lax.slice(v, (0,) * len(lead) + (0,), lead + (n,)) for v in (cre, cim))
    scale = chirp / m
    return _cmul_const(cre, cim, scale.real, scale.imag)


__all__ = ["DIRECT_MAX", "dft"]
