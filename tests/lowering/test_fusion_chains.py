"""lowering/fusion.py's merge_elementwise_chains: elementwise ops over one iteration space that read
each other's results become one generic with several results (one pass over memory), checked on the
bufferized IR the pipeline keeps and on compiled results against numpy."""
import re

import numpy as np
import pytest

import sprue
import sprue.lax
import sprue.numpy as snp
from tests.helpers.scan_programs import ema_crossover, ema_crossover_numpy


def _stage(tmp_path, name: str) -> str:
    (path,) = tmp_path.glob(f"*_{name}.mlir")
    return path.read_text()


def _mandel_numpy(cr, ci, trips):
    zr = zi = cnt = np.zeros_like(cr)
    for _ in range(trips):
        zr2 = zr * zr - zi * zi + cr
        zi2 = 2 * zr * zi + ci
        inside = zr2 * zr2 + zi2 * zi2 < 4.0
        zr, zi, cnt = np.where(inside, zr2, zr), np.where(inside, zi2, zi), cnt + np.where(inside, 1.0, 0.0)
    return cnt


def test_loop_body_with_shared_values_is_one_generic_writing_the_carries(tmp_path):
    cr, ci = np.meshgrid(np.linspace(-2, 1, 23), np.linspace(-1.5, 1.5, 17))

    def f(cr, ci):
        def body(i, s):
            zr, zi, cnt = s
            zr2 = zr * zr - zi * zi + cr
            zi2 = 2 * zr * zi + ci
            inside = zr2 * zr2 + zi2 * zi2 < 4.0
            return snp.where(inside, zr2, zr), snp.where(inside, zi2, zi), cnt + snp.where(inside, 1.0, 0.0)
        z = snp.zeros_like(cr)
        return sprue.lax.fori_loop(0, 20, body, (z, z, z))[2]
    got = sprue.qjit(f, keep_intermediate=str(tmp_path))(cr, ci)
    np.testing.assert_array_equal(got, _mandel_numpy(cr, ci, 20))
    buf = _stage(tmp_path, "bufferized")
    body = buf[buf.index("scf.for"):]
    # zr2, zi2 and the mask are read by several ops each: without the merge, six generics and two
    # temporaries plus an i1 mask buffer per trip; merged, one generic yielding the three carries
    assert body.count("linalg.generic") == 1, buf
    assert not re.search(r"memref<17x23xi1>", buf), buf
    # where(inside, 1.0, 0.0) reads the splat of 0.0 (zeros_like, shared with the carries' start) as
    # a scalar: one trip loads zr, zi, cr, ci and cnt, nothing else
    loops = _stage(tmp_path, "loops")
    assert loops[loops.index("scf.for %arg2 = %c0 to %1"):].count("memref.load") == 5, loops


def test_reader_between_producer_and_consumer_blocks_the_merge(tmp_path):
    x = np.random.default_rng(3).standard_normal((12, 9))

    def f(x):
        p = x * x + 1.0
        r = snp.sum(p, axis=0)           # a reader of p placed before the consumer below
        q = snp.sqrt(p) - x
        return q * p, r
    got_q, got_r = sprue.qjit(f, keep_intermediate=str(tmp_path))(x)
    p = x * x + 1.0
    np.testing.assert_allclose(got_q, (np.sqrt(p) - x) * p, rtol=1e-13)
    np.testing.assert_allclose(got_r, p.sum(0), rtol=1e-13)


def test_siblings_with_broadcast_operands_and_dynamic_sizes(tmp_path):
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((7, 11)), rng.standard_normal(11)

    def f(a, b):
        s = a * b + 0.5                  # read by three consumers
        return snp.where(s > 0, s, a), s * s - b, snp.tanh(s)
    s = a * b + 0.5
    want = [np.where(s > 0, s, a), s * s - b, np.tanh(s)]
    for fn in (sprue.qjit(f, keep_intermediate=str(tmp_path)),
               sprue.qjit(f, abstracted_axes=({0: "n", 1: "m"}, {0: "m"}))):
        for got, ref in zip(fn(a, b), want):
            np.testing.assert_allclose(got, ref, rtol=1e-13)
    # s is computed in the pass writing the three results, never stored
    assert _stage(tmp_path, "bufferized").count("linalg.generic") == 1


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_scan_row_merges_with_the_carries_it_reads(tmp_path, dynamic):
    # two EMAs and their crossover signal: the row the scan stacks is computed over (1, k) from
    # the carries' expansions (unit_dims.py); rewritten over (k), the carries' updates and the row
    # are one generic, the row written in place into the stacked output
    xs, s0 = np.random.default_rng(5).standard_normal((300, 24)), np.zeros(24)
    kw = {"abstracted_axes": ({0: "t", 1: "k"}, {0: "k"})} if dynamic else {}
    signal, fast, slow = sprue.qjit(ema_crossover, keep_intermediate=str(tmp_path), **kw)(xs, s0)
    want_rows, want_f, want_s = ema_crossover_numpy(xs, s0)
    np.testing.assert_allclose(fast, want_f, rtol=1e-12)
    np.testing.assert_allclose(slow, want_s, rtol=1e-12)
    np.testing.assert_allclose(signal, want_rows, rtol=1e-12, atol=1e-15)
    bufferized = _stage(tmp_path, "bufferized")
    assert bufferized.count("linalg.generic") == 1, bufferized
    assert "memref.copy %alloc" not in bufferized.split("scf.for")[1]   # no row copied into place


def test_a_consumer_reading_the_producer_transposed_is_not_merged_with_it():
    """`b + b.T` with b elementwise (and read elsewhere too, so merge_elementwise_chains would keep
    it as a second result): merged, the transposed read took b at its own indices (silently wrong
    gradients of symmetrized inputs, as linalg.eigh's)."""
    a = np.random.default_rng(5).standard_normal((4, 4))
    i, j = np.arange(4)[:, None], np.arange(4)[None, :]

    def f(xp, x):
        v = x * 2.0
        b = xp.where(i >= j, v + xp.where(i > j, v.T, 0.0), 0.0) * 0.5
        return b + b.T
    np.testing.assert_allclose(sprue.qjit(lambda x: f(snp, x))(a), f(np, a), rtol=1e-15)
