"""Specialised callers: the per-signature fast path of a call.

A caller is generated once for a list of argument *kinds* (exactly which Python types, dtypes and
shapes it takes) and compiled from Python source, so that a call which fits costs a few type
checks, one store per argument into a preallocated descriptor, the foreign call and the result
unpacking, with no per-argument Python frames and no per-call cffi allocations:

    call = build_caller(compiled_function, [Scalar(float)], finish=SINGLE)
    call((1.5,))          # -> np.float64(4.0), or MISS when the arguments do not fit the kinds

Kinds, one per entry of the argument tuple except Const (which takes no entry):

    Const(v)              a kernel argument not taken from the call: a constant rank-0 value
                          (the implicit sizes qjit computes from the shapes its cache key fixes)
    Scalar(t)             an object of type exactly `t` (float, int, bool or a numpy scalar type)
                          stored into a rank-0 cell; only where the store is exact: float->f64,
                          int->i64 (out of range: MISS), bool->bool, numpy scalar->its own dtype
    Array(dtype, shape)   an ndarray (not a subclass, but sprue.numpy's EagerArray) of exactly this dtype
                          and shape
    DynArray(dtype, rank, static_axes)
                          an ndarray of this dtype and rank whose static axes have these sizes
    Skip(v, same=None)    a call argument that is not passed to the kernel (a static argument
                          qjit compiled in): `same(arg)` must be true; without `same`, the
                          argument must be `v`, or of v's exact type and equal to it where that
                          type's == is exact (int, bool, str, bytes, None; not float: 0.0 == -0.0)

MISS means "take the general path": it is returned before anything is observable, and the
general path then raises exactly the errors it always raised. A caller only ever skips checks
that its kinds guarantee; arrays that are not C-contiguous, aligned and writeable are still
copied (arguments.py says why).

Thread safety: descriptors, scalar cells and the result object live in a per-caller *state*,
taken from a pool for the duration of one call (list.pop/append, atomic) and put back after,
so concurrent calls never share one; the pool grows to the number of concurrent callers.
A failed allocation in the kernel (its status, lowering/allocation.py) raises the same
SprueMemoryError as a general call (CompiledFunction.allocation_error); nothing was returned then.
Results are unpacked by the same ResultUnpacker as a general call (owned by numpy, freed once),
except a lone rank-0 result, which is read and freed inline (through the unpacker's `free`), and
a status (a kernel with run-time checks), read and freed inline while it is 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import cffi
import numpy as np

from sprue.base.eager_array import EagerArray
from sprue.runtime import cffi_ops, fastcall_c
from sprue.runtime.arguments import _PASS_BY_POINTER, ROW_MAJOR_STRIDES, c_strides
from sprue.runtime.element_types import ELEMENT_TYPES, scalar_from_c

__all__ = ["MISS", "LIST", "SINGLE", "Const", "Scalar", "Array", "DynArray", "Skip", "build_caller"]


class _Miss:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISS"


MISS: Any = _Miss()   # a caller's answer when the arguments do not fit its kinds
LIST = "list"         # finish: the list of flat results
SINGLE = "single"     # finish: the one flat result itself

# Rank-0 result descriptors with typed pointers: reading the value and freeing the buffer then
# needs no ffi.cast per call. Cast from the call's result object once per state.
_TYPED = cffi.FFI()
_TYPED.cdef("\n".join(f"struct sprue_scalar_{et.name} {{ char *allocated; {et.ctype} *aligned; int64_t offset; }};"
                      for et in ELEMENT_TYPES) + "\nstruct sprue_owned { char *allocated; };")

# Static argument values compared by value (type and ==) rather than by identity: the types whose
# == tells values apart exactly (float's does not: 0.0 == -0.0; its callers pass `same`).
_BY_VALUE = (int, bool, str, bytes, type(None))
# Python scalar types and the only dtype each stores into exactly.
_PYTHON_SCALARS = {float: np.dtype(np.float64), int: np.dtype(np.int64), bool: np.dtype(np.bool_)}


class Const:
    def __init__(self, value: Any) -> None:
        self.value = value


class Scalar:
    def __init__(self, type_: type) -> None:
        self.type = type_


class Array:
    def __init__(self, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        self.dtype, self.shape = dtype, tuple(shape)


class DynArray:
    def __init__(self, dtype: np.dtype, rank: int, static_axes: Sequence[tuple[int, int]]) -> None:
        self.dtype, self.rank, self.static_axes = dtype, rank, tuple(static_axes)


class Skip:
    def __init__(self, value: Any, same: Callable[[Any], bool] | None = None) -> None:
        self.value, self.same = value, same


def scalar_type_fits(t: type, dtype: np.dtype) -> bool:
    """Whether an object of type exactly `t` stores exactly into a rank-0 `dtype` cell."""
    if t in _PYTHON_SCALARS:
        return _PYTHON_SCALARS[t] == dtype
    return issubclass(t, np.generic) and dtype.kind in "biuf" and dtype != np.float16 and t is dtype.type


def _shape_fits(spec: Any, shape: tuple) -> bool:
    return len(shape) == spec.rank and all(d is None or d == s for d, s in zip(spec.shape, shape))


def build_caller(cf: Any, kinds: Sequence[Any], finish: str | Callable[[list], Any] = LIST
                 ) -> Callable[[tuple], Any] | None:
    """A fast caller of CompiledFunction `cf` for arguments of these kinds, or None when the kinds
    do not fit its signature (then every call takes the general path).

    The caller takes the tuple of call arguments and returns `finish` applied to the flat
    results (LIST: the list; SINGLE: the only one; a callable: its value), or MISS."""
    specs = cf.signature.args
    runtime_kinds = [k for k in kinds if not isinstance(k, Skip)]
    if len(runtime_kinds) != len(specs):
        return None
    for k, spec in zip(runtime_kinds, specs):
        if isinstance(k, Const):
            if spec.rank != 0 or spec.dtype.kind not in "iu" or not isinstance(k.value, int):
                return None
            info = np.iinfo(spec.dtype)
            if not info.min <= k.value <= info.max:
                return None
        elif isinstance(k, Scalar):
            if spec.rank != 0 or not scalar_type_fits(k.type, spec.dtype):
                return None
        elif isinstance(k, Array):
            if k.dtype != spec.dtype or not k.dtype.isnative or not _shape_fits(spec, k.shape):
                return None
        elif isinstance(k, DynArray):
            if k.dtype != spec.dtype or not k.dtype.isnative or k.rank != spec.rank:
                return None
        else:
            return None
    results = cf.signature.c_results
    if finish not in (LIST, SINGLE) and not callable(finish):
        raise TypeError(f"finish must be LIST, SINGLE or a callable, got {finish!r}")
    if finish == SINGLE and len(cf.signature.results) != 1:
        return None
    call = _PythonCaller(cf, list(kinds), finish, results)
    if not _c_may_take(call, cf):
        call.generate()   # (now: made while the linker runs, not at the first call)
    return _in_c(call, cf) if cf._fn is not None else call


class _PythonCaller:
    """The caller in Python, generated (its source written and compiled) at its first call: where
    the C caller (fastcall_c.py) takes the kinds, it is that caller's fallback, which most
    functions never call, and its compilation was ~7 ms of a 100-argument function's first call."""

    def __init__(self, cf: Any, kinds: list, finish: Any, results: Sequence[Any]) -> None:
        self.cf, self.kinds, self.finish, self.results = cf, kinds, finish, results
        self.bound: Any = None   # the function whose library it calls, if not cf (bind)
        self.call: Callable[[tuple], Any] | None = None

    def generate(self) -> Callable[[tuple], Any]:
        call = _generate(self.cf, self.kinds, self.finish, self.results)
        if self.bound is not None:
            _bind_globals(call, self.bound)
        self.call = call
        return call

    def __call__(self, args: tuple) -> Any:
        return (self.call or self.generate())(args)


