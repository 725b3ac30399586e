"""More of numpy's functions, the sorting-based ones (issue 18 item 6): quantiles and medians, the
NaN-skipping reductions, partitions, `unique` and the set operations, bit packing, histograms in
several dimensions. `unique` and the set operations give a result whose size depends on the
values: inside qjit it is a run-time size (sprue's data-dependent shapes), or, with `size=`, a
static one padded with `fill_value` as jax.numpy does."""
from __future__ import annotations

import builtins

import numpy as np

from sprue import lax
from sprue.numpy import _creation, _indexing
from sprue.numpy._avals import aval, value_error
from sprue.numpy._more import _axis_len, _float_type, _slice_axis, diff, histogram, jnp, searchsorted, vander
from sprue.numpy._promote import normalize_axis, operand, static_int
from sprue.numpy.linalg import lstsq

__all__ = ["quantile", "percentile", "median", "nanquantile", "nanpercentile", "nanmedian", "nanargmax",
           "nanargmin", "nancumsum", "nancumprod", "nanvar", "nanstd", "partition", "argpartition", "lexsort",
           "unique", "unique_values", "unique_counts", "unique_inverse", "unique_all", "union1d", "intersect1d",
           "setdiff1d", "setxor1d", "bitwise_count", "packbits", "unpackbits", "apply_over_axes", "histogram2d",
           "histogramdd", "array_str", "array_repr", "trim_zeros", "einsum_path", "ComplexWarning", "mgrid",
           "ogrid", "polyfit", "pad", "i0", "kaiser", "nextafter", "spacing", "poly", "sort_complex", "mask_indices",
           "cdouble", "csingle"]

ComplexWarning = np.exceptions.ComplexWarning
cdouble, csingle = _creation.SCALAR_TYPES["complex128"], _creation.SCALAR_TYPES["complex64"]
_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _quantile(fname, a, q, axis, method, keepdims, nan):
    if method not in _METHODS:
        raise value_error(fname, f"method {method!r} is not supported; choose one of {', '.join(_METHODS)}")
    a = operand(fname, a)
    a = a.astype(_float_type(a))
    if axis is None:
        a, axes = jnp.ravel(a), (0,)
    else:
        axes = tuple(normalize_axis(fname, ax, aval(a).ndim, a) for ax in (axis if isinstance(axis, (tuple, list)) else (axis,)))
    nd = aval(a).ndim
    rest = [i for i in range(nd) if i not in axes]
    x = jnp.transpose(a, rest + list(axes))
    x = jnp.reshape(x, tuple(aval(x).shape[:len(rest)]) + (-1,))
    n = _axis_len(fname, x, -1)
    x = jnp.sort(x, axis=-1)   # (NaNs sort last)
    count = jnp.sum(jnp.logical_not(jnp.isnan(x)), axis=-1, keepdims=True) if nan else jnp.full(aval(x).shape[:-1] + (1,), n)
    q = jnp.asarray(q).astype(aval(x).dtype)
    qs = jnp.reshape(q, (-1,))
    pos = qs * (count - 1).astype(aval(x).dtype)   # (..., nq)
    lo = jnp.clip(jnp.floor(pos), 0, n - 1).astype(np.int64)
    hi = jnp.clip(jnp.ceil(pos), 0, n - 1).astype(np.int64)
    vlo, vhi = jnp.take_along_axis(x, lo, axis=-1), jnp.take_along_axis(x, hi, axis=-1)
    frac = pos - jnp.floor(pos)
    out = {"linear": vlo + (vhi - vlo) * frac, "lower": vlo, "higher": vhi, "midpoint": (vlo + vhi) / 2,
           "nearest": jnp.where(jnp.round(pos) == jnp.floor(pos), vlo, vhi)}[method]
    if nan:
        out = jnp.where(count == 0, np.nan, out)
    elif not nan:
        out = jnp.where(jnp.any(jnp.isnan(x), axis=-1, keepdims=True), np.nan, out)
    out = jnp.moveaxis(out, -1, 0)
    out = jnp.reshape(out, aval(q).shape + aval(out).shape[1:])
    if keepdims:
        shape = list(aval(a).shape)
        for ax in axes:
            shape[ax] = 1
        out = jnp.reshape(out, aval(q).shape + tuple(shape))
    return out


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *, weights=None):
    return _quantile("quantile", a, q, axis, method, keepdims, nan=False)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *, weights=None):
    return _quantile("percentile", a, jnp.asarray(q) / 100.0, axis, method, keepdims, nan=False)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    return _quantile("median", a, 0.5, axis, "linear", keepdims, nan=False)


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *, weights=None):
    return _quantile("nanquantile", a, q, axis, method, keepdims, nan=True)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *, weights=None):
    return _quantile("nanpercentile", a, jnp.asarray(q) / 100.0, axis, method, keepdims, nan=True)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    return _quantile("nanmedian", a, 0.5, axis, "linear", keepdims, nan=True)


