"""The runtime's guarantees (README "Guarantees"): any numpy layout is accepted, results never
alias inputs or each other, memory stays flat over many calls, every argument problem is a
sprue ArgumentError, and a failed run-time check is a RuntimeCheckError."""
import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.base.errors import ArgumentError, ArgumentTypeError, ArgumentValueError, RuntimeCheckError, SprueError
from tests.helpers.system import rss_bytes


def affine(x, y):
    return x * 2.0 + y


F = sprue.qjit(affine)
BASE = np.arange(24.0).reshape(4, 6)


@pytest.mark.parametrize("name,x", [
    ("contiguous", BASE.copy()),
    ("read-only", (lambda a: (a.setflags(write=False), a)[1])(BASE.copy())),
    ("strided", np.arange(48.0).reshape(8, 6)[::2]),
    ("transposed", np.arange(24.0).reshape(6, 4).T),
    ("fortran", np.asfortranarray(BASE)),
    ("negative strides", BASE[::-1, ::-1]),
    ("broadcast view", np.broadcast_to(np.arange(6.0), (4, 6))),
])
def test_any_layout_is_accepted(name, x):
    y = np.ones((4, 6))
    np.testing.assert_array_equal(F(x, y), affine(x, y))


@pytest.mark.parametrize("shape", [(0, 6), (4, 0), (0, 0)])
def test_zero_size_inputs(shape):
    f = sprue.qjit(lambda x: (x * 2.0, jnp.sum(x)), abstracted_axes={0: "n", 1: "m"})
    x = np.zeros(shape)
    a, s = f(x)
    assert a.shape == shape and s == 0.0


def test_results_never_alias_inputs_or_each_other():
    ident = sprue.qjit(lambda x: (x, x, x[1:]))
    x = np.arange(5.0)
    a, b, c = ident(x)
    for r in (a, b, c):
        assert not np.shares_memory(r, x)
    assert not np.shares_memory(a, b)
    a[0] = 99.0
    assert x[0] == 0.0 and b[0] == 0.0
    assert c.flags.writeable and a.flags.owndata or a.base is not None


def test_inputs_are_never_written():
    f = sprue.qjit(lambda x: x.at[0].set(-1.0))
    x = np.arange(4.0)
    before = x.copy()
    np.testing.assert_array_equal(f(x), np.r_[-1.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(x, before)


def test_many_calls_keep_memory_flat():
    f = sprue.qjit(lambda x: (x * 2.0, jnp.sum(x)))
    x = np.ones(1000)          # each call returns 8 kB: 10**5 leaked results would be 800 MB
    for _ in range(10_000):
        f(x)
    before = rss_bytes()
    for _ in range(100_000):
        f(x)
    grown = rss_bytes() - before
    assert grown < 64 * 2 ** 20, f"RSS grew by {grown / 2 ** 20:.1f} MB over 10^5 calls"


def test_argument_errors_are_sprue_errors_and_builtin_errors():
    hinted = sprue.qjit(lambda x: x + 1.0)
    hinted(np.ones(3))
    cf = hinted._last.function       # the compiled function behind a signature: the call boundary
    with pytest.raises(ArgumentTypeError) as info:
        cf("three floats")
    assert isinstance(info.value, TypeError) and isinstance(info.value, SprueError)
    with pytest.raises(ArgumentValueError) as info:
        cf(np.ones(4))
    assert isinstance(info.value, ValueError) and isinstance(info.value, ArgumentError)
    with pytest.raises(ArgumentTypeError, match="argument"):
        cf(np.ones(3), np.ones(3))


def test_failed_runtime_check_is_a_runtime_check_error():
    f = sprue.qjit(lambda x, y: x + y, abstracted_axes=({0: "n"}, {0: "m"}))
    with pytest.raises(RuntimeCheckError) as info:
        f(np.ones(3), np.ones(4))
    assert isinstance(info.value, ValueError)
