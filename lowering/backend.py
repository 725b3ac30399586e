"""StableHLO -> LLVM IR (pipeline.py) -> object (llvmlite, O3, host CPU) -> shared library (system cc).

    build_shared_library(stablehlo_text, out_dir)  the whole way, -> <name>.so: the one build every
                                                  entry point uses (frontend/api/driver.py)
    codegen(llvm_ir) / emit_object(llvm_ir)       -> optimized IR, object file bytes
    link_shared(obj_path, so_path)                -> runs `$CC -shared`

The library exports `_mlir_ciface_main` (for a function named `main`): its
first argument points at the result descriptor (a struct of descriptors when
there are several results), then one pointer per argument descriptor.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import itertools
import os
import re
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import llvmlite.binding as llvm
import numpy as np

from sprue.base import forks, timing
from sprue.base.errors import CompileError, SprueValueError
from sprue.base.timing import step
from sprue.lowering import llvm_threads, matmul_library_build
from sprue.lowering import pipeline as _pipeline
from sprue.lowering.allocation import add_entry_wrappers, check_allocations, check_stack
from sprue.lowering.c_toolchain import (  # noqa: F401 (_kept_object and its kin, _MEMREF_COPY_C: tests)
    _MEMREF_COPY_C,
    CompilerNotFoundError,
    LinkError,
    _keep_object,
    _kept_object,
    _kept_object_path,
    _runtime_object_meanwhile,
    _runtime_sources,
    find_c_compiler,
    link_shared,
    relocatable_object,
    static_library,
)
from sprue.lowering.codegen_levels import glue_functions
from sprue.lowering.masked_stores import keep_stores_unmasked
from sprue.lowering.module_split import Split, split_module
from sprue.lowering.pipeline import STAGE_NAMES, LoweringError, lower_to_llvm_ir
from sprue.lowering.targets import GENERIC_CPU, HOST_CPU, TargetOptionError, check_target, machine_cpu_and_features
from sprue.lowering.vector_log import VECTOR_LOG_NAMES, define_log, has_vector_log
from sprue.lowering.vector_math import (  # noqa: F401 (_libmvec_has: tests)
    LIBMVEC,
    _libmvec_available,
    _libmvec_has,
    declare_vector_variants,
    has_avx512,
    use_vector_math,
)


def _failure_dir(out: Path, keep_intermediate: bool) -> Path:
    """Where the IR of a failed compilation is saved: the kept-intermediates folder, or a folder
    that outlives the process (temporary build folders are deleted)."""
    if keep_intermediate:
        return out
    d = Path(tempfile.gettempdir()) / "sprue-failed"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _save_failing_ir(err: CompileError, text: str | None, *, out: Path, name: str, keep: bool, suffix: str,
                     save: bool = True) -> None:
    """Save `text` (the IR the failing stage was working on) and name the file in err's message."""
    if not text or not save:
        return
    d = _failure_dir(out, keep)
    path = d / f"{name}.failed-{err.stage}-{os.getpid()}-{next(_failures)}{suffix}"
    path.write_text(text)
    err.ir_path = str(path)
    err.args = (f"{err.args[0] if err.args else ''}\nthe failing IR is saved in {path}", *err.args[1:])


_failures = itertools.count()


# llvmlite shares one LLVM context per process; parsing and codegen are
# serialized behind this lock, and initialization happens once.
_llvm_lock = threading.RLock()


# os.fork() copies only the calling thread: had another thread been in LLVM (llvmlite's one global
# context, the target machines) or registering MLIR's passes, the child would inherit their locks
# held for ever and their state half changed. So the fork waits for the section in progress to end
# and both processes go on with the locks free (reentrant: a fork from inside a section still works).
# llvmlite's own lock around every call into LLVM (binding/ffi.py _LLVMLock, an RLock) is taken
# outside ours too, by the finalizers of llvmlite objects, and llvmlite does not see forks.
_LLVMLITE_LOCK = llvm_threads.llvmlite_lock()   # the RLock inside _LLVMLock


def _before_fork() -> None:
    forks.loading.acquire()   # first: a thread importing the compiler may take the locks below
    _pipeline._register_lock.acquire()
    _llvm_lock.acquire()
    if _LLVMLITE_LOCK is not None:
        _LLVMLITE_LOCK.acquire()


def _after_fork() -> None:
    if _LLVMLITE_LOCK is not None:
        _LLVMLITE_LOCK.release()
    _llvm_lock.release()
    _pipeline._register_lock.release()
    forks.loading.release()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork, after_in_child=_after_fork)
