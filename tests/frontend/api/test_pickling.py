"""Compiled functions that pickle by program (api/pickle_format.py, issue 17): qjit'd functions with
several signatures, static arguments and type hints, transformations of them, and sprue.load'ed
programs, through pickle and cloudpickle, unpickled in a fresh process that has not their source;
with a warm compile cache that process imports neither MLIR nor llvmlite. Payloads from another
sprue version, or modified, raise UnpicklingError and load nothing."""
from __future__ import annotations

import importlib
import json
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.api import compile_cache, pickle_format
from sprue.errors import UnpicklingError

cloudpickle = pytest.importorskip("cloudpickle", reason="cloudpickle is installed with sprue[dask] (and [test])")

# A module of kernels, written to a folder of its own: the parent imports it; a child process is
# given its folder only where the test says so (elsewhere the programs must travel without it).
KERNELS = textwrap.dedent('''
    import numpy as np
    import sprue
    import sprue.numpy as jnp

    @sprue.qjit(abstracted_axes={0: "n"})
    def scaled_sum(x, y):
        return jnp.sum(jnp.sin(x) * y)

    @sprue.qjit(static_argnames=("power",))
    def powered(x, power, shift=1.0):
        return x ** power + shift

    @sprue.qjit
    def hinted(x: sprue.f64["n", 3], w: sprue.f64[3]) -> sprue.f64["n"]:
        return jnp.tanh(x @ w)

    @sprue.qjit
    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    @sprue.qjit
    def row_norm(x):
        return jnp.sqrt(jnp.sum(x * x))

    @sprue.qjit
    def never_called(x):
        return x * 2.0 + 1.0
''')

# The child: unpickles the cases (pickle or cloudpickle), calls each, writes the results, and says
# which compilers it imported and what its compile cache did.
CHILD = textwrap.dedent('''
    import json, pickle, sys
    loader = pickle if sys.argv[1] == "pickle" else __import__("cloudpickle")
    with open(sys.argv[2], "rb") as f:
        cases = loader.load(f)
    results = {name: fn(*args) for name, (fn, args) in cases.items()}
    with open(sys.argv[3], "wb") as f:
        pickle.dump(results, f)
    from sprue.api import compile_cache
    print(json.dumps({"torch_mlir": "torch_mlir" in sys.modules, "llvmlite": "llvmlite" in sys.modules,
                      "counts": {name: fn.compile_count for name, (fn, _) in cases.items()},
                      "stats": compile_cache.stats}))
''')


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kernels")
    (folder / "pickled_kernels.py").write_text(KERNELS)
    sys.path.insert(0, str(folder))
    try:
        module = importlib.import_module("pickled_kernels")
        yield module, folder
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("pickled_kernels", None)


def _run_child(tmp_path, how: str, cases: dict, env_extra: dict | None = None) -> tuple[dict, dict]:
    import os
    data = tmp_path / f"cases.{how}"
    data.write_bytes((pickle if how == "pickle" else cloudpickle).dumps(cases))
    out = tmp_path / f"results.{how}"
    env = {**os.environ, **(env_extra or {})}
    if not (env_extra and "PYTHONPATH" in env_extra):
        env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, "-c", CHILD, how, str(data), str(out)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return pickle.loads(out.read_bytes()), json.loads(proc.stdout.strip().splitlines()[-1])


def _np_tanh_grad(w, x):
    t = np.tanh(x @ w)
    return x.T @ (2 * t * (1 - t * t))


