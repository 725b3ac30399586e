"""sprue.random against jax.random's numbers (recorded by make_jax_data.py with JAX 0.10.2,
random_cases.py's calls), eager and compiled; keys in loops, under vmap and with sizes known only
at run time; the threefry2x32 primitive; errors."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from tests.frontend.random.random_cases import CASES, SEEDS, ULPS
from tests.helpers.ulp import ulp_distance

R = sprue.random
DATA = np.load(Path(__file__).with_name("jax_random_data.npz"))


def _check(name, exact, got):
    want = DATA[f"case/{name}"]
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        # within ULPS ulp, or ULPS ulp of the largest value (a value near 0 from erf_inv(u), u near 0)
        scale = np.abs(want).max() * np.finfo(want.dtype).eps
        close = (ulp_distance(got, want) <= ULPS) | (np.abs(got - want) <= ULPS * scale)
        assert close.all(), (got[~close], want[~close])


@pytest.mark.parametrize("name,seed,exact,call", CASES, ids=[c[0] for c in CASES])
def test_eager_matches_jax(name, seed, exact, call):
    _check(name, exact, call(R, R.PRNGKey(seed)))


@pytest.mark.parametrize("name,seed,exact,call", CASES, ids=[c[0] for c in CASES])
def test_compiled_matches_jax(name, seed, exact, call):
    f = sprue.qjit(lambda k: call(R, k))
    _check(name, exact, f(np.asarray(R.PRNGKey(seed))))


@pytest.mark.parametrize("name,seed", SEEDS, ids=[s[0] for s in SEEDS])
def test_seeds(name, seed):
    np.testing.assert_array_equal(R.PRNGKey(seed), DATA[f"seed/{name}"])
    np.testing.assert_array_equal(R.key(seed), DATA[f"seed/{name}"])


def test_traced_seed():
    f = sprue.qjit(lambda s: R.uniform(R.PRNGKey(s), (3,)))
    np.testing.assert_array_equal(f(np.int64(0)), DATA["case/uniform_f64"])


def test_threefry2x32_known_answer_and_compiled():
    """Random123's known answer for key (0, 0), counter (0, 0) (kat_vectors: threefry2x32_20),
    and the compiled hash against the numpy reference over 100003 counters (a vector loop's tail)."""
    z = np.zeros((), np.uint32)
    a, b = lax.threefry2x32(z, z, z, z)
    assert (int(a), int(b)) == (0x6B200159, 0x99BA4EFE)
    f = sprue.qjit(lambda k1, k2, x1, x2: lax.threefry2x32(k1, k2, x1, x2))
    rng = np.random.default_rng(0)
    x1, x2 = (rng.integers(0, 2 ** 32, 100003, dtype=np.uint32) for _ in range(2))
    got = f(np.uint32(0x12345678), np.uint32(0x9ABCDEF0), x1, x2)
    want = lax.threefry2x32(np.uint32(0x12345678), np.uint32(0x9ABCDEF0), x1, x2)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert "threefry2x32" in str(sprue.make_jaxpr(lambda k: R.bits(k, (4,)))(R.PRNGKey(0)))


def _split_chain(key, n):
    """The keys a loop of n splits visits, and its uniform draws, computed step by step eagerly."""
    draws = []
    for _ in range(n):
        key, sub = R.split(key)
        draws.append(R.uniform(sub, (4,)))
    return np.stack(draws)


def test_keys_in_loops():
    def body(i, carry):
        key, out = carry
        key, sub = R.split(key)
        return key, out.at[i].set(R.uniform(sub, (4,)))

    f = sprue.qjit(lambda k: lax.fori_loop(0, 6, body, (k, jnp.zeros((6, 4))))[1])
    key = R.PRNGKey(7)
    np.testing.assert_array_equal(f(key), _split_chain(key, 6))

    def folded(k):   # fold_in of the loop index: a key per trip
        return lax.fori_loop(0, 5, lambda i, acc: acc + R.normal(R.fold_in(k, i), (3,)), jnp.zeros(3))
    want = sum(R.normal(R.fold_in(key, i), (3,)) for i in range(5))
    np.testing.assert_allclose(sprue.qjit(folded)(key), want, rtol=1e-13)


def test_vmap_over_keys():
    keys = R.split(R.PRNGKey(3), 4)
    want = np.stack([R.uniform(k, (3,)) for k in keys])
    np.testing.assert_array_equal(sprue.vmap(lambda k: R.uniform(k, (3,)))(keys), want)
    np.testing.assert_array_equal(sprue.qjit(sprue.vmap(lambda k: R.uniform(k, (3,))))(keys), want)
    want_i = np.stack([R.randint(k, (5,), 0, 9) for k in keys])
    np.testing.assert_array_equal(sprue.qjit(sprue.vmap(lambda k: R.randint(k, (5,), 0, 9)))(keys), want_i)
    # fold_in mapped over data, one key
    data = np.arange(4, dtype=np.uint32)
    want_f = np.stack([R.fold_in(keys[0], int(d)) for d in data])
    np.testing.assert_array_equal(sprue.vmap(lambda d: R.fold_in(keys[0], d))(data), want_f)


def test_dynamic_shapes():
    """One compilation draws for every size; the draws are the static ones (JAX's stream depends
    only on the key and the element's position)."""
    f = sprue.qjit(lambda k, x: x + R.normal(k, x.shape), abstracted_axes=(None, {0: "n"}))
    g = sprue.qjit(lambda k, x: R.randint(k, (x.shape[0], 3), 0, 1000), abstracted_axes=(None, {0: "n"}))
    key = R.PRNGKey(1)
    for n in (1, 7, 1000):
        x = np.zeros(n)
        np.testing.assert_allclose(f(key, x), R.normal(key, (n,)), rtol=1e-15)
        np.testing.assert_array_equal(g(key, x), R.randint(key, (n, 3), 0, 1000))
    assert f.compile_count == 1 and g.compile_count == 1
    np.testing.assert_array_equal(DATA["case/normal_f64_many"][:0], f(R.PRNGKey(7), np.zeros(0)))


def test_statistics():
    """Sanity of the distributions themselves, on many draws (a broken bit path would show)."""
    key = R.PRNGKey(0)
    u = sprue.qjit(lambda k: R.uniform(k, (200000,)))(key)
    assert abs(u.mean() - 0.5) < 0.005 and u.min() >= 0.0 and u.max() < 1.0
    z = sprue.qjit(lambda k: R.normal(k, (200000,), np.float32))(key)
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1.0) < 0.01
    t = R.truncated_normal(key, -1.0, 2.0, (20000,))
    assert t.min() > -1.0 and t.max() < 2.0
    r = R.randint(key, (100000,), 3, 8)
    assert set(np.unique(r)) == {3, 4, 5, 6, 7}


