"""Checked allocation: no buffer the compiled code allocates can be null.

MLIR's memref lowering calls aligned_alloc/malloc and never checks the result; a kernel whose
buffer does not fit in memory (a static 8 TB temporary, an allocation refused under `ulimit -v`)
wrote through a null pointer and killed the process. Instead, every allocation of a kernel goes
through sprue's runtime (RUNTIME_C, linked into every library), and a failed one ends the call with
a status that says how many bytes were asked for:

    int64_t _mlir_ciface_<name>(...)     0, or the byte count of the allocation that failed
    const char *_sprue_error_<name>(void)  this thread's last such failure as a message
    int64_t _sprue_packed_<name>(void **)  the first, its parameters in one array (all pointers)

How (see `add_entry_wrappers`, `check_allocations`):

- MLIR's C interface `_mlir_ciface_<name>` becomes the internal `_sprue_body_<name>`; the module
  gets a new `_mlir_ciface_<name>` that stores its parameters in a struct and calls the runtime's
  `_sprue_call(thunk, args, name)`, which sets a sigsetjmp point and calls the internal thunk
  `_sprue_thunk_<name>` (which unpacks the struct and calls the body, inlined into it by LLVM).
  The setjmp is in C (RUNTIME_C) because jmp_buf's size and the setjmp symbol differ between C
  libraries; the wrappers are LLVM IR so that nothing has to be compiled per kernel.
- After LLVM's optimizer ran (which must see the real aligned_alloc/malloc/free: it relies on a
  fresh buffer aliasing nothing, and drops allocations it can prove unused), the declarations of
  the C library's allocation functions are renamed to the runtime's: `_sprue_aligned_alloc`,
  `_sprue_malloc`, `_sprue_calloc`, `_sprue_realloc`, `_sprue_free`. Those call the real ones;
  a null result for a non-zero size records the size and siglongjmps back to `_sprue_call`.
- The runtime records every buffer a call allocates and has not freed (a per-thread list), so a
  failed call frees them all, results included, and leaks nothing.

Why the longjmp is safe: the frames it discards are the thunk's and the kernel's, LLVM IR made
from MLIR's LLVM dialect, which has no destructors, no unwinding, no locks and nothing to restore
(its stack buffers go with the stack); the allocator functions do not hold libc's allocator when
they jump (aligned_alloc has returned). The jump does not cross any frame of the caller's code.
State (the jump target, the list of live buffers) is thread-local, and saved/restored around a
call, so concurrent calls from several threads never share it.

Big buffers: transparent huge pages are asked for (madvise) on Linux for blocks of
HUGE_PAGE_THRESHOLD bytes and more, as numpy does: glibc serves such blocks with a fresh mmap each
time, and touching 80 MB of fresh 4 KiB pages costs ~20k page faults (4x the work of a simple
elementwise kernel); 2 MiB pages make that 40. The block stays an ordinary malloc'ed block.

Stack buffers: big ones must not exist (a stack overflow is a crash, not an error), so
`check_stack` refuses a module whose optimized code has an alloca of dynamic size or of more than
MAX_STACK_BUFFER bytes; sprue's pipeline never makes one (every buffer is memref.alloc).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sprue.base.errors import CompileError

HUGE_PAGE_THRESHOLD = 4 << 20
MAX_STACK_BUFFER = 64 << 10

# The C library's allocation functions that MLIR's lowering (and LLVM's optimizer: malloc + memset
# -> calloc) may call, and the runtime's checked versions (same signatures).
CHECKED = {"aligned_alloc": "_sprue_aligned_alloc", "malloc": "_sprue_malloc", "calloc": "_sprue_calloc",
           "realloc": "_sprue_realloc", "free": "_sprue_free"}
# Allocation functions nothing in the pipeline calls; a module calling one is refused (its
# allocation could not be checked).
UNCHECKED = frozenset({"posix_memalign", "memalign", "valloc", "pvalloc", "reallocarray", "strdup", "strndup",
                       "_Znwm", "_Znam", "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t"})

RUNTIME_SOURCE = "sprue_runtime.c"

RUNTIME_C = r"""/* sprue's run-time support, linked into every compiled library (lowering/allocation.py):
   the allocator of the compiled code, which never returns a null buffer for a non-zero size. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* sigsetjmp (POSIX) and MADV_HUGEPAGE (Linux) whatever the -std */
