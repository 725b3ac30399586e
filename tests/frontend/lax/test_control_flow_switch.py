"""Catalyst's index switch (`sprue.switch`, issue 22): `@switch(i)` on the default branch (also case 0
when another is the `.default()`), `@switch(i, case=c)` on the branch of case c, `.branch(k)` for any integer case, `.default()`; branches with positional and keyword
arguments; results promoted to a common type. Eager and compiled, against a Python dict lookup, under
grad and vmap, and its errors by their text."""
import numpy as np
import pytest

import sprue
import sprue.numpy as jnp

CASES = {0: lambda x: x * 2.0, 3: lambda x: jnp.sin(x), -2: lambda x: x - 1.0, 11: lambda x: x * x}
CASES_NP = {0: lambda x: x * 2.0, 3: np.sin, -2: lambda x: x - 1.0, 11: lambda x: x * x}


def cases_switch(i, x):
    @sprue.switch(i)
    def s(x):
        return CASES[0](x)

    @s.branch(3)
    def branch_3(x):
        return CASES[3](x)

    @s.branch(-2)
    def branch_minus_2(x):
        return CASES[-2](x)

    @s.branch(11)
    def branch_11(x):
        return CASES[11](x)

    @s.default()
    def other(x):
        return -x

    return s(x)


def reference(i, x):
    return CASES_NP.get(i, lambda x: -x)(x)


X = np.linspace(-1.0, 2.0, 7)


@pytest.mark.parametrize("i", [-3, -2, -1, 0, 1, 3, 11, 12, 2**40])
def test_non_sequential_cases_and_default(i):
    compiled = sprue.qjit(cases_switch)
    np.testing.assert_allclose(cases_switch(i, X), reference(i, X), rtol=1e-14)
    np.testing.assert_allclose(compiled(i, X), reference(i, X), rtol=1e-14)
    np.testing.assert_allclose(compiled(np.int32(i % 2**31), X), reference(i % 2**31, X), rtol=1e-14)


def test_one_compilation_serves_every_index():
    compiled = sprue.qjit(cases_switch)
    for i in (-2, 0, 5, 11):
        np.testing.assert_allclose(compiled(i, X), reference(i, X), rtol=1e-14)
    assert compiled.compile_count == 1
    assert "cond[" in str(compiled.jaxpr) and "eq " in str(compiled.jaxpr)


def test_without_a_default_the_first_branch_takes_the_other_indices():
    def f(i, x):
        @sprue.switch(i, case=3)
        def s(x):
            return x + 1.0

        @s.branch(11)
        def b11(x):
            return x * x

        @s.branch(6)
        def b6(x):
            return 2.0 * x
        return s(x)

    want = {3: X + 1.0, 11: X * X, 6: 2.0 * X, -1: X + 1.0, 0: X + 1.0}
    for i, w in want.items():
        np.testing.assert_allclose(f(i, X), w, rtol=1e-14)
        np.testing.assert_allclose(sprue.qjit(f)(i, X), w, rtol=1e-14)


def test_one_branch_is_taken_for_every_index():
    def f(i):
        @sprue.switch(i)
        def s():
            return 12
        return s()

    for i in (0, 3, -7):
        assert f(i) == 12 and sprue.qjit(f)(i) == 12


def test_keyword_arguments_and_pytrees():
    def f(i, x, kw=None):
        @sprue.switch(i)
        def s(x, kw=None):
            return {"a": x * kw["w"], "b": kw["n"]}

        @s.branch(2)
        def b(x, kw=None):
            return {"a": 2.0 * kw["w"] + x[::-1], "b": kw["n"] + 1}

        @s.default
        def d(x, kw=None):
            return {"a": x - kw["w"], "b": kw["n"] * 3}
        return s(x, kw=kw)

    x, w = np.arange(4.0), np.full(4, 3.0)
    want = {0: {"a": x * w, "b": 5}, 2: {"a": 2.0 * w + x[::-1], "b": 6}, 4: {"a": x - w, "b": 15}}
    compiled = sprue.qjit(lambda i, x, w, n: f(i, x, kw={"w": w, "n": n}))
    for i, wt in want.items():
        for got in (f(i, x, kw={"w": w, "n": 5}), compiled(i, x, w, 5)):
            np.testing.assert_allclose(got["a"], wt["a"], rtol=1e-14)
            assert int(got["b"]) == wt["b"]


