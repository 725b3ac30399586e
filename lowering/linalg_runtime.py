"""The native linear-algebra routines of sprue.numpy.linalg (rules_linalg.py calls them): C that
sprue owns, linked into a library only when it calls them (as print_runtime.py's print routines),
so that a C host links nothing else (the way XLA calls LAPACK and IREE its ukernels, with nothing
to install).

- cholesky: L with L L^T = a (a's lower triangle read), the upper triangle zero; a matrix that is
  not positive definite gives a matrix of NaNs (JAX's value for LAPACK's failure).
- lu: P a = L U with partial pivoting (LAPACK's getrf: the first largest |entry| of a column is its
  pivot; a zero pivot leaves its column unscaled, so that an exactly singular matrix has an exact
  zero on U's diagonal): the packed factors, the permutation (a's row perm[i] is row i of P a) and
  the number of row swaps.
- triangular solve: x with op(a) x = b, a lower or upper (the other triangle not read), op(a) = a
  or a^T, unit diagonal or not, b of any number of columns.

Each works on arrays of any leading batch dimensions and run-time sizes (MLIR's C interface: a
pointer to each memref's descriptor, the rank passed before them), reads its operands through
their strides and writes a fresh contiguous buffer. The algorithms are LAPACK's blocked ones
(potrf, getrf, trsm; Golub & Van Loan, Matrix Computations, 4th ed., 4.2.9, 3.2.11) in blocks of
SPRUE_NB columns over one kernel, C -= A B (row-major, a 4 x 16-byte-vector register tile), which
gcc and clang vectorize; on x86-64 that kernel is also compiled for AVX2 + FMA and chosen at run
time by cpuid (sprue's LLVM code uses the host's vectors; the prebuilt object must not assume
them). The source is one template (REAL, _SFX) written out for float and double, and its
compute core once more per instruction set (_ISA, ISA_TARGET).
"""
from __future__ import annotations

from pathlib import Path

from sprue.lax import linalg

LINALG_SOURCE = "sprue_linalg.c"
LINALG_SYMBOL_PREFIX = "_mlir_ciface_sprue_linalg_"
# rules_linalg.py's flags operand of the triangular solve
LOWER, TRANSPOSE_A, UNIT_DIAGONAL = 1, 2, 4
MAX_RANK = linalg.MAX_RANK   # (the entry points are defined for each rank from 2)

_HEADER = r"""/* sprue.numpy.linalg's native routines (lowering/linalg_runtime.py), called through MLIR's C interface. */
#if defined(__GNUC__) && !defined(__clang__)
/* gcc's -O2 vectorizes only loops of known trip counts (its "very cheap" cost model: a Cholesky's
   axpys ran scalar), and no floating-point sum it may not reassociate (the dot products) */
#pragma GCC optimize("O3", "associative-math", "no-signed-zeros", "no-trapping-math")
#endif
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char *allocated; char *aligned; int64_t offset; int64_t dims[]; } sprue_ranked;

#ifndef SPRUE_NB
#define SPRUE_NB 64   /* columns of a block: the panel and trailing-update width */
#endif
#define SPRUE_MR 4    /* rows of the update kernel's register tile */
#define SPRUE_MC 128  /* rows of the update's chunks */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define SPRUE_DISPATCH 1
/* AVX2 and FMA, and the OS saving the ymm registers (xgetbv): then the _avx2 cores run. */
static int sprue_linalg_avx2(void) {
  static int known = -1;   /* (a race writes the same value) */
  if (known < 0) {
    unsigned a, b, c, d;
    int ok = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_OSXSAVE) && (c & bit_AVX) && (c & bit_FMA)) {
      unsigned lo, hi;
      __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
      if ((lo & 6) == 6 && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX2)) ok = 1;
    }
    known = ok;
  }
  return known;
}
#else
#define SPRUE_DISPATCH 0
#endif

/* The number of matrices of a rank-`rank` array whose last `inner` axes are one item, and the
   element offset of item t (its batch index through the descriptor's strides). */
static int64_t batch_count(const sprue_ranked *d, int64_t rank, int64_t inner) {
  int64_t count = 1;
  for (int64_t i = 0; i < rank - inner; i++) count *= d->dims[i];
  return count;
}
static int64_t batch_offset(const sprue_ranked *d, int64_t rank, int64_t inner, int64_t t) {
  int64_t off = d->offset;
  for (int64_t i = rank - inner - 1; i >= 0; i--) {
    off += (t % d->dims[i]) * d->dims[rank + i];
    t /= d->dims[i];
  }
  return off;
}
"""

