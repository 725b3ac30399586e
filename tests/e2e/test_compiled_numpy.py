"""sprue.numpy cases compiled through qjit (StableHLO -> LLVM -> .so) equal numpy itself in shape,
dtype and value. Every function is compiled at several shapes and dtypes: up to PER_NAME cases of
each name from numpy_cases, chosen to cover different dtypes first (the eager and traced tests run
all of them)."""
import os
import warnings
from collections import defaultdict

import numpy as np
import pytest

import sprue
from tests.helpers.numpy_cases import CASES, assert_matches

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
# SPRUE_COMPILED_PER_NAME=100000 compiles every case (about 10 minutes)
PER_NAME = int(os.environ.get("SPRUE_COMPILED_PER_NAME", "4"))


def _dtype_signature(case):
    return tuple(str(np.asarray(a).dtype) for a in case.args)


def _shape_signature(case):
    return tuple(np.ndim(a) for a in case.args)


def _selection():
    """Greedy: each next case adds an unseen dtype signature and/or an unseen rank signature."""
    by_name = defaultdict(list)
    for c in CASES:
        by_name[c.name.split("[")[0]].append(c)
    chosen = []
    for cases in by_name.values():
        picked, dts, ranks = [], set(), set()
        rest = list(cases)
        while rest and len(picked) < PER_NAME:
            best = max(rest, key=lambda c: (_dtype_signature(c) not in dts) + (_shape_signature(c) not in ranks))
            rest.remove(best)
            picked.append(best)
            dts.add(_dtype_signature(best))
            ranks.add(_shape_signature(best))
        chosen += picked
    return chosen


@pytest.mark.parametrize("case", _selection(), ids=lambda c: c.name)
def test_compiled_matches_numpy(case):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want = case.ref(*case.args)
    got = sprue.qjit(case.fn)(*case.args)
    assert_matches(got, want, where=case.name)
