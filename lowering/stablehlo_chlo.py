"""CHLO ops in foreign StableHLO input: from pretty text to generic form, then to StableHLO/math.

JAX emits a few `chlo.*` ops (erf, sinh, tan on older versions, is_inf, top_k, ...), but the
CHLO dialect is not registered in this torch-mlir build, so their custom (pretty) syntax does not
parse at all. Two steps make the common ones compile:

  to_generic_form(text)   rewrites each pretty `chlo.op` line to MLIR's generic form
                          (`"chlo.erf"(%x) : (T) -> T`), which parses as an unregistered op;
  lower_chlo(module)      replaces the unregistered ops we know by StableHLO ops or by
                          tensor.generate over a `math` op; any other one is an UnsupportedError
                          naming the op and its location.
"""

from __future__ import annotations

import re
from typing import Callable

from torch_mlir import ir
from torch_mlir.dialects import arith, func, math, tensor

from sprue.base.errors import UnsupportedError
from sprue.lowering.mlir_util import ops_where
from sprue.lowering.rules_special import CHLO_BINARY, CHLO_UNARY


class UnsupportedStableHLOOpError(UnsupportedError):
    """A StableHLO input uses an op sprue cannot compile; names the op and its location."""

    def __init__(self, op: str, where: str, why: str = "is not supported"):
        self.op = op
        self.where = where
        super().__init__(f"{op} at {where} {why}")


# `%r = chlo.name %a, %b {attrs} : types loc(...)` (one op per line, as MLIR prints it). The head
# (results, name, operands) is a regex; the tail (attrs, types, loc) is split by _split_tail in
# linear time: a regex with `.*` groups around `\s+loc\(` backtracks quadratically on a long line.
_PRETTY_CHLO_HEAD = re.compile(
    r"(?P<indent>[ \t]*)(?P<res>%[\w#:]+(?:[ \t]*,[ \t]*%[\w#:]+)*[ \t]*=[ \t]*)?chlo\.(?P<name>\w+)\s+"
    r"(?P<operands>%[\w#.]+(?:\s*,\s*%[\w#.]+)*)\s*")
_LOC = re.compile(r"\s+loc\(")
# a chlo op's name, not a symbol (`@chlo.asin.impl`, a composite's decomposition) or a quoted name
# (`stablehlo.composite "chlo.asin"`, or an op already in generic form)
_ANY_CHLO = re.compile(r"(?<![@\"\w.])chlo\.(\w+)")


def _split_tail(tail: str) -> tuple[str, str, str] | None:
    r"""(attrs, types, loc) of what follows a pretty chlo op's operands: `{attrs} : types loc(...)`
    (attrs and loc optional; the same split as the regex `(\{.*\})?\s*:\s*(.*?)(\s+loc\(.*\))?\s*$`)."""
    attrs = ""
    if tail.startswith("{"):
        # the last `}` that a `:` follows (a greedy `\{.*\}`): one backward scan
        k, after = len(tail) - 1, ""
        while k >= 0 and not (tail[k] == "}" and after == ":"):
            if not tail[k].isspace():
                after = tail[k]
            k -= 1
        if k < 0:
            return None
        attrs, tail = tail[:k + 1], tail[k + 1:]
    tail = tail.lstrip()
    if not tail.startswith(":"):
        return None
    rest = tail[1:].lstrip().rstrip()
    m = _LOC.search(rest)
    if m is not None and rest.endswith(")"):
        return attrs, rest[:m.start()], rest[m.start():]
    return attrs, rest, ""


def _function_type(types: str, n_operands: int) -> str | None:
    """The generic form's `(operand types) -> result types` from the pretty form's types."""
    types = types.strip()
    if types.startswith("("):
        return types if "->" in types else None
    if "->" in types:
        operand, result = (t.strip() for t in types.split("->", 1))
        listed = _top_level_split(operand)
        operands = listed if len(listed) == n_operands else [operand] * n_operands   # `T, T -> T` or `T -> T`
        return f"({', '.join(operands)}) -> {result}"
    # One type for every operand and the result (the SameOperandsAndResultType form).
    return f"({', '.join([types] * n_operands)}) -> {types}"