# One target machine per (cpu, features, opt level, slot): creating one is cheap but not free, and
# most processes only ever use the default (host CPU, O3). A slot is a thread of llvm_threads.py's
# sections: LLVM's target machines are not shared between threads compiling at once.
_target_machines: dict[tuple[str, str, int, int], llvm.TargetMachine] = {}


def _target_machine(cpu: str = HOST_CPU, opt_level: int = 3, features: str = "", slot: int = 0) -> llvm.TargetMachine:
    """Call with _llvm_lock held. `cpu`: "host" (this machine's CPU and features), "generic"
    (the baseline of the target architecture: runs on any CPU of it) or an LLVM CPU name;
    `features`: "+avx2,-fma" (applied after the CPU's own). Both are checked first (targets.py:
    LLVM ends the process on a target it cannot generate code for; once checked, a set lookup)."""
    key = (cpu, features, opt_level, slot)
    if key not in _target_machines:
        check_target(cpu, features)
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_default_triple()
        name, flags = machine_cpu_and_features(cpu, features)
        _target_machines[key] = target.create_target_machine(
            cpu=name, features=flags, opt=opt_level, reloc="pic", codemodel="default")
    return _target_machines[key]


# MLIR's LLVM is newer than llvmlite's: it prints special floats as `+inf`,
# `-qnan`, `+nan(0x..)`, `+snan(0x..)`, which llvmlite's parser rejects.
# They are rewritten to the hex forms every LLVM reads.
_SPECIAL_FLOAT = re.compile(r'(?<![\w.%@"$])([+-])(inf|qnan|snan\((0x[0-9a-fA-F]+)\)|nan\((0x[0-9a-fA-F]+)\))')
_FLOAT_TYPE = re.compile(r"\b(half|bfloat|float|double)\b")
# type -> (mantissa bits, exponent bits, hex prefix, width of the hex form)
_FLOAT_LAYOUT = {"half": (10, 5, "0xH", 4), "bfloat": (7, 8, "0xR", 4),
                 "float": (23, 8, "0x", 16), "double": (52, 11, "0x", 16)}


def _special_float_hex(ftype: str, m: re.Match) -> str:
    mant_bits, exp_bits, prefix, digits = _FLOAT_LAYOUT[ftype]
    sign, kind = m.group(1) == "-", m.group(2)
    quiet = 1 << (mant_bits - 1)
    payload = int(m.group(3) or m.group(4) or "0", 16)
    mantissa = {"inf": 0, "qnan": quiet}.get(kind, payload if kind.startswith("snan") else quiet | payload)
    if ftype == "float":     # float literals are written as the equal double
        mant_bits, exp_bits, mantissa = 52, 11, mantissa << 29
    bits = (int(sign) << (mant_bits + exp_bits)) | (((1 << exp_bits) - 1) << mant_bits) | mantissa
    return f"{prefix}{bits:0{digits}X}"


# LLVM 22 also writes exact bit patterns as `f0x<bits of the type>` (8 hex digits for float);
# older parsers read `0x<16 digits>` holding the value as a double (for float too), `0xH` for half.
_BITS_FLOAT = re.compile(r"(?<![\w.%@\"$])f0x([0-9a-fA-F]+)\b")


def _bits_float_hex(ftype: str, m: re.Match) -> str:
    bits = int(m.group(1), 16)
    if ftype == "double":
        return f"0x{bits:016X}"
    if ftype == "float":
        as_double = np.array(bits, np.uint32).view(np.float32).astype(np.float64).view(np.uint64)
        return f"0x{int(as_double):016X}"
    if ftype == "half":
        return f"0xH{bits:04X}"
    return f"0xR{bits:04X}"


# LLVM 22 prints a float (f32) constant as the shortest decimal that round-trips in f32, e.g.
# `float 1.234500e+00`; older parsers demand a decimal exactly representable in the type. Such
# literals are rewritten to the exact hex form (only those typed float or half).
_DECIMAL_FLOAT = re.compile(r"(?<![\w.%@\"$])([-+]?\d+\.\d+e[-+]\d+)\b")


def _decimal_float_hex(ftype: str, m: re.Match) -> str:
    if ftype == "float":
        return f"0x{int(np.array(np.float32(m.group(1)), np.float64).view(np.uint64)):016X}"
    if ftype == "half":
        return f"0xH{int(np.array(np.float16(m.group(1))).view(np.uint16)):04X}"
    return m.group(0)


