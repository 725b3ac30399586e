"""Rewrites of foreign StableHLO that sprue's own lowering never produces but other producers do.

  add/multiply on i1       -> or/and: the spec defines boolean add as OR and multiply as AND,
                              while stablehlo-legalize-to-linalg emits arith.addi/muli (XOR/AND)
  dot_general `algorithm`  -> dropped: the linalg conversion rejects dots that carry it, and on
                              the CPU we compute in the operands' own type anyway
  get_dimension_size       -> a constant for a static dim, else tensor.dim (no linalg lowering)
  dynamic_broadcast_in_dim -> tensor.generate when the result has `?` dims (JAX's shape-polymorphic
                              export broadcasts every scalar this way); the upstream pass only
                              lowers static results
  dynamic_pad              -> pad, when its low/high/interior operands are constants
  select_and_scatter       -> (max pooling's gradient; no linalg lowering upstream) the operand padded
                              by the lowest value, one strided slice per window offset, each window's
                              first maximum (minimum) found and its source value padded back into
                              place, the pieces summed: XLA's definition, unrolled over the window
  dynamic_reshape          -> tensor.reshape by the shape operand, when the result has `?` dims (JAX's
                              shape-polymorphic ravel, tile, hessian): the upstream lowering leaves
                              an unrealized cast that LLVM cannot translate
  reduce_precision         -> applied element by element in a tensor.generate, when the result has
                              `?` dims (the upstream lowering cannot reify its dynamic sizes)
  reduce_window padded     -> pad (by the init value; base dilation as interior padding), then the
                              reduce_window unpadded: the upstream pass lowers only windows with no
                              padding and no base dilation (JAX's cumsum, pooling with SAME)
  reduce_window            -> a linalg.generic over (output, window) (the upstream pass lowers neither
                              run-time sizes, window dilation, nor bodies of several ops: JAX's
                              shape-polymorphic cumsum and pooling, dilated pools, logaddexp windows)

Run on the parsed input before the pipeline (stablehlo_input.prepare).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import arith, tensor

from sprue.lowering.mlir_util import (
    cmp,
    elem_of,
    element_kind,
    extract,
    from_signless,
    index,
    ops_where,
    select,
    signless_tensor_type,
    tensor_sizes,
    to_index,
    to_signless,
)
from sprue.lowering.stablehlo_chlo import NEG_INF, POS_INF, rewrite_by_text


def _is_bool_tensor(v: ir.Value) -> bool:
    t = v.type
    return (isinstance(t, ir.RankedTensorType) and isinstance(t.element_type, ir.IntegerType)
            and t.element_type.width == 1)


def _rename(op: ir.Operation, new_name: str) -> None:
    """Replaces `op` by an op of the same operands, results and attributes under another name."""
    with ir.InsertionPoint(op), op.location:
        new = ir.Operation.create(new_name, results=[r.type for r in op.results], operands=list(op.operands),
                                  attributes={a.name: a.attr for a in op.attributes})
    for old, res in zip(op.results, new.results):
        old.replace_all_uses_with(res)
    op.erase()


def _bool_arith(op: ir.Operation) -> None:
    if _is_bool_tensor(op.results[0]):
        _rename(op, {"stablehlo.add": "stablehlo.or", "stablehlo.multiply": "stablehlo.and"}[op.name])


def _drop_algorithm(op: ir.Operation) -> None:
    if "algorithm" in op.attributes:
        del op.attributes["algorithm"]


def _get_dimension_size(op: ir.Operation) -> None:
    operand = ir.RankedTensorType(op.operands[0].type)
    dim = ir.IntegerAttr(op.attributes["dimension"]).value
    result = ir.RankedTensorType(op.results[0].type)
    with ir.InsertionPoint(op), op.location:
        if operand.is_dynamic_dim(dim):
            size = tensor.DimOp(op.operands[0], arith.ConstantOp(ir.IndexType.get(), dim).result).result
            size = arith.IndexCastOp(ir.IntegerType.get_signless(32), size).result
            value = tensor.FromElementsOp(result, [size]).result   # the spec's result is tensor<i32>
        else:
            attr = ir.DenseElementsAttr.get_splat(result, ir.IntegerAttr.get(result.element_type,
                                                                              operand.get_dim_size(dim)))
            value = ir.Operation.create("stablehlo.constant", results=[result],
                                        attributes={"value": attr}).result
    op.results[0].replace_all_uses_with(value)
    op.erase()


def _generate(result: ir.RankedTensorType, sizes: list[ir.Value],
              element: Callable[[list[ir.Value]], ir.Value]) -> ir.Value:
    """tensor.generate of `result` (signless) with sizes[d] for each `?` dim, element(ivs) per element."""
    gen = tensor.GenerateOp(result, [sizes[d] for d in range(result.rank) if result.is_dynamic_dim(d)])
    block = gen.regions[0].blocks.append(*([ir.IndexType.get()] * result.rank))
    with ir.InsertionPoint(block):
        tensor.YieldOp(element(list(block.arguments)))
    return gen.result


def _dynamic_broadcast_in_dim(op: ir.Operation) -> None:
    result = ir.RankedTensorType(op.results[0].type)
    if result.has_static_shape:
        return   # the upstream pass lowers it
    x, shape = op.operands[0], op.operands[1]
    dims = list(ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"]))
    x, dims = _through_unit_broadcast(x, dims)
    with ir.InsertionPoint(op), op.location:
        xs = to_signless(x)
        kind = element_kind(elem_of(shape))
        shape_s = to_signless(shape)
        sizes = [index(result.get_dim_size(d)) if not result.is_dynamic_dim(d)
                 else to_index(extract(shape_s, [index(d)]), kind) for d in range(result.rank)]
        x_sizes = tensor_sizes(xs)
        # An operand dim of size 1 is expanded: its index is always 0 (decided at run time when `?`).
        x_type = ir.RankedTensorType(x.type)
        expanded = [None if x_type.is_dynamic_dim(i) else x_type.get_dim_size(i) == 1 for i in range(x_type.rank)]
        ones = [cmp("eq", n, index(1)) if e is None else None for n, e in zip(x_sizes, expanded)]

        def element(ivs: list[ir.Value]) -> ir.Value:
            at = []
            for i, d in enumerate(dims):
                if expanded[i] is None:
                    at.append(select(ones[i], index(0), ivs[d]))
                else:
                    at.append(index(0) if expanded[i] else ivs[d])
            return extract(xs, at)
        out = _generate(signless_tensor_type(result), sizes, element)
        new = from_signless(out, result)
    op.results[0].replace_all_uses_with(new)
    op.erase()


def _through_unit_broadcast(x: ir.Value, dims: list[int]) -> tuple[ir.Value, list[int]]:
    """(x, dims), or -- when x is a static broadcast_in_dim that only adds size-1 dims (JAX's
    `b[None, :]` before a dynamic broadcast: a bias added to a batch) -- its operand and the dims
    the two broadcasts compose to: the element read then comes from a value defined outside the
    pipeline's rewrites (a tensor.generate reading a stablehlo op's result fails to legalize)."""
    owner = x.owner
    if not isinstance(owner, ir.OpView) or owner.operation.name != "stablehlo.broadcast_in_dim":
        return x, dims
    inner = list(ir.DenseI64ArrayAttr(owner.operation.attributes["broadcast_dimensions"]))
    mid = ir.RankedTensorType(x.type)
    if not mid.has_static_shape or any(mid.get_dim_size(d) != 1 for d in range(mid.rank) if d not in inner):
        return x, dims
    return owner.operation.operands[0], [dims[d] for d in inner]


def _constant_ints(v: ir.Value) -> list[int] | None:
    owner = v.owner
    if not isinstance(owner, ir.OpView) or owner.operation.name not in ("stablehlo.constant", "arith.constant"):
        return None
    return [int(x) for x in ir.DenseIntElementsAttr(owner.operation.attributes["value"])]


def _dynamic_pad(op: ir.Operation) -> None:
    x, value, *pads = op.operands
    known = [_constant_ints(p) for p in pads]
    if any(k is None for k in known):
        return   # left for the linalg check to name
    low, high, interior = known
    x_type = ir.RankedTensorType(x.type)
    shape = [None if x_type.is_dynamic_dim(d) else x_type.get_dim_size(d) for d in range(x_type.rank)]
    if None in shape:
        return
    out = [lo + hi + n + max(n - 1, 0) * i for n, lo, hi, i in zip(shape, low, high, interior)]
    result = ir.RankedTensorType.get(out, x_type.element_type)
    with ir.InsertionPoint(op), op.location:
        attrs = {k: ir.DenseI64ArrayAttr.get(v) for k, v in
                 (("edge_padding_low", low), ("edge_padding_high", high), ("interior_padding", interior))}
        new = ir.Operation.create("stablehlo.pad", results=[result], operands=[x, value], attributes=attrs).result
        if result != op.results[0].type:   # the op declared `?` sizes: cast back for its users
            new = tensor.CastOp(op.results[0].type, new).result
    op.results[0].replace_all_uses_with(new)
    op.erase()


def _dims(t: ir.RankedTensorType) -> list[int | None]:
    return [None if t.is_dynamic_dim(d) else t.get_dim_size(d) for d in range(t.rank)]


def _reduce_window_padding(op: ir.Operation) -> None:
    attrs = op.attributes
    n = len(op.operands) // 2
    rank = ir.RankedTensorType(op.operands[0].type).rank
    padding = _pairs(ir.DenseIntElementsAttr(attrs["padding"]), rank) if "padding" in attrs else [[0, 0]] * rank
    base = list(ir.DenseI64ArrayAttr(attrs["base_dilations"])) if "base_dilations" in attrs else [1] * rank
    if all(p == [0, 0] for p in padding) and all(b == 1 for b in base):
        _reduce_window_dynamic(op)
        return
    low, high, interior = [p[0] for p in padding], [p[1] for p in padding], [b - 1 for b in base]
    with ir.InsertionPoint(op), op.location:
        for k in range(n):
            x, init = op.operands[k], op.operands[n + k]
            t = ir.RankedTensorType(x.type)
            out = [ir.ShapedType.get_dynamic_size() if d is None else lo + hi + d + max(d - 1, 0) * i
                   for d, lo, hi, i in zip(_dims(t), low, high, interior)]
            pad_attrs = {key: ir.DenseI64ArrayAttr.get(v) for key, v in
                         (("edge_padding_low", low), ("edge_padding_high", high), ("interior_padding", interior))}
            op.operands[k] = ir.Operation.create("stablehlo.pad", results=[ir.RankedTensorType.get(out, t.element_type)],
                                                 operands=[x, init], attributes=pad_attrs).result
        i64 = ir.IntegerType.get_signless(64)
        attrs["padding"] = ir.DenseIntElementsAttr.get(
            np.zeros((rank, 2), np.int64), type=ir.RankedTensorType.get([rank, 2], i64))
        attrs["base_dilations"] = ir.DenseI64ArrayAttr.get([1] * rank)
    _reduce_window_dynamic(op)


ARITH_COMBINE = {("stablehlo.maximum", "f"): "arith.maximumf", ("stablehlo.minimum", "f"): "arith.minimumf",
          ("stablehlo.add", "f"): "arith.addf", ("stablehlo.multiply", "f"): "arith.mulf",
          ("stablehlo.maximum", "i"): "arith.maxsi", ("stablehlo.minimum", "i"): "arith.minsi",
          ("stablehlo.add", "i"): "arith.addi", ("stablehlo.multiply", "i"): "arith.muli",
          ("stablehlo.or", "i"): "arith.ori", ("stablehlo.and", "i"): "arith.andi"}


def _reduce_window_dynamic(op: ir.Operation) -> None:
    """An unpadded one-operand reduce_window: a linalg.generic over (output, window) positions, the
    input read at output * stride + window * dilation (upstream's lowering takes neither run-time
    sizes, nor window dilation, nor a body of more than one op)."""
    result = ir.RankedTensorType(op.results[0].type)
    if len(op.operands) != 2:
        return
    body = _region_op(op, 0)
    elem = str(result.element_type)
    # one arith op for a one-op body; else the body's own ops on rank-0 tensors, cloned in
    combine = ARITH_COMBINE.get((body.name, "f" if elem.startswith(("f", "bf")) else "i")) if body is not None else None
    attrs, rank = op.attributes, result.rank
    window = list(ir.DenseI64ArrayAttr(attrs["window_dimensions"]))
    strides = list(ir.DenseI64ArrayAttr(attrs["window_strides"])) if "window_strides" in attrs else [1] * rank
    dilation = list(ir.DenseI64ArrayAttr(attrs["window_dilations"])) if "window_dilations" in attrs else [1] * rank
    rule = rewrite_by_text(_reduce_window_text(result, window, strides, dilation, elem, combine))
    with ir.InsertionPoint(op), op.location:
        new = rule(op)
        if combine is None:
            clone_window_body(op.regions[0].blocks[0], new.owner)
    op.results[0].replace_all_uses_with(new)
    op.erase()


def clone_window_body(body: ir.Block, generic: ir.Operation) -> None:
    """The reduce_window's body cloned into the linalg.generic's placeholder: its two arguments are
    the generic's accumulator and element as rank-0 tensors, its result is what the generic yields."""
    block = generic.regions[0].blocks[0]
    acc, element, result = list(block.operations)[:3]     # from_elements x2, then the extract to yield
    mapped = [(body.arguments[0], acc.result), (body.arguments[1], element.result)]

    def lookup(v: ir.Value) -> ir.Value:
        return next((new for old, new in mapped if old == v), v)
    ops = list(body.operations)
    for original in ops[:-1]:
        clone = original.clone(ir.InsertionPoint(result))
        for i in range(len(clone.operands)):
            clone.operands[i] = lookup(clone.operands[i])
        mapped += list(zip(original.results, clone.results))
    result.operands[0] = lookup(ops[-1].operands[0])