# An element type's vector (local values only: no function takes or returns one, whose ABI would
# depend on the instruction set) and register tile.
_TYPE_HEAD = r"""
typedef REAL vec_SFX __attribute__((vector_size(32)));   /* 4 doubles or 8 floats */
#define NR_SFX (64 / (int)sizeof(REAL))   /* columns of the register tile: two vectors */
"""

# The compute core, written once per instruction set: C -= A B, the triangular solve, the three
# factorizations' loops, all on contiguous row-major matrices with leading dimensions.
_CORE = r"""
/* C (m x n) -= A (m x k) B (k x n), k <= SPRUE_NB: SPRUE_MR x NR_SFX tiles held in vector
   registers (GCC's and clang's vector extensions: plain C arrays were kept on the stack), over
   chunks of SPRUE_MC rows of A, both operands first copied into contiguous blocks (A's chunk
   tile by tile, each tile of B's columns), as BLAS packs them: rows a power of two apart fall into
   a few cache sets (a 512^2 Cholesky took 2.7x its time at 520^2); the edges by plain loops.
   Without memory for A's copy A is read where it is. */
static ISA_TARGET void gemm_sub_SFX_ISA(int64_t m, int64_t n, int64_t k, const REAL *A, int64_t lda,
                                        const REAL *B, int64_t ldb, REAL *C, int64_t ldc) {
  enum { half = NR_SFX / 2 };
  REAL packed_b[SPRUE_NB * NR_SFX];
  int64_t mr = m - m % SPRUE_MR, nr = n - n % NR_SFX;
  /* (at most 64 KB: under glibc's mmap threshold, so no page faults on every call) */
  REAL *packed_a = mr && nr ? malloc(sizeof(REAL) * (size_t)((mr < SPRUE_MC ? mr : SPRUE_MC) * k)) : NULL;
  /* A's tile at row i: element (r, p) at a[r * sr + p * sp] */
  int64_t sr = packed_a ? 1 : lda, sp = packed_a ? SPRUE_MR : 1;
  for (int64_t i0 = 0; i0 < mr; i0 += SPRUE_MC) {
    int64_t i1 = i0 + SPRUE_MC < mr ? i0 + SPRUE_MC : mr;
    if (packed_a)
      for (int64_t i = i0; i < i1; i += SPRUE_MR)
        for (int64_t p = 0; p < k; p++)
          for (int r = 0; r < SPRUE_MR; r++) packed_a[(i - i0) * k + p * SPRUE_MR + r] = A[(i + r) * lda + p];
    for (int64_t j = 0; j < nr; j += NR_SFX) {
      for (int64_t p = 0; p < k; p++) memcpy(packed_b + p * NR_SFX, B + p * ldb + j, sizeof(REAL) * NR_SFX);
      for (int64_t i = i0; i < i1; i += SPRUE_MR) {
        const REAL *a = packed_a ? packed_a + (i - i0) * k : A + i * lda, *b = packed_b;
        vec_SFX c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
        for (int64_t p = 0; p < k; p++, a += sp, b += NR_SFX) {
          vec_SFX b0, b1;
          memcpy(&b0, b, sizeof b0);
          memcpy(&b1, b + half, sizeof b1);
          REAL x0 = a[0], x1 = a[sr], x2 = a[2 * sr], x3 = a[3 * sr];
          c00 += x0 * b0; c01 += x0 * b1;
          c10 += x1 * b0; c11 += x1 * b1;
          c20 += x2 * b0; c21 += x2 * b1;
          c30 += x3 * b0; c31 += x3 * b1;
        }
        vec_SFX acc[SPRUE_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
        for (int r = 0; r < SPRUE_MR; r++) {
          REAL *c = C + (i + r) * ldc + j;
          vec_SFX y0, y1;
          memcpy(&y0, c, sizeof y0);
          memcpy(&y1, c + half, sizeof y1);
          y0 -= acc[r][0];
          y1 -= acc[r][1];
          memcpy(c, &y0, sizeof y0);
          memcpy(c + half, &y1, sizeof y1);
        }
      }
    }
  }
  free(packed_a);
  /* the last columns of the rows done above, then the last rows whole */
  for (int64_t i = 0; i < mr && nr < n; i++)
    for (int64_t p = 0; p < k; p++) {
      REAL a = A[i * lda + p], *c = C + i * ldc;
      const REAL *b = B + p * ldb;
      for (int64_t jj = nr; jj < n; jj++) c[jj] -= a * b[jj];
    }
  for (int64_t i = mr; i < m; i++)
    for (int64_t p = 0; p < k; p++) {
      REAL a = A[i * lda + p], *c = C + i * ldc;
      const REAL *b = B + p * ldb;
      for (int64_t jj = 0; jj < n; jj++) c[jj] -= a * b[jj];
    }
}

/* dst (cols x rows) = src (rows x cols)^T, by tiles of 8 rows (the 8 lines of src a tile reads
   stay in cache while its columns are written: a column at a time, a 1024^2 Cholesky spent an
   eighth of its time here) */
static ISA_TARGET void transpose_SFX_ISA(int64_t rows, int64_t cols, const REAL *src, int64_t lds, REAL *dst, int64_t ldd) {
  for (int64_t i0 = 0; i0 < rows; i0 += 8) {
    int64_t i1 = i0 + 8 < rows ? i0 + 8 : rows;
    for (int64_t c = 0; c < cols; c++)
      for (int64_t i = i0; i < i1; i++) dst[c * ldd + i] = src[i * lds + c];
  }
}

/* X (n x m) = L^-1 X for L (n x n) lower triangular (only its strict lower triangle read if unit). */
static ISA_TARGET void trsm_lower_SFX_ISA(int64_t n, const REAL *L, int64_t ldl, int unit, REAL *X, int64_t m,
                                          int64_t ldx) {
  for (int64_t k0 = 0; k0 < n; k0 += SPRUE_NB) {
    int64_t b = n - k0 < SPRUE_NB ? n - k0 : SPRUE_NB;
    for (int64_t j = k0; j < k0 + b; j++) {
      REAL *x = X + j * ldx;
      for (int64_t p = k0; p < j; p++) {
        REAL l = L[j * ldl + p];
        const REAL *y = X + p * ldx;
        for (int64_t c = 0; c < m; c++) x[c] -= l * y[c];
      }
      if (!unit) {
        REAL d = L[j * ldl + j];
        for (int64_t c = 0; c < m; c++) x[c] /= d;
      }
    }
    if (k0 + b < n)
      gemm_sub_SFX_ISA(n - k0 - b, m, b, L + (k0 + b) * ldl + k0, ldl, X + k0 * ldx, ldx, X + (k0 + b) * ldx, ldx);
  }
}

/* Cholesky of A (n x n, lower triangle) in place; 0 if A is not positive definite. Right-looking
   by blocks: the diagonal block factored by dot products, the panel below solved in transposed
   form (W = L11^-1 A21^T, kept in the unused upper triangle beside the block: it is the right
   operand of the trailing update), the trailing lower triangle updated by A22 -= L21 W. */
static ISA_TARGET int cholesky_SFX_ISA(int64_t n, REAL *A) {
  for (int64_t k0 = 0; k0 < n; k0 += SPRUE_NB) {
    int64_t b = n - k0 < SPRUE_NB ? n - k0 : SPRUE_NB, m = n - k0 - b;
    for (int64_t j = k0; j < k0 + b; j++) {
      REAL *row = A + j * n;
      REAL d = row[j];
      for (int64_t p = k0; p < j; p++) d -= row[p] * row[p];
      if (!(d > 0)) return 0;
      d = SQRT(d);
      row[j] = d;
      for (int64_t i = j + 1; i < k0 + b; i++) {
        REAL *ri = A + i * n, s = ri[j];
        for (int64_t p = k0; p < j; p++) s -= ri[p] * row[p];
        ri[j] = s / d;
      }
    }
    if (!m) break;
    REAL *W = A + k0 * n + k0 + b, *L21 = A + (k0 + b) * n + k0;
    transpose_SFX_ISA(m, b, L21, n, W, n);
    trsm_lower_SFX_ISA(b, A + k0 * n + k0, n, 0, W, m, n);
    transpose_SFX_ISA(b, m, W, n, L21, n);
    /* the lower triangle only, in strips of rows (each up to its last row's diagonal) */
    for (int64_t s0 = 0; s0 < m; s0 += SPRUE_MC) {
      int64_t h = m - s0 < SPRUE_MC ? m - s0 : SPRUE_MC;
      gemm_sub_SFX_ISA(h, s0 + h, b, L21 + s0 * n, n, W, n, A + (k0 + b + s0) * n + k0 + b, n);
    }
  }
  return 1;
}

/* LU with partial pivoting of A (n x n) in place (getrf, right-looking by blocks); perm as
   LAPACK's permutation applied (rows swapped whole); the number of swaps. */
static ISA_TARGET int64_t lu_SFX_ISA(int64_t n, REAL *A, int64_t *perm) {
  int64_t swaps = 0;
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  for (int64_t k0 = 0; k0 < n; k0 += SPRUE_NB) {
    int64_t b = n - k0 < SPRUE_NB ? n - k0 : SPRUE_NB, e = k0 + b;
    for (int64_t j = k0; j < e; j++) {
      int64_t piv = j;
      REAL best = -1;
      for (int64_t i = j; i < n; i++) {
        REAL v = A[i * n + j] < 0 ? -A[i * n + j] : A[i * n + j];
        if (v > best) { best = v; piv = i; }
      }
      if (piv != j) {
        REAL *x = A + j * n, *y = A + piv * n;
        for (int64_t c = 0; c < n; c++) { REAL t = x[c]; x[c] = y[c]; y[c] = t; }
        int64_t t = perm[j]; perm[j] = perm[piv]; perm[piv] = t;
        swaps++;
      }
      REAL d = A[j * n + j];
      const REAL *u = A + j * n;
      for (int64_t i = j + 1; i < n; i++) {
        REAL *r = A + i * n;
        if (d != 0) r[j] /= d;
        REAL l = r[j];
        for (int64_t c = j + 1; c < e; c++) r[c] -= l * u[c];
      }
    }
    if (e < n) {
      trsm_lower_SFX_ISA(b, A + k0 * n + k0, n, 1, A + k0 * n + e, n - e, n);
      gemm_sub_SFX_ISA(n - e, n - e, b, A + e * n + k0, n, A + k0 * n + e, n, A + e * n + e, n);
    }
  }
  return swaps;
}
"""

