"""Gathers and scatters whose indices and updates are computed by other ops (point_reads.py pulls
those producers into the gather/scatter loop): compiled results vs numpy (np.add.at and friends,
fancy indexing) with repeated, negative and out-of-bounds indices as JAX defines them (reads
clamp, updates drop), static and dynamic shapes; and the loops stage checked for the fused form."""
from pathlib import Path

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax

RNG = np.random.default_rng(0)
BOTH = pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])


def compile_fn(fn, dynamic, axes, **kw):
    return sprue.qjit(fn, abstracted_axes=axes if dynamic else None, **kw)


def wrap(i, n):
    """numpy's negative-index rule, which the frontend applies before JAX's modes."""
    i = np.asarray(i, np.int64)
    return np.where(i < 0, i + n, i)


def read_clipped(x, i):
    """x[i] for traced indices: wrapped, then clamped into bounds (JAX's gather default)."""
    return x[np.clip(wrap(i, len(x)), 0, len(x) - 1)]


def apply_dropped(ufunc_at, out, i, v):
    """out.at[i].<op>(v): wrapped, out-of-bounds updates dropped, applied in index order."""
    j = wrap(i, len(out))
    keep = (j >= 0) & (j < len(out))
    ufunc_at(out, j[keep], np.asarray(v)[keep])
    return out


def set_in_order(out, j, v):
    for k, val in zip(j, v):
        out[k] = val


def indices(n, size, spread=3):
    """Repeated, negative (wrapping) and out-of-bounds indices; the ends of int64 too."""
    i = RNG.integers(-spread * n, spread * n, size)
    i[:4] = [np.iinfo(np.int64).max, np.iinfo(np.int64).min, -1, n]
    return i


@BOTH
def test_segment_sum_of_gathered_products(dynamic):
    """pagerank's step: zeros.at[dst].add(x[src] * w), then an elementwise epilogue."""
    n, e = 37, 400
    x, w = RNG.normal(size=n), RNG.normal(size=e)
    src, dst = indices(n, e), indices(n, e, spread=1)

    def f(x, src, dst, w):
        return 0.15 + 0.85 * jnp.zeros_like(x).at[dst].add(x[src] * w)

    got = compile_fn(f, dynamic, ({0: "n"}, {0: "e"}, {0: "e"}, {0: "e"}))(x, src, dst, w)
    want = 0.15 + 0.85 * apply_dropped(np.add.at, np.zeros(n), dst, read_clipped(x, src) * w)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@BOTH
