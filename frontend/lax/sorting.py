"""sort: sorts operands together along `dimension` by the first `num_keys` of them
(lexicographically), stable when is_stable. Floats order as numpy does: NaNs last."""
from __future__ import annotations

import numpy as np

from ..errors import SprueValueError
from ._rules import check_axes, define, require_equal


def _sort_rule(*xs, dimension, is_stable=True, num_keys=1):
    if not xs:
        raise SprueValueError("sort needs at least one operand")
    for x in xs:
        if x.ndim != xs[0].ndim:
            raise SprueValueError("sort: operands must share one shape, got " + ", ".join(x.str_short() for x in xs))
        for d, e in zip(xs[0].shape, x.shape):
            require_equal(d, e, "sort: operands must share one shape, got " + ", ".join(x.str_short() for x in xs))
    check_axes((dimension,), xs[0].ndim, "sort")
    if not 1 <= num_keys <= len(xs):
        raise SprueValueError(f"sort: num_keys={num_keys} must be between 1 and {len(xs)}")
    return list(xs)


def _sort_impl(*xs, dimension, is_stable=True, num_keys=1):
    keys = [np.moveaxis(k, dimension, -1) for k in xs[:num_keys]]
    # np.lexsort sorts by the last key first; it is stable and puts NaNs last
    order = np.lexsort(keys[::-1], axis=-1) if keys[0].ndim else np.zeros((), np.int64)
    outs = []
    for x in xs:
        moved = np.moveaxis(x, dimension, -1)
        outs.append(np.moveaxis(np.take_along_axis(moved, order, axis=-1), -1, dimension))
    return outs


sort_p = define("sort", _sort_rule, _sort_impl, multiple_results=True)
