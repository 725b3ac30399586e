"""8 x 8 transposes in registers as three rounds of two-source shuffles.

matmul_scripts.transpose_blocks packs a transposed B through 8 x 8 blocks: each read as eight rows
of B, transposed (vector.transpose), written as eight rows of a panel. MLIR's own lowerings of
vector.transpose hand LLVM either one shuffle of a flattened <64 x double> (shuffle_1d) or 64
element moves (eltwise); LLVM makes good code of both, but its loop strength reduction then took
31 ms instead of 6 on attention's two products (first call 0.35 -> 0.43 s). Here each transpose is
the textbook network of 24 shuffles of two row vectors (unpack pairs of rows, then pairs of pairs
at two and four lanes; Intel's optimization manual's 8 x 8 transpose, BLIS's packing kernels):
each one x86 instruction (vunpcklpd/vunpckhpd, vshuff64x2/vpermt2pd), every value a plain vector.
Every other transposing copy with static sizes takes the same blocks (block_transposing_copies:
`x.T` as an array, f64, one core: 2048^2 24.7 -> 6.6 ms, 512^2 0.43 -> 0.16 ms, numpy's copy 36.5
and 0.50 ms).
The loop around a block stays rolled: LLVM unrolled it (four blocks of a 32-column panel), and its
loop strength reduction then weighed 64 addresses at once (that 25 ms more).
"""
from __future__ import annotations

from torch_mlir import ir

from sprue.lowering.loop_hints import keep_rolled
from sprue.lowering.matmul_operands import is_transpose
from sprue.lowering.matmul_scripts import ANY, TRANSPOSE_BLOCK, apply_scripts, tile_line
from sprue.lowering.mlir_util import ops_where

SIDE = TRANSPOSE_BLOCK
# Round r pairs vectors 2^r apart, at a granularity of 2^r lanes: (lo mask, hi mask) over the
# 16 lanes of the two sources.
_ROUNDS = [
    ([0, 8, 2, 10, 4, 12, 6, 14], [1, 9, 3, 11, 5, 13, 7, 15]),
    ([0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15]),
    ([0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15]),
]


def _is_block_transpose(op: ir.Operation) -> bool:
    """A vector.transpose of SIDE x SIDE (after leading unit dims) swapping its last two dims."""
    t = ir.VectorType(op.operands[0].type)
    shape = list(t.shape)
    perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
    rank = len(shape)
    return rank >= 2 and shape[-2:] == [SIDE, SIDE] and all(s == 1 for s in shape[:-2]) \
        and perm == list(range(rank - 2)) + [rank - 1, rank - 2]


def _create(name: str, result: ir.Type, operands: list[ir.Value], **attrs: ir.Attribute) -> ir.Value:
    return ir.Operation.create(name, results=[result], operands=operands, attributes=attrs).results[0]


def _shuffle(a: ir.Value, b: ir.Value, mask: list[int]) -> ir.Value:
    return _create("vector.shuffle", a.type, [a, b], mask=ir.DenseI64ArrayAttr.get(mask))


def _network(rows: list[ir.Value]) -> list[ir.Value]:
    """The columns of the SIDE x SIDE matrix whose rows are `rows`."""
    v = list(rows)
    for r, (lo, hi) in enumerate(_ROUNDS):
        step = 1 << r
        out = [None] * SIDE
        for i in range(SIDE):
            if i & step:
                continue
            # pair i with i + step: (lo, hi) land at i and i + step
            out[i], out[i + step] = _shuffle(v[i], v[i + step], lo), _shuffle(v[i], v[i + step], hi)
        v = out
    return v


def _rewrite(op: ir.Operation) -> None:
    source = op.operands[0]
    t = ir.VectorType(source.type)
    square = ir.VectorType.get([SIDE, SIDE], t.element_type)
    row = ir.VectorType.get([SIDE], t.element_type)
    with ir.InsertionPoint(op), op.location:
        matrix = source if t.rank == 2 else _create("vector.shape_cast", square, [source])
        rows = [_create("vector.extract", row, [matrix], static_position=ir.DenseI64ArrayAttr.get([i]))
                for i in range(SIDE)]
        result = _create("ub.poison", square, [])
        for i, column in enumerate(_network(rows)):
            result = _create("vector.insert", square, [column, result], static_position=ir.DenseI64ArrayAttr.get([i]))
        if t.rank != 2:
            result = _create("vector.shape_cast", t, [result])
    op.results[0].replace_all_uses_with(result)
    op.erase()


def lower_block_transposes(module: ir.Module) -> None:
    """Every SIDE x SIDE vector.transpose of the module as the shuffle network (module doc)."""
    for op in ops_where(module.operation, lambda op: op.name == "vector.transpose"):
        if _is_block_transpose(op):
            loop = op.parent
            if loop is not None and loop.name == "scf.for":
                keep_rolled(loop)
            _rewrite(op)


# Copies of fewer elements stay LLVM's (a block loop costs compile time; a small copy, little).
MIN_COPY = 64 * 64
_MARK = "sprue.block_transpose"


def _blockable(op: ir.Operation) -> bool:
    """A transposing copy (of a matrix, or of each matrix of a batch) with static sizes whose last
    two dims SIDE divides, big enough (MIN_COPY)."""
    batch = len(op.operands) == 2 and ir.RankedTensorType(op.operands[1].type).rank == 3
    if not is_transpose(op, batch):
        return False
    t = ir.RankedTensorType(op.operands[1].type)
    shape = list(t.shape)
    return t.has_static_shape and shape[-1] % SIDE == 0 and shape[-2] % SIDE == 0 \
        and shape[-1] * shape[-2] >= MIN_COPY


def block_transposing_copies(module: ir.Module) -> None:
    """Every transposing copy (`x.T` kept as an array, layouts.py's and matmul_unfuse.py's copies,
    an unpacked product's transposed operand) moves SIDE x SIDE blocks through registers: tiled
    (transform.structured.tile_using_for), vectorized (its read a transposed transfer, i.e. a
    vector.transpose) and the transposes lowered to the shuffle network (module doc). Copied element
    by element, LLVM vectorized the output rows and gathered their lanes a row apart."""
    found = [op for op in ops_where(module.operation, lambda o: o.name == "linalg.generic") if _blockable(op)]
    if not found:
        return
    i64 = ir.IntegerType.get_signless(64, module.context)
    parts = []
    for n, op in enumerate(found):
        op.attributes[_MARK] = ir.IntegerAttr.get(i64, n)
        sizes = [SIDE, SIDE] if ir.RankedTensorType(op.operands[1].type).rank == 2 else [1, SIDE, SIDE]
        tile, _ = tile_line(f"%t{n}", sizes, f"b{n}")
        parts.append(f"""
    %t{n} = transform.structured.match ops{{["linalg.generic"]}} attributes{{{_MARK} = {n} : i64}} in %root : ({ANY}) -> {ANY}
{tile}    transform.structured.vectorize %b{n} : {ANY}""")
    parts.append(f"""
    %fs = transform.structured.match ops{{["func.func"]}} in %root : ({ANY}) -> {ANY}
    transform.apply_patterns to %fs {{
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
      transform.apply_patterns.canonicalization
    }} : {ANY}""")
    apply_scripts(module, parts)
    lower_block_transposes(module)


__all__ = ["SIDE", "block_transposing_copies", "lower_block_transposes"]
