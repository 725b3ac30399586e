"""`sprue.Array`: the type of the arrays sprue's functions take and give, for annotations and
isinstance checks, as `jax.Array` is JAX's. A numpy ndarray (what compiled functions return and
eager sprue.numpy computes) and a traced array (inside qjit) are both Arrays; type checkers read
its methods and operators from sprue/__init__.pyi."""
from __future__ import annotations

import abc

import numpy as np

from sprue.trace.tracing import Tracer


class Array(abc.ABC):
    """An array: numpy's ndarray, or a traced array inside qjit."""


Array.register(np.ndarray)
Array.register(Tracer)

__all__ = ["Array"]
