"""The samplers of jax.random, each JAX's algorithm step for step (jax._src.random.core in JAX 0.10),
so that one key gives JAX's numbers: integers and uniform floats bit for bit, values computed with
transcendental functions (normal's erf_inv, gumbel's logs) to within a few ulp of XLA's.

Defaults are JAX's with 64-bit types on (sprue's defaults): float64 floats, int64 integers.
"""
from __future__ import annotations

import math

import numpy as np

import sprue.numpy as jnp
from sprue import lax
from sprue.base import dtypes
from sprue.numpy import _dims
from sprue.random._keys import (
    UINT_DTYPES,
    check_key,
    random_bits,
    split_keys,
    type_error,
    value_error,
)
from sprue.random._special import erf_inv
from sprue.trace.tracing import Tracer


def _float_dtype(fname: str, dtype):
    dtype = dtypes.float64 if dtype is None else dtypes.canonicalize(dtype)
    if dtype not in (dtypes.float32, dtypes.float64):
        raise value_error(fname, f"dtype must be float32 or float64, got {dtype}")
    return dtype


def _shape(fname: str, shape):
    return _dims.shape_arg(f"random.{fname}", shape)


def _as(x, dtype):
    """x (a Python/numpy value or a tracer) converted to dtype."""
    if isinstance(x, Tracer):
        return lax.convert_element_type(x, dtype)
    return np.asarray(x).astype(dtype)


def _check_broadcast(fname: str, shape, *params):
    """JAX's _check_shape: the parameters' shapes must broadcast to `shape` without changing it."""
    for p in params:
        ps = tuple(p.shape) if isinstance(p, Tracer) else np.shape(p)
        if len(ps) > len(shape) or any(not (a == 1 or _dims.dims_equal(a, b))
                                       for a, b in zip(ps[::-1], shape[::-1])):
            raise value_error(fname, f"the parameter shape {ps} does not broadcast to shape {tuple(shape)}")


def _to_rank(x, rank: int):
    """x with leading axes of size 1 up to `rank` (JAX's lax.broadcast_to_rank)."""
    nd = x.ndim if isinstance(x, Tracer) else np.ndim(x)
    if nd == rank:
        return x
    return jnp.reshape(x, (1,) * (rank - nd) + tuple(x.shape))


