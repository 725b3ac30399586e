"""JAX's PRNG-key primitives as a printed jaxpr has them (JAX 0.10: `random_seed`, `random_wrap`,
`random_unwrap`, `random_bits`, `random_split`, `random_fold_in`, `random_clone`; `threefry2x32` is
sprue.lax's own primitive; `rng_bit_generator`, XLA's generator, sprue.lax's composition), read into
sprue.random's operations on raw keys.

A typed key array `key<tag>[s...]` is read as its words, `u32[s..., w]` (jaxpr_eval.Evaluator.aval),
so wrapping and unwrapping are identities. For JAX's default implementation, threefry2x32 (`fry`,
w = 2), the others are sprue.random's computations, batched over the key array's axes as JAX's are.
For the `rbg` and `unsafe_rbg` (`urbg`) implementations (jax._src.random.rbg, w = 4) bits are XLA's
rng_bit_generator of the key (sprue.lax.rng_bit_generator, XLA's CPU algorithm bit for bit); `rbg`
splits and folds each half of the key as a threefry key, `unsafe_rbg` hashes with the generator
itself. Structural operations on key arrays (slicing split keys, `keys[i]`, reshapes, broadcasts,
selects) get the words axis added to their params and operands (`for_key_arrays`).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from sprue import lax
from sprue.random import _keys
from sprue.random._gamma import _gamma_flat
from sprue.trace.tracing import Tracer

# the name JAX prints for its threefry2x32 implementation (prng.threefry_prng_impl's tag)
THREEFRY_TAG = "fry"
# the key implementations JAX prints (their tags) and the uint32 words of one key of each
KEY_WORDS = {THREEFRY_TAG: 2, "rbg": 4, "urbg": 4}
FORMS = {"random_seed", "random_wrap", "random_unwrap", "random_bits", "random_split", "random_fold_in",
         "random_clone", "random_gamma", "rng_bit_generator"}
# their params, and those JAX prints that change nothing sprue computes
PARAMS = {"random_seed": {"impl"}, "random_wrap": {"impl"}, "random_bits": {"bit_width", "shape"},
          "random_split": {"shape"}}


def key_impl_supported(tag: str) -> bool:
    return tag in KEY_WORDS


def key_words(tag: str) -> int:
    return KEY_WORDS[tag]


def key_tag(out_types) -> str | None:
    """The implementation of the key arrays an equation makes (its first typed key result)."""
    for t in out_types:
        if t is not None and t.dtype.startswith("key<"):
            return t.dtype[4:-1]
    return None


def _seed_words(seed):
    """JAX's threefry_seed over an array of seeds: (high word, low word) on a last axis of 2."""
    dtype = np.dtype(seed.aval.dtype) if hasattr(seed, "aval") else np.asarray(seed).dtype
    if dtype.itemsize == 8:
        high = lax.convert_element_type(lax.shift_right_logical(seed, np.array(32, dtype)[()]), _keys.UINT32)
    else:
        high = lax.convert_element_type(lax.mul(seed, np.array(0, dtype)[()]), _keys.UINT32)
    low = lax.convert_element_type(seed, _keys.UINT32)
    shape = tuple(np.shape(seed)) if not hasattr(seed, "aval") else tuple(seed.aval.shape)
    words = [lax.broadcast_in_dim(w, (*shape, 1), tuple(range(len(shape)))) for w in (high, low)]
    return lax.concatenate(words, len(shape))


def apply(name: str, args: list, param: Callable[[str], object], error: Callable[[str], Exception],
          tag: str | None = None) -> list:
    """The outputs of the equation `name` (one of FORMS) with operands `args`; param(k) converts
    the equation's param k; error(message) makes the reader's error at the equation; `tag`: the
    implementation of the key arrays it makes (key_tag of its declared results), if any."""
    if "impl" in PARAMS.get(name, ()):
        tag = str(param("impl"))
        if not key_impl_supported(tag):
            raise error(f"{name}: the PRNG implementation '{tag}' is not supported; sprue implements JAX's"
                        f" {', '.join(sorted(KEY_WORDS))}")
    if name == "rng_bit_generator":
        return list(lax.rng_bit_generator(args[0], param("shape"), param("dtype"), str(param("algorithm"))))
    if name in ("random_wrap", "random_unwrap", "random_clone"):
        return [args[0]]
    if name == "random_bits" and _words_of(args[0]) == 4:
        return [_rbg_bits(args[0], param("shape"), UINT_BITS[param("bit_width")])]
    if tag in ("rbg", "urbg"):
        return [_rbg(name, tag, args, param, error)]
    if name == "random_seed":
        return [_seed_words(args[0])]
    if name == "random_bits":
        return [_keys.random_bits(args[0], param("bit_width"), param("shape"))]
    if name == "random_split":
        return [_keys.split_keys(args[0], param("shape"))]
    if name == "random_gamma":
        if _words_of(args[0]) != 2:
            raise error("random_gamma of rbg / unsafe_rbg keys is not supported (sprue samples gamma from threefry keys)")
        if not all(isinstance(d, int) for d in (args[1].aval.shape if isinstance(args[1], Tracer) else ())):
            raise error("random_gamma of a shape known only at run time is not supported (as in JAX)")
        return [_gamma(args[0], args[1], bool(param("log_space")))]
    return [_keys.fold_keys(args[0], args[1])]   # random_fold_in


UINT_BITS = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def _shape_of(x) -> tuple:
    return tuple(x.aval.shape if isinstance(x, Tracer) else np.shape(x))


def _words_of(keys) -> int:
    return _shape_of(keys)[-1]


