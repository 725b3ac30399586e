"""lowering/transpose_blocks.py: an 8 x 8 vector.transpose becomes 24 two-row shuffles, in a loop
LLVM keeps rolled; the packed products that use it are compared with numpy in
test_matmul_packed.py (a @ b.T, batched, f32 and f64, odd sizes)."""
import re

import numpy as np
import pytest
from torch_mlir import ir

import sprue
import sprue.numpy as jnp
from sprue.lowering import pipeline
from sprue.lowering.transpose_blocks import lower_block_transposes

_FUNC = """
func.func @f(%m: memref<64x64x{t}>, %o: memref<64x64x{t}>) {{
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %p = ub.poison : {t}
  scf.for %i = %c0 to %c64 step %c8 {{
    %v = vector.transfer_read %m[%i, %c0], %p {{in_bounds = [true, true]}} : memref<64x64x{t}>, vector<8x8x{t}>
    {transpose}
    vector.transfer_write %w, %o[%c0, %i] {{in_bounds = [true, true]}} : vector<8x8x{t}>, memref<64x64x{t}>
  }}
  return
}}"""
_SQUARE = "%w = vector.transpose %v, [1, 0] : vector<8x8x{t}> to vector<8x8x{t}>"
# the packing's form: a unit batch dim in front
_UNIT_LEAD = """%u = vector.shape_cast %v : vector<8x8x{t}> to vector<1x8x8x{t}>
    %x = vector.transpose %u, [0, 2, 1] : vector<1x8x8x{t}> to vector<1x8x8x{t}>
    %w = vector.shape_cast %x : vector<1x8x8x{t}> to vector<8x8x{t}>"""


@pytest.mark.parametrize("t", ["f64", "f32"])
@pytest.mark.parametrize("transpose", [_SQUARE, _UNIT_LEAD], ids=["8x8", "1x8x8"])
def test_a_block_transpose_is_three_rounds_of_shuffles(t, transpose):
    text = _FUNC.format(t=t, transpose=transpose.format(t=t))
    with pipeline.make_pipeline_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        lower_block_transposes(module)
        assert module.operation.verify()
        out = str(module)
    assert "vector.transpose" not in out
    shuffles = re.findall(r"vector\.shuffle %\S+, %\S+ \[([\d, ]+)\]", out)
    assert len(shuffles) == 24
    # each round pairs rows at a granularity of 1, 2 and 4 lanes, eight shuffles each
    firsts = [s.split(", ")[:4] for s in shuffles]
    assert firsts.count(["0", "8", "2", "10"]) == 4 and firsts.count(["0", "1", "8", "9"]) == 4 \
        and firsts.count(["0", "1", "2", "3"]) == 4
    assert "#llvm.loop_unroll<disable = true>" in out and "} {llvm.loop_annotation = " in out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_transposed_b_of_every_block_alignment(dtype):
    """`a @ b.T` with k and n that leave partial 8 x 8 blocks at every edge, against numpy."""
    rng = np.random.default_rng(5)
    for m, k, n in [(64, 8, 40), (70, 13, 65), (128, 100, 96)]:
        a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((n, k)).astype(dtype)
        got = sprue.qjit(lambda a, b: a @ b.T)(a, b)
        tol = 1e-4 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, a.astype(np.float64) @ b.T.astype(np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("shape, blocked", [((256, 512), True), ((4, 64, 128), True), ((100, 60), False),
                                            ((256, 500), False)], ids=["matrix", "batch", "small", "odd"])
def test_a_transposing_copy_moves_blocks_through_registers(shape, blocked, tmp_path):
    """x.T kept as an array (a transposing copy): with static sizes that 8 divides, from 64 x 64
    elements, tiled into 8 x 8 blocks transposed in registers (block_transposing_copies); other
    copies stay element by element. numpy's values either way."""
    x = np.random.default_rng(3).standard_normal(shape)
    f = sprue.qjit(lambda x: jnp.swapaxes(x, -1, -2), keep_intermediate=str(tmp_path))
    np.testing.assert_array_equal(f(x), np.swapaxes(x, -1, -2))
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    assert bool(re.search(r"vector\.shuffle %\S+, %\S+ \[0, 8, 2, 10, 4, 12, 6, 14\]", text)) == blocked, text
