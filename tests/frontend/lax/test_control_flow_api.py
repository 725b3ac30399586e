"""Control flow end to end: every construct, eager (numpy reference rules) and compiled (qjit),
against plain-Python references — scalars, arrays, pytrees, traced bounds, negative steps,
zero-trip loops, data-dependent trip counts, nesting and closures."""
import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax


def leaves(x):
    return sprue.tree_flatten(x)[0]


def assert_same(got, want, rtol=1e-12):
    """Same pytree structure, and each leaf equal (close for floats) to the reference."""
    assert sprue.tree_flatten(got)[1] == sprue.tree_flatten(want)[1], (got, want)
    for g, w in zip(leaves(got), leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, (g, w)
        if g.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-300)
        else:
            np.testing.assert_array_equal(g, w)


def eager_and_compiled(fn, want, *args, rtol=1e-12):
    assert_same(fn(*args), want, rtol)
    assert_same(sprue.qjit(fn)(*args), want, rtol)


# -- for_loop / fori_loop -------------------------------------------------------------------------
def test_fori_loop_scalar_array_and_pytree_carries():
    x = np.linspace(-1.0, 2.0, 5)

    def f(x, n):
        s = lax.fori_loop(0, n, lambda i, c: c + jnp.take(x, i) * i, 0.0)   # (x may be numpy: no x[i])
        a = lax.fori_loop(0, n, lambda i, c: c * 0.5 + x, x)
        t = lax.fori_loop(1, n, lambda i, c: {"sum": c["sum"] + c["vec"], "vec": (c["vec"] * i, c["vec"][0])[0]},
                          {"sum": jnp.zeros(5), "vec": x})
        return s, a, t

    n = 4
    s, a, t = 0.0, x.copy(), {"sum": np.zeros(5), "vec": x.copy()}
    for i in range(n):
        s = s + x[i] * i
        a = a * 0.5 + x
    for i in range(1, n):
        t = {"sum": t["sum"] + t["vec"], "vec": t["vec"] * i}
    eager_and_compiled(f, (s, a, t), x, n)


def test_for_loop_decorator_carries_unpacked():
    def f(x):
        @sprue.for_loop(0, 6, 2)
        def two(i, a, b):
            return a + i, b * 2.0
        @sprue.for_loop(0, 3, 1)
        def one(i, a):
            return a * 3.0
        return two(x, 1.0), one(x)

    x = np.arange(3.0)
    a, b = x.copy(), 1.0
    for i in range(0, 6, 2):
        a, b = a + i, b * 2.0
    eager_and_compiled(f, ((a, b), x * 27.0), x)


def test_for_loop_without_carries_returns_none():
    @sprue.for_loop(0, 3, 1)
    def loop(i):
        return None
    assert loop() is None


RANGES = [(0, 10, 1), (10, 0, -1), (7, -1, -2), (0, 0, 1), (5, 0, 1), (0, 5, -1), (-3, 4, 3), (3, 3, -1),
          (0, 10, 3), (10, 1, -4), (-8, -2, 5), (2, 9, 100)]


def _count_and_hash(lo, hi, step):
    n, h = 0, 0
    for i in range(lo, hi, step):
        n, h = n + 1, h * 3 + i
    return np.int64(n), np.int64(h)


@pytest.mark.parametrize("lo,hi,step", RANGES)
def test_for_loop_follows_range_with_static_bounds(lo, hi, step):
    def f(z):
        @sprue.for_loop(lo, hi, step)
        def loop(i, n, h):
            return n + 1, h * 3 + i
        return loop(z, z)
    eager_and_compiled(f, _count_and_hash(lo, hi, step), np.int64(0))


def test_for_loop_follows_range_with_traced_bounds():
    def f(lo, hi, step):
        @sprue.for_loop(lo, hi, step)
        def loop(i, n, h):
            return n + 1, h * 3 + i
        return loop(np.int64(0), np.int64(0))
    compiled = sprue.qjit(f)
    for lo, hi, step in RANGES:
        want = _count_and_hash(lo, hi, step)
        args = (np.int64(lo), np.int64(hi), np.int64(step))
        assert_same(f(*args), want)
        assert_same(compiled(*args), want)
    assert len(compiled._cache) == 1  # one compilation serves every range


