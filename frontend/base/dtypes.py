"""The element types sprue compiles, their short names, and numpy's promotion rules.

Python scalars are *weak*: like numpy 2 (NEP 50) they take the dtype of the array they meet
(`f32_array * 2.0` stays float32), and default to 64 bits alone (`int` -> int64, `float` -> float64).
"""
from __future__ import annotations

import numpy as np

from sprue.base.errors import SprueTypeError

# dtype -> the short name JAX prints (`f64[3]`) and StableHLO's element type.
_SHORT = {
    np.dtype("float64"): "f64", np.dtype("float32"): "f32", np.dtype("float16"): "f16",
    np.dtype("int64"): "i64", np.dtype("int32"): "i32", np.dtype("int16"): "i16", np.dtype("int8"): "i8",
    np.dtype("uint64"): "u64", np.dtype("uint32"): "u32", np.dtype("uint16"): "u16", np.dtype("uint8"): "u8",
    np.dtype("bool"): "bool", np.dtype("complex64"): "c64", np.dtype("complex128"): "c128",
}
_FROM_SHORT = {v: k for k, v in _SHORT.items()}
SUPPORTED = frozenset(_SHORT)

float64 = np.dtype("float64")
float32 = np.dtype("float32")
int64 = np.dtype("int64")
int32 = np.dtype("int32")
bool_ = np.dtype("bool")
complex64 = np.dtype("complex64")
complex128 = np.dtype("complex128")
# The tangent type of integer and boolean values, which have no derivatives: JAX's float0 (a
# zero-byte void record), so that numpy arrays of it are JAX's too. Only tangents may have it.
float0 = np.dtype([("float0", np.void, 0)])


def short_name(dtype: np.dtype) -> str:
    return _SHORT[np.dtype(dtype)]


def from_short_name(name: str) -> np.dtype:
    try:
        return _FROM_SHORT[name]
    except KeyError:
        raise SprueTypeError(f"unknown element type '{name}'; expected one of {sorted(_FROM_SHORT)}") from None


def canonicalize(dtype) -> np.dtype:
    """A user's dtype spec (np.float32, float, 'int32', ...) as a supported numpy dtype."""
    if dtype is float:
        return float64
    if dtype is int:
        return int64
    if dtype is bool:
        return bool_
    if dtype is complex:
        return complex128
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise SprueTypeError(f"not a dtype: {dtype!r}") from None
    if dt not in SUPPORTED:
        raise SprueTypeError(
            f"dtype {dt} is not supported; sprue compiles {', '.join(sorted(str(d) for d in SUPPORTED))}")
    return dt


def is_float(dtype) -> bool:
    return np.issubdtype(dtype, np.floating)


def is_complex(dtype) -> bool:
    return np.issubdtype(dtype, np.complexfloating)


def is_inexact(dtype) -> bool:
    """Floating point, real or complex: the types that have derivatives."""
    return np.issubdtype(dtype, np.inexact)


def real_dtype(dtype) -> np.dtype:
    """The real type of a complex type's parts (complex64 -> float32); other types unchanged."""
    dt = np.dtype(dtype)
    return {complex64: float32, complex128: float64}.get(dt, dt)


def complex_dtype(dtype) -> np.dtype:
    """The complex type whose parts have the real type `dtype` (float32 -> complex64)."""
    dt = np.dtype(dtype)
    return complex64 if dt in (float32, np.dtype("float16"), complex64) else complex128


def is_int(dtype) -> bool:
    return np.issubdtype(dtype, np.integer)


def is_signed(dtype) -> bool:
    return np.issubdtype(dtype, np.signedinteger)


def is_bool(dtype) -> bool:
    return np.dtype(dtype) == bool_


# A representative Python value for each weak kind: np.result_type applies NEP 50 to Python scalars.
_WEAK_REP = {"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j}


def result_type(*typed: tuple[np.dtype, bool]) -> tuple[np.dtype, bool]:
    """numpy's promotion of (dtype, weak) pairs; the result is weak only if every input is."""
    strong = [dt for dt, weak in typed if not weak]
    weak = [_WEAK_REP[np.dtype(dt).kind] for dt, weak in typed if weak]
    if not strong:
        return np.result_type(*weak), True
    return canonicalize(np.result_type(*strong, *weak)), False


def python_scalar_dtype(value) -> np.dtype:
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return int64
    if isinstance(value, float):
        return float64
    if isinstance(value, complex):
        return complex128
    raise SprueTypeError(f"{type(value).__name__} is not a numeric scalar")
