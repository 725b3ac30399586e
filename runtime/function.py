"""Loading a compiled shared library and calling it like a Python function.

    f = load("lib.so", "main", sig)          # or load("lib.so", signature=sig)
    outs = f(x, y)        # a list, one entry per result

Loading needs only cffi and numpy: no MLIR, no LLVM. The cdef is generated
from the signature (the library carries no type information, so a signature
that does not match the compiled function is undetectable and undefined
behaviour, exactly as with any C prototype).

A CompiledFunction holds no per-call mutable state: descriptors and the
result object are allocated per call, and cffi releases the GIL during the
foreign call, so several threads may call one function concurrently.
"""

from __future__ import annotations

import ctypes.util
import os
from typing import Any

import cffi

from . import cffi_ops
from .abi import c_interface
from .arguments import ArgumentConverter
from .results import ResultUnpacker
from .signature import Signature

__all__ = ["CompiledFunction", "LibraryLoadError", "load"]


class LibraryLoadError(OSError):
    """The shared library cannot be opened or lacks the expected symbol."""


class CompiledFunction:
    """A function in a loaded library; call it with flat numpy arguments."""

    def __init__(self, path: str, symbol: str, signature: Signature) -> None:
        self.path = path
        self.symbol = symbol
        self.signature = signature
        iface = c_interface(signature, symbol)
        ffi = cffi.FFI()
        ffi.cdef(iface.cdef)
        if ffi.sizeof("void *") != 8:
            # The descriptor word layout (results.py) assumes 8-byte pointers.
            raise LibraryLoadError("sprue.runtime needs a 64-bit platform")
        try:
            self._lib = ffi.dlopen(path)
        except OSError as exc:
            raise LibraryLoadError(f"cannot load compiled library {path}: {exc}") from exc
        try:
            self._fn = getattr(self._lib, iface.function)
        except AttributeError as exc:
            raise LibraryLoadError(f"{path} does not export {iface.function} (is {symbol!r} the right symbol?)") from exc
        self._libc = _open_libc(ffi)
        self._ffi = ffi
        self._converters = tuple(
            ArgumentConverter(ffi, spec, ctype) for spec, ctype in zip(signature.args, iface.arg_types)
        )
        self._convert = tuple(c.convert for c in self._converters)  # bound once, not per call
        self._nargs = len(self._converters)
        self._result_type = ffi.typeof(iface.result_type) if iface.result_type else None
        self._unpacker = ResultUnpacker(
            ffi, signature.c_results, iface.result_words, iface.result_nwords, self._libc.free,
            signature.status_messages,
        )
        names = ", ".join(s.name for s in signature.args)
        plural = "argument" if self._nargs == 1 else "arguments"
        self._arity_message = f"expected {self._nargs} {plural} ({names}), got "

    def __call__(self, *args: Any) -> list:
        if len(args) != self._nargs:
            raise TypeError(self._arity_message + str(len(args)))
        keep: list = []  # buffers the descriptors point into, alive until we return
        descriptors = [convert(a, keep) for convert, a in zip(self._convert, args)]
        if self._result_type is None:
            self._fn(*descriptors)
            return []
        result_obj = cffi_ops.newp(self._result_type, None)
        self._fn(result_obj, *descriptors)
        return self._unpacker.unpack(result_obj)

    def __repr__(self) -> str:
        return f"<CompiledFunction {self.symbol}{self.signature} from {self.path}>"


def _open_libc(ffi: Any) -> Any:
    """The library whose `free` pairs with the compiled code's `malloc`.

    dlopen(None) is the process's global symbol scope, which is exactly where
    the .so's undefined `malloc` was bound (libc, or an allocator interposed
    with LD_PRELOAD); libc by name is the fallback where that fails.
    """
    try:
        libc = ffi.dlopen(None)
        libc.free  # noqa: B018 -- resolve now, not at the first free
        return libc
    except (OSError, AttributeError):
        name = ctypes.util.find_library("c")
        if name is None:
            raise LibraryLoadError("cannot find the C library to free result buffers with") from None
        return ffi.dlopen(name)


def load(
    so_path: str | os.PathLike[str], symbol: str = "main", signature: Signature | None = None
) -> CompiledFunction:
    """Open the library at `so_path` and bind `_mlir_ciface_<symbol>` to `signature`.

    `signature` is required; it comes last, positionally or by keyword, so
    that `load(path, "main", sig)` and `load(path, signature=sig)` both read
    naturally.
    """
    if not isinstance(symbol, str):
        raise TypeError(
            f"load(so_path, symbol, signature): symbol must be a str, got {type(symbol).__name__}"
            " (pass the signature third or as signature=)"
        )
    if not isinstance(signature, Signature):
        raise TypeError(f"signature must be a sprue.runtime.Signature, got {type(signature).__name__}")
    path = os.path.abspath(os.fspath(so_path))
    if not os.path.isfile(path):
        # A bare name would make dlopen search the system library path.
        raise LibraryLoadError(f"no such compiled library: {path}")
    return CompiledFunction(path, symbol, signature)