def _c_may_take(call: _PythonCaller, cf: Any) -> bool:
    """Whether _in_c will wrap `call` in a C caller (its library aside)."""
    if not cf.checked:
        return False
    kinds = _c_kinds(call.kinds, cf.signature.args)
    if kinds is None:
        return False
    ranks = [len(k[3]) for k in kinds if k[3] is not None] + [r.rank for r in cf.signature.c_results]
    words = cf._unpacker._nwords if cf._result_type is not None else 0
    return fastcall_c.takes(len(kinds), max(ranks, default=0), words)


def _in_c(call: Callable[[tuple], Any], cf: Any) -> Callable[[tuple], Any]:
    """The C caller for `call`'s kinds (fastcall_c.py), wrapping `call`; `call` where there is none."""
    kinds = _c_kinds(call.kinds, cf.signature.args)
    if not cf.checked or kinds is None:   # (an unchecked function returns no status: the C caller reads one)
        return call
    finish = call.finish
    mode = (fastcall_c.F_LIST, None) if finish == LIST else (fastcall_c.F_SINGLE, None) if finish == SINGLE \
        else (fastcall_c.F_CALL, finish)
    nargs = sum(not isinstance(k, Const) for k in call.kinds)
    fast = fastcall_c.c_caller(cf, kinds, nargs, mode, call, MISS, cf.allocation_error)
    return call if fast is None else fast


