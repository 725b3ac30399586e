"""Shared helpers for the Python legalizations in ``legalize*.py``.

Two kinds of helpers live here:

* small IR builders (index constants, loop nests, allocation, signless casts)
  that build at the current ``ir.InsertionPoint`` and ``ir.Location``;
* ``inline_scalar_region``: translates a StableHLO region whose ops work on
  0-d tensors (a sort comparator, a scatter update computation) into scalar
  arith/math ops, through a table of small rules.  Emitting scalars instead
  of 0-d tensor ops means the generated loops allocate nothing per element.
"""

from __future__ import annotations

import os
from typing import Callable, Sequence

from torch_mlir import ir, passmanager
from torch_mlir._mlir_libs import _stablehlo
from torch_mlir.dialects import arith, bufferization, math, memref, scf, tensor


class LegalizeError(ValueError):
    """A StableHLO construct the Python legalization cannot translate."""


# MLIR's pass manager verifies the whole module after every pass (and every nested pass on every
# function): over the ~40 passes of a compilation that was half of the C++ passes' time (a 100-layer
# training step: 104 -> 52 ms of thread CPU time). pipeline.run_stage verifies the module once
# after each pass pipeline instead (~1 ms); SPRUE_VERIFY_EACH_PASS=1 brings the per-pass
# verification back, to find which pass of a pipeline broke a module.
VERIFY_EACH_PASS = os.environ.get("SPRUE_VERIFY_EACH_PASS", "") == "1"


def pass_manager(pipeline: str, context: ir.Context) -> passmanager.PassManager:
    """A pass manager of `pipeline` (the passes on the module, as `builtin.module(...)` nests
    them), verifying after each pass only with SPRUE_VERIFY_EACH_PASS=1."""
    pm = passmanager.PassManager.parse(f"builtin.module({pipeline})", context)
    pm.enable_verifier(VERIFY_EACH_PASS)
    return pm


# ---------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------

def element_kind(t: ir.Type) -> str:
    """'f' float, 'si' signed/signless int, 'ui' unsigned int, 'i1' bool, 'c' complex."""
    if isinstance(t, ir.IntegerType):
        if t.width == 1:
            return "i1"
        return "ui" if t.is_unsigned else "si"
    if isinstance(t, ir.FloatType):
        return "f"
    if isinstance(t, ir.ComplexType):
        return "c"
    raise LegalizeError(f"unsupported element type {t}")


def signless(t: ir.Type) -> ir.Type:
    """arith and memref ops only take signless integers."""
    if isinstance(t, ir.IntegerType) and not t.is_signless:
        return ir.IntegerType.get_signless(t.width)
    return t


def tensor_type(v: ir.Value) -> ir.RankedTensorType:
    if not isinstance(v.type, ir.RankedTensorType):
        raise LegalizeError(f"expected a ranked tensor, got {v.type}")
    return v.type


def elem_of(v: ir.Value) -> ir.Type:
    return tensor_type(v).element_type


def signless_tensor_type(t: ir.RankedTensorType) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(t.shape, signless(t.element_type))


def _cast(v: ir.Value, to: ir.Type) -> ir.Value:
    # stablehlo-convert-to-signless later turns the ui/si types into signless
    # ones, after which these casts fold away.
    if v.type == to:
        return v
    op = ir.Operation.create("builtin.unrealized_conversion_cast", results=[to], operands=[v])
    return op.result


def to_signless(v: ir.Value) -> ir.Value:
    return _cast(v, signless_tensor_type(tensor_type(v)))


def from_signless(v: ir.Value, original: ir.Type) -> ir.Value:
    return _cast(v, original)


# ---------------------------------------------------------------------------
# Finding ops
# ---------------------------------------------------------------------------

def as_operation(x):
    """The ir.Operation of an OpView (the bindings hand out both, as value owners and parents, and
    the two never compare equal); an Operation, a Block or None as it is."""
    return x.operation if isinstance(x, ir.OpView) else x


# The scf loops: ops whose body runs once per trip.
LOOP_OPS = frozenset({"scf.for", "scf.while", "scf.parallel", "scf.forall"})


