"""How many threads the parallel loops of compiled code use (lowering/parallel.py), on one pool.

Every library carries the work-sharing pool (lowering/parallel_runtime.py), but a process runs
one: the first library loaded becomes the pool's owner, kept loaded for the life of the process
(its code runs the others' loops, and must not go away under them); each later one is told, at
load, to send its parallel loops and its thread count to the owner's pool (its `sprue_use_pool`),
and never starts a thread of its own. Libraries are loaded with RTLD_LOCAL (cffi), where each
would otherwise bind to its own pool and start as many workers as there are cores: two kernels
used in turn would keep two sets of threads, both waking for every job.

The count: SPRUE_NUM_THREADS, else the CPUs this process may run on, read by the pool at its first
parallel loop; `set_num_threads(n)` sets it, for the libraries loaded now and later; 1 means no
thread is ever started. `get_num_threads()` says the count in force (before any library is loaded,
the default as the pool will read it).

In Python, OMP_NUM_THREADS stands in for an unset SPRUE_NUM_THREADS (its first number): the
convention by which engines that run several tasks per machine keep each task's libraries to its
share of the cores. Dask's nanny starts every worker process with OMP_NUM_THREADS=1 (the
`distributed.nanny.pre-spawn-environ` setting; the worker's own task threads use the cores), and
Ray does the same for its tasks; OpenBLAS, MKL and PyTorch read it. So a kernel inside a Dask
worker runs on the worker's task thread alone, and as many kernels run at once as the worker has
threads, not threads x cores. SPRUE_NUM_THREADS, or set_num_threads, overrides it. (A C host's
library reads SPRUE_NUM_THREADS only: lowering/parallel_runtime.py.)
"""
from __future__ import annotations

import os
import re
import threading
import weakref
from typing import Any

from sprue.base.errors import SprueValueError

SETTER = "sprue_set_num_threads"
GETTER = "sprue_get_num_threads"
PARALLEL_FOR = "_sprue_parallel_for"
USE_POOL = "sprue_use_pool"
DECLS = (f"int {SETTER}(int n);\nint {GETTER}(void);\n"
         f"void {PARALLEL_FOR}(void *task, void *ctx, int64_t n, int64_t grain);\n"
         f"int {USE_POOL}(void (*parallel_for)(void *, void *, int64_t, int64_t), int (*set)(int), int (*get)(void));\n")

# (parallel_runtime.py's SPRUE_MAX_THREADS)
MAX_THREADS = 256
_lock = threading.Lock()


def _after_fork_in_child() -> None:
    """fork() copies only the calling thread: a lock another thread held (loading a library while
    the main thread forked) would stay held in the child for ever, and its first load would hang."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
_chosen: int | None = None
_owner: "_Pool | None" = None   # the pool every library's loops run on (its library kept loaded)
# Libraries built before sprue_use_pool existed run their own pools: each is told the count.
_own_pools: "weakref.WeakSet[_Pool]" = weakref.WeakSet()


class _Pool:
    """A loaded library's pool: its controls and its entry points (its cffi library object keeps
    it loaded)."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self.set = getattr(lib, SETTER)
        self.get = getattr(lib, GETTER, None)
        try:   # (cffi function pointers: passed as they are to another library's sprue_use_pool)
            self.use_pool = getattr(lib, USE_POOL)
            self.entries = (getattr(lib, PARALLEL_FOR), self.set, getattr(lib, GETTER))
        except AttributeError:   # a library built before sprue_use_pool: its pool cannot be shared
            self.use_pool, self.entries = None, ()

    def forward_to(self, owner: "_Pool") -> bool:
        """Whether this library's loops and count now go to `owner`'s pool (sprue_use_pool)."""
        return self.use_pool is not None and self.use_pool(*owner.entries) == 0


def register(lib: Any) -> Any:
    """Called for each library loaded (`lib`: cffi, with DECLS): the first with a pool that can be
    shared becomes the owner, later ones send their parallel loops and thread count to it. The
    library's pool (kept by the caller as long as the library is) or None."""
    global _owner
    try:
        pool = _Pool(lib)
    except AttributeError:   # built before every library carried a pool: none
        return None
    with _lock:
        if _owner is None and pool.use_pool is not None:
            _owner = pool
        elif _owner is not None and pool.use_pool is not None and pool.entries[0] == _owner.entries[0]:
            return _owner   # the owner's library opened again (dlopen hands back the loaded one)
        elif _owner is not None and pool.forward_to(_owner):
            return pool
        else:   # an older library, or one refused (sprue_use_pool): a pool of its own
            _own_pools.add(pool)
        count = _chosen if _chosen is not None else _omp_count()
        if count is not None:
            pool.set(count)
    return pool


def set_num_threads(n: int) -> None:
    """The number of threads (the calling one included) parallel loops of compiled code use, in
    every library loaded now or later; 1: none is started."""
    global _chosen
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise SprueValueError(f"set_num_threads(n): n must be a positive int, got {n!r}")
    with _lock:
        _chosen = n
        for pool in [_owner, *_own_pools]:
            if pool is not None:
                pool.set(n)


def _leading_int(text: str) -> int:
    """The number at the start of `text` as C's strtol reads it (0 when there is none)."""
    digits = re.match(r"\s*[+-]?\d+", text)
    return int(digits.group()) if digits else 0


def _omp_count() -> int | None:
    """OMP_NUM_THREADS's count (its first number, 1 to 256) when SPRUE_NUM_THREADS is unset and it
    is set to a number; None otherwise (module docstring)."""
    omp = os.environ.get("OMP_NUM_THREADS", "")
    if os.environ.get("SPRUE_NUM_THREADS", "") or _leading_int(omp) < 1:
        return None
    return min(_leading_int(omp), MAX_THREADS)


def _default_threads() -> int:
    """The count for a process that has loaded no library yet, as the first library will start
    with it: SPRUE_NUM_THREADS (as the pool's sprue_default_threads reads it: C's strtol), else
    OMP_NUM_THREADS (_omp_count, set at load), else the CPUs this process may use; 1 to 256."""
    env = os.environ.get("SPRUE_NUM_THREADS", "")
    if env:
        n = _leading_int(env)
    elif (omp := _omp_count()) is not None:
        n = omp
    else:
        n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    return max(1, min(n, MAX_THREADS))


def get_num_threads() -> int:
    """The number of threads (the calling one included) parallel loops of compiled code use: what
    set_num_threads chose, else the default (SPRUE_NUM_THREADS, else OMP_NUM_THREADS, else the CPUs
    this process may use)."""
    with _lock:
        if _chosen is not None:
            return _chosen
        if _owner is not None and _owner.get is not None:
            return int(_owner.get())
    return _default_threads()


__all__ = ["DECLS", "get_num_threads", "register", "set_num_threads"]
