"""How the tests in this folder were made (run by hand, not by pytest): the classical (non-quantum)
tests of PennyLane Catalyst's frontend/test/pytest files, with their `catalyst`, `pennylane` and
`jax` imports rewritten to this folder's shims (shims.py: sprue under Catalyst's and JAX's names).

    python tests/e2e/catalyst_classical/port.py <catalyst checkout> <commit>

A test is classical when its source names no quantum API and no Catalyst internal (its tracer,
primitives, MLIR lowering: the QUANTUM pattern below). Module-level
code is kept as written; test classes keep their classical tests only. Which ported tests fail on
sprue, and why, is listed in conftest.py (KNOWN)."""
import ast
import re
import subprocess
import sys
from pathlib import Path

FILES = ["test_loops", "test_conditionals", "test_switch", "test_jit_behaviour", "test_jax_dynamic_api",
         "test_static_arguments", "test_scatter", "test_vmap", "test_jvpvjp", "test_jax_integration", "test_polyfit",
         "test_jax_numerical", "test_keyword_arguments", "test_gradient", "test_pytree_args"]
QUANTUM = re.compile(r"\bqml\.|\bqp\.|qnode|device\(|wires|measure\(|PauliX|RX\(|expval|probs|QuantumTape|adjoint"
                     r"|ctrl\(|lightning|backend|shots|\.mlir\b|_opt\b|jaxpr\.pretty_print|get_compilation_stage"
                     r"|EvaluationContext|filecheck|autograph=True|\.operation\b|capture=True|use_capture"
                     r"|\binfer\.|jax_primitives|jax_tracer|_abstractify|\bir\.|lower_jaxpr|HybridOp|trace_to_jaxpr"
                     r"|get_lib_path|convert_pytype|convert_numpy_dtype|DShapedArray|JAX_QJIT|type_signatures|get_mlir_attribute"
                     r"|jax_extras|\bctx\b|ir_constant|make_ir_context|compiled_function|compile_options|\.workspace"
                     r"|typecheck_signatures|params_are_annotated|get_abstract_signature|compile_without_static"
                     r"|target=|SwitchCallable\(|jaxpr\)\.strip|str\(\w+\.jaxpr\)|\.jaxpr\b|_get_batch_size")
SHIM = "tests.e2e.catalyst_classical.shims"


def rewrite_import(line: str) -> str:
    m = re.match(r"^(\s*)(.*)$", line)
    indent, stmt = m.group(1), m.group(2)
    if re.match(r"import jax\.numpy as (\w+)$", stmt) or re.match(r"from jax import numpy as (\w+)$", stmt):
        return f"{indent}import sprue.numpy as {stmt.split()[-1]}"
    if stmt == "import jax":
        return f"{indent}from {SHIM} import jax"
    if re.match(r"import (pennylane|catalyst)( as (\w+))?$", stmt):
        alias = stmt.split()[-1]
        module = "pennylane" if "pennylane" in stmt else "catalyst"
        return f"{indent}from {SHIM} import {module} as {alias}"
    m2 = re.match(r"from (jax|catalyst|pennylane)([\w.]*) import (.*)$", stmt)
    if m2:
        root, sub, names = m2.groups()
        module = {"jax": "jax", "catalyst": "catalyst", "pennylane": "pennylane"}[root]
        return f"{indent}from {SHIM} import lookup as _lookup  # {stmt}\n" + "\n".join(
            f"{indent}{alias} = _lookup({module!r}, {(root + sub)!r}, {name!r})"
            for name, alias in _names(names))
    m3 = re.match(r"import (catalyst[\w.]*) as (\w+)$", stmt)
    if m3:
        return f"{indent}from {SHIM} import lookup as _lookup\n{indent}{m3.group(2)} = _lookup('catalyst', " \
               f"{m3.group(1)!r}, None)"
    return line


def _names(text: str):
    text = text.strip().strip("()")
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, _, alias = part.partition(" as ")
        yield name.strip(), (alias or name).strip()


def classical_source(src: str) -> str:
    tree = ast.parse(src)
    lines = src.splitlines()
    drop = []   # (start, end) line ranges to remove (1-based, inclusive)

    def visit(body, in_class):
        kept = 0
        for node in body:
            if isinstance(node, ast.ClassDef):
                if visit(node.body, True) == 0:
                    drop.append((_start(node), node.end_lineno))
            elif not in_class and isinstance(node, (ast.Assign, ast.Expr, ast.With)):   # module-level code
                if QUANTUM.search("\n".join(lines[node.lineno - 1:node.end_lineno])):
                    drop.append((node.lineno, node.end_lineno))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                seg = "\n".join(lines[_start(node) - 1:node.end_lineno])
                if QUANTUM.search(seg):
                    drop.append((_start(node), node.end_lineno))
                else:
                    kept += 1
        return kept
    visit(tree.body, False)
    gone = set()
    for a, b in drop:
        gone.update(range(a, b + 1))
    out = [line for i, line in enumerate(lines, 1) if i not in gone]
    # imports: rewritten; a multi-line `from x import (\n a,\n b)` is joined first
    joined, buf = [], None
    for line in out:
        if buf is not None:
            buf += " " + line.strip()
            if ")" in line:
                joined.append(buf)
                buf = None
            continue
        if re.match(r"^\s*from [\w.]+ import \($", line) and ")" not in line:
            buf = line.rstrip()
            continue
        joined.append(line)
    return "\n".join(rewrite_import(line) for line in joined) + "\n"


def _start(node) -> int:
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


def main(checkout: str, commit: str) -> None:
    here = Path(__file__).parent
    for name in FILES:
        src = subprocess.run(["git", "-C", checkout, "show", f"{commit}:frontend/test/pytest/{name}.py"],
                             capture_output=True, text=True, check=True).stdout
        header = (f"# Ported by port.py from PennyLane Catalyst ({commit[:9]}), frontend/test/pytest/{name}.py:\n"
                  f"# its classical tests, with catalyst/pennylane/jax imports rewritten to shims.py (sprue).\n")
        (here / f"{name.replace('test_', 'test_catalyst_')}.py").write_text(header + classical_source(src))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
