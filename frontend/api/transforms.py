"""The transformations' public API (JAX's conventions, pytrees everywhere): jvp, vjp, grad,
value_and_grad, jacfwd, jacrev, hessian, vmap. (`cost` is in costs.py.)

Each traces the user's function to a jaxpr (traced.trace_function) and runs an interpreter over it
(sprue.interp: jvp, vjp, batching) whose rules bind primitives: eagerly with numpy values, or into the
enclosing trace — so every transformation composes with every other and with qjit, at any depth.

Lazy jit (as in mini-JAX): a transformation applied to a qjit'd function transforms its body, and the
result is compiled: `grad(qjit(f))` is `qjit(grad(f))`.
"""
from __future__ import annotations

import functools
import inspect
from typing import Callable, Sequence

import numpy as np

import sprue.numpy as jnp
from sprue.api import options
from sprue.api.qjit import QJIT
from sprue.api.traced import parameter_names, pretty_path, trace_function
from sprue.base import dtypes
from sprue.base.errors import SprueTypeError, SprueValueError, at
from sprue.base.pytree import TreeDef, tree_flatten, tree_flatten_with_path, tree_map, tree_unflatten
from sprue.base.source_info import user_frame_summary
from sprue.base.tracebacks import api_boundary
from sprue.interp.ad_util import Zero, aval_of, instantiate, is_zero, zeros_like
from sprue.interp.batching import batch_jaxpr, broadcast_batch, move_batch_axis
from sprue.interp.jvp import jvp_jaxpr
from sprue.interp.vjp import vjp_jaxpr
from sprue.ir.core import ShapedArray
from sprue.ir.shapes import prove_equal
from sprue.trace.tracing import Tracer, current_builder


def _name(fn) -> str:
    return getattr(fn, "__name__", "function")


def _where() -> str:
    return at(user_frame_summary())


def _trace(fn: Callable, args: Sequence, kwargs: dict | None = None):
    """(jaxpr, consts, flat inputs, output tree) of fn traced at args."""
    kwargs = kwargs or {}
    traced = trace_function(fn, args, kwargs, parameter_names(fn))
    leaves, _ = tree_flatten((tuple(args), dict(kwargs)))
    return traced.closed_jaxpr.jaxpr, traced.closed_jaxpr.consts, leaves, traced.out_tree


def _checked(api: str, fn, has_aux, argnums=None) -> None:
    """A transformation's own arguments, checked when it is applied (options.py)."""
    options.check_function(fn, api)
    options.check_flag(has_aux, api, "has_aux")
    if argnums is not None:
        options.argnums(argnums, api)


def _qjit_of(fn):
    """The QJIT object when fn is a qjit'd function called outside any trace (lazy jit applies)."""
    return fn if isinstance(fn, QJIT) and current_builder() is None else None


def _lazy_jit(transformed: Callable, q, same_signature: bool = True):
    return QJIT(transformed, static_argnames=tuple(q.static_names) if same_signature else (),
                keep_intermediate=q.keep_intermediate, abstracted_axes=q.abstracted_axes if same_signature else None)


def _cached_transform(q, key, make: Callable):
    cache = q.__dict__.setdefault("_transformed", {})
    if key not in cache:
        cache[key] = QJIT(make(), keep_intermediate=q.keep_intermediate)
    return cache[key]


# -- jvp ----------------------------------------------------------------------------------------
@api_boundary
def jvp(fn: Callable, primals, tangents, has_aux: bool = False):
    """`(fn(*primals), tangent of the output)` for the input tangents (one per primal, same trees)."""
    _checked("jvp", fn, has_aux)
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise SprueTypeError(f"jvp: primals and tangents must be tuples (one entry per argument of {_name(fn)}),"
                             f" got {type(primals).__name__} and {type(tangents).__name__}{_where()}")
    if len(primals) != len(tangents):
        raise SprueValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents{_where()}")
    p_leaves, p_tree = tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_flatten(tuple(tangents))
    if p_tree != t_tree:
        raise SprueTypeError(f"jvp: the tangents' structure {t_tree} differs from the primals' {p_tree}{_where()}")
    q = _qjit_of(fn)
    if q is not None:   # checked here; float0 tangents cross the call as zeros of their primal's dtype
        ts = [_checked_tangent(i, p, t) for i, (p, t) in enumerate(zip(p_leaves, t_leaves))]
        ts = [np.zeros(np.shape(p), aval_of(p).dtype) if t is None else t for p, t in zip(p_leaves, ts)]
        compiled = _cached_transform(q, ("jvp", has_aux), lambda: lambda p, t: _jvp_checked(
            q.fn, p, [t if dtypes.is_inexact(aval_of(t).dtype) else None for t in tree_flatten(t)[0]], has_aux))
        return compiled(tuple(primals), tree_unflatten(t_tree, ts))
    ts = [_checked_tangent(i, p, t) for i, (p, t) in enumerate(zip(p_leaves, t_leaves))]
    return _jvp_checked(fn, primals, ts, has_aux)


