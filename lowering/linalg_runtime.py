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
SPRUE_NB columns over one kernel, C -= A B (row-major, a 4 x 2-vector register tile), which gcc
and clang vectorize; on x86-64 the compute core is also compiled for AVX2 + FMA and for AVX-512
and chosen at run time by cpuid (sprue's LLVM code uses the host's vectors; the prebuilt object
must not assume them). An LU's panel is factored by halves (LAPACK's recursive getrf2), so that
most of its work is that kernel too (unless its rows are a multiple of 1 KB apart: lu_SFX_ISA). The source is one template (REAL, _SFX) written out for
float and double, and its compute core once more per instruction set (_ISA, ISA_TARGET).

Big problems are shared out on sprue's pool (parallel_runtime.py, in every library, reached by
`_sprue_parallel_for`): a factorization's trailing updates by tiles of 64 x 128, its panel's and a
solve's triangular systems by pieces of columns, a batch by whole matrices. No piece's result
depends on which thread computes it or what ran before it (the pieces' bounds depend on the sizes
and the instruction set only), so every thread count gives the same bits; with SPRUE_NUM_THREADS=1,
nested inside a parallel loop, or while another call has the pool, the caller runs every piece.
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
/* Rows of each instruction set's register tile (MR x two vectors of accumulators; 8 rows on
   AVX-512 ran no faster than 4: 42-46 GFLOP/s on one core of the EPYC, about OpenBLAS's 48), and a
   macro applying X to each row's number. */
#define SPRUE_MR_base 4
#define SPRUE_MR_avx2 4
#define SPRUE_MR_avx512 4
#define SPRUE_ROWS_base(X) X(0) X(1) X(2) X(3)
#define SPRUE_ROWS_avx2(X) X(0) X(1) X(2) X(3)
#define SPRUE_ROWS_avx512(X) X(0) X(1) X(2) X(3)
#define SPRUE_MC 128  /* rows of the update's chunks */

/* sprue's work-sharing pool (parallel_runtime.py), linked into every library: runs task over
   [0, n) in chunks of grain, the chunks' bounds independent of the number of threads; nested in
   another parallel loop, or with the pool busy or at one thread, the caller runs every chunk. */
typedef void (*sprue_linalg_task)(int64_t lo, int64_t hi, void *ctx);
void _sprue_parallel_for(sprue_linalg_task task, void *ctx, int64_t n, int64_t grain);
int sprue_get_num_threads(void);
/* Work is shared from SPRUE_PAR_FLOPS floating-point operations, in pieces of about SPRUE_PIECE_FLOPS
   (parallel.py's PARALLEL_MIN_FLOPS and CHUNK_FLOPS, measured there for generated loops); every
   piece's result is computed by the same operations whichever thread runs it, so the bits do not
   depend on the number of threads. */
#define SPRUE_PAR_FLOPS 2097152.0
#define SPRUE_PIECE_FLOPS 262144.0
#ifndef SPRUE_TM
#define SPRUE_TM 64   /* rows of a parallel update's tiles (a multiple of every SPRUE_MR) */
#endif
#ifndef SPRUE_TN
#define SPRUE_TN 128  /* columns of a parallel update's tiles (a multiple of every NR) */
#endif
#ifndef SPRUE_PACK_A_FROM
#define SPRUE_PACK_A_FROM 32   /* A is copied for products of more columns than this (fewer reuse it too little) */
#endif
#ifndef SPRUE_LU_LEAF
#define SPRUE_LU_LEAF 8   /* an LU panel's columns factored one by one */
#endif
#ifndef SPRUE_PIECES
#define SPRUE_PIECES 16      /* a parallel triangular solve's pieces of columns, about */
#endif
#ifndef SPRUE_PIECE_COLUMNS
#define SPRUE_PIECE_COLUMNS 16   /* and their least width */
#endif
#define SPRUE_MIN(a, b) ((a) < (b) ? (a) : (b))

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define SPRUE_DISPATCH 1
/* The cores to run: 2 (_avx512) with AVX-512 F and VL and the OS saving the zmm registers, else 1
   (_avx2) with AVX2 and FMA and the ymm registers saved (xgetbv), else 0 (_base). */