def _first_key(keys):
    """The first key of a key array (*batch, 4). JAX batches rng_bit_generator by drawing the whole
    batch's bits from its first key (lax.control_flow.loops._rng_bit_generator_batching_rule), so a
    key array's rbg bits are those of its first key, of shape (*batch, *shape)."""
    batch = _shape_of(keys)[:-1]
    return lax.reshape(lax.slice(keys, (0,) * len(batch) + (0,), (1,) * len(batch) + (4,)), (4,)) if batch else keys


def _rbg_bits(keys, shape, dtype):
    return lax.rng_bit_generator(_first_key(keys), (*_shape_of(keys)[:-1], *shape), dtype)[1]


def _rbg(name: str, tag: str, args: list, param, error):
    """random_seed / random_split / random_fold_in of rbg and unsafe_rbg keys (jax._src.random.rbg):
    a seed is threefry's seed twice; rbg splits and folds each half as a threefry key; unsafe_rbg
    splits with every 10th row of the generator's uint32[10 n, 4] and folds in by xor with the last
    row of its bits under the datum's seed."""
    if name == "random_seed":
        half = _seed_words(args[0])
        return lax.concatenate([half, half], len(_shape_of(half)) - 1)
    keys = args[0]
    last = len(_shape_of(keys)) - 1
    shape = _shape_of(keys)
    halves = [lax.slice(keys, (0,) * last + (lo,), (*shape[:-1], lo + 2)) for lo in (0, 2)]
    if tag == "rbg" and name == "random_split":
        return lax.concatenate([_keys.split_keys(h, param("shape")) for h in halves], last + len(param("shape")))
    if tag == "rbg":   # random_fold_in
        return lax.concatenate([_keys.fold_keys(h, args[1]) for h in halves], last)
    batch = shape[:-1]
    if name == "random_split":
        split, num = tuple(param("shape")), math.prod(param("shape"))
        rows = _rbg_bits(keys, (10 * num, 4), np.uint32)
        every_10th = lax.slice(rows, (0,) * (len(batch) + 2), (*batch, 10 * num, 4), (1,) * len(batch) + (10, 1))
        return lax.reshape(every_10th, (*batch, *split, 4))
    if _shape_of(args[1]):
        raise error("random_fold_in of unsafe_rbg keys with an array of data is not supported")
    half = _seed_words(args[1])
    last_row = lax.slice(lax.rng_bit_generator(lax.concatenate([half, half], 0), (10, 4), np.uint32)[1], (9, 0), (10, 4))
    return lax.bitwise_xor(keys, lax.broadcast_in_dim(lax.reshape(last_row, (4,)), shape, (len(shape) - 1,)))


def _gamma(keys, a, log_space: bool):
    """`random_gamma[log_space]` keys a (jax.random.gamma, JAX's _gamma_impl): each key (the key
    array's shape leads a's) split into one per element of a it covers, then Marsaglia and Tsang's
    sampler per element (sprue.random's, which draws JAX's numbers from the same keys)."""
    key_shape = tuple(keys.aval.shape if isinstance(keys, Tracer) else np.shape(keys))[:-1]
    shape = tuple(a.aval.shape if isinstance(a, Tracer) else np.shape(a))
    count = math.prod(shape)
    flat_keys = lax.reshape(keys, (math.prod(key_shape), 2))
    split = lax.reshape(_keys.split_keys(flat_keys, (count // max(1, math.prod(key_shape)),)), (count, 2))
    samples = _gamma_flat(split, lax.reshape(a, (count,)), log_space)
    return lax.reshape(samples, shape)


# structural primitives whose params name the key array's axes: the words axis is one more, last
_SAME_PARAMS = {"squeeze", "concatenate", "rev", "copy", "copy_p", "dynamic_update_slice", "select_n"}
KEY_STRUCTURAL = _SAME_PARAMS | {"slice", "reshape", "broadcast_in_dim", "transpose", "dynamic_slice"}


def makes_keys(out_types) -> bool:
    """The equation's declared results are PRNG key arrays."""
    return any(t is not None and t.dtype.startswith("key<") for t in out_types)


def _rank(x) -> int:
    return x.aval.ndim if isinstance(x, Tracer) else np.ndim(x)


def for_key_arrays(name: str, args: list, params: dict, error: Callable[[str], Exception],
                   words: int = 2) -> tuple[list, dict]:
    """The operands and params of the structural operation `name` on key arrays, for their words
    (one more axis, last, of size `words`)."""
    if name not in KEY_STRUCTURAL:
        raise error(f"{name} of PRNG key arrays is not supported by sprue's reader (it reads {', '.join(sorted(KEY_STRUCTURAL))})")
    params = dict(params)
    if name == "slice":
        params["start_indices"] = (*params["start_indices"], 0)
        params["limit_indices"] = (*params["limit_indices"], words)
        if params.get("strides") is not None:
            params["strides"] = (*params["strides"], 1)
    elif name == "reshape":
        params["new_sizes"] = (*params["new_sizes"], words)
    elif name == "broadcast_in_dim":
        params["broadcast_dimensions"] = (*params["broadcast_dimensions"], len(params["shape"]))
        params["shape"] = (*params["shape"], words)
    elif name == "transpose":
        params["permutation"] = (*params["permutation"], len(params["permutation"]))
    elif name == "dynamic_slice":
        params["slice_sizes"] = (*params["slice_sizes"], words)
        args = [*args, np.zeros((), np.int64)]
    elif name == "dynamic_update_slice":
        args = [*args, np.zeros((), np.int64)]
    elif name == "select_n" and _rank(args[0]):   # the predicate, per key: the same for both words
        which = args[0]
        shape = (*(which.aval.shape if isinstance(which, Tracer) else np.shape(which)), words)
        args = [lax.broadcast_in_dim(which, shape, tuple(range(len(shape) - 1))), *args[1:]]
    return args, params
