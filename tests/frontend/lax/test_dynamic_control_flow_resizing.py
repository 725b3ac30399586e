"""Loops that resize their arrays (`allow_array_resizing=True`): growing and shrinking carries,
starting from static and from dynamic shapes, sizes bound by the loop index (the seed's OutDBIdx
case), carries that share a size, captures of outer dynamic arrays; their jaxprs (implicit sizes
first, `nimplicit`), eager and compiled once at sizes 0, 1, 3 and a large one, against plain
Python/numpy references; and the errors."""
import re

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from sprue.base.errors import SprueTypeError, SprueValueError
from sprue.ir.core import ShapedArray
from sprue.ir.shapes import DimVar, dim
from sprue.lax.control_flow.bodies import trace_body
from sprue.trace.tracing import dim_value, eval_jaxpr
from tests.helpers.arrays import SIZES, agree, vec


def check_calls(fn, ref, calls, axes=None):
    """fn eagerly and compiled once agrees with ref on every argument tuple in `calls`."""
    compiled = sprue.qjit(fn, abstracted_axes=axes)
    for args in calls:
        want = ref(*args)
        for got in (fn(*args), compiled(*args)):
            if isinstance(want, tuple):
                for g, w in zip(got, want):
                    agree(g, w)
            else:
                agree(got, want)
    assert compiled.compile_count == 1
    return compiled


# -- growing ----------------------------------------------------------------------------------------
def grow(x, n):
    @sprue.for_loop(0, n, 1, allow_array_resizing=True)
    def loop(i, a):
        return jnp.concatenate([a, jnp.ones(1) * i])   # one element more per trip
    return loop(x)


def grow_ref(x, n):
    return np.concatenate([x, np.arange(float(n))])


def test_growing_from_a_static_shape():
    check_calls(grow, grow_ref, [(vec(2), n) for n in SIZES])


def test_growing_from_a_dynamic_shape():
    check_calls(grow, grow_ref, [(vec(m), n) for m in SIZES for n in (0, 1, 3, 50)], axes=({0: "m"}, None))


def test_growing_jaxpr_carries_the_size_first():
    text = str(sprue.make_jaxpr(grow)(vec(2), 3))
    # the loop's results: the final size, then the array typed by it
    m = re.search(r"\n    (\w+):i64\[\] (\w+):f64\[\1\] = for_loop\[apply_reverse_transform=False\n", text)
    assert m, text
    # the body: index, implicit size, the carry typed by it; it returns the new size first
    body = re.search(r"body_jaxpr=\{ lambda ; (\w+):i64\[\] (\w+):i64\[\] (\w+):f64\[\2\]\. let\n", text)
    assert body, text
    assert re.search(r"(\w+):f64\[" + body[2] + r"\+1\] = concatenate\[dimension=0\] " + body[3] + r" \w+\n", text), text
    assert re.search(r"(\w+):i64\[\] = add 1:i64\[\] " + body[2] + r"\n\s+in \(\1, \w+\) \}", text), text
    assert re.search(r"body_nconsts=0\n\s+nimplicit=1\n\s+preserve_dimensions=False\] 0:i64\[\] \w+ 1:i64\[\]"
                     r" 2:i64\[\] \w+\n", text), text
    assert text.endswith(f"in ({m[2]},) }}"), text


def test_a_resizing_for_loop_compiles_to_a_general_while(tmp_path):
    # not an scf.for: MLIR's canonicalization of scf.for assumes each trip keeps the carry's type
    compiled = sprue.qjit(grow, keep_intermediate=tmp_path)
    agree(compiled(vec(2), 3), grow_ref(vec(2), 3))
    assert "sprue.counted_loop" not in compiled.mlir
    (legalized,) = tmp_path.glob("*.01_legalized.mlir")
    assert "scf.while" in legalized.read_text()


