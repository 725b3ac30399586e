"""Row variables in annotations (OCANNL's rows, issue 25): `sprue.f64[..., "n"]` and
`sprue.f64["*b", "n"]` compile once for every rank, the row collapsed into one axis at the
boundary and restored on the results, compared with numpy for ranks 1 to 5; the operations that
need a row's rank are compile-time errors naming the operation and the line; calls inside traces
(grad, vmap), sprue.save / sprue.load."""
import re
import warnings

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.base.errors import AheadOfTimeWarning, SprueTypeError, SprueValueError

HERE = r"test_rows\.py:\d+"
RNG = np.random.default_rng(25)
ROWS = [(), (3,), (2, 3), (2, 1, 3), (2, 3, 1, 2)]   # ranks 1 to 5 with one trailing axis


def layer_np(x, w):
    return np.tanh(x @ w) + x.sum(axis=-1, keepdims=True)


@sprue.qjit
def layer(x: sprue.f64["*b", "n"], w: sprue.f64["n", "h"]) -> sprue.f64["*b", "h"]:  # noqa: F821, F722
    return jnp.tanh(x @ w) + x.sum(axis=-1, keepdims=True)


@sprue.qjit
def last_sum(x: sprue.f64[..., "n"]):  # noqa: F821, F722
    return jnp.sum(x * x, axis=-1)


def test_a_named_row_compiles_once_at_decoration_and_runs_for_ranks_1_to_5():
    assert layer.compile_count == 1   # ahead of time: every parameter is annotated
    w = RNG.standard_normal((4, 3))
    for row in ROWS:
        x = RNG.standard_normal((*row, 4))
        got = layer(x, w)
        assert got.shape == (*row, 3)
        np.testing.assert_allclose(got, layer_np(x, w), rtol=1e-13, atol=1e-14)
    assert layer.compile_count == 1


def test_an_anonymous_row_takes_any_leading_axes():
    for row in ROWS:
        x = RNG.standard_normal((*row, 5))
        np.testing.assert_allclose(last_sum(x), np.sum(x * x, axis=-1), rtol=1e-13)
    assert last_sum.compile_count == 1


def test_row_is_one_dynamic_axis_in_the_jaxpr():
    (row, n, h, x, w) = layer.jaxpr.jaxpr.invars
    assert [v.dim.name for v in (row, n, h)] == ["*b", "n", "h"]
    assert len(x.aval.shape) == 2 and x.aval.shape[0] == sprue.ir.shapes.dim(row.dim)


def test_contiguous_arguments_are_not_copied_and_strided_ones_are():
    x = RNG.standard_normal((2, 3, 4))
    compiled = layer._fixed
    (flat,), _ = compiled.rows.collapse([x], ["x"], "layer")
    assert np.shares_memory(flat, x) and flat.shape == (6, 4)
    strided = RNG.standard_normal((3, 2, 4)).transpose(1, 0, 2)
    (copied,), _ = compiled.rows.collapse([strided], ["x"], "layer")
    assert not np.shares_memory(copied, strided)
    np.testing.assert_allclose(layer(strided, np.eye(4, 3)), layer_np(strided, np.eye(4, 3)), rtol=1e-13)


