"""The `sprue` command line: every flag of `sprue compile`, its outputs and its exit codes
(0 ok, 1 an error in the input with a one-line `file[:line]: message`, 2 bad usage)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sprue
from sprue.io.saved_format import to_text
from sprue.lowering.stablehlo import lower
from sprue.tools.cli import EMIT_KINDS, main
from tests.helpers.system import SPRUE


def matmul(a, b):
    return a @ b + 1.0


@pytest.fixture
def mlir(tmp_path) -> Path:
    path = tmp_path / "my-kernel.v2.mlir"
    path.write_text(lower(sprue.make_jaxpr(matmul)(np.ones((2, 3)), np.ones((3, 4)))).text)
    return path


@pytest.fixture
def jaxpr(tmp_path) -> Path:
    path = tmp_path / "scale.jaxpr"
    closed = sprue.make_jaxpr(lambda x, k: x * k)(sprue.ShapedArray(("n",), np.float64), 2.0)
    path.write_text(to_text(closed, None, ["x", "k"]))
    return path


def cli(*args: str) -> subprocess.CompletedProcess:
    """The installed console script, as a user runs it."""
    return subprocess.run([str(SPRUE), *args], capture_output=True, text=True, timeout=300)


def exported(so: Path) -> list[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True, check=True).stdout
    return [line.split()[-1] for line in out.splitlines()]


# what every library exports besides its kernel: the thread pool's entry points (lowering/parallel_runtime.py)
POOL = ["_sprue_parallel_for", "sprue_get_num_threads", "sprue_set_num_threads", "sprue_use_pool"]


# -- the console script ---------------------------------------------------------------------------------
def test_version_help_and_cmake_dir():
    proc = cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"sprue {sprue.__version__}"
    proc = cli("--help")
    assert proc.returncode == 0 and "compile" in proc.stdout and "doctor" in proc.stdout
    proc = cli("--cmake-dir")
    assert proc.returncode == 0 and (Path(proc.stdout.strip()) / "SprueConfig.cmake").is_file()
    proc = cli("compile", "--help")
    assert proc.returncode == 0 and all(k in proc.stdout for k in ("--emit", "-O", "--target-cpu", "--name",
                                                                   "--no-debug-print"))
    module = subprocess.run([sys.executable, "-m", "sprue", "--version"], capture_output=True, text=True, timeout=60)
    assert module.returncode == 0 and module.stdout.strip() == f"sprue {sprue.__version__}"   # python -m sprue


def test_compile_from_the_console_script(mlir, tmp_path):
    proc = cli("compile", str(mlir), "-o", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "libmy_kernel.so").is_file() and (tmp_path / "out" / "my_kernel.h").is_file()


@pytest.mark.parametrize("args", [["compile"], ["compile", "x.mlir", "-O", "7"], ["compile", "x.mlir", "--bogus"],
                                  ["compile", "x.mlir", "--emit", "nonsense"], ["frobnicate"]])
def test_bad_usage_exits_2(args):
    proc = cli(*args)
    assert proc.returncode == 2 and "usage:" in proc.stderr


# -- sprue compile, in process ----------------------------------------------------------------------------
def test_default_outputs_and_name_from_the_stem(mlir, tmp_path, capsys):
    assert main(["compile", str(mlir), "-o", str(tmp_path / "o")]) == 0
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["libmy_kernel.so", "my_kernel.h"]
    # the entry point is named after the kernel; the raw MLIR function is not exported
    # (and the message of a failed allocation: lowering/allocation.py)
    assert exported(tmp_path / "o" / "libmy_kernel.so") == ["_mlir_ciface_my_kernel", "_sprue_error_my_kernel", "_sprue_packed_my_kernel", *POOL]
    assert "static inline int64_t my_kernel(my_kernel_results *out" in (tmp_path / "o" / "my_kernel.h").read_text()
    assert capsys.readouterr().err == ""


def test_name_flag(mlir, tmp_path):
    assert main(["compile", str(mlir), "-o", str(tmp_path), "--name", "mm"]) == 0
    assert exported(tmp_path / "libmm.so") == ["_mlir_ciface_mm", "_sprue_error_mm", "_sprue_packed_mm", *POOL] and (tmp_path / "mm.h").is_file()


def test_output_dir_defaults_to_the_current_directory(mlir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["compile", str(mlir), "--name", "here"]) == 0
    assert (tmp_path / "libhere.so").is_file()


def test_every_emit_kind(jaxpr, tmp_path):
    out = tmp_path / "out"
    assert main(["compile", str(jaxpr), "-o", str(out), "--emit", ",".join(EMIT_KINDS[:4]),
                 *[f"--emit={k}" for k in EMIT_KINDS[4:]]]) == 0
    names = {p.name for p in out.iterdir()}
    assert names == {"scale.jaxpr", "scale.stablehlo.mlir", "scale.legalized.mlir", "scale.linalg.mlir",
                     "scale.bufferized.mlir", "scale.loops.mlir", "scale.llvm.mlir", "scale.ll", "scale.s",
                     "scale.o", "libscale.a", "libscale.so", "scale.h"}
    assert "func.func @scale(" in (out / "scale.stablehlo.mlir").read_text()
    assert "llvm.func @_mlir_ciface_scale" in (out / "scale.llvm.mlir").read_text()
    ll = (out / "scale.ll").read_text()   # the raw function is internal: inlined into the C interface
    assert "@_mlir_ciface_scale(" in ll and not re.search(r"define (dso_local )?void @scale\(", ll)
    members = subprocess.run(["ar", "t", str(out / "libscale.a")], capture_output=True, text=True).stdout.split()
    # the kernel, the checked allocator it calls, and the pool (every library carries it: its
    # object is linked only when the kernel has parallel loops or the host sets the thread count)
    assert members == ["scale.o", "scale.sprue_runtime.o", "scale.sprue_parallel.o"]
    # the emitted jaxpr reads back (it is the program that was compiled)
    assert "mul" in (out / "scale.jaxpr").read_text()


def test_static_library_links_into_a_c_program(mlir, tmp_path):
    assert main(["compile", str(mlir), "-o", str(tmp_path), "--name", "mm", "--emit", "a"]) == 0
    src = tmp_path / "use.c"
    src.write_text('#include <stdio.h>\n#include "mm.h"\nint main(void) {\n'
                   '  double a[6] = {1,2,3,4,5,6}, b[12] = {1,0,0,0, 0,1,0,0, 0,0,1,0};\n'
                   '  memref_f64_2d ad = {a, a, 0, {2, 3}, {3, 1}}, bd = {b, b, 0, {3, 4}, {4, 1}};\n'
                   '  mm_results r; int i; mm(&r, &ad, &bd);\n'
                   '  for (i = 0; i < 8; ++i) printf("%g ", r.result0.aligned[i]);\n'
                   '  mm_free_results(&r); return 0; }\n')
    subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", f"-I{tmp_path}", str(src), str(tmp_path / "libmm.a"),
                    "-lm", "-o", str(tmp_path / "use")], check=True)
    got = subprocess.run([str(tmp_path / "use")], capture_output=True, text=True, check=True).stdout.split()
    want = np.arange(1.0, 7.0).reshape(2, 3) @ np.eye(3, 4) + 1.0
    np.testing.assert_array_equal(np.array(got, float), want.ravel())


@pytest.mark.parametrize("level", ["0", "1", "2", "3"])
def test_optimization_levels(mlir, tmp_path, level):
    assert main(["compile", str(mlir), "-o", str(tmp_path), f"-O{level}", "--emit", "llvm-ir"]) == 0
    assert (tmp_path / "libmy_kernel.so").is_file()


@pytest.mark.parametrize("cpu", ["host", "generic", "x86-64"])
def test_target_cpu(mlir, tmp_path, cpu):
    if cpu == "x86-64" and not subprocess.run(["uname", "-m"], capture_output=True, text=True).stdout.startswith("x86"):
        pytest.skip("x86-64 CPU name")
    assert main(["compile", str(mlir), "-o", str(tmp_path), "--target-cpu", cpu, "--emit", "asm"]) == 0
    assert (tmp_path / "my_kernel.s").read_text()


def test_verbose_prints_each_stage_time(mlir, tmp_path, capsys):
    assert main(["compile", str(mlir), "-o", str(tmp_path), "-v"]) == 0
    err = capsys.readouterr().err
    for stage in ("read", "legalized", "linalg", "bufferized", "loops", "llvm", "translate", "codegen", "link",
                  "header"):
        assert re.search(rf"^\s+{stage}\s+[\d.]+ ms$", err, re.MULTILINE), stage
    assert "wrote " in err


def test_jaxpr_input_names_parameters_from_the_saved_header(jaxpr, tmp_path):
    assert main(["compile", str(jaxpr), "-o", str(tmp_path)]) == 0
    header = (tmp_path / "scale.h").read_text()
    assert "static inline int64_t scale(scale_results *out, int64_t n, const memref_f64_1d *x, double k)" in header
    assert "static inline void scale_result_shapes(int64_t n, int64_t result0_shape[1])" in header


def test_jax_printed_jaxpr_input(tmp_path):
    path = tmp_path / "jax.jaxpr"
    path.write_text("{ lambda ; a:f32[3] b:f32[3]. let\n    c:f32[3] = add a b\n  in (c,) }\n")
    assert main(["compile", str(path), "-o", str(tmp_path)]) == 0
    assert "const memref_f32_1d *a, const memref_f32_1d *b" in (tmp_path / "jax.h").read_text()


# -- user errors: exit 1, one line ---------------------------------------------------------------------------
def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_missing_input(tmp_path, capsys):
    assert main(["compile", str(tmp_path / "nope.jaxpr")]) == 1
    assert _one_line_error(capsys) == f"sprue: error: {tmp_path / 'nope.jaxpr'}: {tmp_path / 'nope.jaxpr'}: no such file"


def test_unknown_primitive_names_file_and_line(tmp_path, capsys):
    path = tmp_path / "bad.jaxpr"
    path.write_text("{ lambda ; a:f64[3]. let\n    b:f64[3] = sin a\n    c:f64[3] = foo b\n  in (c,) }\n")
    assert main(["compile", str(path), "-o", str(tmp_path)]) == 1
    err = _one_line_error(capsys)
    assert err.startswith(f"sprue: error: {path}:3:") and "foo" in err


def test_syntax_error_names_file_and_line(tmp_path, capsys):
    path = tmp_path / "bad.jaxpr"
    path.write_text("{ lambda ; a:f64[3]. let\n    b:f64[3] = sin a\n  in (b,\n")
    assert main(["compile", str(path), "-o", str(tmp_path)]) == 1
    assert re.match(rf"sprue: error: {re.escape(str(path))}:\d+:", _one_line_error(capsys))


def test_invalid_stablehlo(tmp_path, capsys):
    path = tmp_path / "bad.mlir"
    path.write_text("func.func @main(%a: tensor<3xf64>) -> tensor<3xf64> { return %b : tensor<3xf64> }\n")
    assert main(["compile", str(path), "-o", str(tmp_path)]) == 1
    assert _one_line_error(capsys).startswith(f"sprue: error: {path}: ")


@pytest.mark.parametrize("args", [["--name", "not-an-identifier"], ["--emit", "jaxpr"], ["--target-cpu", "x y"]])
def test_bad_options_for_this_input(mlir, tmp_path, capsys, args):
    assert main(["compile", str(mlir), "-o", str(tmp_path), *args]) == 1
    assert _one_line_error(capsys).startswith(f"sprue: error: {mlir}: ")


# -- --name: a C library's, a keyword, a reserved or sprue's own name is refused (issue 20, item 3) -------
# Each reproducer once crashed the compiler (SIGSEGV in translation: free, aligned_alloc), failed with an
# internal error (madvise, sprue_aligned_alloc) or wrote a header that does not compile (int, main, malloc,
# memref_f64_1d). Now: exit 1, one line naming the name, why, and a name to use instead.
NAME_REPRODUCERS = {
    "free": "it is a symbol of libc", "aligned_alloc": "it is a symbol of libc", "madvise": "it is a symbol of libc",
    "sprue_aligned_alloc": "names starting with sprue_ or SPRUE_ are sprue's own", "int": "it is a C keyword",
    "main": "it is the entry point of a C program", "malloc": "it is a symbol of libc",
    "memref_f64_1d": "it is the name of a memref descriptor type the header defines",
}


@pytest.mark.parametrize("name", sorted(NAME_REPRODUCERS))
def test_name_reproducers_are_refused_by_the_console_script(mlir, tmp_path, name):
    out = tmp_path / "out"
    proc = cli("compile", str(mlir), "-o", str(out), "--name", name)
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"sprue: error: {mlir}: --name {name!r} cannot be used: {NAME_REPRODUCERS[name]}"), err
    suggested = re.search(r"choose another name, e\.g\. '(\w+)'$", err)
    assert suggested and suggested.group(1) != name, err
    assert not out.exists() or not any(out.iterdir())   # refused before anything was written


@pytest.mark.parametrize("name,why", [
    ("calloc", "it is a symbol of libc"), ("sin", "it is a symbol of libm"), ("expm1", "it is a symbol of libm"),
    ("stdin", "it is a symbol of libc"), ("memrefCopy", "a function sprue's runtime defines"),
    ("class", "it is a C++ keyword"), ("new", "it is a C++ keyword"), ("double", "it is a C keyword"),
    ("_mlir_ciface_mm", "names starting with '_' are reserved"), ("_K", "names starting with '_' are reserved"),
    ("k__x", "names containing '__' are reserved in C++"), ("k_", "would contain '__'"),
    ("SPRUE_COMMON_DEFINED", "sprue's own"), ("sprue_copy_strided", "sprue's own"),
    ("memref_i32_3d", "memref descriptor type"), ("std", "namespace of the C++ standard library"),
    ("size_t", "clashes with the system's C headers"), ("int64_t", "clashes with the system's C headers"),
    ("NULL", "NULL is a macro"), ("EOF", "EOF is a macro"), ("signbit", "signbit is a macro"), ("stdlib", "stdlib.h is a system header"),
    ("3d", "not a C identifier"), ("a-b", "not a C identifier"), ("", "not a C identifier"),
])
def test_name_variants_are_refused(mlir, tmp_path, capsys, name, why):
    assert main(["compile", str(mlir), "-o", str(tmp_path / "out"), "--name", name]) == 1
    err = _one_line_error(capsys)
    assert err.startswith(f"sprue: error: {mlir}: --name {name!r} cannot be used: ") and why in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("stem,name", [("main", "main_kernel"), ("free", "free_kernel"), ("int", "int_kernel"),
                                       ("3d-conv", "kernel_3d_conv"), ("size_t", "size_t_kernel")])
def test_a_name_from_the_file_name_is_made_safe(tmp_path, stem, name):
    path = tmp_path / f"{stem}.mlir"
    path.write_text(lower(sprue.make_jaxpr(matmul)(np.ones((2, 3)), np.ones((3, 4)))).text)
    assert main(["compile", str(path), "-o", str(tmp_path / "o")]) == 0
    assert f"_mlir_ciface_{name}" in exported(tmp_path / "o" / f"lib{name}.so")
    assert f"static inline int64_t {name}({name}_results *out" in (tmp_path / "o" / f"{name}.h").read_text()


_API_NAME_CHILD = r"""
import sys
from pathlib import Path
import numpy as np
import sprue
from sprue.errors import SprueValueError
from sprue.runtime import Signature, TensorSpec
from sprue.runtime.header import HeaderSpec, c_header
from sprue.tools.compile import Options, compile_jaxpr
closed = sprue.make_jaxpr(lambda x: x * 2.0)(np.ones(3))
sig = Signature([TensorSpec("x", np.float64, (3,))], [TensorSpec("y", np.float64, (3,))])
for name in sys.argv[2:]:
    for what, call in (("compile_jaxpr", lambda: compile_jaxpr(closed, Options(Path("k.jaxpr"), Path(sys.argv[1]), name))),
                       ("c_header", lambda: c_header(HeaderSpec(name, sig)))):
        try:
            call()
            print(what, name, "accepted")
        except SprueValueError as e:
            print(what, name, type(e).__name__, str(e).splitlines()[0])
