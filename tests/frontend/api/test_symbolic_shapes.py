"""Symbolic shapes through calls (seed 003, Relax's shape design, tests A-J): annotations with size
expressions, call equations that keep their signatures, constraints classified as provable
(nothing generated), provably false (a compile-time error at the call), or unknown (a run-time
check), sprue.assert_shape, and the diagnostics."""
import re

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.base.errors import ShapeError
from sprue.ir.shapes import DimExpr, prove_equal

HERE = r"[^ ]*test_symbolic_shapes\.py:\d+"


@sprue.qjit
def ff(x: sprue.i8["n", "m*4"]) -> sprue.i32["n*m"]:  # noqa: F821
    """Seed 003's 'fast flatten': keeps every 4th column and flattens."""
    return jnp.reshape(x.astype(np.int32)[:, ::4], (-1,))


def ff_np(x):
    return x.astype(np.int32)[:, ::4].reshape(-1)


def _pjit_eqns(jaxpr):
    return [e for e in jaxpr.eqns if e.primitive.name == "pjit"]


def _checks(jaxpr):
    return [e for e in jaxpr.eqns if e.primitive.name == "check"]


# -- test A: ground shapes propagate across calls at compile time ---------------------------------
def test_a_ground_shapes_propagate_through_a_call():
    jaxpr = sprue.make_jaxpr(lambda a: ff(a))(np.zeros((8, 16), np.int8))
    (call,) = _pjit_eqns(jaxpr)
    assert call.params["name"] == "ff"
    assert jaxpr.out_avals[0].shape == (32,) and jaxpr.out_avals[0].dtype == np.int32
    assert not _checks(jaxpr)     # every constraint was provable: nothing is checked at run time
    assert "pjit[" in str(jaxpr) and "b:i32[32] = pjit" in str(jaxpr)


def test_a_compiled_call_matches_numpy():
    @sprue.qjit
    def caller(a):
        return ff(a) + 1
    a = np.arange(8 * 16, dtype=np.int8).reshape(8, 16)
    np.testing.assert_array_equal(caller(a), ff_np(a) + 1)
    assert "call @ff(" in caller.mlir and "func.func private @ff(" in caller.mlir


# -- test B: obviously ill-shaped calls are rejected at compile time --------------------------------
def test_b_no_solution_is_a_compile_time_error_at_the_call():
    def caller(a):
        return ff(a)
    with pytest.raises(sprue.SprueValueError, match=re.escape(
            "ff(): argument 'x' of type i8[n, m*4] does not fit i8[8,15]: in axis 1, m*4 = 15 has no solution"
            " (15 is not a multiple of 4) (at ") + HERE + r" \(caller\)\)"):
        sprue.make_jaxpr(caller)(np.zeros((8, 15), np.int8))


def test_b_rank_and_dtype_mismatch():
    with pytest.raises(sprue.SprueTypeError, match=re.escape("ff(): argument 'x' of type i8[n, m*4] does not fit"
                                                             " i8[8]: rank 1 instead of 2")):
        sprue.make_jaxpr(lambda a: ff(a))(np.zeros(8, np.int8))
    with pytest.raises(sprue.SprueTypeError, match=re.escape("the dtype is f64, not i8")):
        sprue.make_jaxpr(lambda a: ff(a))(np.zeros((2, 4)))


def test_b_provably_unequal_sizes():
    @sprue.qjit
    def pair(x: sprue.f64["n"], y: sprue.f64["n+1"]):  # noqa: F821
        return x + y[1:]

    def caller(a):
        return pair(a, a)
    with pytest.raises(sprue.SprueValueError, match=re.escape(
            "pair(): argument 'y' of type f64[n+1] does not fit f64[5]: in axis 0, the size 5 is not n+1 = 6"
            " (n = 5 from argument 'x' axis 0) (at ") + HERE):
        sprue.make_jaxpr(caller)(np.ones(5))

    @sprue.qjit(abstracted_axes={0: "k"})
    def symbolic(a):
        return pair(a, a)
    with pytest.raises(sprue.SprueValueError, match=re.escape("in axis 0, the size k is not n+1 = k+1")):
        symbolic(np.ones(3))