def _nan_arg(fname, a, axis, keepdims, fill):
    a = operand(fname, a)
    nan = jnp.isnan(a)
    i = getattr(jnp, fname[3:])(jnp.where(nan, fill, a), axis=axis, keepdims=keepdims)
    return jnp.where(jnp.all(nan, axis=axis, keepdims=keepdims), -1, i)


def nanargmax(a, axis=None, out=None, keepdims=False):
    return _nan_arg("nanargmax", a, axis, keepdims, -np.inf)


def nanargmin(a, axis=None, out=None, keepdims=False):
    return _nan_arg("nanargmin", a, axis, keepdims, np.inf)


def nancumsum(a, axis=None, dtype=None, out=None):
    a = operand("nancumsum", a)
    return jnp.cumsum(jnp.where(jnp.isnan(a), 0, a), axis=axis, dtype=dtype)


def nancumprod(a, axis=None, dtype=None, out=None):
    a = operand("nancumprod", a)
    return jnp.cumprod(jnp.where(jnp.isnan(a), 1, a), axis=axis, dtype=dtype)


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None):
    a = operand("nanvar", a)
    a = a.astype(_float_type(a))
    ok = jnp.logical_not(jnp.isnan(a))
    n = jnp.sum(ok, axis=axis, keepdims=True)
    mean = jnp.sum(jnp.where(ok, a, 0), axis=axis, keepdims=True) / n
    ss = jnp.sum(jnp.where(ok, (a - mean) ** 2, 0), axis=axis, keepdims=keepdims)
    n = n if keepdims else jnp.sum(ok, axis=axis)
    return ss / jnp.where(n - ddof > 0, n - ddof, np.nan)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None):
    return jnp.sqrt(nanvar(a, axis, dtype, out, ddof, keepdims))


def partition(a, kth, axis=-1):
    """A valid partition (jax.numpy's): the whole axis sorted, which numpy's contract allows."""
    static_int("partition", kth, "kth")
    return jnp.sort(a, axis=axis)


def argpartition(a, kth, axis=-1):
    static_int("argpartition", kth, "kth")
    return jnp.argsort(a, axis=axis, stable=True)


def lexsort(keys, axis=-1):
    keys = [operand("lexsort", k) for k in keys]
    if not keys:
        raise value_error("lexsort", "need sequence of keys with len > 0 in lexsort")
    order = jnp.argsort(keys[0], axis=axis, stable=True)
    for k in keys[1:]:
        k = jnp.take_along_axis(k, order, axis=axis)
        order = jnp.take_along_axis(order, jnp.argsort(k, axis=axis, stable=True), axis=axis)
    return order