def _cases(kernels):
    """Every kind the issue lists, each compiled in this process first (a warm cache), with its
    arguments and numpy's result."""
    k, folder = kernels
    rng = np.random.default_rng(0)
    x5, y5 = rng.random(5), rng.random(5)
    x7f, y7f = rng.random(7).astype(np.float32), rng.random(7).astype(np.float32)
    xm, w = rng.random((6, 3)), rng.random(3)
    # several signatures (two dtypes, each for every size), static arguments, hints
    k.scaled_sum(x7f, y7f)
    k.scaled_sum(x5, y5)   # the latest, which sprue.save writes
    k.powered(x5, 2)
    k.powered(x5, 3, 0.5)
    k.hinted(xm, w)
    grad_loss = sprue.grad(k.loss)
    norms = sprue.vmap(k.row_norm)
    grad_loss(w, xm)
    norms(xm)
    saved = sprue.save(k.scaled_sum, folder / "scaled_sum.jaxpr")
    loaded = sprue.load(saved)
    loaded(x5, y5)
    x9, y9 = rng.random(9), rng.random(9)   # new sizes: one compilation serves them
    return {
        "several_f64": ((k.scaled_sum, (x9, y9)), np.sum(np.sin(x9) * y9)),
        "several_f32": ((k.scaled_sum, (x7f[:3], y7f[:3])), np.sum(np.sin(x7f[:3]) * y7f[:3])),
        "static": ((k.powered, (x5, 3, 0.5)), x5 ** 3 + 0.5),
        "static_default": ((k.powered, (x5, 2)), x5 ** 2 + 1.0),
        "hinted": ((k.hinted, (xm[:4], w)), np.tanh(xm[:4] @ w)),
        "grad": ((grad_loss, (w, xm)), _np_tanh_grad(w, xm)),
        "vmap": ((norms, (xm,)), np.linalg.norm(xm, axis=1)),
        "loaded": ((loaded, (x9, y9)), np.sum(np.sin(x9) * y9)),
    }


@pytest.mark.parametrize("how", ["pickle", "cloudpickle"])
def test_round_trip_in_a_fresh_process_with_a_warm_cache_imports_no_compiler(kernels, tmp_path, how):
    cases = _cases(kernels)
    results, report = _run_child(tmp_path, how, {name: call for name, (call, _) in cases.items()})
    for name, (_, want) in cases.items():
        np.testing.assert_allclose(results[name], want, rtol=1e-6 if name != "several_f32" else 1e-5,
                                   err_msg=name)
    assert report["torch_mlir"] is False and report["llvmlite"] is False, report
    assert report["stats"]["misses"] == 0 and report["stats"]["hits"] >= len(cases), report
    # nothing was traced in the child: the programs came with the functions
    assert all(n == 0 for name, n in report["counts"].items() if name != "loaded"), report


def test_a_cold_cache_compiles_the_carried_jaxpr(kernels, tmp_path):
    k, _ = kernels
    x = np.linspace(0.0, 1.0, 11)
    k.scaled_sum(x, x)
    results, report = _run_child(tmp_path, "pickle", {"f": (k.scaled_sum, (x[:4], x[:4] * 2))},
                                 {"SPRUE_CACHE_DIR": str(tmp_path / "cold")})
    np.testing.assert_allclose(results["f"], np.sum(np.sin(x[:4]) * x[:4] * 2), rtol=1e-12)
    assert report["stats"]["misses"] >= 1 and report["counts"] == {"f": 0}, report


def test_a_function_never_called_travels_by_reference(kernels, tmp_path):
    k, folder = kernels
    assert pickle.loads(pickle.dumps(k.never_called)) is k.never_called   # as pickle does a function
    x = np.arange(4.0)
    results, report = _run_child(tmp_path, "pickle", {"f": (k.never_called, (x,))}, {"PYTHONPATH": str(folder)})
    np.testing.assert_array_equal(results["f"], x * 2.0 + 1.0)
    assert report["counts"] == {"f": 1}   # traced in the child, from the module it imported


