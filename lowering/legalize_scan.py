"""stablehlo.reduce_window spanning a whole axis (a prefix scan: cumsum, cumprod, cummax, cummin) ->
one sequential pass (scf + memref).

JAX writes `cumsum(x, axis)` as a reduce_window whose window covers the whole axis, padded with
n - 1 init values before it (after it when reversed): element i reduces x[0..i]. Lowered as a window
(stablehlo-legalize-to-linalg's pooling form) that is O(n^2) work; computed as numpy does, each
element from its predecessor, it is O(n). The loops run over the axes before the scanned one, then
along it, then over the axes after it, innermost, so that the step from one row to the next reads
and writes contiguous memory the vectorizer can widen; a scan over the last axis carries the running
value in a register.

Only that form is rewritten (window 1 on every other axis, unit strides and dilations, an init
that is the identity of the window's combining op); other reduce_windows keep the generic lowering.
The combining op is the window's own region, translated to scalar code (mlir_util.inline_scalar_region),
so NaN propagation of stablehlo.maximum etc. is what the region says.
"""

from __future__ import annotations

import math
from typing import Callable

from torch_mlir import ir
from torch_mlir.dialects import arith, scf

from sprue.lowering.mlir_util import (
    SCALAR_RULES,
    add,
    alloc,
    as_tensor,
    constant_scalar,
    extract,
    for_loop,
    index,
    inline_scalar_region,
    insert_at,
    load,
    loop_nest,
    store,
    tensor_sizes,
    tensor_type,
    to_signless,
)


def _is_identity(name: str, value, elem: ir.Type) -> bool:
    """Whether the constant `value` is the identity of the region's op `name` on `elem` (the padded
    init values must change nothing)."""
    if isinstance(elem, ir.IntegerType) and elem.width > 1:
        w = elem.width
        lo, hi = (0, (1 << w) - 1) if elem.is_unsigned else (-(1 << (w - 1)), (1 << (w - 1)) - 1)
        return {"stablehlo.add": value == 0, "stablehlo.multiply": value == 1, "stablehlo.maximum": value == lo,
                "stablehlo.minimum": value == hi, "stablehlo.or": value == 0,
                "stablehlo.and": value == (hi if elem.is_unsigned else -1)}.get(name, False)
    if isinstance(elem, ir.IntegerType):   # booleans
        return {"stablehlo.or": value is False, "stablehlo.maximum": value is False, "stablehlo.add": value is False,
                "stablehlo.and": value is True, "stablehlo.minimum": value is True,
                "stablehlo.multiply": value is True}.get(name, False)
    return {"stablehlo.add": value == 0, "stablehlo.multiply": value == 1, "stablehlo.maximum": value == -math.inf,
            "stablehlo.minimum": value == math.inf}.get(name, False)


def _ints(op: ir.Operation, name: str) -> list[int] | None:
    if name not in op.attributes:
        return None
    return [int(v) for v in ir.DenseI64ArrayAttr(op.attributes[name])]


def _padding(op: ir.Operation) -> list[tuple[int, int]] | None:
    if "padding" not in op.attributes:
        return None
    flat = [int(v) for v in ir.DenseIntElementsAttr(op.attributes["padding"])]
    return list(zip(flat[0::2], flat[1::2]))


def prefix_axis(op: ir.Operation) -> tuple[int, bool] | None:
    """(axis, reverse) when `op` is a prefix scan over that axis, else None."""
    if len(op.operands) != 2 or len(op.results) != 1:
        return None
    shape = tensor_type(op.operands[0]).shape
    if any(ir.ShapedType.is_dynamic_size(d) for d in shape):
        return None
    window = _ints(op, "window_dimensions")
    padding = _padding(op) or [(0, 0)] * len(shape)
    for unit in ("window_strides", "base_dilations", "window_dilations"):
        values = _ints(op, unit)
        if values is not None and any(v != 1 for v in values):
            return None
    spanned = [d for d, (w, n) in enumerate(zip(window, shape)) if w != 1]
    if len(spanned) != 1:
        return None
    axis = spanned[0]
    n = shape[axis]
    if window[axis] != n or any(p != (0, 0) for d, p in enumerate(padding) if d != axis):
        return None
    if padding[axis] not in ((n - 1, 0), (0, n - 1)):
        return None
    body = list(op.regions[0].blocks[0].operations)
    if len(body) != 2 or list(body[0].operands) != list(op.regions[0].blocks[0].arguments):
        return None
    init = constant_scalar(op.operands[1])
    elem = tensor_type(op.operands[0]).element_type
    if init is None or not _is_identity(body[0].name, init, elem):
        return None
    return axis, padding[axis] == (0, n - 1) and n > 1


