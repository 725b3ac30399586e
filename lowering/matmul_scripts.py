"""The transform-dialect scripts that tile, pack and vectorize one matrix product (matmul.py).

Each product's script is a string of transform ops naming its handles by a prefix and the
product's number; tile_matmuls joins them into one named sequence (wrap_scripts) and runs it. The
outermost loop of each tiled product that runs over a parallel dimension of it (a batch element,
A's row blocks, B's column blocks) is annotated PARALLEL_LOOP: its trips write disjoint blocks of
C, so parallel.py may run them on the pool. A vector-matrix product's outer loop runs over k: its
trips add into all of C, and it is annotated PARALLEL_SUM (parallel.py gives each chunk of trips a
C of its own and adds them up in order). The annotation's value is one trip's floating-point work.
"""
from __future__ import annotations

import math

from torch_mlir import ir
from torch_mlir._mlir_libs import _mlirTransformInterpreter as transform_interpreter  # (not dialects.transform: below)

MARK = "sprue.matmul"
UNPACK_COPY = "sprue.unpack_copy"
# (parallel.py reads them: the loop's trips are independent / add into one buffer)
PARALLEL_LOOP = "sprue.parallel"
PARALLEL_SUM = "sprue.parallel_sum"
# The most elements of a C whose k loop is split (PARALLEL_SUM): each chunk fills and adds one.
SMALL_C = 4096
# A batch element's rows where they are known at run time only, for the work of a trip of the
# batch loop (a run-time n or k counts as a whole cache block): attention's heads with a run-time
# length then split by batch element, not by register rows (4 x 8 heads x 128 x 64, two threads:
# 3.3 -> 2.2-2.5 ms, static 2.3-2.5)
PACK_ROWS_GUESS = 64

ANY = "!transform.any_op"


def parallel(loop: str, *factors: int | None, mark: str = PARALLEL_LOOP) -> str:
    """Marks `loop` PARALLEL_LOOP (or `mark`: module doc), with the floating-point operations of one
    trip (the product of `factors`), unless a factor is known at run time only."""
    if None in factors:
        return ""
    work = math.prod(factors)
    param = "%w" + loop[1:].replace("#", "_")
    return f"""    {param} = transform.param.constant {work} : i64 -> !transform.param<i64>
    transform.annotate {loop} "{mark}" = {param} : {ANY}, !transform.param<i64>
"""


def tile_levels(kind: str, cache: list[int], reg: list[int], batch: int) -> list[list[int]]:
    """The three tile_using_for levels (cache, registers, k by 1) in the op's loop order."""
    (mc, nc, kc), (mr, nr) = cache, reg
    if batch:                                # (b..., m, n, k): one batch element at a time
        return [[1] * batch + [mc, nc, kc], [mr, nr, 0], [0, 0, 1]]
    if kind == "linalg.vecmat":              # (n, k): blocks of kc rows of B, each swept whole
        return [[0, kc], [nr, 0], [0, 1]]
    return [[mc, nc, kc], [mr, nr, 0], [0, 0, 1]]


def tile_line(handle: str, sizes: list[int], out: str) -> tuple[str, list[str]]:
    """A tile_using_for line and the handles of its loops, outermost first."""
    loops = sum(1 for s in sizes if s)
    types = ", ".join([ANY] * (loops + 1))
    names = f"%{out}, %{out}l" + (f":{loops}" if loops > 1 else "")
    handles = [f"%{out}l#{i}" for i in range(loops)] if loops > 1 else [f"%{out}l"]
    return (f"    {names} = transform.structured.tile_using_for {handle} tile_sizes {sizes} : ({ANY}) -> ({types})\n",
            handles)


FOR_LOOP = '!transform.op<"scf.for">'


def peel_script(loop: str, out: str) -> str:
    """The loop's full iterations, then its partial last one (transform.loop.peel): in the full
    ones the tile size folds to a constant, so their masks fold away."""
    return f"""    %{out}c = transform.cast {loop} : {ANY} to {FOR_LOOP}
    %{out}, %{out}r = transform.loop.peel %{out}c : ({FOR_LOOP}) -> ({ANY}, {ANY})
"""