@pytest.mark.parametrize("dtype,lo,hi,step", [
    (np.int8, -128, 127, 50), (np.int8, 127, -128, -50), (np.int8, -128, 127, 1),
    (np.uint32, 0, 4_000_000_000, 1_000_000_000), (np.uint8, 250, 3, 1), (np.int32, 10, -10, -7)])
def test_for_loop_with_narrow_and_unsigned_index_types(dtype, lo, hi, step):
    def f(lo, hi, step):
        @sprue.for_loop(lo, hi, step)
        def loop(i, n, s):
            return n + 1, s + i.astype(np.int64)
        return loop(np.int64(0), np.int64(0))
    r = range(lo, hi, step)
    eager_and_compiled(f, (np.int64(len(r)), np.int64(sum(r))), dtype(lo), dtype(hi), dtype(step))


def test_loop_index_type_follows_the_bounds():
    seen = []

    def f(n):
        def body(i, c):
            seen.append(i.aval)
            return c + i
        return lax.fori_loop(0, n, body, np.int32(0))
    assert_same(sprue.qjit(f)(np.int32(5)), np.int32(10))
    assert seen[-1].dtype == np.int32 and not seen[-1].weak_type
    # Python int bounds give a weakly typed int64 index, as `range` gives Python ints: an int32
    # carry stays int32
    out = sprue.qjit(lambda c: lax.fori_loop(0, 4, lambda i, c: c + i, c))(np.int32(1))
    assert out.dtype == np.int32 and out == 7


# -- while ------------------------------------------------------------------------------------------
def _newton_reference(a, tol):
    x, it = a, 0
    while abs(x * x - a) > tol * a:
        x, it = 0.5 * (x + a / x), it + 1
    return x, it


def test_while_loop_newton_to_tolerance():
    def f(a):
        return lax.while_loop(lambda c: jnp.abs(c[0] * c[0] - a) > 1e-14 * a,
                              lambda c: (0.5 * (c[0] + a / c[0]), c[1] + 1), (a, 0))
    compiled = sprue.qjit(f)
    counts = set()
    for a in (2.0, 1e-6, 81.0, 12345.678):
        x, it = _newton_reference(a, 1e-14)
        counts.add(it)
        assert_same(f(a), (x, it))
        assert_same(compiled(a), (np.float64(x), np.int64(it)))
    assert len(counts) > 1  # the trip count depends on the data


def test_while_loop_decorator_on_arrays_with_a_bool_carry():
    def f(x):
        @sprue.while_loop(lambda v, done: jnp.logical_not(done))
        def loop(v, done):
            v = jnp.where(v > 1.0, v / 2.0, v)
            return v, jnp.all(v <= 1.0)
        return loop(x, False)

    x = np.array([0.5, 7.0, 100.0, 1.0])
    v = x.copy()
    while True:
        v = np.where(v > 1.0, v / 2.0, v)
        if np.all(v <= 1.0):
            break
    eager_and_compiled(f, (v, np.True_), x)


def test_while_loop_that_never_runs():
    def f(x):
        return lax.while_loop(lambda c: c[0] < 0.0, lambda c: c * 2.0, x)
    x = np.arange(3.0)
    eager_and_compiled(f, x, x)


# -- cond / switch ----------------------------------------------------------------------------------
def test_lax_cond_with_operands_and_pytree_results():
    def f(p, x):
        return lax.cond(p > 0, lambda x, s: {"a": x * s, "b": s}, lambda x, s: {"a": x - s, "b": -s}, x, 2.0)
    x = np.arange(3.0)
    for p in (1.0, -1.0):
        want = {"a": x * 2.0, "b": 2.0} if p > 0 else {"a": x - 2.0, "b": -2.0}
        eager_and_compiled(f, want, p, x)


def test_catalyst_cond_with_else_if_and_otherwise():
    def f(x, p, q):
        @sprue.cond(p > 0)
        def branch():
            return x + 1.0

        @branch.else_if(q > 0)
        def any_name():
            return x * 10.0

        @branch.otherwise
        def another_name():
            return -x
        return branch()

    x = np.arange(1.0, 4.0)
    compiled = sprue.qjit(f)
    for p in (1, 0):
        for q in (1, 0):
            want = x + 1.0 if p > 0 else x * 10.0 if q > 0 else -x
            args = (x, np.int64(p), np.int64(q))
            assert_same(f(*args), want)
            assert_same(compiled(*args), want)


