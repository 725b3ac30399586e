"""The generated-code speed levers keep numpy's results: blocked/vectorized matmul (lowering/matmul.py),
reassociated reductions (lowering/fastmath.py), vector math from libmvec (backend.use_vector_math); and the
target CPU and features those are generated for, checked against LLVM's lists first (lowering/targets.py)."""
import json
import os
import re
import stat
import subprocess
import sys

import llvmlite.binding as llvm
import numpy as np
import pytest

import sprue
import sprue.numpy as snp
from sprue.lowering import backend, targets
from sprue.lowering.matmul import plan
from sprue.lowering.targets import TargetOptionError


@pytest.mark.parametrize("m,k,n", [(64, 64, 64), (100, 30, 40), (33, 17, 64), (1, 128, 256), (128, 128, 1), (250, 300, 200)])
def test_matmul_shapes(m, k, n):
    rng = np.random.default_rng(m * n + k)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    np.testing.assert_allclose(sprue.qjit(lambda a, b: a @ b)(a, b), a @ b, rtol=1e-12, atol=1e-12)


def test_matmul_plan_divides():
    (mc, nc, kc), (mr, nr) = plan(1000, 1000, 100)
    assert 1000 % mc == 0 and 1000 % nc == 0 and 100 % kc == 0 and mc % mr == 0 and nc % nr == 0
    assert plan(7, 5, 3) is None and plan(64, 64, 63) is not None and plan(64, 63, 64) is None


def test_matmul_in_loop_and_f32():
    a = np.random.default_rng(1).standard_normal((64, 64))
    f = sprue.qjit(lambda a: sprue.lax.fori_loop(0, 3, lambda i, x: (x @ a) * 0.1, a))
    ref = a
    for _ in range(3):
        ref = (ref @ a) * 0.1
    np.testing.assert_allclose(f(a), ref, rtol=1e-12, atol=1e-14)
    a32 = a.astype(np.float32)
    np.testing.assert_allclose(sprue.qjit(lambda a: a @ a)(a32), a32 @ a32, rtol=1e-4, atol=1e-4)


def test_reassociated_sum_is_accurate():
    x = np.random.default_rng(2).uniform(-1, 1, 1_000_003)
    assert abs(sprue.qjit(lambda x: snp.sum(x))(x) - np.sum(x)) <= 1e-12 * np.sum(np.abs(x))


def test_an_inner_product_is_a_reassociated_reduction(tmp_path):
    """jnp.dot of two vectors (linalg.dot) becomes a generic sum reduction, marked to reassociate
    (vectorized, split over the pool) like `sum(a * b)`; accurate as numpy's pairwise dot."""
    rng = np.random.default_rng(4)
    a, b = rng.uniform(-1, 1, 1_000_003), rng.uniform(-1, 1, 1_000_003)
    got = sprue.qjit(lambda a, b: snp.dot(a, b), keep_intermediate=tmp_path)(a, b)
    assert abs(got - np.dot(a, b)) <= 1e-12 * np.sum(np.abs(a * b))
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    assert "linalg.dot" not in text and "fastmath<reassoc,contract>" in text


@pytest.mark.parametrize("name", ["sin", "cos", "exp", "log", "log2", "log10", "exp2", "tan"])
def test_vector_math_accuracy_and_special_values(name):
    rng = np.random.default_rng(3)
    if name.startswith("exp"):
        x = rng.uniform(-700, 700, 20_000)
    elif name.startswith("log"):
        x = rng.uniform(0, 1e10, 20_000)
    else:
        x = np.concatenate([rng.uniform(-10, 10, 20_000), rng.uniform(-1e6, 1e6, 100), [1e300]])
    x = np.concatenate([x, [np.inf, -np.inf, np.nan, 0.0, -0.0, 5e-324]])
    fn = getattr(snp, name)
    with np.errstate(all="ignore"):
        got, want = sprue.qjit(lambda x: fn(x))(x), getattr(np, name)(x)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)


# -- target CPUs and features are checked before LLVM sees them (issue 20, item 4) ----------------------------
# An unknown or 32-bit CPU, `help`, a feature without its sign, or features that remove what code
# generation needs used to end the interpreter inside LLVM (exit 1, or SIGABRT) with no exception.
x86_only = pytest.mark.skipif(not os.uname().machine.startswith("x86_64"),
                              reason="the CPU and feature names of these cases are x86-64's")

