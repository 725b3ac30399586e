"""Make the JAX corpus: jaxprs that real JAX prints for ordinary programs, with inputs and JAX's
outputs, committed as data so that the tests (tests/jax_corpus/test_corpus.py) need no JAX.

Run by hand, in a throwaway venv holding one JAX version (never in sprue's .venv):

    python3 -m venv /tmp/jax0435 && /tmp/jax0435/bin/pip install "jax[cpu]==0.4.35"
    /tmp/jax0435/bin/python tests/jax_corpus/make.py          # writes tests/jax_corpus/jax-0.4.35/

Each case `<name>` gives `<name>.jaxpr` (str(jax.make_jaxpr(f)(*args)), as JAX prints it) and
`<name>.npz` (in0, in1, ...: the flattened arguments in the jaxpr's invar order; out0, ...: JAX's
flattened results). `cases.json` lists the cases with the version that made them; a case whose jaxpr
has constvars is marked so (JAX's printer drops their values: sprue refuses the text, its other forms
carry them). Every case also comes in JAX's other forms, in `forms.zip` (see make_forms): StableHLO
text and bytecode, a static `jax.export` artifact and one with a symbolic leading size. JAX runs in
float32, its default.
"""
from __future__ import annotations

import io
import json
import sys
import zipfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax import export, lax

rng = np.random.RandomState(0)


def f32(*shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)


def pos(*shape):
    return rng.uniform(0.1, 3.0, shape).astype(np.float32)


def unit(*shape):
    return rng.uniform(-0.9, 0.9, shape).astype(np.float32)


def i32(*shape, lo=-5, hi=6):
    return rng.randint(lo, hi, shape).astype(np.int32)


CASES: list[tuple[str, object, tuple]] = []


def case(name, *args):
    def deco(fn):
        CASES.append((name, fn, args))
        return fn
    return deco


# -- elementwise jax.numpy ------------------------------------------------------------------
_UNARY = {
    "exp": (jnp.exp, f32), "log": (jnp.log, pos), "log1p": (jnp.log1p, pos), "expm1": (jnp.expm1, f32),
    "sin": (jnp.sin, f32), "cos": (jnp.cos, f32), "tan": (jnp.tan, unit), "tanh": (jnp.tanh, f32),
    "arcsin": (jnp.arcsin, unit), "arccos": (jnp.arccos, unit), "arctan": (jnp.arctan, f32),
    "sinh": (jnp.sinh, f32), "cosh": (jnp.cosh, f32), "arcsinh": (jnp.arcsinh, f32),
    "arccosh": (lambda x: jnp.arccosh(x + 1.5), pos), "arctanh": (jnp.arctanh, unit),
    "sqrt": (jnp.sqrt, pos), "cbrt": (jnp.cbrt, f32), "rsqrt": (lax.rsqrt, pos), "abs": (jnp.abs, f32),
    "sign": (jnp.sign, f32), "floor": (jnp.floor, f32), "ceil": (jnp.ceil, f32), "round": (jnp.round, f32),
    "trunc": (jnp.trunc, f32), "square": (jnp.square, f32), "reciprocal": (jnp.reciprocal, pos),
    "exp2": (jnp.exp2, f32), "log2": (jnp.log2, pos), "log10": (jnp.log10, pos), "negative": (jnp.negative, f32),
    "isnan": (jnp.isnan, f32), "isfinite": (lambda x: jnp.isfinite(x / (x - x[0])), f32),
    "nan_to_num": (lambda x: jnp.nan_to_num(jnp.log(x)), f32), "sinc": (jnp.sinc, f32),
    "deg2rad": (jnp.deg2rad, f32), "logaddexp_self": (lambda x: jnp.logaddexp(x, 2 * x), f32),
    "signbit": (jnp.signbit, f32), "rint": (jnp.rint, f32),
    "heaviside": (lambda x: jnp.heaviside(x, 0.5), f32),
}
for _n, (_f, _gen) in _UNARY.items():
    CASES.append((f"jnp_{_n}", _f, (_gen(33),)))

