"""Reading jaxprs back from text: JAX's printed format (0.4 .. 0.10) and sprue's own (the printer in
sprue.ir.core).

    text --jaxpr_lexer.tokenize--> tokens --Parser--> AST (jaxpr_ast) --jaxpr_eval.Evaluator--> ClosedJaxpr

The AST is evaluated by binding sprue's primitives under a trace (jaxpr_eval), so every
shape rule re-checks the program and the result is a well-formed ClosedJaxpr; the declared types
of the text are then compared with the ones sprue computes.

Grammar (whitespace and line breaks anywhere between tokens):

    program ::= ( 'let' ( NAME '=' jaxpr )+ 'in'? )* jaxpr       # JAX >= 0.4.36 hoists shared sub-jaxprs
    jaxpr   ::= '{' 'lambda' binder* ';' binder* '.' 'let' (eqn ';'?)* 'in' outs '}'
    binder  ::= NAME ':' type | '_' (':' type)?
    type    ::= DTYPE '[' (dim (',' dim)*)? ']'           dim: int / name / + - * // % ( )
    eqn     ::= binder* '=' PRIM ('[' param* ']')? atom*   (no binders and no '=': no outputs)
    param   ::= NAME '=' value ','?
    value   ::= jaxpr | '(' value* ')' | '[' value* ']' | NUM | STR | NAME | NAME '(' args ')' | '<...>'
              | 'let' ( NAME '=' jaxpr )+ 'in' value       # shared jaxprs scoped to one value (custom_linear_solve)
    atom    ::= NAME | literal        literal: 2.0:f64[]  2.0  True:bool[]  -inf:f32[]  nan  (1+2j):c64[]  0j:c64[]
    outs    ::= '(' atom (',' atom)* ','? ')' | atom*

JAX prints a jaxpr that fits in 80 columns on one line, its equations separated by ';'. Its variable
names are not kept apart from the keywords (the 221st variable is `in`, later ones `inf`, `let`,
`nan`, `lambda`), so a keyword or literal name is a variable wherever the grammar puts a variable:
`in` ends the equations only where no equation's outputs start (`in:f64[2] = ...` is an equation)
and, once a variable `in` is bound, only before the outputs and '}' (`add im in` reads it as an
operand); a literal name with a type (`inf:f32[]`) is a literal in an operand's place.
"""
from __future__ import annotations

from sprue.io.jaxpr_ast import Binder, Call, Eqn, Ident, JaxprAST, Lit, Opaque, Param, Program, TypeAST, VarRef
from sprue.io.jaxpr_eval import build
from sprue.io.jaxpr_lexer import LITERAL_NAMES, JaxprError, JaxprSyntaxError, JaxprUnsupportedError, Token, tokenize
from sprue.ir.core import check_static_type
from sprue.ir.shapes import MAX_DIM

__all__ = ["parse_program", "parse_jaxpr", "JaxprError", "JaxprSyntaxError", "JaxprUnsupportedError"]

_LITERAL_NAMES = LITERAL_NAMES

# Jaxprs in params, tuples in param values and parentheses in dimensions nest; the parser (and the
# evaluator, for jaxprs) recurse on them. Deeper than this is an error, not a RecursionError.
MAX_NESTING = 100


