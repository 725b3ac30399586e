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

import contextlib
import functools
import hashlib
import itertools
import os
import re
import shlex
import shutil
import subprocess
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
from sprue.lowering import pipeline as _pipeline
from sprue.lowering.allocation import RUNTIME_C, add_entry_wrappers, check_allocations, check_stack, runtime_source
from sprue.lowering.masked_stores import keep_stores_unmasked
from sprue.lowering.parallel_runtime import PARALLEL_C, PARALLEL_SOURCE, parallel_source
from sprue.lowering.pipeline import STAGE_NAMES, LoweringError, lower_to_llvm_ir
from sprue.lowering.targets import GENERIC_CPU, HOST_CPU, check_target, machine_cpu_and_features
from sprue.lowering.vector_math import (  # noqa: F401 (_libmvec_has: tests)
    LIBMVEC,
    _libmvec_available,
    _libmvec_has,
    declare_vector_variants,
    use_vector_math,
)
from sprue.runtime.private_files import cache_dir, read_private, write_private


class CompilerNotFoundError(CompileError):
    """No system C compiler to link kernels with."""

    def __init__(self, message: str = ""):
        super().__init__(message, stage="link")


class LinkError(CompileError):
    """The system C compiler failed to link a kernel; carries its stderr."""

    def __init__(self, message: str = ""):
        super().__init__(message, stage="link")


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
_LLVMLITE_LOCK = getattr(getattr(getattr(llvm, "ffi", None), "lib", None), "_lock", None)
_LLVMLITE_LOCK = getattr(_LLVMLITE_LOCK, "_lock", None)   # the RLock inside _LLVMLock


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


def _after_fork_in_child() -> None:
    """Also, in the child: the runtime object's compilations under way (_c_pending) are the
    parent's processes, and _c_lock (held while waiting for one) guards Python state only."""
    global _c_lock
    _after_fork()
    _c_lock = threading.Lock()
    _c_pending.clear()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork, after_in_child=_after_fork_in_child)
# One target machine per (cpu, features, opt level): creating one is cheap but not free, and most
# processes only ever use the default (host CPU, O3).
_target_machines: dict[tuple[str, str, int], llvm.TargetMachine] = {}


def _target_machine(cpu: str = HOST_CPU, opt_level: int = 3, features: str = "") -> llvm.TargetMachine:
    """Call with _llvm_lock held. `cpu`: "host" (this machine's CPU and features), "generic"
    (the baseline of the target architecture: runs on any CPU of it) or an LLVM CPU name;
    `features`: "+avx2,-fma" (applied after the CPU's own). Both are checked first (targets.py:
    LLVM ends the process on a target it cannot generate code for; once checked, a set lookup)."""
    key = (cpu, features, opt_level)
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
            def repl(m: re.Match) -> str:
                types = _FLOAT_TYPE.findall(line, 0, m.start())
                if not types:
                    raise ValueError(f"cannot type the float literal {m.group(0)!r} in: {line.strip()}")
                return convert(types[-1], m)
            return repl
        line = _SPECIAL_FLOAT.sub(typed(_special_float_hex), line)
        line = _BITS_FLOAT.sub(typed(_bits_float_hex), line)
        return _DECIMAL_FLOAT.sub(typed(_decimal_float_hex), line)
    return "\n".join(fix_line(line) if _needs_fix(line) else line for line in llvm_ir.split("\n"))


@dataclass(frozen=True)
class Codegen:
    """What LLVM made of one module: the optimized IR, the object file and, when asked, assembly."""
    optimized_ir: str
    obj: bytes
    asm: str | None = None


def check_codegen_options(opt_level: int, cpu: str, features: str = "") -> None:
    """Raises a ValueError (SprueValueError) for an optimization level outside 0-3, and
    targets.TargetOptionError for a CPU or features LLVM does not know or cannot generate code
    for on this triple (its message names the closest valid names)."""
    if isinstance(opt_level, bool) or opt_level not in (0, 1, 2, 3):
        raise SprueValueError(f"optimization level must be 0, 1, 2 or 3, got {opt_level!r}")
    check_target(cpu, features)


