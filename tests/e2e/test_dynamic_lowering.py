"""Dynamic shapes end to end: functions written with sprue.lax (and sprue.numpy where it handles
`?` dims) compiled once through sprue.qjit(abstracted_axes=...) or named-dim hints, run at sizes
0, 1, 3 and 1000, and compared with numpy itself."""

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from sprue.lowering.stablehlo import lower
from tests.helpers.arrays import SIZES

rng = np.random.default_rng(0)


def vec(n):
    return (rng.random(n),)


def mat(n):
    return (rng.random((n, 3)),)


def ints(n):
    return (rng.integers(-50, 50, n),)


def run_at_sizes(fn, reference, make, sizes=SIZES, axes=None):
    """fn compiled once (every array argument's axis 0 is the size `n`) agrees with numpy at
    every size."""
    f = sprue.qjit(fn, abstracted_axes={0: "n"} if axes is None else axes)
    for n in sizes:
        args = make(n)
        got, want = f(*args), reference(*args)
        assert np.shape(got) == np.shape(want), (n, np.shape(got), np.shape(want))
        assert np.asarray(got).dtype == np.asarray(want).dtype, (n, np.asarray(got).dtype)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert f.compile_count == 1
    return f


CASES = {
    # elementwise: operands of equal `?` dims, scalars broadcast to them
    "sin_mul_add": (lambda x: lax.sin(x) * 2.0 + x, lambda x: np.sin(x) * 2.0 + x, vec),
    "int_div_rem_pow_shift": (
        lambda x: lax.div(x, np.int64(3)) + lax.rem(x, np.int64(5)) + lax.integer_pow(x, 3)
        + lax.shift_left(x, np.int64(2)),
        lambda x: np.fix(x / 3).astype(np.int64) + np.fmod(x, 5) + x ** 3 + (x << 2), ints),
    "integer_pow_negative": (lambda x: lax.integer_pow(x, -2), lambda x: x ** -2.0, vec),
    "select_n": (lambda x: lax.select(lax.gt(x, 0.5), x, lax.neg(x)), lambda x: np.where(x > 0.5, x, -x), vec),
    "clamp": (lambda x: lax.clamp(0.2, x, 0.7), lambda x: np.clip(x, 0.2, 0.7), vec),
    "convert_saturating": (lambda x: lax.convert_element_type(x * 100.0, np.int32),
                           lambda x: (x * 100.0).astype(np.int32), vec),
    "expm1_log1p": (lambda x: lax.expm1(x) + lax.log1p(x), lambda x: np.expm1(x) + np.log1p(x), vec),
    # shape ops
    "broadcast_trailing": (lambda x: lax.broadcast_in_dim(x, (x.shape[0], 4), (0,)),
                           lambda x: np.broadcast_to(x[:, None], (len(x), 4)), vec),
    "broadcast_leading": (lambda x: lax.broadcast_in_dim(x, (4, x.shape[0]), (1,)),
                          lambda x: np.broadcast_to(x, (4, len(x))), vec),
    "broadcast_expanding": (lambda x: lax.broadcast_in_dim(lax.reduce_sum(x, (0,)), (x.shape[0], 3), ()),
                            lambda x: np.broadcast_to(x.sum(0), (len(x), 3)), vec),
    "broadcast_size_one_axis": (lambda x: lax.broadcast_in_dim(lax.slice(x, (0, 0), (1, 3)), (x.shape[0] + 2, 3),
                                                               (0, 1)),
                                lambda x: np.broadcast_to(x[:1], (len(x) + 2, 3)), mat, (1, 3, 1000)),
    "reshape_rows_to_cols": (lambda x: lax.reshape(x, (3, x.shape[0])), lambda x: x.reshape(3, -1), mat),
    "reshape_flatten": (lambda x: lax.reshape(x, (x.shape[0] * 3,)), lambda x: x.reshape(-1), mat),
    "reshape_of_transpose": (lambda x: lax.reshape(lax.transpose(x, (1, 0)), (x.shape[0] * 3,)),
                             lambda x: x.T.reshape(-1), mat),
    "squeeze": (lambda x: lax.squeeze(lax.reshape(x, (x.shape[0], 1)), (1,)), lambda x: x, vec),
    "iota": (lambda x: lax.iota(np.int64, x.shape[0] + 1), lambda x: np.arange(len(x) + 1), vec),
    "iota_bool": (lambda x: lax.iota(np.bool_, x.shape[0] + 1), lambda x: np.arange(len(x) + 1) != 0, vec),
    "broadcasted_iota": (lambda x: lax.broadcasted_iota(np.float64, (x.shape[0], 2), 1),
                         lambda x: np.broadcast_to(np.arange(2.0), (len(x), 2)), vec),
    "concatenate": (lambda x: lax.concatenate([x, x * 2.0, lax.broadcast_in_dim(1.0, (3,), ())], 0),
                    lambda x: np.concatenate([x, x * 2.0, np.ones(3)]), vec),
    "transpose": (lambda x: lax.transpose(x, (1, 0)), lambda x: x.T, mat),
    "rev_dynamic_axis": (lambda x: lax.rev(x, (0,)), lambda x: x[::-1], mat),
    "rev_static_axis": (lambda x: lax.rev(x, (1,)), lambda x: x[:, ::-1], mat),
    "rev_both": (lambda x: lax.rev(x, (0, 1)), lambda x: x[::-1, ::-1], mat),
    # reductions, scans, contractions, sort
    "sum_dynamic_axis": (lambda x: lax.reduce_sum(x, (0,)), lambda x: x.sum(0), mat),
    "sum_static_axis": (lambda x: lax.reduce_sum(x, (1,)), lambda x: x.sum(1), mat),
    "prod_all": (lambda x: lax.reduce_prod(x + 0.5, (0, 1)), lambda x: np.prod(x + 0.5), mat),
    "max_dynamic_axis": (lambda x: lax.reduce_max(x, (0,)), lambda x: x.max(0, initial=-np.inf), mat),
    "argmax_static_axis": (lambda x: lax.argmax(x, 1), lambda x: x.argmax(1), mat),
    "argmin_dynamic_axis": (lambda x: lax.argmin(x, 0), lambda x: x.argmin(0), mat, (1, 3, 1000)),
    "cumsum_dynamic_axis": (lambda x: lax.cumsum(x, 0), lambda x: np.cumsum(x, 0), mat),
    "cumsum_reverse": (lambda x: lax.cumsum(x, 0, reverse=True), lambda x: np.cumsum(x[::-1], 0)[::-1], mat),
    "cumprod": (lambda x: lax.cumprod(x + 0.5, 0), lambda x: np.cumprod(x + 0.5, 0), vec),
    "cummax_static_axis": (lambda x: lax.cummax(x, 1), lambda x: np.maximum.accumulate(x, 1), mat),
    "cummin_reverse_int": (lambda x: lax.cummin(x, 0, reverse=True), lambda x: np.minimum.accumulate(x[::-1])[::-1],
                           ints),
    "dot_contract_dynamic": (lambda x: lax.dot_general(x, x, (((0,), (0,)), ((), ()))), lambda x: x.T @ x, mat),
    "dot_outer_dynamic": (lambda x: lax.dot_general(x, x, (((1,), (1,)), ((), ()))), lambda x: x @ x.T, mat,
                          (0, 1, 3, 200)),
    "dot_bool": (lambda x: lax.dot_general(lax.gt(x, 0.5), lax.gt(x, 0.7), (((0,), (0,)), ((), ()))),
                 lambda x: (x > 0.5).T @ (x > 0.7), mat),
    "sort_dynamic_axis": (lambda x: lax.sort(x, 0), lambda x: np.sort(x, 0), mat),
    "sort_static_axis": (lambda x: lax.sort(x, 1), lambda x: np.sort(x, 1), mat),
    "sort_two_operands": (lambda x: lax.sort((x, -x), 0, num_keys=1)[1], lambda x: -np.sort(x), vec),
    # sprue.numpy where it already handles `?` dims
    "jnp_sum": (lambda x: jnp.sum(jnp.sin(x) * 2), lambda x: np.sum(np.sin(x) * 2), vec),
    "jnp_where": (lambda x: jnp.where(x > 0.5, x, 0.0), lambda x: np.where(x > 0.5, x, 0.0), vec),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_once_right_at_every_size(name):
    fn, reference, make, *sizes = CASES[name]
    run_at_sizes(fn, reference, make, *sizes)


@pytest.mark.parametrize("reducer, identity", [
    (lax.reduce_sum, 0.0), (lax.reduce_prod, 1.0), (lax.reduce_max, -np.inf), (lax.reduce_min, np.inf)])
def test_reducing_an_axis_empty_at_run_time_gives_the_identity(reducer, identity):
    f = sprue.qjit(lambda x: reducer(x, (0,)), abstracted_axes={0: "n"})
    np.testing.assert_array_equal(f(np.zeros((0, 3))), np.full(3, identity))
    np.testing.assert_array_equal(f(np.ones((2, 3))), reducer(np.ones((2, 3)), (0,)))
    assert f.compile_count == 1


@pytest.mark.parametrize("reducer, dtype, identity", [
    (lax.reduce_and, np.bool_, True), (lax.reduce_or, np.bool_, False),
    (lax.reduce_max, np.int32, np.iinfo(np.int32).min), (lax.reduce_min, np.uint8, 255),
    (lax.reduce_and, np.int64, -1), (lax.reduce_or, np.int64, 0)])
def test_empty_reductions_of_integers_and_booleans(reducer, dtype, identity):
    f = sprue.qjit(lambda x: reducer(x, (0,)), abstracted_axes={0: "n"})
    got = f(np.zeros(0, dtype))
    assert got.dtype == dtype and got == identity


def test_cumulative_of_an_empty_and_a_single_element_axis():
    f = sprue.qjit(lambda x: lax.cumsum(x, 0), abstracted_axes={0: "n"})
    assert f(np.zeros(0)).shape == (0,)
    np.testing.assert_array_equal(f(np.array([2.5])), [2.5])
    np.testing.assert_array_equal(f(np.arange(5.0)), np.cumsum(np.arange(5.0)))
    assert f.compile_count == 1


def test_two_sizes_and_scalar_arguments():
    # (parameters named in sorted order: qjit's per-argument abstracted_axes currently pairs the
    # dicts with the leaves in sorted-name order)
    def f(a, b, k):
        return lax.dot_general(a, b, (((1,), (0,)), ((), ()))) * k
    g = sprue.qjit(f, abstracted_axes=({0: "n", 1: "k"}, {0: "k", 1: "m"}, None))
    for n, k, m in [(0, 3, 2), (2, 0, 3), (3, 4, 0), (50, 30, 20)]:
        x, y = rng.random((n, k)), rng.random((k, m))
        out = g(x, y, 2.0)
        assert out.shape == (n, m)
        np.testing.assert_allclose(out, x @ y * 2.0)
    assert g.compile_count == 1


def test_zero_size_results_keep_their_static_dims():
    f = sprue.qjit(lambda x: (x * 2.0, lax.transpose(x, (1, 0)), lax.reduce_sum(x, (1,))), abstracted_axes={0: "n"})
    a, b, c = f(np.zeros((0, 3)))
    assert a.shape == (0, 3) and b.shape == (3, 0) and c.shape == (0,)
    assert a.dtype == np.float64
    a, b, c = f(np.ones((2, 3)))
    assert a.shape == (2, 3) and b.shape == (3, 2)
    np.testing.assert_array_equal(c, [3.0, 3.0])


def test_named_dim_hints_compile_at_decoration_time():
    @sprue.qjit
    def f(x: sprue.f64["n", 3], y: sprue.f64["n"]):
        return lax.reduce_sum(x, (1,)) * y

    assert f.compile_count == 1  # before any call
    for n in SIZES:
        x, y = rng.random((n, 3)), rng.random(n)
        np.testing.assert_allclose(f(x, y), x.sum(1) * y)
    assert f.compile_count == 1
    with pytest.raises(ValueError, match=r"f\(\): argument 'y' of type f64\[n\] does not fit f64\[\d+\]: in axis 0,"
                                         r" the size \d+ is not n = \d+ \(n = \d+ from argument 'x' axis 0\)"):
        f(np.ones((2, 3)), np.ones(3))


def test_jaxpr_prints_dims_as_variables_and_the_module_has_dynamic_types():
    f = sprue.qjit(lambda x, y: jnp.sin(x) * 2 + y, abstracted_axes={0: "n"})
    f(np.ones(3), np.ones(3))
    text = str(f.jaxpr)
    assert text.startswith("{ lambda ; a:i64[] b:f64[a] c:f64[a]. let")
    assert "tensor<?xf64>" in f.mlir
    assert f.compile_count == 1


def test_sizes_computed_in_the_program():
    def f(x):
        n = x.shape[0]
        return lax.iota(np.int64, 2 * n + 1), lax.broadcast_in_dim(0.5, (n, n // 2), ())

    g = sprue.qjit(f, abstracted_axes={0: "n"})
    for n in SIZES[:3] + (17,):
        a, b = g(np.zeros(n))
        np.testing.assert_array_equal(a, np.arange(2 * n + 1))
        np.testing.assert_array_equal(b, np.full((n, n // 2), 0.5))
    assert g.compile_count == 1


def test_int_argument_as_a_size():
    @sprue.qjit
    def f(n: int):
        return lax.broadcasted_iota(np.int32, (n, 2), 0)

    for n in SIZES:
        np.testing.assert_array_equal(f(n), np.broadcast_to(np.arange(n, dtype=np.int32)[:, None], (n, 2)))
    assert f.compile_count == 1


def test_acceptance_example_from_the_issue():
    @sprue.qjit
    def circuit(sz: int):
        a0 = jnp.ones([sz], dtype=float)

        @sprue.for_loop(0, 10, 1)
        def loop(i, a):
            return a + a0
        a2 = loop(a0)
        return a0 + a2

    for sz in (0, 1, 3, 10 ** 6):
        out = circuit(sz)
        assert out.shape == (sz,) and out.dtype == np.float64
        np.testing.assert_array_equal(out, np.full(sz, 12.0))
    assert circuit.compile_count == 1
    assert str(circuit.jaxpr).startswith("{ lambda ; a:i64[]. let")


def test_lower_keeps_a_valid_stablehlo_module_without_checks():
    closed = sprue.make_jaxpr(lambda n: lax.iota(np.int64, n))(3)
    lowered = lower(closed)
    assert not lowered.has_status and lowered.check_messages == ()
    assert "stablehlo.dynamic_iota" in lowered.text
    assert "func.func @main(%arg0: tensor<i64>" in lowered.text


def test_a_dynamically_shaped_loop_carry_is_updated_in_place(tmp_path):
    # the body's tensor.dim of the carry (sizing its result) must not stop the in-place update
    @sprue.qjit(keep_intermediate=tmp_path)
    def f(sz: int):
        a0 = jnp.ones([sz], dtype=float)

        @sprue.for_loop(0, 10, 1)
        def loop(i, a):
            return a * 0.5 + a0
        return loop(a0)

    a0 = np.ones(4)
    a = a0
    for _ in range(10):
        a = a * 0.5 + a0
    np.testing.assert_array_equal(f(4), a)
    (path,) = tmp_path.glob("*_bufferized.mlir")
    body = path.read_text().split("scf.for", 1)[1].split("scf.yield", 1)[0]
    assert "memref.alloc" not in body and "memref.copy" not in body


UNARY = ["neg", "sign", "floor", "ceil", "round", "is_finite", "exp", "exp2", "log", "log1p", "expm1", "tanh",
         "logistic", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "sqrt",
         "rsqrt", "cbrt", "abs", "square"]
BINARY = ["add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "eq", "ne", "lt", "le", "gt", "ge"]
INTEGER_BINARY = ["add", "sub", "mul", "div", "rem", "pow", "max", "min", "bitwise_and", "bitwise_or", "bitwise_xor",
                  "shift_left", "shift_right_arithmetic", "shift_right_logical"]


def _against_eager(fn, make):
    """Compiled once for `?` sizes, equal to the eager run (sprue.lax's numpy reference rules)."""
    f = sprue.qjit(fn, abstracted_axes={0: "n"})
    for n in SIZES:
        args = make(n)
        with np.errstate(all="ignore"):
            want = fn(*args)
        got = f(*args)
        for g, w in zip(got, want) if isinstance(want, tuple) else [(got, want)]:
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=0)
    assert f.compile_count == 1


@pytest.mark.parametrize("name", UNARY)
def test_every_unary_elementwise_primitive(name):
    op = getattr(lax, name)
    _against_eager(lambda x: op(x), lambda n: (rng.uniform(-3.0, 3.0, n),))


@pytest.mark.parametrize("name", BINARY)
def test_every_binary_elementwise_primitive_with_a_scalar_operand(name):
    op = getattr(lax, name)
    _against_eager(lambda x, y: (op(x, y), op(x, 1.5), op(2.5, y)),
                   lambda n: (rng.uniform(-3.0, 3.0, n), rng.uniform(-3.0, 3.0, n)))


@pytest.mark.parametrize("name", INTEGER_BINARY)
def test_every_integer_binary_primitive(name):
    op = getattr(lax, name)
    _against_eager(lambda x, y: (op(x, y), op(x, np.int32(3))),
                   lambda n: (rng.integers(-40, 40, n).astype(np.int32), rng.integers(-3, 40, n).astype(np.int32)))


def test_select_n_with_an_integer_selector_and_bitwise_not():
    _against_eager(lambda w, x: (lax.select_n(w, x, x * 2, x * 3), lax.bitwise_not(w)),
                   lambda n: (rng.integers(0, 3, n).astype(np.int32), rng.integers(-9, 9, n)))
