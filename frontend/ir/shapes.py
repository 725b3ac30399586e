"""Dimensions: an int, or a symbolic expression over dimension variables.

A `DimVar` is a dimension known only at run time (`n` in `f64[n]`). A `DimExpr` is an integer
polynomial over DimVars and the atoms `floordiv(e, c)` / `mod(e, c)` (c a positive constant),
kept in one canonical form, so that two expressions are structurally equal exactly when their
canonical forms agree (`n*2 + 1 == 1 + 2*n`). Arithmetic on dims returns an int whenever the
result is constant, so static shapes stay plain ints everywhere.

`==` on dims is structural equality (True only when provably the same dim); `prove_equal`
answers always / never / unknown for two dims, the question shape rules ask.

In a jaxpr every DimVar is bound by an i64[] variable (`Var.dim`): an invar (an implicit
argument, or a traced int argument), an equation output (a size computed at run time), or a
const of a nested jaxpr (a captured outer size). Types print with the binders' names: `f64[a+1]`.
"""
from __future__ import annotations

import itertools
from typing import Callable, Union

import numpy as np

from sprue.base.errors import ShapeError, SprueTypeError, SprueValueError, at

_ids = itertools.count()


class InconclusiveDimensionError(SprueTypeError):
    """A question about a symbolic dimension that only run time can answer."""


class DimVar:
    """A dimension variable. Identity matters; `name` is a hint for printing and messages."""

    __slots__ = ("id", "name", "tracer", "is_axis")

    def __init__(self, name: str | None = None):
        self.id = next(_ids)
        self.name = name
        self.tracer = None  # the traced i64 scalar holding its value, in the trace that made it
        self.is_axis = False  # the size of an axis of an argument array (so it fits in memory)

    def __repr__(self):
        return self.name or f"d{self.id}"

    def sort_key(self):
        return (0, self.id)


class _DivAtom:
    """floordiv(expr, c) or mod(expr, c): an opaque atom of a polynomial."""

    __slots__ = ("op", "expr", "c", "_hash")

    def __init__(self, op: str, expr: "DimExpr", c: int):
        self.op, self.expr, self.c = op, expr, c
        self._hash = hash((op, expr, c))

    def __eq__(self, other):
        return isinstance(other, _DivAtom) and (self.op, self.c, self.expr) == (other.op, other.c, other.expr)

    def __hash__(self):
        return self._hash

    def sort_key(self):
        return (1, self.op, self.c, self.expr.sort_key())

    def format(self, name_of) -> str:
        inner = self.expr.format(name_of)
        if len(self.expr.terms) > 1:
            inner = f"({inner})"
        return f"{inner}{'//' if self.op == 'floordiv' else '%'}{self.c}"

    def __repr__(self):
        return self.format(repr)


Atom = Union[DimVar, _DivAtom]
Monomial = tuple  # sorted tuple of (atom, power); () is the constant monomial


def _mono_key(m: Monomial):
    return (len(m), [(a.sort_key(), p) for a, p in m])


def _mono_mul(a: Monomial, b: Monomial) -> Monomial:
    powers: dict = {}
    for atom, p in a + b:
        powers[atom] = powers.get(atom, 0) + p
    return tuple(sorted(powers.items(), key=lambda ap: ap[0].sort_key()))