# -- the parser ----------------------------------------------------------------------------------
class Parser:
    def __init__(self, text: str, filename: str = "<jaxpr>"):
        self.filename = filename
        self.toks = tokenize(text, filename)
        self.i = 0
        self.scopes: list[set] = []   # names bound so far in each enclosing jaxpr
        self.depth = 0
        # shared jaxprs `let`-bound inside a param value (custom_linear_solve's transpose_solve=let
        # _lu_solve = {...} in {...}): kept under names of their own, which the names in the value
        # they scope are renamed to (the same name may be bound differently elsewhere)
        self.nested_shared: dict[str, JaxprAST] = {}
        self.shared_renames: list[dict[str, str]] = []

    # token helpers
    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def next(self) -> Token:
        t = self.toks[self.i]
        self.i += 1
        return t

    def at(self, text: str, kind: str | None = None) -> bool:
        t = self.tok
        return t.text == text and t.kind in ((kind,) if kind else ("PUNCT", "NAME"))

    def error(self, msg: str, tok: Token | None = None):
        t = tok or self.tok
        return JaxprSyntaxError(msg, self.filename, t.line, t.col)

    def enter(self, tok: Token) -> None:
        """One level deeper into a nested construct (paired with leave)."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error(f"nested more than {MAX_NESTING} levels deep", tok)

    def leave(self) -> None:
        self.depth -= 1

    def expect(self, text: str) -> Token:
        if self.tok.text != text or self.tok.kind not in ("PUNCT", "NAME"):
            got = "the end of the text" if self.tok.kind == "EOF" else repr(self.tok.text)
            raise self.error(f"expected {text!r}, got {got}")
        return self.next()

    def expect_name(self, what: str) -> Token:
        if self.tok.kind != "NAME":
            got = "the end of the text" if self.tok.kind == "EOF" else repr(self.tok.text)
            raise self.error(f"expected {what}, got {got}")
        return self.next()

    # program
    def program(self) -> Program:
        prog = Program(filename=self.filename)
        while self.at("let", "NAME"):
            self.next()
            while True:
                name = self.next()
                if name.kind not in ("NAME", "OPAQUE"):
                    raise self.error("expected the name of a shared jaxpr after 'let'", name)
                self.expect("=")
                prog.shared[name.text] = self.jaxpr()
                if self.at("in", "NAME"):
                    self.next()
                    break
                if self.tok.kind in ("NAME", "OPAQUE") and self.peek().text == "=" and not self.at("let", "NAME"):
                    continue
                break
        prog.main = self.jaxpr()
        prog.shared.update(self.nested_shared)
        if self.tok.kind != "EOF":
            raise self.error(f"unexpected {self.tok.text!r} after the end of the jaxpr")
        return prog

    def jaxpr(self) -> JaxprAST:
        self.enter(self.tok)
        try:
            return self._jaxpr()
        finally:
            self.leave()

    def _jaxpr(self) -> JaxprAST:
        start = self.expect("{")
        self.expect("lambda")
        self.scopes.append(set())
        first = self.binders(stop=(";", "."))
        if self.at(";"):
            self.next()
            consts, invars = first, self.binders(stop=(".",))
        else:
            consts, invars = [], first
        self.expect(".")
        self.expect("let")
        eqns = []
        while not (self.at("in", "NAME") and not self._starts_binders()):
            if self.tok.kind == "EOF" or self.at("}"):
                raise self.error("expected an equation or 'in'")
            eqns.append(self.eqn())
            if self.at(";"):   # JAX's one-line form: `let b:f32[] = sin a; c:f32[] = cos b in (c,) }`
                self.next()
        self.next()
        outs = self.outs()
        self.expect("}")
        self.scopes.pop()
        return JaxprAST(consts, invars, eqns, outs, start)

    def binders(self, stop) -> list[Binder]:
        out = []
        while not (self.tok.kind == "PUNCT" and self.tok.text in stop):
            t = self.expect_name("a variable")
            typ = None
            if self.at(":"):
                self.next()
                typ = self.type_()
            out.append(Binder(None if t.text == "_" else t.text, typ, t))
            if t.text != "_":
                self.scopes[-1].add(t.text)
        return out

    def type_(self) -> TypeAST:
        t = self.expect_name("an element type (f32, i64, bool, ...)")
        if self.tok.kind == "OPAQUE" and t.text == "key":   # a PRNG key array: key<fry>[...]
            t = Token(t.kind, t.text + self.next().text, t.line, t.col)
        self.expect("[")
        dims = []
        while not self.at("]"):
            dims.append(self.dim_expr())
            if self.at(","):
                self.next()
            elif not self.at("]"):
                raise self.error("expected ',' or ']' in a shape")
        self.next()
        if all(d[0] == "int" for d in dims):   # a static shape whose byte count overflows int64: no such array
            check_static_type(t.text, [d[1] for d in dims], f"{self.filename}:{t.line}:{t.col}")
        return TypeAST(t.text, dims, t)

    # dims: e ::= term (('+'|'-'|negative NUM) term)*; term ::= factor (('*'|'//'|'%') factor)*
    # The evaluator walks the tree recursively: a run of + and - (or of *) becomes a balanced tree
    # (`a+a+...+a`, 1,000 terms, is 10 levels deep, not 1,000); // and % do not associate, so each
    # adds a level, and a dimension deeper than MAX_NESTING is a syntax error at its start.
    def dim_expr(self):
        start = self.tok
        plus, minus = [self.dim_term()], []
        while True:
            if self.at("+") or self.at("-"):
                (plus if self.next().text == "+" else minus).append(self.dim_term())
            elif self.tok.kind == "NUM" and self.tok.text.startswith("-"):
                plus.append(self.dim_term())   # `a-1` lexes as `a` `-1`
            else:
                break
        e = _balanced("add", plus)
        if minus:
            e = ("sub", e, _balanced("add", minus))
        return self._check_depth(e, start)

    def dim_term(self):
        start = self.tok
        run, e = [self.dim_factor()], None
        while self.at("*") or self.at("//") or self.at("%"):
            op = {"*": "mul", "//": "floordiv", "%": "mod"}[self.next().text]
            if op == "mul":
                run.append(self.dim_factor())
                continue
            e = _balanced("mul", run if e is None else [e, *run])
            run = []
            e = self._check_depth((op, e, self.dim_factor()), start)
        if e is not None:
            run = [e, *run]
        return self._check_depth(_balanced("mul", run), start)

    def _check_depth(self, e, tok: Token):
        if _dim_depth(e) + self.depth > MAX_NESTING:
            raise self.error(f"a dimension nested more than {MAX_NESTING} levels deep", tok)
        return e

    def dim_factor(self):
        self.enter(self.tok)
        try:
            return self._dim_factor()
        finally:
            self.leave()

    def _dim_factor(self):
        t = self.tok
        if t.kind == "NUM":
            self.next()
            try:
                v = int(t.text)
            except ValueError:
                raise self.error(f"a dimension must be an integer, got {t.text}", t) from None
            if not -MAX_DIM <= v <= MAX_DIM:
                raise self.error(f"the size {t.text} does not fit in int64 (sizes are at most 2**63-1)", t)
            return ("int", v)
        if t.kind == "NAME":
            self.next()
            return ("name", t.text, t)
        if self.at("("):
            self.next()
            e = self.dim_expr()
            self.expect(")")
            return e
        if self.at("-"):
            self.next()
            return ("neg", self.dim_factor())
        raise self.error(f"expected a dimension, got {t.text!r}")

    # equations
    def _starts_binders(self) -> bool:
        """At `name:type ... =` or `name =` (the outputs of the next equation)?"""
        save = self.i
        try:
            while self.tok.kind == "NAME":
                self.next()
                if self.at(":"):
                    self.next()
                    self.type_()
                if self.at("="):
                    return True
            return False
        except JaxprSyntaxError:
            return False
        finally:
            self.i = save

    def eqn(self) -> Eqn:
        start = self.tok
        outs = []
        if self.tok.kind == "NAME" and self.peek().text in (":", "=") and self._starts_binders():
            while not self.at("="):
                t = self.expect_name("an output variable")
                typ = None
                if self.at(":"):
                    self.next()
                    typ = self.type_()
                outs.append(Binder(None if t.text == "_" else t.text, typ, t))
            self.next()
        prim = self.expect_name("a primitive name")
        params = {}
        if self.at("["):
            self.next()
            while not self.at("]"):
                k = self.expect_name("a param name")
                self.expect("=")
                if k.text in params:
                    raise self.error(f"param '{k.text}' given twice", k)
                params[k.text] = Param(self.value(), k)
                if self.at(","):
                    self.next()
            self.next()
        args = []
        while True:
            a = self.atom_or_none(start)
            if a is None:
                break
            args.append(a)
        for b in outs:
            if b.name is not None:
                self.scopes[-1].add(b.name)
        return Eqn(outs, prim.text, params, args, start)

    def atom_or_none(self, eqn_start: Token):
        t = self.tok
        if t.kind == "NUM":
            self.next()
            return Lit(t.text, self._lit_type(), t)
        if t.kind != "NAME" or t.text == "in" and self._in_ends_eqns():
            return None
        if t.text in _LITERAL_NAMES and self.peek().text == ":" and self.peek().kind == "PUNCT":
            # `inf:f32[]` is a typed literal, or the first output of the next equation (a variable
            # JAX named `inf`): only the latter starts a line at the column of this equation's start
            first_on_line = self.toks[self.i - 1].line < t.line
            if not (first_on_line and t.col == eqn_start.col and self._starts_binders()):
                self.next()
                return Lit(t.text, self._lit_type(), t)
        if self.peek().text in (":", "=") and self.peek().kind == "PUNCT" and self._starts_binders():
            return None   # the next equation's outputs
        if self._bound(t.text):
            self.next()
            return VarRef(t.text, t)
        if t.text in _LITERAL_NAMES:
            self.next()
            return Lit(t.text, self._lit_type(), t)
        if self.peek().text == "[" and self.peek().kind == "PUNCT":
            return None   # the next equation (one without outputs)
        self.next()
        return VarRef(t.text, t)   # not defined: reported when the equation is evaluated

    def _in_ends_eqns(self) -> bool:
        """At a NAME `in` in an operand's place: is it the keyword that ends the equations?

        Unless a variable named `in` is bound, yes. Once one is, the keyword is the `in` followed by
        the outputs and '}': `(`, or bare atoms up to '}' (the bare form cannot hold a variable `in`
        without ambiguity; JAX prints the outputs in parentheses)."""
        if not self._bound("in"):
            return True
        j = self.i + 1
        while True:
            t = self.toks[j]
            if t.kind == "PUNCT" and t.text in ("(", "}"):
                return t.text == "}" or j == self.i + 1
            if not (t.kind == "NUM" or (t.kind == "NAME" and t.text != "in")):
                return False
            j += 1
            if self.toks[j].text == ":" and self.toks[j].kind == "PUNCT":
                if t.kind == "NAME" and t.text not in _LITERAL_NAMES:
                    return False   # a typed binder: the next equation's outputs
                while self.toks[j].kind != "EOF" and self.toks[j].text != "]":   # a literal's type
                    j += 1
                if self.toks[j].kind == "EOF":
                    return False
                j += 1

    def _bound(self, name: str) -> bool:
        return bool(self.scopes) and name in self.scopes[-1]

    def _lit_type(self):
        if self.at(":"):
            self.next()
            return self.type_()
        return None

    def outs(self) -> list:
        if self.at("("):
            self.next()
            out = []
            while not self.at(")"):
                a = self.out_atom()
                out.append(a)
                if self.at(","):
                    self.next()
                elif not self.at(")"):
                    raise self.error("expected ',' or ')' in the outputs")
            self.next()
            return out
        out = []
        while not self.at("}"):
            out.append(self.out_atom())
        return out

    def out_atom(self):
        t = self.tok
        if t.kind == "NUM" or (t.kind == "NAME" and t.text in _LITERAL_NAMES and
                               (not self._bound(t.text) or self.peek().text == ":")):
            self.next()
            return Lit(t.text, self._lit_type(), t)
        if t.kind == "NAME":
            self.next()
            return VarRef(t.text, t)
        raise self.error(f"expected an output variable or literal, got {t.text!r}")

    # param values
    def value(self):
        self.enter(self.tok)
        try:
            return self._value()
        finally:
            self.leave()

    def _value(self):
        t = self.tok
        if self.at("{"):
            if self.peek().text == "lambda":
                return self.jaxpr()
            return Opaque(self.skip_balanced(), t)
        if self.at("(") or self.at("["):
            close = ")" if t.text == "(" else "]"
            self.next()
            items = []
            while not self.at(close):
                if self.tok.kind == "EOF":
                    raise self.error(f"unclosed {t.text!r}", t)
                items.append(self.value())
                if self.at(","):
                    self.next()
            self.next()
            return tuple(items) if close == ")" else list(items)
        if t.kind == "NUM":
            self.next()
            return _number(t.text)
        if t.kind == "STR":
            self.next()
            return t.text
        if t.kind == "OPAQUE":
            self.next()
            return Opaque(t.text, t)
        if t.kind == "NAME" and t.text == "let" and self.peek().kind in ("NAME", "OPAQUE") and self.peek(2).text == "=":
            return self.scoped_let()
        if t.kind == "NAME":
            return self._name_value(self.next())
        if self.at("-") and self.peek().kind == "NAME":
            self.next()
            v = self.value()
            return -v if isinstance(v, (int, float)) else v
        raise self.error(f"unexpected {t.text!r} in a param value")

    def _name_value(self, t):
        """A param value starting with the name t (already read): a constant, a call, or an Ident."""
        if t.text in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[t.text]
        if t.text in ("inf", "nan"):
            return float(t.text)
        if self.at("(") and self.tok.line == t.line and self.tok.col == t.col + len(t.text):
            self.next()
            args, kwargs = [], {}
            while not self.at(")"):
                if self.tok.kind == "EOF":
                    raise self.error("unclosed '('", t)
                if self.tok.kind == "NAME" and self.peek().text == "=":
                    k = self.next().text
                    self.next()
                    kwargs[k] = self.value()
                else:
                    args.append(self.value())
                if self.at(","):
                    self.next()
            self.next()
            return Call(t.text, args, kwargs, t)
        for renames in reversed(self.shared_renames):
            if t.text in renames:
                return Ident(renames[t.text], t)
        return Ident(t.text, t)

    def scoped_let(self):
        """`let NAME = jaxpr ... in value`: the value, its shared jaxprs' names renamed to unique ones."""
        self.next()
        renames: dict[str, str] = {}
        while self.tok.kind in ("NAME", "OPAQUE") and self.peek().text == "=":
            name = self.next()
            self.next()
            unique = f"{name.text}@{name.line}:{name.col}"
            self.shared_renames.append(dict(renames))
            try:
                self.nested_shared[unique] = self.jaxpr()
            finally:
                self.shared_renames.pop()
            renames[name.text] = unique
        self.expect("in")
        self.shared_renames.append(renames)
        try:
            return self.value()
        finally:
            self.shared_renames.pop()

    def skip_balanced(self) -> str:
        start, depth, parts = self.tok, 0, []
        while True:
            t = self.next()
            if t.kind == "EOF":
                raise self.error("unbalanced brackets", start)
            parts.append(t.text)
            if t.text in "{([" and t.kind == "PUNCT":
                depth += 1
            elif t.text in "})]" and t.kind == "PUNCT":
                depth -= 1
                if depth == 0:
                    return " ".join(parts)


