"""Tests for sprue.runtime: signatures, loading, calling, ownership, errors.

Real shared libraries come from small handwritten StableHLO modules compiled
here with torch-mlir and llvmlite (the same pipeline sprue.lowering uses),
so these tests need neither the frontend nor the lowering package.
"""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import cffi
import numpy as np
import pytest

from sprue.runtime import CompiledFunction, LibraryLoadError, Signature, TensorSpec, element_type, element_type_of, load
from sprue.runtime.abi import c_interface
from sprue.runtime.results import ResultUnpacker
from tests.helpers.system import rss_bytes, run_in_threads

# ---------------------------------------------------------------------------
# Compiling StableHLO to a shared library (test helper)
# ---------------------------------------------------------------------------

PIPELINE = (
    "builtin.module(func.func(stablehlo-legalize-to-linalg),stablehlo-convert-to-signless,canonicalize,cse,"
    "linalg-fuse-elementwise-ops,one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops "
    "function-boundary-type-conversion=identity-layout-map},buffer-deallocation-pipeline,"
    "convert-bufferization-to-memref,convert-linalg-to-loops,convert-scf-to-cf,expand-strided-metadata,"
    "lower-affine,arith-expand,convert-math-to-llvm,convert-math-to-libm,convert-arith-to-llvm,"
    "finalize-memref-to-llvm,func.func(llvm-request-c-wrappers),convert-func-to-llvm,convert-cf-to-llvm,"
    "convert-index-to-llvm,convert-ub-to-llvm,reconcile-unrealized-casts)"
)


class Built:
    """A compiled test module: the library and its LLVM IR (to check the ABI)."""

    def __init__(self, so: Path, llvm_ir: str) -> None:
        self.so = so
        self.llvm_ir = llvm_ir


_BUILT: dict[str, Built] = {}


def _compile(src: str, outdir: Path) -> Built:
    # Imported here, not at the top: the runtime itself must not need them.
    pytest.importorskip("torch_mlir")
    llvm = pytest.importorskip("llvmlite.binding")
    from torch_mlir import ir, passmanager
    from torch_mlir._mlir_libs import _stablehlo
    from torch_mlir.dialects import llvm as mlir_llvm

    ctx = ir.Context()
    _stablehlo.register_dialect(ctx)
    _stablehlo.register_stablehlo_passes()
    with ctx:
        module = ir.Module.parse(src)
        passmanager.PassManager.parse(PIPELINE).run(module.operation)
        llvm_ir = str(mlir_llvm.translate_module_to_llvmir(module.operation))
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    mod = llvm.parse_assembly(llvm_ir)
    tm = llvm.Target.from_default_triple().create_target_machine(opt=2, reloc="pic")
    stem = outdir / f"m{len(_BUILT)}"
    stem.with_suffix(".o").write_bytes(tm.emit_object(mod))
    so = stem.with_suffix(".so")
    subprocess.run(["cc", "-shared", "-o", str(so), str(stem.with_suffix(".o")), "-lm"], check=True)
    return Built(so, llvm_ir)


@pytest.fixture(scope="session")
def build(tmp_path_factory):
    """build(src) -> Built; each distinct module is compiled once per session."""
    outdir = tmp_path_factory.mktemp("sprue_runtime")

    def _build(src: str) -> Built:
        if src not in _BUILT:
            _BUILT[src] = _compile(src, outdir)
        return _BUILT[src]

    return _build


def spec(name, dtype, shape):
    return TensorSpec(name, dtype, shape)


# x: f64[3,4], y: f64[] -> (x + y, sum(x + y))
ADD_SUM = """
func.func @main(%x: tensor<3x4xf64>, %y: tensor<f64>) -> (tensor<3x4xf64>, tensor<f64>) {
  %yb = stablehlo.broadcast_in_dim %y, dims = [] : (tensor<f64>) -> tensor<3x4xf64>
  %s = stablehlo.add %x, %yb : tensor<3x4xf64>
  %z = stablehlo.constant dense<0.0> : tensor<f64>
  %r = stablehlo.reduce(%s init: %z) applies stablehlo.add across dimensions = [0, 1]
       : (tensor<3x4xf64>, tensor<f64>) -> tensor<f64>
  return %s, %r : tensor<3x4xf64>, tensor<f64>
}
"""
ADD_SUM_SIG = Signature([spec("x", "f64", (3, 4)), spec("y", "f64", ())], [spec("s", "f64", (3, 4)), spec("r", "f64", ())])


def ref_add_sum(x, y):
    s = np.asarray(x, np.float64) + np.float64(y)
    return s, s.sum()


@pytest.fixture(scope="session")
def add_sum(build) -> CompiledFunction:
    return load(build(ADD_SUM).so, "main", signature=ADD_SUM_SIG)