def _needs_fix(text: str) -> bool:
    # substring tests first: most lines have none of these, and three regex searches on each of a
    # big module's lines cost more than the rest of preparing its text
    special = ("inf" in text or "nan" in text) and _SPECIAL_FLOAT.search(text)
    return bool(special or "f0x" in text and _BITS_FLOAT.search(text)
                or ("float " in text or "half " in text) and ("e+" in text or "e-" in text) and _DECIMAL_FLOAT.search(text))


def llvmlite_compatible(llvm_ir: str) -> str:
    """Rewrites special and bit-pattern float literals to the hex forms llvmlite reads; the type
    is the last float type named before the literal on its line (LLVM IR always writes an
    operand's type, or the instruction's, before the operand)."""
    if not _needs_fix(llvm_ir):
        return llvm_ir

    def fix_line(line: str) -> str:
        def typed(convert):
            # the float types named on the line, by position, found once: a constant array is one
            # line of thousands of literals (a search back from each was quadratic: 2 s for 16K)
            found = [(t.start(), t.group(1)) for t in _FLOAT_TYPE.finditer(line)]
            starts = [p for p, _ in found]

            def repl(m: re.Match) -> str:
                k = bisect.bisect_left(starts, m.start())
                if k == 0:
                    raise ValueError(f"cannot type the float literal {m.group(0)!r} in: {line.strip()}")
                return convert(found[k - 1][1], m)
            return repl
        line = _SPECIAL_FLOAT.sub(typed(_special_float_hex), line)
        line = _BITS_FLOAT.sub(typed(_bits_float_hex), line)
        return _DECIMAL_FLOAT.sub(typed(_decimal_float_hex), line)
    return "\n".join(fix_line(line) if _needs_fix(line) else line for line in llvm_ir.split("\n"))


@dataclass(frozen=True)
class Codegen:
    """What LLVM made of one module: the optimized IR, the object file and, when asked, assembly;
    with the module cut in several (module_split.py), the others' objects too (their IR and
    assembly follow the first's in `optimized_ir` and `asm`)."""
    optimized_ir: str
    obj: bytes
    asm: str | None = None
    more_objects: tuple[bytes, ...] = ()

    @property
    def objects(self) -> list[bytes]:
        return [self.obj, *self.more_objects]

    def object_file(self, work: Path) -> bytes:
        """All of it as one relocatable object (partial-linked in `work` when there are two)."""
        return relocatable_object(self.objects, work)


def check_codegen_options(opt_level: int, cpu: str, features: str = "") -> None:
    """Raises a ValueError (SprueValueError) for an optimization level outside 0-3, and
    targets.TargetOptionError for a CPU or features LLVM does not know or cannot generate code
    for on this triple (its message names the closest valid names)."""
    if isinstance(opt_level, bool) or opt_level not in (0, 1, 2, 3):
        raise SprueValueError(f"optimization level must be 0, 1, 2 or 3, got {opt_level!r}")
    check_target(cpu, features)


# The glue's module (module_split.py): its always_inline functions inlined and SROA (GLUE_OPT_LEVEL,
# below O1: its straight-line code of calls, loads and stores has nothing more to gain; O1's
# InstCombine alone took 46 ms of a 300-layer training step's glue), generated by an O0 target
# machine. (It has no aggregate stores to take apart: entry_results.py stores results member by
# member.)
GLUE_OPT_LEVEL = -1   # not an -O level: _optimize_and_emit's pipeline for glue
GLUE_CODEGEN_LEVEL = 0