def _dtype_and_shape(x) -> tuple:
    """A tangent's or cotangent's dtype and shape: float0 for a float0 array (which aval_of does not
    take), else its aval's."""
    if not hasattr(x, "aval") and np.asarray(x).dtype == dtypes.float0:
        return dtypes.float0, np.shape(x)
    a = aval_of(x)
    return a.dtype, a.shape


def _checked_tangent(i: int, primal, tangent):
    """The tangent of primal leaf i as an array of its primal's dtype (None for an integer or boolean
    primal, whose tangent is float0). As JAX's jvp, a tangent's dtype must equal its primal's: a
    Python int is not a tangent of a float (jax.jvp raises TypeError for `jvp(f, (1.0,), (1,))`)."""
    pa = aval_of(primal)
    t_dtype, t_shape = _dtype_and_shape(tangent)
    want = pa.dtype if dtypes.is_inexact(pa.dtype) else dtypes.float0
    if t_dtype != want or tuple(t_shape) != tuple(pa.shape):
        kind = "" if dtypes.is_inexact(pa.dtype) else " (sprue.float0 for an integer or boolean primal, as in JAX)"
        raise SprueTypeError(
            f"jvp: tangent {i} has type {_type_str(t_dtype, t_shape)} but its primal is"
            f" {_type_str(pa.dtype, pa.shape)}: a tangent must"
            f" have its primal's shape and dtype{kind}{_where()}; write the tangent as"
            f" {_tangent_hint(pa)}")
    if want == dtypes.float0:
        return None
    return tangent if hasattr(tangent, "aval") else np.asarray(tangent, pa.dtype)


def _type_str(dtype, shape) -> str:
    """`f64[3,4]`, as ShapedArray.str_short prints it (float0: JAX's tangent type of integers)."""
    name = "float0" if dtype == dtypes.float0 else dtypes.short_name(dtype)
    return f"{name}[{','.join(map(str, shape))}]"


def _tangent_hint(aval: ShapedArray) -> str:
    if not dtypes.is_inexact(aval.dtype):
        return f"np.zeros({tuple(aval.shape)}, sprue.float0)"
    if aval.shape:
        return f"np.asarray(t, np.{aval.dtype.name})"
    return "a Python float or np.float64(t)" if aval.dtype == dtypes.float64 else f"np.{aval.dtype.name}(t)"


def _jvp_checked(fn, primals, ts: list, has_aux: bool):
    """jvp with tangents already checked: a flat list, None for an integer or boolean primal."""
    jaxpr, consts, leaves, out_tree = _trace(fn, tuple(primals))
    outs, touts = jvp_jaxpr(jaxpr, consts, leaves, [Zero(aval_of(x)) if t is None else t for x, t in zip(leaves, ts)])
    touts = [instantiate(t, o) for t, o in zip(touts, outs)]
    if has_aux:
        value_tree, aux_tree = _aux_split(out_tree, fn)
        n = value_tree.num_leaves
        return tree_unflatten(value_tree, outs[:n]), tree_unflatten(value_tree, touts[:n]), \
            tree_unflatten(aux_tree, outs[n:])
    return tree_unflatten(out_tree, outs), tree_unflatten(out_tree, touts)


def _aux_split(out_tree: TreeDef, fn) -> tuple[TreeDef, TreeDef]:
    if out_tree.kind not in ("tuple", "list") or len(out_tree.children) != 2:
        raise SprueTypeError(f"has_aux=True: {_name(fn)} must return a pair (output, auxiliary data), got a"
                             f" structure {out_tree}{_where()}")
    return out_tree.children[0], out_tree.children[1]


