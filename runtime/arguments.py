"""Checking call arguments and turning them into memref descriptors.

One ArgumentConverter per argument, built once at load time with everything
precomputed (cffi types, expected shape, C strides), so a call with
well-formed inputs costs a type check, a shape comparison, ffi.from_buffer
and one ffi.new.

What is accepted for an argument of element type T and shape S
(the rules, and the errors raised otherwise):

* numpy arrays (and ndarray subclasses, viewed as plain arrays), numpy
  scalars, and objects numpy converts through __array__ /
  __array_interface__ / __array_struct__. Their dtype must be bool, int,
  uint or float and cast to T under np.can_cast(..., "safe"), else
  TypeError. Numpy scalars are typed like arrays (NEP 50): np.float64 does
  not go into an f32 argument.
* Python bool, int and float, for rank-0 arguments only, judged by value:
  bool goes anywhere; int goes into integer types whose range holds it and
  into floating types whose range holds it (rounding is accepted: 2**60 into
  f64); float goes into f64 and f32 (rounded; a finite value beyond f32's
  range is refused rather than turned into inf). Int into bool and float
  into an integer type are TypeErrors; a value out of range is a ValueError.
* numpy masked arrays are a TypeError: the compiled code would see their
  data without the mask (JAX refuses them too).
* Anything else (str, bytes, list, tuple, None, arbitrary objects,
  complex) is a TypeError. Sequences are refused on purpose: callers pass
  flat leaves, and a list leaf is more likely a pytree mistake than data.
* The rank and every static dimension must match, else ValueError;
  dynamic (None) dimensions accept any size, including 0.

Arrays that are not C-contiguous, not aligned, byte-swapped, read-only or
of another (safely castable) dtype are copied into a fresh C-contiguous
array of dtype T; other arrays are passed by pointer, without a copy.

The compiled code must never write its inputs: the lowering has to mark
every function argument `bufferization.writable = false`, so that in-place
updates (dynamic_update_slice, scatter) work on a copy. Read-only arrays are
copied anyway, as defence in depth: they often view memory that must not
change at all (a bytes object, a read-only mmap), where a stray write would
crash or corrupt the interpreter rather than just change an array.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sprue.base.errors import ArgumentTypeError, ArgumentValueError
from sprue.runtime import cffi_ops
from sprue.runtime.element_types import is_masked_array
from sprue.runtime.kernel_signature import TensorSpec

__all__ = ["ArgumentConverter", "ROW_MAJOR_STRIDES", "c_strides"]

# Bits of ndarray.flags.num (NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED |
# NPY_ARRAY_WRITEABLE): one attribute read instead of three in the per-call
# fast path.
_PASS_BY_POINTER = 0x0001 | 0x0100 | 0x0400

_NUMERIC_KINDS = frozenset("biufc")
_ARRAY_PROTOCOLS = ("__array__", "__array_interface__", "__array_struct__")


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides in elements, as MLIR's identity layout has them."""
    strides = []
    step = 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


# Row-major strides of the common ranks without a loop (the per-call path of dynamic shapes).
ROW_MAJOR_STRIDES = {
    1: lambda shape: (1,),
    2: lambda shape: (shape[1], 1),
    3: lambda shape: (shape[1] * shape[2], shape[2], 1),
}


def _fmt_shape(shape: tuple[int, ...]) -> str:
    # "(3,5)", "(5,)", "()": compact, like the type strings "f64[3,5]".
    if len(shape) == 1:
        return f"({shape[0]},)"
    return "(" + ",".join(map(str, shape)) + ")"


