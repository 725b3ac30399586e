"""Shapes inferred from use (OCANNL's declarative, order-independent shape inference).

A qjit'd function some of whose parameters have a full hint (`x: sprue.f64["b", 784]`) and the
others a partial one (`sprue.f64["b", None]`), a bare dtype (`sprue.f64`) or none gets the missing
shapes from the constraints its program places on them, and compiles ahead of time like a fully
annotated one:

1. Ranks. A parameter without a shape is traced as a placeholder until its first use, which
   gives its rank, and the trace starts again: an operand of `@` is a matrix (rank 2); an operand
   of arithmetic with an array of rank >= 1 is a vector over the trailing axis (rank 1; numpy's
   broadcasting extends it at the front), with a scalar a scalar. Any other first use is an error
   asking for the rank (`sprue.f64[None, None]`).
2. Sizes. Each unknown size is an *open* size named after its parameter and axis (`w1_1`). The
   program is traced recording (sprue.trace.inference) the constraints sprue.numpy checks at run
   time: equalities (contracted axes, concatenated arrays' other axes) and numpy's broadcasting
   (equal or 1). They are solved as OCANNL does: equalities by unification (an open size equal to
   a known one takes its value; two open ones become one, named after the first); broadcasting
   between two open sizes makes them one, and an open size broadcast only against known ones
   takes their least upper bound (the one size > 1 they share, or 1 when they are several). Two
   constraints that cannot both hold are an error naming the parameter, the axis and both lines.
   What stays open is a size of the signature (known at run time): `w1: f64[784, w1_1]`.
3. The solution substituted, the program is traced again, until nothing open is constrained.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np

from sprue.api.hints import ArrayHint, _DtypeHint, hint_to_avals, is_hint, named_rows
from sprue.api.traced import trace_function
from sprue.base.errors import ShapeError, SprueTypeError, at
from sprue.base.source_info import user_frame_summary
from sprue.ir.shapes import DimExpr, DimVar, format_dim, prove_equal
from sprue.trace.inference import Constraint, recording

__all__ = ["needs_inference", "infer_hints"]

_MAX_PASSES = 8


def _open_hint(annotation) -> bool:
    return (annotation is inspect.Parameter.empty or isinstance(annotation, _DtypeHint)
            or isinstance(annotation, ArrayHint) and any(d is None for d in annotation.shape))


def needs_inference(signature: inspect.Signature) -> bool:
    """Whether some parameter's shape is to be inferred: some parameter has a shape hint (whole or
    partial), and some a partial hint, a bare dtype or none (sprue.f64["b", None], sprue.f64,
    nothing). (Without any shape hint a function compiles per call, for its arguments' shapes.)"""
    params = list(signature.parameters.values())
    if not params or any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params):
        return False
    hinted = [p for p in params if isinstance(p.annotation, ArrayHint)]
    return bool(hinted) and any(_open_hint(p.annotation) for p in params) and all(
        _open_hint(p.annotation) or is_hint(p.annotation) for p in params)


class _RankFound(Exception):
    """A placeholder's first use gave its rank: the trace starts again with it."""

    def __init__(self, name: str, rank: int):
        self.name, self.rank = name, rank


class _Unranked:
    """A parameter whose rank is not known yet, as the function sees it until its first use."""

    def __init__(self, name: str, fn_name: str):
        self._name, self._fn_name = name, fn_name

    def _with(self, other):
        raise _RankFound(self._name, 1 if getattr(other, "ndim", np.ndim(other)) >= 1 else 0)

    def __matmul__(self, other):
        raise _RankFound(self._name, 2)

    __rmatmul__ = __matmul__
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _with
    __truediv__ = __rtruediv__ = __pow__ = __rpow__ = _with

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        others = [x for x in inputs if x is not self]
        if method == "__call__" and others:
            raise _RankFound(self._name, 1 if max(np.ndim(getattr(x, "aval", x)) if not hasattr(x, "ndim") else x.ndim
                                                 for x in others) >= 1 else 0)
        if method == "__call__" and ufunc.__name__ == "matmul":
            raise _RankFound(self._name, 2)
        self._unknown(f"numpy.{ufunc.__name__}")

    def _unknown(self, what: str):
        raise SprueTypeError(
            f"{self._fn_name}: the rank of argument '{self._name}' cannot be inferred from its first use, {what}"
            f"{at(user_frame_summary())}: sprue infers a rank from `@` (a matrix) and from arithmetic with another"
            f" array (a vector over its last axis); give it, e.g. `{self._name}: sprue.f64[None, None]`")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        self._unknown(f"`.{name}`")

    def __array__(self, *args, **kwargs):
        self._unknown("a conversion to an array")

    def __getitem__(self, key):
        self._unknown("indexing")


