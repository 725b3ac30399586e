"""Matrix products as blocked, vectorized loop nests (MLIR transform dialect).

convert-linalg-to-loops turns a contraction into the textbook scalar nest: one FMA per load of
A and B and per load/store of C, 0.5 GFLOP/s. Every dot_general reaches linalg as one of four
contractions: the dot_general rule (rules_reductions.py) first canonicalizes any batch and
contracting dimensions into batch-free-contract order (a transpose where needed: the packing copy
of XLA's DotDecomposer / IREE's data tiling, O(size) against the O(m n k) product), and
stablehlo-legalize-to-linalg then picks linalg.matmul, batch_matmul, matvec or vecmat.
Here, on tensors before bufferization:

  matmul, batch_matmul (batch tiled by 1 first):
    1. tiled for the caches:      [MC, NC, KC] ~ [32, 128, 512]   (a 32x512 block of A and a
                                   512x128 panel of B stay in L2 while they are reused)
    2. tiled for the registers:   [MR, NR], e.g. 4 x 32 f64 on AVX-512 (16 vector accumulators),
                                   4 x 12 on AVX2 (12 of its 16 ymm registers), held across the k loop
    3. tiled by 1 along k, vectorized (vector.contract MR x NR x 1), and the C block's read/write
       hoisted out of the k loop; the contraction lowers to outer products: per k, MR broadcasts
       of A, NR / lanes vector loads of B's row, MR * NR / lanes vector FMAs (BLIS's micro-kernel).
  vecmat (x @ B): the same outer-product kernel with MR = 1 (an axpy per row of B).
  matvec (A @ x): a dot product per row, which the register kernel cannot block; its payload gets
    `reassoc,contract` (as fastmath.py does for reductions) so LLVM's loop vectorizer keeps vector
    accumulators along the contiguous row.

(Measured on 1024^2 f64: 0.4 -> ~40 GFLOP/s single-threaded.) Tile sizes are divisors of the
(static) sizes, so every tile is full and the vector code needs no masks; a product with a
dynamic size, a non-float type, a column count no register tile divides, or fewer than MIN_FLOPS
is left to the plain loops. The vector ops are lowered in the pipeline's llvm stage.

Numerics: each C element is still accumulated along k in order, with FMAs (one rounding per step
instead of two), like any BLAS (matvec's accumulation is reassociated, like numpy's dot).
"""
from __future__ import annotations

import functools
import os

from torch_mlir import ir, passmanager

_MARK = "sprue.matmul"
MIN_FLOPS = 2 * 32 * 32 * 32
_FLAGS = "#arith.fastmath<reassoc,contract>"

# SPRUE_MATMUL_FORMS=0 keeps only the plain 2-D matmul path (what sprue did before the other
# forms were tiled): an A/B switch for benchmarks/kernels.py's matmul shape classes.
def forms_enabled() -> bool:
    return os.environ.get("SPRUE_MATMUL_FORMS", "1") not in ("0", "")


@functools.cache
def _vector_bytes() -> int:
    """Bytes of the host's widest float vector register (the register tile is sized from it)."""
    # Deferred: llvmlite's binding is loaded by the backend anyway; only a matmul to tile needs it here.
    import llvmlite.binding as llvm
    features = dict(llvm.get_host_cpu_features())
    if features.get("avx512f"):
        return 64
    return 32 if features.get("avx") else 16


def _largest_divisor(n: int, unit: int, cap: int) -> int:
    """The largest d <= cap with n % d == 0 and d % unit == 0 (unit divides n)."""
    best = unit
    d = unit
    while d <= min(n, cap):
        if n % d == 0:
            best = d
        d += unit
    return best


