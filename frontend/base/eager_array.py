"""Arrays computed outside qjit (eagerly) have JAX's `.at[...]` updates, as jax.Array does: sprue.numpy's
eager results are numpy arrays of this subclass, which adds only `.at` (the same helper traced
arrays have: `x.at[i].set(v)` returns an updated copy, x is unchanged). Arithmetic on them keeps
the subclass (numpy's rule for subclasses), so `(a + b).at[0].set(1.0)` works as in JAX; they
print as numpy arrays and pickle as plain ndarrays.

Defined here, in the lowest layer, so that the runtime's fast callers take it as they take an
ndarray; `.at` is sprue.numpy's helper, which fills the hook `index_update` when it is imported."""
from __future__ import annotations

import numpy as np


def _no_numpy(x):
    raise RuntimeError("EagerArray.at needs sprue.numpy (import sprue)")


index_update = _no_numpy   # x -> x.at's helper: filled by sprue.numpy (_indexing.IndexUpdateHelper)


class EagerArray(np.ndarray):
    """A numpy array made by sprue.numpy outside a trace: an ndarray with `.at`."""

    @property
    def at(self):
        return index_update(self.view(np.ndarray))

    def __repr__(self):
        return repr(self.view(np.ndarray))

    def __reduce__(self):   # pickled (Dask, multiprocessing) as a plain ndarray
        return np.ndarray.__reduce__(self.view(np.ndarray))


def eager(x: np.ndarray) -> np.ndarray:
    """x as an EagerArray (a view: no copy)."""
    return x.view(EagerArray)