def _c_kinds(kinds: Sequence[Any], specs: Sequence[Any]) -> list[tuple] | None:
    """The kinds as fastcall_c's `make` takes them, or None if one is not a kind it takes."""
    out: list[tuple] = []
    index = -1
    runtime = iter(specs)
    for kind in kinds:
        if not isinstance(kind, Const):
            index += 1
        t = _c_kind(kind, None if isinstance(kind, Skip) else next(runtime), index)
        if t is None:
            return None
        out.append(t)
    return out


_C_SCALARS = {(float, np.dtype(np.float64)): fastcall_c.K_F64, (int, np.dtype(np.int64)): fastcall_c.K_I64,
              (bool, np.dtype(np.bool_)): fastcall_c.K_BOOL}


def _c_kind(kind: Any, spec: Any, index: int) -> tuple | None:
    """(kind code, argument tuple index, dtype, shape, constant, object, cell bytes), fastcall_c's."""
    c = fastcall_c
    if isinstance(kind, Skip):
        code = c.K_SKIP_SAME if kind.same is not None else c.K_SKIP_EQ if type(kind.value) in _BY_VALUE \
            else c.K_SKIP_IS
        return (code, index, None, None, 0, kind.same if kind.same is not None else kind.value, 0)
    if isinstance(kind, Const):
        if spec.dtype not in (np.dtype(np.int64), np.dtype(np.int32)):
            return None
        return (c.K_CONST, -1, None, None, int(kind.value), None, spec.dtype.itemsize)
    if isinstance(kind, Scalar):
        code = _C_SCALARS.get((kind.type, spec.dtype))
        return None if code is None else (code, index, None, None, 0, None, 8)
    if isinstance(kind, Array):
        return (c.K_ARRAY, index, kind.dtype, tuple(int(n) for n in kind.shape), 0, None, 0)
    if isinstance(kind, DynArray):
        shape = [-1] * kind.rank
        for axis, size in kind.static_axes:
            shape[axis] = int(size)
        return (c.K_DYN, index, kind.dtype, tuple(shape), 0, None, 0)
    return None


@dataclass
class _Source:
    """A caller's source as _generate writes it: the globals it runs with, the lines that check
    the arguments (`body`, before a state is taken) and those that store them into the state
    (`fill`), and the state's parts: their names in the source and, in the same order, the
    functions making them (each returns its part of the state)."""
    g: dict[str, Any]
    body: list[str]
    fill: list[str] = field(default_factory=list)
    state_names: list[str] = field(default_factory=list)
    state_makers: list[Callable[[], list]] = field(default_factory=list)
    descs: list[str] = field(default_factory=list)   # the descriptors passed to the kernel, in order


@dataclass(frozen=True)
class _ResultForm:
    """How a caller reads the results of one signature."""
    status: bool            # a kernel with run-time checks: results[0] is the status (rank 0: 3 words)
    base: int               # the word where a lone result starts (after the status's)
    lone: Any               # the one result besides the status, or None
    inline_scalar: bool     # a lone rank-0 result, read and freed here
    inline_array: bool      # a lone array result of static, nonzero shape, built here in the usual layout
    typed: Any              # the typed pointer type the lone result is read through, or None
    status_view: bool       # the status is read here, through its own typed pointer

    @staticmethod
    def of(cf: Any, results: Sequence[Any]) -> "_ResultForm":
        status = cf.signature.status_messages is not None
        lone = results[-1] if len(results) == 1 + status else None
        inline_scalar = lone is not None and lone.rank == 0 and lone.dtype != np.float16
        inline_array = lone is not None and lone.rank > 0 and lone.is_static and 0 not in lone.shape
        typed = None
        if inline_scalar:
            typed = _TYPED.typeof(f"struct sprue_scalar_{lone.element.name} *")
        elif inline_array:
            typed = _TYPED.typeof("struct sprue_owned *")
        return _ResultForm(status, 3 if status else 0, lone, inline_scalar, inline_array, typed,
                           status and len(results) > 1)