# -- unique and the set operations ------------------------------------------------------------
def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *, equal_nan=True,
           size=None, fill_value=None, sorted=True):
    if axis is not None:
        raise value_error("unique", "axis= is not supported yet; unique works on the flattened array")
    a = jnp.ravel(operand("unique", ar))
    n = aval(a).shape[0]
    last = jnp.maximum(jnp.asarray(n) - 1, 0)
    order = jnp.argsort(a, stable=True)
    s = jnp.take(a, order)
    prev = jnp.roll(s, 1)
    first = (jnp.arange(n) == 0) | (s != prev)
    if equal_nan and aval(a).dtype.kind == "f":
        first = first & jnp.logical_not(jnp.isnan(s) & jnp.isnan(prev) & (jnp.arange(n) != 0))
    group = jnp.cumsum(first) - 1                       # each sorted element's unique value
    starts = jnp.flatnonzero(first) if size is None else jnp.where(
        jnp.flatnonzero(first, size=size, fill_value=-1) < 0, n, jnp.flatnonzero(first, size=size, fill_value=-1))
    values = jnp.take(s, jnp.clip(starts, 0, last))
    if size is not None:
        pad = fill_value if fill_value is not None else jnp.take(s, jnp.zeros((), np.int64))
        values = jnp.where(starts < n, values, pad)
    out = [values]
    if return_index:
        out.append(jnp.take(order, jnp.clip(starts, 0, last)))
    if return_inverse:
        inv = _indexing.IndexUpdateHelper(jnp.zeros((n,), np.int64))[order].set(group)
        out.append(jnp.reshape(inv, aval(operand("unique", ar)).shape))   # (numpy 2: the input's shape)
    if return_counts:
        ends = jnp.roll(starts, -1)
        ends = jnp.where(jnp.arange(aval(starts).shape[0]) == aval(starts).shape[0] - 1, n, ends)
        out.append(jnp.where(starts < n, jnp.minimum(ends, n) - starts, 0))
    return out[0] if len(out) == 1 else tuple(out)


def unique_values(x, /, *, size=None, fill_value=None):
    return unique(x, size=size, fill_value=fill_value)


def unique_counts(x, /, *, size=None, fill_value=None):
    return tuple(unique(x, return_counts=True, size=size, fill_value=fill_value))


def unique_inverse(x, /, *, size=None, fill_value=None):
    return tuple(unique(x, return_inverse=True, size=size, fill_value=fill_value))


def unique_all(x, /, *, size=None, fill_value=None):
    return tuple(unique(x, return_index=True, return_inverse=True, return_counts=True, size=size,
                        fill_value=fill_value))


def union1d(ar1, ar2, *, size=None, fill_value=None):
    return unique(jnp.concatenate([jnp.ravel(ar1), jnp.ravel(ar2)]), size=size, fill_value=fill_value)


def _members(a, b):
    """For each element of 1-d a: whether it is in b (by a binary search in sorted b)."""
    b = jnp.sort(b)
    m = aval(b).shape[0]
    i = jnp.clip(searchsorted(b, a), 0, jnp.maximum(jnp.asarray(m) - 1, 0))
    return (jnp.take(b, i) == a) & (jnp.asarray(m) > 0)


def _padded(keep, a, size, fill_value):
    """The elements of `a` where `keep`, in order: a run-time size, or `size` padded with fill_value."""
    if size is None:
        return jnp.compress(keep, a)
    n = aval(a).shape[0]
    idx = jnp.flatnonzero(keep, size=size, fill_value=-1)
    vals = jnp.take(a, jnp.clip(idx, 0, jnp.maximum(jnp.asarray(n) - 1, 0)))
    return jnp.where(idx >= 0, vals, 0 if fill_value is None else fill_value)


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None, fill_value=None):
    if return_indices:
        raise value_error("intersect1d", "return_indices=True is not supported yet")
    a = unique(ar1)
    return _padded(_members(a, jnp.ravel(operand("intersect1d", ar2))), a, size, fill_value)


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    a = unique(ar1)
    return _padded(jnp.logical_not(_members(a, jnp.ravel(operand("setdiff1d", ar2)))), a, size, fill_value)


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    a, b = unique(ar1), unique(ar2)
    both = jnp.concatenate([jnp.compress(jnp.logical_not(_members(a, b)), a),
                            jnp.compress(jnp.logical_not(_members(b, a)), b)])
    return unique(both, size=size, fill_value=fill_value)


