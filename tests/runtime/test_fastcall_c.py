"""runtime/fastcall_c.py: the fast caller in C takes the calls that fit its kinds, gives the results
the Python caller gives (checked against numpy), and hands everything else to the Python caller."""
import os
import sysconfig
from pathlib import Path

import numpy as np
import pytest

import sprue
import sprue.numpy as snp
from sprue import lax
from sprue.errors import RuntimeCheckError, SprueMemoryError
from sprue.runtime import fastcall_c
from tests.helpers.system import rss_bytes, run_in_threads


def _plan(f):
    return f._mono


def test_the_extension_is_built_where_python_has_its_headers():
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        pytest.skip("this Python has no headers: the C caller cannot be built, calls take the Python one")
    if os.environ.get("SPRUE_FASTCALL_C", "1").strip().lower() in ("0", "off", "false", "no"):
        pytest.skip("SPRUE_FASTCALL_C=0 turns the C caller off")
    assert fastcall_c.extension() is not None, f"`make venv` builds {fastcall_c.extension_path()}"


@pytest.fixture
def built():
    if fastcall_c.extension() is None:
        pytest.skip("the C caller is not built here (no Python.h): the Python caller is tested elsewhere")


def test_arrays_scalars_and_pytrees_take_the_c_caller(built):
    f = sprue.qjit(lambda x, s: {"sum": snp.sum(x) * s, "y": x * s, "n": x.shape[0] + 0})
    x = np.arange(12.0).reshape(3, 4)
    for _ in range(3):
        out = f(x, 2.5)
    assert type(_plan(f)).__name__ == "Caller"
    assert out["sum"] == np.sum(x) * 2.5 and type(out["sum"]) is np.float64
    np.testing.assert_array_equal(out["y"], x * 2.5)
    assert out["y"].flags.owndata is False and out["y"].flags.writeable and out["y"].flags.c_contiguous
    assert out["n"] == 3


@pytest.mark.parametrize("value", [True, 7, 2.0])
def test_python_scalars_of_each_type(built, value):
    f = sprue.qjit(lambda v: v * 3)
    f(value)
    got = f(value)
    assert type(_plan(f)).__name__ == "Caller"
    assert got == value * 3 and np.asarray(got).dtype == np.asarray(np.asarray(value) * 3).dtype


def test_an_int_out_of_range_and_other_arguments_go_to_the_python_caller(built):
    f = sprue.qjit(lambda x, k: x * k)
    x = np.arange(6.0)
    f(x, 3)
    np.testing.assert_array_equal(f(x[::2].copy(), 3), x[::2] * 3)   # another shape: a plan of its own
    np.testing.assert_array_equal(f(x, 5), x * 5)
    strided = np.arange(12.0)[::2]                  # not contiguous: copied by the Python caller
    np.testing.assert_array_equal(f(strided, 5), strided * 5)
    readonly = x.copy()
    readonly.flags.writeable = False
    np.testing.assert_array_equal(f(readonly, 2), x * 2)
    with pytest.raises(ValueError, match="does not fit in i64"):
        f(x, 2 ** 70)


@pytest.mark.parametrize("n", [100, 300])
def test_many_arguments_take_the_c_caller_and_the_python_one_is_made_when_needed(built, monkeypatch, n):
    """The C caller takes the call: up to fastcall_c.MAX_ARGS arguments with a case per arity,
    beyond through the library's packed entry. The Python caller, its fallback, is generated (its
    source compiled) at its first call only."""
    from sprue.runtime import fastcall
    generated = []
    generate = fastcall._generate
    monkeypatch.setattr(fastcall, "_generate", lambda *a: generated.append(1) or generate(*a))
    names = ", ".join(f"x{i}" for i in range(n))
    f = sprue.qjit(eval(f"lambda {names}: sum(x * (i + 1) for i, x in enumerate(({names},)))"))
    xs = [np.full(3, float(i)) for i in range(n)]
    expected = sum(x * (i + 1) for i, x in enumerate(xs))
    f(*xs)
    np.testing.assert_array_equal(f(*xs), expected)
    assert type(_plan(f)).__name__ == "Caller" and generated == []
    strided = [np.arange(6.0)[::2]] + xs[1:]          # not contiguous: the Python caller copies it
    np.testing.assert_array_equal(f(*strided), expected - xs[0] + strided[0])
    assert generated


def test_a_library_without_a_packed_entry_keeps_the_python_caller(built, monkeypatch):
    """Beyond MAX_ARGS arguments a library built before the packed entry existed (or any without
    one) is called by the Python caller."""
    from sprue.runtime.function import CompiledFunction
    monkeypatch.setattr(CompiledFunction, "packed_address", lambda self: None)
    n = fastcall_c.MAX_ARGS + 3
    names = ", ".join(f"x{i}" for i in range(n))
    f = sprue.qjit(eval(f"lambda {names}: sum(x * (i + 1) for i, x in enumerate(({names},)))"))
    xs = [np.full(2, float(i)) for i in range(n)]
    f(*xs)
    np.testing.assert_array_equal(f(*xs), sum(x * (i + 1) for i, x in enumerate(xs)))
    assert type(_plan(f)).__name__ != "Caller"


