"""Control flow over dynamically-shaped arrays, sizes kept (the seed's `preserve_dimensions`): loops,
scans and branches whose carries and operands have sizes known only at run time, loop bounds given
as sizes, sizes made from the loop index inside a body, and run-time checks inside regions. Each
program runs eagerly and compiled once (abstracted_axes, named-dim hints, int arguments) at sizes
0, 1, 3 and a large one, against plain numpy/Python references."""
from typing import Callable

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from sprue.base.errors import SprueTypeError, SprueValueError
from tests.helpers.arrays import SIZES, agree, vec
from tests.helpers.bufferization import buffer_ops_in_loops, compile_and_read


def check_sizes(fn: Callable, ref: Callable, make: Callable[[int], tuple], axes=None, sizes=SIZES,
                eager_sizes=None):
    """fn eagerly and compiled once (with `axes`) agrees with ref at every size. (Eagerly, a body that
    indexes a carry cannot be traced at the static size 0, as in JAX: `eager_sizes` leaves it out.)"""
    compiled = sprue.qjit(fn, abstracted_axes=axes)
    for n in sizes:
        args = make(n)
        want = ref(*args)
        eager = eager_sizes is None or n in eager_sizes
        for got in ((fn(*args),) if eager else ()) + (compiled(*args),):
            if isinstance(want, tuple):
                for g, w in zip(got, want):
                    agree(g, w)
            else:
                agree(got, want)
    assert compiled.compile_count == 1
    return compiled


# -- loops with dynamically-shaped carries ----------------------------------------------------------
def test_for_loop_carries_a_dynamic_array_and_captures_one_of_its_size():
    def f(x):
        @sprue.for_loop(0, 5, 1)
        def loop(i, a):
            return a * 0.5 + x          # the capture has the carry's size: no check needed
        return loop(x)

    def ref(x):
        a = x.copy()
        for _ in range(5):
            a = a * 0.5 + x
        return a
    compiled = check_sizes(f, ref, lambda n: (vec(n),), {0: "n"})
    assert "check" not in str(compiled.jaxpr)


def test_fori_loop_bound_is_an_arrays_size():
    def f(x):
        return lax.fori_loop(0, x.shape[0], lambda i, acc: acc + jnp.asarray(x)[i] * i, 0.0)
    check_sizes(f, lambda x: float(sum(x[i] * i for i in range(len(x)))), lambda n: (vec(n),), {0: "n"},
                eager_sizes=(1, 3, 1000))


def test_while_loop_with_a_dynamic_carry_and_a_counter():
    def f(x):
        @sprue.while_loop(lambda a, k: k < 4)
        def loop(a, k):
            return jnp.sqrt(a + 1.0), k + 1
        return loop(x, 0)

    def ref(x):
        a = x
        for _ in range(4):
            a = np.sqrt(a + 1.0)
        return a, np.int64(4)
    check_sizes(f, ref, lambda n: (vec(n),), {0: "n"})


def test_two_carries_of_one_size_mix_and_keep_it():
    def f(x, y):
        def body(i, c):
            a, b = c
            return a + b, a * b
        return lax.fori_loop(0, 3, body, (x, y))

    def ref(x, y):
        a, b = x, y
        for _ in range(3):
            a, b = a + b, a * b
        return a, b
    check_sizes(f, ref, lambda n: (vec(n), vec(n, 1)), {0: "n"})


def test_named_dim_hints_compile_at_decoration():
    @sprue.qjit
    def f(x: sprue.f64["n", 2], k: int):
        @sprue.for_loop(0, k, 1)
        def loop(i, a):
            return a[:, ::-1] + 1.0
        return loop(x)
    assert f.compile_count == 1
    for n in SIZES:
        x = np.arange(2.0 * n).reshape(n, 2)
        for k in (0, 1, 4):
            want = x[:, ::-1] + 1.0 if k % 2 else x.copy()
            if k:
                want = want + (k - 1 if k % 2 else k)
            agree(f(x, k), want)
    assert f.compile_count == 1


def test_traced_loop_bounds_and_a_negative_step():
    def f(x, lo, hi):
        @sprue.for_loop(hi, lo, -1)
        def loop(i, a):
            return a.at[i].set(a[i] * 10.0 + i)
        return loop(x)

    def ref(x, lo, hi):
        a = x.copy()
        for i in range(hi, lo, -1):
            a[i] = a[i] * 10.0 + i
        return a
    check_sizes(f, ref, lambda n: (vec(n), 0, n - 1), {0: "n"}, eager_sizes=(1, 3, 1000))


