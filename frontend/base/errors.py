"""sprue's exceptions. Each says what was wrong, where in the user's code, and what to do.

Every error sprue raises on purpose is a SprueError; the builtin class in its bases lets code that
catches TypeError/ValueError keep working:

    SprueError
    ├── SprueTypeError (TypeError)         a value of the wrong kind: dtype, pytree, non-array
    │   ├── ConcretizationError            a traced value used where Python needs a concrete one
    │   └── ArgumentTypeError              ... at a compiled function's call boundary
    ├── SprueValueError (ValueError)       right kind, wrong shape/axis/parameter
    │   ├── ShapeError                     shapes that do not fit (a signature, broadcasting, ...)
    │   │   └── RuntimeCheckError          a run-time check of compiled code failed
    │   ├── ArgumentValueError             ... at a compiled function's call boundary
    │   └── ParseError                     input text that does not parse (saved jaxpr, StableHLO)
    │       └── StableHLOUnsupportedError      an op or dialect a StableHLO program may not contain
    │   └── UnpicklingError                a pickled sprue function from another sprue version, or modified
    ├── UnsupportedError (NotImplementedError)   a feature sprue does not compile
    ├── CompileError (RuntimeError)        a stage of the compiler failed: `.stage` names it and
    │                                      `.ir_path` is the failing IR saved to a file (or None)
    │   ├── LoweringError                  an MLIR verification or pass failure
    │   ├── LinkError                      LLVM or the system linker failed
    │   └── CompilerNotFoundError          no C compiler to link with
    ├── LibraryLoadError (OSError)         a compiled library that cannot be loaded
    └── SprueMemoryError (MemoryError)     an array too large for memory (its size, where it is made)

AheadOfTimeWarning (a UserWarning) reports a failed compilation at decoration (see qjit).

ArgumentError is the common base of the two argument errors. Some classes are defined where they
are raised (sprue.lowering, sprue.runtime) as subclasses of the ones here.
"""
from __future__ import annotations

from sprue.base.source_info import user_frame_summary


class SprueError(Exception):
    """Base class of every error sprue raises on purpose."""


class SprueTypeError(SprueError, TypeError):
    """A value of the wrong kind: a dtype, a pytree, a non-array."""


class SprueValueError(SprueError, ValueError):
    """A value of the right kind but a wrong shape, axis or parameter."""


class ConcretizationError(SprueTypeError):
    """A traced value was used where Python needs a concrete one (an `if`, `int()`, a shape)."""


class UnsupportedError(SprueError, NotImplementedError):
    """A feature sprue does not (yet) compile."""


class ShapeError(SprueValueError):
    """Shapes that do not fit: an argument against a signature, operands against each other."""


class RuntimeCheckError(ShapeError):
    """A run-time check of compiled code failed (two sizes known only at run time disagree)."""


class ParseError(SprueValueError):
    """Input text that does not parse: a saved jaxpr, a StableHLO module."""


class UnpicklingError(SprueValueError):
    """A pickled compiled function (api/pickle_format.py) that cannot be restored: written by another
    sprue version, truncated or modified after pickling, or naming a function this process cannot
    import. Nothing of it was loaded."""


class ArgumentError(SprueError):
    """A bad argument at a compiled function's call boundary (count, dtype, rank, size)."""


class ArgumentTypeError(ArgumentError, SprueTypeError):
    """An argument of the wrong kind or dtype."""


class ArgumentValueError(ArgumentError, SprueValueError):
    """An argument of the wrong rank or sizes."""


class CompileError(SprueError, RuntimeError):
    """A compiler stage failed. `stage` names it; `ir_path` is the failing IR saved to a file."""

    def __init__(self, message: str = "", stage: str | None = None, ir_path: str | None = None):
        super().__init__(message)
        self.stage = stage
        self.ir_path = ir_path


class LibraryLoadError(SprueError, OSError):
    """A compiled library that cannot be loaded (missing, corrupt, wrong symbols)."""


class SprueMemoryError(SprueError, MemoryError):
    """An array that does not fit in memory: its byte count overflows, or its allocation failed.
    The message names the size and, where known, the line of the user's code that made it."""


class StableHLOUnsupportedError(ParseError):
    """A StableHLO input holding an op or dialect a StableHLO program may not contain (LLVM
    dialect ops, inline assembly, ...) or a malformed resource; names the op and its location."""


def at(where: str | None) -> str:
    """Suffix naming the user's source location, when it is known."""
    return f" (at {where})" if where else ""


def missing_attribute(module: str, name: str, names, numpy_module: str | None = None) -> AttributeError:
    """The AttributeError of a public module of sprue that has no `name`: it suggests only public
    names (Python's own suggestion may name a private module: `linalg` -> `_linalg`), and says when
    numpy has the function sprue.numpy lacks."""
    import difflib  # (only when a name is missing)
    if name.startswith("__"):
        return AttributeError(f"module {module!r} has no attribute {name!r}")
    public = sorted(n for n in names if not n.startswith("_"))
    close = difflib.get_close_matches(name, public, n=3)
    hint = f". Did you mean: {', '.join(repr(c) for c in close)}?" if close else ""
    if numpy_module is not None:
        import numpy  # (already imported: sprue.numpy's names are numpy's)
        if hasattr(numpy, name):
            hint += (f" (numpy.{name} is not in {module} yet: write it with {module}'s or sprue.lax's"
                     f" functions, or compute it outside qjit)")
    return AttributeError(f"module {module!r} has no attribute {name!r}{hint}")


def check_callable(fn, api: str, what: str = "the function") -> None:
    """`fn` must be callable: `for_loop(0, n, 1)(5)` is an error naming the API and the user's line,
    not Python's "'int' object is not callable" from inside sprue."""
    if not callable(fn):
        text = repr(fn)
        raise SprueTypeError(f"{api}: {what} must be a function, got {type(fn).__name__}"
                             f" {text if len(text) <= 40 else text[:37] + '...'}{at(user_frame_summary())}")


class AheadOfTimeWarning(UserWarning):
    """A function qjit compiles when it is decorated (every parameter annotated, or none) failed to
    compile then; calling it raises the error (compiling again first)."""
