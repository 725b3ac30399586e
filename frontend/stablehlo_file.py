"""`sprue.load` for StableHLO `.mlir` files, until `sprue.load` (frontend/saved.py) exists.

A stop-gap: frontend/saved.py's `load` will handle sprue's saved functions and delegate `.mlir`
files to `sprue.lowering.stablehlo_input.load_stablehlo`; this module then goes away."""
from __future__ import annotations

import os
from typing import Any


def load(path: str | os.PathLike) -> Any:
    """Compiles the StableHLO module at `path` (or given as text); returns its @main as a callable."""
    from sprue.lowering.stablehlo_input import load_stablehlo
    return load_stablehlo(path)
