"""StableHLO text -> LLVM IR text, as named, inspectable stages.

    legalized   our Python rewrite of sort/scatter/while/if/case (legalize.py)
    linalg      StableHLO -> linalg/tensor/arith, signless, fused
    bufferized  tensors -> memrefs; every returned buffer is malloc'ed and
                owned by the caller, everything else is freed; loop carries
                are updated in place (inplace.py runs first)
    loops       linalg -> scf loops
    llvm        everything -> LLVM dialect, with `_mlir_ciface_*` C wrappers

`lower_to_llvm_ir` runs them in order and can hand the text after each stage
to a `dump` callback (backend.build_shared_library uses it for
keep_intermediate).  Any failure becomes a LoweringError naming the stage and
carrying MLIR's diagnostics.
"""

from __future__ import annotations

import threading
from typing import Callable

from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo

# The translation itself, not torch_mlir.dialects.llvm: that module also builds Python classes for
# every LLVM dialect op (~40 ms of a first compilation), none of which we use.
from torch_mlir._mlir_libs._mlirDialectsLLVM import translate_module_to_llvmir

from sprue.base.errors import CompileError, SprueError  # noqa: F401
from sprue.base.timing import step
from sprue.lowering import dialects
from sprue.lowering.accumulators import promote_accumulators
from sprue.lowering.approximations import expand_exp, expand_log, expand_tanh
from sprue.lowering.batch_fusion import fuse_batches
from sprue.lowering.chain_fusion import fuse_long_chains
from sprue.lowering.collapse import collapse_loops
from sprue.lowering.deallocation import free_fresh_buffers, free_whole_buffers
from sprue.lowering.deferred_scaling import defer_row_scaling
from sprue.lowering.entry_arguments import read_entry_arguments
from sprue.lowering.entry_results import store_entry_results
from sprue.lowering.fastmath import mark_reductions
from sprue.lowering.fusion import (
    accumulate_sums,
    duplicate_cheap_producers,
    merge_elementwise_chains,
    merge_reductions_with_producers,
    reuse_dying_inputs,
)
from sprue.lowering.fusion_siblings import merge_sibling_reductions
from sprue.lowering.fusion_sums import merge_accumulating_chains
from sprue.lowering.index_fusion import fuse_index_producers, narrow_index_compares
from sprue.lowering.inplace import split_shared_fills, tie_loop_outputs
from sprue.lowering.interchange import interchange_loops
from sprue.lowering.layouts import transpose_strided_reads
from sprue.lowering.legalize import legalize
from sprue.lowering.loop_facts import carried_dims, hoist_invariant_ops, trip_facts
from sprue.lowering.loop_hints import (
    apply_loop_annotations,
    keep_long_reductions_rolled,
    keep_nest_loops_rolled,
    keep_outer_loops_rolled,
)
from sprue.lowering.matmul import tile_matmuls
from sprue.lowering.matmul_library import call_routines
from sprue.lowering.mlir_util import LegalizeError, as_operation, pass_manager
from sprue.lowering.outline import outline_loop_nests, pass_bare_pointers, split_long_bodies
from sprue.lowering.pad_sums import concatenate_pad_sums, write_long_concatenates
from sprue.lowering.parallel import call_parallel_bodies, parallelize_loops
from sprue.lowering.parallel_scatter import parallelize_scatters
from sprue.lowering.partition import partition_functions, partition_stablehlo
from sprue.lowering.transpose_blocks import block_transposing_copies
from sprue.lowering.vector_math import call_libm

dialects.load()   # before any op is read: see sprue.lowering.dialects

Dump = Callable[[str, str], None]

# The stage "legalized" is the Python rewrite; it has no pass pipeline.
LEGALIZE_STAGE = "legalized"

