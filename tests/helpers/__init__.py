"""What several test modules share; test modules import from here, never from each other.

    numpy_cases, dynamic_cases   case tables: sprue.numpy programs with their numpy references
    transform_check              the transformations checked on numpy_cases
    rule_checks                  one primitive's jvp / vjp / vmap rules against finite differences
    arrays, jaxprs               test arrays and sizes, comparison with numpy; avals, a jaxpr's primitives
    lowering_harness             compile a sprue.lax function and run it (qjit, or its C interface)
    stablehlo_kernels            StableHLO text -> library -> `main` called through cffi
    bufferization                the bufferized IR of a compiled function, buffers in its loops
    system                       the repository, the `sprue` command, the C compiler, memory in use
"""