# -- test C: symbolic shapes propagate in simplified form ---------------------------------------------
def test_c_symbolic_shapes_propagate_simplified():
    @sprue.qjit(abstracted_axes={0: "k"})
    def caller(a):
        return ff(a)
    for k in (1, 3, 7):
        a = np.arange(k * 16, dtype=np.int8).reshape(k, 16)
        np.testing.assert_array_equal(caller(a), ff_np(a))
    assert caller.compile_count == 1
    jaxpr = caller.jaxpr.jaxpr
    k = jaxpr.invars[1].aval.shape[0]
    out = jaxpr.outvars[0].aval.shape[0]
    assert isinstance(out, DimExpr) and prove_equal(out, 4 * k) is True
    assert "i32[4*a]" in str(caller.jaxpr)
    assert not _checks(jaxpr)


def test_calls_compose_and_the_callee_is_traced_once():
    @sprue.qjit
    def double(x: sprue.f64["n"]) -> sprue.f64["2*n"]:  # noqa: F821
        return jnp.concatenate([x, x])

    @sprue.qjit(abstracted_axes={0: "k"})
    def caller(a):
        b = double(a)          # f64[2k]
        c = double(b)          # f64[4k]
        return c + jnp.concatenate([b, b])   # provably equal sizes: no check
    for k in (2, 5):
        a = np.arange(float(k))
        np.testing.assert_array_equal(caller(a), np.tile(a, 4) * 2)
    assert not _checks(caller.jaxpr.jaxpr)
    assert double.compile_count == 1


def test_an_unhinted_qjit_function_is_a_generic_call():
    @sprue.qjit
    def scale(x, s):
        return x * s

    @sprue.qjit(abstracted_axes={0: "n"})
    def caller(a):
        return scale(a, 2.0) + scale(a[:2], 1.0).sum()
    for n in (3, 6):
        a = np.arange(float(n))
        np.testing.assert_allclose(caller(a), a * 2 + a[:2].sum())
    calls = _pjit_eqns(caller.jaxpr.jaxpr)
    assert len(calls) == 2