#endif
#include <setjmp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#if defined(__GNUC__) || defined(__clang__)
#define SPRUE_TLS __thread
#define SPRUE_HIDDEN __attribute__((visibility("hidden")))
#define SPRUE_NORETURN __attribute__((noreturn))
#else
#define SPRUE_TLS _Thread_local
#define SPRUE_HIDDEN
#define SPRUE_NORETURN _Noreturn
#endif
#define SPRUE_SMALL 32

/* One thread's running call (of any kernel of this library; in a static link, of any kernel). */
typedef struct {
  void *p;
  uint64_t bytes;
} sprue_block;

typedef struct {
  sigjmp_buf *env;             /* where a failed allocation returns to; NULL between calls */
  sprue_block *live;           /* the buffers the call allocated and has not freed ... */
  size_t n, cap;               /* ... how many, and room for how many */
  uint64_t failed;             /* the byte count of the allocation that failed */
  sprue_block small[SPRUE_SMALL];   /* `live` of a call, until it holds more */
  char message[256];           /* this thread's last failure, for _sprue_error_<kernel>() */
} sprue_state;

static SPRUE_TLS sprue_state sprue_tls;

static SPRUE_NORETURN void sprue_fail(sprue_state *st, uint64_t bytes) {
  if (!st->env) {   /* allocated outside a call of _mlir_ciface_<kernel>: nowhere to return to */
    fprintf(stderr, "sprue: the compiled code could not allocate %llu bytes\n", (unsigned long long)bytes);
    abort();
  }
  st->failed = bytes ? bytes : 1;
  siglongjmp(*st->env, 1);
}

static int sprue_grow(sprue_state *st) {
  size_t cap = st->cap ? 2 * st->cap : SPRUE_SMALL;
  sprue_block *live = malloc(cap * sizeof *live);
  if (!live) return 0;
  if (st->n) memcpy(live, st->live, st->n * sizeof *live);
  if (st->live != st->small) free(st->live);
  st->live = live;
  st->cap = cap;
  return 1;
}

/* Records p (`bytes` long) as the running call's; fails the call when there is no room to. */
static void *sprue_record(sprue_state *st, void *p, uint64_t bytes) {
  if (st->env) {
    if (st->n == st->cap && !sprue_grow(st)) {
      free(p);
      sprue_fail(st, bytes);
    }
    st->live[st->n].p = p;
    st->live[st->n++].bytes = bytes;
  }
  return p;
}

/* p, just allocated with `bytes` bytes: fails the call when it is null, else records it. */
static void *sprue_keep(void *p, uint64_t bytes) {
  sprue_state *st = &sprue_tls;
  if (!p) {
    if (!bytes) return p;   /* malloc(0) may return NULL: nothing may be stored through it */
    sprue_fail(st, bytes);
  }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (bytes >= @HUGE@) {   /* transparent huge pages for the page-aligned inside of big blocks */
    uintptr_t a = (uintptr_t)p, start = (a + 4095) & ~(uintptr_t)4095, end = (a + bytes) & ~(uintptr_t)4095;
    if (end > start) madvise((void *)start, end - start, MADV_HUGEPAGE);
  }
#endif
  return sprue_record(st, p, bytes);
}

/* p's byte count (0 where unknown: outside a call), and p no longer recorded. */
static uint64_t sprue_forget(sprue_state *st, void *p) {
  size_t i = st->n;
  uint64_t bytes;
  if (!st->env) return 0;
  while (i-- > 0)   /* from the end: buffers are mostly freed in the reverse order of allocation */
    if (st->live[i].p == p) {
      bytes = st->live[i].bytes;
      st->live[i] = st->live[--st->n];
      return bytes;
    }
  return 0;
}

