"""Big functions are split into a function per outermost loop nest, equal nests sharing one
(lowering/outline.py): results stay numpy's, the nests become noinline calls, repeated layers
compile once, and small functions keep their nests inline."""
import re

import numpy as np
import pytest
from torch_mlir import ir

import sprue
import sprue.numpy as jnp
from sprue import lax
from sprue.lowering import outline, partition, pipeline
from sprue.lowering.mlir_util import as_operation
from sprue.lowering.outline import OUTLINE_MIN_NESTS
from tests.helpers.arrays import tanh_net_grads


def _net(x, ws):
    for w in ws:
        x = jnp.tanh(x @ w)
    return x


def _ref(x, ws):
    for w in ws:
        x = np.tanh(x @ w)
    return x


def _stage(tmp_path, suffix):
    return next(tmp_path.glob(f"*{suffix}")).read_text()


def test_a_deep_network_calls_one_function_per_kind_of_nest(tmp_path, monkeypatch):
    monkeypatch.setattr(partition, "PERIODIC_MIN_OPS", 10 ** 6)   # one function, not parts of it
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal((16, 16)) * 0.3 for _ in range(40)]
    x = rng.standard_normal((16, 16))
    f = sprue.qjit(_net, keep_intermediate=str(tmp_path))
    np.testing.assert_allclose(f(x, ws), _ref(x, ws), rtol=1e-10, atol=1e-12)
    text = _stage(tmp_path, ".05_llvm.mlir")
    defined = re.findall(r"llvm\.func (?:\w+ )*@(__sprue_nest_\d+)\(", text)
    calls = re.findall(r"llvm\.call @(__sprue_nest_\d+)\(", text)
    # 40 layers of a product and a tanh (and the fills and copies around them): a few kinds of
    # nest, each defined once, called once per layer
    assert len(calls) >= 80 and 2 <= len(defined) <= 6, (len(calls), defined)
    assert set(calls) == set(defined)
    # internal, or hidden under a name of this program's own where the glue's module calls them
    # (module_split.py): not exported, and two kernels linked into one program must not clash;
    # noinline
    opt = _stage(tmp_path, ".opt.ll").split("; -- the glue's module")[0]   # the kernels' module
    definitions = re.findall(r"^define (.*)@__sprue_nest_\d+(\.[0-9a-f]{12})?\(.*\) .*#(\d+) \{", opt, re.MULTILINE)
    assert definitions and all(d[0].startswith("internal ") or d[0].startswith("hidden ") and d[1]
                               for d in definitions), definitions
    definitions = [(d[0], d[2]) for d in definitions]
    groups = dict(re.findall(r"^attributes #(\d+) = \{(.*)\}", opt, re.MULTILINE))
    assert all("noinline" in groups[d[1]] for d in definitions), groups
    # static buffers are passed as bare pointers, not as descriptors of 7 values
    params = [re.sub(r" \{[^}]*\}", "", p) for p in re.findall(r"llvm\.func (?:\w+ )*@__sprue_nest_\d+\(([^)]*)\)", text)]
    assert params and all(p and set(re.findall(r": ([^,]+)", p)) == {"!llvm.ptr"} for p in params), params
    # the buffers each nest writes, fresh allocations, are noalias: LLVM's vectorizer checks no
    # overlap at run time (mark_unaliased_buffers)
    assert "llvm.noalias" in text and "vector.memcheck" not in opt


