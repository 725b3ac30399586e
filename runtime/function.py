"""Loading a compiled shared library and calling it like a Python function.

    f = load("lib.so", "main", sig)          # or load("lib.so", signature=sig)
    outs = f(x, y)        # a list, one entry per result
    f.result_shapes(x, y) # [(5, 3), ()]: the shapes a call would return, without running it
    f(x, y, out=[a, b])   # results written into caller-allocated arrays a, b (returned)

    save_signature("lib.so", sig)            # lib.signature.json beside the library, then:
    f = load("lib.so")                       # or load(directory holding one such library)

Loading needs only cffi and numpy: no MLIR, no LLVM. The cdef is generated
from the signature (the library carries no type information, so a signature
that does not match the compiled function is undetectable and undefined
behaviour, exactly as with any C prototype).

A CompiledFunction holds no per-call mutable state shared between calls:
descriptors and the result object are allocated per call (the general path)
or taken from a pool of preallocated ones for the duration of one call (the
fast path, fastcall.py), and cffi releases the GIL during the foreign call,
so several threads may call one function concurrently.

Fast path: arguments that are exactly what the signature says (ndarrays of
the argument's dtype and shape, Python floats for f64 scalars, ints for i64,
bools for bool) go through a caller generated for the signature; anything
else takes the general path below, which accepts more (safe casts, numpy
scalars, array-likes) and raises every error. `specialize(kinds)` builds
such a caller for other exact kinds (qjit does, per cache entry).

Result shapes before a call (the signature's shape function, see shape_function.py):
`result_shapes(*args)` validates the arguments exactly as a call does and
evaluates the shape function on the size arguments; a result axis whose size
is computed from data raises NoShapeFunctionError naming it.

Destinations (`out=`): one writeable numpy array per result (a bare array when
there is exactly one result), each of the result's dtype exactly and of the
shape the shape function gives. Everything is checked before the kernel runs
(a data-dependent axis can only be checked after it ran; the destinations are
untouched when it does not fit). The kernel still allocates its own results
(the compiled ABI returns callee-allocated memrefs): they are *copied* into
the destinations and freed, so a destination may even be one of the inputs.
The runtime does not preallocate: with this ABI there is nothing to
preallocate into; shape functions let the caller allocate up front instead.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import cffi
import numpy as np

from sprue.base.errors import ArgumentTypeError, SprueTypeError, SprueValueError
from sprue.base.errors import LibraryLoadError as _LibraryLoadError
from sprue.runtime import cffi_ops, fastcall, threads
from sprue.runtime.abi import c_interface
from sprue.runtime.arguments import _PASS_BY_POINTER, ArgumentConverter
from sprue.runtime.kernel_signature import Signature
from sprue.runtime.results import ResultUnpacker, allocation_error
from sprue.runtime.shape_function import NoShapeFunctionError, ShapeFunction, format_dim, negative_size_error

__all__ = ["CompiledFunction", "LibraryLoadError", "SIGNATURE_SUFFIX", "load", "save_signature", "signature_path"]

# The signature file beside a library: `f.so` -> `f.signature.json`.
SIGNATURE_SUFFIX = ".signature.json"
_SIDE_FORMAT = "sprue library 1"


class LibraryLoadError(_LibraryLoadError):
    """The shared library cannot be opened or lacks the expected symbol (an OSError)."""


# cffi parses every cdef under one process-wide lock (cffi/cparser.py: "pycparser is not
# thread-safe"). os.fork() copies only the calling thread: a fork while another thread loads a
# library would leave the child's copy of that lock held for ever. So the fork waits for the parse
# in progress, and both processes go on with the lock free.
_parser_lock_held: list = []


def _before_fork() -> None:
    lock = getattr(sys.modules.get("cffi.cparser"), "lock", None)   # imported by the first FFI()
    if lock is not None:
        lock.acquire()
        _parser_lock_held.append(lock)


def _after_fork() -> None:
    while _parser_lock_held:
        _parser_lock_held.pop().release()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork, after_in_child=_after_fork)


# The file each library path was loaded from, by (device, inode): glibc's dlopen hands back the
# library already loaded under the same name without looking at the file, so a library rebuilt at
# a path loaded before (two functions of one name compiled with one keep_intermediate folder) would
# run the old code. A rebuilt one is loaded through a link of its own name instead.
_loaded_files: dict[str, tuple[int, int]] = {}


def _fresh_name(path: str) -> str:
    """`path`, or a hard link beside it (a copy where links fail) named after the file's inode,
    when this process loaded another file under that name before."""
    try:
        st = os.stat(path)
    except OSError:
        return path                                   # dlopen reports it
    identity = (st.st_dev, st.st_ino)
    key = os.path.realpath(path)
    first = _loaded_files.setdefault(key, identity)
    if first == identity:
        return path
    alias = f"{key}.{st.st_ino}.so"
    if not os.path.exists(alias):
        try:
            os.link(path, alias)
        except OSError:
            shutil.copy2(path, alias)
    return alias


class CompiledFunction:
    """A function in a loaded library; call it with flat numpy arguments."""

    def __init__(self, path: str, symbol: str, signature: Signature, name: str | None = None,
                 declared: Declarations | None = None) -> None:
        self.path = path
        self.symbol = symbol
        self.name = name or symbol   # in messages: the user's function name when known
        self.signature = signature
        if declared is None or not declared.fits(signature, symbol):
            declared = Declarations(signature, symbol, checked=None)
        self._lib = _open(declared.ffi, path)
        # A library built by sprue checks its allocations (lowering/allocation.py): its entry returns
        # a status, 0 or the byte count of the allocation that failed. Any other (MLIR's own C
        # interface, void) is called as it is, unchecked.
        self.checked = _exports(self._lib, declared.iface.error_function)
        if declared.checked is None:
            declared.ffi.cdef(declared.iface.checked_decl + declared.iface.packed_decl if self.checked
                              else declared.iface.unchecked_decl)
        elif declared.checked != self.checked:   # declared as a sprue library's, and it is not one
            declared = Declarations(signature, symbol, checked=self.checked)
            self._lib = _open(declared.ffi, path)
        iface = declared.iface
        self._pool = threads.register(self._lib)   # its loops on the process's one pool (runtime/threads.py)
        # What a failed allocation was for, from its byte count (qjit sets it: the arrays of the
        # jaxpr and their source lines); None: the message gives the size only.
        self.explain_allocation: Callable[[int], str | None] | None = None
        # The same program taking its results' destinations (its signature: these arguments, then
        # the status's cell when it has one, then a destination per result; no results), loaded on
        # demand; None: `out=` copies the results (the frontend sets it: api/driver.py).
        self.destination_variant: Callable[[], CompiledFunction | None] | None = None
        self._into_caller: tuple[CompiledFunction, Callable[[tuple], Any]] | None = None
        self._ffi_packed_name = iface.packed_function
        try:
            self._fn = getattr(self._lib, iface.function)
        except AttributeError as exc:
            raise LibraryLoadError(f"{path} does not export {iface.function} (is {symbol!r} the right symbol?)") from exc
        parts, declared.parts = declared.parts, None   # (one function's: its caller is bound to it)
        if parts is None or not parts.fits(self.name, self.checked):
            parts = _Parts(declared, self.name, self.checked)
        self._libc, self._ffi, self._converters = parts._libc, parts._ffi, parts._converters
        self._convert = tuple(c.convert for c in self._converters)  # bound once, not per call
        self._nargs = len(self._converters)
        self._result_type, self._unpacker = parts._result_type, parts._unpacker
        names = ", ".join(s.name for s in signature.args)
        plural = "argument" if self._nargs == 1 else "arguments"
        self._arity_message = f"expected {self._nargs} {plural} ({names}), got "
        self.shape_function: ShapeFunction | None = signature.result_shape_function()
        self._fast = fastcall.bind(parts.fast, self) if parts.fast is not None else _always_miss

    def packed_address(self) -> int | None:
        """The address of the library's entry taking its parameters as one array (abi.py), or
        None (an unchecked library, or one built before it existed)."""
        if not self.checked:
            return None
        try:
            fn = getattr(self._lib, self._ffi_packed_name)
        except AttributeError:
            return None
        return int(self._ffi.cast("uintptr_t", fn))

    def specialize(self, kinds: Sequence[Any], finish: Any = fastcall.LIST) -> Any:
        """A fast caller for arguments of exactly these kinds (fastcall.build_caller): takes the
        tuple of arguments, returns `finish` of the results or fastcall.MISS. None when the kinds
        do not fit the signature."""
        return fastcall.build_caller(self, kinds, finish)

    def __call__(self, *args: Any, out: Any = None) -> list:
        if out is not None:
            return self._call_into(args, out)
        res = self._fast(args)
        if res is not fastcall.MISS:
            return res
        if len(args) != self._nargs:
            raise ArgumentTypeError(self._arity_message + str(len(args)))
        keep: list = []  # buffers the descriptors point into, alive until we return
        descriptors = [convert(a, keep) for convert, a in zip(self._convert, args)]
        return self._run(descriptors)

    def _run(self, descriptors: list) -> list:
        """Calls the kernel on converted arguments; its results, unpacked."""
        if self._result_type is None:
            status = self._fn(*descriptors)
            if status:   # a checked library's status (an unchecked one returns None)
                raise self.allocation_error(status)
            return []
        result_obj = cffi_ops.newp(self._result_type, None)
        status = self._fn(result_obj, *descriptors)
        if status:   # an allocation failed: nothing was written to result_obj
            raise self.allocation_error(status)
        return self._unpacker.unpack(result_obj)

    def allocation_error(self, status: int) -> Exception:
        """The SprueMemoryError of a call whose allocation failed (status: the byte count)."""
        return allocation_error(self.name, status, self.explain_allocation)

    # -- shapes before the call ----------------------------------------------------------------
    def _descriptors(self, args: Sequence[Any], keep: list) -> list:
        """The arguments checked and converted as for a call."""
        if len(args) != self._nargs:
            raise ArgumentTypeError(self._arity_message + str(len(args)))
        return [convert(a, keep) for convert, a in zip(self._convert, args)]

    def _shapes(self, args: Sequence[Any], partial: bool) -> list[tuple]:
        """The result shapes for `args` (already checked by _descriptors); a data-dependent dim is
        None when `partial`, else NoShapeFunctionError."""
        sf = self.shape_function
        specs = self.signature.results
        if sf is None:
            if partial:
                return [r.shape for r in specs]
            dyn = next((r, a) for r in specs for a, d in enumerate(r.shape) if d is None)
            raise NoShapeFunctionError(
                f"{self.name} has no shape function: its signature records none, and result {dyn[0].name!r}"
                f" axis {dyn[1]} is dynamic; its shape is known only after the call")
        if not partial:
            sf.check_complete(self.name, [r.name for r in specs])
        shapes = sf.evaluate(lambda i: int(np.asarray(args[i])))
        for k, shape in enumerate(shapes):
            for axis, d in enumerate(shape):
                if d is not None and d < 0:
                    names = [a.name for a in self.signature.args]
                    formula = f"{format_dim(sf.results[k][axis], names)} with " + ", ".join(
                        f"{names[i]}={int(np.asarray(args[i]))}" for i in sf.params)
                    raise negative_size_error(self.name, specs[k].name, axis, d, formula)
        return shapes

    def result_shapes(self, *args: Any) -> list[tuple[int, ...]]:
        """The shape of every result a call with `args` returns, without running the kernel.

        The arguments are checked as for a call (same errors). Raises NoShapeFunctionError when
        some result's size is computed from data (the message names the result and axis)."""
        self._descriptors(args, [])   # the checks of a call; the descriptors are dropped
        return self._shapes(args, partial=False)  # type: ignore[return-value]

    def _call_into(self, args: Sequence[Any], out: Any) -> list:
        specs = self.signature.results
        dests = self._destinations(out)
        keep: list = []
        descriptors = self._descriptors(args, keep)
        shapes = self._shapes(args, partial=True)
        for dest, spec, shape in zip(dests, specs, shapes):
            self._check_destination(dest, spec, shape)
        if self._write_into(args, dests, shapes):
            return list(dests)
        results = self._run(descriptors)
        if self._result_type is None:
            return []
        for dest, spec, res, shape in zip(dests, specs, results, shapes):
            got = np.shape(res)
            if got != dest.shape:   # only a data-dependent axis gets here
                raise SprueValueError(
                    f"{self.name}: destination for result {spec.name!r} has shape {_fmt(dest.shape)}, but the"
                    f" result has shape {_fmt(got)} (its size depends on data, so this is known only after the"
                    f" call; no destination was written)")
        for dest, res in zip(dests, results):
            np.copyto(dest, res, casting="no")
        return list(dests)

    def _write_into(self, args: Sequence[Any], dests: list[np.ndarray], shapes: list[tuple]) -> bool:
        """Calls the destination variant, which computes each result in its destination, where
        every destination takes it: known sizes, a plain C-contiguous, aligned, writeable array
        that shares no memory with an argument (np.may_share_memory: by bounds, so it may decline
        a few it could take; destinations sharing memory with each other _destinations refused).
        False, nothing done, otherwise: the caller copies."""
        if self.destination_variant is None or any(d is None for shape in shapes for d in shape):
            return False
        arrays = [a for a in args if isinstance(a, np.ndarray)]
        for dest in dests:
            if type(dest) is not np.ndarray or dest.flags.num & _PASS_BY_POINTER != _PASS_BY_POINTER:
                return False
            if any(np.may_share_memory(dest, a) for a in arrays):
                return False
        variant = self.destination_variant()
        if variant is None:
            return False
        status = None if self.signature.status_messages is None else np.zeros((), np.int64)
        call_args = (*args, *dests) if status is None else (*args, status, *dests)
        if self._into_caller is None or self._into_caller[0] is not variant:
            # the variant's fast caller: these arguments' usual kinds, then plain arrays (its
            # rank-0 destinations would otherwise be taken for scalars, which it cannot write)
            kinds = [_natural_kind(s) for s in self.signature.args]
            kinds += [_array_kind(s) for s in variant.signature.args[len(kinds):]]
            self._into_caller = (variant, variant.specialize(kinds) or _always_miss)
        if self._into_caller[1](call_args) is fastcall.MISS:
            variant(*call_args)
        if status:
            raise self._unpacker.status_error(int(status))
        return True

    def _destinations(self, out: Any) -> list[np.ndarray]:
        specs = self.signature.results
        n = len(specs)
        if isinstance(out, np.ndarray):
            if n != 1:
                raise SprueTypeError(f"{self.name}: out= must be a sequence of {n} arrays (one per result),"
                                     f" got a single array")
            dests = [out]
        elif isinstance(out, (list, tuple)):
            dests = list(out)
            if len(dests) != n:
                raise SprueTypeError(f"{self.name}: out= has {len(dests)} destinations, but the function has {n}"
                                     f" result{'s' * (n != 1)} ({', '.join(s.type_str for s in specs)})")
        else:
            raise SprueTypeError(f"{self.name}: out= must be a numpy array or a list/tuple of arrays, got"
                                 f" {type(out).__name__}")
        for i, d in enumerate(dests):
            if not isinstance(d, np.ndarray):
                raise SprueTypeError(f"{self.name}: destination for result {specs[i].name!r} must be a numpy"
                                     f" array, got {type(d).__name__}")
            if not d.flags.writeable:
                raise SprueValueError(f"{self.name}: destination for result {specs[i].name!r} is read-only")
            for j in range(i):
                if np.may_share_memory(d, dests[j]):
                    raise SprueValueError(f"{self.name}: destinations for results {specs[j].name!r} and"
                                          f" {specs[i].name!r} overlap")
        return dests

    def _check_destination(self, dest: np.ndarray, spec: Any, shape: tuple) -> None:
        if dest.dtype != spec.dtype:
            raise SprueTypeError(f"{self.name}: destination for result {spec.name!r} has dtype {dest.dtype},"
                                 f" expected {spec.dtype} ({spec.type_str})")
        if dest.ndim != len(shape) or any(d is not None and d != g for d, g in zip(shape, dest.shape)):
            expected = _fmt(tuple("?" if d is None else d for d in shape))
            raise SprueValueError(f"{self.name}: destination for result {spec.name!r} has shape"
                                  f" {_fmt(dest.shape)}, expected {expected}")

    def __repr__(self) -> str:
        return f"<CompiledFunction {self.symbol}{self.signature} from {self.path}>"


