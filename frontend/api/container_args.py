"""Arguments that are containers of arrays and scalars (a dict of arrays, a list of weights) on
qjit's fast path: the key of a call (what its arguments' containers hold, as the general path
flattens them) and the flattener that turns the call's arguments into the flat tuple the fast
caller (runtime/fastcall.py) takes.

One level of dict, list or tuple (exactly those types: a subclass or a namedtuple flattens
otherwise, and takes the general path) or of a class registered as a pytree node (its flatten
function is called; its auxiliary data is part of the key), whose entries are ndarrays or
Python/numpy scalars. A call
whose containers differ in type, length or keys is not one the flattener takes: the fast caller
misses and the general path runs, raising what it always did. A dict of four arrays took the
general path's ~16 µs a call; this way ~1 µs.
"""
from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from sprue.base.eager_array import EagerArray
from sprue.base.pytree import dict_keys, node_flattener

PY_SCALARS = (float, int, bool, complex)
CONTAINERS = (dict, list, tuple)
_ABSENT = object()


def leaf_key(a: Any) -> Any:
    """An entry's part of a call's key: (dtype, shape) of an ndarray, the type of a scalar; None
    for anything else."""
    t = type(a)
    if t is np.ndarray or t is EagerArray:
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
    elif t is list or t is tuple:
        entries = [leaf_key(v) for v in a]
        layout = len(entries)
    else:
        flatten = node_flattener(t)
        if flatten is None:
            return None
        children, aux = flatten(a)
        children = list(children)
        try:
            hash(aux)
        except TypeError:   # the general path says what is wrong
            return None
        entries = [leaf_key(v) for v in children]
        layout = (aux, len(children))
    if any(e is None for e in entries):
        return None
    return t, layout, tuple(entries)


def is_container(t: type) -> bool:
    """A type container_key may take: dict, list, tuple, or a registered pytree node class."""
    return t in CONTAINERS or node_flattener(t) is not None


def leaves_of(a: Any, key: tuple) -> list:
    """The entries of container `a` (of key `key`) in the general path's order."""
    if key[0] is dict:
        return [a[k] for k in key[1]]
    if key[0] is list or key[0] is tuple:
        return list(a)
    return list(node_flattener(key[0])(a)[0])


def flattener(layout: list[tuple | None]) -> Callable[[tuple], tuple | None]:
    """The flat argument tuple of a call, per position the argument itself (layout None) or the
    entries of its container (layout: its container_key); None when a container is another."""
    if len(layout) == 1 and layout[0] is not None and layout[0][0] is dict and len(layout[0][1]) > 1:
        return _dict_flattener(layout[0][1])

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
            elif kind is list or kind is tuple:
                if len(a) != info:
                    return None
                out.extend(a)
            else:   # a registered class: the same auxiliary data and number of children
                children, aux = node_flattener(kind)(a)
                children = list(children)
                if len(children) != info[1] or aux != info[0]:
                    return None
                out.extend(children)
        return tuple(out)
    return flatten


def _dict_flattener(keys: tuple) -> Callable[[tuple], tuple | None]:
    """flattener's for a call whose one argument is a dict: its entries in `keys` order, taken by
    one itemgetter (a dict of four arrays: its Python loop was a third of the call)."""
    get, n = operator.itemgetter(*keys), len(keys)

    def flatten(full: tuple) -> tuple | None:
        a = full[0]
        if type(a) is not dict or len(a) != n:
            return None
        try:
            return get(a)
        except KeyError:
            return None
    return flatten


__all__ = ["CONTAINERS", "PY_SCALARS", "container_key", "flattener", "is_container", "leaf_key", "leaves_of"]
