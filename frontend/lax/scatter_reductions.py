"""scatter-mul, scatter-min and scatter-max: the scatters that combine the updates written to one
element by a product, a minimum or a maximum. Their definitions are shared with scatter and
scatter-add in indexing.py, which must sit lower (a gather's transpose is a scatter-add, a batch of
dynamic_update_slices a scatter); nothing there needs these three, so their blocks are here. The
lowering is in sprue.lowering.rules_indexing."""
from __future__ import annotations

import numpy as np

from sprue.interp.ad_util import aval_of, instantiate, is_zero, jvp_rules, vjp_rules, zero_of, zeros_like
from sprue.lax.dimension_numbers import scatter_mode
from sprue.lax.elementwise import add, convert_element_type, div, eq, mul, select
from sprue.lax.elementwise import max as lax_max
from sprue.lax.indexing import (
    _full,
    _gather_back,
    _scatter_operands,
    _scatter_primitive,
    _scatterer,
    _ufunc_at,
    _zero_fill,
    bind_scatter,
    scatter_add_p,
)

# -- scatter-mul: out[e] = x[e] * prod_{p -> e} u_p. The updates' derivative is the product of the ---------
# others (x[e] included): done as reduce_prod's, exact with zeros and repeated indices.
scatter_mul_p = _scatter_primitive("scatter-mul", _ufunc_at(np.multiply, np.logical_and))
scatter_mul = _scatterer(scatter_mul_p)


def _mul_others(operand, indices, updates, dn, mode):
    z = eq(updates, _zero_fill(updates))
    zero = _full(updates, 0)
    us = select(z, _full(updates, 1), updates)
    nz = bind_scatter(scatter_add_p, zeros_like(operand), indices, convert_element_type(z, aval_of(updates).dtype),
                      dn, mode)
    prod = bind_scatter(scatter_mul_p, operand, indices, us, dn, mode)
    nz, prod = (_gather_back(v, operand, indices, updates, dn, mode) for v in (nz, prod))
    at_zero = select(eq(nz, _full(nz, 1)), prod, zero)
    elsewhere = select(eq(nz, zero), div(prod, us), zero)
    return select(z, at_zero, elsewhere)


def _scatter_mul_jvp(primals, tangents, *, dimension_numbers, mode=None, **params):
    operand, indices, updates = primals
    dn = dimension_numbers
    out = scatter_mul_p.bind(*primals, dimension_numbers=dn, mode=mode, **params)
    t = None
    if not is_zero(tangents[0]):
        t = scatter_mul_p.bind(tangents[0], indices, updates, dimension_numbers=dn, mode=mode, **params)
    if not is_zero(tangents[2]):
        smode = scatter_mode(mode)
        tu = mul(tangents[2], _mul_others(operand, indices, updates, dn, smode))
        tu = bind_scatter(scatter_add_p, zeros_like(operand), indices, tu, dn, smode)
        t = tu if t is None else add(t, tu)
    return out, zero_of(out) if t is None else t


def _scatter_mul_vjp(cts, primals, outs, *, dimension_numbers, mode=None, **params):
    operand, indices, updates = primals
    dn, smode = dimension_numbers, scatter_mode(mode)
    ct = instantiate(cts[0], outs[0])
    return [lambda: scatter_mul_p.bind(ct, indices, updates, dimension_numbers=dn, mode=mode, **params), None,
            lambda: mul(_gather_back(ct, operand, indices, updates, dn, smode),
                        _mul_others(operand, indices, updates, dn, smode))]


jvp_rules[scatter_mul_p], vjp_rules[scatter_mul_p] = _scatter_mul_jvp, _scatter_mul_vjp


# -- scatter-min, scatter-max: the derivative of each written element goes to the contenders equal ---------
# to the result (the operand's element and the updates written there), shared evenly among ties.
scatter_min_p = _scatter_primitive("scatter-min", _ufunc_at(np.minimum, np.minimum))
scatter_max_p = _scatter_primitive("scatter-max", _ufunc_at(np.maximum, np.maximum))
scatter_min = _scatterer(scatter_min_p); scatter_max = _scatterer(scatter_max_p)


def _extremum_weights(operand, indices, updates, out, dn, mode):
    """(operand weights, updates weights, number of winners per element, never 0)."""
    dt = aval_of(operand).dtype
    w_operand = convert_element_type(eq(operand, out), dt)
    nan = np.array(np.nan, dt)[()]  # dropped updates read NaN back: they never win
    w_updates = convert_element_type(eq(updates, _gather_back(out, operand, indices, updates, dn, mode, nan)), dt)
    count = add(w_operand, bind_scatter(scatter_add_p, zeros_like(operand), indices, w_updates, dn, mode))
    count = lax_max(count, _full(count, 1))
    return w_operand, w_updates, count


def _scatter_extremum_ad(p):
    def jvp(primals, tangents, *, dimension_numbers, mode=None, **params):
        operand, indices, updates = primals
        dn, smode = dimension_numbers, scatter_mode(mode)
        out = p.bind(*primals, dimension_numbers=dn, mode=mode, **params)
        if is_zero(tangents[0]) and is_zero(tangents[2]):
            return out, zero_of(out)
        t_operand, t_updates = _scatter_operands(tangents, primals)
        wx, wu, count = _extremum_weights(operand, indices, updates, out, dn, smode)
        t = add(mul(wx, t_operand),
                bind_scatter(scatter_add_p, zeros_like(operand), indices, mul(wu, t_updates), dn, smode))
        return out, div(t, count)

    def vjp(cts, primals, outs, *, dimension_numbers, mode=None, **params):
        operand, indices, updates = primals
        dn, smode = dimension_numbers, scatter_mode(mode)
        ct = instantiate(cts[0], outs[0])
        box = []

        def weights():
            if not box:
                wx, wu, count = _extremum_weights(operand, indices, updates, outs[0], dn, smode)
                box.append((wx, wu, div(ct, count)))
            return box[0]

        return [lambda: mul(weights()[2], weights()[0]), None,
                lambda: mul(_gather_back(weights()[2], operand, indices, updates, dn, smode), weights()[1])]
    jvp_rules[p], vjp_rules[p] = jvp, vjp


_scatter_extremum_ad(scatter_min_p)
_scatter_extremum_ad(scatter_max_p)
