"""Function signatures with symbolic shapes, and matching arguments against them (as Relax has them).

A signature comes from type hints, `def ff(x: sprue.i8["n", "m*4"]) -> sprue.i32["n*m"]`. Matching
a list of argument shapes against it binds each size name (where it stands alone or as `c*name`)
and leaves constraints — the other occurrences of names, literal sizes, divisibility for `c*name`.
Each constraint is classified as Relax does:

- provably true  → nothing to check (and nothing appears in the generated code);
- provably false → a compile-time error naming the function, the parameter, the axis, the type as
  the user wrote it, the argument's type, and the user's line;
- unknown        → a run-time check (a `check` equation raising the same message when it fails).

The same matcher serves calls of signed functions inside traced code (call_sites.py), the checks of
concrete arguments at a qjit entry point (every size is an int there), return annotations, and
`sprue.assert_shape`.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from sprue import lax
from sprue.api.hints import ArrayHint, is_hint, is_scalar_hint, named_rows
from sprue.base import dtypes
from sprue.base.errors import ShapeError, SprueTypeError, at
from sprue.base.source_info import user_frame_summary
from sprue.interp.ad_util import aval_of
from sprue.ir.dim_patterns import DimPattern, pattern_of
from sprue.ir.shapes import Dim, format_dim, prove_equal
from sprue.trace.tracing import _state, dim_value


@dataclass(frozen=True)
class ArraySpec:
    """One array in a signature: who it is (`argument 'x'`, `result`), its dtype (None: any) and
    one pattern per axis."""
    label: str
    dtype: np.dtype | None
    patterns: tuple[DimPattern, ...]

    @property
    def type_text(self) -> str:
        return self.type_text_for(None)

    def type_text_for(self, actual_dtype) -> str:
        """`i8[n, m*4]`, as written; a spec without a dtype shows the actual one."""
        dt = self.dtype if self.dtype is not None else actual_dtype
        name = dtypes.short_name(dt) if dt is not None else "?"
        return f"{name}[{', '.join(p.text for p in self.patterns)}]"


@dataclass
class Binding:
    """The outcome of matching: a dim for every name, where each was bound, and the constraints
    only run time can decide (as (condition kind, message, operands))."""
    env: dict[str, Dim] = field(default_factory=dict)
    bound_at: dict[str, str] = field(default_factory=dict)
    runtime: list[tuple] = field(default_factory=list)   # ("eq", actual, expected, msg) | ("mod", actual, c, msg)


def _fmt(shape) -> str:
    return "[" + ",".join(format_dim(d) for d in shape) + "]"


def _type_of(dtype, shape) -> str:
    return f"{dtypes.short_name(dtype)}{_fmt(shape)}"


def match(fn_name: str, specs: Sequence[ArraySpec], shapes: Sequence[tuple], dtypes_: Sequence,
          binding: Binding | None = None, where: str | None = None) -> Binding:
    """Match argument shapes (and dtypes) against specs; raise for what is provably wrong."""
    b = binding or Binding()

    def head(spec: ArraySpec, shape, dt) -> str:
        return (f"{fn_name}(): {spec.label} of type {spec.type_text_for(dt)} does not fit"
                f" {_type_of(dt, shape)}")

    for spec, shape, dt in zip(specs, shapes, dtypes_):
        if spec.dtype is not None and np.dtype(dt) != spec.dtype:
            raise SprueTypeError(f"{head(spec, shape, dt)}: the dtype is {dtypes.short_name(dt)}, not"
                                 f" {dtypes.short_name(spec.dtype)}{at(where)}")
        if len(shape) != len(spec.patterns):
            raise SprueTypeError(f"{head(spec, shape, dt)}: rank {len(shape)} instead of {len(spec.patterns)}"
                                 f"{at(where)}")
    # pass 1: binders, in order (a name bound twice is checked in pass 2)
    binders: set[tuple[int, int]] = set()
    for k, (spec, shape, dt) in enumerate(zip(specs, shapes, dtypes_)):
        for axis, (p, d) in enumerate(zip(spec.patterns, shape)):
            bnd = p.binder
            if bnd is None or bnd[1] in b.env:
                continue
            c, name = bnd
            binders.add((k, axis))
            b.bound_at[name] = f"{spec.label} axis {axis}"
            if c == 1:
                b.env[name] = d
                continue
            if isinstance(d, int):
                if d % c:
                    raise ShapeError(f"{head(spec, shape, dt)}: in axis {axis}, {p.text} = {d} has no solution"
                                          f" ({d} is not a multiple of {c}){at(where)}")
                b.env[name] = d // c
                continue
            q = d // c
            b.env[name] = q
            if prove_equal(q * c, d) is not True:
                b.runtime.append(("mod", d, c, f"{head(spec, shape, dt)}: in axis {axis}, {p.text} ="
                                               f" {format_dim(d)} has no solution (the size is not a multiple of"
                                               f" {c}){at(where)}"))
    # pass 2: every other axis is an equality
    for k, (spec, shape, dt) in enumerate(zip(specs, shapes, dtypes_)):
        for axis, (p, d) in enumerate(zip(spec.patterns, shape)):
            if (k, axis) in binders or p.row == "...":   # (an anonymous row of a result: any leading axes)
                continue
            unbound = [n for n in p.names if n not in b.env]
            if unbound:
                raise SprueTypeError(
                    f"{fn_name}(): the size{'s' if len(unbound) > 1 else ''} {', '.join(unbound)} in {spec.label}"
                    f" ({spec.type_text}) {'are' if len(unbound) > 1 else 'is'} not bound: a size name must appear"
                    f" alone (\"n\") or times a constant (\"m*4\") in some parameter's type{at(where)}")
            expected = p.evaluate(b.env)
            ok = prove_equal(d, expected) if not (isinstance(d, int) and isinstance(expected, int)) else d == expected
            if ok is True:
                continue
            why = _why(p, expected, b)
            msg = (f"{head(spec, shape, dt)}: in axis {axis}, the size {format_dim(d)} is not {p.text}"
                   f"{why}{at(where)}")
            if ok is False:
                raise ShapeError(msg)
            b.runtime.append(("eq", d, expected, msg))
    return b


def _why(p: DimPattern, expected, b: Binding) -> str:
    if p.constant is not None:
        return ""
    parts = [f"{n} = {format_dim(b.env[n])} from {b.bound_at[n]}" for n in p.names if n in b.bound_at]
    value = f" = {format_dim(expected)}" if p.text != format_dim(expected) else ""
    return f"{value} ({'; '.join(parts)})" if parts else value


def emit_runtime_checks(binding: Binding) -> None:
    """Turn the constraints only run time can decide into `check` equations of the current trace."""
    if not binding.runtime:
        return
    for kind, actual, other, msg in binding.runtime:
        a = dim_value(actual)
        if kind == "eq":
            ok = lax.eq(_i64(a), _i64(dim_value(other)))
        else:
            ok = lax.eq(lax.rem(_i64(a), np.int64(other)), np.int64(0))
        lax.check(ok, msg)


def _i64(x):
    if isinstance(x, (int, np.integer)):
        return np.int64(x)
    return x if x.aval.dtype == np.int64 else lax.convert_element_type(x, np.int64)


# -- signatures from type hints ---------------------------------------------------------------------
@dataclass
class FunctionSignature:
    """The array parameters (one ArraySpec per leaf, pytree order) and results of a hinted function."""
    fn_name: str
    params: list[ArraySpec]
    results: list[ArraySpec] | None
    names: list[str]          # the size names, in the order they are first bound

    def bound_at(self) -> dict[str, str]:
        """Where each size name is bound: `argument 'x' axis 1`."""
        out: dict[str, str] = {}
        for spec in self.params:
            for axis, p in enumerate(spec.patterns):
                if p.binder is not None:
                    out.setdefault(p.binder[1], f"{spec.label} axis {axis}")
        return out


def spec_of_hint(label: str, hint) -> ArraySpec | None:
    if isinstance(hint, ArrayHint):
        return ArraySpec(label, hint.dtype, tuple(pattern_of(d) for d in hint.shape))
    return None


def flat_specs(label: str, hint) -> list[ArraySpec]:
    """ArraySpecs for every array leaf of a (pytree) hint; scalars as rank-0 specs."""
    if isinstance(hint, ArrayHint):
        return [spec_of_hint(label, hint)]
    if is_scalar_hint(hint):
        return [ArraySpec(label, None, ())]
    if isinstance(hint, (tuple, list)):
        return [s for i, h in enumerate(hint) for s in flat_specs(f"{label}[{i}]", h)]
    if isinstance(hint, dict):
        return [s for k in sorted(hint, key=lambda k: (type(k).__name__, k))
                for s in flat_specs(f"{label}[{k!r}]", hint[k])]
    raise SprueTypeError(f"{label}: not a sprue type hint: {hint!r}")


def function_signature(fn, fn_name: str) -> FunctionSignature | None:
    """The signature given by fn's hints, when every parameter has one."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    if any(p.annotation is inspect.Parameter.empty or not is_hint(p.annotation) for p in sig.parameters.values()):
        return None
    return signature_of_hints(fn, fn_name, {p.name: p.annotation for p in sig.parameters.values()})