def _generate(cf: Any, kinds: list, finish: Any, results: Sequence[Any]) -> Callable[[tuple], Any]:
    pool: list = []
    src = _Source(_globals(cf, pool), _unpack_arguments(kinds))
    _add_arguments(src, cf._ffi, cf._converters, kinds)
    form = _ResultForm.of(cf, results)
    if cf._result_type is not None:
        src.state_names += ["res", "words"] + (["rv"] if form.typed is not None else []) + (
            ["sv"] if form.status_view else [])
        src.state_makers.append(_result_maker(cf._ffi, cf._result_type, form))

    def new_state() -> tuple:
        parts: list = []
        for make in src.state_makers:
            parts += make()
        return tuple(parts)
    src.g["new_state"] = new_state

    body = src.body
    body += ["    try: st = pop()", "    except IndexError: st = new_state()", "    try:"]
    if src.state_names:
        body.append(f"        {', '.join(src.state_names)}{',' if len(src.state_names) == 1 else ''} = st")
    body += src.fill
    call_args = ", ".join((["res"] if cf._result_type is not None else []) + src.descs)
    if cf.checked:   # the library's status: 0, or the byte count of an allocation that failed
        src.g["oom"] = cf.allocation_error
        body.append(f"        if (failed := fn({call_args})): raise oom(failed)")
    else:
        body.append(f"        fn({call_args})")
    body += _read_results(cf, form, src.g)
    body += ["    finally:", "        append(st)"]
    if form.inline_scalar:
        body.append("    return v" if finish == SINGLE else "    return [v]" if finish == LIST else "    return fin([v])")
    else:
        body.append("    return out[0]" if finish == SINGLE else "    return out" if finish == LIST
                    else "    return fin(out)")
    src.g["fin"] = (lambda out: out[0]) if finish == SINGLE else (lambda out: out) if finish == LIST else finish
    source = "\n".join(body) + "\n"
    code = compile(source, f"<sprue fast call of {cf.name}>", "exec")
    exec(code, src.g)
    call = src.g["call"]
    call.source = source   # for debugging: the generated code
    call.pool = pool
    return call


def bind(call: _PythonCaller, cf: Any) -> Callable[[tuple], Any]:
    """`call`, a caller built on a stand-in of `cf` (function._Parts: made before its library was
    open), calling `cf`'s library function and raising `cf`'s allocation errors."""
    call.bound = cf
    if call.call is not None:
        _bind_globals(call.call, cf)
    return _in_c(call, cf)


def _bind_globals(call: Callable[[tuple], Any], cf: Any) -> None:
    g = call.__globals__
    g["fn"] = cf._fn
    if "oom" in g:
        g["oom"] = cf.allocation_error


def _globals(cf: Any, pool: list) -> dict[str, Any]:
    """The names every caller's source uses, bound for `cf` (a pool of states of its own)."""
    g: dict[str, Any] = {
        "MISS": MISS, "ndarray": np.ndarray, "eager": EagerArray, "PBP": _PASS_BY_POINTER, "from_buffer": cffi_ops.from_buffer,
        "CHARS": cf._ffi.typeof("char[]"), "fn": cf._fn, "U": cf._unpacker, "unpack": cffi_ops.unpack,
        "NW": cf._unpacker._nwords, "ccopy": _c_copy, "Overflow": (OverflowError, TypeError),
    }
    g["pop"], g["append"] = pool.pop, pool.append
    return g


def _unpack_arguments(kinds: list) -> list[str]:
    """The caller's first lines: the argument tuple's length checked, its entries named a0, a1, ..."""
    n = sum(not isinstance(k, Const) for k in kinds)   # entries of the argument tuple
    body = ["def call(args):", f"    if len(args) != {n}: return MISS"]
    if n:
        body.append(f"    {', '.join(f'a{i}' for i in range(n))}{',' if n == 1 else ''} = args")
    return body