def _balanced(op: str, items: list):
    """items[0] op items[1] op ... as a balanced tree of an associative op."""
    while len(items) > 1:
        items = [(op, items[i], items[i + 1]) if i + 1 < len(items) else items[i] for i in range(0, len(items), 2)]
    return items[0]


def _dim_depth(e) -> int:
    """How deep a dimension's tree is (the evaluator recurses that deep), without recursing."""
    depth, stack = 0, [(e, 1)]
    while stack:
        node, d = stack.pop()
        depth = max(depth, d)
        stack.extend((c, d + 1) for c in node[1:] if isinstance(c, tuple))
    return depth


def _number(text: str):
    try:
        return int(text)
    except ValueError:
        return float(text)


def parse_program(text: str, filename: str = "<jaxpr>") -> Program:
    """The AST of a jaxpr text (with any `let`-hoisted shared sub-jaxprs)."""
    return Parser(text, filename).program()


def parse_jaxpr(text: str, *, consts=None, implicit=None, filename: str = "<jaxpr>"):
    """Parse jaxpr text and build it with sprue's primitives: a ClosedJaxpr.

    `consts` gives the constvars' values in order (JAX's printer drops them; sprue.save keeps
    them); `implicit` the names of the leading invars that are implicit size arguments. Returns
    (closed_jaxpr, n_implicit)."""
    return build(parse_program(text, filename), consts=consts, implicit=implicit)
