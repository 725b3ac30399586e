"""Numeric kernels (issue 8), each beside numpy and, when installed, jax.jit (float64) and numba:

    elementwise     sin(x) * 2 + x * x over 1e7 f64                     (a)
    matmul_512      512 x 512 @ 512 x 512                                (b)
    matmul_1024     1024 x 1024 @ 1024 x 1024                            (b)
    sum             sum of 1e7 f64 (also reported against the memory-bandwidth bound)  (c)
    softmax         row softmax of a 2048 x 2048 matrix                  (d)
    scalar_call     x * 2 + 1 on one Python float: the per-call overhead (h)
    call_2_arrays   a + b of two 1000-element arrays, one result: a call's overhead with arrays
    call_dict_4     a + b * c - d of a dict of four 1000-element arrays: with a container argument
    mm_<class>      the matmul shape classes of issue 13 (i): batched, attention's q @ k^T,
                    transposed either side, matvec, vecmat, small, odd, f32, run-time sizes, in a loop
    <fn>_<dt>_<n>   tanh, exp and log of 2^15 and 2^20 float32/float64 elements, against numpy's
                    (issue 13's "within 1.0x of numpy"; their ulp bounds: tests/lowering/test_vector_math.py)
    fft_<n>         complex128 FFT of 2^16 (issue 18: within 3x of numpy's pocketfft), 1000 and the prime 1009

(e) logistic map, (f) Newton sqrt are in control_flow.py, (g) dynamic sizes in dynamic_shapes.py.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import sprue
import sprue.numpy as snp

N = 10_000_000


@dataclass
class Benchmark:
    name: str
    args: tuple
    impls: dict[str, Callable] = field(default_factory=dict)
    rtol: float = 1e-9
    # float32 products of K terms with cancellation: a result near zero is off by ~K*eps*|terms|,
    # which no relative tolerance covers
    atol: float = 1e-12
    # bytes the kernel must at least read: run.py reports the memory-bandwidth bound from it
    min_bytes: int | None = None
    flops: int | None = None


# -- (a) elementwise --------------------------------------------------------------------------------
def elementwise_numpy(x):
    return np.sin(x) * 2.0 + x * x


@sprue.qjit
def elementwise_sprue(x):
    return snp.sin(x) * 2.0 + x * x


# -- (b) matmul -------------------------------------------------------------------------------------
def matmul_numpy(a, b):
    return a @ b


@sprue.qjit
def matmul_sprue(a, b):
    return a @ b


# -- (c) sum ----------------------------------------------------------------------------------------
def sum_numpy(x):
    return np.sum(x)


@sprue.qjit
def sum_sprue(x):
    return snp.sum(x)


# -- (d) row softmax --------------------------------------------------------------------------------
def softmax_numpy(x):
    e = np.exp(x - np.max(x, axis=1, keepdims=True))
    return e / np.sum(e, axis=1, keepdims=True)


@sprue.qjit
def softmax_sprue(x):
    e = snp.exp(x - snp.max(x, axis=1, keepdims=True))
    return e / snp.sum(e, axis=1, keepdims=True)


# -- (h) scalar call --------------------------------------------------------------------------------
def scalar_python(x):
    return x * 2.0 + 1.0


@sprue.qjit
def scalar_sprue(x):
    return x * 2.0 + 1.0


def two_arrays(a, b):
    return a + b


def dict_of_four(d):
    return d["a"] + d["b"] * d["c"] - d["d"]


two_arrays_sprue = sprue.qjit(two_arrays)
dict_of_four_sprue = sprue.qjit(dict_of_four)


def _optional_impls(bench: str) -> dict[str, Callable]:
    impls: dict[str, Callable] = {}
    if importlib.util.find_spec("jax") is not None:
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        def jsoftmax(x):
            e = jnp.exp(x - jnp.max(x, axis=1, keepdims=True))
            return e / jnp.sum(e, axis=1, keepdims=True)
        jitted = {
            "elementwise": jax.jit(lambda x: jnp.sin(x) * 2.0 + x * x),
            "matmul_512": jax.jit(lambda a, b: a @ b),
            "matmul_1024": jax.jit(lambda a, b: a @ b),
            "sum": jax.jit(jnp.sum),
            "softmax": jax.jit(jsoftmax),
            "scalar_call": jax.jit(lambda x: x * 2.0 + 1.0),
            "call_2_arrays": jax.jit(two_arrays),
            "call_dict_4": jax.jit(dict_of_four),
        }
        f = jitted[bench]
        if bench == "scalar_call":
            impls["jax"] = lambda *args: f(*args).block_until_ready()
        elif bench.startswith("call_"):   # the dispatch: arguments on the device, the result left there
            impls["jax"] = lambda *args: f(*args).block_until_ready()
            impls["jax"].device_args = True
        else:   # arguments are committed to the device once, as a jitted caller would keep them
            impls["jax"] = lambda *args: np.asarray(f(*args).block_until_ready())
            impls["jax"].device_args = True
    if importlib.util.find_spec("numba") is not None:
        try:
            import numba
        except Exception:   # an installed numba that does not import (llvmlite version): no column
            return impls

        def nb_softmax(x):
            out = np.empty_like(x)
            for i in numba.prange(x.shape[0]):
                m = x[i].max()
                e = np.exp(x[i] - m)
                out[i] = e / e.sum()
            return out
        python = {
            "elementwise": elementwise_numpy, "matmul_512": matmul_numpy, "matmul_1024": matmul_numpy,
            "sum": sum_numpy, "softmax": nb_softmax, "scalar_call": scalar_python, "call_2_arrays": two_arrays,
        }
        if bench in python:   # (numba takes no dict of arrays)
            impls["numba"] = numba.njit(python[bench], parallel=bench == "softmax")
    return impls


def benchmarks() -> list[Benchmark]:
    rng = np.random.default_rng(0)
    x = rng.uniform(-3.0, 3.0, N)
    out = [
        Benchmark("elementwise", (x,), {"numpy": elementwise_numpy, "sprue": elementwise_sprue},
                  rtol=1e-12, min_bytes=16 * N),
    ]
    for n in (512, 1024):
        a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
        out.append(Benchmark(f"matmul_{n}", (a, b), {"numpy": matmul_numpy, "sprue": matmul_sprue},
                             flops=2 * n ** 3))
    out += [
        Benchmark("sum", (x,), {"numpy": sum_numpy, "sprue": sum_sprue}, min_bytes=8 * N),
        Benchmark("softmax", (rng.standard_normal((2048, 2048)),),
                  {"numpy": softmax_numpy, "sprue": softmax_sprue}, rtol=1e-12, min_bytes=16 * 2048 * 2048),
        Benchmark("scalar_call", (1.25,), {"numpy": scalar_python, "sprue": scalar_sprue}),
        Benchmark("call_2_arrays", (rng.standard_normal(1000), rng.standard_normal(1000)),
                  {"numpy": two_arrays, "sprue": two_arrays_sprue}),
        Benchmark("call_dict_4", ({k: rng.standard_normal(1000) for k in "abcd"},),
                  {"numpy": dict_of_four, "sprue": dict_of_four_sprue}),
    ]
    for b in out:
        b.impls.update(_optional_impls(b.name))
    return out + matmul_classes(rng) + transcendentals(rng) + ffts(rng)


# -- (i) matmul shape classes (issue 13: each within 1.2x of single-threaded BLAS) ---------------------
def _loop_numpy(x, w):
    for _ in range(10):
        x = (x @ w) * 0.01
    return x


# name: (sprue/jax body written against a numpy-like namespace `xp`, operand shapes, dtype, abstracted axes)
MATMUL_CLASSES = {
    "mm_256": (lambda xp: lambda a, b: a @ b, [(256, 256), (256, 256)], np.float64, None),
    "mm_256_f32": (lambda xp: lambda a, b: a @ b, [(256, 256), (256, 256)], np.float32, None),
    "mm_batched": (lambda xp: lambda p, v: p @ v, [(8, 256, 256), (8, 256, 64)], np.float64, None),
    "mm_attention": (lambda xp: lambda q, k: q @ xp.swapaxes(k, 1, 2), [(8, 256, 64), (8, 256, 64)], np.float64, None),
    "mm_attention_f32": (lambda xp: lambda q, k: q @ xp.swapaxes(k, 1, 2), [(8, 256, 64), (8, 256, 64)],
                         np.float32, None),
    "mm_a_t": (lambda xp: lambda a, b: a.T @ b, [(256, 256), (256, 256)], np.float64, None),
    "mm_b_t": (lambda xp: lambda a, b: a @ b.T, [(256, 256), (256, 256)], np.float64, None),
    "mm_matvec": (lambda xp: lambda a, x: a @ x, [(1024, 1024), (1024,)], np.float64, None),
    "mm_vecmat": (lambda xp: lambda x, a: x @ a, [(1024,), (1024, 1024)], np.float64, None),
    "mm_small_8": (lambda xp: lambda a, b: a @ b, [(8, 8), (8, 8)], np.float64, None),
    "mm_small_16": (lambda xp: lambda a, b: a @ b, [(16, 16), (16, 16)], np.float64, None),
    "mm_odd_129": (lambda xp: lambda a, b: a @ b, [(129, 129), (129, 129)], np.float64, None),
    "mm_dynamic_256": (lambda xp: lambda a, b: a @ b, [(256, 256), (256, 256)], np.float64,
                       ({0: "m", 1: "k"}, {0: "k", 1: "n"})),
    "mm_in_fori_loop": (None, [(128, 128), (128, 128)], np.float64, None),
}


def _flops(name: str, shapes) -> int:
    *batch, m, k = shapes[0] if len(shapes[0]) > 1 else (1, shapes[0][0])
    n = shapes[1][-1] if len(shapes[1]) > 1 else 1
    if "attention" in name:        # q @ k^T: k's rows are the columns of the product
        n = shapes[1][-2]
    return 2 * int(np.prod(batch, dtype=np.int64)) * m * n * k


def matmul_classes(rng) -> list[Benchmark]:
    out = []
    jnp = None
    if importlib.util.find_spec("jax") is not None:
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
    for name, (body, shapes, dtype, axes) in MATMUL_CLASSES.items():
        args = tuple(rng.standard_normal(s).astype(dtype) for s in shapes)
        if body is None:        # 10 products in a fori_loop
            ref = _loop_numpy
            fn = sprue.qjit(lambda x, w: sprue.lax.fori_loop(0, 10, lambda i, x: (x @ w) * 0.01, x))
            flops = 10 * _flops(name, shapes)
        else:
            ref = body(np)
            fn = sprue.qjit(body(snp), abstracted_axes=axes) if axes else sprue.qjit(body(snp))
            flops = _flops(name, shapes)
        b = Benchmark(name, args, {"numpy": ref, "sprue": fn}, rtol=1e-4 if dtype == np.float32 else 1e-9,
                      atol=1e-3 if dtype == np.float32 else 1e-12, flops=flops)
        if jnp is not None and body is not None:
            f = jax.jit(body(jnp))
            b.impls["jax"] = lambda *a, f=f: np.asarray(f(*a).block_until_ready())
            b.impls["jax"].device_args = True
        out.append(b)
    return out


# -- (j) transcendentals (issue 13: within 1.0x of numpy) -------------------------------------------
def _transcendental(name: str):
    """sprue's qjit of snp.<name>, numpy's np.<name>."""
    return sprue.qjit(getattr(snp, name)), getattr(np, name)


def transcendentals(rng) -> list[Benchmark]:
    out = []
    for name, low, high in (("tanh", -5.0, 5.0), ("exp", -30.0, 30.0), ("log", 1e-3, 1e3)):
        for dtype, tag in ((np.float32, "f32"), (np.float64, "f64")):
            for log2n in (15, 20):
                x = rng.uniform(low, high, 1 << log2n).astype(dtype)
                fn, ref = _transcendental(name)
                out.append(Benchmark(f"{name}_{tag}_2^{log2n}", (x,), {"numpy": ref, "sprue": fn},
                                     rtol=2e-6 if dtype == np.float32 else 1e-14, atol=0.0,
                                     min_bytes=2 * x.nbytes))
    return out


# -- sprue.numpy.fft against numpy's pocketfft (issue 18 item 3) --------------------------------------
def ffts(rng) -> list[Benchmark]:
    out = []
    for n in (1 << 16, 1000, 1009):
        z = rng.standard_normal(n) + 1j * rng.standard_normal(n)
        out.append(Benchmark(f"fft_{n}", (z,), {"numpy": np.fft.fft, "sprue": sprue.qjit(lambda v: snp.fft.fft(v))},
                             rtol=1e-11, atol=1e-9, min_bytes=2 * z.nbytes))
    return out
