"""Loop hints to LLVM (lowering/loop_hints.py): loops around loops stay rolled, innermost loops are
LLVM's to unroll; the hint reaches the LLVM IR as `!llvm.loop` metadata."""
import re

import numpy as np

import sprue
from sprue.lowering.loop_hints import NEST_ROLLED_MIN_TRIPS, keep_nest_loops_rolled, keep_outer_loops_rolled
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
