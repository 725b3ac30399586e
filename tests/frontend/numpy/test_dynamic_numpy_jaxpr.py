"""What sprue.numpy puts in a jaxpr for dynamically-shaped arrays: the types (f64[a], f64[a+1],
f64[(a+1)//2]), sizes that stay symbolic, fresh sizes computed at run time (and shared when
computed twice), run-time checks only where tracing cannot decide, the memory-safe index-based
broadcast, and static programs untouched. Values are checked against numpy by evaluating the
jaxpr at several sizes."""
from __future__ import annotations

import re

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.api.traced import trace_function
from sprue.base.errors import SprueValueError
from sprue.ir.core import ShapedArray
from sprue.trace.tracing import eval_jaxpr
from tests.helpers.jaxprs import f64, prims


def trace(fn, *avals):
    return trace_function(fn, avals, {}).closed_jaxpr


def out_types(cj) -> list[str]:
    """The result types as the printer writes them (dimensions named by their binders)."""
    text = str(cj)
    outs = re.search(r"in \((.*)\) }$", text).group(1).rstrip(",").split(", ")
    types = dict(re.findall(r"(\w+):(\w+\[[^\]]*\])", text))
    return [types[o] for o in outs]


def run(cj, *args):
    return eval_jaxpr(cj.jaxpr, cj.consts, *args)


# -- sizes from traced ints --------------------------------------------------------------------
def test_ones_of_a_traced_int_is_the_seed_jaxpr_plus_size_checks():
    cj = sprue.make_jaxpr(lambda n: jnp.ones(n))(3)
    assert out_types(cj) == ["f64[a]"]
    assert "broadcast_in_dim[broadcast_dimensions=() shape=(None,) sharding=None] 1.0:f64[] a" in str(cj)
    # numpy raises for negative sizes too; a size too big for memory is an error, not an allocation
    assert prims(cj) == ["ge", "check", "le", "check", "broadcast_in_dim"]
    for n in (0, 1, 4):
        np.testing.assert_array_equal(run(cj, n)[0], np.ones(n))
    with pytest.raises(SprueValueError, match=r"sprue.numpy.ones: negative dimensions are not allowed"):
        run(cj, -1)


def test_size_arithmetic_stays_symbolic():
    cj = sprue.make_jaxpr(lambda n: (jnp.ones(n + 1), jnp.zeros((2 * n, 3)), jnp.arange(n) + jnp.ones(n)))(3)
    assert out_types(cj) == ["f64[a+1]", "f64[2*a,3]", "f64[a]"]
    # the signs of n, n + 1 and 2 * n are each checked once; arange(n) + ones(n) share n
    assert sum("negative" in e.params["message"] for e in cj.jaxpr.eqns if e.primitive.name == "check") == 3
    out = run(cj, 2)
    assert [o.shape for o in out] == [(3,), (4, 3), (2,)]


def test_the_sign_check_is_emitted_once_per_size():
    cj = sprue.make_jaxpr(lambda n: (jnp.ones(n), jnp.zeros(n), jnp.eye(n)))(3)
    assert sum("negative" in e.params["message"] for e in cj.jaxpr.eqns if e.primitive.name == "check") == 1


def test_traced_int_as_a_size_must_be_an_integer_scalar():
    with pytest.raises(sprue.SprueTypeError, match=r"zeros: shape must be an integer scalar, got a traced f64\[\]"):
        sprue.make_jaxpr(lambda x: jnp.zeros(x))(1.5)


def test_arange_forms():
    cj = sprue.make_jaxpr(lambda n: (jnp.arange(n), jnp.arange(0, n, 1), jnp.arange(n, dtype=float)))(3)
    assert out_types(cj) == ["i64[a]", "i64[a]", "f64[a]"]
    cj = sprue.make_jaxpr(lambda a, b: jnp.arange(a, b))(1, 5)  # traced bounds: numpy's length at run time
    assert "max" in prims(cj)
    assert not any("negative" in e.params["message"] for e in cj.jaxpr.eqns if e.primitive.name == "check")
    for a, b in [(1, 5), (5, 1), (-3, 2), (0, 0)]:
        np.testing.assert_array_equal(run(cj, a, b)[0], np.arange(a, b))


def test_sizes_of_dynamic_arrays():
    def f(x):
        n = x.shape[0]
        return jnp.ones(n + 1), jnp.zeros(x.shape), jnp.arange(n), jnp.eye(n), jnp.linspace(0, 1, n), jnp.ones_like(x)
    cj = trace(f, f64("n"))
    assert out_types(cj) == ["f64[a+1]", "f64[a]", "i64[a]", "f64[a,a]", "f64[a]", "f64[a]"]
    # sizes of arrays are never negative, and an array about an argument's size fits in memory:
    # only eye(n), n*n elements, is checked (it may not fit)
    checks = [e.params["message"] for e in cj.jaxpr.eqns if e.primitive.name == "check"]
    assert len(checks) == 1 and "sprue.numpy.eye: an array of shape (a, a)" in checks[0].replace("(n, n)", "(a, a)")