# -- bits ---------------------------------------------------------------------------------------
def bitwise_count(x, /):
    x = operand("bitwise_count", x)
    if aval(x).dtype.kind not in "iub":
        raise value_error("bitwise_count", f"needs integers, got {aval(x).dtype}")
    return lax.population_count(jnp.abs(x) if aval(x).dtype.kind == "i" else x).astype(np.uint8)


def packbits(a, axis=None, bitorder="big"):
    a = operand("packbits", a)
    if axis is None:
        a, axis = jnp.ravel(a), 0
    axis = normalize_axis("packbits", axis, aval(a).ndim, a)
    n = _axis_len("packbits", a, axis)
    pad = (-n) % 8
    bits = (a != 0).astype(np.uint8)
    if pad:
        shape = list(aval(bits).shape)
        shape[axis] = pad
        bits = jnp.concatenate([bits, jnp.zeros(tuple(shape), np.uint8)], axis=axis)
    bits = jnp.moveaxis(bits, axis, -1)
    bits = jnp.reshape(bits, aval(bits).shape[:-1] + (-1, 8))
    weights = np.array([128, 64, 32, 16, 8, 4, 2, 1] if bitorder == "big" else [1, 2, 4, 8, 16, 32, 64, 128], np.uint8)
    return jnp.moveaxis(jnp.sum(bits * weights, axis=-1, dtype=np.uint8), -1, axis)


def unpackbits(a, axis=None, count=None, bitorder="big"):
    a = operand("unpackbits", a)
    if aval(a).dtype != np.uint8:
        raise value_error("unpackbits", "Expected an input array of unsigned byte data type")
    if axis is None:
        a, axis = jnp.ravel(a), 0
    axis = normalize_axis("unpackbits", axis, aval(a).ndim, a)
    shifts = np.array([7, 6, 5, 4, 3, 2, 1, 0] if bitorder == "big" else [0, 1, 2, 3, 4, 5, 6, 7], np.uint8)
    x = jnp.moveaxis(a, axis, -1)
    bits = (jnp.expand_dims(x, -1) >> shifts) & np.uint8(1)
    bits = jnp.reshape(bits, aval(bits).shape[:-2] + (-1,))
    if count is not None:
        bits = bits[..., :static_int("unpackbits", count, "count")]
    return jnp.moveaxis(bits, -1, axis)


# -- the rest -----------------------------------------------------------------------------------
def apply_over_axes(func, a, axes):
    a = operand("apply_over_axes", a)
    for ax in (axes if isinstance(axes, (list, tuple)) else (axes,)):
        r = func(a, ax)
        a = r if aval(r).ndim == aval(a).ndim else jnp.expand_dims(r, ax)
    return a


def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    sample = operand("histogramdd", sample)
    d = aval(sample).shape[1]
    nbins = [bins] * d if isinstance(bins, (int, np.integer)) else list(bins)
    ranges = [None] * d if range is None else list(range)
    edges, index, sizes = [], 0, []
    for k in builtins.range(d):
        col = sample[:, k]
        _, e = histogram(col, nbins[k], ranges[k])
        nb = aval(e).shape[0] - 1
        i = jnp.clip(searchsorted(e, col, side="right") - 1, 0, nb - 1)
        outside = (col < e[0]) | (col > e[-1])
        index = index * nb + jnp.where(outside, -10**12, i)
        edges.append(e)
        sizes.append(nb)
    total = int(np.prod(sizes))
    w = jnp.ones(aval(sample).shape[:1], np.float64) if weights is None else operand("histogramdd", weights)
    flat = _indexing.IndexUpdateHelper(jnp.zeros((total,), aval(w).dtype))[jnp.where(index < 0, total, index)].add(
        w, mode="drop")
    hist = jnp.reshape(flat, tuple(sizes))
    if density:
        vol = 1.0
        for k, e in enumerate(edges):
            shape = [1] * d
            shape[k] = sizes[k]
            vol = vol * jnp.reshape(diff(e), tuple(shape))
        hist = hist / vol / jnp.sum(hist)
    return hist, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    hist, edges = histogramdd(jnp.stack([jnp.ravel(x), jnp.ravel(y)], axis=1), bins, range, weights, density)
    return hist, edges[0], edges[1]


