"""sprue: an ahead-of-time compiler for numeric Python.

    import sprue
    import sprue.numpy as jnp

    @sprue.qjit
    def f(x, y):
        return jnp.sum(jnp.sin(x) * y)

Python function -> jaxpr -> StableHLO -> MLIR pipelines -> LLVM IR -> object -> shared library,
called through a cffi runtime with memref descriptors.
"""
from sprue import errors, lax, nn, numpy, pytree, random, scipy, tree_util  # noqa: F401  (public modules; sprue.numpy also attaches the array methods to tracers)
from sprue.api.array_type import Array
from sprue.api.costs import cost
from sprue.api.hints import bool_, c64, c128, f32, f64, i8, i16, i32, i64, u8
from sprue.api.numpy_vmap import apply_along_axis as _apply_along_axis
from sprue.api.numpy_vmap import vectorize as _vectorize
from sprue.api.qjit import QJIT, qjit
from sprue.api.saved import load, save
from sprue.api.shape_signatures import assert_shape
from sprue.api.traced import make_jaxpr
from sprue.api.transforms import grad, hessian, jacfwd, jacobian, jacrev, jvp, value_and_grad, vjp, vmap
from sprue.base.dtypes import float0
from sprue.base.errors import (
    ConcretizationError,
    SprueError,
    SprueMemoryError,
    SprueTypeError,
    SprueValueError,
    StableHLOUnsupportedError,
    UnsupportedError,
)
from sprue.base.errors import missing_attribute as _missing_attribute
from sprue.base.pytree import tree_flatten, tree_leaves, tree_map, tree_structure, tree_unflatten
from sprue.io.jaxpr_lexer import JaxprError, JaxprSyntaxError, JaxprUnsupportedError
from sprue.ir.core import ClosedJaxpr, Jaxpr, ShapedArray
from sprue.lax import debugging as debug  # (sprue.debug.print, as jax.debug.print)
from sprue.lax.control_flow.api import cond_decorator as cond
from sprue.lax.control_flow.api import for_loop
from sprue.lax.control_flow.api import switch_decorator as switch
from sprue.lax.control_flow.api import while_loop_decorator as while_loop
from sprue.lax.custom_derivatives import checkpoint, custom_jvp, custom_vjp, remat
from sprue.runtime.threads import get_num_threads, set_num_threads  # noqa: E402

# sprue.numpy's functions made with vmap (sprue.api's, so defined above sprue.numpy: api/numpy_vmap.py)
numpy.apply_along_axis, numpy.vectorize = _apply_along_axis, _vectorize

kernel = qjit   # a function compiled as its own function; inside traced code its calls are call equations

__version__ = "0.1.0"

__all__ = [
    "qjit", "QJIT", "grad", "value_and_grad", "jvp", "vjp", "jacfwd", "jacrev", "jacobian", "hessian", "vmap", "cost", "assert_shape", "kernel", "save", "load", "JaxprError", "JaxprSyntaxError", "JaxprUnsupportedError", "make_jaxpr",
    "lax", "numpy", "for_loop", "while_loop", "cond", "switch", "ClosedJaxpr", "Jaxpr",
    "ShapedArray",
    "SprueError", "SprueTypeError", "SprueValueError", "ConcretizationError", "UnsupportedError",
    "SprueMemoryError", "StableHLOUnsupportedError",
    "f64", "f32", "i64", "i32", "i16", "i8", "u8", "bool_", "c64", "c128", "tree_flatten", "tree_unflatten", "tree_map",
    "tree_leaves", "tree_structure", "pytree", "tree_util",
    "set_num_threads", "get_num_threads", "random", "scipy", "nn", "custom_jvp", "custom_vjp", "checkpoint", "remat",
    "float0", "debug", "Array",
]


def __getattr__(name: str):
    raise _missing_attribute('sprue', name, globals())
