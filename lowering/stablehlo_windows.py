"""JAX's shape-polymorphic windows: `stablehlo.custom_call @stablehlo.dynamic_reduce_window`, which
jax.export writes for a reduce_window whose window sizes or padding depend on a symbolic size (a
cumulative op along the symbolic axis: a window of `b` padded by `b - 1`; SAME padding of `b`;
the transposes of pooling in a gradient), its operands computed at run time.

Lowered here, before the custom calls are checked (stablehlo_input.prepare), as the static
reduce_window is by stablehlo_fixups: the operand base-dilated (a stablehlo.pad with interior
padding, when the base dilations are not 1), padded by the init value at run time (a
tensor.generate reading the operand where the padded index falls inside it: padding of either
sign, as StableHLO's), then a linalg.generic over (output, window) positions whose window sizes may
be run-time values; the reducer function's body is cloned into it (one arith op where it is one).
The strides and dilations must be constants (they scale the generic's affine maps); JAX computes
only sizes and padding from the symbolic dims. A window the rewrite cannot take is left for
stablehlo_input's custom-call check to name.
"""
from __future__ import annotations

import numpy as np
from torch_mlir import ir

from sprue.lowering.mlir_util import ops_where
from sprue.lowering.stablehlo_chlo import NEG_INF, POS_INF, rewrite_by_text
from sprue.lowering.stablehlo_fixups import ARITH_COMBINE, clone_window_body, window_reduction_lines

TARGET = "stablehlo.dynamic_reduce_window"


def _target(op: ir.Operation) -> str | None:
    if op.name != "stablehlo.custom_call" or "call_target_name" not in op.attributes:
        return None
    return ir.StringAttr(op.attributes["call_target_name"]).value


def known_ints(v: ir.Value) -> list[int] | None:
    """The values of a small integer tensor computed from constants (JAX builds the window's vectors
    by reshapes and concatenations of rank-0 and rank-1 constants), or None where any is a run-time value."""
    owner = v.owner
    if not isinstance(owner, ir.OpView):
        return None
    op = owner.operation
    if op.name in ("stablehlo.constant", "arith.constant"):
        attr = ir.DenseIntElementsAttr(op.attributes["value"])
        t = ir.RankedTensorType(v.type)
        count = int(np.prod([t.get_dim_size(d) for d in range(t.rank)])) if t.rank else 1
        values = [int(x) for x in attr]
        return values * count if len(values) == 1 and count != 1 else values
    if op.name in ("stablehlo.reshape", "stablehlo.convert"):
        return known_ints(op.operands[0])
    if op.name == "stablehlo.concatenate" and ir.RankedTensorType(v.type).rank == 1:
        parts = [known_ints(x) for x in op.operands]
        return None if any(p is None for p in parts) else [x for p in parts for x in p]
    return None


def _per_dim(v: ir.Value, rank: int) -> list[int | None]:
    """Each entry of a rank-vector: its value where it is a constant, else None."""
    known = known_ints(v)
    if known is not None:
        return known
    owner = v.owner
    if isinstance(owner, ir.OpView) and owner.operation.name == "stablehlo.concatenate":
        parts = [known_ints(x) for x in owner.operation.operands]
        sizes = [ir.RankedTensorType(x.type).get_dim_size(0) for x in owner.operation.operands]
        return [x for p, n in zip(parts, sizes) for x in (p if p is not None else [None] * n)]
    return [None] * rank


def _reducer(op: ir.Operation) -> ir.Operation | None:
    """The func.func named by the custom call's called_computations."""
    if "called_computations" not in op.attributes:
        return None
    callees = ir.ArrayAttr(op.attributes["called_computations"])
    if len(callees) != 1:
        return None
    name = ir.FlatSymbolRefAttr(callees[0]).value
    module = op
    while module.parent is not None and module.name != "builtin.module":
        module = module.parent
    for f in module.regions[0].blocks[0].operations:
        if f.operation.name == "func.func" and ir.StringAttr(f.operation.attributes["sym_name"]).value == name:
            return f.operation
    return None


