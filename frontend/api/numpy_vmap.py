"""sprue.numpy's functions that map a Python function over axes, as jax.numpy writes them with
vmap: `vectorize` (numpy's, with gufunc signatures) and `apply_along_axis`. They live here, above
sprue.numpy, because vmap is sprue.api's; sprue's __init__ puts them in sprue.numpy's namespace."""
from __future__ import annotations

import functools
import re
from typing import Callable

import numpy as np

from sprue.api.transforms import vmap
from sprue.base.errors import SprueValueError
from sprue.base.source_info import user_frame_summary
from sprue.numpy import _shape, broadcast_shapes
from sprue.numpy._avals import aval
from sprue.trace.tracing import at

_DIMS = r"\((\w*(?:,\w+)*)\)"


def _signature(signature: str) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """numpy's gufunc signature `(m,n),(n)->(m)`: the core dimensions' names of each input and output."""
    m = re.fullmatch(rf"({_DIMS}(?:,{_DIMS})*)->({_DIMS}(?:,{_DIMS})*)", signature.replace(" ", ""))
    if m is None:
        raise SprueValueError(f"sprue.numpy.vectorize: not a valid gufunc signature: {signature!r}"
                              f"{at(user_frame_summary())}")
    ins, outs = signature.replace(" ", "").split("->")
    parse = lambda side: [tuple(d for d in g.split(",") if d) for g in re.findall(_DIMS, side)]   # noqa: E731
    return parse(ins), parse(outs)


def vectorize(pyfunc: Callable, *, excluded=frozenset(), signature: str | None = None) -> Callable:
    """numpy.vectorize, by vmap (as jax.numpy.vectorize): `pyfunc` on core-sized pieces (scalars
    without a signature), mapped over the broadcast loop dimensions of its array arguments;
    `excluded` positions or names are passed as they are."""
    ins, outs = _signature(signature) if signature is not None else (None, None)

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        kept = {k: v for k, v in kwargs.items() if k in excluded}
        mapped = [(i, a) for i, a in enumerate(args) if i not in excluded]
        cores = ins if ins is not None else [()] * len(mapped)
        if len(cores) != len(mapped):
            raise SprueValueError(f"sprue.numpy.vectorize: the signature has {len(cores)} inputs, the call"
                                  f" {len(mapped)}{at(user_frame_summary())}")
        arrays = [_as_array(a) for _, a in mapped]
        loop_shapes = [aval(a).shape[:aval(a).ndim - len(c)] for a, c in zip(arrays, cores)]
        loop = broadcast_shapes(*loop_shapes) if loop_shapes else ()
        arrays = [_shape.broadcast_to(a, tuple(loop) + tuple(aval(a).shape[aval(a).ndim - len(c):]))
                  for a, c in zip(arrays, cores)]

        def core(*pieces):
            full = list(args)
            for (i, _), p in zip(mapped, pieces):
                full[i] = p
            return pyfunc(*full, **kwargs) if not kept else pyfunc(*full, **{**kwargs, **kept})
        f = core
        for _ in range(len(loop)):
            f = vmap(f)
        out = f(*arrays)
        if outs is not None and len(outs) == 1 and isinstance(out, tuple) and len(out) == 1:
            out = out[0]
        return out
    return wrapped


def _as_array(x):
    return x if hasattr(x, "dtype") and hasattr(x, "shape") else np.asarray(x)


def apply_along_axis(func1d: Callable, axis: int, arr, *args, **kwargs):
    """numpy.apply_along_axis, by vmap over the other axes (jax.numpy's construction)."""
    arr = _as_array(arr)
    nd = aval(arr).ndim
    if not -nd <= axis < nd:
        raise SprueValueError(f"sprue.numpy.apply_along_axis: axis {axis} is out of bounds for an array of"
                              f" rank {nd}{at(user_frame_summary())}")
    axis %= nd
    f = lambda a: func1d(a, *args, **kwargs)   # noqa: E731
    for i in range(1, nd - axis):
        f = vmap(f, in_axes=i, out_axes=-1)
    for _ in range(axis):
        f = vmap(f, in_axes=0, out_axes=0)
    return f(arr)


__all__ = ["apply_along_axis", "vectorize"]
