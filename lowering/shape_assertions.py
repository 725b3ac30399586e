"""JAX's shape assertions, taken out of a StableHLO module and checked when the function is called.

A module that `jax.export` made with symbolic shapes (`jax.export.symbolic_shape("b, 4")`) checks
the sizes it is given in its main function: `stablehlo.custom_call @shape_assertion(%ok, %v0, ...)`
with an `error_message` whose `{0}`, `{1}`, ... are the values v0, v1, ... Each operand is a small
computation over the arguments' sizes (`stablehlo.get_dimension_size`, integer arithmetic,
comparisons; JAX's shape_poly.py builds them). take() records each as an expression over the
arguments' shapes and removes the custom call; the caller checks them in Python before it calls
the library (driver.StableHLOFunction), raising the message JAX would, with the values filled in.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from torch_mlir import ir

from sprue.base.errors import RuntimeCheckError
from sprue.lowering.stablehlo_chlo import UnsupportedStableHLOOpError

# An expression: ("dim", argument index, axis) | ("const", int) | (stablehlo op name, attribute, *operands)
Expr = tuple

_BINARY = {
    "stablehlo.add": lambda a, b: a + b, "stablehlo.subtract": lambda a, b: a - b,
    "stablehlo.multiply": lambda a, b: a * b, "stablehlo.maximum": max, "stablehlo.minimum": min,
    "stablehlo.divide": lambda a, b: 0 if b == 0 else _trunc_div(a, b),
    "stablehlo.remainder": lambda a, b: 0 if b == 0 else a - b * _trunc_div(a, b),
    "stablehlo.and": lambda a, b: a & b, "stablehlo.or": lambda a, b: a | b,
}
_COMPARE = {"EQ": lambda a, b: a == b, "NE": lambda a, b: a != b, "LT": lambda a, b: a < b,
            "LE": lambda a, b: a <= b, "GT": lambda a, b: a > b, "GE": lambda a, b: a >= b}
# ops that pass a scalar through (a type change or a shape of one element)
_PASS = {"stablehlo.convert", "stablehlo.reshape", "stablehlo.broadcast_in_dim"}


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


@dataclass(frozen=True)
class ShapeAssertion:
    ok: Expr
    values: tuple[Expr, ...]
    message: str

    def check(self, shapes: Sequence[tuple[int, ...]], name: str) -> None:
        """Raises RuntimeCheckError with the assertion's message when the shapes fail it."""
        if not evaluate(self.ok, shapes):
            values = [evaluate(v, shapes) for v in self.values]
            try:
                message = self.message.format(*values)
            except (IndexError, KeyError, ValueError):
                message = f"{self.message} (values: {values})"
            raise RuntimeCheckError(f"{name}(): {message}")


    def c_check(self, arg_names: Sequence[str]) -> tuple[str, str]:
        """(a C condition that holds when the assertion fails, its message) for the header's wrapper
        (runtime/header.py), over the descriptors `<arg>->sizes[k]`; each `{k}` of the message
        names the size expression it stands for."""
        message = self.message
        for k, v in enumerate(self.values):
            message = message.replace("{" + str(k) + "}", to_c(v, arg_names).replace("->", "."))
        return f"!({to_c(self.ok, arg_names)})", message


_C_BINARY = {"stablehlo.add": "+", "stablehlo.subtract": "-", "stablehlo.multiply": "*", "stablehlo.and": "&",
             "stablehlo.or": "|"}
_C_COMPARE = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


def to_c(e: Expr, arg_names: Sequence[str]) -> str:
    """e as a C expression of int64_t over the arguments' descriptors (C's / and % truncate, as
    stablehlo's divide and remainder do; a zero divisor gives 0, as evaluate does)."""
    kind = e[0]
    if kind == "dim":
        return f"{arg_names[e[1]]}->sizes[{e[2]}]"
    if kind == "const":
        return f"(int64_t){e[1]}"
    a = [to_c(x, arg_names) for x in e[2:]]
    if kind == "stablehlo.compare":
        return f"({a[0]} {_C_COMPARE[e[1]]} {a[1]})"
    if kind in _C_BINARY:
        return f"({a[0]} {_C_BINARY[kind]} {a[1]})"
    if kind in ("stablehlo.divide", "stablehlo.remainder"):
        op = "/" if kind == "stablehlo.divide" else "%"
        return f"({a[1]} == 0 ? 0 : {a[0]} {op} {a[1]})"
    if kind in ("stablehlo.maximum", "stablehlo.minimum"):
        return f"sprue_{'max' if kind == 'stablehlo.maximum' else 'min'}({a[0]}, {a[1]})"
    if kind == "stablehlo.not":
        return f"(!{a[0]})" if e[1] == "i1" else f"(~{a[0]})"
    if kind == "stablehlo.negate":
        return f"(-{a[0]})"
    if kind == "stablehlo.sign":
        return f"(({a[0]} > 0) - ({a[0]} < 0))"
    if kind == "stablehlo.abs":
        return f"({a[0]} < 0 ? -{a[0]} : {a[0]})"
    if kind == "stablehlo.select":
        return f"({a[0]} ? {a[1]} : {a[2]})"
    return a[0]   # _PASS: a scalar passed through


