"""Where a compilation's time goes: SPRUE_COMPILE_PROFILE=1 (or SPRUE_TIMINGS=1) prints, after
each compilation, the time of every step of it (tracing, the jaxpr to StableHLO, each MLIR stage's Python rewrites and
pass pipeline, the translation to LLVM IR, LLVM's optimizer with its own per-pass report, object
emission, linking, loading) to stderr, nested as the steps nest.

The same report goes to Python's logging, logger `sprue`, at DEBUG; a compilation of more than
SLOW_SECONDS logs one INFO line naming the function, its equation count and its slowest stage.
SPRUE_LOG=info (or debug) sends the logger's messages to stderr from the environment.

A step is a `with step("name"):` block; outside a profiled compilation it costs one attribute
read, so the steps stay in the code."""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from typing import Iterator

ENV = "SPRUE_COMPILE_PROFILE"
# the name issue 16 and -ftime-report's users look for: the same report
ALIASES = (ENV, "SPRUE_TIMINGS")
_local = threading.local()
LOGGER = logging.getLogger("sprue")
SLOW_SECONDS = 2.0
LOG_ENV = "SPRUE_LOG"


def _configure_from_env() -> None:
    """SPRUE_LOG=debug|info|warning: the `sprue` logger at that level, printing to stderr (unless
    the program configured a handler of its own)."""
    level = os.environ.get(LOG_ENV, "").strip().upper()
    if level in ("DEBUG", "INFO", "WARNING", "ERROR"):
        LOGGER.setLevel(level)
        if not LOGGER.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("sprue: %(message)s"))
            LOGGER.addHandler(handler)


_configure_from_env()


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


def describe(**facts) -> None:
    """Facts about the compilation under way (its `equations`), for the slow-compile message."""
    info = getattr(_local, "info", None)
    if info is not None:
        info.update(facts)


def note(text: str) -> None:
    """Adds a report (LLVM's per-pass timings) to the profile under way, if any."""
    notes = getattr(_local, "notes", None)
    if notes is not None:
        notes.append(text)


@contextlib.contextmanager
def profiled(what: str) -> Iterator[None]:
    """One compilation of `what`, profiled (and reported to stderr) when SPRUE_COMPILE_PROFILE is set
    and no outer one is under way in this thread; logged (module doc) when the `sprue` logger
    takes INFO messages."""
    printed, logged = enabled(), LOGGER.isEnabledFor(logging.INFO)
    if not (printed or logged) or getattr(_local, "steps", None) is not None:
        yield
        return
    _local.steps, _local.notes, _local.info, _local.depth = [], [], {}, 0
    try:
        with step(f"compile {what}"):
            yield
    finally:
        steps, notes, info = _local.steps, _local.notes, _local.info
        _local.steps = _local.notes = _local.info = None
        if printed:
            sys.stderr.write(report(steps, notes))
        if logged:
            _log(what, steps, notes, info)


def _log(what: str, steps: list, notes: list[str], info: dict) -> None:
    if LOGGER.isEnabledFor(logging.DEBUG):
        LOGGER.debug(report(steps, notes).rstrip("\n"))
    total = steps[0][2]
    if total < SLOW_SECONDS:
        return
    stages = [s for s in steps if s[0] == 1]
    slowest = max(stages, key=lambda s: s[2]) if stages else None
    inner = []
    for s in steps[steps.index(slowest) + 1:] if slowest else ():
        if s[0] <= 1:
            break
        if s[0] == 2:
            inner.append(s)
    inner_slowest = max(inner, key=lambda s: s[2]) if inner else None
    eqns = f" ({info['equations']:,} equations)" if "equations" in info else ""
    where = "" if slowest is None else f"; slowest stage: {slowest[1]} {slowest[2]:.1f} s" + (
        f" (of it {inner_slowest[1]} {inner_slowest[2]:.1f} s)" if inner_slowest else "")
    LOGGER.info(f"compiling {what}{eqns} took {total:.1f} s{where}")


def report(steps: list, notes: list[str]) -> str:
    lines = ["sprue compile profile (seconds)"]
    lines += [f"  {'  ' * depth}{name:<{48 - 2 * depth}s} {seconds:8.3f}" for depth, name, seconds in steps]
    return "\n".join(lines + notes) + "\n"