def test_growing_with_the_jax_spellings():
    def f(x, n):
        a = lax.fori_loop(0, n, lambda i, a: jnp.concatenate([a, a[-1:] + 1.0]), x, allow_array_resizing=True)
        # a size compared with a value is a run-time question: jnp.less gives a traced bool
        return lax.while_loop(lambda b: jnp.less(b.shape[0], 2 * n + 1), lambda b: jnp.concatenate([b, jnp.zeros(1)]),
                              a, allow_array_resizing=True)

    def ref(x, n):
        a = x
        for _ in range(n):
            a = np.concatenate([a, a[-1:] + 1.0])
        while len(a) < 2 * n + 1:
            a = np.concatenate([a, np.zeros(1)])
        return a
    check_calls(f, ref, [(vec(m), n) for m in (1, 3, 1000) for n in (0, 1, 3, 20)], axes=({0: "m"}, None))


def test_doubling_with_a_while_loop():
    def f(x, limit):
        @sprue.while_loop(lambda a: jnp.less(a.shape[0], limit), allow_array_resizing=True)
        def loop(a):
            return jnp.concatenate([a, a * 2.0])
        return loop(x)

    def ref(x, limit):
        a = x
        while len(a) < limit:
            a = np.concatenate([a, a * 2.0])
        return a
    check_calls(f, ref, [(vec(m), limit) for m in (1, 3, 1000) for limit in (0, 1, 5, 5000)], axes=({0: "m"}, None))


# -- shrinking --------------------------------------------------------------------------------------
def shrink(x, t):
    @sprue.while_loop(lambda a: jnp.sum(a) > t, allow_array_resizing=True)
    def loop(a):
        return a[1:]
    return loop(x)


def shrink_ref(x, t):
    a = x
    while np.sum(a) > t:
        a = a[1:]
    return a


def test_shrinking_from_a_static_shape():
    check_calls(shrink, shrink_ref, [(np.ones(5), t) for t in (0.0, 2.5, 10.0)])


def test_shrinking_from_a_dynamic_shape():
    check_calls(shrink, shrink_ref, [(vec(n), t) for n in SIZES for t in (0.0, 0.5, 100.0)], axes=({0: "n"}, None))


def test_shrinking_a_matrix_by_rows_keeps_its_static_columns():
    def f(m, k):
        return lax.fori_loop(0, k, lambda i, a: a[1:] * 2.0, m, allow_array_resizing=True)

    def ref(m, k):
        for _ in range(k):
            m = m[1:] * 2.0
        return m
    compiled = check_calls(f, ref, [(np.random.default_rng(n).random((n, 3)), k) for n in SIZES for k in (0, 2)],
                           axes=({0: "n"}, None))
    assert re.search(r"(\w+):i64\[\] \w+:f64\[\1,3\] = for_loop", str(compiled.jaxpr)), compiled.jaxpr


# -- sizes from the loop index (the seed's OutDBIdx) ------------------------------------------------
def test_returning_an_array_sized_by_the_loop_index():
    def f(n):
        @sprue.for_loop(0, n, 1, allow_array_resizing=True)
        def loop(i, a):
            return jnp.arange(i) * 1.5
        return loop(jnp.zeros(7))

    def ref(n):
        return np.arange(n - 1) * 1.5 if n > 0 else np.zeros(7)
    compiled = check_calls(f, ref, [(n,) for n in SIZES])
    text = str(compiled.jaxpr)
    # the body returns the index itself as the new size
    assert re.search(r"body_jaxpr=\{ lambda ; (\w+):i64\[\] (\w+):i64\[\] \w+:f64\[\2\]\. let\n.*?"
                     r"in \(\1, \w+\) \}", text, re.S), text


# -- sharing sizes ----------------------------------------------------------------------------------
def test_carries_grown_in_lockstep_share_a_size():
    def f(x):
        def body(i, c):
            a, b = c
            s = a + b                     # one size: they entered equal and grow the same way
            return jnp.concatenate([s, jnp.ones(1)]), jnp.concatenate([a * b, jnp.zeros(1)])
        return lax.fori_loop(0, 3, body, (x, x * 2.0), allow_array_resizing=True)

    def ref(x):
        a, b = x, x * 2.0
        for _ in range(3):
            a, b = np.concatenate([a + b, np.ones(1)]), np.concatenate([a * b, np.zeros(1)])
        return a, b
    compiled = check_calls(f, ref, [(vec(n),) for n in SIZES], axes={0: "n"})
    text = str(compiled.jaxpr)
    assert "nimplicit=1" in text and "check" not in text, text
    assert re.search(r"(\w+):i64\[\] \w+:f64\[\1\] \w+:f64\[\1\] = for_loop", text), text