_BINARY = {
    "add": jnp.add, "subtract": jnp.subtract, "multiply": jnp.multiply, "divide": jnp.divide,
    "power": lambda a, b: jnp.power(jnp.abs(a) + 0.5, b), "maximum": jnp.maximum, "minimum": jnp.minimum,
    "arctan2": jnp.arctan2, "hypot": jnp.hypot, "logaddexp": jnp.logaddexp, "mod": jnp.mod,
    "floor_divide": jnp.floor_divide, "remainder": jnp.remainder, "copysign": jnp.copysign,
    "nextafter": jnp.nextafter, "fmax": jnp.fmax, "where_gt": lambda a, b: jnp.where(a > b, a, b * 2),
    "greater_equal": jnp.greater_equal, "not_equal": jnp.not_equal, "float_power": lambda a, b: a ** 2 + b ** 3,
}
for _n, _f in _BINARY.items():
    CASES.append((f"jnp_{_n}", _f, (f32(4, 5), f32(4, 5))))
CASES.append(("broadcast_add_row", lambda a, b: a + b, (f32(4, 5), f32(1, 5))))
CASES.append(("broadcast_sub_col", lambda a, b: a - b, (f32(4, 5), f32(4, 1))))
CASES.append(("broadcast_outer", lambda a, b: a[:, None] * b[None, :], (f32(4), f32(6))))

_INT = {
    "bitwise_and": jnp.bitwise_and, "bitwise_or": jnp.bitwise_or, "bitwise_xor": jnp.bitwise_xor,
    "left_shift": lambda a, b: jnp.left_shift(a, jnp.abs(b)), "right_shift": lambda a, b: a >> jnp.abs(b),
    "int_floor_divide": lambda a, b: a // jnp.where(b == 0, 1, b), "int_mod": lambda a, b: a % (jnp.abs(b) + 1),
    "gcd": jnp.gcd, "lcm": jnp.lcm,
}
for _n, _f in _INT.items():
    CASES.append((f"jnp_{_n}", _f, (i32(12), i32(12))))
CASES.append(("jnp_invert", jnp.invert, (i32(12),)))
CASES.append(("lax_population_count", lax.population_count, (i32(12, lo=0, hi=1000),)))
CASES.append(("lax_clz", lax.clz, (i32(12, lo=0, hi=1000),)))
CASES.append(("jnp_astype_int", lambda x: (x * 3).astype(jnp.int32), (f32(10),)))
CASES.append(("jnp_astype_bool", lambda x: x.astype(bool) | (x > 1), (f32(10),)))

# -- jax.scipy.special -------------------------------------------------------------------------
_SPECIAL = {
    "erf": (jax.scipy.special.erf, f32), "erfc": (jax.scipy.special.erfc, f32),
    "erfinv": (jax.scipy.special.erfinv, unit), "gammaln": (jax.scipy.special.gammaln, pos),
    "digamma": (jax.scipy.special.digamma, pos), "expit": (jax.scipy.special.expit, f32),
    "logit": (lambda x: jax.scipy.special.logit(x * 0.4 + 0.5), unit), "ndtr": (jax.scipy.special.ndtr, f32),
    "ndtri": (lambda x: jax.scipy.special.ndtri(x * 0.4 + 0.5), unit), "xlogy": (lambda x: jax.scipy.special.xlogy(x, x), pos),
    "log_ndtr": (jax.scipy.special.log_ndtr, f32), "entr": (jax.scipy.special.entr, pos),
    "gammainc": (lambda x: jax.scipy.special.gammainc(x, x * 0.7), pos),
    "gammaincc": (lambda x: jax.scipy.special.gammaincc(x, x * 1.3), pos),
    "logsumexp": (lambda x: jax.scipy.special.logsumexp(x, axis=-1), lambda n: f32(3, n)),
    "i0e": (jax.scipy.special.i0e, f32), "i1e": (jax.scipy.special.i1e, f32),
}
for _n, (_f, _gen) in _SPECIAL.items():
    CASES.append((f"special_{_n}", _f, (_gen(17),)))

