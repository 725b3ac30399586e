"""A spectral solver with sprue.numpy.fft: the viscous Burgers equation u_t + u u_x = nu u_xx on
a periodic interval, derivatives taken in Fourier space (rfft / irfft), stepped in time by
classical fourth-order Runge-Kutta inside one compiled fori_loop, with 2/3-rule dealiasing.
tests/e2e/test_spectral_solver.py checks the solution against the same scheme in numpy.

    python examples/spectral_solver.py
"""
from __future__ import annotations

import time

import numpy as np

import sprue
import sprue.numpy as jnp

NU = 0.02
N = 256
STEPS = 400
DT = 1e-3


def wavenumbers(n: int):
    return 2 * np.pi * np.fft.rfftfreq(n, d=2 * np.pi / n)


def rhs(np_, u, k, mask):
    """du/dt of Burgers' equation, in spectral form (the nonlinear term dealiased)."""
    uh = np_.fft.rfft(u)
    ux = np_.fft.irfft(1j * k * uh * mask, n=u.shape[-1])
    uxx = np_.fft.irfft(-(k ** 2) * uh, n=u.shape[-1])
    return -u * ux + NU * uxx


def rk4(np_, u, k, mask, dt):
    k1 = rhs(np_, u, k, mask)
    k2 = rhs(np_, u + 0.5 * dt * k1, k, mask)
    k3 = rhs(np_, u + 0.5 * dt * k2, k, mask)
    k4 = rhs(np_, u + dt * k3, k, mask)
    return u + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


@sprue.qjit(static_argnums=1)
def solve(u0, steps):
    n = u0.shape[-1]
    k = wavenumbers(n)
    mask = (np.abs(k) < (2 / 3) * k.max()).astype(np.float64)
    return sprue.lax.fori_loop(0, steps, lambda i, u: rk4(jnp, u, k, mask, DT), u0)


def solve_numpy(u0, steps):
    k = wavenumbers(u0.shape[-1])
    mask = (np.abs(k) < (2 / 3) * k.max()).astype(np.float64)
    u = u0
    for _ in range(steps):
        u = rk4(np, u, k, mask, DT)
    return u


def initial(n: int = N):
    x = np.linspace(0, 2 * np.pi, n, endpoint=False)
    return np.sin(x) + 0.5 * np.sin(2 * x + 0.3)


if __name__ == "__main__":
    u0 = initial()
    t = time.perf_counter()
    u = solve(u0, STEPS)
    print(f"compiled and solved {STEPS} steps of {N} modes in {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    u = solve(u0, STEPS)
    print(f"again: {1e3 * (time.perf_counter() - t):.1f} ms")
    t = time.perf_counter()
    ref = solve_numpy(u0, STEPS)
    print(f"numpy: {1e3 * (time.perf_counter() - t):.1f} ms; largest difference {np.abs(u - ref).max():.2e}")
