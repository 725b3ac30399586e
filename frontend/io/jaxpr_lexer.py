"""Tokens of JAX's jaxpr text format, and the errors of reading jaxpr text.

The printed form (JAX 0.4 .. 0.10, and sprue's own printer, sprue.ir.core) is free-form: whitespace
and line breaks may appear between any two tokens. Tokens:

    NAME    a  f64  scatter-add  np.int64  GatherScatterMode.CLIP  True  inf  nan
    NUM     2  -1  2.0  1e-05  -inf  0j  (1+2j)
    STR     'text'  "text"
    OPAQUE  <function f at 0x7f...>  <lambda>   (reprs JAX prints in angle brackets)
    PUNCT   { } [ ] ( ) , ; : = . * + - // %

`#` starts a comment that runs to the end of the line (sprue.save's header lives in comments).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from sprue.base.errors import ParseError, UnsupportedError
from sprue.ir.core import KEYWORDS, LITERAL_NAMES, RESERVED_NAMES  # noqa: F401  (the reader's words: beside the printer)


class JaxprError(ParseError):
    """A jaxpr text that cannot be turned into a program; the message starts with file:line:col."""

    def __init__(self, message: str, filename: str = "<jaxpr>", line: int = 0, col: int = 0):
        self.filename, self.line, self.col, self.detail = filename, line, col, message
        super().__init__(f"{filename}:{line}:{col}: {message}" if line else f"{filename}: {message}")


class JaxprSyntaxError(JaxprError):
    """A jaxpr text that does not follow the grammar of JAX's printed jaxprs."""


class JaxprUnsupportedError(JaxprError, UnsupportedError):
    """A well-formed jaxpr that uses a primitive or a param sprue does not compile."""


@dataclass(frozen=True)
class Token:
    kind: str   # NAME NUM STR OPAQUE PUNCT EOF
    text: str
    line: int
    col: int

    def __repr__(self):
        return f"{self.kind}({self.text!r}@{self.line}:{self.col})"


_SCATTER = re.compile(r"scatter-(?:add|mul|min|max|apply|sub)\b")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_NUM = re.compile(r"-?(?:\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+(?:[eE][+-]?\d+)?|\d+)", re.ASCII)
_MAX_NUM_LEN = 400   # longer numbers are rejected: no dtype holds them (and int() refuses > 4300 digits)
_NEG_SPECIAL = re.compile(r"-(?:inf|nan)\b")
# complex literals as Python's repr writes them (JAX prints `(1+2j):c64[]`, `0j:c64[]`, `(nan+infj)`)
_REAL = r"(?:\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|inf|nan)"   # unambiguous: linear time
_COMPLEX = re.compile(rf"\((?:-?{_REAL})?[+-]{_REAL}j\)|-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?j\b", re.ASCII)
_PUNCT1 = set("{}[](),;:=.*+-%")


# Tokens a regular expression reads whole, tried in this order: `scatter-add` is one name, `-inf` one
# number; names are ASCII letters only (c.isalpha() is true of 'é' too).
_WORDS = ((_COMPLEX, "NUM"), (_SCATTER, "NAME"), (_NEG_SPECIAL, "NUM"), (_NAME, "NAME"))


