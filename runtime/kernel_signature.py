"""The typed signature of a compiled function: names, dtypes and shapes.

A Signature lists every flat argument and every flat result as a TensorSpec.
Shape entries are ints (static) or None (dynamic: any size is accepted at
the call boundary and the compiled code reports result sizes through the
returned descriptors). It round-trips through JSON so that a library cached
on disk can be loaded again without the compiler.

A function compiled with run-time checks declares `status_messages`: it then
returns one more result, before all of `results`: an i64 scalar status, 0 when
every check held, else the 1-based code of the first failed check, whose
message is status_messages[code - 1]. The runtime raises that message as a
SprueValueError (after freeing every other result).

JSON format (version 1):

    {"version": 1,
     "args":    [{"name": "x", "dtype": "f64", "shape": [3, null]}, ...],
     "results": [{"name": "out", "dtype": "bool", "shape": []}, ...],
     "status_messages": ["size mismatch ...", ...],      (optional)
     "shape_function": {"params": [...], "results": [...], ...}}   (optional)

dtype is a short element-type name (see sprue.runtime.element_types); shape [] is a
scalar.

`shape_function` (sprue.runtime.shape_function) gives every result's shape from
the values of the size arguments, or records which result axis is computed
from data. Signatures made by the compiler carry it; hand-written ones may
leave it out (then only static result shapes are known before a call).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from sprue.runtime.element_types import ElementType, element_type, element_type_of
from sprue.runtime.shape_function import ShapeFunction

__all__ = ["TensorSpec", "Signature", "SIGNATURE_VERSION", "STATUS_SPEC", "is_row_name", "row_c_name"]

SIGNATURE_VERSION = 1

Dim = int | None

# OCANNL's row variables (`sprue.f64["*b", "n"]`, `sprue.f64[..., "n"]`): a row is passed to the
# kernel collapsed into one axis, whose size is an implicit size argument named after the row:
# `*b` for a named row, `...x` for the anonymous row of argument x. The name is all that marks
# such a size in a Signature, a saved program's `# implicit` line and a C header.
ROW_PREFIXES = ("*", "...")


def is_row_name(name: str) -> bool:
    """Whether an implicit size argument named `name` is a row collapsed into one axis."""
    return isinstance(name, str) and name.startswith(ROW_PREFIXES)


def row_c_name(name: str) -> str:
    """The row's name without its marker (`*b` -> `b`, `...x` -> `x`): its C parameters are
    `<that>_rank` and `<that>_sizes`."""
    return name[3:] if name.startswith("...") else name[1:]


def _normalize_shape(shape: object, where: str) -> tuple[Dim, ...]:
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Iterable):
        raise ValueError(f"{where}: shape must be a sequence of ints or None, got {shape!r}")
    dims: list[Dim] = []
    for d in shape:
        # bool is an int subclass but never a meaningful dimension.
        if d is None or (isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_))):
            if d is not None and d < 0:
                raise ValueError(f"{where}: negative dimension {d} in shape {tuple(shape)}")
            dims.append(None if d is None else int(d))
        else:
            raise ValueError(f"{where}: shape entries must be ints or None, got {d!r}")
    return tuple(dims)


@dataclass(frozen=True, init=False)
class TensorSpec:
    """One argument or result: a name, an element type and a shape."""

    name: str
    element: ElementType
    shape: tuple[Dim, ...]

    def __init__(self, name: str, dtype: object, shape: Sequence[Dim]) -> None:
        if not isinstance(name, str):
            raise TypeError(f"TensorSpec name must be a str, got {type(name).__name__}")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "element", element_type_of(dtype))
        object.__setattr__(self, "shape", _normalize_shape(shape, f"TensorSpec {name!r}"))

    @property
    def dtype(self) -> np.dtype:
        return self.element.dtype

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        return None not in self.shape

    @property
    def type_str(self) -> str:
        """Compact type used in messages: "f64[3,?]"; a scalar is "f64[]"."""
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.element.name}[{dims}]"

    def __str__(self) -> str:
        return f"{self.name}: {self.type_str}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.element.name, "shape": list(self.shape)}

    @classmethod
    def from_dict(cls, d: object) -> TensorSpec:
        if not isinstance(d, dict) or set(d) != {"name", "dtype", "shape"}:
            raise ValueError(f"a tensor spec must be an object with keys name, dtype, shape; got {d!r}")
        if not isinstance(d["dtype"], str):
            raise ValueError(f"tensor spec dtype must be a string, got {d['dtype']!r}")
        if not isinstance(d["shape"], list):
            raise ValueError(f"tensor spec shape must be a list, got {d['shape']!r}")
        if not isinstance(d["name"], str):
            raise ValueError(f"tensor spec name must be a string, got {d['name']!r}")
        return cls(d["name"], element_type(d["dtype"]).dtype, d["shape"])


@dataclass(frozen=True, init=False)
class Signature:
    """The flat arguments and flat results of one compiled function, in order, and the messages
    of its run-time checks when it returns a status first (see the module docstring)."""

    args: tuple[TensorSpec, ...]
    results: tuple[TensorSpec, ...]
    status_messages: tuple[str, ...] | None
    shape_function: ShapeFunction | None

    def __init__(self, args: Iterable[TensorSpec], results: Iterable[TensorSpec],
                 status_messages: Iterable[str] | None = None,
                 shape_function: ShapeFunction | None = None) -> None:
        args, results = tuple(args), tuple(results)
        for what, specs in (("args", args), ("results", results)):
            for s in specs:
                if not isinstance(s, TensorSpec):
                    raise TypeError(f"Signature {what} must be TensorSpecs, got {type(s).__name__}")
        if status_messages is not None:
            if isinstance(status_messages, (str, bytes)):
                raise TypeError("status_messages must be a sequence of str, not a single string")
            status_messages = tuple(status_messages)
            if not all(isinstance(m, str) for m in status_messages):
                raise TypeError("status_messages must all be str")
        if shape_function is not None:
            if not isinstance(shape_function, ShapeFunction):
                raise TypeError(f"shape_function must be a ShapeFunction, got {type(shape_function).__name__}")
            shape_function.check_against(args, results, "Signature")
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "results", results)
        object.__setattr__(self, "status_messages", status_messages)
        object.__setattr__(self, "shape_function", shape_function)

    def with_shape_function(self, shape_function: ShapeFunction | None) -> Signature:
        """This signature with `shape_function` (replacing any it had)."""
        return Signature(self.args, self.results, self.status_messages, shape_function)

    def result_shape_function(self) -> ShapeFunction | None:
        """The recorded shape function; else, when every result shape is static, the static one;
        else None (unknown before a call)."""
        if self.shape_function is not None:
            return self.shape_function
        if all(r.is_static for r in self.results):
            return ShapeFunction.static([r.shape for r in self.results])
        return None

    @property
    def has_status(self) -> bool:
        return self.status_messages is not None

    @property
    def c_results(self) -> tuple[TensorSpec, ...]:
        """The results the C function returns: the status first when there is one."""
        return (STATUS_SPEC, *self.results) if self.has_status else self.results

    def __str__(self) -> str:
        a = ", ".join(map(str, self.args))
        r = ", ".join(s.type_str for s in self.results)
        return f"({a}) -> ({r})"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "version": SIGNATURE_VERSION,
            "args": [s.to_dict() for s in self.args],
            "results": [s.to_dict() for s in self.results],
        }
        if self.has_status:
            d["status_messages"] = list(self.status_messages)
        if self.shape_function is not None:
            d["shape_function"] = self.shape_function.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: object) -> Signature:
        if not isinstance(d, dict):
            raise ValueError(f"a signature must be a JSON object, got {type(d).__name__}")
        if d.get("version") != SIGNATURE_VERSION:
            raise ValueError(
                f"unsupported signature version {d.get('version')!r}; this runtime reads version {SIGNATURE_VERSION}"
            )
        if not {"version", "args", "results"} <= set(d) <= {"version", "args", "results", "status_messages",
                                                           "shape_function"}:
            raise ValueError(f"a signature must have keys version, args, results (and optionally status_messages,"
                             f" shape_function); got {sorted(d)}")
        if not isinstance(d["args"], list) or not isinstance(d["results"], list):
            raise ValueError("signature args and results must be lists")
        messages = d.get("status_messages")
        if messages is not None and (not isinstance(messages, list) or not all(isinstance(m, str) for m in messages)):
            raise ValueError(f"signature status_messages must be a list of strings, got {messages!r}")
        shape_function = ShapeFunction.from_dict(d["shape_function"]) if "shape_function" in d else None
        return cls(map(TensorSpec.from_dict, d["args"]), map(TensorSpec.from_dict, d["results"]), messages,
                   shape_function)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> Signature:
        try:
            d = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"signature is not valid JSON: {exc}") from exc
        return cls.from_dict(d)


# The status result of a function with run-time checks (see the module docstring).
STATUS_SPEC = TensorSpec("status", np.int64, ())