print("alive")
"""


def test_name_reproducers_through_the_python_api(tmp_path):
    """sprue.tools.compile.compile_jaxpr and the header generator, in a child (a crash must not end the run)."""
    proc = subprocess.run([sys.executable, "-c", _API_NAME_CHILD, str(tmp_path / "out"), *NAME_REPRODUCERS],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == "alive", proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()[:-1]
    assert len(lines) == 2 * len(NAME_REPRODUCERS)
    for line in lines:
        what, name, kind, message = line.split(" ", 3)
        assert kind == "KernelNameError", line
        prefix = "--name" if what == "compile_jaxpr" else "kernel name"
        assert message.startswith(f"{prefix} {name!r} cannot be used: {NAME_REPRODUCERS[name]}"), line


# -- --target-cpu / --target-features: checked against LLVM's own lists (issue 20, item 4) -----------------
# Each of these once ended the process: "LLVM ERROR: 64-bit code requested on a subtarget that doesn't
# support it!" and exit(1) (znver9, i386, help), an assertion (a feature without its sign), or a fatal
# "SSE2 register return with SSE2 disabled".
x86_only = pytest.mark.skipif(not subprocess.run(["uname", "-m"], capture_output=True, text=True).stdout.startswith("x86_64"),
                              reason="the CPU and feature names of these cases are x86-64's")
TARGET_REPRODUCERS = [
    (["--target-cpu", "znver9"], r"unknown target CPU 'znver9' for x86_64-\S+; the closest LLVM knows: znver\d(, znver\d)*;"
                                 r" use host \(this machine's CPU\), generic"),
    (["--target-cpu", "i386"], r"LLVM cannot generate x86_64-\S+ code for target CPU 'i386': LLVM ERROR: 64-bit code"
                               r" requested on a subtarget that doesn't support it!; the closest CPUs it can: .*x86-64"),
    (["--target-cpu", "help"], r"'help' is not a target CPU or feature: `sprue targets` lists the CPU and feature names"),
    (["--target-cpu", "Skylake"], r"unknown target CPU 'Skylake' .*the closest LLVM knows: skylake"),
    (["--target-cpu", "pentium4"], r"target CPU 'pentium4': LLVM ERROR: 64-bit code requested"),
    (["--target-features", "avx2"], r"target feature 'avx2' must be \+ \(enable\) or - \(disable\) followed by"),
    (["--target-features", "+avx9"], r"unknown target feature 'avx9' \(in '\+avx9'\) for x86_64-\S+; the closest LLVM"
                                     r" knows: avx.*avx2"),
    (["--target-cpu", "generic", "--target-features=-sse2"],   # (with `=`: argparse reads a separate -sse2 as an option)
     r"target CPU 'generic' with features '-sse2': .*SSE2 register return with SSE2 disabled"),
    (["--target-cpu", "x86-64", "--target-features", "+avx2,-64bit"], r"with features '\+avx2,-64bit': LLVM ERROR: 64-bit"),
]


@x86_only
@pytest.mark.parametrize("args,message", TARGET_REPRODUCERS, ids=[" ".join(a) for a, _ in TARGET_REPRODUCERS])
def test_target_reproducers_are_refused_by_the_console_script(mlir, tmp_path, args, message):
    proc = cli("compile", str(mlir), "-o", str(tmp_path / "out"), *args)
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1, err   # LLVM's own fatal errors exit 1 too, but print "LLVM ERROR:" lines
    assert re.match(rf"sprue: error: {re.escape(str(mlir))}: .*{message}", err), err
    assert not (tmp_path / "out").exists()


@x86_only
def test_target_features_build_for_that_cpu(mlir, tmp_path):
    assert main(["compile", str(mlir), "-o", str(tmp_path), "--target-cpu", "x86-64", "--target-features",
                 "+avx2, +fma", "--emit", "asm"]) == 0
    asm = (tmp_path / "my_kernel.s").read_text()
    assert "%ymm" in asm or "vfmadd" in asm or "vmul" in asm   # AVX encodings, which x86-64 alone never uses
    assert main(["compile", str(mlir), "-o", str(tmp_path / "base"), "--target-cpu", "x86-64", "--emit", "asm"]) == 0
    assert "%ymm" not in (tmp_path / "base" / "my_kernel.s").read_text()


@x86_only
def test_targets_lists_the_usable_cpus_and_features():
    proc = cli("targets")
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(": ", 1) for line in proc.stdout.splitlines())
    assert lines["target triple"].startswith("x86_64-")
    cpus = lines["CPUs (--target-cpu)"].split(", ")
    assert cpus[:2] == ["host", "generic"] and {"x86-64", "skylake", "znver3"} <= set(cpus)
    assert not {"i386", "i486", "pentium4", "help"} & set(cpus)     # 32-bit CPUs cannot run x86-64 code
    assert {"avx2", "sse2", "fma"} <= set(lines["features (--target-features +NAME or -NAME)"].split(", "))


def test_a_callee_named_like_the_kernel_is_renamed(tmp_path):
    """A qjit'd function called inside the program becomes a private function named after it; with
    --name equal to that name the two symbols once clashed (a duplicate @scale)."""
    from sprue.tools.compile import Options, compile_jaxpr
    scale = sprue.qjit(lambda x: x * 2.0)
    scale.__name__ = scale.name = "scale"
    closed = sprue.make_jaxpr(lambda x: scale(x) + scale(x + 1.0))(np.ones(3))
    written = compile_jaxpr(closed, Options(Path("prog.jaxpr"), tmp_path, "scale", emit={"stablehlo"}))
    text = written["stablehlo"].read_text()
    assert "func.func @scale(" in text and "func.func private @scale_1(" in text and "call @scale_1(" in text
    assert "_mlir_ciface_scale" in exported(written["so"])


# -- StableHLO input holding what StableHLO may not contain (issue 20, item 2) ----------------------------
_FOREIGN_STABLEHLO = {
    # a dense_resource whose blob is missing, or of the wrong size (translation read past it: SIGSEGV)
    "resource_missing": ("func.func @main() -> tensor<3xf32> {\n"
                         "  %0 = stablehlo.constant dense_resource<blob1> : tensor<3xf32>\n"
                         "  return %0 : tensor<3xf32>\n}\n", r":2:8: stablehlo\.constant: dense_resource<blob1> has no data"),
    "resource_short": ("func.func @main() -> tensor<3xf32> {\n"
                       "  %0 = stablehlo.constant dense_resource<blob1> : tensor<3xf32>\n"
                       "  return %0 : tensor<3xf32>\n}\n"
                       '{-#\n  dialect_resources: {\n    builtin: {\n      blob1: "0x040000000000803F"\n    }\n  }\n#-}\n',
                       r":2:8: stablehlo\.constant: dense_resource<blob1> holds 4 bytes .* needs 12"),
    # LLVM's inline assembly (LLVM ERROR, SIGABRT) and a load through a null pointer (compiled)
    "inline_asm": ("func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {\n"
                   '  %r = llvm.inline_asm has_side_effects "nop", "=r" : () -> i32\n'
                   "  return %a : tensor<3xf32>\n}\n", r":2:8: llvm\.inline_asm is not allowed in StableHLO input"),
    "null_load": ("func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {\n"
                  "  %p = llvm.mlir.zero : !llvm.ptr\n  %v = llvm.load %p : !llvm.ptr -> f32\n"
                  "  return %a : tensor<3xf32>\n}\n", r":2:8: llvm\.mlir\.zero is not allowed"),
    # a call to a function the module only declares
    "free_declaration": ("func.func private @free(tensor<3xf32>) -> tensor<3xf32>\n"
                         "func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {\n"
                         "  %0 = func.call @free(%a) : (tensor<3xf32>) -> tensor<3xf32>\n"
                         "  return %0 : tensor<3xf32>\n}\n", r":1:1: func\.func @free is a declaration without a body"),
    "emit_c_interface": ("func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> attributes {llvm.emit_c_interface} {\n"
                         "  return %a : tensor<3xf32>\n}\n",
                         r":1:1: func\.func: attribute 'llvm\.emit_c_interface': llvm attributes may not appear"),
}


@pytest.mark.parametrize("case", sorted(_FOREIGN_STABLEHLO))
def test_foreign_stablehlo_is_refused_by_the_console_script(tmp_path, case):
    text, message = _FOREIGN_STABLEHLO[case]
    path = tmp_path / f"{case}.mlir"
    path.write_text(text)
    proc = cli("compile", str(path), "-o", str(tmp_path / "out"))
    assert proc.returncode == 1, proc.stderr       # a crash would be a negative return code
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert re.match(rf"sprue: error: {re.escape(str(path))}{message}", err), err
    assert not (tmp_path / "out").exists()


def test_the_name_probes_answers_are_kept_where_only_this_user_may_write(tmp_path, monkeypatch):
    from sprue.runtime import c_names
    folder = tmp_path / "c_names"
    monkeypatch.setattr(c_names, "PROBE_CACHE_DIR", str(folder))
    assert "clashes with the system's C headers" in c_names.header_problems(["size_t", "zz_kernel"])["size_t"]
    (kept,) = folder.glob("*.json")
    assert json.loads(kept.read_text())["size_t"] and kept.stat().st_mode & 0o022 == 0
    # a kept answer is used without asking the compilers again ...
    kept.write_text(json.dumps({"zz_kernel": "cc: an answer kept before"}))
    kept.chmod(0o600)
    assert c_names.header_problems(["zz_kernel"]) == {
        "zz_kernel": "it clashes with the system's C headers (cc: an answer kept before)"}
    # ... but one that someone else could have written is not: the compilers are asked again
    kept.write_text(json.dumps({"size_t": ""}))
    kept.chmod(0o666)
    assert "size_t" in c_names.header_problems(["size_t"])


def test_a_name_too_long_for_a_file_is_refused(tmp_path):
    from sprue.runtime.c_names import KernelNameError, check_kernel_name, kernel_name_for
    with pytest.raises(KernelNameError, match="it is 300 characters long; it names files too"):
        check_kernel_name("k" * 300, "--name")
    assert kernel_name_for("k" * 300) == "k" * 193   # made from a long file name: cut to fit
