"""Saved programs whose control flow has bodies over arrays of run-time size (qjit with
abstracted_axes): sprue.save -> sprue.load / `sprue compile` and the jaxpr printer -> reader.

A traced body's size consts bind the enclosing jaxpr's dimension variables (`a:i64[] b:f64[a,4]` in
a body handed `n`: b is f64[n,4]); the reader must bind them the same way, or the body's types do
not fit its operands (`f64[d1,4] vs f64[n,4]`). Every case compares with numpy on two sizes."""
import subprocess

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from sprue.io.jaxpr_lexer import JaxprError
from sprue.io.jaxpr_parser import parse_jaxpr
from sprue.tools.cli import main

SIZES = (3, 7)


# -- the programs and their numpy references -------------------------------------------------------
def fori(x, w):   # carries an [n,4] array, closes over another
    return lax.fori_loop(0, 3, lambda i, a: a * 0.5 + w * i, x)


def fori_np(x, w):
    a = x
    for i in range(3):
        a = a * 0.5 + w * i
    return a


def while_(x, w):   # the cond function closes over an [n,4] array too
    return lax.while_loop(lambda c: c[0] < 4 + 0 * jnp.sum(w > 9.0), lambda c: (c[0] + 1, c[1] * 0.5 + w),
                          (0, x))[1]


def while_np(x, w):
    a = x
    for _ in range(4):
        a = a * 0.5 + w
    return a


def cond_(x, w):
    return lax.cond(jnp.sum(x) > 0, lambda a, b: a + b, lambda a, b: a - b, x, w)


def cond_np(x, w):
    return x + w if x.sum() > 0 else x - w


def switch_(x, w):
    return lax.switch(jnp.sum(x > 0.5), [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b], x, w)


def switch_np(x, w):
    return [x + w, x - w, x * w][min(int((x > 0.5).sum()), 2)]


def scan_(x, w):   # scans x's rows, closes over w
    return lax.scan(lambda c, r: (c + r * w[0], jnp.sum(c) * r), jnp.zeros(x.shape[1]), x)


def scan_np(x, w):
    c, ys = np.zeros(x.shape[1]), []
    for r in x:
        ys.append(c.sum() * r)
        c = c + r * w[0]
    return c, np.array(ys)


def nested(x, w):
    return lax.fori_loop(0, 3, lambda i, a: lax.fori_loop(0, 2, lambda j, b: b * 0.9 + w * j + i, a), x)


def nested_np(x, w):
    a = x
    for i in range(3):
        for j in range(2):
            a = a * 0.9 + w * j + i
    return a


def cond_in_loop(x, w):
    return lax.fori_loop(0, 4, lambda i, a: lax.cond(i % 2 == 0, lambda b: b + w, lambda b: b * 0.5, a), x)


def cond_in_loop_np(x, w):
    a = x
    for i in range(4):
        a = a + w if i % 2 == 0 else a * 0.5
    return a


def scan_in_while(x, w):
    def body(c):
        a, _ = lax.scan(lambda s, r: (s + r, s), c[1], w)
        return c[0] + 1, a * 0.1
    return lax.while_loop(lambda c: c[0] < 2, body, (0, x[0]))[1]


def scan_in_while_np(x, w):
    a = x[0]
    for _ in range(2):
        a = (a + w.sum(0)) * 0.1
    return a


def deep(x, w):   # a cond in a scan in a fori_loop; one branch uses the size const, the other not
    def fbody(i, a):
        def sbody(c, r):
            return lax.cond(jnp.sum(r) > 0, lambda: c + r * a[0], lambda: c - r), jnp.sum(c)
        c, ys = lax.scan(sbody, a[0] * 0, w)
        return a * 0.5 + c + jnp.sum(ys)
    return lax.fori_loop(0, 2, fbody, x)


def deep_np(x, w):
    a = x
    for _ in range(2):
        c, total = a[0] * 0, 0.0
        for r in w:
            total += c.sum()
            c = c + r * a[0] if r.sum() > 0 else c - r
        a = a * 0.5 + c + total
    return a