def lower_prefix_window(op: ir.Operation) -> None:
    """Rewrites `op` as one pass along its axis when it is a prefix scan; leaves it otherwise."""
    form = prefix_axis(op)
    if form is None:
        return
    axis, reverse = form
    where = f"stablehlo.reduce_window at {op.location}"
    _one_pass(op, axis, reverse, lambda a, b: inline_scalar_region(op.regions[0], [a, b], where)[0])


# A prefix scan whose axis has a run-time size (a reduce_window's window is an attribute): the
# cumulative ops' lowering rule (rules_reductions.py) emits this custom_call, named by the
# StableHLO op that combines two elements; it is sprue's own, never accepted from a user's file
# (stablehlo_input.py refuses custom_calls).
PREFIX_SCAN_TARGET = "sprue.prefix_scan"


def lower_prefix_call(op: ir.Operation) -> None:
    """Rewrites a PREFIX_SCAN_TARGET custom_call as the same pass as a static prefix scan."""
    if "call_target_name" not in op.attributes or ir.StringAttr(op.attributes["call_target_name"]).value != PREFIX_SCAN_TARGET:
        return
    axis = ir.IntegerAttr(op.attributes["sprue.axis"]).value
    reverse = ir.BoolAttr(op.attributes["sprue.reverse"]).value
    rule = SCALAR_RULES[ir.StringAttr(op.attributes["sprue.combine"]).value]
    _one_pass(op, axis, reverse, lambda a, b: rule(op, [a, b]))   # the rule reads x's element type from op


def _one_pass(op: ir.Operation, axis: int, reverse: bool, combine: Callable[[ir.Value, ir.Value], ir.Value]) -> None:
    """Replaces `op` (its operand 0: x) by the prefix scan of x along `axis`, element after element."""
    with ir.InsertionPoint(op), op.location:
        x = to_signless(op.operands[0])
        shape_type = tensor_type(x)
        elem = shape_type.element_type
        sizes = tensor_sizes(x)
        n = sizes[axis]
        last = arith.SubIOp(n, index(1)).result

        def position(k: ir.Value) -> ir.Value:   # the k-th element in scan order
            return arith.SubIOp(last, k).result if reverse else k

        out = alloc(shape_type.shape, elem, sizes)
        outer, inner = sizes[:axis], sizes[axis + 1:]

        def lane(ivs: list[ir.Value]) -> None:   # the last axis: the running value stays in a register
            first = extract(x, insert_at(ivs, axis, position(index(0))))
            store(first, out, insert_at(ivs, axis, position(index(0))))

            def step(k: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
                at = insert_at(ivs, axis, position(k))
                value = combine(acc[0], extract(x, at))
                store(value, out, at)
                return [value]
            for_loop(index(1), n, index(1), [first], step)

        def row(ivs: list[ir.Value]) -> None:   # axes after it: each step a contiguous row
            def first(jvs: list[ir.Value]) -> None:
                at = ivs + [position(index(0))] + jvs
                store(extract(x, at), out, at)
            loop_nest(inner, first)

            def step(k: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
                here, before = position(k), position(add(k, index(-1)))

                def element(jvs: list[ir.Value]) -> None:
                    at = ivs + [here] + jvs
                    store(combine(load(out, ivs + [before] + jvs), extract(x, at)), out, at)
                loop_nest(inner, element)
                return []
            for_loop(index(1), n, index(1), [], step)

        def body() -> None:
            loop_nest(outer, row if inner else lane)
        if ir.ShapedType.is_dynamic_size(shape_type.shape[axis]):
            # an axis empty at run time: no first element to read
            nonempty = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.sgt, n, index(0)).result)
            with ir.InsertionPoint(nonempty.then_block):
                body()
                scf.YieldOp([])
        else:
            body()
        result = as_tensor(out, tensor_type(op.results[0]))
    op.results[0].replace_all_uses_with(result)
    op.erase()


__all__ = ["PREFIX_SCAN_TARGET", "lower_prefix_call", "lower_prefix_window", "prefix_axis"]