def array_str(a, max_line_width=None, precision=None, suppress_small=None):
    return np.array_str(np.asarray(a), max_line_width, precision, suppress_small)


def array_repr(arr, max_line_width=None, precision=None, suppress_small=None):
    return np.array_repr(np.asarray(arr), max_line_width, precision, suppress_small)


def trim_zeros(filt, trim="fb"):
    a = operand("trim_zeros", filt)
    n = _axis_len("trim_zeros", a, 0)
    nz = a != 0
    idx = np.arange(n)
    lo = jnp.min(jnp.where(nz, idx, n)) if "f" in trim.lower() else 0
    hi = jnp.max(jnp.where(nz, idx + 1, 0)) if "b" in trim.lower() else n
    return jnp.compress((idx >= lo) & (idx < hi), a)


def einsum_path(subscripts, *operands, optimize="greedy"):
    return np.einsum_path(subscripts, *(np.empty(tuple(aval(operand("einsum_path", o)).shape)) for o in operands),
                          optimize=optimize)


class _Grid:
    """numpy's mgrid / ogrid over static slices, as arrays of sprue.numpy."""

    def __init__(self, sparse: bool):
        self.sparse = sparse

    def __getitem__(self, key):
        grid = (np.ogrid if self.sparse else np.mgrid)[key]
        return [jnp.asarray(g) for g in grid] if isinstance(grid, (list, tuple)) else jnp.asarray(grid)


mgrid, ogrid = _Grid(False), _Grid(True)


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """numpy.polyfit by least squares on the Vandermonde matrix, its columns scaled to unit norm
    first as numpy scales them (the coefficients, highest power first; y may hold several columns)."""
    if full or cov:
        raise value_error("polyfit", "full=True and cov=True are not supported; the coefficients are")
    deg = static_int("polyfit", deg, "deg")
    x, y = operand("polyfit", x), operand("polyfit", y)
    dt = _float_type(x, y)
    lhs = vander(x.astype(dt), deg + 1)
    rhs = y.astype(dt)
    if w is not None:
        w = operand("polyfit", w).astype(dt)
        lhs = lhs * w[:, None]
        rhs = rhs * (w[:, None] if aval(rhs).ndim == 2 else w)
    scale = jnp.sqrt(jnp.sum(lhs * lhs, axis=0))
    scale = jnp.where(scale == 0, 1.0, scale)
    c = lstsq(lhs / scale, rhs, rcond)[0]
    return (c.T / scale).T


# -- pad --------------------------------------------------------------------------------------------
_PAD_MODES = ("constant", "edge", "wrap", "reflect", "symmetric", "linear_ramp", "maximum", "minimum", "mean",
              "median", "empty")


def _per_axis(value, nd: int, what: str):
    """numpy's per-axis (before, after) pairs of a pad argument (a number, a pair, or one per axis)."""
    try:
        return np.broadcast_to(np.asarray(value, dtype=object), (nd, 2))
    except ValueError:
        raise value_error("pad", f"{what} {value!r} does not broadcast to ({nd}, 2)") from None


def _index_pad(x, axis, before, after, kind):
    """The padded axis read through indices: wrap, reflect or symmetric (numpy's, for any width)."""
    n = _axis_len("pad", x, axis)
    i = np.arange(-before, n + after)
    if kind == "wrap":
        idx = i % n
    elif kind == "reflect":
        period = 2 * (n - 1)
        j = i % period if period else np.zeros_like(i)
        idx = np.where(j < n, j, period - j)
    else:
        j = i % (2 * n)
        idx = np.where(j < n, j, 2 * n - 1 - j)
    return jnp.take(x, idx, axis=axis)


