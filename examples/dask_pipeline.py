"""sprue on a Dask cluster: a dataset larger than a worker's memory budget, stored as chunk files,
scored chunk by chunk by a qjit'd kernel on a LocalCluster of worker processes, checked against
numpy and timed against one process doing the same chunks in turn.

    pip install 'sprue[dask]'
    python examples/dask_pipeline.py [--chunks 160] [--chunk-mb 2] [--hidden 64] [--workers 2] [--budget-mb 256]

The kernel is compiled once, here, on a small array: with `abstracted_axes` that one compilation
fits every chunk size, and the function travels to the workers as its compiled program (pickled
by program: README, "Beyond one process"), where each loads the library from the compile cache --
no worker imports MLIR or compiles anything. Each worker runs its kernels on one thread (Dask's
nanny sets OMP_NUM_THREADS=1, which sprue follows when SPRUE_NUM_THREADS is unset): the cluster's
parallelism is its worker processes.
"""
from __future__ import annotations

import argparse
import functools
import tempfile
import time
from pathlib import Path

import dask.array as da
import numpy as np
from distributed import Client, LocalCluster

import sprue
import sprue.numpy as jnp


@sprue.qjit(abstracted_axes=(None, {0: "n"}))
def score(params, x):
    """A chunk's partial score, as a 1-element array (one per chunk, summed by Dask): every row
    through a small network (8 -> hidden -> hidden -> 1, tanh), the outputs summed. The rows'
    count is a run-time size: one compilation serves every chunk."""
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    h = jnp.tanh(h @ params["w2"] + params["b2"])
    return jnp.reshape(jnp.sum(h @ params["w3"]), (1,))


def score_numpy(params, x):
    h = np.tanh(x @ params["w1"] + params["b1"])
    h = np.tanh(h @ params["w2"] + params["b2"])
    return np.sum(h @ params["w3"])


def make_params(hidden: int) -> dict:
    rng = np.random.default_rng(1)
    return {"w1": rng.standard_normal((COLUMNS, hidden)) / np.sqrt(COLUMNS), "b1": rng.standard_normal(hidden) * 0.1,
            "w2": rng.standard_normal((hidden, hidden)) / np.sqrt(hidden), "b2": rng.standard_normal(hidden) * 0.1,
            "w3": rng.standard_normal(hidden) / np.sqrt(hidden)}


COLUMNS = 8


def write_dataset(folder: Path, chunks: int, chunk_mb: float) -> list[int]:
    """`chunks` files of about `chunk_mb` MB each (float64 rows of COLUMNS values, dask's npy stack:
    folder/0.npy, 1.npy, ...), of different row counts, as a real dataset's last chunk rarely is
    full; written by dask chunk by chunk, never whole in memory. The chunks' row counts."""
    rows = int(chunk_mb * 2**20 / (8 * COLUMNS))
    sizes = tuple(rows - (i % 3) * (rows // 7) for i in range(chunks))
    data = da.random.default_rng(0).standard_normal((sum(sizes), COLUMNS), chunks=(sizes, COLUMNS))
    da.to_npy_stack(folder, data, axis=0)
    return list(sizes)


def one_process(folder: Path, chunks: int, fn, params) -> tuple[float, float]:
    """(total, seconds) of fn over the chunk files in turn, one chunk in memory at a time."""
    start = time.perf_counter()
    total = 0.0
    for i in range(chunks):
        total += float(np.sum(fn(params, np.load(folder / f"{i}.npy"))))
    return total, time.perf_counter() - start


def on_cluster(folder: Path, params, workers: int, budget_mb: float) -> tuple[float, float, dict]:
    """(total, seconds, each worker's sprue threads) of the chunks scored on a LocalCluster."""
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                      memory_limit=f"{budget_mb}MB") as cluster, Client(cluster) as client:
        client.run(lambda: None)   # workers up before the clock starts
        start = time.perf_counter()
        x = da.from_npy_stack(folder, mmap_mode=None)   # a task per chunk file, read by the worker
        # one partial score per chunk (params travel with the function: small next to a chunk)
        partials = x.map_blocks(functools.partial(score, params), drop_axis=1, chunks=((1,) * x.numblocks[0],),
                                dtype=np.float64, meta=np.empty((0,)))
        total = float(partials.sum().compute())
        seconds = time.perf_counter() - start
        threads = client.run(sprue.get_num_threads)
    return total, seconds, threads


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=160)
    ap.add_argument("--chunk-mb", type=float, default=2.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64, help="the network's hidden width")
    ap.add_argument("--budget-mb", type=float, default=256.0, help="each worker's memory limit")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="sprue-dask-") as tmp:
        folder = Path(tmp) / "dataset"
        sizes = write_dataset(folder, args.chunks, args.chunk_mb)
        size_mb = sum(p.stat().st_size for p in folder.glob("*.npy")) / 2**20
        print(f"dataset: {len(sizes)} chunk files of {min(sizes)} to {max(sizes)} rows, {size_mb:.0f} MB in all;"
              f" each worker's memory budget {args.budget_mb:.0f} MB")

        params = make_params(args.hidden)
        score(params, np.zeros((4, COLUMNS)))   # compiled once, here: every chunk size fits (abstracted_axes)
        want, t_numpy = one_process(folder, args.chunks, score_numpy, params)
        sprue.set_num_threads(1)
        one, t_one = one_process(folder, args.chunks, score, params)
        sprue.set_num_threads(args.workers)
        threaded, t_threaded = one_process(folder, args.chunks, score, params)
        total, t_cluster, threads = on_cluster(folder, params, args.workers, args.budget_mb)

    for name, got in [("one process", one), ("one process, threads", threaded), ("cluster", total)]:
        np.testing.assert_allclose(got, want, rtol=1e-9, err_msg=name)
    print(f"numpy, one process:               {t_numpy:6.2f} s   total {want:.10g}")
    print(f"sprue, one process, 1 thread:     {t_one:6.2f} s   total {one:.10g}")
    print(f"sprue, one process, {args.workers} threads:    {t_threaded:6.2f} s   total {threaded:.10g}")
    print(f"sprue, {args.workers} Dask workers x 1 thread: {t_cluster:6.2f} s   total {total:.10g}"
          f"   (workers' sprue threads: {sorted(threads.values())})")
    print(f"speedup of the cluster over one process at 1 thread: {t_one / t_cluster:.2f}x; results equal numpy's"
          f" (rtol 1e-9)")


if __name__ == "__main__":
    main()