STAGES: list[tuple[str, str]] = [
    ("linalg", ",".join([
        "func.func(stablehlo-legalize-to-linalg)",
        "stablehlo-convert-to-signless",
        "canonicalize", "cse",
        # then FINISH's accumulate_sums and LINALG_FUSION
    ])),
    ("bufferized", ",".join([
        # A value computed only to be inserted into a bigger tensor (a scan output row) is
        # computed in the destination's slice, not in a temporary that is then copied there.
        "eliminate-empty-tensors",
        # Identity layouts at function boundaries keep the C ABI simple:
        # every argument/result is a plain strided descriptor. So do the results of an scf.if
        # (a cond, the entry checks' guard around a kernel's body): with the default fully
        # dynamic layout, returning one cost a generic element-by-element copy (a cond returning
        # 10^5 f64 took 0.9 ms instead of 0.03 ms).
        "one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops "
        "function-boundary-type-conversion=identity-layout-map unknown-type-conversion=identity-layout-map}",
        # Temporaries of a loop body (a comparison's i1, a scalar product) are allocated once,
        # before the loop, instead of on every trip.
        "func.func(buffer-loop-hoisting)",
        # MLIR's buffer-deallocation-pipeline, its simplification after deallocation.py's
        # (FINISH: free_fresh_buffers, _finish_deallocation)
        "expand-realloc{emit-deallocs=false}", "canonicalize",
        "ownership-based-buffer-deallocation", "canonicalize",
    ])),
    ("loops", ",".join([
        "convert-linalg-to-loops",
        "canonicalize", "cse",
    ])),
    ("llvm", ",".join([
        # vector ops (from the vectorized matmul, matmul.py) -> loads/stores/FMAs on LLVM vectors
        "convert-vector-to-scf{full-unroll}",
        "convert-scf-to-cf",
        "expand-strided-metadata",
        "lower-affine",
        "arith-expand",
        "convert-vector-to-llvm",
        # (math: MATH_TO_LLVM, before, when any math op is left: _math_to_llvm)
        "convert-arith-to-llvm",
        # aligned_alloc, not malloc plus pointer arithmetic through ptrtoint/inttoptr: the
        # integer round trip hides from LLVM that a fresh buffer aliases nothing, so it could not
        # keep a reduction's accumulator in a register (nor vectorize loops writing the buffer).
        "finalize-memref-to-llvm{use-aligned-alloc}",
        # func, cf, index, ub (and anything else left) in one conversion: as four passes, each
        # walked the whole module, by then at its largest (a 300-layer training step: 0.3 of the
        # stage's 0.45 s; one pass, the same LLVM IR for it and for every realistic program)
        "convert-to-llvm",
        "reconcile-unrealized-casts",
        # the descriptors built only to be read back fold here (as in _fold_descriptors, below),
        # before the Python rewrites walk the module: a 300-layer training step's were a quarter
        # of its ~50,000 ops' walks (first call 0.97x)
        "canonicalize",
    ])),
]

# Elementwise fusion, after fusion.accumulate_sums has made sums of products accumulate in place
# (it matches the unfused adds).
# Then the size of an op's result is read as its operands' or init's (tensor.dim of a generic,
# of an expand_shape that the rewrites above made): run-time sizes fold back to the few tensor.dims
# they come from, so that ops over one `?` size have equal sizes, which the rewrites before
# bufferization (fusion_sums.py, fusion.py) need to merge them.
# Then fusion once more: with run-time sizes, a producer read by one consumer still had a
# tensor.dim reading its size on the first run, so it did not count as single-use (a convolution's
# transpose -> relu -> transpose back stayed three loops over memory with a run-time batch; conv2d
# with a run-time batch 1.36x JAX's time, as fast as static with this).
LINALG_FUSION = ("linalg-fuse-elementwise-ops,resolve-ranked-shaped-type-result-dims,canonicalize,cse,"
                 "linalg-fuse-elementwise-ops")

STAGE_NAMES: list[str] = [LEGALIZE_STAGE] + [name for name, _ in STAGES]

# Python rewrites run on the module just before a stage's passes, in order.
Rewrite = Callable[[ir.Module], None]
def _trip_facts(module: ir.Module) -> None:
    if trip_facts(module):
        run_stage(module, "bufferized", "canonicalize")   # the sizes they made constants: static types


