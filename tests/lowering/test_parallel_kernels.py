"""Reductions and matrix products on the pool (lowering/parallel.py): rows reduced by one chunk
each, reductions over the first loop split into per-chunk partial results folded in chunk order,
the blocks of tiled products (matmul_scripts.PARALLEL_LOOP). Each gives the same bits with 1, 2
and 4 threads, matches numpy, and does run on the pool."""
import os
import re

import numpy as np
import pytest

import sprue
import sprue.lax
import sprue.numpy as jnp
from sprue.lowering import matmul

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def threads_restored():
    yield
    sprue.set_num_threads(len(os.sched_getaffinity(0)))   # the default


def _parallel_calls(folder) -> list[tuple[str, int, int]]:
    """(body, chunks' range end, grain) of each call of a chunk body in the loops-stage IR."""
    text = next(folder.glob("*.04_loops.mlir")).read_text()
    consts = {m[0]: int(m[1]) for m in re.findall(r"%(c\w*) = arith.constant (\d+) : index", text)}
    return [(name, consts.get(n, -1), consts.get(g, -1))
            for name, n, g in re.findall(r"call @(__sprue_par_\d+)\(%\w+, %(\w+), %(\w+)", text)]


def _same_bits_each_thread_count(f, *args):
    got = []
    for n in (1, 2, 4):
        sprue.set_num_threads(n)
        got.append(np.asarray(f(*args)))
    for g in got[1:]:
        np.testing.assert_array_equal(g, got[0])
    return got[0]


def _softmax(x, xp):
    e = xp.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


REDUCTIONS = {
    # name: (function, numpy reference, argument)
    "sum": (lambda x: x.sum(), lambda x: x.sum(), RNG.random(1_000_003)),
    "max of negatives": (lambda x: x.max(), lambda x: x.max(), -1.0 - RNG.random(700_001)),
    "min over rows": (lambda x: x.min(axis=0), lambda x: x.min(axis=0), RNG.random((3001, 300))),
    "sum over rows": (lambda x: x.sum(axis=0), lambda x: x.sum(axis=0), RNG.random((3001, 300))),
    "sum of squares": (lambda x: (x * x).sum(), lambda x: (x * x).sum(), RNG.random((1000, 777))),
    "int sum": (lambda x: x.sum(), lambda x: x.sum(), RNG.integers(-50, 100, 900_001)),
    "product": (lambda x: (1.0 + 1e-6 * x).prod(), lambda x: (1.0 + 1e-6 * x).prod(), RNG.random(400_000)),
    "row sums": (lambda x: x.sum(axis=1), lambda x: x.sum(axis=1), RNG.random((2000, 333))),
    "softmax": (lambda x: _softmax(x, jnp), lambda x: _softmax(x, np), RNG.random((700, 500))),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions_run_on_the_pool_with_the_same_bits(name, tmp_path):
    fn, ref, x = REDUCTIONS[name]
    f = sprue.qjit(fn, keep_intermediate=str(tmp_path))
    got = _same_bits_each_thread_count(f, x)
    np.testing.assert_allclose(got, ref(x), rtol=1e-10, atol=1e-10)
    calls = _parallel_calls(tmp_path)
    assert calls, "no loop ran on the pool"
    for _, n, grain in calls:      # the chunks follow from the sizes alone (at most 64 partial results)
        assert n > grain >= 1


def test_argmax_of_a_long_axis_is_two_split_reductions(tmp_path):
    """argmax/argmin along a long axis: the extremum, then the first index holding it, each a
    reduction split over the pool (rules_reductions._first_extremum); numpy's first index."""
    x = RNG.random(500_001)
    x[[7, 400_000]] = 2.0    # a tie: the first wins
    f = sprue.qjit(lambda x: (jnp.argmax(x), jnp.argmin(x)), keep_intermediate=str(tmp_path))
    got = _same_bits_each_thread_count(lambda x: np.array([int(v) for v in f(x)]), x)
    assert list(got) == [7, int(np.argmin(x))]
    # (argmax's and argmin's passes over x share loops where one does not read the other's result:
    # fusion_siblings.py makes the two extrema one pass)
    assert len(_parallel_calls(tmp_path)) >= 3


def _attention_scores(q, k):
    return q @ jnp.swapaxes(k, -1, -2)


PRODUCTS = {
    "square": (lambda a, b: a @ b, [(512, 512), (512, 512)], np.float64),
    "odd sizes": (lambda a, b: a @ b, [(301, 515), (515, 517)], np.float64),
    "one column block, many rows": (lambda a, b: a @ b, [(1000, 300), (300, 64)], np.float64),
    "float32": (lambda a, b: a @ b, [(384, 256), (256, 384)], np.float32),
    "batched, transposed B": (_attention_scores, [(8, 128, 64), (8, 128, 64)], np.float64),
    "vector-matrix, long k": (lambda g, x: g @ x, [(20000,), (20000, 64)], np.float64),
    "small C, long k": (lambda a, b: a @ b, [(16, 20000), (20000, 8)], np.float64),
    "small C, long k, packed": (lambda a, b: a @ b, [(64, 20000), (20000, 64)], np.float64),
    "in a loop": (lambda x, w: sprue.lax.fori_loop(0, 3, lambda i, y: jnp.tanh(y @ w), x),
                  [(256, 256), (256, 256)], np.float64),
}


def _products_reference(name, args):
    fn = PRODUCTS[name][0]
    if name == "in a loop":
        x, w = args
        for _ in range(3):
            x = np.tanh(x @ w)
        return x
    if name == "batched, transposed B":
        return args[0] @ np.swapaxes(args[1], -1, -2)
    return fn(*args)


@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_products_run_their_blocks_on_the_pool_with_the_same_bits(name, tmp_path, monkeypatch):
    # (the inline kernels' blocks; test_matmul_library.py: the prebuilt routines' on the same pool)
    monkeypatch.setenv("SPRUE_MATMUL_LIBRARY", "0")
    fn, shapes, dtype = PRODUCTS[name]
    args = [(RNG.random(s) / s[-1]).astype(dtype) for s in shapes]
    f = sprue.qjit(fn, keep_intermediate=str(tmp_path))
    got = _same_bits_each_thread_count(f, *args)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, _products_reference(name, args), rtol=tol, atol=tol)
    assert _parallel_calls(tmp_path), "no block of the product ran on the pool"


