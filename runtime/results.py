"""Turning returned memref descriptors into numpy values that own their memory.

Every returned buffer was malloc'ed by the compiled code, and the caller owns
it. Ownership is handed to numpy without a copy:

    ndarray --base--> cffi buffer --keeps alive--> ffi.gc(char *allocated, free)

so `free(allocated)` runs exactly once, when the last array viewing the
buffer goes away (with CPython's refcounting: immediately). Rules:

* Rank-0 results come back as numpy scalars (np.float64, np.bool_, ...);
  their buffer is freed before the call returns.
* Zero-size results come back as fresh empty arrays; their buffer is freed
  before the call returns.
* Two results may share one allocation (e.g. a value returned twice). The
  buffer is still freed once; the first such result views it and every later
  one gets a copy, so results never alias each other.
* offset, sizes and strides are honoured as returned (dynamic result shapes
  need nothing more); non-row-major strides give a strided view.

A malformed descriptor (null or out-of-bounds buffer) raises, and every
buffer returned by that call is still freed.

With a status (a function compiled with run-time checks, Signature.status_messages),
the first descriptor is the i64 status. It is read before anything else: nonzero
frees every returned buffer (each distinct one once) and raises
RuntimeCheckError(the failed check's message; a SprueValueError), or RuntimeMemoryCheckError (also
a SprueMemoryError) for a check that an array fits in memory; zero drops it from the results.

(A failed *allocation* is not a status result: the call returns no results then, and the caller
raises `allocation_error`; see lowering/allocation.py.)
"""

from __future__ import annotations

import math
from operator import itemgetter
from typing import Any, Callable, Sequence

import numpy as np

from sprue.base.errors import RuntimeCheckError, SprueMemoryError
from sprue.runtime import cffi_ops
from sprue.runtime.arguments import ROW_MAJOR_STRIDES, c_strides
from sprue.runtime.element_types import scalar_from_c
from sprue.runtime.kernel_signature import TensorSpec

__all__ = ["MEMORY_CHECK", "ResultUnpacker", "RuntimeMemoryCheckError", "allocation_error", "format_bytes",
           "human_bytes"]

# The words a run-time check's message holds when it guards an allocation: the sizes given at run
# time would make an array larger than this machine's memory (sprue.numpy's _dims.check_allocation
# writes them). Such a failed check is a RuntimeMemoryCheckError, a MemoryError too.
MEMORY_CHECK = "more than this machine's memory"


class RuntimeMemoryCheckError(RuntimeCheckError, SprueMemoryError):
    """A failed run-time check that an array fits in memory: a RuntimeCheckError (a ValueError, as
    every failed check) and a SprueMemoryError (a MemoryError, as every array too large)."""


def human_bytes(n: int) -> str:
    """`7.3 TiB`."""
    size, unit = float(n), "bytes"
    for u in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB"):
        if size < 1024:
            break
        size, unit = size / 1024, u
    return f"{n} bytes" if unit == "bytes" else f"{size:.1f} {unit}"


def format_bytes(n: int) -> str:
    """`8000000000000 bytes (7.3 TiB)`."""
    human = human_bytes(n)
    return human if human.endswith("bytes") else f"{n} bytes ({human})"


def allocation_error(name: str, status: int, explain: Callable[[int], str | None] | None) -> SprueMemoryError:
    """The error of a call whose allocation failed: `status` is what the library returned (the
    byte count, as an int64); `explain(nbytes)` may name what was being allocated and where (qjit
    knows the arrays of the jaxpr and their source lines)."""
    nbytes = status & 0xFFFFFFFFFFFFFFFF
    where = explain(nbytes) if explain is not None else None
    return SprueMemoryError(
        f"{name}: could not allocate {format_bytes(nbytes)} while running the compiled code"
        f"{' (' + where + ')' if where else ''}: not enough memory (or a memory limit: ulimit -v, cgroups)."
        f" Every buffer of the call was freed; make the arrays smaller or free memory")


