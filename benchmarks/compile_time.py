"""First-call compile time as programs grow (issue 24): sprue beside `jax.jit` (float64) in the same
run when JAX is importable. Timing never fails anything: this is a report.

    python benchmarks/compile_time.py [--sizes 30,100,300,1000,3000] [--quick] [--cases forward,grad,...]
                                      [--timeout 600] [--one-core [--cpu 0]] [--json PATH]

Cases (each written once against a jax-like namespace, `ns.np` and `ns.grad`):
  forward   N unrolled layers of `x = tanh(x @ w)` on 16x16 float64, the weights a list (one
            argument per layer)
  grad      the training step: `grad` of `sum(net(x, ws)**2)` with respect to the N weights
  args      the sum of N arrays of 4 float64, each its own positional argument (default 5,000)
  outputs   N results, `x * (i + 1)` for a 4-vector x (default 2,000)
  pytree    a dict of N Python floats as one argument, `sum((i + 1) * leaf)` (default 1,000)

Every (implementation, case, size) runs in a fresh process, so imports and caches never leak from
one case to the next; sprue's compile cache is off (SPRUE_CACHE_DIR=off). The first call is
trace + compile + one run (+ `block_until_ready` for JAX); imports are excluded from it and
reported on their own: `import sprue` with the MLIR/llvmlite modules it defers to the first compile,
and `import jax` with its CPU backend's start-up (`jax.devices()`). Each result is compared with
numpy (computed in the child after the timed call) and sprue's with JAX's. Memory is the child's
peak resident set (getrusage RUSAGE_SELF, after the call; not the linker's, whose forked
child reports its parent's resident set), and how much of it the first call added
over the peak after the imports and arguments (/proc/self/status VmHWM). A case that outlives
--timeout prints "timeout" and the larger sizes of the same case are then skipped for that
implementation. Results go to build/bench/compile-time.json.

`--one-core` re-executes the script under `taskset -c CPU` with XLA's intra-op parallelism at one
thread and single-threaded OpenBLAS. Extra import paths (a throwaway venv holding jax) come from
SPRUE_BENCH_EXTRA_PATH.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import numpy as np

HERE = Path(__file__).resolve().parent
for _extra in filter(None, os.environ.get("SPRUE_BENCH_EXTRA_PATH", "").split(os.pathsep)):
    if _extra not in sys.path:
        sys.path.append(_extra)

ONE_CORE_ENV = "SPRUE_BENCH_ONE_CORE"
XLA_ONE_CORE = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
LAYER_SIZES = (30, 100, 300, 1000, 3000)
QUICK_LAYER_SIZES = (30, 100)


# -- the cases ---------------------------------------------------------------------------------------
def net(ns, x, ws):
    for w in ws:
        x = ns.np.tanh(x @ w)
    return x


def layer_args(n: int):
    rng = np.random.default_rng(24)
    x = rng.standard_normal((16, 16))
    # weights of standard deviation 1/sqrt(16): tanh's critical gain, so activations neither blow up
    # nor vanish to zero over 1,000 layers (a check of all-zero results would check nothing)
    ws = [rng.standard_normal((16, 16)) / 4.0 for _ in range(n)]
    return x, ws


def forward_fn(ns):
    def forward(x, ws):
        return net(ns, x, ws)
    return forward


def forward_ref(x, ws):
    for w in ws:
        x = np.tanh(x @ w)
    return [x]


def grad_fn(ns):
    def loss(ws, x):
        return ns.np.sum(net(ns, x, ws) ** 2)
    return ns.grad(loss)


def grad_ref(ws, x):
    """Backpropagation by hand: h_i = tanh(h_{i-1} @ w_i), d loss / d h_N = 2 h_N."""
    hs = [x]
    for w in ws:
        hs.append(np.tanh(hs[-1] @ w))
    dh = 2.0 * hs[-1]
    grads = [None] * len(ws)
    for i in range(len(ws) - 1, -1, -1):
        da = dh * (1.0 - hs[i + 1] ** 2)
        grads[i] = hs[i].T @ da
        dh = da @ ws[i].T
    return grads


def many_args_fn(ns):
    def sum_args(*xs):
        total = xs[0]
        for x in xs[1:]:
            total = total + x
        return total
    return sum_args


def many_args_args(n: int):
    rng = np.random.default_rng(24)
    return tuple(rng.standard_normal(4) for _ in range(n))


def many_args_ref(*xs):
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    return [total]


def many_outputs_fn(n: int):
    def outputs_fn(ns):
        def many_outputs(x):
            return tuple(x * float(i + 1) for i in range(n))
        return many_outputs
    return outputs_fn


def many_outputs_ref(n: int):
    return lambda x: [x * float(i + 1) for i in range(n)]


def pytree_args(n: int):
    rng = np.random.default_rng(24)
    # zero-padded keys: sorted order (JAX's and sprue's dict flattening) is insertion order
    return ({f"p{i:05d}": float(v) for i, v in enumerate(rng.standard_normal(n))},)


def pytree_fn(ns):
    def weighted_sum(params):
        total = 0.0
        for i, key in enumerate(sorted(params)):
            total = total + params[key] * float(i + 1)
        return total
    return weighted_sum


def pytree_ref(params):
    total = 0.0
    for i, key in enumerate(sorted(params)):
        total = total + params[key] * float(i + 1)
    return [np.float64(total)]


@dataclass
class Case:
    name: str
    unit: str                                    # what N counts, for "time per <unit>"
    sizes: tuple[int, ...]
    quick_sizes: tuple[int, ...]
    make_fn: Callable[[int], Callable]           # n -> (namespace -> function to compile)
    make_args: Callable[[int], tuple]
    make_ref: Callable[[int], Callable]          # n -> (*args -> list of numpy leaves)
    rtol: float = 1e-9


CASES = {
    "forward": Case("forward", "layer", LAYER_SIZES, QUICK_LAYER_SIZES, lambda n: forward_fn, layer_args,
                    lambda n: forward_ref),
    "grad": Case("grad", "layer", LAYER_SIZES, QUICK_LAYER_SIZES, lambda n: grad_fn,
                 lambda n: tuple(reversed(layer_args(n))), lambda n: grad_ref, rtol=1e-7),
    "args": Case("args", "argument", (5000,), (500,), lambda n: many_args_fn, many_args_args,
                 lambda n: many_args_ref),
    "outputs": Case("outputs", "output", (2000,), (200,), many_outputs_fn, lambda n: (np.linspace(-1, 1, 4),),
                    many_outputs_ref),
    "pytree": Case("pytree", "leaf", (1000,), (100,), lambda n: pytree_fn, pytree_args, lambda n: pytree_ref),
}


def leaves(result) -> list:
    if isinstance(result, dict):
        return [leaf for key in sorted(result) for leaf in leaves(result[key])]
    if isinstance(result, (tuple, list)):
        return [leaf for r in result for leaf in leaves(r)]
    return [np.asarray(result)]


def check(case: Case, name: str, got: list, want: list) -> None:
    """Raises AssertionError naming the case and the first leaf that differs."""
    if len(got) != len(want):
        raise AssertionError(f"{case.name}: {name} gave {len(got)} results, numpy {len(want)}")
    for i, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        atol = 1e-12 * max(1.0, float(np.max(np.abs(w))) if w.size else 1.0)
        np.testing.assert_allclose(g, w, rtol=case.rtol, atol=atol, err_msg=f"{case.name}: {name}, result {i}")


def sprue_namespace():
    import sprue
    import sprue.numpy
    return SimpleNamespace(np=sprue.numpy, grad=sprue.grad)


def compile_sprue(case: Case, n: int):
    """The case's function under sprue.qjit (no call yet)."""
    import sprue
    return sprue.qjit(case.make_fn(n)(sprue_namespace()))


