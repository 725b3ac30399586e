"""Rows at the boundary of a compiled function: collapsed on the way in, restored on the way out.

A parameter typed `sprue.f64["*b", "n"]` (OCANNL's row variable: any number of leading axes) is
compiled as `f64[B, n]`, B an implicit size named `*b` (sprue.runtime.kernel_signature's row
names). A call passes each such argument reshaped to `(prod(row sizes), n)` — numpy's reshape, a
view of a contiguous array (no copy), a copy of any other — and gives each result whose first
axis is that B its row back: `(B, k)` is reshaped to `(*row sizes, k)`. The same boundary serves
qjit (frontend/api/qjit.py), programs loaded by sprue.load and calls inside other traces
(call_sites.py, with lax.reshape). A named row must be the same axes in every argument it types.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sprue.base.errors import SprueValueError, at
from sprue.ir.core import Jaxpr
from sprue.ir.shapes import format_dim, prove_equal
from sprue.trace.rows import row_name_of as row_of  # (the row a dim is exactly the size of)

__all__ = ["RowBoundary", "row_of", "row_text"]


def row_text(name: str) -> str:
    """A row as the user wrote it, for messages: `*b`, or "`...` of argument 'x'"."""
    return f"`...` of argument '{name[3:]}'" if name.startswith("...") else name


@dataclass(frozen=True)
class RowBoundary:
    """Per explicit argument and per result: the row its first axis carries (None: none), and
    each argument's rank as compiled (the row counting as one axis)."""
    args: tuple
    ranks: tuple
    results: tuple

    @staticmethod
    def of(jaxpr: Jaxpr, n_implicit: int) -> "RowBoundary | None":
        """The rows of a traced (or loaded) jaxpr's arguments and results; None when it has none."""
        explicit = jaxpr.invars[n_implicit:]
        args = tuple(row_of(v.aval.shape[0]) if v.aval.shape else None for v in explicit)
        if not any(args):
            return None
        results = tuple(row_of(v.aval.shape[0]) if v.aval.shape else None for v in jaxpr.outvars)
        return RowBoundary(args, tuple(len(v.aval.shape) for v in explicit), results)

    def collapse(self, leaves: list, paths: list, fn_name: str) -> tuple[list, dict]:
        """The arguments with each row collapsed into one axis, and each row's sizes (by name)."""
        sizes: dict[str, tuple] = {}
        first: dict[str, str] = {}
        out = list(leaves)
        for i, (x, row) in enumerate(zip(leaves, self.args)):
            if row is None:
                continue
            x = np.asarray(x)
            shape = row_shape = x.shape
            trailing = self.ranks[i] - 1
            if x.ndim < trailing:
                raise SprueValueError(f"{fn_name}(): argument '{paths[i]}' has shape {shape}, but its type has"
                                      f" {trailing} axes after the row {row_text(row)}: it needs rank {trailing} or"
                                      f" more")
            row_shape, rest = shape[:x.ndim - trailing], shape[x.ndim - trailing:]
            if row in sizes and sizes[row] != row_shape:
                raise SprueValueError(
                    f"{fn_name}(): the row {row} is {sizes[row]} in argument '{first[row]}' but {row_shape} in"
                    f" argument '{paths[i]}': a named row is the same leading axes in every argument it types")
            sizes[row], first[row] = row_shape, paths[i]
            out[i] = x.reshape((math.prod(row_shape), *rest))   # a view when x is contiguous
        return out, sizes

    def collapse_destinations(self, dests: list, sizes: dict, fn_name: str) -> list:
        """`out=` destinations with each result's row collapsed: views only (a destination whose
        row cannot be viewed as one axis would be written in a copy)."""
        out = []
        for k, (d, row) in enumerate(zip(dests, self.results)):
            if row is None or row not in sizes or not isinstance(d, np.ndarray):
                out.append(d)
                continue
            n = len(sizes[row])
            view = d.view()
            try:
                view.shape = (math.prod(d.shape[:n]), *d.shape[n:])
            except AttributeError:
                raise SprueValueError(f"{fn_name}(): out= destination {k} of shape {d.shape} cannot hold its row"
                                      f" {row_text(row)} as one axis without a copy (its leading axes are not"
                                      f" contiguous): pass a contiguous array") from None
            out.append(view)
        return out

    def restore_shapes(self, shapes: list, sizes: dict) -> list:
        """Result shapes (of the collapsed program) with each row's axes back in place."""
        return [tuple(s) if row is None or row not in sizes else (*sizes[row], *s[1:])
                for s, row in zip(shapes, self.results)]

    def restore(self, outs: list, sizes: dict) -> list:
        """The results with each row's axes back in place of its collapsed axis."""
        return [o if row is None or row not in sizes else np.reshape(o, (*sizes[row], *np.shape(o)[1:]))
                for o, row in zip(outs, self.results)]


def collapse_traced(fn_name: str, specs, shapes: list, where: str | None) -> tuple[list, dict, list]:
    """For a call inside a trace: each argument's shape with its row (by the signature's specs)
    collapsed, each row's dims (by name), and the run-time checks (shape_signatures.Binding's
    ("eq", a, b, message)) of a named row's dims that only run time can compare across arguments;
    provably different ones raise now."""
    sizes: dict[str, tuple] = {}
    first: dict[str, str] = {}
    out, runtime = [], []
    for spec, shape in zip(specs, shapes):
        row = spec.patterns[0].row if spec.patterns else None
        if row is None:
            out.append(tuple(shape))
            continue
        trailing = len(spec.patterns) - 1
        if len(shape) < trailing:
            raise SprueValueError(f"{fn_name}(): {spec.label} of type {spec.type_text} does not fit a rank-{len(shape)}"
                                  f" array: it needs rank {trailing} or more{at(where)}")
        row_dims, rest = tuple(shape[:len(shape) - trailing]), tuple(shape[len(shape) - trailing:])
        if row in sizes:
            before = sizes[row]
            fmt = lambda dims: "(" + ", ".join(format_dim(d) for d in dims) + ")"   # noqa: E731
            message = (f"{fn_name}(): the row {row} is {fmt(before)} in {first[row]} but {fmt(row_dims)} in"
                       f" {spec.label}: a named row is the same leading axes in every argument it types{at(where)}")
            if len(before) != len(row_dims) or any(prove_equal(a, b) is False for a, b in zip(before, row_dims)):
                raise SprueValueError(message)
            runtime += [("eq", b, a, message) for a, b in zip(before, row_dims) if prove_equal(a, b) is None]
        sizes.setdefault(row, row_dims)   # (the first argument's dims name the results' row)
        first.setdefault(row, spec.label)
        total = 1
        for d in row_dims:
            total = total * d
        out.append((total, *rest))
    return out, sizes, runtime
