"""JAX's PRNG-key primitives as a printed jaxpr has them (JAX 0.10: `random_seed`, `random_wrap`,
`random_unwrap`, `random_bits`, `random_split`, `random_fold_in`, `random_clone`; `threefry2x32` is
sprue.lax's own primitive), read into sprue.random's operations on raw keys.

A typed key array `key<fry>[s...]` is read as its words, `u32[s..., 2]` (jaxpr_eval.Evaluator.aval),
so wrapping and unwrapping are identities and the others are sprue.random's computations of JAX's
threefry2x32 implementation (`fry`), batched over the key array's axes as JAX's are. Structural
operations on key arrays (slicing split keys, `keys[i]`, reshapes, broadcasts, selects) get the
words axis added to their params and operands (`for_key_arrays`). Other generators (`rbg`,
`unsafe_rbg`) are refused by name.
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
FORMS = {"random_seed", "random_wrap", "random_unwrap", "random_bits", "random_split", "random_fold_in",
         "random_clone", "random_gamma"}
# their params, and those JAX prints that change nothing sprue computes
PARAMS = {"random_seed": {"impl"}, "random_wrap": {"impl"}, "random_bits": {"bit_width", "shape"},
          "random_split": {"shape"}}


def key_impl_supported(tag: str) -> bool:
    return tag == THREEFRY_TAG


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


def apply(name: str, args: list, param: Callable[[str], object], error: Callable[[str], Exception]) -> list:
    """The outputs of the equation `name` (one of FORMS) with operands `args`; param(k) converts
    the equation's param k; error(message) makes the reader's error at the equation."""
    if "impl" in PARAMS.get(name, ()):
        impl = param("impl")
        if not key_impl_supported(str(impl)):
            raise error(f"{name}: the PRNG implementation '{impl}' is not supported; sprue implements JAX's"
                        f" default, threefry2x32 ('{THREEFRY_TAG}')")
    if name == "random_seed":
        return [_seed_words(args[0])]
    if name in ("random_wrap", "random_unwrap", "random_clone"):
        return [args[0]]
    if name == "random_bits":
        return [_keys.random_bits(args[0], param("bit_width"), param("shape"))]
    if name == "random_split":
        return [_keys.split_keys(args[0], param("shape"))]
    if name == "random_gamma":
        if not all(isinstance(d, int) for d in (args[1].aval.shape if isinstance(args[1], Tracer) else ())):
            raise error("random_gamma of a shape known only at run time is not supported (as in JAX)")
        return [_gamma(args[0], args[1], bool(param("log_space")))]
    return [_keys.fold_keys(args[0], args[1])]   # random_fold_in


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


def for_key_arrays(name: str, args: list, params: dict, error: Callable[[str], Exception]) -> tuple[list, dict]:
    """The operands and params of the structural operation `name` on key arrays, for their words
    (one more axis, last, of size 2)."""
    if name not in KEY_STRUCTURAL:
        raise error(f"{name} of PRNG key arrays is not supported by sprue's reader (it reads {', '.join(sorted(KEY_STRUCTURAL))})")
    params = dict(params)
    if name == "slice":
        params["start_indices"] = (*params["start_indices"], 0)
        params["limit_indices"] = (*params["limit_indices"], 2)
        if params.get("strides") is not None:
            params["strides"] = (*params["strides"], 1)
    elif name == "reshape":
        params["new_sizes"] = (*params["new_sizes"], 2)
    elif name == "broadcast_in_dim":
        params["broadcast_dimensions"] = (*params["broadcast_dimensions"], len(params["shape"]))
        params["shape"] = (*params["shape"], 2)
    elif name == "transpose":
        params["permutation"] = (*params["permutation"], len(params["permutation"]))
    elif name == "dynamic_slice":
        params["slice_sizes"] = (*params["slice_sizes"], 2)
        args = [*args, np.zeros((), np.int64)]
    elif name == "dynamic_update_slice":
        args = [*args, np.zeros((), np.int64)]
    elif name == "select_n" and _rank(args[0]):   # the predicate, per key: the same for both words
        which = args[0]
        shape = (*(which.aval.shape if isinstance(which, Tracer) else np.shape(which)), 2)
        args = [lax.broadcast_in_dim(which, shape, tuple(range(len(shape) - 1))), *args[1:]]
    return args, params