def test_a_size_used_as_a_number_is_a_weak_int():
    cj = trace(lambda x: (x.shape[0] * 2.0, x.astype(np.float32) * x.shape[0]), f64("n"))
    assert [a.str_short() for a in cj.out_avals[:2]] == ["f64[]", "f32[n]"]  # a Python int: f32 stays f32
    cj = trace(lambda x: jnp.asarray(x.shape[0] // 2 + 1), f64("n"))
    assert cj.out_avals[0].str_short() == "i64[]" and not cj.out_avals[0].weak_type
    assert run(cj, 5, np.zeros(5))[0] == 3


# -- broadcasting ------------------------------------------------------------------------------
def test_provably_equal_sizes_broadcast_without_checks():
    cj = trace(lambda x, m: jnp.sin(x) * m + x[:, None] * 2.0, f64("n"), f64("n", 1))
    assert "check" not in prims(cj) and "gather" not in prims(cj)
    assert out_types(cj) == ["f64[a,a]"]


def test_unknown_sizes_broadcast_with_a_check_and_a_clamped_gather():
    cj = trace(lambda x, y: x + y, f64("n"), f64("m"))
    p = prims(cj)
    assert p.count("check") == 1 and p.count("gather") == 2 and "broadcast_in_dim" in p
    check = next(e for e in cj.eqns if e.primitive.name == "check")
    assert re.fullmatch(r"sprue.numpy.add: operands f64\[n\] and f64\[m\] do not broadcast \(at .*test_dynamic_numpy_jaxpr"
                        r".py:\d+ \(<lambda>\)\)", check.params["message"])
    assert all(e.params["mode"].name == "CLIP" for e in cj.eqns if e.primitive.name == "gather")
    for n, m in [(3, 3), (1, 4), (4, 1), (0, 1), (1, 0), (0, 0), (1, 1)]:
        x, y = np.arange(n) + 1.0, np.arange(m) * 10.0
        np.testing.assert_array_equal(run(cj, n, m, x, y)[0], x + y)
    with pytest.raises(SprueValueError, match=r"operands f64\[n\] and f64\[m\] do not broadcast"):
        run(cj, 2, 3, np.zeros(2), np.zeros(3))


def test_a_static_size_wins_against_a_dynamic_one():
    cj = trace(lambda x, y: x * y, f64("n"), f64(3))
    assert out_types(cj) == ["f64[3]"]
    np.testing.assert_array_equal(run(cj, 1, np.array([2.0]), np.arange(3.0))[0], 2.0 * np.arange(3.0))


def test_provably_different_sizes_are_a_compile_time_error():
    with pytest.raises(SprueValueError, match=r"sprue.numpy.add: operands could not be broadcast together: f64\[n\+2\]"
                                              r" and f64\[n\+3\]"):
        trace(lambda x: jnp.ones(x.shape[0] + 2) + jnp.ones(x.shape[0] + 3), f64("n"))
    # but n and n + 1 may broadcast (n == 0 or n == 1): a run-time check
    cj = trace(lambda x: x + jnp.ones(x.shape[0] + 1), f64("n"))
    np.testing.assert_array_equal(run(cj, 0, np.zeros(0))[0], np.zeros(0) + np.ones(1))


def test_broadcast_results_are_shared():
    cj = trace(lambda x, y: (x + y, x * y), f64("n"), f64("m"))
    assert prims(cj).count("check") == 1
    assert cj.out_avals[0].shape == cj.out_avals[1].shape


# -- slicing -----------------------------------------------------------------------------------
def test_static_slices_of_dynamic_axes():
    cj = trace(lambda x: (x[::2], x[::-1], x[1:], x[:-1], x[:5]), f64("n"))
    types = out_types(cj)
    assert types[:2] == ["f64[(a+1)//2]", "f64[a]"]
    assert types[2] == types[3] != types[4]  # max(0, n - 1), computed once; min(n, 5) another size
    assert "slice" not in prims(cj)  # no DimExpr in static slice params: dynamic_slice and gather
    for n in (0, 1, 2, 7):
        x = np.arange(n * 1.0)
        for got, want in zip(run(cj, n, x), (x[::2], x[::-1], x[1:], x[:-1], x[:5])):
            np.testing.assert_array_equal(got, want)


def test_diff_needs_no_check():
    cj = trace(lambda x: x[1:] - x[:-1], f64("n"))
    assert "check" not in prims(cj) and "gather" not in prims(cj)


def test_slice_of_an_axis_known_long_enough_is_symbolic():
    cj = trace(lambda x: (jnp.concatenate([x[:1], x])[1:], jnp.ones(x.shape[0] + 2)[2:]), f64("n"))
    assert out_types(cj)[1] == "f64[a]"  # max(0, n + 2 - 2) is n


def test_traced_slice_bounds():
    cj = trace(lambda x, i, j: x[i:j], f64("n"), 0, 0)
    assert prims(cj).count("dynamic_slice") == 1
    for n, i, j in [(5, 1, 3), (5, -2, 10), (5, 3, 1), (0, 0, 2), (5, -9, -1)]:
        x = np.arange(n * 1.0)
        np.testing.assert_array_equal(run(cj, n, x, i, j)[0], x[i:j])


def test_scalar_index_reads_at_most_one_element():
    cj = trace(lambda x, i: x[i], f64("n", 3), 0)
    assert "pad" not in prims(cj)  # a dynamic_slice of min(n, 1) rows, reduced: no copy of x
    x = np.arange(12.0).reshape(4, 3)
    np.testing.assert_array_equal(run(cj, 4, x, -1)[0], x[-1])
    with pytest.raises(SprueValueError, match="index into axis 0 of size 0"):
        run(cj, 0, np.zeros((0, 3)), 0)


def test_an_index_array_into_a_run_time_axis_is_one_clamped_gather():
    """x[idx] along an axis of run-time size: the indices wrapped, then one CLIP gather from x
    itself (it clamps them; from an axis empty at run time it reads nothing and gives zeros): no
    clamp of its own, no copy of x padded by one."""
    cj = trace(lambda x, i: x[i], f64("n"), ShapedArray((5,), np.int64))
    assert "pad" not in prims(cj) and "clamp" not in prims(cj) and prims(cj).count("gather") == 1
    assert prims(cj).count("min") == 0 and prims(cj).count("max") == 0
    x, i = np.arange(7.0), np.array([0, -1, 6, 9, -12])
    np.testing.assert_array_equal(run(cj, 7, x, i)[0], x[np.clip(np.where(i < 0, i + 7, i), 0, 6)])
    np.testing.assert_array_equal(run(cj, 0, np.zeros(0), i)[0], np.zeros(5))


def test_static_index_out_of_bounds_is_a_run_time_index_error():
    cj = trace(lambda x: x[2], f64("n"))
    with pytest.raises(SprueValueError, match=r"sprue.numpy.getitem: index 2 is out of bounds for axis 0 with size n"):
        run(cj, 2, np.zeros(2))
    assert run(cj, 3, np.arange(3.0))[0] == 2.0


# -- reductions, products, shapes --------------------------------------------------------------
def test_mean_divides_by_the_run_time_count():
    cj = trace(lambda x: x.mean(axis=0), f64("n", 3))
    assert "convert_element_type" in prims(cj)
    x = np.arange(12.0).reshape(4, 3)
    np.testing.assert_allclose(run(cj, 4, x)[0], x.mean(axis=0))


def test_max_of_an_empty_dynamic_axis_is_a_run_time_error():
    cj = trace(lambda x: x.max(), f64("n"))
    with pytest.raises(SprueValueError, match="zero-size array f64\\[n\\] to reduction operation maximum"):
        run(cj, 0, np.zeros(0))


def test_contraction_of_unknown_sizes_is_checked_and_cut_to_the_smaller():
    cj = trace(lambda a, b: a @ b, f64(2, "n"), f64("m"))
    assert prims(cj).count("check") == 1 and out_types(cj) == ["f64[2]"]
    a, b = np.arange(6.0).reshape(2, 3), np.arange(3.0)
    np.testing.assert_allclose(run(cj, 3, 3, a, b)[0], a @ b)
    with pytest.raises(SprueValueError, match=r"sprue.numpy.matmul: contracted dimensions differ"):
        run(cj, 3, 2, a, b[:2])


def test_reshape_minus_one():
    cj = trace(lambda x: (x.reshape(-1), x.reshape(3, -1), x.reshape(-1, 3)), f64("n", 3))
    assert out_types(cj) == ["f64[3*a]", "f64[3,a]", "f64[a,3]"]
    assert "check" not in prims(cj)
    cj = trace(lambda x: x.reshape(-1, 2), f64("n"))  # n // 2 rows: n must be even
    assert out_types(cj) == ["f64[a//2,2]"] and prims(cj).count("check") == 1
    with pytest.raises(SprueValueError, match=r"sprue.numpy.reshape: cannot reshape f64\[n\] \(size n\) into shape"):
        run(cj, 3, np.zeros(3))


def test_concatenate_sizes_add_up():
    cj = trace(lambda x, y: jnp.concatenate([x, y, x[:1]]), f64("n"), f64("m"))
    assert out_types(cj)[0].startswith("f64[") and "check" not in prims(cj)
    cj = trace(lambda x, y: jnp.concatenate([x, y]), f64("n", 2), f64(3, 2))
    assert out_types(cj) == ["f64[a+3,2]"]


# -- static programs are unchanged --------------------------------------------------------------
@pytest.mark.parametrize("fn", [lambda x: x[1:] - x[:-1], lambda x: x + x[:, None], lambda x: x.reshape(-1, 2).sum(0),
                                lambda x: jnp.concatenate([x, x[::-2]]), lambda x: x[np.array([0, 3])] @ x[:2]])
def test_static_shapes_get_no_checks_or_resizing(fn):
    cj = sprue.make_jaxpr(fn)(np.arange(6.0))
    assert "check" not in prims(cj) and "pad" not in prims(cj)
    assert all(a.is_static for a in cj.out_avals)
