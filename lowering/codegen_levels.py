"""Which functions of an optimized module LLVM's code generator works hard on.

Code generation (instruction selection, scheduling, register allocation) costs time in proportion to
a function's instructions, whether or not they run often. Much of what sprue emits runs once per
call: the C wrapper reading hundreds of argument descriptors and storing hundreds of results, the
functions that call a deep network's parts and runs in turn (partition.py, outline.py). That glue
is straight-line code of loads, stores and calls, and was most of the code generator's time on
deep programs (a 300-layer training step: 214 of its objects' ms; 127 ms with the glue at O0).

A function is glue when it has no loop (every branch goes forward in the text: a conservative
test, a loop laid out oddly only keeps full code generation), is long enough for its code
generation to matter, and computes little (few floating-point or vector instructions: a fully
unrolled computation on small arrays is not glue). Glue gets `optnone` (with the `noinline` it
requires) just before code generation, after the optimizer: LLVM then selects its instructions
with FastISel and skips the machine-level optimizations for it, as at -O0, like a JIT's baseline
tier (V8's, HotSpot's) for code that runs once. Its run time is a handful of nanoseconds per call
either way.
"""
from __future__ import annotations

import re

__all__ = ["GLUE_MIN_INSTRUCTIONS", "GLUE_MAX_COMPUTE", "body_is_glue", "glue_functions", "is_instruction"]

# A loop-free function of fewer instructions costs little to generate at full effort (the C wrapper
# of a function of a few arrays has ~60).
GLUE_MIN_INSTRUCTIONS = 100
# ... and one whose floating-point and vector instructions are more than this share of all computes.
GLUE_MAX_COMPUTE = 0.125

_DEFINE = re.compile(r"^define [^\n]*?@([\w.$\"-]+)\(", re.M)
_LABEL = re.compile(r"^([\w.$-]+):")
_TARGET = re.compile(r"label %([\w.$-]+)")
_COMPUTE = re.compile(r"= (?:fadd|fsub|fmul|fdiv|frem|fneg|fcmp)\b|<\d+ x |@llvm\.(?:fmuladd|fma|exp|log|sin|cos|pow|sqrt|tanh)")


def is_instruction(line: str) -> bool:
    """Whether a line of a function's body in LLVM IR text is an instruction (not a label or a comment)."""
    return line.startswith("  ") and not line.lstrip().startswith(";")


def body_is_glue(lines: list[str]) -> bool:
    """Whether a function whose body (between its `define` and `}` lines) is `lines` is glue."""
    seen: set[str] = set()
    instructions = compute = 0
    for line in lines:
        label = _LABEL.match(line)
        if label:
            seen.add(label.group(1))
            continue
        if not is_instruction(line):
            continue
        instructions += 1
        if _COMPUTE.search(line):
            compute += 1
        if "label %" in line and any(t in seen for t in _TARGET.findall(line)):
            return False   # a branch back: a loop (or a layout we do not judge)
    return instructions >= GLUE_MIN_INSTRUCTIONS and compute <= GLUE_MAX_COMPUTE * instructions


def glue_functions(optimized_ir: str) -> list[str]:
    """The names of the functions of `optimized_ir` (LLVM IR text) that are glue (above)."""
    names = []
    starts = [(m.start(), m.group(1)) for m in _DEFINE.finditer(optimized_ir)]
    for start, name in starts:
        end = optimized_ir.find("\n}", start)
        if end < 0:
            continue
        # (nothing branches to the entry block, LLVM's rule: its label, if any, is not needed)
        if not name.startswith('"') and body_is_glue(optimized_ir[start:end].split("\n")[1:]):
            names.append(name)
    return names