@dataclass
class _Param:
    name: str
    dtype: np.dtype
    shape: list | None   # entries: int, a pattern string, or an open size's name; None: rank unknown


def infer_hints(fn, fn_name: str, signature: inspect.Signature) -> dict:
    """Every parameter's ArrayHint (open sizes named, solved), by parameter name."""
    params: list[_Param] = []
    given = _names_in_hints(signature)
    opened: dict[str, tuple[str, int]] = {}   # open size -> (parameter, axis)
    keep: dict[str, object] = {}

    def open_name(param: str, axis: int) -> str:
        name = f"{param}_{axis}"
        while name in given or name in opened:
            name += "_"
        opened[name] = (param, axis)
        return name

    for p in signature.parameters.values():
        a = p.annotation
        if isinstance(a, ArrayHint) and None in a.shape:
            params.append(_Param(p.name, a.dtype, [open_name(p.name, k) if d is None else d
                                                   for k, d in enumerate(a.shape)]))
        elif isinstance(a, _DtypeHint) or a is inspect.Parameter.empty:
            params.append(_Param(p.name, a.dtype if isinstance(a, _DtypeHint) else np.dtype(np.float64), None))
        else:
            keep[p.name] = a
            params.append(_Param(p.name, None, None))
    order = [p.name for p in params]
    for _ in range(len(params) + 1):   # 1. ranks, one first use at a time
        unranked = [p for p in params if p.shape is None and p.name not in keep]
        if not unranked:
            break
        try:
            _trace(fn, order, params, keep, fn_name, set(opened))
            break   # (a parameter never used: no rank; it is an error below)
        except _RankFound as found:
            p = next(q for q in params if q.name == found.name)
            p.shape = [open_name(p.name, k) for k in range(found.rank)]
    unused = [p.name for p in params if p.shape is None and p.name not in keep]
    if unused:
        raise SprueTypeError(f"{fn_name}: argument{'s' if len(unused) > 1 else ''} {', '.join(unused)} "
                             f"{'are' if len(unused) > 1 else 'is'} never used, so no shape can be inferred: give a"
                             f" shape hint (sprue.f64[...])")
    for _ in range(_MAX_PASSES):   # 2. sizes, 3. again until nothing open is constrained
        constraints = _trace(fn, order, params, keep, fn_name, set(opened), record=True)
        if not constraints:
            break
        solution = _solve(constraints, set(opened), opened, fn_name)
        if not solution:
            break
        for p in params:
            if p.shape is not None:
                p.shape = [solution.get(d, d) if isinstance(d, str) else d for d in p.shape]
    return {p.name: keep[p.name] if p.name in keep else ArrayHint(p.dtype, tuple(p.shape)) for p in params}


def _names_in_hints(signature) -> set:
    out = set()
    for p in signature.parameters.values():
        if isinstance(p.annotation, ArrayHint):
            out |= {d.lstrip("*") for d in p.annotation.shape if isinstance(d, str)}
    return out


def _trace(fn, order, params, keep, fn_name, open_names, record: bool = False):
    """Trace fn with the current shapes (placeholders for unranked parameters); the recorded
    constraints on open sizes when `record`."""
    hints = {p.name: keep[p.name] if p.name in keep else ArrayHint(p.dtype, tuple(p.shape))
             for p in params if p.name in keep or p.shape is not None}
    avals = [hint_to_avals(named_rows(hints[n], n)) for n in order if n in hints]
    placeholders = {p.name: _Unranked(p.name, fn_name) for p in params if p.name not in hints}
    names = [n for n in order if n in hints]

    def call(*vals):
        given = dict(zip(names, vals))
        return fn(*[given[n] if n in given else placeholders[n] for n in order])

    if not record:
        trace_function(call, avals, {}, names)
        return []
    with recording(open_names) as r:
        trace_function(call, avals, {}, names)
    return r.constraints