def codegen(llvm_ir: str, *, opt_level: int = 3, cpu: str = HOST_CPU, internal: Sequence[str] = (),
            asm: bool = False, features: str = "") -> Codegen:
    """Optimizes the module at `opt_level` and emits an object for `cpu` with `features` (see
    _target_machine).

    `internal` names functions to give internal linkage before optimizing: the library then does
    not export them, calls to them cannot be interposed by a same-named symbol of the host program,
    and O3 may inline them into their (exported) callers."""
    check_codegen_options(opt_level, cpu, features)   # before the lock: it may ask a child process
    with step("LLVM: prepare the IR text"):
        llvm_ir = add_entry_wrappers(llvmlite_compatible(llvm_ir))   # checked allocation: allocation.py
        llvm_ir = declare_vector_variants(llvm_ir, cpu, features)   # libm calls the vectorizer may widen
    with _llvm_lock:
        tm = _target_machine(cpu, opt_level, features)
        with step("LLVM: parse"):
            mod = llvm.parse_assembly(llvm_ir)
            mod.verify()
        mod.triple = tm.triple
        mod.data_layout = str(tm.target_data)
        defined = {f.name for f in mod.functions}
        for name in internal:   # (an entry function may have become its C interface: entry_arguments.py)
            if name in defined:
                mod.get_function(name).linkage = "internal"
        with _time_passes():   # (its timers attach to the pass builder made inside)
            with step(f"LLVM: optimize (O{opt_level})"), _pipeline_options(longest_block(llvm_ir)):
                tuning = llvm.create_pipeline_tuning_options(speed_level=opt_level)
                builder = llvm.create_pass_builder(tm, tuning)
                _inline_entry_points(mod, builder)
                builder.getModulePassManager().run(mod, builder)
            with step("LLVM: checks, vector math"):
                check_allocations(mod)   # after the optimizer, which must see the C library's own allocator
                text = str(mod)
                check_stack(text)
                rewritten = keep_stores_unmasked(use_vector_math(text, cpu, features))
                if rewritten is not text:
                    text = rewritten
                    mod = llvm.parse_assembly(text)
                    mod.verify()
            with step("LLVM: emit the object"), _codegen_options(text):
                return Codegen(text, tm.emit_object(mod), tm.emit_assembly(mod) if asm else None)


def _inline_entry_points(mod, builder) -> None:
    """The always_inline functions (each entry point, into its C wrapper: pipeline.py
    _prepare_entry_points) inlined before O3, not by O3's inliner, which runs after its
    interprocedural passes: CalledValuePropagation revisits a call each time one of its arguments
    changes, merging every argument, and the wrapper's call passes 7 values per 2-D array (a
    600-layer network's 4,207): 1.95 of its 4.1 s in LLVM; 0.04 s inlined first."""
    inliner = llvm.create_new_module_pass_manager()
    inliner.add_always_inliner_pass()
    inliner.run(mod, builder)


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
def _codegen_options(llvm_ir: str):
    """Instruction scheduling off for the code generation of a module with a block longer than
    SCHEDULE_MAX_BLOCK (above)."""
    if longest_block(llvm_ir) <= SCHEDULE_MAX_BLOCK:
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


def emit_object(llvm_ir: str) -> bytes:
    """LLVM IR text -> native object file bytes (O3, tuned for this CPU)."""
    return codegen(llvm_ir).obj


_NO_COMPILER = (
    "no C compiler was found{detail}. sprue links its compiled kernels into a "
    "shared library with the system C compiler. Install one (Debian/Ubuntu: "
    "`apt-get install gcc`; Fedora: `dnf install gcc`; macOS: "
    "`xcode-select --install`) or set the CC environment variable to a C compiler.")


def find_c_compiler() -> list[str]:
    """The C compiler command: $CC (may carry flags) or `cc`."""
    cc = os.environ.get("CC", "").strip()
    words = shlex.split(cc) if cc else ["cc"]
    path = shutil.which(words[0])
    if path is None:
        detail = f" (CC={cc!r} is not an executable)" if cc else " (`cc` is not on PATH)"
        raise CompilerNotFoundError(_NO_COMPILER.format(detail=detail))
    return [path] + words[1:]


