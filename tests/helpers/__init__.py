"""What several test modules share: case tables (numpy_cases, dynamic_cases), the checks run on them
(transform_check, rule_checks, arrays), and the harnesses that compile and call a kernel
(lowering_harness, stablehlo_kernels, bufferization). Test modules import from here, never from
each other."""