# -- sizes made inside a body -----------------------------------------------------------------------
def test_an_array_sized_by_the_loop_index():
    # the seed's OutDBIdx case, reduced inside the body: jnp.ones(i) has a size bound by the index
    def f(n):
        @sprue.for_loop(0, n, 1)
        def loop(i, acc):
            return acc + jnp.sum(jnp.arange(i) * 2.0) + jnp.ones(i).shape[0]
        return loop(0.0)
    check_sizes(f, lambda n: float(sum(sum(2.0 * j for j in range(i)) + i for i in range(n))), lambda n: (n,))


def test_nested_loops_with_sizes_from_both_indices():
    def f(n):
        def outer(i, acc):
            def inner(j, acc2):
                return acc2 + jnp.sum(jnp.ones(i * j + 1))
            return lax.fori_loop(0, i, inner, acc)
        return lax.fori_loop(0, n, outer, 0.0)
    check_sizes(f, lambda n: float(sum(i * j + 1 for i in range(n) for j in range(i))), lambda n: (n,),
                sizes=(0, 1, 3, 40))


# -- scan -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_over_a_dynamic_leading_axis(reverse):
    def f(x):
        return lax.scan(lambda c, v: (c + v, c * v), 0.0, x, reverse=reverse)

    def ref(x):
        c, ys = 0.0, np.zeros(len(x))
        order = range(len(x) - 1, -1, -1) if reverse else range(len(x))
        for i in order:
            c, ys[i] = c + x[i], c * x[i]
        return np.float64(c), ys
    check_sizes(f, ref, lambda n: (vec(n),), {0: "n"})


def test_scan_rows_of_a_matrix_with_a_static_row_size():
    def f(m):
        return lax.scan(lambda c, row: (c + row, jnp.sum(row * c)), jnp.zeros(3), m)

    def ref(m):
        c, ys = np.zeros(3), np.zeros(len(m))
        for i, row in enumerate(m):
            c, ys[i] = c + row, np.sum(row * c)
        return c, ys
    check_sizes(f, ref, lambda n: (np.random.default_rng(n).random((n, 3)),), {0: "n"})


def test_scan_rows_of_a_square_matrix_both_sizes_dynamic():
    def f(m):
        return lax.scan(lambda c, row: (c * 0.5 + row, row[::-1]), jnp.zeros(m.shape[1]), m)

    def ref(m):
        c, ys = np.zeros(m.shape[1]), np.zeros_like(m)
        for i, row in enumerate(m):
            c, ys[i] = c * 0.5 + row, row[::-1]
        return c, ys
    check_sizes(f, ref, lambda n: (np.random.default_rng(n).random((n, n)),), {0: "n", 1: "n"},
                sizes=(0, 1, 3, 200))


def test_scan_with_a_dynamic_carry_over_static_xs():
    def f(x):
        return lax.scan(lambda c, v: (c * v + 1.0, jnp.max(c, initial=-1.0)), x, np.arange(1.0, 5.0))

    def ref(x):
        c, ys = x, np.zeros(4)
        for i, v in enumerate(np.arange(1.0, 5.0)):
            c, ys[i] = c * v + 1.0, np.max(c, initial=-1.0)
        return c, ys
    check_sizes(f, ref, lambda n: (vec(n),), {0: "n"})


# -- branches ---------------------------------------------------------------------------------------
def test_cond_on_dynamic_operands():
    def f(x, t):
        return lax.cond(t > 0.5, lambda a: a * 2.0, lambda a: a[::-1] - 1.0, x)
    compiled = sprue.qjit(f, abstracted_axes=({0: "n"}, None))
    for n in SIZES:
        x = vec(n)
        for t in (0.0, 1.0):
            want = x * 2.0 if t > 0.5 else x[::-1] - 1.0
            agree(f(x, t), want)
            agree(compiled(x, t), want)
    assert compiled.compile_count == 1


def test_switch_and_catalyst_cond_capture_dynamic_arrays():
    def f(x, k):
        y = lax.switch(k, [lambda: x + 1.0, lambda: x * x, lambda: -x])

        @sprue.cond(k > 1)
        def pick():
            return y * 10.0

        @pick.otherwise
        def pick():
            return y + x
        return pick()

    def ref(x, k):
        y = [x + 1.0, x * x, -x][min(max(k, 0), 2)]
        return y * 10.0 if k > 1 else y + x
    compiled = sprue.qjit(f, abstracted_axes=({0: "n"}, None))
    for n in SIZES:
        x = vec(n)
        for k in (-1, 0, 1, 2, 5):
            agree(f(x, k), ref(x, k))
            agree(compiled(x, k), ref(x, k))
    assert compiled.compile_count == 1


