"""`sprue compile`: one input file -> `lib<name>.so` + `<name>.h`, and any intermediate stage.

The stages are the pipeline's own (lowering/pipeline.py) plus LLVM codegen and linking; this
module runs them one by one (rather than backend.build_shared_library) so that it can time each,
write any of them out, and give the kernel's raw MLIR function internal linkage: the library then
exports only `_mlir_ciface_<name>`, and the header's C wrapper `<name>()` can take that name.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from sprue.api.compile_cache import build_folder

from sprue.tools.inputs import Kernel, kernel_from_jaxpr, kernel_name, read_kernel

# --emit kind -> file name (for kernel `k`). Stage kinds name the text after that pipeline stage.
EMIT_FILES: dict[str, str] = {
    "jaxpr": "{name}.jaxpr",
    "stablehlo": "{name}.stablehlo.mlir",
    "legalized": "{name}.legalized.mlir",
    "linalg": "{name}.linalg.mlir",
    "bufferized": "{name}.bufferized.mlir",
    "loops": "{name}.loops.mlir",
    "llvm-mlir": "{name}.llvm.mlir",
    "llvm-ir": "{name}.ll",          # after LLVM's optimizer: what the object holds
    "asm": "{name}.s",
    "obj": "{name}.o",
    "a": "lib{name}.a",
    "so": "lib{name}.so",
    "h": "{name}.h",
}
# Pipeline stage names as --emit spells them.
_STAGE_KINDS = {"legalized": "legalized", "linalg": "linalg", "bufferized": "bufferized", "loops": "loops",
                "llvm": "llvm-mlir"}


@dataclass
class Options:
    input: Path
    out_dir: Path
    name: str | None = None
    emit: set[str] = field(default_factory=set)
    opt_level: int = 3
    target_cpu: str = "host"
    verbose: bool = False
    target_features: str = ""     # "+avx2,-fma": LLVM features on top of the CPU's


@dataclass
class Timer:
    """Wall time per stage, printed as each finishes when `report` is set."""
    report: Callable[[str], None] | None = None
    stages: list[tuple[str, float]] = field(default_factory=list)
    _last: float = field(default_factory=time.perf_counter)

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.stages.append((stage, now - self._last))
        if self.report:
            self.report(f"  {stage:<12} {1000 * (now - self._last):8.1f} ms")
        self._last = now


def compile_file(opts: Options, log: Callable[[str], None] | None = None) -> dict[str, Path]:
    """Compiles opts.input; returns {kind: path} of every file written."""
    from sprue.lowering.backend import check_codegen_options
    check_codegen_options(opts.opt_level, opts.target_cpu, opts.target_features)
    timer = Timer(log if opts.verbose else None)
    name = kernel_name(opts.input, opts.name)
    kernel = read_kernel(opts.input, name)
    timer.lap("read+lower" if kernel.closed_jaxpr is not None else "read")
    return build_kernel(kernel, opts, timer)


def compile_jaxpr(closed_jaxpr, opts: Options, log: Callable[[str], None] | None = None) -> dict[str, Path]:
    """Like compile_file for a ClosedJaxpr in memory (opts.input only names its source)."""
    from sprue.lowering.backend import check_codegen_options
    check_codegen_options(opts.opt_level, opts.target_cpu, opts.target_features)
    timer = Timer(log if opts.verbose else None)
    kernel = kernel_from_jaxpr(closed_jaxpr, kernel_name(opts.input, opts.name), opts.input)
    timer.lap("lower")
    return build_kernel(kernel, opts, timer)


def build_kernel(kernel: Kernel, opts: Options, timer: Timer) -> dict[str, Path]:
    from sprue.lowering.backend import codegen
    from sprue.lowering.pipeline import lower_to_llvm_ir
    out = opts.out_dir
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}

    def write(kind: str, data: str | bytes) -> None:
        path = out / EMIT_FILES[kind].format(name=kernel.name)
        path.write_bytes(data) if isinstance(data, bytes) else path.write_text(data)
        written[kind] = path

    if "jaxpr" in opts.emit:
        if kernel.closed_jaxpr is None:
            raise ValueError("--emit jaxpr needs a jaxpr input (this input is StableHLO)")
        write("jaxpr", str(kernel.closed_jaxpr) + "\n")
    if "stablehlo" in opts.emit:
        write("stablehlo", kernel.stablehlo)

    def dump(stage: str, text: str) -> None:
        timer.lap(stage)
        kind = _STAGE_KINDS.get(stage)
        if kind in opts.emit:
            write(kind, text)

    llvm_ir = lower_to_llvm_ir(kernel.stablehlo, dump=dump)
    timer.lap("translate")
    result = codegen(llvm_ir, opt_level=opts.opt_level, cpu=opts.target_cpu, features=opts.target_features,
                     internal=[kernel.name], asm="asm" in opts.emit)
    timer.lap("codegen")
    if "llvm-ir" in opts.emit:
        write("llvm-ir", result.optimized_ir)
    if result.asm is not None:
        write("asm", result.asm)
    with tempfile.TemporaryDirectory(prefix="link-", dir=build_folder("cli")) as tmp:
        obj = Path(tmp) / f"{kernel.name}.o"
        obj.write_bytes(result.obj)
        if "obj" in opts.emit:
            write("obj", result.obj)
        extra = _runtime_sources(llvm_ir, Path(tmp), kernel.name)
        _link(obj, extra, out, kernel.name, written, static="a" in opts.emit)
    timer.lap("link")
    write("h", header_text(kernel))
    timer.lap("header")
    return written


def _runtime_sources(llvm_ir: str, directory: Path, name: str) -> list[Path]:
    from sprue.lowering.backend import _runtime_sources as sources
    return sources(llvm_ir, directory, name)


def _link(obj: Path, extra: list[Path], out: Path, name: str, written: dict[str, Path], static: bool) -> None:
    from sprue.lowering.backend import link_shared
    so = out / f"lib{name}.so"
    partial = out / f"lib{name}.so.partial"
    try:   # link beside the target, then rename: a mapped library is replaced, never rewritten
        link_shared(obj, partial, extra)
        os.replace(partial, so)
    finally:
        partial.unlink(missing_ok=True)
    written["so"] = so
    if static:
        written["a"] = _archive(obj, extra, out / f"lib{name}.a")


def _archive(obj: Path, extra: list[Path], path: Path) -> Path:
    """A static library: the kernel's object plus the compiled runtime sources, if any."""
    from sprue.lowering.backend import LinkError, find_c_compiler
    members = [obj]
    for src in extra:
        member = src.with_suffix(".o")
        _run(find_c_compiler() + ["-c", "-fPIC", "-O2", "-o", str(member), str(src)], LinkError)
        members.append(member)
    path.unlink(missing_ok=True)   # `ar r` would add to an old archive's members
    _run(["ar", "rcs", str(path), *map(str, members)], LinkError)
    return path


def _run(cmd: list[str], error: type[Exception]) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError as err:   # no `ar` (binutils) on PATH
        raise error(f"{cmd[0]} is not installed: {err}") from err
    if proc.returncode != 0:
        raise error(f"{shlex.join(cmd)} failed (exit {proc.returncode}): {proc.stderr.strip()}")


def header_text(kernel: Kernel) -> str:
    """The kernel's C header; its `_result_shapes` comes from the signature's shape function (computed
    from the jaxpr; for StableHLO input, known only when every result shape is static)."""
    from sprue.runtime.header import HeaderSpec, c_header
    sig = kernel.signature
    if sig.shape_function is None:
        if kernel.closed_jaxpr is not None:
            from sprue.api.shape_functions import shape_function_of
            sig = sig.with_shape_function(shape_function_of(kernel.closed_jaxpr))
        else:
            sig = sig.with_shape_function(sig.result_shape_function())
    # a kernel lowered from a jaxpr checks its descriptors' sizes itself (lowering/rules_checks.py);
    # for StableHLO input the header's wrapper checks the static ones
    return c_header(HeaderSpec(kernel.name, sig, kernel.arg_names, source=kernel.source.name,
                               kernel_checks_sizes=kernel.closed_jaxpr is not None))
