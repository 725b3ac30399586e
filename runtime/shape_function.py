"""Shape functions: every result's shape computed from the arguments' sizes, without the data.

A compiled function whose result shapes follow from its input shapes has a *shape function*:
per result, per axis, an integer polynomial over the values of the size arguments (the scalar
arguments that bind dimension variables: the implicit sizes `n` of `f64[n]`), with the atoms
`floordiv(e, c)` and `mod(e, c)` (Python's floor semantics, c > 0), `div(e, c)` and `rem(e, c)`
(C's truncating ones, as lax.div/rem compute sizes) and `max(a, b)` / `min(a, b)` (the clamped
length of a slice, `x[1:]` has max(n-1, 0) rows). It is computed once at compile
time from the jaxpr's output types (sprue.api.shape_functions) and stored in the Signature, so a
library loaded from disk has it without tracing or MLIR. It is the one source of truth for

* `CompiledFunction.result_shapes(*args)`: the result shapes for given arguments, no kernel run;
* `CompiledFunction(*args, out=...)`: destinations checked before the kernel runs;
* the C header's `<name>_result_shapes()` (runtime/header.py renders it as C expressions).

A result axis whose size is computed from data (the final length of an array a loop resized, the
count of nonzero elements ...) has no formula: `DataDependentDim` records which result and axis,
and why. Such a function has no (complete) shape function: `result_shapes` raises
NoShapeFunctionError naming that result and axis.

Representation (immutable Python values; JSON in brackets):

    Dim   = int | Poly | None                     (None: computed from data)
    Poly  = sum of coef * prod(atom ** power)      {"sum": [[coef, [[atom, power], ...]], ...]}
    atom  = Arg(i)                                 {"arg": i}     the value of argument i
          | Div(op, Dim, c)                        {op: dim, "by": c}
                op: "floordiv", "mod" (floor: Python's // and %), "div", "rem" (truncating: C's / and %)
          | MinMax("max" | "min", Dim, Dim)        {"max": [dim, dim]}  /  {"min": [dim, dim]}

    ShapeFunction JSON (the "shape_function" key of a signature):
    {"params": [0, 1],                     argument indices whose values are sizes, in order
     "results": [[3, {"sum": ...}], ...],  per result, per axis: int, {"sum": ...} or null
     "data_dependent": [{"result": 0, "axis": 1, "why": "..."}]}   (only when some dim is null)

Terms are stored highest degree first, as sprue prints dims (`2*n+1`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from sprue.base.errors import SprueError, SprueValueError

__all__ = ["Arg", "DataDependentDim", "Div", "MinMax", "NoShapeFunctionError", "Poly", "ShapeFunction",
           "dim_to_c", "format_dim"]

DIV_OPS = ("floordiv", "mod", "div", "rem")


class NoShapeFunctionError(SprueError):
    """A result's size is computed from data: its shape is known only after the call."""


@dataclass(frozen=True)
class Arg:
    """The value of argument `index` (a size)."""
    index: int


@dataclass(frozen=True)
class Div:
    """op(of, by), by > 0: floordiv / mod with Python's (floor) semantics, div / rem with C's
    (truncating)."""
    op: str
    of: "Dim"
    by: int


@dataclass(frozen=True)
class MinMax:
    """max(a, b) or min(a, b)."""
    op: str
    a: "Dim"
    b: "Dim"


Atom = Arg | Div | MinMax


@dataclass(frozen=True)
class Poly:
    """sum(coef * prod(atom ** power)); `terms` highest degree first."""
    terms: tuple[tuple[int, tuple[tuple[Atom, int], ...]], ...]


Dim = int | Poly | None


@dataclass(frozen=True)
class DataDependentDim:
    """Result `result`'s axis `axis` has a size computed from data; `why` says by what."""
    result: int
    axis: int
    why: str


# -- evaluation ------------------------------------------------------------------------------------
def _eval(d: Dim, values: dict[int, int]) -> int:
    if isinstance(d, int):
        return d
    total = 0
    for coef, factors in d.terms:
        p = coef
        for atom, power in factors:
            p *= _eval_atom(atom, values) ** power
        total += p
    return total


def _eval_atom(a: Atom, values: dict[int, int]) -> int:
    if isinstance(a, Arg):
        return values[a.index]
    if isinstance(a, MinMax):
        x, y = _eval(a.a, values), _eval(a.b, values)
        return max(x, y) if a.op == "max" else min(x, y)
    x = _eval(a.of, values)
    if a.op == "floordiv":
        return x // a.by
    if a.op == "mod":
        return x % a.by
    q = abs(x) // a.by if x >= 0 else -(abs(x) // a.by)   # truncating, as C
    return q if a.op == "div" else x - q * a.by