def counting_free(f: CompiledFunction) -> list[int]:
    """Wrap f's deallocator; returns the list of freed addresses it fills."""
    freed: list[int] = []
    real = f._unpacker.free
    ffi = f._ffi

    def free(ptr):
        freed.append(int(ffi.cast("intptr_t", ptr)))
        real(ptr)

    f._unpacker.free = free
    return freed


# ---------------------------------------------------------------------------
# Signature
# ---------------------------------------------------------------------------


def test_signature_json_round_trip():
    sig = Signature(
        [spec("x", np.float64, (3, None)), spec("params['w']", "f32", [2]), spec("flag", bool, ())],
        [spec("out[0]", "i64", (None,)), spec("out[1]", np.dtype("uint8"), (0, 5))],
    )
    text = sig.to_json()
    assert json.loads(text) == {
        "version": 1,
        "args": [
            {"name": "x", "dtype": "f64", "shape": [3, None]},
            {"name": "params['w']", "dtype": "f32", "shape": [2]},
            {"name": "flag", "dtype": "bool", "shape": []},
        ],
        "results": [
            {"name": "out[0]", "dtype": "i64", "shape": [None]},
            {"name": "out[1]", "dtype": "u8", "shape": [0, 5]},
        ],
    }
    back = Signature.from_json(text)
    assert back == sig
    assert back.args[0].shape == (3, None) and back.args[0].dtype == np.float64
    assert str(back) == "(x: f64[3,?], params['w']: f32[2], flag: bool[]) -> (i64[?], u8[0,5])"