def codegen(llvm_ir: str, *, opt_level: int = 3, cpu: str = HOST_CPU, internal: Sequence[str] = (),
            asm: bool = False, features: str = "", split: bool = True, entry_wrappers: bool = True) -> Codegen:
    """Optimizes the module at `opt_level` and emits an object for `cpu` with `features` (see
    _target_machine). With `split` (and opt_level 2 or 3), a module with enough glue or enough
    noinline kernels is cut in several (module_split.py), compiled at once on llvm_threads.py's
    threads, one object each.

    `internal` names functions to give internal linkage before optimizing: the library then does
    not export them, calls to them cannot be interposed by a same-named symbol of the host program,
    and O3 may inline them into their (exported) callers. Without `entry_wrappers` the C interfaces
    stay MLIR's, unchecked: a routine that a kernel calls (matmul_library.py), whose failed
    allocation ends the kernel's call."""
    check_codegen_options(opt_level, cpu, features)   # before the lock: it may ask a child process
    # (a profile's per-pass timings are LLVM's process-wide timers: its modules one at a time)
    threads = 1 if timing.enabled() else llvm_threads.workers()
    with step("LLVM: prepare the IR text"):
        llvm_ir = llvmlite_compatible(llvm_ir)
        if entry_wrappers:
            llvm_ir = add_entry_wrappers(llvm_ir)   # checked allocation: allocation.py
        llvm_ir = declare_vector_variants(llvm_ir, cpu, features)   # libm calls the vectorizer may widen
        parts = split_module(llvm_ir, kernel_parts=threads) if split and opt_level >= 2 else None
    with _llvm_lock:
        if parts is None:
            text, obj, asm_text = _optimize_and_emit(llvm_ir, opt_level, opt_level, cpu, features, internal, asm)
            return Codegen(text, obj, asm_text)
        return _codegen_parts(parts, opt_level, cpu, features, [n for n in internal if n not in parts.cross], asm,
                              threads)


def _codegen_parts(parts: Split, opt_level: int, cpu: str, features: str, internal: Sequence[str], asm: bool,
                   threads: int) -> Codegen:
    """codegen of a module cut in several (call with _llvm_lock held): the kernels' modules at
    `opt_level`, the glue's at its own levels, on up to `threads` threads. With more than one, the
    process-wide options _optimize_and_emit sets for each module's size are set once around them
    all, from the longest block of the kernels' text before O3 (one at a time, from each module's
    text: before O3 for the pipeline's, after it for the code generator's)."""
    modules = [*parts.kernels, *([parts.glue] if parts.glue else [])]
    levels = [(opt_level, opt_level)] * len(parts.kernels) + [(GLUE_OPT_LEVEL, GLUE_CODEGEN_LEVEL)] * bool(parts.glue)
    # the glue first, the last (lighter) part of the kernels after it on the same thread (module_split.py)
    order = list(range(len(modules)))
    if parts.glue and threads > 1 and len(parts.kernels) > 1:
        order = [len(modules) - 1, *range(len(modules) - 1)]
    for slot in range(min(threads, len(modules))):   # (made here, not by two threads at once)
        for codegen_level in {level for _, level in levels}:
            _target_machine(cpu, codegen_level, features, slot)

    def compile_one(i: int, context, slot: int) -> tuple[str, bytes, str | None]:
        with step("LLVM: glue" if levels[i][0] == GLUE_OPT_LEVEL else "LLVM: kernels"):
            return _optimize_and_emit(modules[i], *levels[i], cpu, features, internal, asm, context=context,
                                      slot=slot, options=threads == 1)

    longest = longest_block("\n".join(parts.kernels)) if threads > 1 else 0
    with (_pipeline_options(longest) if threads > 1 else contextlib.nullcontext()), \
            (_codegen_options(longest) if threads > 1 else contextlib.nullcontext()):
        done = llvm_threads.run(order, compile_one, threads)
    done = [done[order.index(i)] for i in range(len(modules))]
    notes = ["\n; -- the glue's module (module_split.py) --\n" if level == GLUE_OPT_LEVEL
             else "\n; -- another module of the kernels (module_split.py) --\n" for level, _ in levels[1:]]
    text = done[0][0] + "".join(note + d[0] for note, d in zip(notes, done[1:]))
    asm_text = done[0][2] + "".join(note + d[2] for note, d in zip(notes, done[1:])) if asm else None
    return Codegen(text, done[0][1], asm_text, tuple(d[1] for d in done[1:]))


