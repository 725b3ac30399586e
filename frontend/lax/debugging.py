"""debug_print: printing traced values from compiled code, JAX's `jax.debug.print`.

    sprue.debug.print("step {i}: loss {l:.4f}", i=i, l=loss)

The format is Python's (str.format's fields, specs and `!s`). Values known when tracing (Python
numbers and strings, numpy arrays) are formatted then, as Python would; each traced value is an
operand of one `debug_print[fmt=...]` equation, whose `fmt` numbers its fields by operand
(`'step {0}: loss {1:.4f}'`). Eagerly it prints `fmt.format(*values)`; compiled, the library's
own print routine (lowering/print_runtime.py) formats each value in C as numpy's `str` does and
writes the whole line at once, so it prints from a C host too. Like JAX's debug callbacks it has
no results and is never removed; under `grad` it prints the primal values (tangents and
cotangents are not printed); under `vmap` it prints once per batch element, as JAX does.
SPRUE_DEBUG_PRINT=0 drops every print when tracing (nothing is compiled for them)."""
from __future__ import annotations

import builtins
import dataclasses
import os
import string

import numpy as np

from sprue.base.errors import SprueTypeError, SprueValueError
from sprue.base.source_info import user_frame_summary
from sprue.interp.ad_util import aval_of, batch_rules, cost_rules, jvp_rules, vjp_rules
from sprue.interp.cost import free
from sprue.ir.core import ClosedJaxpr, Jaxpr, ShapedArray
from sprue.lax._rules import define
from sprue.lax.indexing import slice as _slice
from sprue.lax.structural import squeeze
from sprue.trace.tracing import Tracer, at

_FORMATTER = string.Formatter()
MAX_RANK = 8   # (the compiled print's routines: lowering/print_runtime.py)


def _print_rule(*xs: ShapedArray, fmt: str):
    fields = [f for _, f, _, _ in _FORMATTER.parse(fmt) if f is not None]
    if sorted({int(f) for f in fields}) != list(range(len(xs))):
        raise SprueValueError(f"debug_print: the format {fmt!r} must use each of its {len(xs)} operands"
                              f" by number ({{0}}, {{1}}, ...)")
    return []


def _print_impl(*xs, fmt: str):
    builtins.print(fmt.format(*(np.asarray(x) for x in xs)), flush=True)
    return []


debug_print_p = define("debug_print", _print_rule, _print_impl, multiple_results=True)


def enabled() -> bool:
    """Whether sprue.debug.print records anything (SPRUE_DEBUG_PRINT=0 turns it off)."""
    return os.environ.get("SPRUE_DEBUG_PRINT", "1").strip().lower() not in ("0", "false", "off", "no")