# -- solving (OCANNL's unification, and least upper bounds for broadcasting) -------------------------
def _open_var(d, open_names) -> str | None:
    """The open size `d` is exactly, else None."""
    if isinstance(d, DimExpr) and len(d.terms) == 1:
        mono, coef = d.terms[0]
        if coef == 1 and len(mono) == 1 and mono[0][1] == 1 and isinstance(mono[0][0], DimVar):
            name = mono[0][0].name
            return name if name in open_names else None
    return None


def _mentions(d, open_names) -> bool:
    return isinstance(d, DimExpr) and any(v.name in open_names for v in d.dim_vars())


class _Classes:
    """Union-find over the open sizes; a class is named after its first parameter's size."""

    def __init__(self, opened: dict):
        self.order = list(opened)
        self.parent = {n: n for n in opened}

    def find(self, n: str) -> str:
        while self.parent[n] != n:
            self.parent[n] = self.parent[self.parent[n]]
            n = self.parent[n]
        return n

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            keep, drop = sorted((ra, rb), key=self.order.index)
            self.parent[drop] = keep


def _solve(constraints: list[Constraint], open_names: set, opened: dict, fn_name: str) -> dict:
    """{open size: what it is}: an int, a pattern over given names, or the open size it is one with."""
    classes = _Classes(opened)
    for c in constraints:   # two open sizes equal, or broadcast together: one size
        va, vb = _open_var(c.a, open_names), _open_var(c.b, open_names)
        if va and vb:
            classes.union(va, vb)
    value: dict[str, tuple] = {}   # class -> (its size, the constraint that says so)
    lubs: dict[str, list] = {}     # class -> [(a size it broadcasts against, the constraint)]
    for c in constraints:
        va, vb = _open_var(c.a, open_names), _open_var(c.b, open_names)
        known = c.b if va else c.a
        if (va is None) == (vb is None) or _mentions(known, open_names):
            continue   # (an expression of open sizes: left to the run-time check)
        root = classes.find(va or vb)
        if c.kind == "bcast":
            lubs.setdefault(root, []).append((known, c))
        elif root in value and prove_equal(value[root][0], known) is not True:
            _conflict(fn_name, root, opened, value[root], (known, c))
        else:
            value.setdefault(root, (known, c))
    for root, uses in lubs.items():
        _least_upper_bound(fn_name, root, opened, value, uses)
    out = {}
    for n in open_names:
        root = classes.find(n)
        if root in value:
            v = value[root][0]
            out[n] = v if isinstance(v, int) else format_dim(v)
        elif root != n:
            out[n] = root
    return out


def _least_upper_bound(fn_name: str, root: str, opened: dict, value: dict, uses: list) -> None:
    """An open size broadcast against known sizes: one they all broadcast with (equal or 1)."""
    if root in value:
        v = value[root][0]
        for known, c in uses:
            if not (prove_equal(v, known) is True or known == 1 or v == 1):
                _conflict(fn_name, root, opened, value[root], (known, c))
        return
    bigger: list = []
    for known, c in uses:
        if known != 1 and not any(prove_equal(known, b) is True for b, _ in bigger):
            bigger.append((known, c))
    if len(bigger) == 1:
        value[root] = bigger[0]
    elif bigger:   # several sizes > 1 broadcast against it: only 1 fits them all
        value[root] = (1, bigger[0][1])


def _conflict(fn_name: str, root: str, opened: dict, first: tuple, second: tuple):
    param, axis = opened[root]
    (v1, c1), (v2, c2) = first, second
    how = {"eq": "equal to", "bcast": "broadcast against"}
    raise ShapeError(
        f"{fn_name}: no shape of argument '{param}' fits its uses: axis {axis} is {how[c1.kind]} {format_dim(v1)}"
        f" by sprue.numpy.{c1.what}{at(c1.where)}, and {how[c2.kind]} {format_dim(v2)} by"
        f" sprue.numpy.{c2.what}{at(c2.where)}")
