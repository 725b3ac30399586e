"""sprue.random: jax.random's API with JAX's numbers for the same key (the threefry2x32 generator,
bit for bit). Keys are ordinary uint32[2] arrays (JAX's raw PRNGKey form): they trace, loop, vmap
and compile like any array.

    key = sprue.random.PRNGKey(0)
    key, sub = sprue.random.split(key)
    x = sprue.random.normal(sub, (1000,))          # jax.random.normal(sub, (1000,)) with x64 on
"""
from __future__ import annotations

from sprue.random._gamma import beta, dirichlet, gamma, loggamma
from sprue.random._keys import PRNGKey, bits, fold_in, key, key_data, split, wrap_key_data
from sprue.random._samplers import (
    bernoulli,
    categorical,
    choice,
    exponential,
    gumbel,
    normal,
    permutation,
    randint,
    truncated_normal,
    uniform,
)

__all__ = ["PRNGKey", "bernoulli", "beta", "bits", "categorical", "choice", "dirichlet", "exponential", "fold_in",
           "gamma", "gumbel", "key", "key_data", "loggamma", "normal", "permutation", "randint", "split",
           "truncated_normal", "uniform", "wrap_key_data"]
