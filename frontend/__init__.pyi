"""Type stub of sprue, for type checkers and IDEs: written by hand (tools/stubs.py keeps it in
step with the module's names; sprue.numpy's, sprue.lax's, ... stubs are generated)."""
import os
from typing import Any, Callable, Generic, ParamSpec, Sequence, TypeAlias, TypeVar, overload

from sprue import errors as errors
from sprue import lax as lax
from sprue import nn as nn
from sprue import numpy as numpy
from sprue import random as random
from sprue import scipy as scipy
from sprue.lax import debugging

debug = debugging

_P = ParamSpec("_P")
_R = TypeVar("_R", covariant=True)
_T = TypeVar("_T")

__version__: str


# An array: numpy's ndarray (what compiled functions take and return) or, inside qjit, a traced
# array. To a type checker it is Any: both kinds pass wherever an Array is declared, as numpy's
# arrays do not subclass anything a stub could name (at run time `isinstance(x, sprue.Array)` is
# true for both: sprue.api.array_type).
Array: TypeAlias = Any


class QJIT(Generic[_P, _R]):
    """A function compiled ahead of time (sprue.qjit's result): called as the function it wraps."""
    fn: Callable[_P, _R]
    name: str
    compile_count: int
    inferred_hints: dict[str, Any] | None   # the parameters' hints inferred from use, or None
    @property
    def jaxpr(self) -> Any: ...
    @property
    def mlir(self) -> str: ...
    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R: ...


@overload
def qjit(fn: Callable[_P, _R], *, static_argnums: int | Sequence[int] = ..., static_argnames: str | Sequence[str] = ...,
         keep_intermediate: bool | str | os.PathLike[str] = ..., abstracted_axes: Any = ...,
         cast_arguments: bool = ...) -> QJIT[_P, _R]: ...
@overload
def qjit(fn: None = ..., *, static_argnums: int | Sequence[int] = ..., static_argnames: str | Sequence[str] = ...,
         keep_intermediate: bool | str | os.PathLike[str] = ..., abstracted_axes: Any = ...,
         cast_arguments: bool = ...) -> Callable[[Callable[_P, _R]], QJIT[_P, _R]]: ...
kernel = qjit

def grad(fn: Callable[..., Any], argnums: int | Sequence[int] = ..., has_aux: bool = ...,
         holomorphic: bool = ...) -> Callable[..., Any]: ...
def value_and_grad(fn: Callable[..., Any], argnums: int | Sequence[int] = ...,
                   has_aux: bool = ..., holomorphic: bool = ...) -> Callable[..., Any]: ...
def jacfwd(fn: Callable[..., Any], argnums: int | Sequence[int] = ..., has_aux: bool = ...,
           holomorphic: bool = ...) -> Callable[..., Any]: ...
def jacrev(fn: Callable[..., Any], argnums: int | Sequence[int] = ..., has_aux: bool = ...,
           holomorphic: bool = ...) -> Callable[..., Any]: ...
def hessian(fn: Callable[..., Any], argnums: int | Sequence[int] = ..., has_aux: bool = ...,
            holomorphic: bool = ...) -> Callable[..., Any]: ...
jacobian = jacrev
def jvp(fn: Callable[..., Any], primals: Any, tangents: Any, has_aux: bool = ...) -> Any: ...
def vjp(fn: Callable[..., Any], *primals: Any, has_aux: bool = ...) -> Any: ...
def vmap(fn: Callable[..., _T], in_axes: Any = ..., out_axes: Any = ..., axis_size: int | None = ...) -> Callable[..., _T]: ...
def make_jaxpr(fn: Callable[..., Any], static_argnums: Sequence[int] = ...) -> Callable[..., Any]: ...
def cost(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...
def save(fn_or_jaxpr: Any, path: str | os.PathLike[str]) -> Any: ...
def load(path: str | os.PathLike[str], *, keep_intermediate: Any = ..., cast_arguments: bool = ...) -> Any: ...
def assert_shape(x: Any, shape: Any) -> Array: ...
def set_num_threads(n: int) -> int: ...
def get_num_threads() -> int: ...
def tree_flatten(tree: Any, *args: Any, **kwargs: Any) -> Any: ...
def tree_unflatten(treedef: Any, leaves: Any) -> Any: ...
def tree_map(f: Callable[..., Any], tree: Any, *rest: Any, **kwargs: Any) -> Any: ...

# the rest of sprue's names: error classes, dtypes' hints, the jaxpr types
ClosedJaxpr: Any
class ConcretizationError(TypeError): ...
Jaxpr: Any
class JaxprError(ValueError): ...
class JaxprSyntaxError(ValueError): ...
class JaxprUnsupportedError(ValueError): ...
ShapedArray: Any
class SprueError(Exception): ...
class SprueMemoryError(MemoryError): ...
class SprueTypeError(TypeError): ...
class SprueValueError(ValueError): ...
class StableHLOUnsupportedError(ValueError): ...
class UnsupportedError(NotImplementedError): ...
bool_: Any
c128: Any
c64: Any
checkpoint: Any
cond: Any
custom_jvp: Any
custom_vjp: Any
f32: Any
f64: Any
float0: Any
for_loop: Any
i16: Any
i32: Any
i64: Any
i8: Any
pytree: Any
remat: Any
switch: Any
tree_leaves: Any
tree_structure: Any
tree_util: Any
u8: Any
while_loop: Any
