"""The Python legalization of sort / scatter / while / if / case, end to end.

Each test writes a small StableHLO module, compiles it to a .so and compares
what `main` returns with numpy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from tests.helpers.stablehlo_kernels import compile_kernel

# ---------------------------------------------------------------------------
# sort
# ---------------------------------------------------------------------------


def _ty(shape: tuple[int, ...], elem: str) -> str:
    dims = "x".join("?" if s is None else str(s) for s in shape)
    return f"tensor<{dims}x{elem}>" if shape else f"tensor<{elem}>"


def sort_module(shape: tuple, elems: list[str], dim: int, body: str, *, stable: bool = True,
                iota_operand: bool = False) -> str:
    """A module sorting its arguments (plus an i32 iota along `dim` if asked)."""
    args = [f"%a{i}: {_ty(shape, e)}" for i, e in enumerate(elems)]
    operands = [f"%a{i}" for i in range(len(elems))]
    types = [_ty(shape, e) for e in elems]
    prelude = ""
    if iota_operand:
        prelude = f"%iota = stablehlo.iota dim = {dim % len(shape)} : {_ty(shape, 'i32')}\n"
        operands.append("%iota")
        types.append(_ty(shape, "i32"))
        elems = elems + ["i32"]
    block_args = ", ".join(f"%{side}{i}: tensor<{e}>" for i, e in enumerate(elems) for side in "xy")
    return f"""
