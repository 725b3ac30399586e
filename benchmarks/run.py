"""`make bench`: run every benchmark module and report each implementation's time as a ratio to
numpy's (higher is faster than numpy). Compilation happens in the warm-up call and is not timed;
results are checked against numpy's before timing. Timing never fails anything: this is a report.

A benchmark module has `benchmarks() -> list[Benchmark]` (name, args, impls by name, numpy's first).
"""
from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

MODULES = ["control_flow", "dynamic_shapes"]


def best_time(fn, args, min_total: float = 0.2, repeats: int = 5) -> float:
    """The best of `repeats` timings, each averaging enough calls to last `min_total` / repeats."""
    start = time.perf_counter()
    fn(*args)
    once = max(time.perf_counter() - start, 1e-7)
    calls = max(1, int(min_total / repeats / once))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def run_module(name: str) -> list[str]:
    module = importlib.import_module(name)
    lines = []
    for bench in module.benchmarks():
        reference = bench.impls["numpy"](*bench.args)
        times = {}
        for impl, fn in bench.impls.items():
            start = time.perf_counter()
            result = fn(*bench.args)          # warm-up: compiles sprue/JAX/Numba
            first = time.perf_counter() - start
            np.testing.assert_allclose(result, reference, rtol=1e-9, err_msg=f"{bench.name}: {impl}")
            times[impl] = best_time(fn, bench.args)
            if impl != "numpy":
                times[f"{impl} (first call)"] = first
        base = times["numpy"]
        cells = [f"{impl} {t * 1e3:9.3f} ms" + ("" if impl == "numpy" or "first" in impl else f" ({base / t:6.1f}x)")
                 for impl, t in times.items()]
        lines.append(f"{name}.{bench.name:<16} " + " | ".join(cells))
    return lines


def main() -> None:
    print("time per call; (Nx) = numpy time / this time\n")
    for name in MODULES:
        for line in run_module(name):
            print(line, flush=True)


if __name__ == "__main__":
    main()
