"""unit_dims.drop_unit_expansions on a fused chain that reads one expansion twice: the gradient of
a three-trip loop of x -> log1p(exp(x)) / 2, as sprue.grad prints it (data/), used to erase the
expansion twice and crash the compiler (a segfault in MLIR's bindings)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

import sprue


def test_expansion_read_twice_compiles_and_matches_numpy():
    f = sprue.load(Path(__file__).with_name("data") / "grad_loop_unit_expansion.jaxpr")
    x = np.linspace(-1.0, 1.0, 4)
    grad, acc = np.ones(4), x.copy()
    for _ in range(3):   # the chain rule through each trip: d/dacc log1p(exp(acc)) / 2 = sigmoid(acc) / 2
        grad *= 0.5 / (1 + np.exp(-acc))
        acc = np.log1p(np.exp(acc)) * 0.5
    np.testing.assert_allclose(f(x), grad, rtol=1e-14)
