"""Records what JAX 0.10.2 on a CPU computes for lax.rng_bit_generator (XLA's RngBitGenerator) and
for the rbg / unsafe_rbg key implementations built on it, into rng_bit_generator_data/ beside this
file. Run by hand (tests never import JAX):

    /work/jaxvenv/bin/python tests/frontend/lax/make_rng_bit_generator_data.py

bits.npz: for each algorithm, shape, dtype and key (k = keys' index), `{alg}|{shape}|{dtype}|{k}` ->
the new key and the bits, stacked as `...:key` and `...:bits`; keys.npz holds the keys. The shapes
cover XLA's split of the shape in halves (an even dimension first, else the largest; a scalar), the
dtypes its 8/16/32/64-bit paths and a signed result, and one key has its counter's low word all ones
(Philox's 128-bit carry). rbg.jaxpr / urbg.jaxpr (+ .npz): typed keys split, folded in, drawn from.
"""
from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)   # for the uint64 results
HERE = Path(__file__).resolve().parent / "rng_bit_generator_data"
KEYS = np.array([[1, 2, 3, 4], [0x9E3779B9, 7, 0xFFFFFFFF, 0xFFFFFFFF], [0, 0, 0, 0]], np.uint32)
SHAPES = [(), (1,), (5,), (4, 3), (3, 5), (2, 3, 5), (0,), (7, 1)]
DTYPES = ["uint32", "uint8", "uint16", "uint64"]
ALGORITHMS = {"RNG_DEFAULT": lax.RandomAlgorithm.RNG_DEFAULT, "RNG_PHILOX": lax.RandomAlgorithm.RNG_PHILOX,
              "RNG_THREE_FRY": lax.RandomAlgorithm.RNG_THREE_FRY}


def rbg_program(seed, data):
    k = jax.random.key(seed, impl="rbg")
    k1, k2 = jax.random.split(k)
    ks = jax.random.split(jax.random.fold_in(k2, data), (2, 3))
    return (jax.random.uniform(k1, (5,)), jax.random.bits(k2, (3,), jnp.uint8),
            jax.vmap(jax.vmap(lambda k: jax.random.bits(k, (2,))))(ks))


def urbg_program(seed, data):
    k = jax.random.key(seed, impl="unsafe_rbg")
    k1, k2 = jax.random.split(k)
    return (jax.random.normal(k1, (4,)), jax.random.bits(jax.random.fold_in(k2, data), (3,), jnp.uint16),
            jax.random.key_data(jax.random.split(k2, 3)))


def main() -> None:
    HERE.mkdir(exist_ok=True)
    out = {}
    for alg_name, alg in ALGORITHMS.items():
        for shape in SHAPES:
            for dtype in DTYPES:
                for k, key in enumerate(KEYS):
                    new_key, bits = jax.jit(lambda key: lax.rng_bit_generator(key, shape, dtype, alg))(key)
                    out[f"{alg_name}|{shape}|{dtype}|{k}:key"] = np.asarray(new_key)
                    out[f"{alg_name}|{shape}|{dtype}|{k}:bits"] = np.asarray(bits)
    np.savez(HERE / "bits.npz", **out)
    np.save(HERE / "keys.npy", KEYS)
    with jax.enable_x64(False):
        for name, f in (("rbg", rbg_program), ("urbg", urbg_program)):
            args = (np.int32(42), np.int32(7))
            (HERE / f"{name}.jaxpr").write_text(str(jax.make_jaxpr(f)(*args)) + "\n")
            outs = [np.asarray(o) for o in jax.tree_util.tree_leaves(jax.jit(f)(*args))]
            np.savez(HERE / f"{name}.npz", **{f"in{i}": a for i, a in enumerate(args)},
                     **{f"out{i}": o for i, o in enumerate(outs)})


if __name__ == "__main__":
    main()
