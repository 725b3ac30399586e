"""sprue's exceptions. Each says what was wrong, where in the user's code, and what to do."""
from __future__ import annotations


class SprueError(Exception):
    """Base class of every error sprue raises on purpose."""


class SprueTypeError(SprueError, TypeError):
    """A value of the wrong kind: a dtype, a pytree, a non-array."""


class SprueValueError(SprueError, ValueError):
    """A value of the right kind but a wrong shape, axis or parameter."""


class ConcretizationError(SprueTypeError):
    """A traced value was used where Python needs a concrete one (an `if`, `int()`, a shape)."""


class UnsupportedError(SprueError, NotImplementedError):
    """A feature sprue does not (yet) compile."""


def at(where: str | None) -> str:
    """Suffix naming the user's source location, when it is known."""
    return f" (at {where})" if where else ""
