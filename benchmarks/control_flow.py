"""Control-flow benchmarks: loops whose bodies numpy runs from Python, one trip at a time.

    logistic_map    1000 trips of x = r x (1 - x) over a 1e4 vector (fori_loop, carried in place)
    newton_sqrt     Newton's iteration for sqrt over a 1e4 vector, to a tolerance (while_loop)
    newton_scalar   the same on one float: per-trip overhead, not arithmetic (sprue's time is
                    mostly its ~10 us per-call cost in the runtime, not the loop)
    at_set          x.at[i].set(2 x[i] + 1) for every i of a 1e5 vector (fori_loop): a sanity
                    check that the carried vector is updated in place — a copy per trip would make
                    this 1e10 element copies, thousands of times slower than numpy

Each benchmark gives its implementations by name; run.py times them and reports ratios to numpy.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import sprue
import sprue.numpy as snp
from sprue import lax

TRIPS = 1000
N = 10_000
TOL = 1e-12


@dataclass
class Benchmark:
    name: str
    args: tuple
    impls: dict[str, Callable] = field(default_factory=dict)


# -- logistic map -----------------------------------------------------------------------------------
def logistic_numpy(x, r):
    for _ in range(TRIPS):
        x = r * x * (1.0 - x)
    return x


@sprue.qjit
def logistic_sprue(x, r):
    return lax.fori_loop(0, TRIPS, lambda i, x: r * x * (1.0 - x), x)


# -- Newton's sqrt ----------------------------------------------------------------------------------
def newton_numpy(a):
    x = a.copy()
    while np.max(np.abs(x * x - a) / a) > TOL:
        x = 0.5 * (x + a / x)
    return x


@sprue.qjit
def newton_sprue(a):
    @sprue.while_loop(lambda x: snp.max(snp.abs(x * x - a) / a) > TOL)
    def loop(x):
        return 0.5 * (x + a / x)
    return loop(a)


def newton_scalar_python(a):
    x = a
    while abs(x * x - a) > TOL * a:
        x = 0.5 * (x + a / x)
    return x


@sprue.qjit
def newton_scalar_sprue(a):
    return lax.while_loop(lambda x: snp.abs(x * x - a) > TOL * a, lambda x: 0.5 * (x + a / x), a)


# -- x.at[i].set on a carried vector --------------------------------------------------------------
def at_set_numpy(x):
    x = x.copy()
    for i in range(len(x)):
        x[i] = x[i] * 2.0 + 1.0
    return x


@sprue.qjit
def at_set_sprue(x):
    return lax.fori_loop(0, x.shape[0], lambda i, c: c.at[i].set(c[i] * 2.0 + 1.0), x)


def _optional_impls(bench: str) -> dict[str, Callable]:
    """The same loops in JAX and Numba, when they are installed (never required)."""
    impls: dict[str, Callable] = {}
    if importlib.util.find_spec("jax") is not None:
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        from jax import lax as jlax
        jitted = {
            "logistic_map": jax.jit(lambda x, r: jlax.fori_loop(0, TRIPS, lambda i, x: r * x * (1.0 - x), x)),
            "newton_sqrt": jax.jit(lambda a: jlax.while_loop(
                lambda x: jnp.max(jnp.abs(x * x - a) / a) > TOL, lambda x: 0.5 * (x + a / x), a)),
            "newton_scalar": jax.jit(lambda a: jlax.while_loop(
                lambda x: jnp.abs(x * x - a) > TOL * a, lambda x: 0.5 * (x + a / x), a)),
            "at_set": jax.jit(lambda x: jlax.fori_loop(0, x.shape[0], lambda i, c: c.at[i].set(c[i] * 2.0 + 1.0), x)),
        }
        impls["jax"] = lambda *args, f=jitted[bench]: np.asarray(f(*args).block_until_ready())
    if importlib.util.find_spec("numba") is not None:
        import numba
        python = {"logistic_map": logistic_numpy, "newton_sqrt": newton_numpy, "newton_scalar": newton_scalar_python,
                  "at_set": at_set_numpy}
        impls["numba"] = numba.njit(python[bench])
    return impls


def benchmarks() -> list[Benchmark]:
    rng = np.random.default_rng(0)
    x = rng.uniform(0.1, 0.9, N)
    a = rng.uniform(1.0, 1e6, N)
    out = [
        Benchmark("logistic_map", (x, 3.7), {"numpy": logistic_numpy, "sprue": logistic_sprue}),
        Benchmark("newton_sqrt", (a,), {"numpy": newton_numpy, "sprue": newton_sprue}),
        Benchmark("newton_scalar", (12345.678,), {"numpy": newton_scalar_python, "sprue": newton_scalar_sprue}),
        Benchmark("at_set", (rng.uniform(0.0, 1.0, 100_000),), {"numpy": at_set_numpy, "sprue": at_set_sprue}),
    ]
    for b in out:
        b.impls.update(_optional_impls(b.name))
    return out