def script_packed(ident: int, cache: list[int], reg: list[int], last_rows: int, rhs_t: bool, batch: bool,
                   elem: str, mnk: tuple[int, int, int]) -> str:
    """Data tiling of B (BLIS's packing, IREE's CPU data tiling; transform.structured.pack):
    B (K, N) is seen as NR-column panels (N/NR, K, NR), zero-padded to whole panels, and the
    product runs on them, so its k loop streams a contiguous panel (an unpacked B's rows cost a
    TLB miss and a cold cache line per k step once they leave L2). BLIS's loop order: per
    KC x NC block of B, packed into one block-sized buffer inside the loops (the packing transpose
    fused into the block loop; fold_tensor_empty gives it a block-sized destination, which
    buffer-loop-hoisting allocates once), every row of A streams past the block. The result's
    packed layout (M, N/NR, NR) is its own: the unpack is a collapse_shape (its copy dropped) --
    plus a slice where B was padded."""
    (_, nc, kc), (mr, nr) = cache, reg
    m, n, k = mnk
    T = "!transform.op"
    # a small C and a long k (k-means' one-hot product, 16 x 20000 @ 20000 x 8): B's row blocks,
    # each chunk of them adding into a C of its own (PARALLEL_SUM; C's copies cost little)
    small_c = m is not None and n is not None and m * n <= SMALL_C
    sum_k = parallel(f"%al{ident}#1", 2, m, n and min(n, nc), kc, mark=PARALLEL_SUM) if small_c else ""
    # A's register rows (a peeled loop's full part): the loop to split where B's blocks are few
    # (a run-time n or k counts as a whole block: at most nc / n too much, and the guard on the
    # run-time number of row tiles, parallel.py, still keeps small products serial)
    row_work = (2, mr, min(n, nc) if n else nc, min(k, kc) if k else kc)
    rows = parallel(f"%bl{ident}#0", *row_work)
    # rows no MR divides (`last_rows` left over): the register row loop is peeled, its last tile
    # (fewer rows, a static count) a second, smaller kernel
    peel, scope = "", f"%bl{ident}#0"
    tile_k = f"""    %r{ident} = transform.structured.match ops{{["linalg.generic"]}} in {scope} : ({ANY}) -> {ANY}
    %c{ident}, %cl{ident} = transform.structured.tile_using_for %r{ident} tile_sizes [0, 1, 0] : ({ANY}) -> ({ANY}, {ANY})
"""
    sizes = ""
    if last_rows == -1:
        # run-time rows: the peeled last tile (fewer than MR rows, a run-time count) is padded to MR
        # rows (transform.structured.pad: its rows of A and C copied into zeroed MR-row tiles, C's
        # copied back), BLIS's edge handling and IREE's, so that every tile has static sizes and no
        # masks (a masked last tile's C was loaded and stored with vmaskmovpd on every k step:
        # 256 x 256 @ 256 x 1024 22.5 ms). Before, it ran one row at a time, a pass over the packed
        # block per row (one core, interleaved, ? x 256 @ 256 x 256 f64, static / rows one at a
        # time / padded: 64 rows 0.25 / 0.42 / 0.27 ms, 128 0.45 / 0.53 / 0.46, 130 0.44 / 0.62 /
        # 0.46, 256 1.70 / 1.86 / 1.73)
        peel = peel_script(f"%bl{ident}#0", f"pr{ident}") + parallel(f"%pr{ident}", *row_work)
        rows = ""
        scope = f"%al{ident}#1"
        tile_k = f"""    %rs{ident} = transform.structured.match ops{{["linalg.generic"]}} in {scope} : ({ANY}) -> {ANY}
    %rm{ident}, %rr{ident} = transform.split_handle %rs{ident} : ({ANY}) -> ({ANY}, {ANY})
    %r1{ident}, %rp{ident}, %rc{ident} = transform.structured.pad %rr{ident} {{padding_values = [0.0 : {elem}, 0.0 : {elem}, 0.0 : {elem}], padding_dimensions = [0], copy_back_op = "linalg.copy"}} : ({ANY}) -> ({ANY}, {ANY}, {ANY})
    %cm{ident}, %clm{ident} = transform.structured.tile_using_for %rm{ident} tile_sizes [0, 1, 0] : ({ANY}) -> ({ANY}, {ANY})
    %cr{ident}, %clr{ident} = transform.structured.tile_using_for %r1{ident} tile_sizes [0, 1, 0] : ({ANY}) -> ({ANY}, {ANY})
    %c{ident} = transform.merge_handles %cm{ident}, %cr{ident} : {ANY}
    %cl{ident} = transform.merge_handles %clm{ident}, %clr{ident} : {ANY}
"""
    elif last_rows:
        # the last tile's one-trip loop promoted and its sizes folded to constants (only inside
        # the block loop: canonicalizing it too could fold away a one-trip block loop a handle holds)
        rows = ""
        peel = peel_script(f"%bl{ident}#0", f"pr{ident}") + parallel(f"%pr{ident}", *row_work) + f"""    transform.loop.promote_if_one_iteration %pr{ident}r : {ANY}
    transform.apply_patterns to %al{ident}#1 {{
      transform.apply_patterns.canonicalization
    }} : {ANY}
"""
        scope = f"%al{ident}#1"
        # the main tiles' generic comes first in the block, the last tile's after it; a last tile of
        # one row loses that unit dim too: (k, NR)
        tile_k = f"""    %rs{ident} = transform.structured.match ops{{["linalg.generic"]}} in {scope} : ({ANY}) -> {ANY}
    %rm{ident}, %rr{ident} = transform.split_handle %rs{ident} : ({ANY}) -> ({ANY}, {ANY})
    %cm{ident}, %clm{ident} = transform.structured.tile_using_for %rm{ident} tile_sizes [0, 1, 0] : ({ANY}) -> ({ANY}, {ANY})
    %cr{ident}, %clr{ident} = transform.structured.tile_using_for %rr{ident} tile_sizes {[1, 0] if last_rows == 1 else [0, 1, 0]} : ({ANY}) -> ({ANY}, {ANY})
    %c{ident} = transform.merge_handles %cm{ident}, %cr{ident} : {ANY}
    %cl{ident} = transform.merge_handles %clm{ident}, %clr{ident} : {ANY}
"""
    # a batch_matmul: one batch element at a time, its unit batch dim folded away (as script_one
    # does), leaving a matmul-shaped generic to pack
    kind, head, target = "linalg.matmul", "", f"%mm{ident}"
    if batch:
        kind, target = "linalg.batch_matmul", f"%mg{ident}"
        head = f"""    %bt{ident}, %btl{ident} = transform.structured.tile_using_for %mm{ident} tile_sizes [1, 0, 0, 0] : ({ANY}) -> ({ANY}, {ANY})
{parallel(f"%btl{ident}", 2, m or PACK_ROWS_GUESS, n or nc, k or kc)}    %bg{ident} = transform.structured.generalize %bt{ident} : ({ANY}) -> {ANY}
    transform.apply_patterns to %btl{ident} {{
      transform.apply_patterns.linalg.fold_unit_extent_dims_via_slices
    }} : {ANY}
    %mg{ident} = transform.structured.match ops{{["linalg.generic"]}} in %btl{ident} : ({ANY}) -> {ANY}
"""
    # B's panels (N/NR, K, NR): a transposed B (N, K) packs into that order as it is (a batch
    # element's B too: the unit batch dim folded, the generic reads B (N, K) through its map)
    order = f"""    %pk{ident} = transform.get_producer_of_operand %p{ident}[1] : ({ANY}) -> ({ANY})
    %g{ident} = transform.cast %p{ident} : {ANY} to {ANY}
""" if rhs_t else f"""    %pb{ident} = transform.get_producer_of_operand %p{ident}[1] : ({ANY}) -> ({ANY})
    %g{ident}, %pk{ident}, %up{ident} = transform.structured.pack_transpose %pb{ident} with_compute_op(%p{ident}) outer_perm = [1, 0] : ({ANY}, {ANY}) -> ({ANY}, {ANY}, {ANY})
"""
    # loops of the packed op: (m, n / NR, k, NR); the register tile's unit loop is folded away,
    # leaving a (MR, NR) product over k: (MR, k, NR)
    return f"""
    %mm{ident} = transform.structured.match ops{{["{kind}"]}} attributes{{{MARK} = {ident} : i64}} in %root : ({ANY}) -> {ANY}
    %f{ident} = transform.get_parent_op %mm{ident} {{op_name = "func.func"}} : ({ANY}) -> {ANY}
{head}    %p{ident} = transform.structured.pack {target} packed_sizes = [0, {nr}, 0] : ({ANY}) -> ({ANY})
{order}    %pkb{ident} = transform.cast %pk{ident} : {ANY} to {T}<"linalg.pack">
    %x1{ident}, %x2{ident}, %x3{ident} = transform.structured.lower_pack %pkb{ident} : ({T}<"linalg.pack">) -> ({T}<"tensor.pad">, {T}<"tensor.expand_shape">, {T}<"linalg.transpose">)
    %packs{ident} = transform.structured.match ops{{["linalg.pack"]}} in %f{ident} : ({ANY}) -> {T}<"linalg.pack">
    %z1{ident}, %z2{ident}, %z3{ident} = transform.structured.lower_pack %packs{ident} : ({T}<"linalg.pack">) -> ({T}<"tensor.pad">, {T}<"tensor.expand_shape">, {T}<"linalg.transpose">)
    %ups{ident} = transform.structured.match ops{{["linalg.unpack"]}} in %f{ident} : ({ANY}) -> {T}<"linalg.unpack">
    %y1{ident}, %y2{ident}, %y3{ident}, %y4{ident}, %y5{ident} = transform.structured.lower_unpack %ups{ident} : ({T}<"linalg.unpack">) -> ({T}<"tensor.empty">, {T}<"linalg.transpose">, {T}<"tensor.collapse_shape">, {T}<"tensor.extract_slice">, {T}<"linalg.copy">)
    transform.annotate %y5{ident} "{UNPACK_COPY}" : {T}<"linalg.copy">
    %a{ident}, %al{ident}:2 = transform.structured.tile_using_for %g{ident} tile_sizes [0, {nc // nr}, {kc}, 0] : ({ANY}) -> ({ANY}, {ANY}, {ANY})
{parallel(f"%al{ident}#0", 2, m, n and min(n, nc), k)}{sum_k}    %fz{ident}, %fl{ident} = transform.structured.fuse_into_containing_op %x3{ident} into %al{ident}#1 : ({T}<"linalg.transpose">, {ANY}) -> ({ANY}, {ANY})
    transform.apply_patterns to %f{ident} {{
      transform.apply_patterns.tensor.fold_tensor_empty
    }} : {ANY}
{transpose_blocks(ident) if rhs_t else ""}    %b{ident}, %bl{ident}:2 = transform.structured.tile_using_for %a{ident} tile_sizes [{mr}, 1, 0, 0] : ({ANY}) -> ({ANY}, {ANY}, {ANY})
{rows}{peel}    transform.apply_patterns to {scope} {{
      transform.apply_patterns.linalg.fold_unit_extent_dims_via_slices
    }} : {ANY}
{tile_k}""" + VECTORIZE.format(ident=ident, sizes=sizes, loop=f"%cl{ident}")