# The entry points of one element type: copy in through the strides, dispatch, per batch item.
_ENTRIES = r"""
#if SPRUE_DISPATCH
#define CALL_SFX(f, ...) (sprue_linalg_avx2() ? f##_SFX_avx2(__VA_ARGS__) : f##_SFX_base(__VA_ARGS__))
#else
#define CALL_SFX(f, ...) f##_SFX_base(__VA_ARGS__)
#endif

/* dst (rows x cols, contiguous) = the matrix of src at element offset off (strides rs, cs);
   transposed: its transpose; flipped: rows and columns reversed. */
static void load_SFX(REAL *dst, const sprue_ranked *src, int64_t off, int64_t rs, int64_t cs, int64_t rows,
                     int64_t cols, int transposed, int flipped) {
  const REAL *s = (const REAL *)src->aligned + off;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      int64_t si = flipped ? rows - 1 - i : i, sj = flipped ? cols - 1 - j : j;
      dst[i * cols + j] = transposed ? s[sj * rs + si * cs] : s[si * rs + sj * cs];
    }
}

static void fill_nan_SFX(REAL *x, int64_t count) {
  for (int64_t i = 0; i < count; i++) x[i] = (REAL)NAN;
}

static void cholesky_entry_SFX(int64_t rank, sprue_ranked *out, const sprue_ranked *a) {
  int64_t n = a->dims[rank - 1], count = batch_count(a, rank, 2);
  REAL *o = (REAL *)out->aligned + out->offset;
  for (int64_t t = 0; t < count; t++) {
    REAL *x = o + t * n * n;
    load_SFX(x, a, batch_offset(a, rank, 2, t), a->dims[2 * rank - 2], a->dims[2 * rank - 1], n, n, 0, 0);
    if (!CALL_SFX(cholesky, n, x)) { fill_nan_SFX(x, n * n); continue; }
    for (int64_t i = 0; i < n; i++) memset(x + i * n + i + 1, 0, sizeof(REAL) * (size_t)(n - i - 1));
  }
}

static void lu_entry_SFX(int64_t rank, sprue_ranked *out, sprue_ranked *perm, sprue_ranked *swaps,
                         const sprue_ranked *a) {
  int64_t n = a->dims[rank - 1], count = batch_count(a, rank, 2);
  REAL *o = (REAL *)out->aligned + out->offset;
  int64_t *p = (int64_t *)perm->aligned + perm->offset, *s = (int64_t *)swaps->aligned + swaps->offset;
  for (int64_t t = 0; t < count; t++) {
    REAL *x = o + t * n * n;
    load_SFX(x, a, batch_offset(a, rank, 2, t), a->dims[2 * rank - 2], a->dims[2 * rank - 1], n, n, 0, 0);
    s[t] = CALL_SFX(lu, n, x, p + t * n);
  }
}

/* out (..., n, m) = op(a)^-1 b; flags: LOWER 1, TRANSPOSE_A 2, UNIT_DIAGONAL 4. op(a) is copied
   into a scratch matrix, as a lower triangular one (an upper one with rows and columns reversed,
   and b's rows and the result's with it), unless it is one already with contiguous rows. Without
   memory for the copy the result is NaNs. */
static void triangular_solve_entry_SFX(int64_t rank, int64_t flags, sprue_ranked *out, const sprue_ranked *a,
                                       const sprue_ranked *b) {
  int64_t n = a->dims[rank - 1], m = b->dims[rank - 1], count = batch_count(a, rank, 2);
  int transposed = (flags & 2) != 0, lower = ((flags & 1) != 0) != transposed;
  REAL *o = (REAL *)out->aligned + out->offset;
  int64_t ars = a->dims[2 * rank - 2], acs = a->dims[2 * rank - 1];
  /* a lower triangular a of rows contiguous is read where it is (a copy was a fifth of a 100 x 100
     solve's time against one right-hand side) */
  int in_place = lower && !transposed && acs == 1;
  REAL *scratch = n && !in_place ? malloc(sizeof(REAL) * (size_t)(n * n)) : NULL;
  if (n && !in_place && !scratch) { fill_nan_SFX(o, count * n * m); return; }
  for (int64_t t = 0; t < count; t++) {
    REAL *x = o + t * n * m;
    const REAL *L = scratch;
    int64_t ldl = n;
    if (in_place) {
      L = (const REAL *)a->aligned + batch_offset(a, rank, 2, t);
      ldl = ars;
    } else {
      load_SFX(scratch, a, batch_offset(a, rank, 2, t), ars, acs, n, n, transposed, !lower);
    }
    const REAL *src = (const REAL *)b->aligned + batch_offset(b, rank, 2, t);
    int64_t rs = b->dims[2 * rank - 2], cs = b->dims[2 * rank - 1];
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < m; j++) x[i * m + j] = src[(lower ? i : n - 1 - i) * rs + j * cs];
    CALL_SFX(trsm_lower, n, L, ldl, (flags & 4) != 0, x, m, m);
    if (!lower)
      for (int64_t i = 0; i < n / 2; i++)
        for (int64_t j = 0; j < m; j++) {
          REAL v = x[i * m + j]; x[i * m + j] = x[(n - 1 - i) * m + j]; x[(n - 1 - i) * m + j] = v;
        }
  }
  free(scratch);
}

/* _mlir_ciface_sprue_linalg_<routine>_SFX_<rank>: the entry points of each rank (MLIR declares a
   function of one type per name) */
#define SPRUE_LINALG_RANK_SFX(r) \
  void _mlir_ciface_sprue_linalg_cholesky_SFX_##r(sprue_ranked *out, const sprue_ranked *a) { \
    cholesky_entry_SFX(r, out, a); } \
  void _mlir_ciface_sprue_linalg_lu_SFX_##r(sprue_ranked *out, sprue_ranked *perm, sprue_ranked *swaps, \
                                            const sprue_ranked *a) { lu_entry_SFX(r, out, perm, swaps, a); } \
  void _mlir_ciface_sprue_linalg_triangular_solve_SFX_##r(int64_t flags, sprue_ranked *out, const sprue_ranked *a, \
                                                          const sprue_ranked *b) { \
    triangular_solve_entry_SFX(r, flags, out, a, b); }
RANKS_SFX
"""