def test_sizes_as_predicates_and_indices():
    def f(x):
        y = lax.cond(x.shape[0], lambda: x * 2.0, lambda: x)          # nonzero size: true
        return lax.switch(x.shape[0], [lambda: y, lambda: y + 1.0, lambda: -y])   # clamped index

    def ref(x):
        y = x * 2.0 if len(x) else x
        return [y, y + 1.0, -y][min(len(x), 2)]
    check_sizes(f, ref, lambda n: (vec(n),), {0: "n"})


# -- run-time checks inside regions -----------------------------------------------------------------
def test_a_failing_check_in_a_loop_body_raises_its_message():
    def f(x, n):
        def body(i, acc):
            lax.check(lax.lt(i, 5), "i must stay below 5")
            return acc + x
        return lax.fori_loop(0, n, body, x)
    compiled = sprue.qjit(f, abstracted_axes=({0: "n"}, None))
    for size in (0, 3):
        agree(compiled(vec(size), 4), vec(size) * 5)
        with pytest.raises(SprueValueError, match="^i must stay below 5$"):
            compiled(vec(size), 6)
    with pytest.raises(SprueValueError, match="^i must stay below 5$"):
        f(vec(3), 6)                                   # eagerly, the same message
    assert compiled.compile_count == 1


def test_a_broadcast_in_a_loop_body_is_checked_at_run_time():
    # y's size m is not provably the carry's n: sprue.numpy inserts a check inside the body
    def f(x, y):
        @sprue.for_loop(0, 3, 1)
        def loop(i, a):
            return a * 0.5 + jnp.sum(a * y)
        return loop(x)

    def ref(x, y):
        a = x
        for _ in range(3):
            a = a * 0.5 + np.sum(a * y)
        return a
    compiled = sprue.qjit(f, abstracted_axes=({0: "n"}, {0: "m"}))
    for n in SIZES:
        agree(compiled(vec(n), vec(n, 1)), ref(vec(n), vec(n, 1)))
    agree(compiled(vec(4), vec(1, 1)), ref(vec(4), vec(1, 1)))    # m = 1 broadcasts
    with pytest.raises(SprueValueError, match=r"^sprue.numpy.multiply: operands f64\[n\] and f64\[m\] do not"
                                              r" broadcast"):
        compiled(vec(3), vec(2))
    with pytest.raises(SprueValueError, match=r"multiply: operands could not be broadcast together: f64\[3\] and"
                                              r" f64\[2\]"):
        f(vec(3), vec(2))
    assert compiled.compile_count == 1


@pytest.mark.parametrize("where", ["while_body", "while_cond", "scan", "cond", "switch", "nested"])
def test_checks_thread_through_every_region(where):
    message = f"{where} check"

    def guard(t):
        lax.check(lax.lt(t, 3.0), message)

    def f(x, t):
        if where == "while_body":
            def body(c):
                guard(t + c[1])             # fails on the second trip when t = 2
                return c[0] + 1.0, c[1] + 1.0
            return lax.while_loop(lambda c: c[1] < 2.0, body, (x, 0.0))[0]
        if where == "while_cond":
            def cond(c):
                guard(t + c[1])
                return c[1] < 2.0
            return lax.while_loop(cond, lambda c: (c[0] + 1.0, c[1] + 1.0), (x, 0.0))[0]
        if where == "scan":
            def step(c, v):
                guard(t + c)
                return jnp.minimum(c + 1.0, 1.0), v + 2.0
            return lax.scan(step, 0.0, x)[1]
        if where == "cond":
            def yes(a):
                guard(t + 1.0)
                return a + 2.0
            return lax.cond(t > 1.0, yes, lambda a: a + 2.0, x)
        if where == "switch":
            def checked(a):
                guard(t + 1.0)
                return a + 2.0
            index = lax.convert_element_type(t, np.int32)
            return lax.switch(index, [lambda a: a + 2.0, lambda a: a + 2.0, checked], x)

        def inner(i, a):
            guard(t + i)
            return a + 1.0
        return lax.fori_loop(0, 2, lambda j, a: lax.fori_loop(0, 2, inner, a), x)

    compiled = sprue.qjit(f, abstracted_axes=({0: "n"}, None))
    for n in (0, 3, 1000):
        agree(compiled(vec(n), 0.0), vec(n) + (4.0 if where == "nested" else 2.0))   # every check holds
    with pytest.raises(SprueValueError, match=f"^{message}$"):
        compiled(vec(3), 2.0)
    with pytest.raises(SprueValueError, match=f"^{message}$"):
        f(vec(3), 2.0)
    assert compiled.compile_count == 1


