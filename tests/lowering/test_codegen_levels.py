"""Glue (straight-line code of loads, stores and calls) is generated at O0, kernels at full effort
(lowering/codegen_levels.py), and LLVM's set-up runs on another thread (backend.prepare_in_background)."""
import numpy as np

import sprue
from sprue.lowering import backend
from sprue.lowering.codegen_levels import GLUE_MIN_INSTRUCTIONS, glue_functions


def _straight_line(name: str, n: int, op: str) -> str:
    body = [f"  %v{i} = load double, ptr %p\n  %w{i} = {op} double %v{i}, 1.0\n  store double %w{i}, ptr %q"
            for i in range(n)]
    return f"define void @{name}(ptr %p, ptr %q) {{\n" + "\n".join(body) + "\n  ret void\n}\n"


def _copies(name: str, n: int) -> str:
    body = [f"  %v{i} = load i64, ptr %p\n  store i64 %v{i}, ptr %q\n  call void @g(ptr %q)" for i in range(n)]
    return f"define void @{name}(ptr %p, ptr %q) {{\n" + "\n".join(body) + "\n  ret void\n}\n"


def _loop(name: str, n: int) -> str:
    body = "\n".join(f"  %v{i} = load i64, ptr %p\n  store i64 %v{i}, ptr %q" for i in range(n))
    return (f"define void @{name}(ptr %p, ptr %q, i1 %c) {{\nentry:\n  br label %loop\nloop:\n{body}\n"
            f"  br i1 %c, label %loop, label %done\ndone:\n  ret void\n}}\n")


def test_straight_line_copies_and_calls_are_glue():
    n = GLUE_MIN_INSTRUCTIONS
    ir = _copies("glue", n) + _copies("short", 5) + "declare void @g(ptr)\n"
    assert glue_functions(ir) == ["glue"]


def test_loops_and_arithmetic_are_not_glue():
    n = GLUE_MIN_INSTRUCTIONS
    ir = _loop("looping", n) + _straight_line("arithmetic", n, "fmul")
    assert glue_functions(ir) == []


def test_a_forward_branch_is_not_a_loop():
    n = GLUE_MIN_INSTRUCTIONS
    body = "\n".join(f"  %v{i} = load i64, ptr %p\n  store i64 %v{i}, ptr %q" for i in range(n))
    ir = (f"define void @forward(ptr %p, ptr %q, i1 %c) {{\nentry:\n  br i1 %c, label %a, label %b\na:\n{body}\n"
          f"  br label %b\nb:\n  ret void\n}}\n")
    assert glue_functions(ir) == ["forward"]


def test_many_results_through_glue_match_numpy():
    # 160 results: the C wrapper storing their descriptors is glue, generated at O0
    n = 160

    def many(x):
        return [x * (i + 1) + i for i in range(n)]

    x = np.linspace(-1.0, 1.0, 8)
    f = sprue.qjit(many)
    got = f(x)
    for i in range(n):
        np.testing.assert_allclose(got[i], x * (i + 1) + i, rtol=1e-15)
    ir = backend.codegen(backend.lower_to_llvm_ir(f.mlir), internal=["main"]).optimized_ir
    assert any(name.startswith("_sprue_thunk") or name.startswith("_mlir_ciface") for name in glue_functions(ir))


def test_llvm_warm_up_runs_once_without_error():
    backend.prepare_in_background()
    backend.prepare_in_background()
    assert len(backend._warm_up) == 1
    backend._warm_up[0].join(timeout=60)
    assert not backend._warm_up[0].is_alive()
    assert backend.warm_up_error == []