@pytest.mark.parametrize("op", ["set", "add", "min", "max", "multiply"])
def test_every_update_kind_with_computed_values_and_repeated_indices(op, dynamic):
    n, m = 11, 60
    x, v = RNG.normal(size=n), RNG.normal(size=m)
    i = indices(n, m, spread=2)

    def f(x, i, v):
        return getattr(x.at[i // 1 + 0], op)(jnp.sin(v) * 2.0 + 1.0)

    got = compile_fn(f, dynamic, ({0: "n"}, {0: "m"}, {0: "m"}))(x, i, v)
    ufunc = {"set": set_in_order, "add": np.add.at, "min": np.minimum.at, "max": np.maximum.at,
             "multiply": np.multiply.at}[op]
    want = apply_dropped(ufunc, x.copy(), i, np.sin(v) * 2.0 + 1.0)
    np.testing.assert_allclose(got, want, rtol=1e-12)


@BOTH
def test_update_reading_the_array_it_updates(dynamic):
    """x.at[i].add(x[j] * 2) reads x while the scatter writes it: the reads see the old x."""
    n, m = 9, 40
    x = RNG.normal(size=n)
    i, j = indices(n, m, spread=1), indices(n, m, spread=1)

    def f(x, i, j):
        return x.at[i].add(x[j] * 2.0), x.at[i].divide(3.0)

    add, div = compile_fn(f, dynamic, ({0: "n"}, {0: "m"}, {0: "m"}))(x, i, j)
    np.testing.assert_allclose(add, apply_dropped(np.add.at, x.copy(), i, read_clipped(x, j) * 2.0), rtol=1e-12)
    # divide is a set of x[i] / 3 gathered before the scatter: repeated indices divide once.
    np.testing.assert_allclose(div, apply_dropped(set_in_order, x.copy(), i, read_clipped(x, i) / 3.0),
                               rtol=1e-12)


@BOTH
def test_producer_with_other_users_is_kept(dynamic):
    n, m = 8, 30
    v, i = RNG.normal(size=m), indices(n, m, spread=1)

    def f(v, i):
        u = jnp.exp(v) - 1.0
        return jnp.zeros(8).at[i].add(u), u.sum(), u

    out, total, u = compile_fn(f, dynamic, ({0: "m"}, {0: "m"}))(v, i)
    want_u = np.exp(v) - 1.0
    np.testing.assert_allclose(out, apply_dropped(np.add.at, np.zeros(n), i, want_u), rtol=1e-12)
    np.testing.assert_allclose(total, want_u.sum(), rtol=1e-12)
    np.testing.assert_allclose(u, want_u, rtol=1e-12)


@BOTH
def test_rows_scattered_with_broadcast_updates(dynamic):
    """Window updates: out.at[r].add(m[c] * s[:, None]): a row gather, an expanding broadcast."""
    n, k, d = 6, 25, 5
    mat, s = RNG.normal(size=(n, d)), RNG.normal(size=k)
    r, c = indices(n, k, spread=2), indices(n, k, spread=1)

    def f(mat, s, r, c):
        return jnp.zeros_like(mat).at[r].add(mat[c] * s[:, None])

    got = compile_fn(f, dynamic, ({0: "n", 1: "d"}, {0: "k"}, {0: "k"}, {0: "k"}))(mat, s, r, c)
    rows = mat[np.clip(wrap(c, n), 0, n - 1)] * s[:, None]
    want = apply_dropped(np.add.at, np.zeros((n, d)), r, rows)
    np.testing.assert_allclose(got, want, rtol=1e-12)


@BOTH
def test_fancy_indexing_points_and_vmapped_dynamic_slice(dynamic):
    n, d, k = 7, 9, 20
    mat = RNG.normal(size=(n, d))
    r, c = indices(n, k, spread=2), indices(d, k, spread=2)

    def f(mat, r, c):
        windows = sprue.vmap(lambda i: lax.dynamic_slice(mat[0], (i,), (3,)))(c)
        return mat[r + 1, c * 2] * 2.0, windows

    points, windows = compile_fn(f, dynamic, ({0: "n", 1: "d"}, {0: "k"}, {0: "k"}))(mat, r, c)
    rr = np.clip(wrap(r + 1, n), 0, n - 1)
    cc = np.clip(wrap(c * 2, d), 0, d - 1)
    np.testing.assert_allclose(points, mat[rr, cc] * 2.0, rtol=1e-12)
    starts = np.clip(c, 0, d - 3)     # dynamic_slice clamps its start so the window fits
    np.testing.assert_array_equal(windows, np.stack([mat[0, s:s + 3] for s in starts]))


@BOTH
def test_integer_and_bool_updates_with_narrow_computed_indices(dynamic):
    n, m = 10, 50
    i = RNG.integers(-12, 12, m).astype(np.int8)
    counts_in = RNG.integers(0, 5, m).astype(np.int32)
    flags = RNG.random(m) > 0.7

    def f(i, c, b):
        j = (i + 1).astype(jnp.int32)
        return jnp.zeros(10, jnp.int32).at[j].add(c * 3), jnp.zeros(10, bool).at[j].max(b), \
            jnp.zeros(10).at[j].add(jnp.arange(50) * 0.5)

    got_c, got_b, got_iota = compile_fn(f, dynamic, ({0: "m"}, {0: "m"}, {0: "m"}))(i, counts_in, flags)
    j = i.astype(np.int64) + 1
    np.testing.assert_array_equal(got_c, apply_dropped(np.add.at, np.zeros(n, np.int32), j, counts_in * 3))
    np.testing.assert_array_equal(got_b, apply_dropped(np.logical_or.at, np.zeros(n, bool), j, flags))
    np.testing.assert_allclose(got_iota, apply_dropped(np.add.at, np.zeros(n), j, np.arange(m) * 0.5))


def test_gather_from_an_empty_dynamic_array_reads_zeros_not_memory():
    f = sprue.qjit(lambda x, i: x[i] + 1.0, abstracted_axes=({0: "n"}, {0: "m"}))
    got = f(np.zeros(0), np.array([0, 3, -1]))
    np.testing.assert_array_equal(got, np.ones(3))
    np.testing.assert_array_equal(f(np.arange(4.0), np.array([0, 3, -1, 9])), [1.0, 4.0, 4.0, 4.0])


def _loops_stage(tmp_path: Path) -> str:
    (text,) = [p.read_text() for p in tmp_path.glob("*.04_loops.mlir")]
    return text


@BOTH
def test_segment_sum_is_one_loop_without_edge_sized_temporaries(tmp_path, dynamic):
    """The update x[src] * w, the wrap of negative indices and the bounds test are computed in
    the scatter loop: nothing of the edges' size is allocated (the unfused form wrote the
    wrapped indices, the gathered values and their products into such temporaries)."""
    n, e = 50, 1000
    x, w = RNG.normal(size=n), RNG.normal(size=e)
    src, dst = RNG.integers(0, n, e), RNG.integers(0, n, e)

    def step(x, src, dst, w):
        return jnp.zeros_like(x).at[dst].add(x[src] * w)

    f = compile_fn(step, dynamic, ({0: "n"}, {0: "e"}, {0: "e"}, {0: "e"}), keep_intermediate=str(tmp_path))
    np.testing.assert_allclose(f(x, src, dst, w), apply_dropped(np.add.at, np.zeros(n), dst, x[src] * w),
                               rtol=1e-12)
    loops = _loops_stage(tmp_path)
    allocs = [line for line in loops.splitlines() if "memref.alloc" in line]
    assert not [a for a in allocs if "1000" in a], allocs
    if dynamic:     # one ? alloc for the zeros (the result); none for the edges
        edge_sized = [a for a in allocs if "memref.alloc(%" in a and "xf64" not in a]
        assert not edge_sized, allocs
    # (counted before parallel_scatter.py adds a parallel version of each loop beside the serial one)
    (bufferized,) = [p.read_text() for p in tmp_path.glob("*.03_bufferized.mlir")]
    assert bufferized.count("scf.for") + bufferized.count("linalg.generic") <= (4 if dynamic else 3), bufferized
    # The dynamic x[src] reads x itself (no copy of x padded by one): sprue.numpy only wraps its
    # negative indices and the gather clamps them once
    assert "memref.copy" not in loops, loops


@pytest.mark.parametrize("dynamic, n", [(False, 6), (True, 6), (True, 0)], ids=["static", "dynamic", "dynamic-empty"])
def test_gather_through_a_pad_reads_the_pad_value_outside_the_operand(n, dynamic):
    """lax.pad(x)[i]: the pad is read in place (a select), both edges; from an empty x (the
    loops' guarded version) only the pad value."""
    x = RNG.normal(size=n)
    i = RNG.integers(-15, 15, 40)

    def f(x, i):
        return lax.pad(x, jnp.float64(7.0), [(2, 3, 0)])[i] + 1.0

    got = compile_fn(f, dynamic, ({0: "n"}, {0: "m"}))(x, i)
    np.testing.assert_array_equal(got, read_clipped(np.pad(x, (2, 3), constant_values=7.0), i) + 1.0)


@BOTH
def test_batched_gather_and_scatter_under_vmap(dynamic):
    """vmap of row[i] and of row.at[i].add(v): gathers/scatters with batching dimensions, their
    indices computed (argmin of a distance, shifted) in the same loop."""
    b, n, m = 5, 9, 7
    mat, pts = RNG.normal(size=(b, n)), RNG.normal(size=(b, m))
    i = indices(n, m, spread=1)

    def f(mat, pts, i):
        nearest = sprue.vmap(lambda row, p: row[jnp.argmin(jnp.abs(row[:, None] - p[None, :]), axis=0) + 1])(mat, pts)
        added = sprue.vmap(lambda row, p: row.at[i].add(p * 2.0))(mat, pts)
        return nearest, added

    nearest, added = compile_fn(f, dynamic, ({0: "b", 1: "n"}, {0: "b", 1: "m"}, {0: "m"}))(mat, pts, i)
    k = np.argmin(np.abs(mat[:, :, None] - pts[:, None, :]), axis=1) + 1
    np.testing.assert_allclose(nearest, np.stack([read_clipped(mat[r], k[r]) for r in range(b)]), rtol=1e-12)
    want = np.stack([apply_dropped(np.add.at, mat[r].copy(), i, pts[r] * 2.0) for r in range(b)])
    np.testing.assert_allclose(added, want, rtol=1e-12)


@pytest.mark.parametrize("n", [7, 1, 0])
def test_index_array_into_a_run_time_axis_compiled(n):
    """x[idx] with a run-time n: wrapped, clamped once by the gather, and from an x empty at run
    time zeros (the jaxpr evaluator's value: tests/frontend/numpy/test_dynamic_numpy_jaxpr.py)."""
    x, i = RNG.normal(size=(n, 3)), RNG.integers(-9, 9, 20)
    got = compile_fn(lambda x, i: x[i] * 2.0, True, ({0: "n"}, {0: "m"}))(x, i)
    want = x[np.clip(np.where(i < 0, i + n, i), 0, n - 1)] * 2.0 if n else np.zeros((20, 3))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("n", [9, 1, 0])
def test_scatter_drops_every_index_outside_a_run_time_axis(n):
    """The scatter loop's bounds test (0 <= i <= n - 1 as one unsigned comparison, legalize_scatter.py):
    too large, still negative after the wrap and, into an empty x, all indices are dropped; the
    others added."""
    x = RNG.normal(size=n)
    idx = np.array([0, 3, -1, -7, n, n + 5, 2 ** 40, -(2 ** 40), 8, 1])
    v = RNG.normal(size=idx.size)
    got = compile_fn(lambda x, i, v: x.at[i].add(v, mode="drop"), True, ({0: "n"}, {0: "m"}, {0: "m"}))(x, idx, v)
    want = x.copy()
    for i, u in zip(idx, v):
        i = i + n if i < 0 else i          # (negative indices wrap first, as numpy's and JAX's)
        if 0 <= i < n:
            want[i] += u
    np.testing.assert_allclose(got, want, rtol=1e-12)
