"""Files sprue keeps for itself between processes (the compile cache's libraries, the C compilers'
answers about names, LLVM's target tables, the allocation runtime's object), all under one folder,
cache_dir(): read only when this user alone may have written them and their folder -- a planted
answer could let a bad name or CPU through, a planted object would run as this user -- and written
atomically, so a reader never sees half a file.

The folder is $SPRUE_CACHE_DIR, else $XDG_CACHE_HOME/sprue, else ~/.cache/sprue; none (nothing is
kept) when SPRUE_CACHE_DIR is "off" (or 0, false, no, none, disabled) or SPRUE_NO_CACHE is set to
anything but "" / "0"."""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Callable

__all__ = ["cache_dir", "only_mine", "read_private", "write_private"]

_OFF = {"off", "0", "false", "no", "none", "disable", "disabled"}


def cache_dir() -> Path | None:
    """The folder of the files sprue keeps, from the environment, or None when keeping is off."""
    no = os.environ.get("SPRUE_NO_CACHE", "").strip()
    if no and no != "0":
        return None
    env = os.environ.get("SPRUE_CACHE_DIR", "").strip()
    if env:
        return None if env.lower() in _OFF else Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "sprue"


def only_mine(path: str | os.PathLike, kind: Callable[[int], bool] = stat.S_ISREG, *, or_root: bool = False) -> bool:
    """`path` is of `kind` (not a symlink), owned by this user (or, `or_root`, by root: what an
    installation made), and writable by no one else."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    owner_ok = not hasattr(os, "getuid") or st.st_uid == os.getuid() or or_root and st.st_uid == 0
    return kind(st.st_mode) and owner_ok and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def read_private(path: str | os.PathLike) -> bytes | None:
    """The bytes of `path` when it and its folder are only_mine; else (or unreadable) None."""
    path = Path(path)
    if not (only_mine(path.parent, stat.S_ISDIR) and only_mine(path)):
        return None
    try:
        return path.read_bytes()
    except OSError:
        return None


def write_private(path: str | os.PathLike, data: bytes) -> bool:
    """Writes `data` to `path` atomically, making its folder (0700) when missing; False, and nothing
    written, when the folder is not only_mine or the disk refuses (read-only, full): what was to be
    kept is then only not kept."""
    path = Path(path)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return False
    if not only_mine(path.parent, stat.S_ISDIR):
        return False
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return True
    except OSError:
        Path(tmp).unlink(missing_ok=True)
        return False
