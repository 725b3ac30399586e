"""Generated code is memory-safe: out-of-bounds dynamic indices clamp (JAX's semantics), integer
division by zero gives a documented value, and sizes that are negative, too large for memory or
whose product overflows raise an error instead of reaching the allocator. The cases that could
crash run in a child process, so a regression shows as a failed test, not a dead test run."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax


def run_child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("i", [0, 4, 5, 100, -1, -5, -6, -100, 2 ** 40, -(2 ** 40)])
def test_dynamic_index_clamps(i):
    f = sprue.qjit(lambda x, i: x[i])
    x = np.arange(5.0)
    assert f(x, i) == x[np.clip(i if i >= 0 else i + 5, 0, 4)]


@pytest.mark.parametrize("start", [-10, 0, 3, 7, 2 ** 40])
def test_dynamic_slice_starts_clamp(start):
    f = sprue.qjit(lambda x, s: lax.dynamic_slice(x, (s,), (3,)))
    x = np.arange(8.0)
    s = min(max(start, 0), 5)
    np.testing.assert_array_equal(f(x, start), x[s:s + 3])


@pytest.mark.parametrize("i", [-100, -6, 5, 100])
def test_out_of_bounds_updates_are_dropped(i):
    f = sprue.qjit(lambda x, i: x.at[i].set(-1.0))
    x = np.arange(5.0)
    np.testing.assert_array_equal(f(x, i), x)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8])
def test_integer_division_by_zero_is_zero(dtype):
    f = sprue.qjit(lambda a, b: (lax.div(a, b), lax.rem(a, b), a // b, a % b))
    a = np.array([7, 0, 5], dtype)
    b = np.zeros(3, dtype)
    for got in f(a, b):
        np.testing.assert_array_equal(got, np.zeros(3, dtype))


def test_int_min_divided_by_minus_one_does_not_trap():
    f = sprue.qjit(lambda a, b: (lax.div(a, b), lax.rem(a, b)))
    for dt in (np.int64, np.int32, np.int8):
        a = np.array([np.iinfo(dt).min, -6], dt)
        q, r = f(a, np.array([-1, -1], dt))
        np.testing.assert_array_equal(q, [np.iinfo(dt).min, 6])   # INT_MIN / -1 wraps (XLA's value), no SIGFPE
        np.testing.assert_array_equal(r, [0, 0])


@pytest.mark.parametrize("n", [-1, -(2 ** 40)])
def test_negative_sizes_are_errors(n):
    f = sprue.qjit(lambda n: jnp.zeros(n))
    with pytest.raises(sprue.SprueValueError, match="negative dimensions are not allowed"):
        f(n)


def test_sizes_too_large_for_memory_or_overflowing_are_errors_not_crashes():
    proc = run_child("""
        import numpy as np, sprue, sprue.numpy as jnp
        f = sprue.qjit(lambda n, m: jnp.zeros((n, m), np.int8))
        g = sprue.qjit(lambda n: jnp.ones(n))
        h = sprue.qjit(lambda n: jnp.eye(n))
        cases = [(f, (2 ** 32, 2 ** 32)), (f, (2 ** 31, 2 ** 31)), (f, (2 ** 62, 4)), (g, (2 ** 62,)),
                 (g, (2 ** 40,)), (h, (2 ** 20,))]
        for fn, args in cases:
            try:
                fn(*args)
                print("NO ERROR", args)
            except sprue.SprueValueError as e:
                assert "would take more than this machine's memory" in str(e), e
                print("ok")
        print(f(3, 4).shape, g(5).shape, h(3).shape)
    """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.split()
    assert proc.stdout.count("ok") == 6, proc.stdout
    assert "(3, 4) (5,) (3, 3)" in proc.stdout


def test_size_arithmetic_that_overflows_is_caught():
    proc = run_child("""
        import numpy as np, sprue, sprue.numpy as jnp
        f = sprue.qjit(lambda n: jnp.ones((n * n, n)))     # n*n*n wraps around in int64
        try:
            f(2 ** 22)
            print("NO ERROR")
        except sprue.SprueValueError as e:
            print("ok" if "memory" in str(e) else e)
    """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "ok", proc.stdout


def test_failed_checks_zero_the_later_sizes():
    # after a failed check the compiled code runs on; sizes used after it are 0, so a loop bounded by
    # a size that failed its check does not run off the end of anything
    @sprue.qjit
    def f(n, x):
        y = jnp.ones(n)                  # n = -5: the sign check fails
        return x + jnp.sum(y), y.shape[0]
    with pytest.raises(sprue.SprueValueError, match="negative dimensions"):
        f(-5, np.ones(3))
    out, size = f(2, np.ones(3))
    np.testing.assert_array_equal(out, np.full(3, 3.0))
    assert size == 2
