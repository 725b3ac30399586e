"""StableHLO text -> a shared library -> `main` called through cffi with memref descriptors built
here, so that the pipeline and legalization tests (tests/lowering/test_pipeline.py,
test_legalize.py) depend on sprue.lowering.backend alone, not on sprue.runtime."""
from __future__ import annotations

from pathlib import Path

import cffi
import numpy as np
from torch_mlir import ir

from sprue.lowering import pipeline
from sprue.lowering.backend import build_shared_library

_DTYPES = {"f64": np.float64, "f32": np.float32, "i64": np.int64, "i32": np.int32,
           "i1": np.bool_, "ui32": np.uint32, "i8": np.int8}


def _signature(src: str) -> tuple[list[tuple[int, np.dtype]], list[tuple[int, np.dtype]]]:
    """(rank, dtype) of main's arguments and results, read from the module."""
    ctx = pipeline.make_pipeline_context()
    with ctx:
        module = ir.Module.parse(src)
        main = next(op for op in module.body.operations
                    if op.operation.name == "func.func"
                    and ir.StringAttr(op.attributes["sym_name"]).value == "main")
        ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)

        def spec(t: ir.Type) -> tuple[int, np.dtype]:
            t = ir.RankedTensorType(t)
            return t.rank, np.dtype(_DTYPES[str(t.element_type)])
        return [spec(t) for t in ftype.inputs], [spec(t) for t in ftype.results]


def _descriptor_decl(rank: int) -> str:
    dims = f" int64_t sizes[{rank}]; int64_t strides[{rank}];" if rank else ""
    return f"typedef struct {{ void *allocated; void *aligned; int64_t offset;{dims} }} memref{rank};"


class Kernel:
    """A compiled `main`: call it with numpy arrays, get numpy arrays back."""

    def __init__(self, so_path: Path, src: str):
        self.args, self.results = _signature(src)
        ranks = sorted({r for r, _ in self.args + self.results})
        self.ffi = cffi.FFI()
        fields = " ".join(f"memref{r} r{i};" for i, (r, _) in enumerate(self.results))
        n_params = 1 + len(self.args)
        self.ffi.cdef("\n".join(_descriptor_decl(r) for r in ranks) + f"""
            typedef struct {{ {fields} }} results_t;
            void _mlir_ciface_main({", ".join(["void *"] * n_params)});
            void free(void *);""")
        self.lib = self.ffi.dlopen(str(so_path))
        self.libc = self.ffi.dlopen(None)

    def _in_descriptor(self, a: np.ndarray, rank: int):
        d = self.ffi.new(f"memref{rank} *")
        ptr = self.ffi.cast("void *", a.ctypes.data)
        d.allocated, d.aligned, d.offset = ptr, ptr, 0
        for i in range(rank):
            d.sizes[i] = a.shape[i]
            d.strides[i] = a.strides[i] // a.itemsize
        return d

    def _take(self, d, rank: int, dtype: np.dtype) -> np.ndarray:
        """Copies a returned buffer into numpy and frees it (we own it)."""
        shape = [d.sizes[i] for i in range(rank)]
        strides = [d.strides[i] for i in range(rank)]
        out = np.zeros(shape, dtype)
        if out.size:
            # Elements from `aligned` up to the last one the descriptor reaches.
            extent = d.offset + 1 + sum((n - 1) * st for n, st in zip(shape, strides))
            raw = np.frombuffer(self.ffi.buffer(self.ffi.cast("char *", d.aligned),
                                                extent * dtype.itemsize), dtype)
            view = np.lib.stride_tricks.as_strided(
                raw[d.offset:], shape, [st * dtype.itemsize for st in strides])
            out = view.copy()
        self.libc.free(d.allocated)
        return out

    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        assert len(arrays) == len(self.args)
        keep = [np.ascontiguousarray(a, dtype=dt) for a, (_, dt) in zip(arrays, self.args)]
        descs = [self._in_descriptor(a, r) for a, (r, _) in zip(keep, self.args)]
        res = self.ffi.new("results_t *")
        # One result: the first argument points at its descriptor; several: at
        # a struct of descriptors.  Both are the same address of results_t.
        self.lib._mlir_ciface_main(res, *descs)
        return [self._take(getattr(res, f"r{i}"), r, dt) for i, (r, dt) in enumerate(self.results)]


def compile_kernel(src: str, out_dir: Path, **kwargs) -> Kernel:
    return Kernel(build_shared_library(src, out_dir, **kwargs), src)
