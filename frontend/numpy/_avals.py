"""The bottom of sprue.numpy: what an operand is (its abstract value, its description in a message)
and the errors that name a sprue.numpy function and the user's line. Every other module of the
package builds on these; this one imports none of them.
"""
from __future__ import annotations

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueError, SprueTypeError, SprueValueError, at
from sprue.base.source_info import user_frame_summary
from sprue.ir.core import ShapedArray
from sprue.trace.tracing import Tracer

PY_SCALARS = (bool, int, float, complex)


class SprueIndexError(SprueError, IndexError):
    """An index out of bounds, or of a kind numpy does not accept."""


def loc() -> str:
    """' (at file.py:12 (fn))' for the user's innermost frame."""
    return at(user_frame_summary())


def type_error(fname: str, msg: str) -> SprueTypeError:
    return SprueTypeError(f"sprue.numpy.{fname}: {msg}{loc()}")


def value_error(fname: str, msg: str) -> SprueValueError:
    return SprueValueError(f"sprue.numpy.{fname}: {msg}{loc()}")


def index_error(msg: str) -> SprueIndexError:
    return SprueIndexError(f"{msg}{loc()}")


def is_py_scalar(x) -> bool:
    return isinstance(x, PY_SCALARS) and not isinstance(x, np.generic)


def any_tracer(*xs) -> bool:
    return any(isinstance(x, Tracer) for x in xs)


def aval(x) -> ShapedArray:
    """The abstract value of an operand (checked by _promote.operand)."""
    if isinstance(x, Tracer):
        return x.aval
    if is_py_scalar(x):
        return ShapedArray((), dtypes.python_scalar_dtype(x), weak_type=True)
    return ShapedArray(np.shape(x), x.dtype)


def describe(*xs) -> str:
    """'f64[3] and f64[4]' / 'f64[3], i32[] and bool[2]' for error messages."""
    parts = [aval(x).str_short() if isinstance(x, (Tracer, np.ndarray, np.generic)) or is_py_scalar(x)
             else type(x).__name__ for x in xs]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def const(dtype, value):
    """A typed scalar constant (a strong literal in a jaxpr: `1:i32[]`)."""
    return np.array(value, dtype)[()]
