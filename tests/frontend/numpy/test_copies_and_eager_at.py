"""numpy's copy family in sprue.numpy (issue 22): copy, array(copy=...), asarray, empty_like,
full_like behave as numpy's (eagerly: which results share memory with the input) and as JAX's
(traced); arrays computed eagerly have `.at[...]` as jax.Array does."""
import numpy as np
import pytest

import sprue
import sprue.numpy as jnp

X = np.arange(6.0).reshape(2, 3)


def test_copy_shares_no_memory_and_keeps_values():
    for make in (lambda x: jnp.copy(x), lambda x: jnp.array(x), lambda x: jnp.array(x, copy=True),
                 lambda x: jnp.asarray(x, copy=True)):
        got = make(X)
        assert not np.shares_memory(got, X)
        np.testing.assert_array_equal(got, X)
        assert got.dtype == X.dtype and got.shape == X.shape
    assert jnp.copy(3.0) == np.copy(3.0) and jnp.copy([1, 2]).tolist() == [1, 2]


def test_asarray_and_copy_false_return_the_same_memory_as_numpy():
    for make, same in ((lambda x: jnp.asarray(x), True), (lambda x: jnp.array(x, copy=False), True),
                       (lambda x: jnp.array(x, copy=None), True), (lambda x: jnp.asarray(x, dtype=np.float32), False)):
        got = make(X)
        want = {True: np.asarray(X), False: np.asarray(X, dtype=np.float32)}[same]
        assert np.shares_memory(got, X) == np.shares_memory(want, X) == same
        np.testing.assert_array_equal(got, want)
    with pytest.raises(sprue.SprueTypeError, match=r"copy must be True, False or None, got 'yes'"):
        jnp.array(X, copy="yes")


@pytest.mark.parametrize("fn, np_fn, args", [
    (jnp.full_like, np.full_like, (2.5,)), (jnp.empty_like, np.zeros_like, ()),
    (jnp.zeros_like, np.zeros_like, ()), (jnp.ones_like, np.ones_like, ())])
@pytest.mark.parametrize("kw", [{}, {"dtype": np.int32}, {"shape": (4,)}, {"dtype": np.float32, "shape": (1, 2)}])
def test_like_functions_eager_and_compiled(fn, np_fn, args, kw):
    want = np_fn(X, *args, **kw)              # empty_like: sprue gives zeros (no uninitialized memory)
    for got in (fn(X, *args, **kw), sprue.qjit(lambda x: fn(x, *args, **kw))(X)):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_copies_inside_a_trace():
    f = sprue.qjit(lambda x: jnp.copy(x) * 2.0 + jnp.asarray(x) + jnp.array(x, copy=True))
    np.testing.assert_array_equal(f(X), X * 4.0)
    np.testing.assert_array_equal(sprue.grad(lambda x: jnp.sum(jnp.copy(x) ** 2))(X), 2 * X)


def test_eager_arrays_have_at():
    a = jnp.sin(X)
    b = a.at[0, 1].set(10.0)
    want = np.sin(X)
    assert isinstance(a, np.ndarray) and type(b) is jnp.EagerArray
    np.testing.assert_array_equal(a, want)                       # a is unchanged
    want_b = want.copy()
    want_b[0, 1] = 10.0
    np.testing.assert_array_equal(b, want_b)
    c = (a + 1.0).at[:, 0].add(5.0)                             # arithmetic keeps .at
    want_c = want + 1.0
    want_c[:, 0] += 5.0
    np.testing.assert_allclose(c, want_c)
    idx = np.array([0, 2, 2])
    d = jnp.zeros(3).at[idx].add(1.0)                            # repeated indices accumulate, as np.add.at
    np.testing.assert_array_equal(d, np.bincount(idx, minlength=3).astype(float))
    np.testing.assert_array_equal(jnp.asarray(X).at[1].multiply(2.0), X * [[1], [2]])
    np.testing.assert_array_equal(jnp.array([1, 5, 3]).at[1].min(2), [1, 2, 3])
    assert repr(jnp.zeros(2)) == repr(np.zeros(2))


def test_eager_arrays_are_numpy_arrays_for_qjit_and_pickle():
    import pickle
    a = jnp.cos(X)
    f = sprue.qjit(lambda x: x * 2.0)
    np.testing.assert_array_equal(f(a), np.cos(X) * 2.0)
    back = pickle.loads(pickle.dumps(a))
    assert type(back) is np.ndarray
    np.testing.assert_array_equal(back, np.cos(X))


def test_eager_arrays_take_the_fast_call_path():
    from sprue.runtime import fastcall
    f = sprue.qjit(lambda x: x * 2.0)
    a = jnp.sin(X)
    np.testing.assert_array_equal(f(a), np.sin(X) * 2.0)
    key = f._fast_key((a,))
    assert key is not None and key in f._plans
    got = f._plans[key]((jnp.cos(X),))
    assert got is not fastcall.MISS
    np.testing.assert_array_equal(got, np.cos(X) * 2.0)