def _add_arguments(src: _Source, ffi: Any, converters: Sequence[Any], kinds: list) -> None:
    """The checks of each argument against its kind and its store into the state."""
    j = 0   # runtime argument index
    i = -1  # argument tuple index
    for k in kinds:
        if not isinstance(k, Const):
            i += 1
        a = f"a{i}"
        if isinstance(k, Skip):
            _check_skipped(src, k, i, a)
            continue
        conv = converters[j]
        d = f"d{j}"
        src.descs.append(d)
        if isinstance(k, (Const, Scalar)):
            _add_cell(src, conv, k, i, j, a, d)
        elif isinstance(k, Array):
            _add_array(src, ffi, conv, k, i, j, a, d)
        else:   # DynArray
            _add_dyn_array(src, ffi, conv, k, i, j, a, d)
        j += 1


def _check_skipped(src: _Source, k: Skip, i: int, a: str) -> None:
    src.g[f"s{i}"] = k.value
    if k.same is not None:
        src.g[f"same{i}"] = k.same
        src.body.append(f"    if not same{i}({a}): return MISS")
    elif type(k.value) in _BY_VALUE:
        src.g[f"st{i}"] = type(k.value)
        src.body.append(f"    if not ({a} is s{i} or (type({a}) is st{i} and {a} == s{i})): return MISS")
    else:
        src.body.append(f"    if {a} is not s{i}: return MISS")


def _add_cell(src: _Source, conv: Any, k: Const | Scalar, i: int, j: int, a: str, d: str) -> None:
    c = f"c{j}"
    src.state_names += [c, d]
    src.state_makers.append(_cell_maker(conv, k.value if isinstance(k, Const) else None))
    if isinstance(k, Scalar):
        src.g[f"t{i}"] = k.type
        src.body.append(f"    if type({a}) is not t{i}: return MISS")
        src.fill += [f"        try: {c}[0] = {a}", "        except Overflow: return MISS"]


def _add_array(src: _Source, ffi: Any, conv: Any, k: Array, i: int, j: int, a: str, d: str) -> None:
    src.g[f"dt{i}"], src.g[f"sh{i}"] = k.dtype, k.shape
    src.body.append(f"    if type({a}) is not ndarray and type({a}) is not eager or {a}.dtype is not dt{i}"
                    f" or {a}.shape != sh{i}: return MISS")
    src.body.append(f"    if {a}.flags.num & PBP != PBP: {a} = ccopy({a})")
    src.state_names.append(d)
    src.state_makers.append(_desc_maker(ffi, conv, k.shape))
    src.fill.append(f"        b{j} = from_buffer(CHARS, {a}, False); {d}.allocated = b{j}; {d}.aligned = b{j}")


def _add_dyn_array(src: _Source, ffi: Any, conv: Any, k: DynArray, i: int, j: int, a: str, d: str) -> None:
    src.g[f"dt{i}"] = k.dtype
    src.body.append(f"    if type({a}) is not ndarray and type({a}) is not eager or {a}.dtype is not dt{i}: return MISS")
    src.body.append(f"    z{i} = {a}.shape")
    cond = [f"len(z{i}) != {k.rank}"] + [f"z{i}[{ax}] != {size}" for ax, size in k.static_axes]
    src.body.append(f"    if {' or '.join(cond)}: return MISS")
    src.body.append(f"    if {a}.flags.num & PBP != PBP: {a} = ccopy({a})")
    src.state_names.append(d)
    src.state_makers.append(_desc_maker(ffi, conv, None))
    src.fill.append(f"        b{j} = from_buffer(CHARS, {a}, False); {d}.allocated = b{j}; {d}.aligned = b{j}")
    if k.rank:
        src.fill.append(f"        {d}.sizes = z{i}")
    if k.rank > 1:   # rank 1: the stride is always 1, set when the state is made
        src.g[f"rm{j}"] = _row_major_expr(k.rank)
        src.fill.append(f"        {d}.strides = rm{j}(z{i})")


def _result_maker(ffi: Any, result_type: Any, form: _ResultForm) -> Callable[[], list]:
    """The results' part of a state: the result object, its words and the typed views of it."""
    words_ptr = ffi.typeof("int64_t *")
    status_ptr = _TYPED.typeof("struct sprue_scalar_i64 *")

    def make() -> list:
        res = cffi_ops.newp(result_type, None)
        words = cffi_ops.cast(words_ptr, res)
        out = [res, words]
        if form.typed is not None:
            out.append(cffi_ops.cast(form.typed, words + form.base))
        if form.status_view:
            out.append(cffi_ops.cast(status_ptr, res))
        return out
    return make