class ArgumentConverter:
    """Validates one argument and builds its descriptor for one call."""

    def __init__(self, ffi: Any, spec: TensorSpec, descriptor_ptr_type: str) -> None:
        self.spec = spec
        self._char_array_type = ffi.typeof("char[]")
        self._desc_type = ffi.typeof(descriptor_ptr_type)
        self._elem_ptr_type = ffi.typeof(spec.element.ctype + " *")
        self._dtype = spec.dtype
        self._shape = spec.shape
        self._rank = spec.rank
        self._static = spec.is_static
        # For static shapes the descriptor's sizes/strides never change: each
        # call copies a template and sets the two pointers, which is about
        # twice as fast as initialising the struct from a tuple.
        self._strides = c_strides(spec.shape) if spec.is_static else None  # type: ignore[arg-type]
        if spec.is_static:
            init = (ffi.NULL, ffi.NULL, 0) + ((spec.shape, self._strides) if spec.rank else ())
            self._template_owner = ffi.new(self._desc_type, init)
            self._template = self._template_owner[0]  # read-only after this
        # Python floats go straight into f64 scalars: the commonest scalar.
        self._float_fast = spec.rank == 0 and spec.element.name == "f64"
        # Ranges for judging Python scalars by value, as Python numbers so
        # that comparing a huge int never overflows.
        kind = spec.dtype.kind
        self._int_range = (int(np.iinfo(spec.dtype).min), int(np.iinfo(spec.dtype).max)) if kind in "iu" else None
        self._float_max = float(np.finfo(spec.dtype).max) if kind == "f" else None
        # Python ints go straight into signed integer scalars (sizes of dynamic dimensions, counts).
        self._int_fast = self._int_range if spec.rank == 0 and kind == "i" else None
        # With dynamic dimensions: the static ones to compare, and row-major strides by rank.
        self._static_axes = tuple((i, d) for i, d in enumerate(spec.shape) if d is not None)
        self._row_major = ROW_MAJOR_STRIDES.get(spec.rank, c_strides)

    def convert(self, value: object, keep: list) -> Any:
        """The descriptor for `value` (a cdata pointer).

        Appends to `keep` whatever must stay alive until the call returns:
        the descriptor holds raw pointers into it.
        """
        if (
            type(value) is np.ndarray
            and value.dtype is self._dtype
            and value.flags.num & _PASS_BY_POINTER == _PASS_BY_POINTER
        ):
            shape = value.shape
            if shape == self._shape:  # never true with a dynamic dimension
                buf = cffi_ops.from_buffer(self._char_array_type, value, False)
                keep.append(buf)
                desc = cffi_ops.newp(self._desc_type, self._template)
                desc.allocated = buf
                desc.aligned = buf
                return desc
            if not self._static and self._matches(shape):
                return self._descriptor(value, shape, self._row_major(shape), keep)
        elif self._float_fast and type(value) is float:
            return self._scalar_descriptor(value, keep)
        elif self._int_fast is not None and type(value) is int and self._int_fast[0] <= value <= self._int_fast[1]:
            return self._scalar_descriptor(value, keep)
        return self._convert_slow(value, keep)

    def _matches(self, shape: tuple[int, ...]) -> bool:
        """Whether `shape` has our rank and every static dimension."""
        if len(shape) != self._rank:
            return False
        for i, d in self._static_axes:
            if shape[i] != d:
                return False
        return True

    def _descriptor(self, arr: np.ndarray, shape: tuple, strides: Any, keep: list) -> Any:
        buf = cffi_ops.from_buffer(self._char_array_type, arr, False)
        keep.append(buf)
        if self._rank == 0:
            return cffi_ops.newp(self._desc_type, (buf, buf, 0))
        return cffi_ops.newp(self._desc_type, (buf, buf, 0, shape, strides))

    def _scalar_descriptor(self, value: bool | int | float, keep: list) -> Any:
        cell = cffi_ops.newp(self._elem_ptr_type, value)
        keep.append(cell)
        desc = cffi_ops.newp(self._desc_type, self._template)
        desc.allocated = cell
        desc.aligned = cell
        return desc

    # -- everything off the fast path --------------------------------------

    def _fail(self, exc_type: type[Exception], got: str) -> Exception:
        # the sprue argument errors are TypeError / ValueError subclasses too
        cls = ArgumentTypeError if exc_type is TypeError else ArgumentValueError
        return cls(f"argument {self.spec.name!r}: expected {self.spec.type_str}, got {got}")

    def _convert_slow(self, value: object, keep: list) -> Any:
        if is_masked_array(value):
            raise self._fail(TypeError, "a numpy masked array, whose mask would be dropped: pass .filled(fill_value)"
                                        " to replace the masked entries, or .data to ignore the mask")
        if isinstance(value, np.ndarray):
            arr, what = value, "an array"
        elif isinstance(value, np.generic):
            # Checked before Python scalars: np.float64 subclasses float.
            arr, what = np.asarray(value), "a numpy scalar"
        elif isinstance(value, (bool, int, float, complex)):
            return self._convert_python_scalar(value, keep)
        elif any(hasattr(type(value), p) for p in _ARRAY_PROTOCOLS):
            try:
                arr = np.asarray(value)
            except Exception as exc:  # arbitrary user code ran in __array__
                raise self._fail(
                    TypeError, f"an object of type {type(value).__name__} that numpy could not convert ({exc!r})"
                ) from exc
            what = f"an object of type {type(value).__name__}"
        else:
            raise self._fail(TypeError, f"an object of type {type(value).__name__}")

        dtype = arr.dtype
        if dtype != self._dtype and (
            dtype.kind not in _NUMERIC_KINDS or not np.can_cast(dtype, self._dtype, "safe")
        ):
            raise self._fail(
                TypeError, f"{what} of dtype {dtype}, which does not cast safely to {self.spec.element.name}"
            )
        shape = arr.shape
        if not self._matches(shape):
            raise self._fail(ValueError, f"{what} of shape {_fmt_shape(shape)}")

        arr = np.asarray(arr, dtype=self._dtype, order="C")
        if arr.flags.num & _PASS_BY_POINTER != _PASS_BY_POINTER:
            # Unaligned (the compiled code assumes alignment) or read-only
            # (see the module docstring); a fresh copy is neither.
            arr = arr.copy()
        strides = self._strides if self._static else c_strides(shape)
        return self._descriptor(arr, shape, strides, keep)

    def _python_scalar_fits(self, value: bool | int | float) -> bool:
        """Whether a Python scalar of an acceptable type fits by value.

        Raises TypeError when its type does not go into this argument.
        """
        if isinstance(value, bool) or self._dtype.kind == "c":
            return True   # (a complex number's parts are floats: any Python number goes in, as numpy)
        if isinstance(value, complex):
            raise self._fail(TypeError, f"a Python complex, which does not cast safely to {self.spec.element.name}")
        if isinstance(value, int):
            if self._int_range is not None:
                return self._int_range[0] <= value <= self._int_range[1]
            if self._float_max is not None:
                return abs(value) <= self._float_max
        elif self._float_max is not None:  # a float into f32/f64
            return not math.isfinite(value) or abs(value) <= self._float_max
        kind = "int" if isinstance(value, int) else "float"
        raise self._fail(TypeError, f"a Python {kind}, which does not cast safely to {self.spec.element.name}")

    def _convert_python_scalar(self, value: bool | int | float, keep: list) -> Any:
        kind = ("bool" if isinstance(value, bool) else "int" if isinstance(value, int)
                else "complex" if isinstance(value, complex) else "float")
        if self._rank != 0:
            raise self._fail(ValueError, f"a Python {kind} (a scalar)")
        if not self._python_scalar_fits(value):
            # Huge ints have no repr beyond sys.get_int_max_str_digits().
            shown = repr(value) if isinstance(value, float) or value.bit_length() <= 256 else "(huge)"
            raise self._fail(ValueError, f"the Python {kind} {shown}, which does not fit in {self.spec.element.name}")
        # bool subclasses int, and int/float subclasses convert by value.
        if self.spec.dtype == np.float16:   # crosses as its bits (no C half type)
            return self._scalar_descriptor(int(np.array(value, np.float16).view(np.uint16)), keep)
        if self.spec.dtype.kind == "f":
            return self._scalar_descriptor(float(value), keep)
        if self.spec.dtype.kind == "c":
            return self._scalar_descriptor(complex(value), keep)
        return self._scalar_descriptor(int(value), keep)
