"""Long chains of elementwise ops fused at once (lowering/chain_fusion.py): results stay numpy's
(broadcast operands, mixed ops, run-time sizes, an input read twice), and the chain is one loop
nest reading each input once."""
import re

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.lowering import chain_fusion, partition, pipeline
from sprue.lowering.chain_fusion import MIN_CHAIN


def _generics(tmp_path) -> list[str]:
    text = next(tmp_path.glob("*.02_linalg.mlir")).read_text()
    return re.findall(r"linalg\.generic \{indexing_maps = \[([^\]]*)\]", text)


def _counting(monkeypatch) -> list[int]:
    """The number of trees fuse_long_chains fuses, per call, as the pipeline runs it. (A chain
    repeats one op: partition.py would cut it into parts first; not here.)"""
    monkeypatch.setattr(partition, "PERIODIC_MIN_OPS", 10 ** 6)
    counts: list[int] = []

    def spy(module):
        counts.append(chain_fusion.fuse_long_chains(module))
    monkeypatch.setitem(pipeline.FINISH, "linalg", tuple(
        spy if r is chain_fusion.fuse_long_chains else r for r in pipeline.FINISH["linalg"]))
    return counts


def test_a_sum_of_many_arguments_is_one_loop_nest(tmp_path, monkeypatch):
    counts = _counting(monkeypatch)
    n = 3 * MIN_CHAIN
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((5, 7)) for _ in range(n)]
    f = sprue.qjit(lambda *xs: sum(xs[1:], xs[0]), keep_intermediate=str(tmp_path))
    np.testing.assert_allclose(f(*xs), sum(xs[1:], xs[0]), rtol=1e-12)
    generics = _generics(tmp_path)
    assert len(generics) == 1 and generics[0].count("#map") == n + 1, generics
    assert counts == [1]         # fused here at once, not pair by pair by MLIR's pass


def test_a_short_chain_is_left_to_mlir(tmp_path, monkeypatch):
    counts = _counting(monkeypatch)
    xs = [np.full((3,), float(i)) for i in range(MIN_CHAIN - 2)]
    f = sprue.qjit(lambda *xs: sum(xs[1:], xs[0]), keep_intermediate=str(tmp_path))
    np.testing.assert_allclose(f(*xs), sum(xs[1:], xs[0]))
    assert counts == [0] and len(_generics(tmp_path)) == 1


@pytest.mark.parametrize("rows", [3, 11])
def test_a_long_chain_with_broadcasts_mixed_ops_and_run_time_sizes(rows, tmp_path, monkeypatch):
    counts = _counting(monkeypatch)
    steps = 2 * MIN_CHAIN

    def chain(ns, x, a, b):
        for i in range(steps):        # x read once per step: one tree of single-use producers
            if i % 3 == 0:
                x = x * a[i % a.shape[0]] + b          # a row of a broadcast along the rows, b a row
            elif i % 3 == 1:
                x = ns.tanh(x) * 0.9 - 0.25
            else:
                x = ns.maximum(x, -1.0) / (1.0 + b * b)
        return x

    rng = np.random.default_rng(rows)
    x, a, b = rng.standard_normal((rows, 6)), rng.standard_normal((4, 6)) * 0.5, rng.standard_normal(6)
    f = sprue.qjit(lambda x, a, b: chain(jnp, x, a, b), abstracted_axes=({0: "n"}, None, None),
                   keep_intermediate=str(tmp_path))
    np.testing.assert_allclose(f(x, a, b), chain(np, x, a, b), rtol=1e-11, atol=1e-12)
    x2 = rng.standard_normal((rows + 5, 6))
    np.testing.assert_allclose(f(x2, a, b), chain(np, x2, a, b), rtol=1e-11, atol=1e-12)
    generics = _generics(tmp_path)
    # the chain, b * b with it: fusion's second run (pipeline.LINALG_FUSION) finds it read by the
    # one generic the chain became, and computes it there (a multiply per element, no buffer)
    assert counts == [1] and len(generics) == 1, (counts, generics)
