"""Compiler failures are sprue errors naming the stage, with the failing IR saved to a file whose
path is in the message; and the exception hierarchy of sprue.errors."""
from pathlib import Path

import pytest

import sprue
from sprue.base import errors
from sprue.lowering import backend, c_toolchain
from sprue.lowering.backend import CompilerNotFoundError, LinkError, build_shared_library
from sprue.lowering.pipeline import LoweringError

GOOD = """module {
  func.func @main(%arg0: tensor<3xf64>) -> tensor<3xf64> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<3xf64>
    return %0 : tensor<3xf64>
  }
}"""

NO_LOWERING = GOOD.replace("stablehlo.add %arg0, %arg0 : tensor<3xf64>",
                           "stablehlo.custom_call @nowhere(%arg0) : (tensor<3xf64>) -> tensor<3xf64>")


# the failing IR these tests provoke is saved under their tmp_path, not in the session's temp folder
pytestmark = pytest.mark.usefixtures("system_temp_in_tmp_path")


def _saved(err) -> str:
    assert err.ir_path and f"the failing IR is saved in {err.ir_path}" in str(err)
    return Path(err.ir_path).read_text()


def test_a_failed_mlir_stage_names_the_stage_and_saves_the_ir(tmp_path):
    with pytest.raises(LoweringError) as info:
        build_shared_library(NO_LOWERING, tmp_path, "k")
    err = info.value
    assert isinstance(err, errors.CompileError) and isinstance(err, errors.SprueError)
    assert err.stage == "linalg" and "lowering failed at stage 'linalg'" in str(err)
    assert "custom_call" in _saved(err)


def test_an_llvm_failure_is_a_compile_error_with_the_llvm_ir(tmp_path, monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("LLVM ERROR: simulated")
    monkeypatch.setattr(backend, "codegen", broken)
    with pytest.raises(errors.CompileError) as info:
        build_shared_library(GOOD, tmp_path, "k")
    assert info.value.stage == "llvm" and "simulated" in str(info.value)
    assert "define" in _saved(info.value)


def test_a_link_failure_is_a_compile_error_with_the_optimized_ir(tmp_path, monkeypatch):
    monkeypatch.setattr(c_toolchain, "find_c_compiler", lambda: ["false"])
    with pytest.raises(LinkError) as info:
        build_shared_library(GOOD, tmp_path, "k")
    assert isinstance(info.value, errors.CompileError) and info.value.stage == "link"
    assert "define" in _saved(info.value)


def test_kept_intermediates_hold_the_failing_ir(tmp_path):
    with pytest.raises(LoweringError) as info:
        build_shared_library(NO_LOWERING, tmp_path, "k", keep_intermediate=True)
    assert Path(info.value.ir_path).parent == tmp_path


def test_no_compiler_is_a_compile_error(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setenv("PATH", "/nonexistent")
    try:
        backend.find_c_compiler.cache_clear()
    except AttributeError:
        pass
    try:
        with pytest.raises(CompilerNotFoundError) as info:
            backend.find_c_compiler()
        assert isinstance(info.value, errors.CompileError) and info.value.stage == "link"
    finally:
        try:
            backend.find_c_compiler.cache_clear()
        except AttributeError:
            pass


def test_the_hierarchy():
    e = errors
    assert issubclass(e.ParseError, e.SprueValueError) and issubclass(sprue.JaxprSyntaxError, e.ParseError)
    from sprue.lowering.stablehlo_input import StableHLOInputError
    assert issubclass(StableHLOInputError, e.ParseError)
    assert issubclass(e.ShapeError, ValueError) and issubclass(e.RuntimeCheckError, e.ShapeError)
    assert issubclass(e.ArgumentTypeError, TypeError) and issubclass(e.ArgumentValueError, ValueError)
    assert issubclass(e.ArgumentTypeError, e.ArgumentError) and issubclass(e.ArgumentError, e.SprueError)
    for cls in (LoweringError, LinkError, CompilerNotFoundError):
        assert issubclass(cls, e.CompileError) and issubclass(cls, RuntimeError)
    from sprue.runtime.function import LibraryLoadError
    assert issubclass(LibraryLoadError, e.LibraryLoadError) and issubclass(LibraryLoadError, OSError)
    assert issubclass(e.UnsupportedError, NotImplementedError) and issubclass(e.ConcretizationError, TypeError)


def test_shape_errors_of_signatures_are_shape_errors():
    @sprue.qjit
    def f(x: sprue.f64["n"], y: sprue.f64["n"]):  # noqa: F821
        return x + y
    import numpy as np
    with pytest.raises(errors.ShapeError):
        f(np.ones(2), np.ones(3))
