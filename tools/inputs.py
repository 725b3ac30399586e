"""Reading what `sprue compile` compiles: a jaxpr file (sprue's saved format or JAX-printed) or a
StableHLO `.mlir` module, into one `Kernel`: its StableHLO with the entry function renamed to the
kernel's name, the runtime Signature, the C names of its parameters, and (when the jaxpr says so)
its result shapes as C expressions over its size arguments.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from sprue.base.errors import SprueError
from sprue.runtime import Signature, TensorSpec
from sprue.api.compile_cache import cache_dir
from sprue.runtime import c_names
from sprue.runtime.c_names import check_kernel_name, kernel_name_for
from sprue.runtime.header import c_identifier, unique_names

STABLEHLO_SUFFIXES = (".mlir", ".stablehlo")


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


def kernel_name(path: Path, name: str | None) -> str:
    """--name, checked (a KernelNameError, a ValueError, saying why a name cannot be a C symbol:
    runtime/c_names.py; the system headers are asked too), else the input's stem as a C identifier
    (`my-kernel.v2.jaxpr` -> `my_kernel`; `main.mlir` -> `main_kernel`)."""
    root = cache_dir()
    c_names.PROBE_CACHE_DIR = None if root is None else os.path.join(os.fsdecode(root), "c_names")
    if name is not None:
        return check_kernel_name(name, "--name", headers=True)
    return kernel_name_for(path.name.split(".")[0], headers=True)


def read_kernel(path: Path, name: str) -> Kernel:
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if path.suffix in STABLEHLO_SUFFIXES:
        return _read_stablehlo(path, name)
    return _read_jaxpr(path, name)


# -- StableHLO ----------------------------------------------------------------------------------
def _read_stablehlo(path: Path, name: str) -> Kernel:
    from sprue.lowering.stablehlo_input import prepare
    prepared = prepare(path)
    text = rename_entry(prepared.text, prepared.entry, name)
    sig = prepared.signature
    return Kernel(name, path, text, sig, [c_identifier(a.name) for a in sig.args], None)


def rename_entry(text: str, entry: str, name: str) -> str:
    """The module with func @<entry> renamed @<name> (and every reference to it), so that kernels
    of one program export distinct symbols."""
    if entry == name:
        return text
    from torch_mlir import ir
    from sprue.lowering.pipeline import make_context, parse_module
    ctx = make_context()
    with ctx, ir.Location.unknown():
        module = parse_module(ctx, text)
        table = ir.SymbolTable(module.operation)
        if name in table:
            raise InputError(f"--name {name!r}: the module already has a function @{name}")
        ir.SymbolTable.replace_all_symbol_uses(entry, name, module.operation)
        ir.SymbolTable.set_symbol_name(table[entry], name)
        return str(module)


# -- jaxpr --------------------------------------------------------------------------------------
# Jaxpr files are read by frontend/saved.py (sprue's saved format, whose header names the
# arguments; it also reads plain JAX-printed jaxprs) when it is installed, else by the bare parser.
def _read_jaxpr(path: Path, name: str) -> Kernel:
    text = path.read_text()
    try:
        from sprue.api.saved import parse_saved
    except ImportError:
        parse_saved = None
    if parse_saved is not None:
        closed, n_implicit, explicit_names = parse_saved(text, str(path))
        return kernel_from_jaxpr(closed, name, path, explicit_names)
    try:
        from sprue.io.jaxpr_parser import parse_jaxpr
    except ImportError:
        raise InputError("reading jaxpr files needs sprue's jaxpr parser (sprue.jaxpr_parser), which this"
                         " installation does not have; compile a StableHLO .mlir file instead") from None
    closed, _n_implicit = parse_jaxpr(text, filename=str(path))
    return kernel_from_jaxpr(closed, name, path)


def kernel_from_jaxpr(closed, name: str, source: Path, explicit_names: list[str] | None = None) -> Kernel:
    """The kernel of a ClosedJaxpr (read from a file, or made by sprue.make_jaxpr). The C names of
    the trailing (explicit) arguments are `explicit_names` when given."""
    from sprue.lowering.stablehlo import lower
    jaxpr = closed.jaxpr
    arg_names = _invar_names(jaxpr, explicit_names)
    # Called from C: the kernel checks every size of its arguments' descriptors, the static ones too
    # (lowering/rules_checks.py, entry checks), naming the arguments as the header does.
    lowered = lower(closed, name=name, arg_names=arg_names, static_sizes=True)
    sig = Signature([TensorSpec(n, v.aval.dtype, _runtime_shape(v.aval)) for n, v in zip(arg_names, jaxpr.invars)],
                    [TensorSpec(f"result{i}", a.aval.dtype, _runtime_shape(a.aval))
                     for i, a in enumerate(jaxpr.outvars)],
                    status_messages=lowered.check_messages if lowered.has_status else None)
    return Kernel(name, source, lowered.text, sig, arg_names, closed)


def _runtime_shape(aval) -> tuple:
    return tuple(d if isinstance(d, int) else None for d in aval.shape)


def _invar_names(jaxpr, explicit_names: list[str] | None) -> list[str]:
    """C names of the arguments: `explicit_names` for the trailing explicit ones when given; else a
    size argument is named after its dimension (`n`) and the others after their printed jaxpr
    names (a, b, ...), which is all a plain jaxpr file records."""
    from sprue.ir.core import encode_name
    n_explicit = len(explicit_names) if explicit_names is not None else 0
    first_explicit = len(jaxpr.invars) - n_explicit
    bases = []
    for i, v in enumerate(jaxpr.invars):
        dim_name = getattr(v.dim, "name", None) if v.dim is not None else None
        given = explicit_names[i - first_explicit] if i >= first_explicit else None
        bases.append(c_identifier(given or dim_name or encode_name(i) + getattr(v, "suffix", ""), fallback=f"arg{i}"))
    return unique_names(bases, {"out", "status"})
