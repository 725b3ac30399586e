"""Compiled functions that pickle by program (issue 17): the payload a qjit'd function or a loaded
program pickles to, its checks, and the pieces it is made of.

A `QJIT` (api/qjit.py) or a `LoadedProgram` (api/saved.py) pickles -- with `pickle` or with
`cloudpickle`, what Dask and Ray use -- to a call of an unpickling function of sprue with two
arguments: a payload (bytes) and a tuple of plain Python objects of the user's (static argument
values, parameter defaults, dict keys and namedtuple classes of the argument trees, the
`abstracted_axes` spec), which the pickler carries as it carries any object. The payload is

    sprue pickle 1 sprue 0.1.0        the payload format and the sprue version that wrote it
    sha256 <hex>                      of the JSON that follows
    {"kind": "qjit", ...}             JSON: no code, no paths that are loaded

and carries, for each compiled signature, the program in sprue.save's format (api/saved.py:
jaxpr, consts and implicit sizes; io/saved_format.py), each equation's source line (part of the
compile cache key: it reaches the run-time check messages), the jaxpr's digest and the sender's
compile cache key; the argument and result trees; the parameters (names, kinds, type hints). Not the
Python function: a receiving process rebuilds the function from the programs, looking each one up
in its own compile cache (a hit loads the library, importing neither MLIR nor llvmlite) or compiling
it from the carried jaxpr.

Unpickling checks, before anything is read: that the payload is one (else it was modified); that
its format and sprue version are this process's (else UnpicklingError names both: install the same
sprue version wherever the function travels); that the JSON matches its sha256 (else it was
truncated or modified). Then that each program read back has the digest the sender computed. None
of this is a defence against a malicious pickle -- unpickling runs whatever a pickle names, as
Python's documentation warns -- but sprue itself never loads code named by a payload: no library
path travels, and a carried cache key is never used to pick a library. The receiver computes the
key from the program it read, and loads only from its own compile cache, whose folders and files
it checks are the current user's alone (compile_cache.check_trusted); it compiles otherwise.

A function with no compiled signature has no program to carry: it pickles by reference (its module
and qualified name, imported by the receiver, as pickle does for functions) when that names it,
and pickling it raises an error saying why not otherwise.
"""
from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
import threading
from collections import OrderedDict
from typing import Any, Callable

import numpy as np

from sprue.api import compile_cache
from sprue.api.hints import ArrayHint, is_scalar_hint
from sprue.base.errors import SprueTypeError, UnpicklingError
from sprue.base.pytree import LEAF, TreeDef
from sprue.io.jaxpr_lexer import JaxprError
from sprue.io.saved_format import parse_saved, to_text
from sprue.ir.core import ClosedJaxpr, Jaxpr, ShapedArray
from sprue.lax.calls import pjit_p

__all__ = ["FORMAT", "MAGIC", "dumps", "loads", "program_entry", "read_program", "reference_of"]

MAGIC = b"sprue pickle"
FORMAT = 1
ANYWHERE = "a pickled sprue function"


def sprue_version() -> str:
    return str(getattr(sys.modules.get("sprue"), "__version__", "unknown"))


# -- the payload -------------------------------------------------------------------------------
def _sha256(data: bytes) -> str:
    h = compile_cache.sha256(len(data))
    h.update(data)
    return h.hexdigest()


def dumps(kind: str, body: dict) -> bytes:
    """The payload of a `kind` ("qjit", "program") with this JSON body."""
    data = json.dumps({"kind": kind, **body}, sort_keys=True, separators=(",", ":")).encode()
    head = f"{MAGIC.decode()} {FORMAT} sprue {sprue_version()}\nsha256 {_sha256(data)}\n"
    return head.encode() + data