def test_elementwise_broadcasting_slicing_and_reshaping_after_the_row():
    @sprue.qjit
    def f(x: sprue.f64["*b", 4], y: sprue.f64["*b", 4], s: sprue.f64[4]):  # noqa: F821, F722
        z = jnp.where(x > 0, x * s, y)[..., None] + x[..., ::-1][..., :, None] * y[..., None, :]
        pairs = z.reshape(*z.shape[:-1], 2, -1)
        return jnp.cumsum(pairs, axis=-1), z.mean(), jnp.concatenate([x, y], axis=-1)

    def f_np(x, y, s):
        z = np.where(x > 0, x * s, y)[..., None] + x[..., ::-1][..., :, None] * y[..., None, :]
        return np.cumsum(z.reshape(*z.shape[:-1], 2, -1), axis=-1), z.mean(), np.concatenate([x, y], axis=-1)

    @sprue.qjit
    def pick(x: sprue.f64["*b", "n"], i: sprue.i64["k"]):  # noqa: F821, F722
        return x[..., i] * 2.0, x[..., ::-1]

    s = RNG.standard_normal(4)
    for row in ROWS:
        x, y = RNG.standard_normal((*row, 4)), RNG.standard_normal((*row, 4))
        for got, want in zip(f(x, y, s), f_np(x, y, s)):
            assert np.shape(got) == np.shape(want)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        got, flipped = pick(x, np.array([3, 0, 3]))
        np.testing.assert_allclose(got, x[..., [3, 0, 3]] * 2.0)
        np.testing.assert_allclose(flipped, x[..., ::-1])
    assert f.compile_count == 1 and pick.compile_count == 1


def test_matmul_with_the_row_as_batch_axis():
    @sprue.qjit
    def bmm(a: sprue.f64["*b", "m", "k"], c: sprue.f64["*b", "k", "n"]) -> sprue.f64["*b", "m", "n"]:  # noqa: F821, F722
        return a @ c

    for row in ROWS:
        a, c = RNG.standard_normal((*row, 2, 3)), RNG.standard_normal((*row, 3, 4))
        np.testing.assert_allclose(bmm(a, c), a @ c, rtol=1e-13)
    assert bmm.compile_count == 1


