"""sprue.qjit end to end: compile once per signature, pytrees, static args, closures, hints,
inspection, intermediate stages, and the errors users meet."""
import math
import traceback

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.base.errors import ArgumentError, SprueError


def test_compiles_once_per_signature_and_reuses():
    @sprue.qjit
    def f(x, y):
        return jnp.sin(x) * y + 1.0
    x, y = np.random.rand(3, 4), np.random.rand(3, 4)
    np.testing.assert_allclose(f(x, y), np.sin(x) * y + 1.0)
    np.testing.assert_allclose(f(y, x), np.sin(y) * x + 1.0)
    assert len(f._cache) == 1
    f(np.random.rand(5), np.random.rand(5))                  # new shape: a new compilation
    f(np.random.rand(5).astype(np.float32), np.float32(2))  # new dtypes: another
    assert len(f._cache) == 3


def test_float32_stays_float32_with_python_scalars():
    @sprue.qjit
    def f(x):
        return x * 2.0 + 1
    x = np.random.rand(4).astype(np.float32)
    out = f(x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, x * 2.0 + 1, rtol=1e-6)


def test_python_scalar_arguments_and_scalar_results():
    @sprue.qjit
    def f(a, b, flag):
        return jnp.where(flag, a * b, a - b)
    out = f(3, 2.5, True)
    assert isinstance(out, np.float64) and out == 7.5
    assert f(3, 2.5, False) == 0.5
    assert isinstance(f(3, 4, True), np.int64)


def test_pytrees_in_and_out():
    @sprue.qjit
    def f(params, xs):
        a, (b, c) = xs
        return {"sum": params["w"] @ a + b, "pair": (c * 2, None), "list": [params["b"]]}
    p = {"w": np.random.rand(2, 3), "b": np.arange(4.0)}
    a, b, c = np.random.rand(3), np.random.rand(2), np.random.rand(5)
    out = f(p, (a, (b, c)))
    np.testing.assert_allclose(out["sum"], p["w"] @ a + b)
    np.testing.assert_allclose(out["pair"][0], c * 2)
    assert out["pair"][1] is None
    np.testing.assert_allclose(out["list"][0], p["b"])


def test_closures_over_numbers_and_arrays():
    table = np.linspace(0.0, 1.0, 6)
    scale = 3.0

    @sprue.qjit
    def f(x):
        return x * scale + table
    x = np.random.rand(6)
    np.testing.assert_allclose(f(x), x * scale + table)
    text = str(f.jaxpr)
    assert text.startswith("{ lambda a:f64[6]; b:f64[6]. let")
    assert "3.0:f64[]" in text


def test_static_argnums_and_argnames():
    @sprue.qjit(static_argnums=1, static_argnames=("mode",))
    def f(x, n, mode="sum"):
        for _ in range(n):
            x = x * 2.0
        return jnp.sum(x) if mode == "sum" else jnp.max(x)
    x = np.random.rand(5)
    np.testing.assert_allclose(f(x, 3), (x * 8).sum())
    np.testing.assert_allclose(f(x, 2, mode="max"), (x * 4).max())
    np.testing.assert_allclose(f(x, 3), (x * 8).sum())
    assert len(f._cache) == 2
    with pytest.raises(TypeError, match="static argument 'n' must be hashable"):
        f(x, [1])


