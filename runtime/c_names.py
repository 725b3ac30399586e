"""Which names may become C symbols: a kernel's name (`sprue compile --name`) and the internal
symbols of a compiled module.

A kernel named `k` becomes C names in three places: the LLVM module (`@k`, given internal linkage,
and the exported `_mlir_ciface_k`), where the lowering also declares the C library functions it
calls (malloc, aligned_alloc, free, libm's sin/exp/..., libmvec's `_ZGV*`), MLIR adds helpers
(dealloc_helper) and sprue's runtime defines its own (memrefCopy, `_sprue_*`); and the header, which defines `k()` and
`k_results`, `k_into`, ... (`derived_names`) at file scope next to `#include <stdlib.h>` and whatever
the host program includes, in C and in C++. A name that clashes in the module crashes MLIR's
translation or makes the kernel call itself instead of libc; one that clashes in the header makes
it fail to compile or link. `kernel_name_problem` says why a name cannot be used, checking:

- the C identifier syntax, and the identifiers C and C++ reserve (C11 7.1.3: a leading `_` at
  file scope; C++ [lex.name]: `__` anywhere) -- which also covers `_mlir_ciface_*` and `_ZGV*`;
- the keywords of C (C89 to C23, plus GNU `asm`/`typeof`) and of C++ (C++23, with the alternative
  tokens `and`, `or`, ...): the header is included from both;
- sprue's own names: the `sprue_`/`SPRUE_` prefix (header helpers and macros, the runtime's,
  renamed internal functions), the descriptor typedefs `memref_<type>_<rank>d`, memrefCopy,
  dealloc_helper, the wrappers' `out`, `status` and `res`; and `main` (the host's entry point),
  `std` and `posix` (namespaces C++ reserves);
- the symbols the C library, libm and libmvec of this machine export, looked up with dlsym in
  the libraries themselves (`exported_by`) -- for the name and every name the header derives from it.

What the system headers declare without exporting a symbol (macros like NULL and EOF, typedefs
like size_t and int64_t, declarations only C++ makes), and the system headers themselves (a kernel
`stdlib` writes a stdlib.h that hides <stdlib.h> from any program compiled with -I on its folder),
only the compilers know: `header_problems` asks them, compiling `static int <name>;` (after
`#ifdef <name>` and `__has_include(<name.h>)`) for the name and its derived names after the C
standard and common POSIX headers, with `cc` and, when there is one, `c++` (~0.2 s and ~0.5 s, run
side by side; one probe for any number of names; the answers are kept in the compile cache, see
PROBE_CACHE_DIR). `check_kernel_name(..., headers=True)` does both.
`module_symbol_problem` is the subset that matters for a symbol that never reaches a header (an
internal function of a module: qjit's callees, a StableHLO file's entry).

No MLIR or LLVM here (the runtime never needs them): ctypes, the standard library, and the C compilers.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
from typing import Sequence

from sprue.base.errors import SprueValueError
from sprue.runtime.private_files import read_private, write_private

log = logging.getLogger("sprue.c_names")

__all__ = ["C_KEYWORDS", "CXX_KEYWORDS", "KernelNameError", "check_kernel_name", "derived_names",
           "exported_by", "header_problem", "header_problems", "kernel_name_for", "kernel_name_problem", "module_symbol_problem", "safe_internal_symbol"]

C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# C89-C23 (ISO/IEC 9899:2024 6.4.1) plus GNU C's `asm` and `typeof` (keywords in gnu* modes).
C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum extern float for goto
if inline int long register restrict return short signed sizeof static struct switch typedef union unsigned void
volatile while _Alignas _Alignof _Atomic _BitInt _Bool _Complex _Decimal32 _Decimal64 _Decimal128 _Generic
_Imaginary _Noreturn _Static_assert _Thread_local alignas alignof bool constexpr false nullptr static_assert
thread_local true typeof typeof_unqual asm""".split())
# C++23 ([lex.key] table 5, and the alternative representations of table 6).
CXX_KEYWORDS = frozenset("""alignas alignof asm auto bool break case catch char char8_t char16_t char32_t class
concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype default
delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline int long
mutable namespace new noexcept nullptr operator private protected public register reinterpret_cast requires
return short signed sizeof static static_assert static_cast struct switch template this thread_local throw true
try typedef typeid typename union unsigned using virtual void volatile wchar_t while
and and_eq bitand bitor compl not not_eq or or_eq xor xor_eq""".split())