def is_inside(op: ir.Operation, ancestor: ir.Operation) -> bool:
    """Whether `op` is nested (at any depth) in a region of `ancestor`."""
    ancestor = as_operation(ancestor)
    parent = op.parent
    while parent is not None:
        if as_operation(parent) == ancestor:
            return True
        parent = parent.parent
    return False


def defined_inside(value: ir.Value, op: ir.Operation) -> bool:
    """Whether `value` is defined in a region of `op`: by an op nested in it, or as an argument of
    one of its blocks (a loop's induction variable or carry)."""
    if isinstance(value, ir.BlockArgument):
        owner = as_operation(value.owner.owner)
        return owner == as_operation(op) or is_inside(owner, op)
    return is_inside(value.owner, op)


def constant_scalar(v: ir.Value):
    """The value of a 0-d stablehlo.constant, or None."""
    if not isinstance(v, ir.OpResult) or v.owner.name != "stablehlo.constant":
        return None
    attr = v.owner.attributes["value"]
    if isinstance(attr, ir.DenseFPElementsAttr):   # read as a FloatAttr: indexing does not read f16 / bf16
        return ir.FloatAttr(attr.get_splat_value()).value if attr.is_splat or len(attr) == 1 else None
    if isinstance(attr, ir.DenseIntElementsAttr):
        t = attr.type.element_type
        if isinstance(t, ir.IntegerType) and t.width == 1:
            return bool(ir.BoolAttr(attr.get_splat_value()).value)   # a 0-d constant is a splat
        return int(attr[0]) if len(attr) == 1 else None
    return None


def operation_of(v: ir.Value) -> ir.Operation | None:
    """The op whose result `v` is; None for a block argument."""
    if not isinstance(v, ir.OpResult):
        return None
    return as_operation(v.owner)


def reassociation_attr(groups: list[list[int]]) -> ir.Attribute:
    """A reshape's `reassociation` attribute: the groups of axes, each one axis of the other side."""
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, a) for a in g]) for g in groups])


def collapsed_type(t: ir.RankedTensorType, groups: list[list[int]]) -> ir.RankedTensorType:
    """`t` with each group of axes one axis (run-time if any of the group's is)."""
    shape = []
    for g in groups:
        size = 1
        for a in g:
            size *= t.shape[a]
        shape.append(ir.ShapedType.get_dynamic_size() if any(t.is_dynamic_dim(a) for a in g) else size)
    return ir.RankedTensorType.get(shape, t.element_type)