def test_static_arguments_equal_in_value_but_not_in_type_compile_apart():
    """100 == np.int8(100), 3 == 3.0, 0.0 == -0.0, (1, 2) == (1.0, 2): the function can tell each
    pair apart, so each value gets its own compilation (keyed by type and value, as JAX does)."""
    f = sprue.qjit(lambda x, s: x + s * 2, static_argnums=1)
    x = np.zeros(2, np.int64)
    with np.errstate(over="ignore"):
        for _ in range(2):   # the second round takes the fast path
            np.testing.assert_array_equal(f(x, np.int8(100)), [-56, -56])   # np.int8(100) * 2 wraps
            np.testing.assert_array_equal(f(x, 100), [200, 200])
    assert f.compile_count == 2

    g = sprue.qjit(lambda s: jnp.zeros(2) + (s / 2 if type(s) is float else s // 2), static_argnums=0)
    for _ in range(2):
        np.testing.assert_array_equal(g(3), [1, 1])
        np.testing.assert_array_equal(g(3.0), [1.5, 1.5])
        np.testing.assert_array_equal(g(True), [0, 0])
    assert g.compile_count == 3

    sign = sprue.qjit(lambda x, s: x + math.copysign(1.0, s), static_argnums=1)
    for _ in range(2):
        np.testing.assert_array_equal(sign(np.zeros(1), 0.0), [1.0])
        np.testing.assert_array_equal(sign(np.zeros(1), -0.0), [-1.0])

    types = sprue.qjit(lambda x, t: x + sum(v / 2 if type(v) is float else v // 2 for v in t[1]),
                       static_argnums=1)
    for _ in range(2):
        np.testing.assert_array_equal(types(np.zeros(1), ("a", (1, 3))), [1.0])
        np.testing.assert_array_equal(types(np.zeros(1), ("a", (1.0, 3))), [1.5])
    assert types.compile_count == 2


def test_a_mutated_static_object_is_a_new_value():
    """An object whose __hash__/__eq__ follow its fields, mutated between calls, is compared by
    value (with the hash it had when compiled), not by identity: no stale result."""
    class Config:
        def __init__(self, k):
            self.k = k

        def __eq__(self, other):
            return type(other) is Config and other.k == self.k

        def __hash__(self):
            return hash(self.k)

    f = sprue.qjit(lambda x, c: x * c.k, static_argnums=1)
    c, x = Config(2), np.ones(2)
    np.testing.assert_array_equal(f(x, c), [2, 2])
    np.testing.assert_array_equal(f(x, c), [2, 2])   # fast path
    c.k = 5
    np.testing.assert_array_equal(f(x, c), [5, 5])
    np.testing.assert_array_equal(f(x, c), [5, 5])
    # The first compilation's key holds `c` itself, now k=5: an equal Config(2) compiles anew
    # (a static argument is not copied), and `c`, back at k=2, finds the first compilation again.
    np.testing.assert_array_equal(f(x, Config(2)), [2, 2])
    c.k = 2
    np.testing.assert_array_equal(f(x, c), [2, 2])
    np.testing.assert_array_equal(f(x, c), [2, 2])
    assert f.compile_count == 3


def test_unhashable_static_arguments_say_what_to_do():
    f = sprue.qjit(lambda x, s: x * len(s), static_argnums=1)
    with pytest.raises(sprue.SprueTypeError, match=r"<lambda>\(\): static argument 's' must be hashable, got list:"
                       r" unhashable type: 'list'\. .*pass a tuple for a list"):
        f(np.ones(2), [1, 2])
    with pytest.raises(sprue.SprueTypeError, match=r"static argument 's' must be hashable, got tuple \(it holds a"
                       r" dict\)"):
        f(np.ones(2), (1, {"a": 2}))
    with pytest.raises(sprue.SprueTypeError, match=r"got ndarray: .*make 's' a non-static argument for an array"):
        f(np.ones(2), np.ones(3))
    np.testing.assert_array_equal(f(np.ones(2), (1, 2)), [2, 2])


def test_type_hints_compile_at_decoration_and_refuse_other_signatures():
    @sprue.qjit
    def f(x: sprue.f64[3, 4], k: int) -> sprue.f64[3, 4]:
        return x * k
    assert f._fixed is not None and "f64[3,4]" in str(f.jaxpr)   # compiled before any call
    x = np.random.rand(3, 4)
    np.testing.assert_allclose(f(x, 3), x * 3)
    with pytest.raises(ValueError, match=r"argument 'x'.*f64\[3,4\]"):
        f(np.random.rand(3, 5), 3)
    with pytest.raises(TypeError, match=r"argument 'x'"):
        f(np.ones((3, 4), dtype=np.complex128), 3)
    with pytest.raises(TypeError, match=r"f\(\): missing a required argument: 'k'"):
        f(x)
    assert f._cache == {}


def test_wrong_argument_count_rank_and_dtype_name_the_argument():
    @sprue.qjit
    def f(x: sprue.f32[4], y: sprue.i32[2]):
        return x.sum() + y.sum()
    with pytest.raises(TypeError, match=r"too many positional arguments"):
        f(np.ones(4, np.float32), np.ones(2, np.int32), 3)
    with pytest.raises(ValueError, match=r"argument 'x'"):
        f(np.ones((4, 1), np.float32), np.ones(2, np.int32))
    with pytest.raises(TypeError, match=r"argument 'y'"):
        f(np.ones(4, np.float32), np.ones(2, np.float64))    # float64 does not cast safely to int32
    with pytest.raises(TypeError, match=r"argument 'y'"):
        f(np.ones(4, np.float32), "not an array")


def test_unsupported_argument_types_are_type_errors():
    @sprue.qjit
    def f(x):
        return x
    with pytest.raises(TypeError, match=r"argument 'x'.*str is not a valid argument"):
        f("text")
    with pytest.raises(TypeError, match=r"complex256 is not supported"):
        f(np.ones(2, np.clongdouble))


def test_results_are_fresh_arrays_not_aliases():
    @sprue.qjit
    def f(x):
        y = x + 0.0
        return x, y, y
    x = np.random.rand(4)
    a, b, c = f(x)
    np.testing.assert_array_equal(a, x)
    a[0] = 100.0
    b[1] = 200.0
    assert x[0] != 100.0 and c[1] != 200.0


def test_user_exception_keeps_user_traceback():
    def helper(x):
        raise KeyError("boom from user code")

    @sprue.qjit
    def f(x):
        return helper(x)
    with pytest.raises(KeyError, match="boom from user code") as info:
        f(np.ones(2))
    frames = [fr.name for fr in traceback.extract_tb(info.value.__traceback__)]
    assert frames[-2:] == ["f", "helper"]


def test_jaxpr_and_mlir_inspection():
    @sprue.qjit
    def f(x):
        return jnp.sum(jnp.exp(x))
    with pytest.raises(SprueError, match="not available yet"):
        f.jaxpr
    f(np.ones(3))
    assert "reduce_sum" in str(f.jaxpr) and "exp" in str(f.jaxpr)
    assert "stablehlo.exponential" in f.mlir and "func.func @main" in f.mlir
    from torch_mlir import ir
    from torch_mlir._mlir_libs import _stablehlo
    ctx = ir.Context()
    _stablehlo.register_dialect(ctx)
    with ctx:
        ir.Module.parse(f.mlir).operation.verify()


def test_keep_intermediate_writes_every_stage(tmp_path):
    @sprue.qjit(keep_intermediate=tmp_path / "build")
    def f(x):
        return jnp.sum(x * x)
    np.testing.assert_allclose(f(np.arange(4.0)), (np.arange(4.0) ** 2).sum())
    files = sorted(p.name for p in (tmp_path / "build").iterdir())
    joined = " ".join(files)
    for stage in ("jaxpr", "stablehlo", "linalg", "bufferized", "llvm", ".ll", ".o", ".so"):
        assert stage in joined, (stage, files)


def test_functions_of_one_name_built_into_one_folder_each_run_their_own_code(tmp_path):
    # the second library replaces the first at the same path; glibc's dlopen would hand back the
    # first (loaded under that name) and the second function would return the first's results
    folder = tmp_path / "build"
    double = sprue.qjit(lambda x: x * 2.0, keep_intermediate=folder)
    triple = sprue.qjit(lambda x: x * 3.0, keep_intermediate=folder)
    x = np.arange(4.0)
    np.testing.assert_array_equal(double(x), x * 2.0)
    np.testing.assert_array_equal(triple(x), x * 3.0)
    np.testing.assert_array_equal(double(x), x * 2.0)


def test_qjit_inside_qjit_traces_through():
    @sprue.qjit
    def inner(x):
        return x * 2.0

    @sprue.qjit
    def outer(x):
        return inner(x) + 1.0
    x = np.random.rand(3)
    np.testing.assert_allclose(outer(x), x * 2 + 1)


def test_non_contiguous_and_readonly_inputs():
    @sprue.qjit
    def f(x):
        return x * 2.0
    base = np.random.rand(6, 8)
    view = base[::2, 1::3]
    np.testing.assert_allclose(f(view), view * 2)
    fortran = np.asfortranarray(np.random.rand(3, 4))
    np.testing.assert_allclose(f(fortran), fortran * 2)
    ro = np.random.rand(3)
    ro.setflags(write=False)
    np.testing.assert_allclose(f(ro), ro * 2)


def test_compiled_code_never_writes_into_its_inputs():
    import sprue.lax as lax

    @sprue.qjit
    def f(x, u):
        return lax.dynamic_update_slice(x, u, (2,)), x.at[np.array([0, 0, 5])].add(1.0)
    x = np.arange(6.0)
    keep = x.copy()
    updated, added = f(x, np.array([100.0, 200.0]))
    np.testing.assert_array_equal(x, keep)
    expected = keep.copy(); expected[2:4] = [100.0, 200.0]
    np.testing.assert_array_equal(updated, expected)
    expected = keep.copy(); np.add.at(expected, [0, 0, 5], 1.0)
    np.testing.assert_array_equal(added, expected)


def test_float16_and_unsigned_cross_the_boundary():
    @sprue.qjit
    def f(b, h, u):
        return jnp.sin(b), h * 2, u + 1, jnp.sum(jnp.sin(b))
    b = np.array([True, False, True])
    u = np.array([1, 2**32 - 1], np.uint32)
    out = f(b, np.float16(1.5), u)
    expected = (np.sin(b), np.float16(1.5) * 2, u + 1, np.sin(b).sum())
    for got, want in zip(out, expected):
        assert np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=2e-3)
    assert isinstance(out[1], np.float16) and isinstance(out[3], np.float16)


def test_comparisons_of_python_int_arguments():
    # two weak ints: numpy computes them as int64 (resolving them as Python types would pick object)
    @sprue.qjit
    def f(p, i):
        return p > 0, i % 2 == 0, p * i
    for p, i in ((3, 4), (-1, 5)):
        got = f(p, i)
        want = (np.int64(p) > 0, np.int64(i) % 2 == 0, np.int64(p) * i)
        assert [type(g) for g in got] == [type(w) for w in want] and got == want


def test_jaxpr_invars_follow_the_parameters_positional_order():
    @sprue.qjit
    def f(z, a, m):
        return z * 2.0 + a - m
    z, a, m = np.random.rand(2), np.random.rand(3, 2), np.random.rand(2)
    np.testing.assert_allclose(f(z, a, m), z * 2.0 + a - m)
    assert str(f.jaxpr).startswith("{ lambda ; a:f64[2] b:f64[3,2] c:f64[2]. let")


# -- no silent conversions -------------------------------------------------------------------------
def test_hinted_parameters_take_their_dtype_only():
    @sprue.qjit
    def f(x: sprue.f64[3], k: int):
        return x * k

    np.testing.assert_array_equal(f(np.ones(3), 2), [2, 2, 2])
    np.testing.assert_array_equal(f(np.ones(3), 2), [2, 2, 2])   # fast path: a new dtype still raises below
    for bad in (np.ones(3, np.float32), np.arange(3)):
        with pytest.raises(ArgumentError, match=rf"f\(\): argument 'x' is hinted sprue.f64\[3\] but got an array"
                           rf" of shape \(3,\) of dtype {bad.dtype.name}: sprue does not convert arguments silently;"
                           r" pass x.astype\(np.float64\), or compile with qjit\(cast_arguments=True\)"):
            f(bad, 2)
    with pytest.raises(ArgumentError, match=r"argument 'k' is hinted int but got a numpy scalar of dtype int32"):
        f(np.ones(3), np.int32(2))
    np.testing.assert_array_equal(f(np.ones(3).astype(">f8"), 3), [3, 3, 3])   # byte order is no conversion
    assert f.compile_count == 1

    @sprue.qjit(cast_arguments=True)
    def g(x: sprue.f64["n"]):  # noqa: F821
        return x / 3

    got = g(np.array([1, 2, 4], np.float32))   # converted (a safe cast), as asked
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, np.array([1, 2, 4], np.float64) / 3)
    np.testing.assert_array_equal(g(np.arange(3)), np.arange(3) / 3)
    with pytest.raises(TypeError, match="does not cast safely to f64"):   # never an unsafe cast
        g(np.ones(2, np.complex128))

    @sprue.qjit
    def h(d: {"a": sprue.f32[2], "b": sprue.i8[2]}):  # noqa: F821
        return d["a"] * 2, d["b"] + 1
    with pytest.raises(ArgumentError, match=r"argument 'd\['b'\]' is hinted sprue.i8\[2\] but got an array of"
                       r" shape \(2,\) of dtype int64"):
        h({"a": np.ones(2, np.float32), "b": np.ones(2, np.int64)})


def test_unhinted_functions_compile_per_dtype_and_never_convert():
    f = sprue.qjit(lambda x, y: x * y)
    x64, x32 = np.array([1.1, 2.2]), np.array([1.1, 2.2], np.float32)
    for _ in range(2):
        assert f(x64, x64).dtype == np.float64
        got = f(x32, x32)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, x32 * x32)   # float32 arithmetic: not f64 rounded back
        assert f(x32, np.float32(2)).dtype == np.float32
        assert f(x32, 2.0).dtype == np.float32            # a Python float is weakly typed, as in JAX
    assert f.compile_count == 4


