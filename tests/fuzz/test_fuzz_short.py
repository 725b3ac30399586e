"""The short fuzzing run of `make test` (the long one is `make fuzz`: tests/fuzz/campaign.py).

Every input that ever failed (tests/fuzz/regressions/) must now load or be rejected with a
SprueError, and so must every seed of the corpus and a fixed, derandomized batch of hypothesis
inputs per reader (mutations of the corpus, token soups, random bytes). Each case runs in the
harness's child process, so a crash (a signal) or a hang fails its case instead of the run.
FUZZ_SHORT_EXAMPLES (default 250 per reader) sizes the batch. The classes of tests/fuzz/classes.py
(huge static shapes, compile options, fork during a compile) compile and run each case, so they get a
smaller batch (FUZZ_SHORT_CLASS_EXAMPLES, default 12).
"""
import os

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.fuzz import harness, strategies

EXAMPLES = int(os.environ.get("FUZZ_SHORT_EXAMPLES", "250"))
TIMEOUT = 30.0   # per case: generous, a loaded CI machine must not turn a slow case into a "hang"


@pytest.fixture(scope="module")
def h(tmp_path_factory):
    with harness.Harness("lower", temp_root=tmp_path_factory.mktemp("fuzz")) as h:
        yield h


def _check(h, kind: str, data: bytes, what: str) -> None:
    r = h.run_case(kind, data, TIMEOUT)
    if not r.ok:
        path = harness.save_regression(kind, data, r)
        pytest.fail(f"{what}: {r.describe()}\n(input kept as {path})", pytrace=False)


def test_regressions_are_fixed(h):
    cases = harness.regressions()
    assert cases, "tests/fuzz/regressions/ holds no cases"
    bad = []
    for kind, path in cases:
        r = h.run_case(kind, path.read_bytes(), TIMEOUT)
        if not r.ok:
            bad.append(f"{path.name}: {r.describe()}")
    assert not bad, "\n\n".join(bad)


@pytest.mark.parametrize("kind", harness.READERS)
def test_corpus_seeds_load(h, kind):
    seeds = harness.corpus(kind)
    assert seeds, f"no {kind} seeds in tests/fuzz/corpus/{kind}"
    for name, data in seeds:
        r = h.run_case(kind, data, TIMEOUT)
        assert r.ok and r.status == "ok", f"seed {name} does not compile: {r.describe()}"


@pytest.mark.parametrize("kind", [k for k in harness.READERS if harness.corpus(k, hostile=True)])
def test_hostile_seeds_are_refused_or_load(h, kind):
    for name, data in harness.corpus(kind, hostile=True):
        _check(h, kind, data, f"hostile seed {name}")


def _fuzz(kind, examples=EXAMPLES):
    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              phases=[Phase.explicit, Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck))
    @given(data=strategies.inputs(kind))
    def run(h, data):
        _check(h, kind, data, f"a fuzzed {kind} input")
    return run


test_fuzz_jaxpr = _fuzz("jaxpr")
test_fuzz_stablehlo = _fuzz("stablehlo")
# The classes that compile and run every case (classes.py): a few each here, more in `make fuzz`.
CLASS_EXAMPLES = int(os.environ.get("FUZZ_SHORT_CLASS_EXAMPLES", "12"))
test_fuzz_huge_static_shapes = _fuzz("huge", CLASS_EXAMPLES)
test_fuzz_compile_options = _fuzz("options", CLASS_EXAMPLES)
test_fuzz_fork_during_compile = _fuzz("fork", max(2, CLASS_EXAMPLES // 3))
