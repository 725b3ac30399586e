"""The layers of sprue, kept by an AST walk over every module (imports inside functions count).

    base < runtime < ir < trace < interp < lax < numpy < scipy < nn < random < io < lowering < api < (sprue, sprue.errors, sprue.pytree, sprue.tree_util) < tools

A module may import its own layer and the layers below it, never one above; no two modules import
each other, even through a chain, even from inside a function; an import inside a function is a
deliberate lazy load that says why on its line (or the line above); the runtime imports only the
base (a cached library loads without the compiler); nothing imports JAX. The README's "Layers"
section draws the same picture. Run `python tests/test_layers.py` for the whole report.
"""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# folder -> package, as pyproject.toml maps them
PACKAGES = {"frontend": "sprue", "lowering": "sprue.lowering", "runtime": "sprue.runtime", "tools": "sprue.tools"}
LAYERS = ["base", "runtime", "ir", "trace", "interp", "lax", "numpy", "scipy", "nn", "random", "io", "lowering", "api", "sprue", "tools"]
MAX_FUNCTION_IMPORTS = 40
MAX_LINES = 800
# Imports a layer may never make, whatever their position (the runtime loads without the compiler).
FORBIDDEN = {"runtime": ("torch_mlir", "llvmlite"), "*": ("jax", "jaxlib")}
COMPILER = ("torch_mlir", "llvmlite")


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    is_package: bool

    @property
    def layer(self) -> str:
        parts = self.name.split(".")
        if len(parts) == 1 or self.name in ("sprue.errors", "sprue.pytree", "sprue.tree_util"):
            return "sprue"     # the public face: the package's __init__, sprue.errors, sprue.pytree (tree_util)
        if self.name == "sprue.__main__":
            return "tools"     # `python -m sprue`: the command line
        return parts[1]


@dataclass(frozen=True)
class Import:
    source: Module
    target: str            # the module (or external name) imported
    line: int
    in_function: bool
    has_reason: bool


def find_modules() -> dict[str, Module]:
    mods = {}
    for folder, package in PACKAGES.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            name = ".".join([package, *parts])
            mods[name] = Module(name, path, is_package)
    return mods


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def _owning_module(name: str, mods: dict[str, Module]) -> str:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name


def _has_reason(lines: list[str], lineno: int) -> bool:
    return "#" in lines[lineno - 1] or lines[lineno - 2].strip().startswith("#")


