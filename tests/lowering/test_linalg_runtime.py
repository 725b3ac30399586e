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
from tests.helpers.system import CC

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


# A C host: a diagonally dominant symmetric matrix (so positive definite) of a run-time size, its
# solve against two right-hand sides and its Cholesky factor, linked with -lm only.
HOST = r"""
#include <stdio.h>
#include <stdlib.h>
#include "solving.h"
int main(void) {
  enum { N = 70 };
  static double a[N * N], b[N * 2];
  int64_t i, j;
  for (i = 0; i < N; i++)
    for (j = 0; j < N; j++) a[i * N + j] = (i == j) * 4.0 + ((i + j) % 7) / 500.0;
  for (i = 0; i < 2 * N; i++) b[i] = (i % 5) - 2.0;
  memref_f64_2d ad = {a, a, 0, {N, N}, {N, 1}}, bd = {b, b, 0, {N, 2}, {2, 1}};
  solving_results r;
  if (solving(&r, N, &ad, &bd)) return 1;
  printf("x:"); for (i = 0; i < 2 * N; i++) printf(" %.17g", r.result0.aligned[r.result0.offset + i]); printf("\n");
  printf("L:"); for (i = 0; i < N * N; i++) printf(" %.17g", r.result1.aligned[r.result1.offset + i]); printf("\n");
  solving_free_results(&r);
  return 0;
}
"""


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
    (tmp_path / "host.c").write_text(HOST)
    exe = tmp_path / "host"
    proc = subprocess.run([CC, "-std=c99", "-Wall", "-Werror", f"-I{tmp_path}", str(tmp_path / "host.c"), f"-L{tmp_path}",
                           "-lsolving", "-lm", f"-Wl,-rpath,{tmp_path}", "-o", str(exe)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    out = {k: np.array(v.split(), float) for k, v in (line.split(":", 1) for line in run.stdout.splitlines())}
    i, j = np.indices((70, 70))
    a = (i == j) * 4.0 + ((i + j) % 7) / 500.0
    b = ((np.arange(140) % 5) - 2.0).reshape(70, 2)
    np.testing.assert_allclose(out["x"].reshape(70, 2), np.linalg.solve(a, b), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out["L"].reshape(70, 70), np.linalg.cholesky(a), rtol=1e-12, atol=1e-14)


def test_the_routines_compile_without_warnings(tmp_path):
    source = tmp_path / "linalg.c"
    source.write_text(LINALG_C)
    for flags in (["-O2"], ["-O0", "-std=gnu99"]):
        proc = subprocess.run([*c_toolchain.find_c_compiler(), "-c", "-fPIC", "-Wall", "-Wextra", "-Werror", *flags,
                               str(source), "-o", str(tmp_path / "linalg.o")], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