def test_masked_arrays_are_refused_not_unmasked(tmp_path):
    m = np.ma.masked_array([1.0, 2.0, 3.0], mask=[0, 1, 0])
    f = sprue.qjit(lambda x: x * 2)
    with pytest.raises(ArgumentError, match=r"<lambda>\(\): argument 'x' is a numpy masked array, which sprue"
                       r" does not take \(its mask would be dropped\): pass x.filled\(fill_value\)"):
        f(m)
    assert f.compile_count == 0
    np.testing.assert_array_equal(f(m.filled(0.0)), [2, 0, 6])

    @sprue.qjit
    def g(t: (sprue.f64[3], sprue.f64[3])):
        return t[0] + t[1]
    with pytest.raises(ArgumentError, match=r"argument 't\[1\]' is a numpy masked array"):
        g((np.ones(3), m))
    with pytest.raises(sprue.SprueTypeError, match=r"a numpy masked array is not a valid operand \(its mask would be"
                       r" dropped\) \(at .*test_qjit.py:\d+"):
        sprue.qjit(lambda x: x + m)(np.ones(3))   # captured as a constant
    with pytest.raises(sprue.SprueTypeError, match="a numpy masked array is not a valid operand"):
        jnp.sum(m)


def test_python_int_arguments_that_do_not_fit_raise_like_literals():
    """int8 * 300: numpy 2 raises OverflowError, and sprue raises for a literal 300; a Python int
    argument (weakly typed, its value known at run time) must not wrap to 44 either."""
    x = np.array([1, 2], np.int8)
    with pytest.raises(sprue.SprueValueError, match="Python int 300 is out of bounds for int8"):
        sprue.qjit(lambda x: x * 300)(x)
    f = sprue.qjit(lambda x, k: x * k)
    np.testing.assert_array_equal(f(x, 100), [100, -56])   # 100 fits int8; the product wraps, as numpy's does
    for _ in range(2):   # the general path, then the fast path
        for k in (300, -129, 2 ** 40):
            with pytest.raises(sprue.SprueValueError, match=r"a Python int is out of bounds for int8 \(it must be in"
                               r" \[-128, 127\]\) \(at .*test_qjit.py:\d+ \(<lambda>\)\): its value comes from a"
                               r" Python int argument"):
                f(x, k)
        np.testing.assert_array_equal(f(x, -128), [-128, 0])
    u = sprue.qjit(lambda x, k: x + k * 2)   # computed from the argument: still checked
    with pytest.raises(sprue.SprueValueError, match=r"out of bounds for uint8 \(it must be in \[0, 255\]\)"):
        u(np.array([1], np.uint8), -1)
    np.testing.assert_array_equal(u(np.array([1], np.uint8), 127), [255])
    assert f.compile_count == 1 and u.compile_count == 1