def _register_tiles(itemsize: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(row counts, column counts) of the register tile, best first: about 3/4 of the vector
    registers as accumulators (16 on AVX-512: 32 registers; 12 on AVX2: 16), the rest for B's row
    and A's broadcast."""
    lanes = _vector_bytes() // itemsize
    if _vector_bytes() == 64:
        return (4, 2, 1), (4 * lanes, 2 * lanes, lanes)
    return (4, 2, 1), (3 * lanes, 2 * lanes, lanes)


def plan(m: int, n: int, k: int, itemsize: int = 8) -> tuple[list[int], list[int]] | None:
    """(cache tile [MC, NC, KC], register tile [MR, NR]) for an m x k @ k x n product, or None."""
    if 2 * m * n * k < MIN_FLOPS:
        return None
    rows, cols = _register_tiles(itemsize)
    nr = next((r for r in cols if n % r == 0), None)
    if nr is None:
        return None
    mr = next(r for r in rows if m % r == 0)
    return [_largest_divisor(m, mr, 32), _largest_divisor(n, nr, 128), _largest_divisor(k, 1, 512)], [mr, nr]


_ANY = "!transform.any_op"


def _tiles(kind: str, cache: list[int], reg: list[int]) -> list[list[int]]:
    """The three tile_using_for levels (cache, registers, k by 1) in the op's loop order."""
    (mc, nc, kc), (mr, nr) = cache, reg
    if kind == "linalg.batch_matmul":        # (b, m, n, k): one batch element at a time
        return [[1, mc, nc, kc], [mr, nr, 0], [0, 0, 1]]
    if kind == "linalg.vecmat":              # (n, k)
        return [[nc, kc], [nr, 0], [0, 1]]
    return [[mc, nc, kc], [mr, nr, 0], [0, 0, 1]]


def _tile(handle: str, sizes: list[int], out: str) -> tuple[str, list[str]]:
    """A tile_using_for line and the handles of its loops, outermost first."""
    loops = sum(1 for s in sizes if s)
    types = ", ".join([_ANY] * (loops + 1))
    names = f"%{out}, %{out}l" + (f":{loops}" if loops > 1 else "")
    handles = [f"%{out}l#{i}" for i in range(loops)] if loops > 1 else [f"%{out}l"]
    return (f"    {names} = transform.structured.tile_using_for {handle} tile_sizes {sizes} : ({_ANY}) -> ({types})\n",
            handles)


def _script_one(ident: int, kind: str, cache: list[int], reg: list[int]) -> str:
    t1, t2, t3 = _tiles(kind, cache, reg)
    a, outer = _tile(f"%mm{ident}", t1, f"a{ident}")
    if kind == "linalg.batch_matmul":
        # The unit batch dim of a tile would reach the vectorizer as a leading 1 that keeps the
        # broadcasts from folding into vector.contract (and the contraction from becoming outer
        # products): dropped at the tensor level (linalg's FoldUnitExtentDims, on the generalized
        # op), the batch tile is a plain 2-D product (a linalg.generic, re-matched in its loop).
        a += f"""    %g{ident} = transform.structured.generalize %a{ident} : ({_ANY}) -> {_ANY}
    transform.apply_patterns to {outer[0]} {{
      transform.apply_patterns.linalg.fold_unit_extent_dims_via_slices
    }} : {_ANY}
    %r{ident} = transform.structured.match ops{{["linalg.generic"]}} in {outer[0]} : ({_ANY}) -> {_ANY}
"""
        tiled = f"%r{ident}"
    else:
        tiled = f"%a{ident}"
    b, _ = _tile(tiled, t2, f"b{ident}")
    c, inner = _tile(f"%b{ident}", t3, f"c{ident}")
    return f"""
    %mm{ident} = transform.structured.match ops{{["{kind}"]}} attributes{{{_MARK} = {ident} : i64}} in %root : ({_ANY}) -> {_ANY}
{a}{b}{c}    transform.structured.vectorize %c{ident} : {_ANY}
    %f{ident} = transform.get_parent_op {inner[0]} {{op_name = "func.func"}} : ({_ANY}) -> {_ANY}
    transform.apply_patterns to %f{ident} {{
      transform.apply_patterns.vector.reduction_to_contract
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
      transform.apply_patterns.canonicalization
    }} : {_ANY}
    transform.apply_cse to %f{ident} : {_ANY}
    transform.loop.hoist_loop_invariant_subsets {inner[0]} : {_ANY}
    transform.apply_patterns to %f{ident} {{
      transform.apply_patterns.vector.lower_contraction lowering_strategy = "outerproduct"
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.vector.lower_transfer max_transfer_rank = 1
      transform.apply_patterns.vector.lower_outerproduct
      transform.apply_patterns.canonicalization
    }} : {_ANY}"""


def _wrap(parts: list[str]) -> str:
    return f"""module attributes {{transform.with_named_sequence}} {{
  transform.named_sequence @__transform_main(%root: {_ANY} {{transform.readonly}}) {{{''.join(parts)}
    transform.yield
  }}
}}"""


def _static_shape(t: ir.Type) -> list[int] | None:
    try:
        rt = ir.RankedTensorType(t)
    except ValueError:
        return None
    if not rt.has_static_shape:
        return None
    return list(rt.shape)


_PLAIN_MAPS = {
    "linalg.matmul": "[affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, "
                     "affine_map<(d0, d1, d2) -> (d0, d1)>]",
    "linalg.batch_matmul": "[affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, "
                           "affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, "
                           "affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]",
}


def _float_itemsize(op: ir.Operation) -> int | None:
    types = {str(ir.RankedTensorType(v.type).element_type) for v in op.operands}
    return {frozenset({"f64"}): 8, frozenset({"f32"}): 4}.get(frozenset(types))


def _eligible(op: ir.Operation) -> tuple[str, list[int], list[int]] | None:
    """(kind, cache tile, register tile) for a contraction the register kernel can block."""
    kind = op.name
    if "indexing_maps" in op.attributes:   # only the plain form, not transposed/broadcast operands
        if str(op.attributes["indexing_maps"]) != _PLAIN_MAPS.get(kind):
            return None
    if len(op.operands) != 3:
        return None
    shapes = [_static_shape(v.type) for v in op.operands]
    itemsize = _float_itemsize(op)
    if None in shapes or itemsize is None:
        return None
    a, b, _ = shapes
    if kind == "linalg.matmul":
        (m, k), (_, n) = a, b
    elif kind == "linalg.batch_matmul":
        (_, m, k), (_, _, n) = a, b
    elif kind == "linalg.vecmat":
        (k,), (_, n) = a, b
        m = 1
    else:
        return None
    p = plan(m, n, k, itemsize) if kind != "linalg.vecmat" else plan(32, n, k, itemsize)
    if p is None:
        return None
    if kind == "linalg.vecmat":             # one row: the whole cache block is one register row
        (_, nc, kc), (_, nr) = p
        return kind, [1, nc, kc], [1, nr]
    return (kind, *p)


def _script_matvec(ident: int) -> str:
    # generalized, so that its payload's adds and muls can carry fast-math flags (module doc)
    return f"""
    %mm{ident} = transform.structured.match ops{{["linalg.matvec"]}} attributes{{{_MARK} = {ident} : i64}} in %root : ({_ANY}) -> {_ANY}
    %g{ident} = transform.structured.generalize %mm{ident} : ({_ANY}) -> {_ANY}"""


def tile_matmuls(module: ir.Module) -> None:
    """Rewrites every eligible contraction of the module (see the module doc)."""
    kinds = {"linalg.matmul", "linalg.batch_matmul", "linalg.vecmat", "linalg.matvec"} \
        if forms_enabled() else {"linalg.matmul"}
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in kinds:
            found.append(op)
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    plans, parts = 0, []
    i64 = ir.IntegerType.get_signless(64, module.context)
    for op in found:
        if op.name == "linalg.matvec":
            if _float_itemsize(op) is None:
                continue
            parts.append(_script_matvec(plans))
        else:
            p = _eligible(op)
            if p is None:
                continue
            parts.append(_script_one(plans, *p))
        op.attributes[_MARK] = ir.IntegerAttr.get(i64, plans)
        plans += 1
    if not plans:
        return
    # Deferred: the transform dialect's bindings take ~24 ms to import; only a matmul to tile needs them.
    from torch_mlir.dialects.transform import interpreter
    script = ir.Module.parse(_wrap(parts), module.context)
    entry = next(op for op in script.body.operations if "sym_name" in op.operation.attributes)
    interpreter.apply_named_sequence(module.operation, entry, script)
    marked: list[ir.Operation] = []
    payload: list[ir.Operation] = []

    def unmark(op: ir.Operation) -> ir.WalkResult:
        if _MARK in op.attributes:
            marked.append(op)
        elif op.name in ("arith.addf", "arith.mulf") and op.parent is not None and op.parent.name == "linalg.generic" \
                and _MARK in op.parent.attributes:
            payload.append(op)
        return ir.WalkResult.ADVANCE
    module.operation.walk(unmark)
    if payload:
        flags = ir.Attribute.parse(_FLAGS)
        for op in payload:
            op.attributes["fastmath"] = flags
    for op in marked:
        del op.attributes[_MARK]
    passmanager.PassManager.parse("builtin.module(canonicalize,cse)", module.context).run(module.operation)


__all__ = ["forms_enabled", "plan", "tile_matmuls"]