# -- vjp ----------------------------------------------------------------------------------------
@api_boundary
def vjp(fn: Callable, *primals, has_aux: bool = False):
    """`(fn(*primals), vjp_fn)`, `vjp_fn(cotangent)` a tuple with one cotangent per primal
    (`(out, vjp_fn, aux)` with has_aux)."""
    _checked("vjp", fn, has_aux)
    q = _qjit_of(fn)
    if q is not None:
        out = q(*primals)
        aux = None
        if has_aux:
            out, aux = out
        back = _cached_transform(q, ("vjp", has_aux), lambda: lambda p, ct: vjp(q.fn, *p, has_aux=has_aux)[1](ct))

        def compiled_vjp_fn(ct):
            return back(tuple(primals), ct)
        return (out, compiled_vjp_fn, aux) if has_aux else (out, compiled_vjp_fn)
    jaxpr, consts, leaves, out_tree = _trace(fn, primals)
    outs, backward = vjp_jaxpr(jaxpr, consts, leaves)
    value_tree = out_tree
    if has_aux:
        value_tree, aux_tree = _aux_split(out_tree, fn)
    n = value_tree.num_leaves
    arg_trees = [tree_flatten(p)[1] for p in primals]

    def vjp_fn(ct):
        ct_leaves, ct_tree = tree_flatten(ct)
        if ct_tree != value_tree:
            raise SprueTypeError(f"vjp_fn: the cotangent's structure {ct_tree} differs from the output's {value_tree}"
                                 f" (the number of cotangent and number of function output parameters in vjp_fn"
                                 f" must agree)"
                                 f"{_where()}")
        cts = [_checked_cotangent(i, c, o) for i, (c, o) in enumerate(zip(ct_leaves, outs))]
        grads = backward(cts + [None] * (len(outs) - n))
        grads = [instantiate(g, x) for g, x in zip(grads, leaves)]
        return _split_by_arg(grads, arg_trees)

    value = tree_unflatten(value_tree, outs[:n])
    if has_aux:
        return value, vjp_fn, tree_unflatten(aux_tree, outs[n:])
    return value, vjp_fn


def _checked_cotangent(i: int, ct, out):
    """The cotangent of output leaf i as an array of its dtype. As JAX's vjp: a float output's
    cotangent has its dtype (a Python int is not the cotangent of a float64, a Python float not that
    of a float32); an integer or boolean output takes any cotangent of its shape (float0 in JAX)."""
    oa = aval_of(out)
    c_dtype, c_shape = _dtype_and_shape(ct)
    if tuple(c_shape) != tuple(oa.shape) or (dtypes.is_inexact(oa.dtype) and c_dtype != oa.dtype):
        raise SprueTypeError(
            f"vjp_fn: cotangent {i} has type {_type_str(c_dtype, c_shape)} but the function's output is"
            f" {_type_str(oa.dtype, oa.shape)}: a cotangent must have its output's shape and dtype"
            f"{_where()}; write it as {_tangent_hint(oa).replace('sprue.float0', 'np.' + oa.dtype.name)}")
    if hasattr(ct, "aval"):
        return ct
    return np.zeros(np.shape(ct), oa.dtype) if c_dtype == dtypes.float0 else np.asarray(ct, oa.dtype)


def _split_by_arg(flat: list, arg_trees: list[TreeDef]) -> tuple:
    out, k = [], 0
    for t in arg_trees:
        out.append(tree_unflatten(t, flat[k:k + t.num_leaves]))
        k += t.num_leaves
    return tuple(out)


# -- grad ---------------------------------------------------------------------------------------
def _check_argnums(argnums, nargs: int, fn) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums) if isinstance(argnums, (tuple, list)) else None
    if nums is None or not all(isinstance(n, int) for n in nums):
        raise SprueTypeError(f"argnums must be an int or a tuple of ints, got {argnums!r}")
    for n in nums:
        if not -nargs <= n < nargs:
            raise SprueValueError(f"argnums {n} is out of range: {_name(fn)} was called with {nargs} positional"
                                  f" argument{'s' if nargs != 1 else ''}{_where()}")
    return tuple(n % nargs for n in nums)