/* Big blocks the compiled code freed, kept for its next allocation of about the same size (the
   next call's temporaries, mostly). glibc serves blocks above its mmap threshold with a fresh
   mmap and gives them back on free (or trims its heap once the free top passes twice that
   threshold), so each call of a kernel with a few MiB of temporaries touched fresh pages: their
   faults and the kernel's zeroing of every page. Multi-head attention (8 x 256 x 64, 13 MiB of
   temporaries) called in turn with another function: 14 ms a call, 6.8 ms with glibc's
   thresholds raised (MALLOC_MMAP_THRESHOLD_), which is what this cache does for the compiled
   code alone. From 64 KiB, not only above glibc's mmap threshold: freeing a chunk of 64 KiB or
   more (glibc's FASTBIN_CONSOLIDATION_THRESHOLD) is what makes glibc trim its heap's top, so a
   kernel with a dozen 64-128 KiB temporaries (per-example gradients, 512 x 64 f32) gave them back
   and faulted them in again on every call: ~130 page faults and 3 brk a call, 645 us a call
   against 425 with them cached (which of the two a process got depended on its heap's layout).
   Per library (its runtime is linked into each): at most SPRUE_CACHE_SLOTS blocks of
   SPRUE_CACHE_MIN bytes and more, SPRUE_CACHE_BYTES in all; the oldest leaves first. A block is an
   ordinary malloc'ed one, so a result handed out of the cache is freed with free() as any other.
   The lock is only tried: a thread that finds it taken (or a child forked while it was taken)
   goes to malloc and free as if the cache were full. */
#define SPRUE_CACHE_SLOTS 32
#define SPRUE_CACHE_MIN ((uint64_t)64 << 10)
#define SPRUE_CACHE_BYTES ((uint64_t)64 << 20)

static sprue_block sprue_cache[SPRUE_CACHE_SLOTS];   /* oldest first */
static size_t sprue_cached;
static uint64_t sprue_cached_bytes;
static atomic_flag sprue_cache_lock = ATOMIC_FLAG_INIT;

/* A cached block of at least `bytes` (at most an eighth more) aligned to `align`, recorded as the
   running call's, or NULL. */
static void *sprue_take(size_t align, uint64_t bytes) {
  sprue_block got = {NULL, 0};
  size_t i, best = SPRUE_CACHE_SLOTS;
  if (bytes < SPRUE_CACHE_MIN || atomic_flag_test_and_set_explicit(&sprue_cache_lock, memory_order_acquire))
    return NULL;
  for (i = 0; i < sprue_cached; ++i)
    if (sprue_cache[i].bytes >= bytes && sprue_cache[i].bytes - bytes <= bytes / 8
        && (uintptr_t)sprue_cache[i].p % align == 0
        && (best == SPRUE_CACHE_SLOTS || sprue_cache[i].bytes < sprue_cache[best].bytes))
      best = i;
  if (best < SPRUE_CACHE_SLOTS) {
    got = sprue_cache[best];
    sprue_cached_bytes -= got.bytes;
    memmove(&sprue_cache[best], &sprue_cache[best + 1], (--sprue_cached - best) * sizeof *sprue_cache);
  }
  atomic_flag_clear_explicit(&sprue_cache_lock, memory_order_release);
  return got.p ? sprue_record(&sprue_tls, got.p, got.bytes) : NULL;
}

/* Frees p (`bytes` long; 0: unknown) or keeps it in the cache, freeing older blocks for room. */
static void sprue_put(void *p, uint64_t bytes) {
  sprue_block out[SPRUE_CACHE_SLOTS];
  size_t i, gone = 0;
  if (bytes < SPRUE_CACHE_MIN || bytes > SPRUE_CACHE_BYTES / 2
      || atomic_flag_test_and_set_explicit(&sprue_cache_lock, memory_order_acquire)) {
    free(p);
    return;
  }
  while (sprue_cached && (sprue_cached == SPRUE_CACHE_SLOTS || sprue_cached_bytes + bytes > SPRUE_CACHE_BYTES))
    sprue_cached_bytes -= sprue_cache[gone].bytes, out[gone] = sprue_cache[gone], ++gone, --sprue_cached;
  if (gone) memmove(sprue_cache, sprue_cache + gone, sprue_cached * sizeof *sprue_cache);
  sprue_cache[sprue_cached].p = p;
  sprue_cache[sprue_cached++].bytes = bytes;
  sprue_cached_bytes += bytes;
  atomic_flag_clear_explicit(&sprue_cache_lock, memory_order_release);
  for (i = 0; i < gone; ++i) free(out[i].p);   /* outside the lock */
}

#if defined(__GNUC__) || defined(__clang__)
__attribute__((destructor))   /* the library is unloaded: its cached blocks go back to malloc */
#endif
static void sprue_cache_release(void) {
  while (sprue_cached) free(sprue_cache[--sprue_cached].p);
  sprue_cached_bytes = 0;
}

