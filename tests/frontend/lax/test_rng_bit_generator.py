"""sprue.lax.rng_bit_generator against what JAX 0.10.2 computes on a CPU (XLA's RngBitGenerator:
Philox, its default there, and ThreeFry), recorded by make_rng_bit_generator_data.py: every shape,
dtype and key bit for bit, evaluated and compiled; and the rbg / unsafe_rbg key implementations
JAX builds on it, read from the jaxprs JAX printed."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import sprue
from sprue import lax
from sprue.errors import SprueTypeError, SprueValueError

DATA = Path(__file__).parent / "rng_bit_generator_data"
BITS = np.load(DATA / "bits.npz")
KEYS = np.load(DATA / "keys.npy")
SHAPES = [(), (1,), (5,), (4, 3), (3, 5), (2, 3, 5), (0,), (7, 1)]
DTYPES = ["uint32", "uint8", "uint16", "uint64"]


def _want(algorithm, shape, dtype, k):
    name = f"{algorithm}|{shape}|{dtype}|{k}"
    return BITS[f"{name}:key"], BITS[f"{name}:bits"]


@pytest.mark.parametrize("algorithm", list(lax.RNG_ALGORITHMS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_shape_and_key_is_xlas(algorithm, dtype):
    for shape in SHAPES:
        for k, key in enumerate(KEYS):
            new_key, bits = lax.rng_bit_generator(key, shape, dtype, algorithm)
            want_key, want_bits = _want(algorithm, shape, dtype, k)
            assert bits.dtype == want_bits.dtype and bits.shape == want_bits.shape, (shape, k)
            np.testing.assert_array_equal(new_key, want_key, err_msg=f"{shape} key {k}")
            np.testing.assert_array_equal(bits, want_bits, err_msg=f"{shape} key {k}")


@pytest.mark.parametrize("algorithm", list(lax.RNG_ALGORITHMS))
def test_compiled_is_xlas(algorithm):
    """One library per algorithm draws shapes of each kind (a scalar, odd, even, two odd dimensions)
    in 8, 32 and 64 bits; the key is its argument."""
    cases = [(shape, dtype) for shape in [(), (5,), (4, 3), (3, 5)] for dtype in ["uint8", "uint32", "uint64"]]
    f = sprue.qjit(lambda key: [lax.rng_bit_generator(key, s, d, algorithm) for s, d in cases])
    for k, key in enumerate(KEYS):
        for (shape, dtype), (new_key, bits) in zip(cases, f(key)):
            want_key, want_bits = _want(algorithm, shape, dtype, k)
            np.testing.assert_array_equal(new_key, want_key, err_msg=f"{shape} {dtype} key {k}")
            np.testing.assert_array_equal(bits, want_bits, err_msg=f"{shape} {dtype} key {k}")
            assert bits.dtype == want_bits.dtype


def test_a_batch_of_keys_under_vmap():
    """sprue.vmap draws each key's own bits (JAX's batching rule draws the batch's from its first key;
    the jaxpr reader reproduces that for printed key arrays, test_rbg_and_unsafe_rbg_keys)."""
    f = sprue.vmap(lambda key: lax.rng_bit_generator(key, (4, 3), np.uint32, "RNG_PHILOX"))
    new_keys, bits = f(KEYS)
    for k in range(len(KEYS)):
        want_key, want_bits = _want("RNG_PHILOX", (4, 3), "uint32", k)
        np.testing.assert_array_equal(new_keys[k], want_key)
        np.testing.assert_array_equal(bits[k], want_bits)


@pytest.mark.parametrize("name", ["rbg", "urbg"])
def test_rbg_and_unsafe_rbg_keys(name):
    """Typed keys of JAX's rbg and unsafe_rbg implementations: seeded, split (to a shape), folded
    in, drawn from (also under nested vmaps), as JAX computed them."""
    data = np.load(DATA / f"{name}.npz")
    f = sprue.load(DATA / f"{name}.jaxpr")
    got = f(data["in0"], data["in1"])
    want = [data[f"out{i}"] for i in range(sum(k.startswith("out") for k in data.files))]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-7)   # bits exact; a normal's erf_inv a few ulp


def test_bad_arguments_are_named():
    with pytest.raises(SprueTypeError, match=r"rng_bit_generator takes a uint32\[4\] key .*got uint32\[2\]"):
        lax.rng_bit_generator(np.zeros(2, np.uint32), (3,))
    with pytest.raises(SprueTypeError, match=r"makes unsigned bits .*got dtype int32"):
        lax.rng_bit_generator(KEYS[0], (3,), np.int32)
    with pytest.raises(SprueValueError, match=r"unknown algorithm 'RNG_MT'"):
        lax.rng_bit_generator(KEYS[0], (3,), np.uint32, "RNG_MT")
