"""The bufferized IR of a compiled function, and the allocations and copies nested in its loops: how
the in-place tests (tests/lowering/test_control_flow_bufferization.py, and those of dynamic control
flow) see that a loop body allocates and copies nothing."""
from pathlib import Path

import numpy as np
from torch_mlir import ir

import sprue
from sprue.lowering import pipeline

_LOOPS = {"scf.while", "scf.for"}
_BUFFER_OPS = {"memref.alloc", "memref.alloca", "memref.copy", "bufferization.clone"}


def _ops_of(text: str, names: set[str]) -> list[tuple[str, bool, int]]:
    """(op name, whether a loop encloses it, elements of its largest buffer) for every op of
    `names` in the IR `text`."""
    found = []
    ctx = pipeline.make_pipeline_context()
    with ctx:
        module = ir.Module.parse(text, ctx)

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.name in names:
                parent = op.parent
                while parent is not None and parent.name != "builtin.module" and parent.name not in _LOOPS:
                    parent = parent.parent
                sizes = [int(np.prod(ir.MemRefType(v.type).shape)) for v in [*op.operands, *op.results]
                         if isinstance(v.type, ir.MemRefType)]
                found.append((op.name, parent is not None and parent.name in _LOOPS, max(sizes, default=0)))
            return ir.WalkResult.ADVANCE
        module.operation.walk(visit)
    return found


def buffer_ops_in_loops(text: str) -> list[tuple[str, int]]:
    """(op name, elements of its largest buffer) of every allocation or copy nested in a loop."""
    return [(name, size) for name, in_loop, size in _ops_of(text, _BUFFER_OPS) if in_loop]


def copies_outside_loops(text: str) -> int:
    """The memref.copy ops nested in no loop: whole-buffer copies (a padded edge tile's rows,
    matmul.py's run-time rows, are copied inside the kernel's loops)."""
    return sum(not in_loop for _, in_loop, _ in _ops_of(text, {"memref.copy"}))


def stage_text(directory: Path, stage: str) -> str:
    """The text of pipeline stage `stage` a keep_intermediate build wrote into `directory`."""
    number = pipeline.STAGE_NAMES.index(stage) + 1
    (path,) = Path(directory).glob(f"*.{number:02d}_{stage}.mlir")
    return path.read_text()


def program_text(directory: Path, stage: str) -> str:
    """stage_text without the functions parallel.py made for the pool's chunks (copies of ops also
    left in the program, behind a guard on their run-time size): the program as it runs serially."""
    return stage_text(directory, stage).split("func.func private @__sprue_par_")[0]


def compile_and_read(fn, args, tmp_path: Path):
    """(result, bufferized IR text) of qjit(fn)(*args)."""
    compiled = sprue.qjit(fn, keep_intermediate=tmp_path)
    out = compiled(*args)
    stage = pipeline.STAGE_NAMES.index("bufferized") + 1
    (path,) = tmp_path.glob(f"*.{stage:02d}_bufferized.mlir")
    return out, path.read_text()