/* How many blocks and bytes the cache holds (for tests of the runtime linked into a host). */
SPRUE_HIDDEN uint64_t _sprue_cache_held(uint64_t *bytes) {
  *bytes = sprue_cached_bytes;
  return sprue_cached;
}

SPRUE_HIDDEN void *_sprue_aligned_alloc(size_t align, size_t bytes) {
  void *p = sprue_take(align, bytes);
  return p ? p : sprue_keep(aligned_alloc(align, bytes), bytes);
}

SPRUE_HIDDEN void *_sprue_malloc(size_t bytes) {
  void *p = sprue_take(16, bytes);
  return p ? p : sprue_keep(malloc(bytes), bytes);
}

SPRUE_HIDDEN void *_sprue_calloc(size_t count, size_t size) {
  uint64_t bytes = size && count > SIZE_MAX / size ? UINT64_MAX : (uint64_t)count * size;
  return sprue_keep(calloc(count, size), bytes);
}

SPRUE_HIDDEN void *_sprue_realloc(void *old, size_t bytes) {
  sprue_state *st = &sprue_tls;
  uint64_t old_bytes = old ? sprue_forget(st, old) : 0;   /* before: `old` may be gone after */
  void *p = realloc(old, bytes);
  if (!p && bytes) {   /* `old` is still allocated: recorded again, freed with the call's others */
    if (old) sprue_record(st, old, old_bytes);
    sprue_fail(st, bytes);
  }
  return p ? sprue_keep(p, bytes) : p;
}

SPRUE_HIDDEN void _sprue_free(void *p) {
  if (p) sprue_put(p, sprue_forget(&sprue_tls, p));
}

SPRUE_HIDDEN const char *_sprue_last_error(void) { return sprue_tls.message; }

/* A call's state before it began (that of a call it runs inside of: none does, kept for safety). */
typedef struct {
  sigjmp_buf *env;
  sprue_block *live;
  size_t n, cap;
} sprue_outer;

/* Ends a call: after a failed allocation (`failed_in` names the kernel), frees every buffer the
   call allocated and records the message; restores the state before the call. The status. */
static int64_t sprue_end(sprue_state *st, const char *failed_in, const sprue_outer *outer) {
  uint64_t failed = 0;
  if (failed_in) {
    size_t i;
    double size;
    const char *unit = "bytes";
    failed = st->failed;
    for (i = 0; i < st->n; ++i) free(st->live[i].p);
    size = (double)failed;
    if (size >= 1024.0) { size /= 1024.0; unit = "KiB"; }
    if (size >= 1024.0) { size /= 1024.0; unit = "MiB"; }
    if (size >= 1024.0) { size /= 1024.0; unit = "GiB"; }
    if (size >= 1024.0) { size /= 1024.0; unit = "TiB"; }
    if (size >= 1024.0) { size /= 1024.0; unit = "PiB"; }
    snprintf(st->message, sizeof st->message,
             "%s: could not allocate %llu bytes (%.1f %s): not enough memory (or a memory limit: ulimit -v,"
             " cgroups); every buffer of the call was freed", failed_in, (unsigned long long)failed, size, unit);
  }
  if (st->live && st->live != st->small) free(st->live);
  st->env = outer->env;
  st->live = outer->live;
  st->n = outer->n;
  st->cap = outer->cap;
  return (int64_t)failed;
}

#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline))   /* `st` stays an argument: not looked up again (a TLS call) after sigsetjmp */
#endif
static int64_t sprue_run(sprue_state *st, void (*thunk)(void *), void *args, const char *kernel) {
  sigjmp_buf env;
  const sprue_outer outer = {st->env, st->live, st->n, st->cap};   /* not changed after sigsetjmp */
  st->env = &env;
  st->n = 0;
  st->live = outer.env ? NULL : st->small;
  st->cap = outer.env ? 0 : SPRUE_SMALL;
  if (sigsetjmp(env, 0) == 0) {
    thunk(args);
    return sprue_end(st, NULL, &outer);
  }
  return sprue_end(st, kernel, &outer);
}

/* Runs thunk(args) (a kernel's body). 0, or the byte count of the allocation that failed, once
   every buffer the call had allocated (its results too) was freed. */
