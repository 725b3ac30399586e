"""A product's rows scaled after the product, not before: `(e / s[:, None]) @ v` computed as
`(e @ v) / s[:, None]`.

Softmax's normalization divides every one of the n x n scores by its row's sum, and the product
with v then reads them: a pass over the scores (and their division) that, moved after the product,
becomes a pass over the n x d result instead (attention: 256 x 256 scores, 256 x 64 result). A row
factor commutes with the product over the row's elements, so the two are equal up to rounding
(FlashAttention defers the normalization the same way).

`defer_row_scaling` rewrites a linalg.generic dividing (or multiplying) an array elementwise by a
value that does not vary along its last axis, whose only reader is a matmul or batch_matmul taking
it as the left operand, read in (batch, row, k) order, and accumulating into zeros (not into another array,
which the factor would scale too). The product then reads the unscaled array and the same generic,
with the same maps, scales the product's result.

Runs on tensors at the end of the linalg stage, after elementwise fusion; SPRUE_FUSION=0 turns it
off with the other fusion rewrites.
"""
from __future__ import annotations

from torch_mlir import ir

from sprue.lowering.fusion import _Defs, _dim_position, _is_zero_fill, _maps, _n_outs, _payload, enabled
from sprue.lowering.matmul_operands import transposed
from sprue.lowering.mlir_util import as_operation, empty_like

_PRODUCTS = {"linalg.matmul": 2, "linalg.batch_matmul": 3}
_SCALINGS = ("arith.divf", "arith.mulf")


def _row_scaling(op: ir.Operation) -> bool:
    """A generic `x / f` or `x * f`: x read whole (identity map), f not along the last axis."""
    if op.name != "linalg.generic" or len(op.results) != 1 or _n_outs(op) != 1 or len(op.operands) != 3:
        return False
    if "reduction" in str(op.attributes["iterator_types"]):
        return False
    payload = _payload(op)
    if len(payload) != 2 or payload[0].name not in _SCALINGS:
        return False
    block = op.regions[0].blocks[0]
    if list(payload[0].operands) != [block.arguments[0], block.arguments[1]] or \
            list(payload[1].operands) != [payload[0].results[0]]:
        return False
    x_map, f_map, _ = _maps(op)
    rank = x_map.n_dims
    if [_dim_position(e) for e in x_map.results] != list(range(rank)):
        return False
    f_dims = [_dim_position(e) for e in f_map.results]
    return rank - 1 not in f_dims and all(d is not None or isinstance(e.maybe_downcast(), ir.AffineConstantExpr)
                                          for d, e in zip(f_dims, f_map.results))


def _product_reading(defs: _Defs, op: ir.Operation) -> ir.Operation | None:
    """The plain matmul or batch_matmul reading `op`'s result as its left operand, its only reader."""
    uses = list(op.results[0].uses)
    if len(uses) != 1 or uses[0].operand_number != 0:
        return None
    product = as_operation(uses[0].owner)
    rank = _PRODUCTS.get(product.name)
    if rank is None or len(product.operands) != 3:
        return None
    reads = transposed(product) if "indexing_maps" in product.attributes else (False, False)
    if reads is None or reads[0]:          # A read in another order than (batch, row, k)
        return None
    if ir.RankedTensorType(op.results[0].type).rank != rank or not _is_zero_fill(defs, product.operands[2]):
        return None
    return product


def _defer(scale: ir.Operation, product: ir.Operation) -> None:
    """`product` reads `scale`'s unscaled input; a copy of `scale` scales the product's result."""
    x, factor, _ = scale.operands
    ip = ir.InsertionPoint.after(product)
    with product.location, ip:
        init = empty_like(product.operands[2])   # (sizes from the product's init, not its result)
        scaled = as_operation(scale.clone(ip=ip))
    product.operands[0] = x
    scaled.operands[0] = product.results[0]
    scaled.operands[1] = factor
    scaled.operands[2] = init
    scaled.results[0].set_type(product.results[0].type)
    product.results[0].replace_all_uses_except(scaled.results[0], scaled)
    scale.erase()


def defer_row_scaling(module: ir.Module) -> int:
    """Row factors moved after the products that read the scaled arrays (see the module doc);
    returns how many."""
    if not enabled():
        return 0
    moved = 0
    defs = _Defs(module.operation)
    for op in [op for op in defs.ops if _row_scaling(op)]:
        product = _product_reading(defs, op)
        if product is not None:
            defs.forget(op)   # (erased by _defer)
            _defer(op, product)
            moved += 1
    return moved


__all__ = ["defer_row_scaling"]