# -- jax.nn ------------------------------------------------------------------------------------
_NN = {
    "relu": jax.nn.relu, "relu6": jax.nn.relu6, "sigmoid": jax.nn.sigmoid, "softplus": jax.nn.softplus,
    "silu": jax.nn.silu, "gelu_tanh": lambda x: jax.nn.gelu(x, approximate=True),
    "gelu_erf": lambda x: jax.nn.gelu(x, approximate=False), "elu": jax.nn.elu, "selu": jax.nn.selu,
    "leaky_relu": jax.nn.leaky_relu, "celu": jax.nn.celu, "hard_tanh": jax.nn.hard_tanh,
    "log_sigmoid": jax.nn.log_sigmoid, "softmax": jax.nn.softmax, "log_softmax": jax.nn.log_softmax,
    "standardize": lambda x: jax.nn.standardize(x, axis=-1), "soft_sign": jax.nn.soft_sign,
    "hard_sigmoid": jax.nn.hard_sigmoid, "mish": lambda x: x * jnp.tanh(jax.nn.softplus(x)),
    "one_hot": lambda x: jax.nn.one_hot(jnp.argmax(x, axis=-1), 5),
    "glu": lambda x: jax.nn.glu(x, axis=-1),
}
for _n, _f in _NN.items():
    CASES.append((f"nn_{_n}", _f, (f32(4, 6),)))


# -- reductions, shapes, indexing ------------------------------------------------------------
_ARRAY = {
    "sum_axis0": lambda x: jnp.sum(x, axis=0), "mean": jnp.mean, "var": lambda x: jnp.var(x, axis=1),
    "std": jnp.std, "max_keepdims": lambda x: jnp.max(x, axis=1, keepdims=True), "min": jnp.min,
    "prod": lambda x: jnp.prod(x, axis=1), "argmax": lambda x: jnp.argmax(x, axis=1), "argmin": jnp.argmin,
    "cumsum": lambda x: jnp.cumsum(x, axis=1), "cumprod": lambda x: jnp.cumprod(x, axis=0),
    "cummax": lambda x: lax.cummax(x, axis=1), "cumlogsumexp": lambda x: lax.cumlogsumexp(x, axis=1),
    "any": lambda x: jnp.any(x > 1.5), "all": lambda x: jnp.all(x > -3, axis=0),
    "norm": jnp.linalg.norm, "norm_axis": lambda x: jnp.linalg.norm(x, axis=1),
    "transpose": lambda x: x.T, "reshape": lambda x: x.reshape(3, 10), "ravel": jnp.ravel,
    "flip": lambda x: jnp.flip(x, 1), "roll": lambda x: jnp.roll(x, 2, axis=1),
    "concat": lambda x: jnp.concatenate([x, 2 * x], axis=0), "stack": lambda x: jnp.stack([x, x + 1]),
    "split": lambda x: jnp.split(x, 2, axis=1), "pad": lambda x: jnp.pad(x, ((1, 2), (0, 1))),
    "tile": lambda x: jnp.tile(x, (2, 1)), "repeat": lambda x: jnp.repeat(x, 2, axis=0),
    "expand_squeeze": lambda x: jnp.squeeze(jnp.expand_dims(x, 0), 0) * 2, "slice": lambda x: x[1:4, ::2],
    "index_neg": lambda x: x[-1], "triu": jnp.triu, "tril": lambda x: jnp.tril(x, -1),
    "diag": lambda x: jnp.diagonal(x), "trace": jnp.trace, "sort": lambda x: jnp.sort(x, axis=1),
    "argsort": lambda x: jnp.argsort(x, axis=1), "top_k": lambda x: lax.top_k(x, 3),
    "clip": lambda x: jnp.clip(x, -1, 1), "where_scalar": lambda x: jnp.where(x > 0, x, 0.0),
    "at_set": lambda x: x.at[1].set(0.0), "at_add": lambda x: x.at[:, 2].add(1.0),
    "outer": lambda x: jnp.outer(x[0], x[1]), "einsum": lambda x: jnp.einsum("ij,kj->ik", x, x),
    "matmul": lambda x: x @ x.T, "dot_vec": lambda x: x[0] @ x[1], "linspace": lambda x: x + jnp.linspace(0, 1, 6),
    "arange": lambda x: x * jnp.arange(6), "eye": lambda x: x[:, :5] @ jnp.eye(5), "zeros_like": lambda x: jnp.zeros_like(x) + x,
    "full": lambda x: jnp.full((5, 6), 2.0) - x, "moveaxis": lambda x: jnp.moveaxis(x.reshape(5, 3, 2), 0, 2),
    "swapaxes": lambda x: jnp.swapaxes(x.reshape(5, 3, 2), 0, 1), "take": lambda x: jnp.take(x, jnp.array([0, 2, 4]), axis=0),
    "gather_int": lambda x: x[jnp.argmax(x, axis=0), jnp.arange(6)], "mean_int_idx": lambda x: jnp.mean(x[::2]),
    "reduce_precision": lambda x: lax.reduce_precision(x, exponent_bits=5, mantissa_bits=10),
    "max_pool": lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (2, 2), (1, 1), "VALID"),
    "sum_pool": lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 3), (1, 1), "SAME"),
    "min_pool": lambda x: lax.reduce_window(x, jnp.inf, lax.min, (3, 2), (2, 2), "VALID"),
    "nanmean": lambda x: jnp.nanmean(jnp.where(x > 1, jnp.nan, x)), "median": lambda x: jnp.median(x, axis=1),
    "isinf_literal": lambda x: jnp.where(jnp.isinf(x / (x - x)), -jnp.inf, x),
    "logsumexp_inf": lambda x: jnp.max(jnp.where(x > 0, x, -jnp.inf), axis=1),
    "dynamic_slice": lambda x: lax.dynamic_slice(x, (1, jnp.argmax(x[0])), (2, 2)),
    "dynamic_update_slice": lambda x: lax.dynamic_update_slice(x, jnp.ones((2, 2)), (1, 1)),
}
for _n, _f in _ARRAY.items():
    CASES.append((f"array_{_n}", _f, (f32(5, 6),)))


