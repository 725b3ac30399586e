"""The shape function of a jaxpr: its results' shapes as formulas over its size arguments.

Computed once at compile time from the output types (`f64[2*n+1]`, `f64[(n+3)//4]`) and stored in
the compiled Signature (sprue.runtime.shape_function describes the representation and its JSON).
A dimension variable bound by an invar (an implicit size, or an integer argument whose value is a
size) becomes `Arg(index of that invar)`. One bound by an equation is followed back through the
scalar integer arithmetic that computed it from those sizes and literals (add, sub, mul, neg,
max, min, div, rem, convert_element_type: `x[1:]` has max(n-1, 0) rows); anything else (a size a
loop or a data-dependent primitive computed) makes that result axis data-dependent, recorded
with the primitive that computed it and where in the user's code.
"""
from __future__ import annotations

import numpy as np

from sprue.base.errors import SprueTypeError, at
from sprue.base.pytree import tree_flatten
from sprue.ir.core import ClosedJaxpr, Jaxpr, Literal
from sprue.ir.shapes import DimExpr, DimVar, InconclusiveDimensionError, dim, dim_vars_of, lower_bound
from sprue.runtime.shape_function import Arg, DataDependentDim, Div, MinMax, Poly, ShapeFunction

__all__ = ["shape_function_of", "dim_formula", "flat_destinations"]


def shape_function_of(jaxpr: Jaxpr | ClosedJaxpr) -> ShapeFunction:
    """The shape function of `jaxpr`'s results over its invars (see the module docstring)."""
    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    binder: dict[DimVar, int] = {}
    for i, v in enumerate(jaxpr.invars):
        if v.dim is not None and v.dim not in binder:
            binder[v.dim] = i
    sizes = _SizeArithmetic(jaxpr, binder)
    results, holes = [], []
    for k, out in enumerate(jaxpr.outvars):
        dims = []
        for axis, d in enumerate(out.aval.shape):
            d = sizes.substitute(d)
            unbound = dim_vars_of(d) - set(binder) - set(sizes.opaque)
            if unbound:
                dims.append(None)
                holes.append(DataDependentDim(k, axis, _why(jaxpr, unbound)))
            else:
                dims.append(dim_formula(d, binder, sizes.opaque))
        results.append(dims)
    return ShapeFunction(sorted(set(binder.values())), results, holes)


def dim_formula(d, binder: dict, opaque: dict | None = None) -> int | Poly:
    """A dim (int or DimExpr) as a runtime formula; `binder` maps each DimVar to its invar index,
    `opaque` the DimVars standing for max/min/div/rem of sizes to their definitions."""
    if isinstance(d, (int, np.integer)):
        return int(d)
    opaque = opaque or {}
    terms = []
    for mono, coef in reversed(d.terms):   # highest degree first, as sprue prints dims
        factors = []
        for atom, power in mono:
            if isinstance(atom, DimVar) and atom in binder:
                factors.append((Arg(binder[atom]), power))
            elif isinstance(atom, DimVar):
                op, x, y = opaque[atom]
                if op in ("max", "min"):
                    factors.append((MinMax(op, dim_formula(x, binder, opaque), dim_formula(y, binder, opaque)),
                                    power))
                else:
                    factors.append((Div(op, dim_formula(x, binder, opaque), y), power))
            else:
                factors.append((Div(atom.op, dim_formula(atom.expr, binder, opaque), atom.c), power))
        terms.append((coef, tuple(factors)))
    return Poly(tuple(terms))


_ARITH = frozenset({"add", "sub", "mul", "neg", "max", "min", "div", "rem", "convert_element_type"})


