"""Big functions are split on tensors into parts of about PART_OPS ops, equal parts sharing one
function (lowering/partition.py): results stay numpy's (forward, gradients, run-time sizes), a
deep network's layers and a training step's fall into a few distinct parts, and small functions
and bodies that do not repeat stay whole."""
import re

import numpy as np

import sprue
import sprue.numpy as jnp
from sprue.lowering.partition import (
    PART_OPS,
    PARTITION_MIN_OPS,
    PERIODIC_MIN_OPS,
    PERIODIC_MIN_REPEATS,
    PERIODIC_PART_OPS,
)
from tests.helpers.arrays import tanh_net_grads


def _net(x, ws):
    for w in ws:
        x = jnp.tanh(x @ w)
    return x


def _forward(x, ws):
    """numpy's forward pass: every layer's output."""
    xs = [x]
    for w in ws:
        xs.append(np.tanh(xs[-1] @ w))
    return xs


def _parts(tmp_path):
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    defined = re.findall(r"func\.func private @(__sprue_(?:hlo_)?part_\d+)\(", text)
    calls = re.findall(r"call @(__sprue_(?:hlo_)?part_\d+)\(", text)
    return defined, calls


def _weights(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((16, 16)), [rng.standard_normal((16, 16)) * 0.3 for _ in range(n)]


def test_a_deep_network_runs_as_a_chain_of_a_few_shared_parts(tmp_path):
    x, ws = _weights(300)
    f = sprue.qjit(_net, keep_intermediate=str(tmp_path))
    np.testing.assert_allclose(f(x, ws), _forward(x, ws)[-1], rtol=1e-10, atol=1e-12)
    defined, calls = _parts(tmp_path)
    # 600 ops (a product and a tanh per layer) in parts of PART_OPS: each part is called, and the
    # equal ones (all but where the program starts and ends) are one function
    assert len(calls) >= 600 // PART_OPS and set(calls) == set(defined), (calls, defined)
    assert len(defined) <= 3, defined


def test_a_gradient_through_a_deep_network_runs_as_shared_parts_too(tmp_path):
    x, ws = _weights(130, seed=1)

    def loss(ws, x):
        return jnp.sum(_net(x, ws) ** 2)
    f = sprue.qjit(sprue.grad(loss), keep_intermediate=str(tmp_path))
    got, expected = f(ws, x), tanh_net_grads(ws, x)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    # the forward parts return the activations the backward parts read; equal parts are shared
    defined, calls = _parts(tmp_path)
    assert set(calls) == set(defined) and len(calls) > 2 * len(defined), (calls, defined)
    # many of a part's results pass through memory (entry_results.py), not as one struct
    text = next(tmp_path.glob("*.05_llvm.mlir")).read_text()
    assert not re.search(r"llvm\.insertvalue [^\n]*!llvm\.struct<\((?:ptr, ){8}", text)


def test_run_time_sizes_flow_through_the_parts(tmp_path):
    x, ws = _weights(150, seed=2)
    f = sprue.qjit(_net, keep_intermediate=str(tmp_path), abstracted_axes=({0: "n"}, None))
    for rows in (16, 5, 1):
        np.testing.assert_allclose(f(x[:rows], ws), _forward(x[:rows], ws)[-1], rtol=1e-10, atol=1e-12)
    assert _parts(tmp_path)[1]


def test_a_small_function_stays_whole(tmp_path):
    x, ws = _weights(10, seed=3)
    assert 2 * len(ws) < PERIODIC_MIN_OPS
    f = sprue.qjit(_net, keep_intermediate=str(tmp_path))
    np.testing.assert_allclose(f(x, ws), _forward(x, ws)[-1], rtol=1e-10, atol=1e-12)
    assert _parts(tmp_path) == ([], [])


def test_a_repeated_body_shorter_than_the_threshold_is_split_and_its_last_layers_share_one_part(tmp_path):
    """50 layers: 100 ops, fewer than PARTITION_MIN_OPS but one layer repeated 50 times: parts of
    PERIODIC_PART_OPS ops, all one function, then the layers left each a call of one shared
    one-layer part (not a last part of their own, lowered and compiled apart)."""
    x, ws = _weights(50, seed=4)
    assert PERIODIC_MIN_OPS <= 2 * len(ws) < PARTITION_MIN_OPS and len(ws) >= PERIODIC_MIN_REPEATS
    f = sprue.qjit(_net, keep_intermediate=str(tmp_path))
    np.testing.assert_allclose(f(x, ws), _forward(x, ws)[-1], rtol=1e-10, atol=1e-12)
    defined, calls = _parts(tmp_path)
    assert len(defined) == 2 and set(calls) == set(defined), (calls, defined)
    ops = 2 * len(ws)
    assert len(calls) == ops // PERIODIC_PART_OPS + ops % PERIODIC_PART_OPS // 2, calls


def _body_ops(tmp_path) -> int:
    """The ops of main's body in the linalg stage, as partition.py counts them (not the constants,
    empty tensors and fills it copies)."""
    text = next(tmp_path.glob("*.02_linalg.mlir")).read_text()
    main = text[text.index("func.func @main("):]
    main = main[:main.index("\n  }\n")]
    return len(re.findall(r"^    (?:%\S+ = )?(?!arith\.constant|tensor\.empty|linalg\.fill)[a-z_]+\.[a-z_.]+", main, re.M))


def test_a_body_that_does_not_repeat_stays_whole_below_the_threshold(tmp_path):
    kinds = [(jnp.tanh, np.tanh), (jnp.sin, np.sin), (jnp.cos, np.cos), (jnp.arctan, np.arctan),
             (jnp.log1p, np.log1p), (jnp.abs, np.abs)]

    def layers(ns, which, x, ws):
        for i, w in enumerate(ws):     # 6 kinds of activation and 5 of normalization: no period
            x = kinds[i % 6][which](ns.abs(x @ w))
            x = x / (1.0 + ns.max(x)) if i % 5 == 0 else x - ns.mean(x, axis=0)
        return x
    x, ws = _weights(30, seed=5)
    f = sprue.qjit(lambda x, ws: layers(jnp, 0, x, ws), keep_intermediate=str(tmp_path))
    np.testing.assert_allclose(f(x, ws), layers(np, 1, x, ws), rtol=1e-9, atol=1e-12)
    assert _parts(tmp_path) == ([], [])
    assert PERIODIC_MIN_OPS <= _body_ops(tmp_path) < PARTITION_MIN_OPS, _body_ops(tmp_path)


def test_a_repeated_body_is_cut_on_stablehlo_before_the_linalg_stage(tmp_path):
    """100 layers (200 StableHLO ops, one layer repeated): cut into parts before the linalg stage, so
    the linalg stage converts each shared part once; the entry is calls of them only."""
    x, ws = _weights(100, seed=6)
    f = sprue.qjit(_net, keep_intermediate=str(tmp_path))
    np.testing.assert_allclose(f(x, ws), _forward(x, ws)[-1], rtol=1e-10, atol=1e-12)
    legalized = next(tmp_path.glob("*.01_legalized.mlir")).read_text()
    defined = set(re.findall(r"func\.func private @(__sprue_hlo_part_\d+)\(", legalized))
    calls = re.findall(r"call @(__sprue_hlo_part_\d+)\(", legalized)
    assert defined and set(calls) == defined and len(calls) > len(defined), (calls, defined)
    main = legalized[legalized.index("func.func @main("):]
    main = main[:main.index("\n  }\n")]
    assert "stablehlo.dot_general" not in main and "stablehlo.tanh" not in main
    linalg = next(tmp_path.glob("*.02_linalg.mlir")).read_text()
    assert linalg.count("linalg.matmul") <= PART_OPS // 2 + len(defined), linalg.count("linalg.matmul")


def test_a_body_behind_entry_checks_is_cut_on_stablehlo_and_the_checks_stay_whole(tmp_path):
    """Compiled for C (every size of every argument checked at entry: stablehlo.lower's
    static_sizes), the body runs in an if on the checks: the if's branch is cut into shared parts
    like an unchecked body, each part reading the arguments' checked views itself, and the checks
    (scalar ops, a few per argument) stay in the entry."""
    from sprue.tools.compile import Options, compile_jaxpr
    from sprue.tools.inputs import kernel_from_jaxpr
    x, ws = _weights(100, seed=8)
    closed = sprue.make_jaxpr(_net)(x, ws)
    opts = Options(tmp_path / "net.jaxpr", tmp_path, emit={"legalized"}, into=False)
    compile_jaxpr(closed, opts)
    legalized = (tmp_path / "net.legalized.mlir").read_text()
    defined = set(re.findall(r"func\.func private @(__sprue_hlo_part_\d+)\(", legalized))
    calls = re.findall(r"call @(__sprue_hlo_part_\d+)\(", legalized)
    assert defined and set(calls) == defined and len(calls) > 3 * len(defined), (calls, defined)
    assert legalized.count("stablehlo.dot_general") <= 2 * PERIODIC_PART_OPS, legalized.count("stablehlo.dot_general")
    parts = legalized[legalized.index("func.func private @__sprue_hlo_part"):]
    assert "arith.cmpi" not in parts   # the checks stayed in the entry
    signature = kernel_from_jaxpr(closed, "net", opts.input, into=False).signature
    lib = sprue.runtime.load(tmp_path / "libnet.so", "net", signature)
    np.testing.assert_allclose(lib(x, *ws)[-1], _forward(x, ws)[-1], rtol=1e-10, atol=1e-12)


def test_unread_values_are_not_cut_into_parts(tmp_path):
    """A repeated body whose every layer also computes a value nothing reads: the unread ops are
    erased before the cut, not left in a part no one can remove."""
    x, ws = _weights(40, seed=7)

    def net(x, ws):
        for w in ws:
            _ = jnp.exp(w) * 3.0      # read by nothing
            x = jnp.tanh(x @ w)
        return x
    f = sprue.qjit(net, keep_intermediate=str(tmp_path))
    np.testing.assert_allclose(f(x, ws), _forward(x, ws)[-1], rtol=1e-10, atol=1e-12)
    legalized = next(tmp_path.glob("*.01_legalized.mlir")).read_text()
    assert "stablehlo.exponential" not in legalized
    assert re.findall(r"call @(__sprue_hlo_part_\d+)\(", legalized)


def test_repeated_ops_with_other_constants_each_time_stay_whole(tmp_path):
    """A sum of 100 leaves, each times its own weight: the same ops 100 times but never the same
    constants, so its parts would all differ (each lowered and compiled on its own: 25 functions);
    it stays one function (outline._signature reads the constants an op uses)."""
    def weighted(leaves):
        total = 0.0
        for i, key in enumerate(sorted(leaves)):
            total = total + leaves[key] * float(i + 1)
        return total
    leaves = {f"p{i:03d}": float(v) for i, v in enumerate(np.random.default_rng(3).standard_normal(100))}
    f = sprue.qjit(weighted, keep_intermediate=str(tmp_path))
    np.testing.assert_allclose(f(leaves), weighted(leaves), rtol=1e-12)
    assert _parts(tmp_path) == ([], [])
