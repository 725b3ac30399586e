"""Reading what `sprue compile` compiles: a jaxpr file (sprue's saved format or JAX-printed) or a
StableHLO `.mlir` module, into one `Kernel`: its StableHLO with the entry function renamed to the
kernel's name, the runtime Signature, the C names of its parameters, and (when the jaxpr says so)
its result shapes as C expressions over its size arguments. The compile driver
(frontend/api/driver.py) lowers the jaxpr, or reads and checks the StableHLO.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sprue.api import driver
from sprue.api.shape_functions import shape_function_of
from sprue.base.errors import SprueError
from sprue.io.jax_exported import read_exported
from sprue.io.saved_format import parse_saved
from sprue.ir.core import encode_name
from sprue.lax.debugging import without_prints
from sprue.runtime import Signature, c_names
from sprue.runtime.c_names import check_kernel_name, kernel_name_for
from sprue.runtime.header import c_identifier, unique_names
from sprue.runtime.private_files import cache_dir

STABLEHLO_SUFFIXES = (".mlir", ".mlirbc", ".stablehlo")
JAX_EXPORTED_SUFFIX = ".jax_exported"   # jax.export's serialize(): a flatbuffer holding a StableHLO module


class InputError(SprueError, ValueError):
    """The input file cannot be read (missing, unreadable, or of an unknown kind)."""


@dataclass
class Kernel:
    name: str                       # C identifier; the library exports _mlir_ciface_<name>
    source: Path
    stablehlo: str                  # its entry function is @<name>
    signature: Signature
    arg_names: list[str]
    closed_jaxpr: Any = None        # None for StableHLO input
    into: str | None = None         # its destination-passing entry (_mlir_ciface_<into>), if it has one
    assertions: list = field(default_factory=list)   # a jax.export module's shape assertions
    constvars: list = field(default_factory=list)    # a JAX-printed jaxpr's constvars: its leading arguments
    bf16_arguments: list = field(default_factory=list)   # ... its bfloat16 arguments (passed as uint16 bits)
    bf16_results: list = field(default_factory=list)     # ... and results, by position


def kernel_name(path: Path, name: str | None) -> str:
    """--name, checked (a KernelNameError, a ValueError, saying why a name cannot be a C symbol:
    runtime/c_names.py; the system headers are asked too), else the input's stem as a C identifier
    (`my-kernel.v2.jaxpr` -> `my_kernel`; `main.mlir` -> `main_kernel`)."""
    root = cache_dir()
    c_names.PROBE_CACHE_DIR = None if root is None else os.path.join(os.fsdecode(root), "c_names")
    if name is not None:
        return check_kernel_name(name, "--name", headers=True)
    return kernel_name_for(path.name.split(".")[0], headers=True)


def read_kernel(path: Path, name: str, *, into: bool = True, debug_print: bool = True) -> Kernel:
    """The kernel in `path`; a jaxpr's with its destination-passing entry unless `into` is False
    and its sprue.debug.print calls unless `debug_print` is False (kernel_from_jaxpr)."""
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if path.suffix in STABLEHLO_SUFFIXES:
        return _read_stablehlo(path, name)
    if path.suffix == JAX_EXPORTED_SUFFIX:
        return _read_stablehlo(path, name, read_exported(path.read_bytes(), str(path)).mlir_module)
    return _read_jaxpr(path, name, into, debug_print)


# -- StableHLO ----------------------------------------------------------------------------------
def _read_stablehlo(path: Path, name: str, module: bytes | None = None) -> Kernel:
    prepared = driver.prepare_stablehlo(path if module is None else module, rename_to=name)
    sig = prepared.signature
    return Kernel(name, path, prepared.text, sig, [c_identifier(a.name) for a in sig.args], None,
                  assertions=prepared.assertions)


# -- jaxpr --------------------------------------------------------------------------------------
# Jaxpr files are read as saved programs (io/saved_format.py: sprue's saved format, whose header
# names the arguments; plain JAX-printed jaxprs too).
def _read_jaxpr(path: Path, name: str, into: bool, debug_print: bool) -> Kernel:
    closed, _n_implicit, explicit_names, boundary = parse_saved(path.read_text(), str(path), with_boundary=True)
    kernel = kernel_from_jaxpr(closed, name, path, explicit_names, into=into, debug_print=debug_print)
    explicit = kernel.arg_names[len(kernel.arg_names) - len(explicit_names):]
    kernel.constvars = explicit[:len(boundary.constvars)]
    kernel.bf16_arguments = [explicit[k] for k in sorted(boundary.bf16_arguments)]
    kernel.bf16_results = sorted(boundary.bf16_results)
    return kernel


def kernel_from_jaxpr(closed, name: str, source: Path, explicit_names: list[str] | None = None, *,
                      into: bool = True, debug_print: bool = True) -> Kernel:
    """The kernel of a ClosedJaxpr (read from a file, or made by sprue.make_jaxpr). The C names of
    the trailing (explicit) arguments are `explicit_names` when given. With `into` (and result
    sizes that follow from the arguments'), the library gets a destination-passing entry too.
    Without `debug_print`, its sprue.debug.print calls are left out."""
    if not debug_print:
        closed = without_prints(closed)
    arg_names = _invar_names(closed.jaxpr, explicit_names)
    # Called from C: the kernel checks every size of its arguments' descriptors, the static ones too
    # (lowering/rules_checks.py, entry checks), naming the arguments as the header does.
    # with results whose sizes follow from the arguments' (the header's `_into`), a second entry
    # computes them in the caller's buffers (lower_with_signature's `into`)
    into = f"{name}_into" if into and shape_function_of(closed.jaxpr).complete else None
    text, sig = driver.lower_with_signature(closed, name, arg_names, result_name="result{}", static_sizes=True,
                                            into=into)
    return Kernel(name, source, text, sig, arg_names, closed, into)


def _invar_names(jaxpr, explicit_names: list[str] | None) -> list[str]:
    """C names of the arguments: `explicit_names` for the trailing explicit ones when given; else a
    size argument is named after its dimension (`n`) and the others after their printed jaxpr
    names (a, b, ...), which is all a plain jaxpr file records."""
    n_explicit = len(explicit_names) if explicit_names is not None else 0
    first_explicit = len(jaxpr.invars) - n_explicit
    bases = []
    for i, v in enumerate(jaxpr.invars):
        dim_name = getattr(v.dim, "name", None) if v.dim is not None else None
        given = explicit_names[i - first_explicit] if i >= first_explicit else None
        bases.append(c_identifier(given or dim_name or encode_name(i) + getattr(v, "suffix", ""), fallback=f"arg{i}"))
    return unique_names(bases, {"out", "status"})