def test_einsum_with_ellipsis_over_a_row():
    @sprue.qjit
    def f(x: sprue.f64["*b", "n"], w: sprue.f64["n", "h"]):  # noqa: F821, F722
        return jnp.einsum("...n,nh->...h", x, w), jnp.einsum("...n,...n->...", x, x)

    w = RNG.standard_normal((4, 5))
    for row in ROWS:
        x = RNG.standard_normal((*row, 4))
        got, norms = f(x, w)
        np.testing.assert_allclose(got, np.einsum("...n,nh->...h", x, w), rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(norms, np.einsum("...n,...n->...", x, x), rtol=1e-13)
    assert f.compile_count == 1


def test_results_without_a_return_annotation_get_their_row_back():
    @sprue.qjit
    def f(x: sprue.f64["*b", 3]):  # noqa: F722
        return x * 2.0, x.sum()

    x = RNG.standard_normal((2, 2, 3))
    doubled, total = f(x)
    assert doubled.shape == (2, 2, 3) and np.shape(total) == ()
    np.testing.assert_allclose(doubled, 2 * x)
    np.testing.assert_allclose(total, x.sum(), rtol=1e-13)


# -- what needs the row's rank ---------------------------------------------------------------------
NEEDS_RANK = [
    ("reduce_sum over axis 0", lambda x: x.sum(axis=0), "`reduce_sum` needs the rank of the row \\*b"),
    ("transpose", lambda x: x.T, "`transpose` needs the rank of the row \\*b: it makes f64\\[4,\\*b\\]"),
    ("flatten", lambda x: x.reshape(-1), "`reshape` needs the rank of the row \\*b"),
    ("index", lambda x: x[0], "needs the rank of the row \\*b: slicing the row's axes"),
    ("cumsum", lambda x: jnp.cumsum(x, axis=0), "`cumsum` needs the rank of the row \\*b"),
    ("ndim", lambda x: x * x.ndim, "x.ndim needs the rank of the row \\*b"),
    ("shape[0]", lambda x: x * x.shape[0], "x.shape\\[0\\] needs the rank of the row \\*b"),
    ("len", lambda x: x * len(x), "len\\(x\\) needs the rank of the row \\*b"),
]


@pytest.mark.parametrize("what,body,message", NEEDS_RANK, ids=[c[0] for c in NEEDS_RANK])
def test_operations_that_need_the_rank_are_compile_time_errors(what, body, message):
    def f(x: sprue.f64["*b", 4]):  # noqa: F821, F722
        return body(x)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        q = sprue.qjit(f)
    assert any(re.search(message, str(w.message)) for w in caught), [str(w.message) for w in caught]
    with pytest.raises(SprueTypeError, match=message + ".*" + HERE):
        q(np.ones((2, 3, 4)))


def test_two_rows_in_one_operation_are_an_error():
    def f(x: sprue.f64["*a", 4], y: sprue.f64["*b", 4]):  # noqa: F821, F722
        return x + y

    with pytest.warns(AheadOfTimeWarning, match=f"`sprue.numpy.add` needs the rank of the row \\*a: it combines the"
                                                      f" rows \\*a and \\*b.*{HERE}"):
        sprue.qjit(f)


def test_a_size_that_may_not_be_1_against_the_row_is_an_error():
    def f(x: sprue.f64[..., 4], y: sprue.f64["m", 4]):  # noqa: F821, F722
        return x + y

    with pytest.warns(AheadOfTimeWarning, match=f"needs the rank of the row `...` of argument 'x'.*{HERE}"):
        sprue.qjit(f)


def test_a_static_1_against_the_row_broadcasts():
    @sprue.qjit
    def f(x: sprue.f64[..., 4], y: sprue.f64[1, 4]):  # noqa: F821, F722
        return x + y

    x, y = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((1, 4))
    np.testing.assert_allclose(f(x, y), x + y)


# -- the boundary's errors ---------------------------------------------------------------------------
def test_a_named_row_must_be_the_same_axes_in_every_argument():
    @sprue.qjit
    def f(x: sprue.f64["*b", 2], y: sprue.f64["*b", 2]):  # noqa: F821, F722
        return x + y

    with pytest.raises(SprueValueError, match=r"the row \*b is \(2, 3\) in argument 'x' but \(3, 2\) in argument 'y'"):
        f(np.ones((2, 3, 2)), np.ones((3, 2, 2)))


def test_a_named_row_is_checked_at_run_time_in_a_traced_call():
    @sprue.qjit
    def add(x: sprue.f64["*b", 2], y: sprue.f64["*b", 2]):  # noqa: F821, F722
        return x + y

    caller = sprue.qjit(lambda x, y: add(x, y) * 2.0, abstracted_axes=({0: "m", 1: "k"}, {0: "p", 1: "q"}))
    x = RNG.standard_normal((2, 3, 2))
    np.testing.assert_allclose(caller(x, x), 4 * x)
    with pytest.raises(SprueValueError, match=r"add\(\): the row \*b is \(m, k\) in argument 'x' but \(p, q\) in"
                                              r" argument 'y'"):
        caller(np.ones((2, 3, 2)), np.ones((3, 2, 2)))
    with pytest.raises(SprueValueError, match=r"the row \*b is \(2, 3\) in argument 'x' but \(3, 2\) in argument 'y'"):
        sprue.qjit(lambda x, y: add(x, y))(np.ones((2, 3, 2)), np.ones((3, 2, 2)))


def test_an_argument_needs_the_axes_after_its_row():
    with pytest.raises(SprueValueError, match=r"argument 'a' has shape \(3,\), but its type has 2 axes after the row"):
        layer_bmm(np.ones(3))


@sprue.qjit
def layer_bmm(a: sprue.f64["*b", "m", "k"]):  # noqa: F821, F722
    return a * 2.0


def test_a_row_must_come_first_and_be_well_formed():
    with pytest.raises(SprueTypeError, match=rf"the row '\*b' must be the first entry of the shape.*{HERE}"):
        sprue.f64["n", "*b"]
    with pytest.raises(SprueTypeError, match=rf"the row '...' must be the first entry.*{HERE}"):
        sprue.f64[3, ...]
    with pytest.raises(SprueTypeError, match=r"'\*1b' is not a size expression \(a row is '\*' and a name"):
        sprue.f64["*1b", 3]


def test_a_result_row_must_be_a_parameters():
    def f(x: sprue.f64["*b", 2]) -> sprue.f64["*c", 2]:  # noqa: F821, F722
        return x

    with pytest.raises(SprueTypeError, match=r"f: the row \*c in the result \(f64\[\*c, 2\]\) is not a parameter's"):
        sprue.qjit(f)


# -- transformations, saving ------------------------------------------------------------------------
def test_grad_through_a_row_function():
    @sprue.qjit
    def energy(x: sprue.f64["*b", "n"], w: sprue.f64["n"]) -> sprue.f64["*b"]:  # noqa: F821, F722
        return jnp.sum(jnp.tanh(x * w), axis=-1)

    w = RNG.standard_normal(4)
    for row in ROWS:
        x = RNG.standard_normal((*row, 4))
        gx, gw = sprue.grad(lambda x, w: energy(x, w).sum(), argnums=(0, 1))(x, w)
        sech2 = 1 - np.tanh(x * w) ** 2
        np.testing.assert_allclose(gx, sech2 * w, rtol=1e-12)
        np.testing.assert_allclose(gw, (sech2 * x).reshape(-1, 4).sum(0), rtol=1e-12)
    assert energy.compile_count == 1


def test_grad_inside_a_row_function():
    @sprue.qjit
    def force(x: sprue.f64["*b", "n"]) -> sprue.f64["*b", "n"]:  # noqa: F821, F722
        return sprue.grad(lambda y: jnp.sum(jnp.sin(y) * y))(x)

    for row in ROWS:
        x = RNG.standard_normal((*row, 3))
        np.testing.assert_allclose(force(x), np.cos(x) * x + np.sin(x), rtol=1e-13)
    assert force.compile_count == 1


def test_vmap_of_a_row_function():
    w = RNG.standard_normal((4, 3))
    for row in ROWS[:4]:
        xs = RNG.standard_normal((5, *row, 4))
        got = sprue.vmap(layer, in_axes=(0, None))(xs, w)
        np.testing.assert_allclose(got, layer_np(xs, w), rtol=1e-13, atol=1e-14)
    inner = sprue.qjit(lambda xs: sprue.vmap(lambda x: last_sum(x))(xs))
    xs = RNG.standard_normal((5, 2, 3))
    np.testing.assert_allclose(inner(xs), np.sum(xs * xs, axis=-1), rtol=1e-13)


def test_qjit_of_grad_and_vmap_of_a_row_annotated_function():
    def loss(x: sprue.f64["*b", "n"], w: sprue.f64["n"]):  # noqa: F821, F722
        return jnp.sum(jnp.tanh(x * w))

    g = sprue.qjit(sprue.grad(loss))
    v = sprue.qjit(sprue.vmap(loss, in_axes=(0, None)))   # vmap's examples are not rows: hints dropped
    w = RNG.standard_normal(3)
    for row in ROWS:
        x = RNG.standard_normal((*row, 3))
        np.testing.assert_allclose(g(x, w), (1 - np.tanh(x * w) ** 2) * w, rtol=1e-12)
        xs = RNG.standard_normal((4, *row, 3))
        np.testing.assert_allclose(v(xs, w), np.tanh(xs * w).reshape(4, -1).sum(1), rtol=1e-12)
    assert g.compile_count == 1


def test_save_and_load_keep_the_rows(tmp_path):
    path = sprue.save(layer, tmp_path / "layer.jaxpr")
    assert "# implicit a=*b" in path.read_text()
    loaded = sprue.load(path)
    w = RNG.standard_normal((4, 3))
    for row in ROWS:
        x = RNG.standard_normal((*row, 4))
        np.testing.assert_allclose(loaded(x, w), layer_np(x, w), rtol=1e-13, atol=1e-14)
    assert loaded.compile_count == 1


def test_result_shapes_restore_the_row():
    assert layer.result_shapes(np.ones((2, 5, 4)), np.ones((4, 3))) == (2, 5, 3)


def test_out_destinations_with_a_row():
    x, w = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((4, 3))
    out = np.empty((2, 3, 3))
    layer(x, w, out=out)
    np.testing.assert_allclose(out, layer_np(x, w), rtol=1e-13, atol=1e-14)