def lower_dynamic_windows(module: ir.Module) -> None:
    rules = {"stablehlo.dynamic_pad": lower_dynamic_pad, "stablehlo.select_and_scatter": lower_select_and_scatter,
             "stablehlo.reduce_window": lower_variadic_reduce_window, "stablehlo.custom_call": _dynamic_reduce_window}
    for op in ops_where(module.operation, lambda op: op.name in rules and (op.name != "stablehlo.custom_call"
                                                                           or _target(op) == TARGET)):
        rules[op.name](op)


def _dynamic_reduce_window(op: ir.Operation) -> None:
    if len(op.operands) != 7 or len(op.results) != 1:
        return   # several operands: left for the custom-call check to name
    reducer = _reducer(op)
    result = ir.RankedTensorType(op.results[0].type)
    rank = result.rank
    strides, base, dilation = (known_ints(op.operands[k]) for k in (3, 4, 5))
    if reducer is None or strides is None or base is None or dilation is None or \
            any(s < 1 for s in [*strides, *base, *dilation]):
        return
    window = _per_dim(op.operands[2], rank)
    body = reducer.regions[0].blocks[0]
    ops = list(body.operations)
    elem = str(result.element_type)
    combine = ARITH_COMBINE.get((ops[0].name, "f" if elem.startswith(("f", "bf")) else "i")) if len(ops) == 2 else None
    rule = rewrite_by_text(_text(result, window, strides, base, dilation, elem, combine))
    with ir.InsertionPoint(op), op.location:
        new = rule(op)
        if combine is None:
            clone_window_body(body, new.owner)
    op.results[0].replace_all_uses_with(new)
    op.erase()


def _tensor(shape, elem: str) -> str:
    return "tensor<" + "".join(f"{'?' if d is None else d}x" for d in shape) + elem + ">"


def padded_lines(x: str, x_type: str, rank: int, elem: str, value: str) -> list[str]:
    """`%xp`: x padded by `value`, %lo<d> and %hi<d> (either sign) on the edges of each dim d and
    %it<d> between its elements, all run-time indices (StableHLO's pad), as a tensor.generate that
    reads x where the padded index falls on one of its elements; %p<d> its sizes (needs %c0, %c1)."""
    lines = []
    for d in range(rank):
        lines += [f"%n{d} = tensor.dim {x}, %c{d} : {x_type}",
                  f"%step{d} = arith.addi %it{d}, %c1 : index",
                  f"%nm{d} = arith.subi %n{d}, %c1 : index",
                  f"%gaps{d} = arith.maxsi %nm{d}, %c0 : index",
                  f"%inner{d} = arith.muli %gaps{d}, %it{d} : index",
                  f"%p{d}_a = arith.addi %n{d}, %inner{d} : index",
                  f"%p{d}_b = arith.addi %p{d}_a, %lo{d} : index",
                  f"%p{d} = arith.addi %p{d}_b, %hi{d} : index"]
    lines.append(f"%xp = tensor.generate {', '.join(f'%p{d}' for d in range(rank))} {{")
    lines.append(f"^bb0({', '.join(f'%i{d}: index' for d in range(rank))}):")
    inside = []
    for d in range(rank):   # t = i - lo falls on element t / step when t >= 0, t % step == 0, t / step < n
        lines += [f"  %qt{d} = arith.subi %i{d}, %lo{d} : index",
                  f"  %qge{d} = arith.cmpi sge, %qt{d}, %c0 : index",
                  f"  %qtc{d} = arith.select %qge{d}, %qt{d}, %c0 : index",
                  f"  %qs{d} = arith.divsi %qtc{d}, %step{d} : index",
                  f"  %qr{d} = arith.remsi %qtc{d}, %step{d} : index",
                  f"  %qon{d} = arith.cmpi eq, %qr{d}, %c0 : index",
                  f"  %qlt{d} = arith.cmpi slt, %qs{d}, %n{d} : index",
                  f"  %qin{d}_ = arith.andi %qge{d}, %qon{d} : i1",
                  f"  %qin{d} = arith.andi %qin{d}_, %qlt{d} : i1",
                  f"  %qk{d} = arith.select %qin{d}, %qs{d}, %c0 : index"]
        inside.append(f"%qin{d}")
    acc = inside[0] if inside else None
    for d in range(1, rank):
        lines.append(f"  %qall{d} = arith.andi {acc}, {inside[d]} : i1")
        acc = f"%qall{d}"
    read = f"  %qx_ = tensor.extract {x}[{', '.join(f'%qk{d}' for d in range(rank))}] : {x_type}"
    if acc is None:
        lines += [read, f"  tensor.yield %qx_ : {elem}"]
    else:
        lines += [read, f"  %qy_ = arith.select {acc}, %qx_, {value} : {elem}", f"  tensor.yield %qy_ : {elem}"]
    lines.append(f"}} : {_tensor([None] * rank, elem)}")
    return lines


