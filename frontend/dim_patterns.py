"""Dimension patterns: the sizes users write in annotations, `sprue.i8["n", "m*4"]`.

A pattern is an integer expression over size names with + - * // % and parentheses (`n`,
`m*4`, `n*m`, `n+1`, `(n+3)//4`), parsed with Python's own grammar (never evaluated as code).
Matching a pattern against a dimension follows seed 003 (Relax): a name standing alone, or
multiplied by a constant (`m*4`, `4*m`), *binds* the name — by exact division for `c*m`, which
has no solution when the size is not a multiple of c; every other occurrence of a name is an
equality constraint checked once all names are bound (whatever the order they appear in).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from .errors import SprueTypeError
from .shapes import Dim, DimExpr

_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}


@dataclass(frozen=True)
class DimPattern:
    """A parsed size annotation. `text` is what the user wrote (for messages)."""
    text: str
    tree: object      # ("int", k) | ("name", s) | ("neg", t) | (op, left, right)

    @property
    def names(self) -> list[str]:
        out: list[str] = []

        def walk(t):
            if t[0] == "name":
                if t[1] not in out:
                    out.append(t[1])
            elif t[0] == "neg":
                walk(t[1])
            elif t[0] != "int":
                walk(t[1])
                walk(t[2])
        walk(self.tree)
        return out

    @property
    def binder(self) -> tuple[int, str] | None:
        """(c, name) when the pattern is `name` or `c*name` / `name*c` (c > 0): it binds name."""
        t = self.tree
        if t[0] == "name":
            return 1, t[1]
        if t[0] == "*":
            a, b = t[1], t[2]
            if a[0] == "int" and b[0] == "name" and a[1] > 0:
                return a[1], b[1]
            if b[0] == "int" and a[0] == "name" and b[1] > 0:
                return b[1], a[1]
        return None

    @property
    def constant(self) -> int | None:
        return self.tree[1] if self.tree[0] == "int" else None

    def evaluate(self, env: dict[str, Dim]) -> Dim:
        """The dim this pattern denotes, given a dim for each of its names."""
        def ev(t):
            kind = t[0]
            if kind == "int":
                return t[1]
            if kind == "name":
                return env[t[1]]
            if kind == "neg":
                return -ev(t[1])
            a, b = ev(t[1]), ev(t[2])
            if kind == "+":
                return a + b
            if kind == "-":
                return a - b
            if kind == "*":
                return a * b
            if not isinstance(b, int) or b <= 0:
                raise SprueTypeError(f"size pattern '{self.text}': // and % need a positive constant on their right")
            return a // b if kind == "//" else a % b
        return ev(self.tree)

    def __str__(self):
        return self.text


def parse_dim_pattern(text: str, where: str = "a size") -> DimPattern:
    """Parse `text` ("m*4", "(n+3)//4") into a DimPattern; a clear error for anything else."""
    def fail(why: str):
        return SprueTypeError(f"{where}: '{text}' is not a size expression ({why}); write a name such as \"n\","
                              f" or an expression over names and ints with + - * // % such as \"m*4\" or"
                              f" \"(n+3)//4\"")
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise fail("it does not parse") from None

    def conv(n):
        if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool):
            return ("int", n.value)
        if isinstance(n, ast.Name):
            return ("name", n.id)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return ("neg", conv(n.operand))
        if isinstance(n, ast.BinOp) and type(n.op) in _OPS:
            op = _OPS[type(n.op)]
            right = conv(n.right)
            if op in ("//", "%") and not (right[0] == "int" and right[1] > 0):
                raise fail(f"'{op}' needs a positive int on its right")
            return (op, conv(n.left), right)
        raise fail(f"'{ast.unparse(n)}' is not allowed")
    return DimPattern(text.strip(), conv(node))


def pattern_of(d) -> DimPattern:
    """An annotation entry (an int or a string) as a DimPattern."""
    if isinstance(d, DimPattern):
        return d
    if isinstance(d, str):
        return parse_dim_pattern(d)
    return DimPattern(str(int(d)), ("int", int(d)))


def format_pattern_shape(patterns) -> str:
    return "[" + ", ".join(p.text for p in patterns) + "]"


__all__ = ["DimPattern", "parse_dim_pattern", "pattern_of", "format_pattern_shape", "DimExpr"]
