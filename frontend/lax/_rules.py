"""Small helpers shared by the primitive definitions."""
from __future__ import annotations

from ..core import ShapedArray, impl_rules, primitive, shape_rules
from ..errors import SprueTypeError, SprueValueError


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