def test_carries_that_diverge_get_a_size_each():
    def f(x):
        return lax.fori_loop(0, 2, lambda i, c: (jnp.concatenate([c[0], jnp.ones(1)]), c[1][1:]), (x, x),
                             allow_array_resizing=True)
    compiled = check_calls(f, lambda x: (np.concatenate([x, np.ones(2)]), x[2:]), [(vec(n),) for n in SIZES],
                           axes={0: "n"})
    text = str(compiled.jaxpr)
    assert "nimplicit=2" in text
    assert re.search(r"(\w+):i64\[\] (\w+):i64\[\] \w+:f64\[\1\] \w+:f64\[\2\] = for_loop", text), text


def test_a_resizing_loop_still_captures_arrays_of_its_kept_sizes():
    # b keeps its entry size n, so `b + x` needs no check; a grows (its own size: `a * a` is fine)
    def f(x):
        def body(i, c):
            a, b = c
            return jnp.concatenate([a * a, jnp.sum(b, keepdims=True)]), b + x
        return lax.fori_loop(0, 3, body, (x, x), allow_array_resizing=True)

    def ref(x):
        a, b = x, x
        for _ in range(3):
            a, b = np.concatenate([a * a, np.sum(b, keepdims=True)]), b + x
        return a, b
    compiled = check_calls(f, ref, [(vec(n),) for n in SIZES], axes={0: "n"})
    text = str(compiled.jaxpr)
    assert "nimplicit=1" in text and "check" not in text, text


def test_the_seed_example_with_resizing_allowed():
    # the seed's program with allow_array_resizing: nothing resizes, so nothing becomes implicit
    # and `a + a0` still needs no run-time check
    @sprue.qjit
    def circuit(sz: int):
        a0 = jnp.ones([sz], dtype=float)

        @sprue.for_loop(0, 10, 1, allow_array_resizing=True)
        def loop(i, a):
            return a + a0
        return a0 + loop(a0)
    for sz in SIZES:
        agree(circuit(sz), np.full(sz, 12.0))
    text = str(circuit.jaxpr)
    assert "nimplicit=0" in text and "preserve_dimensions=False" in text, text
    assert circuit.compile_count == 1


# -- checks and nesting -----------------------------------------------------------------------------
def test_a_check_on_a_resized_carry_fails_with_its_message():
    # the grown carry no longer provably has y's size: the multiply is checked on every trip
    def f(x, y, n):
        @sprue.for_loop(0, n, 1, allow_array_resizing=True)
        def loop(i, a):
            return jnp.concatenate([a, jnp.sum(a * y, keepdims=True)])
        return loop(x)
    compiled = sprue.qjit(f, abstracted_axes=({0: "m"}, {0: "k"}, None))
    agree(compiled(vec(3), vec(3, 1), 0), vec(3))
    agree(compiled(vec(3), vec(1, 1), 4), f(vec(3), vec(1, 1), 4))
    agree(f(vec(3), vec(1, 1), 2), np.concatenate([vec(3), [np.sum(vec(3) * vec(1, 1))],
                                                   [np.sum(np.concatenate([vec(3), [np.sum(vec(3) * vec(1, 1))]])
                                                           * vec(1, 1))]]))
    with pytest.raises(SprueValueError, match=r"^sprue.numpy.multiply: operands f64\[d\d+\] and f64\[k\] do not"
                                              r" broadcast"):
        compiled(vec(3), vec(3, 1), 2)        # the first trip passes (3 = 3), the second does not
    assert compiled.compile_count == 1