def lower_dynamic_pad(op: ir.Operation) -> None:
    """A stablehlo.dynamic_pad whose padding is computed at run time (JAX's transpose of a strided or
    padded window in a shape-polymorphic gradient); one of constants is stablehlo_fixups'."""
    x, value, *pads = op.operands
    if all(known_ints(p) is not None for p in pads):
        return
    result = ir.RankedTensorType(op.results[0].type)
    elem = str(result.element_type)

    def text(names: list[str], types: list[str], out: str) -> str:
        rank = result.rank
        ints = types[2].rsplit("x", 1)[-1].rstrip(">")
        lines = [f"%c{d} = arith.constant {d} : index" for d in range(max(rank, 2))]
        lines.append(f"%v = tensor.extract {names[1]}[] : tensor<{elem}>")
        for d in range(rank):
            for key, k in (("lo", 2), ("hi", 3), ("it", 4)):
                lines += [f"%{key}{d}_ = tensor.extract {names[k]}[%c{d}] : {types[k]}",
                          f"%{key}{d} = arith.index_cast %{key}{d}_ : {ints} to index"]
        lines += padded_lines(names[0], types[0], rank, elem, "%v")
        padded = _tensor([None] * rank, elem)
        lines += ([f"%out = tensor.cast %xp : {padded} to {out}", f"return %out : {out}"] if padded != out
                  else [f"return %xp : {out}"])
        return "\n".join(lines)
    with ir.InsertionPoint(op), op.location:
        new = rewrite_by_text(text)(op)
    op.results[0].replace_all_uses_with(new)
    op.erase()


def _text(result: ir.RankedTensorType, window, strides, base, dilation, elem: str, combine: str | None):
    rank = result.rank

    def text(names: list[str], types: list[str], out: str) -> str:
        x, init, win, pad = names[0], names[1], names[2], names[6]
        x_type = ir.RankedTensorType(ir.Type.parse(types[0]))
        ints = types[2].rsplit("x", 1)[-1].rstrip(">")
        lines = [f"%c{d} = arith.constant {d} : index" for d in range(max(rank, 2))]
        lines.append(f"%v = tensor.extract {init}[] : tensor<{elem}>")
        for d in range(rank):   # the run-time padding, either sign
            lines += [f"%lo{d}_ = tensor.extract {pad}[%c{d}, %c0] : {types[6]}",
                      f"%hi{d}_ = tensor.extract {pad}[%c{d}, %c1] : {types[6]}",
                      f"%lo{d} = arith.index_cast %lo{d}_ : {ints} to index",
                      f"%hi{d} = arith.index_cast %hi{d}_ : {ints} to index",
                      f"%it{d} = arith.constant {base[d] - 1} : index"]
        lines += padded_lines(x, types[0], x_type.rank, elem, "%v")
        padded = _tensor([None] * rank, elem)
        win_sizes, out_sizes = [], []
        for d in range(rank):   # the window's sizes, its reach, the output's run-time sizes
            if window[d] is None:
                lines += [f"%w{d}_ = tensor.extract {win}[%c{d}] : {types[2]}",
                          f"%w{d} = arith.index_cast %w{d}_ : {ints} to index"]
                win_sizes.append(f"%w{d}")
            else:
                lines.append(f"%w{d} = arith.constant {window[d]} : index")
            if result.is_dynamic_dim(d):   # max((padded - reach) floordiv stride + 1, 0)
                lines += [f"%dl{d} = arith.constant {dilation[d]} : index",
                          f"%st{d} = arith.constant {strides[d]} : index",
                          f"%wm{d} = arith.subi %w{d}, %c1 : index",
                          f"%rm{d} = arith.muli %wm{d}, %dl{d} : index",
                          f"%r{d} = arith.addi %rm{d}, %c1 : index",
                          f"%m{d} = arith.subi %p{d}, %r{d} : index",
                          f"%q{d} = arith.floordivsi %m{d}, %st{d} : index",
                          f"%o{d}_ = arith.addi %q{d}, %c1 : index",
                          f"%o{d} = arith.maxsi %o{d}_, %c0 : index"]
                out_sizes.append(f"%o{d}")
        wt = _tensor(window, elem)
        lines += [f"%e = tensor.empty({', '.join(out_sizes)}) : {out}",
                  f"%f = linalg.fill ins(%v : {elem}) outs(%e : {out}) -> {out}",
                  f"%w = tensor.empty({', '.join(win_sizes)}) : {wt}",
                  *window_reduction_lines(rank, strides, dilation, elem, combine, ("%xp", padded), wt, out)]
        return "\n".join(lines)
    return text




