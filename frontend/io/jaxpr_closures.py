"""The constvars of the jaxprs a printed program calls, whose values JAX's printer drops as it does
the main jaxpr's (JAX >= 0.7 hoists array constants -- jnp.piecewise's coefficients, expm's Pade
terms -- into the ClosedJaxprs in the eqns' params).

They become the program's parameters after the main jaxpr's constvars, in the order the text
declares them (called_constvars; tests/jax_corpus/make_heldout.py's called_consts collects their
values from a ClosedJaxpr in that order). Where the called jaxpr runs inline (a jit, a custom_jvp
call) its constvars are those parameters; inside a cond branch or a while / scan body the traced
body captures them, and `hoisted` makes the captures the primitive's leading operands, as
sprue.lax's cond / while_loop / scan do with a body's closure (control_flow.api).
"""
from __future__ import annotations

from sprue.io.jaxpr_ast import Binder, JaxprAST, Program
from sprue.ir.core import ClosedJaxpr, Jaxpr, Var

# the primitives whose jaxprs' captures `hoisted` makes operands
HOISTING = {"cond", "while", "scan"}


def called_constvars(prog: Program) -> list[Binder]:
    """The constvars of the jaxprs the main one calls (a jit's, a cond branch's, a shared `let`
    definition's), in the order the text declares them."""
    seen, found = set(), []

    def visit(value):
        if isinstance(value, JaxprAST) and id(value) not in seen:
            seen.add(id(value))
            found.extend(value.constvars)
            for e in value.eqns:
                for p in e.params.values():
                    visit(p.value)
        elif isinstance(value, (list, tuple)):
            for v in value:
                visit(v)
    for ast in prog.shared.values():
        visit(ast)
    main_consts = {id(b) for b in prog.main.constvars}
    visit(prog.main)
    return sorted((b for b in found if id(b) not in main_consts), key=lambda b: (b.tok.line, b.tok.col))


def leading_constvars(prog: Program, consts_given: bool) -> list[Binder]:
    """The parameters that lead the explicit arguments: the main jaxpr's constvars (unless their values
    were given, as sprue.save's header gives them), then the called jaxprs' (called_constvars)."""
    return [*(() if consts_given else prog.main.constvars), *called_constvars(prog)]


def captures(params: dict) -> bool:
    """Whether a jaxpr param of the equation captured values of the enclosing trace."""
    return any(isinstance(j, ClosedJaxpr) and j.consts for v in params.values()
               for j in (v if isinstance(v, tuple) else (v,)))


def _opened(closed: ClosedJaxpr, order: list) -> ClosedJaxpr:
    """`closed` taking the captures `order` as leading parameters (a fresh one for each it lacks)."""
    j = closed.jaxpr
    mine = {id(c): v for c, v in zip(closed.consts, j.constvars)}
    lead = [mine.get(id(c)) or Var(c.aval) for c in order]
    return ClosedJaxpr(Jaxpr([], [*lead, *j.invars], j.outvars, j.eqns), [])


def _unique(values: list) -> list:
    seen: dict[int, object] = {}
    for v in values:
        seen.setdefault(id(v), v)
    return list(seen.values())


def hoisted(name: str, args: list, params: dict) -> tuple[list, dict]:
    """cond / while / scan whose jaxprs captured values: the captures as leading operands (cond: after
    the index, one list for every branch; while: before the cond's and the body's own consts; scan:
    before its consts)."""
    params = dict(params)
    if name == "cond":
        joint = _unique([c for b in params["branches"] for c in b.consts])
        params["branches"] = tuple(_opened(b, joint) for b in params["branches"])
        return [args[0], *joint, *args[1:]], params
    if name == "while":
        cond, body = params["cond_jaxpr"], params["body_jaxpr"]
        cn, bn = params["cond_nconsts"], params["body_nconsts"]
        params.update(cond_jaxpr=_opened(cond, cond.consts), cond_nconsts=cn + len(cond.consts),
                      body_jaxpr=_opened(body, body.consts), body_nconsts=bn + len(body.consts))
        return [*cond.consts, *args[:cn], *body.consts, *args[cn:cn + bn], *args[cn + bn:]], params
    body = params["jaxpr"]   # scan
    params.update(jaxpr=_opened(body, body.consts), num_consts=params["num_consts"] + len(body.consts))
    if params.get("linear") is not None:
        params["linear"] = (False,) * len(body.consts) + tuple(params["linear"])
    return [*body.consts, *args], params
