"""`make bench`: every benchmark side by side in one process — sprue, numpy and, when they are
importable, jax.jit (float64) and numba — then start-up costs (import, compile) in fresh processes.

Each time is the median of at least 5 samples after a warm-up call (which compiles sprue/JAX/Numba
and is checked against numpy's result); a sample averages enough calls to last ~20 ms. The table
gives ratios as sprue's time / the other's time (below 1: sprue is faster) and each target of issue 8.
Where JAX is not installed, the ratio to JAX uses the JAX times measured on this machine once
(JAX_SEEN below, marked `~`). Results also go to build/bench/results.json. Timing never fails
anything: this is a report.

    python benchmarks/run.py [--only NAME,...] [--no-startup] [--json PATH]
    python benchmarks/run.py --programs [--one-core] ...   the realistic programs (programs.py)

A benchmark module has `benchmarks() -> list[Benchmark]` (name, args, impls by name, numpy's first).
Extra import paths (a throwaway venv holding jax/numba) can be appended with SPRUE_BENCH_EXTRA_PATH.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
for _extra in filter(None, os.environ.get("SPRUE_BENCH_EXTRA_PATH", "").split(os.pathsep)):
    sys.path.append(_extra)

MODULES = ["kernels", "control_flow", "dynamic_shapes"]
RUNS = 7
SAMPLE_SECONDS = 0.02

# JAX (jit, float64) on this machine, seconds: used for the ratio when jax is not importable.
JAX_SEEN = {
    "elementwise": 0.126, "matmul_512": 0.0056, "matmul_1024": 0.045, "sum": 0.0039, "softmax": 0.026,
    "logistic_map": 0.00147, "newton_sqrt": 0.00021, "scalar_call": 6.5e-6, "compile_cold": 0.13,
}

# name -> (description, check(row) -> bool | None)
def _vs(impl: str, limit: float):
    def check(row):
        r = row["ratios"].get(impl)
        return None if r is None else r <= limit
    return check


TARGETS = {
    "elementwise": ("<= 0.5x jax", _vs("jax", 0.5)),
    "matmul_512": ("<= 1.0x jax", _vs("jax", 1.0)),
    "matmul_1024": ("<= 1.0x jax", _vs("jax", 1.0)),
    "sum": ("<= 1.1x bandwidth bound", _vs("bound", 1.1)),
    "softmax": ("<= 1.0x jax", _vs("jax", 1.0)),
    "logistic_map": ("<= numba", _vs("numba", 1.0)),
    "newton_sqrt": ("<= numba", _vs("numba", 1.0)),
    "new_sizes": ("no recompile, <= 1.5x numpy", _vs("numpy", 1.5)),
    "scalar_call": ("<= 1 us", lambda row: row["times"]["sprue"] <= 1e-6),
    "compile_cold": ("<= jax", _vs("jax", 1.0)),
    "compile_cache_hit": ("<= 10 ms", lambda row: row["times"]["sprue"] <= 0.010),
    "import_sprue": ("<= 0.5 s", lambda row: row["times"]["sprue"] <= 0.5),
}


def samples(fn, args, runs: int = RUNS) -> list[float]:
    """`runs` timings (seconds per call) after one warm-up call; each averages enough calls to last
    SAMPLE_SECONDS."""
    start = time.perf_counter()
    fn(*args)
    once = max(time.perf_counter() - start, 1e-7)
    calls = max(1, int(SAMPLE_SECONDS / once))
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        out.append((time.perf_counter() - start) / calls)
    return out


def _read_bound(nbytes: int) -> float:
    """Seconds to stream `nbytes` from memory once: the fastest read-only pass numpy makes over an
    array that size (sum, max, integer or-reduce), a practical bandwidth bound."""
    x = np.random.default_rng(1).uniform(size=nbytes // 8)
    passes = [lambda: np.sum(x), lambda: np.max(x), lambda: np.bitwise_or.reduce(x.view(np.int64))]
    return min(statistics.median(samples(p, ())) for p in passes)


def _device_args(fn, args):
    if getattr(fn, "device_args", False):
        import jax
        return tuple(jax.device_put(a) for a in args)
    return args


def run_benchmark(module: str, bench) -> dict:
    """Every implementation warmed up and checked, then sampled in turn, RUNS rounds (this VM's speed
    drifts over seconds: implementations timed one after the other compared their moments, not
    themselves: a 256^2 product once 1.0x numpy, then 2.0x in the next run)."""
    reference = bench.impls["numpy"](*bench.args)
    first_call, calls, args_of = {}, {}, {}
    for impl, fn in bench.impls.items():
        args = args_of[impl] = _device_args(fn, bench.args)
        start = time.perf_counter()
        result = fn(*args)          # warm-up: compiles sprue/JAX/Numba
        first_call[impl] = time.perf_counter() - start
        np.testing.assert_allclose(np.asarray(result), np.asarray(reference), rtol=getattr(bench, "rtol", 1e-9),
                                   atol=getattr(bench, "atol", 1e-12), err_msg=f"{bench.name}: {impl}")
        start = time.perf_counter()
        fn(*args)
        calls[impl] = max(1, int(SAMPLE_SECONDS / max(time.perf_counter() - start, 1e-7)))
    samples_of: dict[str, list[float]] = {impl: [] for impl in bench.impls}
    for _ in range(RUNS):
        for impl, fn in bench.impls.items():
            args, n = args_of[impl], calls[impl]
            start = time.perf_counter()
            for _ in range(n):
                fn(*args)
            samples_of[impl].append((time.perf_counter() - start) / n)
    times = {impl: statistics.median(ts) for impl, ts in samples_of.items()}
    spread = {impl: [min(ts), max(ts)] for impl, ts in samples_of.items()}
    row = {"module": module, "name": bench.name, "times": times, "spread": spread, "first_call": first_call}
    if getattr(bench, "min_bytes", None):
        row["bound"] = _read_bound(bench.min_bytes) if bench.name == "sum" else None
    if getattr(bench, "flops", None):
        row["gflops"] = {k: bench.flops / t / 1e9 for k, t in times.items()}
    return row


def _ratios(row: dict) -> dict:
    s = row["times"].get("sprue")
    out = {}
    if s is None:
        return out
    for impl, t in row["times"].items():
        if impl != "sprue":
            out[impl] = s / t
    if "jax" not in row["times"] and row["name"] in JAX_SEEN:
        out["jax~"] = s / JAX_SEEN[row["name"]]
        out["jax"] = out["jax~"]
    if row.get("bound"):
        out["bound"] = s / row["bound"]
    return out


def _fmt_time(t: float | None) -> str:
    if t is None:
        return "-"
    if t < 1e-3:
        return f"{t * 1e6:8.2f} us"
    if t < 1.0:
        return f"{t * 1e3:8.2f} ms"
    return f"{t:8.3f} s "


def _fmt_ratio(r: float | None, approx: bool = False) -> str:
    return "-" if r is None else f"{'~' if approx else ''}{r:.2f}x"


def print_table(rows: list[dict]) -> None:
    head = (f"{'benchmark':<18} {'sprue':>11} {'numpy':>11} {'jax':>11} {'numba':>11}  "
            f"{'s/numpy':>8} {'s/jax':>8} {'s/numba':>8} {'s/bound':>8}  target")
    print(head)
    print("-" * len(head))
    for row in rows:
        t, r = row["times"], row["ratios"]
        target, check = TARGETS.get(row["name"], ("", lambda _: None))
        ok = check(row)
        mark = "" if ok is None else (" ok" if ok else " MISSED")
        print(f"{row['name']:<18} {_fmt_time(t.get('sprue')):>11} {_fmt_time(t.get('numpy')):>11} "
              f"{_fmt_time(t.get('jax')):>11} {_fmt_time(t.get('numba')):>11}  "
              f"{_fmt_ratio(r.get('numpy')):>8} {_fmt_ratio(r.get('jax'), 'jax~' in r):>8} "
              f"{_fmt_ratio(r.get('numba')):>8} {_fmt_ratio(r.get('bound')):>8}  {target}{mark}", flush=True)
        if row.get("gflops"):
            print(f"{'':<18} GFLOP/s: " + ", ".join(f"{k} {v:.1f}" for k, v in row["gflops"].items()))


def main() -> None:
    if "--programs" in sys.argv[1:]:
        import programs
        programs.main([a for a in sys.argv[1:] if a != "--programs"])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="", help="comma-separated benchmark names")
    ap.add_argument("--no-startup", action="store_true", help="skip import/compile timings")
    ap.add_argument("--json", default=str(HERE.parent / "build" / "bench" / "results.json"))
    opts = ap.parse_args()
    only = set(filter(None, opts.only.split(",")))
    print(f"median of {RUNS} samples after warm-up; ratios are sprue's time / the other's (<1: sprue faster);"
          f" ~ = JAX time seen on this machine (jax not importable)\n")
    rows = []
    for name in MODULES:
        module = importlib.import_module(name)
        for bench in module.benchmarks():
            if only and bench.name not in only:
                continue
            row = run_benchmark(name, bench)
            row["ratios"] = _ratios(row)
            rows.append(row)
            _print_row(row)
    if not opts.no_startup and (not only or only & {"compile_cold", "compile_cache_hit", "import_sprue"}):
        import startup
        for name, impls in startup.measurements(RUNS).items():
            row = {"module": "startup", "name": name, "times": {k: statistics.median(v) for k, v in impls.items()},
                   "spread": {k: [min(v), max(v)] for k, v in impls.items()}}
            row["ratios"] = _ratios(row)
            rows.append(row)
            _print_row(row)
    for row in rows:
        target, check = TARGETS.get(row["name"], ("", lambda _: None))
        row["target"], row["target_met"] = target, check(row)
    path = Path(opts.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"runs": RUNS, "jax_seen": JAX_SEEN, "cpu": cpu_name(), "numpy": np.__version__}
    path.write_text(json.dumps({"meta": meta, "results": rows}, indent=1))
    print(f"\nwritten {path}")


_printed_header = False


def _print_row(row: dict) -> None:
    global _printed_header
    if not _printed_header:
        _printed_header = True
        print_table([row])
        return
    # the same layout without the header
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print_table([row])
    print("\n".join(buf.getvalue().splitlines()[2:]), flush=True)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


if __name__ == "__main__":
    main()
