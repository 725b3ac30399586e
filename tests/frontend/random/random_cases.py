"""The calls of jax.random whose results tests/frontend/random/make_jax_data.py records with real JAX
and test_random.py compares sprue.random's with. Each case is `(name, seed, exact, call)`: `call(R, key)`
with R either module (the APIs are the same) and key = R.PRNGKey(seed). `exact` cases must agree bit
for bit; the others (values that go through erf_inv or log) within `ULPS` units in the last place."""
from __future__ import annotations

import numpy as np

ULPS = 64   # XLA contracts a*b+c to a fused multiply-add (uniform over [minval, maxval) may differ by an
#             ulp), and its log1p differs from glibc's by an ulp, which erf_inv's polynomial amplifies


def _cases():
    f32, f64, u8, u16, u32, u64, i32, i64 = (np.float32, np.float64, np.uint8, np.uint16, np.uint32, np.uint64,
                                             np.int32, np.int64)
    return [
        ("split3", 0, True, lambda R, k: R.split(k, 3)),
        ("split_shape", 1, True, lambda R, k: R.split(k, (2, 3))),
        ("split_default", 2024, True, lambda R, k: R.split(k)),
        ("fold_in7", 0, True, lambda R, k: R.fold_in(k, 7)),
        ("fold_in_max", 5, True, lambda R, k: R.fold_in(k, 2 ** 32 - 1)),
        ("bits_u32", 0, True, lambda R, k: R.bits(k, (2, 3), u32)),
        ("bits_u64", 3, True, lambda R, k: R.bits(k, (7,), u64)),
        ("bits_u8", 4, True, lambda R, k: R.bits(k, (5, 2), u8)),
        ("bits_u16_scalar", 5, True, lambda R, k: R.bits(k, (), u16)),
        ("uniform_f64", 0, True, lambda R, k: R.uniform(k, (3,))),
        ("uniform_f32", 0, True, lambda R, k: R.uniform(k, (4, 5), f32)),
        ("uniform_range", 11, False, lambda R, k: R.uniform(k, (6,), f64, -2.0, 3.5)),
        ("uniform_bcast", 12, False, lambda R, k: R.uniform(k, (2, 3), f64, np.zeros((1, 3)), np.arange(1.0, 4.0))),
        ("normal_f64", 0, False, lambda R, k: R.normal(k, (2, 3))),
        ("normal_f64_many", 7, False, lambda R, k: R.normal(k, (1000,))),
        ("normal_f32", 8, False, lambda R, k: R.normal(k, (500,), f32)),
        ("randint_i64", 0, True, lambda R, k: R.randint(k, (10,), 0, 100)),
        ("randint_neg", 9, True, lambda R, k: R.randint(k, (3, 4), -50, 7)),
        ("randint_i32", 10, True, lambda R, k: R.randint(k, (8,), -3, 2 ** 31 - 1, i32)),
        ("randint_u8_256", 13, True, lambda R, k: R.randint(k, (9,), 0, 256, u8)),
        ("randint_empty", 14, True, lambda R, k: R.randint(k, (5,), 4, 2)),
        ("randint_full_i64", 15, True, lambda R, k: R.randint(k, (4,), np.iinfo(i64).min, np.iinfo(i64).max)),
        ("randint_arrays", 16, True, lambda R, k: R.randint(k, (2, 3), np.array([0, 10, 100]), np.array([5, 20, 1000]))),
        ("bernoulli", 0, True, lambda R, k: R.bernoulli(k, 0.3, (50,))),
        ("bernoulli_p", 17, True, lambda R, k: R.bernoulli(k, np.linspace(0.0, 1.0, 11))),
        ("bernoulli_high", 18, True, lambda R, k: R.bernoulli(k, 0.5, (20,), mode="high")),
        ("categorical", 0, True, lambda R, k: R.categorical(k, np.log(np.arange(1.0, 21.0)).reshape(4, 5))),
        ("categorical_shape", 19, True, lambda R, k: R.categorical(k, np.linspace(-1.0, 1.0, 6), shape=(7,))),
        ("categorical_axis0", 20, True, lambda R, k: R.categorical(k, np.linspace(-1.0, 1.0, 12).reshape(4, 3), axis=0)),
        ("categorical_noreplace", 21, True,
         lambda R, k: R.categorical(k, np.linspace(-1.0, 1.0, 12).reshape(2, 6), shape=(3, 2), replace=False)),
        ("gumbel", 22, False, lambda R, k: R.gumbel(k, (30,))),
        ("exponential", 23, False, lambda R, k: R.exponential(k, (30,))),
        ("choice_int", 0, True, lambda R, k: R.choice(k, 10, (5,))),
        ("choice_noreplace", 24, True, lambda R, k: R.choice(k, 10, (6,), replace=False)),
        ("choice_p", 25, True, lambda R, k: R.choice(k, 5, (12,), p=np.array([0.1, 0.2, 0.3, 0.15, 0.25]))),
        ("choice_p_noreplace", 26, True,
         lambda R, k: R.choice(k, 5, (3,), replace=False, p=np.array([0.1, 0.2, 0.3, 0.15, 0.25]))),
        ("choice_array_axis1", 27, True, lambda R, k: R.choice(k, np.arange(12.0).reshape(3, 4), (2,), axis=1)),
        ("permutation_int", 0, True, lambda R, k: R.permutation(k, 20)),
        ("permutation_rows", 28, True, lambda R, k: R.permutation(k, np.arange(15.0).reshape(5, 3))),
        ("permutation_axis1_indep", 29, True,
         lambda R, k: R.permutation(k, np.arange(15.0).reshape(3, 5), axis=1, independent=True)),
        ("truncated_normal", 0, False, lambda R, k: R.truncated_normal(k, -1.0, 2.0, (100,))),
        ("truncated_normal_f32", 30, False, lambda R, k: R.truncated_normal(k, -0.5, 0.5, (40,), np.float32)),
        ("gamma", 0, False, lambda R, k: R.gamma(k, np.array([0.1, 0.5, 1.0, 2.0, 7.5, 30.0]))),
        ("gamma_shape_f32", 31, False, lambda R, k: R.gamma(k, 1.5, (3, 4), np.float32)),
        ("loggamma", 32, False, lambda R, k: R.loggamma(k, np.array([0.01, 0.3, 3.0]))),
        ("beta", 33, False, lambda R, k: R.beta(k, 2.0, np.array([0.5, 3.0, 9.0]), (2, 3))),
        ("dirichlet", 34, False, lambda R, k: R.dirichlet(k, np.array([1.0, 2.0, 0.2]), (4,))),
    ]


CASES = _cases()

# seeds of PRNGKey itself (int64 Python ints with 64-bit types on, and typed numpy scalars)
SEEDS = [("zero", 0), ("small", 42), ("minus_one", -1), ("big", 2 ** 40 + 5), ("u32max", 2 ** 32 - 1),
         ("int32_neg", np.int32(-7)), ("uint32", np.uint32(123456789)), ("int64_min", np.int64(-2 ** 63))]