def _reduce_window_text(result: ir.RankedTensorType, window, strides, dilation, elem: str, combine: str):
    def text(names: list[str], types: list[str], out: str) -> str:
        x, init = names
        rank = result.rank
        lines, sizes = [], []
        for d in range(rank):
            if result.is_dynamic_dim(d):   # (n - reach) / stride + 1
                reach = (window[d] - 1) * dilation[d] + 1
                lines += [f"%i{d} = arith.constant {d} : index", f"%n{d} = tensor.dim {x}, %i{d} : {types[0]}",
                          f"%r{d} = arith.constant {reach} : index", f"%s{d} = arith.constant {strides[d]} : index",
                          f"%one{d} = arith.constant 1 : index", f"%m{d} = arith.subi %n{d}, %r{d} : index",
                          f"%q{d} = arith.divsi %m{d}, %s{d} : index", f"%o{d} = arith.addi %q{d}, %one{d} : index"]
                sizes.append(f"%o{d}")
        wt = "tensor<" + "".join(f"{w}x" for w in window) + elem + ">"
        lines += [f"%e = tensor.empty({', '.join(sizes)}) : {out}",
                  f"%v = tensor.extract {init}[] : tensor<{elem}>",
                  f"%f = linalg.fill ins(%v : {elem}) outs(%e : {out}) -> {out}",
                  f"%w = tensor.empty() : {wt}",
                  *window_reduction_lines(rank, strides, dilation, elem, combine, (x, types[0]), wt, out)]
        return "\n".join(lines)
    return text


