"""Shape functions (issue 7, Relax seed test D: separate shape and data computations): the result
shapes of a compiled function computed from its input sizes alone, stored in the compiled
signature (and the signature file beside the library), evaluated by `result_shapes`, used to
check `out=` destinations before the kernel runs, and rendered into the C header. Every expected
shape below is the shape of an actual call's result, never a copied number."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import f64
from sprue.api.shape_functions import shape_function_of
from sprue.base.errors import SprueError, SprueTypeError, SprueValueError
from sprue.runtime import NoShapeFunctionError, ShapeFunction, Signature, TensorSpec, load, signature_path
from sprue.runtime.shape_function import Arg, DataDependentDim, Div, MinMax, Poly, dim_to_c, format_dim

SIZES = (0, 1, 2, 3, 4, 5, 7, 10)


def shapes_of(results) -> list[tuple]:
    return [np.shape(r) for r in sprue.tree_flatten(results)[0]]


def compiled_of(f):
    """The runtime function of a qjit'd function's only compilation."""
    (c,) = list(f._cache.values()) or [f._fixed]
    return c.function


# -- kernels ---------------------------------------------------------------------------------------------
def many(x, y):
    """Results of shapes (n+m+1), (n*m), ((n+3)//4), (max(n-1, 0)), (2n+1, ), () ."""
    return (jnp.concatenate([x, y, jnp.ones(1)]),
            jnp.outer(x, y).reshape(-1),
            x[::4],
            x[1:],
            jnp.concatenate([x, 2.0 * x, jnp.zeros(1)]),
            jnp.sum(x) + jnp.sum(y))


@pytest.fixture(scope="module")
def many_c():
    return sprue.qjit(many, abstracted_axes=({0: "n"}, {0: "m"}))


def grow(x, n):
    """A result whose length a loop computes (allow_array_resizing): data-dependent."""
    @sprue.for_loop(0, n, 1, allow_array_resizing=True)
    def loop(i, a):
        return jnp.concatenate([a, jnp.ones(1) * i])
    return loop(x), jnp.sum(x)


@pytest.fixture(scope="module")
def grow_c():
    return sprue.qjit(grow)


# -- result_shapes against actual calls ------------------------------------------------------------------
def test_static_shapes():
    @sprue.qjit
    def f(a, b):
        return a @ b, jnp.sum(a), a.T.reshape(-1)
    a, b = np.random.rand(3, 4), np.random.rand(4, 2)
    assert f.result_shapes(a, b) == tuple(shapes_of(f(a, b)))
    sf = compiled_of(f).signature.shape_function
    assert sf.params == () and sf.complete
    assert compiled_of(f).result_shapes(a, b) == shapes_of(f(a, b))


def test_dynamic_shapes_from_abstracted_axes(many_c):
    for n in SIZES:
        for m in (0, 1, 6):
            x, y = np.random.rand(n), np.random.rand(m)
            assert many_c.result_shapes(x, y) == tuple(shapes_of(many_c(x, y))), (n, m)
    assert many_c.compile_count == 1


def test_the_formulas_are_the_jaxprs_dims(many_c):
    """Each stored formula prints as the DimExpr of the jaxpr's output type it was made from."""
    f = compiled_of(many_c)
    sf = f.signature.shape_function
    names = [a.name for a in f.signature.args]
    assert names[:2] == ["n", "m"] and sf.params == (0, 1) and sf.complete
    outs = many_c.jaxpr.jaxpr.outvars
    for k, out in enumerate(outs):
        for axis, d in enumerate(out.aval.shape):
            if k == 3:   # x[1:]: a size computed by `max`, a fresh variable in the jaxpr
                assert format_dim(sf.results[k][axis], names) == "max(0, n-1)"
            else:
                assert format_dim(sf.results[k][axis], names) == d.format(lambda v: v.name)


def test_hinted_shapes():
    @sprue.qjit
    def f(x: f64["n"], y: f64["n", 3]):
        return jnp.concatenate([x, x, x[:1]]), y.reshape(-1), y[::2], y.T @ y
    for n in (1, 2, 5, 9):
        x, y = np.random.rand(n), np.random.rand(n, 3)
        assert f.result_shapes(x, y) == tuple(shapes_of(f(x, y)))
    assert f.compile_count == 1


def test_result_shapes_follow_the_result_pytree():
    @sprue.qjit(abstracted_axes={0: "n"})
    def f(x):
        return {"twice": jnp.concatenate([x, x]), "pair": (x[::4], jnp.sum(x))}
    x = np.random.rand(6)
    shapes = f.result_shapes(x)
    out = f(x)
    assert shapes == {"twice": out["twice"].shape, "pair": (out["pair"][0].shape, np.shape(out["pair"][1]))}


def test_result_shapes_compiles_like_a_call_and_never_runs_the_kernel():
    @sprue.qjit(abstracted_axes={0: "n"})
    def f(x):
        sprue.lax.check(sprue.lax.lt(jnp.sum(x), 100.0), "sum too large")
        return jnp.concatenate([x, x])
    big = np.full(4, 1000.0)
    assert f.result_shapes(big) == (8,)       # the failing check never ran
    assert f.compile_count == 1
    with pytest.raises(SprueValueError, match="sum too large"):
        f(big)
    assert f.compile_count == 1


def test_result_shapes_validates_arguments_as_a_call_does(many_c):
    x, y = np.random.rand(4), np.random.rand(2)
    many_c(x, y)
    f = compiled_of(many_c)
    for args in ((4, 2, x, y.astype(np.complex128)), (4, 2, x.reshape(2, 2), y), (4, x, y)):
        with pytest.raises((TypeError, ValueError)) as call_err:
            f(*args)
        with pytest.raises(type(call_err.value)) as shapes_err:
            f.result_shapes(*args)
        assert str(shapes_err.value) == str(call_err.value)


def test_negative_sizes_are_refused():
    @sprue.qjit(abstracted_axes={0: "n"})
    def f(x):
        return jnp.zeros(x.shape[0] - 3)
    assert f.result_shapes(np.ones(5)) == np.shape(f(np.ones(5)))
    with pytest.raises(SprueValueError, match=r"result 'result\[0\]' axis 0 would have the negative size -2"
                                              r" \(n-3 with n=1\)"):
        f.result_shapes(np.ones(1))


# -- data-dependent shapes -------------------------------------------------------------------------------
def test_data_dependent_function_has_no_shape_function(grow_c):
    x = np.random.rand(2)
    out = grow_c(x, 3)
    with pytest.raises(NoShapeFunctionError) as err:
        grow_c.result_shapes(x, 3)
    msg = str(err.value)
    assert msg.startswith("grow has no shape function: result 'result[0]' axis 0 has a size computed from data"
                          " by `for_loop` (at "), msg
    assert msg.endswith("; its shape is known only after the call")
    assert isinstance(err.value, SprueError)
    sf = compiled_of(grow_c).signature.shape_function
    assert not sf.complete
    assert [(d.result, d.axis) for d in sf.data_dependent] == [(0, 0)]
    assert sf.results[0] == (None,) and sf.results[1] == ()
    assert out[0].shape == (5,)


def test_filtered_sizes_and_sizes_computed_from_them_are_data_dependent():
    from sprue.runtime.header import HeaderSpec, c_header

    @sprue.qjit(abstracted_axes={0: "n"})
    def f(x):
        y = x[x > 0]                                   # a size the `filter` primitive counts
        return y, jnp.concatenate([y, y])[1:], x[1:]
    x = np.random.default_rng(0).normal(size=9)
    out = f(x)
    sig = compiled_of(f).signature
    sf = sig.shape_function
    assert [(d.result, d.axis) for d in sf.data_dependent] == [(0, 0), (1, 0)]
    assert all(d.why.startswith("computed from data by `filter` (at ") for d in sf.data_dependent)
    assert sf.evaluate(lambda i: x.size)[2] == out[2].shape        # the third result's size is known
    with pytest.raises(NoShapeFunctionError, match=re.escape(
            "f has no shape function: result 'result[0]' axis 0 has a size computed from data by `filter`")):
        f.result_shapes(x)
    dests = [np.empty(o.shape) for o in out]
    f(x, out=dests)
    for d, o in zip(dests, out):
        np.testing.assert_array_equal(d, o)
    header = c_header(HeaderSpec("f", sig))
    assert "f_result_shapes" not in header and "f_into" not in header


# -- out= destinations -----------------------------------------------------------------------------------
def test_out_destinations_receive_the_results(many_c):
    x, y = np.random.rand(5), np.random.rand(3)
    want = many_c(x, y)
    dests = tuple(np.full(s, np.nan) for s in many_c.result_shapes(x, y))
    got = many_c(x, y, out=dests)
    assert all(g is d for g, d in zip(got, dests))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_out_single_result_strided_and_aliasing_an_input():
    @sprue.qjit(abstracted_axes={0: "n"})
    def f(x):
        return jnp.sin(x) * 2.0
    x = np.random.rand(6)
    want = f(x)
    wide = np.zeros((6, 2))
    got = f(x, out=wide[:, 1])              # a strided view
    assert got.base is wide
    np.testing.assert_array_equal(wide[:, 1], want)
    np.testing.assert_array_equal(wide[:, 0], 0.0)
    y = x.copy()
    assert f(y, out=y) is y                 # the kernel reads y before it is written (a copy)
    np.testing.assert_array_equal(y, want)


def test_out_mismatches_are_refused_before_the_kernel_runs(many_c):
    x, y = np.random.rand(5), np.random.rand(3)
    shapes = many_c.result_shapes(x, y)
    good = [np.full(s, -7.0) for s in shapes]

    def refused(dests, exc, message):
        before = [d.copy() for d in dests if isinstance(d, np.ndarray)]
        with pytest.raises(exc, match=message):
            many_c(x, y, out=tuple(dests))
        after = [d for d in dests if isinstance(d, np.ndarray)]
        for b, a in zip(before, after):
            np.testing.assert_array_equal(a, b)          # nothing was written

    wrong = list(good)
    wrong[0] = np.zeros(shapes[0][0] - 1)
    refused(wrong, SprueValueError, re.escape(f"many: destination for result 'result[0]' has shape"
                                              f" ({shapes[0][0] - 1},), expected ({shapes[0][0]},)"))
    wrong = list(good)
    wrong[2] = np.zeros((shapes[2][0], 1))
    refused(wrong, SprueValueError, re.escape(f"destination for result 'result[2]' has shape ({shapes[2][0]}, 1),"
                                              f" expected ({shapes[2][0]},)"))
    wrong = list(good)
    wrong[5] = np.zeros((), np.float32)
    refused(wrong, SprueTypeError, re.escape("destination for result 'result[5]' has dtype float32, expected"
                                             " float64 (f64[])"))
    refused(good[:-1], SprueTypeError, re.escape("many(): out= must have the structure of the results"))
    with pytest.raises(SprueTypeError, match=re.escape("many: out= has 5 destinations, but the function has 6"
                                                       " results (f64[?], f64[?], f64[?], f64[?], f64[?], f64[])")):
        compiled_of(many_c)(5, 3, x, y, out=good[:-1])   # the runtime's own check
    wrong = list(good)
    wrong[1] = "nope"
    refused(wrong, SprueTypeError, "destination for result 'result\\[1\\]' must be a numpy array, got str")
    wrong[1] = list(good[1])    # a flat tuple of one entry per result: each must be an array
    refused(wrong, SprueTypeError, "destination for result 'result\\[1\\]' must be a numpy array, got list")
    refused([good[:3], good[3:]], SprueTypeError, re.escape(
        "many(): out= must have the structure of the results, (*, *, *, *, *, *), or be a flat list of 6 arrays"
        " (one per result); got ([*, *, *], [*, *, *])"))
    ro = good[0].copy()
    ro.flags.writeable = False
    refused([ro] + good[1:], SprueValueError, "destination for result 'result\\[0\\]' is read-only")
    shared = np.zeros(shapes[0][0] + shapes[4][0])
    refused([shared[:shapes[0][0]], good[1], good[2], good[3], shared[-shapes[4][0] - 1:-1], good[5]],
            SprueValueError, "destinations for results 'result\\[0\\]' and 'result\\[4\\]' overlap")
    with pytest.raises(SprueTypeError, match="many: out= must be a sequence of 6 arrays"):
        compiled_of(many_c)(5, 3, x, y, out=good[0])


def test_out_with_a_data_dependent_result(grow_c):
    x = np.random.rand(2)
    want = grow_c(x, 3)
    dests = (np.zeros(want[0].shape), np.zeros(()))
    got = grow_c(x, 3, out=dests)
    assert got[0] is dests[0] and got[1] is dests[1]
    np.testing.assert_array_equal(dests[0], want[0])
    assert dests[1] == want[1]
    short = np.full(want[0].shape[0] - 1, 3.0)
    with pytest.raises(SprueValueError, match=re.escape(
            f"grow: destination for result 'result[0]' has shape ({short.size},), but the result has shape"
            f" ({want[0].size},) (its size depends on data, so this is known only after the call; no destination"
            f" was written)")):
        grow_c(x, 3, out=(short, np.zeros(())))
    np.testing.assert_array_equal(short, 3.0)


def test_a_parameter_named_out_is_the_functions():
    @sprue.qjit
    def f(x, out):
        return x + out
    np.testing.assert_array_equal(f(np.ones(2), out=np.ones(2)), np.full(2, 2.0))


# -- the representation ----------------------------------------------------------------------------------
def test_signature_json_round_trip_keeps_the_shape_function(many_c, grow_c):
    # (compiled here: under pytest-xdist the tests that call them may run on another worker)
    many_c(np.ones(3), np.ones(2))
    grow_c(np.ones(2), 3)
    for fn in (many_c, grow_c):
        sig = compiled_of(fn).signature
        back = Signature.from_json(sig.to_json())
        assert back == sig and back.shape_function == sig.shape_function
        assert "shape_function" in json.loads(sig.to_json())


def test_every_atom_evaluates_prints_and_round_trips():
    n, m = Arg(0), Arg(1)

    def var(a):
        return Poly(((1, ((a, 1),)),))

    with pytest.raises(TypeError, match="a dim must be an int, a Poly or None, got Arg"):
        ShapeFunction([0], [[Poly(((1, ((MinMax("max", n, 0), 1),)),))]])
    neg = Poly(((1, ((n, 1),)), (-7, ())))                              # n-7
    sf = ShapeFunction([0, 1], [
        [Poly(((2, ((n, 2),)), (-1, ((m, 1),)), (3, ())))],            # 2*n*n - m + 3
        [Poly(((1, ((Div("floordiv", neg, 4), 1),)),)), Poly(((1, ((Div("mod", neg, 4), 1),)),))],
        [Poly(((1, ((Div("div", neg, 4), 1),)),)), Poly(((1, ((Div("rem", neg, 4), 1),)),))],
        [Poly(((1, ((MinMax("max", 0, neg), 1),)),)), Poly(((1, ((MinMax("min", var(n), var(m)), 1),)),))],
        [None, 5],
    ], [DataDependentDim(4, 0, "computed from data by `nonzero`")])
    assert ShapeFunction.from_dict(json.loads(json.dumps(sf.to_dict()))) == sf
    for nv, mv in ((0, 0), (3, 5), (9, 2), (12, 1)):
        d = nv - 7
        trunc = int(d / 4)
        got = sf.evaluate(lambda i: (nv, mv)[i])
        assert got == [(2 * nv * nv - mv + 3,), (d // 4, d % 4), (trunc, d - 4 * trunc), (max(0, d), min(nv, mv)),
                       (None, 5)]
    names = ["n", "m"]
    assert [format_dim(d, names) for r in sf.results for d in r] == [
        "2*n*n-m+3", "(n-7)//4", "(n-7)%4", "div(n-7, 4)", "rem(n-7, 4)", "max(0, n-7)", "min(n, m)", "?", "5"]
    assert dim_to_c(sf.results[1][0], names) == "sprue_floordiv((n - 7), 4)"
    assert dim_to_c(sf.results[2][0], names) == "((n - 7) / 4)"
    assert dim_to_c(sf.results[3][0], names) == "sprue_max(0, (n - 7))"


@pytest.mark.parametrize("bad, message", [
    ({"params": [0]}, "keys params, results"),
    ({"params": [0], "results": [[{"sum": [[1, [[{"arg": 3}, 1]]]]}]]}, "not among its params"),
    ({"params": [0], "results": [[None]]}, "data_dependent must list exactly the null dims"),
    ({"params": [0], "results": [[{"sum": [[1, [[{"floordiv": 1, "by": 0}, 1]]]]}]]}, "divisors must be positive"),
    ({"params": [0], "results": [[{"sum": [[1, [[{"pow": 1}, 1]]]]}]]}, "an atom must be"),
    ({"params": [0], "results": [["n"]]}, "a dim must be an int, null or"),
])
def test_bad_shape_function_json(bad, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ShapeFunction.from_dict(bad)


def test_signature_checks_its_shape_function():
    args = [TensorSpec("n", np.int64, ()), TensorSpec("x", np.float64, (None, 3))]
    res = [TensorSpec("y", np.float64, (None, 3))]
    n = Poly(((1, ((Arg(0), 1),)),))
    Signature(args, res, shape_function=ShapeFunction([0], [[n, 3]]))
    for sf, message in ((ShapeFunction([0], [[n, 3], []]), "has 2 results, the signature 1"),
                        (ShapeFunction([0], [[n]]), "gives result 'y' 1 dims, the signature 2"),
                        (ShapeFunction([0], [[n, 4]]), "axis 1 the size 4, the signature the static size 3"),
                        (ShapeFunction([1], [[Poly(((1, ((Arg(1), 1),)),)), 3]]), "param 1 is not an integer scalar")):
        with pytest.raises(ValueError, match=re.escape(message)):
            Signature(args, res, shape_function=sf)


def test_a_signature_without_a_shape_function(many_c):
    """Hand-written signatures: static result shapes are known, dynamic ones are not."""
    x, y = np.random.rand(4), np.random.rand(2)
    many_c(x, y)
    f = compiled_of(many_c)
    bare = load(f.path, "main", f.signature.with_shape_function(None))
    with pytest.raises(NoShapeFunctionError, match=r"main has no shape function: its signature records none, and"
                                                   r" result 'result\[0\]' axis 0 is dynamic"):
        bare.result_shapes(4, 2, x, y)
    dests = [np.zeros(s) for s in f.result_shapes(4, 2, x, y)]
    bare(4, 2, x, y, out=dests)            # checked after the call instead
    for d, w in zip(dests, many_c(x, y)):
        np.testing.assert_array_equal(d, w)


# -- cached libraries -------------------------------------------------------------------------------------
def test_a_cached_library_has_its_shape_function_without_tracing(tmp_path):
    f = sprue.qjit(many, abstracted_axes=({0: "n"}, {0: "m"}), keep_intermediate=tmp_path)
    x, y = np.random.rand(6), np.random.rand(4)
    want = f(x, y)
    side = signature_path(tmp_path / "many.so")
    assert side == tmp_path / "many.signature.json" and side.is_file()
    script = (
        "import sys, json, numpy as np\n"
        "from sprue.runtime import load\n"
        "f = load(sys.argv[1])\n"
        "x, y = np.random.rand(6), np.random.rand(4)\n"
        "print(json.dumps([list(s) for s in f.result_shapes(6, 4, x, y)]))\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch_mlir', 'llvmlite', 'torch')"
        " or m.startswith('sprue.lowering') or m == 'sprue.shape_functions']\n"
        "assert not bad, bad\n"
    )
    for where in (tmp_path, tmp_path / "many.so"):    # the directory, or the library
        out = subprocess.run([sys.executable, "-c", script, str(where)], check=True, capture_output=True, text=True)
        assert [tuple(s) for s in json.loads(out.stdout)] == shapes_of(want)
    g = load(tmp_path)
    assert g.name == "many" and g.signature == compiled_of(f).signature
    dests = [np.empty(s) for s in shapes_of(want)]
    g(6, 4, x, y, out=dests)
    for d, w in zip(dests, want):
        np.testing.assert_array_equal(d, w)


def test_load_from_a_directory_needs_exactly_one_library(tmp_path):
    def inc(x):
        return x + 1.0
    f = sprue.qjit(inc, keep_intermediate=tmp_path)
    f(np.ones(2))
    f(np.ones(3))                         # a second signature: a second library in the directory
    with pytest.raises(sprue.runtime.LibraryLoadError, match="holds 2 compiled libraries"):
        load(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(sprue.runtime.LibraryLoadError, match="holds no saved signature"):
        load(empty)
    with pytest.raises(TypeError, match="signature must be a sprue.runtime.Signature, got NoneType"):
        load(next(tmp_path.glob("*.o")))


# -- the C header: the same shape function ---------------------------------------------------------------
C_MAIN = r"""
#include <stdio.h>
#include "shapes.h"
int main(void) {
  int64_t n, s0[1], s1[1], s2[1], s3[1], s4[1];
  for (n = 0; n < 12; ++n) {
    shapes_result_shapes(n, s0, s1, s2, s3, s4);
    printf("%d: %d %d %d %d %d\n", (int)n, (int)s0[0], (int)s1[0], (int)s2[0], (int)s3[0], (int)s4[0]);
  }
  return 0;
}
"""


def shapes_kernel(x):
    return x[1:], x[::4], jnp.concatenate([x, x, jnp.ones(1)]), x[2:-1], jnp.outer(x, x).reshape(-1), jnp.sum(x)


def test_the_c_header_renders_the_same_shape_function(tmp_path):
    from sprue.runtime.header import HeaderSpec, c_header
    from sprue.tools.compile import Options, compile_jaxpr
    closed = sprue.make_jaxpr(shapes_kernel)(sprue.ShapedArray(("n",), np.float64))
    written = compile_jaxpr(closed, Options(Path("shapes.jaxpr"), tmp_path))
    header = written["h"].read_text()
    assert "static inline void shapes_result_shapes(int64_t n, int64_t result0_shape[1]," in header
    # the header is the signature's shape function, rendered: the same text as from HeaderSpec
    sf = shape_function_of(closed)
    assert sf.complete
    sig = Signature([TensorSpec("n", np.int64, ()), TensorSpec("x", np.float64, (None,))],
                    [TensorSpec(f"r{i}", a.dtype, [None] * len(a.shape)) for i, a in enumerate(closed.out_avals)],
                    shape_function=sf)
    body = re.search(r"static inline void shapes_result_shapes.*?\n\}", header, re.S)[0]
    mine = re.search(r"static inline void shapes_result_shapes.*?\n\}", c_header(HeaderSpec("shapes", sig)), re.S)[0]
    assert body == mine
    cc = os.environ.get("CC", "cc")
    src = tmp_path / "main.c"
    src.write_text(C_MAIN)
    exe = tmp_path / "main"
    proc = subprocess.run([cc, "-std=c99", "-Wall", "-Werror", "-pedantic", f"-I{tmp_path}", str(src), "-o", str(exe)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = subprocess.run([str(exe)], capture_output=True, text=True, check=True, timeout=60).stdout.splitlines()
    f = sprue.qjit(shapes_kernel, abstracted_axes={0: "n"})
    for line in lines:
        n, dims = line.split(":")
        x = np.random.rand(int(n))
        actual = shapes_of(f(x))
        assert [int(d) for d in dims.split()] == [s[0] for s in actual[:5]], line
        assert f.result_shapes(x) == tuple(actual)
