"""sprue.debug.print (issue 23): compiled code prints as Python prints the same values with numpy
(`fmt.format(*numpy arrays)`), in loops, under vmap and grad, with run-time sizes; eagerly it
is Python's format itself. The compiled print is C (lowering/print_runtime.py), so the expected
text here is always numpy's, never a copy of an output."""
import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax

rng = np.random.default_rng(7)
ARRAYS = {
    "positional": np.array([1.0, 2.5, 3.0]),
    "thirds": np.array([1 / 3, 2 / 3, -1.0]),
    "tiny": np.array([1e-5, 2.5e-5]),
    "wide_range": np.array([1e10, 1.0, -3.5]),
    "huge_exponents": np.array([1e-300, 1e300]),
    "non_finite": np.array([np.nan, 1.5, -np.inf, np.inf]),
    "only_non_finite": np.array([np.nan, np.inf]),
    "signed_zeros": np.array([0.0, -0.0, 1.0]),
    "wrapped_rows": np.arange(100.0) * 1.25,
    "summarized": np.linspace(0.0, 1.0, 1500),
    "summarized_2d": np.arange(2000.0).reshape(40, 50),
    "3d": np.arange(24.0).reshape(2, 3, 4) - 7.5,
    "4d_normal": rng.normal(size=(2, 3, 4, 5)),
    "f32": rng.normal(size=(5, 7)).astype(np.float32),
    "f32_short": np.float32([0.1, 0.2, 1e-3]),
    "i64": np.arange(-5, 30),
    "i64_extremes": np.array([2**63 - 1, -2**63], np.int64),
    "i32_2d": np.arange(12, dtype=np.int32).reshape(3, 4),
    "u8": rng.integers(0, 255, 40).astype(np.uint8),
    "u64_big": np.array([2**64 - 1, 3], np.uint64),
    "bool": np.array([True, False, True]),
    "bool_all_true_2d": np.array([[True], [True]]),
    "empty": np.zeros((2, 0)),
    "f64_scalar": np.float64(0.1),
    "f32_scalar": np.float32(0.1),
    "i32_scalar": np.int32(-42),
    "bool_scalar": np.bool_(True),
    "big_scalar": np.float64(1.5e16),
    "small_scalar": np.float64(-2.5e-7),
}


@pytest.mark.parametrize("name", list(ARRAYS))
def test_compiled_print_is_numpys_str(name, capfd):
    a = ARRAYS[name]

    @sprue.qjit
    def show(x):
        sprue.debug.print("{}", x)
        return x

    show(a)
    assert capfd.readouterr().out == "{}\n".format(np.asarray(a))


FLOAT_SPECS = [".3f", ">12", "<10.2e", "^15.4g", "+.2f", " .1%", "010.3f", "*>9", ".3", ".0f", "e", "E", "G",
               "#.0f", "=+12.3f", ".10g", ".1", ".2", "#.1", ".1e", ""]
FLOAT_VALUES = [12.5, 99.95, 0.00012345, 1234567.0, 1.5, -0.1, 1e-5, 1e16, 0.0, -0.0, np.inf, -np.inf, np.nan, 1 / 3]
INT_SPECS = ["", "d", "5d", "x", "#x", "X", "#o", "b", "#b", "+d", "08d", ".2f", "e", "^9", "_<6"]
INT_VALUES = [0, 7, -42, 255, 2**40]


@pytest.mark.parametrize("values,specs,dtype", [(FLOAT_VALUES, FLOAT_SPECS, np.float64),
                                                 (FLOAT_VALUES, FLOAT_SPECS, np.float32),
                                                 (INT_VALUES, INT_SPECS, np.int64),
                                                 (INT_VALUES[:-1], INT_SPECS, np.int16)],
                         ids=["f64", "f32", "i64", "i16"])
def test_specs_format_scalars_as_python(values, specs, dtype, capfd):
    xs = np.array([v for v in values for _ in specs], dtype)
    fmt = " | ".join(f"{{{i}:{s}}}" if s else f"{{{i}}}" for i, s in enumerate(specs * len(values)))

    @sprue.qjit
    def show(x):
        sprue.debug.print(fmt, *[x[i] for i in range(x.shape[0])])
        return x

    show(xs)
    assert capfd.readouterr().out == fmt.format(*(np.asarray(v) for v in xs)) + "\n"


def test_bool_scalars_and_their_specs(capfd):
    @sprue.qjit
    def show(b):
        sprue.debug.print("{} {} {:>6} {:d} {:.1f}", b[0], b[1], b[0], b[1], b[0])
        return b

    show(np.array([True, False]))
    assert capfd.readouterr().out == "{} {} {:>6} {:d} {:.1f}\n".format(*map(np.asarray, [True, False, True, False, True]))


def test_keywords_constants_and_escaped_braces(capfd):
    def f(x, n):
        sprue.debug.print("{{x}} = {x} n={n:>3} label={s!s} pi~{p:.2f} {arr}", x=x, n=n, s="run", p=np.pi,
                          arr=np.arange(3))
        return x + n

    want = "{{x}} = {x} n={n:>3} label={s!s} pi~{p:.2f} {arr}".format(
        x=np.array([0.5, 1.0]), n=np.asarray(np.int64(4)), s="run", p=np.pi, arr=np.arange(3)) + "\n"
    sprue.qjit(f)(np.array([0.5, 1.0]), np.int64(4))
    assert capfd.readouterr().out == want
    f(np.array([0.5, 1.0]), np.int64(4))   # eagerly: Python's own format
    assert capfd.readouterr().out == want