def _is_traceable(x) -> bool:
    """An argument transformations trace: a pytree of arrays, scalars and traced values."""
    return all(isinstance(v, (Tracer, np.ndarray, np.generic, bool, int, float, ShapedArray))
               or hasattr(v, "__array__") for v in tree_flatten(x)[0])


def _fix_untraceable(fn, args: tuple, nums: tuple, argnums):
    """JAX's argnums_partial: an argument outside argnums that is not an array (a function, a string,
    any Python object) is a fixed value closed over, not traced. None when there is none; else
    (fn of the other arguments, those arguments, argnums among them)."""
    fixed = {i for i, a in enumerate(args) if i not in nums and not _is_traceable(a)}
    if not fixed:
        return None
    keep = [i for i in range(len(args)) if i not in fixed]

    def partial_fn(*dyn, **kwargs):
        full = list(args)
        for i, v in zip(keep, dyn):
            full[i] = v
        return fn(*full, **kwargs)
    partial_fn.__name__ = _name(fn)
    new = tuple(keep.index(n) for n in nums)
    return partial_fn, tuple(args[i] for i in keep), new[0] if isinstance(argnums, int) else new


def value_and_grad(fn: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False):
    """`value_and_grad(f)(*args)` is `(f(*args), gradient)` for a scalar-valued f; the gradient is a
    tuple when argnums is a tuple. With has_aux, f returns (value, aux): `((value, aux), grad)`.

    Complex numbers as JAX has them: a real-valued f of complex z = x + iy gets the cotangent of 1,
    which is df/dx - i df/dy (the conjugate of the steepest-ascent direction); with holomorphic=True
    a complex-valued f of complex inputs gets its complex derivative f'(z)."""
    _checked("value_and_grad", fn, has_aux, argnums)
    q = _qjit_of(fn)
    if q is not None:
        return _lazy_jit(value_and_grad(q.fn, argnums, has_aux, holomorphic), q)

    @api_boundary
    @functools.wraps(fn)
    def value_and_grad_fn(*args, **kwargs):
        nums = _check_argnums(argnums, len(args), fn)
        if (fixed := _fix_untraceable(fn, args, nums, argnums)) is not None:
            part, dyn, dyn_argnums = fixed
            return value_and_grad(part, dyn_argnums, has_aux, holomorphic)(*dyn, **kwargs)
        names = parameter_names(fn)
        arg_trees = [tree_flatten(a)[1] for a in args]
        jaxpr, consts, leaves, out_tree = _trace(fn, args, kwargs)
        active, k = [False] * len(leaves), 0
        for i, t in enumerate(arg_trees):
            for j in range(k, k + t.num_leaves):
                if i in nums:
                    _check_grad_input(aval_of(leaves[j]), names[i] if i < len(names) else f"argument {i}",
                                      fn, holomorphic)
                    active[j] = True
            k += t.num_leaves
        value_tree = out_tree
        if has_aux:
            value_tree, aux_tree = _aux_split(out_tree, fn)
        outs, backward = vjp_jaxpr(jaxpr, consts, leaves, active)
        _check_grad_output(outs[0], value_tree, fn, holomorphic)
        one = np.ones((), aval_of(outs[0]).dtype)
        grads = backward([one] + [None] * (len(outs) - 1))
        grads = [instantiate(g, x) for g, x in zip(grads, leaves)]
        per_arg = _split_by_arg(grads, arg_trees)
        g = per_arg[nums[0]] if isinstance(argnums, int) else tuple(per_arg[n] for n in nums)
        value = tree_unflatten(value_tree, outs[:1])
        if has_aux:
            return (value, tree_unflatten(aux_tree, outs[1:])), g
        return value, g
    return value_and_grad_fn


def _check_grad_input(a: ShapedArray, name: str, fn, holomorphic: bool):
    """As JAX: float or complex inputs; complex ones only with holomorphic=True."""
    if holomorphic and not dtypes.is_complex(a.dtype):
        raise SprueTypeError(f"grad with holomorphic=True requires complex inputs, but argument '{name}' of"
                             f" {_name(fn)} is {a.str_short()}{_where()}; convert it with .astype(complex)")
    if not dtypes.is_inexact(a.dtype):
        raise SprueTypeError(
            f"grad requires floating-point inputs, but argument '{name}' of {_name(fn)} is"
            f" {a.str_short()}{_where()}; differentiate with respect to float arrays (convert"
            f" with .astype(float)) or leave integer arguments out of argnums")