def defining_op(value: ir.Value) -> ir.Operation:
    """The op that defines `value`: its owner, or for a block argument the block's op."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return as_operation(owner.owner)
    return as_operation(owner)


def captures(roots: Sequence[ir.Operation]) -> tuple[list[ir.Value], list[tuple[ir.Operation, int, ir.Value]]]:
    """The values `roots` (and the ops inside them) use that are defined outside them, in
    first-use order, and every use of one: (op, operand number, value)."""
    inside: set[ir.Operation] = set()
    ops: list[ir.Operation] = []

    def collect(op: ir.Operation) -> ir.WalkResult:
        inside.add(op)
        ops.append(op)
        return ir.WalkResult.ADVANCE
    for root in roots:
        root.walk(collect, ir.WalkOrder.PRE_ORDER)
    captured: dict[ir.Value, None] = {}
    uses = []
    for op in ops:
        for i, value in enumerate(op.operands):
            if defining_op(value) not in inside:
                captured.setdefault(value, None)
                uses.append((op, i, value))
    return list(captured), uses


def call_equal_function(fn: ir.Operation, call: ir.Operation, name: str, seen: dict[str, str]) -> None:
    """Where a function that prints as `fn` (new, called by `call`, named `name`) is in `seen`
    (its text -> its name), `call` calls that one and `fn` is erased; else `fn` joins `seen`."""
    # printed on its own (use_local_scope; no verification): printing an op inside a module
    # otherwise numbers the whole module first, and outlining every nest became quadratic
    key = as_operation(fn).get_asm(use_local_scope=True, assume_verified=True).replace(f"@{name}(", "@(", 1)
    if key in seen:
        as_operation(call).attributes["callee"] = ir.FlatSymbolRefAttr.get(seen[key])
        as_operation(fn).erase()
    else:
        seen[key] = name


def ops_where(root: ir.Operation, keep: Callable[[ir.Operation], bool],
              order: ir.WalkOrder | None = None) -> list[ir.Operation]:
    """The ops nested in `root` (itself included) that `keep` accepts, in walk order (the
    bindings' default, post-order, unless `order` says), collected before the caller rewrites any.
    A walk hands out plain Operations: iterating blocks would build op views and import their
    dialects' Python modules (torch_mlir.dialects.linalg: ~50 ms of a first compilation)."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if keep(op):
            found.append(op)
        return ir.WalkResult.ADVANCE
    if order is None:
        root.walk(visit)
    else:
        root.walk(visit, order)
    return found


# Ops whose result is a view of their first operand's buffer.
MEMREF_VIEWS = frozenset({"memref.subview", "memref.cast", "memref.reinterpret_cast", "memref.collapse_shape",
                          "memref.expand_shape", "memref.reshape", "memref.transpose"})


def has_function(module: ir.Module, name: str) -> bool:
    """Whether the module defines or declares a symbol `name` at its top level."""
    return any("sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value == name
               for op in module.body.operations)


def private_function(name: str, arg_types: Sequence[ir.Type], result_types: Sequence[ir.Type] = (),
                     **attributes: ir.Attribute) -> ir.Operation:
    """A private func.func `name` of these types at the insertion point, with `attributes` too: a
    declaration, or a definition once the caller appends its body's block."""
    return ir.Operation.create("func.func", regions=1, attributes={
        "sym_name": ir.StringAttr.get(name), "sym_visibility": ir.StringAttr.get("private"),
        "function_type": ir.TypeAttr.get(ir.FunctionType.get(list(arg_types), list(result_types))), **attributes})


def call_declared(module: ir.Module, ops: Sequence[ir.Operation], name_of: Callable[[ir.Operation], str]) -> None:
    """Each of `ops` (one operand, one result) replaced by a func.call of the function
    name_of(op), declared private in the module where it is not yet: an external C function
    (convert-func-to-llvm keeps it a plain call), or one the LLVM stage defines."""
    declared = {ir.StringAttr(op.attributes["sym_name"]).value for op in module.body.operations
                if op.operation.name == "func.func"}
    for op in ops:
        t, name = op.results[0].type, name_of(op)
        if name not in declared:
            with ir.InsertionPoint.at_block_begin(module.body), op.location:
                private_function(name, [t], [t])
            declared.add(name)
        with ir.InsertionPoint(op), op.location:
            call = ir.Operation.create("func.call", results=[t], operands=[op.operands[0]],
                                       attributes={"callee": ir.FlatSymbolRefAttr.get(name)})
        op.results[0].replace_all_uses_with(call.results[0])
        op.erase()


def view_root(value: ir.Value) -> ir.Value:
    """The buffer `value` views (through subviews, casts, reshapes)."""
    while isinstance(value, ir.OpResult) and value.owner.name in MEMREF_VIEWS:
        value = value.owner.operands[0]
    return value


def returns_of(fn: ir.Operation) -> list[ir.Operation]:
    """The `llvm.return` ops of an llvm.func: its blocks' terminators (an LLVM dialect function
    has no nested regions), found without walking every op of its body."""
    found = []
    for block in fn.regions[0].blocks:
        ops = block.operations
        last = as_operation(ops[len(ops) - 1]) if len(ops) else None
        if last is not None and last.name == "llvm.return":
            found.append(last)
    return found


# ---------------------------------------------------------------------------
# Builders
# ---------------------------------------------------------------------------

def index(v: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), v).result


def const(t: ir.Type, v: int | float) -> ir.Value:
    if isinstance(t, ir.FloatType):
        return arith.ConstantOp(t, ir.FloatAttr.get(t, float(v))).result
    return arith.ConstantOp(t, ir.IntegerAttr.get(t, int(v))).result


