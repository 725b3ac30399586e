"""Small helpers shared by the primitive definitions."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from sprue.base.errors import SprueTypeError, SprueValueError
from sprue.ir.core import ShapedArray, impl_rules, primitive, shape_rules
from sprue.ir.shapes import DimExpr, format_dim, lower_bound, prove_equal


def define(name: str, shape_rule, impl, *, multiple_results: bool = False):
    """Create the primitive `name` with its shape rule and numpy reference rule."""
    p = primitive(name, multiple_results=multiple_results)
    shape_rules[p] = shape_rule
    impl_rules[p] = impl
    return p


def check_axes(axes, ndim: int, what: str) -> tuple[int, ...]:
    out = []
    for a in axes:
        if not isinstance(a, int) or not -ndim <= a < max(ndim, 1) or (ndim == 0):
            raise SprueValueError(f"{what}: axis {a} is out of bounds for an array of rank {ndim}")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise SprueValueError(f"{what}: repeated axis in {tuple(axes)}")
    return tuple(out)


def same_dtypes(name: str, *avals: ShapedArray):
    dts = {a.dtype for a in avals}
    if len(dts) > 1:
        raise SprueTypeError(f"{name} requires operands of one dtype, got {', '.join(a.str_short() for a in avals)}")


def weak(*avals: ShapedArray) -> bool:
    return all(a.weak_type for a in avals)


# -- dimensions: ints or symbolic DimExprs (sprue.ir.shapes) ---------------------------------------
# Equalities a rule needs (operand shapes of add, contracted dims of dot_general, ...) must be
# provable, as in JAX's lax: a pair of sizes only run time can compare is an error here, and
# sprue.numpy is the layer that inserts run-time checks. Inequalities (a slice fitting in its
# operand) are rejected only when provably violated: dynamic slice sizes are never provably in
# bounds, and sprue.numpy computes them clamped to the operand.
def require_equal(a, b, message: str):
    """Raise SprueValueError(message) unless the dims a and b are provably equal; when only run time
    could tell, the message says so."""
    ok = prove_equal(_dim(a), _dim(b))
    if ok:
        return
    if ok is False:
        raise SprueValueError(message)
    raise SprueValueError(f"{message}: the sizes {format_dim(a)} and {format_dim(b)} are not provably equal;"
                          f" sprue.lax needs provably equal sizes (sprue.numpy inserts run-time checks for"
                          f" sizes known only at run time)")


def dims_equal(a, b) -> bool:
    """The dims are provably equal (structurally, for canonical DimExprs)."""
    return prove_equal(_dim(a), _dim(b)) is True


def shapes_equal(s, t) -> bool:
    return len(s) == len(t) and all(dims_equal(a, b) for a, b in zip(s, t))


def _dim(d):
    """numpy integers (bounds computed with numpy) as Python ints; DimExprs as they are."""
    return d if isinstance(d, DimExpr) else int(d)


def surely_less(a, b) -> bool:
    """a < b for every value of the dimension variables (a provable violation of b <= a)."""
    a, b = _dim(a), _dim(b)
    diff = b - a if isinstance(b, DimExpr) or not isinstance(a, DimExpr) else -(a - b)
    if isinstance(diff, int):
        return diff > 0
    return lower_bound(diff) > 0


def fits(s, d) -> bool:
    """0 <= s <= d is not provably violated (a slice size or bound against a dimension)."""
    return not surely_less(s, 0) and not surely_less(d, s)


def is_one(d) -> bool:
    return isinstance(d, int) and d == 1


# -- what sprue.numpy provides to sprue.lax ----------------------------------------------------------
class RuntimeSizeOps:
    """Operations on arrays whose sizes may be known only at run time that need sprue.numpy's size
    machinery (numpy/_dims.py: run-time checks made once per trace, clamped gathers):
    lax.dynamic_slice and lax.dynamic_update_slice check such sizes at run time and never touch
    memory outside the operand (numpy/_lax_dynamic.py), and filter's vjp reads its cotangent with a
    clamped gather. sprue.numpy, a layer above lax, fills `runtime_size_ops` when it is imported
    (`import sprue` always imports it)."""

    dynamic_slice: Callable[[Any, Sequence, Sequence], Any]
    dynamic_update_slice: Callable[[Any, Any, Sequence], Any]
    take_clamped: Callable[[Any, int, Any], Any]


runtime_size_ops = RuntimeSizeOps()
