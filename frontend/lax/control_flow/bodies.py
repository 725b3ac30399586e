"""Tracing the bodies of loops and branches, and settling the types of loop carries.

A body is traced once, with abstract arguments, however many times it runs. What it closes over —
numpy arrays, tracers of enclosing traces, the sizes of captured arrays — becomes leading
parameters of its jaxpr (closure conversion), passed as operands by the equation that holds it.

A loop's carries must have one type on every trip, but one trace sees only the first. The types
are settled by tracing again until nothing changes (`settle_carry`):

- weak types: a carry started as a Python scalar takes the type the body gives it within its kind
  (`fori_loop(0, n, body, 0.0)` with a float32 body carries float32); kinds and ranks never change.
- sizes (the seed's `preserve_dimensions`): by default a carry keeps its entry type, dims included:
  a body given `a: f64[n]` must return `f64[n]`, so the loop's results are `f64[n]` too, and the body
  may mix the carry with any other value of size n (a captured array, another carry). A body that
  returns another size is an error naming the construct and both types, unless the loop allows
  array resizing. Then each size the body changes becomes a fresh dimension variable inside the
  body, bound by an *implicit* size parameter placed before the carries, and the body returns the
  new sizes first (`Carries`). Sizes the body keeps stay what they were at entry, so a resizing
  loop still mixes its unchanged carries with captured arrays. Carries that enter with the same
  size and that the body keeps equal (it returns them with one size, say both `d+1`) share one
  variable, so arithmetic between them works; sizes that diverge get a variable each. Sharing is
  sound by induction: equal at entry, and the body maps equal sizes to equal sizes.

Settling terminates: every retrace either strengthens a weak type, makes a kept size fresh, or
splits a shared variable, and each can happen only finitely often.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueTypeError, at
from sprue.base.pytree import TreeDef, tree_flatten
from sprue.base.source_info import user_frame_summary
from sprue.ir.core import ClosedJaxpr, Jaxpr, ShapedArray, aval_of_value
from sprue.ir.shapes import Dim, DimVar, dim
from sprue.lax.control_flow import primitives as cf
from sprue.trace.tracing import Tracer, dim_value, trace_scope

_PY_SCALARS = (bool, int, float, complex)


def where() -> str:
    return at(user_frame_summary())


def is_py_scalar(x) -> bool:
    return isinstance(x, _PY_SCALARS) and not isinstance(x, np.generic)


def leaf_aval(construct: str, x, what: str) -> ShapedArray:
    """The abstract value of a carry/operand leaf."""
    if isinstance(x, Tracer):
        return x.aval
    if is_py_scalar(x) or isinstance(x, (np.ndarray, np.generic)):
        try:
            return aval_of_value(x)
        except SprueTypeError as e:
            raise SprueTypeError(f"{construct}: {what}: {e}{where()}") from None
    raise SprueTypeError(f"{construct}: {what} holds a {type(x).__name__}; carries and operands are arrays,"
                         f" scalars, or tuples/lists/dicts of them{where()}")


# -- tracing bodies -------------------------------------------------------------------------------
@dataclass
class Body:
    """A traced body: a consts-free jaxpr whose leading invars stand for `consts`, and whose first
    `nimplicit` results are implicit (new sizes of resized carries)."""
    jaxpr: ClosedJaxpr
    consts: list          # numpy arrays and tracers of enclosing traces the body closed over
    out_tree: TreeDef     # the structure of the explicit results
    nimplicit: int = 0

    @property
    def out_avals(self) -> list[ShapedArray]:
        """The types of the explicit results."""
        return self.jaxpr.out_avals[self.nimplicit:]

    def local_dims(self) -> set[DimVar]:
        """Dimension variables bound inside the body (by its parameters or equations) rather than
        by the enclosing trace (its hoisted consts bind those)."""
        j = self.jaxpr.jaxpr
        vs = [*j.invars[len(self.consts):], *(o for e in j.eqns for o in e.outvars)]
        return {v.dim for v in vs if v.dim is not None}


Spec = ShapedArray | DimVar   # a parameter of a body: an array, or an implicit size binding a DimVar


def trace_body(construct: str, fn: Callable, specs: Sequence[Spec],
               implicit_outs: Callable[[list], list] | None = None) -> Body:
    """Trace fn(*array parameters) -> pytree. `specs` lists the parameters in jaxpr order; a DimVar
    is an implicit size parameter binding it (not passed to fn). `implicit_outs(out_leaves)` gives
    values returned before fn's results. The consts are hoisted into leading parameters."""
    tree_box: list[TreeDef] = []
    with trace_scope() as b:
        args = []
        for spec in specs:
            if isinstance(spec, DimVar):
                b.new_dim_arg(spec)
            else:
                args.append(b.new_arg(spec))
        out_leaves, tree = tree_flatten(fn(*args))
        tree_box.append(tree)
        for i, o in enumerate(out_leaves):
            if not (isinstance(o, (Tracer, np.ndarray, np.generic)) or is_py_scalar(o)):
                raise SprueTypeError(f"{construct}: a body returned a {type(o).__name__} at output {i}; bodies"
                                     f" return arrays, scalars, or tuples/lists/dicts of them{where()}")
        extra = implicit_outs(out_leaves) if implicit_outs is not None else []
        closed = b.finish([*extra, *out_leaves])
    j = closed.jaxpr
    hoisted = ClosedJaxpr(Jaxpr([], [*j.constvars, *j.invars], list(j.outvars), j.eqns), [])
    return Body(hoisted, list(closed.consts), tree_box[0], len(extra))


