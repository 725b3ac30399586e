"""The `sprue` command line: every flag of `sprue compile`, its outputs and its exit codes
(0 ok, 1 an error in the input with a one-line `file[:line]: message`, 2 bad usage)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sprue
from sprue.lowering.stablehlo import lower
from sprue.saved import to_text
from sprue.tools.cli import EMIT_KINDS, main

SPRUE = Path(sys.executable).parent / "sprue"


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


# -- the console script ---------------------------------------------------------------------------------
def test_version_help_and_cmake_dir():
    proc = cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"sprue {sprue.__version__}"
    proc = cli("--help")
    assert proc.returncode == 0 and "compile" in proc.stdout and "doctor" in proc.stdout
    proc = cli("--cmake-dir")
    assert proc.returncode == 0 and (Path(proc.stdout.strip()) / "SprueConfig.cmake").is_file()
    proc = cli("compile", "--help")
    assert proc.returncode == 0 and all(k in proc.stdout for k in ("--emit", "-O", "--target-cpu", "--name"))


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
    assert exported(tmp_path / "o" / "libmy_kernel.so") == ["_mlir_ciface_my_kernel"]
    assert "static inline int64_t my_kernel(my_kernel_results *out" in (tmp_path / "o" / "my_kernel.h").read_text()
    assert capsys.readouterr().err == ""


def test_name_flag(mlir, tmp_path):
    assert main(["compile", str(mlir), "-o", str(tmp_path), "--name", "mm"]) == 0
    assert exported(tmp_path / "libmm.so") == ["_mlir_ciface_mm"] and (tmp_path / "mm.h").is_file()


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
    assert members == ["scale.o"]
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