def signature_of_hints(fn, fn_name: str, hints: dict) -> FunctionSignature:
    """The signature of fn with these hints (by parameter name; inferred ones too) and fn's return
    annotation."""
    sig = inspect.signature(fn)
    params = []
    for name, hint in hints.items():
        params += flat_specs(f"argument '{name}'", named_rows(hint, name))
    results = None
    if sig.return_annotation is not inspect.Signature.empty and is_hint(sig.return_annotation):
        results = flat_specs("the result", sig.return_annotation)
    names: list[str] = []
    for spec in params:
        for p in spec.patterns:
            if p.binder is not None and p.binder[1] not in names:
                names.append(p.binder[1])
    for spec in results or ():
        for p in spec.patterns:
            if p.row is not None and p.row != "..." and p.row not in names:
                raise SprueTypeError(
                    f"{fn_name}: the row {p.row} in {spec.label} ({spec.type_text}) is not a parameter's: a result's"
                    f" named row must be the leading axes of some parameter, whose sizes it takes")
    for spec in params:
        for p in spec.patterns:
            for n in p.names:
                if n not in names:
                    raise SprueTypeError(
                        f"{fn_name}: the size {n} in {spec.label} ({spec.type_text}) is not bound: a size name must"
                        f" appear alone (\"n\") or times a constant (\"m*4\") in some parameter's type")
    return FunctionSignature(fn_name, params, results, names)


