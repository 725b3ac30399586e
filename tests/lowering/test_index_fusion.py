"""lowering/index_fusion.py: iotas recomputed in their readers, not stored, and comparisons of
small loop indices on int32; checked on the IR the pipeline keeps and on results against numpy."""
import math

import numpy as np
import pytest

import sprue
import sprue.numpy as snp


def _stage(tmp_path, name: str) -> str:
    return next(tmp_path.glob(f"*{name}*.mlir")).read_text()


def _causal_scores(q, k):
    t = q.shape[1]
    i = snp.arange(t)
    s = snp.where(i[:, None] >= i[None, :], q @ snp.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]), -1e30)
    e = snp.exp(s - snp.max(s, axis=-1, keepdims=True))
    return e / snp.sum(e, axis=-1, keepdims=True)


def _causal_scores_ref(q, k):
    t = q.shape[1]
    s = np.where(np.tril(np.ones((t, t), bool)), q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]), -1e30)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_a_causal_mask_is_computed_from_the_loop_indices(dt, tmp_path):
    """`arange(t)` read as rows and columns through two reshapes: no int64 array of the iota is
    stored and read, and the mask compares the two indices as int32."""
    rng = np.random.default_rng(0)
    q, k = (rng.standard_normal((2, 48, 16)).astype(dt) for _ in range(2))
    got = sprue.qjit(_causal_scores, keep_intermediate=str(tmp_path))(q, k)
    tol = 1e-12 if dt == np.float64 else 2e-5
    np.testing.assert_allclose(got, _causal_scores_ref(q, k), rtol=tol, atol=tol)
    loops = _stage(tmp_path, "loops")
    assert "xi64>" not in loops, "an int64 iota stored"
    assert "arith.cmpi sge" in loops and all(": i32" in line for line in loops.splitlines() if "arith.cmpi sge" in line)


def test_an_iota_read_through_a_broadcast_compares_on_32_bits(tmp_path):
    """A lower-triangular mask built with broadcasting (elementwise fusion brings the iotas in)."""
    x = np.random.default_rng(1).standard_normal((9, 9)).astype(np.float32)
    f = sprue.qjit(lambda x: snp.where(snp.arange(9)[:, None] >= snp.arange(9)[None, :], x, 0.0),
                   keep_intermediate=str(tmp_path))
    np.testing.assert_array_equal(f(x), np.tril(x))
    assert "arith.cmpi sge" in _stage(tmp_path, "loops")
    assert "i64" not in _stage(tmp_path, "loops").split("arith.cmpi sge")[1].splitlines()[0]


def test_indices_beyond_int32_are_compared_on_64_bits(tmp_path):
    """A run-time extent may exceed 2^31: its indices keep their 64-bit comparison."""
    f = sprue.qjit(lambda x: snp.where(snp.arange(x.shape[0]) >= 3, x, 0.0),
                   abstracted_axes=({0: "n"},), keep_intermediate=str(tmp_path))
    x = np.arange(7.0)
    np.testing.assert_array_equal(f(x), np.where(np.arange(7) >= 3, x, 0.0))
    cmp = [line for line in _stage(tmp_path, "loops").splitlines() if "arith.cmpi sge" in line]
    assert cmp and all(": i32" not in line for line in cmp)


def test_an_iota_of_floats_and_a_one_hot_from_a_stored_index():
    """`arange(k, dtype=float)` recomputed as a float, and a one-hot comparing stored argmin
    results (not indices: left as int64) with an iota."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((30, 6))

    def f(x):
        a = snp.argmin(x, axis=1)
        onehot = (a[:, None] == snp.arange(6)[None, :]).astype(x.dtype)
        return onehot * snp.arange(6, dtype=x.dtype)[None, :]
    want = (x.argmin(1)[:, None] == np.arange(6)[None, :]) * np.arange(6.0)[None, :]
    np.testing.assert_array_equal(sprue.qjit(f)(x), want)


@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_a_sum_of_an_iota_alone_keeps_its_loop_sized(tmp_path, dtype):
    """`arange(5.0).sum()` as JAX prints it: recomputing the iota in the sum would leave a generic
    with no operand indexed by its reduction loop, on which MLIR's fusion crashed; it stays read."""
    path = tmp_path / "f.jaxpr"
    path.write_text(f"""{{ lambda ; a:{dtype}[]. let
    b:{dtype}[5] = iota[dimension=0 dtype={'float64' if dtype == 'f64' else 'float32'} shape=(5,) sharding=None]
    c:{dtype}[] = reduce_sum[axes=(0,) out_sharding=None] b
    d:{dtype}[] = add c a
  in (c, d) }}
""")
    got = sprue.load(path)(np.array(2, np.float64 if dtype == "f64" else np.float32))
    assert [float(g) for g in got] == [10.0, 12.0]
