"""Recording the constraints a traced program places on sizes nobody gave (OCANNL's shape inference).

While sprue.api.shape_inference traces a function whose parameters have *open* sizes (a `None` in
`sprue.f64["b", None]`, or a parameter without a hint), sprue.numpy's two places that compare
sizes only run time could compare — `unify_equal` (contracted axes, concatenated arrays' other
axes: equal) and `_broadcast_pair` (numpy's broadcasting: equal or 1) — ask here first. When a size
involved is open, the constraint is recorded with the user's line and *assumed* (the known size is
returned), so the trace goes on and every constraint of the program is collected in one pass; the
solver then fixes the open sizes and traces again with them.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from sprue.ir.shapes import DimExpr, dim_vars_of

__all__ = ["Constraint", "Recording", "recording", "assume_equal", "assume_broadcast", "current"]


@dataclass(frozen=True)
class Constraint:
    """`a == b` ("eq") or `a == b or a == 1 or b == 1` ("bcast"), made by `what` at `where`."""
    kind: str
    a: object
    b: object
    what: str
    where: str | None


@dataclass
class Recording:
    open: frozenset            # the names of the open sizes' dimension variables
    constraints: list = field(default_factory=list)

    def mentions_open(self, d) -> bool:
        return isinstance(d, DimExpr) and any(v.name in self.open for v in dim_vars_of(d))


class _Current(threading.local):
    def __init__(self):
        self.recording: Recording | None = None


_current = _Current()


def current() -> Recording | None:
    return _current.recording


class recording:
    """`with recording(open_names) as r:` records the constraints on those sizes into r."""

    def __init__(self, open_names):
        self.r = Recording(frozenset(open_names))

    def __enter__(self) -> Recording:
        self.before, _current.recording = _current.recording, self.r
        return self.r

    def __exit__(self, *exc):
        _current.recording = self.before
        return False


def _where() -> str | None:
    from sprue.base.source_info import user_frame_summary  # deferred: recording only
    return user_frame_summary()


def assume_equal(what: str, dims: list):
    """When recording and some of `dims` is open: records them equal and returns the size to go
    on with (a known one when there is one); else None (sprue.numpy decides as always)."""
    r = _current.recording
    if r is None or not any(r.mentions_open(d) for d in dims):
        return None
    known = [d for d in dims if not r.mentions_open(d)]
    out = known[0] if known else dims[0]
    where = _where()
    for d in dims:
        if d is not out and d != out:
            r.constraints.append(Constraint("eq", d, out, what, where))
    return out


def assume_broadcast(what: str, a, b):
    """As assume_equal, for numpy's broadcasting of two sizes (equal, or one of them 1)."""
    r = _current.recording
    if r is None or not (r.mentions_open(a) or r.mentions_open(b)):
        return None
    r.constraints.append(Constraint("bcast", a, b, what, _where()))
    return b if r.mentions_open(a) and not r.mentions_open(b) else a
