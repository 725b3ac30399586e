"""Arrays in from anywhere (issue 23): a qjit'd function takes any object holding an array — DLPack
(`__dlpack__`, as JAX and torch arrays have; numpy's own here), `__array__`, numpy's array interface,
the buffer protocol (`memoryview`, `array.array`) — read zero-copy where numpy can; results are
numpy arrays, which hand themselves on with `__dlpack__`."""
import array

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp


class WithArray:
    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None, copy=None):
        return self.a


class WithInterface:
    def __init__(self, a):
        self.__array_interface__, self.keep = a.__array_interface__, a


class WithDLPack:
    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


base = np.linspace(-1.0, 2.0, 6).reshape(2, 3)
FOREIGN = {
    "dlpack": lambda: WithDLPack(base),
    "dunder_array": lambda: WithArray(base),
    "array_interface": lambda: WithInterface(base),
    "memoryview": lambda: memoryview(base),
    "array.array": lambda: array.array("d", base.ravel()),
}


def _f(x):
    return jnp.sin(x) * 2 + jnp.sum(x)


@pytest.mark.parametrize("kind", list(FOREIGN))
def test_foreign_arrays_are_arguments(kind):
    arg = FOREIGN[kind]()
    want = _f(np.from_dlpack(arg) if kind == "dlpack" else np.asarray(arg))
    np.testing.assert_allclose(sprue.qjit(_f)(arg), want, rtol=1e-14)
    np.testing.assert_allclose(sprue.qjit(_f)({"k": arg}["k"]), want, rtol=1e-14)


def test_dlpack_argument_is_read_in_place_and_results_hand_on_by_dlpack():
    seen = {}

    class Watch(WithDLPack):
        def __dlpack__(self, **kwargs):
            seen["called"] = True
            return super().__dlpack__(**kwargs)

    out = sprue.qjit(lambda x: x + 1.0)(Watch(base))
    assert seen == {"called": True}
    assert np.shares_memory(np.from_dlpack(out), out)   # zero-copy on the way out
    np.testing.assert_array_equal(np.from_dlpack(out), base + 1.0)


def test_not_an_array_says_what_is_accepted():
    with pytest.raises(sprue.SprueTypeError) as info:
        sprue.qjit(_f)(b"abc")
    assert ("argument 'x': bytes is not a valid argument; expected an array (numpy's, or any object with"
            " __dlpack__, __array__, __array_interface__ or the buffer protocol)") in str(info.value)
