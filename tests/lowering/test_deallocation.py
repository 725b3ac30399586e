"""Buffer deallocation's common case resolved before MLIR's simplification
(lowering/deallocation.py): fresh buffers not returned are freed, returned ones (and views of
them) are not, other cases are left to MLIR; compiled programs return numpy's results and leak
nothing."""
import ctypes
import re

import numpy as np
from torch_mlir import ir

import sprue
import sprue.numpy as jnp
from sprue.lowering import pipeline
from sprue.lowering.deallocation import free_fresh_buffers

_COMMON = """
func.func @f(%arg0: memref<4xf64>) -> (memref<4xf64>, memref<2xf64>, memref<4xf64>) {
  %true = arith.constant true
  %a = memref.alloc() : memref<4xf64>
  %b = memref.alloc() : memref<4xf64>
  %c = memref.alloc() : memref<4xf64>
  %v = memref.subview %b[0] [2] [1] : memref<4xf64> to memref<2xf64, strided<[1]>>
  %w = memref.cast %v : memref<2xf64, strided<[1]>> to memref<2xf64>
  %o:3 = bufferization.dealloc (%a, %b, %c : memref<4xf64>, memref<4xf64>, memref<4xf64>) if (%true, %true, %true) retain (%c, %w, %arg0 : memref<4xf64>, memref<2xf64>, memref<4xf64>)
  "test.use"(%o#0, %o#1, %o#2) : (i1, i1, i1) -> ()
  return %c, %w, %arg0 : memref<4xf64>, memref<2xf64>, memref<4xf64>
}
"""


def _resolved(text: str) -> str:
    ctx = pipeline.make_pipeline_context()
    ctx.allow_unregistered_dialects = True
    with ctx, ir.Location.unknown():
        module = ir.Module.parse(text)
        free_fresh_buffers(module)
        assert module.operation.verify()
        return str(module)


def test_fresh_buffers_not_retained_are_freed_and_retained_ones_owned():
    text = _resolved(_COMMON)
    assert "bufferization.dealloc" not in text
    # %a alone: %c is returned, %b through a view of it
    assert text.count("memref.dealloc") == 1 and "memref.dealloc %alloc :" in text, text
    # the returned buffer and the view are owned (true), the argument is not (false)
    assert re.search(r'"test\.use"\((%true\w*), \1, %false\w*\)', text), text


def test_run_time_conditions_and_retained_values_of_unknown_origin_are_left_to_mlir():
    conditional = _COMMON.replace("if (%true, %true, %true)", "if (%true, %arg1, %true)").replace(
        "func.func @f(%arg0: memref<4xf64>)", "func.func @f(%arg0: memref<4xf64>, %arg1: i1)")
    assert "bufferization.dealloc" in _resolved(conditional)
    unknown = _COMMON.replace('%w = memref.cast %v', '%u = "test.opaque"(%b) : (memref<4xf64>) -> memref<4xf64>\n'
                              '  %w = memref.cast %v')
    unknown = unknown.replace("retain (%c, %w, %arg0", "retain (%u, %w, %arg0").replace(
        "return %c, %w", "return %u, %w")
    assert "bufferization.dealloc" in _resolved(unknown)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]


def _in_use() -> int:
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _MallInfo2
    m = libc.mallinfo2()
    return m.hblkhd + m.uordblks


def test_temporaries_are_freed_and_results_and_views_of_them_returned(tmp_path):
    def program(np_, x, w):      # written once, for numpy and sprue.numpy
        ys = []
        for _ in range(6):
            x = np_.tanh(x @ w)
            ys.append(x * 2.0)
        return ys[-1][1:], np_.reshape(ys[-2], (-1,)), x, np_.sum(ys[0])

    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((24, 24)), rng.standard_normal((24, 24)) / 5
    f = sprue.qjit(lambda x, w: program(jnp, x, w), keep_intermediate=str(tmp_path))
    for got, want in zip(f(x, w), program(np, x, w), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    text = next(tmp_path.glob("*_bufferized.mlir")).read_text()
    assert "bufferization.dealloc" not in text and "memref.dealloc" in text
    before = _in_use()
    for _ in range(200):
        results = f(x, w)
        del results
    assert _in_use() - before < 200 * 24 * 24 * 8 // 10, _in_use() - before   # not 200 calls' temporaries


def test_buffers_returned_by_calls_of_parts_are_freed_without_run_time_alias_checks(tmp_path):
    """A deep network runs as calls of parts (partition.py), each returning a fresh buffer: the
    caller frees every one it does not return, with no run-time alias check (MLIR's
    `dealloc_helper`, which compares pointers at run time where it cannot prove them apart), and
    frees it directly (deallocation.free_whole_buffers)."""
    rng = np.random.default_rng(6)
    ws = [rng.standard_normal((16, 16)) * 0.3 for _ in range(60)]
    x = rng.standard_normal((16, 16))

    def net(x, ws):
        for w in ws:
            x = jnp.tanh(x @ w)
        return x
    want = x
    for w in ws:
        want = np.tanh(want @ w)
    f = sprue.qjit(net, keep_intermediate=str(tmp_path))
    np.testing.assert_allclose(f(x, ws), want, rtol=1e-10, atol=1e-12)
    text = next(tmp_path.glob("*_bufferized.mlir")).read_text()
    assert re.search(r"call @__sprue_(?:hlo_)?part_", text)
    assert "dealloc_helper" not in text and "bufferization.dealloc" not in text
    # each buffer freed as itself, not through its base buffer's metadata (free_whole_buffers:
    # ~25 LLVM dialect ops a buffer otherwise); the memory check below holds either way
    assert re.search(r"memref\.dealloc %\d+(?:#\d+)? :", text) and "extract_strided_metadata" not in text, text
    before = _in_use()
    for _ in range(200):
        f(x, ws)
    assert _in_use() - before < 60 * 16 * 16 * 8, _in_use() - before    # not 200 calls' 60 activations