# Names sprue's generated code defines or calls itself (beyond the C library and the `_`-prefixed
# names): the C runtime function MLIR's memref.copy lowers to (backend._MEMREF_COPY_C), the helper
# MLIR's buffer deallocation pipeline adds to a module (a global symbol of the object); and the
# reserved prefix of the header's helpers and macros, the runtime's (lowering/allocation.py) and
# renamed internal symbols (safe_internal_symbol). tests/e2e/test_c_embedding.py reads a kernel's
# object and the runtime's sources to keep this complete.
RUNTIME_SYMBOLS = {
    "memrefCopy": "a function sprue's runtime defines in every library that copies strided arrays",
    "dealloc_helper": "a function MLIR's buffer deallocation adds to compiled modules",
}
SPRUE_PREFIX = "sprue_"
_DESCRIPTOR_TYPEDEF = re.compile(r"memref_[A-Za-z0-9]+_[0-9]+d")
_SPECIAL = {"main": "the entry point of a C program",
            "std": "the namespace of the C++ standard library",
            "posix": "a namespace the C++ standard reserves",
            # the header's wrappers call the kernel where these parameters and locals would hide it
            "out": "a parameter of the header's wrappers", "status": "a local of the header's wrappers",
            "res": "a local of the header's wrappers"}

# What the header defines for a kernel `k` at file scope besides `k` (runtime/header.py), and the
# symbol the library exports.
HEADER_SUFFIXES = ("_results", "_free_results", "_status_messages", "_status_message", "_result_shapes", "_into")


def derived_names(name: str) -> list[str]:
    """The file-scope names the header (runtime/header.py) and the library define for kernel `name`."""
    return ([name + s for s in HEADER_SUFFIXES]
            + [f"{name.upper()}_STATUS_COUNT", f"SPRUE_KERNEL_{name}_H", f"_mlir_ciface_{name}"])


class KernelNameError(SprueValueError):
    """A kernel name that cannot be a C symbol: not an identifier, reserved, a keyword, or a name
    the C library, its headers or sprue's generated code already use."""


# -- the C library's exported symbols ------------------------------------------------------------
# The libraries a kernel's module calls into and a host program links: the C library, libm, and
# glibc's libmvec (the vector math the backend may call). By soname first (a dlopen of a library
# already mapped costs microseconds); ctypes.util.find_library (which may run ldconfig) otherwise.
_LIBRARIES = {"linux": ("libc.so.6", "libm.so.6", "libmvec.so.1"), "darwin": ("libSystem.B.dylib",)}


@functools.lru_cache(maxsize=None)
def _system_libraries() -> tuple[tuple[str, ctypes.CDLL], ...]:
    platform = "linux" if sys.platform.startswith("linux") else sys.platform
    found = []
    for soname in _LIBRARIES.get(platform, ()):
        try:
            found.append((soname, ctypes.CDLL(soname)))
        except OSError:   # libmvec is glibc-on-x86-64 only; a musl system has no libc.so.6
            continue
    if not any(n.startswith(("libc.", "libSystem")) for n, _ in found):
        for short in ("c", "m"):
            path = ctypes.util.find_library(short)
            if path is not None:
                try:
                    found.append((path, ctypes.CDLL(path)))
                except OSError:
                    continue
    return tuple(found)


def exported_by(symbol: str) -> str | None:
    """The library (of the C library, libm, libmvec) that exports `symbol` (a function or a
    variable, of any version), or None. dlsym on a library's handle searches it and its
    dependencies, so libm also answers for libc's symbols: the first library listed wins."""
    for soname, lib in _system_libraries():
        try:
            lib[symbol]   # __getitem__ rather than getattr: no special case for dunder names
        except AttributeError:
            continue
        return soname
    return None