def _block(x, axis, width, value):
    shape = list(aval(x).shape)
    shape[axis] = width
    return jnp.broadcast_to(jnp.asarray(value).astype(aval(x).dtype), tuple(shape)) if aval(jnp.asarray(value)).ndim == 0 \
        else jnp.broadcast_to(value, tuple(shape))


def _edge_slice(x, axis, first: bool, length=None):
    n = _axis_len("pad", x, axis)
    k = n if length is None else builtins.max(1, builtins.min(int(length), n))
    return _slice_axis(x, axis, 0, k) if first else _slice_axis(x, axis, n - k, n)


def _pad_axis(x, axis, before, after, mode, kw):
    if before == 0 and after == 0:
        return x
    if mode in ("wrap", "reflect", "symmetric"):
        out = _index_pad(x, axis, before, after, mode)
        if mode in ("reflect", "symmetric") and kw.get("reflect_type", "even") == "odd":
            n = _axis_len("pad", x, axis)
            first, last = _edge_slice(x, axis, True, 1), _edge_slice(x, axis, False, 1)
            pos = np.arange(-before, n + after)
            edge = jnp.where(jnp.reshape(jnp.asarray(pos < 0), (-1,) + (1,) * (aval(x).ndim - axis - 1)), first, last)
            inside = jnp.reshape(jnp.asarray((pos >= 0) & (pos < n)), (-1,) + (1,) * (aval(x).ndim - axis - 1))
            out = jnp.where(inside, out, 2 * edge - out)
        return out
    if mode == "edge":
        parts = [_block(x, axis, before, _edge_slice(x, axis, True, 1)), x, _block(x, axis, after, _edge_slice(x, axis, False, 1))]
    elif mode in ("constant", "empty"):
        cb, ca = kw["values"] if mode == "constant" else (0, 0)
        parts = [_block(x, axis, before, cb), x, _block(x, axis, after, ca)]
    elif mode == "linear_ramp":
        eb, ea = kw["values"]
        first, last = _edge_slice(x, axis, True, 1), _edge_slice(x, axis, False, 1)
        shape = (-1,) + (1,) * (aval(x).ndim - axis - 1)
        rb = jnp.reshape(jnp.asarray(np.arange(before) / builtins.max(before, 1)), shape)
        ra = jnp.reshape(jnp.asarray(np.arange(after - 1, -1, -1) / builtins.max(after, 1)), shape)
        lo = (eb + (first - eb) * rb) if before else _block(x, axis, 0, 0)
        hi = (ea + (last - ea) * ra) if after else _block(x, axis, 0, 0)
        cast = (lambda v: jnp.floor(v).astype(aval(x).dtype)) if aval(x).dtype.kind in "iu" else \
            (lambda v: v.astype(aval(x).dtype))   # (numpy 2's integer linspace rounds toward -inf)
        parts = [cast(lo) if before else lo, x, cast(hi) if after else hi]
    else:   # maximum, minimum, mean, median over stat_length elements at each end
        sb, sa = kw["stat"]
        stat = {"maximum": jnp.max, "minimum": jnp.min, "mean": jnp.mean, "median": median}[mode]

        def edge_stat(first, length):
            v = stat(_edge_slice(x, axis, first, length), axis=axis, keepdims=True)
            if mode in ("mean", "median") and aval(x).dtype.kind in "iu":
                v = jnp.round(v)
            return v.astype(aval(x).dtype)
        parts = [_block(x, axis, before, edge_stat(True, sb)), x, _block(x, axis, after, edge_stat(False, sa))]
    return jnp.concatenate(parts, axis=axis)