def test_a_function_never_called_and_not_importable_says_why_it_cannot_be_pickled():
    @sprue.qjit
    def local(x):
        return x + 1.0
    for dump in (pickle.dumps, cloudpickle.dumps):
        with pytest.raises(sprue.SprueTypeError, match=r"local cannot be pickled yet: it has no compiled signature"
                           r" to carry .* it is defined inside a function .* Call it once"):
            dump(local)


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps], ids=["pickle", "cloudpickle"])
def test_a_local_function_travels_by_its_programs(dumps):
    """A closure (no reference) pickles once compiled; a new signature in the copy needs the Python
    function, which did not travel: the error says which signatures did and what to do."""
    scale = 3.0

    @sprue.qjit(abstracted_axes={0: "n"})
    def local(x):
        return jnp.cumsum(x) * scale
    x = np.arange(6.0)
    local(x)
    copy = pickle.loads(dumps(local))
    np.testing.assert_allclose(copy(x[:5] + 1), np.cumsum(x[:5] + 1) * scale)
    assert copy.compile_count == 0 and copy.name == "local"
    with pytest.raises(sprue.SprueTypeError, match=r"its Python function did not travel with it .*defined inside a"
                       r" function.*unpickled with its compiled signatures only: \(f64\[n\]\);"):
        copy(np.ones((2, 2)))


def test_an_unpickled_copy_traces_new_signatures_through_its_reference(kernels, tmp_path):
    k, folder = kernels
    k.powered(np.arange(3.0), 2)
    again = pickle.loads(pickle.dumps(k.powered))   # a copy pickled again still names the module's
    cases = {"new_static": (k.powered, (np.arange(3.0), 4)), "new_shape": (again, (np.ones((2, 2)), 2))}
    results, report = _run_child(tmp_path, "pickle", cases, {"PYTHONPATH": str(folder)})
    np.testing.assert_array_equal(results["new_static"], np.arange(3.0) ** 4 + 1.0)
    np.testing.assert_array_equal(results["new_shape"], np.ones((2, 2)) ** 2 + 1.0)


def test_the_payload_is_the_program_not_the_library(kernels):
    k, _ = kernels
    x = np.arange(5.0)
    k.scaled_sum(x, x)
    data = pickle.dumps(k.scaled_sum)
    assert b"lib.so" not in data and str(k.scaled_sum._last.library).encode() not in data
    assert len(data) < k.scaled_sum._last.library.stat().st_size


# -- payloads that must not load -----------------------------------------------------------------
def _payload_of(fn) -> tuple[bytes, tuple]:
    reduced = fn.__reduce__()
    return reduced[1][0], reduced[1][1]


def _unpickle_loads_nothing(payload: bytes, objects: tuple, match: str):
    from sprue.api.qjit import unpickle_qjit
    before = dict(compile_cache.stats)
    with pytest.raises(UnpicklingError, match=match):
        unpickle_qjit(payload, objects)
    assert compile_cache.stats == before   # no cache lookup, no compilation


def _resigned(payload: bytes, edit) -> bytes:
    """The payload with its JSON body edited and its sha256 recomputed (a deliberate forgery)."""
    head, digest, data = payload.split(b"\n", 2)
    body = edit(json.loads(data))
    data = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return b"\n".join([head, f"sha256 {pickle_format._sha256(data)}".encode(), data])


def test_a_payload_from_another_sprue_version_is_refused(kernels):
    k, _ = kernels
    k.scaled_sum(np.ones(3), np.ones(3))
    payload, objects = _payload_of(k.scaled_sum)
    other = payload.replace(f"sprue {sprue.__version__}".encode(), b"sprue 0.0.1", 1)
    _unpickle_loads_nothing(other, objects, rf"was pickled by sprue 0\.0\.1 \(pickle format 1\); this process runs"
                                            rf" sprue {sprue.__version__} .* Install the same sprue version")
    newer = payload.replace(b"sprue pickle 1 ", b"sprue pickle 2 ", 1)
    _unpickle_loads_nothing(newer, objects, r"pickle format 2\); this process runs .*\(format 1\)")


