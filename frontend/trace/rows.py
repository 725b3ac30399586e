"""Which operations carry a row through, checked as each equation is traced (OCANNL's row variables).

A row (`sprue.f64["*b", "n"]`: any number of leading axes) is traced as one axis whose size is
the row's implicit size B, the product of the row's sizes; the function is compiled once for every
rank of the row, and the boundary (frontend/api/row_boundary.py) collapses and restores it. That
is right only where the program treats the row as one opaque batch axis, as numpy's broadcasting
does leading axes: elementwise operations, broadcasting against arrays without the row (or with 1
in its place: OCANNL's dimension-1 subtyping), reductions over other axes or over every axis,
matmul with the row as a batch or free axis, slicing and reshaping the other axes. An operation
that needs the row's rank — an axis of the row by its number, a transpose or reshape that moves
it, a contraction over it — is an error here, naming the operation and the user's line.

The rule every equation obeys: an array mentions a row only as the exact size of its first axis.
`row_rules[name](params, in_avals, out_avals)` says what more a primitive needs (None: fine, or
why not); a primitive with no rule and not in ELEMENTWISE may not touch a row at all.
"""
from __future__ import annotations

import sys
from typing import Callable, Sequence

from sprue.base.errors import SprueTypeError, at
from sprue.ir.shapes import DimExpr, DimVar, dim_vars_of
from sprue.runtime.kernel_signature import is_row_name

__all__ = ["check_broadcast", "check_rows", "row_name_of", "ELEMENTWISE", "row_rules", "RowShape", "user_reads_row"]

def row_name_of(d) -> str | None:
    """The row a dim is exactly the size of (`*b`, `...x`), else None."""
    if not isinstance(d, DimExpr) or len(d.terms) != 1:
        return None
    mono, coef = d.terms[0]
    if coef != 1 or len(mono) != 1 or mono[0][1] != 1 or not isinstance(mono[0][0], DimVar):
        return None
    name = mono[0][0].name
    return name if is_row_name(name) else None


def _mentions_row(d) -> bool:
    return isinstance(d, DimExpr) and any(is_row_name(v.name) for v in dim_vars_of(d))


def _has_row(aval) -> bool:
    return bool(getattr(aval, "shape", ())) and row_name_of(aval.shape[0]) is not None


def _text(name: str) -> str:
    return f"`...` of argument '{name[3:]}'" if name.startswith("...") else name


ELEMENTWISE = frozenset("""
abs acos acosh add and asin asinh atan atan2 atanh bessel_i0e bessel_i1e cbrt ceil clamp clz complex conj
convert_element_type copy cos cosh digamma div eq erf erf_inv erfc exp exp2 expm1 floor ge gt igamma
igamma_grad_a igammac imag integer_pow is_finite le lgamma log log1p logistic lt max min mul ne neg nextafter
not or population_count pow random_gamma_grad real rem round rsqrt select_n shift_left shift_right_arithmetic
shift_right_logical sign sin sinh sqrt square stop_gradient sub tan tanh threefry2x32 xor bitcast_convert_type
check debug_print
cond while scan for_loop pjit custom_jvp_call custom_vjp_call remat2
""".split())
# (the last line: control flow and calls; their bodies are traced with the same row and checked
# equation by equation, or, for a qjit'd callee, by its own signature's rows)


def _first(avals) -> bool:
    return any(_has_row(a) for a in avals)


def _axes_rule(param: str, what: str, *, whole_ok: bool = False):
    """Reductions (`axes`), cumulative ops (`axis`), rev/squeeze (`dimensions`), sort, concatenate
    (`dimension`): axis 0 is the row."""
    def rule(params, ins, outs):
        if not _has_row(ins[0]):
            return None
        axes = params.get(param)
        axes = (axes,) if isinstance(axes, int) else tuple(axes or ())
        if 0 not in axes or whole_ok and len(axes) == len(ins[0].shape):
            return None
        return f"{what} over axis 0, an axis of the row (its rank is not known: give the axis from the end, e.g. -1)"
    return rule


