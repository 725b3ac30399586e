"""Monte-Carlo option pricing with sprue.random: the same numbers JAX gives for the same keys.

A European call under Black-Scholes (one normal draw per path, checked against the closed form)
and an arithmetic-average Asian call (a path of daily steps per sample, one key per step by
fold_in inside a compiled loop), priced with 2**18 paths; each function is compiled once for
every path and step count (run-time sizes and trip counts). tests/e2e/test_option_pricer.py compares the prices with JAX's.

    python examples/monte_carlo_option.py
"""
from __future__ import annotations

import math
import time

import sprue
import sprue.numpy as jnp
from sprue import lax, random


@sprue.qjit
def european_call(key, s0, strike, rate, vol, maturity, n_paths):
    """The discounted mean payoff of a call, and its standard error."""
    z = random.normal(key, (n_paths,))
    s_t = s0 * jnp.exp((rate - 0.5 * vol ** 2) * maturity + vol * jnp.sqrt(maturity) * z)
    payoff = jnp.exp(-rate * maturity) * jnp.maximum(s_t - strike, 0.0)
    return jnp.mean(payoff), jnp.std(payoff) / jnp.sqrt(n_paths * 1.0)


@sprue.qjit
def asian_call(key, s0, strike, rate, vol, maturity, n_steps, n_paths):
    """A call on the path's arithmetic average of n_steps prices; step k draws from fold_in(key, k)."""
    dt = maturity / n_steps
    drift, shock = (rate - 0.5 * vol ** 2) * dt, vol * jnp.sqrt(dt)

    def step(k, carry):
        log_s, total = carry
        log_s = log_s + drift + shock * random.normal(random.fold_in(key, k), (n_paths,))
        return log_s, total + jnp.exp(log_s)

    start = jnp.full((n_paths,), jnp.log(s0))
    _, total = lax.fori_loop(0, n_steps, step, (start, jnp.zeros(n_paths)))
    payoff = jnp.exp(-rate * maturity) * jnp.maximum(total / n_steps - strike, 0.0)
    return jnp.mean(payoff), jnp.std(payoff) / jnp.sqrt(n_paths * 1.0)


def black_scholes_call(s0, strike, rate, vol, maturity):
    d1 = (math.log(s0 / strike) + (rate + 0.5 * vol ** 2) * maturity) / (vol * math.sqrt(maturity))
    d2 = d1 - vol * math.sqrt(maturity)
    cdf = lambda x: 0.5 * (1 + math.erf(x / math.sqrt(2)))   # noqa: E731
    return s0 * cdf(d1) - strike * math.exp(-rate * maturity) * cdf(d2)


MARKET = dict(s0=100.0, strike=105.0, rate=0.03, vol=0.25, maturity=1.0)


def main(n_paths: int = 2 ** 18, n_steps: int = 64) -> dict:
    key = random.PRNGKey(2024)
    k_euro, k_asian = random.split(key)
    args = [MARKET[k] for k in ("s0", "strike", "rate", "vol", "maturity")]
    euro, euro_se = european_call(k_euro, *args, n_paths)
    t0 = time.perf_counter()
    euro, euro_se = european_call(k_euro, *args, n_paths)
    t_euro = time.perf_counter() - t0
    asian, asian_se = asian_call(k_asian, *args, n_steps, n_paths)
    t0 = time.perf_counter()
    asian, asian_se = asian_call(k_asian, *args, n_steps, n_paths)
    t_asian = time.perf_counter() - t0
    exact = black_scholes_call(*args)
    print(f"European call: {float(euro):.6f} ± {float(euro_se):.4f} (Black-Scholes {exact:.6f}),"
          f" {n_paths} paths in {t_euro * 1e3:.2f} ms")
    print(f"Asian call:    {float(asian):.6f} ± {float(asian_se):.4f}, {n_paths} paths x {n_steps} steps in"
          f" {t_asian * 1e3:.2f} ms")
    assert abs(float(euro) - exact) < 4 * float(euro_se), "the European price is off the closed form"
    return {"european": float(euro), "european_se": float(euro_se), "asian": float(asian),
            "asian_se": float(asian_se)}


if __name__ == "__main__":
    main()
