"""Run-time checks: a `check` lowers into the status @main returns first; a nonzero status makes
the runtime free every result and raise SprueValueError with the first failed check's message."""
import json

import cffi
import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from sprue.base.errors import SprueValueError, UnsupportedError
from sprue.lowering.stablehlo import lower, lower_jaxpr
from sprue.runtime import STATUS_SPEC, Signature, TensorSpec
from sprue.runtime.abi import c_interface
from sprue.trace.tracing import dim_value

_FFI = cffi.FFI()


def bounded(x, k):
    lax.check(lax.lt(k, 10), "k must be below 10")
    lax.check(lax.ge(k, 0), "k must not be negative")
    return x * k, k + 1


def test_a_passing_check_returns_the_results():
    f = sprue.qjit(bounded)
    out, k1 = f(np.arange(3.0), 4)
    np.testing.assert_array_equal(out, np.arange(3.0) * 4)
    assert k1 == 5


@pytest.mark.parametrize("k, message", [(10, "k must be below 10"), (-1, "k must not be negative")])
def test_a_failing_check_raises_its_message(k, message):
    f = sprue.qjit(bounded)
    with pytest.raises(SprueValueError, match=f"^{message}$"):
        f(np.arange(3.0), k)
    out, _ = f(np.arange(3.0), 2)   # the function stays usable
    np.testing.assert_array_equal(out, np.arange(3.0) * 2)


def test_the_first_failed_check_wins():
    def f(k):
        lax.check(lax.lt(k, 5), "first")
        lax.check(lax.lt(k, 3), "second")
        lax.check(lax.lt(k, 100), "third")
        return k * 2
    g = sprue.qjit(f)
    assert g(1) == 2
    with pytest.raises(SprueValueError, match="^second$"):
        g(4)
    with pytest.raises(SprueValueError, match="^first$"):
        g(7)
    with pytest.raises(SprueValueError, match="^first$"):
        g(1000)   # all three fail: the first one's code is kept


def test_checks_on_sizes_known_only_at_run_time():
    def f(x, y):
        lax.check(lax.eq(dim_value(x.shape[0]), dim_value(y.shape[0])), "x and y need the same length")
        return lax.reduce_sum(x, (0,)), lax.reduce_sum(y, (0,))
    g = sprue.qjit(f, abstracted_axes=({0: "n"}, {0: "m"}))
    for n in (0, 1, 3, 1000):
        s, t = g(np.ones(n), np.ones(n))
        assert s == t == n
    with pytest.raises(SprueValueError, match="same length"):
        g(np.ones(3), np.ones(4))
    assert g.compile_count == 1


def test_a_failed_check_frees_every_result():
    def f(x, k):
        lax.check(lax.lt(k, 10), "too big")
        return x * 2.0, lax.broadcast_in_dim(1.0, (4, 5), ()), k
    g = sprue.qjit(f)
    g(np.ones(3), 1)
    unpacker = g._last.function._unpacker
    freed = []
    real_free = unpacker.free
    unpacker.free = lambda p: (freed.append(int(_FFI.cast("uintptr_t", p))), real_free(p))
    with pytest.raises(SprueValueError, match="too big"):
        g(np.ones(3), 11)
    assert len(freed) == 4 and len(set(freed)) == 4        # status + three results, each once
    freed.clear()
    out = g(np.ones(3), 1)
    del out
    assert len(freed) == 4                                   # the status, and each result when dropped


def test_a_function_with_only_checks_and_no_results():
    def f(k):
        lax.check(lax.lt(k, 10), "too big")
    g = sprue.qjit(f)
    assert g(3) is None
    with pytest.raises(SprueValueError, match="too big"):
        g(30)


def test_code_after_a_failed_check_runs_on_memory_safe_sizes():
    # jnp.ones checks its run-time size; a negative one fails the check, and the rest of the
    # program (here a loop over the array) runs on a clamped, empty array instead of crashing.
    @sprue.qjit
    def circuit(sz: int):
        a0 = jnp.ones([sz], dtype=float)

        @sprue.for_loop(0, 10, 1)
        def loop(i, a):
            return a + a0
        return a0 + loop(a0)

    with pytest.raises(SprueValueError, match="negative dimensions are not allowed"):
        circuit(-3)
    np.testing.assert_array_equal(circuit(2), [12.0, 12.0])


def test_lower_returns_the_messages_in_code_order():
    closed = sprue.make_jaxpr(bounded)(np.ones(2), 3)
    lowered = lower(closed)
    assert lowered.has_status
    assert lowered.check_messages == ("k must be below 10", "k must not be negative")
    assert "-> (tensor<i64>, tensor<2xf64>, tensor<i64>)" in lowered.text   # the status comes first
    assert lower_jaxpr(closed) == lowered.text


def test_a_check_inside_a_region_needs_the_status_threaded():
    def f(x, n):
        def body(i, acc):
            lax.check(lax.lt(i, 5), "i too big")
            return acc + 1.0
        return lax.fori_loop(0, n, body, x)
    closed = sprue.make_jaxpr(f)(np.ones(2), 3)
    try:
        lowered = lower(closed)
    except UnsupportedError as e:   # until the loop lowering threads the status through its body
        assert "lower_region_body" in str(e)
        return
    assert lowered.check_messages == ("i too big",)
    g = sprue.qjit(f)
    np.testing.assert_array_equal(g(np.ones(2), 3), [4.0, 4.0])
    with pytest.raises(SprueValueError, match="i too big"):
        g(np.ones(2), 7)


# -- the runtime's side ------------------------------------------------------------------------------
def test_signature_status_messages_round_trip_through_json():
    sig = Signature([TensorSpec("x", "f64", (None, 3))], [TensorSpec("y", "f64", (None,))],
                    status_messages=["a failed", "b failed"])
    again = Signature.from_json(sig.to_json())
    assert again == sig and again.status_messages == ("a failed", "b failed")
    assert again.c_results == (STATUS_SPEC, TensorSpec("y", "f64", (None,)))
    plain = Signature([TensorSpec("x", "f64", (3,))], [])
    assert "status_messages" not in json.loads(plain.to_json())
    assert Signature.from_json(plain.to_json()).status_messages is None
    empty = Signature([], [], status_messages=[])    # a status with no checks recorded is still a status
    assert Signature.from_json(empty.to_json()).has_status


@pytest.mark.parametrize("bad", [[1, 2], "not a list", [None]])
def test_signature_rejects_malformed_status_messages(bad):
    d = Signature([], []).to_dict()
    d["status_messages"] = bad
    with pytest.raises(ValueError, match="status_messages"):
        Signature.from_dict(d)
    with pytest.raises(TypeError):
        Signature([], [], status_messages=bad)


def test_c_interface_returns_the_status_first():
    sig = Signature([TensorSpec("x", "f64", (None,))], [TensorSpec("y", "f64", (None,))], status_messages=["m"])
    iface = c_interface(sig, "main")
    assert iface.result_words == (0, 3)          # status (rank 0: 3 words), then y
    assert iface.result_nwords == 3 + 5
    assert "struct sprue_results { int64_t words[8]; };" in iface.cdef