# -- the checks ----------------------------------------------------------------------------------
def _reserved(name: str) -> str | None:
    if not C_IDENTIFIER.fullmatch(name):
        return "it is not a C identifier (letters, digits and _, not starting with a digit)"
    if name.startswith("_"):
        return ("names starting with '_' are reserved for the C implementation at file scope (C11 7.1.3),"
                " and sprue's own symbols (_mlir_ciface_*) start with one")
    if "__" in name:
        return "names containing '__' are reserved in C++"
    if name in C_KEYWORDS:
        return "it is a C keyword"
    if name in CXX_KEYWORDS:
        return "it is a C++ keyword (the header is included from C++ too)"
    if name.lower().startswith(SPRUE_PREFIX):
        return "names starting with sprue_ or SPRUE_ are sprue's own (the header's helpers and macros, the runtime's)"
    if _DESCRIPTOR_TYPEDEF.fullmatch(name):
        return "it is the name of a memref descriptor type the header defines"
    if name in RUNTIME_SYMBOLS:
        return f"it is {RUNTIME_SYMBOLS[name]}"
    if name in _SPECIAL:
        return f"it is {_SPECIAL[name]}"
    return None


def module_symbol_problem(name: str) -> str | None:
    """Why `name` cannot be the symbol of a function in a compiled module (where the lowering
    declares the C library's functions and sprue's runtime defines its own), or None."""
    if name.startswith("_"):
        return "names starting with '_' are reserved (sprue's exported symbols are _mlir_ciface_*)"
    if name.lower().startswith(SPRUE_PREFIX) or name in RUNTIME_SYMBOLS:
        return "it is a name sprue's runtime uses"
    lib = exported_by(name)
    if lib is not None:
        return f"it is a symbol of {lib}, which compiled code calls"
    return None


# A file name has at most 255 bytes (NAME_MAX on Linux and macOS), and the longest one made from a
# kernel's name is `<name>.bufferized.mlir` (--emit): names stay well below.
MAX_NAME_LENGTH = 200


def kernel_name_problem(name: str) -> str | None:
    """Why `name` cannot name a kernel (see the module docstring), or None. Everything but what
    only the C compilers know (the system headers' macros and typedefs: header_problems)."""
    why = _reserved(name)
    if why is not None:
        return why
    if len(name) > MAX_NAME_LENGTH:
        return (f"it is {len(name)} characters long; it names files too (lib<name>.so, <name>.h,"
                f" <name>.bufferized.mlir), which allow at most {MAX_NAME_LENGTH}")
    if name.endswith("_"):
        return f"the header's {name}_results would contain '__', which C++ reserves"
    for symbol in [name] + [name + s for s in HEADER_SUFFIXES]:
        lib = exported_by(symbol)
        if lib is not None:
            which = "it" if symbol == name else f"{symbol}, which the header defines for it,"
            return f"{which} is a symbol of {lib} (a library every host program and the kernel itself link with)"
    return None


# The headers a host program may include before a kernel's header: C11's (7.1.2; complex.h and
# tgmath.h in C only: in C++ they are <complex>), and common POSIX ones. Each only where it exists.
_C_HEADERS = ("assert.h ctype.h errno.h fenv.h float.h inttypes.h iso646.h limits.h locale.h math.h setjmp.h"
              " signal.h stdalign.h stdarg.h stdbool.h stddef.h stdint.h stdio.h stdlib.h stdnoreturn.h string.h"
              " threads.h time.h uchar.h wchar.h wctype.h unistd.h fcntl.h dlfcn.h pthread.h sched.h"
              " sys/types.h sys/stat.h sys/mman.h sys/time.h").split()
_C_ONLY_HEADERS = ("complex.h", "tgmath.h", "stdatomic.h")


_BLOCK = 7   # lines per probed name in the probe's text


def _probe_source(names: Sequence[str], cxx: bool) -> tuple[str, int]:
    """The probe's text, and the line (1-based) where the first name's block of _BLOCK lines starts."""
    headers = _C_HEADERS + ([] if cxx else list(_C_ONLY_HEADERS))
    lines = [line for h in headers for line in (f"#if __has_include(<{h}>)", f"#include <{h}>", "#endif")]
    first = len(lines) + 1
    for n in names:   # a header file <n.h> (the kernel's n.h would hide it), a macro of any kind, a declaration
        lines += [f"#if __has_include(<{n}.h>)", f"#error {n}.h is a system header, which the kernel's {n}.h would hide",
                  "#endif", f"#ifdef {n}", f"#error {n} is a macro", "#endif", f"static int {n};"]
    return "\n".join(lines) + "\n", first


