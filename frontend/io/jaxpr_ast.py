"""The syntax tree of a jaxpr text, as jaxpr_parser.Parser makes it and jaxpr_eval.Evaluator reads it.

Every node keeps the token it starts at (for error messages at the user's line and column).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sprue.io.jaxpr_lexer import Token


@dataclass
class TypeAST:
    dtype: str
    dims: list   # ('int', v) | ('name', s, tok) | (op, lhs, rhs) | ('neg', x)
    tok: Token


@dataclass
class Binder:
    name: str | None   # None: `_`
    type: TypeAST | None
    tok: Token


@dataclass
class VarRef:
    name: str
    tok: Token


@dataclass
class Lit:
    text: str            # '2.0', '-1', 'True', 'inf', '-inf', 'nan'
    type: TypeAST | None  # None: printed untyped (JAX < 0.4.?): inferred from the equation
    tok: Token


@dataclass
class Param:
    value: Any
    tok: Token


@dataclass
class Eqn:
    outs: list[Binder]
    prim: str
    params: dict[str, Param]
    args: list
    tok: Token


@dataclass
class JaxprAST:
    constvars: list[Binder]
    invars: list[Binder]
    eqns: list[Eqn]
    outs: list
    tok: Token


@dataclass
class Ident:
    """A bare name in a param value: a dtype (`float32`), an enum (`GatherScatterMode.CLIP`), a name."""
    name: str
    tok: Token


@dataclass
class Call:
    """`Name(args, k=v)` in a param value: `GatherDimensionNumbers(...)`, `np.int64(2)`, `dtype('f4')`."""
    name: str
    args: list
    kwargs: dict
    tok: Token


@dataclass
class Opaque:
    """A repr sprue does not interpret (`<function ...>`, `{...}`)."""
    text: str
    tok: Token


@dataclass
class Program:
    shared: dict[str, JaxprAST] = field(default_factory=dict)
    main: JaxprAST | None = None
    filename: str = "<jaxpr>"