def loads(payload: Any, kind: str) -> dict:
    """The JSON body of a payload of `kind`, checked (module docstring); UnpicklingError otherwise."""
    if not isinstance(payload, bytes) or not payload.startswith(MAGIC + b" "):
        raise UnpicklingError(f"{ANYWHERE}: the payload is not a sprue pickle (it does not start with"
                              f" {MAGIC.decode()!r}): the pickle was modified or is not sprue's; nothing was loaded")
    head, _, rest = payload.partition(b"\n")
    fields = head.decode("utf-8", "replace").split(" ")
    theirs = " ".join(fields[2:])
    ours = f"{FORMAT} sprue {sprue_version()}"
    if len(fields) != 5 or theirs != ours:
        version = fields[4] if len(fields) == 5 else "?"
        fmt = fields[2] if len(fields) > 2 else "?"
        raise UnpicklingError(
            f"{ANYWHERE} was pickled by sprue {version} (pickle format {fmt}); this process runs sprue"
            f" {sprue_version()} (format {FORMAT}), which does not read it. Install the same sprue version"
            f" wherever the function travels (the client and every worker), or pickle it again with this one;"
            f" nothing was loaded")
    digest_line, _, data = rest.partition(b"\n")
    if digest_line != f"sha256 {_sha256(data)}".encode():
        raise UnpicklingError(f"{ANYWHERE}: the payload does not match its sha256: it was truncated or modified after"
                              f" pickling; nothing was loaded")
    try:
        body = json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise UnpicklingError(f"{ANYWHERE}: the payload's body does not read ({e}); nothing was loaded") from None
    if not isinstance(body, dict) or body.get("kind") != kind:
        got = body.get("kind") if isinstance(body, dict) else type(body).__name__
        raise UnpicklingError(f"{ANYWHERE}: the payload holds a {got!r}, not a {kind!r}; nothing was loaded")
    return body


# -- one rebuild per payload and process --------------------------------------------------------
# Dask sends a task's function with every task; rebuilding it costs ~5 ms (reading the program,
# keying it, verifying the cache entry, setting up cffi), more than many tasks' work. A payload
# this process has rebuilt before (the same bytes, equal objects) gives the same object back, as
# pickle does a function it pickles by reference; so a function's compile_count on a worker counts
# its compilations there.
_MEMO_SIZE = 64
_memo: "OrderedDict[bytes, tuple[tuple, Any]]" = OrderedDict()
_memo_lock = threading.Lock()


def _forget_lock_after_fork() -> None:
    global _memo_lock
    _memo_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_lock_after_fork)


def _memo_key(payload: bytes) -> bytes:
    return b"\n".join(payload.split(b"\n", 2)[:2])   # the format and version, the body's sha256


def remembered(payload: bytes, objects: tuple):
    """What this process rebuilt from this (checked) payload and these objects before, or None."""
    key = _memo_key(payload)
    with _memo_lock:
        hit = _memo.get(key)
        if hit is not None:
            _memo.move_to_end(key)
    return hit[1] if hit is not None and same_objects(hit[0], objects) else None


def remember(payload: bytes, objects: tuple, rebuilt) -> None:
    key = _memo_key(payload)
    with _memo_lock:
        _memo[key] = (objects, rebuilt)
        while len(_memo) > _MEMO_SIZE:
            _memo.popitem(last=False)


