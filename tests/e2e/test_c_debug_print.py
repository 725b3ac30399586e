"""sprue.debug.print from a C host (issue 23): a kernel built by `sprue compile` prints through the
library's own routine (lowering/print_runtime.py), so a C program's output holds the same lines as
Python's format of the same numpy values; built with --no-debug-print it prints nothing and links
no print routine."""
import subprocess
from pathlib import Path

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from sprue.tools.compile import Options, compile_jaxpr
from tests.e2e.test_c_embedding import cc

f64 = np.float64


def smooth(x):
    def body(i, c):
        sprue.debug.print("step {} mean {m:.4f} c={c}", i, m=jnp.mean(c), c=c)
        return 0.5 * (c + jnp.roll(c, 1))
    return lax.fori_loop(0, 3, body, x)


@pytest.fixture(scope="module", params=[True, False], ids=["prints", "no_debug_print"])
def smooth_lib(tmp_path_factory, request) -> tuple[Path, bool]:
    out = tmp_path_factory.mktemp("print")
    compile_jaxpr(sprue.make_jaxpr(smooth)(sprue.ShapedArray(("n",), f64)),
                  Options(Path("smooth.jaxpr"), out, debug_print=request.param))
    return out, request.param


HOST = r"""
#include <stdio.h>
#include "smooth.h"
int main(void) {
  double x[5] = {1.0, -2.0, 0.5, 4.0, 3.25}, y[5];
  memref_f64_1d xd = {x, x, 0, {5}, {1}}, *r = NULL;
  memref_f64_1d yd = {y, y, 0, {5}, {1}};
  if (smooth_into(&yd, 5, &xd)) return 1;
  printf("result: %.17g %.17g %.17g %.17g %.17g\n", y[0], y[1], y[2], y[3], y[4]);
  (void)r;
  return 0;
}
"""


def test_c_host_prints_what_python_formats(smooth_lib, tmp_path):
    lib, prints = smooth_lib
    nm = subprocess.run(["nm", str(lib / "libsmooth.so")], capture_output=True, text=True).stdout
    assert ("_mlir_ciface_sprue_print_end" in nm) == prints
    src = tmp_path / "host.c"
    src.write_text(HOST)
    exe = cc(tmp_path / "host", [src], lib, ["smooth"])
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    c = np.array([1.0, -2.0, 0.5, 4.0, 3.25])
    want = []
    for i in range(3):
        want.append("step {} mean {m:.4f} c={c}".format(np.asarray(i), m=np.asarray(np.mean(c)), c=c))
        c = 0.5 * (c + np.roll(c, 1))
    lines = proc.stdout.splitlines()
    assert lines[:-1] == (want if prints else [])
    np.testing.assert_allclose(np.array(lines[-1].split(":")[1].split(), f64), c, rtol=1e-15)