def test_a_nest_over_buffers_of_run_time_size_gets_their_descriptors(tmp_path, monkeypatch):
    """A dynamic buffer's sizes and strides come with it (no bare pointer). (30 layers, not
    partitioned on tensors here: partition.py's thresholds raised.)"""
    monkeypatch.setattr(partition, "PERIODIC_MIN_OPS", 10 ** 6)
    rng = np.random.default_rng(2)
    ws = [rng.standard_normal((16, 16)) * 0.3 for _ in range(30)]
    x = rng.standard_normal((5, 16))
    f = sprue.qjit(_net, keep_intermediate=str(tmp_path), abstracted_axes=({0: "n"}, None))
    np.testing.assert_allclose(f(x, ws), _ref(x, ws), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(f(x[:3], ws), _ref(x[:3], ws), rtol=1e-10, atol=1e-12)
    text = _stage(tmp_path, ".05_llvm.mlir")
    params = re.findall(r"llvm\.func (?:\w+ )*@__sprue_nest_\d+\(([^)]*)\)", text)
    assert any(": i64" in p for p in params), params


def test_a_small_function_keeps_its_nests_inline(tmp_path):
    rng = np.random.default_rng(1)
    ws = [rng.standard_normal((8, 8)) for _ in range(3)]
    x = rng.standard_normal((8, 8))
    f = sprue.qjit(_net, keep_intermediate=str(tmp_path))
    np.testing.assert_allclose(f(x, ws), _ref(x, ws), rtol=1e-10, atol=1e-12)
    assert 3 * 3 < OUTLINE_MIN_NESTS
    assert "__sprue_nest_" not in _stage(tmp_path, ".05_llvm.mlir")


@pytest.mark.parametrize("n", [5, 33])
def test_outlined_nests_with_run_time_sizes_carried_values_and_different_shapes(n, tmp_path, monkeypatch):
    # run-time sizes passed to the nests, loops whose results are used after them (a fori_loop's
    # carry, reductions), and layers of two shapes that must not share a function (14 layers, not
    # partitioned on tensors here: partition.py's thresholds raised)
    monkeypatch.setattr(partition, "PERIODIC_MIN_OPS", 10 ** 6)
    def program(x, a, b):
        total = 0.0
        for i in range(14):
            y = jnp.tanh(x * (i + 1.0)) @ a
            z = jnp.cumsum(y, axis=1) @ b
            total = total + lax.fori_loop(0, 3, lambda j, s: s + jnp.sum(z) * 0.5, 0.0)
            x = x + 0.01 * z.sum()
        return x, total

    def reference(x, a, b):
        total = 0.0
        for i in range(14):
            y = np.tanh(x * (i + 1.0)) @ a
            z = np.cumsum(y, axis=1) @ b
            total = total + 3 * (np.sum(z) * 0.5)
            x = x + 0.01 * z.sum()
        return x, total

    rng = np.random.default_rng(n)
    a, b = rng.standard_normal((6, 9)) * 0.2, rng.standard_normal((9, 6)) * 0.2
    f = sprue.qjit(program, abstracted_axes=({0: "n"}, None, None), keep_intermediate=str(tmp_path))
    for rows in (n, n + 4):
        xr = rng.standard_normal((rows, 6))
        got, want = f(xr, a, b), reference(xr, a, b)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-9, atol=1e-9)
    assert "llvm.call @__sprue_nest_" in _stage(tmp_path, ".05_llvm.mlir")


def _training_step(ws, x):
    return jnp.sum(_net(x, ws) ** 2)


def test_a_long_gradient_tape_runs_as_a_chain_of_shared_functions(tmp_path, monkeypatch):
    """A gradient through 40 layers, not partitioned on tensors (here: partition.py's thresholds
    raised), leaves ~640 calls, allocations and frees in one block once its nests are functions:
    it is cut into runs of about SPLIT_OPS ops, each a function the entry calls."""
    monkeypatch.setattr(partition, "PARTITION_MIN_OPS", 10 ** 6)
    monkeypatch.setattr(partition, "PERIODIC_MIN_OPS", 10 ** 6)
    rng = np.random.default_rng(3)
    ws = [rng.standard_normal((16, 16)) / 4.0 for _ in range(40)]
    x = rng.standard_normal((16, 16))
    f = sprue.qjit(sprue.grad(_training_step), keep_intermediate=str(tmp_path))
    got = f(ws, x)
    for g, want in zip(got, tanh_net_grads(ws, x), strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-9, atol=1e-12)
    text = _stage(tmp_path, ".05_llvm.mlir")
    defined = set(re.findall(r"llvm\.func (?:\w+ )*@(__sprue_run_\d+)\(", text))
    calls = re.findall(r"llvm\.call @(__sprue_run_\d+)\(", text)
    assert set(calls) == defined and len(calls) >= 3, (calls, defined)
    main = text[text.index("llvm.func @_mlir_ciface_main("):]
    main = main[:main.index("\n  }\n")]
    # every call, allocation and free is in a run: the entry only unpacks arguments, calls the
    # runs and stores results
    assert re.findall(r"llvm\.call @(\w+)\(", main) == calls, re.findall(r"llvm\.call @(\w+)\(", main)


