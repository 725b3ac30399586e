"""numpy's own functions applied to traced arrays: `np.exp(x)`, `np.dot(x, w)`, `np.sum(x)`,
`np.linalg.norm(x)` inside qjit run sprue.numpy's function of the same name (numpy's dispatch
protocols NEP 13 `__array_ufunc__` and NEP 18 `__array_function__`, set on Tracer here), so numpy
code traces unchanged wherever sprue.numpy has the function; where it has none, one error names
the numpy function and says what to use. sprue.numpy follows numpy's semantics (its documented
differences are JAX's: clamped out-of-bounds gathers, immutable arrays), so the result is the one
numpy would compute. `out=` is refused: traced arrays are immutable."""
from __future__ import annotations

import threading
import types

from sprue.base.errors import SprueTypeError
from sprue.base.source_info import user_frame_summary
from sprue.trace.tracing import Tracer, at

# numpy ufunc names whose sprue.numpy function is spelled otherwise
_UFUNC_ALIASES = {"true_divide": "divide", "conjugate": "conj"}
# ufunc methods that are reductions or scans of sprue.numpy (numpy's default axis for them is 0)
_REDUCE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min", "fmax": "nanmax",
           "fmin": "nanmin", "logical_and": "all", "logical_or": "any"}
_ACCUMULATE = {"add": "cumsum", "multiply": "cumprod"}
_active = threading.local()


def _unavailable(what: str, instead: str) -> SprueTypeError:
    return SprueTypeError(f"{what} on a traced array: {instead}{at(user_frame_summary())}")


def _target(namespace: types.ModuleType, module: str, name: str):
    """sprue.numpy's function for numpy's `module`.`name` (numpy.linalg.norm -> sprue.numpy.linalg.norm)."""
    ns = namespace
    for part in module.split(".")[1:]:
        ns = getattr(ns, part, None)
        if ns is None:
            return None
    f = getattr(ns, name, None)
    return f if callable(f) else None


def _guarded(f, name: str, args, kwargs):
    """f(*args, **kwargs), refusing to re-enter the dispatch of `name` (a sprue.numpy function that
    called numpy's own on a traced array would otherwise recurse)."""
    stack = getattr(_active, "names", None)
    if stack is None:
        stack = _active.names = []
    if name in stack:
        raise SprueTypeError(f"internal: sprue.numpy.{name} called numpy.{name} on a traced array")
    stack.append(name)
    try:
        return f(*args, **kwargs)
    finally:
        stack.pop()


def install_numpy_dispatch(namespace: types.ModuleType) -> None:
    """Traced arrays dispatch numpy's ufuncs and array functions to `namespace` (sprue.numpy)."""

    def array_ufunc(self, ufunc, method, *inputs, **kwargs):
        name = ufunc.__name__
        if kwargs.get("out") is not None:
            raise _unavailable(f"numpy.{name}(..., out=...)", "traced arrays are immutable: use the result of"
                               f" sprue.numpy.{_UFUNC_ALIASES.get(name, name)}(...), or x.at[...].set(...)")
        kwargs.pop("out", None)
        if method == "__call__":
            target = getattr(namespace, _UFUNC_ALIASES.get(name, name), None)
        elif method in ("reduce", "accumulate"):
            table = _REDUCE if method == "reduce" else _ACCUMULATE
            target = getattr(namespace, table[name], None) if name in table else None
            if target is not None:
                kwargs.setdefault("axis", 0)
        else:
            target = None
        spelled = f"numpy.{name}" + ("" if method == "__call__" else f".{method}")
        if target is None:
            raise _unavailable(spelled, f"sprue.numpy has no equivalent of {spelled} yet; write it with"
                               f" sprue.numpy or sprue.lax functions")
        return _guarded(target, spelled, inputs, kwargs)

    def array_function(self, func, types_, args, kwargs):
        module, name = getattr(func, "__module__", None) or "numpy", func.__name__
        target = _target(namespace, module, name) if module.split(".")[0] == "numpy" else None
        if target is None or target is func:
            raise _unavailable(f"{module}.{name}", f"sprue.numpy has no {name} yet; write it with sprue.numpy"
                               f" or sprue.lax functions, or compute it outside qjit")
        return _guarded(target, f"{module}.{name}", args, kwargs)

    Tracer.__array_ufunc__ = array_ufunc
    Tracer.__array_function__ = array_function


__all__ = ["install_numpy_dispatch"]