# The side of the square blocks a transposing copy moves through registers (transpose_blocks.py's
# shuffle network is for this side).
TRANSPOSE_BLOCK = 8


def transpose_blocks(ident: int) -> str:
    """The packing copy of a transposed B (B (N, K) into panels (K, NR)), fused into the block loop
    (%fz): in TRANSPOSE_BLOCK x TRANSPOSE_BLOCK blocks, each read as rows of B, transposed in
    registers (vector.transpose, as transpose_blocks.py's shuffles) and written as rows of the
    panel. Copied element by element, LLVM vectorized the panel's rows and gathered their lanes
    from B a row apart."""
    t = TRANSPOSE_BLOCK
    # (the block's sizes, min(t, K - k), fold to t where t divides the block's static extent
    # (scf's for-loop canonicalization): those blocks' reads and writes are unmasked)
    return f"""    %tb{ident}, %tbl{ident}:3 = transform.structured.tile_using_for %fz{ident} tile_sizes [1, {t}, {t}] : ({ANY}) -> ({ANY}, {ANY}, {ANY}, {ANY})
    transform.apply_patterns to %al{ident}#1 {{
      transform.apply_patterns.scf.for_loop_canonicalization
      transform.apply_patterns.canonicalization
    }} : {ANY}
    transform.structured.vectorize %tb{ident} vector_sizes [1, {t}, {t}] : {ANY}
"""


