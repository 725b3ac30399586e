"""Writes the example's two kernels as jaxpr files (the sources `sprue compile` reads):

    axpy.jaxpr     static shapes:  axpy(a: f64[], x: f64[4], y: f64[4]) -> a*x + y
    stretch.jaxpr  a dynamic size: stretch(x: f64[n]) -> (concatenate([x, 2*x]): f64[2n], sum(x): f64[])

Usage: python gen_kernels.py [OUTDIR]   (default: this directory)
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import sprue
import sprue.numpy as jnp


def axpy(a, x, y):
    return a * x + y


def stretch(x):
    return jnp.concatenate([x, 2.0 * x]), jnp.sum(x)


def write(fn, args, names: list[str], path: Path) -> None:
    """sprue's saved format: the jaxpr as sprue prints it, after a `#` header naming the arguments
    (the header's C wrappers take those names) and the size arguments."""
    from sprue.io.saved_format import to_text
    path.write_text(to_text(sprue.make_jaxpr(fn)(*args), None, names))


def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    f64 = np.float64
    write(axpy, (sprue.ShapedArray((), f64), sprue.ShapedArray((4,), f64), sprue.ShapedArray((4,), f64)),
          ["a", "x", "y"], out_dir / "axpy.jaxpr")
    write(stretch, (sprue.ShapedArray(("n",), f64),), ["x"], out_dir / "stretch.jaxpr")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)
