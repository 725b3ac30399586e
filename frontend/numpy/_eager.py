"""Arrays computed outside qjit (eagerly) have JAX's `.at[...]` updates, as jax.Array does: sprue.numpy's
eager results are numpy arrays of this subclass, which adds only `.at` (the same helper traced
arrays have: `x.at[i].set(v)` returns an updated copy, x is unchanged). Arithmetic on them keeps
the subclass (numpy's rule for subclasses), so `(a + b).at[0].set(1.0)` works as in JAX; they
print as numpy arrays and pickle as plain ndarrays."""
from __future__ import annotations

import numpy as np


class EagerArray(np.ndarray):
    """A numpy array made by sprue.numpy outside a trace: an ndarray with `.at`."""

    @property
    def at(self):
        # (imported here: _indexing imports _promote, which imports this module)
        from sprue.numpy._indexing import IndexUpdateHelper
        return IndexUpdateHelper(self.view(np.ndarray))

    def __repr__(self):
        return repr(self.view(np.ndarray))

    def __reduce__(self):   # pickled (Dask, multiprocessing) as a plain ndarray
        return np.ndarray.__reduce__(self.view(np.ndarray))


def eager(x: np.ndarray) -> np.ndarray:
    """x as an EagerArray (a view: no copy)."""
    return x.view(EagerArray)