VECTORIZE = """    transform.structured.vectorize %c{ident}{sizes} : !transform.any_op
    transform.apply_patterns to %f{ident} {{
      transform.apply_patterns.vector.lower_masked_transfers
      transform.apply_patterns.vector.reduction_to_contract
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
      transform.apply_patterns.canonicalization
    }} : !transform.any_op
    transform.apply_cse to %f{ident} : !transform.any_op
    transform.loop.hoist_loop_invariant_subsets {loop} : !transform.any_op
    transform.apply_patterns to %f{ident} {{
      transform.apply_patterns.vector.lower_contraction lowering_strategy = "outerproduct"
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.vector.lower_transfer max_transfer_rank = 1
      transform.apply_patterns.vector.lower_outerproduct
      transform.apply_patterns.canonicalization
    }} : !transform.any_op"""


def script_one(ident: int, kind: str, cache: list[int], reg: list[int], peel: list[bool] | None, batch: int,
               mnk: tuple[int, int, int]) -> str:
    """`peel`: None when every tile is full (static sizes the tiles divide); else, per register
    loop (m, n; n for vecmat), whether its last iteration may be partial: the loop is peeled and
    the tiles vectorized with masks (`vector_sizes`), which fold away in the full tiles."""
    t1, t2, t3 = tile_levels(kind, cache, reg, batch)
    a, outer = tile_line(f"%mm{ident}", t1, f"a{ident}")
    m, n, k = mnk
    if kind == "linalg.vecmat":   # (its outer loop runs over k)
        a += parallel(outer[0], 2, n, cache[2], mark=PARALLEL_SUM)
    else:
        a += parallel(outer[0], 2, m if batch else m and min(m, cache[0]), n, k)
        if not batch and len(outer) == 3 and m is not None and n is not None and m * n <= SMALL_C:
            a += parallel(outer[2], 2, min(m, cache[0]), min(n, cache[1]), cache[2], mark=PARALLEL_SUM)
    match = kind
    if batch:
        # The unit batch dim of a tile would reach the vectorizer as a leading 1 that keeps the
        # broadcasts from folding into vector.contract (and the contraction from becoming outer
        # products): dropped at the tensor level (linalg's FoldUnitExtentDims, on the generalized
        # op), the batch tile is a plain 2-D product (a linalg.generic, re-matched in its loop).
        a += f"""    %g{ident} = transform.structured.generalize %a{ident} : ({ANY}) -> {ANY}
    transform.apply_patterns to {outer[0]} {{
      transform.apply_patterns.linalg.fold_unit_extent_dims_via_slices
    }} : {ANY}
    %r{ident} = transform.structured.match ops{{["linalg.generic"]}} in {outer[0]} : ({ANY}) -> {ANY}
"""
        tiled, match = f"%r{ident}", "linalg.generic"
    else:
        tiled = f"%a{ident}"
    b, loops = tile_line(tiled, t2, f"b{ident}")
    sizes = ""
    if peel is not None:
        sizes = f" vector_sizes {[s for s in t2 if s] + [1]}"
        if len(loops) == 2 and peel[0]:
            b += peel_script(loops[0], f"pm{ident}")
            b += f"""    %x{ident} = transform.structured.match ops{{["{match}"]}} in %pm{ident} : ({ANY}) -> {ANY}
    %nl{ident} = transform.get_parent_op %x{ident} {{op_name = "scf.for"}} : ({ANY}) -> {ANY}
"""
            nloop = f"%nl{ident}"
        else:
            nloop = loops[-1]
        if peel[-1]:
            b += peel_script(nloop, f"pn{ident}")
        b += f"""    %all{ident} = transform.structured.match ops{{["{match}"]}} in {outer[0]} : ({ANY}) -> {ANY}
"""
        tiled_k = f"%all{ident}"
    else:
        tiled_k = f"%b{ident}"
    c, inner = tile_line(tiled_k, t3, f"c{ident}")
    return f"""
    %mm{ident} = transform.structured.match ops{{["{kind}"]}} attributes{{{MARK} = {ident} : i64}} in %root : ({ANY}) -> {ANY}
    %f{ident} = transform.get_parent_op %mm{ident} {{op_name = "func.func"}} : ({ANY}) -> {ANY}
{a}{b}{c}""" + VECTORIZE.format(ident=ident, sizes=sizes, loop=inner[0])


