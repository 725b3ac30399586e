"""Dimension patterns: the sizes users write in annotations, `sprue.i8["n", "m*4"]`.

A pattern is an integer expression over size names with + - * // % and parentheses (`n`,
`m*4`, `n*m`, `n+1`, `(n+3)//4`), with Python's precedence (unary minus binds tightest, then
* // %, then + -; all left-associative). It is read by a small parser of its own, never
evaluated as code, and without recursion per term: a run of + and - is one node holding all its
terms, a run of * // % one node holding all its factors, so `a+a+...+a` with 1,000 terms is two
levels deep. Only parentheses nest, at most MAX_NESTING deep (deeper is an error, as in the jaxpr
reader); every int must fit in int64 (shapes.MAX_DIM).

Matching a pattern against a dimension follows Relax: a name standing alone, or
multiplied by a constant (`m*4`, `4*m`), *binds* the name — by exact division for `c*m`, which
has no solution when the size is not a multiple of c; every other occurrence of a name is an
equality constraint checked once all names are bound (whatever the order they appear in).

A pattern may also be a row (OCANNL's row variable), only as the first entry of a shape:
`"*b"` (a named row: every `*b` of a signature is the same axes) or `"..."` (an anonymous row,
its own for each parameter; a signature renames it `...x` after the parameter). A row stands for
any number of leading axes; sprue passes it collapsed into one axis, so as a pattern it binds
one size, the product of the row's sizes, named as the row is.
"""
from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

from sprue.base.errors import SprueTypeError, at
from sprue.ir.shapes import MAX_DIM, Dim, DimExpr

MAX_NESTING = 100   # parentheses; the evaluator recurses once per level
_TOKEN = re.compile(r"\s*(?:(0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|\d[\d_]*)|([^\W\d]\w*)|(\*\*|//|[-+*%()]))")


@dataclass(frozen=True)
class DimPattern:
    """A parsed size annotation. `text` is what the user wrote (for messages). The tree:
    ("int", k) | ("name", s) | ("neg", t) | ("sum", ((+1 | -1, t), ...)) | ("term", t, ((op, t), ...))
    with op one of "*", "//", "%" (a term is its first factor combined left to right)."""
    text: str
    tree: object

    @property
    def row(self) -> str | None:
        """The row's name (`*b`, `...`, `...x`) when this pattern is a row, else None."""
        return self.tree[1] if self.tree[0] == "row" else None

    @property
    def names(self) -> list[str]:
        if self.tree[0] == "row":
            return [] if self.tree[1] == "..." else [self.tree[1]]
        out: list[str] = []
        stack = [self.tree]
        while stack:
            t = stack.pop()
            kind = t[0]
            if kind == "name":
                if t[1] not in out:
                    out.append(t[1])
            elif kind == "neg":
                stack.append(t[1])
            elif kind == "sum":
                stack.extend(x for _, x in reversed(t[1]))
            elif kind == "term":
                stack.extend(x for _, x in reversed(t[2]))
                stack.append(t[1])
        return out

    @property
    def binder(self) -> tuple[int, str] | None:
        """(c, name) when the pattern is `name` or `c*name` / `name*c` (c > 0): it binds name."""
        t = self.tree
        if t[0] == "name" or t[0] == "row" and t[1] != "...":
            return 1, t[1]
        if t[0] == "term" and len(t[2]) == 1 and t[2][0][0] == "*":
            a, b = t[1], t[2][0][1]
            if a[0] == "int" and b[0] == "name" and a[1] > 0:
                return a[1], b[1]
            if b[0] == "int" and a[0] == "name" and b[1] > 0:
                return b[1], a[1]
        return None

    @property
    def constant(self) -> int | None:
        return self.tree[1] if self.tree[0] == "int" else None

    def evaluate(self, env: dict[str, Dim]) -> Dim:
        """The dim this pattern denotes, given a dim for each of its names (recursing only into
        parentheses, which nest at most MAX_NESTING deep)."""
        def ev(t):
            kind = t[0]
            if kind == "int":
                return t[1]
            if kind in ("name", "row"):
                return env[t[1]]
            if kind == "neg":
                return -ev(t[1])
            if kind == "sum":
                acc = 0
                for sign, x in t[1]:
                    acc = acc + ev(x) if sign > 0 else acc - ev(x)
                return acc
            acc = ev(t[1])
            for op, x in t[2]:
                b = ev(x)
                if op == "*":
                    acc = acc * b
                elif not isinstance(b, int) or b <= 0:
                    raise SprueTypeError(f"size pattern '{self.text}': // and % need a positive constant on their"
                                         f" right")
                else:
                    acc = acc // b if op == "//" else acc % b
            return acc
        return ev(self.tree)

    def __str__(self):
        return self.text


class _Frame:
    """One level of parentheses being read: the terms of its sum so far, and the term being read."""
    __slots__ = ("terms", "sign", "first", "rest", "op", "neg")

    def __init__(self):
        self.terms: list = []
        self.sign, self.first, self.rest, self.op, self.neg = 1, None, [], None, False

    def operand(self, t) -> None:
        if self.neg:
            t, self.neg = ("neg", t), False
        if self.first is None:
            self.first = t
        else:
            self.rest.append((self.op, t))

    def end_term(self) -> None:
        self.terms.append((self.sign, self.first if not self.rest else ("term", self.first, tuple(self.rest))))
        self.first, self.rest, self.op = None, [], None

    def result(self):
        self.end_term()
        return self.terms[0][1] if len(self.terms) == 1 and self.terms[0][0] > 0 else ("sum", tuple(self.terms))


