/* Calls two sprue kernels from C: `axpy` (static shapes) and `stretch` (a dynamic size n).
   Build: see README.md (make example, or CMake with find_package(Sprue)). */
#include <stdio.h>
#include <stdlib.h>

#include "axpy.h"
#include "stretch.h"

static void print_array(const char *label, const double *data, int64_t n, int64_t stride) {
  int64_t i;
  printf("%s:", label);
  for (i = 0; i < n; ++i) printf(" %.17g", data[i * stride]);
  printf("\n");
}

/* A descriptor for a caller-owned contiguous vector. */
static memref_f64_1d vector(double *data, int64_t n) {
  memref_f64_1d d;
  d.allocated = data; d.aligned = data; d.offset = 0; d.sizes[0] = n; d.strides[0] = 1;
  return d;
}

static int run_axpy(void) {
  double x[4] = {1, 2, 3, 4}, y[4] = {0.5, 0.25, -1, 10}, dest[4];
  memref_f64_1d xd = vector(x, 4), yd = vector(y, 4), dd = vector(dest, 4);
  axpy_results r;
  if (axpy(&r, 2.5, &xd, &yd) != 0) return 1;           /* callee allocates the result */
  print_array("axpy", r.result0.aligned + r.result0.offset, r.result0.sizes[0], r.result0.strides[0]);
  axpy_free_results(&r);
  if (axpy_into(&dd, -1.0, &xd, &yd) != 0) return 1;   /* the caller allocates it */
  print_array("axpy_into", dest, 4, 1);
  return 0;
}

static int run_stretch(int64_t n) {
  int64_t i, shape[1];
  double *x = malloc((size_t)n * sizeof *x), *dest, total;
  memref_f64_1d xd, dd;
  memref_f64_0d td;
  stretch_results r;
  char label[32];
  for (i = 0; i < n; ++i) x[i] = 0.5 * (double)i - 1.0;
  xd = vector(x, n);
  if (stretch(&r, n, &xd) != 0) return 1;
  snprintf(label, sizeof label, "stretch%d", (int)n);
  print_array(label, r.result0.aligned + r.result0.offset, r.result0.sizes[0], r.result0.strides[0]);
  printf("stretch%d_sum: %.17g\n", (int)n, r.result1.aligned[r.result1.offset]);
  stretch_free_results(&r);
  /* Destination passing: shapes first (no data needed), then allocate, then compute. */
  stretch_result_shapes(n, shape);
  dest = malloc((size_t)shape[0] * sizeof *dest);
  dd = vector(dest, shape[0]);
  td.allocated = &total; td.aligned = &total; td.offset = 0;
  if (stretch_into(&dd, &td, n, &xd) != 0) return 1;
  snprintf(label, sizeof label, "stretch%d_into", (int)n);
  print_array(label, dest, shape[0], 1);
  free(dest);
  free(x);
  return 0;
}

int main(void) {
  if (run_axpy() != 0 || run_stretch(3) != 0 || run_stretch(6) != 0) {
    fprintf(stderr, "a kernel failed\n");
    return 1;
  }
  return 0;
}