def _array_kind(spec: Any) -> Any:
    """The fast-path kind of an array argument, rank 0 included."""
    if spec.is_static:
        return fastcall.Array(spec.dtype, spec.shape)
    return fastcall.DynArray(spec.dtype, spec.rank, [(i, d) for i, d in enumerate(spec.shape) if d is not None])


def _natural_kind(spec: Any) -> Any:
    """The fast-path kind of an argument: exactly what its spec says."""
    if spec.rank == 0:
        for t in (float, int, bool):
            if fastcall.scalar_type_fits(t, spec.dtype):
                return fastcall.Scalar(t)
    return _array_kind(spec)


class Declarations:
    """The FFI of a signature's C interface, declared before the library exists (cffi parses each
    declaration with pycparser: ~8 ms for a function of 100 arguments and 100 results, done while
    the C compiler links: compile_closed_jaxpr). `checked`: the entry declared as a sprue library's
    (a status returned: True) or not (False); None: not declared yet, decided by the library."""

    def __init__(self, signature: Signature, symbol: str, checked: bool | None = True) -> None:
        self.signature, self.symbol, self.checked = signature, symbol, checked
        self.iface = iface = c_interface(signature, symbol)
        self.ffi = ffi = cffi.FFI()
        ffi.cdef(iface.types_cdef + iface.error_decl + threads.DECLS
                 + {True: iface.checked_decl + iface.packed_decl, False: iface.unchecked_decl, None: ""}[checked])
        if ffi.sizeof("void *") != 8:
            # The descriptor word layout (results.py) assumes 8-byte pointers.
            raise LibraryLoadError("sprue.runtime needs a 64-bit platform")
        self.parts: _Parts | None = None   # (prepare)

    def fits(self, signature: Signature, symbol: str) -> bool:
        return self.symbol == symbol and self.signature == signature

    def prepare(self, name: str) -> None:
        """The parts of a CompiledFunction `name` of these declarations that need no library
        (_Parts), made now: while the linker runs (compile_closed_jaxpr), a 100-argument
        function's milliseconds of them (its converters, and its Python fast caller's source
        compiled where the C caller cannot take it) are not on the way to the first call.
        Declared as a sprue library's (checked) only."""
        if self.checked:
            self.parts = _Parts(self, name, True)


