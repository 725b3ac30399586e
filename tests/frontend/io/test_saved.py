"""sprue.save / sprue.load: saved programs round-trip (constants bit-exact, dynamic signatures,
control flow) and compute what the original qjit'd function computes."""
import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from sprue.io.saved_format import MAGIC, parse_saved


def _bits(a):
    a = np.asarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}")) if a.dtype.kind == "f" else a


def _nan_with_payload(dtype, payload):
    u = np.dtype(f"u{np.dtype(dtype).itemsize}")
    base = {4: 0x7FC00000, 8: 0x7FF8000000000000}[np.dtype(dtype).itemsize]
    return np.array([base | payload], u).view(dtype)[0]


def test_constants_round_trip_bit_exact(tmp_path):
    c64 = np.array([1.5, -0.0, np.nan, _nan_with_payload(np.float64, 0x123), np.inf, 5e-324])
    c32 = np.array([[-0.0, _nan_with_payload(np.float32, 0x77)], [3.25, -np.inf]], np.float32)
    ci = np.array([-(2 ** 63), 2 ** 63 - 1, 7], np.int64)

    @sprue.qjit
    def f(x, y):
        return x * 2.0 + c64, y + c32, jnp.zeros(3, np.int64) + ci

    x, y = np.arange(6.0), np.ones((2, 2), np.float32)
    expected = f(x, y)
    path = sprue.save(f, tmp_path / "f.jaxpr")
    text = path.read_text()
    assert text.startswith(MAGIC) and "# const a:f64[6] = " in text and "{ lambda a:f64[6]" in text
    g = sprue.load(path)
    consts = g.jaxpr.consts
    for orig in (c64, c32, ci):
        assert any(c.dtype == orig.dtype and c.shape == orig.shape and np.array_equal(_bits(c), _bits(orig))
                   for c in consts)
    got = g(x, y)
    for a, b in zip(got, expected):
        assert a.dtype == b.dtype and np.array_equal(_bits(a), _bits(b))
    assert g.compile_count == 1 and "func.func" in g.mlir and str(g.jaxpr) == str(f.jaxpr)


def test_dynamic_signature_with_abstracted_axes(tmp_path):
    f = sprue.qjit(lambda x: jnp.concatenate([x, x])[:-1] * 2, abstracted_axes={0: "n"})
    f(np.ones(4))
    path = sprue.save(f, tmp_path / "dyn.jaxpr")
    text = path.read_text()
    assert "# implicit a=n" in text and "b:f64[a]" in text
    g = sprue.load(path)
    for n in (1, 3, 6):
        x = np.arange(float(n))
        np.testing.assert_array_equal(g(x), f(x))
    assert g.compile_count == 1


def test_dynamic_signature_with_hints(tmp_path):
    @sprue.qjit
    def f(x: sprue.f64["n", 3], y: sprue.f64["n"]):  # noqa: F821
        return jnp.sum(x, axis=1) * y

    path = sprue.save(f, tmp_path / "hints.jaxpr")
    g = sprue.load(path)
    x, y = np.arange(12.0).reshape(4, 3), np.arange(4.0)
    np.testing.assert_array_equal(g(x, y), f(x, y))
    with pytest.raises(sprue.SprueValueError, match="size mismatch for 'n'"):
        g(x, np.arange(5.0))


def test_control_flow_round_trip(tmp_path):
    @sprue.qjit
    def f(x, k):
        y = lax.fori_loop(0, 4, lambda i, a: a * 1.5 + i, x)
        z = lax.while_loop(lambda a: jnp.sum(a) < 1000.0, lambda a: a * 2.0 + 1.0, y)
        w = lax.cond(k > 0, lambda: z - 1.0, lambda: z + 1.0)
        s = lax.scan(lambda c, v: (c + v, c * v), 0.0, w)
        return w, s[0], s[1], jnp.sort(-w)

    x = np.array([0.5, 1.0, -2.0])
    expected = f(x, 3)
    g = sprue.load(sprue.save(f, tmp_path / "cf.jaxpr"))
    assert g.arg_names == ["x", "k"]   # the parameters' positional order
    for a, b in zip(g(x, np.int64(3)), expected):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(g(x=x, k=np.int64(-1))[0], f(x, -1)[0])


