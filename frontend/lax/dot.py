"""dot_general: contraction over named dimensions with batch dimensions (JAX's
dimension_numbers = ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))).
The result is batch dims, then lhs free dims, then rhs free dims."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..core import ShapedArray
from ..errors import SprueTypeError, SprueValueError
from ..shapes import format_dim
from ._rules import define, require_equal, same_dtypes


def _free(ndim, contract, batch):
    return [d for d in range(ndim) if d not in contract and d not in batch]


def _dot_general_rule(lhs: ShapedArray, rhs: ShapedArray, *, dimension_numbers, precision=None,
                      preferred_element_type=None, out_sharding=None):
    (lc, rc), (lb, rb) = dimension_numbers
    same_dtypes("dot_general", lhs, rhs)
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise SprueValueError(f"dot_general: mismatched dimension numbers {dimension_numbers}")
    for a, b, what in ((lc, rc, "contracting"), (lb, rb, "batch")):
        for i, j in zip(a, b):
            if not (0 <= i < lhs.ndim and 0 <= j < rhs.ndim):
                raise SprueValueError(f"dot_general: {what} dimension out of range in {dimension_numbers}")
            require_equal(lhs.shape[i], rhs.shape[j],
                          f"dot_general: {what} dimensions disagree: {lhs.str_short()} axis {i} has size"
                          f" {format_dim(lhs.shape[i])}, {rhs.str_short()} axis {j} has size"
                          f" {format_dim(rhs.shape[j])}")
    shape = ([lhs.shape[d] for d in lb] + [lhs.shape[d] for d in _free(lhs.ndim, lc, lb)]
             + [rhs.shape[d] for d in _free(rhs.ndim, rc, rb)])
    out_dtype = dtypes.canonicalize(preferred_element_type) if preferred_element_type is not None else lhs.dtype
    return ShapedArray(tuple(shape), out_dtype)


def _dot_general_impl(lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None,
                      out_sharding=None):
    (lc, rc), (lb, rb) = dimension_numbers
    out_dtype = np.dtype(preferred_element_type) if preferred_element_type is not None else lhs.dtype
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    ls = [None] * lhs.ndim
    rs = [None] * rhs.ndim
    for i, j in zip(lb, rb):
        ls[i] = rs[j] = next(letters)
    for i, j in zip(lc, rc):
        ls[i] = rs[j] = next(letters)
    for i in range(lhs.ndim):
        ls[i] = ls[i] or next(letters)
    for j in range(rhs.ndim):
        rs[j] = rs[j] or next(letters)
    out = [ls[i] for i in lb] + [ls[i] for i in _free(lhs.ndim, lc, lb)] + [rs[j] for j in _free(rhs.ndim, rc, rb)]
    calc = np.int64 if lhs.dtype == bool else None
    res = np.einsum(f"{''.join(ls)},{''.join(rs)}->{''.join(out)}", lhs.astype(calc) if calc else lhs,
                    rhs.astype(calc) if calc else rhs)
    return (res != 0) if out_dtype == bool else res.astype(out_dtype)


dot_general_p = define("dot_general", _dot_general_rule, _dot_general_impl)
