"""Matrix products as blocked, vectorized loop nests (MLIR transform dialect).

convert-linalg-to-loops turns a contraction into the textbook scalar nest: one FMA per load of
A and B and per load/store of C, 0.5 GFLOP/s. Every float dot_general reaches linalg as one of
a few contractions: the dot_general rule first canonicalizes any batch and contracting dimensions
into batch-free-contract order (dot_canonical.py: a transpose where needed, the packing copy of
XLA's DotDecomposer, O(size) against the O(m n k) product), and stablehlo-legalize-to-linalg then
picks linalg.matmul, batch_matmul, matvec or vecmat -- or, where linalg-fuse-elementwise-ops folds
the reshapes around a batched dot into it (vmap, two batch dims), a linalg.generic that is a
matmul over its last three loops. Here, on tensors before bufferization:

  matmul, batch_matmul, such generics (batch loops tiled by 1 first, their unit dims folded):
    1. tiled for the caches:      [MC, NC, KC] = [128, 64, 256] at most
    2. tiled for the registers:   [MR, NR] = 4 rows x 2 vectors (AVX2: 8 of its 16 registers
                                   accumulate; 4 vectors on AVX-512), held across the k loop
    3. tiled by 1 along k, vectorized (vector.contract MR x NR x 1), and the C block's read/write
       hoisted out of the k loop; the contraction lowers to outer products: per k, MR broadcasts
       of A, NR / lanes vector loads of B's row, MR * NR / lanes vector FMAs (BLIS's micro-kernel).
  vecmat (x @ B): the same outer-product kernel with one row of 8 vectors (an axpy per row of B).
  matvec (A @ x): a dot product per row, which the register kernel cannot block; its payload gets
    `reassoc,contract` (as fastmath.py does for reductions) so LLVM's loop vectorizer keeps vector
    accumulators along the contiguous row.

Static sizes the tiles divide give full tiles and unmasked vector code. Otherwise (odd sizes,
run-time sizes) the register loops are peeled (transform.loop.peel) and every tile vectorized
with `vector_sizes`: in the full iterations the tile size folds to a constant and the masks fold
away, only the last, partial tile uses masked loads and stores (IREE's CPU pipeline does the same
for dynamic shapes). Products of fewer than MIN_FLOPS with static sizes and non-float types keep
the plain loops. The vector ops are lowered in the pipeline's llvm stage.

Static matmuls and batch_matmuls from PACK_MIN_VOLUME (and smaller ones whose tiles would be
partial) pack B first (script_packed, IREE's CPU data tiling / BLIS's packing, with
transform.structured.pack): block by block into NR-column panels, which the same register kernel
then streams contiguously (1024^2 f64: 13 -> 34 GFLOP/s, OpenBLAS 35); rows no register tile
divides peel a static last tile, so no masks. Products with run-time sizes pack too unless B is
fixed across a loop (_pays_unguarded; run-time rows: the last tile padded; a run-time N: whole
NC-column blocks and a padded rest, _split_columns). A transposed A is read through the matmul's indexing
map and a transposed B -- each batch element's too, attention's `q @ swapaxes(k, -1, -2)` -- packed
from itself, instead of dot_canonical.py's transposed copies (matmul_operands.py).

Numerics: each C element is still accumulated along k in order, with FMAs (one rounding per step
instead of two), like any BLAS (matvec's accumulation is reassociated, like numpy's dot).
"""
from __future__ import annotations

import functools
import os

from torch_mlir import ir
from torch_mlir.dialects import arith, scf, tensor

from sprue.lowering.inplace import fold_whole_slices
from sprue.lowering.matmul_library import ROUTINE_ATTR, route_products
from sprue.lowering.matmul_operands import (
    PLAIN_MAPS,
    fixed_across_loop,
    fold_lhs_transposes,
    fold_rhs_transpose,
    transposed,
)
from sprue.lowering.matmul_scripts import (
    ANY,
    MARK,
    UNPACK_COPY,
    apply_scripts,
    peel_script,
    script_matvec,
    script_one,
    script_packed,
)
from sprue.lowering.matmul_unfuse import (
    collapse_contraction_dims,
    collapse_reductions,
    drop_unit_loops,
    iterator_kinds,
    name_product,
    order_product_loops,
    split_fused_operands,
)
from sprue.lowering.mlir_util import as_operation, ops_where, pass_manager
from sprue.lowering.targets import host_vector_bytes
from sprue.lowering.transpose_blocks import lower_block_transposes

MIN_FLOPS = 2 * 32 * 32 * 32
# Cache tile caps: a KC x NC panel of B (128 KiB of f64) stays in L2 while MC rows of A stream
# past it. Measured on a 2-core EPYC (AVX2), f64, single-threaded GFLOP/s: 1024^2 8.7 -> 13.8,
# 384^2 22.6 -> 25.8 against the earlier [32, 128, 512].
MC, NC, KC = 128, 64, 256
_FLAGS = "#arith.fastmath<reassoc,contract>"
VECMAT_ROWS = 8

