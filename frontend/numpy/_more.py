"""More of numpy's functions (issue 18 item 6: jax.numpy's coverage), each a composition of
sprue.numpy's own, with numpy's semantics (and jax.numpy's where a size would depend on values:
`bincount` and `histogram` take static lengths and bin counts). Traced and eager alike."""
from __future__ import annotations

import builtins
import math
from types import SimpleNamespace

import numpy as np

from sprue import lax
from sprue.numpy import _creation, _indexing, _linalg, _nonzero, _reductions, _shape, _sorting, _ufuncs
from sprue.numpy._avals import aval, value_error
from sprue.numpy._promote import normalize_axis, operand, static_int

# the sprue.numpy functions used here, by their public names (the package imports this module, so
# it cannot import the package)
jnp = SimpleNamespace(**{**_ufuncs._funcs, **{n: getattr(m, n) for m in (_creation, _indexing, _linalg, _nonzero,
                                                                         _reductions, _shape, _sorting, _ufuncs)
                                              for n in m.__all__ if hasattr(m, n)}})

__all__ = ["diff", "ediff1d", "cross", "average", "cov", "corrcoef", "sinc", "logaddexp2", "fabs", "rot90",
           "rollaxis", "diagflat", "vander", "polyval", "polyadd", "polysub", "polymul", "polyder", "polyint",
           "trapezoid", "searchsorted", "digitize", "interp", "bincount", "histogram", "histogram_bin_edges",
           "isin", "select", "choose", "ldexp", "frexp", "modf", "isneginf", "isposinf", "isscalar", "iterable",
           "tril_indices", "triu_indices", "tril_indices_from", "triu_indices_from", "diag_indices",
           "diag_indices_from", "indices", "unravel_index", "ravel_multi_index", "geomspace", "bartlett",
           "blackman", "hamming", "hanning", "append", "unstack", "hsplit", "vsplit", "dsplit", "array_equiv",
           "matvec", "vecmat", "gcd", "lcm", "fromfunction", "block",
           "double", "single", "float_", "int_", "uint", "fill_diagonal", "put", "gradient", "unwrap",
           "insert", "delete", "resize", "piecewise", "ix_", "index_exp", "s_"]

double, single, float_, int_, uint = (_creation.SCALAR_TYPES[n] for n in ("float64", "float32", "float64", "int64", "uint64"))
index_exp, s_ = np.index_exp, np.s_


def _float_type(*xs):
    """numpy's result type of the operands, a float type when they are all integers or bools."""
    dts = [aval(x).dtype for x in xs]
    return np.result_type(*dts, np.float64) if builtins.all(np.dtype(d).kind in "iub" for d in dts) else np.result_type(*dts)


def _slice_axis(x, axis, start, stop):
    shape = aval(x).shape
    lo, hi = [0] * len(shape), list(shape)
    lo[axis], hi[axis] = start, shape[axis] if stop is None else stop
    return lax.slice(x, lo, hi)


def _at(x):
    """x.at, for traced and eager (numpy) arrays alike."""
    return _indexing.IndexUpdateHelper(x)


def _axis_len(fname, a, axis):
    n = aval(a).shape[axis]
    if not isinstance(n, (int, np.integer)):
        raise value_error(fname, f"axis {axis} has a size known only at run time; {fname} needs a static size here")
    return int(n)


def diff(a, n=1, axis=-1, prepend=None, append=None):
    a = operand("diff", a)
    axis = normalize_axis("diff", axis, aval(a).ndim, a)
    n = static_int("diff", n, "n")
    if n < 0:
        raise value_error("diff", f"order must be non-negative but got {n}")
    parts = []
    for extra in (prepend, append):
        if extra is None:
            parts.append(None)
            continue
        e = jnp.asarray(extra)   # (as numpy: an array, a Python number's float64 too)
        if aval(e).ndim == 0:
            shape = list(aval(a).shape)
            shape[axis] = 1
            e = jnp.broadcast_to(e, tuple(shape))
        parts.append(e)
    a = jnp.concatenate([p for p in (parts[0], a, parts[1]) if p is not None], axis=axis)
    for _ in range(n):
        m = aval(a).shape[axis]
        step = jnp.not_equal if aval(a).dtype == np.bool_ else jnp.subtract
        a = step(_slice_axis(a, axis, 1, m), _slice_axis(a, axis, 0, m - 1))
    return a