def test_the_first_failure_across_trips_wins():
    def f(x, n):
        def body(i, a):
            lax.check(lax.ne(i, 2), "trip 2")
            lax.check(lax.ne(i, 1), "trip 1")
            return a + 1.0
        return lax.fori_loop(0, n, body, x)
    compiled = sprue.qjit(f, abstracted_axes=({0: "n"}, None))
    agree(compiled(vec(3), 1), vec(3) + 1.0)
    with pytest.raises(SprueValueError, match="^trip 1$"):
        compiled(vec(3), 5)


# -- in place ---------------------------------------------------------------------------------------
def test_a_fixed_size_dynamic_carry_is_updated_in_place(tmp_path):
    def f(x, k):
        return lax.fori_loop(0, k, lambda i, c: c.at[i].set(c[i] * 2.0 + 1.0), x)
    compiled = sprue.qjit(f, abstracted_axes=({0: "n"}, None), keep_intermediate=tmp_path)
    for n in (10, 100_000):
        x = np.linspace(0.0, 1.0, n)
        want = x.copy()
        want[:n // 2] = want[:n // 2] * 2.0 + 1.0
        agree(compiled(x, n // 2), want)
    (path,) = tmp_path.glob("*_bufferized.mlir")
    text = path.read_text()
    assert "scf.for" in text and "memref<?xf64>" in text
    assert buffer_ops_in_loops(text) == []
    assert compiled.compile_count == 1


def test_a_dynamic_while_carry_is_updated_in_place(tmp_path):
    def f(x):
        return lax.while_loop(lambda c: c[0] < 100.0, lambda c: c * 2.0 + 1.0, x)
    out, text = compile_and_read(f, (np.linspace(1.0, 2.0, 1000),), tmp_path)
    assert out.shape == (1000,)
    assert buffer_ops_in_loops(text) == []


# -- errors -----------------------------------------------------------------------------------------
def trace_error(fn, *args, axes={0: "n"}):
    compiled = sprue.qjit(fn, abstracted_axes=axes)
    with pytest.raises((SprueTypeError, SprueValueError)) as info:
        compiled(*args)
    return str(info.value)


def test_a_body_changing_a_size_without_resizing_names_both_types():
    text = trace_error(lambda x: lax.fori_loop(0, 2, lambda i, a: jnp.concatenate([a, jnp.ones(1)]), x), vec(3))
    assert text.startswith("fori_loop body changes the type of its carry: output 0: f64[n] vs f64[n+1] (carry in"
                           " vs body out); fori_loop keeps every array's size: pass allow_array_resizing=True"), text
    text = trace_error(lambda x: lax.while_loop(lambda a: a[0] > 0.0, lambda a: a[1:], x), vec(3))
    assert text.startswith("while_loop body changes the type of its carry: output 0: f64[n] vs f64["), text
    text = trace_error(lambda x: lax.scan(lambda c, v: (c[1:], v), x, x), vec(3))
    assert "scan body changes the type of its carry" in text and "a scan carry keeps its size" in text, text


def test_a_body_making_its_own_size_cannot_carry_it_without_resizing():
    def f(n):
        @sprue.for_loop(0, n, 1)
        def loop(i, a):
            return jnp.ones(i)
        return loop(jnp.ones(0))
    text = trace_error(f, 3, axes=None)
    assert text.startswith("for_loop body changes the type of its carry: output 0: f64[0] vs f64["), text
    assert "allow_array_resizing=True" in text


def test_branches_must_agree_on_sizes():
    text = trace_error(lambda x: lax.cond(x.shape[0], lambda: x, lambda: jnp.concatenate([x, x])), vec(3))
    assert text.startswith("cond branches return different types: output 0: f64[n] vs f64[2*n]"), text

    def g(x, k):
        return lax.cond(k > 0, lambda j: jnp.ones(j), lambda j: jnp.zeros(j), k)
    text = trace_error(g, vec(3), 2, axes=None)
    assert text.startswith("cond: a branch returns f64["), text
    assert "whose size is computed inside the branch" in text


def test_scan_outputs_and_lengths_with_dynamic_sizes():
    def ragged(x):
        return lax.scan(lambda c, v: (c + 1, jnp.ones(c)), 0, x)
    text = trace_error(ragged, vec(3))
    assert text.startswith("scan: the body returns a per-step output f64["), text
    text = trace_error(lambda x, y: lax.scan(lambda c, v: (c, v[0] + v[1]), 0.0, (x, y)), vec(3), vec(3, 1),
                       axes=({0: "n"}, {0: "m"}))
    assert text.startswith("scan: the leading axes of xs (and length=) disagree: lengths [n, m]"), text