def parse_dim_pattern(text: str, where: str = "a size", loc: str | None = None) -> DimPattern:
    """Parse `text` ("m*4", "(n+3)//4") into a DimPattern; a SprueTypeError naming `where` (which
    annotation) and `loc` (the user's line, when known) for anything else."""
    def fail(why: str):
        return SprueTypeError(f"{where}: '{text}' is not a size expression ({why}){at(loc)}; write a name such as \"n\","
                              f" or an expression over names and ints with + - * // % such as \"m*4\" or"
                              f" \"(n+3)//4\"")
    src = text.strip()
    row = _row_pattern(src, fail)
    if row is not None:
        return row
    stack = [_Frame()]
    want_operand, pos = True, 0
    while True:
        m = _TOKEN.match(src, pos)
        if m is None:
            rest = src[pos:].strip()
            if rest:
                raise fail(f"'{rest[:20]}' is not allowed")
            break
        pos = m.end()
        num, name, punct = m.groups()
        if punct == "**":
            raise fail("'**' is not allowed")
        if want_operand:
            want_operand = not _read_operand(stack, num, name, punct, fail)
        else:
            want_operand = _read_operator(stack, punct, fail, src, m.start())
    if want_operand:
        raise fail("it ends without an operand" if src else "it is empty")
    if len(stack) > 1:
        raise fail("unbalanced '('")
    tree = stack[0].result()
    _check_divisors(tree, fail)
    return DimPattern(src, tree)


_ROW_NAME = re.compile(r"\*([^\W\d]\w*)")


def _row_pattern(src: str, fail) -> DimPattern | None:
    """`*b` (a named row), `...` (an anonymous one) or `...x` (the anonymous row of parameter x,
    as a signature renames it) as a row pattern; None for anything else."""
    if src.startswith("..."):
        return DimPattern(src, ("row", src))
    if src.startswith("*") and not src.startswith("**"):
        if not _ROW_NAME.fullmatch(src):
            raise fail("a row is '*' and a name, such as \"*b\"")
        return DimPattern(src, ("row", src))
    return None


def _read_operand(stack: list[_Frame], num: str | None, name: str | None, punct: str | None, fail) -> bool:
    """Read one token where an operand is expected: True when it was one (an int or a name), False
    for a prefix (unary minus or plus, an opening parenthesis)."""
    top = stack[-1]
    if num is not None:
        try:
            v = int(num, 0)
        except ValueError:
            raise fail(f"'{num}' is not an int") from None
        if v > MAX_DIM:
            raise fail(f"{num} does not fit in int64 (sizes are at most 2**63-1)")
        top.operand(("int", v))
        return True
    if name is not None:
        if keyword.iskeyword(name):
            raise fail(f"'{name}' is not allowed")
        top.operand(("name", name))
        return True
    if punct == "-":
        top.neg = not top.neg
    elif punct == "(":
        if len(stack) > MAX_NESTING:
            raise fail(f"parentheses nested more than {MAX_NESTING} deep")
        stack.append(_Frame())
    elif punct != "+":   # (a unary plus changes nothing)
        raise fail(f"expected a name, an int or '(' before '{punct}'")
    return False


def _read_operator(stack: list[_Frame], punct: str | None, fail, src: str, start: int) -> bool:
    """Read one token (at src[start:]) where an operator is expected: True when an operand must
    follow (a binary operator), False after a closing parenthesis."""
    top = stack[-1]
    if punct in ("*", "//", "%"):
        top.op = punct
        return True
    if punct in ("+", "-"):
        top.end_term()
        top.sign = 1 if punct == "+" else -1
        return True
    if punct == ")":
        if len(stack) == 1:
            raise fail("unbalanced ')'")
        stack.pop()
        stack[-1].operand(top.result())
        return False
    raise fail(f"expected an operator after '{src[:start].strip()[-20:]}'")


def _check_divisors(tree, fail) -> None:
    """// and % need a positive int on their right (a constant: sizes are divided exactly)."""
    stack = [tree]
    while stack:
        t = stack.pop()
        if t[0] == "neg":
            stack.append(t[1])
        elif t[0] == "sum":
            stack.extend(x for _, x in t[1])
        elif t[0] == "term":
            stack.append(t[1])
            for op, x in t[2]:
                if op in ("//", "%") and not (x[0] == "int" and x[1] > 0):
                    raise fail(f"'{op}' needs a positive int on its right")
                stack.append(x)


def pattern_of(d) -> DimPattern:
    """An annotation entry (an int, a string, or `...`) as a DimPattern."""
    if isinstance(d, DimPattern):
        return d
    if d is Ellipsis:
        return DimPattern("...", ("row", "..."))
    if isinstance(d, str):
        return parse_dim_pattern(d)
    return DimPattern(str(int(d)), ("int", int(d)))


def format_pattern_shape(patterns) -> str:
    return "[" + ", ".join(p.text for p in patterns) + "]"


__all__ = ["DimPattern", "parse_dim_pattern", "pattern_of", "format_pattern_shape", "DimExpr"]