class DimExpr:
    """A canonical integer polynomial; construct through the helpers, not directly."""

    __slots__ = ("terms", "_hash")

    def __init__(self, terms: dict):
        # canonical: no zero coefficients, monomials in a fixed order
        self.terms = tuple(sorted(((m, c) for m, c in terms.items() if c), key=lambda mc: _mono_key(mc[0])))
        self._hash = hash(self.terms)

    # -- construction -------------------------------------------------------------------------
    @staticmethod
    def make(terms: dict) -> "Dim":
        e = DimExpr(terms)
        if not e.terms:
            return 0
        if len(e.terms) == 1 and e.terms[0][0] == ():
            return e.terms[0][1]
        return e

    @staticmethod
    def var(v: DimVar) -> "DimExpr":
        return DimExpr({((v, 1),): 1})

    def as_dict(self) -> dict:
        return dict(self.terms)

    @property
    def constant(self) -> int:
        return dict(self.terms).get((), 0)

    def atoms(self) -> set:
        return {a for m, _ in self.terms for a, _ in m}

    def dim_vars(self) -> set:
        out = set()
        for a in self.atoms():
            out |= {a} if isinstance(a, DimVar) else dim_vars_of(a.expr)
        return out

    def sort_key(self):
        return [(_mono_key(m), c) for m, c in self.terms]

    # -- arithmetic ---------------------------------------------------------------------------
    def __add__(self, other):
        o = _as_terms(other)
        if o is None:
            return NotImplemented
        t = self.as_dict()
        for m, c in o.items():
            t[m] = t.get(m, 0) + c
        return DimExpr.make(t)

    __radd__ = __add__

    def __neg__(self):
        return DimExpr.make({m: -c for m, c in self.terms})

    def __sub__(self, other):
        o = _as_terms(other)
        if o is None:
            return NotImplemented
        return self + DimExpr.make({m: -c for m, c in o.items()}) if o else self

    def __rsub__(self, other):
        return (-self) + other

    def __mul__(self, other):
        o = _as_terms(other)
        if o is None:
            return NotImplemented
        t: dict = {}
        for m1, c1 in self.terms:
            for m2, c2 in o.items():
                m = _mono_mul(m1, m2)
                t[m] = t.get(m, 0) + c1 * c2
        return DimExpr.make(t)

    __rmul__ = __mul__

    def __floordiv__(self, other):
        return _divide("floordiv", self, other)

    def __mod__(self, other):
        return _divide("mod", self, other)

    def __rfloordiv__(self, other):
        raise InconclusiveDimensionError(f"cannot divide by the symbolic dimension {self}")

    __rmod__ = __rfloordiv__

    # -- comparison ---------------------------------------------------------------------------
    def __eq__(self, other):
        if isinstance(other, DimExpr):
            return self.terms == other.terms
        return False  # an int: a canonical DimExpr is never a constant

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return self._hash

    def _sign(self, other, op: str) -> bool:
        if _as_terms(other) is None:
            return NotImplemented  # a traced value: its reflected comparison makes a traced bool
        diff = self - other
        if isinstance(diff, int):
            return {"<": diff < 0, "<=": diff <= 0, ">": diff > 0, ">=": diff >= 0}[op]
        lo = lower_bound(diff)
        if op in (">=",) and lo >= 0 or op == ">" and lo > 0:
            return True
        if op == "<" and lo >= 0 or op == "<=" and lo > 0:
            return False
        raise InconclusiveDimensionError(
            f"whether {self} {op} {other} depends on sizes known only at run time")

    def __lt__(self, other):
        return self._sign(other, "<")

    def __le__(self, other):
        return self._sign(other, "<=")

    def __gt__(self, other):
        return self._sign(other, ">")

    def __ge__(self, other):
        return self._sign(other, ">=")

    def __index__(self):
        raise InconclusiveDimensionError(
            f"the dimension {self} is known only at run time; it cannot be used as a Python int here")

    __int__ = __index__

    def __bool__(self):
        return True  # a symbolic dim is never the constant 0 (that would be an int)

    # -- printing -----------------------------------------------------------------------------
    def format(self, name_of: Callable[[DimVar], str] = repr) -> str:
        parts = []
        for m, c in reversed(self.terms):  # highest degree first: 2*n*m+n+1
            factors = []
            for atom, p in m:
                s = name_of(atom) if isinstance(atom, DimVar) else atom.format(name_of)
                if not isinstance(atom, DimVar) and (len(m) > 1 or p > 1 or c != 1):
                    s = f"({s})"   # 2*(n//2), -(n//2): `2*n//2` and `-n//2` read as (2*n)//2 and (-n)//2
                factors += [s] * p
            body = "*".join(factors)
            if not body:
                text = str(abs(c))
            elif abs(c) == 1:
                text = body
            else:
                text = f"{abs(c)}*{body}"
            parts.append(("-" if c < 0 else "+", text))
        out = "".join(f"{sign}{t}" for sign, t in parts)
        return out[1:] if out.startswith("+") else out

    def __repr__(self):
        return self.format()

    __str__ = __repr__


Dim = Union[int, DimExpr]


def _as_terms(x) -> dict | None:
    if isinstance(x, DimExpr):
        return x.as_dict()
    if isinstance(x, DimVar):
        return {((x, 1),): 1}
    if isinstance(x, bool):
        return None
    if isinstance(x, int) or (hasattr(x, "__index__") and type(x).__module__ == "numpy"):
        return {(): int(x)} if int(x) else {}
    return None


