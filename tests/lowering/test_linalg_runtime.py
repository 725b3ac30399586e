"""The native linear-algebra routines (linalg_runtime.py) as a C host gets them: linked into the
library only when it calls them, needing nothing beyond the C library and libm, and C that
compiles without a warning."""
from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.lowering import c_toolchain
from sprue.lowering.linalg_runtime import LINALG_C
from sprue.tools.compile import Options, compile_jaxpr

ALLOWED = {"libc.so.6", "libm.so.6", "libmvec.so.1", "libpthread.so.0"}


def _readelf(*args) -> str | None:
    try:
        return subprocess.run(["readelf", *args], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None


def _defines_linalg(library) -> bool:
    symbols = _readelf("-sW", str(library))
    assert symbols is not None
    # (defined: a section number, not UND)
    return bool(re.search(r"FUNC\s+\w+\s+\w+\s+\d+\s+_mlir_ciface_sprue_linalg_lu_f64_2$", symbols, re.M))


def test_a_library_solving_needs_only_the_c_library_and_libm(tmp_path):
    if _readelf("--version") is None:
        pytest.skip("readelf is not installed: the libraries' NEEDED entries cannot be read")
    f64 = np.float64
    solving = sprue.make_jaxpr(lambda a, b: (jnp.linalg.solve(a, b), jnp.linalg.cholesky(a)))(
        sprue.ShapedArray(("n", "n"), f64), sprue.ShapedArray(("n", 2), f64))
    plain = sprue.make_jaxpr(lambda a: a @ a)(sprue.ShapedArray((3, 3), f64))
    compile_jaxpr(solving, Options(tmp_path / "solving.jaxpr", tmp_path))
    compile_jaxpr(plain, Options(tmp_path / "plain.jaxpr", tmp_path))
    library = tmp_path / "libsolving.so"
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", _readelf("-d", str(library))))
    assert {n for n in needed if not n.startswith("ld-linux")} <= ALLOWED, needed
    assert _defines_linalg(library)
    assert not _defines_linalg(tmp_path / "libplain.so")   # linked only where called


def test_the_routines_compile_without_warnings(tmp_path):
    source = tmp_path / "linalg.c"
    source.write_text(LINALG_C)
    for flags in (["-O2"], ["-O0", "-std=gnu99"]):
        proc = subprocess.run([*c_toolchain.find_c_compiler(), "-c", "-fPIC", "-Wall", "-Wextra", "-Werror", *flags,
                               str(source), "-o", str(tmp_path / "linalg.o")], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
