"""Keeps LLVM's code generator from turning an in-place select into a masked store.

LLVM 22's DAG combiner folds `store (select m, x, (load p)), p` -- an array updated in place where
a mask holds, `zr = where(inside, zr2, zr)` in a loop carrying zr -- into one masked store
(llvm-project PR 145176). On AMD's Zen 1-3 the AVX masked store (vmaskmovpd) is microcoded, tens
of cycles where a blend and a plain store take two (llvm-project issue 213195; the fix, PR 214187,
is later than the LLVM llvmlite carries). The Mandelbrot program's loop of three such updates ran
36-46 ms instead of 14-22.

keep_stores_unmasked runs on the optimized IR, before code generation: the loaded operand of
every such select is read through a `freeze` of the load, which the combiner does not look
through and which costs no instruction, so the select stays a blend and the store a store.
"""
from __future__ import annotations

import re

_LOAD = re.compile(r"^\s*(%[-\w.$]+) = load (<\d+ x \w+>), ptr (%[-\w.$]+)")
_SELECT = re.compile(r"^\s*(%[-\w.$]+) = select (?:[a-z]+ )*<\d+ x i1> ")
_OPERAND = re.compile(r"(<\d+ x \w+>) (%[-\w.$]+)(?=,|$)")
_STORE = re.compile(r"^\s*store (<\d+ x \w+>) (%[-\w.$]+), ptr (%[-\w.$]+)")


def _fix_function(lines: list[str], first: int, last: int, counter: list[int]) -> None:
    """Rewrites lines[first:last] (one function's body) in place."""
    loads: dict[str, tuple[int, str, str]] = {}     # name -> (line, type, pointer)
    stored: set[tuple[str, str]] = set()            # (value, pointer)
    selects: list[tuple[int, str]] = []
    for i in range(first, last):
        line = lines[i]
        if (m := _LOAD.match(line)) is not None:
            loads[m.group(1)] = (i, m.group(2), m.group(3))
        elif (m := _STORE.match(line)) is not None:
            stored.add((m.group(2), m.group(3)))
        elif (m := _SELECT.match(line)) is not None:
            selects.append((i, m.group(1)))
    inserts: dict[int, list[str]] = {}
    for i, result in selects:
        for vtype, name in _OPERAND.findall(lines[i]):
            if name not in loads or loads[name][1] != vtype or (result, loads[name][2]) not in stored:
                continue
            frozen = f"%sprue.unmasked.{counter[0]}"
            counter[0] += 1
            inserts.setdefault(loads[name][0], []).append(f"  {frozen} = freeze {vtype} {name}")
            lines[i] = re.sub(re.escape(f"{vtype} {name}") + r"(?=,|$)", f"{vtype} {frozen}", lines[i])
    for at in sorted(inserts, reverse=True):
        lines[at + 1:at + 1] = inserts[at]


def keep_stores_unmasked(optimized_ir: str) -> str:
    """The module with every `store (select m, x, (load p)), p` reading its load through a freeze
    (module doc); the same string object where there is none."""
    if " select " not in optimized_ir:
        return optimized_ir
    lines = optimized_ir.split("\n")
    counter = [0]
    starts = [i for i, line in enumerate(lines) if line.startswith("define ")]
    for start in reversed(starts):       # from the last: insertions do not move earlier functions
        end = next(i for i in range(start, len(lines)) if lines[i] == "}")
        _fix_function(lines, start + 1, end, counter)
    return "\n".join(lines) if counter[0] else optimized_ir


__all__ = ["keep_stores_unmasked"]
