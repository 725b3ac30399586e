"""Records jax.random's results for random_cases.py's calls (and PRNGKey's of SEEDS), and the
jaxprs JAX prints for a few programs using jax.random with their inputs and outputs, into
jax_random_data.npz and jax_random_jaxprs/ beside this file. Run by hand with JAX 0.10.2 (tests
never import JAX):

    /work/jaxvenv/bin/python tests/frontend/random/make_jax_data.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.extend.random  # noqa: F401  (threefry_2x32)
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)   # sprue's defaults are 64-bit
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from random_cases import CASES, SEEDS  # noqa: E402


def _programs():
    """(name, function, inputs): printed with jax.make_jaxpr, run with jax.jit."""
    key = np.asarray(jax.random.PRNGKey(3))

    def mc(key, s0):
        z = jax.random.normal(key, (64,))
        return jnp.mean(jnp.maximum(s0 * jnp.exp(0.2 * z) - 1.0, 0.0))

    def loop(key):
        def body(i, carry):
            k, acc = carry
            k, sub = jax.random.split(k)
            return k, acc + jax.random.uniform(sub, (4,))
        return jax.lax.fori_loop(0, 5, body, (key, jnp.zeros(4)))[1]

    return [
        ("seed_uniform", lambda s: jax.random.uniform(jax.random.PRNGKey(s), (3,)), (np.int64(5),)),
        ("split_fold", lambda k: jax.random.fold_in(jax.random.split(k, 3)[1], 9), (key,)),
        ("bits_normal", lambda k: (jax.random.bits(k, (2, 3), jnp.uint32), jax.random.normal(k, (5,))), (key,)),
        ("typed_key", lambda s: jax.random.uniform(jax.random.fold_in(jax.random.key(s), 4), (2, 2)), (np.int64(11),)),
        ("randint", lambda k: jax.random.randint(k, (6,), 0, 10), (key,)),
        ("vmap_keys", lambda k: jax.vmap(lambda kk: jax.random.uniform(kk, (3,)))(jax.random.split(k, 4)), (key,)),
        ("threefry_raw", lambda a, b: jax.extend.random.threefry_2x32((a, b), jnp.arange(6, dtype=jnp.uint32)),
         (np.uint32(1), np.uint32(2))),
        ("monte_carlo", mc, (key, np.float64(1.1))),
        ("bits_chain", lambda s: jax.random.bits(jax.random.fold_in(jax.random.split(jax.random.PRNGKey(s))[0], 3),
                                                 (4,), jnp.uint32), (np.int64(-3),)),
        ("vmap_bits", lambda k: jax.vmap(lambda kk: jax.random.bits(kk, (3,), jnp.uint64))(jax.random.split(k, 4)),
         (key,)),
        ("vmap_fold_in", lambda k, d: jax.vmap(lambda x: jax.random.fold_in(k, x))(d),
         (key, np.arange(5, dtype=np.uint32))),
        ("typed_key_arg", lambda k: jax.random.key_data(jax.random.split(k, 3)), (jax.random.key(8),)),
        ("loop_split", loop, (key,)),
    ]


def main():
    data = {}
    for name, seed, _exact, call in CASES:
        data[f"case/{name}"] = np.asarray(call(jax.random, jax.random.PRNGKey(seed)))
    for name, seed in SEEDS:
        data[f"seed/{name}"] = np.asarray(jax.random.PRNGKey(seed))
    out = HERE / "jax_random_jaxprs"
    out.mkdir(exist_ok=True)
    for name, fn, args in _programs():
        (out / f"{name}.jaxpr").write_text(str(jax.make_jaxpr(fn)(*args)) + "\n")
        results = jax.jit(fn)(*args)
        results = results if isinstance(results, tuple) else (results,)
        raw = [jax.random.key_data(a) if jnp.issubdtype(a.dtype, jax.dtypes.prng_key) else a for a in args]
        np.savez(out / f"{name}.npz", **{f"in{i}": np.asarray(a) for i, a in enumerate(raw)},
                 **{f"out{i}": np.asarray(r) for i, r in enumerate(results)})
    np.savez(HERE / "jax_random_data.npz", **data)
    print(f"jax {jax.__version__}: {len(data)} arrays, {len(_programs())} jaxprs")


if __name__ == "__main__":
    main()