@pytest.mark.parametrize("shape", [(256, 1024, 256), (1024, 100, 256)], ids=["ffn's second", "a gradient's"])
def test_products_of_few_column_blocks_split_them_narrower(shape, tmp_path, monkeypatch):
    """B's 256 columns made two blocks of 128, two trips for the pool (no slack for a slowed
    thread): now at least matmul.PARALLEL_BLOCKS narrower ones. (The inline kernel's split: such
    products call the prebuilt library otherwise, matmul_library.py.)"""
    monkeypatch.setenv("SPRUE_MATMUL_LIBRARY", "0")
    m, k, n = shape
    a, b = RNG.random((m, k)) / k, RNG.random((k, n))
    f = sprue.qjit(lambda a, b: a @ b, keep_intermediate=str(tmp_path))
    np.testing.assert_allclose(_same_bits_each_thread_count(f, a, b), a @ b, rtol=1e-12)
    ((_, trips, grain),) = _parallel_calls(tmp_path)
    assert trips >= matmul.PARALLEL_BLOCKS and grain == 1, (trips, grain)


def test_small_products_stay_serial(tmp_path):
    a, b = RNG.random((48, 48)), RNG.random((48, 48))
    f = sprue.qjit(lambda a, b: a @ b, keep_intermediate=str(tmp_path))
    np.testing.assert_allclose(f(a, b), a @ b, rtol=1e-12)
    assert _parallel_calls(tmp_path) == []


def _elementwise(x, y):
    return jnp.exp(x) * y + jnp.sin(y) * jnp.tanh(x - y)


def _elementwise_reference(x, y):
    return np.exp(x) * y + np.sin(y) * np.tanh(x - y)


