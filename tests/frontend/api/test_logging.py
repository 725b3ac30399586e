"""sprue says what it is doing (issue 23): the `sprue` logger gets each compilation's stage report
at DEBUG and one INFO line for a slow compilation (function, equation count, slowest stage);
SPRUE_LOG turns it on from the environment."""
import logging
import os
import subprocess
import sys

import numpy as np

import sprue
import sprue.numpy as jnp
from sprue.base import timing


def _layers(x):
    for _ in range(3):
        x = jnp.tanh(x @ x)
    return x


def test_slow_compile_is_one_info_line(caplog, monkeypatch):
    monkeypatch.setattr(timing, "SLOW_SECONDS", 0.0)   # every compilation counts as slow
    monkeypatch.setenv("SPRUE_CACHE_DIR", "off")
    caplog.set_level(logging.INFO, logger="sprue")
    f = sprue.qjit(_layers)
    np.testing.assert_allclose(f(np.eye(3) * 0.5), _layers(np.eye(3) * 0.5), rtol=1e-14)
    infos = [r for r in caplog.records if r.name == "sprue" and r.levelno == logging.INFO]
    assert len(infos) == 1
    eqns = len(f.jaxpr.jaxpr.eqns)
    assert infos[0].getMessage().startswith(f"compiling _layers ({eqns} equations) took ")
    assert "; slowest stage: " in infos[0].getMessage()
    assert not [r for r in caplog.records if r.levelno == logging.DEBUG]


def test_debug_has_the_stage_report(caplog, monkeypatch):
    monkeypatch.setenv("SPRUE_CACHE_DIR", "off")
    caplog.set_level(logging.DEBUG, logger="sprue")
    sprue.qjit(_layers)(np.eye(2))
    reports = [r.getMessage() for r in caplog.records if r.name == "sprue" and r.levelno == logging.DEBUG]
    assert len(reports) == 1
    for stage in ("compile _layers", "trace", "jaxpr -> StableHLO", "MLIR", "LLVM", "link"):
        assert f"  {stage}" in reports[0]


def test_quiet_by_default_and_sprue_log_from_the_environment(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text("import numpy as np, sprue, sprue.numpy as jnp\n"
                      "from sprue.base import timing\ntiming.SLOW_SECONDS = 0.0\n"
                      "print(sprue.qjit(lambda x: jnp.sin(x) * 2)(np.ones(3)))\n")
    env = {**os.environ, "SPRUE_CACHE_DIR": "off"}
    env.pop("SPRUE_LOG", None)
    quiet = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert quiet.returncode == 0 and "sprue:" not in quiet.stderr
    told = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env={**env, "SPRUE_LOG": "info"})
    assert told.returncode == 0 and "sprue: compiling <lambda> (" in told.stderr