def _field_value(name: str, args: tuple, kwargs: dict, auto: list[int], fmt: str):
    if (name == "" and auto[0] < 0) or (name.isdigit() and auto[0] > 0):
        raise SprueValueError(f"sprue.debug.print: the format {fmt!r} mixes automatic ({{}}) and numbered"
                              f" ({{0}}) fields; use one kind{at(user_frame_summary())}")
    if name == "":
        name, auto[0] = str(auto[0]), auto[0] + 1
    elif name.isdigit():
        auto[0] = -1
    if name.isdigit():
        if int(name) >= len(args):
            raise SprueValueError(f"sprue.debug.print: the format {fmt!r} asks for positional argument {name},"
                                  f" but {len(args)} were given{at(user_frame_summary())}")
        return args[int(name)]
    if not name.isidentifier():
        raise SprueValueError(f"sprue.debug.print: the field {{{name}}} of {fmt!r} is not supported: fields name"
                              f" an argument ({{}}, {{0}}, {{x}}), without attributes or indexing; index"
                              f" the value before passing it{at(user_frame_summary())}")
    if name not in kwargs:
        raise SprueValueError(f"sprue.debug.print: the format {fmt!r} names {name!r}, which is not a keyword"
                              f" argument{at(user_frame_summary())}")
    return kwargs[name]


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def print(fmt: str, *args, **kwargs) -> None:  # noqa: A001  (JAX's name: jax.debug.print)
    """Print `fmt.format(*args, **kwargs)` when the code runs (compiled: each time the compiled
    code reaches it, also inside loops; eagerly: now). Traced values are printed as numpy prints
    arrays; a spec (`{x:.3f}`) formats a scalar as Python formats a number."""
    if not isinstance(fmt, str):
        raise SprueTypeError(f"sprue.debug.print: the format must be a str, got {type(fmt).__name__}"
                             f"{at(user_frame_summary())}")
    kwargs.pop("ordered", None)   # (JAX's ordering option: sprue's prints always run in program order)
    try:
        parsed = list(_FORMATTER.parse(fmt))
    except ValueError as err:
        raise SprueValueError(f"sprue.debug.print: {err} in the format {fmt!r}{at(user_frame_summary())}") from None
    if not enabled():
        return
    out, operands, auto = [], [], [0]
    for literal, name, spec, conversion in parsed:
        out.append(_escape(literal))
        if name is None:
            continue
        value = _field_value(name, args, kwargs, auto, fmt)
        if not isinstance(value, Tracer):   # known now: formatted now, as Python would
            if isinstance(value, (list, tuple, dict)) and _has_tracer(value):
                raise SprueTypeError(f"sprue.debug.print: the field {{{name}}} of {fmt!r} is a {type(value).__name__}"
                                     f" holding traced values; give each array its own field"
                                     f"{at(user_frame_summary())}")
            shown = _FORMATTER.convert_field(np.asarray(value) if isinstance(value, np.generic) else value, conversion)
            out.append(_escape(format(shown, spec)))
            continue
        if conversion == "r":
            raise SprueValueError(f"sprue.debug.print: the field {{{name}!r}} of {fmt!r}: a traced value is printed"
                                  f" as numpy's str; drop the !r{at(user_frame_summary())}")
        if spec and value.ndim:
            raise SprueTypeError(f"sprue.debug.print: the field {{{name}:{spec}}} of {fmt!r} gives a format spec for"
                                 f" a traced {value.aval.str_short()}; numpy formats only scalars with a spec"
                                 f" (index an element, or drop the spec){at(user_frame_summary())}")
        if spec:
            check_spec(spec, value.dtype, f"the field {{{name}:{spec}}} of {fmt!r}")
        if value.ndim > MAX_RANK:
            raise SprueValueError(f"sprue.debug.print: the field {{{name}}} of {fmt!r} is a traced"
                                  f" {value.aval.str_short()}; the compiled print takes arrays of rank at most"
                                  f" {MAX_RANK} (reshape it){at(user_frame_summary())}")
        out.append(f"{{{len(operands)}{':' + spec if spec else ''}}}")
        operands.append(value)
    if not operands:   # nothing traced: a constant line, printed whenever the code runs
        text = "".join(out).replace("{{", "{").replace("}}", "}")
        debug_print_p.bind(fmt=_escape(text))
        return
    debug_print_p.bind(*operands, fmt="".join(out))


def _has_tracer(tree) -> bool:
    if isinstance(tree, Tracer):
        return True
    items = tree.values() if isinstance(tree, dict) else tree if isinstance(tree, (list, tuple)) else ()
    return any(_has_tracer(x) for x in items)


# The format specs the compiled print implements (print_runtime.py): Python's
# [[fill]align][sign][#][0][width][.precision][type], with the types of C's printf.
_FLOAT_TYPES, _INT_TYPES = set("eEfFgG%"), set("dxXob")


def check_spec(spec: str, dtype, where: str) -> None:
    """Raise unless the compiled print can format a scalar of `dtype` with `spec` as Python does."""
    parsed = parse_spec(spec)
    kind = np.dtype(dtype).kind
    if parsed is None:
        raise SprueValueError(f"sprue.debug.print: {where}: the spec {spec!r} is not one the compiled print"
                              f" supports ([[fill]align][sign][#][0][width][.precision][type] with type one of"
                              f" e E f F g G % d x X o b){at(user_frame_summary())}")
    t = parsed["type"]
    if kind == "f" and t in _INT_TYPES:
        raise SprueTypeError(f"sprue.debug.print: {where}: the spec {spec!r} does not apply to a {np.dtype(dtype).name}"
                             f" value{at(user_frame_summary())}")