SPRUE_HIDDEN int64_t _sprue_call(void (*thunk)(void *), void *args, const char *kernel) {
  return sprue_run(&sprue_tls, thunk, args, kernel);
}
""".replace("@HUGE@", str(HUGE_PAGE_THRESHOLD))


def runtime_source(directory: Path, name: str) -> Path:
    """Writes the runtime's C source for kernel `name` into directory; its path."""
    path = directory / f"{name}.{RUNTIME_SOURCE}"
    path.write_text(RUNTIME_C)
    return path


# -- the entry points ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    name: str                  # the MLIR function: MLIR's C interface is _mlir_ciface_<name>
    params: tuple[str, ...]    # LLVM types of its parameters (descriptor pointers for sprue's kernels)


_CIFACE = re.compile(r"^define (?:[a-z_]+ )*void @_mlir_ciface_([A-Za-z_][A-Za-z0-9_]*)\(([^)]*)\)", re.MULTILINE)
_PARAM_TYPES = frozenset({"ptr", "i1", "i8", "i16", "i32", "i64", "half", "bfloat", "float", "double"})


def entry_points(llvm_ir: str) -> list[Entry]:
    """The C-interface functions MLIR defined in llvm_ir (as translated from the LLVM dialect).
    One whose parameters are not plain scalars or pointers (MLIR's C interface never has other)
    is left out: it is not wrapped (its failed allocations then abort with a message)."""
    out = []
    for m in _CIFACE.finditer(llvm_ir):
        params = tuple(p.split()[0] for p in m.group(2).split(",") if p.strip())
        if all(t in _PARAM_TYPES for t in params):
            out.append(Entry(m.group(1), params))
    return out


def _wrapper_ir(e: Entry) -> str:
    # the parameters' struct named once: written out in each of its 2n getelementptrs, the text
    # was O(n^2) (5,000 arguments: 40 MB, seconds of LLVM's parser)
    struct = f"%_sprue_args_{e.name}"
    params = ", ".join(f"{t} %a{i}" for i, t in enumerate(e.params))
    stores = "".join(f"  %p{i} = getelementptr inbounds {struct}, ptr %args, i32 0, i32 {i}\n"
                     f"  store {t} %a{i}, ptr %p{i}\n" for i, t in enumerate(e.params))
    loads = "".join(f"  %p{i} = getelementptr inbounds {struct}, ptr %args, i32 0, i32 {i}\n"
                    f"  %a{i} = load {t}, ptr %p{i}\n" for i, t in enumerate(e.params))
    name_bytes = e.name.encode() + b"\0"
    return (f"{struct} = type {{ {', '.join(e.params)} }}\n"
            f"@_sprue_name_{e.name} = private unnamed_addr constant [{len(name_bytes)} x i8] c\"{e.name}\\00\"\n\n"
            f"define i64 @_mlir_ciface_{e.name}({params}) {{\n"
            f"  %args = alloca {struct}\n{stores}"
            f"  %status = call i64 @_sprue_call(ptr @_sprue_thunk_{e.name}, ptr %args, ptr @_sprue_name_{e.name})\n"
            f"  ret i64 %status\n}}\n\n"
            f"define internal void @_sprue_thunk_{e.name}(ptr %args) {{\n{loads}"
            f"  call void @_sprue_body_{e.name}({params})\n  ret void\n}}\n\n"
            f"define ptr @_sprue_error_{e.name}() {{\n"
            f"  %m = call ptr @_sprue_last_error()\n  ret ptr %m\n}}\n" + _packed_ir(e))


def _packed_ir(e: Entry) -> str:
    """`int64_t _sprue_packed_<name>(void **args)`: the checked entry taking its parameters as one
    array (the struct _wrapper_ir stores them in, when every parameter is a pointer). A caller that
    cannot spell a call with thousands of parameters calls this (the Python runtime's C caller,
    runtime/fastcall_c.py, beyond its MAX_ARGS)."""
    if any(t != "ptr" for t in e.params):
        return ""
    return (f"\ndefine i64 @_sprue_packed_{e.name}(ptr %args) {{\n"
            f"  %status = call i64 @_sprue_call(ptr @_sprue_thunk_{e.name}, ptr %args, ptr @_sprue_name_{e.name})\n"
            f"  ret i64 %status\n}}\n")