def test_prints_each_iteration_of_loops_in_order(capfd):
    def f(x):
        def body(i, c):
            sprue.debug.print("i={} c={}", i, c)
            return c * 2

        def step(c, y):
            sprue.debug.print("y={} c={:.2f}", y, c)
            return c + y, c
        y = lax.fori_loop(0, 3, body, x)
        return lax.scan(step, 0.0, y)

    x = np.array([1.0, 2.0])
    sprue.qjit(f)(x)
    want, c = [], x
    for i in range(3):
        want.append(f"i={i} c={c}")
        c = c * 2
    acc = 0.0
    for y in c:
        want.append(f"y={y} c={acc:.2f}")
        acc += y
    assert capfd.readouterr().out == "\n".join(want) + "\n"


def test_while_loop_and_branches(capfd):
    def f(x):
        def body(c):
            sprue.debug.print("c={c}", c=c)
            return c + 4
        y = lax.while_loop(lambda c: c[0] < 10, body, x)
        return lax.cond(y[0] > 12, lambda v: (sprue.debug.print("big {}", v), v)[1],
                        lambda v: (sprue.debug.print("small {}", v), -v)[1], y)

    sprue.qjit(f)(np.array([1.0, 2.0]))
    want = [f"c={np.array([1.0, 2.0]) + 4 * k}" for k in range(3)] + [f"big {np.array([13.0, 14.0])}"]
    assert capfd.readouterr().out == "\n".join(want) + "\n"


def _sum_of_squares(x):
    sprue.debug.print("x={}", x)
    return jnp.sum(x ** 2)


def test_vmap_prints_each_batch_element_as_jax_does(capfd):
    xs = np.arange(6.0).reshape(2, 3)
    out = sprue.qjit(sprue.vmap(_sum_of_squares))(xs)
    np.testing.assert_allclose(out, np.sum(xs ** 2, axis=1))
    assert capfd.readouterr().out == "".join(f"x={row}\n" for row in xs)


def test_grad_prints_the_primal_once(capfd):
    x = np.array([0.5, -1.0, 2.0])
    g = sprue.qjit(sprue.grad(_sum_of_squares))(x)
    np.testing.assert_allclose(g, 2 * x)
    assert capfd.readouterr().out == f"x={x}\n"


def test_run_time_sizes(capfd):
    f = sprue.qjit(_sum_of_squares, abstracted_axes={0: "n"})
    for n in (2, 5, 1200):
        x = np.linspace(-1.0, 1.0, n)
        f(x)
        assert capfd.readouterr().out == f"x={x}\n"
    assert f.compile_count == 1


def test_saved_program_keeps_its_prints(tmp_path, capfd):
    f = sprue.qjit(_sum_of_squares)
    x = np.array([1.5, 2.0])
    f(x)
    capfd.readouterr()
    g = sprue.load(sprue.save(f, tmp_path / "f.jaxpr"))
    np.testing.assert_allclose(g(x), np.sum(x ** 2))
    assert capfd.readouterr().out == f"x={x}\n"
    assert "debug_print[fmt='x={0}']" in str(f.jaxpr)


def test_environment_turns_printing_off(monkeypatch, capfd):
    monkeypatch.setenv("SPRUE_DEBUG_PRINT", "0")
    f = sprue.qjit(_sum_of_squares)
    np.testing.assert_allclose(f(np.array([3.0])), 9.0)
    assert capfd.readouterr().out == ""
    assert "debug_print" not in str(f.jaxpr)


@pytest.mark.parametrize("call,message", [
    (lambda x: sprue.debug.print("{:.3f}", x), "gives a format spec for a traced f64[3]; numpy formats only scalars"),
    (lambda x: sprue.debug.print("{!r}", x), "a traced value is printed as numpy's str; drop the !r"),
    (lambda x: sprue.debug.print("{x.shape}", x=x), "fields name an argument"),
    (lambda x: sprue.debug.print("{y}", x=x), "names 'y', which is not a keyword argument"),
    (lambda x: sprue.debug.print("{} {0}", x), "mixes automatic ({}) and numbered ({0}) fields"),
    (lambda x: sprue.debug.print("{} {}", x), "asks for positional argument 1, but 1 were given"),
    (lambda x: sprue.debug.print("{:,}", x[0]), "the spec ',' is not one the compiled print supports"),
    (lambda x: sprue.debug.print("{:x}", x[0]), "the spec 'x' does not apply to a float64 value"),
    (lambda x: sprue.debug.print("{}", [x]), "is a list holding traced values"),
    (lambda x: sprue.debug.print(3, x), "the format must be a str, got int"),
])
def test_errors_name_the_field_and_the_fix(call, message):
    with pytest.raises(sprue.SprueError, match=None) as info:
        sprue.make_jaxpr(call)(np.zeros(3))
    assert message in str(info.value)
    assert "test_debug_print.py" in str(info.value)


def test_formatting_a_tracer_points_at_debug_print():
    def f(x):
        return f"{x[0]:.3f}"
    with pytest.raises(sprue.ConcretizationError) as info:
        sprue.make_jaxpr(f)(np.zeros(3))
    assert 'print it from the compiled code with sprue.debug.print("{:.3f}", x)' in str(info.value)
    assert "test_debug_print.py" in str(info.value)