def same_objects(a, b) -> bool:
    """Whether two unpickled object graphs are equal: by type and value, arrays by their bytes,
    floats by their bits (0.0 is not -0.0, as static arguments tell them apart)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same_objects(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_objects(a[k], b[k]) for k in a)
    if isinstance(a, (np.ndarray, np.generic, float, complex)):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    try:
        return bool(a == b)
    except (TypeError, ValueError):   # an == that cannot say: not known to be the same, so rebuilt
        return False


def malformed(name: str, e: Exception) -> UnpicklingError:
    """The error for a payload whose checked body does not describe a function (a bug, or a
    payload modified with its sha256 recomputed)."""
    return UnpicklingError(f"pickled sprue function '{name}': the payload is malformed ({type(e).__name__}: {e});"
                           f" nothing was loaded")


# -- programs -----------------------------------------------------------------------------------
def _eqns(jaxpr: Jaxpr):
    """Every equation of a jaxpr and of the jaxprs in its parameters, depth first (the order is
    the same for a jaxpr and the one read back from its text)."""
    for eqn in jaxpr.eqns:
        yield eqn
        for k in sorted(eqn.params):
            yield from _nested_eqns(eqn.params[k])


def _nested_eqns(value):
    if isinstance(value, ClosedJaxpr):
        yield from _eqns(value.jaxpr)
    elif isinstance(value, Jaxpr):
        yield from _eqns(value)
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _nested_eqns(v)


def program_entry(closed: ClosedJaxpr, n_implicit: int, arg_names: list[str], options: dict) -> dict:
    """What a payload carries of one compiled program: sprue.save's text, the equations' source
    lines (the text leaves them out), the jaxpr's digest and the sender's cache key.

    The jaxpr reader inlines call equations (a qjit'd function called inside another), as JAX's
    does: such a program reads back as the inlined one, whose digest and key are carried instead
    (computed by reading the text here), without source lines; the receiver compiles it once and
    caches it under its own key."""
    text = to_text(closed, n_implicit, arg_names)
    infos: list | None = [e.source_info for e in _eqns(closed.jaxpr)]
    if any(e.primitive is pjit_p for e in _eqns(closed.jaxpr)):
        closed, n_implicit, arg_names = parse_saved(text, "<pickled program>")
        infos = None
        for eqn in _eqns(closed.jaxpr):   # (the reader's: lines of the text, which the receiver's are not)
            eqn.source_info = None
    components = compile_cache.key_components(closed, n_implicit, arg_names, options)
    return {"program": text, "source_info": infos,
            "digest": None if components is None else components["jaxpr"],
            "cache_key": None if components is None else compile_cache.key_of(components)}


def read_program(entry: dict, name: str) -> tuple[ClosedJaxpr, int, list[str]]:
    """(closed jaxpr, implicit sizes, argument names) of a program_entry, its source lines put back
    and its digest checked against the sender's."""
    try:
        closed, n_implicit, names = parse_saved(entry["program"], f"<pickled {name}>")
    except JaxprError as e:
        raise UnpicklingError(f"pickled sprue function '{name}': its program does not read in this sprue version"
                              f" ({sprue_version()}): {e}; nothing was loaded") from None
    eqns = list(_eqns(closed.jaxpr))
    infos = entry["source_info"]
    if infos is None:   # the program had call equations, inlined by the reader: no source lines
        infos = [None] * len(eqns)
    if len(infos) != len(eqns) or not all(i is None or isinstance(i, str) for i in infos):
        raise UnpicklingError(f"pickled sprue function '{name}': its program has {len(eqns)} equations but the"
                              f" payload gives {len(infos)} source lines: it was modified; nothing was loaded")
    for eqn, info in zip(eqns, infos):
        eqn.source_info = info
    if entry["digest"] is not None and compile_cache.jaxpr_digest(closed) != entry["digest"]:
        raise UnpicklingError(f"pickled sprue function '{name}': its program reads back as another program than the"
                              f" one pickled (the jaxpr's digest differs): it was modified, or this sprue version"
                              f" ({sprue_version()}) reads it differently; nothing was loaded")
    return closed, n_implicit, names


# -- avals, trees, parameters -----------------------------------------------------------------
def encode_aval(a: ShapedArray) -> list:
    return [a.dtype.str, list(a.shape), a.weak_type]


def decode_aval(e: list) -> ShapedArray:
    dtype, shape, weak = e
    if not all(isinstance(d, (int, str)) and not isinstance(d, bool) for d in shape):
        raise ValueError(f"bad shape {shape!r}")
    return ShapedArray(tuple(shape), np.dtype(dtype), bool(weak))


def _index(objects: list, value) -> int:
    objects.append(value)
    return len(objects) - 1


def encode_tree(t: TreeDef, objects: list) -> list:
    meta = -1 if t.meta is None else _index(objects, t.meta)
    return [t.kind, meta, [encode_tree(c, objects) for c in t.children]]


def decode_tree(e: list, objects: tuple) -> TreeDef:
    kind, meta, children = e
    if kind not in ("leaf", "none", "tuple", "list", "dict", "odict", "ddict", "namedtuple", "custom"):
        raise ValueError(f"bad tree kind {kind!r}")
    if kind == "leaf":
        return LEAF
    return TreeDef(kind, None if meta == -1 else objects[meta], tuple(decode_tree(c, objects) for c in children))


_SCALARS = {"int": int, "float": float, "bool": bool}


def encode_hint(h, objects: list):
    """A type hint (sprue.f64["n"], int, or a tuple/list/dict of them) as JSON; None for none."""
    if h is inspect.Parameter.empty:
        return None
    if isinstance(h, ArrayHint):
        return ["array", h.dtype.str, list(h.shape)]
    if is_scalar_hint(h):
        return ["scalar", h.__name__]
    if isinstance(h, (tuple, list)):
        return [type(h).__name__, [encode_hint(x, objects) for x in h]]
    if isinstance(h, dict):
        return ["dict", [[_index(objects, k), encode_hint(v, objects)] for k, v in h.items()]]
    return None   # not a sprue hint: nothing the compiled function depends on


def decode_hint(e, objects: tuple):
    if e is None:
        return inspect.Parameter.empty
    kind, rest = e[0], e[1:]
    if kind == "array":
        return ArrayHint(np.dtype(rest[0]), tuple(rest[1]))
    if kind == "scalar":
        return _SCALARS[rest[0]]
    if kind in ("tuple", "list"):
        return (tuple if kind == "tuple" else list)(decode_hint(x, objects) for x in rest[0])
    if kind == "dict":
        return {objects[k]: decode_hint(v, objects) for k, v in rest[0]}
    raise ValueError(f"bad hint {kind!r}")


def encode_signature(sig: inspect.Signature, objects: list) -> dict:
    params = [[p.name, int(p.kind), -1 if p.default is inspect.Parameter.empty else _index(objects, p.default),
               encode_hint(p.annotation, objects)] for p in sig.parameters.values()]
    return {"params": params, "returns": encode_hint(sig.return_annotation, objects)}


_KINDS = {int(k): k for k in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                              inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.KEYWORD_ONLY,
                              inspect.Parameter.VAR_KEYWORD)}