def _atoms_args(d: Dim) -> set[int]:
    if d is None or isinstance(d, int):
        return set()
    if not isinstance(d, Poly):
        raise TypeError(f"shape function: a dim must be an int, a Poly or None, got {d!r}")
    out: set[int] = set()
    for _, factors in d.terms:
        for atom, _ in factors:
            if isinstance(atom, Arg):
                out.add(atom.index)
            elif isinstance(atom, MinMax):
                out |= _atoms_args(atom.a) | _atoms_args(atom.b)
            else:
                out |= _atoms_args(atom.of)
    return out


# -- printing ----------------------------------------------------------------------------------------
def format_dim(d: Dim, names: Sequence[str]) -> str:
    """A dim in sprue's printed form over argument names: `2*n+1`, `(n+3)//4`; `?` for data."""
    return _format_py(d, names)


def _format_py(d: Dim, names: Sequence[str]) -> str:
    if d is None:
        return "?"
    if isinstance(d, int):
        return str(d)
    parts = []
    for coef, factors in d.terms:
        fs = []
        for a, p in factors:
            if isinstance(a, Arg):
                s = names[a.index]
            elif isinstance(a, MinMax):
                s = f"{a.op}({_format_py(a.a, names)}, {_format_py(a.b, names)})"
            elif a.op in ("div", "rem"):
                s = f"{a.op}({_format_py(a.of, names)}, {a.by})"
            else:
                inner = _format_py(a.of, names)
                if isinstance(a.of, Poly) and len(a.of.terms) > 1:
                    inner = f"({inner})"
                s = f"{inner}{'//' if a.op == 'floordiv' else '%'}{a.by}"
            fs += [s] * p
        body = "*".join(fs)
        text = str(abs(coef)) if not body else body if abs(coef) == 1 else f"{abs(coef)}*{body}"
        parts.append(("-" if coef < 0 else "+") + text)
    out = "".join(parts)
    return out[1:] if out.startswith("+") else out


def dim_to_c(d: Dim, names: Sequence[str]) -> str:
    """A dim as a C int64_t expression over argument names: `(2*n + 1)`, `sprue_floordiv(n, 4)`."""
    if d is None:
        raise ValueError("a size computed from data has no C expression")
    if isinstance(d, int):
        return f"INT64_C({d})" if abs(d) > 2**31 - 1 else str(d)
    terms = []
    for coef, factors in d.terms:
        fs = []
        for a, p in factors:
            if isinstance(a, Arg):
                s = names[a.index]
            elif isinstance(a, MinMax):
                s = f"sprue_{a.op}({dim_to_c(a.a, names)}, {dim_to_c(a.b, names)})"
            elif a.op in ("div", "rem"):   # C's own truncating / and %
                s = f"({dim_to_c(a.of, names)} {'/' if a.op == 'div' else '%'} {a.by})"
            else:
                s = f"{'sprue_floordiv' if a.op == 'floordiv' else 'sprue_mod'}({dim_to_c(a.of, names)}, {a.by})"
            fs += [s] * p
        if not fs:
            fs = [str(abs(coef))]
        elif abs(coef) != 1:
            fs.insert(0, str(abs(coef)))
        terms.append(("-" if coef < 0 else "+", "*".join(fs)))
    text = "".join(f" {s} {t}" for s, t in terms).strip()
    text = text[2:] if text.startswith("+ ") else "-" + text[2:]
    return f"({text})" if len(terms) > 1 else text


# -- JSON ------------------------------------------------------------------------------------------------
def _int(x: object, where: str) -> int:
    if not isinstance(x, int) or isinstance(x, bool):
        raise ValueError(f"shape function: {where} must be an int, got {x!r}")
    return x


def _dim_to_json(d: Dim) -> Any:
    if d is None or isinstance(d, int):
        return d
    return {"sum": [[coef, [[_atom_to_json(a), p] for a, p in factors]] for coef, factors in d.terms]}


def _atom_to_json(a: Atom) -> Any:
    if isinstance(a, Arg):
        return {"arg": a.index}
    if isinstance(a, MinMax):
        return {a.op: [_dim_to_json(a.a), _dim_to_json(a.b)]}
    return {a.op: _dim_to_json(a.of), "by": a.by}