func.func @main({", ".join(args)}) -> ({", ".join(types)}) {{
  {prelude}
  %r:{len(types)} = "stablehlo.sort"({", ".join(operands)}) ({{
  ^bb0({block_args}):
    {body}
  }}) {{dimension = {dim} : i64, is_stable = {str(stable).lower()}}} : ({", ".join(types)}) -> ({", ".join(types)})
  return {", ".join(f"%r#{i}" for i in range(len(types)))} : {", ".join(types)}
}}"""


def less_than(elem: str, direction: str = "LT", compare_type: str = "") -> str:
    suffix = f", {compare_type}" if compare_type else ""
    return (f"%c = stablehlo.compare {direction}, %x0, %y0{suffix} : "
            f"(tensor<{elem}>, tensor<{elem}>) -> tensor<i1>\n    stablehlo.return %c : tensor<i1>")


@pytest.mark.parametrize("n", [0, 1, 2, 7, 1000])
def test_sort_1d(tmp_path: Path, n: int) -> None:
    k = compile_kernel(sort_module((n,), ["f64"], 0, less_than("f64")), tmp_path)
    a = np.random.default_rng(n).normal(size=n)
    np.testing.assert_array_equal(k(a)[0], np.sort(a))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_sort_2d_each_axis(tmp_path: Path, dim: int) -> None:
    k = compile_kernel(sort_module((5, 8), ["f32"], dim, less_than("f32")), tmp_path)
    a = np.random.default_rng(1).normal(size=(5, 8)).astype(np.float32)
    np.testing.assert_array_equal(k(a)[0], np.sort(a, axis=dim))


def test_sort_3d_middle_axis_int(tmp_path: Path) -> None:
    k = compile_kernel(sort_module((3, 17, 4), ["i32"], 1, less_than("i32")), tmp_path)
    a = np.random.default_rng(2).integers(-50, 50, size=(3, 17, 4)).astype(np.int32)
    np.testing.assert_array_equal(k(a)[0], np.sort(a, axis=1))


def test_sort_descending(tmp_path: Path) -> None:
    k = compile_kernel(sort_module((100,), ["i64"], 0, less_than("i64", "GT")), tmp_path)
    a = np.random.default_rng(3).integers(-10**12, 10**12, size=100)
    np.testing.assert_array_equal(k(a)[0], np.sort(a)[::-1])


def test_sort_unsigned_compares_unsigned(tmp_path: Path) -> None:
    k = compile_kernel(sort_module((64,), ["ui32"], 0, less_than("ui32")), tmp_path)
    a = np.random.default_rng(4).integers(0, 2**32, size=64, dtype=np.uint64).astype(np.uint32)
    np.testing.assert_array_equal(k(a)[0], np.sort(a))


def test_argsort_is_stable_with_equal_keys(tmp_path: Path) -> None:
    # (keys, iota) sorted on keys only: the iota result is a stable argsort.
    src = sort_module((500,), ["i32"], 0, less_than("i32"), iota_operand=True)
    k = compile_kernel(src, tmp_path)
    keys = np.random.default_rng(5).integers(0, 6, size=500).astype(np.int32)
    sorted_keys, perm = k(keys)
    np.testing.assert_array_equal(perm, np.argsort(keys, kind="stable"))
    np.testing.assert_array_equal(sorted_keys, np.sort(keys))


def test_argsort_along_rows(tmp_path: Path) -> None:
    src = sort_module((4, 33), ["f64"], 1, less_than("f64"), iota_operand=True)
    k = compile_kernel(src, tmp_path)
    keys = np.round(np.random.default_rng(6).normal(size=(4, 33)), 1)
    _, perm = k(keys)
    np.testing.assert_array_equal(perm, np.argsort(keys, axis=1, kind="stable"))


def test_sort_multiple_operands_lexicographic(tmp_path: Path) -> None:
    # Comparator on both operands: (k0, k1) lexicographic, via and/or/compare.
    body = """%lt0 = stablehlo.compare LT, %x0, %y0 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %eq0 = stablehlo.compare EQ, %x0, %y0 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %lt1 = stablehlo.compare LT, %x1, %y1 : (tensor<f64>, tensor<f64>) -> tensor<i1>
    %both = stablehlo.and %eq0, %lt1 : tensor<i1>
    %c = stablehlo.or %lt0, %both : tensor<i1>
    stablehlo.return %c : tensor<i1>"""
    k = compile_kernel(sort_module((300,), ["i32", "f64"], 0, body), tmp_path)
    rng = np.random.default_rng(7)
    k0 = rng.integers(0, 10, size=300).astype(np.int32)
    k1 = rng.normal(size=300)
    order = np.lexsort((k1, k0))
    r0, r1 = k(k0, k1)
    np.testing.assert_array_equal(r0, k0[order])
    np.testing.assert_array_equal(r1, k1[order])


def _total_order_key(a: np.ndarray) -> np.ndarray:
    bits = a.view(np.int64)
    return np.where(bits < 0, bits ^ np.int64(2**63 - 1), bits)


def test_sort_total_order_places_nans(tmp_path: Path) -> None:
    k = compile_kernel(sort_module((None,), ["f64"], 0, less_than("f64", "LT", "TOTALORDER")),
                       tmp_path)
    neg_nan = np.copysign(np.nan, -1.0)
    a = np.array([3.0, np.nan, -0.0, 0.0, -np.inf, neg_nan, 1.5, np.inf, -2.0, np.nan, 0.0, -0.0])
    out = k(a)[0]
    expected = a[np.argsort(_total_order_key(a), kind="stable")]
    np.testing.assert_array_equal(out.view(np.int64), expected.view(np.int64))
    assert np.signbit(out[0]) and np.isnan(out[0]) and np.isnan(out[-1]) and not np.signbit(out[-1])


def test_sort_float_compare_matches_numpy_without_nans(tmp_path: Path) -> None:
    # Dynamic length, float comparison, many duplicates.
    k = compile_kernel(sort_module((None,), ["f64"], 0, less_than("f64")), tmp_path)
    for n in (0, 1, 3, 257):
        a = np.random.default_rng(n).integers(0, 4, size=n).astype(np.float64)
        np.testing.assert_array_equal(k(a)[0], np.sort(a))


def test_sort_comparator_with_arithmetic(tmp_path: Path) -> None:
    # |x| ordering via abs/negate/select/constant/convert in the comparator.
    body = """%ax = stablehlo.abs %x0 : tensor<i32>
    %ay = stablehlo.abs %y0 : tensor<i32>
    %fx = stablehlo.convert %ax : (tensor<i32>) -> tensor<f64>
    %fy = stablehlo.convert %ay : (tensor<i32>) -> tensor<f64>
    %h = stablehlo.constant dense<0.5> : tensor<f64>
    %gx = stablehlo.multiply %fx, %h : tensor<f64>
    %gy = stablehlo.multiply %fy, %h : tensor<f64>
    %c = stablehlo.compare LT, %gx, %gy : (tensor<f64>, tensor<f64>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>"""
    k = compile_kernel(sort_module((200,), ["i32"], 0, body), tmp_path)
    a = np.random.default_rng(8).integers(-100, 100, size=200).astype(np.int32)
    np.testing.assert_array_equal(k(a)[0], a[np.argsort(np.abs(a), kind="stable")])


def test_sort_large_is_n_log_n(tmp_path: Path) -> None:
    import time
    k = compile_kernel(sort_module((None,), ["f64"], 0, less_than("f64")), tmp_path)
    a = np.random.default_rng(9).normal(size=1_000_000)
    start = time.perf_counter()
    out = k(a)[0]
    assert time.perf_counter() - start < 5.0   # a quadratic sort would take hours
    np.testing.assert_array_equal(out, np.sort(a))


# ---------------------------------------------------------------------------
# scatter
# ---------------------------------------------------------------------------

_REGION = {
    "set": "stablehlo.return %new0 : tensor<{e}>",
    "add": "%r = stablehlo.add %old0, %new0 : tensor<{e}>\n    stablehlo.return %r : tensor<{e}>",
    "mul": "%r = stablehlo.multiply %old0, %new0 : tensor<{e}>\n    stablehlo.return %r : tensor<{e}>",
    "min": "%r = stablehlo.minimum %old0, %new0 : tensor<{e}>\n    stablehlo.return %r : tensor<{e}>",
    "max": "%r = stablehlo.maximum %old0, %new0 : tensor<{e}>\n    stablehlo.return %r : tensor<{e}>",
}
_NUMPY_AT = {"add": np.add.at, "mul": np.multiply.at, "min": np.minimum.at, "max": np.maximum.at}


def scatter_module(operand: tuple, indices: tuple, updates: tuple, dims: str, region: str,
                   elem: str = "f64", index_elem: str = "i32", n: int = 1) -> str:
    """A module `main(inputs..., indices, updates...) -> scatter(...)`."""
    ot, it, ut = _ty(operand, elem), _ty(indices, index_elem), _ty(updates, elem)
    args = ([f"%x{i}: {ot}" for i in range(n)] + [f"%idx: {it}"]
            + [f"%u{i}: {ut}" for i in range(n)])
    operands = [f"%x{i}" for i in range(n)] + ["%idx"] + [f"%u{i}" for i in range(n)]
    block = ", ".join([f"%old{i}: tensor<{elem}>" for i in range(n)]
                      + [f"%new{i}: tensor<{elem}>" for i in range(n)])
    results = ", ".join([ot] * n)
    return f"""
func.func @main({", ".join(args)}) -> ({results}) {{
  %r:{n} = "stablehlo.scatter"({", ".join(operands)}) ({{
  ^bb0({block}):
    {region.format(e=elem)}
  }}) {{scatter_dimension_numbers = #stablehlo.scatter<{dims}>, indices_are_sorted = false,
      unique_indices = false}} : ({", ".join([ot] * n + [it] + [ut] * n)}) -> ({results})
  return {", ".join(f"%r#{i}" for i in range(n))} : {results}
}}"""


ELEMENT_1D = ("update_window_dims = [], inserted_window_dims = [0], "
              "scatter_dims_to_operand_dims = [0], index_vector_dim = 1")


@pytest.mark.parametrize("op", ["add", "mul", "min", "max"])
def test_scatter_1d_duplicates_accumulate(tmp_path: Path, op: str) -> None:
    # x.at[idx].op(v) with repeated indices: every update applies.
    k = compile_kernel(scatter_module((10,), (12, 1), (12,), ELEMENT_1D, _REGION[op]), tmp_path)
    rng = np.random.default_rng(10)
    x = rng.normal(size=10)
    idx = np.array([0, 3, 3, 9, 1, 3, 0, 5, 5, 5, 2, 9], dtype=np.int32)
    v = rng.normal(size=12)
    expected = x.copy()
    _NUMPY_AT[op](expected, idx, v)
    np.testing.assert_allclose(k(x, idx[:, None], v)[0], expected, rtol=1e-14)


def test_scatter_set_unique(tmp_path: Path) -> None:
    k = compile_kernel(scatter_module((10,), (4, 1), (4,), ELEMENT_1D, _REGION["set"]), tmp_path)
    x, idx, v = np.zeros(10), np.array([7, 2, 0, 9], dtype=np.int32), np.arange(1.0, 5.0)
    expected = x.copy()
    expected[idx] = v
    np.testing.assert_array_equal(k(x, idx[:, None], v)[0], expected)


def test_scatter_out_of_bounds_dropped(tmp_path: Path) -> None:
    k = compile_kernel(scatter_module((10,), (6, 1), (6,), ELEMENT_1D, _REGION["add"], index_elem="i64"),
                       tmp_path)
    x = np.arange(10.0)
    idx = np.array([-1, 10, 4, 12, 4, -100])
    v = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    keep = (idx >= 0) & (idx < 10)
    expected = x.copy()
    np.add.at(expected, idx[keep], v[keep])
    np.testing.assert_array_equal(k(x, idx[:, None], v)[0], expected)


def test_scatter_implicit_index_vector_dim(tmp_path: Path) -> None:
    # index_vector_dim == rank(indices): each index is a scalar.
    dims = ("update_window_dims = [], inserted_window_dims = [0], "
            "scatter_dims_to_operand_dims = [0], index_vector_dim = 1")
    k = compile_kernel(scatter_module((5,), (7,), (7,), dims, _REGION["add"], elem="i32"), tmp_path)
    x = np.arange(5, dtype=np.int32)
    idx = np.array([4, 4, 0, 1, 4, 2, 2], dtype=np.int32)
    v = np.arange(10, 17, dtype=np.int32)
    expected = x.copy()
    np.add.at(expected, idx, v)
    np.testing.assert_array_equal(k(x, idx, v)[0], expected)


def test_scatter_2d_elements(tmp_path: Path) -> None:
    dims = ("update_window_dims = [], inserted_window_dims = [0, 1], "
            "scatter_dims_to_operand_dims = [0, 1], index_vector_dim = 1")
    k = compile_kernel(scatter_module((4, 5), (9, 2), (9,), dims, _REGION["add"]), tmp_path)
    rng = np.random.default_rng(11)
    x = rng.normal(size=(4, 5))
    idx = np.stack([rng.integers(0, 4, 9), rng.integers(0, 5, 9)], axis=1).astype(np.int32)
    idx[3] = [2, 5]          # column out of bounds: dropped
    v = rng.normal(size=9)
    keep = idx[:, 1] < 5
    expected = x.copy()
    np.add.at(expected, (idx[keep, 0], idx[keep, 1]), v[keep])
    np.testing.assert_allclose(k(x, idx, v)[0], expected, rtol=1e-14)


ROWS = ("update_window_dims = [1], inserted_window_dims = [0], "
        "scatter_dims_to_operand_dims = [0], index_vector_dim = 1")


def test_scatter_rows_add_with_duplicates_and_oob(tmp_path: Path) -> None:
    # x.at[rows].add(U): update_window_dims covers a whole row.
    k = compile_kernel(scatter_module((6, 4), (5, 1), (5, 4), ROWS, _REGION["add"]), tmp_path)
    rng = np.random.default_rng(12)
    x = rng.normal(size=(6, 4))
    rows = np.array([1, 5, 1, 6, -1], dtype=np.int32)
    u = rng.normal(size=(5, 4))
    keep = (rows >= 0) & (rows < 6)
    expected = x.copy()
    np.add.at(expected, rows[keep], u[keep])
    np.testing.assert_allclose(k(x, rows[:, None], u)[0], expected, rtol=1e-14)


def test_scatter_columns_set(tmp_path: Path) -> None:
    # x.at[:, cols].set(U): the window is a column, updates are 4 x len(cols).
    dims = ("update_window_dims = [0], inserted_window_dims = [1], "
            "scatter_dims_to_operand_dims = [1], index_vector_dim = 1")
    k = compile_kernel(scatter_module((4, 6), (2, 1), (4, 2), dims, _REGION["set"]), tmp_path)
    x = np.zeros((4, 6))
    cols = np.array([5, 2], dtype=np.int32)
    u = np.arange(8.0).reshape(4, 2)
    expected = x.copy()
    expected[:, cols] = u
    np.testing.assert_array_equal(k(x, cols[:, None], u)[0], expected)


def scatter_reference(x: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
                      update_window_dims: list[int], inserted_window_dims: list[int],
                      scatter_dims_to_operand_dims: list[int], index_vector_dim: int,
                      input_batching_dims: list[int] = (), scatter_indices_batching_dims: list[int] = (),
                      combine: Callable = np.add) -> np.ndarray:
    """The spec's index arithmetic in plain Python; whole windows that do not
    fit are skipped (the XLA/JAX rule sprue implements)."""
    out = x.copy()
    rank = x.ndim
    scatter_dims = [d for d in range(updates.ndim) if d not in update_window_dims]
    window_dims = [d for d in range(rank) if d not in inserted_window_dims and d not in input_batching_dims]
    for sidx in np.ndindex(*[updates.shape[d] for d in scatter_dims]):
        if index_vector_dim < indices.ndim:
            vec = indices[sidx[:index_vector_dim] + (slice(None),) + sidx[index_vector_dim:]]
        else:
            vec = [indices[sidx]]
        start = [0] * rank
        for k, d in enumerate(scatter_dims_to_operand_dims):
            start[d] = int(vec[k])
        for d_in, d_idx in zip(input_batching_dims, scatter_indices_batching_dims):
            start[d_in] = sidx[d_idx - (0 if d_idx < index_vector_dim else 1)]
        extent = [1] * rank
        for k, d in enumerate(window_dims):
            extent[d] = updates.shape[update_window_dims[k]]
        if any(s < 0 or s + e > n for s, e, n in zip(start, extent, x.shape)):
            continue
        for widx in np.ndindex(*[updates.shape[d] for d in update_window_dims]):
            uidx = [0] * updates.ndim
            for d, v in zip(scatter_dims, sidx):
                uidx[d] = v
            for d, v in zip(update_window_dims, widx):
                uidx[d] = v
            ridx = list(start)
            for k, d in enumerate(window_dims):
                ridx[d] += widx[k]
            out[tuple(ridx)] = combine(out[tuple(ridx)], updates[tuple(uidx)])
    return out


def test_scatter_windows_partially_out_of_bounds_are_skipped(tmp_path: Path) -> None:
    # 2x2 windows at (row, col) starts, like dynamic_update_slice.
    dims = ("update_window_dims = [1, 2], inserted_window_dims = [], "
            "scatter_dims_to_operand_dims = [0, 1], index_vector_dim = 1")
    k = compile_kernel(scatter_module((5, 5), (4, 2), (4, 2, 2), dims, _REGION["add"]), tmp_path)
    x = np.zeros((5, 5))
    starts = np.array([[0, 0], [3, 3], [4, 1], [2, 1]], dtype=np.int32)   # [4, 1] overflows
    u = np.arange(1.0, 17.0).reshape(4, 2, 2)
    expected = scatter_reference(x, starts, u, update_window_dims=[1, 2], inserted_window_dims=[],
                                 scatter_dims_to_operand_dims=[0, 1], index_vector_dim=1)
    assert not expected[4, 1:3].any()      # the overflowing window left no trace
    np.testing.assert_array_equal(k(x, starts, u)[0], expected)


def test_scatter_batching_dims_spec_example(tmp_path: Path) -> None:
    # The StableHLO spec's scatter example (batching dims, index_vector_dim
    # in the middle, a start index out of bounds).
    dims = ("update_window_dims = [3, 4], inserted_window_dims = [1], input_batching_dims = [0], "
            "scatter_indices_batching_dims = [1], scatter_dims_to_operand_dims = [2, 1], "
            "index_vector_dim = 3")
    src = scatter_module((2, 3, 4, 2), (2, 2, 3, 2), (2, 2, 3, 2, 2), dims, _REGION["add"],
                         elem="i64", index_elem="i64")
    k = compile_kernel(src, tmp_path)
    x = np.arange(1, 49, dtype=np.int64).reshape(2, 3, 4, 2)
    idx = np.array([[[[0, 0], [1, 0], [2, 1]], [[0, 1], [1, 1], [0, 9]]],
                    [[[0, 0], [2, 1], [2, 2]], [[1, 2], [0, 1], [1, 0]]]], dtype=np.int64)
    u = np.ones((2, 2, 3, 2, 2), dtype=np.int64)
    expected = scatter_reference(
        x, idx, u, update_window_dims=[3, 4], inserted_window_dims=[1], input_batching_dims=[0],
        scatter_indices_batching_dims=[1], scatter_dims_to_operand_dims=[2, 1], index_vector_dim=3)
    np.testing.assert_array_equal(k(x, idx, u)[0], expected)


def test_scatter_multiple_operands(tmp_path: Path) -> None:
    # Two inputs updated together: (sum, max) in one region.
    region = """%s = stablehlo.add %old0, %new0 : tensor<{e}>
    %m = stablehlo.maximum %old1, %new1 : tensor<{e}>
    stablehlo.return %s, %m : tensor<{e}>, tensor<{e}>"""
    k = compile_kernel(scatter_module((8,), (10, 1), (10,), ELEMENT_1D, region, n=2), tmp_path)
    rng = np.random.default_rng(13)
    x0, x1 = rng.normal(size=8), rng.normal(size=8)
    idx = rng.integers(0, 8, size=10).astype(np.int32)
    u0, u1 = rng.normal(size=10), rng.normal(size=10)
    e0, e1 = x0.copy(), x1.copy()
    np.add.at(e0, idx, u0)
    np.maximum.at(e1, idx, u1)
    r0, r1 = k(x0, x1, idx[:, None], u0, u1)
    np.testing.assert_allclose(r0, e0, rtol=1e-14)
    np.testing.assert_array_equal(r1, e1)


def test_scatter_dynamic_sizes(tmp_path: Path) -> None:
    k = compile_kernel(scatter_module((None,), (None, 1), (None,), ELEMENT_1D, _REGION["add"]), tmp_path)
    for n, m in ((0, 3), (5, 0), (6, 20)):
        rng = np.random.default_rng(n + m)
        x, idx, v = rng.normal(size=n), rng.integers(-1, n + 1, size=m).astype(np.int32), rng.normal(size=m)
        keep = (idx >= 0) & (idx < n)
        expected = x.copy()
        np.add.at(expected, idx[keep], v[keep])
        np.testing.assert_allclose(k(x, idx[:, None], v)[0], expected, rtol=1e-14)


# ---------------------------------------------------------------------------
# control flow: while / if / case
# ---------------------------------------------------------------------------

WHILE = """
func.func @main(%x: tensor<4xf64>, %n: tensor<i64>) -> (tensor<i64>, tensor<4xf64>) {
  %zero = stablehlo.constant dense<0> : tensor<i64>
  %r:2 = "stablehlo.while"(%zero, %x) ({
  ^bb0(%i: tensor<i64>, %acc: tensor<4xf64>):
    %p = stablehlo.compare LT, %i, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>, %acc: tensor<4xf64>):
    %one = stablehlo.constant dense<1> : tensor<i64>
    %i2 = stablehlo.add %i, %one : tensor<i64>
    %half = stablehlo.constant dense<0.5> : tensor<4xf64>
    %scaled = stablehlo.multiply %acc, %half : tensor<4xf64>
    %acc2 = stablehlo.add %scaled, %x : tensor<4xf64>
    stablehlo.return %i2, %acc2 : tensor<i64>, tensor<4xf64>
  }) : (tensor<i64>, tensor<4xf64>) -> (tensor<i64>, tensor<4xf64>)
  return %r#0, %r#1 : tensor<i64>, tensor<4xf64>
}"""


def test_while_loop(tmp_path: Path) -> None:
    k = compile_kernel(WHILE, tmp_path)
    x = np.array([1.0, -2.0, 3.5, 0.25])
    for n in (0, 1, 5):
        acc = x.copy()
        for _ in range(n):
            acc = acc * 0.5 + x
        count, out = k(x, np.array(n))
        assert count == n
        np.testing.assert_allclose(out, acc, rtol=1e-15)


def test_sort_inside_while_body(tmp_path: Path) -> None:
    # Each iteration reverses the sorted order and adds 1: nested rewrites.
    src = """
    func.func @main(%x: tensor<6xf64>) -> tensor<6xf64> {
      %zero = stablehlo.constant dense<0> : tensor<i32>
      %r:2 = "stablehlo.while"(%zero, %x) ({
      ^bb0(%i: tensor<i32>, %acc: tensor<6xf64>):
        %three = stablehlo.constant dense<3> : tensor<i32>
        %p = stablehlo.compare LT, %i, %three : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %p : tensor<i1>
      }, {
      ^bb0(%i: tensor<i32>, %acc: tensor<6xf64>):
        %one = stablehlo.constant dense<1> : tensor<i32>
        %i2 = stablehlo.add %i, %one : tensor<i32>
        %s = "stablehlo.sort"(%acc) ({
        ^bb0(%a: tensor<f64>, %b: tensor<f64>):
          %c = stablehlo.compare GT, %a, %b : (tensor<f64>, tensor<f64>) -> tensor<i1>
          stablehlo.return %c : tensor<i1>
        }) {dimension = 0 : i64} : (tensor<6xf64>) -> tensor<6xf64>
        %ones = stablehlo.constant dense<1.0> : tensor<6xf64>
        %next = stablehlo.add %s, %ones : tensor<6xf64>
        stablehlo.return %i2, %next : tensor<i32>, tensor<6xf64>
      }) : (tensor<i32>, tensor<6xf64>) -> (tensor<i32>, tensor<6xf64>)
      return %r#1 : tensor<6xf64>
    }"""
    k = compile_kernel(src, tmp_path)
    x = np.array([0.5, 3.0, -1.0, 2.0, 8.0, 0.0])
    np.testing.assert_array_equal(k(x)[0], np.sort(x)[::-1] + 3.0)


def test_if(tmp_path: Path) -> None:
    src = """
    func.func @main(%s: tensor<f64>, %x: tensor<3xf64>) -> tensor<3xf64> {
      %zero = stablehlo.constant dense<0.0> : tensor<f64>
      %p = stablehlo.compare GT, %s, %zero : (tensor<f64>, tensor<f64>) -> tensor<i1>
      %r = "stablehlo.if"(%p) ({
        %e = stablehlo.exponential %x : tensor<3xf64>
        stablehlo.return %e : tensor<3xf64>
      }, {
        %n = stablehlo.negate %x : tensor<3xf64>
        stablehlo.return %n : tensor<3xf64>
      }) : (tensor<i1>) -> tensor<3xf64>
      return %r : tensor<3xf64>
    }"""
    k = compile_kernel(src, tmp_path)
    x = np.array([0.0, 1.0, -2.0])
    np.testing.assert_allclose(k(np.array(1.0), x)[0], np.exp(x), rtol=1e-15)
    np.testing.assert_array_equal(k(np.array(-1.0), x)[0], -x)


def test_case_out_of_range_runs_last_branch(tmp_path: Path) -> None:
    src = """
    func.func @main(%i: tensor<i32>, %x: tensor<2xf64>) -> tensor<2xf64> {
      %r = "stablehlo.case"(%i) ({
        stablehlo.return %x : tensor<2xf64>
      }, {
        %d = stablehlo.add %x, %x : tensor<2xf64>
        stablehlo.return %d : tensor<2xf64>
      }, {
        %m = stablehlo.multiply %x, %x : tensor<2xf64>
        stablehlo.return %m : tensor<2xf64>
      }) : (tensor<i32>) -> tensor<2xf64>
      return %r : tensor<2xf64>
    }"""
    k = compile_kernel(src, tmp_path)
    x = np.array([3.0, -0.5])
    branches = [x, x + x, x * x]
    for i in (-1, 0, 1, 2, 3, 100):
        expected = branches[i] if 0 <= i < 3 else branches[-1]
        np.testing.assert_array_equal(k(np.array(i, dtype=np.int32), x)[0], expected)


# ---------------------------------------------------------------------------
# region ops: result[i] = f(x[i], u[i]) through a scatter that touches every
# element once, for a table of region bodies vs numpy.
# ---------------------------------------------------------------------------

def _select_dir(direction: str, e: str, compare_type: str = "") -> str:
    suffix = f", {compare_type}" if compare_type else ""
    return (f"%p = stablehlo.compare {direction}, %old0, %new0{suffix} : (tensor<{e}>, tensor<{e}>) -> tensor<i1>\n"
            f"%r = stablehlo.select %p, %old0, %new0 : tensor<i1>, tensor<{e}>")


def _round_afz(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


# (element type, region body defining %r from %old0/%new0, numpy reference)
REGION_CASES: dict[str, tuple[str, str, Callable]] = {
    "sub_div": ("f64", "%a = stablehlo.subtract %old0, %new0 : tensor<f64>\n"
                       "%r = stablehlo.divide %a, %new0 : tensor<f64>", lambda x, u: (x - u) / u),
    "remainder_f": ("f64", "%r = stablehlo.remainder %old0, %new0 : tensor<f64>", np.fmod),
    "power_atan2": ("f64", "%a = stablehlo.abs %old0 : tensor<f64>\n"
                           "%b = stablehlo.power %a, %new0 : tensor<f64>\n"
                           "%c = stablehlo.atan2 %old0, %new0 : tensor<f64>\n"
                           "%r = stablehlo.add %b, %c : tensor<f64>",
                    lambda x, u: np.abs(x) ** u + np.arctan2(x, u)),
    "math_unary": ("f64", "%a = stablehlo.negate %new0 : tensor<f64>\n"
                          "%b = stablehlo.abs %a : tensor<f64>\n"
                          "%c = stablehlo.sqrt %b : tensor<f64>\n"
                          "%d = stablehlo.tanh %old0 : tensor<f64>\n"
                          "%e = stablehlo.logistic %c : tensor<f64>\n"
                          "%f = stablehlo.log_plus_one %b : tensor<f64>\n"
                          "%g = stablehlo.multiply %d, %e : tensor<f64>\n"
                          "%r = stablehlo.add %g, %f : tensor<f64>",
                   lambda x, u: np.tanh(x) / (1 + np.exp(-np.sqrt(np.abs(u)))) + np.log1p(np.abs(u))),
    "rounding": ("f64", "%a = stablehlo.floor %old0 : tensor<f64>\n"
                        "%b = stablehlo.round_nearest_even %new0 : tensor<f64>\n"
                        "%c = stablehlo.round_nearest_afz %new0 : tensor<f64>\n"
                        "%d = stablehlo.ceil %old0 : tensor<f64>\n"
                        "%e = stablehlo.add %a, %b : tensor<f64>\n"
                        "%f = stablehlo.multiply %c, %d : tensor<f64>\n"
                        "%r = stablehlo.add %e, %f : tensor<f64>",
                 lambda x, u: np.floor(x) + np.round(u) + _round_afz(u) * np.ceil(x)),
    "clamp_consts": ("f64", "%lo = stablehlo.constant dense<-0.5> : tensor<f64>\n"
                            "%hi = stablehlo.constant dense<0.75> : tensor<f64>\n"
                            "%r = stablehlo.clamp %lo, %new0, %hi : tensor<f64>",
                     lambda x, u: np.clip(u, -0.5, 0.75)),
    "convert_roundtrip": ("f64", "%z = stablehlo.constant dense<0.0> : tensor<f64>\n"
                                 "%p = stablehlo.is_finite %new0 : (tensor<f64>) -> tensor<i1>\n"
                                 "%s = stablehlo.select %p, %new0, %z : tensor<i1>, tensor<f64>\n"
                                 "%a = stablehlo.convert %s : (tensor<f64>) -> tensor<i32>\n"
                                 "%b = stablehlo.convert %a : (tensor<i32>) -> tensor<f64>\n"
                                 "%c = stablehlo.convert %old0 : (tensor<f64>) -> tensor<f32>\n"
                                 "%d = stablehlo.convert %c : (tensor<f32>) -> tensor<f64>\n"
                                 "%r = stablehlo.add %b, %d : tensor<f64>",
                          lambda x, u: (np.trunc(np.where(np.isfinite(u), u, 0.0))
                                        + x.astype(np.float32).astype(np.float64))),
    "bitcast_sign_flip": ("f64", "%a = stablehlo.bitcast_convert %new0 : (tensor<f64>) -> tensor<i64>\n"
                                 "%m = stablehlo.constant dense<-9223372036854775808> : tensor<i64>\n"
                                 "%b = stablehlo.xor %a, %m : tensor<i64>\n"
                                 "%r = stablehlo.bitcast_convert %b : (tensor<i64>) -> tensor<f64>",
                          lambda x, u: -u),
    "max_min_nan": ("f64", "%a = stablehlo.maximum %old0, %new0 : tensor<f64>\n"
                           "%b = stablehlo.minimum %old0, %new0 : tensor<f64>\n"
                           "%r = stablehlo.subtract %a, %b : tensor<f64>",
                    lambda x, u: np.maximum(x, u) - np.minimum(x, u)),
    "is_finite_select": ("f64", "%p = stablehlo.is_finite %new0 : (tensor<f64>) -> tensor<i1>\n"
                                "%r = stablehlo.select %p, %new0, %old0 : tensor<i1>, tensor<f64>",
                         lambda x, u: np.where(np.isfinite(u), u, x)),
    **{f"compare_{d}": ("f64", _select_dir(d, "f64"),
                        lambda x, u, op=op: np.where(op(x, u), x, u))
       for d, op in [("EQ", np.equal), ("NE", np.not_equal), ("LT", np.less),
                     ("LE", np.less_equal), ("GT", np.greater), ("GE", np.greater_equal)]},
    "int_bitwise": ("i32", "%a = stablehlo.and %old0, %new0 : tensor<i32>\n"
                           "%b = stablehlo.or %old0, %new0 : tensor<i32>\n"
                           "%c = stablehlo.not %a : tensor<i32>\n"
                           "%d = stablehlo.xor %b, %c : tensor<i32>\n"
                           "%e = stablehlo.negate %d : tensor<i32>\n"
                           "%r = stablehlo.abs %e : tensor<i32>",
                    lambda x, u: np.abs(-((x | u) ^ ~(x & u)))),
    "int_div_rem": ("i32", "%a = stablehlo.divide %old0, %new0 : tensor<i32>\n"
                           "%b = stablehlo.remainder %old0, %new0 : tensor<i32>\n"
                           "%c = stablehlo.maximum %a, %b : tensor<i32>\n"
                           "%d = stablehlo.minimum %a, %b : tensor<i32>\n"
                           "%e = stablehlo.multiply %c, %d : tensor<i32>\n"
                           "%r = stablehlo.subtract %e, %a : tensor<i32>",
                    lambda x, u: (np.maximum(np.fix(x / u), np.fmod(x, u)).astype(np.int32)
                                  * np.minimum(np.fix(x / u), np.fmod(x, u)).astype(np.int32)
                                  - np.fix(x / u).astype(np.int32))),
    "int_compare_signed": ("i32", _select_dir("LT", "i32", "SIGNED"), np.minimum),
    "uint_divide_compare": ("ui32", "%a = stablehlo.divide %old0, %new0 : tensor<ui32>\n"
                                    "%p = stablehlo.compare GT, %a, %new0 : (tensor<ui32>, tensor<ui32>) -> tensor<i1>\n"
                                    "%r = stablehlo.select %p, %a, %new0 : tensor<i1>, tensor<ui32>",
                            lambda x, u: np.where(x // u > u, x // u, u)),
    "uint_to_float_and_back": ("ui32", "%a = stablehlo.convert %old0 : (tensor<ui32>) -> tensor<f64>\n"
                                       "%h = stablehlo.constant dense<0.5> : tensor<f64>\n"
                                       "%b = stablehlo.multiply %a, %h : tensor<f64>\n"
                                       "%r = stablehlo.convert %b : (tensor<f64>) -> tensor<ui32>",
                               lambda x, u: (x.astype(np.float64) * 0.5).astype(np.uint32)),
    "bool_ops": ("i1", "%a = stablehlo.add %old0, %new0 : tensor<i1>\n"
                       "%b = stablehlo.multiply %old0, %new0 : tensor<i1>\n"
                       "%c = stablehlo.not %b : tensor<i1>\n"
                       "%r = stablehlo.and %a, %c : tensor<i1>",
                 lambda x, u: (x | u) & ~(x & u)),
    "bool_from_float": ("i1", "%a = stablehlo.convert %new0 : (tensor<i1>) -> tensor<f64>\n"
                              "%b = stablehlo.convert %old0 : (tensor<i1>) -> tensor<i32>\n"
                              "%c = stablehlo.convert %b : (tensor<i32>) -> tensor<f64>\n"
                              "%d = stablehlo.subtract %a, %c : tensor<f64>\n"
                              "%r = stablehlo.convert %d : (tensor<f64>) -> tensor<i1>",
                        lambda x, u: u.astype(np.float64) - x.astype(np.float64) != 0),
}


def _region_inputs(elem: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(14)
    if elem == "f64":
        x, u = rng.normal(size=n) * 3, rng.normal(size=n) * 3
        x[:4] = [np.nan, 1.0, 2.0, -0.0]
        u[:6] = [1.0, np.nan, np.inf, 2.0, 2.5, -1.5]
        return x, u
    if elem == "i32":
        return (rng.integers(-1000, 1000, size=n).astype(np.int32),
                rng.choice([-7, -3, -1, 1, 2, 5, 11], size=n).astype(np.int32))
    if elem == "ui32":
        return (rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32),
                rng.integers(1, 70000, size=n).astype(np.uint32))
    return rng.integers(0, 2, size=n).astype(bool), rng.integers(0, 2, size=n).astype(bool)


@pytest.mark.parametrize("case", sorted(REGION_CASES))
def test_region_op_translation(tmp_path: Path, case: str) -> None:
    elem, body, reference = REGION_CASES[case]
    n = 64
    region = body.replace("\n", "\n    ") + f"\n    stablehlo.return %r : tensor<{elem}>"
    k = compile_kernel(scatter_module((n,), (n, 1), (n,), ELEMENT_1D, region, elem=elem), tmp_path)
    x, u = _region_inputs(elem, n)
    with np.errstate(all="ignore"):
        expected = reference(x, u)
    out = k(x, np.arange(n, dtype=np.int32)[:, None], u)[0]
    np.testing.assert_allclose(out, expected, rtol=1e-6 if case == "convert_roundtrip" else 1e-13)
