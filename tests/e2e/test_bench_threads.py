"""The thread-scaling sweep of benchmarks/threads.py and the 1-thread column of benchmarks/run.py
at tiny sizes: every kernel compiled once per size, its results at 1 and at 2 threads equal numpy's
(measure raises otherwise), the speedup and the bit comparison reported. No JAX, no timing
assertions: the times are the benchmark's report."""
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import run  # noqa: E402  (benchmarks/ is not a package)
import threads  # noqa: E402

import sprue  # noqa: E402

# one size below the parallel threshold and one above it (matmul: n)
TINY = {"matmul": (8, 64)}


@pytest.fixture(autouse=True)
def _restore_threads():
    before = sprue.get_num_threads()
    yield
    sprue.set_num_threads(before or run.all_threads())


@pytest.mark.parametrize("kernel", threads.KERNELS, ids=lambda k: k.name)
def test_sweep_point_equals_numpy_at_1_and_2_threads(kernel):
    sizes = {kernel.name: TINY.get(kernel.name, (1_000, 70_000))}
    rows, errors = threads.sweep([kernel], sizes, runs=1, threads=2, out=lambda line: None)
    assert errors == []
    for row in rows:
        assert set(row["times"]) == {"1", "all"} and row["threads"] == 2
        assert row["speedup"] == pytest.approx(row["times"]["1"] / row["times"]["all"])
        assert isinstance(row["slower"], bool) and isinstance(row["same_bits"], bool)
        assert threads.format_row(row).startswith(kernel.name)
    assert sprue.get_num_threads() == 2     # left at all threads


def test_sweep_reports_a_wrong_result():
    wrong = threads.Kernel("wrong", threads.kernels.sum_sprue, lambda x: np.sum(x) + 1.0, None,
                           threads._vector, (1_000,))
    rows, errors = threads.sweep([wrong], runs=1, threads=2, out=lambda line: None)
    assert rows == [] and len(errors) == 1
    assert errors[0]["error"].startswith("AssertionError") and errors[0]["kernel"] == "wrong"


def test_slower_and_targets():
    assert threads.slower({"1": 1.0, "all": 1.06})
    assert not threads.slower({"1": 1.0, "all": 1.04})

    def row(kernel, size, shape, speedup, slower=False, vs_jax=None):
        r = {"kernel": kernel, "size": size, "shape": [shape], "elements": int(np.prod(shape)),
             "speedup": speedup, "slower": slower}
        if vs_jax is not None:
            r["vs_jax"] = vs_jax
        return r
    again = row("sum", 10_000_000, [10_000_000], 0.6)
    again["remeasured"] = {"speedup": 1.2}     # the longer measurement counts
    rows = [row("elementwise", 10_000_000, [10_000_000], 1.9), again,
            row("softmax", 1_000, [1, 512], 0.7, slower=True), row("matmul", 512, [512, 512], 1.8, vs_jax=0.9)]
    got = {text.split(":")[0]: (ok, detail) for text, ok, detail in threads.targets(rows)}
    assert got["elementwise 10000000"] == (True, "1.90x")
    assert got["sum 10000000"] == (False, "1.20x")
    assert "softmax 1x512" not in got           # only measured at 1e7 elements
    assert got["matmul 512^2"] == (True, "0.90x")
    slower = [v for k, v in got.items() if k.startswith("no size slower")]
    assert slower == [(False, "softmax 1x512")]


def test_run_benchmark_has_a_one_thread_column(monkeypatch):
    monkeypatch.setattr(run, "RUNS", 1)
    monkeypatch.setenv("SPRUE_NUM_THREADS", "2")
    x = np.random.default_rng(0).uniform(-3.0, 3.0, 70_000)
    bench = threads.kernels.Benchmark("elementwise", (x,), {"numpy": threads.kernels.elementwise_numpy,
                                                            "sprue": threads.kernels.elementwise_sprue})
    row = run.run_benchmark("kernels", bench)
    assert set(row["times"]) == {"numpy", "sprue", run.ONE_THREAD} and row["threads"] == 2
    assert row["speedup"] == pytest.approx(row["times"][run.ONE_THREAD] / row["times"]["sprue"])
    assert row["same_bits"]                 # elementwise: the same bits for every thread count
    row["ratios"] = run._ratios(row)
    assert set(row["ratios"]) - {"jax", "jax~"} == {"numpy"}  # 1 thread: the speedup, not a ratio
    assert sprue.get_num_threads() == 2
