"""erf_inv as XLA computes it on CPU (xla/hlo/builder/lib/math.cc, ErfInv32 and ErfInv64: M. Giles,
"Approximating the erfinv function", GPU Computing Gems, 2011), composed of sprue.lax operations,
so that sprue.random.normal gives JAX's numbers to the last bit or two. Private to sprue.random:
a user-facing erf_inv primitive belongs with erf in sprue.lax (issue 15).
"""
from __future__ import annotations

import numpy as np

from sprue import lax

# float32: w = -log1p(-x*x) below 5 (in w - 2.5) and above (in sqrt(w) - 3)
_F32 = (5.0, (2.5, False), (3.0, True), (
    (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
     -0.00417768164, 0.246640727, 1.50140941),
    (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
     0.00943887047, 1.00167406, 2.83297682)))

# float64: three ranges, below 6.25 (w - 3.125), below 16 (sqrt(w) - 3.25), above (sqrt(w) - 5)
_F64_LT_6_25 = (
    -3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
    1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
    6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
    2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
    1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
    4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
    0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
    0.24015818242558961693, 1.6536545626831027356)
_F64_LT_16 = (
    2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
    1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
    2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
    6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
    0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
    -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
    3.0838856104922207635)
_F64_GE_16 = (
    -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
    -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
    2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
    -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
    7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
    1.0103004648645343977, 4.8499064014085844221)


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
