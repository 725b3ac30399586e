"""JAX 0.10.2's prices for examples/monte_carlo_option.py's options (the same algorithm written with
jax.random, jax.numpy and lax.fori_loop), into option_pricer_jax.json beside this file. Run by hand
(tests never import JAX):

    /work/jaxvenv/bin/python tests/e2e/make_option_pricer_data.py
"""
from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
from jax import lax, random

jax.config.update("jax_enable_x64", True)
MARKET = dict(s0=100.0, strike=105.0, rate=0.03, vol=0.25, maturity=1.0)


def european_call(key, s0, strike, rate, vol, maturity, n_paths):
    z = random.normal(key, (n_paths,))
    s_t = s0 * jnp.exp((rate - 0.5 * vol ** 2) * maturity + vol * jnp.sqrt(maturity) * z)
    payoff = jnp.exp(-rate * maturity) * jnp.maximum(s_t - strike, 0.0)
    return jnp.mean(payoff), jnp.std(payoff) / jnp.sqrt(n_paths * 1.0)


def asian_call(key, s0, strike, rate, vol, maturity, n_steps, n_paths):
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


def prices(n_paths, n_steps):
    k_euro, k_asian = random.split(random.PRNGKey(2024))
    args = [MARKET[k] for k in ("s0", "strike", "rate", "vol", "maturity")]
    euro, euro_se = jax.jit(european_call, static_argnums=(6,))(k_euro, *args, n_paths)
    asian, asian_se = jax.jit(asian_call, static_argnums=(6, 7))(k_asian, *args, n_steps, n_paths)
    return {"european": float(euro), "european_se": float(euro_se), "asian": float(asian),
            "asian_se": float(asian_se)}


def main():
    runs = {f"{n}x{s}": prices(n, s) for n, s in ((2 ** 18, 64), (1000, 64), (777, 12))}
    out = Path(__file__).with_name("option_pricer_jax.json")
    out.write_text(json.dumps({"jax": jax.__version__, "runs": runs}, indent=1) + "\n")
    print(out.read_text())


if __name__ == "__main__":
    main()