static int sprue_linalg_isa(void) {
  static int known = -1;   /* (a race writes the same value) */
  if (known < 0) {
    unsigned a, b, c, d;
    int isa = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_OSXSAVE) && (c & bit_AVX) && (c & bit_FMA)) {
      unsigned lo, hi;
      __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
      if ((lo & 6) == 6 && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX2))
        isa = (lo & 0xe6) == 0xe6 && (b & bit_AVX512F) && (b & bit_AVX512VL) ? 2 : 1;
    }
    known = isa;
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
/* Each instruction set's vector and register tile's columns (two vectors). (The baseline's is
   SSE2's 16 bytes: vectors wider than the machine's were split by gcc element by element, 1.1-1.5
   GFLOP/s on the EPYC, where 16 bytes ran at 17) */
typedef REAL vec_SFX_base __attribute__((vector_size(16)));
typedef REAL vec_SFX_avx2 __attribute__((vector_size(32)));
typedef REAL vec_SFX_avx512 __attribute__((vector_size(64)));
#define NR_SFX_base (32 / (int)sizeof(REAL))
#define NR_SFX_avx2 (64 / (int)sizeof(REAL))
#define NR_SFX_avx512 (128 / (int)sizeof(REAL))

/* A parallel C -= A B: tiles of SPRUE_TM x SPRUE_TN (lower: each row tile's columns end at its
   last row, the trailing lower triangle of a Cholesky step), numbered row tile by row tile. */
typedef struct {
  int64_t m, n, k, lda, ldb, ldc, col_tiles;
  const REAL *A, *B;
  REAL *C;
  int lower;
} gemm_job_SFX;

/* A parallel X = L^-1 X: X's columns in pieces of `width` (a multiple of the register tile's columns), each solved whole. */
typedef struct {
  int64_t n, m, ldl, ldx, width;
  const REAL *L;
  REAL *X;
  int unit;
} trsm_job_SFX;
"""

# The compute core, written once per instruction set: C -= A B, the triangular solve, the three
# factorizations' loops, all on contiguous row-major matrices with leading dimensions.
_CORE = r"""
/* C (m x n) -= A (m x k) B (k x n), k <= SPRUE_NB: SPRUE_MR_ISA x NR_SFX_ISA tiles held in vector
   registers (GCC's and clang's vector extensions: plain C arrays were kept on the stack), over
   chunks of SPRUE_MC rows of A, both operands first copied into contiguous blocks (A's chunk
   tile by tile, each tile of B's columns), as BLAS packs them: rows a power of two apart fall into
   a few cache sets (a 512^2 Cholesky took 2.7x its time at 520^2). The last columns by the same
   tile, B's copy padded with zeros (by plain loops, each C element waited for its own store: a
   sixth of a 400 x 200 solve on AVX-512); the last rows by plain loops. Without memory for A's
   copy, or for products too narrow to reuse it, A is read where it is. */
/* c[0, w) -= the first w of (*y0, *y1), w <= NR_SFX_ISA (a tile's row; vectors by pointer, as no
   function takes a vector, whose ABI would depend on the instruction set). */
static inline ISA_TARGET void store_row_SFX_ISA(REAL *c, const vec_SFX_ISA *y0, const vec_SFX_ISA *y1, int64_t w) {
  enum { half = NR_SFX_ISA / 2 };
  if (w == NR_SFX_ISA) {
    vec_SFX_ISA x0, x1;
    memcpy(&x0, c, sizeof x0);
    memcpy(&x1, c + half, sizeof x1);
    x0 -= *y0;
    x1 -= *y1;
    memcpy(c, &x0, sizeof x0);
    memcpy(c + half, &x1, sizeof x1);
  } else {
    for (int64_t j = 0; j < w; j++) c[j] -= j < half ? (*y0)[j] : (*y1)[j - half];
  }
}