def tokenize(text: str, filename: str = "<jaxpr>") -> list[Token]:
    toks: list[Token] = []
    i, n, line, line_start = 0, len(text), 1, 0
    while i < n:
        c = text[i]
        col = i - line_start + 1
        if c == "\n":
            i += 1
            line += 1
            line_start = i
            continue
        if c.isspace():
            i += 1
            continue
        if c == "#":
            while i < n and text[i] != "\n":
                i += 1
            continue
        raw = _raw_param_value(text, i, toks)
        if raw is not None:
            toks.append(Token("STR", raw[0], line, col))
            i = raw[1]
            continue
        word = _word(text, i, line, col)
        if word is not None:
            toks.append(word)
            i += len(word.text)
            continue
        m = _NUM.match(text, i) if c in "-.0123456789" else None
        if m and (c != "-" or text[i + 1] in "0123456789") and (c != "." or not toks or toks[-1].text != "]"):
            if len(m.group()) > _MAX_NUM_LEN:
                raise JaxprSyntaxError(f"a number of {len(m.group())} characters (more than {_MAX_NUM_LEN})",
                                       filename, line, col)
            toks.append(Token("NUM", m.group(), line, col))
            i = m.end()
            continue
        if c in "'\"":
            value, i, line, line_start = _string(text, i, filename, line, line_start, col)
            toks.append(Token("STR", value, line, col))
            continue
        if c == "<":
            j = _opaque_end(text, i, filename, line, col)
            toks.append(Token("OPAQUE", text[i:j], line, col))
            i = j
            continue
        if text.startswith("//", i):
            toks.append(Token("PUNCT", "//", line, col))
            i += 2
            continue
        if c in _PUNCT1:
            toks.append(Token("PUNCT", c, line, col))
            i += 1
            continue
        raise JaxprSyntaxError(f"unexpected character {c!r}", filename, line, col)
    toks.append(Token("EOF", "", line, i - line_start + 1))
    return toks


# jax.debug.print's params (JAX >= 0.6): `fmt` is the user's format string, printed unquoted (its
# params are sorted by name, so `has_placeholders` follows it: one line or several), and `in_tree` a
# PyTreeDef whose leaves print as `*`; each is read as one string
_FMT_END = re.compile(r"\n| has_placeholders=")


def _raw_param_value(text: str, i: int, toks: list[Token]) -> tuple[str, int] | None:
    """(the value, the index after it) of a param value printed as free text that starts at i."""
    if toks and toks[-1].text == "=" and len(toks) >= 3 and toks[-2].text == "fmt" and toks[-3].text == "[" \
            and text[i] not in "'\"":
        m = _FMT_END.search(text, i)
        end = m.start() if m else len(text)
        return text[i:end].rstrip(), end
    if text.startswith("PyTreeDef(", i):
        depth, j = 0, i + len("PyTreeDef")
        while j < len(text) and text[j] != "\n":
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
            if depth == 0:
                return text[i:j], j
    return None


def _word(text: str, i: int, line: int, col: int) -> Token | None:
    """The name or special number (`-inf`) at i, if one starts there."""
    for pattern, kind in _WORDS:
        m = pattern.match(text, i)
        if m:
            return Token(kind, m.group(), line, col)
    return None


def _string(text: str, i: int, filename: str, line: int, line_start: int, col: int):
    """The quoted string starting at i (escapes \\n, \\t and \\<c> read): (its value, the index after
    it, and the line and line start after it: a string may span lines)."""
    quote, n = text[i], len(text)
    j, buf = i + 1, []
    while j < n and text[j] != quote:
        if text[j] == "\\" and j + 1 < n:
            buf.append({"n": "\n", "t": "\t"}.get(text[j + 1], text[j + 1]))
            j += 2
            continue
        if text[j] == "\n":
            line += 1
            line_start = j + 1
        buf.append(text[j])
        j += 1
    if j >= n:
        raise JaxprSyntaxError("unterminated string", filename, line, col)
    return "".join(buf), j + 1, line, line_start


def _opaque_end(text: str, i: int, filename: str, line: int, col: int) -> int:
    """The index after the `<...>` (nested brackets balanced, on one line) starting at i."""
    depth, j, n = 0, i, len(text)
    while j < n:
        if text[j] == "<":
            depth += 1
        elif text[j] == ">":
            depth -= 1
            if depth == 0:
                break
        elif text[j] == "\n":
            break
        j += 1
    if j >= n or text[j] != ">":
        raise JaxprSyntaxError("unterminated '<...>'", filename, line, col)
    return j + 1
