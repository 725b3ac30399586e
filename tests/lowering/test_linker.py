"""The system linker driven directly (lowering/linker.py): the same library as the C compiler's
link, and the compiler's link whenever the direct one is unknown or fails."""
import subprocess

import numpy as np
import pytest

from sprue.lowering import c_toolchain, linker
from sprue.lowering.backend import build_shared_library
from sprue.runtime.function import load
from sprue.runtime.kernel_signature import Signature, TensorSpec

DOUBLE = """module {
  func.func @main(%x: tensor<4xf64>) -> tensor<4xf64> {
    %0 = stablehlo.add %x, %x : tensor<4xf64>
    return %0 : tensor<4xf64>
  }
}
"""
SIGNATURE = Signature([TensorSpec("x", "float64", (4,))], [TensorSpec("r", "float64", (4,))])


def _exported(library) -> list[str] | None:
    try:
        out = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return sorted(line.split()[-1] for line in out.splitlines() if line.strip())


def _build_and_call(path):
    so = build_shared_library(DOUBLE, path, name="k", internal=["main"])
    x = np.arange(4.0)
    np.testing.assert_array_equal(load(str(so), "main", SIGNATURE)(x)[0], 2 * x)
    return so


@pytest.fixture
def fresh_linker(monkeypatch):
    """This process's learned linker commands forgotten (and restored after)."""
    monkeypatch.setattr(linker, "_known", {})
    monkeypatch.setattr(linker, "_pending", {})


def test_a_direct_link_exports_what_the_compilers_link_exports(tmp_path, monkeypatch, fresh_linker):
    compiler = c_toolchain.find_c_compiler()
    if linker.command(compiler) is None:
        pytest.skip(f"{compiler[0]} prints no linker command for -###: every link runs it")
    direct = _build_and_call(tmp_path / "direct")
    monkeypatch.setenv(linker.ENV, "0")
    assert linker.command(compiler) is None
    through_cc = _build_and_call(tmp_path / "cc")
    names = _exported(direct)
    if names is None:
        print("nm is not installed: the libraries' exported names are not compared")
        return
    # (gold's __bss_start, _edata and _end kept local by the version script)
    assert names == _exported(through_cc) and "_mlir_ciface_main" in names and "_edata" not in names


def test_a_failing_direct_link_falls_back_to_the_compiler_for_good(tmp_path, fresh_linker):
    compiler = c_toolchain.find_c_compiler()
    linker._known[tuple(compiler)] = linker.LinkerCommand(("false", "-o", "OUT", "IN"), 2, 3, gold=False)
    _build_and_call(tmp_path / "a")
    assert linker.command(compiler) is None   # forgotten: the next links run the compiler
    _build_and_call(tmp_path / "b")


def test_the_drivers_line_becomes_the_linkers_with_the_inputs_where_the_driver_puts_them(tmp_path):
    ld = tmp_path / "ld"
    ld.write_text("")
    line = [str(ld), "-plugin", "/lto.so", "-plugin-opt=-fresolution=/tmp/x.res", "--eh-frame-hdr", "-shared",
            "-o", linker._OUT, "/crti.o", "-L/lib", linker._INPUT, "-lc", "/crtn.o"]
    parsed = linker._parse(["cc"], line, gold=True)
    assert parsed.argv == (str(ld), "--eh-frame-hdr", "-shared", "-o", linker._OUT, "/crti.o", "-L/lib",
                           linker._INPUT, "-lc", "/crtn.o")
    assert parsed.for_link("/out/k.so", ["/w/k.o", "/w/k.1.o"], ["-lm", "--as-needed", "-l:libmvec.so.1"],
                           "/w/exports.map") == [
        str(ld), "--eh-frame-hdr", "-shared", "-o", "/out/k.so", "/crti.o", "-L/lib",
        "--version-script=/w/exports.map", "/w/k.o", "/w/k.1.o", "-lm", "--as-needed", "-l:libmvec.so.1",
        "-lc", "/crtn.o"]
    # a line naming its output or input other than once is not one to fill in
    assert linker._parse(["cc"], line + [linker._INPUT], gold=False) is None
