"""What qjit keys and checks in a call's arguments: static arguments by type and value (the cache
key, the fast path's matchers, a left-out parameter's default), the dtypes of arguments declared by
type hints, numpy masked arrays refused."""
from __future__ import annotations

import numpy as np

from sprue.api.container_args import PY_SCALARS
from sprue.base.errors import ArgumentTypeError
from sprue.runtime.element_types import is_masked_array

__all__ = ["check_argument_dtypes", "refuse_masked", "same_static", "static_key", "static_matcher", "unhashable_part"]

# -- static arguments ------------------------------------------------------------------------------
# A static argument is compiled in, so two values may share a compilation only if the function
# cannot tell them apart. == is not enough: 100 == np.int8(100), 3 == 3.0 == True, 0.0 == -0.0, and
# (1, 2) == (1.0, 2); JAX keys static arguments by type and value too. And a value's hash is taken
# when it is compiled: an object mutated since (its __hash__/__eq__ follow its fields) no longer
# matches, though it is the same object.
_EXACT_STATIC = (int, bool, str, bytes, type(None))   # exact types whose == tells values apart


def static_key(value):
    """A static argument's part of a cache key: its type and its value, recursively through tuples
    (named tuples too) and frozensets; floats and complex numbers by their bits."""
    t = type(value)
    if isinstance(value, tuple):
        return (t, tuple(static_key(v) for v in value))
    if isinstance(value, frozenset):
        return (t, frozenset(static_key(v) for v in value))
    if t in (float, complex) or isinstance(value, (np.floating, np.complexfloating)):
        return (t, np.asarray(value).tobytes())
    return (t, value)


def unhashable_part(value):
    """The first unhashable object inside a static argument (itself, or an item of a tuple)."""
    if isinstance(value, (tuple, frozenset)):
        for v in value:
            try:
                hash(v)
            except TypeError:
                return unhashable_part(v)
    return value


def same_static(value, default) -> bool:
    """Whether a static value is a parameter's default: the object itself, or an equal static key
    (a default rebuilt by unpickling a compiled function)."""
    if value is default:
        return True
    try:
        return static_key(value) == static_key(default)
    except TypeError:   # unhashable, and not the default object
        return False


def static_matcher(value):
    """`same(arg)` for the fast path: arg is what `value` was when it was compiled (static_key
    equal, with the hash it had then). None where the fast path's own exact check suffices."""
    t = type(value)
    if t in _EXACT_STATIC:
        return None
    if t is float:
        bits = value.hex()   # tells 0.0 from -0.0; == first, for speed
        return lambda a: type(a) is float and (a == value and value != 0.0 or a.hex() == bits)
    key = static_key(value)
    h = hash(key)

    def same(a):
        try:
            k = static_key(a)
            return hash(k) == h and k == key
        except TypeError:   # unhashable now: the general path raises the error that says so
            return False
    return same



def check_argument_dtypes(fn_name: str, leaves, paths, avals, declared: list[str], opt_in: str) -> None:
    """Arrays and numpy scalars must have exactly the declared dtype (byte order aside): an f32 or
    i64 array is not silently converted into an f64 parameter. Python scalars are weakly typed and
    judged by value by the runtime (runtime/arguments.py); non-arrays are refused there too.
    `declared[i]` says how leaf i is declared ("hinted sprue.f64[3]"); `opt_in` how to convert."""
    for x, path, aval, decl in zip(leaves, paths, avals, declared):
        if type(x) in PY_SCALARS:
            continue
        dt = getattr(x, "dtype", None)
        if not isinstance(dt, np.dtype) or dt.newbyteorder("=") == aval.dtype:
            continue
        what = "a numpy scalar" if isinstance(x, np.generic) else f"an array of shape {tuple(np.shape(x))}"
        raise ArgumentTypeError(
            f"{fn_name}(): argument '{path}' is {decl} but got {what} of dtype {dt.name}: sprue does not convert"
            f" arguments silently; pass {path}.astype(np.{aval.dtype.name}), {opt_in} dtypes that cast safely"
            f" (numpy's 'safe' casting: f32 or i32 into f64)")


def refuse_masked(leaves, paths, fn_name: str) -> None:
    """A numpy masked array's mask would be dropped (the compiled code sees its data only): refuse
    it, as JAX does ("numpy masked arrays are not supported as direct inputs to JAX functions")."""
    for x, path in zip(leaves, paths):
        if is_masked_array(x):
            raise ArgumentTypeError(
                f"{fn_name}(): argument '{path}' is a numpy masked array, which sprue does not take (its mask"
                f" would be dropped): pass {path}.filled(fill_value) to replace the masked entries, or"
                f" {path}.data to ignore the mask")
