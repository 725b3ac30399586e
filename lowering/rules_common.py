"""What every lowering rule shares: the rule table, the lowering context, and small builders.

A rule turns one jaxpr equation into StableHLO ops:

    lowering_rules[p](ctx, eqn, *operands) -> [one ir.Value per eqn.outvars]

It reads `eqn.params` and the avals of `eqn.invars`/`eqn.outvars`, and builds at the current
insertion point and location (stablehlo.lower and emit.lower_eqn set them). The builders below
each emit one stablehlo op through `ir.Operation.create` (torch-mlir has no Python stablehlo op
classes) and compute its result type, so rules stay a few lines long.

Types: float64/32/16 are f64/f32/f16, bool is i1, signed integers are signless iN and unsigned
integers are uiN, so that stablehlo's compare/divide/convert/max pick unsigned arithmetic by
themselves (stablehlo-convert-to-signless erases the distinction after legalization).

Dynamic shapes: a dim that is not an int (a DimExpr of the jaxpr) is `?` in the tensor type. A
*size* (`Size`) is an int or its run-time value as a `tensor<i64>`; `ctx.size(dim)` evaluates a
DimExpr from the values binding its dimension variables (`DimScope`), and `dims_of(x)` reads a
tensor's own sizes. The builders below take shapes of Sizes and pick the dynamic stablehlo op
(dynamic_broadcast_in_dim, dynamic_iota, dynamic_reshape, ...) when a size is not static.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence, Union

import numpy as np
from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo
from torch_mlir.dialects import arith, tensor

from sprue.base.errors import UnsupportedError, at
from sprue.ir.core import Eqn, Primitive, ShapedArray
from sprue.ir.shapes import DimExpr, DimVar

Value = ir.Value
# A size: static (an int) or known at run time (its value, a tensor<i64>).
Size = Union[int, Value]
DYNAMIC = -(2 ** 63)  # ir.ShapedType.get_dynamic_size(): `?` in a shape


class DimScope:
    """The run-time values of dimension variables in one jaxpr being lowered (and the DimExprs
    evaluated from them). A nested jaxpr (a region) gets a child scope: its binders shadow the
    enclosing ones (a loop carry's size changes per trip), while values of enclosing scopes stay
    usable, since stablehlo regions see the values defined above them."""

    def __init__(self, parent: "DimScope | None" = None):
        self.parent = parent
        self.bound: dict[DimVar, Value] = {}
        self.evaluated: dict[DimExpr, Value] = {}

    def var(self, dv: DimVar) -> Value | None:
        scope = self
        while scope is not None:
            if dv in scope.bound:
                return scope.bound[dv]
            scope = scope.parent
        return None

    def cached(self, e: DimExpr) -> Value | None:
        """An evaluation of e made in this scope, or in an enclosing one that binds all of e's
        variables the same way."""
        names = e.dim_vars()
        scope = self
        while scope is not None:
            if e in scope.evaluated:
                return scope.evaluated[e]
            if names & scope.bound.keys():
                return None  # shadowed here: enclosing evaluations used other values
            scope = scope.parent
        return None


@dataclass
class LoweringContext:
    """Per-module state shared by the rules of one lowering.

    - `scope`: the values of the dimension variables of the jaxpr being lowered (see DimScope).
    - `status`: when the function has checks, the current check status (a tensor<i64>: 0, or the
      1-based code of the first failed check); None where no check may run. Checks update it;
      a rule lowering a region that contains checks threads it through the region
      (emit.lower_region_body).
    - `check_messages`: the message of each check code, in code order."""
    module: ir.Module
    scope: DimScope = field(default_factory=DimScope)
    status: Value | None = None
    check_messages: list[str] = field(default_factory=list)
    callees: dict = field(default_factory=dict)   # id(callee ClosedJaxpr) -> its private func's name

    # -- dimensions -----------------------------------------------------------------------------
    def bind_dim(self, dv: DimVar, value: Value) -> None:
        self.scope.bound[dv] = nonnegative(convert(value, np.int64))

    @contextlib.contextmanager
    def nested_scope(self) -> Iterator[DimScope]:
        """A child dimension scope for ops built inside a region."""
        outer = self.scope
        self.scope = DimScope(outer)
        try:
            yield self.scope
        finally:
            self.scope = outer

    def size(self, d) -> Size:
        """A dim as a Size: an int stays an int; a DimExpr is evaluated to a tensor<i64>."""
        if isinstance(d, (int, np.integer)) and not isinstance(d, bool):
            return int(d)
        if isinstance(d, DimVar):
            d = DimExpr.var(d)
        if not isinstance(d, DimExpr):
            return d  # already a run-time size
        known = self.scope.cached(d)
        if known is None:
            known = self.scope.evaluated[d] = _evaluate(self, d)
        return self.guarded(known)

    def guarded(self, size: Value) -> Value:
        """A run-time size used after a check: 0 once a check has failed. A failed check lets the
        program run on (nothing branches), so the sizes it guarded (a negative size, one too big
        for memory, an overflowing product) must not reach an allocation or a loop."""
        if self.status is None or is_dim_read(size):
            return size
        ok = compare(self.status, constant(0, np.int64), "EQ")
        return select(ok, size, constant(0, np.int64))

    def sizes(self, shape: Sequence) -> list[Size]:
        return [self.size(d) for d in shape]

    def param_sizes(self, dims: Sequence, trailing: Sequence[Value]) -> list[Size]:
        """A dynamic-dims param (`shape=(None, 3)`, see sprue.ir.core.dynamic_dim_params) as Sizes: each None
        is the next trailing operand (the run-time size), an int stays an int."""
        it = iter(trailing)
        return [self.guarded(nonnegative(convert(next(it), np.int64))) if d is None else self.size(d) for d in dims]

    def shape_tensor(self, shape: Sequence) -> Value:
        return shape_tensor(self.sizes(shape))

    def dim_var(self, dv: DimVar) -> Value:
        v = self.scope.var(dv)
        if v is None:
            raise UnsupportedError(f"internal: the dimension {dv!r} has no binding variable in the jaxpr being"
                                   f" lowered (an i64[] invar, equation output or const with `dim` set)")
        return v

    # -- checks ---------------------------------------------------------------------------------
    def add_check(self, message: str) -> int:
        """Registers a check's message; returns its code (1-based)."""
        self.check_messages.append(message)
        return len(self.check_messages)


def is_dim_read(size: Value) -> bool:
    """Whether `size` is an array's size read with dims_of (tensor.dim): never negative, and the
    size of a buffer that exists, so no clamp or check guard applies to it. Left bare, every size
    derived from it folds back to that tensor.dim, which canonicalization and CSE make one value:
    the ops on arrays of that size then have sizes later rewrites can see are equal."""
    owner = size.owner
    if isinstance(owner, ir.Block) or owner.name != "tensor.from_elements":
        return False
    cast = owner.operands[0].owner
    if isinstance(cast, ir.Block) or cast.name != "arith.index_cast":
        return False
    read = cast.operands[0].owner
    return not isinstance(read, ir.Block) and read.name == "tensor.dim"


def nonnegative(size: Value) -> Value:
    """max(size, 0). Every run-time size goes through it (binders, size operands, evaluated
    DimExprs): a valid program never makes a negative size, and after a failed check (which lets
    the program run on) a negative one must not reach an allocation."""
    if is_dim_read(size):
        return size
    return ew("maximum", size, constant(0, np.int64))


def _evaluate(ctx: LoweringContext, e: DimExpr) -> Value:
    """The polynomial e as i64 ops on the values of its dimension variables, at least 0."""
    total = None
    for mono, coef in e.terms:
        term = None
        for atom, power in mono:
            v = ctx.dim_var(atom) if isinstance(atom, DimVar) else _div_atom(ctx, atom)
            for _ in range(power):
                term = v if term is None else ew("multiply", term, v)
        if term is None:
            term = constant(coef, np.int64)
        elif coef != 1:
            term = ew("multiply", term, constant(coef, np.int64))
        total = term if total is None else ew("add", total, term)
    if len(e.terms) == 1 and e.terms[0][1] > 0 and all(isinstance(a, DimVar) for a, _ in e.terms[0][0]):
        return total  # a positive multiple of a product of (clamped) variables is never negative
    return nonnegative(total)


def _div_atom(ctx: LoweringContext, atom) -> Value:
    """floordiv(e, c) or mod(e, c) for c > 0, with Python's flooring (stablehlo divides toward 0).
    (A canonical atom's e has non-negative coefficients, so its clamped evaluation is exact.)"""
    a = size_value(ctx.size(atom.expr))
    c = constant(atom.c, np.int64)
    r = ew("remainder", a, c)
    r = select(compare(r, constant(0, np.int64), "LT"), ew("add", r, c), r)
    if atom.op == "mod":
        return r
    return ew("divide", ew("subtract", a, r), c)


Rule = Callable[..., list[Value]]

# The lowering of each primitive, keyed by the Primitive object (see sprue.ir.core).
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
    if dt.kind == "c":
        return ir.ComplexType.get(element_type(np.dtype(f"f{dt.itemsize // 2}")))
    raise UnsupportedError(f"element type {dt} has no StableHLO lowering")


def static_or_dynamic(d) -> int:
    """A dim as MLIR writes it: the int, or DYNAMIC for a DimExpr, a run-time Size or None."""
    return int(d) if isinstance(d, (int, np.integer)) and not isinstance(d, bool) else DYNAMIC


def tensor_type(shape: Sequence, dtype) -> ir.RankedTensorType:
    return ir.RankedTensorType.get([static_or_dynamic(d) for d in shape], element_type(dtype))


def aval_type(aval: ShapedArray) -> ir.RankedTensorType:
    return tensor_type(aval.shape, aval.dtype)


def dtype_of(v: Value) -> np.dtype:
    """The numpy dtype of a tensor value's elements (inverse of `element_type`)."""
    t = ir.RankedTensorType(v.type).element_type
    if isinstance(t, ir.IntegerType):
        if t.width == 1:
            return np.dtype(np.bool_)
        return np.dtype(f"{'u' if t.is_unsigned else 'i'}{t.width // 8}")
    if isinstance(t, ir.ComplexType):
        return np.dtype(f"c{2 * ir.FloatType(t.element_type).width // 8}")
    return np.dtype(f"f{ir.FloatType(t).width // 8}")


def axes_param(eqn, name: str) -> tuple[int, ...]:
    """The axes param `name` of eqn, counted from 0: a primitive's shape rule takes negative axes
    counted from the end (lax/_rules.py check_axes), and a jaxpr read from text may carry them."""
    rank = max(eqn.invars[0].aval.ndim, 1)
    value = eqn.params[name]
    return tuple(a % rank for a in value) if isinstance(value, (tuple, list)) else (value % rank,)


def shape_of(v: Value) -> tuple[int, ...]:
    """The static shape; DYNAMIC (a negative int) stands for each `?`."""
    return tuple(ir.RankedTensorType(v.type).shape)


def is_static(v: Value) -> bool:
    return DYNAMIC not in shape_of(v)


def has_zero(v: Value) -> bool:
    """Some dim is statically 0 (a `?` may still be 0 at run time)."""
    return 0 in shape_of(v)


def with_dtype(v: Value, dtype) -> ir.RankedTensorType:
    """v's tensor type with another element type."""
    return tensor_type(shape_of(v), dtype)


def is_float(v: Value) -> bool:
    return dtype_of(v).kind == "f"


def is_complex(v: Value) -> bool:
    return dtype_of(v).kind == "c"


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
    """`value` in every element of a tensor of x's dtype and (run-time) shape."""
    return full_like(value, x, dtype_of(x))


def full(value, dtype, shape: Sequence[Size]) -> Value:
    """`value` as `dtype` in every element of a tensor of the given (possibly run-time) shape."""
    if _static_sizes(shape):
        return constant(value, dtype, shape)
    return broadcast_in_dim(constant(value, dtype), shape, [])


def iota(dtype, shape: Sequence[Size], dimension: int) -> Value:
    """0, 1, 2, ... along `dimension` of `shape` (stablehlo.dynamic_iota when a size is run-time)."""
    attrs = {"iota_dimension": i64(dimension)}
    if _static_sizes(shape):
        return op1("stablehlo.iota", [], tensor_type(shape, dtype), attrs)
    return op1("stablehlo.dynamic_iota", [shape_tensor(shape)], tensor_type(shape, dtype), attrs)


def full_like(value, x: Value, dtype) -> Value:
    """`value` as `dtype` in every element of a tensor of x's (run-time) shape."""
    if is_static(x):
        return constant(value, dtype, shape_of(x))
    return broadcast_in_dim(constant(value, dtype), dims_of(x), [])


def const_array(arr: np.ndarray) -> Value:
    """A constant holding a numpy array bit for bit."""
    arr = np.array(arr, order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
    ty = tensor_type(arr.shape, arr.dtype)
    # The binding reads one-element buffers as splats and needs a 1-d buffer for them.
    attr = ir.DenseElementsAttr.get(arr.reshape(-1) if arr.size == 1 else arr, type=ty)
    return op1("stablehlo.constant", [], ty, {"value": attr})


def compare_type(dtype) -> str:
    dt = np.dtype(dtype)
    return "FLOAT" if dt.kind in "fc" else "SIGNED" if dt.kind == "i" else "UNSIGNED"


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


def _static_sizes(shape: Sequence[Size]) -> bool:
    """Whether every size is an int (the others are run-time tensor<i64> values)."""
    for d in shape:
        if isinstance(d, DimExpr):
            raise TypeError(f"shape {tuple(shape)} holds symbolic dims: evaluate them with ctx.sizes(shape)")
        if isinstance(d, (int, np.integer)) and d < 0:
            raise TypeError(f"shape {tuple(shape)} holds a `?` of shape_of(): read run-time sizes with dims_of(x)")
    return all(isinstance(d, (int, np.integer)) for d in shape)


def broadcast_in_dim(x: Value, shape: Sequence[Size], dims: Sequence[int]) -> Value:
    """x broadcast into `shape`, operand dim i going to result dim dims[i]. With run-time sizes this
    is dynamic_broadcast_in_dim, which stablehlo-legalize-to-linalg lowers only when it knows which
    dims expand: an operand dim that is statically 1 (to a target not statically 1) expands, every
    other operand dim is taken to equal its target (the only broadcasts jaxprs make)."""
    if _static_sizes(shape):
        return op1("stablehlo.broadcast_in_dim", [x], with_dtype_shape(x, shape),
                   {"broadcast_dimensions": i64s(dims)})
    expanding = [i for i, (n, d) in enumerate(zip(shape_of(x), dims)) if n == 1 and not _is_int(shape[d], 1)]
    kept = [i for i in range(len(dims)) if i not in expanding]
    return op1("stablehlo.dynamic_broadcast_in_dim", [x, shape_tensor(shape)], with_dtype_shape(x, shape),
               {"broadcast_dimensions": i64s(dims), "known_expanding_dimensions": i64s(expanding),
                "known_nonexpanding_dimensions": i64s(kept)})


def _is_int(d, value: int) -> bool:
    return isinstance(d, (int, np.integer)) and d == value


def broadcast_to(x: Value, shape: Sequence[Size]) -> Value:
    """A rank-0 value broadcast to `shape` (values of that shape are returned as they are; a `?`
    of x stands for the run-time size in `shape`)."""
    if shape_of(x) or not shape:
        assert len(shape_of(x)) == len(shape), f"only rank-0 values broadcast implicitly, got {x.type}"
        return x
    return broadcast_in_dim(x, shape, [])


def broadcast_like(x: Value, ref: Value) -> Value:
    """A rank-0 value broadcast to ref's (run-time) shape; other values as they are."""
    if shape_of(x):
        return x
    return broadcast_to(x, dims_of(ref) if not is_static(ref) else shape_of(ref))


def with_dtype_shape(x: Value, shape: Sequence[Size]) -> ir.RankedTensorType:
    return tensor_type(shape, dtype_of(x))


def reshape(x: Value, shape: Sequence[Size]) -> Value:
    """x (row-major) in `shape`. With run-time sizes: stablehlo.dynamic_reshape, which
    stablehlo-legalize-to-linalg does not lower; legalize_dynamic.py rewrites it first."""
    if _static_sizes(shape):
        if shape_of(x) == tuple(shape):
            return x
        return op1("stablehlo.reshape", [x], with_dtype_shape(x, shape))
    return op1("stablehlo.dynamic_reshape", [x, shape_tensor(shape)], with_dtype_shape(x, shape))


# -- run-time sizes -----------------------------------------------------------------------------
def dims_of(x: Value) -> list[Size]:
    """x's sizes: ints where static, else read at run time (tensor.dim: exact in i64, where
    stablehlo.get_dimension_size would give i32)."""
    out: list[Size] = []
    for i, n in enumerate(shape_of(x)):
        if n != DYNAMIC:
            out.append(n)
            continue
        index = arith.ConstantOp(ir.IndexType.get(), i).result
        size = tensor.DimOp(x, index).result
        i64_size = arith.IndexCastOp(ir.IntegerType.get_signless(64), size).result
        out.append(tensor.FromElementsOp(scalar_type(np.int64), [i64_size]).result)
    return out


def size_value(d: Size) -> Value:
    """A size as a tensor<i64>."""
    return constant(int(d), np.int64) if isinstance(d, (int, np.integer)) else convert(d, np.int64)


def shape_tensor(shape: Sequence[Size]) -> Value:
    """A tensor<rank x i64> holding the sizes (the shape operand of the dynamic stablehlo ops)."""
    if _static_sizes(shape):
        return const_array(np.array(shape, np.int64).reshape(len(shape)))
    parts = [op1("stablehlo.reshape", [size_value(d)], tensor_type([1], np.int64)) for d in shape]
    if len(parts) == 1:
        return parts[0]
    return op1("stablehlo.concatenate", parts, tensor_type([len(parts)], np.int64), {"dimension": i64(0)})


def slice_(x: Value, starts: Sequence[Size], limits: Sequence[Size], strides: Sequence[int] | None = None,
           result: ir.Type | None = None) -> Value:
    """x[starts:limits:strides]; with a run-time start or limit, stablehlo.real_dynamic_slice (the
    result sizes are computed at run time as stablehlo does: ceil((limit - start) / stride)), whose
    `result` type may say which of them are static."""
    strides = strides or [1] * len(starts)
    if _static_sizes(starts) and _static_sizes(limits):
        shape = [(hi - lo + st - 1) // st for lo, hi, st in zip(starts, limits, strides)]
        if 0 in shape:
            # an empty result is a constant: the tensor.extract_slice of an operand's zero-size dim
            # (an LU's empty left part, sliced again) fails MLIR's verifier in the linalg stage
            # ("offset 1 is out-of-bounds: 0 >= 0")
            return constant(0, dtype_of(x), shape)
        return op1("stablehlo.slice", [x], with_dtype_shape(x, shape),
                   {"start_indices": i64s(starts), "limit_indices": i64s(limits), "strides": i64s(strides)})
    shape = [(hi - lo + st - 1) // st if _static_sizes([lo, hi]) else None
             for lo, hi, st in zip(starts, limits, strides)]
    return op1("stablehlo.real_dynamic_slice", [x, shape_tensor(starts), shape_tensor(limits), shape_tensor(strides)],
               result or with_dtype_shape(x, shape))


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