@pytest.mark.parametrize(
    "text, message",
    [
        ("not json", "signature is not valid JSON"),
        ('{"version": 2, "args": [], "results": []}', "unsupported signature version 2"),
        ('{"version": 1, "args": []}', "must have keys version, args, results"),
        ('{"version": 1, "args": [{"name": "x", "dtype": "c256", "shape": []}], "results": []}', "unknown element type 'c256'"),
        ('{"version": 1, "args": [{"name": "x", "dtype": "f64", "shape": [-1]}], "results": []}', "negative dimension"),
        ('{"version": 1, "args": [{"name": "x", "dtype": "f64", "shape": [true]}], "results": []}', "must be ints or None"),
        ('{"version": 1, "args": [{"name": "x", "dtype": "f64"}], "results": []}', "keys name, dtype, shape"),
    ],
)
def test_signature_from_bad_json(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        Signature.from_json(text)


def test_tensor_spec_validation():
    with pytest.raises(ValueError, match="unsupported dtype complex256"):
        TensorSpec("x", np.clongdouble, ())
    assert TensorSpec("z", np.complex64, ()).element.ctype == "float _Complex"
    with pytest.raises(ValueError, match="unsupported dtype >f8"):
        TensorSpec("x", ">f8", ())
    with pytest.raises(ValueError, match="shape entries must be ints or None, got 2.0"):
        TensorSpec("x", "f64", (2.0,))
    with pytest.raises(ValueError, match="shape must be a sequence"):
        TensorSpec("x", "f64", 3)
    assert element_type_of("float32") is element_type("f32")
    assert element_type_of(np.bool_).ctype == "uint8_t"
    assert TensorSpec("x", "i32", (np.int64(2),)).shape == (2,)


# ---------------------------------------------------------------------------
# The C interface, as compiled (the runtime relies on these facts)
# ---------------------------------------------------------------------------


def _ciface_params(built: Built) -> int:
    m = re.search(r"define void @_mlir_ciface_main\(([^)]*)\)", built.llvm_ir)
    assert m, "no C-interface wrapper"
    return len([p for p in m.group(1).split(",") if p.strip()])


def test_abi_result_parameters(build):
    # Several results: one leading pointer to a struct of descriptors.
    assert _ciface_params(build(ADD_SUM)) == 3
    assert re.search(
        r"store \{ \{ ptr, ptr, i64, \[2 x i64\], \[2 x i64\] \}, \{ ptr, ptr, i64 \} \} %\d+, ptr %0", build(ADD_SUM).llvm_ir
    )
    # One result: one leading pointer to its descriptor.
    assert _ciface_params(build(IDENTITY)) == 2
    assert re.search(r"store \{ ptr, ptr, i64, \[2 x i64\], \[2 x i64\] \} %\d+, ptr %0", build(IDENTITY).llvm_ir)
    # No results: no result parameter.
    assert _ciface_params(build(NO_RESULTS)) == 1


def test_generated_cdef():
    iface = c_interface(ADD_SUM_SIG, "main")
    assert iface.function == "_mlir_ciface_main"
    assert iface.result_type == "struct sprue_results *"
    assert iface.result_words == (0, 7) and iface.result_nwords == 10
    # the result object as its words (read by offset), the descriptors passed as pointers
    assert "struct sprue_results { int64_t words[10]; };" in iface.cdef
    assert "void _mlir_ciface_main(void *, void *, void *);" in iface.cdef
    assert iface.arg_types == ("struct sprue_memref_2 *", "struct sprue_memref_0 *")
    one = c_interface(Signature([spec("x", "f64", (3,))], [spec("y", "f64", (3,))]), "f")
    assert one.result_type == "struct sprue_memref_1 *"
    none = c_interface(Signature([], []), "g")
    assert none.result_type is None and "void _mlir_ciface_g(void);" in none.cdef
    with pytest.raises(ValueError, match="symbol must be a C identifier"):
        c_interface(ADD_SUM_SIG, "main(); int x")


# ---------------------------------------------------------------------------
# Calling: values, dtypes, input conversions
# ---------------------------------------------------------------------------


def test_add_sum_values(add_sum):
    x = np.random.default_rng(0).standard_normal((3, 4))
    s, r = add_sum(x, 2.5)
    es, er = ref_add_sum(x, 2.5)
    np.testing.assert_allclose(s, es)
    np.testing.assert_allclose(r, er)
    assert type(s) is np.ndarray and s.dtype == np.float64 and s.shape == (3, 4)
    assert type(r) is np.float64
    assert s.flags.c_contiguous and s.flags.writeable and s.flags.aligned
    s[0, 0] = 42.0  # results are ordinary writable arrays


def _input_variants(x: np.ndarray):
    big = np.zeros((6, 8))
    big[::2, ::2] = x
    ro = x.copy()
    ro.flags.writeable = False
    raw = bytearray(x.nbytes + 1)
    unaligned = np.frombuffer(raw, np.float64, x.size, 1).reshape(x.shape)
    unaligned[...] = x

    class Matrixish(np.ndarray):
        pass

    class ArrayLike:
        def __array__(self, dtype=None, copy=None):
            return x.copy()

    return {
        "contiguous": x,
        "strided": big[::2, ::2],
        "fortran": np.asfortranarray(x),
        "read-only": ro,
        "byte-swapped": x.astype(">f8"),
        "unaligned": unaligned,
        "subclass": x.copy().view(Matrixish),
        "__array__": ArrayLike(),
        "transposed": np.ascontiguousarray(x.T).T,
    }


@pytest.mark.parametrize(
    "variant", ["contiguous", "strided", "fortran", "read-only", "byte-swapped", "unaligned", "subclass", "__array__", "transposed"]
)
def test_array_input_layouts(add_sum, variant):
    x = np.arange(12.0).reshape(3, 4) / 7
    value = _input_variants(x)[variant]
    before = np.array(value, copy=True)
    s, r = add_sum(value, 1.0)
    es, er = ref_add_sum(x, 1.0)
    np.testing.assert_array_equal(s, es)
    np.testing.assert_allclose(r, er)
    np.testing.assert_array_equal(np.asarray(value), before)  # inputs are never written


def test_broadcast_view_input(add_sum):
    row = np.arange(4.0)
    s, _ = add_sum(np.broadcast_to(row, (3, 4)), 0.5)  # read-only, zero strides
    np.testing.assert_array_equal(s, np.broadcast_to(row, (3, 4)) + 0.5)


@pytest.mark.parametrize(
    "x, y",
    [
        (np.arange(12, dtype=np.float32).reshape(3, 4), np.float32(0.25)),  # f32 -> f64 is safe
        (np.arange(12, dtype=np.int32).reshape(3, 4), np.array(3, np.int64)),  # ints -> f64 are safe
        (np.arange(12, dtype=np.uint8).reshape(3, 4), True),  # Python bool into f64
        (np.ones((3, 4), dtype=bool), 7),  # Python int into f64
        (np.arange(12.0).reshape(3, 4), np.float16(1.5)),
    ],
)
def test_safe_casts_are_converted(add_sum, x, y):
    s, r = add_sum(x, y)
    es, er = ref_add_sum(x, y)
    np.testing.assert_array_equal(s, es)
    np.testing.assert_allclose(r, er)


DTYPE_MODULE = """
func.func @main(%a: tensor<5x{t}>, %b: tensor<{t}>) -> (tensor<5x{t}>, tensor<{t}>) {{
  %bb = stablehlo.broadcast_in_dim %b, dims = [] : (tensor<{t}>) -> tensor<5x{t}>
  %s = stablehlo.{op} %a, %bb : tensor<5x{t}>
  %z = stablehlo.constant dense<{zero}> : tensor<{t}>
  %r = stablehlo.reduce(%s init: %z) applies stablehlo.{op} across dimensions = [0]
       : (tensor<5x{t}>, tensor<{t}>) -> tensor<{t}>
  return %s, %r : tensor<5x{t}>, tensor<{t}>
}}
"""

# short name -> (StableHLO element type, combining op, its identity, numpy op)
DTYPES = {
    "f64": ("f64", "add", "0.0", np.add),
    "f32": ("f32", "add", "0.0", np.add),
    "i64": ("i64", "add", "0", np.add),
    "i32": ("i32", "add", "0", np.add),
    "i16": ("i16", "add", "0", np.add),
    "i8": ("i8", "add", "0", np.add),
    "u8": ("ui8", "add", "0", np.add),
    "bool": ("i1", "or", "false", np.logical_or),
}


def _dtype_fn(build, name: str) -> CompiledFunction:
    t, op, zero, _ = DTYPES[name]
    built = build(DTYPE_MODULE.format(t=t, op=op, zero=zero))
    sig = Signature([spec("a", name, (5,)), spec("b", name, ())], [spec("s", name, (5,)), spec("r", name, ())])
    return load(built.so, signature=sig)


@pytest.mark.parametrize("name", list(DTYPES))
def test_dtypes(build, name):
    f = _dtype_fn(build, name)
    dtype = element_type(name).dtype
    rng = np.random.default_rng(1)
    if dtype.kind == "b":
        a, b = np.array([True, False, False, True, False]), np.bool_(False)
    elif dtype.kind == "f":
        a, b = rng.standard_normal(5).astype(dtype), dtype.type(0.5)
    else:
        info = np.iinfo(dtype)
        a, b = rng.integers(info.min, info.max, 5, dtype=dtype, endpoint=True), dtype.type(info.max - 3)
    npop = DTYPES[name][3]
    s, r = f(a, b)
    expect_s = npop(a, b).astype(dtype)  # numpy wraps integers as the compiled code does
    expect_r = npop.reduce(expect_s, dtype=dtype)
    assert s.dtype == dtype and type(r) is dtype.type
    if dtype.kind == "f":
        np.testing.assert_allclose(s, expect_s, rtol=1e-6)
        np.testing.assert_allclose(r, expect_r, rtol=1e-5)
    else:
        np.testing.assert_array_equal(s, expect_s)
        assert r == expect_r


@pytest.mark.parametrize(
    "name, value",
    [
        ("f64", 3), ("f64", True), ("f64", 2**60), ("f32", 0.1), ("f32", 7), ("f32", float("inf")),
        ("i32", 2**31 - 1), ("i32", -(2**31)), ("i8", -128), ("u8", 255), ("i64", -(2**63)), ("bool", True),
        ("i16", False),
    ],
)
def test_python_scalars_accepted(build, name, value):
    f = _dtype_fn(build, name)
    dtype = element_type(name).dtype
    a = np.zeros(5, dtype)
    s, _ = f(a, value)
    np.testing.assert_array_equal(s, DTYPES[name][3](a, np.array(value).astype(dtype)).astype(dtype))


# ---------------------------------------------------------------------------
# Shapes: zero-size, dynamic
# ---------------------------------------------------------------------------

# (A reduce over an empty static dimension is not legalized by
# stablehlo-legalize-to-linalg today, so the scalar here comes from y.)
ZERO = """
func.func @main(%x: tensor<0x3xf64>, %y: tensor<f64>) -> (tensor<0x3xf64>, tensor<f64>) {
  %yb = stablehlo.broadcast_in_dim %y, dims = [] : (tensor<f64>) -> tensor<0x3xf64>
  %s = stablehlo.add %x, %yb : tensor<0x3xf64>
  %r = stablehlo.add %y, %y : tensor<f64>
  return %s, %r : tensor<0x3xf64>, tensor<f64>
}
"""

DYNAMIC = """
func.func @main(%a: tensor<?x3xf64>, %b: tensor<?x3xf64>) -> tensor<?x3xf64> {
  %s = stablehlo.add %a, %b : tensor<?x3xf64>
  return %s : tensor<?x3xf64>
}
"""


def test_zero_size(build):
    sig = Signature([spec("x", "f64", (0, 3)), spec("y", "f64", ())], [spec("s", "f64", (0, 3)), spec("r", "f64", ())])
    f = load(build(ZERO).so, signature=sig)
    freed = counting_free(f)
    for x in (np.empty((0, 3)), np.empty((3, 0)).T, np.zeros((0, 3), np.float32)):
        n = len(freed)
        s, r = f(x, 1.5)
        assert s.shape == (0, 3) and s.dtype == np.float64 and type(r) is np.float64 and r == 3.0
        assert len(freed) == n + 2  # both buffers are freed at once: nothing views them


def test_dynamic_dims(build):
    sig = Signature([spec("a", "f64", (None, 3)), spec("b", "f64", (None, 3))], [spec("s", "f64", (None, 3))])
    f = load(build(DYNAMIC).so, signature=sig)
    rng = np.random.default_rng(2)
    for n in (0, 1, 7, 100):
        a, b = rng.standard_normal((n, 3)), rng.standard_normal((n, 3))
        (s,) = f(a, b)
        assert s.shape == (n, 3)
        np.testing.assert_array_equal(s, a + b)
    with pytest.raises(ValueError, match=re.escape("argument 'b': expected f64[?,3], got an array of shape (4,2)")):
        f(np.zeros((4, 3)), np.zeros((4, 2)))


# ---------------------------------------------------------------------------
# Ownership of returned buffers
# ---------------------------------------------------------------------------

IDENTITY = """
func.func @main(%x: tensor<3x4xf64>) -> tensor<3x4xf64> {
  return %x : tensor<3x4xf64>
}
"""

TWICE = """
func.func @main(%a: tensor<3xf32>, %b: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<f32>) {
  %s = stablehlo.add %a, %b : tensor<3xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%s init: %z) applies stablehlo.add across dimensions = [0]
       : (tensor<3xf32>, tensor<f32>) -> tensor<f32>
  return %s, %s, %r : tensor<3xf32>, tensor<3xf32>, tensor<f32>
}
"""
TWICE_SIG = Signature(
    [spec("a", "f32", (3,)), spec("b", "f32", (3,))], [spec("s", "f32", (3,)), spec("t", "f32", (3,)), spec("r", "f32", ())]
)

NO_RESULTS = """
func.func @main(%x: tensor<3xf32>) -> () {
  return
}
"""

# The lowering marks arguments non-writable so that in-place updates work on
# a copy; without the attribute this module would write into `a`.
IN_PLACE = """
func.func @main(%a: tensor<4xf64> {bufferization.writable = false}, %u: tensor<1xf64>, %i: tensor<i64>) -> tensor<4xf64> {
  %r = stablehlo.dynamic_update_slice %a, %u, %i : (tensor<4xf64>, tensor<1xf64>, tensor<i64>) -> tensor<4xf64>
  return %r : tensor<4xf64>
}
"""


def test_returned_input_is_a_fresh_buffer(build):
    f = load(build(IDENTITY).so, signature=Signature([spec("x", "f64", (3, 4))], [spec("y", "f64", (3, 4))]))
    x = np.arange(12.0).reshape(3, 4)
    (y,) = f(x)
    np.testing.assert_array_equal(y, x)
    assert not np.shares_memory(x, y)
    y += 1
    np.testing.assert_array_equal(x, np.arange(12.0).reshape(3, 4))


def test_dynamic_update_slice_does_not_write_its_input(build):
    sig = Signature([spec("a", "f64", (4,)), spec("u", "f64", (1,)), spec("i", "i64", ())], [spec("r", "f64", (4,))])
    f = load(build(IN_PLACE).so, signature=sig)
    a = np.arange(4.0)
    (r,) = f(a, np.array([9.0]), 2)
    np.testing.assert_array_equal(r, [0.0, 1.0, 9.0, 3.0])
    np.testing.assert_array_equal(a, np.arange(4.0))


def test_read_only_inputs_are_never_written(build):
    """Even code that updates an argument in place (no writable=false) cannot
    touch a read-only input: the runtime passes it a copy."""
    unsafe = IN_PLACE.replace(" {bufferization.writable = false}", "")
    sig = Signature([spec("a", "f64", (4,)), spec("u", "f64", (1,)), spec("i", "i64", ())], [spec("r", "f64", (4,))])
    f = load(build(unsafe).so, signature=sig)
    frozen = np.frombuffer(np.arange(4.0).tobytes(), np.float64)  # views an immutable bytes object
    assert not frozen.flags.writeable
    (r,) = f(frozen, np.array([9.0]), 1)
    np.testing.assert_array_equal(r, [0.0, 9.0, 2.0, 3.0])
    np.testing.assert_array_equal(frozen, np.arange(4.0))


def test_no_results(build):
    f = load(build(NO_RESULTS).so, signature=Signature([spec("x", "f32", (3,))], []))
    assert f(np.zeros(3, np.float32)) == []
    with pytest.raises(ValueError, match=re.escape("argument 'x': expected f32[3], got an array of shape (4,)")):
        f(np.zeros(4, np.float32))


def test_each_buffer_freed_once_when_last_reference_goes(add_sum):
    f = load(add_sum.path, signature=ADD_SUM_SIG)
    freed = counting_free(f)
    s, r = f(np.ones((3, 4)), 1.0)
    assert len(freed) == 1  # the scalar's buffer, at once
    view = s[1:, ::2]
    del s
    gc.collect()
    assert len(freed) == 1  # the view keeps the buffer alive
    np.testing.assert_array_equal(view, np.full((2, 2), 2.0))
    del view
    assert len(freed) == 2 and freed[0] != freed[1]


def test_shared_allocation_freed_once_and_results_do_not_alias(build):
    f = load(build(TWICE).so, signature=TWICE_SIG)
    freed = counting_free(f)
    a, b = np.arange(3, dtype=np.float32), np.full(3, 0.5, np.float32)
    results = f(a, b)
    s, t, r = results
    np.testing.assert_array_equal(s, a + b)
    np.testing.assert_array_equal(t, a + b)
    assert type(r) is np.float32 and r == np.float32((a + b).sum())
    assert not np.shares_memory(s, t)  # the later result is a copy
    assert len(freed) == 1  # the scalar's buffer; `s` owns the one shared by s and t
    s[0] = 100.0
    assert t[0] == a[0] + b[0]
    # The result outlives the function and every list that held it.
    del f, results, t, r
    gc.collect()
    assert len(freed) == 1
    np.testing.assert_array_equal(s[1:], (a + b)[1:])
    del s
    assert len(freed) == 2 and freed[0] != freed[1]


def test_input_returned_twice(build):
    src = """
    func.func @main(%x: tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>) {
      return %x, %x : tensor<3xf64>, tensor<3xf64>
    }
    """
    f = load(build(src).so, signature=Signature([spec("x", "f64", (3,))], [spec("y", "f64", (3,)), spec("z", "f64", (3,))]))
    freed = counting_free(f)
    x = np.arange(3.0)
    y, z = f(x)
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(z, x)
    assert not np.shares_memory(y, z) and not np.shares_memory(x, y)
    del y, z
    assert len(freed) == len(set(freed)) >= 1


def _fake_unpacker(specs):
    """A ResultUnpacker over a hand-made result object, with malloc and a counting free."""
    sig = Signature([], specs)
    iface = c_interface(sig, "fake")
    ffi = cffi.FFI()
    ffi.cdef(iface.cdef + "void *malloc(size_t);")
    libc = ffi.dlopen(None)
    freed: list[int] = []

    def free(p):
        freed.append(int(ffi.cast("intptr_t", p)))
        libc.free(p)

    unpacker = ResultUnpacker(ffi, sig.results, iface.result_words, iface.result_nwords, free)
    return ffi, libc, unpacker, freed, ffi.new(iface.result_type)


@pytest.mark.parametrize(
    "offset, strides",
    [
        (2, (1, 3)),  # column-major
        (11, (-4, -1)),  # both axes reversed
        (1, (0, 1)),  # a broadcast row
    ],
)
def test_strided_descriptors_are_honoured(offset, strides):
    ffi, libc, unpacker, freed, res = _fake_unpacker([spec("y", "f64", (3, 4))])
    p = libc.malloc(8 * 16 + 16)
    data = ffi.cast("double *", p)
    for i in range(18):
        data[i] = float(i)
    res.allocated = p
    res.aligned = ffi.cast("char *", p) + 16  # aligned != allocated, as for real
    res.offset = offset
    res.sizes = (3, 4)
    res.strides = strides
    (y,) = unpacker.unpack(res)
    pool = np.arange(18.0)[2:]
    expect = np.array([[pool[offset + i * strides[0] + j * strides[1]] for j in range(4)] for i in range(3)])
    np.testing.assert_array_equal(y, expect)
    assert freed == []
    del y
    assert len(freed) == 1


def _vector_results(ffi, res):
    """The two rank-1 descriptors of a result object of two vectors (its words 0-4 and 5-9)."""
    words = ffi.cast("int64_t *", res)
    return [ffi.cast("struct sprue_memref_1 *", words + 5 * i) for i in range(2)]


def test_malformed_results_raise_without_leaking():
    ffi, libc, unpacker, freed, res = _fake_unpacker([spec("y", "f64", (2,)), spec("z", "f64", (2,))])
    r0, r1 = _vector_results(ffi, res)
    r0.allocated = r0.aligned = libc.malloc(16)
    r0.sizes, r0.strides = (2,), (1,)
    r1.allocated = r1.aligned = ffi.NULL
    with pytest.raises(MemoryError, match="result 'z': the compiled code returned a null buffer"):
        unpacker.unpack(res)
    gc.collect()
    assert len(freed) == 1

    ffi, libc, unpacker, freed, res = _fake_unpacker([spec("y", "f64", (2,)), spec("z", "f64", (2,))])
    for d, shift, offset in zip(_vector_results(ffi, res), (16, 0), (-4, 0)):
        d.allocated = libc.malloc(16)
        d.aligned = ffi.cast("char *", d.allocated) + shift
        d.offset = offset  # y's first element lies 16 bytes before its buffer
        d.sizes, d.strides = (2,), (1,)
    with pytest.raises(RuntimeError, match="result 'y': the returned descriptor points before its allocation"):
        unpacker.unpack(res)
    gc.collect()
    assert len(freed) == 2


# ---------------------------------------------------------------------------
# Memory, threads
# ---------------------------------------------------------------------------

BIG = """
func.func @main(%x: tensor<64x64xf64>, %y: tensor<64x64xf64>) -> (tensor<64x64xf64>, tensor<f64>) {
  %s = stablehlo.multiply %x, %y : tensor<64x64xf64>
  %z = stablehlo.constant dense<0.0> : tensor<f64>
  %r = stablehlo.reduce(%s init: %z) applies stablehlo.add across dimensions = [0, 1]
       : (tensor<64x64xf64>, tensor<f64>) -> tensor<f64>
  return %s, %r : tensor<64x64xf64>, tensor<f64>
}
"""
BIG_SIG = Signature(
    [spec("x", "f64", (64, 64)), spec("y", "f64", (64, 64))], [spec("s", "f64", (64, 64)), spec("r", "f64", ())]
)


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_many_calls_do_not_grow_rss(build):
    f = load(build(BIG).so, signature=BIG_SIG)
    x = np.random.default_rng(3).standard_normal((64, 64))
    y = x.T.copy()
    for _ in range(500):
        f(x, y)
    gc.collect()
    before = rss_bytes()
    for _ in range(10_000):
        s, r = f(x, y)
    gc.collect()
    grown = rss_bytes() - before
    # A leak of one 32 KiB result per call would be over 300 MiB.
    assert grown < 16 * 2**20, f"RSS grew by {grown / 2**20:.1f} MiB over 10^4 calls"
    np.testing.assert_array_equal(s, x * y)


def test_threads_call_concurrently(build):
    f = load(build(BIG).so, signature=BIG_SIG)
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            barrier.wait()
            for _ in range(200):
                x, y = rng.standard_normal((64, 64)), rng.standard_normal((64, 64))
                s, r = f(x, y)
                np.testing.assert_array_equal(s, x * y)
                np.testing.assert_allclose(r, (x * y).sum())
        except BaseException as exc:  # reported by the main thread below
            errors.append(exc)

    run_in_threads(worker, 8)
    assert errors == []


# ---------------------------------------------------------------------------
# Argument errors
# ---------------------------------------------------------------------------


class Junk:
    pass


class BadArray:
    def __array__(self, dtype=None, copy=None):
        raise RuntimeError("nope")


X = np.zeros((3, 4))


@pytest.mark.parametrize(
    "args, exc, message",
    [
        ((X,), TypeError, "expected 2 arguments (x, y), got 1"),
        ((X, 1.0, 2.0), TypeError, "expected 2 arguments (x, y), got 3"),
        ((np.zeros((3, 5)), 1.0), ValueError, "argument 'x': expected f64[3,4], got an array of shape (3,5)"),
        ((np.zeros(12), 1.0), ValueError, "argument 'x': expected f64[3,4], got an array of shape (12,)"),
        ((np.zeros((1, 3, 4)), 1.0), ValueError, "argument 'x': expected f64[3,4], got an array of shape (1,3,4)"),
        ((X, np.zeros(1)), ValueError, "argument 'y': expected f64[], got an array of shape (1,)"),
        ((1.0, 1.0), ValueError, "argument 'x': expected f64[3,4], got a Python float (a scalar)"),
        ((np.float64(1), 1.0), ValueError, "argument 'x': expected f64[3,4], got a numpy scalar of shape ()"),
        (
            (X.astype(np.complex128), 1.0),
            TypeError,
            "argument 'x': expected f64[3,4], got an array of dtype complex128, which does not cast safely to f64",
        ),
        (
            (X.astype("m8[s]"), 1.0),
            TypeError,
            "argument 'x': expected f64[3,4], got an array of dtype timedelta64[s], which does not cast safely to f64",
        ),
        (
            (X.astype(object), 1.0),
            TypeError,
            "argument 'x': expected f64[3,4], got an array of dtype object, which does not cast safely to f64",
        ),
        (
            (X.astype("U3"), 1.0),
            TypeError,
            "argument 'x': expected f64[3,4], got an array of dtype <U3, which does not cast safely to f64",
        ),
        (
            (X, np.complex64(1)),
            TypeError,
            "argument 'y': expected f64[], got a numpy scalar of dtype complex64, which does not cast safely to f64",
        ),
        ((X, 1j), TypeError, "argument 'y': expected f64[], got a Python complex, which does not cast safely to f64"),
        (("abc", 1.0), TypeError, "argument 'x': expected f64[3,4], got an object of type str"),
        ((b"abc", 1.0), TypeError, "argument 'x': expected f64[3,4], got an object of type bytes"),
        ((X.tolist(), 1.0), TypeError, "argument 'x': expected f64[3,4], got an object of type list"),
        ((X, None), TypeError, "argument 'y': expected f64[], got an object of type NoneType"),
        ((Junk(), 1.0), TypeError, "argument 'x': expected f64[3,4], got an object of type Junk"),
        ((X, {}), TypeError, "argument 'y': expected f64[], got an object of type dict"),
        (
            (BadArray(), 1.0),
            TypeError,
            "argument 'x': expected f64[3,4], got an object of type BadArray that numpy could not convert "
            "(RuntimeError('nope'))",
        ),
        ((X, 2**1100), ValueError, "argument 'y': expected f64[], got the Python int (huge), which does not fit in f64"),
        (
            (np.ma.masked_array(X, mask=X > 5), 1.0),
            TypeError,
            "argument 'x': expected f64[3,4], got a numpy masked array, whose mask would be dropped: pass"
            " .filled(fill_value) to replace the masked entries, or .data to ignore the mask",
        ),
    ],
)
def test_argument_errors(add_sum, args, exc, message):
    with pytest.raises(exc, match=re.escape(message) + r"\Z"):
        add_sum(*args)


@pytest.mark.parametrize(
    "name, value, exc, message",
    [
        ("f32", np.float64(1.0), TypeError, "argument 'b': expected f32[], got a numpy scalar of dtype float64, which does not cast safely to f32"),
        ("f32", 1e300, ValueError, "argument 'b': expected f32[], got the Python float 1e+300, which does not fit in f32"),
        ("i32", 1.5, TypeError, "argument 'b': expected i32[], got a Python float, which does not cast safely to i32"),
        ("i32", 2**31, ValueError, "argument 'b': expected i32[], got the Python int 2147483648, which does not fit in i32"),
        ("i8", 300, ValueError, "argument 'b': expected i8[], got the Python int 300, which does not fit in i8"),
        ("u8", -1, ValueError, "argument 'b': expected u8[], got the Python int -1, which does not fit in u8"),
        ("i64", 2**63, ValueError, "argument 'b': expected i64[], got the Python int 9223372036854775808, which does not fit in i64"),
        ("bool", 1, TypeError, "argument 'b': expected bool[], got a Python int, which does not cast safely to bool"),
        ("bool", np.int8(1), TypeError, "argument 'b': expected bool[], got a numpy scalar of dtype int8, which does not cast safely to bool"),
        ("i32", np.int64(1), TypeError, "argument 'b': expected i32[], got a numpy scalar of dtype int64, which does not cast safely to i32"),
        ("f32", np.zeros(5, np.int64), TypeError, "argument 'b': expected f32[], got an array of dtype int64, which does not cast safely to f32"),
    ],
)
def test_scalar_argument_errors(build, name, value, exc, message):
    f = _dtype_fn(build, name)
    a = np.zeros(5, element_type(name).dtype)
    with pytest.raises(exc, match=re.escape(message) + r"\Z"):
        f(a, value)


def test_errors_leave_the_function_usable(add_sum):
    for bad in ("x", None, np.zeros((2, 2)), object()):
        with pytest.raises((TypeError, ValueError)):
            add_sum(bad, 1.0)
    s, r = add_sum(np.ones((3, 4)), 1.0)
    np.testing.assert_array_equal(s, np.full((3, 4), 2.0))


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------


def test_load_errors(add_sum, tmp_path):
    with pytest.raises(LibraryLoadError, match="no such compiled library"):
        load(tmp_path / "missing.so", signature=ADD_SUM_SIG)
    bogus = tmp_path / "bogus.so"
    bogus.write_bytes(b"not an ELF file")
    with pytest.raises(LibraryLoadError, match="cannot load compiled library"):
        load(bogus, signature=ADD_SUM_SIG)
    with pytest.raises(LibraryLoadError, match=r"does not export _mlir_ciface_other \(is 'other' the right symbol\?\)"):
        load(add_sum.path, "other", signature=ADD_SUM_SIG)
    with pytest.raises(ValueError, match="symbol must be a C identifier"):
        load(add_sum.path, "1main", signature=ADD_SUM_SIG)
    with pytest.raises(TypeError, match="signature must be a sprue.runtime.Signature, got dict"):
        load(add_sum.path, signature=ADD_SUM_SIG.to_dict())
    with pytest.raises(TypeError, match="signature must be a sprue.runtime.Signature, got NoneType"):
        load(add_sum.path)
    with pytest.raises(TypeError, match=r"symbol must be a str, got Signature \(pass the signature third"):
        load(add_sum.path, ADD_SUM_SIG)
    assert load(add_sum.path, "main", ADD_SUM_SIG).signature == ADD_SUM_SIG  # positional form
    assert isinstance(LibraryLoadError("x"), OSError)


def test_repr(add_sum):
    assert repr(add_sum).startswith("<CompiledFunction main(x: f64[3,4], y: f64[]) -> (f64[3,4], f64[]) from /")


def test_loading_needs_neither_mlir_nor_llvm(add_sum):
    """A cached library loads with numpy and cffi alone."""
    script = (
        "import sys, numpy as np\n"
        "from sprue.runtime import load, Signature\n"
        "f = load(sys.argv[1], signature=Signature.from_json(sys.argv[2]))\n"
        "s, r = f(np.ones((3, 4)), 1.0)\n"
        "assert (s == 2).all() and r == 24.0\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch_mlir', 'llvmlite', 'torch')"
        " or m.startswith('sprue.lowering')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", script, add_sum.path, ADD_SUM_SIG.to_json()], check=True)
