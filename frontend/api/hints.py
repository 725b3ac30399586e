"""Type hints that fix a parameter's abstract value, so qjit can compile at decoration time:

    @sprue.qjit
    def f(x: sprue.f64["n", 4], y: sprue.f64["n"], k: int) -> ...

`sprue.f64[3, 4]` is a float64 array of shape (3, 4); a string is a dimension known only at run
time: a name ("n"; the same name twice is the same size) or an expression over names
("m*4", "n+1", "(n+3)//4"; see sprue.ir.dim_patterns for what binds a name and what is checked);
`int`, `float`, `bool` are Python scalars. A return annotation is checked against the results.

A shape may begin with a row (OCANNL's row variables): `sprue.f64[..., "n"]` takes arrays of any
rank >= 1 whose last axis is n (the leading axes are an anonymous row, the parameter's own), and
`sprue.f64["*b", "n"]` names the row, so that every `*b` of the signature (parameters and the
return annotation) is the same leading axes. The function is compiled once for every rank of its
rows (see sprue.trace.rows)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueTypeError, at
from sprue.base.pytree import tree_flatten
from sprue.base.source_info import user_frame_summary
from sprue.ir.core import ShapedArray
from sprue.ir.dim_patterns import parse_dim_pattern
from sprue.ir.shapes import MAX_DIM


@dataclass(frozen=True)
class ArrayHint:
    dtype: np.dtype
    shape: tuple

    @property
    def aval(self) -> ShapedArray:
        return ShapedArray(self.shape, self.dtype)

    def __repr__(self):
        return f"sprue.{dtypes.short_name(self.dtype)}[{', '.join(repr(d) for d in self.shape)}]"


class _DtypeHint:
    """`sprue.f64[3, 4]` -> ArrayHint(float64, (3, 4)); `sprue.f64[()]` is a 0-d array."""

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)

    def __getitem__(self, dims) -> ArrayHint:
        if not isinstance(dims, tuple):
            dims = (dims,)
        where = f"sprue.{dtypes.short_name(self.dtype)}[...]"
        dims = tuple("..." if d is Ellipsis else d for d in dims)
        for i, d in enumerate(dims):
            if isinstance(d, str) and d.strip().startswith(("*", "...")) and not d.strip().startswith("**"):
                if i != 0:   # rows extend a shape at the front, as broadcasting does (OCANNL's rows)
                    raise SprueTypeError(
                        f"{where}: the row {d.strip()!r} must be the first entry of the shape (a row stands for the"
                        f" leading axes: broadcasting extends shapes at the front){at(user_frame_summary())}")
                if d.strip() != "...":   # "...x": the name a signature gives an anonymous row, not the user's
                    parse_dim_pattern(d, where, user_frame_summary())
                continue
            if d is None:   # an open size: inferred from the function's use of it (api/shape_inference.py)
                continue
            if isinstance(d, str):   # the hint is made where it is written: name the user's line
                parse_dim_pattern(d, f"sprue.{dtypes.short_name(self.dtype)}[...]", user_frame_summary())
                continue
            if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d < 0:
                raise SprueTypeError(
                    f"sprue.{dtypes.short_name(self.dtype)}[...]: dimension {d!r} must be a non-negative int"
                    f" (a static size), a name such as \"n\" (a size known at run time), or, first, a row"
                    f" (`...` or \"*b\": any number of leading axes){at(user_frame_summary())}")
            if d > MAX_DIM:
                raise SprueTypeError(
                    f"sprue.{dtypes.short_name(self.dtype)}[...]: dimension {d} does not fit in int64 (sizes are at"
                    f" most 2**63-1){at(user_frame_summary())}")
        return ArrayHint(self.dtype, tuple(d.strip() if isinstance(d, str) else d if d is None else int(d)
                                           for d in dims))

    def __repr__(self):
        return f"sprue.{dtypes.short_name(self.dtype)}"


f64 = _DtypeHint(np.float64)
f32 = _DtypeHint(np.float32)
i64 = _DtypeHint(np.int64)
i32 = _DtypeHint(np.int32)
i16 = _DtypeHint(np.int16)
i8 = _DtypeHint(np.int8)
u8 = _DtypeHint(np.uint8)
bool_ = _DtypeHint(np.bool_)
c64 = _DtypeHint(np.complex64)
c128 = _DtypeHint(np.complex128)

_SCALAR_HINTS = {int: ShapedArray((), dtypes.int64, weak_type=True),
                 float: ShapedArray((), dtypes.float64, weak_type=True),
                 bool: ShapedArray((), dtypes.bool_, weak_type=True),
                 complex: ShapedArray((), dtypes.complex128, weak_type=True)}


def is_scalar_hint(h) -> bool:
    """`int`, `float`, `bool` or `complex` (a dict hint is unhashable: `h in _SCALAR_HINTS` would raise)."""
    return isinstance(h, type) and h in _SCALAR_HINTS


def is_hint(h) -> bool:
    """A usable hint: an ArrayHint of a whole shape, int/float/bool, or a tuple/list/dict of them
    (a shape with open sizes, `sprue.f64["b", None]`, is inferred: api/shape_inference.py)."""
    if isinstance(h, ArrayHint):
        return None not in h.shape
    if is_scalar_hint(h):
        return True
    if isinstance(h, (tuple, list, dict)):
        leaves, _ = tree_flatten(h)
        return bool(leaves) and all(is_hint(x) for x in leaves if not isinstance(x, (tuple, list, dict)))
    return False


def named_rows(h, label: str):
    """The hint with each anonymous row (`...`) named after its parameter's leaf (`...x`,
    `...p['w']`): anonymous rows are each their own. `label` is the parameter's name."""
    if isinstance(h, ArrayHint):
        if h.shape and h.shape[0] == "...":
            return ArrayHint(h.dtype, ("..." + label, *h.shape[1:]))
        return h
    if isinstance(h, tuple):
        return tuple(named_rows(x, f"{label}[{i}]") for i, x in enumerate(h))
    if isinstance(h, list):
        return [named_rows(x, f"{label}[{i}]") for i, x in enumerate(h)]
    if isinstance(h, dict):
        return {k: named_rows(v, f"{label}[{k!r}]") for k, v in h.items()}
    return h


def hint_to_avals(h):
    """The pytree of ShapedArrays a hint stands for (same structure as the hint)."""
    if isinstance(h, ArrayHint):
        return h.aval
    if is_scalar_hint(h):
        return _SCALAR_HINTS[h]
    if isinstance(h, tuple):
        return tuple(hint_to_avals(x) for x in h)
    if isinstance(h, list):
        return [hint_to_avals(x) for x in h]
    if isinstance(h, dict):
        return {k: hint_to_avals(v) for k, v in h.items()}
    raise SprueTypeError(f"not a sprue type hint: {h!r}")
