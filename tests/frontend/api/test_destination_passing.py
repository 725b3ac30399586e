"""`f(*args, out=dests)` computes the results in the destinations (issue 16): the destination
variant of the program (stablehlo.lower's `destinations`, compiled at the first such call) takes
them as arguments, and one-shot bufferization writes each result there instead of into a buffer of
its own. Destinations it cannot take (strided, sharing memory with an argument or another
destination, sizes known only after the call) are filled by copying, as before."""
import re
from pathlib import Path

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.errors import RuntimeCheckError
from sprue.runtime.function import CompiledFunction


def compiled_of(f):
    """The runtime function of a qjit'd function's only compilation."""
    (c,) = list(f._cache.values()) or [f._fixed]
    return c.function


@pytest.fixture
def no_copy(monkeypatch):
    """Fails a test whose out= call took the copying path (the kernel run for fresh results)."""
    run = CompiledFunction._run

    def refuse(self, descriptors):
        if self.signature.results:   # (the destination variant has none)
            raise AssertionError(f"{self.name}: out= ran the kernel for fresh results and copied them")
        return run(self, descriptors)
    monkeypatch.setattr(CompiledFunction, "_run", refuse)


def _allocations(ll_text: str) -> list[str]:
    return re.findall(r"call .*@(?:aligned_alloc|malloc|calloc|_sprue_\w*alloc)\(", ll_text)


def test_results_are_computed_in_their_destinations(no_copy):
    @sprue.qjit
    def f(x, y):
        return jnp.tanh(x @ y) + 1.0, jnp.sum(x, axis=0), jnp.max(y)
    x, y = np.random.rand(8, 16), np.random.rand(16, 4)
    a, b, c = np.full((8, 4), np.nan), np.full(16, np.nan), np.full((), np.nan)
    pointers = [d.ctypes.data for d in (a, b, c)]
    for _ in range(2):
        got = f(x, y, out=(a, b, c))
        assert got[0] is a and got[1] is b and got[2] is c
        assert [d.ctypes.data for d in (a, b, c)] == pointers
        np.testing.assert_allclose(a, np.tanh(x @ y) + 1.0, rtol=1e-13)
        np.testing.assert_allclose(b, x.sum(axis=0), rtol=1e-13)
        assert c == y.max()
        x, y = np.random.rand(8, 16), np.random.rand(16, 4)


def test_dynamic_sizes_and_run_time_checks_one_variant_for_every_size(no_copy):
    @sprue.qjit(abstracted_axes={0: "n"})
    def f(x):
        return x[1:] * 2.0 - x[:-1], jnp.cumsum(x)
    for n in (10, 3, 1000):
        x = np.random.rand(n)
        a, b = np.empty(n - 1), np.empty(n)
        f(x, out=(a, b))
        np.testing.assert_allclose(a, x[1:] * 2.0 - x[:-1], rtol=1e-15)
        np.testing.assert_allclose(b, np.cumsum(x), rtol=1e-12)
    assert f.compile_count == 1
    assert compiled_of(f).signature.status_messages is not None   # (its entry checks: the status's cell)


def test_a_failed_check_raises_as_without_out():
    @sprue.qjit(abstracted_axes={0: "n"})
    def f(x, i):
        return jnp.max(x[:i])
    x = np.random.rand(5)
    with pytest.raises(RuntimeCheckError) as without:
        f(x, 0)
    with pytest.raises(RuntimeCheckError) as into:
        f(x, 0, out=np.empty(()))
    assert str(into.value) == str(without.value)
    dest = np.empty(())
    f(x, 3, out=dest)
    assert dest == x[:3].max()


@pytest.mark.parametrize("case", ["shifted", "reversed", "same"])
def test_destinations_sharing_memory_with_arguments_get_the_right_values(case):
    """An out= that overlaps an argument (or another destination) would be read after the kernel
    wrote it: such calls copy."""
    @sprue.qjit(abstracted_axes={0: "n"})
    def f(x):
        return x[1:] + x[:-1]

    @sprue.qjit
    def rev(x):
        return x[::-1] * 1.0

    x = np.arange(9.0)
    if case == "shifted":
        want = x[1:] + x[:-1]
        f(x, out=x[1:])
        np.testing.assert_array_equal(x[1:], want)
    elif case == "reversed":
        want = x[::-1].copy()
        rev(x, out=x)
        np.testing.assert_array_equal(x, want)
    else:
        want = x[1:] + x[:-1]
        f(x, out=x[:8])
        np.testing.assert_array_equal(x[:8], want)


def test_strided_destinations_are_copied_into():
    @sprue.qjit
    def f(x):
        return jnp.sin(x) * 2.0
    x = np.random.rand(6)
    wide = np.zeros((6, 2))
    f(x, out=wide[:, 1])
    np.testing.assert_array_equal(wide[:, 1], np.sin(x) * 2.0)
    np.testing.assert_array_equal(wide[:, 0], 0.0)


def test_the_variant_allocates_no_result(tmp_path):
    """The destination variant's code calls no allocator for an elementwise result and a sum (the
    program without destinations allocates both: the check can fail)."""
    def f(x, y):
        return jnp.exp(x) * y + 1.0, jnp.sum(x * y)
    x, y = np.random.rand(64), np.random.rand(64)
    plain = sprue.qjit(f, keep_intermediate=tmp_path / "plain")
    into = sprue.qjit(f, keep_intermediate=tmp_path / "into")
    plain(x, y)
    a, b = np.empty(64), np.empty(())
    into(x, y, out=(a, b))
    np.testing.assert_allclose(a, np.exp(x) * y + 1.0, rtol=1e-14)
    np.testing.assert_allclose(b, np.sum(x * y), rtol=1e-13)
    made = sorted(p.name for p in (tmp_path / "into").glob("*.opt.ll"))
    assert made == ["f.opt.ll", "f_into.opt.ll"]
    assert len(_allocations(Path(tmp_path / "plain" / "f.opt.ll").read_text())) >= 2
    assert _allocations(Path(tmp_path / "into" / "f_into.opt.ll").read_text()) == []