def test_outputs_are_promoted_to_a_common_type():
    def f(i):
        @sprue.switch(i)
        def s():
            return 1

        @s.branch(3)
        def b():
            return 1.2

        @s.default()
        def d():
            return True
        return s()

    for i, want, interpreted in ((0, 1.0, 1), (3, 1.2, 1.2), (7, 1.0, True)):
        got = sprue.qjit(f)(i)
        assert np.asarray(got).dtype == np.float64 and got == want
        # outside a trace the branch runs as plain Python (Catalyst's interpretation): its own value
        assert type(f(i)) is type(interpreted) and f(i) == interpreted

    def g(i, x):   # weak Python scalars take the other branches' type within its kind, as numpy 2 (NEP 50)
        # types them: float32 with a Python float stays float32; int32 with an int64 becomes int64
        @sprue.switch(i)
        def s(x):
            return x, np.int32(1)

        @s.branch(1)
        def b(x):
            return 0.5, np.int64(2)
        return s(x)

    x = np.float32(3.0)
    got = sprue.qjit(g)(1, x)
    assert np.asarray(got[0]).dtype == np.float32 and got[0] == np.float32(0.5)
    assert np.asarray(got[1]).dtype == np.int64 and got[1] == 2
    assert sprue.vmap(lambda y: g(1, y)[0])(np.ones(2, np.float32)).dtype == np.float32   # traced: promoted


def test_grad_and_vmap_through_a_switch():
    def loss(x, i):
        return jnp.sum(cases_switch(i, x))

    dsin = np.cos(X)
    for i, want in ((3, dsin), (11, 2 * X), (5, -np.ones_like(X))):
        np.testing.assert_allclose(sprue.grad(loss)(X, i), want, rtol=1e-14)
        np.testing.assert_allclose(sprue.qjit(sprue.grad(loss))(X, i), want, rtol=1e-14)
    idx = np.array([0, 3, -2, 11, 7, 3, 0])
    want = np.array([reference(int(i), x) for i, x in zip(idx, X)])
    np.testing.assert_allclose(sprue.vmap(cases_switch)(idx, X), want, rtol=1e-14)
    np.testing.assert_allclose(sprue.qjit(sprue.vmap(cases_switch))(idx, X), want, rtol=1e-14)


def test_cases_outside_the_index_type_never_match():
    def f(i):
        @sprue.switch(i)
        def s():
            return 0

        @s.branch(300)
        def b():
            return 1

        @s.branch(44)
        def c():
            return 2
        return s()

    for i in (44, 100, -56):   # 300 wraps to 44 in int8: must not match
        assert sprue.qjit(f)(np.int8(i)) == (2 if i == 44 else 0)
        assert f(np.int8(i)) == (2 if i == 44 else 0)


def test_outside_a_trace_the_branch_runs_as_python():
    """Catalyst's switch and cond outside qjit (its interpretation mode): the branch of the index
    runs as a Python function, returning anything (strings), and no other branch runs; inside a
    trace (qjit, or a transformation called eagerly) every branch is traced."""
    ran = []

    def f(i, x):
        @sprue.switch(i)
        def s(y):
            ran.append("default")
            return f"default {y}"

        @s.branch(-4)
        def b(y):
            ran.append(-4)
            return {"y": y}
        return s(x)

    assert f(-4, 2) == {"y": 2} and ran == [-4]
    assert f(5, 2) == "default 2" and ran == [-4, "default"]

    def g(p, x):
        @sprue.cond(p)
        def c():
            ran.append("c")
            return "yes"

        @c.else_if(x > 1)
        def e():
            return ["big", x]

        @c.otherwise
        def o():
            return None
        return c()

    assert g(True, 0) == "yes" and g(0.0, 3) == ["big", 3] and g(False, 0) is None and ran[-1] == "c"

    def numeric(i, x):
        @sprue.switch(i)
        def s():
            return x * 2.0

        @s.branch(1)
        def b():
            return jnp.sin(x)
        return s()
    np.testing.assert_allclose(sprue.grad(numeric, argnums=1)(1, 0.3), np.cos(0.3), rtol=1e-15)   # traced
    np.testing.assert_allclose(sprue.qjit(numeric)(1, 0.3), np.sin(0.3), rtol=1e-15)