class _Parts:
    """What a CompiledFunction is made of besides its library: the argument converters, the
    result type and unpacker, the C library's free (under the function's own attribute names),
    and the fast caller for the natural kinds (fastcall.build_caller, built on this object as a
    stand-in for the function, then bound to the function's own: fastcall.bind)."""

    _fn = None               # (the stand-in's: fastcall.bind puts the library's in the caller)
    allocation_error = None  # (idem)

    def __init__(self, declared: Declarations, name: str, checked: bool) -> None:
        signature, iface, ffi = declared.signature, declared.iface, declared.ffi
        self.signature, self.name, self.checked = signature, name, checked
        self._ffi = ffi
        self._libc = _open_libc(ffi)
        self._converters = tuple(
            ArgumentConverter(ffi, spec, ctype) for spec, ctype in zip(signature.args, iface.arg_types)
        )
        self._result_type = ffi.typeof(iface.result_type) if iface.result_type else None
        self._unpacker = ResultUnpacker(
            ffi, signature.c_results, iface.result_words, iface.result_nwords, self._libc.free,
            signature.status_messages,
        )
        self.fast = fastcall.build_caller(self, [_natural_kind(s) for s in signature.args])

    def fits(self, name: str, checked: bool) -> bool:
        return self.name == name and self.checked == checked


