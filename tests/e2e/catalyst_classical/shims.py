"""sprue under Catalyst's, PennyLane's and JAX's names, for the ported tests (port.py): the names
those tests import, each mapped to sprue's, with Catalyst's call conventions where they differ from
sprue's (Catalyst's vjp takes the cotangents and returns values, its grad's argnums default to
None, its qjit takes options sprue has no use for). A name sprue does not have is a placeholder
that raises `NotInSprue` when used, so that only the tests using it fail."""
import functools
import types

import numpy as np

import sprue
import sprue.numpy as snp
from sprue.lax.control_flow.api import Switch


class NotInSprue(Exception):
    """A Catalyst, PennyLane or JAX name that sprue does not provide."""


class Unavailable:
    def __init__(self, name):
        self._name = name

    def __call__(self, *args, **kwargs):
        raise NotInSprue(f"{self._name} is not provided by sprue")

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Unavailable(f"{self._name}.{attr}")

    def __mro_entries__(self, bases):
        raise NotInSprue(f"{self._name} is not provided by sprue")


# -- Catalyst ---------------------------------------------------------------------------------------
_IGNORED_QJIT = {"autograph": False, "capture": None, "target": "binary", "pipelines": None, "verbose": False,
                 "logfile": None, "async_qnodes": False, "seed": None, "experimental_capture": False,
                 "disable_assertions": False, "circuit_transform_pipeline": None, "pass_plugins": None,
                 "dialect_plugins": None, "autograph_include": (), "keep_intermediate": False}


def qjit(fn=None, *, static_argnums=(), static_argnames=(), abstracted_axes=None, **options):
    unknown = set(options) - set(_IGNORED_QJIT)
    if unknown:
        raise NotInSprue(f"qjit options {sorted(unknown)} are not provided by sprue")
    if options.get("autograph"):
        raise NotInSprue("qjit(autograph=True) is not provided by sprue")
    if options.get("target", "binary") != "binary":
        raise NotInSprue(f"qjit(target={options['target']!r}) is not provided by sprue")
    if fn is None:
        return functools.partial(qjit, static_argnums=static_argnums, static_argnames=static_argnames,
                                 abstracted_axes=abstracted_axes, **options)
    return sprue.qjit(fn, static_argnums=static_argnums if static_argnums is not None else (),
                      static_argnames=static_argnames if static_argnames is not None else (),
                      abstracted_axes=abstracted_axes)


def _argnums(argnums):
    return 0 if argnums is None else argnums


def _transform(sprue_transform):
    """Catalyst's grad(f, method=, h=, argnums=), also as grad(method=...)(f)."""
    def transform(f=None, *, method=None, h=None, argnums=None):
        if f is None:
            return lambda g: sprue_transform(g, argnums=_argnums(argnums))
        return sprue_transform(f, argnums=_argnums(argnums))
    return transform


grad = _transform(sprue.grad)
value_and_grad = _transform(sprue.value_and_grad)
jacobian = _transform(sprue.jacrev)


def _selected(params, argnums):
    if argnums is None:
        return list(range(len(params)))
    return [argnums] if isinstance(argnums, int) else list(argnums)


def jvp(f, params, tangents, *, method=None, h=None, argnums=None):
    """Catalyst's jvp: tangents for the params argnums names (all by default); returns (results, jvps)."""
    params = list(params)
    chosen = _selected(params, argnums)
    full = [np.zeros(np.shape(p), sprue.float0) if not np.issubdtype(np.asarray(p).dtype, np.floating) else
            snp.zeros_like(p) for p in params]
    for k, t in zip(chosen, tangents):
        full[k] = t
    return sprue.jvp(f, tuple(params), tuple(full))


def vjp(f, params, cotangents, *, method=None, h=None, argnums=None):
    """Catalyst's vjp: returns (results, the cotangents of the params argnums names)."""
    out, back = sprue.vjp(f, *params)
    single = not isinstance(out, (tuple, list))
    cts = back(cotangents[0] if single and isinstance(cotangents, (tuple, list)) else
               type(out)(cotangents) if not single else cotangents)
    chosen = _selected(list(params), argnums)
    return out, tuple(cts[k] for k in chosen)