def _check_grad_output(out, value_tree: TreeDef, fn, holomorphic: bool):
    """A real scalar (a complex one with holomorphic=True), as JAX's grad requires; as Catalyst's,
    also a pytree of one such scalar ([x*x], {"k": x*x})."""
    a = aval_of(out)
    kind = dtypes.is_complex if holomorphic else dtypes.is_float
    if value_tree.num_leaves != 1 or a.shape != () or not kind(a.dtype):
        got = a.str_short() if value_tree.kind == "leaf" else f"a structure {value_tree}"
        if value_tree.kind != "leaf" and value_tree.num_leaves == 1:
            got = f"{got} of {a.str_short()}"
        if holomorphic:
            raise SprueTypeError(f"grad with holomorphic=True requires {_name(fn)} to return a complex scalar,"
                                 f" got {got}{_where()}")
        if value_tree.num_leaves == 1 and a.shape == () and dtypes.is_complex(a.dtype):
            raise SprueTypeError(f"grad requires {_name(fn)} to return a real floating-point scalar, got {got}"
                                 f"{_where()}; for holomorphic differentiation pass holomorphic=True, or"
                                 f" differentiate a real part (jnp.real, jnp.abs)")
        raise SprueTypeError(f"grad requires {_name(fn)} to return a floating-point scalar, got {got}{_where()};"
                             f" use jacrev or vjp for other outputs")


def grad(fn: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False):
    """The gradient of a scalar-valued function (JAX's grad: argnums, has_aux, holomorphic)."""
    _checked("grad", fn, has_aux, argnums)
    q = _qjit_of(fn)
    if q is not None:
        return _lazy_jit(grad(q.fn, argnums, has_aux, holomorphic), q)
    vg = value_and_grad(fn, argnums, has_aux, holomorphic)

    @api_boundary
    @functools.wraps(fn)
    def grad_fn(*args, **kwargs):
        (value, g) = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return grad_fn


# -- vmap ---------------------------------------------------------------------------------------
def _broadcast_prefix(spec, tree: TreeDef, what: str, fn) -> list:
    """One axis per leaf of `tree` from `spec`, an int/None for the whole tree or a matching prefix."""
    if spec is None or isinstance(spec, int):
        return [spec] * tree.num_leaves
    if tree.kind in ("tuple", "list", "namedtuple") and isinstance(spec, (tuple, list)) \
            and len(spec) == len(tree.children):
        return [a for s, c in zip(spec, tree.children) for a in _broadcast_prefix(s, c, what, fn)]
    if tree.kind in ("dict", "odict") and isinstance(spec, dict) and set(spec) == set(tree.meta):
        return [a for k, c in zip(tree.meta, tree.children) for a in _broadcast_prefix(spec[k], c, what, fn)]
    if tree.kind == "custom" and type(spec) is tree.meta[0]:   # a registered class holding axes (as JAX)
        children = tree_flatten(spec, is_leaf=lambda v: v is None or v is not spec)[0]
        if len(children) == len(tree.children):
            return [a for s, c in zip(children, tree.children) for a in _broadcast_prefix(s, c, what, fn)]
    catalyst = {"in_axes": "it must be an int or match the length of positional arguments",
                "out_axes": "it must be an int or match the number of function results"}.get(what)
    said = f" (Invalid '{what}'; {catalyst})" if catalyst else ""
    raise SprueValueError(f"vmap({_name(fn)}): {what} {spec!r} does not match the structure {tree}{said}; give an"
                          f" int, None, or a tuple/list/dict matching it")


