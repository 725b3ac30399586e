"""Keys and bits: JAX's threefry2x32 PRNG (jax._src.random.threefry2x32, with
`jax_threefry_partitionable`, JAX's default since 0.5) over sprue.lax.threefry2x32.

A key is an ordinary uint32 array whose last axis holds the key's two words (JAX's raw `PRNGKey`
form): it traces, loops, vmaps and compiles like any other array. JAX's typed keys
(`jax.random.key`) carry the same two words; sprue keeps them raw, so `key` and `PRNGKey` give the
same array and `key_data`/`wrap_key_data` check and return it. The functions below also take key
arrays of shape (*batch, 2) (JAX's `random_bits` of a key array: the batch axes lead), which is what
the jaxpr reader needs for vmapped programs; the public samplers take one key, as JAX's do.
"""
from __future__ import annotations

import numpy as np

import sprue.numpy as jnp
from sprue import lax
from sprue.base import dtypes
from sprue.base.errors import SprueTypeError, SprueValueError, at
from sprue.base.source_info import user_frame_summary
from sprue.numpy import _dims
from sprue.trace.tracing import Tracer, dim_value

UINT32 = np.dtype(np.uint32)
UINT_DTYPES = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: UINT32, 64: np.dtype(np.uint64)}
IMPLS = (None, "threefry2x32", "threefry")


def type_error(fname: str, msg: str) -> SprueTypeError:
    return SprueTypeError(f"sprue.random.{fname}: {msg}{at(user_frame_summary())}")


def value_error(fname: str, msg: str) -> SprueValueError:
    return SprueValueError(f"sprue.random.{fname}: {msg}{at(user_frame_summary())}")


def _dtype_shape(x):
    if isinstance(x, Tracer):
        return x.aval.dtype, x.aval.shape
    a = np.asarray(x)
    return a.dtype, a.shape


def check_key(fname: str, key, *, batched: bool = False):
    """The key as an array: uint32 with a last axis of 2 (exactly uint32[2] unless `batched`)."""
    if not isinstance(key, Tracer):
        key = np.asarray(key)
    dtype, shape = _dtype_shape(key)
    ok = dtype == UINT32 and len(shape) >= 1 and shape[-1] == 2 and (batched or len(shape) == 1)
    if not ok:
        what = "a key uint32[2] or keys uint32[..., 2]" if batched else "a single key, a uint32[2] array"
        got = f"{dtypes.short_name(dtype)}{list(shape)}" if dtype in dtypes.SUPPORTED else f"{dtype}{list(shape)}"
        hint = " (for a batch of keys, map the function over them with sprue.vmap)" \
            if dtype == UINT32 and len(shape) > 1 and shape[-1] == 2 else \
            " (make one with sprue.random.PRNGKey(seed) or sprue.random.key(seed))"
        raise type_error(fname, f"expected {what}, got {got}{hint}")
    return key


def _check_impl(fname: str, impl):
    if impl not in IMPLS:
        raise value_error(fname, f"impl={impl!r}: sprue implements JAX's default generator only,"
                                 f" 'threefry2x32' (leave impl=None)")


def threefry_seed(seed):
    """The raw key of an integer seed (JAX's threefry_seed): its high and low 32 bits (a seed of 32
    bits or fewer has high word 0)."""
    seed = seed if isinstance(seed, Tracer) else np.asarray(seed)
    dtype, shape = _dtype_shape(seed)
    if shape:
        raise type_error("PRNGKey", f"a seed must be a scalar, got a {dtypes.short_name(dtype)}{list(shape)}")
    if not dtypes.is_int(dtype):
        raise type_error("PRNGKey", f"a seed must be an integer, got {dtype}")
    high = lax.shift_right_logical(seed, np.array(32, dtype)[()]) if dtype.itemsize == 8 else \
        np.zeros((), UINT32)
    words = [lax.convert_element_type(w, UINT32) for w in (high, seed)]
    return jnp.stack(words)


def PRNGKey(seed, *, impl=None):
    """A key (uint32[2]) from an integer seed, as jax.random.PRNGKey gives with 64-bit types on
    (a Python int seed is int64: seeds of more than 32 bits keep their high bits)."""
    _check_impl("PRNGKey", impl)
    if isinstance(seed, (bool, float)) or (not isinstance(seed, (int, np.integer, Tracer, np.ndarray))):
        raise type_error("PRNGKey", f"a seed must be an integer, got {type(seed).__name__} {seed!r}")
    if isinstance(seed, int) and not isinstance(seed, np.integer):
        if not -2 ** 63 <= seed < 2 ** 64:
            raise value_error("PRNGKey", f"the seed {seed} does not fit 64 bits")
        seed = np.asarray(seed, np.uint64 if seed >= 2 ** 63 else np.int64)[()]
    return threefry_seed(seed)


def key(seed, *, impl=None):
    """jax.random.key's counterpart: sprue's keys are raw, so this is PRNGKey(seed)."""
    _check_impl("key", impl)
    return PRNGKey(seed)


def key_data(keys):
    """The key's uint32 words: sprue's keys are their words already."""
    return check_key("key_data", keys, batched=True)


def wrap_key_data(key_bits_array, *, impl=None):
    """A key from its uint32 words (checked): sprue's keys are their words."""
    _check_impl("wrap_key_data", impl)
    return check_key("wrap_key_data", key_bits_array, batched=True)