class _SizeArithmetic:
    """The jaxpr's top-level integer scalars computed from sizes and literals only, as dims.

    `value[var]` is such a scalar as a DimExpr over the size DimVars and `opaque` DimVars (each a
    max/min/div/rem the polynomial form cannot express: its (op, x, y) in `opaque`); `bound`
    maps an equation-bound DimVar to its value."""

    def __init__(self, jaxpr: Jaxpr, binder: dict):
        self.opaque: dict[DimVar, tuple] = {}
        self.bound: dict[DimVar, object] = {}
        value: dict = {v: dim(v.dim) for v in jaxpr.invars if v.dim is not None}
        for eqn in jaxpr.eqns:
            if eqn.primitive.name not in _ARITH or len(eqn.outvars) != 1:
                continue
            out = eqn.outvars[0]
            if out.aval.shape != () or np.dtype(out.aval.dtype).kind not in "iu":
                continue
            args = [self._known(x, value) for x in eqn.invars]
            if any(a is None for a in args):
                continue
            try:
                result = self._apply(eqn.primitive.name, args)
            except (InconclusiveDimensionError, ArithmeticError):
                result = None
            if result is None:
                continue
            value[out] = result
            if getattr(out, "dim", None) is not None:
                self.bound[out.dim] = result

    @staticmethod
    def _known(x, value: dict):
        if isinstance(x, Literal):
            v = np.asarray(x.val)
            return int(v) if v.shape == () and v.dtype.kind in "iub" else None
        return value.get(x)

    def _apply(self, name: str, args: list):
        if name == "convert_element_type":
            return args[0]
        if name == "neg":
            return -args[0]
        a, b = args
        if name == "add":
            return a + b
        if name == "sub":
            return a - b
        if name == "mul":
            return a * b
        if name in ("max", "min"):
            if isinstance(a, int) and isinstance(b, int):
                return max(a, b) if name == "max" else min(a, b)
            try:   # decided statically when the dims say so (n+1 > n)
                a_first = a >= b if name == "max" else a <= b
                return a if a_first else b
            except InconclusiveDimensionError:
                return self._opaque(name, a, b)
        # div / rem: by a positive constant only (a size divided by a size is left to run time)
        if not isinstance(b, int) or b <= 0:
            return None
        if isinstance(a, int):
            q = abs(a) // b if a >= 0 else -(abs(a) // b)
            return q if name == "div" else a - q * b
        if lower_bound(a) >= 0:   # truncation is floor for non-negative sizes
            return a // b if name == "div" else a % b
        return self._opaque(name, a, b)

    def _opaque(self, op: str, x, y) -> DimExpr:
        v = DimVar(f"{op}({x}, {y})")
        self.opaque[v] = (op, x, y)
        return dim(v)

    def substitute(self, d):
        """`d` with every equation-bound DimVar this class knows replaced by its value."""
        if isinstance(d, int) or not (dim_vars_of(d) & set(self.bound)):
            return d
        total = 0
        for mono, coef in d.terms:
            term = coef
            for atom, power in mono:
                if isinstance(atom, DimVar):
                    x = self.bound[atom] if atom in self.bound else dim(atom)
                else:
                    inner = self.substitute(atom.expr)
                    x = inner // atom.c if atom.op == "floordiv" else inner % atom.c
                for _ in range(power):
                    term = term * x
            total = total + term
        return total


def _why(jaxpr: Jaxpr, unbound: set) -> str:
    """What computes a size over the dimension variables `unbound` (no invar binds them): the
    primitive that made it from data, looking through the size arithmetic in between (a `max`
    clamping a slice of a filtered array names the `filter`)."""
    producer = {id(v): e for e in jaxpr.eqns for v in e.outvars}
    binding = next((v for e in jaxpr.eqns for v in e.outvars if getattr(v, "dim", None) in unbound), None)
    seen: set = set()

    def source(e):   # the first equation other than size arithmetic that e's value comes from
        if e is None or id(e) in seen:
            return None
        seen.add(id(e))
        if e.primitive.name not in _ARITH:
            return e
        for x in e.invars:
            found = None if isinstance(x, Literal) else source(producer.get(id(x)))
            if found is not None:
                return found
        return None

    first = producer.get(id(binding)) if binding is not None else None
    eqn = source(first) or first
    if eqn is not None:
        return f"computed from data by `{eqn.primitive.name}`{at(eqn.source_info)}"
    return (f"that the sizes of the arguments do not determine"
            f" ({', '.join(sorted(map(repr, unbound)))} is bound inside the function)")


def flat_destinations(out, out_tree, fn_name: str) -> list:
    """The `out=` of a qjit'd call as the flat list of destinations the runtime takes (one per flat
    result): `out` shaped like the results, or a flat list/tuple of one array per result (as the
    runtime takes it), or a bare array when there is one result."""
    leaves, tree = tree_flatten(out)
    if tree == out_tree:
        return leaves
    n = out_tree.num_leaves
    if isinstance(out, (list, tuple)) and len(out) == n:
        return list(out)
    if n == 1 and isinstance(out, np.ndarray):
        return [out]
    raise SprueTypeError(f"{fn_name}(): out= must have the structure of the results, {out_tree}, or be a flat"
                         f" list of {n} arrays (one per result); got {tree}")
