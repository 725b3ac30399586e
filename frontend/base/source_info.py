"""Where in the user's code an equation was made: the innermost frame outside sprue itself."""
from __future__ import annotations

import os
import sys

# Every folder of the installed package (frontend/, lowering/, runtime/, tools/) counts as sprue's.
_SPRUE_DIRS: tuple[str, ...] = ()


def _sprue_dirs() -> tuple[str, ...]:
    global _SPRUE_DIRS
    if not _SPRUE_DIRS:
        # base/ sits in the package root (frontend/ in a checkout, sprue/ when installed); in a
        # checkout the other stages are its siblings, when installed they are inside it.
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        top = os.path.dirname(package_root)
        _SPRUE_DIRS = (package_root + os.sep,) + tuple(
            os.path.join(top, d) + os.sep for d in ("lowering", "runtime", "tools"))
    return _SPRUE_DIRS


def user_frame_summary() -> str | None:
    """`file.py:LINE (function)` of the innermost user frame, or None."""
    dirs = _sprue_dirs()
    frame = sys._getframe(1)
    while frame is not None:
        fname = frame.f_code.co_filename
        if not fname.startswith(dirs) and not fname.startswith("<frozen"):
            return f"{fname}:{frame.f_lineno} ({frame.f_code.co_name})"
        frame = frame.f_back
    return None


def user_frame_of(tb) -> str | None:
    """`file.py:LINE (function)` of the innermost user frame of a traceback, or None."""
    dirs = _sprue_dirs()
    where = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if not code.co_filename.startswith(dirs) and not code.co_filename.startswith("<frozen"):
            where = f"{code.co_filename}:{tb.tb_lineno} ({code.co_name})"
        tb = tb.tb_next
    return where