def wrap_scripts(parts: list[str]) -> str:
    return f"""module attributes {{transform.with_named_sequence}} {{
  transform.named_sequence @__transform_main(%root: {ANY} {{transform.readonly}}) {{{''.join(parts)}
    transform.yield
  }}
}}"""


def apply_scripts(module: ir.Module, parts: list[str]) -> None:
    """Runs the script parts (transform ops on handles of their own) as one named sequence
    (wrap_scripts) on `module`, through the interpreter's C extension: the scripts are text, and
    torch_mlir.dialects.transform's Python package would also run its generated op builders (~5 ms
    of the compiler's import)."""
    script = ir.Module.parse(wrap_scripts(parts), module.context)
    entry = next(op for op in script.body.operations if "sym_name" in op.operation.attributes)
    transform_interpreter.apply_named_sequence(module.operation, entry.operation, script.operation)


def script_matvec(ident: int) -> str:
    # generalized, so that its payload's adds and muls can carry fast-math flags (module doc)
    return f"""
    %mm{ident} = transform.structured.match ops{{["linalg.matvec"]}} attributes{{{MARK} = {ident} : i64}} in %root : ({ANY}) -> {ANY}
    %g{ident} = transform.structured.generalize %mm{ident} : ({ANY}) -> {ANY}"""
