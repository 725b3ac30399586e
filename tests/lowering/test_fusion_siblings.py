"""lowering/fusion_siblings.py: reductions over the same loops become one pass, with the elementwise
producer only they read; checked against numpy and on the bufferized IR the pipeline keeps."""
import numpy as np
import pytest

import sprue
import sprue.numpy as snp


def _bufferized(tmp_path) -> str:
    (path,) = tmp_path.glob("*_bufferized.mlir")
    return path.read_text()


def _reductions(text: str) -> list[str]:
    return [line for line in text.splitlines() if "linalg.generic" in line and '"reduction"' in line]


def _hash(ns, x):
    """A multiplicative hash of uint32 keys (benchmarks/program_sources.py's Monte Carlo)."""
    x = x ^ (x >> 16)
    x = x * np.uint32(0x7FEB352D)
    return x ^ (x >> 15)


def _two_sums(ns, keys):
    u = (_hash(ns, keys) >> 8).astype(np.float64) * (1.0 / (1 << 24))
    v = (_hash(ns, keys + np.uint32(1)) >> 8).astype(np.float64) * (1.0 / (1 << 24))
    r2 = u * u + v * v
    return ns.sum(ns.where(r2 < 1.0, 1.0, 0.0)), ns.sum(ns.exp(-r2))


def test_two_sums_of_the_same_samples_are_one_pass(tmp_path):
    keys = np.arange(5000, dtype=np.uint32) * np.uint32(7)
    got = sprue.qjit(lambda k: _two_sums(snp, k), keep_intermediate=str(tmp_path))(keys)
    want = _two_sums(np, keys)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # one reduction computing the hashes itself: no array of samples written and read back
    text = _bufferized(tmp_path)
    assert len(_reductions(text)) == 1, text
    assert "memref.alloc() {alignment = 64 : i64} : memref<5000x" not in text, text


def test_run_time_length(tmp_path):
    f = sprue.qjit(lambda k: _two_sums(snp, k), abstracted_axes=({0: "n"},), keep_intermediate=str(tmp_path))
    for n in (7, 4000, 0):
        keys = np.arange(n, dtype=np.uint32) * np.uint32(3)
        np.testing.assert_allclose(f(keys), _two_sums(np, keys), rtol=1e-12)
    assert len(_reductions(_bufferized(tmp_path))) == 1


def test_a_sum_of_the_other_sums_result_stays_after_it(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(3000)

    def moments(ns, x):       # the variance reads the mean: no common pass
        mean = ns.sum(x) / x.shape[0]
        return mean, ns.sum((x - mean) ** 2)
    got = sprue.qjit(lambda x: moments(snp, x), keep_intermediate=str(tmp_path))(x)
    np.testing.assert_allclose(got, moments(np, x), rtol=1e-12)
    assert len(_reductions(_bufferized(tmp_path))) == 2


def test_sums_along_different_axes_stay_apart(tmp_path):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((60, 70))
    got = sprue.qjit(lambda x: (snp.sum(snp.exp(x), axis=0), snp.sum(snp.exp(x), axis=1)),
                     keep_intermediate=str(tmp_path))(x)
    np.testing.assert_allclose(got[0], np.exp(x).sum(0), rtol=1e-12)
    np.testing.assert_allclose(got[1], np.exp(x).sum(1), rtol=1e-12)


@pytest.mark.parametrize("shape", [(40, 50), (3, 1000)])
def test_row_reductions_of_one_input(shape, tmp_path):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape)

    def f(ns, x):
        return ns.max(x, axis=1), ns.sum(x * x, axis=1), ns.min(ns.abs(x), axis=1)
    got = sprue.qjit(lambda x: f(snp, x), keep_intermediate=str(tmp_path))(x)
    for g, w in zip(got, f(np, x)):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    # three row reductions, one pass over x
    assert len(_reductions(_bufferized(tmp_path))) == 1


def test_a_reduction_reading_a_merged_producers_result_stays_apart(tmp_path):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((40, 50))

    def f(ns, x):      # e written with its row max (fusion.py); the sum then reads e back
        e = ns.tanh(x) * 3.0
        return e, ns.max(e, axis=1), ns.sum(e * e, axis=1)
    got = sprue.qjit(lambda x: f(snp, x), keep_intermediate=str(tmp_path))(x)
    for g, w in zip(got, f(np, x)):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    assert len(_reductions(_bufferized(tmp_path))) == 2


def test_a_producer_read_reversed_stays_out_of_the_merged_sums():
    # NDCG (held-out batch E's e_rank_ndcg): both sums read the discounts, so they merge; the ideal
    # one's producer reads sort(rel) reversed. Inlining it left the merged generic one input read
    # through (d0) -> (-d0 + 7) and reduced outputs, whose loop extents linalg cannot derive
    # ("invalid indexing maps are non-invertible"); it stays a producer of its own
    rng = np.random.default_rng(7)
    rel, scores = rng.uniform(0, 3, 8).astype(np.float32), rng.standard_normal(8).astype(np.float32)

    def ndcg(ns, rel, scores):
        disc = 1.0 / ns.log2(ns.arange(2.0, 10.0))
        dcg = ns.sum((2.0 ** rel[ns.argsort(-scores)] - 1.0) * disc)
        return dcg / ns.sum((2.0 ** ns.sort(rel)[::-1] - 1.0) * disc)
    got = sprue.qjit(lambda r, s: ndcg(snp, r, s))(rel, scores)
    np.testing.assert_allclose(got, ndcg(np, rel.astype(np.float64), scores), rtol=1e-5)