def window_reduction_lines(rank: int, strides, dilation, elem: str, combine: str | None, source: tuple[str, str],
                           window_type: str, out: str) -> list[str]:
    """The end of a reduce_window's text: the linalg.generic reducing each window of `source` (its
    name and type), read at `strides` and `dilation`, into `%f` (the output filled with the init),
    iterated over the window tensor `%w` of `window_type`, and the function's return. Without an
    arith `combine`, the body is a placeholder for clone_window_body: the reducer's ops go between
    its from_elements and its extract."""
    dims = ", ".join(f"d{k}" for k in range(2 * rank))
    reads = ", ".join(f"d{d} * {strides[d]} + d{rank + d} * {dilation[d]}" for d in range(rank))
    wins = ", ".join(f"d{rank + d}" for d in range(rank))
    outs = ", ".join(f"d{d}" for d in range(rank))
    kinds = ", ".join(['"parallel"'] * rank + ['"reduction"'] * rank)
    name, source_type = source
    return [f"%g = linalg.generic {{indexing_maps = [affine_map<({dims}) -> ({reads})>, affine_map<({dims}) ->"
            f" ({wins})>, affine_map<({dims}) -> ({outs})>], iterator_types = [{kinds}]}} ins({name}, %w :"
            f" {source_type}, {window_type}) outs(%f : {out}) {{",
            f"^bb0(%a: {elem}, %u: {elem}, %acc: {elem}):",
            *([f"  %y = {combine} %acc, %a : {elem}"] if combine else [
                f"  %ta = tensor.from_elements %acc : tensor<{elem}>",   # the reducer's ops go here
                f"  %tb = tensor.from_elements %a : tensor<{elem}>",
                f"  %y = tensor.extract %ta[] : tensor<{elem}>"]),
            f"  linalg.yield %y : {elem}",
            f"}} -> {out}",
            f"return %g : {out}"]