def decode_signature(e: dict, objects: tuple, hints: bool) -> inspect.Signature:
    """The function's signature (with its sprue type hints when `hints`)."""
    params = [inspect.Parameter(name, _KINDS[kind],
                                default=inspect.Parameter.empty if default == -1 else objects[default],
                                annotation=decode_hint(hint, objects) if hints else inspect.Parameter.empty)
              for name, kind, default, hint in e["params"]]
    returns = decode_hint(e["returns"], objects) if hints else inspect.Signature.empty
    return inspect.Signature(params, return_annotation=returns)


# -- by reference -------------------------------------------------------------------------------
def reference_of(obj, fn) -> tuple[str | None, str]:
    """(`module:qualname`, "") when importing that module and reading that name gives `obj` or its
    function `fn` -- what pickle checks of a function it pickles by reference; else (None, why not).
    An unpickled copy's is its original's."""
    carried = getattr(fn, "__sprue_reference__", None)
    if carried is not None:
        return carried
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not module or not qualname:
        return None, "it has no module and qualified name"
    if "<locals>" in qualname or "<lambda>" in qualname:
        return None, f"it is defined inside a function or is a lambda ({qualname}), which no other process can import"
    try:
        found = _lookup(module, qualname)
    except (ImportError, AttributeError) as e:
        return None, f"{module}.{qualname} does not name it ({type(e).__name__}: {e})"
    if found is not obj and found is not fn:
        return None, f"{module}.{qualname} is another object"
    return f"{module}:{qualname}", ""


def _lookup(module: str, qualname: str):
    obj = sys.modules.get(module) or importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def resolve(reference: str | None, name: str, why_not: str):
    """The object a reference names in this process (its module imported if need be)."""
    if reference is None:
        raise UnpicklingError(f"{name}: its Python function did not travel with it ({why_not})")
    module, _, qualname = reference.partition(":")
    try:
        return _lookup(module, qualname)
    except (ImportError, AttributeError) as e:
        raise UnpicklingError(f"{name}: pickled by reference to {module}.{qualname}, which this process cannot"
                              f" import ({type(e).__name__}: {e}); define it in a module every process that"
                              f" unpickles it can import, or call it before pickling it (it then travels as its"
                              f" compiled programs)") from None


def source_reference(reference: str | None, why_not: str, name: str, signature: inspect.Signature,
                     carried: str, unwrap: Callable[[Any], Callable]) -> Callable:
    """The Python function of an unpickled qjit'd function, found by reference when a signature
    that did not travel (`carried` lists those that did) must be traced; the error otherwise."""
    found: list[Callable] = []

    def traced_by_reference(*args, **kwargs):
        if not found:
            try:
                found.append(unwrap(resolve(reference, name, why_not)))
            except UnpicklingError as e:
                raise SprueTypeError(
                    f"{e}. This copy of {name} was unpickled with its compiled signatures only: {carried};"
                    f" these arguments need a new one, traced from Python. Call {name} with such arguments before"
                    f" pickling it, or give it abstracted_axes or type hints so that one compilation fits every"
                    f" size") from None
        return found[0](*args, **kwargs)

    traced_by_reference.__name__ = name
    traced_by_reference.__qualname__ = reference.partition(":")[2] if reference else name
    traced_by_reference.__signature__ = signature
    # pickled again (a Dask scheduler passes graphs on), the copy names what the original named
    traced_by_reference.__sprue_reference__ = (reference, why_not)
    return traced_by_reference
