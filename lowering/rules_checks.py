"""Lowering of `check` (a run-time assertion) into the function's status.

The status is an i64 scalar carried through the lowering (`ctx.status`): 0 while every check has
held, else the code of the first check that failed. Each check is

    status = select(status == 0 && !ok, code, status)

so later failures never overwrite the first, and nothing branches: the code after a failed check
runs on, on sizes the frontend keeps memory-safe, and the caller raises the first failure's
message from the status it gets back (sprue.runtime)."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from .. import lax
from ..core import ClosedJaxpr, Eqn, Jaxpr
from .rules_common import (LoweringContext, Value, compare, constant, logical_and, logical_not, lowering_rules,
                           select, unsupported)


def _nested_jaxprs(params: dict) -> Iterable[Jaxpr]:
    def walk(x: Any):
        if isinstance(x, ClosedJaxpr):
            yield x.jaxpr
        elif isinstance(x, Jaxpr):
            yield x
        elif isinstance(x, (tuple, list)):
            for y in x:
                yield from walk(y)
    for value in params.values():
        yield from walk(value)


def contains_checks(jaxpr: Jaxpr | ClosedJaxpr) -> bool:
    """Whether a check equation occurs in jaxpr or in any jaxpr nested in its equations' params."""
    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    return any(eqn.primitive is lax.check_p or any(contains_checks(j) for j in _nested_jaxprs(eqn.params))
               for eqn in jaxpr.eqns)


def _check(ctx: LoweringContext, eqn: Eqn, ok: Value) -> list[Value]:
    if ctx.status is None:
        raise unsupported(eqn, "a check inside a region whose lowering does not thread the check status"
                               " (see stablehlo.lower_region_body)")
    code = ctx.add_check(str(eqn.params["message"]))
    status = ctx.status
    first_failure = logical_and(logical_not(ok), compare(status, constant(0, np.int64), "EQ"))
    ctx.status = select(first_failure, constant(code, np.int64), status)
    return []


lowering_rules[lax.check_p] = _check