def half_to_end(x, w):   # bounds computed from the size
    return lax.fori_loop(x.shape[0] // 2, x.shape[0], lambda i, a: a + w[i] * x[i], jnp.zeros(4))


def half_to_end_np(x, w):
    return (w * x)[len(x) // 2:].sum(0)


def rows_loop(x, w):   # the trip count is the run-time size
    return lax.fori_loop(0, x.shape[0], lambda i, acc: acc + x[i] * w[i], jnp.zeros(x.shape[1]))


def rows_loop_np(x, w):
    return (x * w).sum(0)


def resizing(x, w):
    def body(c):
        return c[0] + 1, jnp.concatenate([c[1], c[1][:1] * 2.0])
    return lax.while_loop(lambda c: c[0] < 3, body, (0, x[:, 0]), allow_array_resizing=True)[1] + 0.0


def resizing_np(x, w):
    a = x[:, 0]
    for _ in range(3):
        a = np.concatenate([a, a[:1] * 2.0])
    return a


def grad_through(x, w):   # differentiates through the loop
    def loss(w):
        return jnp.sum(lax.fori_loop(0, 3, lambda i, v: jnp.tanh(v * w), x))
    return sprue.grad(loss)(w)


def grad_through_np(x, w):
    vs = [x]
    for _ in range(3):
        vs.append(np.tanh(vs[-1] * w))
    g, dw = np.ones_like(x), np.zeros_like(w)
    for k in range(3, 0, -1):
        d = g * (1 - vs[k] ** 2)
        dw += d * vs[k - 1]
        g = d * w
    return dw


def mlp_train(w1, b1, w2, b2, x, y):   # benchmarks/program_sources.py's: grad steps in a fori_loop
    def loss(params):
        a1, c1, a2, c2 = params
        h = jnp.tanh(x @ a1 + c1)
        z = h @ a2 + c2
        z = z - jnp.max(z, axis=1, keepdims=True)
        logp = z - jnp.log(jnp.sum(jnp.exp(z), axis=1, keepdims=True))
        return -jnp.sum(logp * y) / x.shape[0]

    def step(i, params):
        g = sprue.grad(loss)(params)
        return tuple(p - 0.5 * gp for p, gp in zip(params, g))
    params = lax.fori_loop(0, 3, step, (w1, b1, w2, b2))
    return params + (loss(params),)


def mlp_train_np(w1, b1, w2, b2, x, y):
    def forward(a1, c1, a2, c2):
        h = np.tanh(x @ a1 + c1)
        z = h @ a2 + c2
        z = z - z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        return h, np.exp(logp), -(logp * y).sum() / len(x)
    params = (w1, b1, w2, b2)
    for _ in range(3):
        a1, c1, a2, c2 = params
        h, p, _ = forward(*params)
        dz = (p * y.sum(axis=1, keepdims=True) - y) / len(x)   # softmax cross-entropy
        dpre = dz @ a2.T * (1 - h ** 2)
        grads = (x.T @ dpre, dpre.sum(0), h.T @ dz, dz.sum(0))
        params = tuple(q - 0.5 * g for q, g in zip(params, grads))
    return params + (forward(*params)[2],)


def _pair(n, seed):
    r = np.random.default_rng(seed)
    return r.standard_normal((n, 4)), r.uniform(0.2, 0.9, (n, 4))


def _mlp_args(n, seed):   # the benchmark's layer sizes, n examples
    r = np.random.default_rng(seed)
    return (0.3 * r.standard_normal((64, 128)), np.zeros(128), 0.3 * r.standard_normal((128, 10)), np.zeros(10),
            r.standard_normal((n, 64)), np.eye(10)[r.integers(0, 10, n)])


BOTH = ({0: "n"}, {0: "n"})
CASES = {
    "fori": (fori, fori_np, _pair, BOTH),
    "while": (while_, while_np, _pair, BOTH),
    "cond": (cond_, cond_np, _pair, BOTH),
    "switch": (switch_, switch_np, _pair, BOTH),
    "scan": (scan_, scan_np, _pair, BOTH),
    "nested": (nested, nested_np, _pair, BOTH),
    "cond_in_loop": (cond_in_loop, cond_in_loop_np, _pair, BOTH),
    "scan_in_while": (scan_in_while, scan_in_while_np, _pair, BOTH),
    "deep": (deep, deep_np, _pair, BOTH),
    "half_to_end": (half_to_end, half_to_end_np, _pair, BOTH),
    "rows_loop": (rows_loop, rows_loop_np, _pair, BOTH),
    "resizing": (resizing, resizing_np, _pair, BOTH),
    "grad_through": (grad_through, grad_through_np, _pair, BOTH),
    "mlp_train": (mlp_train, mlp_train_np, _mlp_args, (None, None, None, None, {0: "n"}, {0: "n"})),
}


def _traced(name):
    fn, _, make, axes = CASES[name]
    f = sprue.qjit(fn, abstracted_axes=axes)
    f(*make(2, 0))
    return f


def _check(g, name):
    """g's results equal numpy's on two sizes (cond and switch: each branch taken)."""
    _, ref, make, _ = CASES[name]
    for n in SIZES:
        for seed in (1, 2, 3):
            args = make(n, seed)
            if name in ("cond", "switch") and seed > 1:
                args = (args[0] + (0.8 if seed == 2 else -0.8), args[1])
            got, want = g(*args), ref(*args)
            got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
            assert len(got) == len(want)
            for a, b in zip(got, want):
                assert a.shape == np.shape(b)
                np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


# -- save -> load, and the printer's text -> the reader ----------------------------------------------
@pytest.mark.parametrize("name", list(CASES))
def test_saved_dynamic_control_flow_loads_and_computes(tmp_path, name):
    f = _traced(name)
    path = sprue.save(f, tmp_path / f"{name}.jaxpr")
    assert "# implicit a=n" in path.read_text()
    g = sprue.load(path)
    assert str(g.jaxpr) == str(f.jaxpr)   # read back to the very jaxpr that was saved
    _check(g, name)
    assert g.compile_count == 1   # one compilation serves both sizes


@pytest.mark.parametrize("name", list(CASES))
def test_printed_dynamic_control_flow_reads_back(name):
    f = _traced(name)
    text = str(f.jaxpr)
    closed, n_implicit = parse_jaxpr(text)
    assert n_implicit == 1 and str(closed) == text


@pytest.mark.parametrize("name", ["scan", "mlp_train"])
def test_printed_text_loads_as_a_program(tmp_path, name):
    path = tmp_path / f"{name}.jaxpr"
    path.write_text(str(_traced(name).jaxpr))   # JAX's format, no header: the sizes are inferred
    _check(sprue.load(path), name)


def test_a_called_function_with_a_loop_round_trips(tmp_path):
    # pjit: the reader inlines the callee, whose parameters are the caller's operands
    inner = sprue.qjit(fori, abstracted_axes=BOTH)
    f = sprue.qjit(lambda x, w: inner(x, w) + inner(x[:-1], w[:-1]).sum(), abstracted_axes=BOTH)
    f(*_pair(2, 0))
    assert "pjit[" in str(f.jaxpr)
    g = sprue.load(sprue.save(f, tmp_path / "calls.jaxpr"))
    for n in SIZES:
        x, w = _pair(n, n)
        np.testing.assert_allclose(g(x, w), fori_np(x, w) + fori_np(x[:-1], w[:-1]).sum(), rtol=1e-12)


def test_string_params_print_quoted_unless_a_name():
    closed = sprue.make_jaxpr(lambda x: (lax.check(x[0] > 0, "x[0]: must be > 0 'really'"), x + 1)[1])(np.ones(3))
    text = str(closed)
    assert "check[message=\"x[0]: must be > 0 'really'\"]" in text
    back, _ = parse_jaxpr(text)
    assert [e.params["message"] for e in back.jaxpr.eqns if "message" in e.params] == ["x[0]: must be > 0 'really'"]


def test_a_size_expression_handed_to_a_body_types_it(tmp_path):
    # JAX's form: the body gets the size n+1 as an operand (f) and sizes its iota with it; f's
    # value is e+1, e binding n: the iota is i64[e+1] in the body
    path = tmp_path / "expr.jaxpr"
    path.write_text("""{ lambda ; a:i64[] b:f64[a]. let
    c:i64[] = add a 1:i64[]
    d:f64[a] = for_loop[body_jaxpr={ lambda ; e:i64[] f:i64[] g:i64[] h:f64[e]. let
        i:i64[e+1] = iota[dimension=0 dtype=int64 shape=(None,) sharding=None] f
        j:i64[] = reduce_sum[axes=(0,)] i
        k:f64[] = convert_element_type[new_dtype=float64 weak_type=False] j
        l:f64[e] = add h k
      in (l,) } body_nconsts=2] a c 0:i64[] 3:i64[] 1:i64[] b
  in (d,) }
""")
    g = sprue.load(path)
    for n in SIZES:
        x = np.arange(float(n))
        np.testing.assert_array_equal(g(x), x + 3 * (n * (n + 1) // 2))


# -- `sprue compile` on the saved file ---------------------------------------------------------------
def test_cli_compiles_the_saved_training_program(tmp_path, capsys):
    path = sprue.save(_traced("mlp_train"), tmp_path / "mlp_dyn.jaxpr")
    assert main(["compile", str(path), "-o", str(tmp_path / "out")]) == 0, capsys.readouterr().err
    header = (tmp_path / "out" / "mlp_dyn.h").read_text()
    assert "int64_t n, const memref_f64_2d *w1" in header and "const memref_f64_2d *x" in header


def test_cli_library_of_a_saved_loop_runs_on_two_sizes(tmp_path):
    path = sprue.save(_traced("fori"), tmp_path / "fori.jaxpr")
    assert main(["compile", str(path), "-o", str(tmp_path), "--emit", "a"]) == 0
    src = tmp_path / "use.c"
    src.write_text('#include <stdio.h>\n#include "fori.h"\nint main(void) {\n'
                   '  int64_t sizes[2] = {3, 7}, k, i;\n'
                   '  for (k = 0; k < 2; ++k) {\n'
                   '    int64_t n = sizes[k]; double x[28], w[28]; fori_results r;\n'
                   '    for (i = 0; i < 4 * n; ++i) { x[i] = 0.25 * i - 1.0; w[i] = 1.0 + 0.125 * i; }\n'
                   '    memref_f64_2d xd = {x, x, 0, {n, 4}, {4, 1}}, wd = {w, w, 0, {n, 4}, {4, 1}};\n'
                   '    if (fori(&r, n, &xd, &wd) != 0) return 1;\n'
                   '    for (i = 0; i < 4 * n; ++i) printf("%.17g ", r.result0.aligned[i]);\n'
                   '    printf("\\n"); fori_free_results(&r);\n'
                   '  }\n  return 0; }\n')
    subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", f"-I{tmp_path}", str(src), str(tmp_path / "libfori.a"),
                    "-lm", "-o", str(tmp_path / "use")], check=True)
    lines = subprocess.run([str(tmp_path / "use")], capture_output=True, text=True, check=True).stdout.splitlines()
    for n, line in zip(SIZES, lines, strict=True):
        x = (0.25 * np.arange(4 * n) - 1.0).reshape(n, 4)
        w = (1.0 + 0.125 * np.arange(4 * n)).reshape(n, 4)
        np.testing.assert_allclose(np.array(line.split(), float).reshape(n, 4), fori_np(x, w), rtol=1e-15)


# -- malformed files still fail clearly --------------------------------------------------------------
def _saved_fori(tmp_path) -> str:
    return sprue.save(_traced("fori"), tmp_path / "fori.jaxpr").read_text()


def _load_error(tmp_path, text) -> str:
    bad = tmp_path / "bad.jaxpr"
    bad.write_text(text)
    with pytest.raises(JaxprError) as info:
        sprue.load(bad)
    return str(info.value)


def test_a_body_parameter_of_another_size_is_an_error(tmp_path):
    # the body is consistent in itself, its arrays typed [a,5], but handed [n,4] arrays
    text = _saved_fori(tmp_path)
    start, end = text.index("body_jaxpr={"), text.index("in (i,) }")
    assert text[start:end].count("f64[a,4]") == 6
    err = _load_error(tmp_path, text[:start] + text[start:end].replace("f64[a,4]", "f64[a,5]").replace(
        "shape=(None, 4)", "shape=(None, 5)") + text[end:])
    assert err == (f"{tmp_path / 'bad.jaxpr'}:5:5: for_loop: the body's parameters do not fit its operands:"
                   f" output 1: f64[n,5] vs f64[n,4]")


def test_a_body_size_that_is_not_the_operands_is_an_error(tmp_path):
    # the body's size parameter is handed the trip count's lower bound, not the arrays' size
    text = _saved_fori(tmp_path)
    assert "body_nconsts=2" in text and "] a c 0:i64[] 3:i64[] 1:i64[] b" in text
    err = _load_error(tmp_path, text.replace("] a c 0:i64[] 3:i64[] 1:i64[] b", "] 2:i64[] c 0:i64[] 3:i64[] 1:i64[] b"))
    assert "for_loop: the body's parameters do not fit its operands: output 1: f64[d" in err
    assert err.endswith(" vs f64[n,4]") and err.startswith(f"{tmp_path / 'bad.jaxpr'}:5:5: ")


def test_a_body_mentioning_an_unbound_size_is_an_error(tmp_path):
    text = _saved_fori(tmp_path)
    text = text.replace("c:i64[] d:f64[a,4].", "c:i64[] d:f64[m,4].")
    line = text.splitlines()[5]
    col = line.index("[m,4]") + 2   # the name m
    err = _load_error(tmp_path, text)
    assert err == f"{tmp_path / 'bad.jaxpr'}:6:{col}: dimension 'm' is not a variable bound before this type"


def test_a_wrong_const_count_is_an_error(tmp_path):
    text = _saved_fori(tmp_path)
    err = _load_error(tmp_path, text.replace("body_nconsts=2", "body_nconsts=1"))
    # the operands shift: the array after the one const stands where the lower bound goes
    assert err == f"{tmp_path / 'bad.jaxpr'}:5:5: for_loop: the lower bound must be an integer scalar, got f64[n,4]"
    for count in (9, -1):   # more consts than operands, or a negative count: nothing to bind
        err = _load_error(tmp_path, text.replace("body_nconsts=2", f"body_nconsts={count}"))
        assert err == f"{tmp_path / 'bad.jaxpr'}:5:5: for_loop needs lower, upper and step operands"