def _read_results(cf: Any, form: _ResultForm, g: dict[str, Any]) -> list[str]:
    """The lines after the foreign call that read its results into `out` (or `v`, a lone scalar)."""
    body: list[str] = []
    if form.status_view and form.typed is not None:
        # A failed check, a null status or a status sharing the result's buffer: the general
        # unpacker raises, frees every buffer once, or sorts out the sharing.
        body += ["        q = sv.allocated",
                 "        if not q or sv.aligned[sv.offset] or q == rv.allocated:",
                 "            return fin(U.unpack_words(unpack(words, NW)))"]
    if cf._result_type is None:
        body.append("        out = []")
    elif form.inline_scalar:
        g["conv"] = scalar_from_c(form.lone.dtype)
        body += ["        p = rv.allocated",
                 "        if not p: return fin(U.unpack_words(unpack(words, NW)))",   # raises MemoryError
                 "        try: v = conv(rv.aligned[rv.offset])",
                 "        finally: U.free(p)"]
        if form.status_view:
            body.append("        U.free(q)")
    elif form.inline_array:
        body += _read_lone_array(form, g)
    elif form.status_view:
        # the status read here, the other results by the unpacker of the rest (its own words)
        g["REST"] = cf._unpacker._rest._unpack
        others = ", ".join(f"w[{r.word}]" for r in cf._unpacker._rest._readers)
        body += ["        q = sv.allocated",
                 "        if not q or sv.aligned[sv.offset]: return fin(U.unpack_words(unpack(words, NW)))",
                 "        w = unpack(words, NW)",
                 f"        if w[0] in ({others},): out = U.unpack_words(w)",   # a result shares its buffer
                 "        else:",
                 "            out = REST(w)",
                 "            U.free(q)"]
    else:
        body.append("        out = U.unpack_words(unpack(words, NW))")
    return body


def _read_lone_array(form: _ResultForm, g: dict[str, Any]) -> list[str]:
    """A lone array result of static shape built here when its layout is the usual one (else by the
    general unpacker)."""
    lone = form.lone
    r, b = lone.rank, form.base
    g.update(LAYOUT=list(lone.shape) + list(c_strides(lone.shape)), SHAPE=tuple(lone.shape), DT=lone.dtype,
             ISZ=lone.dtype.itemsize, NB=int(np.prod(lone.shape)) * lone.dtype.itemsize,
             gcp=cffi_ops.gcp, buffer=cffi_ops.buffer, ndarray=np.ndarray)
    body = ["        w = unpack(words, NW)",
            f"        if w[{b}] and w[{b + 3}:{b + 3 + 2 * r}] == LAYOUT"
            f" and w[{b + 1}] - w[{b}] + w[{b + 2}] * ISZ >= 0:",
            f"            start = w[{b + 1}] - w[{b}] + w[{b + 2}] * ISZ",
            "            out = [ndarray(SHAPE, DT, buffer(gcp(rv.allocated, U.free), start + NB), start)]"]
    if form.status_view:
        body.append("            U.free(q)")
    body += ["        else:",
             "            out = U.unpack_words(w)"]
    return body


def _c_copy(a: np.ndarray) -> np.ndarray:
    """A fresh C-contiguous, aligned, writeable copy (see arguments.py on why)."""
    return np.array(a, order="C", copy=True)


def _row_major_expr(rank: int) -> Callable[[tuple], tuple]:
    return ROW_MAJOR_STRIDES.get(rank, c_strides)


def _cell_maker(conv: Any, const: Any) -> Callable[[], list]:
    elem_ptr = conv._elem_ptr_type
    desc_type = conv._desc_type

    def make() -> list:
        cell = cffi_ops.newp(elem_ptr, const if const is not None else 0)
        desc = cffi_ops.newp(desc_type, (cell, cell, 0))
        return [cell, desc]
    return make


def _desc_maker(ffi: Any, conv: Any, shape: tuple | None) -> Callable[[], list]:
    desc_type = conv._desc_type
    rank = conv.spec.rank
    if shape is not None:
        init = (ffi.NULL, ffi.NULL, 0) + ((shape, c_strides(shape)) if rank else ())
    else:
        init = (ffi.NULL, ffi.NULL, 0) + (((0,) * rank, (1,) * rank) if rank else ())

    def make() -> list:
        return [cffi_ops.newp(desc_type, init)]
    return make