# -- select_and_scatter with run-time sizes (max or min pooling's gradient in a shape-polymorphic export)
_PICK = {("GE", "f"): "arith.cmpf oge", ("GT", "f"): "arith.cmpf ogt", ("LE", "f"): "arith.cmpf ole",
         ("LT", "f"): "arith.cmpf olt", ("GE", "i"): "arith.cmpi sge", ("GT", "i"): "arith.cmpi sgt",
         ("LE", "i"): "arith.cmpi sle", ("LT", "i"): "arith.cmpi slt"}


def _only_op(region: ir.Region) -> ir.Operation | None:
    ops = list(region.blocks[0].operations)
    return ops[0] if len(ops) == 2 else None


def lower_select_and_scatter(op: ir.Operation) -> None:
    """XLA's select_and_scatter where a size is known only at run time (the static one is unrolled by
    stablehlo_fixups): per window of the operand (padded by the value that never wins), the offset
    its select keeps (a compare: the current choice stays while compare(current, next) holds, so GE
    keeps the first maximum, GT the last), then per operand element the sum of the source values of
    the windows that chose it, added to the init value. Two tensor.generate, the window unrolled."""
    x_type, s_type = ir.RankedTensorType(op.operands[0].type), ir.RankedTensorType(op.operands[1].type)
    if x_type.has_static_shape and s_type.has_static_shape:
        return
    select, scatter = _only_op(op.regions[0]), _only_op(op.regions[1])
    if select is None or scatter is None or select.name != "stablehlo.compare" or scatter.name != "stablehlo.add":
        return
    direction = str(select.attributes["comparison_direction"]).split()[-1].rstrip(">")
    elem = str(x_type.element_type)
    kind = "f" if elem.startswith(("f", "bf")) else "i"
    if (direction, kind) not in _PICK or (kind == "f" and elem not in POS_INF):
        return
    rank, attrs = x_type.rank, op.attributes
    window = list(ir.DenseI64ArrayAttr(attrs["window_dimensions"]))
    strides = list(ir.DenseI64ArrayAttr(attrs["window_strides"])) if "window_strides" in attrs else [1] * rank
    flat = [int(v) for v in ir.DenseIntElementsAttr(attrs["padding"])] if "padding" in attrs else [0] * (2 * rank)
    low = flat[0::2]
    if kind == "f":
        extreme = (NEG_INF if direction in ("GE", "GT") else POS_INF)[elem]
    else:
        bits = int(elem.lstrip("ui"))
        extreme = -(1 << (bits - 1)) if direction in ("GE", "GT") else (1 << (bits - 1)) - 1
    rule = rewrite_by_text(_select_and_scatter_text(rank, window, strides, low, elem, kind, _PICK[direction, kind],
                                                    extreme))
    with ir.InsertionPoint(op), op.location:
        new = rule(op)
    op.results[0].replace_all_uses_with(new)
    op.erase()


def _all_of(lines: list[str], conds: list[str], name: str) -> str:
    """The i1 value that is every one of `conds` (SSA names), anded one by one into `%name_d`;
    appends the lines."""
    ok = conds[0]
    for d in range(1, len(conds)):
        lines.append(f"  %{name}_{d} = arith.andi {ok}, {conds[d]} : i1")
        ok = f"%{name}_{d}"
    return ok