def vmap(fn: Callable, in_axes=0, out_axes=0, axis_size: int | None = None):
    """Vectorize fn over a leading (or `in_axes`) axis of its arguments; None leaves an argument
    unbatched. Outputs are stacked along `out_axes`. `axis_size` gives the batch size when no
    argument is batched (and must agree with the batched ones otherwise)."""
    options.check_function(fn, "vmap")
    options.check_axes_spec(in_axes, "vmap", "in_axes")
    options.check_axes_spec(out_axes, "vmap", "out_axes")
    options.check_axis_size(axis_size, "vmap")
    q = _qjit_of(fn)
    if q is not None and not q.static_names:
        return _lazy_jit(vmap(q.fn, in_axes, out_axes, axis_size), q, same_signature=False)

    @api_boundary
    @functools.wraps(fn)
    def vmapped(*args, **kwargs):
        if isinstance(in_axes, list) and len(args) > 1 or isinstance(in_axes, tuple):
            if len(in_axes) != len(args):
                raise SprueValueError(f"vmap({_name(fn)}): in_axes has {len(in_axes)} entries but the function was"
                                      f" called with {len(args)} positional arguments{_where()}")
            spec = tuple(in_axes)
        else:
            spec = tuple([in_axes] * len(args))
        leaves, tree = tree_flatten((tuple(args), dict(kwargs)))
        axes = _broadcast_prefix(spec, tree.children[0], "in_axes", fn) + [0] * tree.children[1].num_leaves
        names = parameter_names(fn)
        _, paths, _ = tree_flatten_with_path((tuple(args), dict(kwargs)))
        size, sized_by = axis_size, (None if axis_size is None else ("axis_size", None, None))
        moved, dims, avals = [], [], []
        for x, ax, path in zip(leaves, axes, paths):
            a = aval_of(x)
            if ax is None:
                moved.append(x)
                dims.append(None)
                avals.append(a.update(weak_type=a.weak_type))
                continue
            if not isinstance(ax, int) or not -a.ndim <= ax < a.ndim:
                raise SprueValueError(f"vmap({_name(fn)}): in_axes {ax} is out of range for argument"
                                      f" {_pretty(path, names)} of type {a.str_short()}{_where()}")
            ax %= a.ndim
            n = a.shape[ax]
            if size is None:
                size, sized_by = n, (path, a, ax)
            elif not _same_size(n, size):
                p0, a0, ax0 = sized_by
                if a0 is None:
                    raise SprueValueError(f"vmap({_name(fn)}): axis_size={axis_size} but argument {_pretty(path, names)}"
                                          f" of type {a.str_short()} has size {n} along axis {ax}{_where()}")
                raise SprueValueError(
                    f"vmap({_name(fn)}) got inconsistent sizes for the mapped axis (Invalid batch sizes; expected the"
                    f" batch size to be the same for all arguments): argument {_pretty(p0, names)}"
                    f" of type {a0.str_short()} has size {size} along axis {ax0}, argument {_pretty(path, names)}"
                    f" of type {a.str_short()} has size {n} along axis {ax}{_where()}")
            moved.append(move_batch_axis(x, ax, n, 0))
            dims.append(0)
            avals.append(a.update(shape=a.shape[:ax] + a.shape[ax + 1:], weak_type=False))
        if size is None:
            raise SprueValueError(f"vmap({_name(fn)}): in_axes {in_axes!r} maps no argument; at least one must be"
                                  f" batched (an int in in_axes), or give axis_size{_where()}")
        a_args, a_kwargs = tree_unflatten(tree, avals)
        traced = trace_function(fn, a_args, a_kwargs, names)
        outs, out_dims = batch_jaxpr(traced.closed_jaxpr.jaxpr, traced.closed_jaxpr.consts, moved, dims)
        out_spec = _broadcast_prefix(out_axes, traced.out_tree, "out_axes", fn)
        results = []
        for k, (o, d, ax) in enumerate(zip(outs, out_dims, out_spec)):
            if ax is None:
                if d is not None:
                    raise SprueValueError(f"vmap({_name(fn)}): out_axes is None for output {k}, but it depends on"
                                          f" the batched arguments; give it an int out_axes{_where()}")
                results.append(o)
                continue
            if d is None:
                o = broadcast_batch(o, size)
            nd = aval_of(o).ndim
            if not -nd <= ax < nd:
                raise SprueValueError(f"vmap({_name(fn)}): out_axes {ax} is out of range for output {k} of rank"
                                      f" {nd}{_where()}")
            results.append(move_batch_axis(o, 0, size, ax))
        return tree_unflatten(traced.out_tree, results)
    _per_example_hints_dropped(vmapped, fn)
    return vmapped