_BEFORE_BUFFERIZATION: tuple[Rewrite, ...] = (
    _trip_facts,         # a loop's bound known positive inside it (loop_facts.py)
    partition_functions,  # big functions: parts of ~64 ops, shared by equal parts (partition.py)
    fuse_batches,        # chains over one batch (attention): a loop over its elements (batch_fusion.py)
    tie_loop_outputs,    # elementwise ops in loop bodies write into the carried buffers
    reuse_dying_inputs,  # ... and others into an input read for the last time (fusion.py)
    merge_elementwise_chains,   # a value read by several elementwise ops: one pass (fusion.py)
    merge_sibling_reductions,   # reductions over the same loops: one pass (fusion_siblings.py)
    mark_reductions,     # reductions may reassociate their accumulation (fastmath.py)
    tile_matmuls,        # blocked, vectorized matrix products (matmul.py)
    transpose_strided_reads,   # ... in the others, an operand read a row apart per vector lane: a transposed copy (layouts.py)
    block_transposing_copies,  # transposing copies through 8 x 8 blocks in registers (transpose_blocks.py)
    merge_accumulating_chains,  # the others' sums of products: one loop nest (fusion_sums.py)
    interchange_loops,   # the other generics: innermost loop contiguous (interchange.py)
    collapse_loops,      # ... and adjacent loops over one run of memory: one loop (collapse.py)
    split_shared_fills,  # a fill per product again, after the tiling's CSE merged them (inplace.py)
)
# The math ops call_libm leaves: LLVM's intrinsics where it has them, libm calls for the others.
# Only when there are any: each conversion walks the whole module, and the deep programs have
# none (their tanh and exp written out above): 4-5 ms of a 100-layer network's stage.
MATH_TO_LLVM = "convert-math-to-llvm,convert-math-to-libm"


def _math_to_llvm(module: ir.Module) -> None:
    if call_libm(module):
        run_stage(module, "llvm", MATH_TO_LLVM)


_BEFORE_LLVM: tuple[Rewrite, ...] = (
    promote_accumulators,     # reductions accumulate in registers inside loops (accumulators.py)
    keep_outer_loops_rolled,  # LLVM unrolls innermost loops only (loop_hints.py)
    outline_loop_nests,  # big functions: a function per loop nest, shared by equal nests (outline.py)
    split_long_bodies,   # ... and what is left of them, if long, in runs of ~128 ops (outline.py)
    keep_long_reductions_rolled,  # reductions over rows that would unroll past the registers (loop_hints.py)
    keep_nest_loops_rolled,  # the nests' long innermost loops stay rolled once vectorized (loop_hints.py)
    # the scalar rewrites after the nests are shared: each expands one copy of a repeated nest
    expand_exp,          # exp as arithmetic: no slow path for underflow (approximations.py)
    expand_tanh,         # tanh as arithmetic, faster than libmvec's (approximations.py)
    expand_log,          # log as arithmetic, in the argument's type (approximations.py)
    _math_to_llvm,       # expm1, log1p, ...: C calls that LLVM vectorizes with libmvec; the rest (below)
    pass_bare_pointers,  # the nests and the parts take static buffers as bare pointers (outline.py)
)


def _fuse_linalg(module: ir.Module) -> None:
    run_stage(module, "linalg", LINALG_FUSION)


# Rewrites that end a stage (before its dump).
_AFTER_LINALG: tuple[Rewrite, ...] = (
    accumulate_sums,     # dot(a, b) + y: the dot accumulates into y (fusion.py)
    duplicate_cheap_producers,  # x * scale read twice: each reader fuses its own copy
    merge_reductions_with_producers,   # softmax's exp and its row sum in one pass
    fuse_long_chains,    # chains of 64+ elementwise ops fused at once, not pair by pair (chain_fusion.py)
    carried_dims,        # sizes of loop-carried arrays read from their initial values (loop_facts.py)
    fuse_index_producers,  # iotas recomputed where they are read (index_fusion.py)
    _fuse_linalg,
    narrow_index_compares,  # ... and small loop indices compared on 32 bits (index_fusion.py)
    defer_row_scaling,   # (e / s) @ v as (e @ v) / s: softmax normalized after its product (deferred_scaling.py)
    hoist_invariant_ops,  # linalg ops reading nothing a loop's trip computes: before the loop (loop_facts.py)
)
# The rest of MLIR's buffer-deallocation-pipeline, for the deallocations free_fresh_buffers left.
DEALLOCATION_END = ("buffer-deallocation-simplification,bufferization-lower-deallocations,cse,canonicalize,"
                    "convert-bufferization-to-memref")