def link_shared(obj_path: str | os.PathLike, so_path: str | os.PathLike,
                extra_sources: Sequence[str | os.PathLike] = ()) -> Path:
    """Links an object (plus optional C sources) into a shared library."""
    compiler = find_c_compiler()
    objects = [_c_object(compiler, Path(src)) for src in extra_sources]
    cmd = compiler + ["-shared", "-fPIC", "-O2", "-o", str(so_path), str(obj_path), *map(str, objects), "-lm"]
    if any(str(src).endswith(PARALLEL_SOURCE) for src in extra_sources):
        cmd.append("-lpthread")   # (part of libc since glibc 2.34; a library of its own before)
    if _libmvec_available():   # only recorded as needed when the object calls it (use_vector_math)
        cmd += ["-Wl,--as-needed", f"-l:{LIBMVEC}", "-Wl,--no-as-needed"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise LinkError(f"linking {so_path} failed (exit {proc.returncode}): {shlex.join(cmd)}\n"
                        f"{proc.stderr.strip()}")
    return Path(so_path)


# The runtime's C sources are the same for every kernel: each is compiled once per process (and
# compiler), not at every link (that would add ~40 ms to every compilation), and the first time in
# the background, while the kernel is lowered (build_shared_library). (compiler, source text) ->
# the object's bytes, or the compilation under way: (process, its object file, its command).
_c_objects: dict[tuple[tuple[str, ...], str], bytes] = {}
_c_pending: dict[tuple[tuple[str, ...], str], tuple[subprocess.Popen, Path, list[str]]] = {}
_c_lock = threading.Lock()


# ... and kept in the compile cache, so that a new process does not compile it again (~130 ms of
# cc): `<cache>/runtime/<hash of the compiler's identity and the source>.o`, read only when this
# user alone may write it (a planted object would run as this user, like a planted library).
def _kept_object_path(key: tuple[tuple[str, ...], str]) -> Path | None:
    try:
        root = cache_dir()
        if root is None:
            return None
        st = os.stat(key[0][0])
        ident = repr((key, os.path.realpath(key[0][0]), st.st_size, st.st_mtime_ns)).encode()
        return Path(os.fsdecode(root)) / "runtime" / (hashlib.sha256(ident).hexdigest()[:32] + ".o")
    except (OSError, UnicodeError):
        return None


def _kept_object(key: tuple) -> bytes | None:
    path = _kept_object_path(key)
    return None if path is None else read_private(path)


def _keep_object(key: tuple, data: bytes) -> None:
    path = _kept_object_path(key)
    if path is not None:
        write_private(path, data)   # (not kept on a read-only or full disk: still used)


def _start_c_object(compiler: list[str], source: Path) -> tuple | None:
    """Starts compiling `source` (into its .o beside it) unless its object is known, kept in the
    compile cache, or under way; the key to wait for (_settle_c_object), or None."""
    key = (tuple(compiler), source.read_text())
    obj = source.with_suffix(".o")
    cmd = compiler + ["-c", "-fPIC", "-O2", "-o", str(obj), str(source)]
    with _c_lock:
        if key in _c_objects or key in _c_pending:
            return None
    kept = _kept_object(key)
    with _c_lock:
        if kept is not None:
            _c_objects.setdefault(key, kept)
            return None
        if key in _c_objects or key in _c_pending:
            return None
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        except OSError:   # no compiler, or no process: the link (synchronous) reports it
            return None
        _c_pending[key] = (proc, obj, cmd)
    return key


def _settle_c_object(key: tuple) -> bytes | None:
    """Waits for the compilation of `key` if it is under way; its object's bytes (None: it failed)."""
    with _c_lock:
        data = _c_objects.get(key)
        if data is not None or key not in _c_pending:
            return data
        proc, obj, cmd = _c_pending.pop(key)
        proc.communicate()
        if proc.returncode != 0 or not obj.is_file():
            return None
        data = _c_objects[key] = obj.read_bytes()
    _keep_object(key, data)
    return data


@contextlib.contextmanager
def _runtime_object_meanwhile(out: Path):
    """Around a build: the runtime's objects (allocation.py's, the pool's), needed at its link,
    compiled in the background meanwhile, in a folder of their own inside `out`, once per process;
    waited for on the way out (whatever the build did), before that folder is removed."""
    keys, folder = [], None
    try:
        compiler = find_c_compiler()
        texts = {RUNTIME_C: runtime_source, PARALLEL_C: parallel_source}
        with _c_lock:
            known = {k[1] for k in (*_c_objects, *_c_pending) if k[0] == tuple(compiler)}
        for text, write in texts.items():
            if text not in known:
                if folder is None:
                    folder = Path(tempfile.mkdtemp(prefix=".sprue-runtime-", dir=out))
                keys.append(_start_c_object(compiler, write(folder, "prebuild")))
    except CompilerNotFoundError:   # the link reports it
        pass
    try:
        yield
    finally:
        for key in keys:
            if key is not None:
                _settle_c_object(key)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _c_object(compiler: list[str], source: Path) -> Path:
    """The object of the C source `source` (written beside it), compiled once per process."""
    key = (tuple(compiler), source.read_text())
    obj = source.with_suffix(".o")
    data = _settle_c_object(key)
    if data is None:
        data = _kept_object(key)
        if data is not None:
            with _c_lock:
                _c_objects.setdefault(key, data)
    if data is None:
        cmd = compiler + ["-c", "-fPIC", "-O2", "-o", str(obj), str(source)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise LinkError(f"compiling {source} failed (exit {proc.returncode}): {shlex.join(cmd)}\n"
                            f"{proc.stderr.strip()}")
        data = obj.read_bytes()
        with _c_lock:
            _c_objects[key] = data
        _keep_object(key, data)
    else:
        obj.write_bytes(data)
    return obj


# MLIR lowers memref.copy between non-contiguous buffers to a call into its
# C runner library, which we do not ship; this is our own implementation of
# that one entry point, linked in only when the kernel needs it.
_MEMREF_COPY_C = r"""
#include <stdint.h>
#include <string.h>
typedef struct { int64_t rank; void *descriptor; } sprue_unranked;
typedef struct { char *allocated; char *aligned; int64_t offset; int64_t dims[]; } sprue_desc;

/* One row along the innermost dim: a memmove when it is contiguous in both (a `?`-sized slice,
   whose copy MLIR leaves to this function: element by element, a scan storing its 64-element carry
   as each output row took 2.7x its static version; 1.1x so), else a loop whose fixed-size memcpy
   the C compiler makes one load and one store (a strided slice copied before a reshape: a call per
   element took 9x the time of the same slice read by an elementwise op). */
#define STRIDED(T) for (int64_t i = 0; i < n; ++i) memcpy(dp + i * dstep, sp + i * sstep, sizeof(T))
static void copy_row(char *dp, const char *sp, int64_t n, int64_t dstep, int64_t sstep, int64_t es) {
  if (dstep == es && sstep == es) { memmove(dp, sp, (size_t)(n * es)); return; }
  switch (es) {
    case 8: STRIDED(uint64_t); break;
    case 4: STRIDED(uint32_t); break;
    case 2: STRIDED(uint16_t); break;
    case 1: STRIDED(uint8_t); break;
    default: for (int64_t i = 0; i < n; ++i) memmove(dp + i * dstep, sp + i * sstep, (size_t)es);
  }
}

__attribute__((visibility("hidden")))  /* one copy per library: kernels never interpose each other */
void memrefCopy(int64_t elem_size, sprue_unranked *src, sprue_unranked *dst) {
  int64_t rank = src->rank;
  sprue_desc *s = src->descriptor, *d = dst->descriptor;
  const int64_t *sizes = s->dims, *ss = s->dims + rank, *ds = d->dims + rank;
  int64_t idx[rank > 0 ? rank : 1];
  for (int64_t r = 0; r < rank; ++r) { if (sizes[r] == 0) return; idx[r] = 0; }
  char *sp = s->aligned + s->offset * elem_size, *dp = d->aligned + d->offset * elem_size;
  if (rank == 0) { memmove(dp, sp, (size_t)elem_size); return; }
  int64_t outer = rank - 1, n = sizes[rank - 1];
  for (;;) {
    copy_row(dp, sp, n, ds[rank - 1] * elem_size, ss[rank - 1] * elem_size, elem_size);
    int64_t r = outer - 1;
    for (; r >= 0; --r) {  /* odometer step over the outer dims */
      sp += ss[r] * elem_size; dp += ds[r] * elem_size;
      if (++idx[r] < sizes[r]) break;
      sp -= ss[r] * sizes[r] * elem_size; dp -= ds[r] * sizes[r] * elem_size; idx[r] = 0;
    }
    if (r < 0) return;
  }
}
"""


# Every library carries the pool (parallel_runtime.py), parallel loops or not: every kernel's C
# header then declares sprue_set_num_threads / sprue_get_num_threads and every host links them,
# whatever the compiler decided to run in parallel (which changes with sizes and thresholds). It
# costs little: a link 0.3-1.8 ms longer (of ~40 ms; paired medians of 30 in one process), a load
# 0.15 ms longer, 1.9 KB; a tiny function's first call in a new process took the same time
# (cpu 0.99x, median of 8 pairs). Without the compile cache (SPRUE_CACHE_DIR=off) each process
# compiles the pool's source once, 0.16 s of cc in the background while the first kernel is
# lowered: that process used 1.14x the cpu (1.13x the wall time, on a busy machine).
def _runtime_sources(llvm_ir: str, directory: Path, name: str) -> list[Path]:
    """The C sources a kernel links with: sprue's runtime (allocation.py: the checked allocator
    every library calls), the pool (above) and, when the kernel needs it, memrefCopy."""
    sources = [runtime_source(directory, name), parallel_source(directory, name)]
    if "@memrefCopy(" in llvm_ir:
        path = directory / f"{name}.memref_copy.c"
        path.write_text(_MEMREF_COPY_C)
        sources.append(path)
    return sources


Stage = Callable[[str, object], None]   # on_stage(stage, what): see build_shared_library


def build_shared_library(stablehlo_text: str, out_dir: str | os.PathLike, name: str = "main",
                         keep_intermediate: bool = False, *, opt_level: int = 3, cpu: str = HOST_CPU,
                         features: str = "", library: str | os.PathLike | None = None, internal: Sequence[str] = (),
                         asm: bool = False, archive: str | os.PathLike | None = None, on_stage: Stage | None = None,
                         save_failing_ir: bool = True) -> Path:
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
        if keep_intermediate:
            (work / f"{name}.ll").write_text(llvm_ir)
            (work / f"{name}.opt.ll").write_text(result.optimized_ir)
        sources = _runtime_sources(llvm_ir, work, name)
        try:
            with step("link"):
                _link_replacing(obj_path, so_path, sources)
        except LinkError as err:
            failed(err, result.optimized_ir, suffix=".opt.ll")
            raise
        if archive is not None:
            static_library(obj_path, sources, Path(archive))
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


def _link_replacing(obj_path: Path, so_path: Path, sources: list[Path]) -> None:
    """Link beside the target, then rename: a library another process (or this one) has mapped is
    replaced, never rewritten in place."""
    partial = so_path.with_name(so_path.name + ".partial")
    try:
        link_shared(obj_path, partial, sources)
        os.replace(partial, so_path)
    finally:
        partial.unlink(missing_ok=True)


def static_library(obj: Path, sources: list[Path], path: Path) -> Path:
    """A static library: the kernel's object plus its compiled C sources (the runtime's)."""
    compiler = find_c_compiler()
    members = [obj, *(_c_object(compiler, src) for src in sources)]
    path.unlink(missing_ok=True)   # `ar r` would add to an old archive's members
    cmd = ["ar", "rcs", str(path), *map(str, members)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError as err:   # no `ar` (binutils) on PATH
        raise LinkError(f"{cmd[0]} is not installed: {err}") from err
    if proc.returncode != 0:
        raise LinkError(f"{shlex.join(cmd)} failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return path


__all__ = ["Codegen", "CompilerNotFoundError", "GENERIC_CPU", "HOST_CPU", "LinkError", "build_shared_library",
           "check_codegen_options", "codegen", "emit_object", "find_c_compiler", "link_shared",
           "llvmlite_compatible", "static_library"]
