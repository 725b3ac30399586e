"""Shape-changing primitives compiled through StableHLO vs their numpy reference rules."""
import numpy as np
import pytest

import sprue
import sprue.lax as lax
import sprue.numpy as snp
from tests.helpers.bufferization import stage_text
from tests.helpers.lowering_harness import Compiled, check

DTYPES = ["float64", "float32", "int64", "int32", "uint8", "bool"]


def sample(shape, dt, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.normal(size=shape) * 10).astype(dt) if dt != "bool" else rng.random(shape) > 0.5


@pytest.mark.parametrize("dt", DTYPES)
def test_broadcast_reshape_transpose_squeeze(dt):
    x = sample((2, 1, 3), dt)
    check(lambda a: (lax.broadcast_in_dim(a, (4, 2, 5, 3), (1, 2, 3)),
                     lax.broadcast_in_dim(a, (2, 7, 3), (0, 1, 2)),
                     lax.broadcast_in_dim(lax.reshape(a, (6,)), (6, 2), (0,)),
                     lax.reshape(a, (3, 2)), lax.reshape(a, (6,)), lax.transpose(a, (2, 0, 1)),
                     lax.squeeze(a, (1,)), lax.copy_p.bind(a)), x)


def test_broadcast_and_reshape_of_scalars():
    check(lambda s: (lax.broadcast_in_dim(s, (2, 3), ()), lax.reshape(s, (1, 1)),
                     lax.squeeze(lax.reshape(s, (1,)), (0,))), np.float64(2.5))


@pytest.mark.parametrize("dt", DTYPES)
def test_rev_and_concatenate(dt):
    x, y = sample((3, 4), dt), sample((3, 2), dt, 1)
    empty = np.zeros((3, 0), dt)
    check(lambda a, b, e: (lax.rev(a, (0,)), lax.rev(a, (0, 1)), lax.rev(a, ()),
                           lax.concatenate([a, b, e, a], 1), lax.concatenate([a, a], 0)), x, y, empty)


@pytest.mark.parametrize("dt", ["float64", "int32", "bool"])
def test_pad_edges_interior_and_negative(dt):
    x = sample((4, 5), dt)
    v = np.array(1, dt)
    configs = [((1, 2, 0), (0, 0, 0)), ((0, 0, 1), (2, 1, 2)), ((-1, 0, 0), (0, -2, 0)),
               ((-2, 3, 1), (1, -3, 1)), ((0, 0, 0), (-5, 1, 0))]
    check(lambda a, pv: tuple(lax.pad(a, pv, c) for c in configs), x, v)


@pytest.mark.parametrize("dt", DTYPES)
def test_slice_with_strides(dt):
    x = sample((6, 7), dt)
    check(lambda a: (lax.slice(a, (1, 0), (5, 7)), lax.slice(a, (0, 1), (6, 7), (2, 3)),
                     lax.slice(a, (5, 6), (6, 7), (4, 4)), lax.slice(a, (2, 2), (2, 5))), x)


@pytest.mark.parametrize("index_dt", ["int64", "int32", "uint8", "int8"])
def test_dynamic_slice_clamps_start_indices(index_dt):
    x = sample((5, 6), "float64")
    upd = sample((2, 3), "float64", 2)
    starts = [(0, 0), (3, 4), (4, 5), (9, 100), (-1, -7), (127, 2)] if index_dt != "uint8" else \
        [(0, 0), (3, 4), (4, 5), (9, 100), (255, 0), (1, 255)]
    fn = lambda a, u, i, j: (lax.dynamic_slice(a, (i, j), (2, 3)), lax.dynamic_update_slice(a, u, (i, j)),
                             lax.dynamic_slice(a, (i, j), (5, 6)))
    c = Compiled(fn, x, upd, np.array(0, index_dt), np.array(0, index_dt))
    for i, j in starts:
        args = (x, upd, np.array(i, index_dt), np.array(j, index_dt))
        for g, w in zip(c(*args), fn(*args)):
            np.testing.assert_array_equal(g, w, err_msg=f"starts {(i, j)}")


