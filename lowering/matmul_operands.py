"""How a matmul reads its operands: the indexing maps of its plain and transposed forms, and the
folds that make a product read a transposed operand in place instead of dot_canonical.py's
transposed copy (matmul.py tiles the products).

dot_canonical.py puts every dot_general into (batch, free, contracting) x (batch, contracting,
free) order, as XLA's DotDecomposer does, with a stablehlo.transpose where an operand's layout
does not fit; stablehlo-legalize-to-linalg turns that transpose into a linalg.generic that only
copies (is_transpose). The folds below drop that copy where the kernel reads the operand better
as it is stored:
  - a transposed A (`a.T @ b`, `x.T @ g` in a gradient): every matmul, packed or not, reads A
    through its indexing map (fold_lhs_transposes);
  - a transposed B (`a @ b.T`, attention's `q @ swapaxes(k, -1, -2)`, `einsum('bqd,bkd->bqk')`):
    only packed products, whose packing copy reads B (N, K) into its NR-column panels as it is
    (fold_rhs_transpose); the unpacked kernel would gather NR strided values per k.
"""
from __future__ import annotations

from torch_mlir import ir

from sprue.lowering.mlir_util import LOOP_OPS, as_operation, defined_inside

LHS_T_MAPS = ("[affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d2, d1)>, "
              "affine_map<(d0, d1, d2) -> (d0, d1)>]")
# (lhs, rhs) transposed -> a matmul's indexing maps; only packed products read a transposed B
MATMUL_MAPS = {
    (False, False): "[affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, "
                    "affine_map<(d0, d1, d2) -> (d0, d1)>]",
    (True, False): LHS_T_MAPS,
    (False, True): "[affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, "
                   "affine_map<(d0, d1, d2) -> (d0, d1)>]",
    (True, True): "[affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d1, d2)>, "
                  "affine_map<(d0, d1, d2) -> (d0, d1)>]",
}
PLAIN_MAPS = {
    "linalg.matmul": MATMUL_MAPS[(False, False)],
    "linalg.batch_matmul": "[affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, "
                           "affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, "
                           "affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]",
}
# a batch_matmul reading B (b, N, K): linalg.batch_matmul's `indexing_maps` (MLIR's
# batch_matmul_transpose_b, as maps), packed only
BATCH_RHS_T_MAPS = ("[affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, "
                    "affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]")
# a copy into the transpose of a matrix, or of each matrix of a batch (permutation (0, 2, 1))
_TRANSPOSE_MAPS = {
    False: "[affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>]",
    True: "[affine_map<(d0, d1, d2) -> (d0, d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>]",
}


def transposed(op: ir.Operation) -> tuple[bool, bool] | None:
    """Which operands of a linalg.matmul or batch_matmul its indexing maps read transposed, or
    None for other maps (a batch_matmul's A is never read transposed)."""
    maps = str(op.attributes["indexing_maps"])
    if op.name == "linalg.batch_matmul":
        return {PLAIN_MAPS[op.name]: (False, False), BATCH_RHS_T_MAPS: (False, True)}.get(maps)
    return next((key for key, known in MATMUL_MAPS.items() if maps == known), None)


def is_transpose(op: ir.Operation, batch: bool = False) -> bool:
    """A linalg.generic that only copies a matrix (each matrix of a batch) into its transpose
    (what stablehlo.transpose becomes)."""
    if op.name != "linalg.generic" or len(op.operands) != 2:
        return False
    if str(op.attributes["indexing_maps"]) != _TRANSPOSE_MAPS[batch]:
        return False
    body = op.regions[0].blocks[0]
    ops = list(body.operations)
    return len(ops) == 1 and ops[0].name == "linalg.yield" and ops[0].operands[0] == body.arguments[0]


def _producer(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    if not isinstance(owner, ir.Operation) and hasattr(owner, "operation"):
        owner = owner.operation
    return owner if isinstance(owner, ir.Operation) else None


def fixed_across_loop(value: ir.Value, op: ir.Operation) -> bool:
    """Whether `value` (seen through a transposed copy) is defined outside the innermost loop
    enclosing `op`: the same B on every trip (a recurrent scan's weights), which a packed
    product would pack again on every trip. False outside loops."""
    loop = op.parent
    while loop is not None and loop.name not in LOOP_OPS:
        if loop.name == "func.func":
            return False
        loop = loop.parent
    if loop is None:
        return False
    producer = None if isinstance(value.owner, ir.Block) else as_operation(value.owner)
    if producer is not None and is_transpose(producer, op.name == "linalg.batch_matmul"):
        return fixed_across_loop(producer.operands[0], op)
    return not defined_inside(value, loop)


def fold_lhs_transposes(found: list[ir.Operation]) -> None:
    """A matmul of a transposed A (`a.T @ b`, `x.T @ g` in a gradient: dot_canonical.py transposes
    the lhs into canonical order) reads the untransposed A through its indexing map instead of a
    transposed copy: the register kernel's MR values of A per k are then one contiguous row of it,
    the layout BLIS packs A into."""
    maps = None
    for op in found:
        if op.name != "linalg.matmul" or str(op.attributes["indexing_maps"]) != PLAIN_MAPS["linalg.matmul"]:
            continue
        producer = _producer(op.operands[0])
        if producer is None or not is_transpose(producer):
            continue
        maps = maps or ir.Attribute.parse(LHS_T_MAPS)
        op.operands[0] = producer.operands[0]
        op.attributes["indexing_maps"] = maps


def fold_rhs_transpose(op: ir.Operation) -> ir.Operation | None:
    """A packed matmul of a transposed B (`a @ b.T`, `g @ w.T` in a gradient) or a packed
    batch_matmul of a batch-transposed B (attention's `q @ swapaxes(k, -1, -2)`) packs B's panels
    straight from the untransposed B (N, K), per batch element (b, N, K): one copy, not
    dot_canonical.py's transpose and then the packing copy. Other users of the transposed copy
    keep it. Returns the copy, or None where B was no transposed copy."""
    batch = op.name == "linalg.batch_matmul"
    producer = _producer(op.operands[1])
    if producer is None or not is_transpose(producer, batch) or transposed(op) is None:
        return None
    lhs_t, _ = transposed(op)
    op.operands[1] = producer.operands[0]
    op.attributes["indexing_maps"] = ir.Attribute.parse(BATCH_RHS_T_MAPS if batch else MATMUL_MAPS[(lhs_t, True)])
    return producer


__all__ = ["BATCH_RHS_T_MAPS", "LHS_T_MAPS", "MATMUL_MAPS", "PLAIN_MAPS", "fixed_across_loop", "fold_lhs_transposes",
           "fold_rhs_transpose", "is_transpose", "transposed"]