# -- models ----------------------------------------------------------------------------------
@case("mlp", {"w1": f32(8, 16), "b1": f32(16), "w2": f32(16, 3), "b2": f32(3)}, f32(4, 8))
def mlp(params, x):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return jax.nn.log_softmax(h @ params["w2"] + params["b2"])


@case("layernorm", f32(4, 10), f32(10), f32(10))
def layernorm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return g * (x - mu) / jnp.sqrt(var + 1e-5) + b


@case("attention", f32(5, 8), f32(5, 8), f32(5, 8))
def attention(q, k, v):
    return jax.nn.softmax(q @ k.T / jnp.sqrt(8.0), axis=-1) @ v


@case("mse_grad", f32(6, 3), f32(10, 6), f32(10, 3))
def mse_grad(w, x, y):
    return jax.grad(lambda w: jnp.mean((jnp.tanh(x @ w) - y) ** 2))(w)


@case("value_and_grad_pytree", {"a": f32(3), "b": (f32(3, 3), f32())}, f32(3))
def value_and_grad_pytree(p, x):
    return jax.value_and_grad(lambda p: jnp.sum(jnp.sin(p["b"][0] @ (p["a"] * x)) * p["b"][1]))(p)


@case("hessian", f32(4))
def hessian(x):
    return jax.hessian(lambda x: jnp.sum(jnp.exp(x) * x ** 3))(x)


@case("jacfwd", f32(3))
def jacfwd(x):
    return jax.jacfwd(lambda x: jnp.sin(x) * x[::-1])(x)


@case("jacrev", f32(3))
def jacrev(x):
    return jax.jacrev(lambda x: jnp.cumsum(x ** 2))(x)


@case("vmap_matvec", f32(7, 4, 3), f32(7, 3))
def vmap_matvec(m, v):
    return jax.vmap(jnp.dot)(m, v)


