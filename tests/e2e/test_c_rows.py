"""A row-annotated function (OCANNL's row variables, issue 25) saved with sprue.save, compiled by
`sprue compile`, and called from a C host for ranks 1 to 5: the header takes the row as its rank
and sizes, the arrays it types with the row as one axis; results compared with numpy."""
import subprocess

import numpy as np

import sprue
import sprue.numpy as jnp
from sprue.tools.compile import Options, compile_file
from tests.e2e.test_c_embedding import cc, parse_output

ROWS = [(), (3,), (2, 3), (2, 1, 3), (2, 3, 1, 2)]


@sprue.qjit
def layer(x: sprue.f64["*b", "n"], w: sprue.f64["n", "h"]) -> sprue.f64["*b", "h"]:  # noqa: F821, F722
    return jnp.tanh(x @ w) + x.sum(axis=-1, keepdims=True)


HOST = r"""
#include <stdio.h>
#include "layer.h"
int main(void) {
  static const int64_t rows[5][4] = {{0}, {3}, {2, 3}, {2, 1, 3}, {2, 3, 1, 2}};
  double x[36 * 4], w[4 * 3], into[36 * 3];
  int64_t r, i, b, shape[2];
  for (i = 0; i < 12; ++i) w[i] = 0.25 * (double)i - 1.0;
  for (r = 0; r < 5; ++r) {
    layer_results out;
    b = 1;
    for (i = 0; i < r; ++i) b *= rows[r][i];
    for (i = 0; i < 4 * b; ++i) x[i] = 0.125 * (double)((i * 7) % 11) - 0.5;
    memref_f64_2d xd = {x, x, 0, {b, 4}, {4, 1}}, wd = {w, w, 0, {4, 3}, {3, 1}};
    memref_f64_2d id = {into, into, 0, {b, 3}, {3, 1}};
    if (layer(&out, r, rows[r], 4, 3, &xd, &wd) != 0) return 1;
    printf("rank%d:", (int)r + 1);
    for (i = 0; i < out.result0.sizes[0] * out.result0.sizes[1]; ++i) printf(" %.17g", out.result0.aligned[i]);
    printf("\n");
    layer_free_results(&out);
    layer_result_shapes(r, rows[r], 4, 3, shape);
    if (shape[0] != b || shape[1] != 3) return 2;
    if (layer_into(&id, r, rows[r], 4, 3, &xd, &wd) != 0) return 3;
    printf("into%d:", (int)r + 1);
    for (i = 0; i < 3 * b; ++i) printf(" %.17g", into[i]);
    printf("\n");
  }
  {   /* a descriptor whose first axis is not the row's size: the kernel's check says so */
    layer_results out;
    int64_t two[1] = {2};
    memref_f64_2d xd = {x, x, 0, {3, 4}, {4, 1}}, wd = {w, w, 0, {4, 3}, {3, 1}};
    int64_t status = layer(&out, 1, two, 4, 3, &xd, &wd);
    printf("mismatch_status: %d\n", status != 0);
    fprintf(stderr, "%s\n", layer_status_message(status));
    layer_free_results(&out);
  }
  return 0;
}
"""


def test_c_host_calls_a_row_kernel_for_ranks_1_to_5(tmp_path):
    saved = sprue.save(layer, tmp_path / "layer.jaxpr")
    out = tmp_path / "build"
    written = compile_file(Options(saved, out))
    header = written["h"].read_text()
    assert "int64_t b_rank, const int64_t *b_sizes, int64_t n, int64_t h, const memref_f64_2d *x" in header
    src = tmp_path / "host.c"
    src.write_text(HOST)
    exe = cc(tmp_path / "host", [src], out, ["layer"])
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = parse_output(proc.stdout)
    w = (0.25 * np.arange(12) - 1.0).reshape(4, 3)
    for r, row in enumerate(ROWS, 1):
        b = int(np.prod(row))
        x = (0.125 * ((np.arange(4 * b) * 7) % 11) - 0.5).reshape(*row, 4)
        want = (np.tanh(x @ w) + x.sum(axis=-1, keepdims=True)).reshape(-1)
        np.testing.assert_allclose(got[f"rank{r}"], want, rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(got[f"into{r}"], want, rtol=1e-14, atol=1e-15)
    assert got["mismatch_status"].tolist() == [1.0]
    assert "argument x (f64[b,n]): sizes[0] of its descriptor differs from the size argument b" in proc.stderr
