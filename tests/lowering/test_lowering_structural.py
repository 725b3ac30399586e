"""Shape-changing primitives compiled through StableHLO vs their numpy reference rules."""
import numpy as np
import pytest

import sprue.lax as lax
from tests.helpers.lowering_harness import Compiled, check

DTYPES = ["float64", "float32", "int64", "int32", "uint8", "bool"]


def sample(shape, dt, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.normal(size=shape) * 10).astype(dt) if dt != "bool" else rng.random(shape) > 0.5


@pytest.mark.parametrize("dt", DTYPES)
def test_broadcast_reshape_transpose_squeeze(dt):
    x = sample((2, 1, 3), dt)
    check(lambda a: (lax.broadcast_in_dim(a, (4, 2, 5, 3), (1, 2, 3)),
                     lax.broadcast_in_dim(a, (2, 7, 3), (0, 1, 2)),
                     lax.broadcast_in_dim(lax.reshape(a, (6,)), (6, 2), (0,)),
                     lax.reshape(a, (3, 2)), lax.reshape(a, (6,)), lax.transpose(a, (2, 0, 1)),
                     lax.squeeze(a, (1,)), lax.copy_p.bind(a)), x)


def test_broadcast_and_reshape_of_scalars():
    check(lambda s: (lax.broadcast_in_dim(s, (2, 3), ()), lax.reshape(s, (1, 1)),
                     lax.squeeze(lax.reshape(s, (1,)), (0,))), np.float64(2.5))


@pytest.mark.parametrize("dt", DTYPES)
def test_rev_and_concatenate(dt):
    x, y = sample((3, 4), dt), sample((3, 2), dt, 1)
    empty = np.zeros((3, 0), dt)
    check(lambda a, b, e: (lax.rev(a, (0,)), lax.rev(a, (0, 1)), lax.rev(a, ()),
                           lax.concatenate([a, b, e, a], 1), lax.concatenate([a, a], 0)), x, y, empty)


@pytest.mark.parametrize("dt", ["float64", "int32", "bool"])
def test_pad_edges_interior_and_negative(dt):
    x = sample((4, 5), dt)
    v = np.array(1, dt)
    configs = [((1, 2, 0), (0, 0, 0)), ((0, 0, 1), (2, 1, 2)), ((-1, 0, 0), (0, -2, 0)),
               ((-2, 3, 1), (1, -3, 1)), ((0, 0, 0), (-5, 1, 0))]
    check(lambda a, pv: tuple(lax.pad(a, pv, c) for c in configs), x, v)


@pytest.mark.parametrize("dt", DTYPES)
def test_slice_with_strides(dt):
    x = sample((6, 7), dt)
    check(lambda a: (lax.slice(a, (1, 0), (5, 7)), lax.slice(a, (0, 1), (6, 7), (2, 3)),
                     lax.slice(a, (5, 6), (6, 7), (4, 4)), lax.slice(a, (2, 2), (2, 5))), x)


@pytest.mark.parametrize("index_dt", ["int64", "int32", "uint8", "int8"])
def test_dynamic_slice_clamps_start_indices(index_dt):
    x = sample((5, 6), "float64")
    upd = sample((2, 3), "float64", 2)
    starts = [(0, 0), (3, 4), (4, 5), (9, 100), (-1, -7), (127, 2)] if index_dt != "uint8" else \
        [(0, 0), (3, 4), (4, 5), (9, 100), (255, 0), (1, 255)]
    fn = lambda a, u, i, j: (lax.dynamic_slice(a, (i, j), (2, 3)), lax.dynamic_update_slice(a, u, (i, j)),
                             lax.dynamic_slice(a, (i, j), (5, 6)))
    c = Compiled(fn, x, upd, np.array(0, index_dt), np.array(0, index_dt))
    for i, j in starts:
        args = (x, upd, np.array(i, index_dt), np.array(j, index_dt))
        for g, w in zip(c(*args), fn(*args)):
            np.testing.assert_array_equal(g, w, err_msg=f"starts {(i, j)}")


def test_dynamic_slice_mixed_index_dtypes():
    x = sample((4, 4), "int32")
    check(lambda a, i, j: lax.dynamic_slice(a, (i, j), (2, 2)), x, np.int32(3), np.int64(1))


@pytest.mark.parametrize("dt", ["float64", "float32", "int64", "int32", "uint8", "bool"])
def test_iota(dt):
    n = 2 if dt == "bool" else 5
    check(lambda: (lax.iota(dt, n), lax.broadcasted_iota(dt, (n, 3), 0), lax.broadcasted_iota(dt, (2, n), 1)))
