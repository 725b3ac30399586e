"""How many threads the parallel loops of compiled code use (lowering/parallel.py).

Each library with parallel loops carries the pool (lowering/parallel_runtime.py) and reads
SPRUE_NUM_THREADS, else the CPUs this process may run on, at its first parallel loop.
`set_num_threads(n)` sets the count for every library this process has loaded, and for those it
loads later; 1 means no thread is ever started.
"""
from __future__ import annotations

import threading
import weakref
from typing import Any

from sprue.base.errors import SprueValueError

SETTER = "sprue_set_num_threads"
DECLS = f"int {SETTER}(int n);\n"

_lock = threading.Lock()
_chosen: int | None = None
_libraries: "weakref.WeakSet[Any]" = weakref.WeakSet()


class _Pool:
    """A loaded library's pool controls (its cffi library object keeps it loaded)."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self.set = getattr(lib, SETTER)


def register(lib: Any) -> Any:
    """Called for each library loaded: one with a pool gets the chosen count; its controls (kept by
    the caller as long as the library is) or None."""
    try:
        pool = _Pool(lib)
    except AttributeError:   # no parallel loops: no pool
        return None
    with _lock:
        _libraries.add(pool)
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
        for pool in list(_libraries):
            pool.set(n)


def get_num_threads() -> int | None:
    """The count set_num_threads chose (None: each library's default, SPRUE_NUM_THREADS or the
    CPUs this process may use)."""
    return _chosen


__all__ = ["DECLS", "get_num_threads", "register", "set_num_threads"]
