"""Entry checks: a kernel compares the sizes its arguments' descriptors carry with the size
arguments it takes (and, compiled for C, with its static sizes) before it reads anything
(lowering/rules_checks.py); the C header's wrapper checks their strides and honours their offset
(runtime/header.py). Tested from C programs, with arrays placed just before a page that is not
readable, so that a read past an array's end kills the program instead of passing unseen."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.base.errors import RuntimeCheckError
from sprue.io.saved_format import to_text
from sprue.lowering.stablehlo import lower
from sprue.runtime import load
from sprue.tools.compile import Options, compile_file
from tests.helpers.system import CC

f64 = np.float64

RMS_SIZE = "argument x (f64[n]): sizes[0] of its descriptor differs from the size argument n; they must be equal"
RMS_SIGN = "the size argument n is negative (it is a size of argument x)"


def rms(x, s):
    return jnp.sqrt(jnp.sum(x * x) / x.shape[0]) * s


def outer_sum(x, y):
    return jnp.sum(x[:, None] * y[None, :], axis=1)   # reads x and y at every index below n


def twice(v):
    return v * 2.0


def _compile(tmp_path: Path, name: str, fn, avals, arg_names) -> Path:
    src = tmp_path / f"{name}.jaxpr"
    src.write_text(to_text(sprue.make_jaxpr(fn)(*avals), None, arg_names))
    compile_file(Options(src, tmp_path / "lib"))
    return tmp_path / "lib"


@pytest.fixture(scope="module")
def kernels(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("entry")
    n = sprue.ShapedArray(("n",), f64)
    _compile(tmp, "rms", rms, [n, sprue.ShapedArray((), f64)], ["x", "s"])
    _compile(tmp, "outer_sum", outer_sum, [n, n], ["x", "y"])
    _compile(tmp, "twice", twice, [sprue.ShapedArray((3,), f64)], ["v"])
    return tmp / "lib"


def build_and_run(tmp_path: Path, lib: Path, libs: list[str], source: str) -> subprocess.CompletedProcess:
    src = tmp_path / "main.c"
    src.write_text(source)
    exe = tmp_path / "main"
    proc = subprocess.run([CC, "-std=c99", "-Wall", "-Werror", "-pedantic", f"-I{lib}", str(src), f"-L{lib}",
                           *(f"-l{k}" for k in libs), f"-Wl,-rpath,{lib}", "-o", str(exe)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)


def lines_of(proc: subprocess.CompletedProcess) -> dict[str, str]:
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stdout}{proc.stderr}"
    return dict(line.split(": ", 1) for line in proc.stdout.splitlines())


# Arrays end where an unreadable page begins: one element too many read is a SIGSEGV.
GUARDED = r"""
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
static double *at_page_end(const double *values, size_t count) {
  long page = sysconf(_SC_PAGESIZE);
  char *p = mmap(0, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  double *start;
  if (p == MAP_FAILED || mprotect(p + page, (size_t)page, PROT_NONE) != 0) { perror("mmap"); _exit(3); }
  start = (double *)(p + page) - count;
  memcpy(start, values, count * sizeof *start);
  return start;
}
"""


def test_a_guarded_array_faults_one_element_past_its_end(tmp_path):
    # the premise of the tests below: reading past a guarded array's end kills the program
    proc = build_and_run(tmp_path, tmp_path, [], GUARDED + r"""
int main(void) {
  double v[2] = {1, 2};
  volatile double *x = at_page_end(v, 2);
  printf("inside: %g\n", x[0] + x[1]);
  fflush(stdout);
  printf("past: %g\n", x[2]);
  return 0;
}""")
    assert proc.returncode == -11 and proc.stdout == "inside: 3\n"


def test_a_size_argument_that_disagrees_with_the_descriptor_is_refused(kernels, tmp_path):
    proc = build_and_run(tmp_path, kernels, ["rms"], GUARDED + r"""
#include "rms.h"
int main(void) {
  double v[5] = {1, 2, 3, 4, 5};
  memref_f64_1d xd = {0, 0, 0, {5}, {1}};
  rms_results r;
  int64_t n[5] = {5, 3, 7, 1000000, -1}, code;
  int i;
  xd.allocated = xd.aligned = at_page_end(v, 5);
  for (i = 0; i < 5; ++i) {
    code = rms(&r, n[i], &xd, 2.0);
    if (code) printf("n=%lld: %lld %s\n", (long long)n[i], (long long)code, rms_status_message(code));
    else printf("n=%lld: 0 %.17g\n", (long long)n[i], r.result0.aligned[r.result0.offset]);
    rms_free_results(&r);   /* allocated either way */
  }
  return 0;
}""")
    out = lines_of(proc)
    want = np.sqrt(np.mean(np.arange(1.0, 6.0) ** 2)) * 2.0
    code, value = out["n=5"].split()
    assert code == "0" and float(value) == pytest.approx(want, rel=1e-15)
    for n in (3, 7, 1000000):
        assert out[f"n={n}"] == f"2 {RMS_SIZE}"
    assert out["n=-1"] == f"1 {RMS_SIGN}"


def test_a_larger_size_argument_never_reads_past_the_array(kernels, tmp_path):
    # outer_sum reads x and y at every index below n: with n = 6 for 5-element arrays that is
    # one element past their end, through the wrapper and through the exported symbol alike
    proc = build_and_run(tmp_path, kernels, ["outer_sum"], GUARDED + r"""
#include "outer_sum.h"
int main(void) {
  double v[5] = {1, 2, 3, 4, 5}, w[4] = {1, 1, 1, 1};
  memref_f64_1d xd = {0, 0, 0, {5}, {1}}, yd = {0, 0, 0, {5}, {1}};
  memref_i64_0d nd;
  outer_sum_results r;
  int64_t n = 6, code, i;
  xd.allocated = xd.aligned = at_page_end(v, 5);
  yd.allocated = yd.aligned = at_page_end(v, 5);
  code = outer_sum(&r, 5, &xd, &yd);
  printf("agree:");
  for (i = 0; i < r.result0.sizes[0]; ++i) printf(" %g", r.result0.aligned[r.result0.offset + i]);
  printf("\n");
  outer_sum_free_results(&r);
  printf("agree code: %lld\n", (long long)code);
  code = outer_sum(&r, 6, &xd, &yd);
  printf("wrapper: %lld %lld %s\n", (long long)code, (long long)r.result0.sizes[0], outer_sum_status_message(code));
  outer_sum_free_results(&r);
  nd.allocated = nd.aligned = &n; nd.offset = 0;
  _mlir_ciface_outer_sum(&r, &nd, &xd, &yd);
  code = r.status.aligned[r.status.offset];
  printf("direct: %lld %s\n", (long long)code, outer_sum_status_message(code));
  outer_sum_free_results(&r);
  n = 4;   /* y agrees with n, x does not: the first argument that disagrees is named */
  yd.allocated = yd.aligned = at_page_end(w, 4);
  yd.sizes[0] = 4;
  code = outer_sum(&r, 4, &xd, &yd);
  printf("x only: %lld %s\n", (long long)code, outer_sum_status_message(code));
  outer_sum_free_results(&r);
  return 0;
}""")
    out = lines_of(proc)
    v = np.arange(1.0, 6.0)
    assert out["agree code"] == "0"
    np.testing.assert_array_equal(np.array(out["agree"].split(), dtype=f64), v * v.sum())
    x_size = "argument x (f64[n]): sizes[0] of its descriptor differs from the size argument n; they must be equal"
    assert out["wrapper"] == f"2 0 {x_size}"   # the result: size 0 along its dynamic axis
    assert out["direct"] == f"2 {x_size}"
    assert out["x only"] == f"2 {x_size}"


def test_static_sizes_are_checked_for_c_callers(kernels, tmp_path):
    proc = build_and_run(tmp_path, kernels, ["twice"], GUARDED + r"""
#include "twice.h"
int main(void) {
  double v[5] = {1, 2, 3, 4, 5};
  memref_f64_1d vd = {0, 0, 0, {3}, {1}};
  twice_results r;
  int64_t sizes[4] = {3, 5, 2, -3}, code;
  int i;
  for (i = 0; i < 4; ++i) {
    vd.allocated = vd.aligned = at_page_end(v, sizes[i] > 0 ? (size_t)sizes[i] : 0);
    vd.sizes[0] = sizes[i];
    code = twice(&r, &vd);
    printf("%lld: %lld %s\n", (long long)sizes[i], (long long)code, code ? twice_status_message(code) : "-");
    if (!code) printf("values: %g %g %g\n", r.result0.aligned[0], r.result0.aligned[1], r.result0.aligned[2]);
    twice_free_results(&r);
    vd.sizes[0] = sizes[i];
    _mlir_ciface_twice(&r, &vd);
    printf("direct %lld: %lld\n", (long long)sizes[i], (long long)r.status.aligned[r.status.offset]);
    twice_free_results(&r);
  }
  return 0;
}""")
    out = lines_of(proc)
    static = "argument v (f64[3]): sizes[0] of its descriptor is not 3, the size the kernel was compiled for"
    assert out["3"] == "0 -" and out["values"] == "2 4 6" and out["direct 3"] == "0"
    assert out["5"] == f"1 {static}" and out["direct 5"] == "1"
    # a descriptor of 2 elements: the kernel would read a third one past the end
    assert out["2"] == f"1 {static}" and out["direct 2"] == "1"
    # a negative size is no row-major array: the wrapper says so before the kernel sees it
    assert out["-3"].startswith("2 argument v (f64[3]): its descriptor is not a row-major contiguous array")
    assert out["direct -3"] == "1"


def test_the_wrapper_checks_the_static_sizes_of_a_stablehlo_kernel(tmp_path):
    # StableHLO input has no entry checks (its module is the user's): the wrapper compares the
    # static sizes, before the kernel reads anything
    src = tmp_path / "scale3.mlir"
    src.write_text(lower(sprue.make_jaxpr(twice)(np.ones(3))).text)
    compile_file(Options(src, tmp_path / "lib"))
    proc = build_and_run(tmp_path, tmp_path / "lib", ["scale3"], GUARDED + r"""
#include "scale3.h"
int main(void) {
  double v[5] = {1, 2, 3, 4, 5};
  memref_f64_1d vd = {0, 0, 0, {3}, {1}};
  scale3_results r;
  int64_t sizes[3] = {3, 5, 2}, code;
  int i;
  for (i = 0; i < 3; ++i) {
    vd.allocated = vd.aligned = at_page_end(v, (size_t)sizes[i]);
    vd.sizes[0] = sizes[i];
    code = scale3(&r, &vd);
    if (code) printf("%lld: %lld %s\n", (long long)sizes[i], (long long)code, scale3_status_message(code));
    else printf("%lld: 0 %g %g %g\n", (long long)sizes[i], r.result0.aligned[0], r.result0.aligned[1],
                r.result0.aligned[2]);
    scale3_free_results(&r);
  }
  return 0;
}""")
    out = lines_of(proc)
    assert out["3"] == "0 2 4 6"
    message = ("1 argument arg0 (f64[3]): its descriptor's sizes are not those the kernel was compiled for"
               " (sizes[0] = 3)")
    assert out["5"] == message and out["2"] == message


def test_the_wrapper_checks_strides_and_honours_the_offset(kernels, tmp_path):
    proc = build_and_run(tmp_path, kernels, ["rms", "twice"], r"""
#include <stdio.h>
#include "rms.h"
#include "twice.h"
int main(void) {
  double v[8] = {9, 9, 1, 2, 3, 4, 5, 9};
  memref_f64_1d strided = {v, v, 2, {3}, {2}}, offset = {v, v, 2, {5}, {1}}, one = {v, v, 3, {1}, {7}};
  memref_f64_1d fixed = {v, v, 2, {3}, {1}};
  rms_results r;
  twice_results t;
  int64_t code;
  code = rms(&r, 3, &strided, 1.0);
  printf("strided: %lld %s\n", (long long)code, rms_status_message(code));
  rms_free_results(&r);
  code = rms(&r, 5, &offset, 1.0);
  printf("offset: %lld %.17g\n", (long long)code, r.result0.aligned[r.result0.offset]);
  rms_free_results(&r);
  code = rms(&r, 1, &one, 1.0);   /* the stride of an axis of size 1 is never used */
  printf("one: %lld %.17g\n", (long long)code, r.result0.aligned[r.result0.offset]);
  rms_free_results(&r);
  code = twice(&t, &fixed);
  printf("twice: %lld %g %g %g\n", (long long)code, t.result0.aligned[0], t.result0.aligned[1], t.result0.aligned[2]);
  twice_free_results(&t);
  printf("codes: %d %d\n", RMS_STATUS_COUNT, TWICE_STATUS_COUNT);
  return 0;
}""")
    out = lines_of(proc)
    assert out["strided"] == ("3 argument x (f64[?]): its descriptor is not a row-major contiguous array (sizes not"
                              " negative, strides[0] = 1 and each stride the product of the sizes after it, but for"
                              " axes of size 1): the kernel reads its elements one after another from aligned + offset")
    code, value = out["offset"].split()
    assert code == "0" and float(value) == pytest.approx(np.sqrt(np.mean(np.arange(1.0, 6.0) ** 2)), rel=1e-15)
    assert out["one"] == "0 2"
    assert out["twice"] == "0 2 4 6"
    assert out["codes"] == "3 2"   # the kernel's own codes, then one per array argument


def test_into_writes_nothing_when_a_check_fails(kernels, tmp_path):
    proc = build_and_run(tmp_path, kernels, ["outer_sum"], r"""
#include <stdio.h>
#include "outer_sum.h"
int main(void) {
  double v[3] = {1, 2, 3}, dest[3] = {-1, -1, -1};
  memref_f64_1d xd = {v, v, 0, {3}, {1}}, yd = {v, v, 0, {3}, {1}}, dd = {dest, dest, 0, {2}, {1}};
  int64_t code = outer_sum_into(&dd, 2, &xd, &yd);
  printf("fail: %lld %g %g %g\n", (long long)code, dest[0], dest[1], dest[2]);
  dd.sizes[0] = 3;
  code = outer_sum_into(&dd, 3, &xd, &yd);
  printf("ok: %lld %g %g %g\n", (long long)code, dest[0], dest[1], dest[2]);
  return 0;
}""")
    out = lines_of(proc)
    assert out["fail"] == "2 -1 -1 -1" and out["ok"] == "0 6 12 18"


# -- the lowering and Python ---------------------------------------------------------------------------
def test_lower_names_the_checks_in_order():
    closed = sprue.make_jaxpr(outer_sum)(sprue.ShapedArray(("n",), f64), sprue.ShapedArray(("n",), f64))
    lowered = lower(closed, arg_names=["n", "x", "y"])
    assert lowered.has_status and lowered.check_messages == (
        "the size argument n is negative (it is a size of argument x)",
        "argument x (f64[n]): sizes[0] of its descriptor differs from the size argument n; they must be equal",
        "argument y (f64[n]): sizes[0] of its descriptor differs from the size argument n; they must be equal")
    assert '"stablehlo.if"' in lowered.text
    # without names: the size argument after its dimension, the others by position
    assert lower(closed).check_messages[1].startswith("argument #2 (f64[n]): sizes[0] of its descriptor")


def test_an_expression_size_names_its_size_arguments():
    closed = sprue.make_jaxpr(lambda x, y: jnp.concatenate([x, y]))(
        sprue.ShapedArray(("n",), f64), sprue.ShapedArray(("m",), f64))
    out_dim = closed.jaxpr.outvars[0].aval.shape[0]
    assert not isinstance(out_dim, int)   # the result's size n + m, not an argument's: nothing to check
    messages = lower(closed, arg_names=["n", "m", "x", "y"]).check_messages
    assert messages[-1] == ("argument y (f64[m]): sizes[0] of its descriptor differs from the size argument m;"
                            " they must be equal")


def test_static_kernels_check_nothing_unless_compiled_for_c():
    closed = sprue.make_jaxpr(twice)(np.ones(3))
    plain = lower(closed, debug_info=False)
    assert not plain.has_status and "func.func @main(%arg0: tensor<3xf64>) -> tensor<3xf64>" in plain.text
    for_c = lower(closed, arg_names=["v"], static_sizes=True, debug_info=False)
    assert for_c.has_status and "func.func @main(%arg0: tensor<?xf64>) -> (tensor<i64>, tensor<3xf64>)" in for_c.text
    assert for_c.check_messages == ("argument v (f64[3]): sizes[0] of its descriptor is not 3, the size the kernel"
                                    " was compiled for",)


def test_python_calls_agree_with_numpy_and_a_wrong_size_argument_raises(tmp_path):
    f = sprue.qjit(rms, abstracted_axes=({0: "n"}, None), keep_intermediate=tmp_path)
    for n in (1, 5, 1000):
        x = np.linspace(-1.0, 2.0, n)
        for _ in range(3):   # the general path, then the fast path
            assert f(x, 2.0) == pytest.approx(np.sqrt(np.mean(x * x)) * 2.0, rel=1e-13)
    assert f.compile_count == 1
    # the library, loaded by the runtime on its own, takes the size argument from its caller
    g = load(tmp_path)
    x = np.arange(1.0, 6.0)
    assert g(5, x, 2.0)[0] == pytest.approx(np.sqrt(np.mean(x * x)) * 2.0, rel=1e-15)
    for n, message in ((3, RMS_SIZE), (6, RMS_SIZE), (-5, RMS_SIGN)):
        with pytest.raises(RuntimeCheckError, match=f"^{re.escape(message)}$"):
            g(n, x, 2.0)


def test_the_fast_path_frees_the_status_and_the_result_once(tmp_path):
    f = sprue.qjit(rms, abstracted_axes=({0: "n"}, None))
    x = np.arange(1.0, 6.0)
    f(x, 2.0)
    fn = f._last.function
    assert fn.signature.status_messages == (RMS_SIGN, RMS_SIZE)
    freed = []
    real_free = fn._unpacker.free
    fn._unpacker.free = lambda p: (freed.append(int(fn._ffi.cast("intptr_t", p))), real_free(p))
    try:
        for _ in range(4):
            assert f(x, 2.0) == pytest.approx(np.sqrt(np.mean(x * x)) * 2.0, rel=1e-15)
    finally:
        fn._unpacker.free = real_free
    assert len(freed) == 8 and len(set(freed[:2])) == 2   # a status and a result buffer per call


def stretch(x):
    return jnp.concatenate([x, 2.0 * x]), jnp.sum(x)


def test_several_results_after_a_status_on_the_fast_path(tmp_path):
    f = sprue.qjit(stretch, abstracted_axes=({0: "n"},), keep_intermediate=tmp_path)
    for n in (0, 1, 4):
        x = np.arange(float(n))
        for _ in range(3):
            y, total = f(x)
            np.testing.assert_array_equal(y, np.concatenate([x, 2 * x]))
            assert total == x.sum()
    g = load(tmp_path)
    fn = f._last.function
    freed = []
    real = {h: h._unpacker.free for h in (g, fn)}   # the runtime's own fast caller, and qjit's
    for h, real_free in real.items():
        h._unpacker.free = lambda p, real_free=real_free: (freed.append(p), real_free(p))
    x = np.arange(4.0)
    try:
        for _ in range(3):
            y, total = g(4, x)
            np.testing.assert_array_equal(y, np.concatenate([x, 2 * x]))
            del y
        assert len(freed) == 9   # the status, the array (when dropped) and the sum, each call
        for n in (3, 5):
            with pytest.raises(RuntimeCheckError, match=r"^argument x \(f64\[n\]\): sizes\[0\] of its descriptor"):
                g(n, x)
        # a failed call frees what it returned too: the status, the sum and the empty array (whose
        # buffer of 0 bytes may be null: then there is nothing to free)
        assert len(freed) in (13, 15)
    finally:
        for h, real_free in real.items():
            h._unpacker.free = real_free