class _ResultReader:
    """Builds one result from the words of its descriptor."""

    def __init__(self, ffi: Any, spec: TensorSpec, word: int, unpacker: ResultUnpacker) -> None:
        self.spec = spec
        self.word = word  # word offset of this descriptor in the result object
        self._unpacker = unpacker  # for its `free`, which tests may replace
        self._rank = spec.rank
        self._dtype = spec.dtype
        self._scalar = scalar_from_c(spec.dtype)
        self._itemsize = spec.dtype.itemsize
        self._elem_ptr_type = ffi.typeof(spec.element.ctype + " *")
        self._char_ptr = ffi.typeof("char *")
        # For a static shape the expected sizes+strides words, so that the
        # common case is one list comparison; anything else (dynamic shapes,
        # odd strides) takes the general path, which believes the descriptor.
        self._layout_words: list[int] | None = None
        if spec.is_static and spec.rank and 0 not in spec.shape:
            shape: tuple[int, ...] = spec.shape  # type: ignore[assignment]
            self._layout_words = list(shape) + list(c_strides(shape))
            self._shape = shape
            self._nbytes = math.prod(shape) * self._itemsize
        self._sizes_slice = slice(word + 3, word + 3 + spec.rank)
        self._layout_slice = slice(word + 3, word + 3 + 2 * spec.rank)
        # Dynamic shapes: row-major strides for the returned sizes, to recognise the common layout.
        self._row_major = ROW_MAJOR_STRIDES.get(spec.rank, c_strides) if spec.rank and not spec.is_static else None

    def own(self, allocated: int) -> Any:
        """A char* to `allocated` that frees it when garbage collected."""
        return cffi_ops.gcp(cffi_ops.cast(self._char_ptr, allocated), self._unpacker.free)

    def take(self, words: list[int]) -> Any:
        """The result, for a buffer no other result shares; takes ownership."""
        k = self.word
        allocated = words[k]
        if not allocated:
            raise MemoryError(f"result {self.spec.name!r}: the compiled code returned a null buffer")
        if self._rank == 0:
            # The numpy scalar is a copy: free the buffer right away.
            try:
                return self._scalar(cffi_ops.cast(self._elem_ptr_type, words[k + 1])[words[k + 2]])
            finally:
                self._unpacker.free(cffi_ops.cast(self._char_ptr, allocated))
        owner = self.own(allocated)  # from here on the buffer cannot leak
        if words[self._layout_slice] == self._layout_words:
            start = words[k + 1] - allocated + words[k + 2] * self._itemsize
            if start >= 0:
                buf = cffi_ops.buffer(owner, start + self._nbytes)
                return np.ndarray(self._shape, self._dtype, buf, start)
        elif self._row_major is not None:  # dynamic sizes in the usual row-major layout
            layout = words[self._layout_slice]
            sizes = tuple(layout[: self._rank])
            if tuple(layout[self._rank :]) == self._row_major(sizes) and min(sizes) > 0:
                start = words[k + 1] - allocated + words[k + 2] * self._itemsize
                if start >= 0:
                    buf = cffi_ops.buffer(owner, start + math.prod(sizes) * self._itemsize)
                    return np.ndarray(sizes, self._dtype, buf, start)
        return self.view(words, owner, False)

    def view(self, words: list[int], owner: Any, copy: bool) -> Any:
        """The result as a view of `owner`'s buffer (or a copy of that view)."""
        k = self.word
        allocated, aligned, offset = words[k], words[k + 1], words[k + 2]
        if self._rank == 0:
            return self._scalar(cffi_ops.cast(self._elem_ptr_type, aligned)[offset])

        sizes = tuple(words[self._sizes_slice])
        strides = words[self._layout_slice][self._rank :]
        if min(sizes) < 0:
            raise RuntimeError(f"result {self.spec.name!r}: the compiled code returned negative sizes {sizes}")
        count = math.prod(sizes)
        if count == 0:
            return np.empty(sizes, self._dtype)

        isz = self._itemsize
        start = aligned - allocated + offset * isz  # byte offset of element 0
        if strides == list(c_strides(sizes)):
            byte_strides = None
            low, high = 0, count - 1
        else:
            byte_strides = tuple(s * isz for s in strides)
            low = sum(min(0, (n - 1) * s) for n, s in zip(sizes, strides))
            high = sum(max(0, (n - 1) * s) for n, s in zip(sizes, strides))
        if start + low * isz < 0:
            raise RuntimeError(f"result {self.spec.name!r}: the returned descriptor points before its allocation")
        buf = cffi_ops.buffer(owner, start + (high + 1) * isz)
        arr = np.ndarray(sizes, self._dtype, buf, start, byte_strides)
        return arr.copy() if copy else arr


def _as_tuple(x: Any) -> tuple:
    return x if isinstance(x, tuple) else (x,)


