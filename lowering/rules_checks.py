"""Lowering of `check` (a run-time assertion) into the function's status.

The status is an i64 scalar carried through the lowering (`ctx.status`): 0 while every check has
held, else the code of the first check that failed. Each check is

    status = select(status == 0 && !ok, code, status)

so later failures never overwrite the first, and nothing branches: the code after a failed check
runs on, on sizes the frontend keeps memory-safe, and the caller raises the first failure's
message from the status it gets back (sprue.runtime)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import arith, tensor

from sprue import lax
from sprue.ir.core import ClosedJaxpr, Eqn, Jaxpr
from sprue.ir.shapes import DimExpr, DimVar, dim_vars_of, format_dim
from sprue.lowering.rules_common import (
    LoweringContext,
    Value,
    compare,
    constant,
    convert,
    logical_and,
    logical_not,
    lowering_rules,
    select,
    unsupported,
)


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
                               " (see emit.lower_region_body)")
    code = ctx.add_check(str(eqn.params["message"]))
    status = ctx.status
    first_failure = logical_and(logical_not(ok), compare(status, constant(0, np.int64), "EQ"))
    ctx.status = select(first_failure, constant(code, np.int64), status)
    return []


lowering_rules[lax.check_p] = _check


# -- entry checks -------------------------------------------------------------------------------
# A kernel with dynamic sizes takes each size as an argument of its own (the implicit `n` of
# `{ lambda ; a:i64[] b:f64[a]. ... }`) and each array as a descriptor that carries its sizes too.
# The body sizes its loops and allocations from the size arguments but reads the arrays through
# their own sizes, so a caller passing `n` = 3 with a descriptor of 5 elements gets a wrong result,
# and one passing `n` larger than the array makes the kernel read past its end. The entry checks
# compare every size an argument's descriptor carries with what the kernel assumes it is, before
# anything reads the arrays (stablehlo.lower runs the body only when they all hold).

@dataclass(frozen=True)
class EntryCheck:
    """One check at a kernel's entry: invar `arg` (of the @main jaxpr) is a size argument that
    must not be negative (`axis` None), or its descriptor's sizes[axis] must equal `dim` (an int,
    or a DimExpr over the size arguments; `size_arg` is the invar holding it when it is one)."""
    arg: int
    axis: int | None
    dim: Any
    message: str
    size_arg: int | None = None


def entry_checks(jaxpr: Jaxpr, names: Sequence[str], static_sizes: bool) -> list[EntryCheck]:
    """The checks of the arguments of `jaxpr` (named `names` in messages): each size argument that
    sizes an array argument is not negative, and each axis of an array argument whose size is a
    DimExpr of size arguments has that size in its descriptor; with `static_sizes`, so has each
    axis of static size (the runtime checks those in Python; a C caller's descriptor may say
    anything)."""
    binder = {v.dim: i for i, v in enumerate(jaxpr.invars) if v.dim is not None}

    def name_of(dv: DimVar) -> str:
        return names[binder[dv]] if dv in binder else repr(dv)

    sizes: list[EntryCheck] = []
    axes: list[EntryCheck] = []
    seen: set[int] = set()
    for i, v in enumerate(jaxpr.invars):
        where = f"argument {names[i]} ({v.aval.str_short(name_of)})"
        for axis, d in enumerate(v.aval.shape):
            field_ = f"sizes[{axis}] of its descriptor"
            if isinstance(d, (int, np.integer)):
                if static_sizes:
                    axes.append(EntryCheck(i, axis, int(d), f"{where}: {field_} is not {int(d)}, the size the kernel"
                                                            f" was compiled for"))
                continue
            used = dim_vars_of(d)
            if not used <= binder.keys():   # sized by something no argument binds: nothing to compare
                continue
            for dv in sorted(used, key=lambda dv: binder[dv]):
                if binder[dv] not in seen:
                    seen.add(binder[dv])
                    sizes.append(EntryCheck(binder[dv], None, None,
                                            f"the size argument {name_of(dv)} is negative (it is a size of"
                                            f" argument {names[i]})"))
            text = format_dim(d, name_of)
            size_arg = None
            if isinstance(d, DimExpr) and d == DimExpr.var(next(iter(used))):
                said, size_arg = f"the size argument {text}", binder[next(iter(used))]
            else:
                said = f"{text}, computed from the size argument{'s' if len(used) > 1 else ''}" \
                       f" {', '.join(sorted(map(name_of, used)))}"
            axes.append(EntryCheck(i, axis, d, f"{where}: {field_} differs from {said}; they must be equal",
                                   size_arg))
    return sizes + axes


def emit_entry_checks(ctx: LoweringContext, args: Sequence[Value], checks: Sequence[EntryCheck]
                      ) -> tuple[Value, Value]:
    """(the status after `checks`: a tensor<i64>, 0 or the code of the first that failed; whether
    it is 0: a tensor<i1>), emitted at the current insertion point over the kernel's arguments.
    ctx's scope must bind the size arguments. Scalar arith, not stablehlo ops on rank-0 tensors:
    each of those would be a buffer of its own, allocated on every call."""
    i64 = ir.IntegerType.get_signless(64)

    def scalar(t: Value) -> ir.Value:   # a tensor<i64> as an i64
        return tensor.ExtractOp(convert(t, np.int64), []).result

    def c64(x: int) -> ir.Value:
        return arith.ConstantOp(i64, x).result

    outer, ctx.status = ctx.status, None   # the expected sizes are not guarded by a status yet
    try:
        # The first failure is the smallest failing code (codes number the checks in order):
        # min(failed ? code : NONE) over the checks, as a balanced tree. A chain of
        # `select(status == 0 && failed, code, status)`, one per check, was a dependency chain as
        # long as the arguments' axes, on which LLVM's constraint elimination and instruction
        # selection were quadratic (a 100-layer network's 202 axes: 0.6 + 1.4 s).
        none = c64(np.iinfo(np.int64).max)
        codes: list[ir.Value] = []
        read: dict[tuple[int, int], ir.Value] = {}
        for c in checks:
            code = ctx.add_check(c.message)
            if c.axis is None:
                failed = arith.CmpIOp(arith.CmpIPredicate.slt, scalar(args[c.arg]), c64(0)).result
            else:
                if (c.arg, c.axis) not in read:
                    dim = tensor.DimOp(args[c.arg], arith.ConstantOp(ir.IndexType.get(), c.axis).result).result
                    read[c.arg, c.axis] = arith.IndexCastOp(i64, dim).result
                # (a size argument is compared as it is: its checked sign makes it its clamped size)
                expected = (c64(c.dim) if isinstance(c.dim, int) else scalar(args[c.size_arg])
                            if c.size_arg is not None else scalar(ctx.size(c.dim)))
                failed = arith.CmpIOp(arith.CmpIPredicate.ne, read[c.arg, c.axis], expected).result
            codes.append(arith.SelectOp(failed, c64(code), none).result)
        while len(codes) > 1:
            codes = [arith.MinSIOp(a, b).result for a, b in zip(codes[::2], codes[1::2])] + codes[len(codes) - len(codes) % 2:]
        status = c64(0) if not codes else arith.SelectOp(
            arith.CmpIOp(arith.CmpIPredicate.eq, codes[0], none).result, c64(0), codes[0]).result
        ok = arith.CmpIOp(arith.CmpIPredicate.eq, status, c64(0)).result
        return (tensor.FromElementsOp(ir.RankedTensorType.get([], i64), [status]).result,
                tensor.FromElementsOp(ir.RankedTensorType.get([], ok.type), [ok]).result)
    finally:
        ctx.status = outer