def _dim_from_json(x: object) -> Dim:
    if x is None:
        return None
    if isinstance(x, int) and not isinstance(x, bool):
        return x
    if not isinstance(x, dict) or set(x) != {"sum"} or not isinstance(x["sum"], list) or not x["sum"]:
        raise ValueError(f"shape function: a dim must be an int, null or {{\"sum\": [...]}}, got {x!r}")
    terms = []
    for term in x["sum"]:
        if not isinstance(term, list) or len(term) != 2 or not isinstance(term[1], list):
            raise ValueError(f"shape function: a term must be [coef, [[atom, power], ...]], got {term!r}")
        factors = []
        for f in term[1]:
            if not isinstance(f, list) or len(f) != 2:
                raise ValueError(f"shape function: a factor must be [atom, power], got {f!r}")
            power = _int(f[1], "a power")
            if power < 1:
                raise ValueError(f"shape function: powers must be positive, got {power}")
            factors.append((_atom_from_json(f[0]), power))
        terms.append((_int(term[0], "a coefficient"), tuple(factors)))
    return Poly(tuple(terms))


def _atom_from_json(x: object) -> Atom:
    if isinstance(x, dict) and set(x) == {"arg"}:
        i = _int(x["arg"], "an argument index")
        if i < 0:
            raise ValueError(f"shape function: negative argument index {i}")
        return Arg(i)
    if isinstance(x, dict) and len(x) == 1 and set(x) <= {"max", "min"}:
        (op, pair), = x.items()
        if not isinstance(pair, list) or len(pair) != 2:
            raise ValueError(f"shape function: {op} takes a list of two dims, got {pair!r}")
        a, b = _dim_from_json(pair[0]), _dim_from_json(pair[1])
        if a is None or b is None:
            raise ValueError("shape function: null inside a formula")
        return MinMax(op, a, b)
    if isinstance(x, dict) and len(x) == 2 and "by" in x and (set(DIV_OPS) & set(x)):
        op = next(o for o in DIV_OPS if o in x)
        by = _int(x["by"], "a divisor")
        if by <= 0:
            raise ValueError(f"shape function: divisors must be positive, got {by}")
        inner = _dim_from_json(x[op])
        if inner is None:
            raise ValueError("shape function: null inside a formula")
        return Div(op, inner, by)
    raise ValueError(f"shape function: an atom must be {{\"arg\": i}}, {{op: dim, \"by\": c}} (op one of"
                     f" {', '.join(DIV_OPS)}) or {{\"max\"|\"min\": [dim, dim]}}, got {x!r}")


