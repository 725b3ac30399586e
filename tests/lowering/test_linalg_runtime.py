"""The native linear-algebra routines (linalg_runtime.py) as a C host gets them: linked into the
library only when it calls them, needing nothing beyond the C library and libm, and C that
compiles without a warning."""
from __future__ import annotations

import ctypes
import re
import subprocess

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.lowering import c_toolchain
from sprue.lowering.linalg_runtime import LINALG_C, LOWER, TRANSPOSE_A
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


# The routines share work out through _sprue_parallel_for (parallel_runtime.py's pool). A stand-in
# pool that runs the chunks on the calling thread, in order or last first, and counts its calls:
# a chunk's result must not depend on which chunks ran before it (so neither on which thread runs
# it, nor on how many there are), and small problems must not reach the pool at all.
STAND_IN_POOL = r"""
#include <stdint.h>
typedef void (*task_t)(int64_t lo, int64_t hi, void *ctx);
int64_t stand_in_calls;
int stand_in_last_first;
int sprue_get_num_threads(void) { return 2; }
void _sprue_parallel_for(task_t task, void *ctx, int64_t n, int64_t grain) {
  int64_t chunks = n <= 0 ? 0 : (n - 1) / grain + 1;
  stand_in_calls++;
  for (int64_t i = 0; i < chunks; i++) {
    int64_t c = stand_in_last_first ? chunks - 1 - i : i, lo = c * grain, hi = lo + grain < n ? lo + grain : n;
    task(lo, hi, ctx);
  }
}
"""


class _Memref(ctypes.Structure):
    _fields_ = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p), ("offset", ctypes.c_int64),
                ("dims", ctypes.c_int64 * 6)]


def _memref(x: np.ndarray) -> _Memref:
    """MLIR's descriptor of x (rank <= 3): pointers, offset, sizes, then strides in elements."""
    dims = (*x.shape, *(s // x.itemsize for s in x.strides))
    return _Memref(x.ctypes.data, x.ctypes.data, 0, (ctypes.c_int64 * 6)(*dims))


@pytest.fixture(scope="module")
def stand_in_library(tmp_path_factory):
    folder = tmp_path_factory.mktemp("linalg_pool")
    (folder / "linalg.c").write_text(LINALG_C)
    (folder / "pool.c").write_text(STAND_IN_POOL)
    library = folder / "liblinalg.so"
    proc = subprocess.run([*c_toolchain.find_c_compiler(), "-shared", "-fPIC", "-O2", str(folder / "linalg.c"),
                           str(folder / "pool.c"), "-lm", "-o", str(library)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return ctypes.CDLL(str(library))


def _run_routines(lib, s, a, b, last_first):
    """Cholesky of s, LU of a, a^-1 b (lower) and a^-T b (upper): the results and the pool's calls."""
    ctypes.c_int.in_dll(lib, "stand_in_last_first").value = last_first
    calls = ctypes.c_int64.in_dll(lib, "stand_in_calls")
    calls.value = 0
    rank = s.ndim
    chol, packed = np.empty_like(s), np.empty_like(a)
    perm, swaps = np.empty(a.shape[:-1], np.int64), np.empty(a.shape[:-2], np.int64)
    lower_x, upper_x = np.empty_like(b), np.empty_like(b)
    keep = [_memref(x) for x in (chol, s, packed, perm, swaps, a, lower_x, upper_x, b)]
    ref = [ctypes.byref(d) for d in keep]
    getattr(lib, f"_mlir_ciface_sprue_linalg_cholesky_f64_{rank}")(ref[0], ref[1])
    getattr(lib, f"_mlir_ciface_sprue_linalg_lu_f64_{rank}")(ref[2], ref[3], ref[4], ref[5])
    solve = getattr(lib, f"_mlir_ciface_sprue_linalg_triangular_solve_f64_{rank}")
    solve(ctypes.c_int64(LOWER), ref[6], ref[5], ref[8])
    solve(ctypes.c_int64(TRANSPOSE_A), ref[7], ref[5], ref[8])
    return (chol, packed, perm, swaps, lower_x, upper_x), calls.value


@pytest.mark.parametrize("shape, shared", [((300, 300), True), ((256, 256), True), ((130, 40, 40), True),
                                           ((3, 200, 200), True), ((40, 40), False)],
                         ids=["one big matrix", "rows 2 KB apart (L copied once for the solve's pieces)",
                              "a batch of small ones", "a few big ones", "one small matrix"])
def test_chunks_in_any_order_give_the_same_bits(stand_in_library, shape, shared):
    rng = np.random.default_rng(5)
    n = shape[-1]
    g = rng.standard_normal(shape)
    s = g @ np.swapaxes(g, -1, -2) / n + np.eye(n)
    a = rng.standard_normal(shape) / np.sqrt(n) + 2 * np.eye(n)
    b = rng.standard_normal((*shape[:-1], 150))
    in_order, calls = _run_routines(stand_in_library, s, a, b, 0)
    last_first, calls_again = _run_routines(stand_in_library, s, a, b, 1)
    assert (calls > 0) == shared and calls == calls_again, calls
    for x, y in zip(in_order, last_first):
        np.testing.assert_array_equal(x, y)
    chol, packed, perm, swaps, lower_x, upper_x = in_order
    np.testing.assert_allclose(chol, np.linalg.cholesky(s), rtol=1e-10, atol=1e-12)
    lower = np.tril(packed, -1) + np.eye(n)
    np.testing.assert_allclose(lower @ np.triu(packed), np.take_along_axis(a, perm[..., None], -2), atol=1e-10)
    assert np.all(np.abs(np.tril(packed, -1)) <= 1)
    np.testing.assert_allclose(lower_x, np.linalg.solve(np.tril(a), b), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(upper_x, np.linalg.solve(np.swapaxes(np.triu(a), -1, -2), b), rtol=1e-9, atol=1e-11)
