"""Every case of numpy_cases: sprue.numpy eagerly on numpy arrays, and traced into a jaxpr then
evaluated, must equal numpy itself in shape, dtype and value; the traced avals must match too."""
import warnings

import numpy as np
import pytest

from sprue.api.traced import trace_function
from sprue.base.errors import SprueError
from sprue.base.pytree import tree_flatten, tree_unflatten
from sprue.trace.tracing import Tracer, eval_jaxpr
from tests.helpers.numpy_cases import CASES, ERROR_CASES, assert_matches

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _numpy(case):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return case.ref(*case.args)


def _no_tracers(out):
    leaves, _ = tree_flatten(out)
    assert not any(isinstance(x, Tracer) for x in leaves)


@pytest.mark.parametrize("case", [c for c in CASES if c.eager], ids=lambda c: c.name)
def test_eager(case):
    got = case.fn(*case.args)
    _no_tracers(got)
    assert_matches(got, _numpy(case), where=case.name)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_traced(case):
    traced = trace_function(case.fn, case.args, {})
    cj = traced.closed_jaxpr
    want = _numpy(case)
    want_leaves, _ = tree_flatten(want)
    for aval, w in zip(cj.out_avals, want_leaves):
        w = np.asarray(w)
        assert (aval.shape, aval.dtype) == (w.shape, w.dtype), f"{case.name}: traced {aval} vs numpy {w.dtype}{w.shape}"
    outs = eval_jaxpr(cj.jaxpr, cj.consts, *case.args)
    assert_matches(tree_unflatten(traced.out_tree, outs), want, where=case.name)


def _builtin(exc):
    return next(c for c in (IndexError, TypeError, ValueError) if issubclass(exc, c))


@pytest.mark.parametrize("case", ERROR_CASES, ids=lambda c: c[0])
def test_numpy_errors_are_sprue_errors(case):
    """Where numpy raises (-bool, float & float, int ** -1, ...), sprue raises the same kind of error."""
    name, fn, args, exc, eager = case
    if eager:
        with pytest.raises(_builtin(exc)) as info:
            fn(*args)
        assert isinstance(info.value, SprueError), repr(info.value)
    with pytest.raises(_builtin(exc)) as info:
        trace_function(fn, args, {})
    assert isinstance(info.value, SprueError), repr(info.value)