def _divide(op: str, e: DimExpr, c) -> Dim:
    if isinstance(c, DimExpr) or not isinstance(c, int) or isinstance(c, bool):
        raise InconclusiveDimensionError(f"{op} of the dimension {e} by {c}: only positive int divisors are supported")
    if c <= 0:
        raise SprueValueError(f"{op} of the dimension {e} by {c}: the divisor must be positive")
    if c == 1:
        return e if op == "floordiv" else 0
    # exact division when every coefficient is a multiple of c: (4*n+8)//4 = n+2, (4*n+8)%4 = 0
    if all(coef % c == 0 for _, coef in e.terms):
        return DimExpr.make({m: coef // c for m, coef in e.terms}) if op == "floordiv" else 0
    # split off the multiples of c: (4*n+5)//4 = n + (1)//4 ... keep the remainder as the atom
    whole = {m: coef // c * c for m, coef in e.terms}
    rest = {m: coef % c for m, coef in e.terms}
    rest_e = DimExpr.make(rest)
    if isinstance(rest_e, int):
        return (DimExpr.make(whole) // c if op == "floordiv" else 0) + (rest_e // c if op == "floordiv" else rest_e % c)
    atom = _DivAtom(op, rest_e, c)
    if op == "mod":
        return DimExpr.make({((atom, 1),): 1})
    return DimExpr.make({m: coef // c for m, coef in whole.items()}) + DimExpr.make({((atom, 1),): 1})


def dim_vars_of(d) -> set:
    return d.dim_vars() if isinstance(d, DimExpr) else set()


def lower_bound(d) -> int:
    """A lower bound of a dim, using only that dim variables are non-negative."""
    if isinstance(d, int):
        return d
    lo = 0
    for m, c in d.terms:
        if m == ():
            lo += c
        elif c < 0:
            return -(2 ** 62)  # a negative term: nothing known
    return lo


def prove_equal(a: Dim, b: Dim) -> bool | None:
    """True: always equal; False: never equal; None: only run time knows."""
    diff = a - b if isinstance(a, DimExpr) else (-(b - a) if isinstance(b, DimExpr) else a - b)
    if isinstance(diff, int):
        return diff == 0
    if lower_bound(diff) > 0 or lower_bound(-diff) > 0:
        return False
    return None


def format_dim(d, name_of: Callable[[DimVar], str] = repr) -> str:
    """A dim as text; a str is a dimension name not yet turned into a DimVar (a hint)."""
    return str(d) if isinstance(d, (int, str, np.integer)) else d.format(name_of)


# Sizes are int64 in numpy and in the compiled code (`index` is i64 in MLIR; descriptors hold
# int64_t): a size, or a constant of a size expression, beyond this is refused where it enters (a
# type hint, a jaxpr's type, an operation's shape argument), with its location, rather than
# reaching the MLIR bindings as a raw TypeError or wrapping around in generated code.
MAX_DIM = 2 ** 63 - 1


def dim_out_of_range(d) -> int | None:
    """The first number in dim d (a size, or a coefficient of a size expression) whose magnitude
    exceeds MAX_DIM, or None."""
    if isinstance(d, DimExpr):
        return next((c for _, c in d.terms if abs(c) > MAX_DIM), None)
    if isinstance(d, (int, np.integer)) and abs(int(d)) > MAX_DIM:
        return int(d)
    return None


def check_dims_fit(shape, what: str, where: str | None = None) -> None:
    """Raises ShapeError naming `what` and the user's line when a size of `shape` does not fit
    in int64 (see MAX_DIM)."""
    for d in shape:
        bad = dim_out_of_range(d)
        if bad is not None:
            raise ShapeError(f"{what}: the size {format_dim(d)} does not fit in int64 ({bad} is beyond 2**63-1 in"
                             f" magnitude){at(where)}")


def dim(v: DimVar) -> DimExpr:
    return DimExpr.var(v)


def substitute(d: Dim, mapping: dict[DimVar, Dim]) -> Dim:
    """The dim d with each dimension variable in `mapping` replaced by its image."""
    if isinstance(d, int) or not (d.dim_vars() & mapping.keys()):
        return d
    total: Dim = 0
    for mono, coef in d.terms:
        term: Dim = coef
        for atom, power in mono:
            if isinstance(atom, DimVar):
                value = mapping.get(atom, dim(atom))
            else:
                inner = substitute(atom.expr, mapping)
                value = inner // atom.c if atom.op == "floordiv" else inner % atom.c
            for _ in range(power):
                term = term * value
        total = total + term
    return total
