"""The generated-code speed levers keep numpy's results: blocked/vectorized matmul (lowering/matmul.py),
reassociated reductions (lowering/fastmath.py), vector math from libmvec (backend.use_vector_math)."""
import numpy as np
import pytest

import sprue
import sprue.numpy as snp
from sprue.lowering.matmul import plan


@pytest.mark.parametrize("m,k,n", [(64, 64, 64), (100, 30, 40), (33, 17, 64), (1, 128, 256), (128, 128, 1), (250, 300, 200)])
def test_matmul_shapes(m, k, n):
    rng = np.random.default_rng(m * n + k)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    np.testing.assert_allclose(sprue.qjit(lambda a, b: a @ b)(a, b), a @ b, rtol=1e-12, atol=1e-12)


def test_matmul_plan_divides():
    (mc, nc, kc), (mr, nr) = plan(1000, 1000, 100)
    assert 1000 % mc == 0 and 1000 % nc == 0 and 100 % kc == 0 and mc % mr == 0 and nc % nr == 0
    assert plan(7, 5, 3) is None and plan(64, 64, 63) is not None and plan(64, 63, 64) is None


def test_matmul_in_loop_and_f32():
    a = np.random.default_rng(1).standard_normal((64, 64))
    f = sprue.qjit(lambda a: sprue.lax.fori_loop(0, 3, lambda i, x: (x @ a) * 0.1, a))
    ref = a
    for _ in range(3):
        ref = (ref @ a) * 0.1
    np.testing.assert_allclose(f(a), ref, rtol=1e-12, atol=1e-14)
    a32 = a.astype(np.float32)
    np.testing.assert_allclose(sprue.qjit(lambda a: a @ a)(a32), a32 @ a32, rtol=1e-4, atol=1e-4)


def test_reassociated_sum_is_accurate():
    x = np.random.default_rng(2).uniform(-1, 1, 1_000_003)
    assert abs(sprue.qjit(lambda x: snp.sum(x))(x) - np.sum(x)) <= 1e-12 * np.sum(np.abs(x))


@pytest.mark.parametrize("name", ["sin", "cos", "exp", "log", "log2", "log10", "exp2", "tan"])
def test_vector_math_accuracy_and_special_values(name):
    rng = np.random.default_rng(3)
    if name.startswith("exp"):
        x = rng.uniform(-700, 700, 20_000)
    elif name.startswith("log"):
        x = rng.uniform(0, 1e10, 20_000)
    else:
        x = np.concatenate([rng.uniform(-10, 10, 20_000), rng.uniform(-1e6, 1e6, 100), [1e300]])
    x = np.concatenate([x, [np.inf, -np.inf, np.nan, 0.0, -0.0, 5e-324]])
    fn = getattr(snp, name)
    with np.errstate(all="ignore"):
        got, want = sprue.qjit(lambda x: fn(x))(x), getattr(np, name)(x)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)