def constant_int(v: ir.Value) -> int | None:
    """The value of an integer (or index) arith.constant, None for any other value."""
    if isinstance(v.owner, ir.Block):
        return None
    op = as_operation(v.owner)
    if op.name != "arith.constant" or not isinstance(op.attributes["value"], ir.IntegerAttr):
        return None
    return ir.IntegerAttr(op.attributes["value"]).value


def enclosing(op: ir.Operation, name: str) -> ir.Operation:
    """The op named `name` (a function: func.func, llvm.func) that holds `op`, or `op` itself."""
    while op.name != name:
        op = as_operation(op.parent)
    return op


def static_trips(loop: ir.Operation) -> int | None:
    """The trip count of an scf.for whose bounds and step are constants (None otherwise)."""
    lb, ub, step = (constant_int(v) for v in list(loop.operands)[:3])
    return -(-(ub - lb) // step) if None not in (lb, ub, step) and step else None


def linalg_fill(value: ir.Value, init: ir.Value) -> ir.Value:
    """linalg.fill of `init` with the scalar `value`, built generically (torch_mlir's linalg
    module costs ~300 ms to import)."""
    fill = ir.Operation.create("linalg.fill", results=[init.type], operands=[value, init], regions=1,
                               attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1])})
    body = fill.regions[0].blocks.append(value.type, ir.RankedTensorType(init.type).element_type)
    with ir.InsertionPoint(body):
        ir.Operation.create("linalg.yield", operands=[body.arguments[0]])
    return fill.results[0]


def tensor_dim(v: ir.Value, axis: int) -> ir.Value:
    """The run-time size of a tensor's axis (tensor.dim)."""
    return tensor.DimOp(v, index(axis)).result


def empty_like(v: ir.Value) -> ir.Value:
    """A tensor.empty of `v`'s type, its run-time sizes read from `v`."""
    t = tensor_type(v)
    return ir.Operation.create("tensor.empty", results=[t], operands=[
        tensor_dim(v, d) for d in range(t.rank) if t.is_dynamic_dim(d)]).results[0]


def tensor_sizes(v: ir.Value) -> list[ir.Value]:
    """The sizes of a tensor as index values (constants where static)."""
    shape = tensor_type(v).shape
    return [tensor_dim(v, i) if ir.ShapedType.is_dynamic_size(s) else index(s) for i, s in enumerate(shape)]


