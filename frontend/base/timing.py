"""Where a compilation's time goes: SPRUE_COMPILE_PROFILE=1 (or SPRUE_TIMINGS=1) prints, after
each compilation, the time of every step of it (tracing, the jaxpr to StableHLO, each MLIR stage's Python rewrites and
pass pipeline, the translation to LLVM IR, LLVM's optimizer with its own per-pass report, object
emission, linking, loading) to stderr, nested as the steps nest.

A step is a `with step("name"):` block; outside a profiled compilation it costs one attribute
read, so the steps stay in the code."""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import Iterator

ENV = "SPRUE_COMPILE_PROFILE"
# the name issue 16 and -ftime-report's users look for: the same report
ALIASES = (ENV, "SPRUE_TIMINGS")
_local = threading.local()


def enabled() -> bool:
    return any(os.environ.get(name, "") not in ("", "0") for name in ALIASES)


@contextlib.contextmanager
def step(name: str) -> Iterator[None]:
    """Times the block as `name` when a profiled compilation is under way in this thread."""
    steps = getattr(_local, "steps", None)
    if steps is None:
        yield
        return
    entry = [_local.depth, name, 0.0]
    steps.append(entry)
    _local.depth += 1
    start = time.perf_counter()
    try:
        yield
    finally:
        entry[2] = time.perf_counter() - start
        _local.depth -= 1


def note(text: str) -> None:
    """Adds a report (LLVM's per-pass timings) to the profile under way, if any."""
    notes = getattr(_local, "notes", None)
    if notes is not None:
        notes.append(text)


@contextlib.contextmanager
def profiled(what: str) -> Iterator[None]:
    """One compilation of `what`, profiled (and reported to stderr) when SPRUE_COMPILE_PROFILE is set
    and no outer one is under way in this thread."""
    if not enabled() or getattr(_local, "steps", None) is not None:
        yield
        return
    _local.steps, _local.notes, _local.depth = [], [], 0
    try:
        with step(f"compile {what}"):
            yield
    finally:
        steps, notes = _local.steps, _local.notes
        _local.steps = _local.notes = None
        sys.stderr.write(report(steps, notes))


def report(steps: list, notes: list[str]) -> str:
    lines = ["sprue compile profile (seconds)"]
    lines += [f"  {'  ' * depth}{name:<{48 - 2 * depth}s} {seconds:8.3f}" for depth, name, seconds in steps]
    return "\n".join(lines + notes) + "\n"