def _pairs(attr: ir.DenseIntElementsAttr, rank: int) -> list[list[int]]:
    flat = [int(v) for v in attr]
    return [flat[2 * d:2 * d + 2] for d in range(rank)]


def _a(values) -> str:
    return f"array<i64: {', '.join(map(str, values))}>" if len(values) else "array<i64>"


def _tt(shape, elem: str) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"


def _region_op(op: ir.Operation, k: int) -> ir.Operation | None:
    """The one computing op of op's region k (its block: that op and a return), or None."""
    ops = list(op.regions[k].blocks[0].operations)
    return ops[0] if len(ops) == 2 else None


def _select_and_scatter(op: ir.Operation) -> None:
    select, scatter = _region_op(op, 0), _region_op(op, 1)
    if select is None or scatter is None or select.name != "stablehlo.compare" or scatter.name != "stablehlo.add":
        return   # left for the linalg check to name
    direction = str(select.attributes["comparison_direction"]).split()[-1].rstrip(">")
    if direction not in ("GE", "GT", "LE", "LT"):
        return
    x_type, s_type = ir.RankedTensorType(op.operands[0].type), ir.RankedTensorType(op.operands[1].type)
    if None in _dims(x_type) or None in _dims(s_type):
        return
    rank, attrs = x_type.rank, op.attributes
    window = list(ir.DenseI64ArrayAttr(attrs["window_dimensions"]))
    strides = list(ir.DenseI64ArrayAttr(attrs["window_strides"])) if "window_strides" in attrs else [1] * rank
    pads = _pairs(ir.DenseIntElementsAttr(attrs["padding"]), rank) if "padding" in attrs else [[0, 0]] * rank
    rule = rewrite_by_text(_select_and_scatter_text(direction in ("GE", "GT"), _dims(x_type), _dims(s_type), window,
                                                    strides, pads, str(x_type.element_type)))
    with ir.InsertionPoint(op), op.location:
        new = rule(op)
    op.results[0].replace_all_uses_with(new)
    op.erase()