def test_a_modified_payload_is_refused(kernels):
    k, _ = kernels
    k.scaled_sum(np.ones(3), np.ones(3))
    payload, objects = _payload_of(k.scaled_sum)
    flipped = payload.replace(b"sin", b"cos", 1)
    _unpickle_loads_nothing(flipped, objects, r"does not match its sha256: it was truncated or modified")
    _unpickle_loads_nothing(payload[:-40], objects, r"does not match its sha256")
    _unpickle_loads_nothing(b"GARBAGE" + payload, objects, r"is not a sprue pickle")
    # re-signed: the program says cos, its source lines and digest say sin
    forged = _resigned(payload, lambda b: {**b, "compiled": [{**e, "program": e["program"].replace("sin", "cos")}
                                                             for e in b["compiled"]]})
    _unpickle_loads_nothing(forged, objects, r"reads back as another program than the one pickled")
    garbled = _resigned(payload, lambda b: {**b, "compiled": [{**e, "program": "{ lambda ; a:f64[]. let"}
                                                              for e in b["compiled"]]})
    _unpickle_loads_nothing(garbled, objects, r"its program does not read in this sprue version")
    gutted = _resigned(payload, lambda b: {k: v for k, v in b.items() if k != "signature"})
    _unpickle_loads_nothing(gutted, objects, r"the payload is malformed \(KeyError")
    from sprue.api.saved import unpickle_program
    with pytest.raises(UnpicklingError, match=r"holds a 'qjit', not a 'program'"):
        unpickle_program(payload)


def test_no_library_path_travels_and_the_key_is_computed_by_the_receiver(kernels, monkeypatch):
    """A forged cache key (another program's) changes nothing: the receiver keys the program it read."""
    k, _ = kernels
    x = np.arange(4.0)
    k.scaled_sum(x, x)
    k.powered(x, 2)
    payload, objects = _payload_of(k.scaled_sum)
    other_key = _payload_of(k.powered)[0].split(b'"cache_key":"', 1)[1][:64].decode()
    forged = _resigned(payload, lambda b: {**b, "compiled": [{**e, "cache_key": other_key} for e in b["compiled"]]})
    from sprue.api.qjit import unpickle_qjit
    copy = unpickle_qjit(forged, objects)
    np.testing.assert_allclose(copy(x, x), np.sum(np.sin(x) * x))


def test_a_loaded_stablehlo_program_pickles_as_its_text(tmp_path):
    path = tmp_path / "axpy.mlir"
    path.write_text("func.func @main(%a: tensor<f64>, %x: tensor<4xf64>, %y: tensor<4xf64>) -> tensor<4xf64> {\n"
                    "  %b = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f64>) -> tensor<4xf64>\n"
                    "  %m = stablehlo.multiply %b, %x : tensor<4xf64>\n"
                    "  %s = stablehlo.add %m, %y : tensor<4xf64>\n"
                    "  return %s : tensor<4xf64>\n}\n")
    f = sprue.load(path)
    x, y = np.arange(4.0), np.full(4, 0.5)
    for dumps in (pickle.dumps, cloudpickle.dumps):
        copy = pickle.loads(dumps(f))
        np.testing.assert_array_equal(copy(np.float64(3.0), x, y), 3.0 * x + y)
        assert str(path).encode() not in dumps(f)


def test_one_payload_is_rebuilt_once_per_process(kernels):
    """Dask sends a task's function with each task: the same bytes give the same object, without
    reading the program again; other static values (another object graph) give another."""
    k, _ = kernels
    x = np.arange(3.0)
    k.powered(x, 2)
    data = pickle.dumps(k.powered)
    first = pickle.loads(data)
    before = dict(compile_cache.stats)
    assert pickle.loads(data) is first and compile_cache.stats == before
    k.powered(x, 2.0)   # another static value: another signature, another payload
    assert pickle.loads(pickle.dumps(k.powered)) is not first
    payload, objects = _payload_of(first)
    from sprue.api.qjit import unpickle_qjit
    other = list(objects)
    # same bytes, other objects (the left-out shift is static too: its default, as under jax.jit)
    i = next(i for i, o in enumerate(objects) if isinstance(o, dict) and o.get("power") == 2)
    other[i] = {**objects[i], "power": 2.0}
    assert unpickle_qjit(payload, tuple(other)) is not first


