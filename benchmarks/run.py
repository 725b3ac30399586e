"""`make bench`: every benchmark side by side in one process — sprue, numpy and, when they are
importable, jax.jit (float64) and numba — then start-up costs (import, compile) in fresh processes.

Each time is the median of at least 5 samples after a warm-up call (which compiles sprue/JAX/Numba
and is checked against numpy's result); a sample averages enough calls to last ~20 ms. sprue runs
at all threads (SPRUE_NUM_THREADS, else the CPUs this process may use) and, the same compiled code,
at 1 thread (`sprue 1t`: `sprue.set_num_threads(1)` around its samples, taken in turn with the
others); `x` is the speedup, 1-thread time / all-thread time, and `bits` says whether the two
results are bitwise equal. numpy, JAX and numba run at their defaults (all cores). The table gives
ratios as sprue's all-thread time / the other's time (below 1: sprue is faster) and each target of
issue 8. `make bench-threads` (threads.py) sweeps sizes at 1 and all threads.
Where JAX is not installed, the ratio to JAX uses the JAX times measured on this machine once
(JAX_SEEN below, marked `~`). Results also go to build/bench/results.json. Timing never fails
anything: this is a report.

    python benchmarks/run.py [--only NAME,...] [--no-startup] [--json PATH]
    python benchmarks/run.py --programs [--one-core] ...   the realistic programs (programs.py)
    python benchmarks/run.py --threads [--only KERNEL] ...    the thread-scaling sweep (threads.py)

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
    "call_2_arrays": ("<= 0.6 us", lambda row: row["times"]["sprue"] <= 0.6e-6),
    "call_dict_4": ("<= 1.5 us", lambda row: row["times"]["sprue"] <= 1.5e-6),
    "compile_cold": ("<= jax", _vs("jax", 1.0)),
    "compile_cache_hit": ("<= 10 ms", lambda row: row["times"]["sprue"] <= 0.010),
    "import_sprue": ("<= 0.5 s", lambda row: row["times"]["sprue"] <= 0.5),
}


# sprue's own function, sampled with sprue.set_num_threads(1) (the others: all_threads())
ONE_THREAD = "sprue_1t"


def all_threads() -> int:
    """The threads sprue's parallel loops use by default: SPRUE_NUM_THREADS, else the CPUs this
    process may use."""
    try:
        n = int(os.environ.get("SPRUE_NUM_THREADS", ""))
    except ValueError:
        n = 0
    return n if n >= 1 else len(os.sched_getaffinity(0))


def set_threads(n: int) -> None:
    """sprue.set_num_threads(n), when it changes."""
    import sprue
    if sprue.get_num_threads() != n:
        sprue.set_num_threads(n)


def _with_one_thread(impls: dict) -> dict:
    """impls with ONE_THREAD, sprue's own function, right before sprue: the all-thread samples
    follow sprue's own, not numpy's or JAX's, whose idle workers may still spin on a core for a
    while (OpenBLAS, Eigen) — a 1-thread sample after them is not slowed by that."""
    out = {}
    for name, fn in impls.items():
        if name == "sprue":
            out[ONE_THREAD] = fn
        out[name] = fn
    return out


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
    impls = _with_one_thread(bench.impls)
    threads = all_threads()
    set_threads(threads)
    first_call, calls, args_of, results = {}, {}, {}, {}
    for impl in sorted(impls, key=lambda name: name == ONE_THREAD):   # sprue's first call compiles
        fn = impls[impl]
        args = args_of[impl] = _device_args(fn, bench.args)
        set_threads(1 if impl == ONE_THREAD else threads)
        start = time.perf_counter()
        result = results[impl] = fn(*args)          # warm-up: compiles sprue/JAX/Numba
        first_call[impl] = time.perf_counter() - start
        np.testing.assert_allclose(np.asarray(result), np.asarray(reference), rtol=getattr(bench, "rtol", 1e-9),
                                   atol=getattr(bench, "atol", 1e-12), err_msg=f"{bench.name}: {impl}")
        start = time.perf_counter()
        fn(*args)
        calls[impl] = max(1, int(SAMPLE_SECONDS / max(time.perf_counter() - start, 1e-7)))
    samples_of: dict[str, list[float]] = {impl: [] for impl in impls}
    for _ in range(RUNS):
        for impl, fn in impls.items():
            args, n = args_of[impl], calls[impl]
            set_threads(1 if impl == ONE_THREAD else threads)
            start = time.perf_counter()
            for _ in range(n):
                fn(*args)
            samples_of[impl].append((time.perf_counter() - start) / n)
    set_threads(threads)
    times = {impl: statistics.median(ts) for impl, ts in samples_of.items()}
    spread = {impl: [min(ts), max(ts)] for impl, ts in samples_of.items()}
    row = {"module": module, "name": bench.name, "times": times, "spread": spread, "first_call": first_call,
           "threads": threads}
    if ONE_THREAD in times:
        row["speedup"] = times[ONE_THREAD] / times["sprue"]
        row["same_bits"] = _same_bits(results["sprue"], results[ONE_THREAD])
    if getattr(bench, "min_bytes", None):
        row["bound"] = _read_bound(bench.min_bytes) if bench.name == "sum" else None
    if getattr(bench, "flops", None):
        row["gflops"] = {k: bench.flops / t / 1e9 for k, t in times.items()}
    return row


def _same_bits(a, b) -> bool:
    """Results (arrays, or tuples/lists of them) bitwise equal."""
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same_bits(x, y) for x, y in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _ratios(row: dict) -> dict:
    s = row["times"].get("sprue")
    out = {}
    if s is None:
        return out
    for impl, t in row["times"].items():
        if impl not in ("sprue", ONE_THREAD):
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
    head = (f"{'benchmark':<18} {'sprue':>11} {'sprue 1t':>11} {'x':>6} {'bits':>4} {'numpy':>11} "
            f"{'jax':>11} {'numba':>11}  {'s/numpy':>8} {'s/jax':>8} {'s/numba':>8} {'s/bound':>8}  target")
    print(head)
    print("-" * len(head))
    for row in rows:
        t, r = row["times"], row["ratios"]
        target, check = TARGETS.get(row["name"], ("", lambda _: None))
        ok = check(row)
        mark = "" if ok is None else (" ok" if ok else " MISSED")
        speedup, bits = row.get("speedup"), row.get("same_bits")
        print(f"{row['name']:<18} {_fmt_time(t.get('sprue')):>11} {_fmt_time(t.get(ONE_THREAD)):>11} "
              f"{_fmt_ratio(speedup):>6} {'' if bits is None else '=' if bits else '!=':>4} "
              f"{_fmt_time(t.get('numpy')):>11} "
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
    if "--threads" in sys.argv[1:]:
        import threads
        threads.main([a for a in sys.argv[1:] if a != "--threads"])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="", help="comma-separated benchmark names")
    ap.add_argument("--no-startup", action="store_true", help="skip import/compile timings")
    ap.add_argument("--json", default=str(HERE.parent / "build" / "bench" / "results.json"))
    opts = ap.parse_args()
    only = set(filter(None, opts.only.split(",")))
    n = all_threads()
    print(f"median of {RUNS} samples after warm-up; sprue = {n} threads, sprue 1t = the same code at 1 thread"
          f" (samples in turn), x = 1t / {n} threads, bits: the two results bitwise equal; numpy, jax and numba"
          f" at their defaults; ratios are sprue's {n}-thread time / the other's (<1: sprue faster);"
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
    meta = {"runs": RUNS, "jax_seen": JAX_SEEN, "cpu": cpu_name(), "numpy": np.__version__, "threads": n,
            "cpus": sorted(os.sched_getaffinity(0))}
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
