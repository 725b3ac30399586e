"""Dynamic-shape benchmarks: one compilation serves every size.

    new_sizes   a softmax-and-moments kernel called on 50 vectors of 50 different lengths
                (20_000 .. 20_049 elements), compiled once with abstracted_axes. The time is for
                the whole batch; numpy does the same work. sprue's compile count must stay 1,
                which the benchmark checks (a recompilation per size would be ~50 ms each).

Target (issue 4): no compilation for a new size, and within 1.5x of numpy's time.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import sprue
import sprue.numpy as snp

SIZES = range(20_000, 20_050)


@dataclass
class Benchmark:
    name: str
    args: tuple
    impls: dict[str, Callable] = field(default_factory=dict)


def kernel_numpy(x):
    e = np.exp(x - np.max(x))
    p = e / np.sum(e)
    return np.sum(p * x) + np.mean(x * x)


@sprue.qjit(abstracted_axes={0: "n"})
def kernel_sprue(x):
    e = snp.exp(x - snp.max(x))
    p = e / snp.sum(e)
    return snp.sum(p * x) + snp.mean(x * x)


def batch(kernel):
    def run(xs):
        return np.array([kernel(x) for x in xs])
    return run


def _checked_sprue(xs):
    out = batch(kernel_sprue)(xs)
    if kernel_sprue.compile_count != 1:
        raise AssertionError(f"dynamic shapes recompiled: compile_count = {kernel_sprue.compile_count}")
    return out


def benchmarks() -> list[Benchmark]:
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(n) for n in SIZES]
    return [Benchmark("new_sizes", (xs,), {"numpy": batch(kernel_numpy), "sprue": _checked_sprue})]