def add(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.AddIOp(a, b).result


def min_index(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.MinSIOp(a, b).result


def cmp(pred: str, a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.CmpIOp(getattr(arith.CmpIPredicate, pred), a, b).result


def select(c: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.SelectOp(c, a, b).result


def all_of(conds: Sequence[ir.Value]) -> ir.Value:
    acc = const(ir.IntegerType.get_signless(1), 1)
    for c in conds:
        acc = arith.AndIOp(acc, c).result
    return acc


LoopBody = Callable[[ir.Value, list[ir.Value]], Sequence[ir.Value]]


def for_loop(lb: ir.Value, ub: ir.Value, step: ir.Value, inits: Sequence[ir.Value],
             body: LoopBody) -> list[ir.Value]:
    """scf.for whose body is built by ``body(iv, iter_args) -> yielded``."""
    loop = scf.ForOp(lb, ub, step, list(inits))
    with ir.InsertionPoint(loop.body):
        scf.YieldOp(list(body(loop.induction_variable, list(loop.inner_iter_args))))
    return list(loop.results)


def loop_nest(bounds: Sequence[ir.Value], body: Callable[[list[ir.Value]], None]) -> None:
    """Nested scf.for over [0, b) for every bound; zero bounds = run body once."""
    def level(k: int, ivs: list[ir.Value]) -> None:
        if k == len(bounds):
            body(ivs)
            return

        def step(iv: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
            level(k + 1, ivs + [iv])
            return []
        for_loop(index(0), bounds[k], index(1), [], step)
    level(0, [])


CarriedBody = Callable[[list[ir.Value], list[ir.Value]], Sequence[ir.Value]]


def loop_nest_carried(bounds: Sequence[ir.Value], body: CarriedBody, inits: Sequence[ir.Value]) -> list[ir.Value]:
    """Nested scf.for over [0, b) threading `inits` through every level:
    body(ivs, carried) -> new carried values. Tensors threaded this way (destination-passing
    style) let one-shot bufferization update them in place."""
    def level(k: int, ivs: list[ir.Value], carried: list[ir.Value]) -> list[ir.Value]:
        if k == len(bounds):
            return list(body(ivs, carried))
        return for_loop(index(0), bounds[k], index(1), carried,
                        lambda iv, args: level(k + 1, ivs + [iv], args))
    return level(0, [], list(inits))


def if_carried(cond: ir.Value, then: Callable[[list[ir.Value]], Sequence[ir.Value]],
               carried: Sequence[ir.Value]) -> list[ir.Value]:
    """scf.if yielding then(carried) when cond holds, else `carried` unchanged."""
    op = scf.IfOp(cond, [v.type for v in carried], has_else=True)
    with ir.InsertionPoint(op.then_block):
        scf.YieldOp(list(then(list(carried))))
    with ir.InsertionPoint(op.else_block):
        scf.YieldOp(list(carried))
    return list(op.results)


def while_loop(inits: Sequence[ir.Value],
               cond: Callable[[list[ir.Value]], ir.Value],
               body: Callable[[list[ir.Value]], Sequence[ir.Value]]) -> list[ir.Value]:
    """scf.while passing its carried values unchanged from `cond` to `body`."""
    types = [v.type for v in inits]
    op = scf.WhileOp(types, list(inits))
    before = op.before.blocks.append(*types)
    with ir.InsertionPoint(before):
        args = list(before.arguments)
        scf.ConditionOp(cond(args), args)
    after = op.after.blocks.append(*types)
    with ir.InsertionPoint(after):
        scf.YieldOp(list(body(list(after.arguments))))
    return list(op.results)


def alloc(shape: Sequence[int], elem: ir.Type, sizes: Sequence[ir.Value]) -> ir.Value:
    """memref.alloc; never freed here: buffer-deallocation-pipeline owns that."""
    dynamic = [sizes[i] for i, s in enumerate(shape) if ir.ShapedType.is_dynamic_size(s)]
    return memref.AllocOp(ir.MemRefType.get(list(shape), elem), dynamic, []).result


def load(buf: ir.Value, ivs: Sequence[ir.Value]) -> ir.Value:
    return memref.LoadOp(buf, list(ivs)).result


def store(v: ir.Value, buf: ir.Value, ivs: Sequence[ir.Value]) -> None:
    memref.StoreOp(v, buf, list(ivs))


def extract(t: ir.Value, ivs: Sequence[ir.Value]) -> ir.Value:
    return tensor.ExtractOp(t, list(ivs)).result


def insert(v: ir.Value, t: ir.Value, ivs: Sequence[ir.Value]) -> ir.Value:
    """t with v at ivs (tensor.insert: the new tensor value, in place after bufferization)."""
    return tensor.InsertOp(v, t, list(ivs)).result


def as_tensor(buf: ir.Value, original: ir.RankedTensorType) -> ir.Value:
    """Hands a buffer we filled back to value semantics.

    `restrict` promises bufferization nothing else aliases it, so the buffer
    is used in place (no copy)."""
    t = bufferization.ToTensorOp(signless_tensor_type(original), buf, restrict=True,
                                 writable=True).result
    return from_signless(t, original)


def to_index(v: ir.Value, kind: str) -> ir.Value:
    idx = ir.IndexType.get()
    if kind in ("ui", "i1"):
        return arith.IndexCastUIOp(idx, v).result
    return arith.IndexCastOp(idx, v).result


def insert_at(ivs: Sequence[ir.Value], pos: int, v: ir.Value) -> list[ir.Value]:
    return list(ivs[:pos]) + [v] + list(ivs[pos:])


def attr_int(op: ir.Operation, name: str, default: int) -> int:
    return ir.IntegerAttr(op.attributes[name]).value if name in op.attributes else default


# ---------------------------------------------------------------------------
# Scalar translation of 0-d StableHLO regions: a table of small rules.
# A rule gets the StableHLO op (for attributes and the original, possibly
# unsigned, types) and its operands already translated to signless scalars.
# ---------------------------------------------------------------------------

Rule = Callable[[ir.Operation, list[ir.Value]], ir.Value]
SCALAR_RULES: dict[str, Rule] = {}


def _rule(*names: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for n in names:
            SCALAR_RULES[f"stablehlo.{n}"] = fn
        return fn
    return register


def _kind(op: ir.Operation, i: int = 0) -> str:
    return element_kind(elem_of(op.operands[i]))


def _result_elem(op: ir.Operation) -> ir.Type:
    return signless(elem_of(op.results[0]))


A, M = arith, math


def _complex_op(name: str) -> Callable[..., ir.Operation]:
    """complex.<name> of operands of one complex type (a scatter's or a reduction's combiner)."""
    return lambda *args: ir.Operation.create(f"complex.{name}", results=[args[0].type], operands=list(args))


# Binary ops: (float, signed int, unsigned int, bool, complex); None (or missing) = not defined.
_BINARY: dict[str, tuple] = {
    "add": (A.AddFOp, A.AddIOp, A.AddIOp, A.OrIOp, _complex_op("add")),          # bool add is OR
    "subtract": (A.SubFOp, A.SubIOp, A.SubIOp, None, _complex_op("sub")),
    "multiply": (A.MulFOp, A.MulIOp, A.MulIOp, A.AndIOp, _complex_op("mul")),     # bool mul is AND
    "divide": (A.DivFOp, A.DivSIOp, A.DivUIOp, None, _complex_op("div")),
    "remainder": (A.RemFOp, A.RemSIOp, A.RemUIOp, None),
    "maximum": (A.MaximumFOp, A.MaxSIOp, A.MaxUIOp, A.OrIOp),  # maximumf propagates NaN
    "minimum": (A.MinimumFOp, A.MinSIOp, A.MinUIOp, A.AndIOp),
    "and": (None, A.AndIOp, A.AndIOp, A.AndIOp),
    "or": (None, A.OrIOp, A.OrIOp, A.OrIOp),
    "xor": (None, A.XOrIOp, A.XOrIOp, A.XOrIOp),
    "power": (M.PowFOp, None, None, None),
    "atan2": (M.Atan2Op, None, None, None),
}
_KIND_COLUMN = {"f": 0, "si": 1, "ui": 2, "i1": 3, "c": 4}


def _binary_rule(name: str) -> Rule:
    def rule(op: ir.Operation, args: list[ir.Value]) -> ir.Value:
        row = _BINARY[name]
        builder = row[_KIND_COLUMN[_kind(op)]] if _KIND_COLUMN[_kind(op)] < len(row) else None
        if builder is None:
            raise LegalizeError(f"stablehlo.{name} is not defined on {elem_of(op.operands[0])}")
        return builder(*args).result
    return rule


for _name in _BINARY:
    _rule(_name)(_binary_rule(_name))


# Unary float ops that map one to one onto math/arith.
_UNARY_FLOAT = {
    "negate": A.NegFOp, "abs": M.AbsFOp, "exponential": M.ExpOp, "log": M.LogOp,
    "sqrt": M.SqrtOp, "rsqrt": M.RsqrtOp, "cbrt": M.CbrtOp, "tanh": M.TanhOp,
    "sine": M.SinOp, "cosine": M.CosOp, "tan": M.TanOp, "floor": M.FloorOp,
    "ceil": M.CeilOp, "round_nearest_even": M.RoundEvenOp, "round_nearest_afz": M.RoundOp,
    "exponential_minus_one": M.ExpM1Op, "log_plus_one": M.Log1pOp,
}
_UNARY_INT = {
    "negate": lambda x: A.SubIOp(const(x.type, 0), x),
    "abs": M.AbsIOp,
    "not": lambda x: A.XOrIOp(x, const(x.type, -1)),   # -1 is all ones (true for i1)
    "popcnt": M.CtPopOp,
    "count_leading_zeros": M.CountLeadingZerosOp,
}


def _unary_rule(name: str) -> Rule:
    def rule(op: ir.Operation, args: list[ir.Value]) -> ir.Value:
        table = _UNARY_FLOAT if _kind(op) == "f" else _UNARY_INT
        if name not in table:
            raise LegalizeError(f"stablehlo.{name} is not defined on {elem_of(op.operands[0])}")
        return table[name](args[0]).result
    return rule


for _name in sorted(set(_UNARY_FLOAT) | set(_UNARY_INT)):
    _rule(_name)(_unary_rule(_name))


@_rule("logistic")
def _logistic(op: ir.Operation, args: list[ir.Value]) -> ir.Value:
    one = const(args[0].type, 1.0)
    denom = A.AddFOp(one, M.ExpOp(A.NegFOp(args[0]).result).result).result
    return A.DivFOp(one, denom).result


@_rule("select")
def _select(op: ir.Operation, args: list[ir.Value]) -> ir.Value:
    return select(*args)


@_rule("clamp")
def _clamp(op: ir.Operation, args: list[ir.Value]) -> ir.Value:
    lo, x, hi = args
    kind = _kind(op, 1)
    col = _KIND_COLUMN[kind]
    return _BINARY["minimum"][col](_BINARY["maximum"][col](x, lo).result, hi).result


@_rule("constant")
def _constant(op: ir.Operation, args: list[ir.Value]) -> ir.Value:
    value = ir.DenseElementsAttr(op.attributes["value"]).get_splat_value()
    t = _result_elem(op)
    if isinstance(t, ir.ComplexType):   # (the splat value is the array [re, im])
        return ir.Operation.create("complex.constant", results=[t], attributes={"value": value}).result
    if isinstance(t, ir.IntegerType):
        raw = ir.BoolAttr(value).value if isinstance(value, ir.BoolAttr) else ir.IntegerAttr(value).value
        value = ir.IntegerAttr.get(t, int(raw))
    return arith.ConstantOp(t, value).result


@_rule("reshape", "broadcast_in_dim")
def _identity(op: ir.Operation, args: list[ir.Value]) -> ir.Value:
    # 0-d to 0-d only: inside a scalar region these change nothing.
    if tensor_type(op.results[0]).rank != 0:
        raise LegalizeError(f"{op.name} to a non-scalar shape inside a scalar region")
    return args[0]


# compare: direction -> predicate, per comparison family.
_CMPF = {"EQ": "OEQ", "NE": "UNE", "GE": "OGE", "GT": "OGT", "LE": "OLE", "LT": "OLT"}
_CMPI_SIGNED = {"EQ": "eq", "NE": "ne", "GE": "sge", "GT": "sgt", "LE": "sle", "LT": "slt"}
_CMPI_UNSIGNED = {"EQ": "eq", "NE": "ne", "GE": "uge", "GT": "ugt", "LE": "ule", "LT": "ult"}


def _total_order_key(x: ir.Value) -> ir.Value:
    """An integer whose signed order is IEEE totalOrder on the float x.

    Negative floats have the sign bit set and grow in magnitude with their
    bits; flipping all non-sign bits of negatives reverses that, giving
    -NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN."""
    it = ir.IntegerType.get_signless(ir.FloatType(x.type).width)
    bits = A.BitcastOp(it, x).result
    flipped = A.XOrIOp(bits, const(it, (1 << (it.width - 1)) - 1)).result
    return select(cmp("slt", bits, const(it, 0)), flipped, bits)


@_rule("compare")
def _compare(op: ir.Operation, args: list[ir.Value]) -> ir.Value:
    direction = _stablehlo.ComparisonDirectionAttr(op.attributes["comparison_direction"]).value
    ctype = (_stablehlo.ComparisonTypeAttr(op.attributes["compare_type"]).value
             if "compare_type" in op.attributes else "NOTYPE")
    kind = _kind(op)
    a, b = args
    if kind == "f" and ctype == "TOTALORDER":
        return cmp(_CMPI_SIGNED[direction], _total_order_key(a), _total_order_key(b))
    if kind == "f":
        return A.CmpFOp(getattr(A.CmpFPredicate, _CMPF[direction]), a, b).result
    unsigned = ctype == "UNSIGNED" or (ctype != "SIGNED" and kind in ("ui", "i1"))
    return cmp((_CMPI_UNSIGNED if unsigned else _CMPI_SIGNED)[direction], a, b)


@_rule("is_finite")
def _is_finite(op: ir.Operation, args: list[ir.Value]) -> ir.Value:
    x = args[0]
    inf = arith.ConstantOp(x.type, ir.FloatAttr.get(x.type, float("inf"))).result
    return A.CmpFOp(A.CmpFPredicate.ONE, M.AbsFOp(x).result, inf).result   # false on NaN too


@_rule("bitcast_convert")
def _bitcast(op: ir.Operation, args: list[ir.Value]) -> ir.Value:
    src, dst = elem_of(op.operands[0]), _result_elem(op)
    if _bits(src) != _bits(dst):
        raise LegalizeError(f"bitcast_convert {src} -> {dst} changes the bit width")
    return A.BitcastOp(dst, args[0]).result if src != dst else args[0]


def _bits(t: ir.Type) -> int:
    return t.width if isinstance(t, ir.IntegerType) else ir.FloatType(t).width


@_rule("convert")
def _convert(op: ir.Operation, args: list[ir.Value]) -> ir.Value:
    x = args[0]
    src_kind, dst_kind = _kind(op), element_kind(elem_of(op.results[0]))
    dst = _result_elem(op)
    if x.type == dst:
        return x
    if dst_kind == "i1":   # any -> bool: non-zero is true (NaN too)
        if src_kind == "f":
            return A.CmpFOp(A.CmpFPredicate.UNE, x, const(x.type, 0.0)).result
        return cmp("ne", x, const(x.type, 0))
    return _CONVERT[(src_kind == "f", dst_kind == "f")](x, dst, src_kind, dst_kind)


def _int_to_int(x: ir.Value, dst: ir.Type, sk: str, dk: str) -> ir.Value:
    if dst.width < x.type.width:
        return A.TruncIOp(dst, x).result
    return (A.ExtSIOp if sk == "si" else A.ExtUIOp)(dst, x).result


def _float_to_float(x: ir.Value, dst: ir.Type, sk: str, dk: str) -> ir.Value:
    return (A.TruncFOp if _bits(dst) < _bits(x.type) else A.ExtFOp)(dst, x).result


def _int_to_float(x: ir.Value, dst: ir.Type, sk: str, dk: str) -> ir.Value:
    return (A.SIToFPOp if sk == "si" else A.UIToFPOp)(dst, x).result


def _float_to_int(x: ir.Value, dst: ir.Type, sk: str, dk: str) -> ir.Value:
    return (A.FPToUIOp if dk == "ui" else A.FPToSIOp)(dst, x).result


# (source is float, destination is float) -> conversion
_CONVERT = {(False, False): _int_to_int, (True, True): _float_to_float,
            (False, True): _int_to_float, (True, False): _float_to_int}

_TERMINATORS = ("stablehlo.return", "func.return")


def inline_scalar_region(region: ir.Region, args: Sequence[ir.Value], where: str) -> list[ir.Value]:
    """Emits the region's computation on scalars ``args``; returns its results.

    ``where`` names the owning op for error messages.  Values the region uses
    from above (0-d tensors) are read with tensor.extract."""
    block = region.blocks[0]
    if len(block.arguments) != len(args):
        raise LegalizeError(f"{where}: region takes {len(block.arguments)} arguments, "
                            f"expected {len(args)}")
    env: dict[ir.Value, ir.Value] = dict(zip(block.arguments, args))

    def scalar(v: ir.Value) -> ir.Value:
        if v not in env:
            env[v] = extract(to_signless(v), [])
        return env[v]

    for op in block.operations:
        operands = [scalar(v) for v in op.operands]
        if op.name in _TERMINATORS:
            return operands
        rule = SCALAR_RULES.get(op.name)
        if rule is None:
            raise LegalizeError(
                f"{where}: cannot translate '{op.name}' in its region to scalar code "
                f"(supported: {', '.join(sorted(n.split('.', 1)[1] for n in SCALAR_RULES))})")
        with op.location:
            env[op.results[0]] = rule(op, operands)
    raise LegalizeError(f"{where}: region has no terminator")