def _compiler(variable: str, default: str) -> list[str] | None:
    words = shlex.split(os.environ.get(variable, "").strip() or default)
    path = shutil.which(words[0]) if words else None
    return None if path is None else [path] + words[1:]


_ERROR_LINE = re.compile(r"^<stdin>:(\d+):\d+: (?:fatal )?error: (?:#error )?(.*)$", re.MULTILINE)
# gcc stops at -fmax-errors (unlimited by default), clang at -ferror-limit (20 by default)
_TRUNCATED = ("too many errors emitted", "compilation terminated due to -fmax-errors")


def _start(cmd: list[str], lang: str, names: Sequence[str]) -> tuple[subprocess.Popen, str, int]:
    source, first = _probe_source(names, lang == "c++")
    proc = subprocess.Popen(cmd + ["-fsyntax-only", "-x", lang, "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return proc, source, first


def _finish(proc: subprocess.Popen, source: str) -> str:
    try:
        return proc.communicate(source, timeout=300)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return ""


def _probe_errors(names: Sequence[str]) -> dict[str, str]:
    """{name: "compiler: its first error"} for the names the probe rejects, by cc and (when there is
    one) c++, run side by side. An error is attributed by its line to a name's block; errors in the
    headers themselves (a broken toolchain: reported when linking, not here) to none."""
    compilers = [(cmd, lang) for cmd, lang in ((_compiler("CC", "cc"), "c"), (_compiler("CXX", "c++"), "c++"))
                 if cmd is not None]
    found: dict[str, str] = {}
    pending = [(cmd, lang, 0, _start(cmd, lang, names)) for cmd, lang in compilers]
    while pending:
        cmd, lang, offset, (proc, source, first) = pending.pop(0)
        err = _finish(proc, source)
        last = -1
        for m in _ERROR_LINE.finditer(err):
            block = (int(m.group(1)) - first) // _BLOCK
            if 0 <= block < len(names) - offset:
                found.setdefault(names[offset + block], f"{os.path.basename(cmd[0])}: {m.group(2).strip()}")
                last = max(last, block)
        if any(t in err for t in _TRUNCATED) and last >= 0 and offset + last + 1 < len(names):
            rest = offset + last + 1   # the compiler stopped early: probe the names after its last error
            pending.append((cmd, lang, rest, _start(cmd, lang, names[rest:])))
    return found


# The probe's answers are kept on disk (each costs ~0.5 s of compiler time, on every `sprue compile`):
# a JSON file {name: error or ""} per compiler identity (the compilers' paths, sizes and times, and
# the include folder's time) in PROBE_CACHE_DIR, which the command line points into the compile
# cache (None: no disk cache). Only a file this user owns and no one else may write is read: a
# planted answer could let a clashing name through.
PROBE_CACHE_DIR: str | None = None


def _probe_identity(compilers: list[tuple[list[str], str]]) -> str:
    facts: list = [_C_HEADERS, _C_ONLY_HEADERS, _BLOCK]
    for cmd, _ in compilers:
        st = os.stat(cmd[0])
        facts.append([cmd, os.path.realpath(cmd[0]), st.st_size, st.st_mtime_ns])
    try:
        facts.append(os.stat("/usr/include").st_mtime_ns)
    except OSError:
        facts.append(None)
    return hashlib.sha256(json.dumps(facts).encode()).hexdigest()[:32]


def _cached_probe_errors(names: Sequence[str]) -> dict[str, str]:
    """_probe_errors, answered from PROBE_CACHE_DIR where it knows the names."""
    folder = PROBE_CACHE_DIR
    compilers = [(cmd, lang) for cmd, lang in ((_compiler("CC", "cc"), "c"), (_compiler("CXX", "c++"), "c++"))
                 if cmd is not None]
    if folder is None or not compilers:
        return _probe_errors(names)
    try:
        path = os.path.join(folder, _probe_identity(compilers) + ".json")
    except OSError:   # a compiler gone meanwhile: the probe says so
        return _probe_errors(names)
    known: dict[str, str] = {}
    kept = read_private(path)
    if kept is not None:
        try:
            data = json.loads(kept)
        except ValueError:
            data = None
        if isinstance(data, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            known = data
    missing = [n for n in names if n not in known]
    if missing:
        found = _probe_errors(missing)
        known.update({n: found.get(n, "") for n in missing})
        if not write_private(path, json.dumps(known).encode()):   # the answers are right, only not kept
            log.debug("sprue: cannot keep the name probe's answers in %s", folder)
    return {n: known[n] for n in names if known[n]}


def header_problems(names: Sequence[str]) -> dict[str, str]:
    """{kernel name: why} for those of `names` that the system headers (as the C and C++ compilers
    see them) rule out, themselves or by a name the header derives from them. One probe for all."""
    derived = {n: [n] + [d for d in derived_names(n) if not d.startswith("_")] for n in names}
    probed = list(dict.fromkeys(d for ds in derived.values() for d in ds))
    errors = _cached_probe_errors(probed) if probed else {}
    out = {}
    for n, ds in derived.items():
        culprit = next((d for d in ds if d in errors), None)
        if culprit is not None:
            which = "it" if culprit == n else f"{culprit}, which the header defines for it,"
            out[n] = f"{which} clashes with the system's C headers ({errors[culprit]})"
    return out


def header_problem(name: str) -> str | None:
    """Why the system headers rule out `name` (header_problems), or None."""
    return header_problems([name]).get(name)


def suggestion(name: str, headers: bool = False) -> str | None:
    """A name close to `name` (and not it) that passes the checks (for error messages), or None."""
    base = re.sub(r"_{2,}", "_", re.sub(r"[^A-Za-z0-9_]+", "_", name)).strip("_") or "kernel"
    if base[0].isdigit():
        base = "kernel_" + base
    for candidate in (base, f"{base}_kernel", f"my_{base}"):
        if candidate != name and kernel_name_problem(candidate) is None and not (headers and header_problem(candidate)):
            return candidate
    return None


def name_error(name: str, why: str, what: str = "kernel name", headers: bool = False) -> KernelNameError:
    better = suggestion(name, headers)
    hint = f"choose another name, e.g. {better!r}" if better else "choose another name"
    return KernelNameError(f"{what} {name!r} cannot be used: {why}. A kernel's name becomes C symbols"
                           f" ({name}(), {name}_results, _mlir_ciface_{name}); {hint}")


def check_kernel_name(name: str, what: str = "kernel name", headers: bool = False) -> str:
    """`name`, or a KernelNameError saying why it cannot name a kernel and what to use instead.
    `what` names the name in the message (e.g. "--name"); with `headers`, the system headers are
    asked too (header_problem: runs the compilers)."""
    if not isinstance(name, str):
        raise KernelNameError(f"{what} must be a str, got {type(name).__name__}")
    why = kernel_name_problem(name)
    if why is None and headers:
        why = header_problem(name)
    if why is not None:
        raise name_error(name, why, what, headers)
    return name


def kernel_name_for(text: str, headers: bool = False) -> str:
    """A kernel name made from `text` (an input file's stem), for when none is given: `text` as a C
    identifier (`my-kernel` -> my_kernel, `3d` -> kernel_3d), with `_kernel` appended when that
    cannot name a kernel (`main` -> main_kernel, `free` -> free_kernel). With `headers`, the system
    headers are asked too (header_problem)."""
    base = re.sub(r"_{2,}", "_", re.sub(r"[^A-Za-z0-9_]+", "_", text)).strip("_") or "kernel"
    if base[0].isdigit():
        base = "kernel_" + base
    base = base[:MAX_NAME_LENGTH - len("_kernel")].rstrip("_")
    why = "it cannot name a kernel"
    for candidate in (base, base + "_kernel"):
        why = kernel_name_problem(candidate) or (header_problem(candidate) if headers else None)
        if why is None:
            return candidate
    raise name_error(base + "_kernel", why, "the name made from the input's file name", headers)


def safe_internal_symbol(name: str) -> str:
    """`name` as the symbol of an internal function of a module: itself, or `sprue_fn_<name>`
    when it would clash with a symbol the module declares or defines (module_symbol_problem)."""
    return name if module_symbol_problem(name) is None else f"{SPRUE_PREFIX}fn_{name.lstrip('_') or 'f'}"