def test_cond_on_an_integer_or_concrete_predicate():
    def f(x, k):
        a = lax.cond(k, lambda: x, lambda: x * 0.0)        # integer: k != 0
        b = lax.cond(True, lambda: x + 1.0, lambda: x)     # concrete: still one cond
        return a, b
    x = np.arange(3.0)
    eager_and_compiled(f, (x, x + 1.0), x, np.int32(3))
    eager_and_compiled(f, (x * 0.0, x + 1.0), x, np.int32(0))


def test_cond_without_results_needs_no_otherwise():
    def f(x):
        @sprue.cond(x[0] > 0)
        def nothing():
            return None
        assert nothing() is None
        return x
    eager_and_compiled(f, np.ones(2), np.ones(2))


@pytest.mark.parametrize("index", [-5, -1, 0, 1, 2, 3, 100])
def test_switch_clamps_the_index(index):
    branches = [lambda x: x + 1.0, lambda x: x * 2.0, lambda x: -x]

    def f(i, x):
        return lax.switch(i, branches, x)
    x = np.arange(3.0)
    want = branches[min(max(index, 0), 2)](x)
    eager_and_compiled(f, want, np.int64(index), x)
    eager_and_compiled(lambda x: lax.switch(index, branches, x), want, x)   # a concrete index


def test_switch_with_one_branch_and_small_index_types():
    assert_same(sprue.qjit(lambda i, x: lax.switch(i, [lambda x: x * 3.0], x))(np.int64(7), 2.0), 6.0)
    branches = [lambda k=k: np.float64(k) for k in range(5)]
    f = sprue.qjit(lambda i: lax.switch(i, branches))
    for i in (-128, 0, 3, 4, 127):
        assert f(np.int8(i)) == min(max(i, 0), 4)
    g = sprue.qjit(lambda i: lax.switch(i, branches))
    assert g(np.uint8(255)) == 4


def test_branches_promote_weak_python_scalars():
    def f(x, p):
        return lax.cond(p > 0, lambda: x[0], lambda: 0.0)     # f32 and a Python float
    x = np.arange(1.0, 3.0, dtype=np.float32)
    out = sprue.qjit(f)(x, 1.0)
    assert out.dtype == np.float32 and out == 1.0
    assert f(x, -1.0).dtype == np.float32


# -- scan ---------------------------------------------------------------------------------------------
def _scan_reference(f, init, xs, reverse=False):
    carry = init
    order = range(len(xs))[::-1] if reverse else range(len(xs))
    out = {}
    for k in order:
        carry, out[k] = f(carry, xs[k])
    return carry, np.stack([out[k] for k in range(len(xs))])


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_over_xs(reverse):
    xs = np.linspace(1.0, 3.0, 7)

    def step(c, x):
        return c * 0.5 + x, c * x

    def f(xs):
        return lax.scan(step, 1.0, xs, reverse=reverse)
    eager_and_compiled(f, _scan_reference(step, 1.0, xs, reverse), xs)


def test_scan_with_pytrees_and_rows():
    xs = {"a": np.arange(12.0).reshape(4, 3), "b": np.arange(4, dtype=np.int64)}

    def f(xs):
        def step(c, x):
            total, count = c
            return (total + x["a"] * x["b"], count + 1), {"row": x["a"] + total, "k": x["b"] * 2}
        return lax.scan(step, (jnp.zeros(3), 0), xs)

    total, count, rows, ks = np.zeros(3), 0, [], []
    for k in range(4):
        a, b = xs["a"][k], xs["b"][k]
        rows.append(a + total)
        ks.append(b * 2)
        total, count = total + a * b, count + 1
    eager_and_compiled(f, ((total, count), {"row": np.stack(rows), "k": np.array(ks)}), xs)


def test_scan_without_xs_and_without_ys():
    def f(x):
        fib, ys = lax.scan(lambda c, _: ((c[1], c[0] + c[1]), c[0]), (x, x + 1.0), None, length=8)
        last, none = lax.scan(lambda c, _: (c * 2.0, None), x, length=3)
        assert none is None
        return fib, ys, last
    a, b, ys = 1.0, 2.0, []
    for _ in range(8):
        ys.append(a)
        a, b = b, a + b
    eager_and_compiled(f, ((a, b), np.array(ys), 8.0), 1.0)


