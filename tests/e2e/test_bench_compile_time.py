"""The cases of benchmarks/compile_time.py (issue 24) at tiny sizes: each compiled by sprue in this
process equals numpy's reference (the forward net, the hand-written backpropagation of the training
step, the sum of many arguments, many outputs, a dict of floats); one case measured the way the
benchmark does, in a fresh process, and a timeout reported, not raised. No JAX, no timing
assertions: the times are the benchmark's report."""
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import compile_time  # noqa: E402  (benchmarks/ is not a package)

TINY = {"forward": 3, "grad": 3, "args": 20, "outputs": 10, "pytree": 10}


@pytest.mark.parametrize("name", list(TINY))
def test_case_compiled_equals_numpy(name):
    case, n = compile_time.CASES[name], TINY[name]
    args = case.make_args(n)
    fn = compile_time.compile_sprue(case, n)
    got = compile_time.leaves(fn(*args))
    want = case.make_ref(n)(*args)
    compile_time.check(case, "sprue", got, want)
    assert fn.compile_count == 1
    # the interface really has that many leaves: arguments for args/pytree/forward, results for outputs
    invars = fn.jaxpr.jaxpr.invars
    if name in ("forward", "grad"):
        assert len(invars) == n + 1 and len(got) == (1 if name == "forward" else n)
    elif name == "outputs":
        assert len(got) == n
    else:
        assert len(invars) == n


def test_grad_reference_matches_finite_differences():
    # the numpy backpropagation the training step is checked against, checked itself
    case = compile_time.CASES["grad"]
    ws, x = case.make_args(2)
    grads = compile_time.grad_ref(ws, x)

    def loss(ws):
        return float(np.sum(compile_time.forward_ref(x, ws)[0] ** 2))

    eps = 1e-6
    for layer, (i, j) in ((0, (1, 2)), (1, (5, 7))):
        plus = [w.copy() for w in ws]
        minus = [w.copy() for w in ws]
        plus[layer][i, j] += eps
        minus[layer][i, j] -= eps
        numeric = (loss(plus) - loss(minus)) / (2 * eps)
        assert abs(grads[layer][i, j] - numeric) <= 1e-6 * max(1.0, abs(numeric))


def test_check_rejects_a_wrong_result():
    case = compile_time.CASES["outputs"]
    want = case.make_ref(3)(*case.make_args(3))
    wrong = [w.copy() for w in want]
    wrong[2][1] *= 1 + 1e-6
    with pytest.raises(AssertionError, match="outputs: sprue, result 2"):
        compile_time.check(case, "sprue", wrong, want)
    with pytest.raises(AssertionError, match="outputs: sprue gave 2 results, numpy 3"):
        compile_time.check(case, "sprue", want[:2], want)


def test_measure_in_a_fresh_process(tmp_path):
    case = compile_time.CASES["pytree"]
    row = compile_time.measure("sprue", case, 10, timeout=120, tmp=tmp_path)
    assert row["status"] == "ok", row
    assert row["error"] is None and row["eqns"] == 20
    assert row["first_call"] > 0 and row["import"] > 0 and row["peak_mb"] > 10
    with np.load(row["results"]) as saved:
        got = [saved["arr_0"]]
    compile_time.check(case, "saved", got, case.make_ref(10)(*case.make_args(10)))


def test_a_timeout_is_reported_not_raised(tmp_path):
    case = compile_time.CASES["forward"]
    row = compile_time.measure("sprue", case, 3, timeout=0.01, tmp=tmp_path)
    assert row["status"] == "timeout"
    text = compile_time.format_row({"case": "forward", "n": 3, "sprue": row, "check": None})
    assert "timeout" in text and text.endswith(" -")    # nothing finished: nothing checked