def _select_and_scatter_text(rank, window, strides, low, elem, kind, pick, extreme):
    offsets = list(np.ndindex(*window))

    def text(names: list[str], types: list[str], out: str) -> str:
        x, source, init = names
        idx = ", ".join(f"%i{d}: index" for d in range(rank))
        zero = "0.0" if kind == "f" else "0"
        add = "arith.addf" if kind == "f" else "arith.addi"
        lines = [f"%c{d} = arith.constant {d} : index" for d in range(max(rank, 2))]
        lines += [f"%ext_t = stablehlo.constant dense<{extreme}> : tensor<{elem}>",
                  f"%ext = tensor.extract %ext_t[] : tensor<{elem}>",
                  f"%zero = arith.constant {zero} : {elem}",
                  f"%v = tensor.extract {init}[] : tensor<{elem}>"]
        for d in range(rank):
            lines += [f"%n{d} = tensor.dim {x}, %c{d} : {types[0]}", f"%m{d} = tensor.dim {source}, %c{d} : {types[1]}"]
        # the offset each window keeps
        k_type = "tensor<" + "".join("?x" for _ in range(rank)) + "i32>"
        lines += [f"%choice = tensor.generate {', '.join(f'%m{d}' for d in range(rank))} {{", f"^bb0({idx}):"]
        for j, off in enumerate(offsets):
            inside = []
            for d in range(rank):   # padded position o * stride + offset; the operand's, minus the low padding
                lines += [f"  %s{j}_{d} = arith.constant {strides[d]} : index",
                          f"  %o{j}_{d} = arith.constant {off[d] - low[d]} : index",
                          f"  %ps{j}_{d} = arith.muli %i{d}, %s{j}_{d} : index",
                          f"  %q{j}_{d} = arith.addi %ps{j}_{d}, %o{j}_{d} : index",
                          f"  %ge{j}_{d} = arith.cmpi sge, %q{j}_{d}, %c0 : index",
                          f"  %lt{j}_{d} = arith.cmpi slt, %q{j}_{d}, %n{d} : index",
                          f"  %in{j}_{d} = arith.andi %ge{j}_{d}, %lt{j}_{d} : i1",
                          f"  %k{j}_{d} = arith.select %in{j}_{d}, %q{j}_{d}, %c0 : index"]
                inside.append(f"%in{j}_{d}")
            ok = _all_of(lines, inside, f"ok{j}")
            lines += [f"  %r{j} = tensor.extract {x}[{', '.join(f'%k{j}_{d}' for d in range(rank))}] : {types[0]}",
                      f"  %val{j} = arith.select {ok}, %r{j}, %ext : {elem}",
                      f"  %at{j} = arith.constant {j} : i32"]
            if j == 0:
                lines.append("  %best0 = arith.constant 0 : i32")
                lines.append(f"  %bv0 = arith.select {ok}, %r0, %ext : {elem}")
                continue
            lines += [f"  %keep{j} = {pick}, %bv{j - 1}, %val{j} : {elem}",
                      f"  %bv{j} = arith.select %keep{j}, %bv{j - 1}, %val{j} : {elem}",
                      f"  %best{j} = arith.select %keep{j}, %best{j - 1}, %at{j} : i32"]
        lines += [f"  tensor.yield %best{len(offsets) - 1} : i32", f"}} : {k_type}"]
        # per operand element: the source values of the windows that chose it
        lines += [f"%g = tensor.generate {', '.join(f'%n{d}' for d in range(rank) if ir.RankedTensorType(ir.Type.parse(out)).is_dynamic_dim(d))} {{",
                  f"^bb0({idx}):"]
        acc = "%v"
        for j, off in enumerate(offsets):
            conds = []
            for d in range(rank):   # the window o with o * stride + offset = i + low
                lines += [f"  %S{j}_{d} = arith.constant {strides[d]} : index",
                          f"  %O{j}_{d} = arith.constant {low[d] - off[d]} : index",
                          f"  %t{j}_{d} = arith.addi %i{d}, %O{j}_{d} : index",
                          f"  %tg{j}_{d} = arith.cmpi sge, %t{j}_{d}, %c0 : index",
                          f"  %tc{j}_{d} = arith.select %tg{j}_{d}, %t{j}_{d}, %c0 : index",
                          f"  %w{j}_{d} = arith.divsi %tc{j}_{d}, %S{j}_{d} : index",
                          f"  %wr{j}_{d} = arith.remsi %tc{j}_{d}, %S{j}_{d} : index",
                          f"  %we{j}_{d} = arith.cmpi eq, %wr{j}_{d}, %c0 : index",
                          f"  %wl{j}_{d} = arith.cmpi slt, %w{j}_{d}, %m{d} : index",
                          f"  %wa{j}_{d} = arith.andi %tg{j}_{d}, %we{j}_{d} : i1",
                          f"  %wv{j}_{d} = arith.andi %wa{j}_{d}, %wl{j}_{d} : i1",
                          f"  %wk{j}_{d} = arith.select %wv{j}_{d}, %w{j}_{d}, %c0 : index"]
                conds.append(f"%wv{j}_{d}")
            ok = _all_of(lines, conds, f"wok{j}")
            at = ", ".join(f"%wk{j}_{d}" for d in range(rank))
            lines += [f"  %ch{j} = tensor.extract %choice[{at}] : {k_type}",
                      f"  %J{j} = arith.constant {j} : i32",
                      f"  %chosen{j} = arith.cmpi eq, %ch{j}, %J{j} : i32",
                      f"  %hit{j} = arith.andi {ok}, %chosen{j} : i1",
                      f"  %src{j} = tensor.extract {source}[{at}] : {types[1]}",
                      f"  %add{j} = arith.select %hit{j}, %src{j}, %zero : {elem}",
                      f"  %acc{j} = {add} {acc}, %add{j} : {elem}"]
            acc = f"%acc{j}"
        lines += [f"  tensor.yield {acc} : {elem}", f"}} : {out}", f"return %g : {out}"]
        return "\n".join(lines)
    return text