def evaluate(e: Expr, shapes: Sequence[tuple[int, ...]]) -> int:
    kind = e[0]
    if kind == "dim":
        return int(shapes[e[1]][e[2]])
    if kind == "const":
        return e[1]
    args = [evaluate(x, shapes) for x in e[2:]]
    if kind == "stablehlo.compare":
        return int(_COMPARE[e[1]](*args))
    if kind == "stablehlo.not":
        return int(not args[0]) if e[1] == "i1" else ~args[0]
    if kind == "stablehlo.negate":
        return -args[0]
    if kind == "stablehlo.sign":
        return (args[0] > 0) - (args[0] < 0)
    if kind == "stablehlo.abs":
        return abs(args[0])
    if kind == "stablehlo.select":
        return args[1] if args[0] else args[2]
    if kind in _PASS:
        return args[0]
    return int(_BINARY[kind](*args))


class _Scope:
    """Where an operand's computation is read: the entry function, or a function it calls (whose
    parameters stand for the call's operands: JAX outlines `divmod` and `floor_divide`)."""

    def __init__(self, entry: ir.Operation, where: str, params=None, parent=None):
        self.entry, self.where, self.params, self.parent = entry, where, params or [], parent

    def bound(self, value: ir.Value) -> Expr | None:
        for param, expr in self.params:
            if param == value:
                return expr
        return None


def _expr(value: ir.Value, scope: _Scope) -> Expr:
    """The computation of a scalar value from the entry's arguments' sizes, as an Expr."""
    if isinstance(value.owner, ir.Block):
        bound = scope.bound(value)
        if bound is not None:
            return bound
        raise UnsupportedStableHLOOpError("stablehlo.custom_call @shape_assertion", scope.where,
                                          "depends on an argument's values, not only on its shape")
    op = value.owner
    name = op.name
    if name == "stablehlo.get_dimension_size":
        arg = op.operands[0]
        outer = scope
        while outer.parent is not None and outer.bound(arg) is None:
            outer = outer.parent
        if outer.bound(arg) is not None:   # a function's parameter: the call's operand
            raise UnsupportedStableHLOOpError(name, str(op.location), "of a called function's parameter, in a"
                                                                     " shape assertion,")
        if not (isinstance(arg.owner, ir.Block) and arg.owner.owner == scope.entry):
            raise UnsupportedStableHLOOpError(name, str(op.location), "of a value that is not an argument, in a shape"
                                                                     " assertion,")
        return ("dim", ir.BlockArgument(arg).arg_number, ir.IntegerAttr(op.attributes["dimension"]).value)
    if name == "stablehlo.constant":
        data = np.array(ir.DenseElementsAttr(op.attributes["value"]))
        return ("const", int(data.reshape(-1)[0]))
    if name == "func.call":
        return _call(op, value, scope)
    if name == "stablehlo.compare":
        direction = str(op.attributes["comparison_direction"]).split()[-1].rstrip(">")
        return (name, direction, *(_expr(v, scope) for v in op.operands))
    if name in _BINARY or name in _PASS or name in ("stablehlo.not", "stablehlo.negate", "stablehlo.select", "stablehlo.sign",
                                                   "stablehlo.abs"):
        elem = str(ir.RankedTensorType(op.results[0].type).element_type)
        return (name, elem, *(_expr(v, scope) for v in op.operands))
    raise UnsupportedStableHLOOpError(name, str(op.location), "in the computation of a shape assertion is not"
                                                              " supported")


def _call(op: ir.Operation, value: ir.Value, scope: _Scope) -> Expr:
    """A result of `func.call @f(...)`: f's returned value, its parameters standing for the operands."""
    callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
    module = scope.entry.parent
    while module is not None and module.name != "builtin.module":
        module = module.parent
    func = ir.SymbolTable(module)[callee] if module is not None else None
    if func is None:
        raise UnsupportedStableHLOOpError("func.call", str(op.location), f"of @{callee}, which the module does not"
                                                                        f" define,")
    block = func.regions[0].blocks[0]
    args = [(block.arguments[i], _expr(v, scope)) for i, v in enumerate(op.operands)]
    returned = list(block.operations)[-1].operands[list(op.results).index(value)]
    return _expr(returned, _Scope(scope.entry, scope.where, args, scope))


def take(entry: ir.Operation) -> list[ShapeAssertion]:
    """The entry function's shape assertions, removed from it (the ops computing their operands
    stay; the pipeline drops those left unused)."""
    found = []
    for op in list(entry.regions[0].blocks[0].operations):
        op = op.operation
        if op.name != "stablehlo.custom_call":
            continue
        if ir.StringAttr(op.attributes["call_target_name"]).value != "shape_assertion":
            continue
        scope = _Scope(entry, str(op.location))
        operands = [_expr(v, scope) for v in op.operands]
        message = ir.StringAttr(op.attributes["error_message"]).value
        found.append(ShapeAssertion(operands[0], tuple(operands[1:]), message))
        op.erase()
    return found


__all__ = ["ShapeAssertion", "evaluate", "take", "to_c"]
