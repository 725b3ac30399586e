"""Complex kernels in C: `sprue compile` of JAX-printed jaxprs with complex types (c128[4], c64[]), whose
header passes `double _Complex` / `float _Complex` arrays and scalars, called from a C99 program
(-Wall -Werror -pedantic, <complex.h>) and checked against numpy."""
from __future__ import annotations

import subprocess

import numpy as np

from tests.e2e.test_c_embedding import cc, needs_parser, parse_output, run
from tests.helpers.system import SPRUE

# As JAX 0.10.2 prints them (jax.make_jaxpr with jax_enable_x64) for
#   def spectrum(z, x): return jnp.sum(jnp.exp(z) * x + jnp.conj(z)), jnp.abs(z) * 2.0
#   def rotate(z, c): return z * c + jnp.real(c)             (z: c64[3], c: c64[])
SPECTRUM = """{ lambda ; a:c128[4] b:f64[4]. let
    c:c128[4] = exp a
    d:c128[4] = convert_element_type[new_dtype=complex128 weak_type=False] b
    e:c128[4] = mul c d
    f:c128[4] = conj[input_dtype=complex128] a
    g:c128[4] = add e f
    h:c128[] = reduce_sum[axes=(0,) out_sharding=None] g
    i:f64[4] = abs a
    j:f64[4] = mul i 2.0:f64[]
  in (h, j) }
"""
ROTATE = """{ lambda ; a:c64[3] b:c64[]. let
    c:c64[3] = mul a b
    d:f32[] = real b
    e:c64[] = convert_element_type[new_dtype=complex64 weak_type=False] d
    f:c64[3] = add c e
  in (f,) }
"""

HOST = r"""#include <complex.h>
#include <stdio.h>
#include "spectrum.h"
#include "rotate.h"

static void show(const char *label, const double *v, int n) {
  int i;
  printf("%s:", label);
  for (i = 0; i < n; ++i) printf(" %.17g", v[i]);
  printf("\n");
}

int main(void) {
  double _Complex z[4] = {1.0 + 2.0 * I, -0.5 + 0.25 * I, 0.0 - 1.0 * I, 3.0};
  double x[4] = {1.0, 2.0, -1.0, 0.5};
  memref_c128_1d zd = {z, z, 0, {4}, {1}};
  memref_f64_1d xd = {x, x, 0, {4}, {1}};
  spectrum_results s;
  float _Complex w[3] = {1.0f + 1.0f * I, 2.0f, -1.0f * I};
  memref_c64_1d wd = {w, w, 0, {3}, {1}};
  rotate_results r;
  double parts[6];
  double _Complex total;
  int i;
  if (spectrum(&s, &zd, &xd) != 0) return 1;
  total = s.result0.aligned[s.result0.offset];
  parts[0] = creal(total);
  parts[1] = cimag(total);
  show("spectrum_sum", parts, 2);
  show("spectrum_abs", s.result1.aligned + s.result1.offset, 4);
  spectrum_free_results(&s);
  if (rotate(&r, &wd, 0.5f - 2.0f * I) != 0) return 1;
  for (i = 0; i < 3; ++i) {
    parts[2 * i] = crealf(r.result0.aligned[r.result0.offset + i]);
    parts[2 * i + 1] = cimagf(r.result0.aligned[r.result0.offset + i]);
  }
  show("rotate", parts, 6);
  rotate_free_results(&r);
  return 0;
}
"""


@needs_parser
def test_complex_kernels_from_c(tmp_path):
    for name, text in (("spectrum", SPECTRUM), ("rotate", ROTATE)):
        (tmp_path / f"{name}.jaxpr").write_text(text)
        subprocess.run([str(SPRUE), "compile", str(tmp_path / f"{name}.jaxpr"), "-o", str(tmp_path)], check=True)
    header = (tmp_path / "rotate.h").read_text()
    assert "float _Complex *aligned" in header and "float _Complex b" in header
    assert "double _Complex *aligned" in (tmp_path / "spectrum.h").read_text()
    (tmp_path / "host.c").write_text(HOST)
    got = parse_output(run(cc(tmp_path / "host", [tmp_path / "host.c"], tmp_path, ["spectrum", "rotate"], ["-lm"])))

    z = np.array([1 + 2j, -0.5 + 0.25j, -1j, 3.0])
    x = np.array([1.0, 2.0, -1.0, 0.5])
    total = np.sum(np.exp(z) * x + np.conj(z))
    np.testing.assert_allclose(got["spectrum_sum"], [total.real, total.imag], rtol=1e-14)
    np.testing.assert_allclose(got["spectrum_abs"], np.abs(z) * 2.0, rtol=1e-15)
    w, c = np.array([1 + 1j, 2, -1j], np.complex64), np.complex64(0.5 - 2j)
    want = w * c + np.float32(c.real)
    np.testing.assert_allclose(got["rotate"], np.stack([want.real, want.imag], -1).reshape(-1), rtol=1e-6)