def test_errors():
    def two(i):
        @sprue.switch(i)
        def s():
            return 0.0

        @s.branch(1)
        def b():
            return jnp.zeros(3)
        return s()

    with pytest.raises(sprue.SprueTypeError, match=r"switch branches return different types: output 0: f64\[\] vs"
                                                   r" f64\[3\].*test_control_flow_switch\.py"):
        sprue.qjit(two)(0)

    def structures(i):
        @sprue.switch(i)
        def s():
            return 0.0

        @s.default
        def d():
            return 0.0, 1.0
        return s()

    with pytest.raises(sprue.SprueTypeError, match=r"switch branches return different pytree structures"):
        sprue.qjit(structures)(1)
    assert structures(1) == (0.0, 1.0)   # outside a trace only the branch taken runs
    with pytest.raises(sprue.SprueTypeError, match=r"switch: the index must be an integer \(or float\) scalar, got"
                                                   r" bool\[\].*test_control_flow_switch\.py"):
        sprue.switch(True)(lambda: 0)
    with pytest.raises(sprue.SprueTypeError, match=r"switch: the index must be a scalar, got f64\[3\]"):
        sprue.switch(np.zeros(3))(lambda: 0)
    with pytest.raises(sprue.SprueTypeError, match=r"switch: a case must be a Python integer, got 2\.0"):
        sprue.switch(1)(lambda: 0).branch(2.0)(lambda: 1)
    with pytest.raises(sprue.SprueValueError, match=r"switch: case 4 has two branches \(first and second\)"):
        def first():
            return 0

        def second():
            return 1
        sprue.switch(1)(first).branch(4)(first).branch(4)(second)
    with pytest.raises(sprue.SprueValueError, match=r"switch: this switch already has a default branch"):
        s = sprue.switch(1)(lambda: 0)
        s.default()(lambda: 1).default(lambda: 2)
    with pytest.raises(TypeError, match=r"missing 1 required positional argument"):   # as in Catalyst
        sprue.switch()(lambda: 0)


def catalyst_switch(i, x):
    """Catalyst's own example (its test_switch.py): the decorated branch is the default; a later
    `.branch(0)` takes index 0."""
    @sprue.switch(i)
    def s(y):
        return 1.0 + 0.0 * y

    @s.branch(1)
    def b1(y):
        return 0.0 * y

    @s.branch(2)
    def b2(y):
        return y

    @s.branch(0)
    def b0(y):
        return -y
    return s(x)


CATALYST = {0: lambda y: -y, 1: lambda y: 0.0 * y, 2: lambda y: y}


@pytest.mark.parametrize("i", [-4, 0, 1, 2, 3, 12])
def test_catalyst_first_branch_is_the_default(i):
    want = CATALYST.get(i, lambda y: 1.0 + 0.0 * y)(X)
    np.testing.assert_allclose(catalyst_switch(i, X), want, rtol=1e-14)
    np.testing.assert_allclose(sprue.qjit(catalyst_switch)(i, X), want, rtol=1e-14)


@pytest.mark.parametrize("i", [0.0, 1.0, 2.0, 2.5, -1.0, 12.0, np.float32(2.0), np.nan])
def test_a_float_index_matches_the_case_it_equals(i):
    """Catalyst looks the index up in its dictionary of cases: 2.0 is case 2, 2.5 no case."""
    want = CATALYST.get(i, lambda y: 1.0 + 0.0 * y)(X) if not np.isnan(i) else 1.0 + 0.0 * X
    compiled = sprue.qjit(catalyst_switch)
    np.testing.assert_allclose(catalyst_switch(i, X), want, rtol=1e-14)
    np.testing.assert_allclose(compiled(i, X), want, rtol=1e-14)
    np.testing.assert_allclose(sprue.vmap(catalyst_switch, in_axes=(0, None))(np.array([i, 1.0]), X)[0], want,
                               rtol=1e-14)