def _transpose(params, ins, outs):
    if _has_row(ins[0]) and params["permutation"][0] != 0:
        return "transposing moves the row's axes (the row must stay first)"
    return None


def _reshape(params, ins, outs):
    if _has_row(ins[0]) and not (_has_row(outs[0]) and row_name_of(outs[0].shape[0]) == row_name_of(ins[0].shape[0])):
        return "reshaping across the row (only the axes after the row may be reshaped)"
    return None


def _dot_general(params, ins, outs):
    (lc, rc), _ = params["dimension_numbers"]
    if _has_row(ins[0]) and 0 in lc or _has_row(ins[1]) and 0 in rc:
        return "contracting over the row"
    return None


def _slice(params, ins, outs):
    if not _has_row(ins[0]):
        return None
    strides = params.get("strides") or (1,) * ins[0].ndim
    if params["start_indices"][0] != 0 or params["limit_indices"][0] != ins[0].shape[0] or strides[0] != 1:
        return "slicing the row's axes"
    return None


def _whole_row(size_of: Callable, what: str):
    def rule(params, ins, outs):
        if _has_row(ins[0]) and size_of(params, ins) != ins[0].shape[0]:
            return what
        return None
    return rule


def _pad(params, ins, outs):
    if _has_row(ins[0]) and tuple(params["padding_config"][0]) != (0, 0, 0):
        return "padding the row's axes"
    return None


def _iota(params, ins, outs):
    return "counting along the row" if _has_row(outs[0]) and params["dimension"] == 0 else None


def _gather(params, ins, outs):
    """The row carried whole: not indexed (start_index_map), not collapsed, sliced entire."""
    if _has_row(ins[1]):
        return "indexing with an index array that has a row (gather)"
    if not _has_row(ins[0]):
        return None
    dn = params["dimension_numbers"]
    if 0 in dn.start_index_map or 0 in dn.collapsed_slice_dims or 0 in dn.operand_batching_dims \
            or params["slice_sizes"][0] != ins[0].shape[0]:
        return "indexing into the row's axes (gather)"
    return None


def _refuse(what: str):
    return lambda params, ins, outs: what


