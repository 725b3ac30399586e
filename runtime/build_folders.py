"""Folders sprue builds in: a private folder per build, deleted when done, and by the next process
when the one that made it was killed.

Every compilation outside the compile cache (qjit with the cache off, sprue.load of StableHLO,
`sprue compile`'s link step) builds in `build_folder(name)`, a folder inside this process's build
root `<system temp>/sprue-build-*`; the compile cache builds its entries in staging folders made by
`locked_folder` too (frontend/api/compile_cache.py).

Leftovers. A folder being built in has a lock file `<folder>.lock` beside it, flock'ed for as long
as its process lives. The kernel releases the lock when the process dies, however it dies, so
`sweep` deletes the folders whose lock nobody holds (pids would not do: they are reused, and mean
nothing across pid namespaces or hosts sharing a folder). A process removes its own at exit.

The runtime is the layer that holds this because the lowering (the runtime object's compilation)
and the frontend both build in these folders, and neither may import the other's modules for it.
"""
from __future__ import annotations

import atexit
import errno
import fcntl
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from pathlib import Path

__all__ = ["BUILD_ROOT_PREFIX", "LazyLogger", "build_folder", "folder_name", "locked_folder", "release_folder",
           "sweep"]


class LazyLogger:
    """logging.getLogger(name), imported at the first message: a cache hit logs nothing and should
    not pay for importing logging (~5 ms)."""

    def __init__(self, name: str):
        self.name = name

    def __getattr__(self, level: str):
        import logging  # deferred: see the class docstring
        return getattr(logging.getLogger(self.name), level)


log = LazyLogger("sprue.compile_cache")   # the cache's folders are the most of what it reports on

_STALE_SECONDS = 24 * 3600   # a folder without a lock file (no flock there) older than this is abandoned
_held: dict[str, tuple[int, str]] = {}   # lock file -> (its fd, the folder it guards): ours
_held_lock = threading.Lock()
BUILD_ROOT_PREFIX = "sprue-build-"
_LOCK = ".lock"


def locked_folder(parent: str | os.PathLike, prefix: str) -> Path:
    """A new private folder `<parent>/<prefix><random>` with the lock file `<that>.lock` beside it,
    flock'ed by this process until release_folder (or its end). The lock comes first: a visible
    folder always has its lock, and a visible lock is either held or abandoned (a sweeper deletes
    only what it has locked itself, and a creator that finds its lock file deleted starts again)."""
    for _ in range(100):
        fd, lock = tempfile.mkstemp(prefix=prefix, suffix=_LOCK, dir=parent)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:        # a sweeper took it in the instant before us: it deletes it
            os.close(fd)
            continue
        except OSError as e:           # no flock on this file system: swept by age only
            log.debug("sprue: cannot lock %s (%s)", lock, e)
        if os.fstat(fd).st_nlink == 0:   # a sweeper deleted it before we locked it
            os.close(fd)
            continue
        folder = lock[:-len(_LOCK)]
        with _held_lock:
            _held[lock] = (fd, folder)
        try:
            os.mkdir(folder, 0o700)
        except OSError:
            _release(lock)
            raise
        return Path(folder)
    raise OSError(errno.EAGAIN, f"cannot make a locked folder in {parent}")


def release_folder(folder: str | os.PathLike) -> None:
    """Delete a folder of locked_folder (if still there: it may have been renamed away), then its
    lock file, then let go of the lock."""
    _release(os.fspath(folder) + _LOCK)


def _release(lock: str) -> None:
    with _held_lock:
        fd, folder = _held.pop(lock, (None, None))
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
    Path(lock).unlink(missing_ok=True)
    if fd is not None:
        os.close(fd)


def _abandoned(lock: str) -> int | None:
    """An fd now holding `lock` when no live process holds it (the caller deletes what it guards
    and closes the fd); None when someone holds it, or it is not there or not ours to open."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # a new open file description: conflicts
    except OSError:                                       # with our own holds too
        os.close(fd)
        return None
    return fd


def sweep(parent: str | os.PathLike, prefix: str = "") -> None:
    """Delete this user's folders `<parent>/<prefix>*` (and their locks) whose process is gone;
    a folder without a lock (made where flock fails, or by an older sprue) once it is a day old."""
    uid, now = os.geteuid(), time.time()
    try:
        items = {e.name: e for e in os.scandir(parent) if e.name.startswith(prefix)}
    except OSError:
        return
    for name, item in items.items():
        try:
            st = item.stat(follow_symlinks=False)
        except OSError:
            continue   # deleted meanwhile
        if st.st_uid != uid:
            continue
        if name.endswith(_LOCK):
            fd = _abandoned(item.path)
            if fd is not None:
                shutil.rmtree(item.path[:-len(_LOCK)], ignore_errors=True)
                Path(item.path).unlink(missing_ok=True)   # (another sweeper may have been first)
                os.close(fd)
        elif stat.S_ISDIR(st.st_mode) and name + _LOCK not in items and now - st.st_mtime > _STALE_SECONDS:
            shutil.rmtree(item.path, ignore_errors=True)


@atexit.register
def _remove_held_at_exit() -> None:
    for lock in list(_held):
        _release(lock)


def _scratch_root() -> Path:
    """A new folder of this process in the system temp folder, for compilations outside the
    cache: deleted at exit; one left by a killed process is deleted by the next process that
    makes one."""
    tmp = tempfile.gettempdir()
    sweep(tmp, BUILD_ROOT_PREFIX)
    return locked_folder(tmp, BUILD_ROOT_PREFIX)


_build_root: Path | None = None   # this process's _scratch_root(), made at its first build
_build_root_lock = threading.Lock()


def folder_name(name: str) -> str:
    """`name` (a Python function's, any characters, any length) as part of a file name: other
    characters than letters, digits, `_`, `.` and `-` become `_`, and at most 64 are kept."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:64].lstrip(".") or "build"


def build_folder(name: str) -> Path:
    """A new folder `<name>-*` for one build outside the cache, in this process's build root (one
    per process: deleted at exit, swept by the next process after a kill). Every compilation
    outside the cache builds in one: qjit, sprue.load of StableHLO, `sprue compile`."""
    global _build_root
    with _build_root_lock:
        if _build_root is None or not _build_root.is_dir():
            _build_root = _scratch_root()
        return Path(tempfile.mkdtemp(prefix=f"{folder_name(name)}-", dir=_build_root))


def _forget_after_fork() -> None:
    """In a forked child: the parent's locks, folders and lock objects are not the child's (the
    parent deletes its folders; a lock another thread held at the fork would stay held here); the
    child makes its own build root."""
    global _held_lock, _build_root, _build_root_lock
    _held_lock = threading.Lock()
    _build_root, _build_root_lock = None, threading.Lock()
    for fd, _ in _held.values():
        os.close(fd)   # the parent's lock stays: flock belongs to the shared open file description
    _held.clear()


os.register_at_fork(after_in_child=_forget_after_fork)
