"""Kernels whose glue is a module of its own (lowering/module_split.py): two deep kernels from the
command line, linked statically into one C program (their hidden functions must not clash) and
checked against the same networks computed in C; their object file (`--emit obj`) is whole."""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.tools.compile import Options, compile_jaxpr
from tests.helpers.system import CC

LAYERS, N = 100, 8
f64 = np.float64


def deep_a(x, *ws):
    for w in ws:
        x = jnp.tanh(x @ w)
    return x


def deep_b(x, *ws):
    for w in ws:
        x = jnp.sin(x @ w) * 0.5
    return x


def _host() -> str:
    args = ", ".join(f"&w[{i}]" for i in range(LAYERS))
    return rf"""#include <math.h>
#include <stdio.h>
#include "deep_a.h"
#include "deep_b.h"
#define L {LAYERS}
#define N {N}

static double x[N * N], weights[L][N * N];

static void reference(double *out, int kind) {{   /* the networks, in C */
  double cur[N * N], next[N * N];
  int l, i, j, k;
  for (i = 0; i < N * N; ++i) cur[i] = x[i];
  for (l = 0; l < L; ++l) {{
    for (i = 0; i < N; ++i)
      for (j = 0; j < N; ++j) {{
        double s = 0.0;
        for (k = 0; k < N; ++k) s += cur[i * N + k] * weights[l][k * N + j];
        next[i * N + j] = kind == 0 ? tanh(s) : sin(s) * 0.5;
      }}
    for (i = 0; i < N * N; ++i) cur[i] = next[i];
  }}
  for (i = 0; i < N * N; ++i) out[i] = cur[i];
}}

int main(void) {{
  memref_f64_2d xd = {{x, x, 0, {{N, N}}, {{N, 1}}}}, w[L];
  deep_a_results a;
  deep_b_results b;
  double want[N * N];
  int l, i, wrong = 0;
  for (i = 0; i < N * N; ++i) x[i] = (i % 13) / 6.5 - 1.0;
  for (l = 0; l < L; ++l) {{
    for (i = 0; i < N * N; ++i) weights[l][i] = ((i * 7 + l * 3) % 17) / 17.0 - 0.45;
    w[l] = (memref_f64_2d){{weights[l], weights[l], 0, {{N, N}}, {{N, 1}}}};
  }}
  if (deep_a(&a, &xd, {args}) != 0 || deep_b(&b, &xd, {args}) != 0) return 2;
  reference(want, 0);
  for (i = 0; i < N * N; ++i) wrong += fabs(a.result0.aligned[i] - want[i]) > 1e-9;
  reference(want, 1);
  for (i = 0; i < N * N; ++i) wrong += fabs(b.result0.aligned[i] - want[i]) > 1e-9;
  printf("wrong %d\n", wrong);
  deep_a_free_results(&a), deep_b_free_results(&b);
  return 0;
}}
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("split")
    args = [sprue.ShapedArray((N, N), f64)] * (LAYERS + 1)
    for fn in (deep_a, deep_b):
        compile_jaxpr(sprue.make_jaxpr(fn)(*args), Options(Path(f"{fn.__name__}.jaxpr"), out,
                                                          emit={"a", "h", "llvm-ir", "obj"}))
    return out


def test_the_glue_of_a_deep_kernel_is_a_module_of_its_own(kernels):
    for name in ("deep_a", "deep_b"):
        optimized = (kernels / f"{name}.ll").read_text()
        assert "; -- the glue's module (module_split.py) --" in optimized, f"{name} was not split"


def test_two_split_kernels_link_statically_into_one_c_program(kernels, tmp_path):
    (tmp_path / "host.c").write_text(_host())
    exe = tmp_path / "host"
    cmd = [CC, "-std=c99", "-Wall", "-Werror", f"-I{kernels}", str(tmp_path / "host.c"),
           str(kernels / "libdeep_a.a"), str(kernels / "libdeep_b.a"), "-lm", "-lpthread", "-o", str(exe)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr      # (two objects defining one hidden name would not link)
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.split() == ["wrong", "0"], run.stdout


def test_the_object_file_holds_the_kernels_and_the_glue(kernels):
    symbols = subprocess.run(["nm", str(kernels / "deep_a.o")], capture_output=True, text=True, check=True).stdout
    defined = {line.split()[-1] for line in symbols.splitlines() if len(line.split()) == 3}
    assert "_mlir_ciface_deep_a" in defined, symbols              # the glue's
    assert any(s.startswith("__sprue_") for s in defined), symbols   # the kernels'