def _top_level_split(types: str) -> list[str]:
    """`tensor<4x5xf32>, tensor<4x5xf32>` -> its types (commas inside <...> do not split)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(types):
        depth += ch in "<([{"
        depth -= ch in ">)]}"
        if ch == "," and depth == 0:
            out.append(types[start:i].strip())
            start = i + 1
    return out + [types[start:].strip()]


# `%values, %indices = chlo.top_k(%x, k = 3) : T -> (T1, T2)`: its own syntax
_TOP_K = re.compile(r"(?P<indent>[ \t]*)(?P<res>%[\w#]+[ \t]*,[ \t]*%[\w#]+)[ \t]*=[ \t]*chlo\.top_k\((?P<x>%[\w#.]+),"
                    r"[ \t]*k[ \t]*=[ \t]*(?P<k>\d+)\)[ \t]*:[ \t]*(?P<in>tensor<[^>]*>)[ \t]*->[ \t]*(?P<out>\([^)]*\))"
                    r"(?P<loc>.*)$")


def to_generic_form(text: str) -> str:
    """Rewrites pretty-printed chlo ops to the generic form; raises UnsupportedStableHLOOpError
    for a chlo op whose syntax we do not recognise (e.g. chlo.top_k's `k = 3`)."""
    if "chlo." not in text:
        return text
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        found = _ANY_CHLO.search(line)
        if found is None:
            continue    # no chlo op, or only in generic form
        top_k = _TOP_K.match(line) if found.group(1) == "top_k" else None
        if top_k is not None:
            lines[number - 1] = (f"{top_k['indent']}{top_k['res']} = \"chlo.top_k\"({top_k['x']}) {{k = {top_k['k']} : i64}}"
                                 f" : ({top_k['in']}) -> {top_k['out']}{top_k['loc']}")
            continue
        m = _PRETTY_CHLO_HEAD.match(line)
        tail = _split_tail(line[m.end():]) if m else None
        operands = [o.strip() for o in m.group("operands").split(",")] if m else []
        ftype = _function_type(tail[1], len(operands)) if tail else None
        if ftype is None:
            raise UnsupportedStableHLOOpError(f"chlo.{found.group(1)}", f"line {number}",
                                              "is not supported (the CHLO dialect is not available)")
        attrs, _, loc = tail
        lines[number - 1] = (f"{m.group('indent')}{m.group('res') or ''}\"chlo.{m.group('name')}\""
                             f"({', '.join(operands)}) {attrs} : {ftype}{loc}")
    return "\n".join(lines)


# -- lowering the generic ops ---------------------------------------------------------------------
def _elementwise(op: ir.Operation, scalar: Callable[[ir.Value], ir.Value]) -> ir.Value:
    """tensor.generate of op's result type applying `scalar` to each element of its operand."""
    x = op.operands[0]
    result = ir.RankedTensorType(op.results[0].type)
    with ir.InsertionPoint(op), op.location:
        sizes = [tensor.DimOp(x, _index(d)).result for d in range(result.rank) if result.is_dynamic_dim(d)]
        gen = tensor.GenerateOp(result, sizes)
        block = gen.regions[0].blocks.append(*([ir.IndexType.get()] * result.rank))
        with ir.InsertionPoint(block):
            tensor.YieldOp(scalar(tensor.ExtractOp(x, list(block.arguments)).result))
    return gen.result


def _index(v: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), v).result


def _math(name: str) -> Callable[[ir.Operation], ir.Value]:
    """An elementwise float op computed by math.<name> (lowered to libm later)."""
    op_class = getattr(math, name.capitalize() + "Op")

    def rule(op: ir.Operation) -> ir.Value:
        if not isinstance(ir.RankedTensorType(op.operands[0].type).element_type, ir.FloatType):
            raise UnsupportedStableHLOOpError(op.name, str(op.location), "on a non-float tensor is not supported")
        return _elementwise(op, lambda v: op_class(v).result)
    return rule


def rewrite_by_text(text_of: Callable, multiple: bool = False) -> Callable[[ir.Operation], ir.Value | list[ir.Value]]:
    """A rewrite given as generic-form StableHLO text (operands %a0.., types), parsed in a scratch
    function and moved before the op: the simplest way to build ops the Python bindings lack. With
    `multiple`, text_of is given every result type and the rule gives every result."""
    def rule(op: ir.Operation) -> ir.Value | list[ir.Value]:
        in_types = [str(v.type) for v in op.operands]
        names = [f"%a{i}" for i in range(len(in_types))]
        out_types = [str(r.type) for r in op.results]
        args = ", ".join(f"{n}: {t}" for n, t in zip(names, in_types))
        body = text_of(names, in_types, out_types if multiple else out_types[0])
        scratch = ir.Module.parse(f"func.func @f({args}) -> ({', '.join(out_types)}) {{\n{body}\n}}", op.context)
        block = scratch.body.operations[0].regions[0].blocks[0]
        for arg, value in zip(block.arguments, op.operands):
            arg.replace_all_uses_with(value)
        new_ops = list(block.operations)
        results = list(new_ops[-1].operands)
        for o in new_ops[:-1]:
            o.move_before(op)
        return results if multiple else results[0]
    return rule