def ediff1d(ary, to_end=None, to_begin=None):
    d = diff(jnp.ravel(ary))
    parts = [jnp.ravel(operand("ediff1d", x)).astype(aval(d).dtype) if x is not None else None for x in (to_begin, to_end)]
    return jnp.concatenate([p for p in (parts[0], d, parts[1]) if p is not None])


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = jnp.moveaxis(operand("cross", a), axisa, -1), jnp.moveaxis(operand("cross", b), axisb, -1)
    na, nb = aval(a).shape[-1], aval(b).shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise value_error("cross", "incompatible dimensions for cross product (dimension must be 2 or 3)")

    def comp(x, i, n):
        return x[..., i] if i < n else jnp.zeros_like(x[..., 0])
    a0, a1, a2 = (comp(a, i, na) for i in range(3))
    b0, b1, b2 = (comp(b, i, nb) for i in range(3))
    z = a0 * b1 - a1 * b0
    if na == 2 and nb == 2:
        return z
    return jnp.moveaxis(jnp.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, z], axis=-1), -1, axisc)


def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    a = operand("average", a)
    if weights is None:
        avg = jnp.mean(a, axis=axis, keepdims=keepdims)
        scale = jnp.ones_like(avg) * (aval(a).size / builtins.max(aval(avg).size, 1))
    else:
        w = operand("average", weights)
        if aval(w).shape != aval(a).shape:
            if axis is None or aval(w).ndim != 1:
                raise value_error("average", "weights differ in shape from a: give axis with 1-d weights")
            ax = normalize_axis("average", axis, aval(a).ndim, a)
            shape = [1] * aval(a).ndim
            shape[ax] = aval(w).shape[0]
            w = jnp.reshape(w, tuple(shape))
        dt = _float_type(a, w)
        scale = jnp.sum(jnp.broadcast_to(w, aval(a).shape).astype(dt), axis=axis, keepdims=keepdims)
        avg = jnp.sum(jnp.multiply(a, w).astype(dt), axis=axis, keepdims=keepdims) / scale
    return (avg, scale.astype(aval(avg).dtype)) if returned else avg


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None):
    if fweights is not None or aweights is not None:
        raise value_error("cov", "fweights and aweights are not supported yet")
    x = jnp.atleast_2d(operand("cov", m))
    if not rowvar and aval(x).shape[0] != 1:
        x = x.T
    if y is not None:
        yy = jnp.atleast_2d(operand("cov", y))
        if not rowvar and aval(yy).shape[0] != 1:
            yy = yy.T
        x = jnp.concatenate([x, yy], axis=0)
    x = x.astype(_float_type(x))
    ddof = (0 if bias else 1) if ddof is None else ddof
    n = aval(x).shape[1]
    xc = x - jnp.mean(x, axis=1, keepdims=True)
    c = jnp.matmul(xc, xc.T) / (n - ddof)
    return jnp.squeeze(c) if aval(c).shape == (1, 1) else c


def corrcoef(x, y=None, rowvar=True):
    c = cov(x, y, rowvar)
    if aval(c).ndim == 0:
        return c / c
    d = jnp.sqrt(jnp.diagonal(c))
    return jnp.clip(c / d[:, None] / d[None, :], -1, 1)


def sinc(x):
    x = operand("sinc", x)
    x = x.astype(_float_type(x))
    y = np.pi * jnp.where(x == 0, 1.0, x)
    return jnp.where(x == 0, jnp.ones_like(x), jnp.sin(y) / y)


def logaddexp2(x1, x2):
    ln2 = float(np.log(2.0))   # (a Python float: weak, float32 stays float32)
    return jnp.logaddexp(jnp.multiply(x1, ln2), jnp.multiply(x2, ln2)) / ln2


def fabs(x):
    x = operand("fabs", x)
    return jnp.abs(x.astype(_float_type(x)))


