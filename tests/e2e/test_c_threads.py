"""Threads from C (issue 14): a host built with the generated headers, the kernels' libraries, libm
and -lpthread only sets the count with sprue_set_num_threads, runs parallel kernels of two
libraries and gets the results C computes; the two libraries share one pool (lowering/
parallel_runtime.py: the dynamic linker binds both to the first one's, and from static archives
only the first archive's pool is linked), seen in the threads the process has."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.tools.compile import Options, compile_file
from tests.helpers.system import CC

ROWS, COLS = 512, 400   # 204,800 iterations: over the parallel loops' threshold (lowering/parallel.py)
f64 = np.float64


def first(x, y):
    return jnp.exp(x) * y + jnp.sin(x)


def second(x, y):
    return x * y - 3.0 * jnp.tanh(y)


HOST = r"""#define _POSIX_C_SOURCE 200809L   /* opendir */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "first.h"
#include "second.h"
#define N (ROWS * COLS)

static int tasks(void) {   /* the threads of this process */
  int n = 0;
  struct dirent *e;
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static int close_to(double got, double want) { return fabs(got - want) <= 1e-12 * (1.0 + fabs(want)); }

static double x[N], y[N];

int main(void) {
  memref_f64_2d xd = {x, x, 0, {ROWS, COLS}, {COLS, 1}}, yd = {y, y, 0, {ROWS, COLS}, {COLS, 1}};
  first_results a, a1;
  second_results b, b1;
  int i, wrong = 0;
  for (i = 0; i < N; ++i) x[i] = (i % 97) / 48.5 - 1.0, y[i] = (i % 89) / 44.5 - 0.7;
  printf("default %d\n", sprue_get_num_threads());
  printf("previous %d\n", sprue_set_num_threads(4));
  printf("now %d\n", sprue_get_num_threads());
  printf("tasks_before %d\n", tasks());
  if (first(&a, &xd, &yd) != 0) return 2;
  printf("tasks_first %d\n", tasks());
  if (second(&b, &xd, &yd) != 0) return 2;
  printf("tasks_second %d\n", tasks());
  for (i = 0; i < N; ++i) {
    wrong += !close_to(a.result0.aligned[i], exp(x[i]) * y[i] + sin(x[i]));
    wrong += !close_to(b.result0.aligned[i], x[i] * y[i] - 3.0 * tanh(y[i]));
  }
  printf("wrong %d\n", wrong);
  sprue_set_num_threads(1);
  if (first(&a1, &xd, &yd) != 0 || second(&b1, &xd, &yd) != 0) return 2;
  printf("same_bits %d\n", !memcmp(a.result0.aligned, a1.result0.aligned, sizeof x) &&
                           !memcmp(b.result0.aligned, b1.result0.aligned, sizeof x));
  printf("tasks_end %d\n", tasks());
  first_free_results(&a), first_free_results(&a1), second_free_results(&b), second_free_results(&b1);
  return 0;
}
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory) -> Path:
    from sprue.lowering.stablehlo import lower
    out = tmp_path_factory.mktemp("threads")
    arg = sprue.ShapedArray((ROWS, COLS), f64)
    for fn in (first, second):
        # from StableHLO: a kernel from a jaxpr checks its arguments' sizes first, and its body, in
        # that branch, stays serial for now (lowering/parallel.py)
        source = out / f"{fn.__name__}.mlir"
        source.write_text(lower(sprue.make_jaxpr(fn)(arg, arg)).text)
        compile_file(Options(source, out, emit={"a", "llvm-ir"}))
        # (else this test would not see two pools)
        assert "@_sprue_parallel_for(" in (out / f"{fn.__name__}.ll").read_text(), f"{fn.__name__} runs serially"
    (out / "host.c").write_text(HOST)
    return out


def _build_and_run(kernels: Path, exe: Path, libraries: list[str]) -> dict[str, int]:
    cmd = [CC, "-std=c99", "-Wall", "-Werror", "-pedantic", f"-DROWS={ROWS}", f"-DCOLS={COLS}", f"-I{kernels}",
           str(kernels / "host.c"), *libraries, "-lm", "-lpthread", "-o", str(exe)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    env = {**os.environ, "SPRUE_NUM_THREADS": "3"}
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {k: int(v) for k, v in (line.split() for line in proc.stdout.splitlines())}


def _check(got: dict[str, int]) -> None:
    assert (got["default"], got["previous"], got["now"]) == (3, 3, 4)   # SPRUE_NUM_THREADS, then the set
    assert got["wrong"] == 0 and got["same_bits"] == 1
    # three workers, started by the first kernel's loop; the second kernel's ran on them (a pool of
    # its own would have started two more: its count, SPRUE_NUM_THREADS, was never set)
    assert (got["tasks_before"], got["tasks_first"], got["tasks_second"], got["tasks_end"]) == (1, 4, 4, 4), got


def test_two_shared_libraries_share_one_pool(kernels, tmp_path):
    libs = [f"-L{kernels}", "-lfirst", "-lsecond", f"-Wl,-rpath,{kernels}"]
    _check(_build_and_run(kernels, tmp_path / "host", libs))


def test_two_static_archives_link_one_pool(kernels, tmp_path):
    exe = _build_and_run(kernels, tmp_path / "host_static", [str(kernels / "libfirst.a"), str(kernels / "libsecond.a")])
    _check(exe)
    symbols = subprocess.run(["nm", str(tmp_path / "host_static")], capture_output=True, text=True, check=True).stdout
    assert symbols.count(" sprue_use_pool\n") == 1   # one pool object linked, the first archive's
