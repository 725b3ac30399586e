"""Sizes of run-time (`?`) axes fold to one value per axis, so that programs with abstracted axes
fuse as their static versions do: the entry's size arguments are read from the arrays that have
them (stablehlo._sizes_read_from_arrays), a slice keeping a whole `?` axis keeps the operand's own
size (rules_structural._dynamic_slice), sizes of op results are read from their operands after the
linalg rewrites (pipeline.LINALG_FUSION), and slices covering a whole tensor of run-time size fold
away (inplace.fold_whole_slices). Results are compared with numpy at several run-time sizes, with
one compiled library; the loops are counted against the static version's."""

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from tests.helpers.arrays import shifted_conv3
from tests.helpers.bufferization import program_text, stage_text


def test_a_convolution_over_a_run_time_batch_fuses_like_its_static_version(tmp_path):
    # before: each shifted slice of the `?` batch axis had a size computed from the size argument,
    # the broadcasts another, and the nine products and eight adds ran as 19 loop nests
    def conv(x, k):
        return jnp.maximum(shifted_conv3(jnp, x[:, :, :, None], k), 0.0)

    rng = np.random.default_rng(0)
    x, k = rng.standard_normal((5, 12, 12)), rng.standard_normal((3, 3, 1, 4))
    static = sprue.qjit(conv, keep_intermediate=str(tmp_path / "s"))
    dynamic = sprue.qjit(conv, abstracted_axes=({0: "n"}, None), keep_intermediate=str(tmp_path / "d"))
    np.testing.assert_allclose(static(x, k), np.maximum(shifted_conv3(np, x[..., None], k), 0), rtol=1e-12, atol=1e-12)
    for n in (5, 1, 7):
        xn = rng.standard_normal((n, 12, 12))
        np.testing.assert_allclose(dynamic(xn, k), np.maximum(shifted_conv3(np, xn[..., None], k), 0),
                                   rtol=1e-12, atol=1e-12)
    assert dynamic.compile_count == 1
    loops = [program_text(tmp_path / d, "loops").count("scf.for") for d in ("s", "d")]
    assert loops[1] == loops[0], loops


def test_slices_of_a_run_time_axis_read_its_size_from_the_operand(tmp_path):
    # x[:, 1:] of a `?` axis 0: start 0, limit the operand's own size; the other axis's literal
    # start is clamped at compile time (no run-time arithmetic left for it)
    f = sprue.qjit(lambda x: x[:, 1:7] * 2.0 + x[:, 0:6], abstracted_axes=({0: "n"},),
                   keep_intermediate=str(tmp_path))
    for n in (4, 1, 9):
        x = np.arange(n * 8, dtype=np.float64).reshape(n, 8)
        np.testing.assert_allclose(f(x), x[:, 1:7] * 2.0 + x[:, 0:6])
    text = stage_text(tmp_path, "linalg")
    body = text[text.index("scf.if"):]       # after the entry checks (which clamp the size argument)
    assert "arith.maxsi" not in body and "arith.minsi" not in body
    assert program_text(tmp_path, "loops").count("scf.for") == 2     # one nest of two loops


def test_a_size_argument_and_the_array_it_sizes_are_one_value(tmp_path):
    # a broadcast to the `?` rows (its size from the size argument) added to the array: one nest
    def f(x, v):
        return jnp.broadcast_to(v, (x.shape[0], 8)) * x + 1.0

    g = sprue.qjit(f, abstracted_axes=({0: "n"}, None), keep_intermediate=str(tmp_path))
    v = np.linspace(0, 1, 8)
    for n in (3, 1, 6):
        x = np.random.default_rng(n).standard_normal((n, 8))
        np.testing.assert_allclose(g(x, v), v * x + 1.0)
    assert program_text(tmp_path, "loops").count("scf.for") == 2


@pytest.mark.parametrize("rows", [0, 1, 5, 64])
def test_slices_and_reductions_of_a_run_time_axis_at_edge_sizes_match_numpy(rows):
    f = sprue.qjit(lambda x: jnp.sum(x[:, 1:] * 2.0, axis=1) + x[:, 0], abstracted_axes=({0: "n"},))
    x = np.random.default_rng(rows).standard_normal((rows, 4))
    np.testing.assert_allclose(f(x), np.sum(x[:, 1:] * 2.0, axis=1) + x[:, 0])