def rot90(m, k=1, axes=(0, 1)):
    m = operand("rot90", m)
    k = static_int("rot90", k, "k") % 4
    a0, a1 = (normalize_axis("rot90", ax, aval(m).ndim, m) for ax in axes)
    if a0 == a1:
        raise value_error("rot90", "axes must be different")
    if k == 0:
        return m
    if k == 2:
        return jnp.flip(jnp.flip(m, a0), a1)
    perm = list(range(aval(m).ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    return jnp.transpose(jnp.flip(m, a1), perm) if k == 1 else jnp.flip(jnp.transpose(m, perm), a1)


def rollaxis(a, axis, start=0):
    a = operand("rollaxis", a)
    n = aval(a).ndim
    axis = normalize_axis("rollaxis", axis, n, a)
    start = static_int("rollaxis", start, "start")
    start = start + n if start < 0 else start
    if axis < start:
        start -= 1
    return jnp.moveaxis(a, axis, start) if axis != start else a


def diagflat(v, k=0):
    return jnp.diag(jnp.ravel(v), k)


def vander(x, N=None, increasing=False):
    x = operand("vander", x)
    n = _axis_len("vander", x, 0) if N is None else static_int("vander", N, "N")
    powers = np.arange(n) if increasing else np.arange(n)[::-1]
    cols = [jnp.power(x, int(p)) if p else jnp.ones_like(x) for p in powers]
    return jnp.stack(cols, axis=-1) if cols else jnp.zeros(aval(x).shape + (0,), aval(x).dtype)


def polyval(p, x):
    p, x = operand("polyval", p), operand("polyval", x)
    y = jnp.zeros_like(x) * p[0] if aval(p).shape[0] else jnp.zeros_like(x)
    for i in range(_axis_len("polyval", p, 0)):
        y = y * x + p[i]
    return y


def _pad_front(a, n):
    m = aval(a).shape[0]
    return jnp.concatenate([jnp.zeros((n - m,), aval(a).dtype), a]) if m < n else a


def polyadd(a1, a2):
    a1, a2 = jnp.atleast_1d(operand("polyadd", a1)), jnp.atleast_1d(operand("polyadd", a2))
    n = builtins.max(aval(a1).shape[0], aval(a2).shape[0])
    return _pad_front(a1, n) + _pad_front(a2, n)


def polysub(a1, a2):
    return polyadd(a1, jnp.negative(jnp.atleast_1d(operand("polysub", a2))))


def polymul(a1, a2):
    return jnp.convolve(jnp.atleast_1d(operand("polymul", a1)), jnp.atleast_1d(operand("polymul", a2)))


def polyder(p, m=1):
    p = jnp.atleast_1d(operand("polyder", p))
    for _ in range(static_int("polyder", m, "m")):
        n = aval(p).shape[0] - 1
        p = p[:-1] * np.arange(n, 0, -1) if n > 0 else jnp.zeros((0,), aval(p).dtype)
    return p


def polyint(p, m=1, k=None):
    p = jnp.atleast_1d(operand("polyint", p))
    m = static_int("polyint", m, "m")
    ks = np.zeros(m) if k is None else np.broadcast_to(np.asarray(k, float), (m,))
    for i in range(m):
        n = aval(p).shape[0]
        p = jnp.concatenate([p / np.arange(n, 0, -1), jnp.asarray([ks[i]]).astype(_float_type(p))])
    return p


def trapezoid(y, x=None, dx=1.0, axis=-1):
    y = operand("trapezoid", y)
    axis = normalize_axis("trapezoid", axis, aval(y).ndim, y)
    n = aval(y).shape[axis]
    mid = (_slice_axis(y, axis, 1, n) + _slice_axis(y, axis, 0, n - 1)) / 2.0
    if x is None:
        return jnp.sum(mid, axis=axis) * dx
    d = diff(operand("trapezoid", x), axis=-1 if aval(operand("trapezoid", x)).ndim == 1 else axis)
    if aval(d).ndim == 1 and aval(y).ndim > 1:
        shape = [1] * aval(y).ndim
        shape[axis] = aval(d).shape[0]
        d = jnp.reshape(d, tuple(shape))
    return jnp.sum(mid * d, axis=axis)


def searchsorted(a, v, side="left", sorter=None, *, method=None):
    """numpy.searchsorted by a binary search over every value at once: ceil(log2(n + 1)) steps for
    a static n, a while loop (until every search has closed) for a run-time one."""
    a = operand("searchsorted", a)
    if sorter is not None:
        a = jnp.take(a, sorter)
    if side not in ("left", "right"):
        raise value_error("searchsorted", f"side must be 'left' or 'right', got {side!r}")
    v = operand("searchsorted", v)
    n = aval(a).shape[0]
    last = jnp.maximum(jnp.asarray(n) - 1, 0)

    def step(bounds):
        lo, hi = bounds
        mid = (lo + hi) // 2
        x = jnp.take(a, jnp.clip(mid, 0, last))
        go_right = ((x < v) if side == "left" else (x <= v)) & (lo < hi)
        return jnp.where(go_right, mid + 1, lo), jnp.where(go_right | (lo >= hi), hi, mid)
    bounds = (jnp.zeros(aval(v).shape, np.int64), jnp.zeros(aval(v).shape, np.int64) + n)
    if isinstance(n, (int, np.integer)):
        for _ in range(builtins.max(1, math.ceil(math.log2(int(n) + 1)))):
            bounds = step(bounds)
    else:
        bounds = lax.while_loop(lambda b: jnp.any(b[0] < b[1]), step, bounds)
    return bounds[0]


def digitize(x, bins, right=False):
    bins = operand("digitize", bins)
    x = operand("digitize", x)
    up = searchsorted(bins, x, side="left" if right else "right")
    if _axis_len("digitize", bins, 0) < 2:
        return up
    down = _axis_len("digitize", bins, 0) - searchsorted(jnp.flip(bins), x, side="right" if right else "left")
    return jnp.where(bins[-1] >= bins[0], up, down)


def interp(x, xp, fp, left=None, right=None, period=None):
    x, xp, fp = operand("interp", x), operand("interp", xp), operand("interp", fp)
    dt = _float_type(x, xp, fp)
    x, xp, fp = x.astype(dt), xp.astype(dt), fp.astype(dt)
    if period is not None:
        x = jnp.mod(x, period)
        xp = jnp.mod(xp, period)
        order = jnp.argsort(xp)
        xp, fp = jnp.take(xp, order), jnp.take(fp, order)
        xp = jnp.concatenate([xp[-1:] - period, xp, xp[:1] + period])
        fp = jnp.concatenate([fp[-1:], fp, fp[:1]])
    n = _axis_len("interp", xp, 0)
    i = jnp.clip(searchsorted(xp, x, side="right"), 1, n - 1)
    x0, x1, f0, f1 = jnp.take(xp, i - 1), jnp.take(xp, i), jnp.take(fp, i - 1), jnp.take(fp, i)
    dx = x1 - x0
    y = jnp.where(dx == 0, f0, f0 + (x - x0) * (f1 - f0) / jnp.where(dx == 0, 1.0, dx))
    if period is None:
        y = jnp.where(x < xp[0], fp[0] if left is None else left, y)
        y = jnp.where(x > xp[-1], fp[-1] if right is None else right, y)
    return y


def bincount(x, weights=None, minlength=0, *, length=None):
    """numpy.bincount; traced, its length must be static (`length`, or numpy's minlength when no
    value reaches past it), as in jax.numpy: values at or past it are dropped."""
    x = operand("bincount", x)
    if length is None:
        if isinstance(x, np.ndarray):
            length = builtins.max(int(x.max()) + 1 if x.size else 0, minlength)
        else:
            raise value_error("bincount", "inside qjit the result's length must be static: pass length=")
    w = jnp.ones(aval(x).shape, np.int64) if weights is None else operand("bincount", weights)
    out = jnp.zeros((static_int("bincount", length, "length"),), aval(w).dtype if weights is not None else np.int64)
    return _at(out)[jnp.clip(x, 0, None)].add(w, mode="drop")


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    a = jnp.ravel(operand("histogram", a))
    if not isinstance(bins, (int, np.integer)):
        return operand("histogram", bins)
    lo, hi = (jnp.min(a), jnp.max(a)) if range is None else range
    dt = _float_type(a)   # (numpy's edges: the data's float type)
    lo, hi = jnp.asarray(lo).astype(dt), jnp.asarray(hi).astype(dt)
    same = lo == hi
    lo, hi = jnp.where(same, lo - 0.5, lo), jnp.where(same, hi + 0.5, hi)
    return jnp.linspace(lo, hi, int(bins) + 1)


def histogram(a, bins=10, range=None, weights=None, density=None):
    a = jnp.ravel(operand("histogram", a))
    edges = histogram_bin_edges(a, bins, range)
    nb = aval(edges).shape[0] - 1
    i = searchsorted(edges, a, side="right") - 1
    i = jnp.where(a == edges[-1], nb - 1, i)
    inside = (i >= 0) & (i < nb)
    w = jnp.ones(aval(a).shape, np.int64) if weights is None else jnp.ravel(operand("histogram", weights))
    counts = _at(jnp.zeros((nb,), aval(w).dtype))[jnp.where(inside, i, nb)].add(w, mode="drop")
    if density:
        counts = counts.astype(aval(edges).dtype)
        counts = counts / diff(edges) / jnp.sum(counts)
    return counts, edges


def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    e, t = operand("isin", element), jnp.ravel(operand("isin", test_elements))
    found = jnp.any(jnp.expand_dims(e, -1) == t, axis=-1) if aval(t).shape[0] else jnp.zeros(aval(e).shape, bool)
    return jnp.logical_not(found) if invert else found


def select(condlist, choicelist, default=0):
    if len(condlist) != len(choicelist):
        raise value_error("select", "list of cases must be same length as list of conditions")
    out = default
    for c, v in reversed(list(zip(condlist, choicelist))):
        out = jnp.where(c, v, out)
    return jnp.asarray(out)


def choose(a, choices, out=None, mode="raise"):
    a = operand("choose", a)
    n = len(choices)
    if mode == "wrap":
        a = jnp.mod(a, n)
    elif mode == "clip" or mode == "raise":   # (raise: clamped, as jax.numpy does under jit)
        a = jnp.clip(a, 0, n - 1)
    idx, *opts = jnp.broadcast_arrays(a, *choices)
    res = opts[0]
    for k in builtins.range(1, n):
        res = jnp.where(idx == k, opts[k], res)
    return res


def ldexp(x1, x2):
    x1 = operand("ldexp", x1)
    return jnp.multiply(x1.astype(_float_type(x1)), jnp.exp2(jnp.asarray(x2).astype(np.float64))).astype(
        _float_type(x1))


def frexp(x):
    x = operand("frexp", x)
    x = x.astype(_float_type(x))
    ax = jnp.abs(x)
    e = jnp.where(ax == 0, 0, jnp.floor(jnp.log2(jnp.where(ax == 0, 1.0, ax))) + 1).astype(np.int32)
    m = x / jnp.exp2(e.astype(aval(x).dtype))
    fix = jnp.abs(m) >= 1.0   # (log2 rounding at the edges)
    m, e = jnp.where(fix, m / 2, m), jnp.where(fix, e + 1, e)
    fix = (jnp.abs(m) < 0.5) & (m != 0)
    m, e = jnp.where(fix, m * 2, m), jnp.where(fix, e - 1, e)
    finite = jnp.isfinite(x)
    return jnp.where(finite, m, x), jnp.where(finite, e, 0)


def modf(x):
    x = operand("modf", x)
    x = x.astype(_float_type(x))
    whole = jnp.trunc(x)
    return jnp.where(jnp.isinf(x), jnp.copysign(0.0, x), x - whole), whole


def isneginf(x):
    return jnp.isinf(x) & jnp.signbit(x)


def isposinf(x):
    return jnp.isinf(x) & jnp.logical_not(jnp.signbit(x))


def isscalar(element):
    return np.isscalar(element) or (hasattr(element, "shape") and hasattr(element, "dtype") and
                                    not isinstance(element, np.ndarray) and aval(element).ndim == 0)


def iterable(y):
    return np.iterable(y) if not hasattr(y, "aval") else aval(y).ndim > 0


def tril_indices(n, k=0, m=None):
    return tuple(np.asarray(i) for i in np.tril_indices(static_int("tril_indices", n, "n"), k, m))


def triu_indices(n, k=0, m=None):
    return tuple(np.asarray(i) for i in np.triu_indices(static_int("triu_indices", n, "n"), k, m))


def tril_indices_from(arr, k=0):
    s = aval(operand("tril_indices_from", arr)).shape
    return tril_indices(s[-2], k, s[-1])


def triu_indices_from(arr, k=0):
    s = aval(operand("triu_indices_from", arr)).shape
    return triu_indices(s[-2], k, s[-1])


def diag_indices(n, ndim=2):
    return (np.arange(static_int("diag_indices", n, "n")),) * ndim


def diag_indices_from(arr):
    s = aval(operand("diag_indices_from", arr)).shape
    if len(set(s)) != 1:
        raise value_error("diag_indices_from", "All dimensions of input must be of equal length")
    return diag_indices(s[0], len(s))


def indices(dimensions, dtype=np.int64, sparse=False):
    return np.indices(tuple(static_int("indices", d, "dimensions") for d in dimensions), dtype, sparse)


def unravel_index(indices, shape):
    idx = operand("unravel_index", indices)
    shape = tuple(static_int("unravel_index", s, "shape") for s in shape)
    total = int(np.prod(shape))
    idx = jnp.where(idx < 0, idx + total, idx)
    out = []
    for s in reversed(shape):
        out.append(jnp.mod(idx, s))
        idx = idx // s
    return tuple(reversed(out))


def ravel_multi_index(multi_index, dims, mode="raise", order="C"):
    dims = tuple(static_int("ravel_multi_index", d, "dims") for d in dims)
    strides = np.cumprod((1,) + dims[::-1][:-1])[::-1] if order == "C" else np.cumprod((1,) + dims[:-1])
    out = 0
    for i, (ix, d, s) in enumerate(zip(multi_index, dims, strides)):
        ix = operand("ravel_multi_index", ix)
        ix = jnp.mod(ix, d) if mode == "wrap" else jnp.clip(ix, 0, d - 1)
        out = out + ix * int(s)
    return jnp.asarray(out)


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    start, stop = operand("geomspace", start), operand("geomspace", stop)
    sign = jnp.sign(start)
    out = sign * jnp.logspace(jnp.log10(jnp.abs(start)), jnp.log10(jnp.abs(stop)), num, endpoint, 10.0, dtype, axis)
    out = _at(out)[0].set(start) if static_int("geomspace", num, "num") > 0 and axis == 0 and aval(start).ndim == 0 else out
    if endpoint and num > 1 and axis == 0 and aval(stop).ndim == 0:
        out = _at(out)[-1].set(stop)
    return out if dtype is None else out.astype(dtype)


def _window(fname, M, f):
    M = static_int(fname, M, "M")
    if M < 1:
        return np.zeros(0)
    if M == 1:
        return np.ones(1)
    return jnp.asarray(f(np.arange(M, dtype=np.float64), M))


def bartlett(M):
    return _window("bartlett", M, lambda n, M: np.where(n <= (M - 1) / 2, 2 * n / (M - 1), 2 - 2 * n / (M - 1)))


def blackman(M):
    return _window("blackman", M, lambda n, M: 0.42 - 0.5 * np.cos(2 * np.pi * n / (M - 1))
                   + 0.08 * np.cos(4 * np.pi * n / (M - 1)))


def hamming(M):
    return _window("hamming", M, lambda n, M: 0.54 - 0.46 * np.cos(2 * np.pi * n / (M - 1)))


def hanning(M):
    return _window("hanning", M, lambda n, M: 0.5 - 0.5 * np.cos(2 * np.pi * n / (M - 1)))


def append(arr, values, axis=None):
    if axis is None:
        return jnp.concatenate([jnp.ravel(arr), jnp.ravel(values)])
    return jnp.concatenate([arr, values], axis=axis)


def unstack(x, /, *, axis=0):
    x = operand("unstack", x)
    axis = normalize_axis("unstack", axis, aval(x).ndim, x)
    return tuple(jnp.take(x, i, axis=axis) for i in range(_axis_len("unstack", x, axis)))


def hsplit(ary, indices_or_sections):
    return jnp.split(ary, indices_or_sections, axis=1 if aval(operand("hsplit", ary)).ndim > 1 else 0)


def vsplit(ary, indices_or_sections):
    return jnp.split(ary, indices_or_sections, axis=0)


def dsplit(ary, indices_or_sections):
    return jnp.split(ary, indices_or_sections, axis=2)


def array_equiv(a1, a2):
    try:
        x, y = jnp.broadcast_arrays(a1, a2)
    except Exception:   # (numpy: shapes that do not broadcast are not equivalent)
        return jnp.asarray(False)
    return jnp.all(x == y)


def matvec(x1, x2, /):
    return jnp.matmul(x1, jnp.expand_dims(x2, -1))[..., 0]


def vecmat(x1, x2, /):
    return jnp.matmul(jnp.expand_dims(jnp.conj(x1), -2), x2)[..., 0, :]


def _euclid(a, b):
    def body(c):
        x, y = c
        nz = y != 0
        return jnp.where(nz, y, x), jnp.where(nz, jnp.mod(x, jnp.where(nz, y, 1)), 0)
    return lax.while_loop(lambda c: jnp.any(c[1] != 0), body, (a, b))[0]


def gcd(x1, x2):
    x1, x2 = jnp.broadcast_arrays(jnp.abs(operand("gcd", x1)), jnp.abs(operand("gcd", x2)))
    dt = np.result_type(aval(x1).dtype, aval(x2).dtype)
    return _euclid(x1.astype(dt), x2.astype(dt))


def lcm(x1, x2):
    x1, x2 = jnp.broadcast_arrays(jnp.abs(operand("lcm", x1)), jnp.abs(operand("lcm", x2)))
    g = gcd(x1, x2)
    return jnp.where(g == 0, 0, x1 // jnp.where(g == 0, 1, g) * x2)


def fromfunction(function, shape, *, dtype=float, **kwargs):
    grids = np.indices(tuple(static_int("fromfunction", s, "shape") for s in shape), dtype=dtype)
    return function(*(jnp.asarray(g) for g in grids), **kwargs)


def block(arrays):
    def depth(x):
        return 1 + depth(x[0]) if isinstance(x, list) and x else (1 if isinstance(x, list) else 0)
    d = depth(arrays)

    def rec(x, level):
        if not isinstance(x, list):
            a = operand("block", x)
            return jnp.reshape(a, (1,) * builtins.max(d - aval(a).ndim, 0) + aval(a).shape)
        return jnp.concatenate([rec(y, level + 1) for y in x], axis=level - d)
    return rec(arrays, 0)


def fill_diagonal(a, val, wrap=False, *, inplace=True):
    if inplace:
        raise value_error("fill_diagonal", "sprue arrays are immutable: pass inplace=False and use the result")
    a = operand("fill_diagonal", a)
    s = aval(a).shape
    n = builtins.min(s)
    idx = (np.arange(n),) * len(s)
    v = jnp.broadcast_to(jnp.ravel(jnp.asarray(val)), (n,)) if aval(jnp.asarray(val)).size in (1, n) else \
        jnp.ravel(jnp.asarray(val))[:n]
    return _at(a)[idx].set(v.astype(aval(a).dtype))


def put(a, ind, v, mode=None, *, inplace=True):
    if inplace:
        raise value_error("put", "sprue arrays are immutable: pass inplace=False and use the result")
    a = operand("put", a)
    flat = jnp.ravel(a)
    ind = jnp.ravel(jnp.asarray(ind))
    n = aval(flat).shape[0]
    ind = jnp.mod(ind, n) if mode == "wrap" else jnp.clip(ind, -n, n - 1)
    vals = jnp.ravel(jnp.asarray(v))
    vals = jnp.take(vals, jnp.arange(aval(ind).shape[0]) % builtins.max(aval(vals).shape[0], 1))
    return jnp.reshape(_at(flat)[ind].set(vals.astype(aval(a).dtype)), aval(a).shape)


def gradient(f, *varargs, axis=None, edge_order=1):
    f = operand("gradient", f)
    nd = aval(f).ndim
    axes = list(range(nd)) if axis is None else [normalize_axis("gradient", ax, nd, f) for ax in
                                                  (axis if isinstance(axis, (list, tuple)) else [axis])]
    spacing = list(varargs) if varargs else [1.0]
    if len(spacing) == 1:
        spacing = spacing * len(axes)
    f = f.astype(_float_type(f))
    outs = []
    for ax, h in zip(axes, spacing):
        n = _axis_len("gradient", f, ax)
        if n < 2:
            raise value_error("gradient", "Shape of array too small to calculate a numerical gradient")
        sl = lambda a, b: _slice_axis(f, ax, a, b)   # noqa: E731
        inner = (sl(2, n) - sl(0, n - 2)) / (2.0 * h)
        first = (sl(1, 2) - sl(0, 1)) / h
        last = (sl(n - 1, n) - sl(n - 2, n - 1)) / h
        outs.append(jnp.concatenate([first, inner, last], axis=ax))
    return outs[0] if len(outs) == 1 else outs


def unwrap(p, discont=None, axis=-1, period=2 * np.pi):
    p = operand("unwrap", p)
    p = p.astype(_float_type(p))
    axis = normalize_axis("unwrap", axis, aval(p).ndim, p)
    dd = diff(p, axis=axis)
    discont = period / 2 if discont is None else discont
    half = period / 2
    ddmod = jnp.mod(dd + half, period) - half
    ddmod = jnp.where((ddmod == -half) & (dd > 0), half, ddmod)
    correct = jnp.where(jnp.abs(dd) < discont, 0.0, ddmod - dd)
    first = _slice_axis(p, axis, 0, 1)
    return jnp.concatenate([first, _slice_axis(p, axis, 1, None) + jnp.cumsum(correct, axis=axis)], axis=axis)


def insert(arr, obj, values, axis=None):
    arr = operand("insert", arr)
    if axis is None:
        arr, axis = jnp.ravel(arr), 0
    axis = normalize_axis("insert", axis, aval(arr).ndim, arr)
    i = static_int("insert", obj, "obj")
    n = _axis_len("insert", arr, axis)
    i = i + n if i < 0 else i
    v = jnp.asarray(values).astype(aval(arr).dtype)
    shape = list(aval(arr).shape)
    shape[axis] = 1 if aval(v).ndim < aval(arr).ndim else aval(v).shape[axis]
    v = jnp.broadcast_to(v if aval(v).ndim == aval(arr).ndim else jnp.expand_dims(v, axis)
                         if aval(v).ndim == aval(arr).ndim - 1 else v, tuple(shape))
    return jnp.concatenate([_slice_axis(arr, axis, 0, i), v, _slice_axis(arr, axis, i, n)],
                           axis=axis)


def delete(arr, obj, axis=None, *, assume_unique_indices=False):
    arr = operand("delete", arr)
    if axis is None:
        arr, axis = jnp.ravel(arr), 0
    axis = normalize_axis("delete", axis, aval(arr).ndim, arr)
    n = _axis_len("delete", arr, axis)
    drop = np.zeros(n, bool)
    drop[np.asarray(obj if not isinstance(obj, slice) else np.arange(n)[obj])] = True
    return jnp.take(arr, np.flatnonzero(~drop), axis=axis)


def resize(a, new_shape):
    a = jnp.ravel(operand("resize", a))
    shape = (new_shape,) if isinstance(new_shape, (int, np.integer)) else tuple(new_shape)
    total = int(np.prod(shape))
    n = _axis_len("resize", a, 0)
    if n == 0:
        return jnp.zeros(shape, aval(a).dtype)
    return jnp.reshape(jnp.take(a, np.arange(total) % n), shape)


def piecewise(x, condlist, funclist, *args, **kw):
    x = operand("piecewise", x)
    conds = [jnp.asarray(c) for c in (condlist if isinstance(condlist, (list, tuple)) else [condlist])]
    if len(funclist) == len(conds) + 1:
        otherwise = jnp.logical_not(jnp.any(jnp.stack([jnp.broadcast_to(c, aval(x).shape) for c in conds]), axis=0))
        conds = conds + [otherwise]
    out = jnp.zeros_like(x)
    for c, f in zip(conds, funclist):
        val = f(x, *args, **kw) if callable(f) else f
        out = jnp.where(c, val, out)
    return out


def ix_(*args):
    n = len(args)
    return tuple(jnp.reshape(operand("ix_", a), (1,) * i + (-1,) + (1,) * (n - i - 1)) for i, a in enumerate(args))