def _per_example_hints_dropped(vmapped: Callable, fn: Callable) -> None:
    """vmap(fn)'s signature: fn's parameters without their type hints, which describe one example
    (functools.wraps would hand them on, and qjit of the vmapped function would compile for them:
    with a row, `f64["*b", "n"]`, the batch axis would be taken for the row's)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    vmapped.__signature__ = sig.replace(
        parameters=[p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()],
        return_annotation=inspect.Signature.empty)


def _same_size(a, b) -> bool:
    return prove_equal(a, b) is True if not (isinstance(a, int) and isinstance(b, int)) else a == b


def _pretty(path: str, names) -> str:
    return f"'{pretty_path(path, names)}'"


# -- jacobians ----------------------------------------------------------------------------------
def _diff_args(fn, args, argnums):
    """The positions selected by argnums, and those arguments."""
    nums = _check_argnums(argnums, len(args), fn)
    return nums, tuple(args[n] for n in nums)


def _sizes(leaves) -> list:
    return [int(np.prod(aval_of(x).shape)) if aval_of(x).is_static else _dynamic(aval_of(x)) for x in leaves]


def _dynamic(a: ShapedArray):
    raise SprueValueError(f"jacobians need arrays of static shapes, got {a.str_short()}{_where()};"
                          f" use jvp/vjp/grad for dynamically shaped arrays")


def _jac_dtype(leaves, holomorphic: bool, name: str, allow_complex: bool = False):
    """The basis dtype. As JAX: holomorphic=True takes complex inputs only; otherwise jacfwd takes
    real ones (a complex input has no real Jacobian) and jacrev real or complex ones."""
    dts = [aval_of(x).dtype for x in leaves]
    for d, x in zip(dts, leaves):
        if holomorphic and not dtypes.is_complex(d):
            raise SprueTypeError(f"{name} with holomorphic=True requires complex inputs, got"
                                 f" {aval_of(x).str_short()}{_where()}")
        if not holomorphic and dtypes.is_complex(d) and not allow_complex:
            raise SprueTypeError(f"{name} requires real inputs, got {aval_of(x).str_short()}{_where()}; for"
                                 f" holomorphic differentiation pass holomorphic=True, otherwise use jvp")
        if not dtypes.is_inexact(d):
            raise SprueTypeError(f"jacobians require floating-point inputs, got {aval_of(x).str_short()}{_where()}")
    return np.result_type(*dts)


def _finish_jacobian(blocks_per_out: list[list], out_tree: TreeDef, in_tree: TreeDef, single_arg: bool):
    per_out = [tree_unflatten(in_tree, blocks) for blocks in blocks_per_out]
    if single_arg:
        per_out = [p[0] for p in per_out]
    return tree_unflatten(out_tree, per_out)


def jacfwd(fn: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False):
    """The Jacobian by forward mode: one jvp per input element, vectorized with vmap. For an output
    of shape O and an input of shape I the block has shape O + I."""
    _checked("jacfwd", fn, has_aux, argnums)
    q = _qjit_of(fn)
    if q is not None:
        return _lazy_jit(jacfwd(q.fn, argnums, has_aux, holomorphic), q)

    @api_boundary
    @functools.wraps(fn)
    def jacfwd_fn(*args):
        nums, diff = _diff_args(fn, args, argnums)
        if (fixed := _fix_untraceable(fn, args, nums, argnums)) is not None:
            part, dyn, dyn_argnums = fixed
            return jacfwd(part, dyn_argnums, has_aux, holomorphic)(*dyn)
        x_leaves, x_tree = tree_flatten(diff)
        sizes = _sizes(x_leaves)
        n = sum(sizes)
        dtype = _jac_dtype(x_leaves, holomorphic, "jacfwd")

        def push(t):
            ts, off = [], 0
            for x, s in zip(x_leaves, sizes):
                ts.append(jnp.reshape(t[off:off + s], aval_of(x).shape).astype(aval_of(x).dtype))
                off += s
            # the other arguments go through the trace too (zero tangents), so that an index
            # argument keeps the semantics of a traced index
            tangents = [tree_map(zeros_like, a) for a in args]
            for k, d in zip(nums, tree_unflatten(x_tree, ts)):
                tangents[k] = d
            flat = [t if dtypes.is_inexact(aval_of(t).dtype) else None for t in tree_flatten(tuple(tangents))[0]]
            res = _jvp_checked(fn, tuple(args), flat, has_aux)
            return (res[1], res[2]) if has_aux else res[1]

        res = vmap(push, out_axes=(-1, None) if has_aux else -1)(np.eye(n, dtype=dtype))
        touts, aux = res if has_aux else (res, None)
        t_leaves, out_tree = tree_flatten(touts)
        blocks_per_out = []
        for t in t_leaves:
            o_shape = aval_of(t).shape[:-1]
            blocks, off = [], 0
            for x, s in zip(x_leaves, sizes):
                blocks.append(jnp.reshape(t[..., off:off + s], (*o_shape, *aval_of(x).shape)))
                off += s
            blocks_per_out.append(blocks)
        jac = _finish_jacobian(blocks_per_out, out_tree, x_tree, isinstance(argnums, int))
        return (jac, aux) if has_aux else jac
    return jacfwd_fn


def jacrev(fn: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False):
    """The Jacobian by reverse mode: one vjp per output element, vectorized with vmap."""
    _checked("jacrev", fn, has_aux, argnums)
    q = _qjit_of(fn)
    if q is not None:
        return _lazy_jit(jacrev(q.fn, argnums, has_aux, holomorphic), q)

    @api_boundary
    @functools.wraps(fn)
    def jacrev_fn(*args):
        nums, diff = _diff_args(fn, args, argnums)
        if (fixed := _fix_untraceable(fn, args, nums, argnums)) is not None:
            part, dyn, dyn_argnums = fixed
            return jacrev(part, dyn_argnums, has_aux, holomorphic)(*dyn)
        x_leaves, x_tree = tree_flatten(diff)
        _jac_dtype(x_leaves, holomorphic, "jacrev", allow_complex=True)
        res = vjp(fn, *args, has_aux=has_aux)   # every argument traced (see jacfwd)
        out, vjp_fn = res[0], res[1]
        o_leaves, out_tree = tree_flatten(out)
        for o in o_leaves:
            if not (dtypes.is_complex if holomorphic else dtypes.is_float)(aval_of(o).dtype):
                want = "complex" if holomorphic else "real floating-point"
                raise SprueTypeError(f"jacrev{' with holomorphic=True' if holomorphic else ''} requires {want}"
                                     f" outputs, got {aval_of(o).str_short()}{_where()}")
        sizes = _sizes(o_leaves)
        m = sum(sizes)
        dtype = np.result_type(*[aval_of(o).dtype for o in o_leaves])

        def pull(c):
            cs, off = [], 0
            for o, s in zip(o_leaves, sizes):
                cs.append(jnp.reshape(c[off:off + s], aval_of(o).shape).astype(aval_of(o).dtype))
                off += s
            per_arg = vjp_fn(tree_unflatten(out_tree, cs))
            return tuple(per_arg[k] for k in nums)

        cts = vmap(pull)(np.eye(m, dtype=dtype))           # per diff arg: (m, *I)
        ct_leaves, _ = tree_flatten(cts)
        blocks_per_out, off = [], 0
        for o, s in zip(o_leaves, sizes):
            blocks_per_out.append([jnp.reshape(c[off:off + s], (*aval_of(o).shape, *aval_of(c).shape[1:]))
                                   for c in ct_leaves])
            off += s
        jac = _finish_jacobian(blocks_per_out, out_tree, x_tree, isinstance(argnums, int))
        return (jac, res[2]) if has_aux else jac
    return jacrev_fn


def hessian(fn: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False):
    """The Hessian: jacfwd of jacrev (holomorphic: of a complex function of complex inputs)."""
    _checked("hessian", fn, has_aux, argnums)
    q = _qjit_of(fn)
    if q is not None:
        return _lazy_jit(hessian(q.fn, argnums, has_aux, holomorphic), q)
    return jacfwd(jacrev(fn, argnums, has_aux, holomorphic), argnums, has_aux, holomorphic)


jacobian = jacrev   # JAX's alias


__all__ = ["jvp", "vjp", "grad", "value_and_grad", "vmap", "jacfwd", "jacrev", "jacobian", "hessian", "Zero",
           "is_zero"]