_API_TARGET_CHILD = r"""
import json, sys
import numpy as np
import sprue
from sprue.errors import SprueValueError
from sprue.lowering import backend
from sprue.lowering.stablehlo import lower
from sprue.api.driver import compile_closed_jaxpr
closed = sprue.make_jaxpr(lambda x: x * 2.0 + 1.0)(np.ones(3))
text = lower(closed).text
out = sys.argv[1]
calls = {
    "build_shared_library": lambda cpu, f: backend.build_shared_library(text, out, "k", cpu=cpu, features=f),
    "codegen": lambda cpu, f: backend.codegen("define double @f(double %x) {\n  ret double %x\n}\n", cpu=cpu, features=f),
    "compile_closed_jaxpr": lambda cpu, f: compile_closed_jaxpr(closed, 0, ["x"], __import__("pathlib").Path(out), "k",
                                                              cpu=cpu, features=f),
}
for cpu, features in json.loads(sys.argv[2]):
    for what, call in calls.items():
        try:
            call(cpu, features)
            print(json.dumps([what, cpu, features, "ok", ""]))
        except SprueValueError as e:
            print(json.dumps([what, cpu, features, type(e).__name__, str(e)]))
        sys.stdout.flush()
f = compile_closed_jaxpr(closed, 0, ["x"], __import__("pathlib").Path(out), "ok", cpu="x86-64", features="+avx2")[2]
print(json.dumps(["alive", list(map(float, f(np.arange(3.0))[0]))]))
"""

TARGET_CASES = [
    ("znver9", "", r"unknown target CPU 'znver9' for x86_64-\S+; the closest LLVM knows: znver\d"),
    ("i386", "", r"LLVM cannot generate x86_64-\S+ code for target CPU 'i386': LLVM ERROR: 64-bit code requested"),
    ("help", "", r"'help' is not a target CPU or feature"),
    ("x86-64", "help", r"target feature 'help' must be \+ \(enable\) or - \(disable\)"),
    ("x86-64", "+help", r"'help' is not a target CPU or feature"),
    ("generic", "sse4.2", r"target feature 'sse4.2' must be \+ \(enable\) or - \(disable\)"),
    ("generic", "+sse4.3", r"unknown target feature 'sse4.3' \(in '\+sse4.3'\) .*the closest LLVM knows: sse4.\d"),
    ("host", "-sse2", r"target CPU 'host' with features '-sse2': .*SSE2 register return with SSE2 disabled"),
    ("athlon-xp", "", r"target CPU 'athlon-xp': LLVM ERROR: 64-bit code requested"),
    ("", "", r"target CPU must be host, generic or an LLVM CPU name, got ''"),
]