def _elem(t: str) -> str:
    """The element type in a tensor type's text: tensor<2x3xf32> -> f32, tensor<f32> -> f32."""
    return t.rsplit("x", 1)[-1].rstrip(">") if "x" in t else t[len("tensor<"):-1]


# The bit patterns of +inf and -inf per float type, as StableHLO's dense<0x...> literals read them.
POS_INF = {"f64": "0x7FF0000000000000", "f32": "0x7F800000", "f16": "0x7C00", "bf16": "0x7F80"}
NEG_INF = {"f64": "0xFFF0000000000000", "f32": "0xFF800000", "f16": "0xFC00", "bf16": "0xFF80"}


def _is_inf(sign: str) -> Callable[[list[str], list[str], str], str]:
    """x == +inf, x == -inf, or |x| == inf (sign "abs")."""
    def text(names: list[str], types: list[str], out: str) -> str:
        t, operand, elem = types[0], names[0], _elem(types[0])
        lines = []
        if sign == "abs":
            lines.append(f"%m = stablehlo.abs {operand} : {t}")
            operand = "%m"
        inf = (NEG_INF if sign == "-" else POS_INF)[elem]
        lines.append(f"%s = stablehlo.constant dense<{inf}> : tensor<{elem}>")
        lines.append(f"%b = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<{elem}>) -> {t}")
        lines.append(f"%r = stablehlo.compare EQ, {operand}, %b : ({t}, {t}) -> {out}")
        lines.append(f"return %r : {out}")
        return "\n".join(lines)
    return text


def _binary(stablehlo_name: str) -> Callable[[list[str], list[str], str], str]:
    def text(names: list[str], types: list[str], out: str) -> str:
        if len(set(types)) != 1 or types[0] != out:
            raise UnsupportedStableHLOOpError(f"chlo.broadcast_{stablehlo_name}", "input",
                                              "with broadcasting operands is not supported")
        return (f"%r = stablehlo.{stablehlo_name} {names[0]}, {names[1]} : {out}\n"
                f"return %r : {out}")
    return text


def _builder(build: Callable[..., ir.Value]) -> Callable[[ir.Operation], ir.Value]:
    """A rule from one of sprue's own lowering builders (Values -> Value, rules_special)."""
    def rule(op: ir.Operation) -> ir.Value:
        if not isinstance(ir.RankedTensorType(op.operands[0].type).element_type, ir.FloatType):
            raise UnsupportedStableHLOOpError(op.name, str(op.location), "on a non-float tensor is not supported")
        with ir.InsertionPoint(op), op.location:
            return build(*op.operands)
    return rule


def _top_k(names: list[str], types: list[str], outs: list[str]) -> str:
    """The k largest along the last axis, in descending order, and their indices: a stable sort of
    (x, iota) by x descending (NaN above every number, as XLA's TopK), then the first k. Sizes may be
    `?` (a shape-polymorphic export): the iota and the slices read them at run time."""
    t = ir.RankedTensorType(ir.Type.parse(types[0]))
    rank, elem = t.rank, _elem(types[0])
    k = ir.RankedTensorType(ir.Type.parse(outs[0])).get_dim_size(rank - 1)
    it = "tensor<" + "".join("?x" if t.is_dynamic_dim(d) else f"{t.get_dim_size(d)}x" for d in range(rank)) + "i32>"
    lines = []
    sizes = []
    for d in range(rank):
        lines += [f"%c{d} = arith.constant {d} : index", f"%n{d} = tensor.dim {names[0]}, %c{d} : {types[0]}",
                  f"%m{d} = arith.index_cast %n{d} : index to i32"]
        sizes.append(f"%n{d}" if t.is_dynamic_dim(d) else str(t.get_dim_size(d)))
    lines += [f"%shape = tensor.from_elements {', '.join(f'%m{d}' for d in range(rank))} : tensor<{rank}xi32>",
              f'%i = "stablehlo.dynamic_iota"(%shape) <{{iota_dimension = {rank - 1} : i64}}> : (tensor<{rank}xi32>) -> {it}',
              f'%s:2 = "stablehlo.sort"({names[0]}, %i) <{{dimension = {rank - 1} : i64, is_stable = true}}> ({{',
              f"^bb0(%x: tensor<{elem}>, %y: tensor<{elem}>, %p: tensor<i32>, %q: tensor<i32>):",
              f"  %c = stablehlo.compare GT, %x, %y, TOTALORDER : (tensor<{elem}>, tensor<{elem}>) -> tensor<i1>",
              "  stablehlo.return %c : tensor<i1>",
              f"}}) : ({types[0]}, {it}) -> ({types[0]}, {it})"]
    offsets, strides = ", ".join(["0"] * rank), ", ".join(["1"] * rank)
    kept = ", ".join(sizes[:-1] + [str(k)])
    lines += [f"%v = tensor.extract_slice %s#0[{offsets}] [{kept}] [{strides}] : {types[0]} to {outs[0]}",
              f"%j = tensor.extract_slice %s#1[{offsets}] [{kept}] [{strides}] : {it} to {outs[1]}",
              f"return %v, %j : {outs[0]}, {outs[1]}"]
    return "\n".join(lines)


