"""SPRUE_COMPILE_PROFILE: where a compilation's time goes, printed to stderr (sprue.base.timing)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.base import timing


def _steps(report: str) -> dict[str, float]:
    """The profile's rows: step name -> seconds."""
    rows = re.findall(r"^ +(\S.*?) +(\d+\.\d{3})$", report, re.M)
    return {name: float(seconds) for name, seconds in rows}


@pytest.mark.parametrize("env", timing.ALIASES)
def test_a_profiled_compilation_reports_every_stage_and_llvms_passes(env, monkeypatch, capfd):
    for name in timing.ALIASES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(env, "1")
    monkeypatch.setenv("SPRUE_CACHE_DIR", "off")
    f = sprue.qjit(lambda a, b: jnp.tanh(a @ b) + 1.0)
    a = np.linspace(-1.0, 1.0, 64).reshape(8, 8)
    np.testing.assert_allclose(f(a, a), np.tanh(a @ a) + 1.0)
    err = capfd.readouterr().err
    steps = _steps(err)
    for name in ["compile <lambda>", "trace", "jaxpr -> StableHLO", "MLIR", "stage linalg", "stage bufferized",
                 "stage loops", "stage llvm", "tile_matmuls", "outline_loop_nests", "passes",
                 "translate to LLVM IR", "LLVM", "LLVM: optimize (O3)", "LLVM: emit the object", "link", "load"]:
        assert name in steps, (name, err)
    # the whole holds its parts (the nesting is by indentation)
    assert steps["compile <lambda>"] >= steps["MLIR"] + steps["LLVM"]
    assert "Pass execution timing report" in err and "InstCombinePass" in err


def test_nothing_is_printed_without_it(monkeypatch, capfd):
    for name in timing.ALIASES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPRUE_CACHE_DIR", "off")
    f = sprue.qjit(lambda x: x * 3.0 - 1.0)
    np.testing.assert_allclose(f(np.arange(4.0)), np.arange(4.0) * 3.0 - 1.0)
    assert "profile" not in capfd.readouterr().err