def _select_and_scatter_text(first_max: bool, shape, out_shape, window, strides, pads, elem: str):
    def text(names: list[str], types: list[str], out: str) -> str:
        x, source, init = names
        is_float = elem.startswith(("f", "bf"))
        if is_float:
            extreme = (NEG_INF if first_max else POS_INF)[elem]
        else:
            bits = int(elem.lstrip("ui"))
            extreme = -(1 << (bits - 1)) if first_max else (1 << (bits - 1)) - 1
        zero = "0.0" if is_float else "0"
        padded = [n + lo + hi for n, (lo, hi) in zip(shape, pads)]
        tp, ts, tb = _tt(padded, elem), _tt(out_shape, elem), _tt(out_shape, "i1")
        kind = "FLOAT" if is_float else "SIGNED"
        lines = [f"%lo = stablehlo.constant dense<{extreme}> : tensor<{elem}>",
                 f"%z = stablehlo.constant dense<{zero}> : tensor<{elem}>",
                 f"%zs = stablehlo.constant dense<{zero}> : {ts}",
                 f'%p = "stablehlo.pad"({x}, %lo) <{{edge_padding_low = {_a([lo for lo, _ in pads])}, edge_padding_high ='
                 f' {_a([hi for _, hi in pads])}, interior_padding = {_a([0] * len(shape))}}}> : ({types[0]},'
                 f' tensor<{elem}>) -> {tp}']
        offsets = list(np.ndindex(*window))
        for k, off in enumerate(offsets):
            limit = [o + (m - 1) * s + 1 for o, m, s in zip(off, out_shape, strides)]
            lines.append(f'%s{k} = "stablehlo.slice"(%p) <{{start_indices = {_a(off)}, limit_indices = {_a(limit)},'
                         f' strides = {_a(strides)}}}> : ({tp}) -> {ts}')
        best = "%s0"
        for k in range(1, len(offsets)):
            lines.append(f"%b{k} = stablehlo.{'maximum' if first_max else 'minimum'} {best}, %s{k} : {ts}")
            best = f"%b{k}"
        lines.append(f'%total = "stablehlo.broadcast_in_dim"({init}) <{{broadcast_dimensions = array<i64>}}> :'
                     f' (tensor<{elem}>) -> {tp}')
        taken = None
        for k, off in enumerate(offsets):
            lines.append(f"%e{k} = stablehlo.compare EQ, %s{k}, {best}, {kind} : ({ts}, {ts}) -> {tb}")
            hit = f"%e{k}"
            if taken is not None:
                lines.append(f"%n{k} = stablehlo.not {taken} : {tb}")
                lines.append(f"%h{k} = stablehlo.and %e{k}, %n{k} : {tb}")
                lines.append(f"%t{k} = stablehlo.or {taken}, %e{k} : {tb}")
                hit, taken = f"%h{k}", f"%t{k}"
            else:
                taken = hit
            lines.append(f'%c{k} = "stablehlo.select"({hit}, {source}, %zs) : ({tb}, {ts}, {ts}) -> {ts}')
            high = [n - (o + (m - 1) * s + 1) for n, o, m, s in zip(padded, off, out_shape, strides)]
            lines.append(f'%q{k} = "stablehlo.pad"(%c{k}, %z) <{{edge_padding_low = {_a(off)}, edge_padding_high ='
                         f' {_a(high)}, interior_padding = {_a([s - 1 for s in strides])}}}> : ({ts}, tensor<{elem}>)'
                         f' -> {tp}')
            previous = "%total" if k == 0 else f"%total{k - 1}"
            lines.append(f"%total{k} = stablehlo.add {previous}, %q{k} : {tp}")
        last = f"%total{len(offsets) - 1}"
        limit = [lo + n for n, (lo, _) in zip(shape, pads)]
        lines.append(f'%r = "stablehlo.slice"({last}) <{{start_indices = {_a([lo for lo, _ in pads])}, limit_indices ='
                     f' {_a(limit)}, strides = {_a([1] * len(shape))}}}> : ({tp}) -> {out}')
        lines.append(f"return %r : {out}")
        return "\n".join(lines)
    return text