def pad(array, pad_width, mode="constant", **kwargs):
    """numpy.pad with static widths: every mode but a callable one, per axis in numpy's order (each
    axis padded from the array the earlier axes' padding made)."""
    x = operand("pad", array)
    if callable(mode) or mode not in _PAD_MODES:
        raise value_error("pad", f"mode {mode!r} is not supported; choose one of {', '.join(_PAD_MODES)}")
    nd = aval(x).ndim
    widths = _per_axis(pad_width, nd, "pad_width")
    if any(not isinstance(w, (int, np.integer)) or w < 0 for w in widths.ravel()):
        raise value_error("pad", f"pad_width must be non-negative static ints, got {pad_width!r}")
    values = _per_axis(kwargs.get("constant_values", 0) if mode == "constant" else kwargs.get("end_values", 0), nd,
                       "constant_values" if mode == "constant" else "end_values")
    stats = _per_axis(kwargs.get("stat_length", None), nd, "stat_length") if "stat_length" in kwargs \
        else np.full((nd, 2), None, dtype=object)
    for axis in range(nd):
        b, a = int(widths[axis, 0]), int(widths[axis, 1])
        kw = {"values": tuple(values[axis]), "stat": tuple(stats[axis]), "reflect_type": kwargs.get("reflect_type", "even")}
        x = _pad_axis(x, axis, b, a, mode, kw)
    return x


# -- the last few of jax.numpy's names ------------------------------------------------------------
def i0(x):
    """The modified Bessel function of the first kind, order 0: exp(|x|) * i0e(x) (lax.bessel_i0e)."""
    x = operand("i0", x)
    x = x.astype(_float_type(x))
    return jnp.exp(jnp.abs(x)) * lax.bessel_i0e(x)


def kaiser(M, beta):
    M = static_int("kaiser", M, "M")
    if M < 1:
        return jnp.zeros((0,), np.float64)
    if M == 1:
        return jnp.ones((1,), np.float64)
    n = np.arange(M)
    alpha = (M - 1) / 2.0
    arg = beta * np.sqrt(1 - ((n - alpha) / alpha) ** 2)
    return i0(jnp.asarray(arg)) / i0(jnp.asarray(float(beta)))


def nextafter(x1, x2, /):
    x1, x2 = jnp.broadcast_arrays(operand("nextafter", x1), operand("nextafter", x2))
    dt = np.result_type(aval(x1).dtype, aval(x2).dtype)
    return lax.nextafter(x1.astype(dt), x2.astype(dt))


def spacing(x, /):
    """numpy.spacing: the distance from x to the next float away from zero (negative for x < 0)."""
    x = operand("spacing", x)
    x = x.astype(_float_type(x))
    away = jnp.where(jnp.signbit(x), -np.inf, np.inf).astype(aval(x).dtype)
    return nextafter(x, away) - x


def poly(seq_of_zeros):
    """The coefficients of the polynomial with these roots (a 1-d array), highest power first."""
    r = operand("poly", seq_of_zeros)
    if aval(r).ndim == 2 and aval(r).shape[0] == aval(r).shape[1] and aval(r).shape[0] > 0:
        raise value_error("poly", "the characteristic polynomial of a matrix needs eigvals, which sprue lacks yet")
    r = jnp.ravel(r)
    c = jnp.ones((1,), _float_type(r))
    for k in range(_axis_len("poly", r, 0)):
        c = jnp.convolve(c, jnp.stack([jnp.ones((), aval(c).dtype), -r[k].astype(aval(c).dtype)]))
    return c


def sort_complex(a):
    """Sorted by real part, then imaginary part (numpy's order for complex numbers), as complex."""
    a = operand("sort_complex", a)
    z = a if aval(a).dtype.kind == "c" else a.astype(np.complex128 if aval(a).dtype != np.float32 else np.complex64)
    order = lexsort((jnp.imag(z), jnp.real(z)), axis=-1)
    return jnp.take_along_axis(z, order, axis=-1)


def mask_indices(n, mask_func, k=0):
    return tuple(jnp.asarray(i) for i in np.mask_indices(static_int("mask_indices", n, "n"),
                                                          lambda m, kk: np.asarray(mask_func(m, kk)), k))