# -- test D: shape functions (the result shapes without the data) ------------------------------------
def test_d_result_shape_follows_from_the_signature():
    # the callee's result type i32[n*m] with n, m from i8[n, m*4] *is* the shape function of ff
    jaxpr = ff.jaxpr.jaxpr
    n, m = jaxpr.invars[0].dim, jaxpr.invars[1].dim
    out = jaxpr.outvars[0].aval.shape[0]
    assert out.dim_vars() == {n, m}
    for rows, cols in ((2, 8), (5, 12)):
        got = ff(np.zeros((rows, cols), np.int8)).shape
        assert got == (rows * (cols // 4),)


# -- test E: user assertions (match_shape) -----------------------------------------------------------
def test_e_assert_shape_binds_and_checks_at_run_time():
    @sprue.qjit(abstracted_axes={0: "p", 1: "q"})
    def caller(a):
        b = sprue.assert_shape(ff(a), ("k*64",))
        return sprue.assert_shape(b[:64], (64,)), b
    a = np.arange(16 * 64, dtype=np.int8).reshape(16, 64)
    head, b = caller(a)
    np.testing.assert_array_equal(b, ff_np(a))
    with pytest.raises(sprue.SprueValueError, match=re.escape("assert_shape(): the array of type i32[k*64] does not"
                                                              " fit i32[p*(q//4)]: in axis 0, k*64 = p*(q//4) has no"
                                                              " solution") + r".*" + HERE):
        caller(np.zeros((3, 8), np.int8))
    assert caller.compile_count == 1


def test_e_provable_assertions_leave_nothing_in_the_code():
    @sprue.qjit(abstracted_axes={0: "n"})
    def f(x):
        y = jnp.concatenate([x, x])
        sprue.assert_shape(y, ("2*n",))
        sprue.assert_shape(x, ("n",))
        return y
    f(np.ones(3))
    assert not _checks(f.jaxpr.jaxpr)
    assert "stablehlo.select" not in f.mlir or "status" not in f.mlir


def test_e_provably_false_assertion_is_a_compile_time_error():
    @sprue.qjit(abstracted_axes={0: "n"})
    def f(x):
        return sprue.assert_shape(x + 1.0, ("n+1",))
    with pytest.raises(sprue.SprueValueError, match=re.escape(
            "assert_shape(): the array of type f64[n+1] does not fit f64[n]: in axis 0, the size n is not n+1")
            + r".*" + HERE):
        f(np.ones(3))


def test_e_assert_shape_names_are_shared_within_a_function():
    @sprue.qjit(abstracted_axes=({0: "a"}, {0: "b"}))
    def f(x, y):
        sprue.assert_shape(x, ("k",))
        sprue.assert_shape(y, ("k",))      # a == b only run time can tell
        return x + y
    np.testing.assert_array_equal(f(np.ones(3), np.ones(3)), np.full(3, 2.0))
    with pytest.raises(sprue.SprueValueError, match=re.escape("assert_shape(): the array of type f64[k] does not fit"
                                                              " f64[b]: in axis 0, the size b is not k = a")):
        f(np.ones(3), np.ones(4))


def test_e_assert_shape_eagerly():
    x = np.ones((4, 12))
    assert sprue.assert_shape(x, ("n", "k*3")) is x
    with pytest.raises(sprue.SprueValueError, match=re.escape("in axis 1, k*5 = 12 has no solution")):
        sprue.assert_shape(x, ("n", "k*5"))
    with pytest.raises(sprue.SprueTypeError, match=re.escape("rank 2 instead of 1")):
        sprue.assert_shape(x, ("n",))


# -- test F: size names stay in types --------------------------------------------------------------------
def test_f_names_are_scoped_to_one_function():
    @sprue.qjit(abstracted_axes={0: "n"})
    def first(x):
        return sprue.assert_shape(x, ("k",)) * 2

    @sprue.qjit(abstracted_axes={0: "n"})
    def second(x):
        return sprue.assert_shape(x[1:], ("k",))   # a fresh k: binds, no check against `first`
    first(np.ones(3))
    assert second(np.ones(5)).shape == (4,)
    assert not _checks(second.jaxpr.jaxpr)


# -- test H: shape rules of primitives (broadcasting) compose with signatures ------------------------
@pytest.mark.parametrize("n,m", [(1, 1), (3, 4), (5, 2)])
def test_h_broadcasting_symbolic_shapes(n, m):
    @sprue.qjit(abstracted_axes=({0: "n"}, {1: "m"}))
    def outer_sum(col, row):
        out = col + row                     # [n,1] + [1,m] -> [n,m]
        return sprue.assert_shape(out, ("n", "m"))
    col, row = np.arange(float(n)).reshape(n, 1), np.arange(float(m)).reshape(1, m)
    np.testing.assert_array_equal(outer_sum(col, row), col + row)
    assert not _checks(outer_sum.jaxpr.jaxpr)


@pytest.mark.parametrize("n,m", [(3, 3), (4, 4)])
def test_h_broadcasting_unknown_sizes_are_checked_at_run_time(n, m):
    @sprue.qjit(abstracted_axes=({0: "n"}, {0: "m"}))
    def add(x, y):
        return x + y
    np.testing.assert_array_equal(add(np.ones(n), np.ones(m)), np.full(n, 2.0))
    with pytest.raises(sprue.SprueValueError, match=r"test_symbolic_shapes\.py"):
        add(np.ones(n), np.ones(m + 1))


@pytest.mark.parametrize("order", ["ij,jk->ik", "jk,ij->ik"])
def test_h_einsum_with_symbolic_dims_is_order_independent(order):
    @sprue.qjit(abstracted_axes=({0: "n", 1: "k"}, {0: "k", 1: "m"}))
    def mm(a, b):
        ops = (a, b) if order == "ij,jk->ik" else (b, a)
        return sprue.assert_shape(jnp.einsum(order, *ops), ("n", "m"))
    for n, k, m in ((2, 3, 4), (5, 1, 2)):
        a, b = np.arange(n * k, dtype=float).reshape(n, k), np.arange(k * m, dtype=float).reshape(k, m)
        np.testing.assert_allclose(mm(a, b), a @ b)
    assert mm.compile_count == 1


# -- test I: the representation is plain jaxpr: call equations and checks -------------------------------
def test_i_runtime_constraints_are_check_equations_in_the_caller():
    @sprue.qjit(abstracted_axes={0: "p", 1: "q"})
    def caller(a):
        return ff(a)
    a = np.zeros((2, 12), np.int8)
    np.testing.assert_array_equal(caller(a), ff_np(a))
    (check,) = _checks(caller.jaxpr.jaxpr)
    assert "m*4 = q has no solution" in check.params["message"]
    with pytest.raises(sprue.SprueValueError, match=re.escape(
            "ff(): argument 'x' of type i8[n, m*4] does not fit i8[p,q]: in axis 1, m*4 = q has no solution (the size"
            " is not a multiple of 4) (at ") + HERE + r" \(caller\)\)"):
        caller(np.zeros((2, 10), np.int8))


# -- test J: the earlier dynamic-dimension representation keeps working ----------------------------------
def test_j_plain_names_and_abstracted_axes_still_work():
    @sprue.qjit
    def f(x: sprue.f64["n", 3], y: sprue.f64["n"]):
        return x.sum(axis=1) + y
    for n in (1, 4):
        x, y = np.ones((n, 3)), np.arange(float(n))
        np.testing.assert_array_equal(f(x, y), x.sum(1) + y)
    assert f.compile_count == 1
    with pytest.raises(sprue.SprueValueError, match=re.escape("f(): argument 'y' of type f64[n] does not fit"
                                                              " f64[5]: in axis 0, the size 5 is not n = 4")):
        f(np.ones((4, 3)), np.ones(5))


# -- entry points: size expressions in hints, return annotations ---------------------------------------
def test_entry_point_size_expressions_are_checked_with_the_numbers():
    for shape in ((8, 16), (1, 4), (3, 0)):
        a = np.arange(np.prod(shape), dtype=np.int8).reshape(shape)
        np.testing.assert_array_equal(ff(a), ff_np(a))
    with pytest.raises(sprue.SprueValueError, match=re.escape(
            "ff(): argument 'x' of type i8[n, m*4] does not fit i8[8,15]: in axis 1, m*4 = 15 has no solution")):
        ff(np.zeros((8, 15), np.int8))
    assert ff.compile_count == 1


def test_return_annotation_checked_at_compile_time_and_run_time():
    message = re.escape("wrong(): the result of type f64[n+1] does not fit f64[n]: in axis 0, the size n is not n+1")
    with pytest.warns(sprue.errors.AheadOfTimeWarning, match=message):   # at decoration, as Catalyst warns
        @sprue.qjit
        def wrong(x: sprue.f64["n"]) -> sprue.f64["n+1"]:  # noqa: F821
            return x * 2.0
    with pytest.raises(sprue.SprueValueError, match=message):            # and again at the call
        wrong(np.ones(2))

    @sprue.qjit
    def maybe(x: sprue.f64["n"]) -> sprue.f64["n"]:  # noqa: F821
        return jnp.concatenate([x, x])    # 2n == n only when n == 0: checked at run time
    assert maybe(np.ones(0)).shape == (0,)
    with pytest.raises(sprue.SprueValueError, match=re.escape("maybe(): the result of type f64[n] does not fit"
                                                              " f64[2*n]")):
        maybe(np.ones(2))


def test_unbound_size_names_are_rejected_at_decoration():
    with pytest.raises(sprue.SprueTypeError, match=re.escape("f: the size n in argument 'x' (f64[n+1]) is not bound")):
        @sprue.qjit
        def f(x: sprue.f64["n+1"]):  # noqa: F821
            return x


def test_size_expression_syntax_errors():
    with pytest.raises(sprue.SprueTypeError, match=re.escape("sprue.f64[...]: 'n**2' is not a size expression")):
        sprue.f64["n**2"]
    with pytest.raises(sprue.SprueTypeError, match=re.escape("'n // m' is not a size expression ('//' needs a"
                                                             " positive int on its right)")):
        sprue.f64["n // m"]


def test_grad_through_a_call():
    @sprue.qjit
    def energy(x: sprue.f64["n"]) -> sprue.f64[()]:
        return jnp.sum(jnp.sin(x) * x)
    g = sprue.qjit(sprue.grad(lambda x: energy(x) * 2.0), abstracted_axes={0: "k"})
    for n in (3, 5):
        x = np.linspace(0, 1, n)
        np.testing.assert_allclose(g(x), 2 * (np.cos(x) * x + np.sin(x)))


def test_a_caller_of_a_kernel_with_constants_saves_and_loads(tmp_path):
    w = np.arange(3.0)

    @sprue.qjit
    def k(x: sprue.f64["n", 3]) -> sprue.f64["n"]:  # noqa: F821
        return x @ w            # w: a constant of the callee, hoisted into the call's operands

    @sprue.qjit
    def caller(a):
        return k(a) * 2.0
    a = np.arange(12.0).reshape(4, 3)
    np.testing.assert_allclose(caller(a), a @ w * 2.0)
    path = sprue.save(caller, tmp_path / "caller.jaxpr")
    np.testing.assert_allclose(sprue.load(path)(a), a @ w * 2.0)


def test_a_caller_binding_a_kernels_size_to_a_constant_saves_and_loads(tmp_path):
    """The call binds the callee's `m` to 2 (`pjit[...] a 2:i64[] b`): read back, the inlined callee's
    `iota[shape=(None,)] 2` is i64[2], which its lowering's `?` size is cast to."""
    @sprue.qjit
    def ff(x: sprue.i8["n", "m*4"]) -> sprue.i32["n*m"]:  # noqa: F821
        return jnp.reshape(x.astype(np.int32)[:, ::4], (-1,))

    @sprue.qjit(abstracted_axes={0: "k"})
    def caller(x):
        return ff(x) * 2
    for rows in (3, 5):
        x = np.arange(rows * 8, dtype=np.int8).reshape(rows, 8)
        want = x.astype(np.int32)[:, ::4].reshape(-1) * 2
        np.testing.assert_array_equal(caller(x), want)
        path = sprue.save(caller, tmp_path / "caller.jaxpr")
        np.testing.assert_array_equal(sprue.load(path)(x), want)


# -- long, deep and huge size expressions (issue 20, item 12) ---------------------------------------
def test_a_1000_term_size_expression_is_read_without_recursion():
    terms = "+".join(["a"] * 1000)

    @sprue.qjit
    def f(x: sprue.f64["a"], y: sprue.f64[terms]):  # noqa: F821
        return jnp.sum(y) + x[0]

    assert f(np.ones(2), np.ones(2000)) == 2001.0
    with pytest.raises(sprue.SprueValueError, match=r"in axis 0, the size 1999 is not a\+a\+a"):
        f(np.ones(2), np.ones(1999))
    mixed = "-".join(["(b*3)"] * 999) + "+" + "*".join(["b"] * 3)   # -2991*b + b**3, parsed flat
    p = sprue.ir.dim_patterns.parse_dim_pattern(mixed)
    assert p.names == ["b"] and p.evaluate({"b": 10}) == -2991 * 10 + 1000


def test_size_expressions_nested_too_deep_or_too_large_name_the_line():
    deep = "(" * 150 + "n" + ")" * 150
    with pytest.raises(sprue.SprueTypeError, match=rf"sprue.f64\[...\]: '\(+n\)+' is not a size expression"
                       rf" \(parentheses nested more than 100 deep\) \(at {HERE} "):
        sprue.f64[deep]
    assert sprue.f64["(" * 50 + "n" + ")" * 50].shape == ("(" * 50 + "n" + ")" * 50,)
    with pytest.raises(sprue.SprueTypeError, match=rf"'n\*99999999999999999999' is not a size expression"
                       rf" \(99999999999999999999 does not fit in int64 \(sizes are at most 2\*\*63-1\)\) \(at {HERE} "):
        sprue.f64["n", "n*99999999999999999999"]
    for big in (2 ** 63, 2 ** 64, 10 ** 30):
        with pytest.raises(sprue.SprueTypeError, match=rf"sprue.f64\[...\]: dimension {big} does not fit in int64"
                           rf" \(sizes are at most 2\*\*63-1\) \(at {HERE} "):
            sprue.f64[0, big]
    assert sprue.i8[2 ** 63 - 1].shape == (2 ** 63 - 1,)
    with pytest.raises(sprue.SprueTypeError, match=rf"'n\*\*2' is not a size expression \('\*\*' is not allowed\)"
                       rf" \(at {HERE} "):
        sprue.f64["n**2"]


def test_sizes_beyond_int64_in_shape_arguments_name_the_line():
    for make in (lambda x: jnp.zeros((0, 2 ** 64)) + x[0], lambda x: jnp.reshape(x, (0, 2 ** 64)),
                 lambda x: jnp.broadcast_to(x, (2 ** 63, 0))):
        with pytest.raises(ShapeError, match=rf"makes an array of shape f64\[.*\]: the size \d+ does not fit"
                           rf" in int64 \(\d+ is beyond 2\*\*63-1 in magnitude\) \(at {HERE} "):
            sprue.qjit(make)(np.ones(0))
    with pytest.raises(ShapeError, match=rf"the size 18446744073709551616 does not fit in int64.* \(at {HERE} "):
        jnp.zeros((0, 2 ** 64))   # eagerly: numpy's own error would be "Maximum allowed dimension exceeded"
