"""Abstract arguments to trace with, and what a jaxpr holds."""
import numpy as np

import sprue
from sprue.ir.core import ShapedArray


def f64(*shape) -> ShapedArray:
    """The abstract value f64[shape] (a size may be a name: f64("n", 3))."""
    return ShapedArray(shape, np.float64)


def prims(cj) -> list[str]:
    """The primitives of a closed jaxpr's equations, in order."""
    return [e.primitive.name for e in cj.eqns]


def load_text(tmp_path, text, name="prog.jaxpr"):
    """sprue.load of a jaxpr's text written to `name` in tmp_path (errors then name that file)."""
    p = tmp_path / name
    p.write_text(text)
    return sprue.load(p)
