"""dot_general: contraction over named dimensions with batch dimensions (JAX's
dimension_numbers = ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))).
The result is batch dims, then lhs free dims, then rhs free dims. Its shape rule and numpy
reference, the function that binds it, its jvp, vjp, batching and cost rules (tables in
sprue.interp.ad_util); the lowering is in sprue.lowering.rules_reductions."""
from __future__ import annotations

import math

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueValueError
from sprue.interp.ad_util import aval_of, batch_rules, cost_rules, is_zero, jvp_rules, vjp_rules, zero_of
from sprue.interp.batching import move_batch_axis
from sprue.interp.cost import numel
from sprue.ir.core import ShapedArray
from sprue.ir.shapes import format_dim
from sprue.lax._rules import define, require_equal, same_dtypes
from sprue.lax.elementwise import add, convert_element_type
from sprue.lax.structural import transpose


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


def dot_general(lhs, rhs, dimension_numbers, preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dn, precision=None,
                              preferred_element_type=preferred_element_type, out_sharding=None)


# dot_general is bilinear: its tangent is dot(t_lhs, rhs) + dot(lhs, t_rhs), its cotangents are
# dot_generals of the output's cotangent with the other operand, transposed into place (as JAX's
# _dot_general_transpose_lhs/rhs). Operands must share one dtype here, so with a
# preferred_element_type the other operand is converted to the cotangent's dtype and the result
# back to the operand's.


def _dot_general_jvp(primals, tangents, **params):
    lhs, rhs = primals
    tl, tr = tangents
    out = dot_general_p.bind(lhs, rhs, **params)
    if not dtypes.is_float(aval_of(out).dtype):
        return out, zero_of(out)
    terms = []
    if not is_zero(tl):
        terms.append(dot_general_p.bind(tl, rhs, **params))
    if not is_zero(tr):
        terms.append(dot_general_p.bind(lhs, tr, **params))
    if not terms:
        return out, zero_of(out)
    return out, terms[0] if len(terms) == 1 else add(*terms)


def _dot_transpose_lhs(g, x, y, dimension_numbers, swap_ans: bool = False):
    """The cotangent of x in dot_general(x, y) (of y in dot_general(y, x) when swap_ans)."""
    (xc, yc), (xb, yb) = dimension_numbers
    xa, ya = aval_of(x), aval_of(y)
    x_kept, y_kept = _free(xa.ndim, xc, xb), _free(ya.ndim, yc, yb)
    nb = len(xb)
    first_y = nb if swap_ans else nb + len(x_kept)
    dims = ((tuple(range(first_y, first_y + len(y_kept))), tuple(y_kept)), (tuple(range(nb)), tuple(yb)))
    xc_by_y = [xc[i] for i in np.argsort(yc, kind="stable")]
    out_axes = tuple(int(i) for i in np.argsort(list(xb) + x_kept + xc_by_y, kind="stable"))
    gd = aval_of(g).dtype
    r = dot_general(g, y if ya.dtype == gd else convert_element_type(y, gd), dims)
    if out_axes != tuple(range(len(out_axes))):
        r = transpose(r, out_axes)
    return r if gd == xa.dtype else convert_element_type(r, xa.dtype)


def _dot_general_vjp(cts, primals, outs, *, dimension_numbers, **params):
    (g,), (x, y) = cts, primals
    (xc, yc), (xb, yb) = dimension_numbers
    swapped = ((yc, xc), (yb, xb))
    return [lambda: _dot_transpose_lhs(g, x, y, dimension_numbers),
            lambda: _dot_transpose_lhs(g, y, x, swapped, swap_ans=True)]


def _dot_general_batch(args, dims, *, dimension_numbers, **params):
    """The batch axis becomes a batch dimension (both operands batched) or a free dimension of
    its operand, moved to the front of the result."""
    (lhs, rhs), (dl, dr) = args, dims
    (lc, rc), (lb, rb) = dimension_numbers

    def up(axes):
        return tuple(a + 1 for a in axes)
    if dl is not None and dr is not None:
        dn = ((up(lc), up(rc)), ((0, *up(lb)), (0, *up(rb))))
        return dot_general_p.bind(lhs, rhs, dimension_numbers=dn, **params), 0
    if dl is not None:
        dn = ((up(lc), tuple(rc)), (up(lb), tuple(rb)))
        pos = len(lb)                                    # the first free dimension of lhs
    else:
        dn = ((tuple(lc), up(rc)), (tuple(lb), up(rb)))
        pos = len(lb) + len(_free(aval_of(lhs).ndim, lc, lb))   # the first free dimension of rhs
    out = dot_general_p.bind(lhs, rhs, dimension_numbers=dn, **params)
    return move_batch_axis(out, pos, None, 0), 0


def _dot_general_cost(in_avals, out_avals, *, dimension_numbers, **params):
    """A multiply and an add per contracted term of every output element: 2*M*N*K for a matmul."""
    if not (dtypes.is_float(in_avals[0].dtype) or dtypes.is_float(out_avals[0].dtype)):
        return 0
    (lc, _), _ = dimension_numbers
    return 2 * numel(out_avals[0]) * int(math.prod(in_avals[0].shape[d] for d in lc))


jvp_rules[dot_general_p], vjp_rules[dot_general_p] = _dot_general_jvp, _dot_general_vjp
batch_rules[dot_general_p], cost_rules[dot_general_p] = _dot_general_batch, _dot_general_cost
