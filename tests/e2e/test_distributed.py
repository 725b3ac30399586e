"""qjit'd kernels beyond one process (issue 17): a ProcessPoolExecutor and a real Dask cluster
(`distributed.LocalCluster`, 2 worker processes) run them over chunked data; every result is
compared with numpy's. Functions compiled in the client travel by program (api/pickle_format.py)
and load from the workers' compile cache; one never called travels by reference and is compiled
once per worker, whatever the chunks' sizes. A kernel in a worker keeps to the worker's share of
the cores (runtime/threads.py: Dask's nanny sets OMP_NUM_THREADS=1). A worker killed mid-task is
replaced and its task retried. The cluster is started once for the module (~2 s)."""
from __future__ import annotations

import importlib
import multiprocessing
import sys
import textwrap
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

import sprue

distributed = pytest.importorskip("distributed", reason="dask's distributed is not installed: pip install sprue[dask]"
                                  " (make test installs it with the test extra)")
da = pytest.importorskip("dask.array", reason="dask.array is not installed: pip install sprue[dask]")

KERNELS = textwrap.dedent('''
    import os
    import numpy as np
    import sprue
    import sprue.numpy as jnp

    @sprue.qjit(abstracted_axes={0: "n"})
    def smooth(x):
        return jnp.tanh(x) * 0.5 + jnp.sin(2.0 * x)

    @sprue.qjit(static_argnames=("axis", "keepdims"), abstracted_axes={0: "n"})
    def sum_of_squares(x, axis, keepdims):
        return jnp.sum(x * x, axis=axis, keepdims=keepdims)

    @sprue.qjit(static_argnames=("axis", "keepdims"), abstracted_axes={0: "n"})
    def total(x, axis, keepdims):
        return jnp.sum(x, axis=axis, keepdims=keepdims)

    @sprue.qjit(abstracted_axes={0: "n"})
    def poly(x):   # never called in the client: it travels by reference
        return x * x * 3.0 - x + 1.0

    def poly_compile_count():
        return poly.compile_count

    def threads_after_a_kernel():
        smooth(np.ones(4))
        return sprue.get_num_threads()

    def poly_or_die(marker, x):
        """poly(x), but the first attempt kills its worker process mid-task."""
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)
        return poly(x)
''')


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dask_kernels")
    (folder / "dask_kernels.py").write_text(KERNELS)
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module("dask_kernels"), folder
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("dask_kernels", None)


@pytest.fixture(scope="module")
def client(kernels):
    _, folder = kernels
    # the workers import the kernels' module (poly travels by reference) and inherit this
    # process's environment otherwise (the session's compile cache: tests/conftest.py)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  env={"PYTHONPATH": str(folder)}) as cluster, distributed.Client(cluster) as c:
        yield c


def _chunks(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n) for n in sizes]


def test_client_map_runs_a_kernel_compiled_in_the_client(kernels, client):
    k, _ = kernels
    chunks = _chunks([1000, 1700, 2500, 300])
    k.smooth(chunks[0])
    got = client.gather(client.map(k.smooth, chunks))
    for c, g in zip(chunks, got):
        np.testing.assert_allclose(g, np.tanh(c) * 0.5 + np.sin(2.0 * c), rtol=1e-12, atol=1e-15)


def test_map_blocks_over_a_chunked_array(kernels, client):
    k, _ = kernels
    x = np.random.default_rng(1).standard_normal(20_000)
    dx = da.from_array(x, chunks=6_000)   # chunks of 6000, 6000, 6000, 2000: one compilation
    got = dx.map_blocks(k.smooth, dtype=np.float64, meta=np.empty((0,))).compute()
    np.testing.assert_allclose(got, np.tanh(x) * 0.5 + np.sin(2.0 * x), rtol=1e-12, atol=1e-15)


def test_a_reduction_tree_of_qjit_kernels(kernels, client):
    k, _ = kernels
    x = np.random.default_rng(2).standard_normal(50_000)
    k.sum_of_squares(x[:10], axis=(0,), keepdims=True)   # compiled here: they travel by program
    k.total(x[:10], axis=(0,), keepdims=True)
    k.total(x[:10], axis=(0,), keepdims=False)
    dx = da.from_array(x, chunks=5_000)
    tree = da.reduction(dx, k.sum_of_squares, k.total, split_every=2, dtype=np.float64)   # 10 -> 5 -> 3 -> 2 -> 1
    np.testing.assert_allclose(tree.compute(), np.sum(x * x), rtol=1e-12)


def test_a_function_never_called_compiles_once_per_worker_for_every_chunk_size(kernels, client):
    k, _ = kernels
    assert k.poly.compile_count == 0
    chunks = _chunks([500, 800, 1300, 2100, 3400, 5500], seed=3)
    got = client.gather(client.map(k.poly, chunks))
    for c, g in zip(chunks, got):
        np.testing.assert_allclose(g, c * c * 3.0 - c + 1.0, rtol=1e-12)
    counts = client.run(k.poly_compile_count)
    assert sorted(counts.values()) in ([0, 1], [1, 1]), counts   # a worker that ran none has 0
    assert k.poly.compile_count == 0


def test_a_kernel_in_a_worker_uses_the_workers_threads(kernels, client):
    k, _ = kernels
    assert set(client.run(k.threads_after_a_kernel).values()) == {1}


def test_a_worker_killed_mid_task_is_replaced_and_the_task_retried(kernels, client, tmp_path):
    k, _ = kernels
    x = _chunks([4096], seed=4)[0]
    future = client.submit(k.poly_or_die, str(tmp_path / "died-once"), x, pure=False)
    np.testing.assert_allclose(future.result(timeout=120), x * x * 3.0 - x + 1.0, rtol=1e-12)
    assert (tmp_path / "died-once").exists()   # the first attempt did die


def test_a_process_pool_maps_a_kernel_over_chunks(kernels):
    k, _ = kernels
    chunks = _chunks([1000, 2000, 3000, 4000], seed=5)
    k.smooth(chunks[0])
    spawn = multiprocessing.get_context("spawn")   # fresh processes, as forkserver (3.14's default) gives
    with ProcessPoolExecutor(2, mp_context=spawn, initializer=sprue.set_num_threads, initargs=(1,)) as pool:
        got = list(pool.map(k.smooth, chunks))
        threads = {pool.submit(sprue.get_num_threads).result() for _ in range(4)}
    for c, g in zip(chunks, got):
        np.testing.assert_allclose(g, np.tanh(c) * 0.5 + np.sin(2.0 * c), rtol=1e-12, atol=1e-15)
    assert threads == {1}


def test_the_dask_pipeline_example_runs_and_agrees_with_numpy(tmp_path):
    """examples/dask_pipeline.py at a tiny size (it checks its totals against numpy's itself)."""
    import os
    import subprocess
    from pathlib import Path
    example = Path(__file__).resolve().parents[2] / "examples" / "dask_pipeline.py"
    proc = subprocess.run([sys.executable, str(example), "--chunks", "5", "--chunk-mb", "0.25", "--hidden", "16",
                           "--budget-mb", "1024"], capture_output=True, text=True, cwd=tmp_path, timeout=600,
                          env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "results equal numpy's" in proc.stdout and "workers' sprue threads: [1, 1]" in proc.stdout, proc.stdout
