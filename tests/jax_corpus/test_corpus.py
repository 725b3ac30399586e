"""Programs real JAX printed (tests/jax_corpus/make.py, run by hand in a venv of each JAX version),
loaded with sprue.load, called with the inputs JAX was given and compared with JAX's outputs; a few
also through `sprue compile`. A case sprue does not compile yet is listed in UNSUPPORTED with the
reason, and must fail with a JaxprUnsupportedError naming the primitive or form at its
file:line:col -- so the list shrinks as sprue learns, and a case that starts passing fails here.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import sprue
from sprue.io.jaxpr_lexer import JaxprUnsupportedError
from sprue.runtime import load as load_library
from sprue.tools.cli import main
from sprue.tools.compile import read_kernel

HERE = Path(__file__).parent
VERSIONS = sorted(p.name for p in HERE.glob("jax-*") if p.is_dir())

# case -> (what the error names, why): the forms and primitives sprue does not compile yet
UNSUPPORTED = {
    "special_gammainc": ("igamma", "the incomplete gamma function is not a sprue primitive yet"),
    "special_gammaincc": ("igammac", "the incomplete gamma function is not a sprue primitive yet"),
    "special_i0e": ("bessel_i0e", "Bessel functions are not sprue primitives yet"),
    "special_i1e": ("bessel_i1e", "Bessel functions are not sprue primitives yet"),
}

# float32 results of transcendental functions: JAX's (XLA's) and sprue's (libm's) approximations
# differ by a few ulp, more where the function is steep
TOLERANCE = {"default": (2e-5, 2e-6), "special": (2e-4, 1e-5)}


def _cases():
    for version in VERSIONS:
        listed = json.loads((HERE / version / "cases.json").read_text())["cases"]
        for entry in listed:
            if "skipped" not in entry:
                yield pytest.param(version, entry["name"], id=f"{version}/{entry['name']}")


def _data(version: str, name: str):
    data = np.load(HERE / version / f"{name}.npz")
    ins = [data[f"in{i}"] for i in range(sum(k.startswith("in") for k in data.files))]
    outs = [data[f"out{i}"] for i in range(sum(k.startswith("out") for k in data.files))]
    return ins, outs


def _compare(name: str, got, want: list[np.ndarray]) -> None:
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(want)
    rtol, atol = TOLERANCE["special" if name.startswith(("special_", "nn_gelu")) else "default"]
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, f"result {k}: {g.dtype}{g.shape}, JAX {w.dtype}{w.shape}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{name}: result {k}")


def test_the_corpus_holds_every_version():
    assert {"jax-0.4.35", "jax-0.10.2"} <= set(VERSIONS), VERSIONS
    for version in VERSIONS:
        assert len(list((HERE / version).glob("*.jaxpr"))) >= 150, version


@pytest.mark.parametrize("version,name", list(_cases()))
def test_load_and_compare(version, name):
    path = HERE / version / f"{name}.jaxpr"
    ins, want = _data(version, name)
    if name in UNSUPPORTED:
        prim, why = UNSUPPORTED[name]
        print(f"{version}/{name}: expected to be refused: {why}")
        with pytest.raises(JaxprUnsupportedError) as e:
            sprue.load(path)
        assert re.match(rf"{re.escape(str(path))}:\d+:\d+: .*{re.escape(prim)}", str(e.value)), str(e.value)
        return
    _compare(name, sprue.load(path)(*ins), want)


@pytest.mark.parametrize("name", ["mlp", "layernorm", "scan_rnn", "grad_cond", "broadcast_add_row",
                                  "value_and_grad_pytree"])
def test_sprue_compile(name, tmp_path):
    """`sprue compile` of JAX's text writes a library that computes JAX's results."""
    version = VERSIONS[-1]
    path = HERE / version / f"{name}.jaxpr"
    assert main(["compile", str(path), "-o", str(tmp_path), "--name", "kernel"]) == 0
    assert (tmp_path / "kernel.h").is_file()
    signature = read_kernel(path, "kernel").signature
    ins, want = _data(version, name)
    _compare(name, load_library(tmp_path / "libkernel.so", "kernel", signature)(*ins), want)