# -- reduce_window of several operands with run-time sizes (max pooling's jvp: values and tangents) ----
def lower_variadic_reduce_window(op: ir.Operation) -> None:
    """A reduce_window of n > 1 operands (unpadded, no base dilation) whose result has run-time sizes:
    one linalg.generic of n inputs and n accumulators over (output, window) positions, the body's
    ops cloned in on rank-0 tensors (stablehlo_fixups lowers the one-operand kind; the upstream
    pass, static sizes)."""
    n = len(op.operands) // 2
    result = ir.RankedTensorType(op.results[0].type)
    if n < 2 or all(ir.RankedTensorType(r.type).has_static_shape for r in op.results):
        return
    attrs, rank = op.attributes, result.rank
    padding = [int(v) for v in ir.DenseIntElementsAttr(attrs["padding"])] if "padding" in attrs else [0]
    base = list(ir.DenseI64ArrayAttr(attrs["base_dilations"])) if "base_dilations" in attrs else [1]
    if any(padding) or any(b != 1 for b in base):
        return
    window = list(ir.DenseI64ArrayAttr(attrs["window_dimensions"]))
    strides = list(ir.DenseI64ArrayAttr(attrs["window_strides"])) if "window_strides" in attrs else [1] * rank
    dilation = list(ir.DenseI64ArrayAttr(attrs["window_dilations"])) if "window_dilations" in attrs else [1] * rank
    elems = [str(ir.RankedTensorType(r.type).element_type) for r in op.results]
    rule = rewrite_by_text(_variadic_text(n, rank, window, strides, dilation, elems), multiple=True)
    with ir.InsertionPoint(op), op.location:
        new = rule(op)
        _clone_variadic_body(op.regions[0].blocks[0], new[0].owner, n)
    for old, value in zip(op.results, new):
        old.replace_all_uses_with(value)
    op.erase()


