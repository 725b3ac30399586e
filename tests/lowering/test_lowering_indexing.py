"""gather and the scatter family compiled through StableHLO vs their numpy reference rules, in
every mode, with indices in and out of bounds."""
import numpy as np
import pytest

import sprue.lax as lax
from sprue.lax import GatherDimensionNumbers as GDN
from sprue.lax import GatherScatterMode as Mode
from sprue.lax import ScatterDimensionNumbers as SDN
from tests.helpers.lowering_harness import Compiled, assert_same

MODES = [Mode.CLIP, Mode.FILL_OR_DROP, Mode.PROMISE_IN_BOUNDS]


def sample(shape, dt, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dt == "bool":
        return rng.random(shape) > 0.5
    return (rng.normal(size=shape) * 10).astype(dt)


def run_both(fn, *args):
    """Compiled and reference results of fn at args; compared output by output."""
    got = Compiled(fn, *args)(*args)
    want = fn(*args)
    want = want if isinstance(want, (tuple, list)) else [want]
    for i, (g, w) in enumerate(zip(got, want)):
        assert_same(g, np.asarray(w), what=f"output {i}")


# (operand shape, indices, dimension numbers, slice sizes)
GATHERS = {
    "elements": ((10,), [[0], [3], [9], [10], [-1], [25], [-30]],
                 GDN(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,)), (1,)),
    "rows": ((5, 4), [[4], [0], [2], [5], [-2]], GDN(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,)),
             (1, 4)),
    "rows_offset_first": ((5, 4), [[1], [7], [3]], GDN(offset_dims=(0,), collapsed_slice_dims=(0,), start_index_map=(0,)),
                          (1, 4)),
    "points": ((5, 4), [[1, 2], [4, 3], [5, 0], [0, 4], [-1, 1], [2, 2]],
               GDN(offset_dims=(), collapsed_slice_dims=(0, 1), start_index_map=(0, 1)), (1, 1)),
    "windows": ((6, 6), [[0, 0], [4, 3], [5, 5], [3, 4], [-1, 2]],
                GDN(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0, 1)), (2, 3)),
    "swapped_map": ((6, 5), [[1, 4], [4, 0], [2, 5]],
                    GDN(offset_dims=(1,), collapsed_slice_dims=(1,), start_index_map=(1, 0)), (3, 1)),
    "batched_indices": ((8,), [[[1], [2], [9]], [[7], [0], [-4]]],
                        GDN(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,)), (1,)),
}


@pytest.mark.parametrize("case", list(GATHERS))
@pytest.mark.parametrize("mode", MODES)
def test_gather(case, mode):
    shape, idx, dn, sizes = GATHERS[case]
    x = sample(shape, "float64")
    idx = np.array(idx, np.int64)
    run_both(lambda a, i: lax.gather(a, i, dn, sizes, mode=mode), x, idx)


@pytest.mark.parametrize("dt", ["float32", "int32", "uint8", "bool"])
@pytest.mark.parametrize("index_dt", ["int32", "uint8", "int8"])
def test_gather_dtypes_and_fill_values(dt, index_dt):
    shape, idx, dn, sizes = GATHERS["rows"]
    x = sample(shape, dt)
    idx = np.array(np.abs(np.array(idx)) * 3, index_dt)
    fill = {"float32": -1.5, "int32": 77, "uint8": 9, "bool": False}[dt]
    run_both(lambda a, i: (lax.gather(a, i, dn, sizes, mode=Mode.FILL_OR_DROP),
                           lax.gather(a, i, dn, sizes, mode=Mode.FILL_OR_DROP, fill_value=fill),
                           lax.gather(a, i, dn, sizes, mode=Mode.CLIP)), x, idx)


def test_gather_fill_default_is_nan_for_floats_and_extremes_for_ints():
    shape, idx, dn, sizes = GATHERS["elements"]
    idx = np.array(idx, np.int64)
    for dt, want in [("float64", np.nan), ("int32", np.iinfo(np.int32).min), ("uint8", 255), ("bool", True)]:
        x = sample(shape, dt)
        got = Compiled(lambda a, i: lax.gather(a, i, dn, sizes, mode=Mode.FILL_OR_DROP), x, idx)(x, idx)[0]
        outside = (idx[:, 0] < 0) | (idx[:, 0] >= 10)
        np.testing.assert_array_equal(got[outside], np.full(outside.sum(), want, dt))


# (operand shape, indices, updates shape, dimension numbers)
SCATTERS = {
    "elements": ((10,), [[0], [3], [3], [9], [10], [-1], [3], [25]], (8,),
                 SDN(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))),
    "rows": ((5, 4), [[4], [0], [4], [5], [-2], [1]], (6, 4),
             SDN(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))),
    "points": ((5, 4), [[1, 2], [4, 3], [5, 0], [1, 2], [-1, 1], [0, 3]], (6,),
               SDN(update_window_dims=(), inserted_window_dims=(0, 1), scatter_dims_to_operand_dims=(0, 1))),
    "windows": ((6, 6), [[0, 0], [4, 3], [5, 5], [3, 4], [-1, 2], [1, 1]], (6, 2, 3),
                SDN(update_window_dims=(1, 2), inserted_window_dims=(), scatter_dims_to_operand_dims=(0, 1))),
    "batched_indices": ((8,), [[[1], [2], [9]], [[7], [2], [-4]]], (2, 3),
                        SDN(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))),
}
SCATTER_FNS = [lax.scatter, lax.scatter_add, lax.scatter_mul, lax.scatter_min, lax.scatter_max]


@pytest.mark.parametrize("case", list(SCATTERS))
@pytest.mark.parametrize("mode", MODES)
def test_scatter_family(case, mode):
    shape, idx, upd_shape, dn = SCATTERS[case]
    x, u = sample(shape, "float64"), sample(upd_shape, "float64", 1)
    idx = np.array(idx, np.int64)
    run_both(lambda a, i, v: tuple(f(a, i, v, dn, mode=mode) for f in SCATTER_FNS), x, idx, u)


@pytest.mark.parametrize("dt", ["float32", "int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("index_dt", ["int32", "uint8"])
def test_scatter_dtypes(dt, index_dt):
    shape, idx, upd_shape, dn = SCATTERS["rows"]
    x, u = sample(shape, dt), sample(upd_shape, dt, 1)
    idx = np.abs(np.array(idx)).astype(index_dt)
    for mode in (Mode.CLIP, Mode.FILL_OR_DROP):
        run_both(lambda a, i, v: tuple(f(a, i, v, dn, mode=mode) for f in SCATTER_FNS), x, idx, u)


def test_scatter_set_with_duplicate_indices_keeps_the_last_update():
    shape, idx, upd_shape, dn = SCATTERS["elements"]
    x, idx = np.zeros(10), np.array([[2], [5], [2], [2]], np.int64)
    u = np.array([1.0, 2.0, 3.0, 4.0])
    got = Compiled(lambda a, i, v: lax.scatter(a, i, v, dn), x, idx, u)(x, idx, u)[0]
    np.testing.assert_array_equal(got, [0, 0, 4, 0, 0, 2, 0, 0, 0, 0])