def _open(ffi: Any, path: str) -> Any:
    """The library at `path`, opened with `ffi`'s declarations."""
    try:
        return ffi.dlopen(_fresh_name(path))
    except OSError as exc:
        raise LibraryLoadError(f"cannot load compiled library {path}: {exc}") from exc
    except UnicodeEncodeError as exc:   # cffi opens by UTF-8 name; os.environ keeps bad bytes as surrogates
        raise LibraryLoadError(f"cannot load compiled library {path!r}: its path is not valid UTF-8, which cffi"
                               f" needs; build it in a folder whose name is UTF-8") from exc


def _exports(lib: Any, name: str) -> bool:
    """Whether the dlopen'ed `lib` exports the function `name` (declared in its FFI's cdef)."""
    try:
        getattr(lib, name)
    except AttributeError:
        return False
    return True


def _always_miss(args: tuple) -> Any:
    return fastcall.MISS


def _fmt(shape: tuple) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


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


def signature_path(so_path: str | os.PathLike[str]) -> Path:
    """Where the signature of the library at `so_path` is saved: `f.so` -> `f.signature.json`."""
    p = Path(so_path)
    return p.with_name(p.stem + SIGNATURE_SUFFIX) if p.suffix == ".so" else p.with_name(p.name + SIGNATURE_SUFFIX)


