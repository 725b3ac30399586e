"""The arguments of sprue's own API, checked when a decorator or transformation is applied (before
anything is traced): qjit's static_argnums, static_argnames, abstracted_axes and flags, the
transformations' argnums, in_axes, out_axes and axis_size, and the functions they are given. Each
error names the API, the argument, what it got and what it takes (issue 22: `qjit(static_argnums=1.0)`
and `grad("string!")` were Python's own errors from inside sprue)."""
from __future__ import annotations

import inspect
import os

import numpy as np

from sprue.base.errors import SprueTypeError, SprueValueError, at
from sprue.base.pytree import tree_flatten
from sprue.base.source_info import user_frame_summary

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _where() -> str:
    return at(user_frame_summary())


def _shown(value) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _is_int(n) -> bool:
    return isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_))


def check_function(fn, api: str) -> None:
    """fn must be callable: `grad("string!")` is an error naming grad, not Python's 'not callable'."""
    if not callable(fn):
        raise SprueTypeError(f"{api}: {fn!r:.60} is not a callable object: expected a function to transform, got"
                             f" {type(fn).__name__}{_where()}")


def check_flag(value, api: str, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise SprueTypeError(f"{api}: {name} must be True or False, got {_shown(value)}{_where()}")
    return bool(value)


def int_tuple(value, api: str, name: str) -> tuple[int, ...]:
    """An int or a sequence of ints (JAX's argnums / static_argnums), as a tuple."""
    if _is_int(value):
        return (int(value),)
    if isinstance(value, (tuple, list)) and all(_is_int(n) for n in value):
        return tuple(int(n) for n in value)
    raise SprueTypeError(f"{api}: {name} must be an int or a tuple of ints, got {_shown(value)}{_where()}")


def argnums(value, api: str):
    """grad/jacfwd/jacrev's argnums: an int, or a non-empty tuple of distinct ints (range checked at the call)."""
    nums = int_tuple(value, api, "argnums")
    if isinstance(value, (tuple, list)) and not nums:
        raise SprueValueError(f"{api}: argnums is empty: name at least one argument to differentiate{_where()}")
    if len(set(nums)) != len(nums):
        raise SprueValueError(f"{api}: argnums {value!r} names an argument twice{_where()}")
    return value


def str_tuple(value, api: str, name: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (tuple, list)) and all(isinstance(n, str) for n in value):
        return tuple(value)
    raise SprueTypeError(f"{api}: {name} must be a parameter name or a tuple of names, got {_shown(value)}{_where()}")


def static_argnames(signature: inspect.Signature, names, fn_name: str) -> set[str]:
    """The parameters qjit's static_argnames name, checked when qjit is applied (as Catalyst and JAX
    check them)."""
    keywords = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
    static = set()
    for n in str_tuple(names, f"qjit({fn_name})", "static_argnames"):
        p = signature.parameters.get(n)
        if p is None or p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            hint = " (**kwargs entries cannot be static)" if keywords else ""
            raise SprueValueError(f"qjit({fn_name}): static_argnames '{n}' is not a parameter of {fn_name}"
                                  f" ({', '.join(signature.parameters) or 'it has none'}){hint}{_where()}")
        static.add(n)
    return static


def static_argnums(signature: inspect.Signature, value, fn_name: str) -> tuple[set[str], frozenset[int]]:
    """(the static parameters' names, the static positions inside *args) of qjit's static_argnums:
    a number names a positional parameter, or, past them, a position of the function's *args
    (JAX's static_argnums count the arguments as passed). qjit raises these errors at the first
    call, as Catalyst does (its tests expect them there); their messages also carry Catalyst's
    words, which its users' code matches."""
    if not (_is_int(value) or isinstance(value, (tuple, list)) and all(_is_int(n) for n in value)):
        raise SprueTypeError(f"qjit({fn_name}): static_argnums must be an int or a tuple of ints, got {_shown(value)}"
                             f" (The `static_argnums` argument to `qjit` must be an int or convertible to a tuple of"
                             f" ints){_where()}")
    params = list(signature.parameters.values())
    positional = [p for p in params if p.kind in _POSITIONAL]
    varargs = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
    static, in_varargs = set(), set()
    for n in int_tuple(value, f"qjit({fn_name})", "static_argnums"):
        if 0 <= n < len(positional) or (n < 0 and not varargs and n >= -len(positional)):
            static.add(positional[n].name)
        elif varargs and n >= len(positional):
            in_varargs.add(n - len(positional))
        elif varargs:
            raise SprueValueError(f"qjit({fn_name}): static_argnums {n} is negative, which with *args is ambiguous:"
                                  f" count from the first argument{_where()}")
        else:
            k = len(positional)
            raise SprueValueError(f"qjit({fn_name}): static_argnums {n} is beyond the valid range [{-k}, {k}) of"
                                  f" {fn_name}'s {k} positional parameter{'' if k == 1 else 's'}{_where()}")
    return static, frozenset(in_varargs)


def check_intermediate(value, fn_name: str):
    if not isinstance(value, (bool, np.bool_, str, os.PathLike)):
        raise SprueTypeError(f"qjit({fn_name}): keep_intermediate must be True/False or a directory, got"
                             f" {_shown(value)}{_where()}")
    return value


# -- abstracted_axes -------------------------------------------------------------------------------
def check_abstracted_axes(spec, api: str):
    """Catalyst's abstracted_axes: {axis: name} for every array argument, or a tuple with one such
    dict (or None) per positional argument."""
    if spec is None:
        return None
    entries = spec if isinstance(spec, (tuple, list)) else [spec]
    for e in entries:
        if e is None:
            continue
        if not isinstance(e, dict) or not all(_is_int(k) and isinstance(v, str) and v.isidentifier()
                                               for k, v in e.items()):
            raise SprueTypeError(f"{api}: abstracted_axes entries must be dicts {{axis: \"name\"}}"
                                 f" (or None), got {e!r}{_where()}")
    return spec


def _axes_of(spec, i: int):
    """The {axis: name} that applies to positional argument i."""
    if isinstance(spec, (tuple, list)):
        return spec[i] if i < len(spec) else None
    return spec


def abstract_axes(spec, dynamic: dict, avals: tuple, fn_name: str) -> tuple:
    """The leaves' avals with the abstracted axes' sizes replaced by their names."""
    out, leaf = [], 0
    for i, (name, value) in enumerate(dynamic.items()):   # leaves follow the parameters' order
        n_leaves = len(tree_flatten(value)[0])
        axes = _axes_of(spec, i)
        for aval in avals[leaf:leaf + n_leaves]:
            if axes and aval.ndim:
                shape = list(aval.shape)
                for axis, dim_name in axes.items():
                    if not -aval.ndim <= axis < aval.ndim:
                        raise SprueValueError(f"{fn_name}(): abstracted axis {axis} is out of range for"
                                              f" argument '{name}' of shape {aval.shape}")
                    shape[axis] = dim_name
                aval = aval.update(shape=tuple(shape))
            out.append(aval)
        leaf += n_leaves
    return tuple(out)


def check_axes_against_hints(spec, hints: dict, fn_name: str) -> None:
    """abstracted_axes and type hints on one function both apply: an abstracted axis of a hinted
    array must be hinted with the same name (`x: sprue.f64["n"]` with `{0: "n"}`); a static size
    or another name there is a conflict, an error naming the parameter."""
    if spec is None:
        return
    for i, (name, hint) in enumerate(hints.items()):
        axes = _axes_of(spec, i)
        for aval in tree_flatten(hint)[0] if axes else ():
            if not aval.ndim:
                continue
            for axis, dim_name in axes.items():
                if not -aval.ndim <= axis < aval.ndim:
                    raise SprueValueError(f"qjit({fn_name}): abstracted axis {axis} is out of range for parameter"
                                          f" '{name}', hinted {aval.str_short()}{_where()}")
                size = aval.shape[axis]
                if str(size).replace(" ", "") != dim_name:
                    raise SprueValueError(
                        f"qjit({fn_name}): abstracted_axes makes axis {axis} of parameter '{name}' the size"
                        f" \"{dim_name}\", but its type hint {aval.str_short()} makes it {size!r}: hint that axis as"
                        f" \"{dim_name}\" (or leave the parameter out of abstracted_axes){_where()}")


# -- vmap ------------------------------------------------------------------------------------------
def check_axes_spec(spec, api: str, what: str):
    """in_axes/out_axes: an int, None, or a tuple/list/dict of those (nested), as JAX takes them."""
    leaves, _ = tree_flatten(spec)
    for leaf in leaves:
        if not _is_int(leaf):
            raise SprueTypeError(f"{api}: {what} must be an int, None, or a tuple/list/dict of those, got"
                                 f" {_shown(spec)} (it holds {_shown(leaf)}){_where()}")
    return spec


def check_axis_size(value, api: str):
    if value is not None and (not _is_int(value) or value < 0):
        raise SprueTypeError(f"{api}: axis_size must be None or a non-negative int, got {_shown(value)}{_where()}")
    return value


__all__ = ["check_function", "check_flag", "int_tuple", "argnums", "str_tuple", "static_argnames", "static_argnums",
           "check_abstracted_axes", "abstract_axes", "check_axes_against_hints", "check_axes_spec",
           "check_axis_size", "check_intermediate"]