static ISA_TARGET void gemm_sub_SFX_ISA(int64_t m, int64_t n, int64_t k, const REAL *A, int64_t lda,
                                        const REAL *B, int64_t ldb, REAL *C, int64_t ldc) {
  enum { half = NR_SFX_ISA / 2 };
  REAL packed_b[SPRUE_NB * NR_SFX_ISA];
  int64_t mr = m - m % SPRUE_MR_ISA;
  /* (at most 64 KB: under glibc's mmap threshold, so no page faults on every call) */
  /* (narrow products read A where it is, unless its rows are a multiple of 1 KB apart: they would
     share a few cache sets, which cost a 512 x 512 LU's panel 1.5x its time) */
  int conflicting = (lda * (int64_t)sizeof(REAL)) % 1024 == 0;
  REAL *packed_a = mr && (n > SPRUE_PACK_A_FROM || conflicting) ? malloc(sizeof(REAL) * (size_t)((mr < SPRUE_MC ? mr : SPRUE_MC) * k)) : NULL;
  /* A's tile at row i: element (r, p) at a[r * sr + p * sp] */
  int64_t sr = packed_a ? 1 : lda, sp = packed_a ? SPRUE_MR_ISA : 1;
  for (int64_t i0 = 0; i0 < mr; i0 += SPRUE_MC) {
    int64_t i1 = i0 + SPRUE_MC < mr ? i0 + SPRUE_MC : mr;
    if (packed_a)
      for (int64_t i = i0; i < i1; i += SPRUE_MR_ISA)
        for (int64_t p = 0; p < k; p++)
          for (int r = 0; r < SPRUE_MR_ISA; r++) packed_a[(i - i0) * k + p * SPRUE_MR_ISA + r] = A[(i + r) * lda + p];
    for (int64_t j = 0; j < n; j += NR_SFX_ISA) {
      int64_t w = n - j < NR_SFX_ISA ? n - j : NR_SFX_ISA;
      for (int64_t p = 0; p < k; p++) {
        memcpy(packed_b + p * NR_SFX_ISA, B + p * ldb + j, sizeof(REAL) * (size_t)w);
        for (int64_t jj = w; jj < NR_SFX_ISA; jj++) packed_b[p * NR_SFX_ISA + jj] = 0;
      }
      for (int64_t i = i0; i < i1; i += SPRUE_MR_ISA) {
        const REAL *a = packed_a ? packed_a + (i - i0) * k : A + i * lda, *b = packed_b;
#define SPRUE_ZERO(r) vec_SFX_ISA c##r##0 = {0}, c##r##1 = {0};
#define SPRUE_FMA(r) { REAL x = a[r * sr]; c##r##0 += x * b0; c##r##1 += x * b1; }
#define SPRUE_STORE(r) store_row_SFX_ISA(C + (i + r) * ldc + j, &c##r##0, &c##r##1, w);
        SPRUE_ROWS_ISA(SPRUE_ZERO)
        for (int64_t p = 0; p < k; p++, a += sp, b += NR_SFX_ISA) {
          vec_SFX_ISA b0, b1;
          memcpy(&b0, b, sizeof b0);
          memcpy(&b1, b + half, sizeof b1);
          SPRUE_ROWS_ISA(SPRUE_FMA)
        }
        SPRUE_ROWS_ISA(SPRUE_STORE)
#undef SPRUE_ZERO
#undef SPRUE_FMA
#undef SPRUE_STORE
      }
    }
  }
  free(packed_a);
  for (int64_t i = mr; i < m; i++)   /* the last rows */
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

/* C -= A B tile by tile: tiles [lo, hi) of the job (one tile's result does not depend on the
   others: its edges, where the register tile does not fit, are the whole product's, as SPRUE_TM
   and SPRUE_TN are multiples of the register tile) */
static ISA_TARGET void gemm_tiles_SFX_ISA(int64_t lo, int64_t hi, void *ctx) {
  const gemm_job_SFX *g = ctx;
  for (int64_t t = lo; t < hi; t++) {
    int64_t r0 = t / g->col_tiles * SPRUE_TM, c0 = t % g->col_tiles * SPRUE_TN;
    int64_t r1 = SPRUE_MIN(g->m, r0 + SPRUE_TM), c1 = SPRUE_MIN(g->lower ? SPRUE_MIN(g->n, r1) : g->n, c0 + SPRUE_TN);
    if (c0 < c1)
      gemm_sub_SFX_ISA(r1 - r0, c1 - c0, g->k, g->A + r0 * g->lda, g->lda, g->B + c0, g->ldb,
                       g->C + r0 * g->ldc + c0, g->ldc);
  }
}

/* C (m x n) -= A B (lower: only C's lower triangle and the diagonal tiles' corner above it), on the
   pool when it is worth it. */
static ISA_TARGET void gemm_sub_shared_SFX_ISA(int64_t m, int64_t n, int64_t k, const REAL *A, int64_t lda,
                                               const REAL *B, int64_t ldb, REAL *C, int64_t ldc, int lower) {
  int64_t row_tiles = (m + SPRUE_TM - 1) / SPRUE_TM, col_tiles = (n + SPRUE_TN - 1) / SPRUE_TN;
  gemm_job_SFX g = {m, n, k, lda, ldb, ldc, col_tiles, A, B, C, lower};
  if (m <= 0 || n <= 0) return;
  if (2.0 * m * n * k / (lower ? 2 : 1) < SPRUE_PAR_FLOPS)
    gemm_tiles_SFX_ISA(0, row_tiles * col_tiles, &g);
  else
    _sprue_parallel_for(gemm_tiles_SFX_ISA, &g, row_tiles * col_tiles, 1);
}

/* X (n x m) = L^-1 X for L (n x n) lower triangular (only its strict lower triangle read if unit). */
static ISA_TARGET void trsm_lower_SFX_ISA(int64_t n, const REAL *L, int64_t ldl, int unit, REAL *X, int64_t m,
                                          int64_t ldx) {
  enum { half = NR_SFX_ISA / 2 };
  int64_t mv = m - m % NR_SFX_ISA;
  for (int64_t k0 = 0; k0 < n; k0 += SPRUE_NB) {
    int64_t b = n - k0 < SPRUE_NB ? n - k0 : SPRUE_NB, e = k0 + b;
    /* The diagonal block by substitution, NR_SFX_ISA columns at a time held in registers, two rows
       together (four chains of FMAs; row by row through memory, each axpy waited for the store of
       the one before and took a third of a 400 x 200 solve), on a contiguous copy of those columns
       (X's rows a power of two apart fell into a few cache sets: a 512 x 512 Cholesky 1.3x
       slower than without the copy). x_j = (x_j - sum_p L_jp x_p) / L_jj, the terms subtracted in
       order of p. */
    for (int64_t c = 0; c < mv; c += NR_SFX_ISA) {
      REAL block[SPRUE_NB * NR_SFX_ISA];
      for (int64_t j = k0; j < e; j++) memcpy(block + (j - k0) * NR_SFX_ISA, X + j * ldx + c, sizeof(REAL) * NR_SFX_ISA);
      for (int64_t j = k0; j < e; j += 2) {
        int two = j + 1 < e;
        REAL *x = block + (j - k0) * NR_SFX_ISA, *z = x + (two ? NR_SFX_ISA : 0);
        const REAL *lj = L + j * ldl, *lz = lj + (two ? ldl : 0);
        vec_SFX_ISA x0, x1, z0, z1;
        memcpy(&x0, x, sizeof x0);
        memcpy(&x1, x + half, sizeof x1);
        memcpy(&z0, z, sizeof z0);
        memcpy(&z1, z + half, sizeof z1);
        for (int64_t p = k0; p < j; p++) {
          const REAL *y = block + (p - k0) * NR_SFX_ISA;
          vec_SFX_ISA y0, y1;
          memcpy(&y0, y, sizeof y0);
          memcpy(&y1, y + half, sizeof y1);
          x0 -= lj[p] * y0; x1 -= lj[p] * y1;
          z0 -= lz[p] * y0; z1 -= lz[p] * y1;
        }
        if (!unit) { x0 /= lj[j]; x1 /= lj[j]; }
        memcpy(x, &x0, sizeof x0);
        memcpy(x + half, &x1, sizeof x1);
        if (!two) continue;
        z0 -= lz[j] * x0; z1 -= lz[j] * x1;
        if (!unit) { z0 /= lz[j + 1]; z1 /= lz[j + 1]; }
        memcpy(z, &z0, sizeof z0);
        memcpy(z + half, &z1, sizeof z1);
      }
      for (int64_t j = k0; j < e; j++) memcpy(X + j * ldx + c, block + (j - k0) * NR_SFX_ISA, sizeof(REAL) * NR_SFX_ISA);
    }
    for (int64_t c = mv; c < m; c++)   /* the last columns, the same way one by one */
      for (int64_t j = k0; j < e; j++) {
        REAL s = X[j * ldx + c];
        for (int64_t p = k0; p < j; p++) s -= L[j * ldl + p] * X[p * ldx + c];
        X[j * ldx + c] = unit ? s : s / L[j * ldl + j];
      }
    if (k0 + b < n)
      gemm_sub_SFX_ISA(n - k0 - b, m, b, L + (k0 + b) * ldl + k0, ldl, X + k0 * ldx, ldx, X + (k0 + b) * ldx, ldx);
  }
}

static ISA_TARGET void trsm_pieces_SFX_ISA(int64_t lo, int64_t hi, void *ctx) {
  const trsm_job_SFX *j = ctx;
  for (int64_t t = lo; t < hi; t++) {
    int64_t c0 = t * j->width;
    trsm_lower_SFX_ISA(j->n, j->L, j->ldl, j->unit, j->X + c0, SPRUE_MIN(j->m, c0 + j->width) - c0, j->ldx);
  }
}

/* trsm_lower on the pool when it is worth it: X's columns in about SPRUE_PIECES pieces (for two
   threads' balance when one is slowed), each at least SPRUE_PIECE_COLUMNS wide, in whole register
   tiles; the pieces' bounds depend on n, m and the instruction set only. */
static ISA_TARGET void trsm_lower_shared_SFX_ISA(int64_t n, const REAL *L, int64_t ldl, int unit, REAL *X, int64_t m,
                                                 int64_t ldx) {
  int64_t width = (m + SPRUE_PIECES - 1) / SPRUE_PIECES;
  width = width < SPRUE_PIECE_COLUMNS ? SPRUE_PIECE_COLUMNS : width;
  trsm_job_SFX j = {n, m, ldl, ldx, (width + NR_SFX_ISA - 1) / NR_SFX_ISA * NR_SFX_ISA, L, X, unit};
  REAL *copy = NULL;
  if (1.0 * n * n * m < SPRUE_PAR_FLOPS || m <= j.width) {
    trsm_lower_SFX_ISA(n, L, ldl, unit, X, m, ldx);
    return;
  }
  /* L's rows a multiple of 1 KB apart (a 512 x 512 solve's) share a few cache sets: every piece
     would copy them again for its products (gemm_sub), so L is copied once, a row 64 bytes longer
     (without memory for it, the pieces do) */
  if ((ldl * (int64_t)sizeof(REAL)) % 1024 == 0 && (copy = malloc(sizeof(REAL) * (size_t)(n * (n + 8))))) {
    for (int64_t i = 0; i < n; i++) memcpy(copy + i * (n + 8), L + i * ldl, sizeof(REAL) * (size_t)(i + 1));
    j.L = copy, j.ldl = n + 8;
  }
  _sprue_parallel_for(trsm_pieces_SFX_ISA, &j, (m + j.width - 1) / j.width, 1);
  free(copy);
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
    trsm_lower_shared_SFX_ISA(b, A + k0 * n + k0, n, 0, W, m, n);
    transpose_SFX_ISA(b, m, W, n, L21, n);
    gemm_sub_shared_SFX_ISA(m, m, b, L21, n, W, n, A + (k0 + b) * n + k0 + b, n, 1);   /* the lower triangle */
  }
  return 1;
}