def test_a_run_returning_a_view_of_a_constant(tmp_path, monkeypatch):
    """A run (split_long_bodies) that reshapes a constant for a product the next run computes: the
    view is copied into the runs that read it, not returned. Returned as a bare pointer, it was the
    constant's allocated pointer, MLIR's dead 0xdeadbeef for a global, and the next run crashed
    reading it (the gradient of sprue.scipy.linalg.expm)."""
    from sprue.lowering import outline
    monkeypatch.setattr(partition, "PARTITION_MIN_OPS", 10 ** 6)
    monkeypatch.setattr(partition, "PERIODIC_MIN_OPS", 10 ** 6)
    monkeypatch.setattr(outline, "SPLIT_MIN_OPS", 16)   # a short body is cut into runs of ~8 ops
    monkeypatch.setattr(outline, "SPLIT_OPS", 8)
    a = np.random.default_rng(0).standard_normal((4, 4))

    def power_series(np_, t):
        m = t * a
        r = m
        for _ in range(6):
            r = r @ m + m
        return np_.sum(r)
    f = sprue.qjit(sprue.grad(lambda t: power_series(jnp, t)), keep_intermediate=str(tmp_path))
    eps = 1e-6
    want = (power_series(np, 0.3 + eps) - power_series(np, 0.3 - eps)) / (2 * eps)
    np.testing.assert_allclose(f(0.3), want, rtol=1e-7)
    assert len(set(re.findall(r"llvm\.call @(__sprue_run_\d+)\(", _stage(tmp_path, ".05_llvm.mlir")))) >= 2


def test_the_nests_of_every_part_are_functions_shared_across_parts(tmp_path):
    """A training step through 30 layers is cut into parts of fewer than OUTLINE_MIN_NESTS nests
    each; their nests are outlined all the same, and the parts' equal nests are one function."""
    rng = np.random.default_rng(5)
    ws = [rng.standard_normal((16, 16)) / 4.0 for _ in range(30)]
    x = rng.standard_normal((16, 16))
    f = sprue.qjit(sprue.grad(_training_step), keep_intermediate=str(tmp_path))
    for got, want in zip(f(ws, x), tanh_net_grads(ws, x)):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    text = _stage(tmp_path, ".05_llvm.mlir")
    parts = re.findall(r"llvm\.func (?:\w+ )*@(__sprue_(?:hlo_)?part_\d+)\(", text)
    assert parts
    for name in parts:
        body = text[re.search(rf"llvm\.func (?:\w+ )*@{name}\(", text).start():]
        body = body[:body.index("\n  }\n")]
        assert "llvm.call @__sprue_nest_" in body, name
    defined = re.findall(r"llvm\.func (?:\w+ )*@(__sprue_nest_\d+)\(", text)
    calls = re.findall(r"llvm\.call @(__sprue_nest_\d+)\(", text)
    assert set(calls) == set(defined) and len(calls) > 2 * len(defined), (len(calls), len(defined))


_ALIASING = """
func.func private @nest(%a: memref<8xf64>, %b: memref<8xf64>) attributes {llvm.no_inline} {
  return
}
func.func @views_of_one_allocation() {
  %0 = memref.alloc() : memref<16xf64>
  %1 = memref.subview %0[0] [8] [1] : memref<16xf64> to memref<8xf64, strided<[1]>>
  %2 = memref.cast %1 : memref<8xf64, strided<[1]>> to memref<8xf64>
  %3 = memref.subview %0[4] [8] [1] : memref<16xf64> to memref<8xf64, strided<[1], offset: 4>>
  %4 = memref.reinterpret_cast %3 to offset: [0], sizes: [8], strides: [1] : memref<8xf64, strided<[1], offset: 4>> to memref<8xf64>
  call @nest(%2, %4) : (memref<8xf64>, memref<8xf64>) -> ()
  return
}
func.func private @nest2(%a: memref<8xf64>, %b: memref<8xf64>) attributes {llvm.no_inline} {
  return
}
func.func @fresh_beside_an_argument(%arg: memref<8xf64>) {
  %0 = memref.alloc() : memref<8xf64>
  call @nest2(%0, %arg) : (memref<8xf64>, memref<8xf64>) -> ()
  return
}
func.func private @nest3(%a: memref<8xf64>, %b: memref<8xf64>) attributes {llvm.no_inline} {
  return
}
func.func @fresh_beside_a_carried_buffer() {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %0 = memref.alloc() : memref<8xf64>
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%b = %0) -> (memref<8xf64>) {
    func.call @nest3(%0, %b) : (memref<8xf64>, memref<8xf64>) -> ()
    scf.yield %b : memref<8xf64>
  }
  return
}
func.func private @nest4(%a: memref<8xf64>, %b: memref<8xf64>) attributes {llvm.no_inline} {
  return
}
func.func @two_callers_one_of_them_unsure(%arg: memref<8xf64>) {
  %0 = memref.alloc() : memref<8xf64>
  %1 = memref.alloc() : memref<8xf64>
  call @nest4(%0, %1) : (memref<8xf64>, memref<8xf64>) -> ()
  call @nest4(%0, %0) : (memref<8xf64>, memref<8xf64>) -> ()
  return
}
"""