def test_ops_inside_loops_run_on_the_pool(tmp_path):
    def loop(x, y):
        return sprue.lax.fori_loop(0, 3, lambda i, z: _elementwise(z, y), x)
    x, y = RNG.random((600, 500)), RNG.random((600, 500))
    f = sprue.qjit(loop, keep_intermediate=str(tmp_path))
    got = _same_bits_each_thread_count(f, x, y)
    want = x
    for _ in range(3):
        want = _elementwise_reference(want, y)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert _parallel_calls(tmp_path)


@pytest.mark.parametrize("rows", [600, 5])
def test_run_time_sizes_go_to_the_pool_when_big_and_run_inline_when_small(rows, tmp_path):
    """The call is guarded by the number of iterations, known at run time only: both branches
    are in the code, each call takes one."""
    f = sprue.qjit(_elementwise, abstracted_axes=({0: "n"}, {0: "n"}), keep_intermediate=str(tmp_path))
    x, y = RNG.random((rows, 500)), RNG.random((rows, 500))
    got = _same_bits_each_thread_count(f, x, y)
    np.testing.assert_allclose(got, _elementwise_reference(x, y), rtol=1e-12, atol=1e-12)
    text = next(tmp_path.glob("*.04_loops.mlir")).read_text()
    assert "scf.if" in text and "call @__sprue_par_" in text


def test_gathers_and_per_row_indices_run_on_the_pool(tmp_path):
    """A gather's table is read from outside the op (passed to the chunks), and an index of a loop
    that is not split (argmin along a row) counts as in the serial op."""
    table, where = RNG.random(50_000), RNG.integers(0, 50_000, 600_000)
    points = RNG.random((20_000, 16))
    for name, fn, ref, args in [
            ("gather", lambda t, i: jnp.exp(t[i]) * 2.0, lambda t, i: np.exp(t[i]) * 2.0, (table, where)),
            ("argmin", lambda p: jnp.argmin(jnp.sin(p), axis=1), lambda p: np.argmin(np.sin(p), axis=1), (points,))]:
        f = sprue.qjit(fn, keep_intermediate=str(tmp_path / name))
        got = _same_bits_each_thread_count(f, *args)
        np.testing.assert_allclose(got, ref(*args), rtol=1e-12)
        assert _parallel_calls(tmp_path / name), name


@pytest.mark.parametrize("t", [256, 5])
def test_products_with_run_time_sizes_split_their_rows_when_big(t, tmp_path):
    """Attention's scores with a run-time sequence length: the register-row loop goes to the pool
    behind a test of its run-time trip count (a run-time n or k counted as a whole block)."""
    f = sprue.qjit(_attention_scores, abstracted_axes=({1: "t"}, {1: "t"}), keep_intermediate=str(tmp_path))
    q, k = RNG.random((8, t, 64)), RNG.random((8, t, 64))
    got = _same_bits_each_thread_count(f, q, k)
    np.testing.assert_allclose(got, q @ np.swapaxes(k, -1, -2), rtol=1e-12)
    assert "call @__sprue_par_" in next(tmp_path.glob("*.04_loops.mlir")).read_text()


RUN_TIME_REDUCTIONS = {
    # name: (function, numpy reference, argument, abstracted axes)
    "sum": (lambda x: x.sum(), lambda x: x.sum(), RNG.random(1_000_003), {0: "n"}),
    "sum over rows, run-time columns": (lambda x: x.sum(axis=0), lambda x: x.sum(axis=0), RNG.random((3001, 301)),
                                        {0: "n", 1: "m"}),
    "max of a square": (lambda x: (x * x).max(), lambda x: (x * x).max(), RNG.random((997, 1003)), {0: "n", 1: "m"}),
    "int sum": (lambda x: x.sum(), lambda x: x.sum(), RNG.integers(-50, 100, 900_001), {0: "n"}),
}


