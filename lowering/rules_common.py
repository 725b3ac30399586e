"""What every lowering rule shares: the rule table, the lowering context, and small builders.

A rule turns one jaxpr equation into StableHLO ops:

    lowering_rules[p](ctx, eqn, *operands) -> [one ir.Value per eqn.outvars]

It reads `eqn.params` and the avals of `eqn.invars`/`eqn.outvars`, and builds at the current
insertion point and location (`lower_jaxpr` sets both). The builders below each emit one
stablehlo op through `ir.Operation.create` (torch-mlir has no Python stablehlo op classes) and
compute its result type, so rules stay a few lines long.

Types: float64/32/16 are f64/f32/f16, bool is i1, signed integers are signless iN and unsigned
integers are uiN, so that stablehlo's compare/divide/convert/max pick unsigned arithmetic by
themselves (stablehlo-convert-to-signless erases the distinction after legalization).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo

from ..core import Eqn, Primitive, ShapedArray
from ..errors import UnsupportedError, at

Value = ir.Value


@dataclass
class LoweringContext:
    """Per-module state shared by the rules of one lowering."""
    module: ir.Module


Rule = Callable[..., list[Value]]

# The lowering of each primitive, keyed by the Primitive object (see sprue.core).
lowering_rules: dict[Primitive, Rule] = {}


def unsupported(eqn: Eqn, why: str) -> UnsupportedError:
    return UnsupportedError(f"{eqn.primitive.name}: {why}{at(eqn.source_info)}")


# -- types --------------------------------------------------------------------------------------
def element_type(dtype) -> ir.Type:
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return ir.IntegerType.get_signless(1)
    if dt.kind == "f":
        return {8: ir.F64Type, 4: ir.F32Type, 2: ir.F16Type}[dt.itemsize].get()
    if dt.kind == "i":
        return ir.IntegerType.get_signless(8 * dt.itemsize)
    if dt.kind == "u":
        return ir.IntegerType.get_unsigned(8 * dt.itemsize)
    raise UnsupportedError(f"element type {dt} has no StableHLO lowering")


def tensor_type(shape: Sequence[int], dtype) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(list(shape), element_type(dtype))


def aval_type(aval: ShapedArray) -> ir.RankedTensorType:
    return tensor_type(aval.shape, aval.dtype)


def dtype_of(v: Value) -> np.dtype:
    """The numpy dtype of a tensor value's elements (inverse of `element_type`)."""
    t = ir.RankedTensorType(v.type).element_type
    if isinstance(t, ir.IntegerType):
        if t.width == 1:
            return np.dtype(np.bool_)
        return np.dtype(f"{'u' if t.is_unsigned else 'i'}{t.width // 8}")
    return np.dtype(f"f{ir.FloatType(t).width // 8}")


def shape_of(v: Value) -> tuple[int, ...]:
    return tuple(ir.RankedTensorType(v.type).shape)


def with_dtype(v: Value, dtype) -> ir.RankedTensorType:
    """v's tensor type with another element type."""
    return tensor_type(shape_of(v), dtype)


def is_float(v: Value) -> bool:
    return dtype_of(v).kind == "f"


def is_bool(v: Value) -> bool:
    return dtype_of(v) == np.bool_


def is_unsigned(v: Value) -> bool:
    return dtype_of(v).kind == "u"


# -- attributes ---------------------------------------------------------------------------------
def i64s(xs: Sequence[int]) -> ir.Attribute:
    return ir.DenseI64ArrayAttr.get([int(x) for x in xs])


def i64(x: int) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(x))


def boolean(x: bool) -> ir.Attribute:
    return ir.BoolAttr.get(bool(x))


# -- ops ----------------------------------------------------------------------------------------
def op(name: str, operands: Sequence[Value], results: Sequence[ir.Type],
       attrs: dict | None = None, regions: int = 0) -> ir.Operation:
    return ir.Operation.create(name, results=list(results), operands=list(operands),
                               attributes=attrs or {}, regions=regions)


def op1(name: str, operands: Sequence[Value], result: ir.Type, attrs: dict | None = None) -> Value:
    return op(name, operands, [result], attrs).result


def ew(name: str, *xs: Value) -> Value:
    """An elementwise stablehlo op whose result has its first operand's type."""
    return op1(f"stablehlo.{name}", xs, xs[0].type)


def constant(value, dtype, shape: Sequence[int] = ()) -> Value:
    """A splat constant: `value` (a Python/numpy scalar) as `dtype` in every element."""
    with np.errstate(over="ignore"):  # e.g. 2**31 as float16 is inf, which callers expect
        one = np.array([value]).astype(dtype)
    attr = ir.DenseElementsAttr.get(one, type=tensor_type(shape, dtype))
    return op1("stablehlo.constant", [], attr.type, {"value": attr})


def constant_like(value, x: Value) -> Value:
    return constant(value, dtype_of(x), shape_of(x))