def test_a_transformation_of_a_qjit_function_never_called_says_why_it_cannot_be_pickled(kernels):
    k, _ = kernels
    for transformed in (sprue.grad(k.loss), sprue.vmap(k.row_norm)):
        with pytest.raises(sprue.SprueTypeError, match=r"cannot be pickled yet: .* cannot travel by reference:"
                           r" pickled_kernels\.\w+ is another object"):
            pickle.dumps(transformed)


def test_a_main_function_never_called_cannot_be_imported_by_another_program(tmp_path):
    """By reference to __main__.f, as pickle does: another program's __main__ has no f (a Dask
    worker's), and the error says what to do; once called, f travels as its program."""
    import os
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    sender = textwrap.dedent('''
        import pickle, sys
        import numpy as np
        import sprue

        @sprue.qjit
        def f(x):
            return x * 2.0
        with open(sys.argv[1], "wb") as out:
            pickle.dump(f, out)
        f(np.arange(3.0))
        with open(sys.argv[2], "wb") as out:
            pickle.dump(f, out)
    ''')
    receiver = textwrap.dedent('''
        import pickle, sys
        import numpy as np
        from sprue.errors import UnpicklingError
        try:
            pickle.load(open(sys.argv[1], "rb"))
        except UnpicklingError as e:
            print("error:", e)
        print("result:", pickle.load(open(sys.argv[2], "rb"))(np.arange(3.0)).tolist())
    ''')
    never, called = tmp_path / "never.pkl", tmp_path / "called.pkl"
    for script, args in ((sender, [never, called]), (receiver, [never, called])):
        proc = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("error: f: pickled by reference to __main__.f, which this process cannot import"
                               " (AttributeError") and "or call it before pickling it" in lines[0], lines
    assert lines[1] == "result: [0.0, 2.0, 4.0]"


def test_transformations_of_plain_functions_travel_with_cloudpickle(kernels):
    """sprue.grad/vmap of a function that is not qjit'd return Python closures: cloudpickle carries
    them by value (plain pickle cannot pickle a closure), and the copy traces again."""
    k, _ = kernels
    w, x = np.array([0.3, -0.2, 0.5]), np.arange(6.0).reshape(2, 3) / 6
    grad_loss = sprue.grad(k.loss.fn)
    row_sums = sprue.vmap(lambda r: jnp.sum(r * r))
    np.testing.assert_allclose(pickle.loads(cloudpickle.dumps(grad_loss))(w, x), _np_tanh_grad(w, x), rtol=1e-12)
    np.testing.assert_allclose(pickle.loads(cloudpickle.dumps(row_sums))(x), np.sum(x * x, axis=1), rtol=1e-12)


def test_a_function_calling_another_qjit_function_travels_inlined():
    """A call equation reads back inlined (the jaxpr reader inlines calls, as JAX's does): the copy
    compiles that program once, then finds it in the cache."""
    @sprue.qjit
    def double(x):
        return x * 2.0

    @sprue.qjit(abstracted_axes={0: "n"})
    def caller(x):
        return jnp.exp(double(x)) + 1.0
    x = np.linspace(-1.0, 1.0, 7)
    caller(x)
    assert "pjit" in str(caller.jaxpr)
    for dumps in (pickle.dumps, cloudpickle.dumps):
        copy = pickle.loads(dumps(caller))
        np.testing.assert_allclose(copy(x[:5]), np.exp(x[:5] * 2.0) + 1.0, rtol=1e-14)
        assert "pjit" not in str(copy.jaxpr)