@case("vmap_dynamic_slice", f32(5, 8), i32(5, lo=0, hi=6))
def vmap_dynamic_slice(x, i):
    return jax.vmap(lambda r, k: lax.dynamic_slice(r, (k,), (3,)))(x, i)


@case("vmap_index", f32(5, 8), i32(5, lo=0, hi=8))
def vmap_index(x, i):
    return jax.vmap(lambda r, k: r[k])(x, i)


@case("vmap_scatter_add", f32(5, 8), i32(5, lo=0, hi=8), f32(5))
def vmap_scatter_add(x, i, u):
    return jax.vmap(lambda r, k, v: r.at[k].add(v))(x, i, u)


@case("vmap_scatter_set", f32(5, 8), i32(5, lo=0, hi=7))
def vmap_scatter_set(x, i):
    return jax.vmap(lambda r, k: r.at[k].set(-1.0))(x, i)


@case("vmap_grad", f32(3), f32(6, 3))
def vmap_grad(w, xs):
    return jax.vmap(jax.grad(lambda w, x: jnp.tanh(w @ x)), in_axes=(None, 0))(w, xs)


@case("grad_vmap", f32(3), f32(6, 3))
def grad_vmap(w, xs):
    return jax.grad(lambda w: jnp.sum(jax.vmap(lambda x: jnp.sin(w @ x))(xs)))(w)


@case("jit_nested", f32(5))
def jit_nested(x):
    inner = jax.jit(lambda y: jnp.cos(y) * 2)
    return jax.jit(lambda y: inner(y) + inner(y * y))(x)


@case("grad_grad", f32())
def grad_grad(x):
    return jax.grad(jax.grad(lambda x: jnp.sin(x) * x ** 3))(x)


# -- control flow ----------------------------------------------------------------------------
@case("fori_loop", f32(4))
def fori_loop(x):
    return lax.fori_loop(0, 5, lambda i, c: c * 0.9 + jnp.sin(c) * i, x)


@case("fori_loop_traced", f32(4), np.int32(4))
def fori_loop_traced(x, n):
    return lax.fori_loop(0, n, lambda i, c: c + jnp.cos(c), x)


@case("while_loop", f32(4))
def while_loop(x):
    return lax.while_loop(lambda c: c[1] < 10, lambda c: (c[0] * 1.1 + 0.1, c[1] + 1), (x, 0))[0]


@case("scan_cumsum", f32(6, 3))
def scan_cumsum(xs):
    return lax.scan(lambda c, x: (c + x, c * x), jnp.zeros(3), xs)


@case("scan_rnn", f32(3, 3), f32(5, 3))
def scan_rnn(w, xs):
    return lax.scan(lambda h, x: (jnp.tanh(w @ h + x), h.sum()), jnp.zeros(3), xs)[1]


@case("scan_reverse", f32(6))
def scan_reverse(xs):
    return lax.scan(lambda c, x: (c * 0.5 + x, c), 0.0, xs, reverse=True)


@case("cond", f32(4), f32())
def cond(x, p):
    return lax.cond(p > 0, lambda x: jnp.sin(x), lambda x: jnp.cos(x) * 2, x)


@case("switch", f32(4), np.int32(2))
def switch(x, i):
    return lax.switch(i, [jnp.sin, jnp.cos, lambda x: x * 3], x)


@case("grad_scan", f32(3), f32(5, 3))
def grad_scan(w, xs):
    return jax.grad(lambda w: lax.scan(lambda h, x: (jnp.sin(h * w + x), None), jnp.zeros(3), xs)[0].sum())(w)


@case("grad_cond", f32(4), f32())
def grad_cond(x, p):
    return jax.grad(lambda x: lax.cond(p > 0, lambda x: jnp.sum(jnp.sin(x)), lambda x: jnp.sum(x ** 2), x))(x)


@case("vmap_cond", f32(5, 3), f32(5))
def vmap_cond(x, p):
    return jax.vmap(lambda x, p: lax.cond(p > 0, jnp.sin, jnp.cos, x))(x, p)