def test_results_beyond_the_stack_words_take_the_c_caller(built):
    """More result words than fastcall_c.MAX_WORDS: the C caller's state is on the heap."""
    n = fastcall_c.MAX_WORDS // 7 + 5     # rank-2 results: 7 words each
    f = sprue.qjit(lambda x: tuple(x * (i + 1) for i in range(n)))
    x = np.arange(6.0).reshape(2, 3)
    f(x)
    out = f(x)
    assert type(_plan(f)).__name__ == "Caller"
    assert len(out) == n and all(np.array_equal(o, x * (i + 1)) for i, o in enumerate(out))


def test_results_sharing_a_buffer_are_copies(built):
    f = sprue.qjit(lambda x: (x + 0.0,) * 2)
    x = np.ones(4)
    f(x)
    a, b = f(x)
    a[0] = 5.0
    assert b[0] == 1.0


def test_static_arguments_and_dynamic_shapes(built):
    f = sprue.qjit(lambda x, n: x * n, static_argnums=1, abstracted_axes=({0: "n"}, None))
    for size in (5, 9, 5):
        x = np.arange(float(size))
        np.testing.assert_array_equal(f(x, 3), x * 3)
    np.testing.assert_array_equal(f(np.arange(4.0), 4), np.arange(4.0) * 4)


def test_concurrent_calls_share_nothing(built):
    f = sprue.qjit(lambda x: lax.fori_loop(0, 20, lambda i, c: c * 1.01 + x, x))
    xs = [np.full(1000, float(i)) for i in range(4)]
    want = [np.asarray(f(x)) for x in xs]
    errors = []

    def worker(i):
        for _ in range(200):
            if not np.array_equal(f(xs[i]), want[i]):
                errors.append(i)
    run_in_threads(worker, 4)
    assert errors == []


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="no /proc/self/statm to read the resident set")
def test_every_result_buffer_is_freed(built):
    f = sprue.qjit(lambda x: (x * 2.0, snp.sum(x)))
    x = np.ones(8192)
    f(x)
    before = rss_bytes()
    for _ in range(20000):        # 64 KiB a call: 1.3 GB if the arrays' buffers leaked
        f(x)
    assert rss_bytes() - before < 100 * 2 ** 20


def test_a_failed_allocation_raises_through_the_c_caller(built):
    f = sprue.qjit(lambda x: snp.outer(x, x) + 1.0, abstracted_axes=({0: "n"},))
    f(np.ones(3))
    f(np.ones(3))
    assert type(_plan(f)).__name__ == "Caller"
    with pytest.raises(SprueMemoryError, match="could not allocate"):
        f(np.ones(1 << 22))          # a (2^22, 2^22) result: 128 TiB


def test_a_failed_run_time_check_raises_through_the_c_caller(built):
    # the library's own caller (natural kinds: the size argument an int, the array of any size):
    # its entry check's status is read in C, and a failed one raises as the Python caller does
    f = sprue.qjit(lambda x: x * 2.0, abstracted_axes=({0: "n"},))
    f(np.ones(3))
    cf = f._last.function
    assert type(cf._fast).__name__ == "Caller"
    np.testing.assert_array_equal(cf(3, np.arange(3.0))[0], np.arange(3.0) * 2)
    with pytest.raises(RuntimeCheckError, match="sizes.0. of its descriptor differs from the size argument n"):
        cf(4, np.ones(3))


def test_qjit_functions_dispatch_in_c_and_fall_back_to_python(built):
    """frontend/api/qjit.py derives from the C Dispatcher: positional calls outside traces go to
    the last fast caller; keywords, defaults, other arities and calls inside a trace to _dispatch."""
    f = sprue.qjit(lambda x, scale=2.0: x * scale)
    assert isinstance(f, fastcall_c.extension().Dispatcher)
    x = np.arange(5.0)
    np.testing.assert_array_equal(f(x, 3.0), x * 3.0)
    np.testing.assert_array_equal(f(x, 3.0), x * 3.0)
    np.testing.assert_array_equal(f(x), x * 2.0)                  # a default
    np.testing.assert_array_equal(f(x, scale=4.0), x * 4.0)       # a keyword
    g = sprue.qjit(lambda x: f(x, 5.0) + 1.0)                     # f called inside g's trace
    np.testing.assert_array_equal(g(x), x * 5.0 + 1.0)
    with pytest.raises(TypeError):
        f()
