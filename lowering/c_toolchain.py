"""The system C compiler: finding it, compiling sprue's run-time C sources (once per process, kept in
the compile cache), linking a kernel's object into a shared library or a static
archive. backend.py builds with these; nothing here imports MLIR or llvmlite.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import shlex
import shutil
import stat
import struct
import subprocess
import sys
import sysconfig
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from sprue.base.errors import CompileError
from sprue.lowering import linker
from sprue.lowering.allocation import RUNTIME_C, runtime_source
from sprue.lowering.linalg_runtime import LINALG_SYMBOL_PREFIX, linalg_source
from sprue.lowering.matmul_library import SYMBOL_PREFIX as MATMUL_SYMBOL_PREFIX
from sprue.lowering.parallel_runtime import PARALLEL_C, PARALLEL_SOURCE, parallel_source
from sprue.lowering.print_runtime import PRINT_SYMBOL_PREFIX, print_source
from sprue.lowering.vector_math import LIBMVEC, _libmvec_available
from sprue.runtime import fastcall_c
from sprue.runtime.private_files import cache_dir, only_mine, read_private, write_private


class CompilerNotFoundError(CompileError):
    """No system C compiler to link kernels with."""

    def __init__(self, message: str = ""):
        super().__init__(message, stage="link")


class LinkError(CompileError):
    """The system C compiler failed to link a kernel; carries its stderr."""

    def __init__(self, message: str = ""):
        super().__init__(message, stage="link")


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
                extra_sources: Sequence[str | os.PathLike] = (), more_objects: Sequence[str | os.PathLike] = (),
                meanwhile: Callable[[], None] | None = None) -> Path:
    """Links an object (and `more_objects`, plus optional C sources) into a shared library, by
    the system linker directly where its command is known (linker.py), else by the C compiler;
    `meanwhile` runs in this process while the linker does (its exception, if any, is raised
    once the linker has finished)."""
    compiler = find_c_compiler()
    objects = [Path(obj_path), *map(Path, more_objects), *(_c_object(compiler, Path(src)) for src in extra_sources)]
    libraries = _libraries(objects, extra_sources)
    direct = linker.command(compiler)
    if direct is not None:
        script = Path(obj_path).with_name(".sprue-exports.map")
        if direct.gold:
            script.write_text(linker.GOLD_VERSION_SCRIPT)
        cmd = direct.for_link(str(so_path), list(map(str, objects)), libraries, str(script))
        proc, stderr = _run_linker(cmd, meanwhile)
        meanwhile = None
        if proc.returncode == 0:
            return Path(so_path)
        linker.forget(compiler)   # (the driver's link below says what is wrong, if anything is)
    cmd = compiler + ["-shared", "-fPIC", "-O2", "-o", str(so_path), *map(str, objects),
                      *(lib if lib.startswith("-l") else f"-Wl,{lib}" for lib in libraries)]
    proc, stderr = _run_linker(cmd, meanwhile)
    if proc.returncode != 0:
        raise LinkError(f"linking {so_path} failed (exit {proc.returncode}): {shlex.join(cmd)}\n"
                        f"{stderr.strip()}")
    return Path(so_path)


def _libraries(objects: Sequence[Path], extra_sources: Sequence[str | os.PathLike]) -> list[str]:
    """The libraries a link needs, as linker options."""
    needs = _math_libraries(objects)
    libraries = ["-lm"] if needs.libm else []
    if any(str(src).endswith(PARALLEL_SOURCE) for src in extra_sources):
        libraries.append("-lpthread")   # (part of libc since glibc 2.34; a library of its own before)
    if needs.libmvec and _libmvec_available():   # only recorded as needed when the object calls it
        libraries += ["--as-needed", f"-l:{LIBMVEC}", "--no-as-needed"]
    return libraries


def _run_linker(cmd: list[str], meanwhile: Callable[[], None] | None) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        if meanwhile is not None:
            meanwhile()
    finally:
        _, stderr = proc.communicate()
    return proc, stderr


@dataclass(frozen=True)
class _MathLibraries:
    libm: bool
    libmvec: bool


_BOTH = _MathLibraries(True, True)


def _math_libraries(objects: Sequence[Path]) -> _MathLibraries:
    """Whether the objects call libm's functions, libmvec's: ld reads each library it is given
    (libm's symbols: ~1.7 of the ~14 ms a link takes here), needed or not. Both, unless every
    object's undefined symbols could be read (ELF) and looked up in glibc's libm."""
    libraries = _glibc_math()
    if libraries is None:
        return _BOTH
    undefined: set[str] = set()
    for path in objects:
        names = elf_undefined_symbols(path.read_bytes())
        if names is None:
            return _BOTH
        undefined |= names
    libc, libm = libraries
    return _MathLibraries(any(hasattr(libm, n) and not hasattr(libc, n) for n in undefined),
                          any(n.startswith("_ZGV") for n in undefined))   # (libmvec's names: vector_math._variant)


@functools.lru_cache(maxsize=None)
def _glibc_math():
    """(libc, libm) opened by ctypes on glibc Linux, or None elsewhere. A lookup in a library's
    handle also finds what its dependencies define (libm's finds libc's)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6"), ctypes.CDLL("libm.so.6")
    except OSError:
        return None


_ELF_SECTION = struct.Struct("<IIQQQQIIQQ")   # sh_name, sh_type, flags, addr, sh_offset, sh_size, sh_link, ...
_ELF_SYMBOL = struct.Struct("<IBBHQQ")        # st_name, st_info, st_other, st_shndx, st_value, st_size
_SHT_SYMTAB = 2


def elf_undefined_symbols(data: bytes) -> set[str] | None:
    """The names of the undefined symbols of a 64-bit little-endian ELF object (what LLVM emits on
    x86-64 and AArch64), or None for anything else or a file this cannot read."""
    if data[:4] != b"\x7fELF" or data[4:6] != b"\x02\x01" or len(data) < 64:
        return None
    try:
        shoff = int.from_bytes(data[0x28:0x30], "little")
        shentsize, shnum = int.from_bytes(data[0x3A:0x3C], "little"), int.from_bytes(data[0x3C:0x3E], "little")
        sections = [_ELF_SECTION.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
        names: set[str] = set()
        for section in sections:
            if section[1] != _SHT_SYMTAB:
                continue
            strings = sections[section[6]][4]
            for offset in range(section[4] + _ELF_SYMBOL.size, section[4] + section[5], _ELF_SYMBOL.size):
                name, _, _, shndx, _, _ = _ELF_SYMBOL.unpack_from(data, offset)
                if shndx == 0 and name:
                    start = strings + name
                    names.add(data[start:data.index(b"\0", start)].decode())
        return names
    except (struct.error, IndexError, ValueError, UnicodeDecodeError):
        return None


# The runtime's C sources are the same for every kernel: each is compiled once per process (and
# compiler), not at every link (that would add ~40 ms to every compilation), and the first time in
# the background, while the kernel is lowered (build_shared_library). (compiler, source text) ->
# the object's bytes, or the compilation under way: (process, its object file, its command).
_c_objects: dict[tuple[tuple[str, ...], str], bytes] = {}
_c_pending: dict[tuple[tuple[str, ...], str], tuple[subprocess.Popen, Path, list[str]]] = {}
_c_lock = threading.Lock()


def _after_fork_in_child() -> None:
    """In a forked child, the compilations under way (_c_pending) are the parent's processes, and
    _c_lock (held while waiting for one) guards Python state only."""
    global _c_lock
    _c_lock = threading.Lock()
    _c_pending.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


# ... and kept in the compile cache, so that a new process does not compile it again (~130 ms of
# cc): `<cache>/runtime/<hash of the compiler's identity and the source>.o`, read only when this
# user alone may write it (a planted object would run as this user, like a planted library).
def _object_name(key: tuple[tuple[str, ...], str]) -> str | None:
    """`<hash of the compiler's identity and the source>.o`, or None when the compiler is gone."""
    try:
        st = os.stat(key[0][0])
        ident = repr((key, os.path.realpath(key[0][0]), st.st_size, st.st_mtime_ns)).encode()
        return hashlib.sha256(ident).hexdigest()[:32] + ".o"
    except (OSError, UnicodeError):
        return None


def _kept_object_path(key: tuple[tuple[str, ...], str]) -> Path | None:
    root, name = cache_dir(), _object_name(key)
    if root is None or name is None:
        return None
    try:
        return Path(os.fsdecode(root)) / "runtime" / name
    except UnicodeError:
        return None


# ... and built when sprue is installed (`make venv`: python -m sprue.lowering.c_toolchain), into a
# folder of the package, like the compiled code a wheel carries: then a process that keeps nothing
# (SPRUE_CACHE_DIR=off) does not run cc for them either (~75 ms of its first compilation: two cc
# processes beside it on this 2-core machine). Read only when that folder and the object are owned
# by this user or by root and writable by no one else; keyed like the kept ones (another compiler,
# or the same one updated, finds none and compiles its own).
PREBUILT_DIR = Path(__file__).resolve().parent / "_prebuilt"


def _prebuilt_object(key: tuple) -> bytes | None:
    name = _object_name(key)
    return None if name is None else _prebuilt_named(name)


def _prebuilt_named(name: str) -> bytes | None:
    if not (only_mine(PREBUILT_DIR, stat.S_ISDIR, or_root=True) and only_mine(PREBUILT_DIR / name, or_root=True)):
        return None
    try:
        return (PREBUILT_DIR / name).read_bytes()
    except OSError:
        return None


def _kept_object(key: tuple) -> bytes | None:
    prebuilt = _prebuilt_object(key)
    if prebuilt is not None:
        return prebuilt
    path = _kept_object_path(key)
    return None if path is None else read_private(path)


def _keep_object(key: tuple, data: bytes) -> None:
    path = _kept_object_path(key)
    if path is not None:
        write_private(path, data)   # (not kept on a read-only or full disk: still used)


def kept_named_object(name: str) -> bytes | None:
    """An object another module of sprue names itself (matmul_library.py's routines): prebuilt, or
    kept in the compile cache; None where neither holds it."""
    prebuilt = _prebuilt_named(name)
    if prebuilt is not None:
        return prebuilt
    root = cache_dir()
    return None if root is None else read_private(Path(os.fsdecode(root)) / "runtime" / name)


def keep_named_object(name: str, data: bytes) -> None:
    root = cache_dir()
    if root is not None:
        write_private(Path(os.fsdecode(root)) / "runtime" / name, data)


def prebuild_runtime_objects() -> list[Path]:
    """Compiles the runtime's C sources with this machine's compiler into PREBUILT_DIR (above);
    the objects written."""
    compiler = find_c_compiler()
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        for write in (runtime_source, parallel_source, memref_copy_source, print_source, linalg_source):
            source = write(Path(tmp), "prebuilt")
            key = (tuple(compiler), source.read_text())
            data = _compile(compiler, source)
            name = _object_name(key)
            if name is not None:
                # readable by every user (an installation root made serves them all), written by none
                PREBUILT_DIR.mkdir(mode=0o755, exist_ok=True)
                staged = PREBUILT_DIR / f".{name}.tmp"
                staged.write_bytes(data)
                staged.chmod(0o644)
                os.replace(staged, PREBUILT_DIR / name)
                written.append(PREBUILT_DIR / name)
    return written


def _compile_command(compiler: list[str], source: Path) -> tuple[list[str], Path]:
    """The command compiling the runtime's C `source`, and the object it writes (beside it)."""
    obj = source.with_suffix(".o")
    return compiler + ["-c", "-fPIC", "-O2", "-o", str(obj), str(source)], obj


def _compile(compiler: list[str], source: Path) -> bytes:
    """The object of `source`, compiled now (a LinkError if cc fails)."""
    cmd, obj = _compile_command(compiler, source)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise LinkError(f"compiling {source} failed (exit {proc.returncode}): {shlex.join(cmd)}\n"
                        f"{proc.stderr.strip()}")
    return obj.read_bytes()


def _start_c_object(compiler: list[str], source: Path) -> tuple | None:
    """Starts compiling `source` (into its .o beside it) unless its object is known, kept in the
    compile cache, or under way; the key to wait for (_settle_c_object), or None."""
    key = (tuple(compiler), source.read_text())
    cmd, obj = _compile_command(compiler, source)
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
        linker.prepare(compiler)   # (the link's command line, learned meanwhile too)
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
        data = _compile(compiler, source)
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
    every library calls), the pool (above) and, when the kernel needs them, memrefCopy,
    sprue.debug.print's routines and sprue.numpy.linalg's (linalg_runtime.py)."""
    sources = [runtime_source(directory, name), parallel_source(directory, name)]
    if "@memrefCopy(" in llvm_ir or f"@_mlir_ciface_{MATMUL_SYMBOL_PREFIX}" in llvm_ir:   # (the routines copy)
        sources.append(memref_copy_source(directory, name))
    if f"@{PRINT_SYMBOL_PREFIX}" in llvm_ir:
        sources.append(print_source(directory, name))
    if f"@{LINALG_SYMBOL_PREFIX}" in llvm_ir:
        sources.append(linalg_source(directory, name))
    return sources


def memref_copy_source(directory: Path, name: str) -> Path:
    """memrefCopy's C source written into `directory` (prebuilt like the runtime's: its ~35 ms of
    cc were a quarter of a training step's first link with the cache off)."""
    path = directory / f"{name}.memref_copy.c"
    path.write_text(_MEMREF_COPY_C)
    return path


def static_library(obj: Path, sources: list[Path], path: Path, more_objects: Sequence[Path] = ()) -> Path:
    """A static library: the kernel's object (and `more_objects`) plus its compiled C sources (the
    runtime's)."""
    compiler = find_c_compiler()
    members = [obj, *more_objects, *(_c_object(compiler, src) for src in sources)]
    path.unlink(missing_ok=True)   # `ar r` would add to an old archive's members
    cmd = ["ar", "rcs", str(path), *map(str, members)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError as err:   # no `ar` (binutils) on PATH
        raise LinkError(f"{cmd[0]} is not installed: {err}") from err
    if proc.returncode != 0:
        raise LinkError(f"{shlex.join(cmd)} failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return path


def relocatable_object(objects: Sequence[bytes], work: Path) -> bytes:
    """One relocatable object of several (`cc -r`: a partial link), for whoever asked for the
    kernel's object file (`sprue compile --emit obj`)."""
    if len(objects) == 1:
        return objects[0]
    paths = []
    for i, data in enumerate(objects):
        paths.append(work / f".part{i}.o")
        paths[-1].write_bytes(data)
    out = work / ".combined.o"
    cmd = find_c_compiler() + ["-r", "-nostdlib", "-o", str(out), *map(str, paths)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    try:
        if proc.returncode != 0:
            raise LinkError(f"{shlex.join(cmd)} failed (exit {proc.returncode}): {proc.stderr.strip()}")
        return out.read_bytes()
    finally:
        for path in (*paths, out):
            path.unlink(missing_ok=True)


def build_fast_caller() -> Path | None:
    """The runtime's fast caller (runtime/fastcall_c.py), a CPython extension, compiled with this
    machine's compiler against this Python's and numpy's headers into its folder; None (and a
    line saying why) where it cannot be: calls then take the Python caller."""
    compiler = find_c_compiler()
    target = fastcall_c.extension_path()
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        print("sprue: no Python.h for this interpreter: calls take the Python fast caller")
        return None
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "sprue_fastcall.c"
        source.write_text(fastcall_c.SOURCE)
        staged = Path(tmp) / target.name
        proc = subprocess.run(fastcall_c.build_command(compiler, source, staged), capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"sprue: the fast caller did not build (calls take the Python one):\n{proc.stderr.strip()}")
            return None
        target.parent.mkdir(mode=0o755, exist_ok=True)
        staged.chmod(0o755)
        shutil.move(str(staged), str(target.with_name(f".{target.name}.tmp")))
        os.replace(target.with_name(f".{target.name}.tmp"), target)
    return target


if __name__ == "__main__":   # `make venv`: the runtime's objects built at installation (above)
    for path in prebuild_runtime_objects():
        print(f"sprue: built {path}")
    built = build_fast_caller()
    if built is not None:
        print(f"sprue: built {built}")
