"""lowering/sum_tiles.py: fusion_sums' merged sums of products (a convolution's taps) run on a
register tile, checked against numpy (tests/helpers/conv_reference.py's direct loops) on the
IR the pipeline keeps; and parallel.py's chunk of such a loop, which takes the views' root buffer."""
import re

import numpy as np
import pytest

import sprue
import sprue.numpy as snp
from sprue import lax
from tests.helpers.arrays import shifted_conv3
from tests.helpers.conv_reference import conv_loops

NCHW = ("NCHW", "OIHW", "NCHW")


def _stage(tmp_path, name: str) -> str:
    (path,) = tmp_path.glob(f"*_{name}.mlir")
    return path.read_text()


def _reduction_generics(text: str) -> int:
    return sum(1 for line in text.splitlines() if "linalg.generic" in line and '"reduction"' in line)


@pytest.fixture
def threads_restored():
    yield
    import os
    sprue.set_num_threads(len(os.sched_getaffinity(0)))   # the default


@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_a_convolutions_taps_run_on_a_register_tile(dt, tmp_path):
    rng = np.random.default_rng(31)
    x, k = rng.standard_normal((2, 10, 10, 8)).astype(dt), rng.standard_normal((3, 3, 8, 32)).astype(dt)
    got = sprue.qjit(lambda x, k: shifted_conv3(snp, x, k), keep_intermediate=str(tmp_path))(x, k)
    tol = 1e-12 if dt == np.float64 else 2e-5
    np.testing.assert_allclose(got, shifted_conv3(np, x, k), rtol=tol, atol=tol)
    # the merged generic became loops over vectorized (rows x columns) tiles: no reduction generic left,
    # the output tile read before the channel loop and written after it
    buf = _stage(tmp_path, "bufferized")
    assert _reduction_generics(buf) == 0, buf
    assert re.search(r"scf\.for .* iter_args\(.* -> \(vector<\d+x\d+xf(64|32)>\)", buf), buf
    # the output's zeros are the tile's start in registers: no fill of the whole output before
    # the loops, and no read of the tile before the channel loop
    assert "linalg.fill" not in buf, buf
    assert re.search(r"scf\.for .* iter_args\(%\w+ = %cst\w*\) -> \(vector<", buf), buf


def test_strided_grouped_nchw_convolution_against_loops(tmp_path):
    rng = np.random.default_rng(32)
    x, w = rng.standard_normal((3, 8, 12, 12)), rng.standard_normal((32, 4, 3, 3)) * 0.2
    conv = sprue.qjit(lambda x, w: lax.conv_general_dilated(x, w, (2, 1), "SAME", dimension_numbers=NCHW,
                                                            feature_group_count=2),
                      keep_intermediate=str(tmp_path))
    specs = tuple(lax.conv_dimension_numbers(4, NCHW))
    want = conv_loops(x, w, (2, 1), [(0, 1), (1, 1)], (1, 1), (1, 1), specs, 2, 1)
    np.testing.assert_allclose(conv(x, w), want, rtol=1e-12, atol=1e-12)
    assert _reduction_generics(_stage(tmp_path, "bufferized")) == 0


def test_run_time_batch_including_empty(tmp_path):
    rng = np.random.default_rng(33)
    k = rng.standard_normal((3, 3, 16, 16))
    f = sprue.qjit(lambda x, k: snp.maximum(shifted_conv3(snp, x, k), 0.0), abstracted_axes=({0: "n"}, {}),
                   keep_intermediate=str(tmp_path))
    for n in (3, 1, 0):
        x = rng.standard_normal((n, 34, 34, 16))
        got = f(x, k)
        assert got.shape == (n, 32, 32, 16)
        np.testing.assert_allclose(got, np.maximum(shifted_conv3(np, x, k), 0.0), rtol=1e-12, atol=1e-12)
    loops = _stage(tmp_path, "loops")
    assert _reduction_generics(_stage(tmp_path, "bufferized")) == 0
    assert "linalg.fill" not in _stage(tmp_path, "bufferized")
    # one trip (an image, 4.7 MFLOP) is worth the pool: the loop runs there for any batch, with no
    # serial copy of the tile kernel for small ones (parallel.py), and its chunk takes the image
    # once, not one view of it per tap
    (chunk,) = [line for line in loops.splitlines()
                if re.match(r"\s*func\.func private @__sprue_par_\d+\(", line) and "x34x34x16xf64" in line]
    assert chunk.count("x34x34x16xf64") == 1, chunk
    assert loops.count("vector.transfer_write") == 1, loops


def test_sizes_the_tile_does_not_divide_keep_the_loops(tmp_path):
    rng = np.random.default_rng(34)
    x, k = rng.standard_normal((2, 9, 9, 4)), rng.standard_normal((3, 3, 4, 6))   # 6 output channels
    got = sprue.qjit(lambda x, k: shifted_conv3(snp, x, k), keep_intermediate=str(tmp_path))(x, k)
    np.testing.assert_allclose(got, shifted_conv3(np, x, k), rtol=1e-12, atol=1e-12)
    assert _reduction_generics(_stage(tmp_path, "bufferized")) == 1


def test_the_same_bits_with_any_number_of_threads(threads_restored):
    rng = np.random.default_rng(35)
    x, k = rng.standard_normal((6, 18, 18, 16)), rng.standard_normal((3, 3, 16, 32))
    f = sprue.qjit(lambda x, k: shifted_conv3(snp, x, k))
    got = {}
    for n in (1, 2, 4, 1):
        sprue.set_num_threads(n)
        got[n] = f(x, k)
    np.testing.assert_allclose(got[1], shifted_conv3(np, x, k), rtol=1e-12, atol=1e-12)
    assert all(np.array_equal(got[1], g) for g in got.values())
