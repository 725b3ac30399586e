"""Complex numbers compiled (qjit) and eager against numpy: creation, promotion with weak Python
complex scalars, arithmetic, the elementwise math, reductions, products, select, complex arguments
and results (arrays and scalars), static and dynamic shapes, and the errors for what has no complex
meaning. (No `from __future__ import annotations` here: qjit reads type hints as objects.)"""

import warnings

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax

C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
SHAPES = [(), (7,), (3, 4)]


def rand_complex(shape, dtype, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return (scale * (rng.normal(size=shape) + 1j * rng.normal(size=shape))).astype(dtype)


def tolerance(dtype) -> dict:
    return {"rtol": 2e-5, "atol": 2e-6} if np.dtype(dtype) in (C64, np.float32) else {"rtol": 1e-11, "atol": 1e-13}


def check(got, want, dtype=None):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, **tolerance(dtype or want.dtype))


def numpy_ref(fn, *args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args)


# -- elementwise -----------------------------------------------------------------------------------
UNARY = {
    "exp": (jnp.exp, np.exp), "log": (jnp.log, np.log), "log1p": (jnp.log1p, np.log1p),
    "expm1": (jnp.expm1, np.expm1), "sqrt": (jnp.sqrt, np.sqrt), "sin": (jnp.sin, np.sin),
    "cos": (jnp.cos, np.cos), "tan": (jnp.tan, np.tan), "sinh": (jnp.sinh, np.sinh), "cosh": (jnp.cosh, np.cosh),
    "tanh": (jnp.tanh, np.tanh), "arcsin": (jnp.arcsin, np.arcsin), "arccos": (jnp.arccos, np.arccos),
    "arctan": (jnp.arctan, np.arctan), "arcsinh": (jnp.arcsinh, np.arcsinh), "arccosh": (jnp.arccosh, np.arccosh),
    "arctanh": (jnp.arctanh, np.arctanh), "abs": (jnp.abs, np.abs), "angle": (jnp.angle, np.angle),
    "real": (jnp.real, np.real), "imag": (jnp.imag, np.imag), "conj": (jnp.conj, np.conj),
    "conjugate": (jnp.conjugate, np.conjugate), "sign": (jnp.sign, np.sign), "square": (jnp.square, np.square),
    "reciprocal": (jnp.reciprocal, np.reciprocal), "negative": (jnp.negative, np.negative),
    "exp2": (jnp.exp2, np.exp2), "log2": (jnp.log2, np.log2), "log10": (jnp.log10, np.log10),
    "isnan": (jnp.isnan, np.isnan), "isfinite": (jnp.isfinite, np.isfinite), "isinf": (jnp.isinf, np.isinf),
    "cube": (lambda z: z ** 3, lambda z: z ** 3), "inverse_square": (lambda z: z ** -2, lambda z: z ** -2),
    "times_i": (lambda z: 1j * z, lambda z: 1j * z), "astype_f32": (lambda z: jnp.astype(z, jnp.float32),
                                                                      lambda z: np.real(z).astype(np.float32)),
    "round": (lambda z: jnp.round(3 * z, 1), lambda z: np.round(3 * z, 1)),
    "astype_c64": (lambda z: jnp.astype(z, jnp.complex64), lambda z: z.astype(np.complex64)),
    "astype_bool": (lambda z: jnp.astype(z, bool), lambda z: z.astype(bool)),
    "astype_i32": (lambda z: jnp.astype(3 * z, jnp.int32), lambda z: np.real(3 * z).astype(np.int32)),
}