def test_save_closed_jaxpr_and_int_types(tmp_path):
    def f(a, b):
        return (a * 3 + b) // 2, jnp.where(a > b, a, b).astype(np.int32)
    a, b = np.array([1, -5, 7], np.int64), np.array([2, 2, 2], np.int64)
    closed = sprue.make_jaxpr(f)(a, b)
    g = sprue.load(sprue.save(closed, tmp_path / "ints.jaxpr"))
    got = g(a, b)
    np.testing.assert_array_equal(got[0], (a * 3 + b) // 2)
    assert got[1].dtype == np.int32


def test_single_output_is_bare_and_arg_count_checked(tmp_path):
    f = sprue.qjit(lambda x: x + 1.0)
    f(np.ones(2))
    g = sprue.load(sprue.save(f, tmp_path / "one.jaxpr"))
    np.testing.assert_array_equal(g(np.ones(2)), np.full(2, 2.0))
    with pytest.raises(sprue.SprueTypeError, match="takes 1 arguments"):
        g(np.ones(2), np.ones(2))


def test_string_params_are_quoted(tmp_path):
    from sprue.ir.core import ClosedJaxpr
    closed = sprue.make_jaxpr(lambda x: (lax.check(x[0] > 0, "x[0] must be > 0, got it wrong"), x + 1)[1])(np.ones(3))
    text = sprue.io.saved_format.to_text(closed)
    assert "message='x[0] must be > 0, got it wrong'" in text
    back, n_implicit, names = parse_saved(text)
    assert isinstance(back, ClosedJaxpr) and n_implicit == 0
    assert back.jaxpr.eqns[-2].params["message"] == "x[0] must be > 0, got it wrong"


def test_save_errors(tmp_path):
    with pytest.raises(sprue.SprueTypeError, match="qjit'd function"):
        sprue.save(lambda x: x, tmp_path / "x.jaxpr")
    f = sprue.qjit(lambda x: x)
    with pytest.raises(sprue.SprueValueError, match="not available yet"):
        sprue.save(f, tmp_path / "x.jaxpr")


def test_bad_header(tmp_path):
    p = tmp_path / "bad.jaxpr"
    p.write_text(MAGIC + "\n# const a:f64[2] = 00zz\n{ lambda a:f64[2]; b:f64[2]. let c:f64[2] = add a b in (c,) }\n")
    with pytest.raises(sprue.JaxprSyntaxError, match=r"bad.jaxpr:2:1: constant 'a'"):
        sprue.load(p)
    p.write_text(MAGIC + "\n{ lambda a:f64[2]; b:f64[2]. let c:f64[2] = add a b in (c,) }\n")
    with pytest.raises(sprue.JaxprError, match=r"constants \[\] do not match"):
        sprue.load(p)


def test_mlir_files_go_to_the_stablehlo_reader(tmp_path, monkeypatch):
    import sprue.api.driver as driver
    seen = []
    monkeypatch.setattr(driver, "load_stablehlo", lambda path: seen.append(path) or "loaded")
    p = tmp_path / "m.txt"
    p.write_text("module {\n  func.func @main() {\n    return\n  }\n}\n")
    (tmp_path / "x.mlir").write_text("")
    assert sprue.load(p) == "loaded" and sprue.load(tmp_path / "x.mlir") == "loaded"
    assert seen == [p, tmp_path / "x.mlir"]


# -- variable names: past the 220th, the name sequence reaches the reader's keywords ------------------
def test_100_layer_mlp_round_trips(tmp_path):
    """The 221st name of the sequence is `in`: a 100-layer MLP's saved text must not use it."""
    rng = np.random.default_rng(0)
    layers = [(rng.normal(size=(4, 4)) / 2, rng.normal(size=4)) for _ in range(100)]

    @sprue.qjit
    def mlp(x):
        for w, b in layers:
            x = jnp.tanh(x @ w + b)
        return x

    x = rng.normal(size=(2, 4))
    expected = x
    for w, b in layers:
        expected = np.tanh(expected @ w + b)
    np.testing.assert_allclose(mlp(x), expected, rtol=1e-12)
    path = sprue.save(mlp, tmp_path / "mlp.jaxpr")
    words = set(path.read_text().replace("(", " ").replace(")", " ").split())
    assert {"il", "im", "io", "ip"} <= {w.split(":")[0] for w in words}   # the sequence skips `in`
    g = sprue.load(path)
    np.testing.assert_allclose(g(x), expected, rtol=1e-12)


def test_10000_variable_program_round_trips():
    from sprue.io.jaxpr_lexer import RESERVED_NAMES
    from sprue.trace.tracing import eval_jaxpr

    def f(x, y):
        for i in range(5000):
            x = x * 0.5 + y
        return x

    x, y = np.array([1.0, -2.0]), np.array([0.25, 3.0])
    closed = sprue.make_jaxpr(f)(x, y)
    text = sprue.io.saved_format.to_text(closed)
    names = {line.split(":")[0].strip() for line in text.splitlines() if " = " in line}
    assert len(names) == 10000 and not names & RESERVED_NAMES
    back, n_implicit, arg_names = parse_saved(text)
    assert str(back) == str(closed) and n_implicit == 0 and arg_names == ["arg0", "arg1"]
    expected = x
    for _ in range(5000):
        expected = expected * 0.5 + y
    np.testing.assert_array_equal(eval_jaxpr(back.jaxpr, back.consts, x, y)[0], expected)


def test_300_constants_keep_their_header_names(tmp_path):
    """The header names constants by position (`# const b:...`): it must follow the printer's
    sequence past the skipped keywords."""
    consts = [np.full(2, float(i)) for i in range(300)]

    @sprue.qjit
    def f(x):
        for c in consts:
            x = x + c
        return x

    x = np.array([1.0, 2.0])
    f(x)
    path = sprue.save(f, tmp_path / "consts.jaxpr")
    text = path.read_text()
    assert "# const im:f64[2]" in text and "# const io:f64[2]" in text and "# const in:" not in text
    np.testing.assert_array_equal(sprue.load(path)(x), x + sum(range(300)))


def test_loaded_programs_take_their_dtypes_only(tmp_path):
    f = sprue.qjit(lambda x: x * 2.0)
    f(np.ones(3))
    path = sprue.save(f, tmp_path / "f.jaxpr")
    g = sprue.load(path)
    with pytest.raises(sprue.SprueTypeError, match=r"f\(\): argument 'x' is declared f64 by the saved program but got"
                       r" an array of shape \(3,\) of dtype float32: sprue does not convert arguments silently; pass"
                       r" x.astype\(np.float64\), or load with sprue.load\(path, cast_arguments=True\)"):
        g(np.ones(3, np.float32))
    with pytest.raises(sprue.SprueTypeError, match=r"argument 'x': expected f64\[3\], got a numpy masked array"):
        g(np.ma.masked_array(np.ones(3), mask=[1, 0, 0]))
    got = sprue.load(path, cast_arguments=True)(np.ones(3, np.float32))
    assert got.dtype == np.float64 and np.array_equal(got, [2.0, 2.0, 2.0])


def test_negative_axes_in_a_read_jaxpr_count_from_the_end(tmp_path):
    # the primitives' shape rules take axes counted from the end; their lowerings did not (a fuzzed
    # jaxpr's reduce_sum[axes=(-1,)] failed an assertion of the lowering)
    path = tmp_path / "negative_axes.jaxpr"
    path.write_text("""{ lambda ; a:f64[3,4]. let
    b:f64[3] = reduce_sum[axes=(-1,) out_sharding=None] a
    c:f64[3,4] = sort[dimension=-1 is_stable=True num_keys=1] a
    d:f64[3,4] = cumsum[axis=-1 reverse=False] a
    e:i64[4] = argmax[axes=(-2,) index_dtype=int64] a
    f:f64[3,4] = rev[dimensions=(-1,)] a
  in (b, c, d, e, f) }""")
    x = np.random.default_rng(0).standard_normal((3, 4))
    b, c, d, e, f = sprue.load(path)(x)
    np.testing.assert_allclose(b, x.sum(-1))
    np.testing.assert_array_equal(c, np.sort(x, -1))
    np.testing.assert_allclose(d, np.cumsum(x, -1))
    np.testing.assert_array_equal(e, np.argmax(x, 0))
    np.testing.assert_array_equal(f, x[:, ::-1])