def const_array(arr: np.ndarray) -> Value:
    """A constant holding a numpy array bit for bit."""
    arr = np.array(arr, order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
    ty = tensor_type(arr.shape, arr.dtype)
    # The binding reads one-element buffers as splats and needs a 1-d buffer for them.
    attr = ir.DenseElementsAttr.get(arr.reshape(-1) if arr.size == 1 else arr, type=ty)
    return op1("stablehlo.constant", [], ty, {"value": attr})


def compare_type(dtype) -> str:
    dt = np.dtype(dtype)
    return "FLOAT" if dt.kind == "f" else "SIGNED" if dt.kind == "i" else "UNSIGNED"


def compare(a: Value, b: Value, direction: str) -> Value:
    """a <direction> b elementwise (EQ NE LT LE GT GE); float compares are IEEE (NaN unordered)."""
    attrs = {"comparison_direction": _stablehlo.ComparisonDirectionAttr.get(direction),
             "compare_type": _stablehlo.ComparisonTypeAttr.get(compare_type(dtype_of(a)))}
    return op1("stablehlo.compare", [a, b], with_dtype(a, np.bool_), attrs)


def select(pred: Value, on_true: Value, on_false: Value) -> Value:
    return op1("stablehlo.select", [pred, on_true, on_false], on_true.type)


def convert(x: Value, dtype) -> Value:
    if dtype_of(x) == np.dtype(dtype):
        return x
    return op1("stablehlo.convert", [x], with_dtype(x, dtype))


def logical_not(p: Value) -> Value:
    return ew("not", p)


def logical_and(*ps: Value) -> Value:
    out = ps[0]
    for p in ps[1:]:
        out = ew("and", out, p)
    return out


def logical_or(*ps: Value) -> Value:
    out = ps[0]
    for p in ps[1:]:
        out = ew("or", out, p)
    return out


def is_nan(x: Value) -> Value:
    return compare(x, x, "NE")


def broadcast_in_dim(x: Value, shape: Sequence[int], dims: Sequence[int]) -> Value:
    return op1("stablehlo.broadcast_in_dim", [x], with_dtype_shape(x, shape),
               {"broadcast_dimensions": i64s(dims)})


def broadcast_to(x: Value, shape: Sequence[int]) -> Value:
    """A rank-0 value broadcast to `shape` (other values are returned as they are)."""
    if shape_of(x) == tuple(shape):
        return x
    assert not shape_of(x), f"only rank-0 values broadcast implicitly, got {x.type}"
    return broadcast_in_dim(x, shape, [])


def with_dtype_shape(x: Value, shape: Sequence[int]) -> ir.RankedTensorType:
    return tensor_type(shape, dtype_of(x))


def reshape(x: Value, shape: Sequence[int]) -> Value:
    if shape_of(x) == tuple(shape):
        return x
    return op1("stablehlo.reshape", [x], with_dtype_shape(x, shape))


def slice_(x: Value, starts: Sequence[int], limits: Sequence[int], strides: Sequence[int] | None = None
           ) -> Value:
    strides = strides or [1] * len(starts)
    shape = [(hi - lo + st - 1) // st for lo, hi, st in zip(starts, limits, strides)]
    return op1("stablehlo.slice", [x], with_dtype_shape(x, shape),
               {"start_indices": i64s(starts), "limit_indices": i64s(limits), "strides": i64s(strides)})


def scalar_type(dtype) -> ir.RankedTensorType:
    return tensor_type((), dtype)


def build_region(operation: ir.Operation, arg_types: Sequence[ir.Type],
                 body: Callable[[list[Value]], Sequence[Value]], index: int = 0) -> None:
    """Fills region `index` of `operation` with one block computing `body(block_args)`."""
    block = operation.regions[index].blocks.append(*arg_types)
    with ir.InsertionPoint(block):
        op("stablehlo.return", list(body(list(block.arguments))), [])


def reduce(operands: Sequence[Value], inits: Sequence[Value], axes: Sequence[int],
           body: Callable[[list[Value]], Sequence[Value]]) -> list[Value]:
    """stablehlo.reduce over `axes`; body(lhs..., rhs...) on rank-0 tensors combines two partials."""
    axes = sorted(axes)
    shape = [d for i, d in enumerate(shape_of(operands[0])) if i not in axes]
    results = [with_dtype_shape(x, shape) for x in operands]
    reduce_op = op("stablehlo.reduce", [*operands, *inits], results, {"dimensions": i64s(axes)}, regions=1)
    scalars = [scalar_type(dtype_of(x)) for x in operands]
    build_region(reduce_op, scalars + scalars, body)
    return list(reduce_op.results)


def int_min(dtype):
    dt = np.dtype(dtype)
    return False if dt == np.bool_ else np.iinfo(dt).min


def int_max(dtype):
    dt = np.dtype(dtype)
    return True if dt == np.bool_ else np.iinfo(dt).max


def lowest(dtype):
    """The identity of max: -inf for floats, the smallest integer, False."""
    return -np.inf if np.dtype(dtype).kind == "f" else int_min(dtype)


def highest(dtype):
    """The identity of min: +inf for floats, the largest integer, True."""
    return np.inf if np.dtype(dtype).kind == "f" else int_max(dtype)


def to_i64_index(x: Value) -> Value:
    """An integer index tensor as i64 (u64 values above INT64_MAX saturate, staying out of bounds)."""
    if dtype_of(x) == np.uint64:
        x = ew("minimum", x, constant_like(np.iinfo(np.int64).max, x))
    return convert(x, np.int64)
