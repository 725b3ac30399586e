"""examples/monte_carlo_option.py: its prices equal JAX 0.10.2's for the same keys (recorded by
make_option_pricer_data.py), for several path counts, each option compiled once for all of them."""
import importlib.util
import json
from pathlib import Path

import numpy as np

from tests.helpers.system import REPO

JAX = json.loads(Path(__file__).with_name("option_pricer_jax.json").read_text())["runs"]


def test_prices_match_jax(capsys):
    spec = importlib.util.spec_from_file_location("option", REPO / "examples" / "monte_carlo_option.py")
    option = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(option)
    for run, want in JAX.items():
        n_paths, n_steps = map(int, run.split("x"))
        got = option.main(n_paths, n_steps)
        for k, v in want.items():   # sums of 10**5 terms: the order of the additions moves the last bits
            np.testing.assert_allclose(got[k], v, rtol=1e-11, err_msg=f"{run} {k}")
    assert "Black-Scholes" in capsys.readouterr().out
    # path and step counts are run-time sizes and trip counts
    assert option.european_call.compile_count == 1 and option.asian_call.compile_count == 1
