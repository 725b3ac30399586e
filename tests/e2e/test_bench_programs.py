"""The realistic programs of benchmarks/programs.py at tiny sizes: compiled by sprue with static
and with dynamic shapes, each equals the same source run eagerly on numpy (sprue.numpy outside
qjit, lax loops in Python, numpy.add.at for `.at[].add`). No timing here: that is the benchmark's."""
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import program_sources  # noqa: E402  (benchmarks/ is not a package)
import programs  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.mark.parametrize("prog", program_sources.PROGRAMS, ids=lambda p: p.name)
def test_program_compiled_equals_numpy(prog):
    args = prog.make("tiny")
    expected = programs.reference(prog, args)
    impls = programs.implementations(prog)
    for name in ("sprue", "sprue_dyn"):
        fn = impls[name]
        programs.check(prog, name, fn(*args), expected)
        assert fn.compile_count == 1
    # the dynamic version really is dynamic: one leading i64[] size per axis name
    names = {n for axes in prog.axes if axes for n in axes.values()}
    invars = impls["sprue_dyn"].jaxpr.jaxpr.invars
    static_invars = impls["sprue"].jaxpr.jaxpr.invars
    assert len(invars) == len(static_invars) + len(names), str(impls["sprue_dyn"].jaxpr)[:300]


@pytest.mark.parametrize("prog", program_sources.PROGRAMS, ids=lambda p: p.name)
def test_program_on_float32_inputs_equals_numpy(prog):
    """--float32: the same source on float32 inputs, compiled, equals numpy's float32 run."""
    args = programs.to_float32(prog.make("tiny"))
    expected = programs.reference(prog, args)
    programs.check(prog, "sprue", programs.implementations(prog)["sprue"](*args), expected, float32=True)


def test_float32_check_rejects_a_wrong_result():
    prog = program_sources.PROGRAMS[0]
    expected = programs.reference(prog, programs.to_float32(prog.make("tiny")))
    wrong = np.asarray(expected) + 1e-2 * np.abs(expected).max()
    with pytest.raises(AssertionError, match="attention: sprue, result 0: .* beyond 0.002 of the largest"):
        programs.check(prog, "sprue", wrong, expected, float32=True)


def test_check_rejects_a_wrong_result():
    prog = program_sources.PROGRAMS[0]
    args = prog.make("tiny")
    expected = programs.reference(prog, args)
    wrong = np.asarray(expected) * (1 + 1e-4)
    with pytest.raises(AssertionError, match="attention: sprue, result 0"):
        programs.check(prog, "sprue", wrong, expected)


def test_eager_add_at_accumulates_repeated_indices():
    # the numpy stand-in for x.at[idx].add(v): repeated indices add up, the input is not changed
    x = np.zeros(3)
    out = programs._add_at_eager(x, np.array([0, 2, 0]), np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(out, [4.0, 0.0, 2.0])
    np.testing.assert_array_equal(x, [0.0, 0.0, 0.0])