def test_a_resizing_while_whose_cond_has_a_check():
    def f(x, y):
        return lax.while_loop(lambda a: jnp.sum(a * y) < 100.0, lambda a: jnp.concatenate([a, a]), x,
                              allow_array_resizing=True)
    compiled = sprue.qjit(f, abstracted_axes=({0: "n"}, {0: "m"}))
    agree(compiled(np.ones(2), np.ones(1)), np.ones(128))
    agree(compiled(np.ones(1), np.ones(1) * 0.5), np.ones(256))
    with pytest.raises(SprueValueError, match=r"^sprue.numpy.multiply: operands f64\[d\d+\] and f64\[m\]"):
        compiled(np.ones(2), np.ones(2))     # 2 = 2 at entry, then 4 vs 2
    assert compiled.compile_count == 1


def test_a_growing_loop_nested_in_a_fixed_one():
    def f(x, n):
        def outer(j, acc):
            grown = lax.fori_loop(0, j, lambda i, a: jnp.concatenate([a, a[:1] + i]), x, allow_array_resizing=True)
            return acc + jnp.sum(grown)
        return lax.fori_loop(0, n, outer, 0.0)

    def ref(x, n):
        total = 0.0
        for j in range(n):
            a = x
            for i in range(j):
                a = np.concatenate([a, a[:1] + i])
            total += np.sum(a)
        return np.float64(total)
    check_calls(f, ref, [(vec(m), n) for m in (1, 3, 1000) for n in (0, 1, 4)], axes=({0: "m"}, None))


# -- errors -----------------------------------------------------------------------------------------
def test_resizing_never_changes_a_rank_or_a_dtype():
    with pytest.raises(SprueTypeError, match=r"^for_loop body changes the type of its carry: output 0: f64\[3\] vs"
                                             r" f64\[3,1\] \(carry in vs body out\)"):
        sprue.for_loop(0, 2, 1, allow_array_resizing=True)(lambda i, a: a[:, None])(np.ones(3))
    with pytest.raises(SprueTypeError, match=r"^while_loop body changes the type of its carry: output 0: i64\[3\] vs"
                                             r" f64\[3\]"):
        lax.while_loop(lambda a: a[0] < 0, lambda a: a * 0.5, np.zeros(3, np.int64), allow_array_resizing=True)


def test_allow_array_resizing_must_be_a_bool():
    with pytest.raises(SprueTypeError, match="^allow_array_resizing must be a bool, got str"):
        sprue.for_loop(0, 2, 1, allow_array_resizing="yes")


# -- the equation -----------------------------------------------------------------------------------
def test_a_resizing_jaxpr_evaluates_with_numpy():
    closed = sprue.make_jaxpr(grow)(vec(2), 3)
    for n in (0, 1, 4):
        (out,) = eval_jaxpr(closed.jaxpr, closed.consts, vec(2), n)
        agree(out, grow_ref(vec(2), n))


def test_the_equation_checks_its_implicit_sizes():
    dv = DimVar()
    body = trace_body("for_loop", lambda i, a: jnp.concatenate([a, a]),
                      [ShapedArray((), np.int64), dv, ShapedArray((dim(dv),), np.float64)],
                      lambda outs: [dim_value(outs[0].shape[0])])
    params = dict(body_jaxpr=body.jaxpr, body_nconsts=0, apply_reverse_transform=False, nimplicit=1)
    size, out = lax.for_loop_p.bind(0, 2, 1, 3, np.ones(3), preserve_dimensions=False, **params)
    assert size == 12 and out.shape == (12,)
    with pytest.raises(SprueValueError, match=r"for_loop: implicit sizes \(nimplicit=1\) need preserve_dimensions"):
        lax.for_loop_p.bind(0, 2, 1, 3, np.ones(3), preserve_dimensions=True, **params)
    with pytest.raises(SprueTypeError, match=r"for_loop: the body's parameters do not fit its operands: output 0:"
                                             r" f64\[d\d+\] vs f64\[3,1\]"):
        lax.for_loop_p.bind(0, 2, 1, 3, np.ones((3, 1)), preserve_dimensions=False, **params)
