"""The errors control flow raises: what was wrong, both types output by output, and the user's line."""
import re

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from sprue.base.errors import ConcretizationError, SprueTypeError, SprueValueError

HERE = r"test_control_flow_errors\.py:\d+"
X = np.arange(3.0)


def raises(exc, pattern, fn, *args, eager: bool = True):
    """fn(*args) raises exc matching pattern, and the message names a line of this file — both
    eagerly and compiled (compiled only for Catalyst's cond, whose branch runs as plain Python
    outside a trace)."""
    for run in (fn, sprue.qjit(fn)) if eager else (sprue.qjit(fn),):
        with pytest.raises(exc) as info:
            run(*args)
        assert re.search(pattern, str(info.value)), str(info.value)
        assert re.search(HERE, str(info.value)), str(info.value)


def test_branches_returning_different_types():
    raises(SprueTypeError, r"^cond branches return different types: output 0: f64\[3\] vs f32\[3\] \(at ",
           lambda x: lax.cond(x[0] > 0, lambda: x, lambda: x.astype(np.float32)), X)
    raises(SprueTypeError, r"switch branches return different types: output 1: f64\[\] vs f64\[\] vs f64\[3\]",
           lambda x: lax.switch(1, [lambda: (x, x[0]), lambda: (x, x[1]), lambda: (x, x)]), X)


def test_branches_returning_different_shapes_or_structures():
    raises(SprueTypeError, r"cond branches return different types: output 0: f64\[3\] vs f64\[2\]",
           lambda x: lax.cond(x[0] > 0, lambda: x, lambda: x[:2]), X)
    raises(SprueTypeError, r"cond branches return different pytree structures: \(\*, \*\) vs \*",
           lambda x: lax.cond(x[0] > 0, lambda: (x, x), lambda: x), X)


def test_catalyst_cond_branches_are_listed_in_the_order_written():
    def f(x):
        @sprue.cond(x[0] > 0)
        def a():
            return x

        @a.otherwise
        def b():
            return x[:2]
        return a()
    raises(SprueTypeError, r"cond branches return different types: output 0: f64\[3\] vs f64\[2\]", f, X, eager=False)
    np.testing.assert_array_equal(f(X), X[:2])   # outside a trace: the branch taken, as Python runs it


def test_a_cond_returning_values_needs_otherwise():
    def f(x):
        @sprue.cond(x[0] > 0)
        def positive():
            return x * 2.0
        return positive()
    raises(SprueTypeError, r"cond: the branches return values, so the cond needs an `otherwise` branch.*"
                           r"@positive\.otherwise", f, X, eager=False)
    assert f(X) is None   # outside a trace no branch is taken: None, as Catalyst's default `otherwise` returns


def test_an_int_carry_that_becomes_float():
    raises(SprueTypeError, r"fori_loop body changes the type of its carry: output 0: i64\[\] vs f64\[\] \(carry in"
                           r" vs body out\); a carry that starts as a Python int stays an integer",
           lambda x: lax.fori_loop(0, 3, lambda i, c: c + x[0], 0), X)


def test_loop_bodies_changing_a_carry():
    raises(SprueTypeError, r"fori_loop body changes the type of its carry: output 0: f64\[3\] vs f32\[3\]",
           lambda x: lax.fori_loop(0, 3, lambda i, c: c.astype(np.float32), x), X)
    raises(SprueTypeError, r"while_loop body changes the type of its carry: output 1: f64\[3\] vs f64\[2\]",
           lambda x: lax.while_loop(lambda c: c[0] < 1, lambda c: (c[0] + 1, c[1][1:]), (0, x)), X)
    raises(SprueTypeError, r"scan body changes the type of its carry: output 0: f64\[\] vs f64\[3\]",
           lambda x: lax.scan(lambda c, v: (c * x, v), 0.0, x), X)


def test_loop_bodies_changing_the_carry_structure():
    raises(SprueTypeError, r"for_loop body returns a carry of a different structure: "
                           r"\(\*, \*\) in vs \(\*, \(\*, \*\)\) out",
           lambda x: sprue.for_loop(0, 2, 1)(lambda i, a, b: (a, (b, b)))(x, x), X)
    raises(SprueTypeError, r"fori_loop body returns a carry of a different structure: \{'a': \*\} in vs \* out",
           lambda x: lax.fori_loop(0, 2, lambda i, c: c["a"], {"a": x}), X)
    raises(SprueTypeError, r"scan: the body must return a pair \(carry, y\), got Tracer",
           lambda x: lax.scan(lambda c, v: c + v, 0.0, x), X)