@pytest.mark.parametrize("dtype", [C64, C128], ids=["c64", "c128"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_compiled_and_eager(name, dtype):
    ours, theirs = UNARY[name]
    for shape in SHAPES:
        z = rand_complex(shape, dtype, seed=len(shape))
        want = numpy_ref(theirs, z)
        check(sprue.qjit(lambda z: ours(z))(z), want, dtype)
        check(ours(z), want, dtype)


BINARY = {
    "add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply), "div": (lambda a, b: a / b, np.divide),
    "pow": (lambda a, b: a ** b, np.power), "eq": (lambda a, b: a == b, np.equal),
    "ne": (lambda a, b: a != b, np.not_equal), "where": (lambda a, b: jnp.where(jnp.real(a) > 0, a, b),
                                                         lambda a, b: np.where(a.real > 0, a, b)),
    "complex": (lambda a, b: lax.complex(jnp.real(a), jnp.imag(b)), lambda a, b: a.real + 1j * b.imag),
}


@pytest.mark.parametrize("dtype", [C64, C128], ids=["c64", "c128"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_compiled_and_eager(name, dtype):
    ours, theirs = BINARY[name]
    for shape in SHAPES:
        a, b = rand_complex(shape, dtype, 1), rand_complex(shape, dtype, 2)
        b = np.where(np.arange(b.size).reshape(shape) % 3 == 0, a, b) if shape else b   # some equal lanes
        want = numpy_ref(theirs, a, b)
        check(sprue.qjit(ours)(a, b), want, dtype)
        check(ours(a, b), want, dtype)


# -- promotion: Python complex scalars are weak, as in JAX and numpy 2 ------------------------------
@pytest.mark.parametrize("x, scalar, want", [
    (np.ones(3, np.float32), 2j, C64), (np.ones(3, np.float64), 2j, C128), (np.ones(3, np.int32), 2j, C128),
    (np.ones(3, np.complex64), 2.5, C64), (np.ones(3, np.complex64), 2j, C64),
    (np.ones(3, np.complex64), np.float64(2), C128), (np.ones(3, np.float32), np.complex64(1j), C64),
])
def test_weak_complex_promotion(x, scalar, want):
    got = sprue.qjit(lambda x: x * scalar + scalar)(x)
    assert got.dtype == want == np.result_type(x, scalar)
    check(got, (x * scalar + scalar).astype(want))
    assert (jnp.asarray(x) * scalar).dtype == want


def test_creation():
    @sprue.qjit
    def make(n: int):
        return (jnp.zeros(3, dtype=jnp.complex64), jnp.ones((2, 2), complex), jnp.full(2, 1 + 2j),
                jnp.array([1, 2j, 3.5]), jnp.arange(3).astype(jnp.complex128), lax.complex(1.0, 2.0),
                jnp.zeros(n, jnp.complex64) + 1j, jnp.complex64(2.5), jnp.zeros_like(jnp.ones(2) * 1j))
    want = (np.zeros(3, np.complex64), np.ones((2, 2), complex), np.full(2, 1 + 2j), np.array([1, 2j, 3.5]),
            np.arange(3).astype(np.complex128), np.complex128(1 + 2j), np.zeros(4, np.complex64) + 1j,
            np.complex64(2.5), np.zeros(2, complex))
    for got, w in zip(make(4), want):
        check(got, w)
    for got, w in zip((jnp.zeros(3, dtype=complex), jnp.array([1, 2j]), jnp.full((2,), 1j, jnp.complex64)),
                      (np.zeros(3, complex), np.array([1, 2j]), np.full((2,), 1j, np.complex64))):
        check(got, w)
    assert jnp.iscomplexobj(np.ones(2) * 1j) and not jnp.iscomplexobj(np.ones(2))


# -- reductions and products -------------------------------------------------------------------------
REDUCTIONS = {
    "sum": (lambda z: jnp.sum(z), np.sum), "sum_axis": (lambda z: jnp.sum(z, axis=-1), lambda z: np.sum(z, axis=-1)),
    "prod": (lambda z: jnp.prod(z, axis=0), lambda z: np.prod(z, axis=0)), "mean": (lambda z: jnp.mean(z), np.mean),
    "cumsum": (lambda z: jnp.cumsum(z), np.cumsum), "var": (lambda z: jnp.var(z, axis=0), lambda z: np.var(z, axis=0)),
    "std": (lambda z: jnp.std(z, ddof=1), lambda z: np.std(z, ddof=1)),
    "vdot": (lambda z: jnp.vdot(z, z), lambda z: np.vdot(z, z)),
    "matmul": (lambda z: z @ z.T, lambda z: z @ z.T), "dot": (lambda z: jnp.dot(z.T, z[:, 0]), lambda z: np.dot(z.T, z[:, 0])),
    "einsum": (lambda z: jnp.einsum("ij,kj->ik", z, jnp.conj(z)), lambda z: np.einsum("ij,kj->ik", z, np.conj(z))),
    "batched": (lambda z: jnp.matmul(z[None], z.T[None] * 2), lambda z: np.matmul(z[None], z.T[None] * 2)),
    "mixed": (lambda z: jnp.abs(z) @ z.T, lambda z: np.abs(z) @ z.T),
}


@pytest.mark.parametrize("dtype", [C64, C128], ids=["c64", "c128"])
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions_and_products(name, dtype):
    ours, theirs = REDUCTIONS[name]
    for shape in [(3, 4), (16, 9)]:
        z = rand_complex(shape, dtype, 3)
        want = numpy_ref(theirs, z)
        check(sprue.qjit(ours)(z), want, dtype)
        check(ours(z), want, dtype)


def test_nan_to_num_of_each_part():
    z = np.array([complex(np.nan, 1), complex(2, np.inf), complex(-np.inf, np.nan), 1j], np.complex64)
    check(jnp.nan_to_num(z), np.nan_to_num(z))
    check(sprue.qjit(lambda z: jnp.nan_to_num(z, nan=-1.0))(z), np.nan_to_num(z, nan=-1.0))


def test_large_matmul_uses_real_kernels():
    a, b = rand_complex((70, 50), C128, 4), rand_complex((50, 30), C128, 5)
    check(sprue.qjit(jnp.matmul)(a, b), a @ b)


# -- arguments and results -------------------------------------------------------------------------
def test_scalar_arguments_and_results():
    f = sprue.qjit(lambda z, c: (jnp.sum(z * c), z[0] * c, jnp.real(c)))
    z = rand_complex((5,), C128, 6)
    for c in (2 - 3j, np.complex128(0.5j), 1.5, 2):
        got = f(z, c)
        assert isinstance(got[0], np.complex128) and isinstance(got[1], np.complex128)
        check(got[0], np.sum(z * c)), check(got[1], z[0] * c), check(got[2], np.real(c))
    g = sprue.qjit(lambda z: z * 2)
    assert g(np.complex64(1 + 1j)) == np.complex64(2 + 2j) and isinstance(g(np.complex64(1j)), np.complex64)


def test_dynamic_shapes():
    f = sprue.qjit(lambda z: (jnp.exp(z) * jnp.conj(z), jnp.sum(jnp.abs(z) ** 2)), abstracted_axes={0: "n"})
    for n in (1, 5, 33):
        z = rand_complex((n, 2), C64, n)
        got = f(z)
        check(got[0], np.exp(z) * np.conj(z), C64), check(got[1], np.sum(np.abs(z) ** 2), C64)
    assert f.compile_count == 1


# -- errors: what has no complex meaning ---------------------------------------------------------
@pytest.mark.parametrize("fn, message", [
    (lambda z: jnp.less(z, 1), "sprue.numpy.less: ordering comparisons of complex numbers are not supported"),
    (lambda z: jnp.maximum(z, 0), "sprue.numpy.maximum: ordering comparisons of complex numbers are not supported"),
    (lambda z: jnp.floor(z), "sprue.numpy.floor: not supported for operands c128"),
    (lambda z: jnp.remainder(z, 2), "sprue.numpy.remainder: not supported for operands c128"),
    (lambda z: lax.lt(z, z), "lt requires ordered \\(not complex\\) operands, got c128"),
    (lambda z: lax.rem(z, z), "rem requires real \\(integer or floating-point\\) operands, got c128"),
    (lambda z: lax.atan2(z, z), "atan2 requires floating-point operands, got c128"),
    (lambda z: lax.clamp(z, z, z), "clamp requires ordered \\(not complex\\) operands, got c128"),
    (lambda z: lax.real(jnp.abs(z)), "real requires a complex operand, got f64"),
    (lambda z: jnp.sort(z), "sort requires ordered \\(not complex\\) operands, got c128.3.; order by the real part"),
    (lambda z: jnp.max(z), "reduce_max requires ordered \\(not complex\\) operands, got c128"),
    (lambda z: jnp.argmin(z), "argmin requires ordered \\(not complex\\) operands, got c128"),
    (lambda z: lax.complex(z, z), "complex requires float32 or float64 operands, got c128"),
])
def test_errors_name_what_has_no_complex_meaning(fn, message):
    z = rand_complex((3,), C128)
    with pytest.raises(TypeError, match=message):
        sprue.qjit(fn)(z)
    with pytest.raises(TypeError, match=message):
        fn(z)


def test_operators_of_traced_complex_arrays_refuse_ordering():
    with pytest.raises(TypeError, match="sprue.numpy.greater_equal: ordering comparisons of complex numbers"):
        sprue.qjit(lambda z: z >= 1j)(rand_complex((3,), C64))


def test_type_hints():
    @sprue.qjit
    def scale(z: sprue.c64["n"], c: complex):  # noqa: F821  (a size name, not a forward reference)
        return z * c
    z = rand_complex((5,), C64)
    check(scale(z, 2j), z * np.complex64(2j), C64)
    check(scale(z[:2], 1.5j), z[:2] * np.complex64(1.5j), C64)
    assert "c64[a]" in str(scale.jaxpr) and scale.compile_count == 1   # one compilation for every size
    with pytest.raises(TypeError, match="argument 'z'"):
        scale(np.ones(5, np.complex128), 1j)   # complex128 does not cast safely to complex64
