"""sprue.runtime: call compiled sprue libraries from Python.

Loads a shared library built by sprue.lowering with cffi (ABI mode) and calls
its MLIR C-interface entry point, passing numpy arrays as memref descriptors
and returning results as numpy arrays that own the compiled code's buffers.
A function compiled with run-time checks returns a status first; a failed
check raises its message as sprue.errors.SprueValueError. A signature's shape
function (shape_function.py) gives result shapes before a call
(`f.result_shapes(*args)`, `f(*args, out=...)`).
Needs numpy and cffi only: never MLIR or LLVM.
"""

from sprue.runtime.element_types import ELEMENT_TYPES, ElementType, element_type, element_type_of
from sprue.runtime.function import CompiledFunction, LibraryLoadError, load, save_signature, signature_path
from sprue.runtime.kernel_signature import SIGNATURE_VERSION, STATUS_SPEC, Signature, TensorSpec
from sprue.runtime.shape_function import NoShapeFunctionError, ShapeFunction

__all__ = [
    "CompiledFunction",
    "ELEMENT_TYPES",
    "ElementType",
    "LibraryLoadError",
    "NoShapeFunctionError",
    "SIGNATURE_VERSION",
    "STATUS_SPEC",
    "ShapeFunction",
    "Signature",
    "TensorSpec",
    "element_type",
    "element_type_of",
    "load",
    "save_signature",
    "signature_path",
]