def _finish_deallocation(module: ir.Module) -> None:
    run_stage(module, "bufferized", DEALLOCATION_END)


_AFTER_BUFFERIZATION: tuple[Rewrite, ...] = (
    free_fresh_buffers,  # the common case of buffer deallocation, in linear time (deallocation.py)
    _finish_deallocation,
    free_whole_buffers,  # ... each buffer freed as itself, not through its base's metadata (deallocation.py)
)


# The conversion to the LLVM dialect builds a memref descriptor (insertvalue by insertvalue) for
# every memref a function receives as a bare pointer or gets from a call, and reads its fields
# back with extractvalue: most of them fold away. Folded here, by MLIR's canonicalizer, the LLVM
# IR that is printed, read back by llvmlite and optimized is a quarter of the size for a deep
# training step's glue (a 300-layer one: 2.06 -> 0.54 MB, its translation 70 -> 14 ms, for a 33
# ms pass).
def _fold_descriptors(module: ir.Module) -> None:
    run_stage(module, "llvm", "canonicalize")


def _localize_private_functions(module: ir.Module) -> None:
    """Functions MLIR made private (its `dealloc_helper`) keep the default external linkage in
    LLVM IR: each library would export one, and two kernels' archives in one static link would
    both define it. They get internal linkage, like the functions sprue outlines."""
    internal = ir.Attribute.parse("#llvm.linkage<internal>")
    for op in map(as_operation, module.body.operations):
        attrs = op.attributes
        if op.name == "llvm.func" and len(op.regions[0].blocks) and "sym_visibility" in attrs \
                and ir.StringAttr(attrs["sym_visibility"]).value == "private" \
                and ("linkage" not in attrs or "external" in str(attrs["linkage"])):
            op.attributes["linkage"] = internal


_AFTER_LLVM: tuple[Rewrite, ...] = (
    store_entry_results,      # several results stored one by one, not returned as a struct (entry_results.py)
    read_entry_arguments,     # the entry function is its C interface: no descriptor taken apart (entry_arguments.py)
    call_parallel_bodies,     # parallel loops call the pool (parallel.py)
    apply_loop_annotations,   # scf.for's loop hints reach the LLVM IR (loop_hints.py)
    _fold_descriptors,        # descriptors built only to be read back (above)
    _localize_private_functions,   # private functions are not exported (above)
)

_BEFORE_LOOPS: tuple[Rewrite, ...] = (
    call_routines,       # the products route_products marked: calls of the prebuilt library (matmul_library.py)
    parallelize_scatters,   # scatters that combine: chunks of updates into partial results (parallel_scatter.py)
    parallelize_loops,   # big ops with a parallel first loop: run in chunks on the pool (parallel.py)
)

PREPARE: dict[str, tuple[Rewrite, ...]] = {"bufferized": _BEFORE_BUFFERIZATION, "loops": _BEFORE_LOOPS,
                                           "llvm": _BEFORE_LLVM}
FINISH: dict[str, tuple[Rewrite, ...]] = {"linalg": _AFTER_LINALG, "bufferized": _AFTER_BUFFERIZATION,
                                          "llvm": _AFTER_LLVM}


def _rewrite(module: ir.Module, rewrites: tuple[Rewrite, ...]) -> None:
    for rewrite in rewrites:
        with step(rewrite.__name__):
            rewrite(module)


class LoweringError(CompileError):
    """A module could not be lowered; names the stage and MLIR's diagnostics. `ir_text` is the
    module as the failing stage left it (build_shared_library saves it to `ir_path`)."""

    def __init__(self, stage: str, message: str, diagnostics: list[str] | None = None, ir_text: str | None = None):
        self.diagnostics = list(diagnostics or [])
        text = f"lowering failed at stage '{stage}': {message}"
        if self.diagnostics:
            text += "\n" + "\n".join(self.diagnostics)
        super().__init__(text, stage=stage)
        self.ir_text = ir_text


_registered = False
_register_lock = threading.Lock()


