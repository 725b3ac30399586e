"""A small harness for the lowering tests: compile a function written with sprue.lax and run it.

Functions whose arguments and results all have dtypes the runtime passes (f64 f32 i64 i32 i16 i8
u8 bool) go through sprue.qjit, end to end. The others (f16, u16, u32, u64) are traced with
make_jaxpr, lowered with `lower_jaxpr`, built with the real backend, and called through their
C interface `_mlir_ciface_main` directly. The reference is the same function run eagerly: with no
trace active, sprue.lax runs the numpy reference rules, which define the semantics the lowering
must match. Used by tests/lowering/test_lowering_*.py.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable, Sequence

import cffi
import numpy as np

import sprue
from sprue.api.traced import make_jaxpr
from sprue.base.pytree import tree_flatten
from sprue.lowering import backend
from sprue.lowering.stablehlo import lower_jaxpr
from sprue.runtime.element_types import ELEMENT_TYPES


def _descriptor(rank: int) -> str:
    extra = f" int64_t sizes[{rank}]; int64_t strides[{rank}];" if rank else ""
    return f"struct d{rank} {{ void *allocated; void *aligned; int64_t offset;{extra} }};"


_RUNTIME_DTYPES = {et.dtype for et in ELEMENT_TYPES}

# Where the libraries called directly are built: a folder of pytest's temporary folder, set for the
# session by tests/lowering/conftest.py.
build_root: Path | None = None


class Compiled:
    """fn compiled for the shapes and dtypes of some example arguments; calling it returns the
    flat list of its results."""

    def __init__(self, fn: Callable, *examples: np.ndarray):
        self.closed = make_jaxpr(fn)(*examples)
        self.in_avals = self.closed.in_avals
        self.out_avals = self.closed.out_avals
        if all(a.dtype in _RUNTIME_DTYPES for a in self.in_avals + self.out_avals):
            self._qjit = sprue.qjit(fn)
        else:
            self._qjit = None
            self._build_direct()

    def __call__(self, *args) -> list[np.ndarray]:
        if self._qjit is None:
            return self._call_direct(*args)
        leaves, _ = tree_flatten(self._qjit(*[np.asarray(a, av.dtype) for a, av in zip(args, self.in_avals)]))
        return [np.asarray(x) for x in leaves]

    def _build_direct(self) -> None:
        self.text = lower_jaxpr(self.closed)
        # a folder per library: dlopen returns the library already loaded from a path it has seen
        self._dir = tempfile.mkdtemp(prefix="main-", dir=build_root)
        so = backend.build_shared_library(self.text, self._dir, "main")
        ranks = sorted({a.ndim for a in self.in_avals} | {a.ndim for a in self.out_avals})
        decls = [_descriptor(r) for r in ranks]
        outs = [f"struct d{a.ndim} r{i};" for i, a in enumerate(self.out_avals)]
        decls.append(f"struct results {{ {' '.join(outs)} }};")
        params = ["void *results"] + [f"struct d{a.ndim} *a{i}" for i, a in enumerate(self.in_avals)]
        decls.append(f"void _mlir_ciface_main({', '.join(params)});")
        self.ffi = cffi.FFI()
        self.ffi.cdef("\n".join(decls))
        self.lib = self.ffi.dlopen(str(so))

    def _call_direct(self, *args) -> list[np.ndarray]:
        ffi = self.ffi
        keep = []
        descs = []
        for a, aval in zip(args, self.in_avals):
            arr = np.array(a, dtype=aval.dtype, order="C")
            assert arr.shape == aval.shape, (arr.shape, aval.shape)
            keep.append(arr)
            d = ffi.new(f"struct d{arr.ndim} *")
            d.allocated = d.aligned = ffi.cast("void *", arr.ctypes.data)
            d.offset = 0
            for i, (n, s) in enumerate(zip(arr.shape, arr.strides)):
                d.sizes[i], d.strides[i] = n, s // max(arr.itemsize, 1)
            descs.append(d)
        results = ffi.new("struct results *")
        self.lib._mlir_ciface_main(results, *descs)
        return [self._read(getattr(results, f"r{i}"), aval) for i, aval in enumerate(self.out_avals)]

    def _read(self, d, aval) -> np.ndarray:
        # Results are malloc'ed by the compiled code (or alias an argument); tests leak them.
        dtype = np.dtype(aval.dtype)
        shape = tuple(aval.shape)
        if 0 in shape:
            return np.zeros(shape, dtype)
        sizes = [d.sizes[i] for i in range(len(shape))] if shape else []
        strides = [d.strides[i] for i in range(len(shape))] if shape else []
        assert tuple(sizes) == shape, (sizes, shape)
        span = 1 + sum((n - 1) * s for n, s in zip(sizes, strides))
        ptr = self.ffi.cast("char *", d.aligned) + d.offset * dtype.itemsize
        flat = np.frombuffer(self.ffi.buffer(ptr, span * dtype.itemsize), dtype=dtype)
        return np.lib.stride_tricks.as_strided(flat, shape, [s * dtype.itemsize for s in strides]).copy()


def reference(fn: Callable, *args) -> list[np.ndarray]:
    """fn run eagerly: sprue.lax applies the numpy reference rules."""
    out = fn(*[np.asarray(a) for a in args])
    return [np.asarray(o) for o in (out if isinstance(out, (tuple, list)) else [out])]


def _tolerance(dtype: np.dtype, rtol: float | None) -> float:
    if rtol is not None:
        return rtol
    return {8: 1e-14, 4: 2e-6, 2: 2e-3}[dtype.itemsize] if dtype.kind == "f" else 0.0


def assert_same(actual: np.ndarray, expected: np.ndarray, rtol: float | None = None, atol: float = 0.0,
                what: str = "") -> None:
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if actual.dtype.kind == "f":
        np.testing.assert_allclose(actual, expected, rtol=_tolerance(actual.dtype, rtol), atol=atol,
                                   equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


def check(fn: Callable, *args, rtol: float | None = None, atol: float = 0.0,
          expected: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
    """Compiles fn at args, runs it, compares every output with the reference rule's (or `expected`)."""
    args = [np.asarray(a) for a in args]
    got = Compiled(fn, *args)(*args)
    want = reference(fn, *args) if expected is None else [np.asarray(e) for e in expected]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_same(g, w, rtol, atol, what=f"{getattr(fn, '__name__', 'fn')} output {i}")
    return got