def find_imports(mod: Module, mods: dict[str, Module]) -> list[Import]:
    text = mod.path.read_text()
    lines = text.splitlines()
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            targets = []
            if isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = mod.name.split(".")[: None if mod.is_package else -1]
                    parts = parts[: len(parts) - child.level + 1]
                    base = ".".join(parts + ([child.module] if child.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in child.names]
            for target in targets:
                owner = _owning_module(target, mods) if target.startswith("sprue") else target
                found.append(Import(mod, owner, child.lineno, in_function, _has_reason(lines, child.lineno)))
            visit(child, inner)

    visit(ast.parse(text), False)
    return found


def import_graph() -> tuple[dict[str, Module], list[Import]]:
    mods = find_modules()
    return mods, [imp for mod in mods.values() for imp in find_imports(mod, mods)]


def cycles(mods: dict[str, Module], imports: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for imp in imports:
        if imp.target in mods and imp.target != imp.source.name:
            graph[imp.source.name].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def upward_imports(mods: dict[str, Module], imports: list[Import]) -> list[str]:
    out = []
    for imp in imports:
        if imp.target in mods:
            here, there = imp.source.layer, mods[imp.target].layer
            if LAYERS.index(there) > LAYERS.index(here):
                out.append(f"{_rel(imp.source.path)}:{imp.line}: {here} imports {imp.target} ({there})")
    return out


def forbidden_imports(imports: list[Import]) -> list[str]:
    out = []
    for imp in imports:
        banned = FORBIDDEN["*"] + FORBIDDEN.get(imp.source.layer, ())
        if imp.target.split(".")[0] in banned:
            out.append(f"{_rel(imp.source.path)}:{imp.line}: {imp.source.layer} imports {imp.target}")
    return out


def report() -> str:
    mods, imports = import_graph()
    lazy = [i for i in imports if i.in_function]
    lines = [f"{len(mods)} modules, {len(imports)} imports, {len(lazy)} inside functions"]
    for c in cycles(mods, imports):
        lines.append(f"cycle of {len(c)}: {' '.join(c)}")
    lines += upward_imports(mods, imports) + forbidden_imports(imports)
    for imp in lazy:
        mark = "" if imp.has_reason else "   (no reason given)"
        lines.append(f"lazy {_rel(imp.source.path)}:{imp.line}: {imp.target}{mark}")
    for mod in mods.values():
        n = len(mod.path.read_text().splitlines())
        if n > MAX_LINES:
            lines.append(f"{_rel(mod.path)}: {n} lines")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------

def test_every_module_has_a_layer():
    mods = find_modules()
    unknown = sorted(m.name for m in mods.values() if m.layer not in LAYERS)
    assert not unknown, f"modules outside every layer: {unknown}"


def test_no_import_cycle_counting_imports_inside_functions():
    mods, imports = import_graph()
    assert cycles(mods, imports) == []


def test_no_layer_imports_one_above_it():
    mods, imports = import_graph()
    assert upward_imports(mods, imports) == []


def test_forbidden_imports():
    assert forbidden_imports(import_graph()[1]) == []


def test_the_runtime_imports_only_itself_and_the_errors():
    """A C host's library and a cache hit load through the runtime alone."""
    mods, imports = import_graph()
    outside = [f"{i.source.name}:{i.line} -> {i.target}" for i in imports
               if i.source.layer == "runtime" and i.target in mods and mods[i.target].layer not in ("runtime", "base")]
    assert outside == []


def test_the_compiler_is_loaded_lazily_below_the_lowering():
    """Only the lowering and the compile driver's lazy loads may reach MLIR or llvmlite: a cache hit
    must not import them."""
    mods, imports = import_graph()
    eager = [f"{_rel(i.source.path)}:{i.line} -> {i.target}" for i in imports
             if i.target.split(".")[0] in COMPILER and i.source.layer != "lowering"]
    assert eager == []


def test_imports_inside_functions_are_few_and_say_why():
    lazy = [i for i in import_graph()[1] if i.in_function]
    silent = [f"{_rel(i.source.path)}:{i.line}: {i.target}" for i in lazy if not i.has_reason]
    assert silent == []
    assert len(lazy) <= MAX_FUNCTION_IMPORTS, report()


def test_no_module_over_the_size_limit():
    long = {_rel(m.path): n for m in find_modules().values()
            if (n := len(m.path.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_the_walk_sees_a_cycle_through_a_function_level_import(tmp_path):
    """The check itself: two modules importing each other, one of them inside a function."""
    a = Module("sprue.ir.a", tmp_path / "a.py", False)
    b = Module("sprue.ir.b", tmp_path / "b.py", False)
    a.path.write_text("from sprue.ir.b import g\n")
    b.path.write_text("def g():\n    from sprue.ir import a  # lazy\n    return a\n")
    mods = {"sprue.ir.a": a, "sprue.ir.b": b}
    imports = find_imports(a, mods) + find_imports(b, mods)
    assert [i.in_function for i in imports] == [False, True]
    assert cycles(mods, imports) == [["sprue.ir.a", "sprue.ir.b"]]


def test_the_walk_sees_an_upward_import(tmp_path):
    low = Module("sprue.ir.low", tmp_path / "low.py", False)
    low.path.write_text("import sprue.numpy.high\n")
    high = Module("sprue.numpy.high", tmp_path / "high.py", False)
    high.path.write_text("")
    mods = {m.name: m for m in (low, high)}
    assert upward_imports(mods, find_imports(low, mods)) == [
        f"{low.path}:1: ir imports sprue.numpy.high (numpy)"]


if __name__ == "__main__":
    print(report())
    sys.exit(0)
