"""The Python modules of the MLIR dialects, loaded once, before any compilation reads an op.

MLIR's Python bindings import a dialect's module the first time Python sees one of its ops
(PyGlobals::loadDialectModule: every `block.operations`, `use.owner`, walk callback), and retry a
dialect that has none every time. Two costs follow:
- time: torch_mlir's linalg module builds its OpDSL named ops from YAML (~170 ms) and its llvm
  module takes ~140 ms; sprue only reads those ops generically (by name, operands, attributes) and
  builds them from text, yet every process paid both at its first compilation;
- forks: an import in progress while another thread calls os.fork() leaves the module
  half-initialized in the child, its import lock held for ever by a thread the child does not
  have, and the child's next compilation waits for it (sprue.base.forks).
So this package comes first on the bindings' search path: linalg, llvm and the dialects JAX
exports (stablehlo, chlo, sdy, mhlo) find their (empty) module here and their ops come back as plain OpViews, and `load` imports every
other dialect module the pipelines meet. After `load`, compiling imports nothing
(tests/lowering/test_dialects.py).
"""
from __future__ import annotations

import threading

from torch_mlir import ir
from torch_mlir._mlir_libs import _mlir, _stablehlo, get_dialect_registry
from torch_mlir._mlir_libs import _mlirRegisterEverything as _register_everything

# Dialects whose modules torch_mlir ships and the pipelines' ops belong to.
TORCH_MLIR_DIALECTS = ("builtin", "func", "arith", "math", "scf", "memref", "tensor", "bufferization")
# Dialects read but never built from Python, each with an empty module in this package (complex's
# module alone took ~40 ms to import; vector, affine, index, ub and cf ~20 ms together; transform's,
# whose scripts sprue writes as text and runs through the interpreter's C extension, ~5 ms).
READ_ONLY_DIALECTS = ("linalg", "llvm", "stablehlo", "chlo", "sdy", "mhlo", "complex", "vector", "affine", "index",
                      "ub", "cf", "transform")

_loaded = False
_lock = threading.Lock()


def load() -> None:
    """Puts this package first on the search path and imports every dialect module (once)."""
    global _loaded
    with _lock:
        if _loaded:
            return
        globals_ = _mlir.globals
        if __name__ not in globals_.dialect_search_modules:
            globals_.dialect_search_modules = [__name__, *globals_.dialect_search_modules]
        for namespace in (*TORCH_MLIR_DIALECTS, *READ_ONLY_DIALECTS):
            # What the bindings do at the first op of `namespace`; found modules are remembered
            if not globals_._check_dialect_module_loaded(namespace):
                raise ImportError(f"no Python module for the MLIR dialect {namespace!r} on "
                                  f"{globals_.dialect_search_modules}")
        _loaded = True


# The dialects a compilation's contexts load when made. torch_mlir's ir.Context loads every one
# it has (~40, GPU, SPIR-V and sparse tensors among them): 4-5 ms a context, and a compilation
# makes two (the jaxpr's StableHLO is built in one, lowered in another). These take ~1.5 ms; any
# other a pass or the parser meets loads then (MLIR loads registered dialects on demand).
CONTEXT_DIALECTS = ("builtin", "func", "arith", "math", "scf", "cf", "memref", "tensor", "bufferization", "linalg",
                    "vector", "llvm", "stablehlo", "index", "affine", "ub", "complex", "transform")


# A context whose module is done (the jaxpr's StableHLO, printed), passed on to the next context
# this thread makes (the pipeline's, which parses that text): one context made per compilation,
# not two (~2.3 ms each).
_passed = threading.local()


def pass_on(ctx: ir.Context) -> None:
    """`ctx`, whose modules are done with, is the next new_context of this thread."""
    _passed.ctx = ctx


def new_context() -> ir.Context:
    """A context as torch_mlir's ir.Context makes one (every dialect registered, single-threaded
    as its site initializer asks, LLVM IR translations registered) with only CONTEXT_DIALECTS
    loaded, and the StableHLO dialects registered."""
    ctx = getattr(_passed, "ctx", None)
    if ctx is not None:
        _passed.ctx = None
        return ctx
    ctx = _mlir.ir._Context()
    ctx.append_dialect_registry(get_dialect_registry())
    ctx.enable_multithreading(False)
    _stablehlo.register_dialect(ctx)
    for name in CONTEXT_DIALECTS:
        ctx.dialects[name]   # (loads it)
    _register_everything.register_llvm_translations(ctx)
    return ctx