def _register_passes() -> None:
    # Pass registration is process-global and must happen once.
    global _registered
    with _register_lock:
        if not _registered:
            _stablehlo.register_stablehlo_passes()
            _registered = True


def make_pipeline_context() -> ir.Context:
    """A fresh context with the StableHLO dialect and passes registered.

    Contexts are not shared: one per compilation keeps threads independent
    and lets each module's memory go with it."""
    _register_passes()
    ctx = dialects.new_context()
    # emit_error_diagnostics stays False: MLIR then captures the error
    # diagnostics (with notes) into the raised MLIRError instead of printing.
    return ctx


def _format(diag: ir.DiagnosticInfo | ir.Diagnostic, depth: int = 0) -> list[str]:
    lines = [f"{'  ' * depth}{diag.location}: {diag.message}"]
    for note in diag.notes:
        lines += _format(note, depth + 1)
    return lines


def _diagnostics_of(err: ir.MLIRError) -> list[str]:
    return [line for d in err.error_diagnostics for line in _format(d)]


def parse_module(ctx: ir.Context, text: str) -> ir.Module:
    try:
        return ir.Module.parse(text, ctx)
    except ir.MLIRError as err:
        raise LoweringError("parse", "the StableHLO module does not parse",
                            _diagnostics_of(err)) from err


def module_text(module: ir.Module) -> str | None:
    """The module as text for a failure report (generic form if it no longer verifies)."""
    try:
        return module.operation.get_asm(assume_verified=True, print_generic_op_form=True)
    except Exception:   # a module too broken to print: the report goes without it
        return None


def run_stage(module: ir.Module, name: str, pipeline: str) -> None:
    """Runs the passes of `pipeline` on `module`, then verifies it once (mlir_util.pass_manager)."""
    try:
        pass_manager(pipeline, module.context).run(module.operation)
    except ir.MLIRError as err:
        raise LoweringError(name, "an MLIR pass failed", _diagnostics_of(err), module_text(module)) from err
    verify(module, name, f"the module does not verify after the passes {pipeline}")


def verify(module: ir.Module, stage: str, message: str) -> None:
    """Raises LoweringError(`stage`, `message`, MLIR's diagnostics) if `module` does not verify."""
    try:
        ok = module.operation.verify()
    except ir.MLIRError as err:
        raise LoweringError(stage, message, _diagnostics_of(err), module_text(module)) from err
    if not ok:
        raise LoweringError(stage, message, ir_text=module_text(module))


def _legalize(module: ir.Module) -> None:
    try:
        legalize(module)
    except LegalizeError as err:
        raise LoweringError(LEGALIZE_STAGE, str(err), ir_text=module_text(module)) from err
    except Exception as err:   # a bug in a rewrite rule: still report the stage
        raise LoweringError(LEGALIZE_STAGE, f"internal error: {type(err).__name__}: {err}",
                            ir_text=module_text(module)) from err
    # A rewrite bug must surface here, attributed to us, not as a confusing
    # failure in a later pass.
    verify(module, LEGALIZE_STAGE, "the rewritten module does not verify")


def _check_no_stablehlo_left(module: ir.Module) -> None:
    """stablehlo-legalize-to-linalg is a partial conversion: ops it cannot
    lower stay behind and only fail later, obscurely, in bufferization.
    Name them here instead."""
    left: list[str] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("stablehlo."):
            left.append(f"{op.location}: {op.name}")
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    if left:
        names = sorted({entry.rsplit(" ", 1)[1] for entry in left})
        raise LoweringError("linalg", f"no lowering to linalg for {', '.join(names)}", left, module_text(module))


