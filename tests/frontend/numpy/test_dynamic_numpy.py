"""sprue.numpy on dynamically-shaped arrays, checked against numpy itself: every case of
tests/helpers/dynamic_cases.py is traced once with its abstracted axes (sizes known only at run time),
then its jaxpr is evaluated eagerly (each primitive re-bound with concrete values) at several
sizes, including 0 and 1. Where numpy raises at a size, sprue's run-time checks must raise
SprueValueError; elsewhere the results match numpy's in shape, dtype and value."""
from __future__ import annotations

import numpy as np
import pytest

from sprue.api.traced import trace_function
from sprue.base.errors import SprueValueError
from sprue.ir.core import ShapedArray
from sprue.trace.tracing import eval_jaxpr
from tests.helpers.dynamic_cases import CASES, SIZES, Case, assert_leaves_match


def abstract(args: tuple, axes) -> list:
    """The avals qjit's abstracted_axes would give: named sizes on the listed axes of arrays."""
    out = []
    for i, a in enumerate(args):
        spec = axes[i] if isinstance(axes, (tuple, list)) else axes
        if isinstance(a, np.ndarray):
            shape = list(a.shape)
            for ax, name in (spec or {}).items():
                shape[ax] = name
            out.append(ShapedArray(tuple(shape), a.dtype))
        else:
            out.append(a)  # Python scalars: traced as weak scalars (an int is a dimension when a size)
    return out


class Traced:
    """A case traced once; call it with concrete arguments (implicit sizes read from them)."""

    def __init__(self, fn, args, axes):
        avals = abstract(args, axes)
        self.traced = trace_function(fn, avals, {})
        self.names = []  # the implicit size arguments: each name's first (argument, axis)
        for i, av in enumerate(avals):
            for ax, d in enumerate(getattr(av, "shape", ())):
                if isinstance(d, str) and d not in [n for n, _ in self.names]:
                    self.names.append((d, (i, ax)))

    def __call__(self, *args):
        sizes = [np.int64(np.shape(args[i])[ax]) for _, (i, ax) in self.names]
        cj = self.traced.closed_jaxpr
        leaves = [np.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
        return eval_jaxpr(cj.jaxpr, cj.consts, *sizes, *leaves)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's own warnings on empty means
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_matches_numpy_at_every_size(case: Case):
    traced = Traced(case.fn, case.make_args(3), case.axes)  # traced at one size, run at all
    for n in SIZES + (3,):
        args = case.make_args(n)
        try:
            want = case.ref(*args)
        except (ValueError, IndexError):  # numpy raises: a run-time check must raise too
            with pytest.raises(SprueValueError):
                traced(*args)
            continue
        assert_leaves_match(traced(*args), want)