@case("vmap_while", f32(5))
def vmap_while(x):
    return jax.vmap(lambda x: lax.while_loop(lambda c: c < 10, lambda c: c * 2 + 1, x))(jnp.abs(x))


@case("map", f32(4, 3))
def map_(x):
    return lax.map(lambda r: jnp.sum(r ** 2), x)


@case("pytree_out", f32(4), f32(4))
def pytree_out(a, b):
    return {"s": a + b, "d": (a - b, a * b)}


# -- pooling in every form JAX prints: dilations, any computation, max pooling's jvp and vjp
#    (select_and_gather_add, select_and_scatter_add). A second generator: the cases above keep their inputs.
rng_pool = np.random.RandomState(1)


def _pool_input():
    return rng_pool.uniform(-2, 2, (5, 6)).astype(np.float32)


def _max_pool(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (2, 2), (1, 1), "VALID")


_POOLING = {
    "max_pool_grad": lambda x: jax.grad(lambda x: (_max_pool(x) * jnp.arange(20.0).reshape(4, 5)).sum())(x),
    "max_pool_jvp": lambda x: jax.jvp(_max_pool, (x,), (jnp.cos(x),))[1],
    "max_pool_dilated": lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (2, 2), (2, 1), "SAME", window_dilation=(2, 1)),
    "min_pool_strided_grad": lambda x: jax.grad(
        lambda x: jnp.sum(lax.reduce_window(x, jnp.inf, lax.min, (3, 2), (2, 2), "SAME") ** 2))(x),
    "prod_pool": lambda x: lax.reduce_window(x, 1.0, lax.mul, (2, 2), (1, 1), "VALID"),
    "custom_pool": lambda x: lax.reduce_window(x, 0.0, lambda a, b: a + b * 2, (2, 2), (1, 1), "VALID"),
    "sum_pool_base_dilated_grad": lambda x: jax.grad(lambda x: jnp.sum(jnp.sin(
        lax.reduce_window(x, 0.0, lax.add, (2, 3), (2, 1), "SAME", base_dilation=(2, 1)))))(x),
    "avg_pool_vmap": jax.vmap(lambda r: lax.reduce_window(r, 0.0, lax.add, (3,), (2,), "VALID") / 3.0),
    "max_pool_vmap_grad": jax.vmap(jax.grad(lambda r: jnp.sum(lax.reduce_window(r, -jnp.inf, lax.max, (2,), (1,),
                                                                               "SAME") ** 2))),
}
for _n, _f in _POOLING.items():
    CASES.append((f"pool_{_n}", _f, (_pool_input(),)))


# -- jax.export artifacts: (name, function, argument specs with symbolic sizes, sizes to run at) ---
EXPORTS = [
    ("mlp_batch", lambda x, w, b: jax.nn.relu(x @ w + b).sum(-1), ["b, 8", "8, 4", "4"], [1, 3, 16]),
    ("softmax_rows", lambda x: jax.nn.softmax(x, axis=-1), ["b, n"], [(2, 3), (5, 7)]),
    ("pair_batch", lambda x, y: jnp.tanh(x) * y[:, None], ["b, 3", "b"], [2, 9]),
    ("double_batch", lambda x: jnp.concatenate([x, x * 2]), ["2*b, 3"], [1, 4]),
    ("static_layernorm", lambda x: (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5),
     ["4, 6"], [None]),
]


def _specs(specs: list[str]):
    scope = export.SymbolicScope()
    return [jax.ShapeDtypeStruct(export.symbolic_shape(s, scope=scope), jnp.float32) for s in specs]


def _concrete(spec: str, size) -> tuple[int, ...]:
    """The shape of spec (`b, 8`, `2*b, 3`, `b, n`) at the batch size(s) `size`."""
    names = {}
    if isinstance(size, tuple):
        names = dict(zip(["b", "n"], size))
    elif size is not None:
        names = {"b": size}
    return tuple(int(eval(d, {}, names)) for d in spec.split(","))