def save_signature(so_path: str | os.PathLike[str], signature: Signature, symbol: str = "main",
                   name: str | None = None) -> Path:
    """Write `signature` (with its shape function) beside the library, so that `load(so_path)`
    (or `load(its directory)`) needs nothing else. Returns the file written."""
    if not isinstance(signature, Signature):
        raise TypeError(f"signature must be a sprue.runtime.Signature, got {type(signature).__name__}")
    path = signature_path(so_path)
    d = {"format": _SIDE_FORMAT, "library": Path(so_path).name, "symbol": symbol, "signature": signature.to_dict()}
    if name is not None:
        d["name"] = name   # the function's name, for messages
    text = json.dumps(d, sort_keys=True, indent=1)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text + "\n")
    os.replace(partial, path)   # readers never see half a file
    return path


def _read_signature(path: Path) -> tuple[Path, str, Signature, str | None]:
    """(library path, symbol, signature, name) from a signature file."""
    try:
        d = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise LibraryLoadError(f"cannot read the signature file {path}: {exc}") from exc
    if not isinstance(d, dict) or d.get("format") != _SIDE_FORMAT or \
            not isinstance(d.get("library"), str) or not isinstance(d.get("symbol"), str):
        raise LibraryLoadError(f"{path} is not a sprue signature file (format {_SIDE_FORMAT!r})")
    try:
        sig = Signature.from_dict(d.get("signature"))
    except (TypeError, ValueError) as exc:
        raise LibraryLoadError(f"{path}: {exc}") from exc
    name = d.get("name")
    return path.with_name(d["library"]), d["symbol"], sig, name if isinstance(name, str) else None