def test_noalias_only_where_no_other_buffer_of_any_call_can_reach_it():
    """outline.mark_unaliased_buffers: a buffer parameter is noalias when, at every call, it views a
    fresh allocation that no other buffer passed can reach (another allocation, the caller's own
    argument); not for two views of one allocation, nor beside a loop-carried buffer (which may be
    that allocation), nor when one call of the function passes the same buffer twice."""
    from torch_mlir import ir

    from sprue.lowering import dialects
    from sprue.lowering.outline import mark_unaliased_buffers
    dialects.load()
    with dialects.new_context():
        module = ir.Module.parse(_ALIASING)
        mark_unaliased_buffers(module, {"nest", "nest2", "nest3", "nest4"})
        text = str(module)
    marks = {name: re.findall(r"llvm\.noalias", args) for name, args in
             re.findall(r"func\.func private @(nest\d?)\(([^)]*)\)", text)}
    assert marks == {"nest": [], "nest2": ["llvm.noalias"], "nest3": [], "nest4": []}, text
    assert re.search(r"@nest2\(%arg0: memref<8xf64> \{llvm\.noalias\}, %arg1: memref<8xf64>\)", text), text


def _escaping(run) -> int:
    """How many values the ops of `run` define that an op outside it reads."""
    inside = set()
    for op in run:
        op.walk(lambda o: inside.add(o) or ir.WalkResult.ADVANCE)
    return sum(any(as_operation(u.owner) not in inside for u in r.uses) for op in run for r in op.results)


def test_a_run_returns_at_most_run_max_results_values(monkeypatch):
    """Runs of a long body end early where more values than RUN_MAX_RESULTS would be read after
    them (each run returns those; as one struct their LLVM IR was O(n^2)): 600 values made first
    and read at the end, cut with a bound of 20."""
    monkeypatch.setattr(outline, "RUN_MAX_RESULTS", 20)
    made = "\n".join(f"  %v{i} = arith.addf %x, %c{i % 7} : f64" for i in range(600))
    consts = "\n".join(f"  %c{i} = arith.constant {i}.5 : f64" for i in range(7))
    total = "\n".join(f"  %s{i} = arith.addf %s{i - 1}, %v{i} : f64" for i in range(1, 600))
    text = f"func.func @f(%x: f64) -> f64 {{\n{consts}\n{made}\n  %s0 = arith.addf %v0, %x : f64\n{total}\n  return %s599 : f64\n}}"
    ctx = pipeline.make_pipeline_context()
    with ctx, ir.Location.unknown():
        module = pipeline.parse_module(ctx, text)
        body = [as_operation(op) for op in module.body.operations[0].regions[0].blocks[0].operations][:-1]
        work = [op for op in body if op.name != "arith.constant"]
        runs = outline._long_body_runs(work)
        assert [op for run in runs for op in run] == work
        counts = [_escaping(run) for run in runs]
        assert max(counts) <= 20, counts
        assert max(counts) >= 10, counts   # (cut where the bound is reached, not at every op)


def test_a_long_tape_cut_by_its_runs_results_matches_numpy(tmp_path, monkeypatch):
    """The same cut end to end: 40 layers' gradient with runs of at most 8 results (the forward
    pass's activations read by the backward pass)."""
    monkeypatch.setattr(partition, "PARTITION_MIN_OPS", 10 ** 6)
    monkeypatch.setattr(partition, "PERIODIC_MIN_OPS", 10 ** 6)
    monkeypatch.setattr(outline, "RUN_MAX_RESULTS", 8)
    rng = np.random.default_rng(5)
    ws = [rng.standard_normal((16, 16)) / 4.0 for _ in range(40)]
    x = rng.standard_normal((16, 16))
    got = sprue.qjit(sprue.grad(_training_step), keep_intermediate=str(tmp_path))(ws, x)
    for g, want in zip(got, tanh_net_grads(ws, x), strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-9, atol=1e-12)
    runs = set(re.findall(r"llvm\.call @(__sprue_run_\d+)\(", _stage(tmp_path, ".05_llvm.mlir")))
    assert len(runs) >= 6, runs