def _variadic_text(n, rank, window, strides, dilation, elems):
    def text(names: list[str], types: list[str], outs: list[str]) -> str:
        out_type = ir.RankedTensorType(ir.Type.parse(outs[0]))
        lines = [f"%c{d} = arith.constant {d} : index" for d in range(max(rank, 2))]
        sizes = []
        for d in range(rank):
            if out_type.is_dynamic_dim(d):   # (size - reach) floordiv stride + 1
                reach = (window[d] - 1) * dilation[d] + 1
                lines += [f"%n{d} = tensor.dim {names[0]}, %c{d} : {types[0]}",
                          f"%r{d} = arith.constant {reach} : index", f"%s{d} = arith.constant {strides[d]} : index",
                          f"%m{d} = arith.subi %n{d}, %r{d} : index", f"%q{d} = arith.floordivsi %m{d}, %s{d} : index",
                          f"%o{d} = arith.addi %q{d}, %c1 : index"]
                sizes.append(f"%o{d}")
        for i in range(n):
            lines += [f"%v{i} = tensor.extract {names[n + i]}[] : tensor<{elems[i]}>",
                      f"%e{i} = tensor.empty({', '.join(sizes)}) : {outs[i]}",
                      f"%f{i} = linalg.fill ins(%v{i} : {elems[i]}) outs(%e{i} : {outs[i]}) -> {outs[i]}"]
        wt = _tensor(window, elems[0])
        dims = ", ".join(f"d{k}" for k in range(2 * rank))
        reads = ", ".join(f"d{d} * {strides[d]} + d{rank + d} * {dilation[d]}" for d in range(rank))
        read_map = f"affine_map<({dims}) -> ({reads})>"
        win_map = f"affine_map<({dims}) -> ({', '.join(f'd{rank + d}' for d in range(rank))})>"
        out_map = f"affine_map<({dims}) -> ({', '.join(f'd{d}' for d in range(rank))})>"
        kinds = ", ".join(['"parallel"'] * rank + ['"reduction"'] * rank)
        maps = ", ".join([read_map] * n + [win_map] + [out_map] * n)
        block = ", ".join([f"%el{i}: {elems[i]}" for i in range(n)] + [f"%u: {elems[0]}"]
                          + [f"%acc{i}: {elems[i]}" for i in range(n)])
        lines += [f"%w = tensor.empty() : {wt}",
                  f"%g:{n} = linalg.generic {{indexing_maps = [{maps}], iterator_types = [{kinds}]}}"
                  f" ins({', '.join(names[:n])}, %w : {', '.join(types[:n])}, {wt})"
                  f" outs({', '.join(f'%f{i}' for i in range(n))} : {', '.join(outs)}) {{",
                  f"^bb0({block}):",
                  *[f"  %ta{i} = tensor.from_elements %acc{i} : tensor<{elems[i]}>" for i in range(n)],
                  *[f"  %tb{i} = tensor.from_elements %el{i} : tensor<{elems[i]}>" for i in range(n)],
                  *[f"  %y{i} = tensor.extract %ta{i}[] : tensor<{elems[i]}>" for i in range(n)],   # placeholders
                  f"  linalg.yield {', '.join(f'%y{i}' for i in range(n))} : {', '.join(elems)}",
                  f"}} -> ({', '.join(outs)})",
                  f"return {', '.join(f'%g#{i}' for i in range(n))} : {', '.join(outs)}"]
        return "\n".join(lines)
    return text


def _clone_variadic_body(body: ir.Block, generic: ir.Operation, n: int) -> None:
    """The reduce_window's body (n accumulators, then n elements, as rank-0 tensors) cloned into the
    generic before its n placeholder extracts, which then read what the body returns."""
    ops = list(generic.regions[0].blocks[0].operations)
    made, placeholders = ops[:2 * n], ops[2 * n:3 * n]
    mapped = [(body.arguments[k], made[k].result) for k in range(2 * n)]

    def lookup(v: ir.Value) -> ir.Value:
        return next((new for old, new in mapped if old == v), v)
    body_ops = list(body.operations)
    for original in body_ops[:-1]:
        clone = original.clone(ir.InsertionPoint(placeholders[0]))
        for i in range(len(clone.operands)):
            clone.operands[i] = lookup(clone.operands[i])
        mapped += list(zip(original.results, clone.results))
    for i, p in enumerate(placeholders):
        p.operands[0] = lookup(body_ops[-1].operands[i])


__all__ = ["TARGET", "known_ints", "lower_dynamic_pad", "lower_dynamic_windows", "lower_select_and_scatter",
           "lower_variadic_reduce_window", "padded_lines"]