def load(
    so_path: str | os.PathLike[str], symbol: str | None = None, signature: Signature | None = None, *,
    name: str | None = None, declared: Declarations | None = None
) -> CompiledFunction:
    """Open the library at `so_path` and bind `_mlir_ciface_<symbol>` to `signature`.

    `signature` comes last, positionally or by keyword, so that
    `load(path, "main", sig)` and `load(path, signature=sig)` both read
    naturally; `symbol` defaults to "main". Without a signature, the one saved
    beside the library (save_signature; qjit and sprue.load save one) is used,
    with its symbol; `so_path` may then also be a directory holding exactly one
    such library. `name` (else the saved one, else the symbol) names the
    function in error messages. `declared`: its FFI, declared beforehand (Declarations).
    """
    if symbol is not None and not isinstance(symbol, str):
        raise TypeError(
            f"load(so_path, symbol, signature): symbol must be a str, got {type(symbol).__name__}"
            " (pass the signature third or as signature=)"
        )
    path = os.path.abspath(os.fspath(so_path))
    if signature is None:
        side = _find_signature(path)
        if side is None:
            raise TypeError("signature must be a sprue.runtime.Signature, got NoneType (and no signature file"
                            f" {signature_path(path).name} is saved beside {path})")
        lib, saved_symbol, signature, saved_name = _read_signature(side)
        path, symbol, name = str(lib), symbol or saved_symbol, name or saved_name
    if not isinstance(signature, Signature):
        raise TypeError(f"signature must be a sprue.runtime.Signature, got {type(signature).__name__}")
    if not os.path.isfile(path):
        # A bare name would make dlopen search the system library path.
        raise LibraryLoadError(f"no such compiled library: {path}")
    return CompiledFunction(path, symbol or "main", signature, name, declared)


def _find_signature(path: str) -> Path | None:
    """The signature file of the library at `path`, or of the one library in directory `path`."""
    if os.path.isdir(path):
        found = sorted(Path(path).glob("*" + SIGNATURE_SUFFIX))
        if len(found) > 1:
            raise LibraryLoadError(f"{path} holds {len(found)} compiled libraries"
                                   f" ({', '.join(f.name for f in found)}): load one of them by its path")
        if not found:
            raise LibraryLoadError(f"{path} holds no saved signature (*{SIGNATURE_SUFFIX})")
        return found[0]
    side = signature_path(path)
    return side if side.is_file() else None
