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


def buffer_ops_in_loops(text: str) -> list[tuple[str, int]]:
    """(op name, elements of its largest buffer) of every allocation or copy nested in a loop."""
    found = []
    ctx = pipeline.make_pipeline_context()
    with ctx:
        module = ir.Module.parse(text, ctx)

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.name in _BUFFER_OPS:
                parent = op.parent
                while parent is not None and parent.name != "builtin.module":
                    if parent.name in _LOOPS:
                        sizes = [int(np.prod(ir.MemRefType(v.type).shape)) for v in [*op.operands, *op.results]
                                 if isinstance(v.type, ir.MemRefType)]
                        found.append((op.name, max(sizes, default=0)))
                        break
                    parent = parent.parent
            return ir.WalkResult.ADVANCE
        module.operation.walk(visit)
    return found


def copies_outside_loops(text: str) -> int:
    """The memref.copy ops nested in no loop: whole-buffer copies (a padded edge tile's rows,
    matmul.py's run-time rows, are copied inside the kernel's loops)."""
    count = 0
    ctx = pipeline.make_pipeline_context()
    with ctx:
        module = ir.Module.parse(text, ctx)

        def visit(op: ir.Operation) -> ir.WalkResult:
            nonlocal count
            if op.name == "memref.copy":
                parent = op.parent
                while parent is not None and parent.name not in _LOOPS and parent.name != "builtin.module":
                    parent = parent.parent
                count += parent is None or parent.name not in _LOOPS
            return ir.WalkResult.ADVANCE
        module.operation.walk(visit)
    return count


def compile_and_read(fn, args, tmp_path: Path):
    """(result, bufferized IR text) of qjit(fn)(*args)."""
    compiled = sprue.qjit(fn, keep_intermediate=tmp_path)
    out = compiled(*args)
    stage = pipeline.STAGE_NAMES.index("bufferized") + 1
    (path,) = tmp_path.glob(f"*.{stage:02d}_bufferized.mlir")
    return out, path.read_text()