# -- carries ----------------------------------------------------------------------------------------
Position = tuple[int, int]   # (carry leaf, axis)


@dataclass
class Carries:
    """How a loop body sees its carried leaves: their entry types (dtypes settled, dims those of
    the enclosing trace), and the positions whose size the body may change, grouped into classes
    that share one implicit size."""
    avals: list[ShapedArray]
    classes: list[list[Position]] = field(default_factory=list)

    def specs(self) -> list[Spec]:
        """The carry parameters of one trace: a fresh dimension variable per class (a new one for
        every trace: a variable is bound once), then the carries typed with them."""
        fresh = [DimVar() for _ in self.classes]
        shapes = [list(a.shape) for a in self.avals]
        for dv, positions in zip(fresh, self.classes):
            for leaf, axis in positions:
                shapes[leaf][axis] = dim(dv)
        return [*fresh, *(a.update(shape=tuple(s)) for a, s in zip(self.avals, shapes))]

    def entry_sizes(self) -> list:
        """The implicit operands: each class's size at entry, as values of the enclosing trace."""
        return [dim_value(self.avals[leaf].shape[axis]) for leaf, axis in (c[0] for c in self.classes)]

    def new_sizes(self, out_leaves: list) -> list:
        """The implicit results: each class's size as the body returns it (0 where the body's
        result is malformed; settle_carry then reports it)."""
        out = []
        for leaf, axis in (c[0] for c in self.classes):
            shape = np.shape(out_leaves[leaf]) if leaf < len(out_leaves) else ()
            out.append(dim_value(shape[axis]) if axis < len(shape) else 0)
        return out

    @property
    def nimplicit(self) -> int:
        return len(self.classes)


def kind(dtype) -> str:
    return "bool" if dtypes.is_bool(dtype) else "int" if dtypes.is_int(dtype) else "float"


def _join(a_in: ShapedArray, a_out: ShapedArray) -> ShapedArray | None:
    """The carry's entry type after a trip, dims aside: a_in, or the body's dtype for a weak a_in of
    the same kind; None when the dtype or the rank changes."""
    if a_in.ndim != a_out.ndim:
        return None
    if a_in.dtype == a_out.dtype:
        return a_in.update(weak_type=a_in.weak_type and a_out.weak_type)
    if a_in.weak_type and kind(a_in.dtype) == kind(a_out.dtype):
        return a_in.update(dtype=a_out.dtype, weak_type=a_out.weak_type)
    return None