def _reassociation(rank: int) -> ir.ArrayAttr:
    """One group of every dimension: [[0, 1, ..., rank - 1]]."""
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) for d in range(rank)])])


def _dynamic_reshape(op: ir.Operation) -> None:
    result = ir.RankedTensorType(op.results[0].type)
    x, shape = op.operands
    x_type = ir.RankedTensorType(x.type)
    if None not in _dims(result) or x_type.rank == 0 or result.rank == 0:
        return
    dyn = ir.ShapedType.get_dynamic_size()
    with ir.InsertionPoint(op), op.location:
        total = None if None in _dims(x_type) else int(np.prod(_dims(x_type)))
        flat_type = ir.RankedTensorType.get([dyn if total is None else total], x_type.element_type)
        flat = x if x_type.rank == 1 else tensor.CollapseShapeOp(flat_type, x, _reassociation(x_type.rank)).result
        if result.rank == 1:
            new = tensor.CastOp(result, flat).result
        else:
            # the sizes the shape operand gives, for the result's `?` dims
            sizes = [to_index(extract(shape, [index(d)]), "i") for d in range(result.rank) if result.is_dynamic_dim(d)]
            static = [dyn if d is None else d for d in _dims(result)]
            new = tensor.ExpandShapeOp(result, flat, _reassociation(result.rank), sizes, static).result
    op.results[0].replace_all_uses_with(new)
    op.erase()