def test_dynamic_slice_mixed_index_dtypes():
    x = sample((4, 4), "int32")
    check(lambda a, i, j: lax.dynamic_slice(a, (i, j), (2, 2)), x, np.int32(3), np.int64(1))


@pytest.mark.parametrize("dt", ["float64", "float32", "int64", "int32", "uint8", "bool"])
def test_iota(dt):
    n = 2 if dt == "bool" else 5
    check(lambda: (lax.iota(dt, n), lax.broadcasted_iota(dt, (n, 3), 0), lax.broadcasted_iota(dt, (2, n), 1)))


@pytest.mark.parametrize("rows", [0, 1, 6])
def test_a_concatenate_along_the_last_axis_copies_each_piece_into_its_slice(rows, tmp_path):
    """legalize_dynamic._concatenate_by_slices: no per-element branch in the innermost loop (the
    upstream generic chose each element's piece with an scf.if), pieces of run-time size too."""
    f = sprue.qjit(lambda a, b: snp.concatenate([snp.tanh(a), b, a * 2.0], axis=1) + 1.0,
                   abstracted_axes=({0: "n", 1: "k"}, {0: "n"}), keep_intermediate=str(tmp_path))
    rng = np.random.default_rng(rows)
    for k in (3, 0, 5):
        a, b = rng.standard_normal((rows, k)), rng.standard_normal((rows, 2))
        np.testing.assert_allclose(f(a, b), np.concatenate([np.tanh(a), b, a * 2.0], axis=1) + 1.0, rtol=1e-14)
    assert "scf.if" in stage_text(tmp_path, "loops") and "-> (f64)" not in stage_text(tmp_path, "loops")   # no element's choice


@pytest.mark.parametrize("shapes", [((3, 0), (3, 2)), ((3, 2), (3, 0), (3, 1)), ((0, 2), (0, 3))])
def test_a_concatenate_along_the_last_axis_with_empty_pieces_matches_numpy(shapes):
    arrays = [np.arange(float(np.prod(s))).reshape(s) + i for i, s in enumerate(shapes)]
    f = sprue.qjit(lambda *xs: snp.concatenate([x * 2.0 for x in xs], axis=-1))
    got = f(*arrays)
    assert got.shape == np.concatenate(arrays, axis=-1).shape
    np.testing.assert_array_equal(got, np.concatenate([x * 2.0 for x in arrays], axis=-1))


def test_a_concatenate_along_an_outer_axis_stays_one_fused_pass(tmp_path):
    f = sprue.qjit(lambda a, b: snp.concatenate([a, b], axis=0) * 3.0, keep_intermediate=str(tmp_path))
    a, b = np.arange(12.0).reshape(3, 4), np.arange(8.0).reshape(2, 4)
    np.testing.assert_allclose(f(a, b), np.concatenate([a, b]) * 3.0)
    assert stage_text(tmp_path, "loops").count("scf.for") == 2     # one nest: branch per row, vectorized rows


def test_keepdims_with_run_time_sizes_is_a_view(tmp_path):
    """`x.max(-1, keepdims=True)` over two run-time sizes: the reshape adds a unit dim to the
    reduction's (b, t), which the jaxpr's shapes say and the shape operand does not: a view
    (expand_shape), not a tensor.reshape that no fusion looks through (rules_structural.UNIT_RESHAPE)."""
    f = sprue.qjit(lambda x: x - x.max(-1, keepdims=True) + x[:, :, :1].squeeze(-1)[:, :, None],
                   abstracted_axes=({0: "b", 1: "t"},), keep_intermediate=str(tmp_path))
    for shape in [(2, 3, 5), (4, 1, 7), (1, 6, 2)]:
        x = np.random.default_rng(3).standard_normal(shape)
        np.testing.assert_allclose(f(x), x - x.max(-1, keepdims=True) + x[:, :, :1], rtol=1e-15)
    legalized = next(tmp_path.glob("*.01_legalized.mlir")).read_text()
    assert "tensor.reshape" not in legalized and "dynamic_reshape" not in legalized, legalized
    assert "tensor.expand_shape" in legalized