def add_entry_wrappers(llvm_ir: str) -> str:
    """llvm_ir with each C-interface function `_mlir_ciface_<name>` made the internal
    `_sprue_body_<name>` and a checked `_mlir_ciface_<name>` (see the module docstring) added."""
    entries = entry_points(llvm_ir)
    if not entries:
        return llvm_ir
    for e in entries:
        # alwaysinline: into the thunk before O3 (backend._inline_entry_points), else O3's
        # ArgumentPromotion rewrites the body's descriptor pointers one by one (1.1 s of a
        # 1,000-argument kernel's LLVM time), only for its inliner to put the body in the thunk
        llvm_ir = re.sub(rf"^define (?:[a-z_]+ )*void @_mlir_ciface_{e.name}\((.*)\)(.*)\{{$",
                         rf"define internal void @_sprue_body_{e.name}(\1)\2alwaysinline {{", llvm_ir, count=1,
                         flags=re.MULTILINE)
        llvm_ir = llvm_ir.replace(f"@_mlir_ciface_{e.name}(", f"@_sprue_body_{e.name}(")
    return (llvm_ir + "\n" + "\n".join(_wrapper_ir(e) for e in entries)
            + "\ndeclare hidden i64 @_sprue_call(ptr, ptr, ptr)\ndeclare hidden ptr @_sprue_last_error()\n")


# -- after optimization --------------------------------------------------------------------------
def check_allocations(mod) -> None:
    """In the optimized llvmlite module `mod`: the C library's allocation functions renamed to the
    runtime's checked ones (CHECKED); a CompileError for one that cannot be checked (UNCHECKED)."""
    for f in mod.functions:
        if not f.is_declaration:
            continue
        if f.name in UNCHECKED:
            raise CompileError(f"internal error: the compiled code calls {f.name}, whose allocations sprue"
                               f" cannot check", stage="llvm")
        checked = CHECKED.get(f.name)
        if checked is not None:
            f.name = checked
            f.visibility = "hidden"   # the library's own copy, called directly (no PLT)


_ALLOCA = re.compile(r"^\s*(%[-\w.$]+) = alloca (.*)$", re.MULTILINE)
_SCALAR_BYTES = {"half": 2, "bfloat": 2, "float": 4, "double": 8, "fp128": 16, "x86_fp80": 16, "ptr": 8}


def split_top_level(text: str) -> list[str]:
    """text split at the commas outside brackets (LLVM IR and LLVM dialect types, parameter lists)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "[{<(":
            depth += 1
        elif c in "]}>)":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def type_bytes(t: str) -> int:
    """An upper bound of the size of an LLVM type (struct fields each rounded up to 8 bytes)."""
    t = t.strip()
    m = re.fullmatch(r"[\[<]\s*(\d+)\s+x\s+(.*)[\]>]", t)
    if m:
        return int(m.group(1)) * type_bytes(m.group(2))
    if t.startswith(("{", "<{")):
        inner = t.strip("<>").strip()[1:-1]
        return sum(-(-type_bytes(f) // 8) * 8 for f in split_top_level(inner) if f)
    m = re.fullmatch(r"i(\d+)", t)
    if m:
        return -(-int(m.group(1)) // 8)
    return _SCALAR_BYTES.get(t, 8)


def check_stack(optimized_ir: str) -> None:
    """A CompileError for an alloca of dynamic size or of more than MAX_STACK_BUFFER bytes."""
    if " alloca " not in optimized_ir:
        return
    for m in _ALLOCA.finditer(optimized_ir):
        parts = [p for p in split_top_level(m.group(2)) if not p.startswith(("align ", "addrspace("))]
        size = type_bytes(parts[0].removeprefix("inalloca ").removeprefix("swifterror "))
        if len(parts) > 1:
            count = parts[1].split()[-1]
            if not count.lstrip("-").isdigit():
                raise CompileError(f"internal error: the compiled code has a stack buffer of a size known only at"
                                   f" run time ({m.group(0).strip()}); it must be allocated (and checked)",
                                   stage="llvm")
            size *= int(count)
        if size > MAX_STACK_BUFFER:
            raise CompileError(f"internal error: the compiled code has a stack buffer of {size} bytes"
                               f" ({m.group(0).strip()}), more than {MAX_STACK_BUFFER}: it could overflow the stack",
                               stage="llvm")
