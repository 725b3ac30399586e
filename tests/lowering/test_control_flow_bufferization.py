"""Loop-carried arrays are updated in place: the bufferized IR of a loop body allocates and copies
nothing (for_loop, while, scan outputs, cond and switch inside loops), and callers' arrays are never
written. Timing belongs to benchmarks/, not here."""

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from tests.helpers.bufferization import buffer_ops_in_loops, compile_and_read


def test_at_set_on_a_large_carried_array_is_in_place(tmp_path):
    def f(x, n):
        return lax.fori_loop(0, n, lambda i, c: c.at[i].set(c[i] * 2.0 + 1.0), x)
    x = np.linspace(0.0, 1.0, 100_000)
    original = x.copy()
    out, text = compile_and_read(f, (x, np.int64(50_000)), tmp_path)
    want = x.copy()
    want[:50_000] = want[:50_000] * 2.0 + 1.0
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(x, original)        # the argument itself was copied once, not written
    assert "scf.for" in text                          # a counted loop (see the next test)
    assert buffer_ops_in_loops(text) == []


def test_counted_loops_become_scf_for_and_while_loops_scf_while(tmp_path):
    def f(x, n):
        y = lax.fori_loop(0, n, lambda i, c: c * 2.0, x)
        _, ys = lax.scan(lambda c, v: (c + v, c), 0.0, y)
        return lax.while_loop(lambda c: c[0] < 100.0, lambda c: c + 1.0, ys)
    compiled = sprue.qjit(f, keep_intermediate=tmp_path)
    compiled(np.ones(3), np.int64(2))
    assert compiled.mlir.count("sprue.counted_loop") == 2
    (legalized,) = tmp_path.glob("*.01_legalized.mlir")
    text = legalized.read_text()
    assert text.count("scf.for") == 2 and text.count("scf.while") == 1 and "stablehlo.while" not in text


def test_logistic_map_updates_its_vector_in_place(tmp_path):
    def f(x, r, n):
        return lax.fori_loop(0, n, lambda i, x: r * x * (1.0 - x), x)
    x = np.random.default_rng(0).random(10_000)
    out, text = compile_and_read(f, (x, 3.7, np.int64(100)), tmp_path)
    want = x.copy()
    for _ in range(100):
        want = 3.7 * want * (1.0 - want)
    np.testing.assert_allclose(out, want, rtol=1e-9)
    assert buffer_ops_in_loops(text) == []


def _cond_ref(x, n):
    c = x.copy()
    for _ in range(n):
        c = c * 0.5 if c[0] > 0.5 else c + 0.3
    return c


def _switch_ref(x, n):
    c = x.copy()
    for i in range(n):
        c = [c + 1.0, c * 2.0, c - 3.0][i % 3]
    return c


def _scan_rows_ref(xs):
    c, ys = np.zeros(xs.shape[1]), []
    for r in xs:
        ys.append(c * 2.0)
        c = c + r
    return c, np.stack(ys)


def _nested_ref(x, n):
    c = x.copy()
    for i in range(n):
        c[:i] += 1.0
    return c


X = np.random.default_rng(1).random(64) + 0.5
CASES = {
    "newton": (lambda a: lax.while_loop(lambda c: jnp.max(jnp.abs(c * c - a)) > 1e-12,
                                        lambda c: 0.5 * (c + a / c), a), (X,), np.sqrt),
    "cond": (lambda x, n: lax.fori_loop(0, n, lambda i, c: lax.cond(c[0] > 0.5, lambda: c * 0.5, lambda: c + 0.3), x),
             (X, 9), _cond_ref),
    "switch": (lambda x, n: lax.fori_loop(np.int64(0), n, lambda i, c: lax.switch(
        i % 3, [lambda: c + 1.0, lambda: c * 2.0, lambda: c - 3.0]), x), (X, 9), _switch_ref),
    "scan_rows": (lambda xs: lax.scan(lambda c, r: (c + r, c * 2.0), jnp.zeros(8), xs), (X.reshape(8, 8),),
                  _scan_rows_ref),
    "nested_at_add": (lambda x, n: lax.fori_loop(0, n, lambda i, c: lax.fori_loop(
        0, i, lambda j, d: d.at[j].add(1.0), c), x), (X, 10), _nested_ref),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_loops_with_array_carries_do_not_copy_them(case, tmp_path):
    fn, args, reference = CASES[case]
    args = tuple(np.int64(a) if isinstance(a, int) else a for a in args)
    out, text = compile_and_read(fn, args, tmp_path)
    for o, w in zip(sprue.tree_flatten(out)[0], sprue.tree_flatten(reference(*args))[0]):
        np.testing.assert_allclose(o, w, rtol=1e-12)
    # scalars (the trip counter, a predicate) may still move between buffers; arrays never do
    assert [op for op in buffer_ops_in_loops(text) if op[1] > 1] == []


def test_scan_stacks_outputs_into_one_preallocated_buffer(tmp_path):
    def f(xs):
        return lax.scan(lambda c, x: (c + x, c * x), 0.0, xs)
    xs = np.linspace(1.0, 2.0, 1000)
    (total, ys), text = compile_and_read(f, (xs,), tmp_path)
    c, want = 0.0, []
    for v in xs:
        want.append(c * v)
        c = c + v
    np.testing.assert_allclose(total, c)
    np.testing.assert_allclose(ys, want)
    # each trip writes one element of ys: no allocation, no copy of the 1000-element buffer
    in_loops = buffer_ops_in_loops(text)
    assert [op for op in in_loops if op[0] != "memref.copy" or op[1] > 1] == []


@pytest.mark.parametrize("dynamic", [False, True])
def test_scan_outputs_are_not_filled_before_the_loop_writes_them(tmp_path, dynamic):
    # every row of a scan's stacked output is written by its trip: its zeros (StableHLO's, as
    # JAX's) are never stored (legalize.OVERWRITTEN), in static and run-time shapes alike
    def f(xs, s0):
        def step(c, x):
            c = 0.9 * c + 0.1 * x
            return c, c * 2.0
        return lax.scan(step, s0, xs)
    xs, s0 = np.random.default_rng(7).standard_normal((50, 6)), np.ones(6)
    kw = {"abstracted_axes": ({0: "t", 1: "k"}, {0: "k"})} if dynamic else {}
    c, ys = sprue.qjit(f, keep_intermediate=str(tmp_path), **kw)(xs, s0)
    want_c, want_ys = s0.copy(), []
    for x in xs:
        want_c = 0.9 * want_c + 0.1 * x
        want_ys.append(want_c * 2.0)
    np.testing.assert_allclose(c, want_c, rtol=1e-12)
    np.testing.assert_allclose(ys, np.array(want_ys), rtol=1e-12)
    stablehlo = next(tmp_path.glob("*.00_stablehlo.mlir")).read_text()
    assert "sprue.overwritten" in stablehlo          # still a broadcast there: portable StableHLO
    linalg = next(tmp_path.glob("*.02_linalg.mlir")).read_text()
    assert "linalg.fill" not in linalg and "linalg.yield %cst" not in linalg, linalg
