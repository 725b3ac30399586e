"""`<name>_into` in the C header (issue 16): with the library's destination-passing entry
(`sprue compile` of a jaxpr builds `_mlir_ciface_<name>_into` beside `_mlir_ciface_<name>`), the
kernel computes its results in the caller's buffers and allocates none. The host program below
counts every allocation the library makes (it defines malloc's family itself, which the library's
calls bind to, and forwards to glibc's own), and compares every result with numpy."""
import subprocess
from pathlib import Path

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.tools.compile import Options, compile_jaxpr
from tests.e2e.test_c_embedding import cc, parse_output

f64 = np.float64


def blend(x, y):
    return jnp.exp(x) * y + 1.0, jnp.sum(x * y)


@pytest.fixture(scope="module", params=[True, False], ids=["into", "no_into"])
def blend_lib(tmp_path_factory, request) -> tuple[Path, bool]:
    """The kernel built with its destination-passing entry, and without (`sprue compile --no-into`)."""
    out = tmp_path_factory.mktemp("into")
    compile_jaxpr(sprue.make_jaxpr(blend)(sprue.ShapedArray(("n",), f64), sprue.ShapedArray(("n",), f64)),
                  Options(Path("blend.jaxpr"), out, into=request.param))
    return out, request.param


HOST = r"""
#include <stdio.h>
#include <stdlib.h>
#include "blend.h"
/* Every allocation the library makes goes through these (the program's definitions interpose
   glibc's); the library frees with free(), forwarded too. */
extern void *__libc_malloc(size_t), *__libc_calloc(size_t, size_t), *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);
static long allocations;
void *malloc(size_t n) { ++allocations; return __libc_malloc(n); }
void *calloc(size_t n, size_t m) { ++allocations; return __libc_calloc(n, m); }
void *realloc(void *p, size_t n) { ++allocations; return __libc_realloc(p, n); }
void *aligned_alloc(size_t a, size_t n) { ++allocations; return __libc_memalign(a, n); }
int posix_memalign(void **p, size_t a, size_t n) { ++allocations; *p = __libc_memalign(a, n); return *p ? 0 : 12; }
void free(void *p) { __libc_free(p); }

static void show(const char *label, const double *p, int64_t n, int64_t stride) {
  int64_t i; printf("%s:", label); for (i = 0; i < n; ++i) printf(" %.17g", p[i * stride]); printf("\n");
}
int main(void) {
  double x[7], y[7], a[7], wide[14], total, inplace[7];
  long before;
  int i;
  for (i = 0; i < 7; ++i) { x[i] = 0.25 * i - 0.5; y[i] = 1.5 - 0.125 * i; inplace[i] = y[i]; }
  memref_f64_1d xd = {x, x, 0, {7}, {1}}, yd = {y, y, 0, {7}, {1}}, ad = {a, a, 0, {7}, {1}};
  memref_f64_1d wd = {wide, wide, 1, {7}, {2}}, id = {inplace, inplace, 0, {7}, {1}};
  memref_f64_0d td = {&total, &total, 0};
  before = allocations;
  if (blend_into(&ad, &td, 7, &xd, &yd)) return 1;
  printf("contiguous_allocations: %ld\n", allocations - before);
  show("contiguous", a, 7, 1);
  show("contiguous_sum", &total, 1, 1);
  before = allocations;
  if (blend_into(&wd, &td, 7, &xd, &yd)) return 1;            /* strided: the copying path */
  printf("strided_allocations: %ld\n", allocations - before);
  show("strided", wide + 1, 7, 2);
  if (blend_into(&id, &td, 7, &xd, &id)) return 1;             /* the destination is the argument y */
  show("aliased", inplace, 7, 1);
  return 0;
}
"""


def test_into_computes_in_place_without_allocating_and_copies_otherwise(blend_lib, tmp_path):
    blend_lib, into = blend_lib
    header = (blend_lib / "blend.h").read_text()
    assert ("int64_t _mlir_ciface_blend_into(" in header) == into
    nm = subprocess.run(["nm", "-D", "--defined-only", str(blend_lib / "libblend.so")], capture_output=True, text=True)
    assert ("_mlir_ciface_blend_into" in nm.stdout) == into and "_mlir_ciface_blend\n" in nm.stdout
    src = tmp_path / "host.c"
    src.write_text(HOST)
    exe = cc(tmp_path / "host", [src], blend_lib, ["blend"])
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = parse_output(proc.stdout)
    x, y = 0.25 * np.arange(7) - 0.5, 1.5 - 0.125 * np.arange(7)
    want = np.exp(x) * y + 1.0
    np.testing.assert_allclose(out["contiguous"], want, rtol=1e-14)
    np.testing.assert_allclose(out["contiguous_sum"], [np.sum(x * y)], rtol=1e-14)
    np.testing.assert_allclose(out["strided"], want, rtol=1e-14)
    np.testing.assert_allclose(out["aliased"], want, rtol=1e-14)
    # in place: nothing allocated; copied: the kernel's own two results at least (the count can fail)
    contiguous, strided = int(out["contiguous_allocations"][0]), int(out["strided_allocations"][0])
    assert contiguous == 0 if into else contiguous >= 2
    assert strided >= 2
