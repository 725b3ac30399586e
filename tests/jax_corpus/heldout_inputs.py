"""The inputs and the case list of the held-out programs (make_heldout.py): one generator for all."""
from __future__ import annotations

import numpy as np

_rng = [np.random.RandomState(12345)]


def reseed(seed: int) -> None:
    """A batch's own generator (the inputs of the cases before it stay as they were)."""
    _rng[0] = np.random.RandomState(seed)


def f32(*s, lo=-2.0, hi=2.0):
    return _rng[0].uniform(lo, hi, s).astype(np.float32)


def f64(*s, lo=-2.0, hi=2.0):
    return _rng[0].uniform(lo, hi, s).astype(np.float64)


def pos(*s):
    return _rng[0].uniform(0.1, 3.0, s).astype(np.float32)


def i32(*s, lo=-5, hi=6):
    return _rng[0].randint(lo, hi, s).astype(np.int32)


def c64(*s):
    return (_rng[0].uniform(-2, 2, s) + 1j * _rng[0].uniform(-2, 2, s)).astype(np.complex64)


def spd(n):
    a = _rng[0].uniform(-1, 1, (n, n))
    return (a @ a.T + n * np.eye(n)).astype(np.float32)


CASES: list[tuple[str, object, tuple]] = []
# cases traced and run with jax.enable_x64 (float64 and int64 as the user's program asks for them)
X64: set[str] = set()


def case(name, *args):
    def deco(fn):
        CASES.append((name, fn, args))
        return fn
    return deco


def x64case(name, *args):
    """A case traced and run with jax.enable_x64."""
    X64.add(name)
    return case(name, *args)


def raw() -> np.random.RandomState:
    """The generator itself, for inputs of another kind (bytes, coin flips)."""
    return _rng[0]