def parse_spec(spec: str) -> dict | None:
    """Python's format spec, split into its parts; None for one with grouping (`,`/`_`) or a type
    the compiled print does not implement."""
    i, n, out = 0, len(spec), {"fill": " ", "align": "", "sign": "-", "alt": False, "zero": False,
                                "width": 0, "precision": -1, "type": ""}
    if n >= 2 and spec[1] in "<>^=":
        out["fill"], out["align"], i = spec[0], spec[1], 2
    elif n >= 1 and spec[0] in "<>^=":
        out["align"], i = spec[0], 1
    if i < n and spec[i] in "+- ":
        out["sign"], i = spec[i], i + 1
    if i < n and spec[i] == "#":
        out["alt"], i = True, i + 1
    if i < n and spec[i] == "0":
        out["zero"], i = True, i + 1
    j = i
    while j < n and spec[j].isdigit():
        j += 1
    out["width"], i = int(spec[i:j] or 0), j
    if i < n and spec[i] == ".":
        j = i + 1
        while j < n and spec[j].isdigit():
            j += 1
        if j == i + 1:
            return None
        out["precision"], i = int(spec[i + 1:j]), j
    if i < n and spec[i] in _FLOAT_TYPES | _INT_TYPES:
        out["type"], i = spec[i], i + 1
    return out if i == n else None


# == transformation rules (tables in sprue.interp.ad_util): jvp, vjp, batching, cost ===============
# A print has no results: under jvp it prints the primals (JAX prints primal values under
# differentiation); in a vjp's backward pass it does nothing. Batched, each batch element is
# printed in turn (JAX's debug_callback batching rule), for a batch of static size; one of a size
# known only at run time is printed whole.


def _print_jvp(primals, tangents, *, fmt):
    debug_print_p.bind(*primals, fmt=fmt)
    return [], []


def _element(x, d, i: int):
    shape = aval_of(x).shape
    start = [0] * len(shape)
    limit = list(shape)
    start[d], limit[d] = i, i + 1
    return squeeze(_slice(x, start, limit), (d,))


def _print_batch(args, dims, *, fmt):
    sizes = {aval_of(x).shape[d] for x, d in zip(args, dims) if d is not None}
    size = next(iter(sizes))
    if not isinstance(size, (int, np.integer)):
        debug_print_p.bind(*args, fmt=fmt)
        return [], []
    for i in range(int(size)):
        debug_print_p.bind(*(x if d is None else _element(x, d, i) for x, d in zip(args, dims)), fmt=fmt)
    return [], []


jvp_rules[debug_print_p], batch_rules[debug_print_p], cost_rules[debug_print_p] = _print_jvp, _print_batch, free
vjp_rules[debug_print_p] = lambda cts, primals, outs, *, fmt: [None] * len(primals)


# == compiling without the prints (`sprue compile --no-debug-print`) ===============================
def without_prints(closed):
    """`closed` (a ClosedJaxpr) with every debug_print equation left out, in nested jaxprs too
    (loop bodies, branches, callees): the program computes the same without printing."""
    def strip(x):
        if isinstance(x, ClosedJaxpr):
            return ClosedJaxpr(strip(x.jaxpr), x.consts)
        if isinstance(x, Jaxpr):
            eqns = [dataclasses.replace(e, params={k: strip(v) for k, v in e.params.items()})
                    for e in x.eqns if e.primitive is not debug_print_p]
            return Jaxpr(x.constvars, x.invars, x.outvars, eqns)
        if isinstance(x, (tuple, list)):
            return type(x)(strip(y) for y in x)
        return x
    return strip(closed)


__all__ = ["MAX_RANK", "check_spec", "debug_print_p", "enabled", "parse_spec", "print", "without_prints"]
