"""Functions with many results (lowering/entry_results.py) and modules with huge blocks
(backend.py's SCHEDULE_MAX_BLOCK): results stay numpy's, the entry function stores them one by
one (each descriptor member by member) through its C interface's pointer (no struct of all results, whose text grew as n^2), and a
module with a block longer than SCHEDULE_MAX_BLOCK is emitted without instruction scheduling,
the options restored after."""
import re

import numpy as np

import sprue
import sprue.numpy as jnp
from sprue.lowering import backend
from tests.helpers.arrays import tanh_net_grads


def _stage(tmp_path, suffix):
    return next(tmp_path.glob(f"*{suffix}")).read_text()


def test_results_of_every_rank_and_dtype_are_stored_one_by_one(tmp_path):
    def program(x, n):
        return (x * 2.0, jnp.sum(x), x[0].astype(jnp.int32), n + 1, x > 0.5,
                jnp.reshape(x, (2, 3, 2)), jnp.float32(3.5) * x[:, 0].astype(jnp.float32))

    def reference(x, n):
        return (x * 2.0, np.sum(x), x[0].astype(np.int32), n + 1, x > 0.5,
                np.reshape(x, (2, 3, 2)), np.float32(3.5) * x[:, 0].astype(np.float32))

    rng = np.random.default_rng(0)
    x = rng.random((4, 3))
    f = sprue.qjit(program, keep_intermediate=str(tmp_path))
    got, want = f(x, 7), reference(x, 7)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert np.asarray(g).dtype == np.asarray(w).dtype and np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-6)
    text = _stage(tmp_path, ".05_llvm.mlir")
    signature = re.search(r"llvm\.func @_mlir_ciface_main\(([^\n]*)\{", text).group(1)
    assert "->" not in signature.split(")")[-1], signature      # returns nothing
    assert not re.search(r"llvm\.insertvalue [^\n]*!llvm\.struct<\(struct<", text)   # no struct of results
    # ... and each result's descriptor member by member (no aggregate store, which LLVM's O0
    # instruction selector, the glue's, is slow at): its two pointers among them
    entry = re.search(r"llvm\.func @_mlir_ciface_main\(.*?\n  \}", text, re.S).group(0)
    assert not re.search(r"llvm\.store [^\n]*: !llvm\.struct", entry)
    assert len(re.findall(r"llvm\.store %\w+, %\w+ : !llvm\.ptr, !llvm\.ptr", entry)) == 2 * len(want)


def test_hundreds_of_results(tmp_path):
    """400 results: their stores make one block of ~2,800 instructions in the C wrapper, which
    is then emitted unscheduled (below)."""
    def program(x):
        return [x * (i + 1) for i in range(400)]
    x = np.arange(4.0)
    got = sprue.qjit(program)(x)
    assert len(got) == 400
    for i, g in enumerate(got):
        np.testing.assert_array_equal(g, x * (i + 1))


_STORES = """
define void @many_stores(ptr %p) {
entry:
BODY  ret void
}
"""


def _codegen_options_seen(lines: int, monkeypatch, about: str = "sched") -> list[str]:
    seen: list[str] = []
    real = backend.llvm.set_option

    def spy(name, option):
        seen.append(option)
        real(name, option)
    monkeypatch.setattr(backend.llvm, "set_option", spy)
    body = "".join(f"  %q{i} = getelementptr i64, ptr %p, i64 {i}\n  store volatile i64 {i}, ptr %q{i}\n"
                   for i in range(lines // 2))
    backend.codegen(_STORES.replace("BODY", body))
    return [o for o in seen if about in o]


def test_a_module_with_a_huge_block_is_emitted_unscheduled_and_the_options_restored(monkeypatch):
    assert _codegen_options_seen(2 * backend.SCHEDULE_MAX_BLOCK, monkeypatch) == [
        "-enable-misched=false", "-post-RA-scheduler=false", "-enable-misched=true", "-post-RA-scheduler=true"]


def test_a_module_of_short_blocks_is_scheduled(monkeypatch):
    assert _codegen_options_seen(backend.SCHEDULE_MAX_BLOCK // 2, monkeypatch) == []


def test_dead_store_elimination_walks_less_in_a_module_with_a_long_block(monkeypatch):
    assert _codegen_options_seen(2 * backend.DSE_LONG_BLOCK, monkeypatch, "dse") == [
        f"-dse-memoryssa-walklimit={backend.DSE_WALK_LIMIT}", "-dse-memoryssa-walklimit=90"]
    assert _codegen_options_seen(backend.DSE_LONG_BLOCK // 2, monkeypatch, "dse") == []


def test_longest_block_counts_the_lines_between_labels():
    text = "define void @f() {\nentry:\n  a\n  b\nnext:\n  c\n}\ndefine void @g() {\n  d\n}\n"
    assert backend.longest_block(text) == 3      # entry: and its two lines
    assert backend.longest_block("") == 0


def test_parts_with_many_results_of_run_time_sizes_pass_them_through_memory(tmp_path):
    """A training step with a run-time batch, partitioned (partition.py): its forward parts return
    many activations (descriptors with run-time sizes: pointers and i64s) through a stack buffer
    of their caller, loaded right after each call (what each reader extracts: MLIR's canonicalizer
    folds an extract of a member's member into one extractvalue of both positions)."""
    def loss(ws, x):
        for w in ws:
            x = jnp.tanh(x @ w)
        return jnp.sum(x ** 2)

    rng = np.random.default_rng(7)
    ws = [rng.standard_normal((8, 8)) / 3 for _ in range(48)]
    f = sprue.qjit(sprue.grad(loss), abstracted_axes=(None, {0: "b"}), keep_intermediate=str(tmp_path))
    for rows in (5, 12):
        x = rng.standard_normal((rows, 8))
        for got, want in zip(f(ws, x), tanh_net_grads(ws, x), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    text = _stage(tmp_path, ".05_llvm.mlir")
    assert re.search(r"llvm\.alloca %\w+ x !llvm\.array<\d+ x i8> \{alignment = 16", text)
    # each descriptor's members read back one by one (pointers and i64 sizes), none as a struct
    assert re.search(r"llvm\.load %\w+ : !llvm\.ptr -> !llvm\.ptr", text)
    assert not re.search(r"llvm\.load [^\n]*-> !llvm\.struct", text)
    assert not re.search(r"llvm\.insertvalue [^\n]*!llvm\.struct<\((?:struct<[^>]*>\)>, ){8}", text)