RULES: dict[str, Callable[[ir.Operation], ir.Value]] = {
    **{name: _builder(b) for name, b in {**CHLO_UNARY, **CHLO_BINARY}.items()},
    "chlo.top_k": rewrite_by_text(_top_k, multiple=True),
    **{f"chlo.{n}": _math(n) for n in ("acos", "acosh", "asin", "asinh", "atan", "atanh", "cosh", "sinh", "tan",
                                         "erf", "erfc")},
    "chlo.is_inf": rewrite_by_text(_is_inf("abs")),
    "chlo.is_pos_inf": rewrite_by_text(_is_inf("+")),
    "chlo.is_neg_inf": rewrite_by_text(_is_inf("-")),
    "chlo.square": rewrite_by_text(lambda n, t, o: f"%r = stablehlo.multiply {n[0]}, {n[0]} : {o}\nreturn %r : {o}"),
    **{f"chlo.broadcast_{n}": rewrite_by_text(_binary(n)) for n in (
        "add", "subtract", "multiply", "divide", "maximum", "minimum", "remainder", "power", "atan2", "and",
        "or", "xor", "shift_left", "shift_right_arithmetic", "shift_right_logical")},
}


def call_decompositions(module: ir.Module) -> None:
    """Every stablehlo.composite (JAX >= 0.7 wraps chlo ops in them in jax.export artifacts:
    `stablehlo.composite "chlo.asin" %x {decomposition = @chlo.asin.impl}`) becomes a call of its
    decomposition, which inline_calls then inlines: the StableHLO spec defines a composite's meaning
    as its decomposition's."""
    with module.context:
        for op in ops_where(module.operation, lambda op: op.name == "stablehlo.composite"):
            callee = ir.FlatSymbolRefAttr(op.attributes["decomposition"])
            with ir.InsertionPoint(op), op.location:
                call = func.CallOp([r.type for r in op.results], callee, list(op.operands))
            for old, new in zip(op.results, call.results):
                old.replace_all_uses_with(new)
            op.erase()


def mhlo_target(op: ir.Operation) -> str | None:
    """The chlo op an older JAX's export spells as `stablehlo.custom_call @mhlo.erf(...)` (JAX 0.4,
    0.7: chlo ops that StableHLO's portable artifacts could not hold then), or None."""
    if op.name != "stablehlo.custom_call" or "call_target_name" not in op.attributes:
        return None
    target = ir.StringAttr(op.attributes["call_target_name"]).value
    if not target.startswith("mhlo."):
        return None
    name = "chlo." + {"topk": "top_k"}.get(target[5:], target[5:])
    expected = (1, 2) if name == "chlo.top_k" else (2, 1) if name in CHLO_BINARY else (1, 1)
    return name if name in RULES and (len(op.operands), len(op.results)) == expected else None


def lower_chlo(module: ir.Module) -> None:
    """Replaces every known chlo op by StableHLO/tensor/math ops; any other op outside the
    registered dialects raises UnsupportedStableHLOOpError naming it and its location."""
    found = ops_where(module.operation, lambda op: op.name.split(".", 1)[0] in ("chlo", "sdy", "mhlo")
                      or not op.context.is_registered_operation(op.name) or mhlo_target(op) is not None)
    with module.context:
        for op in found:
            rule = RULES.get(mhlo_target(op) or op.name)
            if rule is None:
                raise UnsupportedStableHLOOpError(op.name, str(op.location))
            new = rule(op)
            for old, value in zip(op.results, new if isinstance(new, list) else [new]):
                old.replace_all_uses_with(value)
            op.erase()


__all__ = ["NEG_INF", "POS_INF", "RULES", "UnsupportedStableHLOOpError", "call_decompositions", "lower_chlo",
           "mhlo_target", "rewrite_by_text", "to_generic_form"]