def make_exports(out_dir: Path) -> list[dict]:
    """Each function exported with symbolic shapes (`<name>.jax_exported`), lowered for its first
    sizes as StableHLO bytecode (`<name>.mlirbc`), with inputs and JAX's outputs at every size
    (`<name>.npz`: s<k>_in<i>, s<k>_out<i>)."""
    entries = []
    for name, fn, specs, sizes in EXPORTS:
        exported = export.export(jax.jit(fn), platforms=["cpu"])(*_specs(specs))
        (out_dir / f"{name}.jax_exported").write_bytes(exported.serialize())
        arrays = {}
        for k, size in enumerate(sizes):
            ins = [f32(*_concrete(s, size)) for s in specs]
            outs = _flat(jax.jit(fn)(*ins))
            arrays.update({f"s{k}_in{i}": a for i, a in enumerate(ins)})
            arrays.update({f"s{k}_out{i}": a for i, a in enumerate(outs)})
            if k == 0:
                module = jax.jit(fn).lower(*ins).compiler_ir("stablehlo")
                with open(out_dir / f"{name}.mlirbc", "wb") as f:
                    module.operation.write_bytecode(f)
        np.savez(out_dir / f"{name}.npz", **arrays)
        entries.append({"name": name, "specs": specs, "n_sizes": len(sizes)})
    return entries


def _flat(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def make_case(out_dir: Path, name: str, fn, args) -> dict | None:
    closed = jax.make_jaxpr(fn)(*args)
    text = str(closed)
    outs = _flat(jax.jit(fn)(*args))
    ins = _flat(args)
    (out_dir / f"{name}.jaxpr").write_text(text + "\n")
    np.savez(out_dir / f"{name}.npz", **{f"in{i}": a for i, a in enumerate(ins)},
             **{f"out{i}": a for i, a in enumerate(outs)})
    entry = {"name": name, "n_in": len(ins), "n_out": len(outs)}
    if closed.consts:   # JAX's printer drops their values: the other forms of the case carry them
        entry["constvars"] = len(closed.consts)
    return entry


# -- every case in the other forms JAX gives: StableHLO text and bytecode, jax.export artifacts -----
def _resized(a: np.ndarray, n: int) -> np.ndarray:
    """a with n rows along axis 0, made of a's own rows (so the values keep their domain)."""
    reps = -(-n // a.shape[0])
    return np.concatenate([a[::-1] if k % 2 else a for k in range(reps)])[:n]


def _symbolic(fn, args):
    """(the leaves whose leading size is exported as `b`, the export) for the first choice JAX accepts:
    every leaf sharing the first array leaf's leading size, only the first array leaf, only the last;
    None when JAX refuses all (a function whose shapes are fixed: a reshape to (3, 10), a scalar)."""
    leaves, tree = jax.tree_util.tree_flatten(args)
    ranked = [i for i, a in enumerate(leaves) if np.ndim(a) >= 1]
    if not ranked:
        return None
    lead = np.shape(leaves[ranked[0]])[0]
    choices = [[i for i in ranked if np.shape(leaves[i])[0] == lead], ranked[:1], ranked[-1:]]
    for chosen in dict.fromkeys(tuple(c) for c in choices):
        b, = export.symbolic_shape("b")
        specs = [jax.ShapeDtypeStruct((b, *np.shape(a)[1:]) if i in chosen else np.shape(a), np.asarray(a).dtype)
                 for i, a in enumerate(leaves)]
        try:
            exp = export.export(jax.jit(fn), platforms=["cpu"])(*jax.tree_util.tree_unflatten(tree, specs))
            sizes = []
            for n in (max(1, lead - 1), 2 * lead + 1):
                ins = [_resized(np.asarray(a), n) if i in chosen else np.asarray(a) for i, a in enumerate(leaves)]
                sizes.append((ins, _flat(jax.jit(fn)(*jax.tree_util.tree_unflatten(tree, ins)))))
        except Exception:   # JAX refuses this choice (shapes that must be fixed): try the next
            continue
        return list(chosen), exp, sizes
    return None


def make_forms(name: str, fn, args, members: dict[str, bytes], bytecode: bool) -> dict:
    """The case's StableHLO text (`<name>.mlir`), bytecode (`<name>.mlirbc`, with `bytecode`), a static
    export (`<name>.jax_exported`) and, where JAX accepts one, an export with a symbolic leading size
    `b` (`<name>.b.jax_exported`, its inputs and JAX's outputs at two other sizes in `<name>.b.npz`)."""
    specs = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype), args)
    lowered = jax.jit(fn).lower(*args)
    members[f"{name}.mlir"] = lowered.as_text().encode()
    if bytecode:
        buf = io.BytesIO()
        lowered.compiler_ir("stablehlo").operation.write_bytecode(buf)
        members[f"{name}.mlirbc"] = buf.getvalue()
    members[f"{name}.jax_exported"] = bytes(export.export(jax.jit(fn), platforms=["cpu"])(*specs).serialize())
    forms = {"name": name, "mlirbc": bytecode}
    symbolic = _symbolic(fn, args)
    if symbolic is not None:
        chosen, exp, sizes = symbolic
        members[f"{name}.b.jax_exported"] = bytes(exp.serialize())
        buf = io.BytesIO()
        arrays = {}
        for k, (ins, outs) in enumerate(sizes):
            arrays.update({f"s{k}_in{i}": a for i, a in enumerate(ins)})
            arrays.update({f"s{k}_out{i}": a for i, a in enumerate(outs)})
        np.savez(buf, **arrays)
        members[f"{name}.b.npz"] = buf.getvalue()
        forms["symbolic"] = chosen
    return forms


