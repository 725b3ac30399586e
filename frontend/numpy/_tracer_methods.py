"""The numpy array API on traced arrays: operators, properties and methods set on
sprue.trace.tracing.Tracer when sprue.numpy is imported (`x + y`, `x[i]`, `x.T`, `x.sum()`, `x.at[i].set(v)`):
sprue.numpy's __init__ calls install_tracer_methods and install_dim_operators."""
from __future__ import annotations

import types

import numpy as np

from sprue.base.errors import SprueTypeError
from sprue.ir.shapes import DimExpr
from sprue.numpy import _creation, _indexing, _linalg, _reductions, _shape, _sorting, _ufuncs
from sprue.numpy import _nonzero as _nonzero_mod
from sprue.numpy._avals import loc, type_error
from sprue.trace.tracing import Tracer

F = _ufuncs._funcs
_OPERAND_TYPES = (Tracer, DimExpr, np.ndarray, np.generic, bool, int, float, complex, list, tuple)


_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
            "matmul": "@", "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>", "divmod": "divmod",
            "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _binop(f, reflected=False, name=""):
    def op(self, other):
        if not isinstance(other, _OPERAND_TYPES):
            if other is None and name in _SYMBOLS:   # Python's own TypeError would not say where or why
                a, b = ("None", f"a traced {self.aval.str_short()}")[::-1 if not reflected else 1]
                raise SprueTypeError(f"unsupported operand types for {_SYMBOLS[name]}: {a} and {b}{loc()}: None is"
                                     f" not an array (a None argument, or a None in a pytree of arguments, reaches"
                                     f" the function as None)")
            return NotImplemented
        return f(other, self) if reflected else f(self, other)
    return op


def _pow(x, y):
    """x ** y. numpy's operator squares for `** 2`, so bool ** 2 is int8 (np.power gives int64)."""
    if type(y) is int and y == 2 and getattr(x, "dtype", None) == np.bool_:
        x = _creation.astype(x, np.int8)
    return _ufuncs.power(x, y)


_BINARY = {"add": F["add"], "sub": F["subtract"], "mul": F["multiply"], "truediv": F["divide"],
           "floordiv": F["floor_divide"], "mod": F["remainder"], "pow": _pow, "matmul": _linalg.matmul,
           "and": F["bitwise_and"], "or": F["bitwise_or"], "xor": F["bitwise_xor"], "lshift": F["left_shift"],
           "rshift": F["right_shift"], "divmod": _ufuncs.divmod}
_COMPARE = {"eq": F["equal"], "ne": F["not_equal"], "lt": F["less"], "le": F["less_equal"], "gt": F["greater"],
            "ge": F["greater_equal"]}


def _reshape(self, *shape, order="C"):
    return _shape.reshape(self, shape[0] if len(shape) == 1 else shape, order=order)


def _transpose(self, *axes):
    """x.transpose(), x.transpose(1, 0) or x.transpose((1, 0))."""
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (list, tuple))):
        axes = axes[0]
    return _shape.transpose(self, axes or None)


def _setitem(self, idx, value):
    raise type_error("__setitem__", "traced arrays are immutable: instead of x[idx] = y, write"
                                    " x = x.at[idx].set(y)")


def _round(self, ndigits=None):
    return _ufuncs.round(self, 0 if ndigits is None else ndigits)


def _method(f):
    def m(self, *args, **kwargs):
        return f(self, *args, **kwargs)
    m.__name__ = getattr(f, "__name__", "method")
    m.__doc__ = getattr(f, "__doc__", None)
    return m


def _conj(self):
    """ndarray.conj: the conjugate of a complex array; any other array unchanged (bool stays bool)."""
    return _ufuncs.conjugate(self) if self.dtype.kind == "c" else self