# -- the shape function ------------------------------------------------------------------------------------
@dataclass(frozen=True, init=False)
class ShapeFunction:
    """Per result, per axis, its size as a Dim over the values of the arguments in `params`."""

    params: tuple[int, ...]
    results: tuple[tuple[Dim, ...], ...]
    data_dependent: tuple[DataDependentDim, ...]

    def __init__(self, params: Sequence[int], results: Sequence[Sequence[Dim]],
                 data_dependent: Sequence[DataDependentDim] = ()) -> None:
        params = tuple(params)
        results = tuple(tuple(r) for r in results)
        data_dependent = tuple(data_dependent)
        used = set().union(*(_atoms_args(d) for r in results for d in r)) if results else set()
        if not used <= set(params):
            raise ValueError(f"shape function: formulas use arguments {sorted(used - set(params))}"
                             f" that are not among its params {list(params)}")
        holes = {(i, a) for i, r in enumerate(results) for a, d in enumerate(r) if d is None}
        if holes != {(d.result, d.axis) for d in data_dependent}:
            raise ValueError("shape function: data_dependent must list exactly the null dims"
                             f" {sorted(holes)}, got {[(d.result, d.axis) for d in data_dependent]}")
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "results", results)
        object.__setattr__(self, "data_dependent", tuple(sorted(data_dependent, key=lambda d: (d.result, d.axis))))

    @classmethod
    def static(cls, shapes: Sequence[Sequence[int]]) -> ShapeFunction:
        """The shape function of static result shapes."""
        return cls((), shapes)

    @property
    def complete(self) -> bool:
        """Whether every result dim follows from the arguments' sizes (no data-dependent dim)."""
        return not self.data_dependent

    def evaluate(self, values: Callable[[int], int]) -> list[tuple[Dim, ...]]:
        """Every result's shape, with `values(i)` the value of size argument i; a data-dependent
        dim comes out as None."""
        vals = {i: values(i) for i in self.params}
        return [tuple(None if d is None else _eval(d, vals) for d in r) for r in self.results]

    def check_complete(self, fn: str, result_names: Sequence[str]) -> None:
        """Raise NoShapeFunctionError naming the first data-dependent result axis, if any."""
        if self.data_dependent:
            raise NoShapeFunctionError(self.no_shape_function_message(fn, result_names))

    def no_shape_function_message(self, fn: str, result_names: Sequence[str]) -> str:
        first = self.data_dependent[0]
        more = len(self.data_dependent) - 1
        also = f" (and {more} more data-dependent {'axis' if more == 1 else 'axes'})" if more else ""
        return (f"{fn} has no shape function: result {result_names[first.result]!r} axis {first.axis} has a size"
                f" {first.why}{also}; its shape is known only after the call")

    def c_shapes(self, arg_names: Sequence[str]) -> tuple[list[list[int | str]], list[str]]:
        """(per result, per dim, an int or a C expression over `arg_names`; the names of the size
        parameters): what the C header's `_result_shapes` is generated from."""
        if not self.complete:
            raise ValueError("a shape function with data-dependent dims has no C form")
        shapes = [[d if isinstance(d, int) else dim_to_c(d, arg_names) for d in r] for r in self.results]
        return shapes, [arg_names[i] for i in self.params]

    def format(self, arg_names: Sequence[str]) -> str:
        """`(n, m) -> ([m+n+1], [n*m], [(n+3)//4])`: readable, over argument names."""
        shapes = ", ".join("[" + ",".join(format_dim(d, arg_names) for d in r) + "]" for r in self.results)
        return f"({', '.join(arg_names[i] for i in self.params)}) -> ({shapes})"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"params": list(self.params),
                             "results": [[_dim_to_json(x) for x in r] for r in self.results]}
        if self.data_dependent:
            d["data_dependent"] = [{"result": x.result, "axis": x.axis, "why": x.why} for x in self.data_dependent]
        return d

    @classmethod
    def from_dict(cls, d: object) -> ShapeFunction:
        if not isinstance(d, dict) or not {"params", "results"} <= set(d) <= {"params", "results", "data_dependent"}:
            raise ValueError(f"a shape function must be an object with keys params, results (and optionally"
                             f" data_dependent); got {d!r}")
        if not isinstance(d["params"], list) or not isinstance(d["results"], list) or \
                not all(isinstance(r, list) for r in d["results"]):
            raise ValueError("shape function params and results must be lists (results: one list per result)")
        params = [_int(p, "a param index") for p in d["params"]]
        dd = []
        for x in d.get("data_dependent", []):
            if not isinstance(x, dict) or set(x) != {"result", "axis", "why"} or not isinstance(x["why"], str):
                raise ValueError(f"shape function: a data_dependent entry must have result, axis, why; got {x!r}")
            dd.append(DataDependentDim(_int(x["result"], "a result index"), _int(x["axis"], "an axis"), x["why"]))
        return cls(params, [[_dim_from_json(x) for x in r] for r in d["results"]], dd)

    def check_against(self, args: Sequence[Any], results: Sequence[Any], where: str) -> None:
        """Raise ValueError unless this fits the signature's TensorSpecs (used by Signature)."""
        if len(self.results) != len(results):
            raise ValueError(f"{where}: the shape function has {len(self.results)} results, the signature"
                             f" {len(results)}")
        for i in self.params:
            if not 0 <= i < len(args) or args[i].rank != 0 or args[i].dtype.kind not in "iu":
                raise ValueError(f"{where}: shape function param {i} is not an integer scalar argument")
        for k, (dims, spec) in enumerate(zip(self.results, results)):
            if len(dims) != spec.rank:
                raise ValueError(f"{where}: the shape function gives result {spec.name!r} {len(dims)} dims,"
                                 f" the signature {spec.rank}")
            for axis, (d, s) in enumerate(zip(dims, spec.shape)):
                if s is not None and d != s:
                    raise ValueError(f"{where}: the shape function gives result {spec.name!r} axis {axis} the"
                                     f" size {format_dim(d, [f'arg{j}' for j in range(len(args))])}, the"
                                     f" signature the static size {s}")


def negative_size_error(fn: str, result: str, axis: int, size: int, formula: str) -> SprueValueError:
    return SprueValueError(f"{fn}: result {result!r} axis {axis} would have the negative size {size} ({formula})"
                           f" for these argument sizes")