row_rules: dict[str, Callable[[dict, Sequence, Sequence], str | None]] = {
    "broadcast_in_dim": lambda params, ins, outs: None,   # (the first-axis rule is all it needs)
    "reshape": _reshape,
    "transpose": _transpose,
    "dot_general": _dot_general,
    **{r: _axes_rule("axes", r, whole_ok=True) for r in
       ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or")},
    "argmax": _axes_rule("axes", "argmax"),
    "argmin": _axes_rule("axes", "argmin"),
    **{r: _axes_rule("axis", r) for r in ("cumsum", "cumprod", "cummax", "cummin")},
    "rev": _axes_rule("dimensions", "reversing"),
    "squeeze": _axes_rule("dimensions", "squeezing"),
    "sort": _axes_rule("dimension", "sorting"),
    "concatenate": _axes_rule("dimension", "concatenating"),
    "slice": _slice,
    "dynamic_slice": _whole_row(lambda p, ins: p["slice_sizes"][0], "slicing the row's axes"),
    "dynamic_update_slice": _whole_row(lambda p, ins: ins[1].shape[0], "updating a slice of the row's axes"),
    "pad": _pad,
    "iota": _iota,
    "gather": _gather,
    **{s: _refuse(f"scattering into an array with a row ({s})") for s in
       ("scatter", "scatter-add", "scatter-mul", "scatter-min", "scatter-max")},
    "conv_general_dilated": _refuse("a convolution of an array with a row"),
    "filter": _refuse("filtering an array with a row"),
}


def check_rows(prim_name: str, in_avals: Sequence, out_avals: Sequence, params: dict, where: str | None) -> None:
    """Raises when the equation about to be traced needs the rank of a row (see the module
    docstring); `where` is the user's line."""
    avals = [a for a in (*in_avals, *out_avals) if hasattr(a, "shape")]
    row = None
    for a in avals:
        for axis, d in enumerate(a.shape):
            if not _mentions_row(d):
                continue
            name = row_name_of(d)
            if axis != 0 or name is None:
                culprit = name or next(v.name for v in dim_vars_of(d)
                                            if is_row_name(v.name))
                _fail(prim_name, culprit, f"it makes {a.str_short()}, with the row's size in axis {axis}"
                      if axis else f"it makes {a.str_short()}, whose first axis is not the row alone", where)
            if row is not None and name != row:
                _fail(prim_name, row, f"it combines the rows {_text(row)} and {_text(name)}, of ranks not known",
                      where)
            row = name
    if row is None or prim_name in ELEMENTWISE:
        return
    rule = row_rules.get(prim_name)
    why = "it needs the row's rank" if rule is None else rule(params, list(in_avals), list(out_avals))
    if why is not None:
        _fail(prim_name, row, why, where)


def check_broadcast(fname: str, a, b) -> None:
    """numpy's broadcasting of two sizes that only run time can compare (equal, or one is 1),
    where one is a row: the row's axes would have to be lined up with the other's, one by one."""
    row = row_name_of(a) or row_name_of(b) if _mentions_row(a) or _mentions_row(b) else None
    if row is None:
        return
    from sprue.base.source_info import user_frame_summary  # deferred: only for this error
    other = b if row_name_of(a) == row else a
    why = (f"it combines the rows {_text(row)} and {_text(row_name_of(other))}, of ranks not known"
           if row_name_of(other) else f"it broadcasts the row against a size that may be 1 or not ({other!r})")
    _fail(f"sprue.numpy.{fname}", row, why, user_frame_summary())


def _fail(prim_name: str, row: str, why: str, where: str | None):
    raise SprueTypeError(
        f"`{prim_name}` needs the rank of the row {_text(row)}: {why}{at(where)}. A function whose parameters have"
        f" rows is compiled once for every rank, with each row carried as one axis: only operations that treat"
        f" the row as a whole (elementwise, broadcasting, reductions over other axes or all of them, matmul"
        f" batch or free axes, slicing and reshaping the axes after it) may touch it. Give the array's axes"
        f" explicitly in its type (`sprue.f64[\"b\", \"t\", \"n\"]`) to compile for one rank")


# -- what the user's code reads of an array with a row ---------------------------------------------
# Inside sprue (and numpy, dispatching to it) `x.shape` is the traced shape, the row one axis;
# the user's code must not learn a rank or an axis of the row from it: x.ndim, len(x), len(x.shape)
# and x.shape[i] reaching the row raise. x.shape[-1], x.shape[1:] (any slice: the row stays one
# entry, as `(*x.shape[:-1], 2, -1)` needs to reshape the last axis) and x.size read fine.
_INTERNAL = ("sprue.", "numpy.")


def user_reads_row(shape: tuple, depth: int = 2) -> str | None:
    """The row of `shape` (a traced array's) when the code `depth` frames up is the user's."""
    if not shape or row_name_of(shape[0]) is None:
        return None
    module = sys._getframe(depth).f_globals.get("__name__", "")
    internal = module in ("sprue", "numpy") or module.startswith(_INTERNAL)
    return None if internal else row_name_of(shape[0])


def rank_error(what: str, row: str) -> SprueTypeError:
    from sprue.base.source_info import user_frame_summary  # deferred: only for this error
    return SprueTypeError(
        f"{what} needs the rank of the row {_text(row)}{at(user_frame_summary())}: a function whose parameters have"
        f" rows is compiled once for every rank, with each row carried as one axis. Count axes from the end"
        f" (x.shape[-1], axis=-1), or give the array's axes explicitly in its type to compile for one rank")


class RowShape(tuple):
    """A traced shape whose first entry is a row, as the user's code sees it (see above)."""

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple.__getitem__(self, i)
        n = tuple.__len__(self)
        if isinstance(i, int) and (i == 0 or i < 0 and i + n <= 0):
            raise rank_error(f"x.shape[{i}]", row_name_of(tuple.__getitem__(self, 0)))
        return tuple.__getitem__(self, i)

    def __len__(self):
        raise rank_error("len(x.shape)", row_name_of(tuple.__getitem__(self, 0)))