def test_predicates_must_be_boolean_or_integer_scalars():
    raises(SprueTypeError, r"cond: the predicate must be a scalar, got bool\[3\]",
           lambda x: lax.cond(x > 0, lambda: x, lambda: x), X)
    raises(SprueTypeError, r"cond: the predicate must be a boolean or integer scalar, got f64\[\]",
           lambda x: lax.cond(x[0], lambda: x, lambda: x), X)
    raises(SprueTypeError, r"while_loop: the condition function's result must be a scalar, got f64\[3\]",
           lambda x: lax.while_loop(lambda c: c, lambda c: c, x), X)
    raises(SprueTypeError, r"cond: the else_if predicate must be a scalar, got u32\[2\]",
           lambda x: sprue.cond(x[0] > 0)(lambda: x).else_if(np.zeros(2, np.uint32))(lambda: x), X)
    raises(SprueTypeError, r"switch: the index must be an integer scalar, got f64\[\]",
           lambda x: lax.switch(x[0], [lambda: x]), X)
    raises(SprueTypeError, r"switch: the index must be an integer scalar, got bool\[\]",
           lambda x: lax.switch(x[0] > 0, [lambda: x, lambda: x]), X)


def test_bounds_must_be_integer_scalars_and_the_step_nonzero():
    raises(SprueTypeError, r"fori_loop: the lower bound must be an integer scalar, got f64\[\]",
           lambda x: lax.fori_loop(0.0, 3, lambda i, c: c, x), X)
    raises(SprueTypeError, r"fori_loop: the upper bound must be an integer scalar, got f64\[\]",
           lambda x: lax.fori_loop(0, x[0], lambda i, c: c, x), X)
    raises(SprueTypeError, r"for_loop: the step must be a scalar, got i64\[2\]",
           lambda x: sprue.for_loop(0, 3, np.array([1, 2]))(lambda i, c: c)(x), X)
    raises(SprueTypeError, r"for_loop: the upper bound must be an integer scalar, got bool\[\]",
           lambda x: sprue.for_loop(0, True, 1)(lambda i, c: c)(x), X)
    raises(SprueValueError, r"for_loop: the step must not be zero",
           lambda x: sprue.for_loop(0, 3, 0)(lambda i, c: c)(x), X)
    raises(SprueTypeError, r"fori_loop: lower, upper and step \(i64\[\], u64\[\], i64\[\]\) have no common"
                           r" integer type",
           lambda x: lax.fori_loop(np.int64(0), np.uint64(3), lambda i, c: c, x), X)


def test_scan_lengths():
    raises(SprueValueError, r"scan: nothing to scan over: give xs \(arrays with a leading axis\) or length=",
           lambda x: lax.scan(lambda c, v: (c, v), 0.0, None), X)
    raises(SprueValueError, r"scan: the leading axes of xs \(and length=\) disagree: lengths \[2, 3\]",
           lambda x: lax.scan(lambda c, v: (c, v), 0.0, (x, x[:2])), X)
    raises(SprueValueError, r"scan: every leaf of xs needs a leading axis to scan over, got f64\[\]",
           lambda x: lax.scan(lambda c, v: (c, v), 0.0, x[0]), X)


def test_python_control_flow_on_traced_values_points_to_sprue_constructs():
    def f(x):
        if x[0] > 0:
            return x
        return -x
    with pytest.raises(ConcretizationError) as info:
        sprue.qjit(f)(X)
    text = str(info.value)
    assert re.search(HERE + r" \(f\)", text)
    assert "use sprue.cond (or sprue.lax.cond / sprue.lax.switch) instead of Python `if`" in text
    assert "sprue.while_loop / sprue.for_loop (or sprue.lax.while_loop / fori_loop)" in text

    def g(x, n):
        while x[0] < n:
            x = x * 2.0
        return x
    with pytest.raises(ConcretizationError, match=r"instead of a Python loop on a traced value"):
        sprue.qjit(g)(X, 3.0)


def test_a_cond_has_one_otherwise():
    c = sprue.cond(True)(lambda: 1.0)
    c.otherwise(lambda: 2.0)
    with pytest.raises(SprueValueError, match=r"cond: this cond already has an `otherwise` branch .*" + HERE):
        c.otherwise(lambda: 3.0)


def test_errors_inside_a_body_point_at_the_body():
    def f(x):
        return lax.fori_loop(0, 3, lambda i, c: c + jnp.ones(4), x)   # f64[3] + f64[4]
    with pytest.raises(sprue.SprueError) as info:
        sprue.qjit(f)(X)
    assert re.search(HERE + r" \(<lambda>\)", str(info.value))
