"""lowering/fusion_sums.py: a chain of contractions accumulating into one buffer becomes one generic,
checked on the bufferized IR the pipeline keeps and on compiled results against numpy."""
import re

import numpy as np
import pytest

import sprue
import sprue.numpy as snp
from tests.helpers.arrays import shifted_conv3


def _stage(tmp_path, name: str) -> str:
    (path,) = tmp_path.glob(f"*_{name}.mlir")
    return path.read_text()


@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_shifted_einsums_of_a_convolution_are_one_loop_nest(dt, tmp_path):
    rng = np.random.default_rng(21)
    x, k = rng.standard_normal((3, 11, 9, 8)).astype(dt), rng.standard_normal((3, 3, 8, 5)).astype(dt)
    got = sprue.qjit(lambda x, k: snp.maximum(shifted_conv3(snp, x, k), 0.0), keep_intermediate=str(tmp_path))(x, k)
    tol = 1e-12 if dt == np.float64 else 2e-5
    np.testing.assert_allclose(got, np.maximum(shifted_conv3(np, x, k), 0.0), rtol=tol, atol=tol)
    # nine contractions accumulated in turn: without the merge, nine generics with reduction loops
    buf = _stage(tmp_path, "bufferized")
    assert sum(1 for line in buf.splitlines() if "linalg.generic" in line and '"reduction"' in line) == 1, buf


def test_convolution_with_dynamic_batch_and_image_sizes(tmp_path):
    rng = np.random.default_rng(23)
    k = rng.standard_normal((3, 3, 4, 6))
    f = sprue.qjit(lambda x, k: shifted_conv3(snp, x, k), abstracted_axes=({0: "n", 1: "h", 2: "w"}, {}),
                   keep_intermediate=str(tmp_path))
    for shape in [(2, 9, 7, 4), (1, 5, 12, 4)]:
        x = rng.standard_normal(shape)
        np.testing.assert_allclose(f(x, k), shifted_conv3(np, x, k), rtol=1e-12, atol=1e-12)
    # the output's loops are dynamic, the reduced channel loop static: still one loop nest
    buf = _stage(tmp_path, "bufferized")
    assert sum(1 for line in buf.splitlines() if "linalg.generic" in line and '"reduction"' in line) == 1, buf


def test_links_with_different_loops_stay_apart(tmp_path):
    rng = np.random.default_rng(22)
    a, ka = rng.standard_normal((4, 6, 8)), rng.standard_normal((8, 3))
    b, kb = rng.standard_normal((4, 6, 5)), rng.standard_normal((5, 3))
    c, kc = rng.standard_normal((4, 6, 5)), rng.standard_normal((5, 3))

    def f(a, ka, b, kb, c, kc):      # the first link reduces over 8, the others over 5
        return snp.einsum("nhc,cd->nhd", a, ka) + snp.einsum("nhc,cd->nhd", b, kb) + \
            snp.einsum("nhc,cd->nhd", c, kc)
    got = sprue.qjit(f, keep_intermediate=str(tmp_path))(a, ka, b, kb, c, kc)
    np.testing.assert_allclose(got, a @ ka + b @ kb + c @ kc, rtol=1e-12)
    # the link reducing over 8 keeps a loop nest of its own, reading its two operands only
    buf = _stage(tmp_path, "bufferized")
    # (n and h one loop: collapse.py)
    (line,) = [line for line in buf.splitlines() if "linalg.generic" in line and "x8xf64>" in line]
    assert re.search(r"ins\(%(arg0|collapse_shape\w*), %arg1 : memref<(4x6|24)x8xf64>, memref<8x3xf64>\)", line), buf