# SPRUE_MATMUL_FORMS=0 keeps only the plain 2-D matmul path (what sprue did before the other
# forms were tiled): an A/B switch for measuring the shape classes (benchmarks/kernels.py mm_*).
def forms_enabled() -> bool:
    return os.environ.get("SPRUE_MATMUL_FORMS", "1") not in ("0", "")


@functools.cache
def _vector_bytes() -> int:
    """Bytes of the host's widest float vector register (the register tile is sized from it)."""
    return host_vector_bytes()


def _largest_divisor(n: int, unit: int, cap: int) -> int:
    """The largest d <= cap with n % d == 0 and d % unit == 0 (unit divides n)."""
    best = unit
    d = unit
    while d <= min(n, cap):
        if n % d == 0:
            best = d
        d += unit
    return best


def _register_tiles(itemsize: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(row counts, column counts) of the register tile, best first. 4 rows of 4 vectors on AVX-512
    (16 of its 32 registers accumulate); on AVX2 6 rows of 2 vectors where the rows divide (12 of
    its 16 registers, BLIS's Haswell dgemm shape: enough independent FMAs to cover their latency;
    384^2 f64 28 -> 35 GFLOP/s), else 4. The column count stays a power-of-two number of vectors (a
    vector<12xf64> row, 3 AVX2 registers, cost LLVM's type legalization a shuffle per element:
    dynamic 256^2 went from 1.5 to 12 ms)."""
    lanes = _vector_bytes() // itemsize
    if _vector_bytes() == 64:
        return (4, 2, 1), (4 * lanes, 2 * lanes, lanes)
    return (6, 4, 2, 1), (2 * lanes, lanes)


def plan(m: int, n: int, k: int, itemsize: int = 8) -> tuple[list[int], list[int]] | None:
    """(cache tile [MC, NC, KC], register tile [MR, NR]) for an m x k @ k x n product, or None."""
    if 2 * m * n * k < MIN_FLOPS:
        return None
    rows, cols = _register_tiles(itemsize)
    lanes = _vector_bytes() // itemsize
    if _vector_bytes() == 64 and m % 8 == 0 and n % (2 * lanes) == 0:
        # The unpacked kernel on AVX-512 (small products, a recurrent scan's): 8 rows of 2 vectors,
        # 16 accumulators as the 4 x 4 tile, but half as many vector loads of B per k (its rows
        # strided in memory, not a packed panel). One core, Zen 5, min of 3 x median of 2000:
        # 32 x 64 @ 64 x 256 f64 14.0 -> 11.4 us, 32 x 32 @ 32 x 256 7.5 -> 7.2, the others alike;
        # the LSTM 1.70-1.75 -> 1.42-1.51 ms, the GRU 1.04-1.10 -> 0.97-1.00 ms (where 8 does not
        # divide m, 4 x 2 vectors left too few accumulators: 60 x 60 @ 60 x 64 6.4 -> 6.8 us)
        rows, cols = (8, 4, 2, 1), (2 * lanes, lanes)
    nr = next((r for r in cols if n % r == 0), None)
    if nr is None:
        return None
    mr = next(r for r in rows if m % r == 0)
    return [_largest_divisor(m, mr, MC), _largest_divisor(n, nr, NC), _largest_divisor(k, 1, KC)], [mr, nr]


# Packing pays for all but small products (the block-sized packing buffer is reused across the
# rows of A), and wherever the unpacked kernel would run partial tiles (rows no 4 or 6 divides,
# columns no register tile divides: masked and peeled variants, or 1- and 2-row tiles): measured
# (f64, one core of a 2-core EPYC, AVX2, one process, interleaved, CPU time; OpenBLAS in brackets)
# 128^2 0.125 -> 0.109 ms (0.113), 192^2 0.41 -> 0.35 ms (0.36), 256^2 1.5 -> 0.80-0.83 ms (0.84),
# 512^2 18.1 -> 6.8-7.0 ms (7.0-7.3), 1024^2 148 -> 58-62 ms (54-58), 129^3 0.25 -> 0.13 ms (0.12),
# 129 x 1000 x 128 11.9 -> 0.94 ms (0.93), 130 x 256 x 256 1.4 -> 0.57 ms (0.50). The packing
# copy's loops once cost LLVM as much time again (it fully unrolled the block's panel loop: two
# batched 256 x 256 x 64 products' codegen 0.15 -> 0.3 s), so products with full tiles packed only
# from 256^3; with backend.py's full-unroll limit (loops of at most 16 trips) packing costs no
# compile time measurably, and packs from 64^3 (one process, interleaved, CPU time, unpacked ->
# packed): attention's batched q @ k^T 2.45 -> 2.12 ms, p @ v 2.72 -> 2.07 ms, the whole attention
# program's compile 0.25 s either way; 512 x 64 @ 64 x 128 0.26 -> 0.21 ms, its x.T @ g
# 0.43 -> 0.34 ms.
PACK_MIN_VOLUME = 64 ** 3
# Few rows reuse each packed block little, and a B fixed across a loop (a recurrent scan's weights)
# is packed again on every trip: the LSTM's 32-row products ran ~1% slower packed.
PACK_MIN_ROWS = 64
# B block of the packed kernel, KC x PACK_NC (256 KiB of f64, half of L2, beside the A and C rows
# streaming past it): 256^2 1.52 -> 0.83 ms against a 512 KiB block; 512^2 and 1024^2 alike
# (1024^2 NC = 64: 70 ms).
PACK_NC = 128
# Where B's columns make 2 or 3 blocks, the blocks' loop (a product's parallel loop; a batch's is
# its loop over batch elements) gets at least this many, narrower: 2 trips for 2 threads leave no
# slack when one thread is slowed (a shared machine), and 3 leave one thread a trip alone. Each
# element of B is still packed once; A's rows stream past each block, twice as often for half as
# wide (one core, 256 x 1024 @ 1024 x 256 and 1024 x 100 @ 100 x 256 f64: the same time).
PARALLEL_BLOCKS = 4


# Products with run-time sizes. By default every one packs B with no guard: the packing costs one
# pass over B, which no number of rows makes a loss worth a second kernel, except where B is the
# same on every trip of an enclosing loop (a recurrent scan's weights: the LSTM and GRU with a
# run-time batch ran 1.20x and 1.66x their static versions packing on every trip), which keeps the
# masked unpacked kernel (_pays_unguarded). A run-time N is split first into whole NC-column blocks
# and a padded rest (_split_columns). Whole programs with a run-time batch against their static
# versions (one core, interleaved): ffn 1.6 -> 1.0x, mlp_train 1.35-1.49 -> 1.02-1.07x, first
# calls no longer (one kernel per product either way).
# SPRUE_MATMUL_PACK_DYNAMIC=1 packs every product with run-time sizes behind a run-time guard
# (_guard_packing: an scf.if between the packed kernel and the masked unpacked one, the static
# rule checked at run time; both compiled, ~0.15 s more per product in a warm process: the MLP
# training program's dynamic first call 1.9 -> 4.4 s); =0 packs none of them.
def pack_dynamic() -> str:
    """SPRUE_MATMUL_PACK_DYNAMIC: "0" never packs a product with run-time sizes, "1" packs behind
    the run-time guard everywhere, unset packs unguarded where B changes between calls."""
    return os.environ.get("SPRUE_MATMUL_PACK_DYNAMIC", "")


def _pays_unguarded(op: ir.Operation) -> bool:
    """Whether a product with run-time sizes packs B without the run-time guard: unless B is fixed
    across an enclosing loop (a recurrent scan's weights would be packed again on every trip), it
    does, whichever sizes are known. Packing costs one pass over B, against a kernel that runs
    unmasked full tiles (rows: the last tile padded; columns: whole NC-column blocks, the rest
    padded, _split_columns). Even narrow ones (a 10-class head, its gradient's k = 10) pay: the
    unpacked kernel's masked last column tile loads and stores C on every k step, where the packed
    one pads B to whole panels. The MLP training program with a run-time batch (one core,
    interleaved): 18.1 ms unpacked, 13.4 ms packing every static B, then with its weight gradients
    packed too 11.3 ms (static 11.1). `? x ? @ ? x ?` f64 at 256^3 (one core, separate processes,
    min of 500 calls, against OpenBLAS): unpacked 1.12-1.30x, packed with its columns split
    1.0x."""
    return not fixed_across_loop(op.operands[1], op)


def _narrow_tile(n: int, itemsize: int) -> tuple[tuple[int, ...], int]:
    """AVX-512, fewer columns than its 4-vector register tile (a 10-class head `h @ w2`, its
    gradient `h.T @ g`): (row counts, NR) of a tile as wide as the widest column count that n
    fills, with 8 rows where it is narrower than 4 vectors (4 x 4 vectors padded 10 columns to
    32, and a 4-row tile of one vector left the FMAs waiting on their latency; 12 rows ran alike,
    with more code to compile and a peeled last tile where 12 does not divide m); below one
    vector, part of one. One core, Zen 5, against OpenBLAS in the same process: 512 x 128 @ 128 x
    10 f64 140 -> 25 us (41 us), its `h.T @ g` 139 -> 27 us (41), n = 3 124 -> 23 us (33), f32
    n = 8-12 110 -> 12-29 us (13-24), f32 n = 3 125 -> 22 us (16); the MLP training program
    5.8 -> 3.5 ms (JAX 4.4)."""
    lanes = _vector_bytes() // itemsize
    # (below one vector, a part of one: a 256-, 128- or 64-bit register)
    widths = [c for c in (*_register_tiles(itemsize)[1], lanes // 2, lanes // 4, lanes // 8) if c >= 2]
    nr = next((c for c in widths if c <= n), widths[-1])
    mr = min(8, 16 // max(1, nr // lanes))
    return (mr, 4, 2, 1), nr


def _padded(n: int, nr: int) -> int:
    return -(-n // nr) * nr


def _half_width_tile(itemsize: int) -> tuple[tuple[int, ...], int]:
    """AVX-512, columns that 2-vector panels pad less than 4-vector ones (a 100-class head: 112
    columns of work, not 128): 8 rows of 2 vectors, the same 16 accumulators (plan's unpacked
    AVX-512 tile). One core, Zen 4, CPU time, median of 7 interleaved, 4 -> 2 vectors: 1024 x 256
    @ 256 x 100 f64 1.43 -> 1.27 ms, 256 x 1024 @ 1024 x 100 1.38 -> 1.22, 512 x 128 @ 128 x 200
    0.62 -> 0.58, 1000 x 300 @ 300 x 72 1.22 -> 0.99 (512^3, which 4 vectors divide: 5.6 either way)."""
    lanes = _vector_bytes() // itemsize
    return (8, 4, 2, 1), 2 * lanes


def packed_register_tile(n: int | None, itemsize: int) -> tuple[tuple[int, ...], int]:
    """(row counts, NR) of the packed kernel for n columns of B (None: a run-time count)."""
    rows, cols = _register_tiles(itemsize)
    nr = cols[0]
    if n is not None and n < nr and _vector_bytes() == 64:
        return _narrow_tile(n, itemsize)
    if n is not None and _vector_bytes() == 64 and _padded(n, cols[1]) < _padded(n, nr):
        return _half_width_tile(itemsize)
    return rows, nr


def _packed_plan(op: ir.Operation) -> tuple[list[int], list[int], int, bool | None] | None:
    """(cache tile [MC, NC, KC], register tile [MR, NR], rows of the peeled last row tile (-1: run-time
    rows, the last tile padded), None for static sizes else whether the run-time guard decides) for a
    static linalg.matmul (or batch_matmul, per batch element) that packs B (script_packed): a
    large one, or one whose unpacked tiles would be partial (PACK_MIN_VOLUME); else None. MR is 6
    rows (AVX2; 4 on AVX-512) whatever the row count, the row loop peeled where 6 does not divide it
    (a 6-row kernel and a static last tile): its 12 accumulators cover the FMA latency that the 8 of
    a 4-row kernel do not (one core, in-process A/B, min of 31: 256 x 64 @ 64 x 256 0.32 -> 0.25
    ms, 128^2 0.17 -> 0.12, attention's batched 256 x 256 x 64 1.94 -> 1.82, 1024^2 62 -> 60). A stays unpacked: its MR rows are as many streams the prefetchers
    follow (packing A as well, into zero-padded MR-row panels, measured slower: 1023 x 1000 x 1024
    78 ms against 71 ms, 512^2 16 ms against 7.7 ms)."""
    if not forms_enabled():
        return None
    itemsize = _float_itemsize(op)
    a, b = (_sizes(v.type) for v in op.operands[:2])
    if op.name == "linalg.batch_matmul" and transposed(op) is not None:
        (m, k), n = a[1:], b[1] if transposed(op)[1] else b[2]   # per batch element (script_packed's `batch`)
    elif op.name == "linalg.matmul" and transposed(op) is not None:
        lhs_t, rhs_t = transposed(op)
        (m, k), n = a[::-1] if lhs_t else a, b[0] if rhs_t else b[1]
    else:
        return None
    if itemsize is None:
        return None
    rows, nr = packed_register_tile(n, itemsize)
    if None in (m, n, k):
        # the sizes known at compile time must pass the rule already (_guard_packing checks all);
        # one that cannot never packs, and fewer than NR columns have no panel to pack into
        if (n is not None and n < nr) or (k is not None and k < 2) or (m is not None and m < PACK_MIN_ROWS):
            return None
        # run-time sizes: B padded to whole panels as above, the row loop peeled with its last
        # rows padded to one tile (script_packed), blocks of PACK_NC columns and KC rows of B.
        # Packed unguarded (-2) where _pays_unguarded, or behind the run-time guard everywhere
        # (-1) with SPRUE_MATMUL_PACK_DYNAMIC=1
        mode = pack_dynamic()
        guarded = mode not in ("", "0")
        if mode == "0" or not guarded and not _pays_unguarded(op):
            return None
        # A read row by row with a run-time row stride (k): 4 rows, not 6. Each row is one more
        # address LLVM keeps in a register, and with 6 the k loop spilled one (the batched
        # `p @ v` of attention with run-time t, one core, separate processes, min of 300: 1.73-1.83
        # -> 1.51-1.60 ms, its static version 1.50-1.53; `? x ? @ ? x ?` at 256^3 alike)
        lhs_t = op.name == "linalg.matmul" and transposed(op)[0]
        mr = 4 if k is None and not lhs_t and 4 in rows else rows[0]
        # static rows: a static last tile of m % mr rows (as below); run-time ones: -1, padded
        return [0, nr * max(1, PACK_NC // nr), KC], [mr, nr], -1 if m is None else m % mr, guarded
    # (the loops' one-trip forms are not handled); from NR columns up, B's columns are padded to
    # whole panels: 512 x 128 @ 128 x 10 f64 packed into two 8-column panels 0.32 -> 0.14 ms
    # (OpenBLAS 0.10), where the unpacked kernel's masked last tile stored C on every k step
    if m < 2 * rows[0] or n < nr or k < 2:
        return None
    full = plan(m, n, k, itemsize)
    if (m * n * k < PACK_MIN_VOLUME or m < PACK_MIN_ROWS) and full is not None and full[1][0] >= 4:
        return None                        # the unpacked kernel: full tiles of 4 or 6 rows
    mr = rows[0]
    # blocks that divide the panels and k where that keeps them at least half size: a partial
    # block has run-time sizes, and its packing buffer is then allocated in the loop
    panels, most = -(-n // nr), max(1, PACK_NC // nr)
    if op.name == "linalg.matmul" and 2 <= -(-panels // most) < PARALLEL_BLOCKS:
        most = max(1, panels // PARALLEL_BLOCKS)   # (PARALLEL_BLOCKS' comment)
    nb = _largest_divisor(panels, 1, most)
    kc = _largest_divisor(k, 1, KC)
    return [m, nr * (nb if 2 * nb >= min(most, panels) else most), kc if 2 * kc >= min(k, KC) else min(k, KC)], [mr, nr], m % mr, None


def _size_values(op: ir.Operation) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(m, n, k) of a matmul or batch_matmul as index values (tensor.dim of run-time sizes),
    built before op: m and n from C, k from A (not B, whose transposed copy may then move into
    the unpacked branch alone)."""
    a, c = op.operands[0], op.operands[2]
    last = len(_sizes(c.type)) - 1
    lhs_t = transposed(op)[0]
    where = ((c, last - 1), (c, last), (a, last - 1 if lhs_t else last))
    index = ir.IndexType.get()
    out = []
    for value, dim in where:
        size = _sizes(value.type)[dim]
        out.append(arith.constant(index, size) if size is not None else tensor.dim(value, arith.constant(index, dim)))
    return out[0], out[1], out[2]


def _guard_packing(op: ir.Operation, nr: int) -> tuple[ir.Operation, ir.Operation]:
    """A product with run-time sizes becomes `scf.if` (packing pays at these sizes) {op packed}
    else {op unpacked}: the static rule (_packed_plan: at least PACK_MIN_ROWS rows and
    PACK_MIN_VOLUME, NR columns, 2 steps of k) checked at run time. Both copies are compiled;
    the returned pair (to pack, to leave) replace op."""
    index = ir.IndexType.get()
    with ir.InsertionPoint(op), op.location:
        m, n, k = _size_values(op)

        def at_least(value: ir.Value, bound: int) -> ir.Value:
            return arith.cmpi(arith.CmpIPredicate.sge, value, arith.constant(index, bound))
        # m n >= ceil(VOLUME / k) for m n k >= VOLUME: no product of three sizes to overflow
        per_k = arith.ceildivsi(arith.constant(index, PACK_MIN_VOLUME), arith.maxsi(k, arith.constant(index, 1)))
        cond = at_least(m, PACK_MIN_ROWS)
        for more in (at_least(n, nr), at_least(k, 2),
                     arith.cmpi(arith.CmpIPredicate.sge, arith.muli(m, n), per_k)):
            cond = arith.andi(cond, more)
        branch = scf.IfOp(cond, [r.type for r in op.results], has_else=True)
        pair = []
        for block in (branch.then_block, branch.else_block):
            with ir.InsertionPoint(block):
                copy = op.clone()
                scf.YieldOp(list(copy.results))
            pair.append(copy)
    for old, new in zip(op.results, branch.results):
        old.replace_all_uses_with(new)
    op.erase()
    return pair[0], pair[1]


def _drop_unpack_copies(module: ir.Module) -> None:
    """lower_unpack ends in a linalg.copy of the unpacked view into a fresh tensor: one more pass
    over the result and one more buffer. Its users take the view itself (bufferization still copies
    it where a function returns it and its layout is not the identity). The canonicalization in
    the scripts recreates some of the copies it annotated, without the annotation: a copy of a
    collapsed view into a fresh tensor, or into a slice (batch_fusion.py's destinations), is such
    a copy too (the padded rows' copies back, the only other linalg.copy ops here, copy slices)."""
    def unpack_copy(op: ir.Operation) -> bool:
        if op.name != "linalg.copy":
            return False
        source, dest = op.operands[0], op.operands[1]
        return UNPACK_COPY in op.attributes or all(
            isinstance(v, ir.OpResult) and as_operation(v.owner).name in names
            for v, names in ((source, ("tensor.collapse_shape",)), (dest, ("tensor.empty", "tensor.extract_slice"))))
    found = ops_where(module.operation, unpack_copy)
    for op in found:
        op.results[0].replace_all_uses_with(op.operands[0])
        op.erase()


def _float_itemsize(op: ir.Operation) -> int | None:
    types = {str(ir.RankedTensorType(v.type).element_type) for v in op.operands}
    return {frozenset({"f64"}): 8, frozenset({"f32"}): 4}.get(frozenset(types))


def _sizes(t: ir.Type) -> list[int | None]:
    """A tensor's sizes, None for a run-time one."""
    rt = ir.RankedTensorType(t)
    return [None if rt.is_dynamic_dim(i) else rt.shape[i] for i in range(rt.rank)]


def plan_masked(m: int | None, n: int | None, k: int | None, itemsize: int = 8) -> tuple[list[int], list[int]]:
    """Tiles for sizes no register tile divides, or known only at run time (None): the last tile
    of each loop is partial, and the vectorizer masks its loads and stores (vector.mask, from
    `vectorize ... vector_sizes`), as IREE's CPU pipeline does for dynamic shapes."""
    rows, cols = _register_tiles(itemsize)
    mr, nr = next(r for r in rows if r <= 4), cols[0]     # 6 rows measured slower with partial tiles
    lanes = _vector_bytes() // itemsize
    if _vector_bytes() == 64 and n is not None and n % (2 * lanes) == 0 and (m is None or m >= 8):
        mr, nr = 8, 2 * lanes     # (plan's unpacked AVX-512 tile, for run-time rows too)
    if n is not None and n < nr:
        # narrower columns in a narrower vector (8 float32 columns: one AVX register, unmasked; a
        # 16-lane vector masked to 8 kept C out of registers, loaded and stored every k step)
        widths = sorted({*cols, *(w for w in (lanes // 2, lanes // 4) if w >= 2)})
        nr = next((c for c in widths if c >= n), cols[0])
    if m is not None and m < mr:
        mr = next((r for r in reversed(rows) if r >= m), 1)
    nc = nr * max(1, NC // nr)
    kc = KC if k is None or k > KC else k
    return [mr * max(1, MC // mr), nc, kc], [mr, nr]


def _generic_batch(op: ir.Operation) -> int | None:
    """The number of leading batch loops of a linalg.generic that is a matmul over its last three
    loops (m, n, k): lhs (batch..., m, k), rhs (batch..., k, n), each with any subset of the batch
    dims, out (batch..., m, n); None for any other generic. linalg-fuse-elementwise-ops makes these
    out of a canonical dot and the reshapes around it (a vmapped matmul, two batch dims)."""
    kinds = iterator_kinds(op)
    loops = len(kinds)
    if loops < 3 or kinds[-1] != "reduction" or "reduction" in kinds[:-1] or len(op.operands) != 3:
        return None
    maps = []
    for attr in ir.ArrayAttr(op.attributes["indexing_maps"]):
        try:
            maps.append([ir.AffineDimExpr(e).position for e in ir.AffineMapAttr(attr).value.results])
        except ValueError:                   # a result that is not a plain loop index
            return None
    m, n, k = loops - 3, loops - 2, loops - 1
    lhs, rhs, out = maps
    if out != list(range(loops - 1)) or lhs[-2:] != [m, k] or rhs[-2:] != [k, n]:
        return None
    for lead in (lhs[:-2], rhs[:-2]):
        if lead != sorted(set(lead)) or any(d >= m for d in lead):
            return None
    payload: list[str] = []

    def visit(inner: ir.Operation) -> ir.WalkResult:
        payload.append(inner.name)
        return ir.WalkResult.ADVANCE
    op.walk(visit)
    if sorted(payload[:-1]) != ["arith.addf", "arith.mulf", "linalg.yield"]:   # the last is op itself
        return None
    return m


def _eligible(op: ir.Operation) -> tuple[str, list[int], list[int], list[bool] | None, int] | None:
    """(kind, cache tile, register tile, loops to peel, batch loops) for a contraction the register
    kernel can block."""
    kind = op.name
    batch = 1 if kind == "linalg.batch_matmul" else 0
    if kind == "linalg.generic":
        batch = _generic_batch(op)
        if batch is None:
            return None
    elif "indexing_maps" in op.attributes:   # the plain form or transposed operands, not other maps
        if kind in PLAIN_MAPS and transposed(op) is None:
            return None
    if len(op.operands) != 3:
        return None
    itemsize = _float_itemsize(op)
    if itemsize is None:
        return None
    a, b, _ = (_sizes(v.type) for v in op.operands)
    # a transposed B only where _split_columns folded it: those products are packed
    lhs_t, rhs_t = transposed(op) if kind in PLAIN_MAPS else (False, False)
    if kind == "linalg.matmul":
        (m, k), n = a[::-1] if lhs_t else a, b[0] if rhs_t else b[1]
    elif kind in ("linalg.batch_matmul", "linalg.generic"):
        (m, k), n = a[-2:], b[-2] if rhs_t else b[-1]
    elif kind == "linalg.vecmat":
        (k,), (_, n) = a, b
        m = 1
    else:
        return None
    masked = None in (m, n, k)
    p = None
    if not masked:
        p = plan(m, n, k, itemsize) if kind != "linalg.vecmat" else plan(32, n, k, itemsize)
        if p is None:
            if 2 * m * n * k < MIN_FLOPS or not forms_enabled():
                return None                 # small: the plain loops, no tile bookkeeping
            masked = True
    if masked:
        if not forms_enabled():
            return None
        p = plan_masked(m, n, k, itemsize)
    (mc, nc, kc), (mr, nr) = p
    peel = None
    if masked:
        # a loop needs peeling where its tiles may be partial and it may also have full ones
        peel = [m is None or (m % mc != 0 or m % mr != 0) and m > mr,
                n is None or (n % nc != 0 or n % nr != 0) and n > nr]
    if kind == "linalg.vecmat":
        # One row: no reuse of B to block for; B streams from memory once. Blocks of VECMAT_ROWS rows
        # of B, each swept across all its columns, NR = 4 vectors of the result held in registers
        # over the block's rows (OpenBLAS's dgemv_n does the same): the block's rows are as many
        # sequential streams the prefetchers follow. Sweeping a column strip down all k rows
        # instead strode a page per row: 1024^2 f64 415 -> 170 us (numpy 160-180 us).
        lanes = _vector_bytes() // itemsize
        nr = next((c for c in (4 * lanes, 2 * lanes, lanes) if n is not None and n % c == 0), None)
        if nr is None:
            nr = 4 * lanes if n is None else min(4 * lanes, -(-n // lanes) * lanes)
            peel = [False, n is None or n > nr]
        elif peel is not None:   # (NR divides n: no partial tile to peel, whatever the plan's NR)
            peel = [False, False]
        return kind, [1, 0, VECMAT_ROWS], [1, nr], peel and peel[1:], 0
    return kind, [mc, nc, kc], [mr, nr], peel, batch


def _contract_payloads(module: ir.Module) -> None:
    """`contract` on each marked product's multiply and add: where a masked tile's unit k
    reduction folds to a vector multiply and add (not vector.contract), LLVM still fuses them into
    FMAs, as the outer-product lowering does (the same numerics: one rounding per step)."""
    found = ops_where(module.operation, lambda op: op.name in ("arith.mulf", "arith.addf")
                      and op.parent is not None and MARK in op.parent.attributes)
    flags = ir.Attribute.parse("#arith.fastmath<contract>")
    for op in found:
        op.attributes["fastmath"] = flags


_SPLIT = "sprue.split_columns"


def _split_columns(module: ir.Module, found: list[ir.Operation]) -> list[ir.Operation]:
    """Products packed unguarded with a run-time N (attention's `t x t` scores) first become a loop
    over whole blocks of NC columns (static: nothing padded, their part of C written in place) and a
    last, partial block (B and C padded to whole panels): tile_using_for and loop.peel, as BLIS
    splits off the edge of N. Packed whole, C was padded and copied in and out (attention's `q @ k^T`,
    8 x 256 x 64: a third of its time). Returns the products again (the split ones in two parts)."""
    parts, ident = [], _FIRST_IDENT
    i64 = ir.IntegerType.get_signless(64, module.context)
    for op in found:
        if op.name not in ("linalg.matmul", "linalg.batch_matmul") or _sizes(op.operands[2].type)[-1] is not None \
                or _eligible(op) is None:
            continue
        packed = _packed_plan(op)
        if packed is None or packed[3] is not False:     # run-time sizes, packed unguarded
            continue
        fold_rhs_transpose(op)          # packed either way: both parts read B as it is
        nc = packed[0][1]
        sizes = [0, 0, nc, 0] if op.name == "linalg.batch_matmul" else [0, nc, 0]
        op.attributes[_SPLIT] = ir.IntegerAttr.get(i64, ident)
        parts.append(f"""
    %s{ident} = transform.structured.match ops{{["{op.name}"]}} attributes{{{_SPLIT} = {ident} : i64}} in %root : ({ANY}) -> {ANY}
    %t{ident}, %tl{ident} = transform.structured.tile_using_for %s{ident} tile_sizes {sizes} : ({ANY}) -> ({ANY}, {ANY})
{peel_script(f"%tl{ident}", f"pc{ident}")}""")
        ident += 1
    if not parts:
        return found
    kinds = {op.name for op in found}    # (the split ones are gone after the script)
    apply_scripts(module, parts)
    # the whole blocks' sizes fold to constants, and their products take the static types
    pass_manager("canonicalize", module.context).run(module.operation)
    found = ops_where(module.operation, lambda op: op.name in kinds)
    for op in found:
        if _SPLIT in op.attributes:
            del op.attributes[_SPLIT]
    return found


# Each product's script names its handles by a prefix and the product's number (%x1<n>, %x<n>):
# numbers of one width keep two names from meeting (%x1 with 1 and %x with 11 were both %x11).
_FIRST_IDENT = 100000


def _product_sizes(op: ir.Operation) -> tuple[int | None, int | None, int | None]:
    """(m, n, k) of a product (of one batch element), None where known at run time only
    (matmul_scripts.parallel's work)."""
    a, c = _sizes(op.operands[0].type), _sizes(op.operands[2].type)
    if len(c) < 2:    # a vector-matrix product
        return 1, c[-1], a[-1]
    lhs_t = op.name in PLAIN_MAPS and bool((transposed(op) or (False, False))[0])
    return c[-2], c[-1], (a[0] if lhs_t and op.name == "linalg.matmul" else a[-1])


def tile_matmuls(module: ir.Module) -> None:
    """Rewrites every eligible contraction of the module (see the module doc)."""
    kinds = {"linalg.matmul", "linalg.batch_matmul", "linalg.vecmat", "linalg.matvec", "linalg.generic"} \
        if forms_enabled() else {"linalg.matmul"}
    found = ops_where(module.operation, lambda op: op.name in kinds)
    if forms_enabled():
        found = [collapse_reductions(collapse_contraction_dims(drop_unit_loops(op))) for op in found]
        for op in found:
            order_product_loops(op)
        found = [name_product(collapse_contraction_dims(split_fused_operands(op))) for op in found]
        fold_lhs_transposes(found)
        if pack_dynamic() == "":   # (not while measuring the inline kernel's variants)
            found = route_products(module, found, PACK_NC)     # calls of the prebuilt library
        # (a split collects the products again: not those that call the library)
        found = [op for op in _split_columns(module, found) if ROUTINE_ATTR not in op.attributes]
    plans, parts, matvecs = _FIRST_IDENT, [], set()
    i64 = ir.IntegerType.get_signless(64, module.context)
    for op in found:
        if op.name == "linalg.matvec":
            if _float_itemsize(op) is None:
                continue
            parts.append(script_matvec(plans))
            matvecs.add(plans)
        else:
            p = _eligible(op)
            if p is None:
                continue
            packed = _packed_plan(op)
            plain = None
            if packed is not None and packed[3]:    # run-time sizes: packed where they pay
                op, plain = _guard_packing(op, packed[1][1])
                parts.append(script_one(plans, *p, _product_sizes(op)))
                plain.attributes[MARK] = ir.IntegerAttr.get(i64, plans)
                plans += 1
            if packed is not None:
                copy = fold_rhs_transpose(op)
                if copy is not None and plain is not None and \
                        all(getattr(use.owner, "operation", use.owner) == plain.operation for use in copy.results[0].uses):
                    copy.move_before(plain)     # B's transposed copy only where the unpacked branch runs
                parts.append(script_packed(plans, *packed[:3], transposed(op)[1], op.name == "linalg.batch_matmul",
                                           "f32" if _float_itemsize(op) == 4 else "f64", _product_sizes(op)))
            else:
                parts.append(script_one(plans, *p, _product_sizes(op)))
        op.attributes[MARK] = ir.IntegerAttr.get(i64, plans)
        plans += 1
    if plans == _FIRST_IDENT:
        return
    _contract_payloads(module)
    apply_scripts(module, parts)
    lower_block_transposes(module)
    marked: list[ir.Operation] = []
    payload: list[ir.Operation] = []

    def unmark(op: ir.Operation) -> ir.WalkResult:
        if MARK in op.attributes:
            marked.append(op)
        elif op.name in ("arith.addf", "arith.mulf") and op.parent is not None and MARK in op.parent.attributes \
                and ir.IntegerAttr(op.parent.attributes[MARK]).value in matvecs:
            payload.append(op)
        return ir.WalkResult.ADVANCE
    module.operation.walk(unmark)
    _drop_unpack_copies(module)
    fold_whole_slices(module)    # before the CSE below merges two products' slices of one fill
    if payload:
        flags = ir.Attribute.parse(_FLAGS)
        for op in payload:
            op.attributes["fastmath"] = flags
    for op in marked:
        del op.attributes[MARK]
    pass_manager("canonicalize,cse", module.context).run(module.operation)


__all__ = ["forms_enabled", "plan", "tile_matmuls"]