def test_scan_of_length_zero():
    def f(xs):
        return lax.scan(lambda c, x: (c + x, x * 2.0), 5.0, xs)
    eager_and_compiled(f, (5.0, np.zeros(0)), np.zeros(0))


# -- nesting and closures --------------------------------------------------------------------------
def test_nested_loops_with_traced_inner_bounds():
    def f(n):
        def outer(i, acc):
            return lax.fori_loop(0, i, lambda j, a: a + (i * 10 + j), acc)
        return lax.fori_loop(0, n, outer, np.int64(0))
    want = sum(i * 10 + j for i in range(6) for j in range(i))
    eager_and_compiled(f, np.int64(want), np.int64(6))


def test_cond_inside_loop_and_loop_inside_cond():
    def f(x, n):
        def body(i, c):
            return lax.cond(c[0] > 0.5, lambda: c * 0.5, lambda: c + 0.3)
        looped = lax.fori_loop(0, n, body, x)
        branched = lax.cond(x[0] > 0, lambda: lax.fori_loop(0, n, lambda i, c: c * 2.0, x),
                            lambda: lax.while_loop(lambda c: c[0] < 10.0, lambda c: c + 1.0, x))
        return looped, branched

    for x in (np.array([0.2, 1.0]), np.array([-2.0, 1.0])):
        c = x.copy()
        for _ in range(5):
            c = c * 0.5 if c[0] > 0.5 else c + 0.3
        if x[0] > 0:
            b = x * 2.0 ** 5
        else:
            b = x.copy()
            while b[0] < 10.0:
                b = b + 1.0
        eager_and_compiled(f, (c, b), x, np.int64(5))


def test_switch_and_scan_inside_a_loop():
    def f(x, n):
        def body(i, c):
            c = lax.switch(i % 3, [lambda: c + 1.0, lambda: c * 2.0, lambda: c - 3.0])
            _, ys = lax.scan(lambda s, v: (s + v, s), 0.0, c)
            return ys
        return lax.fori_loop(np.int64(0), n, body, x)

    c = np.array([1.0, 2.0, 0.5])
    for i in range(7):
        c = [c + 1.0, c * 2.0, c - 3.0][i % 3]
        c = np.concatenate([[0.0], np.cumsum(c)[:-1]])
    eager_and_compiled(f, c, np.array([1.0, 2.0, 0.5]), np.int64(7))


def test_bodies_capture_numpy_arrays_and_outer_tracers():
    table = np.array([1.0, -2.0, 0.5])

    def f(x, n):
        scale = x[0] * 2.0                       # an outer tracer

        def outer(i, acc):
            shift = acc[1] + 1.0                 # a tracer of the outer loop's trace
            return lax.fori_loop(0, i, lambda j, a: a + table * scale + shift, acc)
        return lax.fori_loop(0, n, outer, x)

    x = np.array([0.25, 1.0, 3.0])
    acc = x.copy()
    for i in range(4):
        shift = acc[1] + 1.0
        for _ in range(i):
            acc = acc + table * (x[0] * 2.0) + shift
    eager_and_compiled(f, acc, x, np.int64(4))


def test_captured_tracer_in_while_condition_and_cond_branches():
    def f(x, limit):
        y = lax.while_loop(lambda c: jnp.sum(c) < limit, lambda c: c * 1.5, x)
        return lax.cond(limit > 5.0, lambda: y - limit, lambda: y + limit)
    x = np.array([0.5, 1.0])
    for limit in (3.0, 40.0):
        y = x.copy()
        while y.sum() < limit:
            y = y * 1.5
        eager_and_compiled(f, y - limit if limit > 5.0 else y + limit, x, limit)


# -- weak types ------------------------------------------------------------------------------------
def test_python_scalar_carries_take_the_body_type():
    x32 = np.linspace(0.0, 1.0, 4).astype(np.float32)

    def f(x):
        return lax.fori_loop(0, 4, lambda i, c: c + jnp.take(x, i), 0.0)    # float32 body: float32 carry
    out = sprue.qjit(f)(x32)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, x32.sum(), rtol=1e-6)
    assert f(x32).dtype == np.float32

    def g(x):
        return lax.fori_loop(0, 3, lambda i, c: c + x, 0.0)       # float64 body: float64 carry
    assert_same(sprue.qjit(g)(1.5), 4.5)
    assert sprue.make_jaxpr(g)(1.5).jaxpr.outvars[0].aval.dtype == np.float64
