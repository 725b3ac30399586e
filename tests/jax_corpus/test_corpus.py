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
from sprue.errors import RuntimeCheckError
from sprue.io.jaxpr_lexer import JaxprUnsupportedError
from sprue.lowering.stablehlo_input import StableHLOInputError
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

# MLIR bytecode is stable across versions only as a StableHLO portable artifact (VHLO, what jax.export
# stores); `write_bytecode` of the stablehlo dialect ties it to one MLIR version
MLIRBC_UNREADABLE = {"jax-0.4.35": "JAX 0.4.35's MLIR writes stablehlo bytecode that the MLIR sprue uses"
                                   " (StableHLO 1.19) does not read; its jax.export artifacts are read"}

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


# -- jax.export artifacts and StableHLO bytecode ------------------------------------------------------------
def _exports():
    for version in VERSIONS:
        for entry in json.loads((HERE / version / "cases.json").read_text()).get("exports", []):
            yield pytest.param(version, entry, id=f"{version}/{entry['name']}")


def _sized(data, k: int, what: str) -> list[np.ndarray]:
    return [data[f"s{k}_{what}{i}"] for i in range(sum(f.startswith(f"s{k}_{what}") for f in data.files))]


def test_the_exports_are_there():
    assert {v for v, *_ in (p.values for p in _exports())} >= {"jax-0.7.2", "jax-0.10.2"}


@pytest.mark.parametrize("version,entry", list(_exports()))
def test_jax_exported_runs_every_size_from_one_compilation(version, entry):
    folder = HERE / version / "exported"
    data = np.load(folder / f"{entry['name']}.npz")
    f = sprue.load(folder / f"{entry['name']}.jax_exported")
    for k in range(entry["n_sizes"]):
        _compare(entry["name"], f(*_sized(data, k, "in")), _sized(data, k, "out"))
    # StableHLO bytecode, as jax.jit(f).lower(...).compiler_ir("stablehlo") writes it, at the first sizes
    mlirbc = folder / f"{entry['name']}.mlirbc"
    if version in MLIRBC_UNREADABLE:
        print(f"{version}/{mlirbc.name}: expected to be refused: {MLIRBC_UNREADABLE[version]}")
        with pytest.raises(StableHLOInputError, match="is not a valid MLIR bytecode module"):
            sprue.load(mlirbc)
        return
    _compare(entry["name"], sprue.load(mlirbc)(*_sized(data, 0, "in")), _sized(data, 0, "out"))


def test_shape_assertions_fail_with_jaxs_messages():
    """A symbolic size below 1, or two arguments that disagree on a size they share: the call is
    refused with the message JAX's export wrote, its values filled in, before the library runs."""
    folder = HERE / VERSIONS[-1] / "exported"
    f = sprue.load(folder / "pair_batch.jax_exported")
    ok = f(np.ones((3, 3), np.float32), np.ones(3, np.float32))
    np.testing.assert_allclose(ok, np.tanh(np.ones((3, 3))) * np.ones(3)[:, None], rtol=1e-6)
    with pytest.raises(RuntimeCheckError, match=r"Found inconsistency between dimension size args\[1\].shape\[0\]"
                                                 r" \(= 4\) and the specification 'b' \(= 3\)"):
        f(np.ones((3, 3), np.float32), np.ones(4, np.float32))
    g = sprue.load(folder / "double_batch.jax_exported")
    with pytest.raises(RuntimeCheckError, match=r"Division had remainder 1 when computing the value of 'b'"):
        g(np.ones((5, 3), np.float32))
    np.testing.assert_allclose(g(np.ones((4, 3), np.float32)), np.concatenate([np.ones((4, 3)), 2 * np.ones((4, 3))]))


@pytest.mark.parametrize("suffix", [".mlirbc", ".jax_exported"])
def test_sprue_compile_of_bytecode_and_exports(suffix, tmp_path):
    folder = HERE / VERSIONS[-1] / "exported"
    path = folder / f"softmax_rows{suffix}"
    assert main(["compile", str(path), "-o", str(tmp_path), "--name", "kernel"]) == 0
    signature = read_kernel(path, "kernel").signature
    data = np.load(folder / "softmax_rows.npz")
    _compare("softmax_rows", load_library(tmp_path / "libkernel.so", "kernel", signature)(*_sized(data, 0, "in")),
             _sized(data, 0, "out"))