def _optimize_and_emit(llvm_ir: str, opt_level: int, codegen_level: int, cpu: str, features: str,
                       internal: Sequence[str], asm: bool, *, context=None, slot: int = 0,
                       options: bool = True) -> tuple[str, bytes, str | None]:
    """One module through LLVM (call with _llvm_lock held): its optimized text, object and
    assembly; parsed into `context` (the global one by default), with the target machine of
    `slot` (llvm_threads.py). `options`: set the process-wide LLVM options the module's size calls
    for (_pipeline_options, _codegen_options) around its passes; not on a thread of a section,
    whose options its caller sets for all its modules."""
    tm = _target_machine(cpu, codegen_level, features, slot)
    llvm_ir = define_log(llvm_ir, has_avx512(cpu, features))   # (its module's calls, once the CPU is known)
    with step("LLVM: parse"):
        mod = llvm.parse_assembly(llvm_ir, context=context)
        mod.verify()
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    defined = {f.name for f in mod.functions}
    for name in internal:   # (an entry function may have become its C interface: entry_arguments.py)
        if name in defined:
            mod.get_function(name).linkage = "internal"
    with _time_passes():   # (its timers attach to the pass builder made inside)
        with step("LLVM: optimize (glue)" if opt_level == GLUE_OPT_LEVEL else f"LLVM: optimize (O{opt_level})"), \
                _pipeline_options(longest_block(llvm_ir)) if options else contextlib.nullcontext():
            tuning = llvm.create_pipeline_tuning_options(speed_level=max(opt_level, 0))
            builder = llvm.create_pass_builder(tm, tuning)
            _inline_entry_points(mod, builder)
            if opt_level == GLUE_OPT_LEVEL:
                passes = llvm.create_new_module_pass_manager()
                passes.add_sroa_pass()
            else:
                passes = builder.getModulePassManager()
            passes.run(mod, builder)
            if opt_level != GLUE_OPT_LEVEL and has_vector_log(llvm_ir):
                _inline_vector_log(mod, builder)
        with step("LLVM: checks, vector math"):
            check_allocations(mod)   # after the optimizer, which must see the C library's own allocator
            text = llvm_threads.module_text(mod)
            check_stack(text)
            rewritten = keep_stores_unmasked(use_vector_math(text, cpu, features))
            if rewritten is not text:
                text = rewritten
                mod = llvm.parse_assembly(text, context=context)
                mod.verify()
        with step("LLVM: emit the object"), \
                _codegen_options(longest_block(text)) if options else contextlib.nullcontext():
            if codegen_level > 0:
                for name in glue_functions(text):   # code that runs once per call: at O0
                    fn = mod.get_function(name)
                    fn.add_function_attribute("noinline")
                    fn.add_function_attribute("optnone")
            return text, tm.emit_object(mod), tm.emit_assembly(mod) if asm else None


def _inline_entry_points(mod, builder) -> None:
    """The always_inline functions (each entry point, into its C wrapper: pipeline.py
    _prepare_entry_points) inlined before O3, not by O3's inliner, which runs after its
    interprocedural passes: CalledValuePropagation revisits a call each time one of its arguments
    changes, merging every argument, and the wrapper's call passes 7 values per 2-D array (a
    600-layer network's 4,207): 1.95 of its 4.1 s in LLVM; 0.04 s inlined first."""
    inliner = llvm.create_new_module_pass_manager()
    inliner.add_always_inliner_pass()
    inliner.run(mod, builder)


def _inline_vector_log(mod, builder) -> None:
    """The vector log kernels the loop vectorizer called (vector_log.py) inlined, then dropped:
    they stay defined through O3 only for the vectorizer to find."""
    inliner = llvm.create_new_module_pass_manager()
    inliner.add_always_inliner_pass()
    inliner.run(mod, builder)
    for fn in mod.functions:
        if fn.name in VECTOR_LOG_NAMES:
            fn.linkage = "internal"
    dce = llvm.create_new_module_pass_manager()
    dce.add_global_dead_code_eliminate_pass()
    dce.run(mod, builder)


# LLVM's instruction schedulers (the machine scheduler before register allocation, the list
# scheduler after it) are quadratic in the length of a block between two calls. The C wrapper of
# a function with many results stores each result's descriptor (7 values for a 2-D array) in one
# such stretch: a 300-layer training step's 300 gradients, 2,100 stores, took 5.8 of the 8.3 s of
# code generation. A module with a block longer than SCHEDULE_MAX_BLOCK instructions is emitted
# unscheduled: its straight-line code has nothing to gain, and its loops (each nest its own small
# function by then: outline.py) lose little on an out-of-order core. LLVM reads both switches from
# (process-wide) options; they are restored after, to their values for every x86 and AArch64 CPU
# this runs on.
SCHEDULE_MAX_BLOCK = 2000
_LABEL = re.compile(r"^(?:[\w.$-]+|\d+):", re.M)


def longest_block(llvm_ir: str) -> int:
    """The most lines between two labels (or function starts) of LLVM IR text: the longest basic
    block's length, near enough."""
    starts = [m.start() for m in _LABEL.finditer(llvm_ir)]
    starts += [m.start() for m in re.finditer(r"^define ", llvm_ir, re.M)]
    starts.sort()
    starts.append(len(llvm_ir))
    return max((llvm_ir.count("\n", a, b) for a, b in zip(starts, starts[1:])), default=0)


