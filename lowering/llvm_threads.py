"""A program's LLVM modules optimized and emitted at once, one per thread, each in its own context.

llvmlite serializes every call into LLVM behind one process-wide lock (binding/ffi.py's
_LLVMLock), because the modules it parses share LLVM's global context by default. LLVM itself
compiles modules concurrently when each thread has an LLVMContext and a TargetMachine of its own
and nothing else is shared but read-only state (LLVM's threading model: ThinLTO's backends and
ORC's ConcurrentIRCompiler work this way), and llvmlite's calls release the GIL (ctypes). So for
the time of a section (`run`), the caller holds llvmlite's lock (no other thread of the process
enters LLVM), and the section's worker threads, each parsing into a context created for it and
emitting with a target machine of its slot, pass llvmlite's lock by (`_SectionLock`). XLA's CPU
backend compiles its kernels in parallel the same way (its split codegen). The modules come from
module_split.py (noinline functions: the nests and parts of a deep program); with two cores, a
100-layer training step's LLVM time went from 67 to ~40 ms.

Only with more than one CPU to run on, and only when llvmlite's lock is the one this was written
against with no callbacks registered on it (a callback runs on every call, on the section's threads
too, and one taking another lock could deadlock against the section; numba registers its event
recorders there, so a process that imported numba compiles its modules one at a time): otherwise
`workers()` is 1 and `run` is a plain loop.
"""
from __future__ import annotations

import gc
import os
import threading
import traceback
from typing import Callable, Sequence, TypeVar

import llvmlite.binding as llvm

__all__ = ["MAX_WORKERS", "llvmlite_lock", "module_text", "run", "workers"]

# Modules of one program are few (module_split.py cuts the kernels into as many parts as workers):
# more threads than this would each get too little to repay its context and target machine.
MAX_WORKERS = 4
T = TypeVar("T")


# llvmlite's LLVMPY_PrintModuleToString sets the process's locale to "C" while it prints (a decimal
# point, whatever the user's locale) and then back to the one it found: two threads printing at once
# can leave "C" for good (the second finds the first's "C" and puts it back), and Python's text I/O
# then decodes ASCII. A section's threads print one at a time.
_printing = threading.Lock()


def module_text(module) -> str:
    """str(module), the module's LLVM IR text, one thread at a time."""
    with _printing:
        return str(module)


class _SectionLock:
    """llvmlite's RLock, passed by the threads of a section in progress (their LLVM work touches
    only their own contexts); every other thread takes it as before."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.exempt: set[int] = set()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if threading.get_ident() in self.exempt:
            return True
        return self.inner.acquire(blocking, timeout)

    def release(self) -> None:
        if threading.get_ident() not in self.exempt:
            self.inner.release()

    __enter__ = acquire

    def __exit__(self, *exc) -> None:
        self.release()


def _install() -> _SectionLock | None:
    """The section lock put in place of llvmlite's own, or None when llvmlite's is not the shape
    this knows (then everything stays serial)."""
    outer = getattr(getattr(getattr(llvm, "ffi", None), "lib", None), "_lock", None)
    inner = getattr(outer, "_lock", None)
    if isinstance(inner, _SectionLock):
        return inner
    if inner is None or not hasattr(outer, "_cblist") or not hasattr(inner, "acquire"):
        return None
    section = _SectionLock(inner)
    outer._lock = section
    return section


_section = _install()


def llvmlite_lock():
    """llvmlite's own lock (the one a fork must wait for: backend.py), or None."""
    if _section is not None:
        return _section.inner
    return getattr(getattr(getattr(getattr(llvm, "ffi", None), "lib", None), "_lock", None), "_lock", None)


def workers() -> int:
    """How many threads a section may use: the CPUs this process may run on, at most MAX_WORKERS;
    1 when llvmlite's lock has callbacks (see the module doc) or could not be taken over."""
    if _section is None or llvm.ffi.lib._lock._cblist:
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_WORKERS))


def _join(helper: threading.Thread, errors: list[BaseException]) -> None:
    """Waits for `helper` to end, even through a KeyboardInterrupt (noted in `errors`, raised by
    run after): its thread is in LLVM without llvmlite's lock, with a target machine the next
    section would use too."""
    while True:
        try:
            helper.join()
            return
        except BaseException as exc:   # noqa: BLE001 (re-raised by run, once every thread has stopped)
            errors.append(exc)


def run(tasks: Sequence[T], work: Callable[[T, object, int], object], threads: int) -> list:
    """[work(task, context, slot) for task in tasks], on up to `threads` threads at once (the
    calling thread one of them), each thread with an LLVM context of its own (created here,
    disposed after) and its slot (0, 1, ...: the target machine it may use). Tasks are taken in
    order, each by the next free thread; the first exception raised is raised here, after every
    thread has stopped. Call with backend's _llvm_lock held."""
    threads = min(threads, len(tasks))
    if threads <= 1 or _section is None:
        return [work(task, llvm.get_global_context(), 0) for task in tasks]
    results: list = [None] * len(tasks)
    errors: list[BaseException] = []
    pending = list(range(len(tasks)))
    taking = threading.Lock()

    def worker(slot: int) -> None:
        me = threading.get_ident()
        _section.exempt.add(me)
        context = None
        try:
            context = llvm.create_context()
            while not errors:
                with taking:
                    if not pending:
                        return
                    i = pending.pop(0)
                results[i] = work(tasks[i], context, slot)
        except BaseException as exc:   # noqa: BLE001 (re-raised by run, on the calling thread)
            # its frames' llvmlite objects (a module of `context`) go now, while the context lives
            traceback.clear_frames(exc.__traceback__)
            errors.append(exc)
        finally:
            if context is not None:
                context.close()   # (while exempt: llvmlite's lock is the section's)
            _section.exempt.discard(me)

    # No collection meanwhile: a finalizer of another context's llvmlite object run on an exempt
    # thread would dispose of it without the lock.
    collecting = gc.isenabled()
    gc.disable()
    try:
        with _section.inner:
            helpers = [threading.Thread(target=worker, args=(slot,), name=f"sprue-llvm-{slot}")
                       for slot in range(1, threads)]
            for helper in helpers:
                helper.start()
            worker(0)
            for helper in helpers:
                _join(helper, errors)
    finally:
        if collecting:
            gc.enable()
    if errors:
        raise errors[0]
    return results
