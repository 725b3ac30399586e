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
        if _chosen is not None:
            pool.set(_chosen)
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


def _default_threads() -> int:
    """The pool's own default (parallel_runtime.py's sprue_default_threads), for a process that
    has loaded no library yet: SPRUE_NUM_THREADS (as C's strtol reads it), else the CPUs this
    process may use; 1 to 256."""
    env = os.environ.get("SPRUE_NUM_THREADS", "")
    if env:
        digits = re.match(r"\s*[+-]?\d+", env)
        n = int(digits.group()) if digits else 0
    else:
        n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    return max(1, min(n, MAX_THREADS))


def get_num_threads() -> int:
    """The number of threads (the calling one included) parallel loops of compiled code use: what
    set_num_threads chose, else the default (SPRUE_NUM_THREADS, or the CPUs this process may use)."""
    with _lock:
        if _chosen is not None:
            return _chosen
        if _owner is not None and _owner.get is not None:
            return int(_owner.get())
    return _default_threads()


__all__ = ["DECLS", "get_num_threads", "register", "set_num_threads"]
