"""Realistic whole programs (issue 13): each written once against a jax-like namespace
(benchmarks/program_sources.py) and run in one process by sprue with static shapes
(`sprue.qjit`), sprue with dynamic shapes (`sprue.qjit(abstracted_axes=...)`), and `jax.jit`
(float64) when JAX is importable. Every result is checked against the same code run eagerly on
numpy (sprue.numpy outside qjit) before timing. Times are medians of RUNS samples after the
warm-up call, the implementations sampled in turn; the first call's time (trace + compile + one run, with sprue's compile cache off)
is reported separately, each side's start-up done before it (sprue's deferred compiler import, JAX's
backend start-up: reported in the header, as compile_time.py reports imports). Timing never fails anything: this is a report.

    python benchmarks/programs.py [--only NAME,...] [--one-core] [--float32] [--json PATH]

`--one-core` re-executes the script under `taskset -c 0` with XLA's intra-op parallelism at 1
and single-threaded OpenBLAS, the per-core comparison of issue 13's "Done when" (sprue's default
thread count is then 1: the CPUs it may use). Without it every side uses every core (issue 14):
sprue's parallel loops at SPRUE_NUM_THREADS, else the CPUs this process may use; XLA and OpenBLAS
at their defaults.
`--float32` runs the same programs on float32 inputs against JAX without x64 (its default: what
a JAX user's program runs in), results checked to float32 accuracy.
Extra import paths (a throwaway venv holding jax) come from SPRUE_BENCH_EXTRA_PATH.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import program_sources  # noqa: E402  (after the path set-up above)
from run import all_threads, cpu_name  # noqa: E402  (run.py also appends SPRUE_BENCH_EXTRA_PATH to sys.path)

RUNS = 7
SAMPLE_SECONDS = 0.05
ONE_CORE_ENV = "SPRUE_BENCH_ONE_CORE"
XLA_ONE_CORE = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def _add_at_traced(x, index, values):
    return x.at[index].add(values)


def _add_at_eager(x, index, values):
    if hasattr(x, "at"):
        return x.at[index].add(values)
    out = np.array(x, copy=True)
    np.add.at(out, index, values)
    return out


def sprue_namespace():
    import sprue
    import sprue.lax
    import sprue.nn
    import sprue.numpy
    return SimpleNamespace(np=sprue.numpy, lax=sprue.lax, nn=sprue.nn, grad=sprue.grad,
                           value_and_grad=sprue.value_and_grad, vmap=sprue.vmap, add_at=_add_at_eager)


def start_up(jax_ns) -> str:
    """Each side's start-up, done before any first call is timed (as compile_time.py does): sprue's
    compiler modules, which `import sprue` defers to the first compile (MLIR bindings, llvmlite), and
    JAX's CPU backend (`jax.devices()`). Returns the times, for the header."""
    start = time.perf_counter()
    for mod in ("backend", "stablehlo", "stablehlo_input", "targets"):
        importlib.import_module(f"sprue.lowering.{mod}")
    note = f"start-up outside first calls: sprue's compiler import {1e3 * (time.perf_counter() - start):.0f} ms"
    if jax_ns is not None:
        start = time.perf_counter()
        jax_ns.jax.devices()
        note += f", jax.devices() {1e3 * (time.perf_counter() - start):.0f} ms"
    return note


def jax_namespace(x64: bool = True):
    """jax with float64 (or JAX's default 32-bit types), or None when it is not importable."""
    try:
        import jax
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", x64)
    import jax.nn
    import jax.numpy as jnp
    return SimpleNamespace(np=jnp, lax=jax.lax, nn=jax.nn, grad=jax.grad, value_and_grad=jax.value_and_grad,
                           vmap=jax.vmap, add_at=_add_at_traced, jax=jax)


def reference(prog, args):
    """The program run eagerly: sprue.numpy outside qjit is numpy; lax loops run in Python."""
    return prog.fn(sprue_namespace(), *args)


def implementations(prog, jax_ns=None) -> dict:
    """name -> callable(*args) returning numpy-convertible leaves."""
    import sprue
    ns = sprue_namespace()

    def bound(*args):
        return prog.fn(ns, *args)

    bound.__name__ = prog.name
    # qjit matches abstracted_axes to named parameters: show it the program's, without `m`
    params = list(inspect.signature(prog.fn).parameters.values())[1:]
    bound.__signature__ = inspect.Signature(params)
    impls = {"sprue": sprue.qjit(bound), "sprue_dyn": sprue.qjit(bound, abstracted_axes=prog.axes)}
    if jax_ns is not None:
        jitted = jax_ns.jax.jit(lambda *args: prog.fn(jax_ns, *args))

        def run_jax(*args):
            return jax_ns.jax.block_until_ready(jitted(*args))

        run_jax.device_args = True
        impls["jax"] = run_jax
    return impls


