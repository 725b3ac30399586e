"""The C interface of a compiled function, as cffi declarations.

MLIR's `llvm-request-c-wrappers` exports `void _mlir_ciface_<name>(...)`
whose parameters are all pointers to memref descriptors:

    struct { T *allocated; T *aligned; int64_t offset;
             int64_t sizes[R]; int64_t strides[R]; }   // rank 0: first three only

Results come first: with one result, a pointer to its descriptor; with
several, a pointer to a struct holding one descriptor per result in order;
with none, no result parameter. Then one pointer per argument. (Checked by
compiling small modules; see tests/runtime/test_runtime.py.) A signature with
status_messages has the i64 status as its first result (Signature.c_results).

sprue's libraries check every allocation (lowering/allocation.py): their `_mlir_ciface_<name>`
returns an int64_t, 0 or the byte count of an allocation that failed (the call's buffers are then
freed and nothing is written to the results), and they export
`const char *_sprue_error_<name>(void)`, which is also how the loader tells them from a library
with MLIR's own `void` C interface (`cdef`), which it still calls (unchecked). Where every parameter is a pointer they also export
`int64_t _sprue_packed_<name>(void **)`, the same call with its parameters in one array, which
the fast caller uses for functions with more parameters than it spells out (fastcall_c.py).

Every descriptor field is 8 bytes on a 64-bit target, so a descriptor is
3 + 2R int64 words with no padding; the result unpacker reads the result
object as a flat int64 array at the word offsets computed here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sprue.runtime.kernel_signature import Signature

__all__ = ["CInterface", "c_interface", "descriptor_words", "ciface_name", "error_function_name",
           "packed_function_name"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def descriptor_words(rank: int) -> int:
    """Size of a rank-`rank` memref descriptor in 8-byte words."""
    return 3 + 2 * rank


def descriptor_struct(rank: int) -> str:
    return f"struct sprue_memref_{rank}"


def ciface_name(symbol: str) -> str:
    """The exported C-interface name of MLIR function `symbol`."""
    if not isinstance(symbol, str) or not _IDENT.match(symbol):
        raise ValueError(f"symbol must be a C identifier, got {symbol!r}")
    return f"_mlir_ciface_{symbol}"


def error_function_name(symbol: str) -> str:
    """The function a checked library exports beside `_mlir_ciface_<symbol>`: the message of the
    calling thread's last failed allocation."""
    return f"_sprue_error_{symbol}"


def packed_function_name(symbol: str) -> str:
    """The function a checked library exports beside `_mlir_ciface_<symbol>` when all its
    parameters are pointers: the same call, its parameters (the result object first) in one array."""
    return f"_sprue_packed_{symbol}"


def _descriptor_decl(rank: int) -> str:
    fields = "void *allocated; void *aligned; int64_t offset;"
    if rank:
        fields += f" int64_t sizes[{rank}]; int64_t strides[{rank}];"
    return f"{descriptor_struct(rank)} {{ {fields} }};"


@dataclass(frozen=True)
class CInterface:
    """Everything the loader needs to declare and call one function."""

    cdef: str  # declarations for ffi.cdef (structs, the function as MLIR declares it, free)
    function: str  # exported symbol, e.g. "_mlir_ciface_main"
    types_cdef: str  # the structs and free only
    checked_decl: str  # the function as a checked library defines it: it returns the status
    unchecked_decl: str  # ... as MLIR's C interface defines it (void)
    error_decl: str  # the error function of a checked library
    error_function: str  # its name, e.g. "_sprue_error_main" (its presence marks a checked library)
    packed_decl: str  # the checked entry taking its parameters as one array (lowering/allocation.py; older libraries lack it)
    packed_function: str  # its name, e.g. "_sprue_packed_main"
    arg_types: tuple[str, ...]  # C pointer type per argument descriptor
    result_type: str | None  # C pointer type of the result object; None: no results
    result_words: tuple[int, ...]  # word offset of each result descriptor in it
    result_nwords: int  # total size of the result object in words


def c_interface(signature: Signature, symbol: str) -> CInterface:
    function = ciface_name(symbol)
    results = signature.c_results
    ranks = sorted({s.rank for s in signature.args} | {s.rank for s in results})
    lines = [_descriptor_decl(r) for r in ranks]

    offsets: list[int] = []
    words = 0
    for spec in results:
        offsets.append(words)
        words += descriptor_words(spec.rank)

    result_type: str | None
    if not results:
        result_type = None
    elif len(results) == 1:
        result_type = f"{descriptor_struct(results[0].rank)} *"
    else:
        # the descriptors' words, read by offset (result_words), not by member: cffi parses its
        # declarations with pycparser, and a struct of 100 members and a function of 100 typed
        # parameters took ~7 ms of a 100-layer training step's first call (as words and `void *`
        # parameters: ~3; the same layout and the same calls)
        lines.append(f"struct sprue_results {{ int64_t words[{words}]; }};")
        result_type = "struct sprue_results *"

    arg_types = tuple(f"{descriptor_struct(s.rank)} *" for s in signature.args)
    params = ", ".join(["void *"] * ((1 if result_type else 0) + len(arg_types))) or "void"
    # The caller frees result buffers with the allocator the compiled code's
    # malloc resolves to: the process-wide malloc/free (libc, or whatever
    # allocator has been interposed globally).
    lines.append("void free(void *);")
    types = "\n".join(lines) + "\n"
    error_function = error_function_name(symbol)
    return CInterface(
        cdef=types + f"void {function}({params});\n",
        function=function,
        types_cdef=types,
        checked_decl=f"int64_t {function}({params});\n",
        unchecked_decl=f"void {function}({params});\n",
        error_decl=f"const char *{error_function}(void);\n",
        error_function=error_function,
        packed_decl=f"int64_t {packed_function_name(symbol)}(void **);\n",
        packed_function=packed_function_name(symbol),
        arg_types=arg_types,
        result_type=result_type,
        result_words=tuple(offsets),
        result_nwords=words,
    )