/* The panel of an LU: columns [c0, c0 + w) of A (n x n) from row c0 down, factored with partial
   pivoting (the first largest |entry| of a column its pivot, rows swapped whole, perm and the
   number of swaps kept), by halves (LAPACK's recursive getrf2, Toledo 1997: the left half, then
   the right half's top rows solved and the rest updated by a product, then its lower part): column
   by column, the panel was as slow as the trailing updates (a 400 x 400 LU). */
static ISA_TARGET int64_t lu_panel_SFX_ISA(int64_t n, REAL *A, int64_t *perm, int64_t c0, int64_t w, int64_t leaf) {
  int64_t swaps = 0, e = c0 + w;
  if (w > leaf) {
    int64_t w1 = w / 2, c1 = c0 + w1;
    swaps = lu_panel_SFX_ISA(n, A, perm, c0, w1, leaf);
    trsm_lower_SFX_ISA(w1, A + c0 * n + c0, n, 1, A + c0 * n + c1, w - w1, n);
    gemm_sub_SFX_ISA(n - c1, w - w1, w1, A + c1 * n + c0, n, A + c0 * n + c1, n, A + c1 * n + c1, n);
    return swaps + lu_panel_SFX_ISA(n, A, perm, c1, w - w1, leaf);
  }
  for (int64_t j = c0; j < e; j++) {
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
  return swaps;
}

/* LU with partial pivoting of A (n x n) in place (getrf, right-looking by blocks); perm as
   LAPACK's permutation applied (rows swapped whole); the number of swaps. */
static ISA_TARGET int64_t lu_SFX_ISA(int64_t n, REAL *A, int64_t *perm) {
  /* (by halves only where the rows are not a multiple of 1 KB apart: there the halves' narrow
     products and solves ran slower than the columns one by one, one core, CPU: 512 x 512 4.5
     against 3.9-4.1 ms, where 400 x 400 took 1.42 against 1.76) */
  int64_t swaps = 0, leaf = (n * (int64_t)sizeof(REAL)) % 1024 ? SPRUE_LU_LEAF : SPRUE_NB;
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  for (int64_t k0 = 0; k0 < n; k0 += SPRUE_NB) {
    int64_t b = n - k0 < SPRUE_NB ? n - k0 : SPRUE_NB, e = k0 + b;
    swaps += lu_panel_SFX_ISA(n, A, perm, k0, b, leaf);
    if (e < n) {
      trsm_lower_shared_SFX_ISA(b, A + k0 * n + k0, n, 1, A + k0 * n + e, n - e, n);
      gemm_sub_shared_SFX_ISA(n - e, n - e, b, A + e * n + k0, n, A + k0 * n + e, n, A + e * n + e, n, 0);
    }
  }
  return swaps;
}
"""

# The entry points of one element type: copy in through the strides, dispatch, per batch item.
_ENTRIES = r"""
#if SPRUE_DISPATCH
#define CALL_SFX(f, ...) (sprue_linalg_isa() == 2 ? f##_SFX_avx512(__VA_ARGS__) \
                          : sprue_linalg_isa() == 1 ? f##_SFX_avx2(__VA_ARGS__) : f##_SFX_base(__VA_ARGS__))
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

/* A batch's matrices, shared out on the pool when there are several and they are worth it
   (each matrix is factored or solved by the same operations wherever it runs: a matrix's own
   shared loops, nested in the batch's, run on the thread that has it). */
typedef struct {
  int64_t rank, flags, n, m;
  sprue_ranked *out, *perm, *swaps;
  const sprue_ranked *a, *b;
} batch_job_SFX;

static void for_each_matrix_SFX(sprue_linalg_task task, batch_job_SFX *job, int64_t count, double flops) {
  /* (matrices big enough to share out their own work go one after another, unless there are
     enough of them for every thread to have two) */
  if (count > 1 && count * flops >= SPRUE_PAR_FLOPS &&
      (flops < SPRUE_PAR_FLOPS || count >= 2 * (int64_t)sprue_get_num_threads())) {
    int64_t grain = flops >= SPRUE_PIECE_FLOPS ? 1 : (int64_t)(SPRUE_PIECE_FLOPS / (flops > 1 ? flops : 1));
    _sprue_parallel_for(task, job, count, grain);
  } else if (count > 0) {
    task(0, count, job);
  }
}

static void cholesky_items_SFX(int64_t lo, int64_t hi, void *ctx) {
  const batch_job_SFX *j = ctx;
  int64_t rank = j->rank, n = j->n;
  const sprue_ranked *a = j->a;
  REAL *o = (REAL *)j->out->aligned + j->out->offset;
  for (int64_t t = lo; t < hi; t++) {
    REAL *x = o + t * n * n;
    load_SFX(x, a, batch_offset(a, rank, 2, t), a->dims[2 * rank - 2], a->dims[2 * rank - 1], n, n, 0, 0);
    if (!CALL_SFX(cholesky, n, x)) { fill_nan_SFX(x, n * n); continue; }
    for (int64_t i = 0; i < n; i++) memset(x + i * n + i + 1, 0, sizeof(REAL) * (size_t)(n - i - 1));
  }
}

static void cholesky_entry_SFX(int64_t rank, sprue_ranked *out, const sprue_ranked *a) {
  int64_t n = a->dims[rank - 1];
  batch_job_SFX job = {rank, 0, n, n, out, NULL, NULL, a, NULL};
  for_each_matrix_SFX(cholesky_items_SFX, &job, batch_count(a, rank, 2), (double)n * n * n / 3);
}

static void lu_items_SFX(int64_t lo, int64_t hi, void *ctx) {
  const batch_job_SFX *j = ctx;
  int64_t rank = j->rank, n = j->n;
  const sprue_ranked *a = j->a;
  REAL *o = (REAL *)j->out->aligned + j->out->offset;
  int64_t *p = (int64_t *)j->perm->aligned + j->perm->offset, *s = (int64_t *)j->swaps->aligned + j->swaps->offset;
  for (int64_t t = lo; t < hi; t++) {
    REAL *x = o + t * n * n;
    load_SFX(x, a, batch_offset(a, rank, 2, t), a->dims[2 * rank - 2], a->dims[2 * rank - 1], n, n, 0, 0);
    s[t] = CALL_SFX(lu, n, x, p + t * n);
  }
}

static void lu_entry_SFX(int64_t rank, sprue_ranked *out, sprue_ranked *perm, sprue_ranked *swaps,
                         const sprue_ranked *a) {
  int64_t n = a->dims[rank - 1];
  batch_job_SFX job = {rank, 0, n, n, out, perm, swaps, a, NULL};
  for_each_matrix_SFX(lu_items_SFX, &job, batch_count(a, rank, 2), 2.0 * n * n * n / 3);
}

/* out (..., n, m) = op(a)^-1 b; flags: LOWER 1, TRANSPOSE_A 2, UNIT_DIAGONAL 4. op(a) is copied
   into a scratch matrix, as a lower triangular one (an upper one with rows and columns reversed,
   and b's rows and the result's with it), unless it is one already with contiguous rows. Without
   memory for the copy the result is NaNs (the matrices of that piece of the batch). */
static void triangular_solve_items_SFX(int64_t lo, int64_t hi, void *ctx) {
  const batch_job_SFX *job = ctx;
  int64_t rank = job->rank, flags = job->flags, n = job->n, m = job->m;
  const sprue_ranked *a = job->a, *b = job->b;
  int transposed = (flags & 2) != 0, lower = ((flags & 1) != 0) != transposed;
  REAL *o = (REAL *)job->out->aligned + job->out->offset;
  int64_t ars = a->dims[2 * rank - 2], acs = a->dims[2 * rank - 1];
  /* a lower triangular a of rows contiguous is read where it is (a copy was a fifth of a 100 x 100
     solve's time against one right-hand side) */
  int in_place = lower && !transposed && acs == 1;
  REAL *scratch = n && !in_place ? malloc(sizeof(REAL) * (size_t)(n * n)) : NULL;
  if (n && !in_place && !scratch) { fill_nan_SFX(o + lo * n * m, (hi - lo) * n * m); return; }
  for (int64_t t = lo; t < hi; t++) {
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
    CALL_SFX(trsm_lower_shared, n, L, ldl, (flags & 4) != 0, x, m, m);
    if (!lower)
      for (int64_t i = 0; i < n / 2; i++)
        for (int64_t j = 0; j < m; j++) {
          REAL v = x[i * m + j]; x[i * m + j] = x[(n - 1 - i) * m + j]; x[(n - 1 - i) * m + j] = v;
        }
  }
  free(scratch);
}

static void triangular_solve_entry_SFX(int64_t rank, int64_t flags, sprue_ranked *out, const sprue_ranked *a,
                                       const sprue_ranked *b) {
  int64_t n = a->dims[rank - 1], m = b->dims[rank - 1];
  batch_job_SFX job = {rank, flags, n, m, out, NULL, NULL, a, b};
  for_each_matrix_SFX(triangular_solve_items_SFX, &job, batch_count(a, rank, 2), (double)n * n * m);
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
_ISAS = (("base", ""), ("avx2", '__attribute__((target("avx2,fma")))'),
         ("avx512", '__attribute__((target("avx512f,avx512vl,avx2,fma")))'))


def _instance(text: str, real: str, sfx: str, sqrt: str) -> str:
    ranks = " ".join(f"SPRUE_LINALG_RANK_SFX({r})" for r in range(2, MAX_RANK + 1))
    return text.replace("RANKS_SFX", ranks).replace("REAL", real).replace("_SFX", f"_{sfx}").replace("SQRT", sqrt)


def _linalg_c() -> str:
    parts = [_HEADER]
    for real, sfx, sqrt in _TYPES:
        parts.append(_instance(_TYPE_HEAD, real, sfx, sqrt))
        for isa, target in _ISAS:
            core = _instance(_CORE, real, sfx, sqrt).replace("_ISA", f"_{isa}").replace("ISA_TARGET", target)
            if isa != "base":   # (only where the dispatch can choose it)
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