def leaves(result) -> list:
    if isinstance(result, (tuple, list)):
        return [leaf for r in result for leaf in leaves(r)]
    return [np.asarray(result)]


def to_float32(args: tuple) -> tuple:
    """The program's float64 arrays and Python floats as float32 (--float32)."""
    return tuple(a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype == np.float64 else
                 np.float32(a) if isinstance(a, float) else a for a in args)


# float32 results: within FLOAT32_TOL of the largest reference value, but for a few elements of a
# chaotic program (Mandelbrot's counts, which float32 rounding moves by an iteration or two)
FLOAT32_TOL = 2e-3
FLOAT32_OUTLIERS = 1e-3


def check(prog, name, result, expected, float32: bool = False) -> None:
    got, want = leaves(result), leaves(expected)
    if len(got) != len(want):
        raise AssertionError(f"{prog.name}: {name} gave {len(got)} results, numpy {len(want)}")
    for i, (g, w) in enumerate(zip(got, want)):
        if not float32:
            np.testing.assert_allclose(g, w, rtol=prog.rtol, atol=1e-9,
                                       err_msg=f"{prog.name}: {name}, result {i}")
            continue
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        off = np.abs(g - w) > FLOAT32_TOL * max(float(np.abs(w).max(initial=0.0)), 1e-30)
        if off.mean() > FLOAT32_OUTLIERS:
            raise AssertionError(f"{prog.name}: {name}, result {i}: {off.sum()} of {off.size} elements "
                                 f"beyond {FLOAT32_TOL} of the largest (float32)")


def sample(fn, args, calls: int) -> float:
    """Seconds per call, averaged over `calls` calls."""
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    return (time.perf_counter() - start) / calls


def run_program(prog, jax_ns, float32: bool = False) -> dict:
    """First calls (checked against numpy), then RUNS rounds in which every implementation takes
    one sample in turn: on a machine others share, a burst of load then hits all of them alike
    instead of one implementation's whole series. JAX failing on a program (without x64, an
    integer argument beyond int32) drops its column for that program, with the reason."""
    args = to_float32(prog.make("full")) if float32 else prog.make("full")
    expected = reference(prog, args)
    impls = implementations(prog, jax_ns)
    first_call, call_args, calls, skipped = {}, {}, {}, {}
    for name, fn in list(impls.items()):
        call_args[name] = (tuple(jax_ns.jax.device_put(a) for a in args) if getattr(fn, "device_args", False)
                           else args)
        start = time.perf_counter()
        try:
            result = fn(*call_args[name])
        except Exception as err:   # noqa: BLE001  (the peer's error is reported, sprue's raise)
            if name != "jax":
                raise
            skipped[name] = f"{type(err).__name__}: {str(err).splitlines()[0][:120]}"
            del impls[name]
            continue
        first_call[name] = time.perf_counter() - start
        check(prog, name, result, expected, float32)
        once = max(sample(fn, call_args[name], 1), 1e-7)
        calls[name] = max(1, int(SAMPLE_SECONDS / once))
    series = {name: [] for name in impls}
    for _ in range(RUNS):
        for name, fn in impls.items():
            series[name].append(sample(fn, call_args[name], calls[name]))
    times = {name: statistics.median(ts) for name, ts in series.items()}
    spread = {name: [min(ts), max(ts)] for name, ts in series.items()}
    row = {"name": prog.name, "title": prog.title, "times": times, "spread": spread,
           "first_call": first_call, "ratios": {}, "skipped": skipped}
    if "jax" in times:
        row["ratios"]["sprue/jax"] = times["sprue"] / times["jax"]
        row["ratios"]["sprue_dyn/jax"] = times["sprue_dyn"] / times["jax"]
        row["ratios"]["first_call sprue/jax"] = first_call["sprue"] / first_call["jax"]
    row["ratios"]["dyn/static"] = times["sprue_dyn"] / times["sprue"]
    if prog.flops:
        flops = prog.flops(*args)
        row["gflops"] = {k: flops / t / 1e9 for k, t in times.items()}
    return row


def _fmt_time(t: float | None) -> str:
    if t is None:
        return "-"
    if t < 1e-3:
        return f"{t * 1e6:.1f} us"
    if t < 1.0:
        return f"{t * 1e3:.2f} ms"
    return f"{t:.3f} s"


def _fmt_ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}x"


