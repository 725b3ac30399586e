"""sprue's exceptions, as a public module (JAX's `jax.errors` is the same: a public name for classes
defined in a lower layer). Code inside sprue imports them from sprue.base.errors."""
from sprue.base.errors import (
                               AheadOfTimeWarning,
                               ArgumentError,
                               ArgumentTypeError,
                               ArgumentValueError,
                               CompileError,
                               ConcretizationError,
                               LibraryLoadError,
                               ParseError,
                               RuntimeCheckError,
                               ShapeError,
                               SprueError,
                               SprueMemoryError,
                               SprueTypeError,
                               SprueValueError,
                               StableHLOUnsupportedError,
                               UnpicklingError,
                               UnsupportedError,
)
from sprue.io.jaxpr_lexer import JaxprError, JaxprSyntaxError, JaxprUnsupportedError

__all__ = ["AheadOfTimeWarning", "ArgumentError", "ArgumentTypeError", "ArgumentValueError", "CompileError", "ConcretizationError",
           "JaxprError", "JaxprSyntaxError", "JaxprUnsupportedError", "LibraryLoadError", "ParseError",
           "RuntimeCheckError", "ShapeError", "SprueError", "SprueMemoryError", "SprueTypeError",
           "SprueValueError", "StableHLOUnsupportedError", "UnpicklingError", "UnsupportedError"]
