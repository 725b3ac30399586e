"""`sprue compile`: one input file -> `lib<name>.so` + `<name>.h`, and any intermediate stage.

The stages are the pipeline's own (lowering/pipeline.py) plus LLVM codegen and linking, built by
the compile driver (frontend/api/driver.py write_library) as every compilation is; this module
watches each stage as it ends, to time it and write it out. The kernel's raw MLIR function gets
internal linkage: the library exports only `_mlir_ciface_<name>`, and the header's C wrapper
`<name>()` can take that name.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from sprue.api import driver
from sprue.api.shape_functions import shape_function_of
from sprue.runtime.header import HeaderSpec, c_header
from sprue.runtime.kernel_signature import is_row_name
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
    into: bool = True             # a jaxpr's destination-passing entry too (the header's true `_into`)
    debug_print: bool = True      # a jaxpr's sprue.debug.print calls print (else they are left out)


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
    driver.check_build_options(opts.opt_level, opts.target_cpu, opts.target_features)
    timer = Timer(log if opts.verbose else None)
    name = kernel_name(opts.input, opts.name)
    kernel = read_kernel(opts.input, name, into=opts.into, debug_print=opts.debug_print)
    timer.lap("read+lower" if kernel.closed_jaxpr is not None else "read")
    return build_kernel(kernel, opts, timer)


def compile_jaxpr(closed_jaxpr, opts: Options, log: Callable[[str], None] | None = None) -> dict[str, Path]:
    """Like compile_file for a ClosedJaxpr in memory (opts.input only names its source)."""
    driver.check_build_options(opts.opt_level, opts.target_cpu, opts.target_features)
    timer = Timer(log if opts.verbose else None)
    kernel = kernel_from_jaxpr(closed_jaxpr, kernel_name(opts.input, opts.name), opts.input, into=opts.into,
                               debug_print=opts.debug_print)
    timer.lap("lower")
    return build_kernel(kernel, opts, timer)


def build_kernel(kernel: Kernel, opts: Options, timer: Timer) -> dict[str, Path]:
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

    def on_stage(stage: str, what) -> None:
        if stage == "codegen":   # what: the optimized IR, the object and, when asked, assembly
            if "llvm-ir" in opts.emit:
                write("llvm-ir", what.optimized_ir)
            if what.asm is not None:
                write("asm", what.asm)
            if "obj" in opts.emit:
                write("obj", what.object_file(out))   # (kernels and glue in one: lowering/module_split.py)
        elif _STAGE_KINDS.get(stage) in opts.emit:
            write(_STAGE_KINDS[stage], what)
        timer.lap(stage)

    static = out / EMIT_FILES["a"].format(name=kernel.name) if "a" in opts.emit else None
    written["so"] = driver.write_library(
        kernel.stablehlo, out / EMIT_FILES["so"].format(name=kernel.name), kernel.name, opt_level=opts.opt_level,
        cpu=opts.target_cpu, features=opts.target_features, archive=static, asm="asm" in opts.emit,
        on_stage=on_stage, into=kernel.into)
    if static is not None:
        written["a"] = static
    write("h", header_text(kernel))
    timer.lap("header")
    return written


def header_text(kernel: Kernel) -> str:
    """The kernel's C header; its `_result_shapes` comes from the signature's shape function (computed
    from the jaxpr; for StableHLO input, known only when every result shape is static)."""
    sig = kernel.signature
    if sig.shape_function is None:
        if kernel.closed_jaxpr is not None:
            sig = sig.with_shape_function(shape_function_of(kernel.closed_jaxpr))
        else:
            sig = sig.with_shape_function(sig.result_shape_function())
    # a kernel lowered from a jaxpr checks its descriptors' sizes itself (lowering/rules_checks.py);
    # for StableHLO input the header's wrapper checks the static ones
    # a size named `*b` or `...x` is a row (sprue.f64["*b", "n"]): the header takes its rank and sizes
    rows = [] if kernel.closed_jaxpr is None else [
        i for i, v in enumerate(kernel.closed_jaxpr.jaxpr.invars) if v.dim is not None and is_row_name(v.dim.name)]
    return c_header(HeaderSpec(kernel.name, sig, kernel.arg_names, source=kernel.source.name,
                               kernel_checks_sizes=kernel.closed_jaxpr is not None, into_entry=kernel.into is not None,
                               extra_checks=[a.c_check(kernel.arg_names) for a in kernel.assertions], rows=rows,
                               arg_types=None if kernel.closed_jaxpr is None else [
                                   v.aval.str_short() for v in kernel.closed_jaxpr.jaxpr.invars],
                               result_types=None if kernel.closed_jaxpr is None else [
                                   v.aval.str_short() for v in kernel.closed_jaxpr.jaxpr.outvars],
                               notes=_boundary_notes(kernel)))


def _boundary_notes(kernel: Kernel) -> list[str]:
    """What some arguments and results of a JAX-printed jaxpr are beyond their C types (sprue.load's rules)."""
    notes = []
    if kernel.constvars:
        notes += [f"{', '.join(kernel.constvars)}: the jaxpr's constvars, whose values JAX's printer drops; pass the",
                  "ClosedJaxpr's consts there (in order), as jax.core.eval_jaxpr(jaxpr, consts, *args) takes them,",
                  "then those of the jaxprs it calls, if any (their ClosedJaxprs' consts, in the text's order)."]
    if kernel.bf16_arguments or kernel.bf16_results:
        which = [*kernel.bf16_arguments, *(f"result{k}" for k in kernel.bf16_results)]
        notes.append(f"{', '.join(which)}: bfloat16, passed as its bits (uint16: the top half of its float32).")
    return notes
