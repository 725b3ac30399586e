"""cost: an estimate of the floating-point operations a function performs (mini-JAX's FLOPS).

Each primitive's count comes from its cost rule (ad_util.cost_rules, beside the primitive):
elementwise arithmetic on floats costs one per element, a reduction one per element folded in,
dot_general 2*M*N*K per batch, moving data costs nothing. Loops multiply their body's count by the
trip count when it is known from the program; when a count depends on data (a trip count computed
from the arguments, a while loop, which branch a cond takes) the values it needs — and only those —
are computed (lazily, by evaluating just the equations they depend on), as the seed describes.
With abstract arguments (ShapedArrays) such counts cannot be known: a cond then counts its most
expensive branch, and a while loop is an error.
"""
from __future__ import annotations

import math
from typing import Sequence

from sprue.base import dtypes
from sprue.base.errors import SprueValueError
from sprue.interp.ad_util import cost_rules, located, nested_cost_rules, not_transformable
from sprue.ir.core import Jaxpr, Literal, ShapedArray, Var
from sprue.ir.shapes import DimExpr, substitute
from sprue.trace.tracing import bind


class DataDependentCost(SprueValueError):
    """A count needs a value that is not known: the arguments were given abstractly."""


class ProbeNeedsValues(Exception):
    """Internal: a loop body's count, probed once with its carry unknown, needs the carry's values
    (then the loop's trips are run one by one)."""


class Lazy:
    """A value computed on demand (and once): concrete (numpy), or abstract (never computable:
    an abstract argument, or — `probe` — a loop carry while probing whether the body's count
    depends on it)."""

    __slots__ = ("_thunk", "_value", "_done", "aval", "probe")

    def __init__(self, thunk, aval: ShapedArray | None, probe: bool = False):
        self._thunk, self._value, self._done, self.aval, self.probe = thunk, None, False, aval, probe

    @classmethod
    def known(cls, value, aval=None):
        lz = cls(None, aval)
        lz._value, lz._done = value, True
        return lz

    @classmethod
    def abstract(cls, aval: ShapedArray, probe: bool = False):
        return cls(None, aval, probe)

    @property
    def is_abstract(self) -> bool:
        return not self._done and self._thunk is None

    def value(self, why: str = "a count"):
        if not self._done:
            if self._thunk is None and self.probe:
                raise ProbeNeedsValues(why)
            if self._thunk is None:
                raise DataDependentCost(
                    f"cost: {why} depends on the values of the arguments, which were given abstractly;"
                    f" call sprue.cost(f) with concrete arrays")
            self._value, self._done, self._thunk = self._thunk(), True, None
        return self._value


def _outputs(eqn, ins: list[Lazy]) -> list[Lazy]:
    """Lazy outputs of an equation: evaluated (eagerly, with numpy) when first needed."""
    box: list = []

    def run():
        if not box:
            outs = bind(eqn.primitive, [x.value() for x in ins], eqn.params)
            box.append(list(outs) if eqn.primitive.multiple_results else [outs])
        return box[0]

    abstract = any(x.is_abstract for x in ins)
    probe = any(x.is_abstract and x.probe for x in ins)
    return [Lazy.abstract(v.aval, probe) if abstract else Lazy(lambda k=k: run()[k], v.aval)
            for k, v in enumerate(eqn.outvars)]


class CostContext:
    """Counts flops of jaxprs; nested cost rules call back into it for their bodies."""

    def jaxpr_cost(self, jaxpr: Jaxpr, consts: Sequence[Lazy], args: Sequence[Lazy]) -> tuple[int, list[Lazy]]:
        env: dict[Var, Lazy] = {}
        binders: dict = {}

        def read(a) -> Lazy:
            return Lazy.known(a.val, a.aval) if isinstance(a, Literal) else env[a]

        for v, x in [*zip(jaxpr.constvars, consts), *zip(jaxpr.invars, args)]:
            env[v] = x
            if v.dim is not None:
                binders[v.dim] = x

        def concrete(aval: ShapedArray) -> ShapedArray:
            if aval.is_static:
                return aval
            mapping = {}
            for d in aval.shape:
                for dv in (d.dim_vars() if isinstance(d, DimExpr) else ()):
                    if dv in binders:
                        mapping[dv] = int(binders[dv].value("an array size"))
            return aval.update(shape=tuple(substitute(d, mapping) for d in aval.shape))

        total = 0
        for eqn in jaxpr.eqns:
            ins = [read(a) for a in eqn.invars]
            nested = nested_cost_rules.get(eqn.primitive)
            if nested is not None:
                flops, outs = nested(self, eqn, ins)
            else:
                rule = cost_rules.get(eqn.primitive)
                if rule is None:
                    raise located(not_transformable("costable", eqn.primitive), eqn)
                outs = _outputs(eqn, ins)
                in_avals = [concrete(a.aval) for a in eqn.invars]
                out_avals = [concrete(v.aval) for v in eqn.outvars]
                flops = rule(in_avals, out_avals, **eqn.params)
            total += flops
            for v, x in zip(eqn.outvars, outs):
                env[v] = x
                if v.dim is not None:
                    binders[v.dim] = x
        return total, [read(a) for a in jaxpr.outvars]

    def outputs(self, eqn, ins: list[Lazy]) -> list[Lazy]:
        return _outputs(eqn, ins)


# -- cost rules shared by many primitives -------------------------------------------------------------
def numel(aval: ShapedArray) -> int:
    return int(math.prod(aval.shape))


def free(in_avals, out_avals, **params) -> int:
    """Data movement, integer and boolean work: no floating-point operations."""
    return 0


def per_output_element(in_avals, out_avals, **params) -> int:
    """One operation per element of a floating-point or complex result (elementwise arithmetic)."""
    return sum(numel(a) for a in out_avals if dtypes.is_inexact(a.dtype))


def per_input_element(in_avals, out_avals, **params) -> int:
    """One operation per element of floating-point operands (comparisons of floats)."""
    return numel(in_avals[0]) if in_avals and dtypes.is_inexact(in_avals[0].dtype) else 0


__all__ = ["CostContext", "Lazy", "DataDependentCost", "ProbeNeedsValues", "free", "per_output_element",
           "per_input_element", "numel"]