def _uniform(key, shape, dtype, minval, maxval):
    """JAX's _uniform: the top nmant random bits as a mantissa under the exponent of 1.0, minus 1,
    scaled to [minval, maxval). JAX bitcasts (m | bits of 1.0) to a float in [1, 2) and subtracts 1;
    that is m * 2**-nmant exactly (Sterbenz), which is what this computes, with no bitcast."""
    minval = _to_rank(_as(minval, dtype), len(shape))
    maxval = _to_rank(_as(maxval, dtype), len(shape))
    finfo = np.finfo(dtype)
    nbits, nmant = finfo.bits, finfo.nmant
    uint = UINT_DTYPES[nbits]
    bits = random_bits(key, nbits, shape)
    mantissa = lax.shift_right_logical(bits, np.array(nbits - nmant, uint)[()])
    floats = lax.mul(lax.convert_element_type(mantissa, dtype), np.array(2.0 ** -nmant, dtype)[()])
    return jnp.maximum(minval, floats * (maxval - minval) + minval)


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Uniform floats in [minval, maxval) of the given shape (default float64)."""
    key = check_key("uniform", key)
    dtype = _float_dtype("uniform", dtype)
    shape = _shape("uniform", shape)
    _check_broadcast("uniform", shape, minval, maxval)
    return _uniform(key, shape, dtype, minval, maxval)


def normal(key, shape=(), dtype=None):
    """Standard normal floats: sqrt(2) * erf_inv(u), u uniform in (-1, 1) (JAX's _normal_real)."""
    key = check_key("normal", key)
    dtype = _float_dtype("normal", dtype)
    shape = _shape("normal", shape)
    return _normal(key, shape, dtype)


def _normal(key, shape, dtype):
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    u = _uniform(key, shape, dtype, lo, np.array(1.0, dtype))
    return lax.mul(np.array(np.sqrt(2), dtype)[()], erf_inv(u))


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Normal floats truncated to (lower, upper) (JAX's _truncated_normal). sprue needs the bounds
    as Python or numpy values (erf of traced bounds waits for sprue.lax.erf)."""
    key = check_key("truncated_normal", key)
    dtype = _float_dtype("truncated_normal", dtype)
    if isinstance(lower, Tracer) or isinstance(upper, Tracer):
        raise type_error("truncated_normal", "the bounds must be Python or numpy values in sprue (traced"
                                             " bounds need erf, which sprue.lax lacks for now)")
    lower, upper = np.asarray(lower, dtype), np.asarray(upper, dtype)
    shape = np.broadcast_shapes(lower.shape, upper.shape) if shape is None else _shape("truncated_normal", shape)
    _check_broadcast("truncated_normal", shape, lower, upper)
    sqrt2 = np.array(np.sqrt(2), dtype)
    erf = np.vectorize(math.erf, otypes=[np.float64])
    a = erf((lower / sqrt2).astype(np.float64)).astype(dtype)
    b = erf((upper / sqrt2).astype(np.float64)).astype(dtype)
    u = _uniform(key, shape, dtype, a, b)
    out = lax.mul(sqrt2[()], erf_inv(u))
    lo = np.nextafter(lower, np.array(np.inf, dtype))
    hi = np.nextafter(upper, np.array(-np.inf, dtype))
    return jnp.clip(out, lo, hi)


def exponential(key, shape=(), dtype=None):
    """Exponential floats of rate 1: -log1p(-u) (JAX's _exponential)."""
    key = check_key("exponential", key)
    dtype = _float_dtype("exponential", dtype)
    u = _uniform(key, _shape("exponential", shape), dtype, 0.0, 1.0)
    return lax.neg(lax.log1p(lax.neg(u)))


def bernoulli(key, p=0.5, shape=None, mode="low"):
    """Booleans that are True with probability p (JAX's _bernoulli, modes 'low' and 'high')."""
    key = check_key("bernoulli", key)
    if mode not in ("low", "high"):
        raise value_error("bernoulli", f"mode={mode!r}: expected 'high' or 'low'")
    if not isinstance(p, Tracer):
        p = np.asarray(p, np.float64 if isinstance(p, (int, float)) else None)
    dtype = p.aval.dtype if isinstance(p, Tracer) else p.dtype
    if not dtypes.is_float(dtype):
        raise type_error("bernoulli", f"the probability p must be a float, got {dtype}")
    shape = tuple(p.shape) if shape is None else _shape("bernoulli", shape)
    _check_broadcast("bernoulli", shape, p)
    if mode == "high":
        u = _uniform(key, (2, *shape), dtype, 0.0, 1.0)
        u1, u2 = u[0], u[1] * np.array(2.0 ** -np.finfo(dtype).nmant, dtype)[()]
        return u2 < p - u1
    return _uniform(key, shape, dtype, 0.0, 1.0) < p


def _convert_and_clip(val, dtype):
    """An integer value converted to dtype, clipped to its range instead of wrapped."""
    src = np.dtype(val.aval.dtype if isinstance(val, Tracer) else np.asarray(val).dtype)
    lo = max(np.iinfo(dtype).min, np.iinfo(src).min)
    hi = min(np.iinfo(dtype).max, np.iinfo(src).max)
    return _as(jnp.clip(val, np.array(lo, src)[()], np.array(hi, src)[()]), dtype)


def _int_operand(x):
    x = x if isinstance(x, Tracer) else np.asarray(x)
    dt = x.aval.dtype if isinstance(x, Tracer) else x.dtype
    return x if dtypes.is_int(dt) else _as(x, np.int64)


def randint(key, shape, minval, maxval, dtype=None):
    """Integers in [minval, maxval) (JAX's _randint: twice the bits, reduced modulo the span)."""
    key = check_key("randint", key)
    dtype = dtypes.int64 if dtype is None else dtypes.canonicalize(dtype)
    if not dtypes.is_int(dtype):
        raise type_error("randint", f"dtype must be an integer dtype, got {dtype}")
    shape = _shape("randint", shape)
    _check_broadcast("randint", shape, minval, maxval)
    minval, maxval = _int_operand(minval), _int_operand(maxval)
    max_dtype = np.dtype(maxval.aval.dtype if isinstance(maxval, Tracer) else maxval.dtype)
    maxval_out_of_range = lax.gt(
        jnp.asarray(maxval), _convert_and_clip(np.array(np.iinfo(dtype).max, dtype), max_dtype))
    minval = _to_rank(_convert_and_clip(minval, dtype), len(shape))
    maxval = _to_rank(_convert_and_clip(maxval, dtype), len(shape))
    maxval_out_of_range = _to_rank(maxval_out_of_range, len(shape))
    nbits = dtype.itemsize * 8
    k1, k2 = split_keys(key, (2,))
    higher_bits, lower_bits = random_bits(k1, nbits, shape), random_bits(k2, nbits, shape)
    uint = UINT_DTYPES[nbits]
    one = np.array(1, uint)[()]
    span = _as(jnp.subtract(maxval, minval), uint)
    span = jnp.where(jnp.less_equal(maxval, minval), one, span)
    # a maxval past dtype's range makes the span one larger; the largest span wraps to 0, which the
    # remainders below then leave alone (XLA's x % 0 is x)
    span = jnp.where(maxval_out_of_range & jnp.greater(maxval, minval), span + one, span)
    # (a * b) % n = ((a % n) * (b % n)) % n, with 2**nbits % n computed as (2**(nbits/2) % n)**2 % n
    multiplier = _rem(np.array(2 ** (nbits // 2), uint)[()], span)
    multiplier = _rem(multiplier * multiplier, span)
    offset = _rem(_rem(higher_bits, span) * multiplier + _rem(lower_bits, span), span)
    return jnp.add(minval, _as(offset, dtype))


def _rem(x, n):
    """x % n for unsigned integers, x where n is 0 (XLA's remainder; sprue.numpy's gives 0 there)."""
    return jnp.where(n == 0, x, jnp.remainder(x, n))


def gumbel(key, shape=(), dtype=None, mode="low"):
    """Standard Gumbel floats: -log(-log(u)), u uniform in [tiny, 1) (JAX's 'low' mode, its default)."""
    key = check_key("gumbel", key)
    dtype = _float_dtype("gumbel", dtype)
    if mode != "low":
        raise value_error("gumbel", f"mode={mode!r}: sprue implements JAX's default mode 'low'")
    return _gumbel(key, _shape("gumbel", shape), dtype)


def _gumbel(key, shape, dtype):
    u = _uniform(key, shape, dtype, np.finfo(dtype).tiny, 1.0)
    return lax.neg(lax.log(lax.neg(lax.log(u))))


def _top_k_indices(x, k: int):
    """The indices of the k largest entries along the last axis, largest first, ties by index
    (lax.top_k's order): a stable sort of -x."""
    return jnp.argsort(jnp.negative(x), axis=-1)[..., :k]


def categorical(key, logits, axis=-1, shape=None, replace=True, mode=None):
    """Category indices drawn with log-probabilities `logits` along `axis` (the Gumbel-max trick,
    or Gumbel-top-k without replacement, as JAX's _categorical)."""
    key = check_key("categorical", key)
    if mode not in (None, "low"):
        raise value_error("categorical", f"mode={mode!r}: sprue implements JAX's default mode 'low'")
    logits = logits if isinstance(logits, Tracer) else jnp.asarray(logits)
    nd = logits.ndim
    if not -nd <= axis < nd:
        raise value_error("categorical", f"axis {axis} is out of bounds for logits of rank {nd}")
    axis %= nd
    dtype = np.dtype(logits.dtype)
    if not dtypes.is_float(dtype):
        raise type_error("categorical", f"logits must be floats, got {dtype}")
    batch_shape = tuple(d for i, d in enumerate(logits.shape) if i != axis)
    shape = batch_shape if shape is None else _shape("categorical", shape)
    if tuple(shape[len(shape) - len(batch_shape):]) != batch_shape:
        raise value_error("categorical", f"shape {tuple(shape)} must end with the logits' batch shape {batch_shape}")
    prefix = tuple(shape[:len(shape) - len(batch_shape)])
    if replace:
        logits_shape = list(batch_shape)
        logits_shape.insert(axis, logits.shape[axis])
        g = _gumbel(key, (*prefix, *logits_shape), dtype)
        expanded = jnp.reshape(logits, (1,) * len(prefix) + tuple(logits.shape))
        return jnp.argmax(g + expanded, axis=axis + len(prefix))
    k = math.prod(prefix)
    if k > logits.shape[axis]:
        raise value_error("categorical", f"the number of samples without replacement ({k}) cannot exceed"
                                         f" the number of categories ({logits.shape[axis]})")
    perturbed = logits + _gumbel(key, tuple(logits.shape), dtype)
    indices = _top_k_indices(jnp.moveaxis(perturbed, axis, -1), k)   # batch_shape + (k,)
    indices = jnp.moveaxis(indices, -1, 0).astype(np.int32)   # lax.top_k's indices are int32
    return jnp.reshape(indices, tuple(shape))


def _shuffle(key, x, axis: int):
    """JAX's _shuffle: a few rounds (enough that all sort keys differ with high probability) of a
    stable sort of x by 32 fresh random bits per element."""
    size = math.prod(x.shape)
    if not isinstance(size, int):
        raise value_error("permutation", "sprue shuffles arrays of static size only (as JAX)")
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        keys = split_keys(key, (2,))
        key, subkey = keys[0], keys[1]
        sort_keys = random_bits(subkey, 32, tuple(x.shape))
        x = lax.sort((sort_keys, x), dimension=axis, is_stable=True, num_keys=1)[1]
    return x


def permutation(key, x, axis=0, independent=False):
    """A random permutation of arange(x) (x an int), or of x's entries along `axis` (whole slices
    unless `independent`)."""
    key = check_key("permutation", key)
    if not isinstance(x, Tracer):
        if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
            return _shuffle(key, jnp.arange(int(x)), 0)
        x = jnp.asarray(x)
    if x.ndim == 0:
        raise type_error("permutation", "x must be an integer or at least 1-dimensional")
    if not -x.ndim <= axis < x.ndim:
        raise value_error("permutation", f"axis {axis} is out of bounds for an array of rank {x.ndim}")
    axis %= x.ndim
    if independent or x.ndim == 1:
        return _shuffle(key, x, axis)
    order = _shuffle(key, jnp.arange(x.shape[axis]), 0)
    return jnp.take(x, order, axis=axis)


def choice(key, a, shape=(), replace=True, p=None, axis=0):
    """Samples of a's entries along `axis` (or of arange(a)), with or without replacement,
    uniformly or with probabilities p (JAX's choice)."""
    key = check_key("choice", key)
    if not isinstance(shape, (tuple, list)):
        raise type_error("choice", f"shape must be a sequence, got {shape!r}")
    arr = a if isinstance(a, Tracer) else jnp.asarray(a)
    if arr.ndim == 0:
        if isinstance(a, Tracer):
            raise type_error("choice", "a scalar `a` must be a Python or numpy integer (the population size)")
        n_inputs = int(a)
    else:
        if not -arr.ndim <= axis < arr.ndim:
            raise value_error("choice", f"axis {axis} is out of bounds for an array of rank {arr.ndim}")
        axis %= arr.ndim
        n_inputs = arr.shape[axis]
    n_draws = math.prod(shape)
    if n_draws == 0:
        return jnp.zeros(tuple(shape), arr.dtype)
    if n_inputs <= 0:
        raise value_error("choice", "a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise value_error("choice", f"cannot take a larger sample (size {n_draws}) than the population"
                                    f" (size {n_inputs}) when replace=False")
    if p is None:
        if replace:
            ind = randint(key, tuple(shape), 0, n_inputs)
            result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis=axis)
        else:
            perm = permutation(key, n_inputs if arr.ndim == 0 else arr, axis)
            limit = list(perm.shape)
            limit[axis if arr.ndim else 0] = n_draws
            result = lax.slice(perm, [0] * perm.ndim, limit)
    else:
        p = p if isinstance(p, Tracer) else jnp.asarray(p, np.float64 if not hasattr(p, "dtype") else None)
        if not dtypes.is_float(p.dtype):
            p = _as(p, np.float64)
        if tuple(p.shape) != (n_inputs,):
            raise value_error("choice", f"p must be None or a 1-D vector of a.shape[axis] = {n_inputs}"
                                        f" entries, got shape {tuple(p.shape)}")
        if replace:
            p_cuml = jnp.cumsum(p)
            r = p_cuml[-1] * (1 - _uniform(key, tuple(shape), np.dtype(p.dtype), 0.0, 1.0))
            # searchsorted(p_cuml, r), side 'left': how many cumulative sums lie below r
            ind = jnp.sum(jnp.less(p_cuml, jnp.expand_dims(r, -1)), axis=-1).astype(np.int64)
        else:
            g = _gumbel(key, (n_inputs,), np.dtype(p.dtype)) + jnp.log(p)
            ind = _top_k_indices(g, n_draws).astype(np.int64)
        result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis=axis)
    out_shape = tuple(shape) if arr.ndim == 0 else (*arr.shape[:axis], *shape, *arr.shape[axis + 1:])
    return jnp.reshape(result, out_shape)
