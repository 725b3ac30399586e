"""Element types that can cross the compiled-code boundary.

One table ties together the three spellings of an element type: the short
name used in signatures and error messages ("f64"), the numpy dtype, and the
C type used in the cffi declarations. The MLIR spelling is recorded too, for
whoever generates signatures next to MLIR code; the runtime itself never
parses MLIR.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

__all__ = ["ElementType", "ELEMENT_TYPES", "element_type", "element_type_of", "scalar_from_c"]


@dataclass(frozen=True)
class ElementType:
    name: str  # short name, e.g. "f64"; used in JSON and messages
    dtype: np.dtype  # the numpy dtype of arrays crossing the boundary
    ctype: str  # C element type for cffi (bool is one byte: i1 is stored as i8)
    mlir: str  # MLIR element type after stablehlo-convert-to-signless

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize


def _et(name: str, dtype: str, ctype: str, mlir: str) -> ElementType:
    return ElementType(name, np.dtype(dtype), ctype, mlir)


# bool is declared as uint8_t rather than _Bool: cffi refuses to read a _Bool
# byte that is not 0 or 1, and we would rather pass through whatever the
# compiled code stored than raise in the middle of unpacking results.
ELEMENT_TYPES: tuple[ElementType, ...] = (
    _et("f64", "float64", "double", "f64"),
    _et("f32", "float32", "float", "f32"),
    _et("i64", "int64", "int64_t", "i64"),
    _et("i32", "int32", "int32_t", "i32"),
    _et("i16", "int16", "int16_t", "i16"),
    _et("i8", "int8", "int8_t", "i8"),
    _et("u64", "uint64", "uint64_t", "i64"),
    _et("u32", "uint32", "uint32_t", "i32"),
    _et("u16", "uint16", "uint16_t", "i16"),
    _et("u8", "uint8", "uint8_t", "i8"),
    _et("bool", "bool", "uint8_t", "i1"),
    # C has no portable half type: f16 crosses as its 16 bits (see `scalar_from_c`)
    _et("f16", "float16", "uint16_t", "f16"),
    # C99's complex types: the layout of numpy's complex arrays and of MLIR's complex<fN> (a
    # struct of the real and the imaginary part), which cffi reads as Python complex numbers.
    _et("c64", "complex64", "float _Complex", "complex<f32>"),
    _et("c128", "complex128", "double _Complex", "complex<f64>"),
)


def scalar_from_c(dtype: np.dtype):
    """Converter from the C value of one element (as cffi reads it) to a numpy scalar."""
    if dtype == np.float16:
        return lambda bits: np.array(bits, np.uint16).view(np.float16)[()]
    return dtype.type

_BY_NAME = {et.name: et for et in ELEMENT_TYPES}
# Keyed by dtype; np.dtype hashes by value, so ">f8" does not match "<f8".
_BY_DTYPE = {et.dtype: et for et in ELEMENT_TYPES}


def element_type(name: str) -> ElementType:
    """The element type with short name `name` ("f64", "bool", ...)."""
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        known = ", ".join(_BY_NAME)
        raise ValueError(f"unknown element type {name!r}; expected one of {known}") from None


def element_type_of(dtype: object) -> ElementType:
    """The element type for anything np.dtype() accepts, or a short name."""
    if isinstance(dtype, str) and dtype in _BY_NAME:
        return _BY_NAME[dtype]
    try:
        dt = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError as exc:
        raise ValueError(f"not a dtype: {dtype!r}") from exc
    et = _BY_DTYPE.get(dt) if dt.isnative else None
    if et is None:
        known = ", ".join(str(e.dtype) for e in ELEMENT_TYPES)
        raise ValueError(f"unsupported dtype {dt}; supported: {known}")
    return et


def is_masked_array(x: object) -> bool:
    """Whether x is a numpy masked array, without importing numpy.ma (touching `np.ma` imports it,
    ~40 ms): while no one has imported it, no masked array exists."""
    ma = sys.modules.get("numpy.ma")
    return ma is not None and isinstance(x, ma.MaskedArray)