def test_none_arguments_in_arithmetic_are_sprue_errors_at_the_line():
    """None is an empty pytree (as in JAX): it reaches the function as None, and using it as an
    array is a SprueTypeError naming the user's line, not Python's bare TypeError."""
    here = r"[^ ]*test_qjit\.py:\d+"
    with pytest.raises(sprue.SprueTypeError, match=rf"unsupported operand types for \+: a traced f64\[2\] and None"
                       rf" \(at {here} \(<lambda>\)\): None is not an array"):
        sprue.qjit(lambda x, y: x + y)(np.ones(2), None)
    with pytest.raises(sprue.SprueTypeError, match=r"unsupported operand types for \*: None and a traced f64\[2\]"):
        sprue.qjit(lambda t: t[1] * t[0])((np.ones(2), None))
    with pytest.raises(sprue.SprueTypeError, match=rf"<lambda>\(\): unsupported operand type\(s\) for \*: 'NoneType'"
                       rf" and 'int' \(at {here} \(<lambda>\)\): argument d\['a'\] is None, which reaches the function"
                       rf" as None"):
        sprue.qjit(lambda d: d["a"] * 2)({"a": None, "b": np.ones(2)})
    f = sprue.qjit(lambda x, mask=None: x if mask is None else x * mask)   # None as "absent" still works
    np.testing.assert_array_equal(f(np.ones(2)), [1, 1])
    np.testing.assert_array_equal(f(np.ones(2), np.full(2, 3.0)), [3, 3])
    with pytest.raises(TypeError, match="object of type 'int' has no len") as info:   # no None: not rewrapped
        sprue.qjit(lambda x: x + len(3))(np.ones(2))
    assert not isinstance(info.value, sprue.SprueError)


@pytest.mark.parametrize("name", ["x" * 300, "f\u00e9", "a.b/../c"])
def test_any_python_name_compiles(name, monkeypatch):
    # a function's name becomes part of file names: odd or long ones must not reach the file system
    ns: dict = {}
    exec("def f(a):\n    return a * 2.0 + 1.0", ns)
    f = ns["f"]
    f.__name__ = f.__qualname__ = name
    monkeypatch.setenv("SPRUE_CACHE_DIR", "off")
    np.testing.assert_array_equal(sprue.qjit(f)(np.arange(3.0)), np.arange(3.0) * 2.0 + 1.0)