@x86_only
def test_target_reproducers_through_the_python_api(tmp_path):
    """build_shared_library(cpu=, features=), codegen and qjit's compile_closed_jaxpr raise
    TargetOptionError (a ValueError) and the interpreter lives on; in a child, in case it does not."""
    pairs = [[c, f] for c, f, _ in TARGET_CASES]
    proc = subprocess.run([sys.executable, "-c", _API_TARGET_CHILD, str(tmp_path), json.dumps(pairs)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert rows[-1] == ["alive", [1.0, 3.0, 5.0]]
    want = {(c, f): m for c, f, m in TARGET_CASES}
    assert len(rows) - 1 == 3 * len(TARGET_CASES)
    for what, cpu, features, kind, message in rows[:-1]:
        assert kind == "TargetOptionError", (what, cpu, features, kind, message)
        assert re.search(want[cpu, features], message), (what, message)


def test_target_checks_accept_what_llvm_can_build():
    targets.check_target("host")
    targets.check_target("generic")
    targets.check_target(backend.HOST_CPU, "")
    assert targets.parse_features(" +avx2, -fma ,") == ("+avx2", "-fma")
    with pytest.raises(TargetOptionError, match=r"target features must be a str"):
        targets.parse_features(["+avx2"])
    with pytest.raises(ValueError, match=r"optimization level must be 0, 1, 2 or 3, got 4"):
        backend.check_codegen_options(4, "host")


@x86_only
def test_the_llvm_table_is_parsed_and_cached_privately(tmp_path, monkeypatch):
    """The table comes from LLVM's -mcpu=help (a child), is written 0600 in a 0700 folder, and a
    table file that others may write is ignored (it could make a check pass that must fail)."""
    monkeypatch.setenv("SPRUE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(targets, "_tables", {})
    monkeypatch.setattr(targets, "_checked", set())
    table = targets.target_table()
    assert {"x86-64", "skylake", "znver3", "i386", "generic"} <= set(table.cpus)
    assert {"avx2", "sse2", "64bit"} <= set(table.features)
    with pytest.raises(TargetOptionError, match="64-bit code requested"):
        targets.check_target("i386")
    folder = tmp_path / "cache" / "targets"
    (path,) = folder.iterdir()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and stat.S_IMODE(path.stat().st_mode) == 0o600
    data = json.loads(path.read_text())
    assert data["cpus"] == list(table.cpus) and data["probes"]["i386\0"].startswith("LLVM ERROR: 64-bit code")
    # a planted answer in a group-writable file is not believed
    data["probes"]["i386\0"] = ""
    path.write_text(json.dumps(data))
    path.chmod(0o664)
    monkeypatch.setattr(targets, "_tables", {})
    monkeypatch.setattr(targets, "_checked", set())
    with pytest.raises(TargetOptionError, match="64-bit code requested"):
        targets.check_target("i386")
    # while the same answer in a private file is (the cache is used: no child asked)
    path.write_text(json.dumps(data))
    path.chmod(0o600)
    monkeypatch.setattr(targets, "_tables", {})
    monkeypatch.setattr(targets, "_checked", set())
    monkeypatch.setattr(targets, "_run_child", lambda *a: pytest.fail(f"asked LLVM again: {a[0]}"))
    targets.check_target("i386")


@pytest.mark.skipif(not backend._libmvec_available(), reason="glibc's libmvec is not available here")
def test_vector_math_follows_the_target_features():
    ir = ("declare <4 x double> @llvm.sin.v4f64(<4 x double>)\n"
          "define <4 x double> @f(<4 x double> %x) {\n"
          "  %y = call <4 x double> @llvm.sin.v4f64(<4 x double> %x)\n  ret <4 x double> %y\n}\n")
    assert "_ZGVdN4v_sin" not in backend.use_vector_math(ir, "generic")            # sse2 only: no 256-bit variant
    assert "@_ZGVdN4v_sin(" in backend.use_vector_math(ir, "generic", "+avx2")     # the user says avx2 is there
    assert "_ZGVdN4v_sin" not in backend.use_vector_math(ir, "host", "-avx2")      # ... or is not


_COUNTED_LOOP = """
define double @f(ptr %p) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %acc = phi double [ 0.0, %entry ], [ %sum, %loop ]
  %q = getelementptr double, ptr %p, i64 %i
  %x = load double, ptr %q
  %sum = fadd double %acc, %x
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, TRIPS
  br i1 %done, label %exit, label %loop
exit:
  ret double %sum
}
"""


def _still_loops(trips: int, ours: bool) -> bool:
    """Whether LLVM's O3 leaves a loop of `trips` trips a loop (not fully unrolled): through sprue's
    codegen, or through llvmlite's pipeline as another llvmlite user runs it."""
    ir_text = _COUNTED_LOOP.replace("TRIPS", str(trips))
    if ours:
        return "br i1" in backend.codegen(ir_text).optimized_ir
    mod = llvm.parse_assembly(ir_text)
    tm = llvm.Target.from_default_triple().create_target_machine()
    builder = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    builder.getModulePassManager().run(mod, builder)
    return "br i1" in str(mod)


def test_full_unrolling_stops_at_the_limit_and_is_restored_for_others():
    limit = backend.FULL_UNROLL_MAX_TRIPS
    # (3 * limit: on AMD's Zen 5 LLVM's partial unrolling after the vectorizer takes this
    # 4-instruction loop whole up to 32 trips, which the full-unroll limit does not govern)
    assert not _still_loops(limit, ours=True)       # short static loops are still unrolled
    assert _still_loops(3 * limit, ours=True)       # longer ones stay loops for the vectorizer
    assert not _still_loops(3 * limit, ours=False)  # LLVM's own default, for numba & co.


def test_static_batch_statistics_reduce_over_contiguous_rows():
    # a reduction over the 32x32 pixels of each channel: the inner loop stays the vectorized one
    x = np.random.default_rng(5).standard_normal((4, 6, 32, 32))
    f = sprue.qjit(lambda x: (snp.mean(x, axis=(0, 2, 3)), snp.var(x, axis=(0, 2, 3))))
    mean, var = f(x)
    np.testing.assert_allclose(mean, x.mean(axis=(0, 2, 3)), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(var, x.var(axis=(0, 2, 3)), rtol=1e-10)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int16, np.uint8, np.bool_])
def test_strided_copies_through_memref_copy_match_numpy(dtype, tmp_path):
    # a strided slice flattened: MLIR copies it with memrefCopy (backend._MEMREF_COPY_C), here
    # the strided-row loop for each element size, and the contiguous-row memmove in 3-D
    x = (np.arange(6 * 10 * 8) % 7).astype(dtype).reshape(6, 10, 8)
    f = sprue.qjit(lambda x: (x[:, :, ::2].reshape(-1), x[1:5, 2:7, :].reshape(-1), x[::3, 1, ::3].reshape(-1)),
                   keep_intermediate=tmp_path)
    got = f(x)
    assert "@memrefCopy(" in next(tmp_path.glob("*.ll")).read_text()
    np.testing.assert_array_equal(got[0], x[:, :, ::2].reshape(-1))
    np.testing.assert_array_equal(got[1], x[1:5, 2:7, :].reshape(-1))
    np.testing.assert_array_equal(got[2], x[::3, 1, ::3].reshape(-1))