@contextlib.contextmanager
def _codegen_options(longest: int):
    """Instruction scheduling off for the code generation of a module whose longest block has
    `longest` instructions, more than SCHEDULE_MAX_BLOCK (above)."""
    if longest <= SCHEDULE_MAX_BLOCK:
        yield
        return
    llvm.set_option("sprue", "-enable-misched=false")
    llvm.set_option("sprue", "-post-RA-scheduler=false")
    try:
        yield
    finally:
        llvm.set_option("sprue", "-enable-misched=true")
        llvm.set_option("sprue", "-post-RA-scheduler=true")


@contextlib.contextmanager
def _time_passes():
    """LLVM's own per-pass timings (-time-passes) into the compile profile, when one is taken: the
    optimizer's and the code generator's, which LLVM reports together after the object is emitted."""
    if not timing.enabled():
        yield
        return
    llvm.set_time_passes(True)
    try:
        yield
    finally:
        timing.note(llvm.report_and_reset_timings())
        llvm.set_time_passes(False)


# LLVM fully unrolls a loop of up to ~hundreds of small iterations early in O3, before its loop
# vectorizer runs; a convert-linalg-to-loops nest with a short static inner loop (a reduction over
# 32x32 pixels, a 30-wide convolution row) then loses its contiguous inner loop and the vectorizer
# takes the next loop out, with strided gathers (batch-norm statistics 1.6x, the CNN benchmark 3x
# slower than with the inner loop left to the vectorizer), and the unrolled copies cost compile
# time (first calls up to 3x longer). Loops of at most 16 trips are still unrolled: the small
# static loops of k-means' 16 centres or an 8-wide feature axis gain from it. LLVM reads the limit
# from its (process-wide) command-line option, so it is set for our pipeline run only and restored
# (another llvmlite user in the process, numba, keeps LLVM's default: no limit).
FULL_UNROLL_MAX_TRIPS = 16
_NO_LIMIT = 2 ** 32 - 1
# LLVM's constraint elimination (dropping comparisons implied by dominating ones) is off for our
# pipeline run, restored after like the unroll limit: it was quadratic in a function's
# comparisons (a 1,000-layer network's entry function: 460 of O3's 477 s; 100 layers 0.8 of
# 2.0 s), and the code sprue generates has few comparisons it could remove: the 21 realistic
# programs ran alike without it (in-process A/B, one core, median of 15: 0.90-1.035x).


# LLVM's dead-store elimination walks up from each store through at most DSE_WALK_LIMIT earlier
# memory writes looking for ones it overwrites (LLVM's default: 90), in a module with a block of
# more than DSE_LONG_BLOCK instructions. The entry function of a deep training step stores each
# gradient's descriptor, 7 stores per result, in one block after its last call: a 300-layer
# one's 2,100 stores cost DSE 0.65 s (a third of O3) walking through each other; with walks of
# 20 writes O3 took 0.55 s instead of 1.2-1.5 s. The realistic programs' longest blocks are under
# 200 instructions and keep LLVM's default (with 20, one of them kept a dead 64-byte memset).
DSE_LONG_BLOCK = 500
DSE_WALK_LIMIT = 20
_DSE_DEFAULT_WALK = 90


@contextlib.contextmanager
def _pipeline_options(longest: int = 0):
    """LLVM options for our pass pipeline run (the unroll limit, constraint elimination off, the
    DSE walk for a module whose longest block is `longest` instructions), set process-wide by
    LLVM and restored after."""
    llvm.set_option("sprue", f"-unroll-full-max-count={FULL_UNROLL_MAX_TRIPS}")
    llvm.set_option("sprue", "-enable-constraint-elimination=false")
    short_walks = longest > DSE_LONG_BLOCK
    if short_walks:
        llvm.set_option("sprue", f"-dse-memoryssa-walklimit={DSE_WALK_LIMIT}")
    try:
        yield
    finally:
        llvm.set_option("sprue", f"-unroll-full-max-count={_NO_LIMIT}")
        llvm.set_option("sprue", "-enable-constraint-elimination=true")
        if short_walks:
            llvm.set_option("sprue", f"-dse-memoryssa-walklimit={_DSE_DEFAULT_WALK}")


