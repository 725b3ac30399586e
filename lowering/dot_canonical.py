"""Every float dot_general as one of four contractions the matmul kernel knows (matmul.py).

stablehlo-legalize-to-linalg maps a dot_general to linalg.matmul / batch_matmul / matvec / vecmat
only in their canonical layouts (batch dims leading, lhs contracting last, rhs contracting first);
any other (the transposed products that `grad` and `vmap` produce: `g @ b.T` is contracting [1] x [1],
`a.T @ g` is [0] x [0]) becomes a linalg.generic that only the scalar loops run. So, as XLA's
DotDecomposer canonicalizes dots before its GEMM emitter, each operand is transposed into
(batch, free, contracting) / (batch, contracting, free) order and reshaped to rank <= 3:

    lhs (B, M, K) @ rhs (B, K, N) -> (B, M, N), reshaped back to (batch..., lhs free..., rhs free...)

The transpose is a packing copy, O(size) against the product's O(M N K); none is made where the
layout already fits. A product with a vector side (no free dims on one side, no batch) keeps the
matrix as it is: A (m, k) . x is matvec, A (k, m) . x is vecmat(x, A) (the operands swap; the
result's order is the same), so A^T x costs no transpose of A. Run-time sizes are supported where
no two dims are merged (a merge would need a dynamic_reshape): otherwise the dot stays as it was.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo

from sprue.lowering.rules_common import (
    DYNAMIC,
    Value,
    dtype_of,
    i64s,
    op1,
    reshape,
    shape_of,
    tensor_type,
)


def _dot(lhs: Value, rhs: Value, lc: Sequence[int], rc: Sequence[int], lb: Sequence[int], rb: Sequence[int],
         out_shape: Sequence[int]) -> Value:
    dims = _stablehlo.DotDimensionNumbers.get(
        lhs_batching_dimensions=list(lb), rhs_batching_dimensions=list(rb),
        lhs_contracting_dimensions=list(lc), rhs_contracting_dimensions=list(rc))
    return op1("stablehlo.dot_general", [lhs, rhs], tensor_type(out_shape, dtype_of(lhs)),
               {"dot_dimension_numbers": dims})


def _transpose(x: Value, perm: list[int]) -> Value:
    if perm == sorted(perm):
        return x
    shape = shape_of(x)
    t = ir.RankedTensorType.get([shape[p] for p in perm], ir.RankedTensorType(x.type).element_type)
    return op1("stablehlo.transpose", [x], t, {"permutation": i64s(perm)})


def _merged(shape: Sequence[int], groups: Sequence[Sequence[int]]) -> list[int] | None:
    """Sizes of each group of consecutive dims merged into one; None if a group of two or more
    holds a run-time size (merging it would need a dynamic_reshape)."""
    out, at = [], 0
    for g in groups:
        sizes = list(shape[at:at + len(g)])
        at += len(g)
        if len(sizes) == 1:
            out.append(sizes[0])
        elif DYNAMIC in sizes:
            return None
        else:
            out.append(math.prod(sizes))
    return out


def _emit_reshape(x: Value, shape: list[int]) -> Value:
    return x if list(shape_of(x)) == list(shape) else reshape(x, shape)


def _with_vector(lhs: Value, rhs: Value, lc: list[int], rc: list[int], lf: list[int], rf: list[int],
                 out_shape: list[int]) -> Value | None:
    """No batch dims and one side without free dims: matvec or vecmat, the matrix untransposed
    where its layout allows."""
    mat_is_lhs = bool(lf)
    mat, vec, mc, vc, mf = (lhs, rhs, lc, rc, lf) if mat_is_lhs else (rhs, lhs, rc, lc, rf)
    rank = len(mf) + len(mc)
    if mf + mc == list(range(rank)):
        perm, matvec = None, True                    # (free, contracting): A x
    elif mc + mf == list(range(rank)):
        perm, matvec = None, False                   # (contracting, free): x A
    else:
        perm, matvec = mf + mc, True
    mshape = shape_of(mat) if perm is None else [shape_of(mat)[p] for p in perm]
    groups = [mf, mc] if matvec else [mc, mf]
    msizes = _merged(mshape, groups)
    vshape = [shape_of(vec)[d] for d in vc]
    ksize = _merged(vshape, [vc])
    if msizes is None or ksize is None:
        return None
    if len(mf) == 1 and len(mc) == 1 and perm is None and matvec == mat_is_lhs:
        return None                                  # already linalg.matvec / linalg.vecmat
    free = msizes[0] if matvec else msizes[1]
    if [free] != list(out_shape) and DYNAMIC in out_shape:
        return None
    m = _emit_reshape(mat if perm is None else _transpose(mat, perm), msizes)
    v = _emit_reshape(_transpose(vec, list(vc)), ksize)
    out = _dot(m, v, [1], [0], [], [], [free]) if matvec else _dot(v, m, [0], [0], [], [], [free])
    return _emit_reshape(out, out_shape)


def canonical_dot(lhs: Value, rhs: Value, lc: Sequence[int], rc: Sequence[int], lb: Sequence[int],
                  rb: Sequence[int], out_shape: Sequence[int]) -> Value | None:
    """The dot_general of float operands (already of the result's dtype) in canonical form, or
    None where it already is canonical or cannot be made so (see the module doc). `out_shape`
    writes a run-time size as DYNAMIC."""
    if dtype_of(lhs) not in (np.dtype(np.float32), np.dtype(np.float64)):
        return None
    lc, rc, lb, rb, out_shape = list(lc), list(rc), list(lb), list(rb), list(out_shape)
    lrank, rrank = len(shape_of(lhs)), len(shape_of(rhs))
    lf = [d for d in range(lrank) if d not in lc and d not in lb]
    rf = [d for d in range(rrank) if d not in rc and d not in rb]
    if not lc or (not lb and not lf and not rf):
        return None                                  # an outer product or a dot product
    if not lb and (not lf or not rf):
        return _with_vector(lhs, rhs, lc, rc, lf, rf, out_shape)
    # (batch, free, contracting) @ (batch, contracting, free)
    lperm, rperm = lb + lf + lc, rb + rc + rf
    if lperm == list(range(lrank)) and rperm == list(range(rrank)) and len(lb) <= 1 \
            and len(lf) == 1 and len(rf) == 1 and len(lc) == 1:
        return None                                  # already linalg.matmul / batch_matmul
    lshape, rshape = [shape_of(lhs)[p] for p in lperm], [shape_of(rhs)[p] for p in rperm]
    lsizes = _merged(lshape, [g for g in (lb, lf, lc) if g])
    rsizes = _merged(rshape, [g for g in (rb, rc, rf) if g])
    if lsizes is None or rsizes is None:
        return None
    if not lf:
        lsizes.insert(len(lsizes) - 1, 1)            # (B, 1, K)
    if not rf:
        rsizes.append(1)                             # (B, K, 1)
    nb = 1 if lb else 0
    result = lsizes[:nb] + [lsizes[nb], rsizes[-1]]
    if result != out_shape and DYNAMIC in out_shape:
        return None
    lt = _emit_reshape(_transpose(lhs, lperm), lsizes)
    rt = _emit_reshape(_transpose(rhs, rperm), rsizes)
    out = _dot(lt, rt, [nb + 1], [nb], list(range(nb)), list(range(nb)), result)
    return _emit_reshape(out, out_shape)


__all__ = ["canonical_dot"]
