"""erf_inv as XLA computes it on CPU (xla/hlo/builder/lib/math.cc, ErfInv32 and ErfInv64: M. Giles,
"Approximating the erfinv function", GPU Computing Gems, 2011), composed of sprue.lax operations,
so that sprue.random.normal gives JAX's numbers to the last bit or two. Private to sprue.random:
a user-facing erf_inv primitive belongs with erf in sprue.lax (issue 15).
"""
from __future__ import annotations

import numpy as np

from sprue import lax
from sprue.lax.special import ERF_INV_F64_GE_16 as _F64_GE_16
from sprue.lax.special import ERF_INV_F64_LT_6_25 as _F64_LT_6_25
from sprue.lax.special import ERF_INV_F64_LT_16 as _F64_LT_16

# float32: w = -log1p(-x*x) below 5 (in w - 2.5) and above (in sqrt(w) - 3)
_F32 = (5.0, (2.5, False), (3.0, True), (
    (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
     -0.00417768164, 0.246640727, 1.50140941),
    (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
     0.00943887047, 1.00167406, 2.83297682)))

def _pad(cs, n):
    """XLA evaluates every range's polynomial at the longest degree, the shorter ones led by zeros."""
    return (0.0,) * (n - len(cs)) + tuple(cs)


def _full(like, v):
    return lax.broadcast_in_dim(v, tuple(like.shape), ())


def erf_inv(x):
    """The inverse error function of a float32 or float64 array, elementwise (±1 give ±inf)."""
    dtype = np.dtype(x.dtype)
    c = lambda v: np.array(v, dtype)[()]   # noqa: E731  (a constant in x's dtype)
    w = lax.neg(lax.log1p(lax.neg(lax.mul(x, x))))
    if dtype == np.float32:
        limit, (shift_lo, _), (shift_hi, _), (lo, hi) = _F32
        small = lax.lt(w, c(limit))
        shifted = lax.select(small, lax.sub(w, c(shift_lo)), lax.sub(lax.sqrt(w), c(shift_hi)))
        coefficients = [lax.select(small, _full(w, c(a)), _full(w, c(b))) for a, b in zip(lo, hi)]
    else:
        n = len(_F64_LT_6_25)
        small, mid = lax.lt(w, c(6.25)), lax.lt(w, c(16.0))
        root = lax.sqrt(w)
        shifted = lax.select(small, lax.sub(w, c(3.125)),
                             lax.select(mid, lax.sub(root, c(3.25)), lax.sub(root, c(5.0))))
        coefficients = [lax.select(small, _full(w, c(a)), lax.select(mid, _full(w, c(b)),
                                                                              _full(w, c(d))))
                        for a, b, d in zip(_F64_LT_6_25, _pad(_F64_LT_16, n), _pad(_F64_GE_16, n))]
    p = coefficients[0]
    for k in coefficients[1:]:
        p = lax.add(k, lax.mul(p, shifted))
    edge = lax.eq(lax.abs(x), c(1.0))
    return lax.select(edge, lax.mul(x, c(np.inf)), lax.mul(p, x))