# -- one measurement, in a fresh process ----------------------------------------------------------------
def _hwm_mb() -> float | None:
    """The process's peak resident set so far (VmHWM), MB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def _import_sprue():
    import sprue
    import sprue.numpy  # noqa: F401  (the namespace the cases use)
    # the lowering modules sprue defers to the first compile (MLIR bindings, llvmlite): imports,
    # counted with `import sprue`, not with the first call
    for mod in ("backend", "stablehlo", "stablehlo_input", "targets"):
        if importlib.util.find_spec(f"sprue.lowering.{mod}") is not None:
            importlib.import_module(f"sprue.lowering.{mod}")
    return sprue


def _import_jax():
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    jax.devices()       # the CPU backend's start-up: not compile time
    return SimpleNamespace(np=jnp, grad=jax.grad, jax=jax)


def child(impl: str, case_name: str, n: int, out_path: str) -> None:
    """Run one case once and print a JSON line; the results go to out_path (.npz)."""
    case = CASES[case_name]
    args = case.make_args(n)
    t0 = time.perf_counter()
    mod = _import_sprue() if impl == "sprue" else _import_jax()
    import_s = time.perf_counter() - t0
    hwm_before = _hwm_mb()
    if impl == "sprue":
        fn = compile_sprue(case, n)
        start = time.perf_counter()
        result = fn(*args)
        first = time.perf_counter() - start
        eqns = len(fn.jaxpr.jaxpr.eqns) if getattr(fn, "jaxpr", None) is not None else None
    else:
        jitted = mod.jax.jit(case.make_fn(n)(mod))
        start = time.perf_counter()
        result = mod.jax.block_until_ready(jitted(*args))
        first = time.perf_counter() - start
        eqns = None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    got = [np.asarray(leaf) for leaf in leaves(result)]
    error = None
    try:
        check(case, impl, got, case.make_ref(n)(*args))
    except AssertionError as e:
        error = str(e).strip().splitlines()[0][:300]
    np.savez(out_path, *got)
    print(json.dumps({"import": import_s, "first_call": first, "peak_mb": peak,
                      "compile_mb": None if hwm_before is None else peak - hwm_before, "eqns": eqns,
                      "error": error}))


def measure(impl: str, case: Case, n: int, timeout: float, tmp: Path) -> dict:
    out = tmp / f"{impl}-{case.name}-{n}.npz"
    env = dict(os.environ, SPRUE_CACHE_DIR="off")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", impl, case.name, str(n), str(out)]
    # its own session: on a timeout, the whole group (cc, the linker) goes with it
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    start = time.perf_counter()
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"status": "timeout", "wall": time.perf_counter() - start}
    except BaseException:   # interrupted (Ctrl-C, SIGTERM: _stop): the case's process group goes too
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    if proc.returncode != 0:
        tail = (stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"status": "failed", "error": f"exit {proc.returncode}: {tail[:300]}"}
    row = json.loads(stdout.strip().splitlines()[-1])
    row["status"] = "ok" if row["error"] is None else "wrong"
    row["results"] = str(out)
    return row


def compare_results(case: Case, a: dict, b: dict) -> str | None:
    """sprue's results against JAX's (both already checked against numpy)."""
    if a.get("status") != "ok" or b.get("status") != "ok":
        return None
    with np.load(a["results"]) as fa, np.load(b["results"]) as fb:
        got = [fa[k] for k in sorted(fa.files, key=lambda s: int(s.split("_")[1]))]
        want = [fb[k] for k in sorted(fb.files, key=lambda s: int(s.split("_")[1]))]
    try:
        check(case, "sprue vs jax", got, want)
    except AssertionError as e:
        return str(e).strip().splitlines()[0][:300]
    return None


# -- the report ---------------------------------------------------------------------------------------
def _fmt_s(t) -> str:
    if t is None:
        return "-"
    return f"{t * 1e3:.1f} ms" if t < 1.0 else f"{t:.2f} s"


def _cell(m: dict | None) -> str:
    if m is None:
        return "-"
    if m["status"] == "ok":
        return _fmt_s(m["first_call"])
    if m["status"] == "wrong":
        return "WRONG " + _fmt_s(m["first_call"])
    return m["status"]


def _mb(m: dict | None, key: str) -> str:
    return "-" if m is None or m.get(key) is None else f"{m[key]:.0f}"


HEAD = (f"{'case':<8} {'N':>5} {'eqns':>6}  {'sprue 1st':>10} {'jax 1st':>10} {'ratio':>8}  {'sprue/unit':>11}  "
        f"{'imp sprue':>9} {'imp jax':>8}  {'sprue MB':>8} {'+compile':>8} {'jax MB':>7}  check")


def impls_of(row: dict) -> list[str]:
    return [impl for impl in ("sprue", "jax") if impl in row]


def format_row(row: dict) -> str:
    s, j = row["sprue"], row.get("jax")
    ratio = row.get("ratio")
    per = row.get("per_unit")
    finished = [impl for impl in ("sprue", "jax") if (row.get(impl) or {}).get("status") == "ok"]
    check_text = row.get("check") or ("ok" if len(finished) == len(impls_of(row)) else
                                      f"ok ({', '.join(finished)} only)" if finished else "-")
    return (f"{row['case']:<8} {row['n']:>5} {s.get('eqns') or '-':>6}  {_cell(s):>10} {_cell(j):>10} "
            f"{'-' if ratio is None else f'{ratio:.1f}x':>8}  "
            f"{'-' if per is None else f'{per * 1e3:.2f} ms':>11}  "
            f"{_fmt_s(s.get('import')):>9} {_fmt_s(None if j is None else j.get('import')):>8}  "
            f"{_mb(s, 'peak_mb'):>8} {_mb(s, 'compile_mb'):>8} "
            f"{_mb(j, 'peak_mb'):>7}  {check_text}")


def summary(rows: list[dict]) -> list[str]:
    """Per-unit time at each size above 100 (or above the smallest) over that at 100, per case."""
    lines = []
    for name in ("forward", "grad"):
        per = {r["n"]: r["per_unit"] for r in rows if r["case"] == name and r.get("per_unit") is not None}
        base = 100 if 100 in per else (min(per) if per else None)
        for top in sorted(n for n in per if base is not None and n > base):
            lines.append(f"{name}: time per layer at {top} layers / at {base} layers = {per[top] / per[base]:.2f}x "
                         f"(target <= 1.3x)")
    return lines


def _reexec_one_core(argv: list[str], cpu: int) -> None:
    taskset = shutil.which("taskset")
    if taskset is None:
        raise SystemExit("--one-core needs taskset (util-linux)")
    env = dict(os.environ, XLA_FLAGS=XLA_ONE_CORE, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               **{ONE_CORE_ENV: "1"})
    os.execve(taskset, [taskset, "-c", str(cpu), sys.executable, str(Path(__file__).resolve()), *argv], env)


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=HERE.parent, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def run_case(case: Case, n: int, impls: list[str], timeout: float, tmp: Path, skip: set) -> dict:
    row = {"case": case.name, "n": n, "unit": case.unit}
    for impl in impls:
        if (impl, case.name) in skip:
            row[impl] = {"status": "skipped (a smaller size timed out)"}
            continue
        row[impl] = measure(impl, case, n, timeout, tmp)
        if row[impl]["status"] == "timeout":
            skip.add((impl, case.name))
    s, j = row["sprue"], row.get("jax")
    if s["status"] == "ok":
        row["per_unit"] = s["first_call"] / n
        if j is not None and j["status"] == "ok":
            row["ratio"] = s["first_call"] / j["first_call"]
    problems = [f"{impl}: {row[impl].get('error')}" for impl in impls if row[impl]["status"] in ("wrong", "failed")]
    if j is not None:
        mismatch = compare_results(case, s, j)
        if mismatch:
            problems.append(mismatch)
    row["check"] = "; ".join(problems) or None
    for impl in impls:
        row[impl].pop("results", None)
    return row


def _stop(signum: int, frame) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        child(argv[1], argv[2], int(argv[3]), argv[4])
        return
    # SIGTERM unwinds like Ctrl-C: the temporary folder of the cases' results is removed, not left
    # in the temp folder (Python's default SIGTERM ends the process without running `with` exits)
    signal.signal(signal.SIGTERM, _stop)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=None, help="layer counts, comma-separated (default 30,100,300,1000)")
    ap.add_argument("--quick", action="store_true", help="30 and 100 layers, 500 args, 200 outputs, 100 leaves")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {','.join(CASES)}")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per case and implementation")
    ap.add_argument("--one-core", action="store_true", help="re-run under taskset -c CPU, XLA and BLAS on one thread")
    ap.add_argument("--cpu", type=int, default=0, help="the core --one-core pins to")
    ap.add_argument("--no-jax", action="store_true", help="sprue only")
    ap.add_argument("--json", default=None, help="default build/bench/compile-time.json")
    opts = ap.parse_args(argv)
    one_core = os.environ.get(ONE_CORE_ENV) == "1"
    if opts.one_core and not one_core:
        _reexec_one_core(argv, opts.cpu)
    names = [c for c in opts.cases.split(",") if c]
    unknown = [c for c in names if c not in CASES]
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; the cases are {list(CASES)}")
    layer_sizes = (tuple(int(s) for s in opts.sizes.split(",")) if opts.sizes
                   else QUICK_LAYER_SIZES if opts.quick else LAYER_SIZES)
    have_jax = not opts.no_jax and importlib.util.find_spec("jax") is not None
    impls = ["sprue", "jax"] if have_jax else ["sprue"]
    cpus = sorted(os.sched_getaffinity(0))
    print(f"first-call compile time (trace + compile + one run; imports excluded, shown as 'imp'; sprue's cache "
          f"off), each case in a fresh process; cpus {cpus}{', XLA/BLAS on one thread' if one_core else ''}")
    print("ratio = sprue / jax; sprue/unit = sprue's first call / N; MB = peak resident set of the process, "
          "+compile = what the first call added over the peak after imports and arguments")
    if not have_jax:
        print("note: jax is not importable (set SPRUE_BENCH_EXTRA_PATH to a venv holding it): JAX columns skipped")
    print()
    print(HEAD)
    print("-" * len(HEAD))
    rows, skip = [], set()
    with tempfile.TemporaryDirectory(prefix="sprue-compile-time-") as tmp:
        for name in names:
            case = CASES[name]
            sizes = layer_sizes if case.unit == "layer" else (case.quick_sizes if opts.quick else case.sizes)
            for n in sizes:
                row = run_case(case, n, impls, opts.timeout, Path(tmp), skip)
                rows.append(row)
                print(format_row(row), flush=True)
    lines = summary(rows)
    if lines:
        print()
        print("\n".join(lines))
    path = Path(opts.json or HERE.parent / "build" / "bench" / "compile-time.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    uncommitted = _git("status", "--porcelain", "--untracked-files=no")
    meta = {"one_core": one_core, "cpus": cpus, "timeout": opts.timeout, "numpy": np.__version__,
            "jax": _version("jax") if have_jax else None,
            "commit": _git("rev-parse", "HEAD"),
            "uncommitted": None if uncommitted is None else [ln[3:] for ln in uncommitted.splitlines()],
            "import_excluded": True}
    path.write_text(json.dumps({"meta": meta, "results": rows, "summary": lines}, indent=1))
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
