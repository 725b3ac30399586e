"""Indexing against numpy: every static index form eagerly and traced, random index tuples mixing
ints, slices, None, Ellipsis and (static or traced) integer arrays, and the .at updates."""
import numpy as np
import pytest

import sprue.numpy as jnp
from sprue.api.traced import trace_function
from sprue.base.errors import SprueError
from sprue.numpy._indexing import IndexUpdateHelper, getitem
from sprue.trace.tracing import Tracer, eval_jaxpr
from tests.helpers.numpy_cases import AT_INDICES, STATIC_INDICES, X, assert_matches


def traced(fn, *args):
    t = trace_function(fn, args, {})
    from sprue.base.pytree import tree_unflatten
    return tree_unflatten(t.out_tree, eval_jaxpr(t.closed_jaxpr.jaxpr, t.closed_jaxpr.consts, *args))


@pytest.mark.parametrize("idx", STATIC_INDICES, ids=repr)
def test_getitem_eager(idx):
    try:
        want = X[idx]
    except IndexError:
        with pytest.raises(IndexError):
            getitem(X, idx)
        return
    got = getitem(X, idx)
    assert type(got) is jnp.EagerArray
    assert_matches(got, want)


def _random_index(rng, shape):
    """A random numpy index for `shape`, and the positions of its arrays (to pass them traced)."""
    items, dim, used_ellipsis = [], 0, False
    arr_shape = [(3,), (2, 1), (1, 3), ()][rng.integers(4)]
    while dim < len(shape):
        r = rng.random()
        n = shape[dim]
        if r < 0.2:
            items.append(int(rng.integers(-n, n)))
            dim += 1
        elif r < 0.5:
            start, stop = (int(v) if rng.random() < 0.7 else None for v in rng.integers(-n - 1, n + 2, 2))
            step = [None, 1, 2, -1, -2, 3][rng.integers(6)]
            items.append(slice(start, stop, step))
            dim += 1
        elif r < 0.6:
            items.append(None)
        elif r < 0.67 and not used_ellipsis:
            items.append(Ellipsis)
            used_ellipsis = True
            dim += int(rng.integers(0, len(shape) - dim + 1))
        elif r < 0.9:
            items.append(rng.integers(-n, n, arr_shape))
            dim += 1
        else:
            break
    return tuple(items)


@pytest.mark.parametrize("seed", range(400))
def test_random_indices(seed):
    rng = np.random.default_rng(seed)
    x = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    idx = _random_index(rng, x.shape)
    try:
        want = x[idx]
    except IndexError:
        with pytest.raises(IndexError):
            getitem(x, idx)
        return
    assert_matches(getitem(x, idx), want, where=repr(idx))
    assert_matches(traced(lambda a: a[idx], x), want, where=repr(idx))
    # the same index with its arrays (and ints) traced
    pos = [k for k, i in enumerate(idx) if isinstance(i, (np.ndarray, int))]
    if pos:
        def f(a, *vals):
            full = list(idx)
            for k, v in zip(pos, vals):
                full[k] = v
            return a[tuple(full)]
        vals = [np.asarray(idx[k], np.int64) for k in pos]
        assert_matches(traced(f, x, *vals), want, where=f"traced {idx!r}")
    # and the same index as an update target
    v = rng.integers(0, 9, want.shape).astype(np.float32)
    y = x.copy()
    np.add.at(y, idx, v)
    assert_matches(IndexUpdateHelper(x)[idx].add(v), y, where=f"at {idx!r}")
    if pos:
        assert_matches(traced(lambda a, b, *vals: IndexUpdateHelper(a)[_subst(idx, pos, vals)].add(b), x, v, *vals),
                       y, where=f"traced at {idx!r}")


def _subst(idx, pos, vals):
    full = list(idx)
    for k, v in zip(pos, vals):
        full[k] = v
    return tuple(full)


@pytest.mark.parametrize("op", ["set", "add", "multiply", "min", "max"])
@pytest.mark.parametrize("idx", AT_INDICES, ids=repr)
def test_at_eager(op, idx):
    """x.at[...] on numpy arrays (the helper behind the Tracer property) is eager, as numpy."""
    x = X.astype(np.float32)
    v = np.arange(np.prod(x[idx].shape), dtype=np.float32).reshape(x[idx].shape) + 1
    want = x.copy()
    if op == "set":
        want[idx] = v
    else:
        getattr(np, {"add": "add", "multiply": "multiply", "min": "minimum", "max": "maximum"}[op]).at(want, idx, v)
    got = getattr(IndexUpdateHelper(x)[idx], op)(v)
    assert type(got) is jnp.EagerArray
    assert_matches(got, want)


def test_at_does_not_mutate():
    x = np.zeros(3)
    IndexUpdateHelper(x)[0].set(1.0)
    assert x.tolist() == [0, 0, 0]


def test_iteration_and_len():
    out = traced(lambda a: [r * 2 for r in a] + [len(a)], X[:2, :2, 0])
    assert_matches(out[:2], [X[0, :2, 0] * 2, X[1, :2, 0] * 2])
    assert out[2] == 2


def test_traced_values_stay_traced():
    def f(a):
        assert isinstance(a[0], Tracer) and isinstance(a[[0]], Tracer) and isinstance(a.at[0].set(1.0), Tracer)
        return a
    traced(f, X)


def test_scalar_bool_index_unsupported():
    with pytest.raises(IndexError) as info:
        traced(lambda a: a[True], X)
    assert isinstance(info.value, SprueError) and "boolean scalar" in str(info.value)
