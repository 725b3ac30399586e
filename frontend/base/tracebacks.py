"""Tracebacks that end in the user's code: an exception leaving sprue's public entry points (a
qjit'd function's call, make_jaxpr) loses sprue's own frames, as JAX filters its internal frames
(jax._src.traceback_util's api_boundary), so that a user's error shows the user's calls and the
line in the user's function, not a dozen compiler frames. `SPRUE_TRACEBACK=full` keeps every
frame (for reports of sprue's own bugs); the exception says so in a note when frames were left
out."""
from __future__ import annotations

import functools
import importlib.util
import os
import types
from typing import Callable, TypeVar

F = TypeVar("F", bound=Callable)
NOTE = "(sprue's internal frames are left out of this traceback; SPRUE_TRACEBACK=full shows them)"
# sprue's packages: in a wheel all under one folder; in a source checkout each in its own
_PACKAGES = ("sprue", "sprue.lowering", "sprue.runtime", "sprue.tools")


@functools.cache
def _roots() -> tuple[str, ...]:
    roots = []
    for name in _PACKAGES:
        spec = importlib.util.find_spec(name)
        for location in (spec.submodule_search_locations or []) if spec else []:
            roots.append(os.path.join(os.path.realpath(location), ""))
    return tuple(roots)


def _is_sprues(tb: types.TracebackType) -> bool:
    return os.path.realpath(tb.tb_frame.f_code.co_filename).startswith(_roots())


def filtered(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback without sprue's frames."""
    kept = []
    while tb is not None:
        if not _is_sprues(tb):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for frame in reversed(kept):
        out = types.TracebackType(out, frame.tb_frame, frame.tb_lasti, frame.tb_lineno)
    return out


def full_tracebacks() -> bool:
    return os.environ.get("SPRUE_TRACEBACK", "").strip().lower() in ("full", "1", "off")


def api_boundary(fn: F) -> F:
    """`fn`, whose exceptions leave without sprue's frames (unless SPRUE_TRACEBACK=full)."""
    @functools.wraps(fn)
    def boundary(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as err:
            if full_tracebacks():
                raise
            tb = err.__traceback__
            kept = filtered(tb)
            if kept is None:   # nothing of the user's below this boundary: keep what there is
                raise
            if NOTE not in getattr(err, "__notes__", ()):
                err.add_note(NOTE)
            err.with_traceback(kept)
            raise   # (a bare raise adds no frame of this one's)
    return boundary  # type: ignore[return-value]


__all__ = ["NOTE", "api_boundary", "filtered", "full_tracebacks"]