def check_results(fn_name: str, specs: list[ArraySpec], outs: list, binding: Binding,
                  where: str | None = None) -> Binding:
    """Match a traced function's results against its return annotation (in the trace: run-time
    constraints become checks). New names are bound by the results."""
    if len(specs) != len(outs):
        raise SprueTypeError(f"{fn_name}() returns {len(outs)} array{'s' if len(outs) != 1 else ''}, but its"
                             f" return annotation describes {len(specs)}{at(where)}")
    avals = [aval_of(o) for o in outs]
    b = match(fn_name, specs, [a.shape for a in avals], [a.dtype for a in avals], binding, where)
    emit_runtime_checks(b)
    b.runtime = []
    return b


def assert_shape(x, shape, dtype=None):
    """Assert that x has `shape` — ints and size expressions over names (`("k*64",)`, `("n", 3)`) —
    and return x. A name not seen before is bound here (by exact division for `c*k`); a name bound
    earlier in the same function (by a parameter's type hint, abstracted_axes, or an earlier
    assert_shape) must agree. What the compiler can prove leaves nothing in the code, what is
    provably false is an error now, the rest is checked at run time (Relax's match_shape)."""
    where = user_frame_summary()
    if not isinstance(shape, (tuple, list)):
        raise SprueTypeError(f"assert_shape: the shape must be a tuple of ints and size expressions, got"
                             f" {shape!r}{at(where)}")
    aval = aval_of(x)
    spec = ArraySpec("the array", None if dtype is None else np.dtype(dtype),
                     tuple(pattern_of(d) for d in shape))
    env: dict = {}
    bound_at: dict = {}
    for builder in _state.stack:     # names of enclosing traces are visible inside their bodies
        env.update(builder.named_dims)
        bound_at.update(builder.named_where)
    known = set(env)
    b = match("assert_shape", [spec], [aval.shape], [aval.dtype], Binding(env, bound_at), where)
    if _state.stack:
        emit_runtime_checks(b)
        builder = _state.stack[-1]
        for n in b.env:
            if n not in known:
                builder.named_dims[n] = b.env[n]
                builder.named_where[n] = f"assert_shape{at(where)}"
    return x


__all__ = ["assert_shape", "ArraySpec", "Binding", "FunctionSignature", "match", "emit_runtime_checks",
           "function_signature", "flat_specs", "check_results"]
