"""jaxpr -> StableHLO: `lower(closed_jaxpr)` is a LoweredModule whose text holds `func.func @main`
(`lower_jaxpr(closed_jaxpr)` is just the text).

The function takes one tensor per jaxpr invar and returns one tensor per outvar. Each equation
becomes the ops its primitive's rule emits (`lowering_rules`, one rule per primitive, defined in
the rules_*.py modules by theme, which this module imports; emit.py walks the equations); consts become `stablehlo.constant`s holding the numpy arrays
bit for bit, literals become rank-0 constants. Each equation's ops carry the user's source
location (file:line) from `eqn.source_info`, so MLIR diagnostics point at user code.

Dynamic shapes: every dim that is not an int is `?`. Each variable that binds a dimension
variable (`Var.dim`: an implicit size argument, an int argument, a size computed by an equation,
a const of a nested jaxpr) is recorded in the context's DimScope, from which rules evaluate the
DimExprs of their shapes.

Checks: when the jaxpr (or a jaxpr nested in it) contains `check` equations, @main returns an
extra first result, an i64 scalar status: 0, or the 1-based code of the first check that failed.
`LoweredModule.check_messages[code - 1]` is that check's message. Code after a failed check keeps
running (the frontend keeps its sizes memory-safe); only the status records the failure.

Entry checks (`lower`, rules_checks.entry_checks): a size the kernel takes as an argument (the
implicit `n` of `b:f64[n]`) is also carried by the descriptor of each array it sizes; @main
compares them before running its body, which it skips when they disagree, and so has a status
whenever it has such arguments.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import arith, tensor

from sprue.ir.core import ClosedJaxpr, Jaxpr, ShapedArray
from sprue.ir.shapes import DimExpr

# Importing the rule modules fills the table (each registers its rules in lowering_rules).
from sprue.lowering import (  # noqa: F401
    dialects,
    rules_calls,
    rules_checks,
    rules_complex,
    rules_control_flow,
    rules_convolution,
    rules_custom,
    rules_debug,
    rules_elementwise,
    rules_filtering,
    rules_indexing,
    rules_linalg,
    rules_math,
    rules_random,
    rules_reductions,
    rules_special,
    rules_structural,
)
from sprue.lowering.emit import emit_jaxpr, numpy_consts
from sprue.lowering.outline import ENTRY_CHECKS
from sprue.lowering.rules_checks import contains_checks, emit_entry_checks, entry_checks
from sprue.lowering.rules_common import (
    DYNAMIC,
    LoweringContext,
    Value,
    aval_type,
    build_region,
    const_array,
    constant,
    dims_of,
    lowering_rules,
    op,
    select,
)

# lowering_rules: the table, filled once this module is imported.
__all__ = ["LoweredModule", "LoweringContext", "contains_checks", "lower", "lower_jaxpr", "lowering_rules",
           "make_builder_context"]


def make_builder_context() -> ir.Context:
    """A fresh context to build a module from a jaxpr in: the StableHLO dialect registered, no
    passes (pipeline.make_pipeline_context registers those), unregistered dialects refused."""
    ctx = dialects.new_context()
    ctx.allow_unregistered_dialects = False
    return ctx


_STATUS_AVAL = ShapedArray((), np.int64)


@dataclass(frozen=True)
class LoweredModule:
    """A lowered jaxpr. With `has_status`, @main's first result is the i64 check status and
    check_messages[code - 1] is the message of check `code`."""
    text: str
    check_messages: tuple[str, ...] = ()
    has_status: bool = False


def lower(closed_jaxpr: ClosedJaxpr, name: str = "main", *, debug_info: bool = True,
          arg_names: Sequence[str] | None = None, static_sizes: bool = False,
          destinations: bool = False, into: str | None = None) -> LoweredModule:
    """The StableHLO module of `closed_jaxpr` as `func.func @<name>`, with its check messages.

    With debug_info the text keeps each op's location (primitive name and user file:line), so
    that diagnostics of later passes parsing it still point at the user's code.

    Entry checks (rules_checks.entry_checks): every size an argument's descriptor carries that the
    kernel also takes as a size argument is compared with it at entry, and with `static_sizes`
    (for C callers, whose descriptors nothing else checks) every static size too; `arg_names`
    name the arguments in their messages (default: the size arguments after their dimension,
    the others `#k`). When there are any, the body runs in a `stablehlo.if` on their status, so
    that nothing reads an argument whose descriptor disagrees; the other branch returns fresh
    results whose values are unset (size 0 along each dynamic axis). The body's own checks keep
    codes 1, 2, ...; the entry checks' codes follow.

    With `destinations`, the function returns nothing: it takes a memref per result after its
    arguments (the status first, when it has one) and writes each result there
    (`bufferization.materialize_in_destination ... restrict writable`: one-shot bufferization then
    computes a result in its destination, as IREE's and MLIR's destination-passing style do, and
    copies only what it cannot). When the entry checks fail, only the status is written. `into`
    names a destination-passing function to add beside @name (the C header's `_into`)."""
    consts = numpy_consts(closed_jaxpr)
    jaxpr = closed_jaxpr.jaxpr
    names = list(arg_names) if arg_names is not None else _default_names(jaxpr)
    if len(names) != len(jaxpr.invars):
        raise ValueError(f"{len(names)} argument names for {len(jaxpr.invars)} arguments")
    entry = entry_checks(jaxpr, names, static_sizes)
    body_checks = contains_checks(jaxpr)
    has_status = body_checks or bool(entry)
    builder = make_builder_context()
    with builder, ir.Location.unknown():
        module = ir.Module.create()
        # With static-size checks the arrays come in with `?` sizes, to be read and checked.
        arg_types = [_entry_type(v.aval) if static_sizes else aval_type(v.aval) for v in jaxpr.invars]
        result_types = [aval_type(v.aval) for v in jaxpr.outvars]
        if has_status:
            result_types.insert(0, aval_type(_STATUS_AVAL))

        def emit(name: str, destinations: bool) -> LoweringContext:
            """@name into the module (with `destinations`: writing its results to them)."""
            dest_types = [_memref_type(t) for t in result_types] if destinations else []
            with ir.InsertionPoint(module.body):
                fn_type = ir.FunctionType.get(arg_types + dest_types, [] if destinations else result_types)
                fn = ir.Operation.create(
                    "func.func", regions=1,
                    attributes={"sym_name": ir.StringAttr.get(name), "function_type": ir.TypeAttr.get(fn_type)})
            block = fn.regions[0].blocks.append(*arg_types, *dest_types)
            args, dests = list(block.arguments)[:len(arg_types)], list(block.arguments)[len(arg_types):]
            data_dests = dests[int(has_status):]
            if entry:   # (partition.py cuts the guarded body, not the checks)
                fn.attributes[ENTRY_CHECKS] = ir.UnitAttr.get()
            with ir.InsertionPoint(block):
                ctx = LoweringContext(module)

                def body() -> list[Value]:
                    """The jaxpr's outputs, after the status of its own checks when it has any (with
                    destinations: the outputs written to theirs, and only the status returned)."""
                    if body_checks:
                        ctx.status = constant(0, np.int64)
                    const_values = [const_array(c) for c in consts]
                    views = [_static_view(a, v.aval) for a, v in zip(args, jaxpr.invars)]
                    outs = emit_jaxpr(ctx, jaxpr, const_values, _sizes_read_from_arrays(jaxpr, views) if entry else views)
                    if destinations:
                        _write_to(outs, data_dests)
                        outs = []
                    return [ctx.status, *outs] if body_checks else outs

                guarded = result_types[1 - body_checks:1] if destinations else result_types[1 - body_checks:]
                if entry:
                    # The body first, so that its own checks keep codes 1, 2, ... (those a C caller may
                    # know already); the entry checks take the codes after them, emitted before the if.
                    placeholder = constant(True, np.bool_)
                    guard = op("stablehlo.if", [placeholder], guarded, regions=2)
                    with ctx.nested_scope():
                        build_region(guard, [], lambda _: body(), 0)
                    with ir.InsertionPoint(guard):
                        for v, a in zip(jaxpr.invars, args):
                            if v.dim is not None:
                                ctx.bind_dim(v.dim, a)
                        status, ok = emit_entry_checks(ctx, args, entry)
                    guard.operands[0] = ok
                    placeholder.owner.erase()
                    # Fresh buffers, never constants, in both branches: a result that is a constant in
                    # one branch only makes the deallocation of every call decide at run time who owns what.
                    build_region(guard, [], lambda _: [_unset(t) for t in guarded], 1)
                    outs = list(guard.results)
                    if body_checks:   # the first failure: the entry's, else the body's
                        outs[0] = select(ok, outs[0], status)
                    else:
                        outs.insert(0, status)
                else:
                    outs = body()
                    if has_status and not body_checks:
                        outs.insert(0, constant(0, np.int64))
                if destinations:
                    _write_to(outs, dests)   # (the status: the rest were written in the body)
                    outs = []
                ir.Operation.create("func.return", operands=outs)
            return ctx

        ctx = emit(name, destinations)
        if into is not None:
            emit(into, True)
        if not module.operation.verify():
            raise AssertionError("the lowered StableHLO module does not verify")
        text = module.operation.get_asm(enable_debug_info=debug_info)
    dialects.pass_on(builder)   # (the pipeline parses the text into it: a context less to make)
    return LoweredModule(text, tuple(ctx.check_messages), has_status)


def _default_names(jaxpr: Jaxpr) -> list[str]:
    return [repr(v.dim) if v.dim is not None else f"#{i + 1}" for i, v in enumerate(jaxpr.invars)]


def _entry_type(aval: ShapedArray) -> ir.Type:
    """An argument's type at the entry: every size `?` (read from its descriptor, then checked)."""
    return aval_type(aval.update(shape=(None,) * aval.ndim)) if aval.ndim else aval_type(aval)


def _sizes_read_from_arrays(jaxpr: Jaxpr, values: list[Value]) -> list[Value]:
    """The entry's arguments, each size argument (an i64[] invar binding a dimension) replaced by
    that size read from an array argument that has it (dims_of). The entry checks have compared
    the two; inside the checked body, sizes from either are equal, but only the array's is the
    same value as the sizes that slices, reductions and elementwise ops read from their operands
    (`x.shape[0]` of a `?` axis, a broadcast to `n` rows), so only with it do those ops' sizes fold
    to one value, and fusion sees they match (Relax's symbolic shapes: one binding per variable)."""
    out = list(values)
    for i, v in enumerate(jaxpr.invars):
        if v.dim is None:
            continue
        want = DimExpr.var(v.dim)
        found = next(((k, axis) for k, w in enumerate(jaxpr.invars) if w.dim is None
                      for axis, d in enumerate(getattr(w.aval, "shape", ()))
                      if isinstance(d, DimExpr) and d == want), None)
        if found is not None:
            k, axis = found
            out[i] = dims_of(values[k])[axis]
    return out


def _static_view(arg: Value, aval: ShapedArray) -> Value:
    """An argument that came in with `?` sizes (`_entry_type`) as the type of its aval: a
    tensor.reshape to the checked sizes. (A tensor.cast would lose them again: canonicalization
    folds `dim(cast(x))` into `dim(x)`, and the body's loops would run to the descriptor's sizes
    instead of constants; a reshape bufferizes to a memref.reshape of the contiguous argument, no
    copy.)"""
    ty = aval_type(aval)
    if arg.type == ty:
        return arg
    i64 = ir.IntegerType.get_signless(64)
    sizes = [arith.ConstantOp(i64, d).result if isinstance(d, int) else
             arith.IndexCastOp(i64, tensor.DimOp(arg, arith.ConstantOp(ir.IndexType.get(), i).result).result).result
             for i, d in enumerate(aval.shape)]
    shape = tensor.FromElementsOp(ir.RankedTensorType.get([len(sizes)], i64), sizes).result
    return tensor.ReshapeOp(ty, arg, shape).result


def _memref_type(t: ir.Type) -> ir.Type:
    """The destination of a result of tensor type `t`: a memref of its shape (identity layout:
    a row-major contiguous buffer, as the runtimes check)."""
    ranked = ir.RankedTensorType(t)
    return ir.MemRefType.get(ranked.shape, ranked.element_type)


def _write_to(values: Sequence[Value], dests: Sequence[ir.Value]) -> None:
    """Each value written into its destination (`lower`'s destinations)."""
    unit = ir.UnitAttr.get()
    for value, dest in zip(values, dests):
        ir.Operation.create("bufferization.materialize_in_destination", operands=[value, dest],
                            attributes={"restrict": unit, "writable": unit})


def _unset(ty: ir.Type) -> Value:
    """A fresh buffer of type `ty`, its values unset, size 0 along each `?`: a result when the
    entry checks failed (the caller only frees it)."""
    t = ir.RankedTensorType(ty)
    zero = arith.ConstantOp(ir.IndexType.get(), 0).result
    return tensor.EmptyOp([zero if n == DYNAMIC else n for n in t.shape], t.element_type).result


def lower_jaxpr(closed_jaxpr: ClosedJaxpr, name: str = "main", *, debug_info: bool = True) -> str:
    """The StableHLO module (text) of `closed_jaxpr` (see `lower`, which also gives the messages of
    the checks when @main returns a status)."""
    return lower(closed_jaxpr, name, debug_info=debug_info).text
