"""The matmul library's objects (matmul_library.py): compiled by sprue's own pipeline, found
prebuilt (installation: matmul_prebuild.py) or in the compile cache, or compiled now and kept; and
the ones a kernel's LLVM IR calls, for its link (backend.build_shared_library)."""
from __future__ import annotations

import functools
import hashlib
import os
import re
import tempfile
from pathlib import Path
from typing import Callable

import llvmlite

from sprue.lowering.c_toolchain import keep_named_object, kept_named_object
from sprue.lowering.matmul_library import DTYPES, FORMS, SYMBOL_PREFIX, library_text, routine
from sprue.lowering.pipeline import lower_to_llvm_ir

# backend.codegen(llvm_ir, cpu=, features=, split=, entry_wrappers=) -> an object holding `.obj`
Codegen = Callable[..., object]


def _lowering_identity() -> str:
    """What the routines' code depends on besides their text: sprue's lowering sources and LLVM's
    version (a changed pipeline must not reuse an old object)."""
    digest = hashlib.sha256(llvmlite.__version__.encode())
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


@functools.cache
def _identity() -> str:
    return _lowering_identity()


def object_name(form: str, dtype: str, cpu: str, features: str) -> str:
    ident = repr((library_text(form, dtype), cpu, features, _identity())).encode()
    return f"matmul-{form}-{dtype}-{hashlib.sha256(ident).hexdigest()[:24]}.o"


def compile_routine(form: str, dtype: str, cpu: str, features: str, codegen: Codegen) -> bytes:
    """The routine's object, compiled now by sprue's pipeline and LLVM at O3 (`codegen`:
    backend.codegen, passed in: the backend imports this module to link the routines)."""
    # hidden: each library calls its own copy (on its own pool), none exports it
    llvm_ir = lower_to_llvm_ir(library_text(form, dtype)).replace(
        f"define void @_mlir_ciface_{routine(form, dtype)}(", f"define hidden void @_mlir_ciface_{routine(form, dtype)}(")
    return codegen(llvm_ir, cpu=cpu, features=features, split=False, entry_wrappers=False).obj


_compiled: dict[str, bytes] = {}


def routine_object(form: str, dtype: str, cpu: str, features: str, codegen: Codegen) -> bytes:
    """The routine's object: prebuilt, kept in the cache, compiled in this process already, or
    compiled now (then kept)."""
    name = object_name(form, dtype, cpu, features)
    data = _compiled.get(name) or kept_named_object(name)
    if data is None:
        data = compile_routine(form, dtype, cpu, features, codegen)
        keep_named_object(name, data)
    _compiled[name] = data
    return data


_CALLED = re.compile(rf"@_mlir_ciface_{SYMBOL_PREFIX}(\w+?)_(f32|f64)\(")


def objects_for(llvm_ir: str, directory: Path, cpu: str, features: str, codegen: Codegen) -> list[Path]:
    """The routines llvm_ir calls, their objects written into `directory`."""
    paths = []
    for form, dtype in sorted(set(_CALLED.findall(llvm_ir))):
        path = directory / f"{routine(form, dtype)}.o"
        path.write_bytes(routine_object(form, dtype, cpu, features, codegen))
        paths.append(path)
    return paths


def prebuild(directory: Path, cpu: str, codegen: Codegen, features: str = "") -> list[Path]:
    """Every routine compiled for `cpu` into `directory` (installation: c_toolchain's main)."""
    written = []
    for form in FORMS:
        for dtype in DTYPES:
            name = object_name(form, dtype, cpu, features)
            target = directory / name
            if not target.exists():
                with tempfile.NamedTemporaryFile(dir=directory, prefix=f".{name}.", delete=False) as f:
                    f.write(compile_routine(form, dtype, cpu, features, codegen))
                os.chmod(f.name, 0o644)
                os.replace(f.name, target)
            written.append(target)
    for stale in set(directory.glob("matmul-*.o")) - set(written):   # (a former lowering's)
        stale.unlink()
    return written


__all__ = ["compile_routine", "object_name", "objects_for", "prebuild", "routine_object"]