_METHODS = {
    "astype": _creation.astype, "reshape": _reshape, "transpose": _transpose, "swapaxes": _shape.swapaxes,
    "squeeze": _shape.squeeze, "flatten": lambda self, order="C": _shape.ravel(self, order),
    "ravel": _shape.ravel, "clip": _ufuncs.clip, "round": _ufuncs.round, "dot": _linalg.dot,
    "sort": _sorting.sort, "argsort": _sorting.argsort, "sum": _reductions.sum, "prod": _reductions.prod,
    "max": _reductions.max, "min": _reductions.min, "mean": _reductions.mean, "var": _reductions.var,
    "std": _reductions.std, "argmax": _reductions.argmax, "argmin": _reductions.argmin, "any": _reductions.any,
    "all": _reductions.all, "cumsum": _reductions.cumsum, "cumprod": _reductions.cumprod, "ptp": _reductions.ptp,
    "diagonal": _shape.diagonal, "trace": _shape.trace, "take": _indexing.take, "repeat": _shape.repeat,
    "conj": _conj, "conjugate": _conj, "copy": lambda self: self,
    "nonzero": lambda self, **kw: _nonzero_mod.nonzero(self, **kw),
    "compress": lambda self, condition, axis=None, **kw: _nonzero_mod.compress(condition, self, axis, **kw),
}


def install_tracer_methods():
    slots = {n for n, v in vars(Tracer).items() if isinstance(v, types.MemberDescriptorType)}
    clash = slots & (set(_METHODS) | {"T", "mT", "at", "real", "imag", "itemsize", "nbytes"})
    assert not clash, f"sprue.numpy methods would overwrite Tracer slots {clash}"
    for name, f in _BINARY.items():
        setattr(Tracer, f"__{name}__", _binop(f, name=name))
        setattr(Tracer, f"__r{name}__", _binop(f, reflected=True, name=name))
    for name, f in _COMPARE.items():
        setattr(Tracer, f"__{name}__", _binop(f, name=name))
    Tracer.__neg__ = lambda self: F["negative"](self)
    Tracer.__pos__ = lambda self: F["positive"](self)
    Tracer.__abs__ = lambda self: F["absolute"](self)
    Tracer.__invert__ = lambda self: F["invert"](self)
    Tracer.__round__ = _round
    Tracer.__getitem__ = lambda self, idx: _indexing.getitem(self, idx)
    Tracer.__setitem__ = _setitem
    Tracer.T = property(lambda self: _shape.transpose(self))
    Tracer.mT = property(lambda self: _shape.matrix_transpose(self))
    Tracer.at = property(lambda self: _indexing.IndexUpdateHelper(self))
    Tracer.real = property(lambda self: _ufuncs.real(self))
    Tracer.imag = property(lambda self: _ufuncs.imag(self))
    Tracer.itemsize = property(lambda self: self.dtype.itemsize)
    Tracer.nbytes = property(lambda self: self.dtype.itemsize * self.size)
    for name, f in _METHODS.items():
        setattr(Tracer, name, _method(f))


# -- sizes as numbers: a symbolic dim (x.shape[0] of a dynamically-shaped array) stays symbolic in
# integer arithmetic (n + 1, 2 * n, n // 2, n ** 2); with anything else (a float, an array, a traced
# value) it is its run-time value, a weak i64 scalar, as numpy would see the Python int x.shape[0].
_SYMBOLIC = {"__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__", "__mod__",
             "__pow__"}


def _stays_symbolic(name: str, other) -> bool:
    if name not in _SYMBOLIC or isinstance(other, (bool, np.bool_)):
        return False
    if isinstance(other, DimExpr):
        return name not in ("__floordiv__", "__mod__", "__pow__")
    if isinstance(other, (int, np.integer)):
        return other > 0 if name in ("__floordiv__", "__mod__") else other >= 0 if name == "__pow__" else True
    return False


def _dim_pow(self, k):
    out = 1
    for _ in range(int(k)):
        out = out * self
    return out


def _dim_operator(name: str, f, reflected: bool):
    symbolic = _dim_pow if name == "__pow__" else getattr(DimExpr, name, None)

    def op(self, other):
        if _stays_symbolic(name, other):
            return symbolic(self, other)
        if isinstance(other, (DimExpr, int, np.integer)) or isinstance(other, _OPERAND_TYPES):
            return f(other, self) if reflected else f(self, other)
        return NotImplemented
    op.__name__ = name
    return op


def install_dim_operators():
    for name, f in (("add", F["add"]), ("sub", F["subtract"]), ("mul", F["multiply"]), ("truediv", F["divide"]),
                    ("floordiv", F["floor_divide"]), ("mod", F["remainder"]), ("pow", _ufuncs.power)):
        setattr(DimExpr, f"__{name}__", _dim_operator(f"__{name}__", f, False))
        setattr(DimExpr, f"__r{name}__", _dim_operator(f"__r{name}__", f, True))