# LLVM's first optimization and code generation in a process cost ~20-40 ms more than later ones
# (its target machine, the pass builder's analyses, the instruction selector's tables, set up on
# first use). A process's first compilation has them set up on another thread while it traces,
# builds StableHLO and runs the MLIR stages (Python holding the GIL; llvmlite's calls release it),
# on a loop that the vectorizer widens around a math call, like the kernels sprue emits.
_WARM_UP_IR = """
define void @sprue_warm_up(ptr noalias %p, ptr noalias %q, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%j, %loop]
  %a = getelementptr double, ptr %p, i64 %i
  %v = load double, ptr %a
  %w = call fast double @llvm.exp.f64(double %v)
  %x = fmul fast double %w, %v
  %b = getelementptr double, ptr %q, i64 %i
  store double %x, ptr %b
  %j = add i64 %i, 1
  %c = icmp slt i64 %j, %n
  br i1 %c, label %loop, label %done
done:
  ret void
}
declare double @llvm.exp.f64(double)
"""
_warm_up: list[threading.Thread] = []
warm_up_error: list[BaseException] = []   # what the warm-up raised, if anything (the compile reports its own)


def prepare_in_background(*, opt_level: int = 3, cpu: str = HOST_CPU, features: str = "") -> None:
    """LLVM's set-up (above) for `cpu`, `features` and `opt_level`, started on another thread once
    per process, when they are valid (else the build reports them). (The runtime's C objects are
    not started earlier than the build: on two cores, two more cc processes beside the tracing and
    the MLIR stages slowed them as much as the link then waited less.)"""
    try:
        check_codegen_options(opt_level, cpu, features)
    except (ValueError, TargetOptionError):
        return
    with _llvm_lock:
        if _warm_up:
            return
        thread = threading.Thread(target=_warm_up_llvm, args=(opt_level, cpu, features), name="sprue-llvm-warm-up")
        _warm_up.append(thread)
    thread.start()   # (not a daemon: the interpreter waits for it at exit, not tearing LLVM down under it)


# The warm-up takes the GIL back after each of its ~40 calls into LLVM, and the main thread, busy
# in the MLIR stages' Python meanwhile, gives it up only every switch interval (5 ms by default):
# the warm-up (13 ms alone) was still running when the first module reached LLVM, which waited
# ~6 ms for it (a 30-layer network; a small function's first call 74 -> 67 ms without the wait).
# Meanwhile the interval is WARM_UP_SWITCH_INTERVAL: the GIL's holder yields to it sooner.
WARM_UP_SWITCH_INTERVAL = 0.0005


def _warm_up_llvm(opt_level: int, cpu: str, features: str) -> None:
    interval = sys.getswitchinterval()
    sys.setswitchinterval(min(interval, WARM_UP_SWITCH_INTERVAL))
    try:
        with _llvm_lock:   # the way every module goes (its steps are not timed: no profile on this thread)
            _optimize_and_emit(_WARM_UP_IR, opt_level, opt_level, cpu, features, (), False)
    except Exception as exc:   # a CPU LLVM cannot target, ...: the compilation reports it, with its context
        warm_up_error.append(exc)
    finally:
        sys.setswitchinterval(interval)


def emit_object(llvm_ir: str) -> bytes:
    """LLVM IR text -> native object file bytes (O3, tuned for this CPU): one object, the glue not
    split off (module_split.py)."""
    return codegen(llvm_ir, split=False).obj


Stage = Callable[[str, object], None]   # on_stage(stage, what): see build_shared_library