@pytest.mark.parametrize("name", sorted(RUN_TIME_REDUCTIONS))
@pytest.mark.parametrize("scale", [1, 1000])
def test_reductions_with_run_time_sizes_split_when_big(name, scale, tmp_path):
    """A reduction over the first loop with run-time sizes: the number of partial results is
    computed at run time from the sizes alone (same bits with any number of threads), behind a
    test of the size (small sizes run the serial loop: 1/1000 of the argument)."""
    fn, ref, x, axes = RUN_TIME_REDUCTIONS[name]
    x = x[: max(2, x.shape[0] // scale)]
    f = sprue.qjit(fn, abstracted_axes=(axes,), keep_intermediate=str(tmp_path))
    got = _same_bits_each_thread_count(f, x)
    np.testing.assert_allclose(got, ref(x), rtol=1e-10, atol=1e-10)
    text = next(tmp_path.glob("*.04_loops.mlir")).read_text()
    assert "scf.if" in text and "call @__sprue_par_" in text


@pytest.mark.parametrize("rows", [60_000, 50])
def test_long_k_products_with_run_time_sizes_sum_partial_products_when_big(rows, tmp_path):
    """`r @ X` and `X.T @ r` with a run-time number of rows (a logistic regression's gradient):
    B's row blocks split into a run-time number of chunks, each adding into a C of its own, folded
    in chunk order, behind a test of the run-time trip count."""
    def grads(x, r):
        return r @ x, x.T @ (r * 2.0), x.T @ x
    f = sprue.qjit(grads, abstracted_axes=({0: "n"}, {0: "n"}), keep_intermediate=str(tmp_path))
    x, r = RNG.random((rows, 48)), RNG.random(rows)
    got = [np.asarray(g) for g in f(x, r)]
    for n in (2, 4):
        sprue.set_num_threads(n)
        for g, h in zip(got, f(x, r)):
            np.testing.assert_array_equal(np.asarray(h), g)
    for g, want in zip(got, (r @ x, x.T @ (r * 2.0), x.T @ x)):
        np.testing.assert_allclose(g, want, rtol=1e-10)
    text = next(tmp_path.glob("*.04_loops.mlir")).read_text()
    assert "scf.if" in text and "call @__sprue_par_" in text


def _scatter_calls(folder) -> int:
    return len(re.findall(r"call @__sprue_par_s\d+\(", next(folder.glob("*.04_loops.mlir")).read_text()))


def _np_at(op, size, index, values, init=0.0):
    out = np.full((size,) + values.shape[1:], init, dtype=values.dtype)
    op.at(out, index, values)
    return out


SCATTERS = {
    # name: (function, numpy reference, arguments, abstracted axes or None)
    "segment sum": (lambda i, v: jnp.zeros(50_000).at[i].add(v * 2.0),
                    lambda i, v: _np_at(np.add, 50_000, i, v * 2.0), (RNG.integers(0, 50_000, 1_000_000), RNG.random(1_000_000))),
    "histogram, ints": (lambda i: jnp.zeros(1000, dtype=jnp.int64).at[i].add(1),
                        lambda i: np.bincount(i, minlength=1000), (RNG.integers(0, 1000, 400_000),)),
    "scatter max": (lambda i, v: jnp.full(4000, -jnp.inf).at[i].max(v),
                    lambda i, v: _np_at(np.maximum, 4000, i, v, -np.inf), (RNG.integers(0, 4000, 500_000), RNG.random(500_000))),
    "rows added": (lambda i, v: jnp.zeros((2000, 24)).at[i].add(v),
                   lambda i, v: _np_at(np.add, 2000, i, v), (RNG.integers(0, 2000, 200_000), RNG.random((200_000, 24)))),
    "gathered and scaled, run-time sizes": (
        lambda x, s, d, w: jnp.zeros_like(x).at[d].add(x[s] * w),
        lambda x, s, d, w: _np_at(np.add, x.shape[0], d, x[s] * w),
        (RNG.random(30_000), RNG.integers(0, 30_000, 500_000), RNG.integers(-30_000, 30_000, 500_000), RNG.random(500_000)),
        ({0: "n"}, {0: "e"}, {0: "e"}, {0: "e"})),
}


@pytest.mark.parametrize("name", sorted(SCATTERS))
def test_scatters_that_combine_run_on_the_pool_with_the_same_bits(name, tmp_path):
    """Each chunk of updates combines into a destination of its own (chunk 0 the real one), folded
    in chunk order: the same bits with 1, 2 and 4 threads, numpy's result up to reassociation
    (negative indices count from the end, as in numpy)."""
    fn, ref, args, *axes = SCATTERS[name]
    f = sprue.qjit(fn, abstracted_axes=axes[0] if axes else None, keep_intermediate=str(tmp_path))
    got = _same_bits_each_thread_count(f, *args)
    np.testing.assert_allclose(got, ref(*args), rtol=1e-12)
    assert _scatter_calls(tmp_path) >= 1   # (run-time sizes: one per version of the loop, legalize_scatter._versioned)


def test_small_scatters_and_scatters_that_replace_stay_serial(tmp_path):
    i, v = RNG.integers(0, 50_000, 600_000), RNG.random(600_000)
    for name, fn, ref, args in [
            ("set", lambda i, v: jnp.zeros(50_000).at[i].set(v), None, (i, v)),
            ("small", lambda i, v: jnp.zeros(500).at[i].add(v), lambda i, v: _np_at(np.add, 500, i, v), (i[:2000] % 500, v[:2000])),
            ("few trips", lambda i, v: jnp.zeros(400_000).at[i].add(v), lambda i, v: _np_at(np.add, 400_000, i, v), (i, v))]:
        f = sprue.qjit(fn, keep_intermediate=str(tmp_path / name))
        got = np.asarray(f(*args))
        if ref is not None:
            np.testing.assert_allclose(got, ref(*args), rtol=1e-12)
        else:   # (the last update of an index wins)
            want = np.zeros(50_000)
            want[i] = v
            np.testing.assert_array_equal(got, want)
        assert _scatter_calls(tmp_path / name) == 0, name


def test_batched_products_with_run_time_sizes_split_their_batch_elements(tmp_path):
    """Heads of attention with a run-time length: the product's batch loop (static, 4 x 8 heads)
    goes to the pool, each element's run-time sizes counted as whole cache blocks; same bits with
    any number of threads."""
    f = sprue.qjit(lambda q, k: jnp.einsum("bhqd,bhkd->bhqk", q, k), abstracted_axes=({2: "t"}, {2: "t"}),
                   keep_intermediate=str(tmp_path))
    q, k = RNG.random((4, 8, 96, 64)), RNG.random((4, 8, 96, 64))
    got = _same_bits_each_thread_count(f, q, k)
    np.testing.assert_allclose(got, np.einsum("bhqd,bhkd->bhqk", q, k), rtol=1e-12)
    assert re.search(r"call @__sprue_par_\d+\(%c0, %c32, ", next(tmp_path.glob("*.04_loops.mlir")).read_text())


def test_chains_run_per_batch_element_on_the_pool_with_run_time_sizes(tmp_path):
    """Attention's products and softmax, one loop over the heads (batch_fusion.py) with a run-time
    length: the loop's buffers have run-time sizes, and each chunk allocates its own; the loop goes
    to the pool with the same bits for any number of threads."""
    def heads(q, k, v, xp):
        s = xp.einsum("bhqd,bhkd->bhqk", q, k) * 0.125
        e = xp.exp(s - s.max(axis=-1, keepdims=True))
        return xp.einsum("bhqk,bhkd->bhqd", e / e.sum(axis=-1, keepdims=True), v)
    f = sprue.qjit(lambda q, k, v: heads(q, k, v, jnp), abstracted_axes=({2: "t"}, {2: "t"}, {2: "t"}),
                   keep_intermediate=str(tmp_path))
    q, k, v = (RNG.random((4, 8, 96, 64)) for _ in range(3))
    got = _same_bits_each_thread_count(f, q, k, v)
    np.testing.assert_allclose(got, heads(q, k, v, np), rtol=1e-12)
    # one call for the whole chain, over the 32 heads
    assert [n for _, n, _ in _parallel_calls(tmp_path)] == [32]