def write_forms(out_dir: Path, bytecode: bool) -> list[dict]:
    """All cases' forms in one deflated zip (`forms.zip`): ~1,000 small files, a tenth of their size."""
    members: dict[str, bytes] = {}
    listed = []
    for name, fn, args in CASES:
        try:
            listed.append(make_forms(name, fn, args, members, bytecode))
        except Exception as e:   # listed with why (a function this JAX version lacks)
            listed.append({"name": name, "skipped": f"{type(e).__name__}: {str(e)[:200]}"})
    with zipfile.ZipFile(out_dir / "forms.zip", "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for member, data in sorted(members.items()):
            info = zipfile.ZipInfo(member, date_time=(2026, 1, 1, 0, 0, 0))   # reproducible bytes
            z.writestr(info, data, zipfile.ZIP_DEFLATED)
    return listed


def main() -> None:
    out_dir = Path(__file__).parent / f"jax-{jax.__version__}"
    out_dir.mkdir(exist_ok=True)
    entries = []
    for name, fn, args in CASES:
        try:
            entries.append(make_case(out_dir, name, fn, args))
        except Exception as e:   # a function this JAX version lacks: listed as skipped, with why
            entries.append({"name": name, "skipped": f"{type(e).__name__}: {str(e)[:200]}"})
    exports, forms = [], []
    try:
        import flatbuffers  # noqa: F401  (jax.export's serialize() needs it)
    except ImportError:
        print("  no jax.export artifacts: pip install flatbuffers", file=sys.stderr)
    else:
        export_dir = out_dir / "exported"
        export_dir.mkdir(exist_ok=True)
        exports = make_exports(export_dir)
        # JAX 0.4's stablehlo bytecode is not readable by a later MLIR (see test_corpus.MLIRBC_UNREADABLE)
        forms = write_forms(out_dir, bytecode=not jax.__version__.startswith("0.4."))
    (out_dir / "cases.json").write_text(json.dumps({"jax": jax.__version__, "cases": entries, "exports": exports,
                                                    "forms": forms}, indent=1) + "\n")
    made = sum("skipped" not in e for e in entries)
    print(f"jax {jax.__version__}: {made} cases in {out_dir}, {len(entries) - made} skipped", file=sys.stderr)
    for e in entries:
        if "skipped" in e:
            print(f"  skipped {e['name']}: {e['skipped']}", file=sys.stderr)


if __name__ == "__main__":
    main()