def _prepare_entry_points(module: ir.Module) -> None:
    """For every public function definition (the entry points callers see):

    - mark it `llvm.emit_c_interface`, so convert-func-to-llvm emits its `_mlir_ciface_` wrapper.
      (The pass llvm-request-c-wrappers would also wrap external declarations such as libm's
      `cbrt`, leaving an undefined `_mlir_ciface_cbrt` in the library.)
    - mark every argument `bufferization.writable = false`: one-shot bufferization otherwise treats
      arguments as writable and updates them in place (dynamic_update_slice, scatter), so the
      compiled code would write into the caller's numpy arrays.
    - mark it `llvm.always_inline`: its C wrapper, its only caller in the library, unpacks each
      memref descriptor into its fields (7 values for a 2-D array) and calls it; inlined, that
      call and the function's hundreds of stack parameters are gone (a 100-layer network's 101
      arrays: 707 parameters, whose lowering and instruction selection cost seconds). A library
      that exports the raw function too (backend's `internal` leaves it out) keeps a copy of it."""
    false = ir.BoolAttr.get(False)
    for op in module.body.operations:
        if op.operation.name != "func.func" or not op.operation.regions[0].blocks:
            continue
        attrs = op.operation.attributes
        if "sym_visibility" in attrs and ir.StringAttr(attrs["sym_visibility"]).value != "public":
            continue
        attrs["llvm.emit_c_interface"] = ir.UnitAttr.get()
        attrs["llvm.always_inline"] = ir.UnitAttr.get()
        n_args = len(op.operation.regions[0].blocks[0].arguments)
        old = list(ir.ArrayAttr(attrs["arg_attrs"])) if "arg_attrs" in attrs else [ir.DictAttr.get({})] * n_args
        new = []
        for d in old:
            entries = {ir.DictAttr(d)[i].name: ir.DictAttr(d)[i].attr for i in range(len(ir.DictAttr(d)))}
            entries["bufferization.writable"] = false
            new.append(ir.DictAttr.get(entries))
        attrs["arg_attrs"] = ir.ArrayAttr.get(new)


# Complex numbers: stablehlo-legalize-to-linalg leaves complex-dialect ops in the linalg bodies;
# complex-to-standard writes all but complex.create/re/im/constant (which convert-to-llvm lowers, a
# complex<fN> as the struct {fN, fN}) as arith and math on the parts, right after legalization, so
# that sprue's rewrites (fusion, vectorization, the math expansions, libm calls) see float ops.
# Only when the module has complex types: the pass walks the whole module.
COMPLEX_TO_STANDARD = "func.func(convert-complex-to-standard)"


def lower_module(module: ir.Module, dump: Dump | None = None, has_complex: bool = True) -> None:
    """Runs every stage on `module` in place (it ends in the LLVM dialect). `has_complex`: whether
    complex types may occur (when False, complex-to-standard is skipped)."""
    _prepare_entry_points(module)
    with step("concatenate_pad_sums"):
        concatenate_pad_sums(module)   # (before legalize, whose rules then take the concatenates)
    with step("legalize (Python)"):
        _legalize(module)
    with step("partition_stablehlo"):
        partition_stablehlo(module)
    with step("write_long_concatenates"):
        write_long_concatenates(module)
    if dump:
        dump(LEGALIZE_STAGE, str(module))
    for name, pipeline in STAGES:
        with step(f"stage {name}"):
            _rewrite(module, PREPARE.get(name, ()))
            with step("passes"):
                run_stage(module, name, pipeline + (f",{COMPLEX_TO_STANDARD}" if name == "linalg" and has_complex
                                                    else ""))
            _rewrite(module, FINISH.get(name, ()))
        if name == "linalg":
            _check_no_stablehlo_left(module)
        if dump:
            dump(name, str(module))


def lower_to_llvm_ir(stablehlo_text: str, *, dump: Dump | None = None) -> str:
    """StableHLO module text -> LLVM IR text.

    `dump(stage_name, text)` is called after each stage in STAGE_NAMES."""
    ctx = make_pipeline_context()
    with ctx, ir.Location.unknown():
        with step("parse"):
            module = parse_module(ctx, stablehlo_text)
        lower_module(module, dump, has_complex="complex<" in stablehlo_text)
        try:
            with step("translate to LLVM IR"):
                return translate_module_to_llvmir(module.operation)
        except Exception as err:   # the binding raises a bare error type
            raise LoweringError("translate", f"LLVM dialect -> LLVM IR failed: {err}",
                                ir_text=module_text(module)) from err


__all__ = ["Dump", "LoweringError", "STAGES", "STAGE_NAMES", "LEGALIZE_STAGE", "lower_module",
           "lower_to_llvm_ir", "make_pipeline_context", "parse_module", "run_stage"]
