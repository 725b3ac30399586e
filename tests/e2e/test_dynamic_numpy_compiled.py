"""The cases of tests/helpers/dynamic_cases.py compiled once with their abstracted axes (sprue.qjit) and run
at every size: results as numpy's, a failed run-time check raised as SprueValueError, one
compilation for all sizes."""
from __future__ import annotations

import pytest

import sprue
from sprue.base.errors import SprueValueError
from sprue.base.pytree import tree_flatten
from tests.helpers.dynamic_cases import CASES, SIZES, Case, assert_leaves_match


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's own warnings on empty means
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_compiled_matches_numpy_at_every_size(case: Case):
    f = sprue.qjit(case.fn, abstracted_axes=case.axes)
    for n in SIZES + (3,):
        args = case.make_args(n)
        try:
            want = case.ref(*args)
        except (ValueError, IndexError):
            with pytest.raises(SprueValueError):
                f(*args)
            continue
        got, _ = tree_flatten(f(*args))
        assert_leaves_match(got, want)
    assert f.compile_count == 1