def _settle_dims(carries: Carries, outs: Sequence[ShapedArray]) -> tuple[list[list[Position]], bool]:
    """The size classes after a trip, and whether a size kept so far changed. A kept size that the
    body changes joins a new class with the other kept sizes equal at entry that it changes the same
    way; a class whose sizes come back different splits by what they come back as."""
    class_of = {pos: k for k, positions in enumerate(carries.classes) for pos in positions}
    changed: dict[tuple[Dim, Dim], list[Position]] = {}
    split: list[dict[Dim, list[Position]]] = [{} for _ in carries.classes]
    for leaf, (a, o) in enumerate(zip(carries.avals, outs)):
        for axis, (d_in, d_out) in enumerate(zip(a.shape, o.shape)):
            k = class_of.get((leaf, axis))
            if k is not None:
                split[k].setdefault(d_out, []).append((leaf, axis))
            elif d_in != d_out:
                changed.setdefault((d_in, d_out), []).append((leaf, axis))
    classes = [group for groups in split for group in groups.values()] + list(changed.values())
    return sorted(classes), bool(changed)


def _carry_error(construct: str, ins: Sequence[ShapedArray], outs: Sequence[ShapedArray],
                 resizing: bool | None) -> SprueTypeError:
    bad = cf.type_mismatches(ins, outs)
    hint = ""
    if any(a.weak_type and kind(a.dtype) == "int" and kind(b.dtype) == "float" for a, b in zip(ins, outs)):
        hint = "; a carry that starts as a Python int stays an integer: start it as a float (e.g. 0.0)"
    elif all(_join(a, b) is not None for a, b in zip(ins, outs)):   # only sizes changed
        hint = (f"; {construct} keeps every array's size: pass allow_array_resizing=True to let the body"
                f" change sizes" if resizing is False else
                "; a scan carry keeps its size (a for_loop or while_loop with allow_array_resizing=True may"
                " change it)")
    return SprueTypeError(f"{construct} body changes the type of its carry: {'; '.join(bad)} (carry in vs"
                          f" body out){hint}{where()}")


def _user_tree(tree: TreeDef, single: bool) -> TreeDef:
    """The carry tree as the user wrote it: one carry is shown bare, not as a 1-tuple."""
    return tree.children[0] if single and tree.kind == "tuple" and len(tree.children) == 1 else tree


def settle_carry(construct: str, trace: Callable[[Carries], Body], init_avals: Sequence[ShapedArray],
                 init_tree: TreeDef, carry_of: Callable[[Body], tuple[TreeDef, list[ShapedArray]]],
                 single: bool = False, resizing: bool | None = False) -> tuple[Body, Carries]:
    """Trace the body until its carry types are stable; check structure and types. `resizing`:
    whether the loop allows array resizing (None: the construct has no such option)."""
    carries = Carries(list(init_avals))
    positions = sum(a.ndim for a in init_avals)
    for _ in range(4 + 2 * positions):   # see the module docstring: each retrace changes something
        body = trace(carries)
        tree, outs = carry_of(body)
        if tree != init_tree:
            raise SprueTypeError(f"{construct} body returns a carry of a different structure: "
                                 f"{_user_tree(init_tree, single)} in vs {_user_tree(tree, single)} out{where()}")
        joined = [_join(a, b) for a, b in zip(carries.avals, outs)]
        if any(j is None for j in joined):
            raise _carry_error(construct, carries.avals, outs, resizing)
        classes, changed = _settle_dims(carries, outs)
        if changed and not resizing:
            raise _carry_error(construct, carries.avals, outs, resizing)
        settled = Carries(joined, classes)
        if settled == carries:
            return body, carries
        carries = settled
    raise SprueTypeError(f"{construct}: the carry types do not settle: "
                         f"{', '.join(a.str_short() for a in carries.avals)}{where()}")


__all__ = ["Body", "Carries", "Spec", "kind", "leaf_aval", "is_py_scalar", "settle_carry", "trace_body", "where"]