def build_shared_library(stablehlo_text: str, out_dir: str | os.PathLike, name: str = "main",
                         keep_intermediate: bool = False, *, opt_level: int = 3, cpu: str = HOST_CPU,
                         features: str = "", library: str | os.PathLike | None = None, internal: Sequence[str] = (),
                         asm: bool = False, archive: str | os.PathLike | None = None, on_stage: Stage | None = None,
                         save_failing_ir: bool = True, meanwhile: Callable[[], None] | None = None) -> Path:
    """StableHLO text -> `<out_dir>/<name>.so` (or `library`), for `cpu` with `features` (checked
    first: see check_codegen_options): the pipeline, LLVM's optimizer and code generator, and the
    link with sprue's runtime. Every entry point builds here (frontend/api/driver.py).

    `out_dir` is built in (a folder of its own, within a cache staging folder or a build root: both
    deleted after a kill). `internal` and `asm` are codegen's; `archive`: also a static library
    there (the kernel's object and the runtime's). `on_stage(stage, what)` is called as each stage
    ends: after each of the pipeline's STAGE_NAMES with its text, then "translate" with the LLVM
    IR, "codegen" with the Codegen, "link" with the library's path.

    With keep_intermediate, also writes the input as `<name>.00_stablehlo.mlir`,
    `<name>.NN_<stage>.mlir` after every stage (NN from 01), `<name>.ll` (as translated), `<name>.opt.ll` (after O3) and
    `<name>.o` into out_dir. The IR a failing stage was working on is saved to a file its error
    names, unless save_failing_ir is False."""
    check_codegen_options(opt_level, cpu, features)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    so_path = Path(library) if library is not None else out / f"{name}.so"
    report = on_stage or _ignore
    failed = functools.partial(_save_failing_ir, out=out, name=name, keep=keep_intermediate,
                               save=save_failing_ir)
    # inside out_dir, not the system temp folder: a build killed midway leaves nothing there
    with tempfile.TemporaryDirectory(prefix=f".{name}-work-", dir=out) as tmp, _runtime_object_meanwhile(out):
        work = out if keep_intermediate else Path(tmp)
        with step("MLIR"):
            llvm_ir = _lower(stablehlo_text, work, name, keep_intermediate, on_stage, failed)
        report("translate", llvm_ir)
        try:
            with step("LLVM"):
                result = codegen(llvm_ir, opt_level=opt_level, cpu=cpu, features=features, internal=internal, asm=asm)
        except (RuntimeError, ValueError) as exc:   # llvmlite reports LLVM's failures as these
            err = CompileError(f"LLVM failed to optimize or emit the kernel {name}: {exc}", stage="llvm")
            failed(err, llvm_ir, suffix=".ll")
            raise err from exc
        report("codegen", result)
        obj_path = work / f"{name}.o"
        obj_path.write_bytes(result.obj)
        more = [work / f"{name}.{i + 1}.o" for i in range(len(result.more_objects))]   # (module_split.py)
        for path, data in zip(more, result.more_objects):
            path.write_bytes(data)
        if keep_intermediate:
            (work / f"{name}.ll").write_text(llvm_ir)
            (work / f"{name}.opt.ll").write_text(result.optimized_ir)
        sources = _runtime_sources(llvm_ir, work, name)
        more += matmul_library_build.objects_for(llvm_ir, work, cpu, features, codegen)   # (the routines it calls)
        try:
            with step("link"):
                _link_replacing(obj_path, so_path, sources, more, meanwhile)
        except LinkError as err:
            failed(err, result.optimized_ir, suffix=".opt.ll")
            raise
        if archive is not None:
            static_library(obj_path, sources, Path(archive), more)
        report("link", so_path)
    return so_path


def _ignore(stage: str, what: object) -> None:
    """The on_stage of a build nobody watches."""


def _lower(stablehlo_text: str, work: Path, name: str, keep: bool, on_stage: Stage | None, failed) -> str:
    """The pipeline (pipeline.py) on the module: its LLVM IR; each stage's text written (keep) and
    handed to on_stage."""
    def dump(stage: str, text: str) -> None:
        if keep:   # 00 is the input; stages follow in pipeline order
            (work / f"{name}.{STAGE_NAMES.index(stage) + 1:02d}_{stage}.mlir").write_text(text)
        if on_stage is not None:
            on_stage(stage, text)

    if keep:
        (work / f"{name}.00_stablehlo.mlir").write_text(stablehlo_text)
    try:   # (printing every stage costs time: only when someone reads them)
        return lower_to_llvm_ir(stablehlo_text, dump=dump if keep or on_stage is not None else None)
    except LoweringError as err:
        failed(err, err.ir_text or stablehlo_text, suffix=".mlir")
        raise


def _link_replacing(obj_path: Path, so_path: Path, sources: list[Path], more_objects: Sequence[Path] = (),
                    meanwhile: Callable[[], None] | None = None) -> None:
    """Link beside the target, then rename: a library another process (or this one) has mapped is
    replaced, never rewritten in place."""
    partial = so_path.with_name(so_path.name + ".partial")
    try:
        link_shared(obj_path, partial, sources, more_objects, meanwhile)
        os.replace(partial, so_path)
    finally:
        partial.unlink(missing_ok=True)


__all__ = ["Codegen", "CompilerNotFoundError", "GENERIC_CPU", "HOST_CPU", "LinkError", "build_shared_library",
           "check_codegen_options", "codegen", "emit_object", "find_c_compiler", "link_shared",
           "llvmlite_compatible", "static_library"]
