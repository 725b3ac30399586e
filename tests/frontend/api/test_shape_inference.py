"""Shapes inferred from use (OCANNL's shape inference, issue 25): parameters with partial hints,
a bare dtype or none get their shapes from the program's constraints and compile ahead of time;
an MLP whose only hint is its input's shape, run for several sizes against numpy, its C header
stating every weight's shape symbolically; conflicting uses name the parameter and both lines."""
import re

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.base.errors import AheadOfTimeWarning, ShapeError, SprueTypeError
from sprue.tools.compile import Options, compile_file

HERE = r"test_shape_inference\.py:(\d+)"
RNG = np.random.default_rng(2025)


@sprue.qjit
def mlp(x: sprue.f64["b", 784], w1, b1, w2, b2):  # noqa: F821
    h = jnp.tanh(x @ w1 + b1)
    return h @ w2 + b2


def mlp_np(x, w1, b1, w2, b2):
    return np.tanh(x @ w1 + b1) @ w2 + b2


def test_an_mlp_whose_only_hint_is_its_input_compiles_ahead_of_time():
    assert mlp.compile_count == 1
    assert {n: repr(h) for n, h in mlp.inferred_hints.items()} == {
        "x": "sprue.f64['b', 784]", "w1": "sprue.f64[784, 'w1_1']", "b1": "sprue.f64['w1_1']",
        "w2": "sprue.f64['w1_1', 'w2_1']", "b2": "sprue.f64['w2_1']"}
    assert not [e for e in mlp.jaxpr.jaxpr.eqns if e.primitive.name == "check"]   # nothing left to check
    for b, h, k in [(1, 3, 1), (4, 16, 10), (9, 7, 2)]:
        args = (RNG.standard_normal((b, 784)), RNG.standard_normal((784, h)) / 28, RNG.standard_normal(h),
                RNG.standard_normal((h, k)), RNG.standard_normal(k))
        np.testing.assert_allclose(mlp(*args), mlp_np(*args), rtol=1e-12, atol=1e-12)
    assert mlp.compile_count == 1


def test_inferred_shapes_are_checked_at_the_call():
    with pytest.raises(Exception, match=r"w1_1"):
        mlp(np.ones((2, 784)), np.ones((784, 3)), np.ones(4), np.ones((3, 2)), np.ones(2))


def test_the_header_states_every_weights_shape_symbolically(tmp_path):
    saved = sprue.save(mlp, tmp_path / "mlp.jaxpr")
    header = compile_file(Options(saved, tmp_path / "out"))["h"].read_text()
    assert ("Signature: (b: i64[], w1_1: i64[], w2_1: i64[], x: f64[b,784], w1: f64[784,w1_1], b1: f64[w1_1],"
            " w2: f64[w1_1,w2_1], b2: f64[w2_1]) -> (f64[b,w2_1])") in header
    loaded = sprue.load(saved)
    args = (RNG.standard_normal((5, 784)), RNG.standard_normal((784, 6)) / 28, RNG.standard_normal(6),
            RNG.standard_normal((6, 3)), RNG.standard_normal(3))
    np.testing.assert_allclose(loaded(*args), mlp_np(*args), rtol=1e-12, atol=1e-12)


def test_partial_hints_and_bare_dtypes():
    @sprue.qjit
    def f(x: sprue.f32["b", None], w: sprue.f32[None, 3], s: sprue.f32):  # noqa: F821
        return (x @ w) * s

    assert f.compile_count == 1
    assert {n: repr(h) for n, h in f.inferred_hints.items()} == {
        "x": "sprue.f32['b', 'x_1']", "w": "sprue.f32['x_1', 3]", "s": "sprue.f32[3]"}
    x, w, s = (RNG.standard_normal(shape).astype(np.float32) for shape in [(4, 5), (5, 3), (3,)])
    np.testing.assert_allclose(f(x, w, s), (x @ w) * s, rtol=1e-5)


def test_broadcasting_takes_the_least_upper_bound():
    @sprue.qjit
    def shared(x: sprue.f64["b", 5], s):  # noqa: F821
        return x * s

    assert repr(shared.inferred_hints["s"]) == "sprue.f64[5]"

    @sprue.qjit
    def two(x: sprue.f64["b", 5], y: sprue.f64["b", 3], s):  # noqa: F821
        return (x * s).sum(), (y * s).sum()

    assert repr(two.inferred_hints["s"]) == "sprue.f64[1]"   # only 1 broadcasts with both 5 and 3
    x, y, s = RNG.standard_normal((2, 5)), RNG.standard_normal((2, 3)), np.array([1.5])
    for got, want in zip(two(x, y, s), ((x * s).sum(), (y * s).sum())):
        np.testing.assert_allclose(got, want, rtol=1e-13)


def test_conflicting_uses_name_the_parameter_and_both_lines():
    def bad(x: sprue.f64["b", 3], w):  # noqa: F821
        y = x @ w
        z = jnp.ones((2, 4)) @ w
        return y, z

    with pytest.warns(AheadOfTimeWarning) as caught:
        q = sprue.qjit(bad)
    message = str(caught[0].message)
    assert re.search(r"no shape of argument 'w' fits its uses: axis 0 is equal to 3 by sprue.numpy.matmul"
                     rf" \(at .*{HERE} \(bad\)\), and equal to 4 by sprue.numpy.matmul \(at .*{HERE} \(bad\)\)",
                     message), message
    first, second = (int(n) for n in re.findall(HERE, message))
    assert second == first + 1
    with pytest.raises(ShapeError, match="no shape of argument 'w' fits its uses"):
        q(np.ones((2, 3)), np.ones((3, 2)))


def test_a_rank_that_cannot_be_inferred_asks_for_it():
    def f(x: sprue.f64["n"], w):  # noqa: F821
        return x * w.T

    with pytest.warns(AheadOfTimeWarning, match=rf"the rank of argument 'w' cannot be inferred from its first use,"
                                                rf" `.T` \(at .*{HERE} \(f\)\).*w: sprue.f64\[None, None\]"):
        sprue.qjit(f)


def test_an_unused_parameter_has_no_shape():
    def f(x: sprue.f64["n"], unused):  # noqa: F821
        return x

    with pytest.warns(AheadOfTimeWarning, match="argument unused is never used, so no shape can be inferred"):
        q = sprue.qjit(f)
    with pytest.raises(SprueTypeError, match="never used"):
        q(np.ones(2), np.ones(2))


def test_functions_without_any_shape_hint_still_compile_per_call():
    @sprue.qjit
    def f(x, y):
        return x @ y

    assert f.compile_count == 0 and f.inferred_hints is None
    np.testing.assert_allclose(f(np.eye(2), np.ones((2, 3))), np.ones((2, 3)))