def vmap(fn=None, in_axes=0, out_axes=0, axis_size=None):
    if fn is None:   # @vmap(in_axes=...)
        return lambda f: sprue.vmap(f, in_axes=in_axes, out_axes=out_axes, axis_size=axis_size)
    return sprue.vmap(fn, in_axes=in_axes, out_axes=out_axes, axis_size=axis_size)


_CATALYST = {
    "qjit": qjit, "for_loop": sprue.for_loop, "while_loop": sprue.while_loop, "cond": sprue.cond,
    "switch": sprue.switch, "Switch": Switch, "SwitchCallable": Switch, "grad": grad,
    "value_and_grad": value_and_grad, "jacobian": jacobian, "jvp": jvp, "vjp": vjp, "vmap": vmap,
    # Catalyst's CompileError is also what it raises for the arguments it checks while compiling (a
    # static_argnums past the arguments), which sprue raises as SprueValueErrors: either is caught
    "CompileError": (sprue.errors.CompileError, sprue.SprueValueError), "DifferentiableCompileError": sprue.SprueTypeError,
    "PlxprCaptureCFCompatibilityError": type("PlxprCaptureCFCompatibilityError", (Exception,), {}),
}
catalyst = types.SimpleNamespace(**_CATALYST)
catalyst.api_extensions = types.SimpleNamespace(**_CATALYST)
catalyst.api_extensions.control_flow = catalyst.api_extensions

# -- PennyLane's qjit-compatible API (pennylane.qjit, pennylane.for_loop, ...) ---------------------------
pennylane = types.SimpleNamespace(**_CATALYST)

# -- JAX ----------------------------------------------------------------------------------------------
_config = types.SimpleNamespace(update=lambda name, value: None, jax_enable_x64=True, x64_enabled=True,
                                read=lambda name: True, values={"jax_enable_x64": True})
_JAX = {
    "numpy": snp, "lax": sprue.lax, "random": sprue.random, "scipy": sprue.scipy, "tree_util": sprue.tree_util,
    "grad": sprue.grad, "value_and_grad": sprue.value_and_grad, "jacobian": sprue.jacrev, "jacfwd": sprue.jacfwd,
    "jacrev": sprue.jacrev, "hessian": sprue.hessian, "jvp": sprue.jvp, "vjp": sprue.vjp, "vmap": sprue.vmap,
    "jit": lambda f=None, **kw: sprue.qjit(f, **kw) if f is not None else functools.partial(sprue.qjit, **kw),
    "make_jaxpr": sprue.make_jaxpr, "config": _config, "Array": np.ndarray, "block_until_ready": lambda x: x,
    "core": types.SimpleNamespace(ShapedArray=sprue.ShapedArray),
    "tree_flatten": sprue.tree_util.tree_flatten, "tree_unflatten": sprue.tree_util.tree_unflatten,
    "tree_map": sprue.tree_util.tree_map, "tree_all": sprue.tree_util.tree_all,
    "tree_structure": sprue.tree_util.tree_structure, "ShapedArray": sprue.ShapedArray,
}


class _Jax(types.SimpleNamespace):
    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Unavailable(f"jax.{attr}")


jax = _Jax(**_JAX)
_TABLES = {"catalyst": _CATALYST, "pennylane": _CATALYST, "jax": {**_JAX, **vars(sprue.tree_util)}}


def lookup(module: str, dotted: str, name):
    """`from <dotted> import <name>` for the ported tests."""
    if name is None:
        return Unavailable(dotted)
    if dotted in ("jax.numpy",):
        return getattr(snp, name, Unavailable(f"{dotted}.{name}"))
    if dotted == "jax" and name == "numpy":
        return snp
    found = _TABLES[module].get(name)
    return found if found is not None else Unavailable(f"{dotted}.{name}")