HEAD = (f"{'program':<14} {'sprue':>10} {'sprue dyn':>10} {'jax':>10}  {'s/jax':>7} {'dyn/jax':>7} "
        f"{'dyn/s':>6}  {'1st sprue':>10} {'1st dyn':>10} {'1st jax':>10}  GFLOP/s s|dyn|jax")


def format_row(row: dict) -> str:
    t, r, f = row["times"], row["ratios"], row["first_call"]
    g = row.get("gflops")
    gf = "" if not g else " | ".join(f"{g[k]:.1f}" for k in ("sprue", "sprue_dyn", "jax") if k in g)
    return (f"{row['name']:<14} {_fmt_time(t.get('sprue')):>10} {_fmt_time(t.get('sprue_dyn')):>10} "
            f"{_fmt_time(t.get('jax')):>10}  {_fmt_ratio(r.get('sprue/jax')):>7} "
            f"{_fmt_ratio(r.get('sprue_dyn/jax')):>7} {_fmt_ratio(r.get('dyn/static')):>6}  "
            f"{_fmt_time(f.get('sprue')):>10} {_fmt_time(f.get('sprue_dyn')):>10} "
            f"{_fmt_time(f.get('jax')):>10}  {gf}")


def _reexec_one_core(argv: list[str]) -> None:
    taskset = shutil.which("taskset")
    if taskset is None:
        raise SystemExit("--one-core needs taskset (util-linux)")
    env = dict(os.environ, XLA_FLAGS=XLA_ONE_CORE, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               **{ONE_CORE_ENV: "1"})
    os.execve(taskset, [taskset, "-c", "0", sys.executable, str(Path(__file__).resolve()), *argv], env)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated program names")
    ap.add_argument("--one-core", action="store_true", help="re-run under taskset -c 0, XLA and BLAS on one thread")
    ap.add_argument("--float32", action="store_true", help="float32 inputs; JAX without x64 (its default)")
    ap.add_argument("--json", default=None, help="default build/bench/programs[-float32][-one-core].json")
    opts = ap.parse_args(argv)
    one_core = os.environ.get(ONE_CORE_ENV) == "1"
    if opts.one_core and not one_core:
        _reexec_one_core(argv)
    # first-call times are cold compiles: sprue's on-disk cache would turn them into cache hits
    os.environ["SPRUE_CACHE_DIR"] = "off"
    only = set(filter(None, opts.only.split(",")))
    jax_ns = jax_namespace(x64=not opts.float32)
    mode = (f"one core (taskset -c 0, XLA intra-op 1, OPENBLAS 1; cpus {sorted(os.sched_getaffinity(0))})"
            if one_core else f"{len(os.sched_getaffinity(0))} cores, sprue at {all_threads()} threads")
    if opts.float32:
        mode = "float32, jax without x64; " + mode
    print(f"realistic programs, {mode}; median of {RUNS} samples after warm-up; s = sprue static, "
          f"dyn = sprue with abstracted_axes; ratios are time / time (<1: sprue faster); "
          f"1st = first call (trace + compile + run; {start_up(jax_ns)})")
    if jax_ns is None:
        print("note: jax is not importable (set SPRUE_BENCH_EXTRA_PATH to a venv holding it): "
              "the JAX columns are skipped")
    print()
    print(HEAD)
    print("-" * len(HEAD))
    rows = []
    for prog in program_sources.PROGRAMS:
        if only and prog.name not in only:
            continue
        row = run_program(prog, jax_ns, opts.float32)
        rows.append(row)
        print(format_row(row), flush=True)
        for name, why in row["skipped"].items():
            print(f"  ({name} left out: {why})")
    name = "programs" + ("-float32" if opts.float32 else "") + ("-one-core" if one_core else "")
    path = Path(opts.json or HERE.parent / "build" / "bench" / f"{name}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"runs": RUNS, "one_core": one_core, "float32": opts.float32, "cpu": cpu_name(), "numpy": np.__version__,
            "jax": getattr(getattr(jax_ns, "jax", None), "__version__", None), "commit": _commit(),
            "uncommitted": _uncommitted(), "cpus": sorted(os.sched_getaffinity(0)), "sprue_threads": all_threads()}
    path.write_text(json.dumps({"meta": meta, "results": rows}, indent=1))
    print(f"\nwritten {path}")


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=HERE.parent, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _commit() -> str | None:
    out = _git("rev-parse", "HEAD")
    return None if out is None else out.strip()


def _uncommitted() -> list[str] | None:
    """Tracked files changed in the work tree: the numbers measure them too."""
    out = _git("status", "--porcelain", "--untracked-files=no")
    return None if out is None else [line[3:] for line in out.splitlines()]


if __name__ == "__main__":
    main()
