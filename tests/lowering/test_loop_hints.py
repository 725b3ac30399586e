"""Loop hints to LLVM (lowering/loop_hints.py): loops around loops stay rolled, innermost loops are
LLVM's to unroll; the hint reaches the LLVM IR as `!llvm.loop` metadata."""
import re

import numpy as np

import sprue
from sprue.lowering.loop_hints import (
    NEST_ROLLED_MIN_TRIPS,
    REDUCTION_ROW_BYTES,
    keep_long_reductions_rolled,
    keep_nest_loops_rolled,
    keep_outer_loops_rolled,
)
from sprue.lowering.pipeline import make_pipeline_context, parse_module

_NEST = """
func.func @f(%a: memref<8x256xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c256 = arith.constant 256 : index
  %z = arith.constant 2.0 : f64
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %j = %c0 to %c256 step %c1 {
      %x = memref.load %a[%i, %j] : memref<8x256xf64>
      %y = arith.mulf %x, %z : f64
      memref.store %y, %a[%i, %j] : memref<8x256xf64>
    }
  }
  return
}
"""


def test_only_loops_holding_loops_are_marked():
    module = parse_module(make_pipeline_context(), _NEST)
    assert keep_outer_loops_rolled(module) == 1
    text = str(module)
    assert text.count("{llvm.loop_annotation = ") == 1
    # the annotation sits on the outer loop: after the inner loop's closing brace
    assert text.index("{llvm.loop_annotation = ") > text.rindex("memref.store")


def _scaling(name: str, trips: int) -> str:
    return f"""
func.func private @{name}(%a: memref<{trips}xf64>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant {trips} : index
  %z = arith.constant 2.0 : f64
  scf.for %j = %c0 to %n step %c1 {{
    %x = memref.load %a[%j] : memref<{trips}xf64>
    %y = arith.mulf %x, %z : f64
    memref.store %y, %a[%j] : memref<{trips}xf64>
  }}
  return
}}
"""


def test_only_the_long_innermost_loops_of_outlined_nests_stay_rolled():
    """keep_nest_loops_rolled: an outlined nest's innermost loop of NEST_ROLLED_MIN_TRIPS trips or
    more is marked (not one of fewer, nor the same loop in a function that is not a nest, nor a
    loop holding another)."""
    long = NEST_ROLLED_MIN_TRIPS * 4
    text = (_scaling("__sprue_nest_0", long) + _scaling("__sprue_nest_1", NEST_ROLLED_MIN_TRIPS - 1)
            + _scaling("kernel", long) + _NEST.replace("func.func @f", "func.func private @__sprue_nest_2"))
    module = parse_module(make_pipeline_context(), "module {" + text + "}")
    assert keep_nest_loops_rolled(module) == 2   # nest 0's loop and nest 2's inner 256-trip loop
    marked = {name for name, body in re.findall(r"func\.func private @(\w+)\((.*?)\n  \}", str(module), re.S)
              if "llvm.loop_annotation" in body}
    assert marked == {"__sprue_nest_0", "__sprue_nest_2"}, str(module)
    # in nest 2 the annotation is the inner loop's: the outer loop closes after it
    nest2 = str(module).split("@__sprue_nest_2")[1]
    assert re.search(r"\} \{llvm\.loop_annotation = [^}]*\}\n +\}\n +return", nest2), nest2


def test_a_batch_of_rows_is_vectorized_once_not_per_batch_element(tmp_path):
    # 8 x 256 rows scaled: LLVM used to unroll the 8-trip batch loop around the vectorized row
    # loop (the rows sliced, so that collapse.py cannot make the nest one loop)
    x = np.random.default_rng(0).standard_normal((8, 256, 257))
    f = sprue.qjit(lambda x: x[:, :, 1:] * 0.125 + 1.0, keep_intermediate=tmp_path)
    np.testing.assert_allclose(f(x), x[:, :, 1:] * 0.125 + 1.0, rtol=1e-15)
    raw = next(p for p in tmp_path.glob("*.ll") if not p.name.endswith(".opt.ll")).read_text()
    optimized = next(tmp_path.glob("*.opt.ll")).read_text()
    assert "llvm.loop.unroll.disable" in raw
    assert optimized.count("vector.body:") <= 2, optimized.count("vector.body:")


def _row_sums(name: str, rows: int, trips: int, dtype: str = "f32", nested: bool = True) -> str:
    """Row sums of a rows x trips buffer: an inner reduction (iter_args) in a loop over rows."""
    inner = f"""
    %s = scf.for %j = %c0 to %n step %c1 iter_args(%acc = %zero) -> ({dtype}) {{
      %x = memref.load %a[%i, %j] : memref<{rows}x{trips}x{dtype}>
      %t = arith.addf %acc, %x : {dtype}
      scf.yield %t : {dtype}
    }}
    memref.store %s, %out[%i] : memref<{rows}x{dtype}>"""
    body = (f"scf.for %i = %c0 to %m step %c1 {{{inner}\n  }}" if nested
            else f"%i = arith.constant 0 : index{inner}")
    return f"""
func.func @{name}(%a: memref<{rows}x{trips}x{dtype}>, %out: memref<{rows}x{dtype}>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = arith.constant {rows} : index
  %n = arith.constant {trips} : index
  %zero = arith.constant 0.0 : {dtype}
  {body}
  return
}}
"""


def test_reductions_over_rows_past_the_registers_stay_rolled_and_interleaved():
    """keep_long_reductions_rolled: an inner reduction in a loop whose row has REDUCTION_ROW_BYTES
    (1,000 float32, 300 float64) is marked 'interleave 4, do not unroll'; shorter and longer rows,
    and a reduction no loop encloses, are left to LLVM."""
    low, high = REDUCTION_ROW_BYTES
    text = (_row_sums("f32_row", 8, 1000) + _row_sums("f64_row", 8, low // 8 + 44, "f64")
            + _row_sums("short", 8, low // 4 - 1) + _row_sums("long", 8, high // 4 + 1)
            + _row_sums("alone", 1, 1000, nested=False))
    module = parse_module(make_pipeline_context(), "module {" + text + "}")
    assert keep_long_reductions_rolled(module) == 2
    marked = {name for name, body in re.findall(r"func\.func @(\w+)\((.*?)\n\s*return", str(module), re.S)
              if "llvm.loop_annotation" in body}
    assert marked == {"f32_row", "f64_row"}, str(module)
    assert "#llvm.loop_interleave<count = 4 : i32>" in str(module) and "#llvm.loop_unroll<disable = true>" in str(module)


def test_a_matrix_vector_product_over_rows_of_a_thousand_floats_is_interleaved_not_unrolled(tmp_path):
    a = np.random.default_rng(1).standard_normal((64, 1000)).astype(np.float32)
    v = np.random.default_rng(2).standard_normal(1000).astype(np.float32)
    f = sprue.qjit(lambda a, v: a @ v, keep_intermediate=tmp_path)
    np.testing.assert_allclose(f(a, v), a.astype(np.float64) @ v.astype(np.float64), rtol=1e-4, atol=1e-4)
    raw = next(p for p in tmp_path.glob("*.ll") if not p.name.endswith(".opt.ll")).read_text()
    assert '!"llvm.loop.interleave.count", i32 4' in raw and "llvm.loop.unroll.disable" in raw
