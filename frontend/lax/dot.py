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
from sprue.interp.cost import numel
from sprue.ir.core import ShapedArray
from sprue.ir.shapes import format_dim
from sprue.lax._rules import define, is_one, require_equal, same_dtypes
from sprue.lax.elementwise import add, convert_element_type, mul
from sprue.lax.structural import broadcast_in_dim, squeeze, transpose


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


def _dn(dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    return (tuple(int(d) for d in lc), tuple(int(d) for d in rc)), (tuple(int(d) for d in lb), tuple(int(d) for d in rb))


def dot_general(lhs, rhs, dimension_numbers, preferred_element_type=None):
    """The dot_general primitive itself, as JAX's lax.dot_general binds it (`contract` plans one)."""
    return dot_general_p.bind(lhs, rhs, dimension_numbers=_dn(dimension_numbers), precision=None,
                              preferred_element_type=preferred_element_type, out_sharding=None)


# -- contract: a product planned as XLA's simplifier would rewrite it --------------------------------
# The products that sprue.numpy (einsum, matmul, ...) and the transformations (grad's transposed
# dots, vmap's folded batch axes) form go through `contract`, which asks for
# transpose(dot_general(lhs, rhs), permutation) and forms it the cheap way:
# - with nothing to sum (no contracting dims, or only static size-1 ones: an outer product, the
#   per-example `outer(x_i, g_i)` of vmap(grad) or a convolution's 1-channel einsum) it is a
#   broadcast multiply, each operand broadcast straight into the result's order: XLA's
#   AlgebraicSimplifier rewrites such a dot to a multiply too (HandleDot, "dot with no contracting
#   dims"); a matmul kernel with K = 1 would only pay for its packing;
# - otherwise one dot_general, with the operands swapped when that yields the requested order
#   (JAX's einsum tries both orders for the same reason, opt_einsum contracting right to left): the
#   result is (batch, lhs free, rhs free), so `x.T @ g` wanted as (k, m) is dot_general(x, g), not
#   the transpose of dot_general(g, x). Only an order neither operand order gives is transposed.
def contract(lhs, rhs, dimension_numbers, permutation=None, *, preferred_element_type=None, **params):
    """transpose(dot_general(lhs, rhs, dimension_numbers), permutation) (permutation None: the
    identity), as a broadcast multiply where nothing is summed, else one dot_general whose operand
    order avoids the transpose where one does. `params` are dot_general's other parameters."""
    (lc, rc), (lb, rb) = dn = _dn(dimension_numbers)
    la, ra = aval_of(lhs), aval_of(rhs)
    lf, rf = _free(la.ndim, lc, lb), _free(ra.ndim, rc, rb)
    # each result dim, in dot_general's order, as (operand dims it comes from): batch pairs, then free dims
    natural = [((i,), (j,)) for i, j in zip(lb, rb)] + [((d,), ()) for d in lf] + [((), (d,)) for d in rf]
    perm = tuple(range(len(natural))) if permutation is None else tuple(int(p) for p in permutation)
    wanted = [natural[p] for p in perm]
    if all(is_one(la.shape[d]) for d in lc) and preferred_element_type in (None, la.dtype):
        return _broadcast_product(lhs, rhs, lc, rc, wanted)
    kw = {"precision": None, "out_sharding": None, **params, "preferred_element_type": preferred_element_type}
    swapped_natural = [((i,), (j,)) for i, j in zip(lb, rb)] + [((), (d,)) for d in rf] + [((d,), ()) for d in lf]
    if wanted != natural and wanted == swapped_natural:
        return dot_general_p.bind(rhs, lhs, dimension_numbers=((rc, lc), (rb, lb)), **kw)
    out = dot_general_p.bind(lhs, rhs, dimension_numbers=dn, **kw)
    return out if perm == tuple(range(len(perm))) else transpose(out, perm)


def _broadcast_product(lhs, rhs, lc, rc, wanted):
    """lhs * rhs with the (size-1) contracting dims dropped, each broadcast into the result dims
    `wanted` ((lhs dims, rhs dims) that each result dim comes from)."""
    shape, sides = [], []
    for k, (x, c, which) in enumerate(((lhs, lc, 0), (rhs, rc, 1))):
        xa = aval_of(x)
        if c:
            x = squeeze(x, c)
        kept = [d for d in range(xa.ndim) if d not in c]
        # result position of each kept dim, and the kept dims in result order
        where = {src[which][0]: pos for pos, src in enumerate(wanted) if src[which]}
        order = sorted(range(len(kept)), key=lambda i: where[kept[i]])
        if order != list(range(len(kept))):
            x = transpose(x, order)
        sides.append((x, tuple(where[kept[i]] for i in order)))
        if k == 0:
            shape = [xa.shape[src[0][0]] if src[0] else None for src in wanted]
        else:
            shape = [s if s is not None else xa.shape[src[1][0]] for s, src in zip(shape, wanted)]
    return mul(*(broadcast_in_dim(x, tuple(shape), dims) for x, dims in sides))


# dot_general is bilinear: its tangent is dot(t_lhs, rhs) + dot(lhs, t_rhs), its cotangents are
# dot_generals of the output's cotangent with the other operand, transposed into place (as JAX's
# _dot_general_transpose_lhs/rhs). Operands must share one dtype here, so with a
# preferred_element_type the other operand is converted to the cotangent's dtype and the result
# back to the operand's.


def _dot_general_jvp(primals, tangents, dimension_numbers, **params):
    lhs, rhs = primals
    tl, tr = tangents
    out = dot_general_p.bind(lhs, rhs, dimension_numbers=dimension_numbers, **params)
    if not dtypes.is_float(aval_of(out).dtype):
        return out, zero_of(out)
    terms = []
    if not is_zero(tl):
        terms.append(contract(tl, rhs, dimension_numbers, **params))
    if not is_zero(tr):
        terms.append(contract(lhs, tr, dimension_numbers, **params))
    if not terms:
        return out, zero_of(out)
    return out, terms[0] if len(terms) == 1 else add(*terms)


def _dot_transpose_lhs(g, x, y, dimension_numbers, swap_ans: bool = False):
    """The cotangent of x in dot_general(x, y) (of y in dot_general(y, x) when swap_ans): the
    cotangent contracted with y over y's free dims, its dims put in x's order by `contract` (an
    operand swap or a broadcast product where one avoids the transpose)."""
    (xc, yc), (xb, yb) = dimension_numbers
    xa, ya = aval_of(x), aval_of(y)
    x_kept, y_kept = _free(xa.ndim, xc, xb), _free(ya.ndim, yc, yb)
    nb = len(xb)
    first_y = nb if swap_ans else nb + len(x_kept)
    dims = ((tuple(range(first_y, first_y + len(y_kept))), tuple(y_kept)), (tuple(range(nb)), tuple(yb)))
    xc_by_y = [xc[i] for i in np.argsort(yc, kind="stable")]
    out_axes = tuple(int(i) for i in np.argsort(list(xb) + x_kept + xc_by_y, kind="stable"))
    gd = aval_of(g).dtype
    r = contract(g, y if ya.dtype == gd else convert_element_type(y, gd), dims, out_axes)
    return r if gd == xa.dtype else convert_element_type(r, xa.dtype)


def _dot_general_vjp(cts, primals, outs, *, dimension_numbers, **params):
    (g,), (x, y) = cts, primals
    (xc, yc), (xb, yb) = dimension_numbers
    swapped = ((yc, xc), (yb, xb))
    return [lambda: _dot_transpose_lhs(g, x, y, dimension_numbers),
            lambda: _dot_transpose_lhs(g, y, x, swapped, swap_ans=True)]


def _dot_general_batch(args, dims, *, dimension_numbers, **params):
    """Both operands batched: the batch axis is a batch dimension. One operand batched: as JAX's
    _dot_general_batch_rule, the axis is one more free dimension of that operand (vmap of x @ W
    with W unbatched is one (n*..., k) @ (k, m) matmul, no batched product of a broadcast W),
    asked of `contract` at the result's front (for a batched rhs, W @ x_i, the operands swap:
    x @ W.T needs no transpose of the result)."""
    (lhs, rhs), (dl, dr) = args, dims
    (lc, rc), (lb, rb) = dimension_numbers

    def up(axes):
        return tuple(a + 1 for a in axes)
    if dl is not None and dr is not None:
        dn = ((up(lc), up(rc)), ((0, *up(lb)), (0, *up(rb))))
        return contract(lhs, rhs, dn, **params), 0
    if dl is not None:
        dn = ((up(lc), tuple(rc)), (up(lb), tuple(rb)))
        pos = len(lb)                                    # the first free dimension of lhs
    else:
        dn = ((tuple(lc), up(rc)), (tuple(lb), up(rb)))
        pos = len(lb) + len(_free(aval_of(lhs).ndim, lc, lb))   # the first free dimension of rhs
    nout = aval_of(lhs).ndim + aval_of(rhs).ndim - len(lb) - 2 * len(lc)   # batch dims appear once
    perm = (pos, *(d for d in range(nout) if d != pos))
    return contract(lhs, rhs, dn, perm, **params), 0


def _dot_general_cost(in_avals, out_avals, *, dimension_numbers, **params):
    """A multiply and an add per contracted term of every output element: 2*M*N*K for a matmul."""
    if not (dtypes.is_float(in_avals[0].dtype) or dtypes.is_float(out_avals[0].dtype)):
        return 0
    (lc, _), _ = dimension_numbers
    return 2 * numel(out_avals[0]) * int(math.prod(in_avals[0].shape[d] for d in lc))


jvp_rules[dot_general_p], vjp_rules[dot_general_p] = _dot_general_jvp, _dot_general_vjp
batch_rules[dot_general_p], cost_rules[dot_general_p] = _dot_general_batch, _dot_general_cost
