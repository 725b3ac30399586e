"""A module's glue split off into a module of its own, optimized and generated with little effort.

codegen_levels.py gives glue (loop-free functions that compute little: C wrappers reading
hundreds of argument descriptors and storing hundreds of results, the functions calling a deep
program's parts) FastISel after O3. Two costs remain that only a module of its own avoids: O3
itself on that code (its DSE, GVN and InstCombine walk thousands of loads and stores that are
already what they should be), and the greedy register allocator, which an O3 target machine uses
for every function, optnone or not. A program with at least SPLIT_MIN_GLUE instructions of glue
(before O3) is therefore compiled as two modules: its kernels at O3 as before, its glue at O1 with
an O0 target machine (FastISel, the fast register allocator), each its own object, both linked
into the library. (100 layers of `tanh(x @ w)`: LLVM 97 -> ~60 ms.)

The split is on LLVM IR text, as MLIR's translation prints it: each function definition goes to
one module; functions and constants are declared or copied where the other module uses them:
- a function one module defines and the other calls is `hidden` instead of `internal` (still
  not exported from the library), declared `hidden` in the other, and named after the program
  (a suffix of its text's hash: two kernels' objects in one static link must not both define
  `__sprue_nest_2`);
- constants (MLIR's globals of dense values and names) are copied into each module that uses
  them: private copies, compared by nothing;
- attribute groups, metadata, type definitions and declarations are copied into both;
- the entry's wrappers (`_mlir_ciface_<name>`, its thunk and body, allocation.py) stay together:
  the body is always inlined into the thunk.
A module with a global that is not constant, or any line this does not recognize, is not split.

The kernels themselves may be cut further, into as many modules as LLVM has threads to compile
them on at once (llvm_threads.py): the functions LLVM would not inline anyway (`noinline`: the
nests and parts of a deep program, outline.py and partition.py) are spread over them by size. The
glue's module is compiled first, and the thread that compiled it then takes the last, lighter part
of the kernels: the parts are balanced counting the glue's own cost (GLUE_COST), so that no thread
waits for the glue alone at the end (a 100-layer training step: LLVM's wall time 74 -> ~60 ms).
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from sprue.lowering.codegen_levels import body_is_glue, is_instruction

__all__ = ["KERNEL_PART_MIN", "SPLIT_MIN_GLUE", "Split", "split_module"]

# Below this many instructions of glue, one module: the split's own costs (a second module to
# parse, optimize, emit and link, ~5 ms) are not repaid. The realistic programs have none.
SPLIT_MIN_GLUE = 400

# A part of the kernels compiled on a thread of its own (llvm_threads.py) has at least this many
# instructions (before O3): a module costs ~1-2 ms however small (parsing the shared text,
# setting up the passes, an object to emit and link).
KERNEL_PART_MIN = 40

# What LLVM's time on a part of the kernels is taken to be, in instructions: each function costs
# FUNCTION_COST on top of its instructions (O3's ~100 function passes and the code generator's
# machine passes run per function: on this 2-core machine a 9-instruction fill loop took 5.6 ms, a
# 96-instruction part 9.4 ms), and an instruction of glue GLUE_COST (its module is optimized with
# SROA alone and generated with FastISel: a 100-layer training step's 2,592 in 25 ms).
FUNCTION_COST = 100
GLUE_COST = 0.2

_DEFINE = re.compile(r"^define ((?:(?:internal|private|hidden|dso_local|dso_preemptable) )*)(.*?)@([\w.$-]+)\((.*)$")
_GROUP_REF = re.compile(r"#(\d+)")
_GROUP_DEF = re.compile(r"^attributes #(\d+) = (\{.*\})$")
_SYMBOL = re.compile(r"@([\w.$-]+)")
_ENTRY = re.compile(r"^(?:_mlir_ciface_|_sprue_thunk_|_sprue_body_|_sprue_error_|_sprue_packed_)(.+)$")


@dataclass
class _Function:
    name: str
    linkage: str       # "internal ", "private ", "" ...
    rest: str          # what follows `define <linkage>`, its first line to the `{`
    lines: list[str]   # the whole definition, `define` to `}`
    instructions: int


def _top_level(llvm_ir: str) -> tuple[list[str], list[_Function]] | None:
    """(every line outside function definitions, the definitions), or None for text this does not
    read (a global variable that is not constant, a definition that does not end)."""
    shared: list[str] = []
    functions: list[_Function] = []
    lines = llvm_ir.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("define "):
            m = _DEFINE.match(line)
            if m is None or not line.endswith("{"):
                return None
            end = i
            while end < len(lines) and lines[end] != "}":
                end += 1
            if end == len(lines):
                return None
            body = lines[i:end + 1]
            count = sum(map(is_instruction, body[1:-1]))
            functions.append(_Function(m.group(3), m.group(1), line[len("define ") + len(m.group(1)):], body, count))
            i = end + 1
            continue
        if line.startswith("@") and " global " in line.split("=", 1)[-1][:80] and " constant " not in line:
            return None   # a variable: one copy only, which the split would break
        shared.append(line)
        i += 1
    return shared, functions


def _local(fn: _Function) -> bool:
    """Whether `fn` is internal to its module (made hidden when the other module calls it)."""
    return "internal" in fn.linkage or "private" in fn.linkage


def _declaration(fn: _Function) -> str:
    """The declaration of `fn` (hidden where it was internal: see _module), from its definition's
    first line (parameter names are allowed in a declaration)."""
    head = fn.rest[:-1].rstrip()   # without the `{`
    head = re.sub(r"\b(?:unnamed_addr|local_unnamed_addr|alwaysinline) ", "", head + " ").rstrip()
    return f"declare {'hidden ' if _local(fn) else ''}{head}"


def _glue_names(functions: list[_Function]) -> set[str]:
    glue = {fn.name for fn in functions if body_is_glue(fn.lines[1:-1])}
    # the entry's wrappers go together, with the body (inlined into the thunk): glue if the body is
    entries: dict[str, list[str]] = {}
    for fn in functions:
        m = _ENTRY.match(fn.name)
        if m:
            entries.setdefault(m.group(1), []).append(fn.name)
    for entry, names in entries.items():
        body = f"_sprue_body_{entry}"
        inside = body in glue if any(fn.name == body for fn in functions) else all(n in glue for n in names)
        glue -= set(names)
        if inside:
            glue |= set(names)
    return glue


def _used(fns: list[_Function]) -> set[str]:
    """The symbols the bodies of `fns` name."""
    return {s for fn in fns for line in fn.lines[1:] for s in _SYMBOL.findall(line)}


_GLOBAL = re.compile(r"^@([\w.$-]+) = ")
_LOCAL_GLOBAL = re.compile(r"^@[\w.$-]+ = (?:[\w()]+ )*?(?:private|internal) ")


def _module(shared: list[str], own: list[_Function], other: list[_Function], exported: set[str]) -> str:
    """The module of `own`'s definitions (those in `exported` made hidden: another module calls
    them) with declarations of what it calls of `other`, and of the shared lines those constants
    `own` uses (and the constants they name), not the others: a big constant is parsed only by the
    modules that read it."""
    used = _used(own)
    constants = {m.group(1): line for line in shared if (m := _GLOBAL.match(line))}
    wanted, todo = set(), [name for name in used if name in constants]
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo += [s for s in _SYMBOL.findall(constants[name].split("=", 1)[1]) if s in constants]
    out = [line for line in shared
           if not (m := _GLOBAL.match(line)) or m.group(1) in wanted or not _LOCAL_GLOBAL.match(line)]
    for fn in own:
        first = fn.lines[0]
        if fn.name in exported and _local(fn):   # (an exported one stays as it is, default visibility)
            first = "define hidden " + fn.rest
        out += [first, *fn.lines[1:]]
    out += [_declaration(fn) for fn in other if fn.name in used]
    return "\n".join(out) + "\n"


@dataclass
class Split:
    """A module cut in several (split_module): texts of whole modules that link together."""
    kernels: list[str]   # compiled at the program's level, at once when there are several (llvm_threads.py)
    glue: str | None     # the glue's, if it has a module of its own
    cross: set[str]      # the functions one module defines and another calls (as renamed)


def _noinline(fn: _Function, groups: dict[str, str]) -> bool:
    """Whether `fn` is noinline (in its `define` line or its attribute group), not an entry wrapper."""
    if _ENTRY.match(fn.name):
        return False
    attrs = fn.rest[fn.rest.rfind(")"):]
    return " noinline" in attrs or any("noinline" in groups.get(g, "") for g in _GROUP_REF.findall(attrs))


def _kernel_groups(functions: list[_Function], parts: int, shared: list[str],
                   glue_cost: float = 0.0) -> list[list[_Function]]:
    """`functions` in at most `parts` groups of about equal cost (FUNCTION_COST), each with at least
    KERNEL_PART_MIN instructions: every noinline function can go to any group (LLVM would not inline it
    anyway); the others, which a call may inline, stay together in the first. The last group
    starts `glue_cost` heavier: its thread compiles the glue first."""
    groups_text = dict(m.groups() for m in map(_GROUP_DEF.match, shared) if m)
    noinline = {fn.name: _noinline(fn, groups_text) for fn in functions}
    movable = [fn for fn in functions if noinline[fn.name]]
    fixed = [fn for fn in functions if not noinline[fn.name]]
    fixed_size = sum(fn.instructions for fn in fixed)

    def cost(fn: _Function) -> int:
        return fn.instructions + FUNCTION_COST
    for k in range(min(parts, len(movable) + bool(fixed)), 1, -1):
        loads = [float(sum(map(cost, fixed)))] + [0.0] * (k - 1)
        loads[-1] += glue_cost
        sizes = [fixed_size] + [0] * (k - 1)
        group_of = {fn.name: 0 for fn in fixed}
        for fn in sorted(movable, key=lambda fn: -cost(fn)):   # the costliest first, each to the lightest group
            i = loads.index(min(loads))
            group_of[fn.name] = i
            loads[i] += cost(fn)
            sizes[i] += fn.instructions
        if min(sizes) >= KERNEL_PART_MIN:
            return [[fn for fn in functions if group_of[fn.name] == i] for i in range(k)]
    return [functions]


def split_module(llvm_ir: str, kernel_parts: int = 1) -> Split | None:
    """The module cut for code generation, or None when it stays whole: its glue in a module of its
    own when it has at least SPLIT_MIN_GLUE instructions of glue and a kernel; its other functions
    in up to `kernel_parts` modules (_kernel_groups). None for text this does not split (module doc)."""
    parsed = _top_level(llvm_ir)
    if parsed is None:
        return None
    shared, functions = parsed
    glue = _glue_names(functions)
    glue_fns = [fn for fn in functions if fn.name in glue]
    kernel_fns = [fn for fn in functions if fn.name not in glue]
    if not kernel_fns or sum(fn.instructions for fn in glue_fns) < SPLIT_MIN_GLUE:
        glue_fns, kernel_fns = [], functions
    modules = _kernel_groups(kernel_fns, kernel_parts, shared,
                             GLUE_COST * sum(fn.instructions for fn in glue_fns) if kernel_parts > 1 else 0.0)
    if not glue_fns and len(modules) == 1:
        return None
    if glue_fns:
        modules.append(glue_fns)
    defined_in = {fn.name: i for i, module in enumerate(modules) for fn in module}
    cross = {name for i, module in enumerate(modules) for name in _used(module) if defined_in.get(name, i) != i}
    texts = [_module(shared, module, [fn for other in modules if other is not module for fn in other], cross)
             for module in modules]
    # a hidden function is still a symbol of the object: two kernels' objects in one static link
    # would both define `__sprue_nest_2`. Those made hidden get a name of this program's own.
    suffix = "." + hashlib.sha256(llvm_ir.encode()).hexdigest()[:12]
    renamed = {fn.name for fn in functions if fn.name in cross and _local(fn)}
    if renamed:
        symbol = re.compile(r"@(" + "|".join(map(re.escape, sorted(renamed))) + r")(?![\w.$-])")
        texts = [symbol.sub(lambda m: f"@{m.group(1)}{suffix}", text) for text in texts]
    cross = {name + suffix if name in renamed else name for name in cross}
    if glue_fns:
        return Split(texts[:-1], texts[-1], cross)
    return Split(texts, None, cross)