_TYPES = (("double", "f64", "sqrt"), ("float", "f32", "sqrtf"))
_ISAS = (("base", ""), ("avx2", '__attribute__((target("avx2,fma")))'))


def _instance(text: str, real: str, sfx: str, sqrt: str) -> str:
    ranks = " ".join(f"SPRUE_LINALG_RANK_SFX({r})" for r in range(2, MAX_RANK + 1))
    return text.replace("RANKS_SFX", ranks).replace("REAL", real).replace("_SFX", f"_{sfx}").replace("SQRT", sqrt)


def _linalg_c() -> str:
    parts = [_HEADER]
    for real, sfx, sqrt in _TYPES:
        parts.append(_instance(_TYPE_HEAD, real, sfx, sqrt))
        for isa, target in _ISAS:
            core = _instance(_CORE, real, sfx, sqrt).replace("_ISA", f"_{isa}").replace("ISA_TARGET", target)
            if isa == "avx2":   # (only where the dispatch can choose it)
                core = f"#if SPRUE_DISPATCH\n{core}#endif\n"
            parts.append(core)
        parts.append(_instance(_ENTRIES, real, sfx, sqrt))
    return "".join(parts)


LINALG_C = _linalg_c()


def linalg_source(directory: Path, name: str) -> Path:
    """Writes the linear-algebra routines' C source for kernel `name` into directory; its path."""
    path = directory / f"{name}.{LINALG_SOURCE}"
    path.write_text(LINALG_C)
    return path


__all__ = ["LINALG_C", "LINALG_SOURCE", "LINALG_SYMBOL_PREFIX", "LOWER", "MAX_RANK", "TRANSPOSE_A", "UNIT_DIAGONAL",
           "linalg_source"]