@pytest.mark.parametrize("call,message", [
    (lambda: R.uniform(np.zeros(2, np.int64)), "sprue.random.uniform: expected a single key, a uint32[2] array,"
                                               " got i64[2]"),
    (lambda: R.normal(R.split(R.PRNGKey(0), 3)), "for a batch of keys, map the function over them with sprue.vmap"),
    (lambda: R.PRNGKey(1.5), "sprue.random.PRNGKey: a seed must be an integer, got float 1.5"),
    (lambda: R.PRNGKey(0, impl="rbg"), "sprue implements JAX's default generator only"),
    (lambda: R.fold_in(R.PRNGKey(0), np.arange(3)), "fold_in takes a scalar integer"),
    (lambda: R.fold_in(R.PRNGKey(0), -1), "data=-1 does not fit uint32"),
    (lambda: R.bits(R.PRNGKey(0), (3,), np.int32), "dtype must be an unsigned integer dtype, got int32"),
    (lambda: R.uniform(R.PRNGKey(0), (3,), np.int32), "dtype must be float32 or float64, got int32"),
    (lambda: R.uniform(R.PRNGKey(0), (3,), np.float64, np.zeros(4)), "the parameter shape (4,) does not"
                                                                      " broadcast to shape (3,)"),
    (lambda: R.choice(R.PRNGKey(0), 3, (5,), replace=False), "cannot take a larger sample (size 5)"),
    (lambda: R.randint(R.PRNGKey(0), (2,), 0, 5, np.float64), "dtype must be an integer dtype, got float64"),
])
def test_errors(call, message):
    with pytest.raises(sprue.SprueError) as e:
        call()
    assert message in str(e.value)
    assert "test_random.py" in str(e.value)


def test_saved_program_round_trip(tmp_path):
    """sprue.save writes threefry2x32 equations; sprue.load reads them back and computes the same."""
    f = sprue.qjit(lambda k, x: x * R.normal(k, x.shape) + R.randint(k, x.shape, 0, 5), abstracted_axes=(None, {0: "n"}))
    key, x = np.asarray(R.PRNGKey(4)), np.linspace(0.0, 1.0, 6)
    want = f(key, x)
    g = sprue.load(sprue.save(f, tmp_path / "mc.jaxpr"))
    assert "threefry2x32" in (tmp_path / "mc.jaxpr").read_text()
    np.testing.assert_array_equal(g(key, x), want)
    np.testing.assert_array_equal(g(key, np.ones(3)), f(key, np.ones(3)))