def _words(key):
    """The key's two words, each of the key array's batch shape."""
    return key[..., 0], key[..., 1]


def iota_2x32(shape):
    """The row-major position of every element of `shape` as a 64-bit count, in two uint32 arrays
    (high word, low word): JAX's prng.iota_2x32_shape. Sizes may be known only at run time."""
    if not shape:
        zero = np.zeros((), UINT32)
        return zero, zero
    index = None
    stride = 1
    for axis in reversed(range(len(shape))):
        term = lax.broadcasted_iota(np.int64, shape, axis)
        if not (isinstance(stride, int) and stride == 1):
            term = lax.mul(term, jnp.asarray(dim_value(stride), np.int64))
        index = term if index is None else lax.add(index, term)
        stride = stride * shape[axis]
    high = lax.convert_element_type(lax.shift_right_logical(index, np.int64(32)), UINT32)
    return high, lax.convert_element_type(index, UINT32)


def _hash_counts(key, shape):
    """threefry2x32 of every position of `shape` under the key (keys of shape (*batch, 2): the
    result is (*batch, *shape))."""
    k1, k2 = _words(key)
    c1, c2 = iota_2x32(shape)
    batch = tuple(k1.shape)
    if batch and shape:   # threefry2x32 takes one shape or rank 0: both brought to (*batch, *shape)
        full = (*batch, *shape)
        k1, k2 = (lax.broadcast_in_dim(k, full, tuple(range(len(batch)))) for k in (k1, k2))
        c1, c2 = (lax.broadcast_in_dim(c, full, tuple(range(len(batch), len(full)))) for c in (c1, c2))
    return lax.threefry2x32(k1, k2, c1, c2)


def random_bits(key, bit_width: int, shape):
    """`bit_width` random bits (8, 16, 32 or 64) per element of `shape`, as unsigned integers:
    JAX's _threefry_random_bits_partitionable (both hash words xor'ed, or joined for 64 bits)."""
    key = check_key("bits", key, batched=True)
    shape = _dims.shape_arg("random.bits", shape)
    if bit_width not in UINT_DTYPES:
        raise value_error("bits", f"bit_width={bit_width}: sprue makes 8, 16, 32 or 64 random bits")
    bits1, bits2 = _hash_counts(key, shape)
    dtype = UINT_DTYPES[bit_width]
    if bit_width == 64:
        high, low = (lax.convert_element_type(b, dtype) for b in (bits1, bits2))
        return lax.bitwise_or(lax.shift_left(high, np.uint64(32)), low)
    if bit_width == 32:
        return lax.bitwise_xor(bits1, bits2)
    return lax.convert_element_type(lax.bitwise_xor(bits1, bits2), dtype)


def split_keys(key, shape):
    """Keys of shape (*batch, *shape, 2): JAX's _threefry_split_foldlike."""
    bits1, bits2 = _hash_counts(key, shape)
    return jnp.stack([bits1, bits2], axis=-1)


def fold_keys(key, data):
    """JAX's _threefry_fold_in: the hash of the counter (0, data) under the key."""
    k1, k2 = _words(key)
    data = lax.convert_element_type(data, UINT32) if isinstance(data, Tracer) else np.asarray(data, UINT32)
    if k1.shape and not np.shape(data):   # a batch of keys, one datum: the counters at its shape
        data = lax.broadcast_in_dim(data, tuple(k1.shape), ())
    bits1, bits2 = lax.threefry2x32(k1, k2, jnp.zeros(k1.shape, UINT32), data)
    return jnp.stack([bits1, bits2], axis=-1)


def split(key, num=2):
    """`num` new keys (num may be a shape): uint32[num, 2]."""
    key = check_key("split", key)
    shape = tuple(num) if isinstance(num, (tuple, list)) else (num,)
    return split_keys(key, shape)


def fold_in(key, data):
    """A new key from the key and a 32-bit integer (JAX's fold_in: `data` is taken modulo 2**32)."""
    key = check_key("fold_in", key)
    if np.ndim(data) if not isinstance(data, Tracer) else data.ndim:
        raise type_error("fold_in", "fold_in takes a scalar integer; for an array of them, map fold_in"
                                    " over it with sprue.vmap")
    if isinstance(data, Tracer):
        if not dtypes.is_int(data.aval.dtype):
            raise type_error("fold_in", f"data must be an integer, got {data.aval.str_short()}")
    else:
        if isinstance(data, (bool, np.bool_)) or not np.issubdtype(np.asarray(data).dtype, np.integer):
            raise type_error("fold_in", f"data must be an integer, got {data!r}")
        if isinstance(data, int) and not 0 <= data < 2 ** 32:
            raise value_error("fold_in", f"data={data} does not fit uint32 (0 <= data < 2**32), as JAX requires")
    return fold_keys(key, data)


def bits(key, shape=(), dtype=None):
    """Uniform random bits as unsigned integers (default uint64, as JAX with 64-bit types)."""
    key = check_key("bits", key)
    dtype = np.dtype(np.uint64) if dtype is None else dtypes.canonicalize(dtype)
    if not np.issubdtype(dtype, np.unsignedinteger):
        raise value_error("bits", f"dtype must be an unsigned integer dtype, got {dtype}")
    return random_bits(key, dtype.itemsize * 8, shape)
