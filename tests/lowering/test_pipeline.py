"""Pipeline and backend: StableHLO text -> .so, called through cffi (tests/helpers/stablehlo_kernels.py:
the descriptors are built there, so these tests do not depend on sprue.runtime).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from torch_mlir import ir

from sprue.lowering import backend, mlir_util, pipeline
from sprue.lowering.backend import CompilerNotFoundError, build_shared_library
from sprue.lowering.pipeline import STAGE_NAMES, LoweringError, lower_to_llvm_ir
from tests.helpers.stablehlo_kernels import compile_kernel

ELEMENTWISE = """
func.func @main(%a: tensor<4x3xf64>, %b: tensor<4x3xf64>) -> tensor<4x3xf64> {
  %0 = stablehlo.multiply %a, %b : tensor<4x3xf64>
  %1 = stablehlo.exponential %0 : tensor<4x3xf64>
  %2 = stablehlo.add %1, %a : tensor<4x3xf64>
  return %2 : tensor<4x3xf64>
}
"""


def test_elementwise_matches_numpy(tmp_path: Path) -> None:
    k = compile_kernel(ELEMENTWISE, tmp_path)
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    (out,) = k(a, b)
    np.testing.assert_allclose(out, np.exp(a * b) + a, rtol=1e-13)


def test_dynamic_shape_elementwise(tmp_path: Path) -> None:
    src = """
    func.func @main(%a: tensor<?xf64>, %b: tensor<?xf64>) -> tensor<?xf64> {
      %0 = stablehlo.subtract %a, %b : tensor<?xf64>
      %1 = stablehlo.abs %0 : tensor<?xf64>
      return %1 : tensor<?xf64>
    }"""
    k = compile_kernel(src, tmp_path)
    for n in (0, 1, 17):
        a, b = np.arange(n, dtype=np.float64), np.full(n, 5.0)
        np.testing.assert_array_equal(k(a, b)[0], np.abs(a - b))


def test_several_results_and_returned_arguments(tmp_path: Path) -> None:
    # Returning an argument and a strided slice: both come back as fresh
    # buffers the caller frees (the slice copy needs our memrefCopy shim).
    src = """
    func.func @main(%a: tensor<4x6xf64>) -> (tensor<4x6xf64>, tensor<2x3xf64>, tensor<f64>) {
      %0 = stablehlo.slice %a [1:3, 0:6:2] : (tensor<4x6xf64>) -> tensor<2x3xf64>
      %c = stablehlo.constant dense<2.5> : tensor<f64>
      return %a, %0, %c : tensor<4x6xf64>, tensor<2x3xf64>, tensor<f64>
    }"""
    k = compile_kernel(src, tmp_path)
    a = np.arange(24.0).reshape(4, 6)
    same, sliced, scalar = k(a)
    np.testing.assert_array_equal(same, a)
    np.testing.assert_array_equal(sliced, a[1:3, 0:6:2])
    assert scalar.shape == () and scalar == 2.5


def test_keep_intermediate_writes_every_stage(tmp_path: Path) -> None:
    so = build_shared_library(ELEMENTWISE, tmp_path, name="ew", keep_intermediate=True)
    assert so == tmp_path / "ew.so" and so.exists()
    assert (tmp_path / "ew.00_stablehlo.mlir").read_text() == ELEMENTWISE
    for i, stage in enumerate(STAGE_NAMES, start=1):
        text = (tmp_path / f"ew.{i:02d}_{stage}.mlir").read_text()
        assert "func" in text

    def stage_text(stage: str) -> str:
        return (tmp_path / f"ew.{STAGE_NAMES.index(stage) + 1:02d}_{stage}.mlir").read_text()
    assert "stablehlo." in stage_text("legalized")
    assert "stablehlo." not in stage_text("linalg") and "linalg.generic" in stage_text("linalg")
    assert "memref" in stage_text("bufferized") and "tensor<" not in stage_text("bufferized")
    assert "scf.for" in stage_text("loops")
    assert "llvm.func" in stage_text("llvm")
    assert "_mlir_ciface_main" in (tmp_path / "ew.ll").read_text()
    assert (tmp_path / "ew.o").stat().st_size > 0


def test_without_keep_intermediate_only_the_library_is_written(tmp_path: Path) -> None:
    build_shared_library(ELEMENTWISE, tmp_path, name="ew")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ew.so"]


def test_dump_callback_sees_stages_in_order() -> None:
    seen: list[str] = []
    llvm_ir = lower_to_llvm_ir(ELEMENTWISE, dump=lambda stage, text: seen.append(stage))
    assert seen == STAGE_NAMES
    assert "define" in llvm_ir and "_mlir_ciface_main" in llvm_ir


def test_linalg_stage_dump_shows_the_fused_module() -> None:
    """The stage's Python finish (fusion.accumulate_sums, then elementwise fusion) runs before its
    dump: the multiply, exp and add are one generic there."""
    texts: dict[str, str] = {}
    lower_to_llvm_ir(ELEMENTWISE, dump=lambda stage, text: texts.setdefault(stage, text))
    assert texts["linalg"].count("linalg.generic") == 1
    assert "math.exp" in texts["linalg"] and "stablehlo." not in texts["linalg"]


def test_parse_error_is_a_lowering_error() -> None:
    with pytest.raises(LoweringError) as info:
        lower_to_llvm_ir("func.func @main(%a: tensor<4xf64>) -> tensor<4xf64> { return %zz : tensor<4xf64> }")
    assert info.value.stage == "parse"
    assert "does not parse" in str(info.value)
    assert "use of undeclared SSA value" in str(info.value)


def test_pass_failure_names_the_stage_and_diagnostic() -> None:
    # A custom_call has no lowering: bufferization rejects the leftover op.
    src = """
    func.func @main(%a: tensor<4xf64>) -> tensor<4xf64> {
      %0 = stablehlo.custom_call @mystery(%a) : (tensor<4xf64>) -> tensor<4xf64>
      return %0 : tensor<4xf64>
    }"""
    with pytest.raises(LoweringError) as info:
        lower_to_llvm_ir(src)
    err = info.value
    assert err.stage == "linalg"
    assert "stage 'linalg'" in str(err) and "no lowering to linalg for stablehlo.custom_call" in str(err)
    assert err.diagnostics and "stablehlo.custom_call" in err.diagnostics[0]


def test_pass_failure_carries_mlir_diagnostics() -> None:
    # Valid StableHLO whose bufferization fails: MLIR's own message is kept.
    with pytest.raises(LoweringError) as info:
        pipeline.run_stage(_parsed(ELEMENTWISE), "bufferized", "one-shot-bufferize")
    assert info.value.stage == "bufferized"
    assert "op was not bufferized" in str(info.value)


def _returning_the_wrong_type():
    """A module that parses but does not verify: @f's type says f64, its return gives f32 (as a
    broken rewrite between two stages would leave it)."""
    module = _parsed("func.func @f(%a: f32) -> f32 { return %a : f32 }")
    with module.context:
        f = module.body.operations[0]
        f.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get([ir.F32Type.get()], [ir.F64Type.get()]))
    return module


def test_a_module_that_does_not_verify_after_a_stage_is_a_lowering_error() -> None:
    # The passes run without MLIR's verification after each one (mlir_util.pass_manager); the
    # stage verifies the module once after them.
    with pytest.raises(LoweringError) as info:
        pipeline.run_stage(_returning_the_wrong_type(), "loops", "canonicalize")
    err = info.value
    assert err.stage == "loops"
    assert "the module does not verify after the passes canonicalize" in str(err)
    assert "doesn't match function result type" in str(err)
    assert err.ir_text is not None and "func.return" in err.ir_text   # (generic form: it does not verify)


def test_verification_after_each_pass_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    # SPRUE_VERIFY_EACH_PASS=1: MLIR's pass manager verifies after every pass, and says so as a
    # failed pass of the stage
    monkeypatch.setattr(mlir_util, "VERIFY_EACH_PASS", True)
    with pytest.raises(LoweringError) as info:
        pipeline.run_stage(_returning_the_wrong_type(), "loops", "canonicalize")
    assert "stage 'loops': an MLIR pass failed" in str(info.value)
    assert "doesn't match function result type" in str(info.value)


def _parsed(src: str):
    ctx = pipeline.make_pipeline_context()
    with ctx, ir.Location.unknown():
        return pipeline.parse_module(ctx, src)


def test_untranslatable_region_op_names_the_op() -> None:
    src = """
    func.func @main(%a: tensor<4xf64>) -> tensor<4xf64> {
      %0 = "stablehlo.sort"(%a) ({
      ^bb0(%x: tensor<f64>, %y: tensor<f64>):
        %s = stablehlo.cosine %x : tensor<f64>
        %f = stablehlo.reduce_precision %s, format = e5m10 : tensor<f64>
        %c = stablehlo.compare LT, %f, %y : (tensor<f64>, tensor<f64>) -> tensor<i1>
        stablehlo.return %c : tensor<i1>
      }) {dimension = 0 : i64} : (tensor<4xf64>) -> tensor<4xf64>
      return %0 : tensor<4xf64>
    }"""
    with pytest.raises(LoweringError) as info:
        lower_to_llvm_ir(src)
    assert info.value.stage == "legalized"
    assert "stablehlo.reduce_precision" in str(info.value) and "stablehlo.sort" in str(info.value)


def test_compiler_not_found_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "/nonexistent/sprue-no-such-cc")
    with pytest.raises(CompilerNotFoundError) as info:
        build_shared_library(ELEMENTWISE, tmp_path)
    text = str(info.value)
    assert "no C compiler was found" in text
    assert "system C compiler" in text
    assert "apt-get install gcc" in text and "xcode-select --install" in text and "CC" in text
    assert isinstance(info.value, RuntimeError)


def test_link_failure_carries_compiler_stderr(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.o"
    bogus.write_bytes(b"this is not an object file")
    with pytest.raises(backend.LinkError) as info:
        backend.link_shared(bogus, tmp_path / "x.so")
    assert "bogus.o" in str(info.value)


def test_emit_object_is_an_elf_or_macho() -> None:
    obj = backend.emit_object(lower_to_llvm_ir(ELEMENTWISE))
    assert obj[:4] in (b"\x7fELF", b"\xcf\xfa\xed\xfe")


def test_small_module_compiles_quickly(tmp_path: Path) -> None:
    start = time.perf_counter()
    build_shared_library(ELEMENTWISE, tmp_path)
    assert time.perf_counter() - start < 10.0


def test_special_float_constants_survive_llvmlite(tmp_path: Path) -> None:
    # MLIR prints +inf/-qnan/+nan(0x..) literals that llvmlite's older LLVM
    # cannot parse; the backend rewrites them to exact hex forms.
    src = """
    func.func @main(%a: tensor<4xf64>, %b: tensor<4xf32>) -> (tensor<4xf64>, tensor<4xf32>) {
      %c = stablehlo.constant dense<[0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000, 0xFFF8000000000123]> : tensor<4xf64>
      %d = stablehlo.constant dense<[0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001]> : tensor<4xf32>
      %x = stablehlo.add %a, %c : tensor<4xf64>
      %y = stablehlo.add %b, %d : tensor<4xf32>
      return %x, %y : tensor<4xf64>, tensor<4xf32>
    }"""
    k = compile_kernel(src, tmp_path)
    x, y = k(np.zeros(4), np.zeros(4, np.float32))
    assert x[0] == np.inf and x[1] == -np.inf and np.isnan(x[2]) and np.isnan(x[3]) and np.signbit(x[3])
    assert y[0] == np.inf and y[1] == -np.inf and np.isnan(y[2]) and np.isnan(y[3])


def test_llvmlite_compatible_keeps_exact_bits() -> None:
    text = ("store double -nan(0x123), ptr %0\n"
            "%5 = fcmp one float %4, +inf\n"
            "store half -qnan, ptr %0\n"
            "store bfloat +snan(0x1), ptr %0\n"
            "%n = fadd double %inf, 1.0\n")
    out = backend.llvmlite_compatible(text).split("\n")
    assert out[0] == f"store double 0x{(0xFFF8000000000000 | 0x123):016X}, ptr %0"
    assert out[1] == "%5 = fcmp one float %4, 0x7FF0000000000000"
    assert out[2] == "store half 0xHFE00, ptr %0"
    assert out[3] == "store bfloat 0xR7F81, ptr %0"
    assert out[4] == "%n = fadd double %inf, 1.0"          # identifiers untouched


def test_concurrent_builds_from_threads(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor
    a = np.linspace(-1.0, 1.0, 12).reshape(4, 3)

    def build(i: int) -> np.ndarray:
        return compile_kernel(ELEMENTWISE, tmp_path / f"t{i}")(a, a)[0]
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(build, range(8)))
    for out in outs:
        np.testing.assert_allclose(out, np.exp(a * a) + a, rtol=1e-13)


def test_llvm22_float_literals_become_parseable_by_llvmlite():
    """LLVM 22 prints `float 1.234500e+00` (shortest round-trip decimal) and `f0x...` bit patterns;
    llvmlite's older parser needs exact hex. The rewrite must keep every bit: run the functions."""
    import ctypes

    import llvmlite.binding as llvm
    import numpy as np

    from sprue.lowering.backend import llvmlite_compatible
    f64_bits = int(np.float64(0.6).view(np.uint64))
    f32_bits = int(np.float32(0.1).view(np.uint32))
    ir_text = (
        "define float @f(float %x) {\n  %r = fmul float %x, 1.234500e+00\n  ret float %r\n}\n"
        f"define double @g(double %x) {{\n  %r = fadd double %x, f0x{f64_bits:016X}\n  ret double %r\n}}\n"
        f"define float @h(float %x) {{\n  %r = fadd float %x, f0x{f32_bits:08X}\n  ret float %r\n}}\n")
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    mod = llvm.parse_assembly(llvmlite_compatible(ir_text))
    tm = llvm.Target.from_default_triple().create_target_machine()
    with llvm.create_mcjit_compiler(mod, tm) as engine:
        engine.finalize_object()
        f = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_float)(engine.get_function_address("f"))
        g = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(engine.get_function_address("g"))
        h = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_float)(engine.get_function_address("h"))
        assert np.float32(f(2.0)) == np.float32(2.0) * np.float32(1.2345)
        assert g(1.0) == 1.0 + 0.6
        assert np.float32(h(0.0)) == np.float32(0.1)