def _reduce_precision(op: ir.Operation) -> None:
    result = ir.RankedTensorType(op.results[0].type)
    if None not in _dims(result):
        return
    x = op.operands[0]
    scalar = ir.RankedTensorType.get([], result.element_type)
    attrs = {op.attributes[i].name: op.attributes[i].attr for i in range(len(op.attributes))}
    with ir.InsertionPoint(op), op.location:
        sizes = [tensor.DimOp(x, index(d)).result for d in range(result.rank) if result.is_dynamic_dim(d)]
        gen = tensor.GenerateOp(result, sizes)
        block = gen.regions[0].blocks.append(*([ir.IndexType.get()] * result.rank))
        with ir.InsertionPoint(block):
            v = tensor.FromElementsOp(scalar, [tensor.ExtractOp(x, list(block.arguments)).result]).result
            r = ir.Operation.create("stablehlo.reduce_precision", results=[scalar], operands=[v], attributes=attrs).result
            tensor.YieldOp(tensor.ExtractOp(r, []).result)
    op.results[0].replace_all_uses_with(gen.result)
    op.erase()


RULES: dict[str, Callable[[ir.Operation], None]] = {
    "stablehlo.dynamic_reshape": _dynamic_reshape,
    "stablehlo.reduce_precision": _reduce_precision,
    "stablehlo.select_and_scatter": _select_and_scatter,
    "stablehlo.reduce_window": _reduce_window_padding,
    "stablehlo.add": _bool_arith,
    "stablehlo.multiply": _bool_arith,
    "stablehlo.dot_general": _drop_algorithm,
    "stablehlo.get_dimension_size": _get_dimension_size,
    "stablehlo.dynamic_broadcast_in_dim": _dynamic_broadcast_in_dim,
    "stablehlo.dynamic_pad": _dynamic_pad,
}


def apply_fixups(module: ir.Module) -> None:
    found = ops_where(module.operation, lambda op: op.name in RULES)
    with module.context:
        for op in found:
            RULES[op.name](op)


__all__ = ["ARITH_COMBINE", "RULES", "apply_fixups", "clone_window_body"]