class ResultUnpacker:
    """Reads a call's result object and returns the list of results."""

    def __init__(self, ffi: Any, specs: Sequence[TensorSpec], words: Sequence[int], nwords: int, free: Any,
                 status_messages: Sequence[str] | None = None) -> None:
        self.specs = tuple(specs)
        # With a status, specs[0] is the status (Signature.c_results) and these are the messages;
        # the other results are unpacked by `_rest`, which reads the same words.
        self._messages = None if status_messages is None else tuple(status_messages)
        self._char_ptr = ffi.typeof("char *")
        if self._messages is not None:
            self._rest = ResultUnpacker(ffi, specs[1:], words[1:], nwords, free)
            for reader in self._rest._readers:
                reader._unpacker = self  # they free through our `free` (which tests may replace)
            self._rest_allocs = itemgetter(*words[1:]) if len(words) > 1 else None
        # The deallocator for returned buffers: libc's free. A public
        # attribute so tests can wrap it to count calls.
        self.free: Callable[[Any], None] | Any = free
        self._readers = tuple(_ResultReader(ffi, s, w, self) for s, w in zip(specs, words))
        self._single = self._readers[0] if len(self._readers) == 1 else None
        self._allocs = itemgetter(*words) if len(words) > 1 else None
        self._nresults = len(words)
        self._nwords = nwords
        self._words_ptr = ffi.typeof("int64_t *")

    def unpack(self, result_obj: Any) -> list:
        return self.unpack_words(cffi_ops.unpack(cffi_ops.cast(self._words_ptr, result_obj), self._nwords))

    def unpack_words(self, words: list[int]) -> list:
        """The results from the result object's words (as read by cffi_ops.unpack)."""
        if self._messages is not None:
            return self._unpack_with_status(words)
        return self._unpack(words)

    def _unpack_with_status(self, words: list[int]) -> list:
        # status descriptor: words[0] allocated, words[1] aligned, words[2] offset (rank 0)
        if not words[0]:
            self._free_all(words)
            raise MemoryError("the compiled code returned a null status buffer")
        status = cffi_ops.cast(self._words_ptr, words[1])[words[2]]
        if status:
            self._free_all(words)
            raise self.status_error(status)
        shared = self._rest_allocs is not None and words[0] in _as_tuple(self._rest_allocs(words))
        out = self._rest._unpack(words) if self._rest_allocs is not None else []
        if not shared:  # else the result sharing it owns it now
            self.free(cffi_ops.cast(self._char_ptr, words[0]))
        return out

    def status_error(self, code: int) -> Exception:
        """The error of a call whose run-time check `code` (a nonzero status) failed."""
        message = self._message(code)
        return (RuntimeMemoryCheckError if MEMORY_CHECK in message else RuntimeCheckError)(message)

    def _message(self, code: int) -> str:
        if 1 <= code <= len(self._messages):
            return self._messages[code - 1]
        return f"run-time check {code} failed (the compiled function has {len(self._messages)} checks)"

    def _free_all(self, words: list[int]) -> None:
        """Free every buffer the call returned, each distinct allocation once."""
        freed: set[int] = set()
        for reader in self._readers:
            allocated = words[reader.word]
            if allocated and allocated not in freed:
                freed.add(allocated)
                self.free(cffi_ops.cast(self._char_ptr, allocated))

    def _unpack(self, words: list[int]) -> list:
        if self._single is not None:
            return [self._single.take(words)]
        allocs = self._allocs(words)  # type: ignore[misc]
        if len(set(allocs)) != self._nresults:
            return self._unpack_shared(words, allocs)
        # Every result has a buffer of its own.
        out: list = []
        try:
            for reader in self._readers:
                out.append(reader.take(words))
        except BaseException:
            # The failing reader owned its buffer already; free the others.
            for reader in self._readers[len(out) + 1 :]:
                if words[reader.word]:
                    reader.own(words[reader.word])
            raise
        return out

    def _unpack_shared(self, words: list[int], allocs: tuple[int, ...]) -> list:
        """Some results share a buffer: own each distinct buffer once, then build."""
        owners: dict[int, Any] = {}
        for reader, allocated in zip(self._readers, allocs):
            if allocated and allocated not in owners:
                owners[allocated] = reader.own(allocated)
        out = []
        seen: set[int] = set()
        for reader, allocated in zip(self._readers, allocs):
            if not allocated:
                raise MemoryError(f"result {reader.spec.name!r}: the compiled code returned a null buffer")
            out.append(reader.view(words, owners[allocated], allocated in seen))
            if reader.spec.rank:  # scalars are copies already; they alias nothing
                seen.add(allocated)
        return out
