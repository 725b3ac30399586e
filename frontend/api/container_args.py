"""Arguments that are containers of arrays and scalars (a dict of arrays, a list of weights) on
qjit's fast path: the key of a call (what its arguments' containers hold, as the general path
flattens them) and the flattener that turns the call's arguments into the flat tuple the fast
caller (runtime/fastcall.py) takes.

One level of dict, list or tuple (exactly those types: a subclass or a namedtuple flattens
otherwise, and takes the general path), whose entries are ndarrays or Python/numpy scalars. A call
whose containers differ in type, length or keys is not one the flattener takes: the fast caller
misses and the general path runs, raising what it always did. A dict of four arrays took the
general path's ~16 µs a call; this way ~1 µs.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from sprue.base.pytree import dict_keys

PY_SCALARS = (float, int, bool, complex)
CONTAINERS = (dict, list, tuple)
_ABSENT = object()


def leaf_key(a: Any) -> Any:
    """An entry's part of a call's key: (dtype, shape) of an ndarray, the type of a scalar; None
    for anything else."""
    t = type(a)
    if t is np.ndarray:
        return a.dtype, a.shape
    if t in PY_SCALARS or issubclass(t, np.generic):
        return t
    return None


def container_key(a: Any) -> tuple | None:
    """The key of a container argument: its type, its dict keys, and its entries' leaf keys; None
    when it is not one the fast path takes."""
    t = type(a)
    if t is dict:
        try:
            keys = tuple(dict_keys(a))   # (the general path's order)
        except TypeError:   # keys that do not sort: the general path says so
            return None
        entries = [leaf_key(a[k]) for k in keys]
        layout: Any = keys
    else:
        entries = [leaf_key(v) for v in a]
        layout = len(entries)
    if any(e is None for e in entries):
        return None
    return t, layout, tuple(entries)


def leaves_of(a: Any, key: tuple) -> list:
    """The entries of container `a` (of key `key`) in the general path's order."""
    return [a[k] for k in key[1]] if key[0] is dict else list(a)


def flattener(layout: list[tuple | None]) -> Callable[[tuple], tuple | None]:
    """The flat argument tuple of a call, per position the argument itself (layout None) or the
    entries of its container (layout: its container_key); None when a container is another."""
    def flatten(full: tuple) -> tuple | None:
        out: list = []
        for a, lay in zip(full, layout):
            if lay is None:
                out.append(a)
                continue
            kind, info, _ = lay
            if type(a) is not kind:
                return None
            if kind is dict:
                if len(a) != len(info):
                    return None
                for k in info:
                    v = a.get(k, _ABSENT)
                    if v is _ABSENT:
                        return None
                    out.append(v)
            elif len(a) != info:
                return None
            else:
                out.extend(a)
        return tuple(out)
    return flatten


__all__ = ["CONTAINERS", "PY_SCALARS", "container_key", "flattener", "leaf_key", "leaves_of"]
