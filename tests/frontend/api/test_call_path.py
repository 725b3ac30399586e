"""The fast call path (issue 8): qjit's per-signature callers (frontend/qjit.py, runtime/fastcall.py)
and the runtime's own fast path give the same results and raise the same errors as the general
path, results are owned and freed once, and concurrent calls are correct. No timing here."""

import re
import threading

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from sprue.api.qjit import _no_plan
from sprue.runtime import fastcall


def general(f, *args, **kwargs):
    """f's result through the general path only (no fast caller is consulted)."""
    return f._call(args, kwargs)


def fast_taken(f, *args):
    """f's result, asserting that the fast path answered (a caller for this signature exists)."""
    key = f._fast_key(args)
    assert key is not None and key in f._plans, f"no fast caller for {key}"
    res = f._plans[key](args)
    assert res is not fastcall.MISS
    return res


def same(a, b):
    assert type(a) is type(b)
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            same(a[k], b[k])
    elif a is None:
        assert b is None
    else:
        assert np.asarray(a).dtype == np.asarray(b).dtype and np.shape(a) == np.shape(b)
        np.testing.assert_array_equal(a, b)


def same_error(f, *args, **kwargs):
    """Calling f(*args) raises, through the call and through the general path, the same error
    (type and message). Returns the exception."""
    with pytest.raises(Exception) as fast_exc:
        f(*args, **kwargs)
    with pytest.raises(Exception) as slow_exc:
        general(f, *args, **kwargs)
    assert type(fast_exc.value) is type(slow_exc.value)
    assert str(fast_exc.value) == str(slow_exc.value)
    return fast_exc.value


# -- same results ---------------------------------------------------------------------------------
CASES = [
    (lambda x: x * 2.0 + 1.0, (1.5,)),
    (lambda x: x * 2 + 1, (7,)),
    (lambda x: jnp.logical_not(x), (True,)),
    (lambda x, y: x * y + 1.0, (np.arange(4.0), np.ones(4))),
    (lambda x, y: (x + y, x * y), (np.arange(4.0), np.ones(4))),
    (lambda x, y: {"s": x + y, "p": [x * y, (x - y).sum()]}, (np.arange(6.0).reshape(2, 3), 2.0)),
    (lambda x: x.sum(), (np.arange(12, dtype=np.int32).reshape(3, 4),)),
    (lambda x, k: x * k, (np.arange(3, dtype=np.float32), np.float32(2.5))),
    (lambda x, k: x * k, (np.arange(3, dtype=np.float32), 2.5)),          # weak float stays f32
    (lambda x: x + 1, (np.float64(1.25),)),
    (lambda x: x + 1, (np.array(1.25),)),
    (lambda x: x[::-1], (np.arange(5, dtype=np.uint8),)),
    (lambda x: x > 2, (np.arange(5, dtype=np.int64),)),
    (lambda x: x * 0.5, (np.zeros((0, 3)),)),                               # empty arrays
    (lambda: jnp.arange(3.0), ()),                                          # no arguments
]


@pytest.mark.parametrize("i", range(len(CASES)))
def test_fast_path_gives_the_general_paths_results(i):
    fn, args = CASES[i]
    f = sprue.qjit(fn)
    first = f(*args)                 # general path; makes the fast caller
    again = f(*args)                 # fast path
    fast = fast_taken(f, *args)
    slow = general(f, *args)
    for r in (again, fast, slow):
        same(first, r)
    assert f.compile_count == 1


def test_the_runtime_fast_path_and_general_path_agree():
    f = sprue.qjit(lambda x, y, k: (x * y + k, k * 2.0))
    x, y = np.arange(4.0), np.ones(4)
    f(x, y, 1.5)
    cf = f._last.function
    fast = cf._fast((x, y, 1.5))
    assert fast is not fastcall.MISS
    keep: list = []
    descs = [conv(a, keep) for conv, a in zip(cf._convert, (x, y, 1.5))]
    res = fastcall.cffi_ops.newp(cf._result_type, None)
    cf._fn(res, *descs)
    same(fast, cf._unpacker.unpack(res))
    same(cf(x, y, 1.5), fast)


def test_the_fast_path_keeps_python_scalars_weak_and_numpy_scalars_strong():
    f = sprue.qjit(lambda x, k: x * k)
    x = np.arange(3, dtype=np.float32)
    assert f(x, 2.0).dtype == np.float32 and f(x, 2.0).dtype == np.float32
    assert f(x, np.float64(2.0)).dtype == np.float64       # not the weak float's caller
    assert f(x, np.array(2.0)).dtype == np.float64
    assert f(x, 2).dtype == np.float32
    assert f.compile_count == 3                            # np.float64 and a 0-d array: one signature
    g = sprue.qjit(lambda x: x + 1)
    assert isinstance(g(1.5), np.float64) and isinstance(g(1.5), np.float64)
    assert g(True) == 2 and g(1) == 2 and g(1.0) == 2.0    # bool, int and float: three signatures
    assert g.compile_count == 3


def test_fast_path_copies_non_contiguous_and_readonly_inputs_and_never_aliases():
    f = sprue.qjit(lambda x: x + 0.0)
    base = np.arange(8.0)
    f(base[:4])
    view = base[::2]                       # same dtype and shape, not contiguous
    np.testing.assert_array_equal(f(view), view)
    ro = np.arange(4.0)
    ro.flags.writeable = False
    np.testing.assert_array_equal(f(ro), ro)
    x = np.arange(4.0)
    r = f(x)
    assert not np.shares_memory(r, x) and r.flags.owndata is False and r.base is not None
    r[:] = -1
    np.testing.assert_array_equal(x, np.arange(4.0))


def test_the_last_compiled_signature_follows_the_fast_path():
    f = sprue.qjit(lambda x: x * 2)
    f(np.ones(3)), f(np.ones(3, np.int32))
    f(np.ones(3)), f(np.ones(3))                           # the f64 caller, from the dict
    assert "f64[3]" in str(f.jaxpr)
    f(np.ones(3, np.int32))
    assert "i32[3]" in str(f.jaxpr)


# -- same errors ----------------------------------------------------------------------------------
def test_hinted_dtype_rank_and_size_errors_match_the_general_path():
    @sprue.qjit
    def f(x: sprue.f64["n", 3], y: sprue.f64["n"]):  # noqa: F821
        return x.sum(axis=1) + y
    x, y = np.ones((4, 3)), np.ones(4)
    f(x, y), f(x, y)                                       # the fast caller exists
    same(f(x, y), general(f, x, y))
    e = same_error(f, np.ones((4, 3), np.complex128), y)   # dtype
    assert isinstance(e, TypeError)
    e = same_error(f, np.ones(4), y)                       # rank
    assert isinstance(e, (TypeError, ValueError))
    e = same_error(f, x, np.ones(5))                       # sizes that disagree
    assert isinstance(e, sprue.SprueValueError)
    e = same_error(f, np.ones((4, 2)), y)                  # a static size
    assert isinstance(e, ValueError)
    same(f(x, y), general(f, x, y))                        # and the fast path still works


def test_size_expression_errors_match_the_general_path():
    @sprue.qjit
    def pair(x: sprue.f64["n"], y: sprue.f64["n+1"]):  # noqa: F821
        return x + y[1:]
    pair(np.ones(3), np.ones(4)), pair(np.ones(3), np.ones(4))
    e = same_error(pair, np.ones(3), np.ones(3))
    assert isinstance(e, sprue.SprueValueError) and "n+1" in str(e)
    same(pair(np.ones(5), np.ones(6)), general(pair, np.ones(5), np.ones(6)))


def test_dtype_and_rank_errors_of_unhinted_functions_match():
    @sprue.qjit
    def f(x: sprue.f32[4], y: sprue.i32[2]):
        return x.sum() + y.sum()
    a, b = np.ones(4, np.float32), np.ones(2, np.int32)
    f(a, b), f(a, b)
    same_error(f, a, b, 3)                                 # arity
    same_error(f, np.ones((4, 1), np.float32), b)          # rank
    same_error(f, a, np.ones(2, np.float64))               # dtype that does not cast safely
    same_error(f, a, "not an array")
    same_error(f, a, [1, 2])


def test_python_int_out_of_range_takes_the_general_path_and_its_error():
    f = sprue.qjit(lambda k: k + 1)
    assert f(41) == 42 and f(41) == 42
    e = same_error(f, 2 ** 70)
    assert "does not fit" in str(e)
    assert f(-5) == -4


def test_abstracted_axes_varying_sizes_and_mismatch():
    f = sprue.qjit(lambda x, y: x * y, abstracted_axes={0: "n"})
    for n in (3, 5, 8, 3, 5, 8, 0):
        x, y = np.arange(float(n)), np.ones(n) * 2
        same(f(x, y), x * y)
        same(f(x, y), general(f, x, y))
    assert f.compile_count == 1
    e = same_error(f, np.ones(3), np.ones(4))
    assert isinstance(e, sprue.SprueValueError) and "size mismatch for 'n'" in str(e)


def test_static_arguments_kwargs_and_defaults():
    f = sprue.qjit(lambda x, s: x * s, static_argnums=1)
    x = np.arange(3.0)
    same(f(x, 3), x * 3)
    same(f(x, 3), x * 3)                                   # fast
    same(f(x, 4), x * 4)
    same(f(x, 3.0), general(f, x, 3.0))                    # equal values of another type: compiled apart
    same(f(x, 3.0), fast_taken(f, x, 3.0))
    same(f(x, s=4), x * 4)                                 # kwargs: general path, same compilation
    assert f.compile_count == 3
    same_error(f, x, [1])                                  # unhashable static value
    same_error(f, x, np.ones(2))

    def g(x, y=2.0):
        return x + y
    gq = sprue.qjit(g)
    same(gq(x), x + 2.0)
    same(gq(x), x + 2.0)
    same(gq(x, 5.0), x + 5.0)
    same(gq(x, 5.0), x + 5.0)
    same(gq(x, y=5.0), x + 5.0)
    same(gq(y=5.0, x=x), x + 5.0)
    # a left-out y is its default, static (as jax.jit), a passed one an argument: two compilations,
    # both on the fast path
    assert gq.compile_count == 2 and gq._mono is not _no_plan
    same_error(gq, x, 1.0, 2.0)
    same_error(gq, x, z=1.0)
    same_error(gq, x, x=1.0)
    same_error(gq, y=1.0)

    def h(x, /, k=3):
        return x * k
    hq = sprue.qjit(h, static_argnames="k")
    same(hq(x), x * 3)
    same(hq(x, k=4), x * 4)
    same(hq(x, k=4), x * 4)
    same_error(hq, x=x)


def test_containers_of_arrays_take_the_fast_path_and_others_the_general_one():
    f = sprue.qjit(lambda d, t: (d["a"] + t[0], d["b"] * t[1]))
    d, t = {"b": np.arange(3.0), "a": np.ones(3)}, (1.0, np.full(3, 2.0))
    same(f(d, t), (np.ones(3) + 1.0, np.arange(3.0) * 2))
    same(fast_taken(f, d, t), general(f, d, t))
    same(fast_taken(f, {"a": np.ones(3), "b": np.arange(3.0)}, t), general(f, d, t))   # (any key order)
    # a container the plan does not take: the general path, its results and its errors
    assert f._plans[f._fast_key((d, t))](({"a": np.ones(3)}, t)) is fastcall.MISS
    same_error(f, {"a": np.ones(3)}, t)
    extra = {"a": np.ones(3), "b": np.arange(3.0), "c": 1.0}   # another tree: traced again
    same(f(extra, t), general(f, d, t))
    same(f(d, t), general(f, d, t))
    nested = {"a": np.ones(3), "b": [np.arange(3.0)]}
    assert f._fast_key((nested, t)) is None
    same(f(nested, t), general(f, nested, t))
    from collections import OrderedDict
    ordered = OrderedDict(a=np.ones(3), b=np.arange(3.0))
    assert f._fast_key((ordered, t)) is None
    same(f(ordered, t), general(f, d, t))
    same(f(d, [1.0, np.full(3, 2.0)]), general(f, d, [1.0, np.full(3, 2.0)]))   # a list: its own plan
    same(f(d, (2, np.full(3, 3.0))), (np.ones(3) + 2, np.arange(3.0) * 3))      # an int: its own
    wider = {"a": np.ones(4), "b": np.arange(4.0)}
    same(f(wider, (1.0, np.full(4, 2.0))), (np.ones(4) + 1.0, np.arange(4.0) * 2))
    same(f(d, t), general(f, d, t))
    g = sprue.qjit(lambda x: x * 2.0)
    x = np.arange(3.0)
    g(x), g(x)
    dest = np.empty(3)
    assert g(x, out=dest) is dest
    np.testing.assert_array_equal(dest, x * 2)


def test_a_lone_dict_argument_on_the_fast_path():
    """A function of one dict (a model's parameters): its entries taken by one itemgetter
    (container_args._dict_flattener); any other dict takes the general path."""
    f = sprue.qjit(lambda p: p["w"] * p["x"] - p["b"])
    p = {"b": 1.0, "w": np.full(3, 2.0), "x": np.arange(3.0)}
    want = np.full(3, 2.0) * np.arange(3.0) - 1.0
    same(f(p), want)
    same(fast_taken(f, p), general(f, p))
    same(fast_taken(f, {"x": np.arange(3.0), "w": np.full(3, 2.0), "b": 1.0}), want)   # (any key order)
    plan = f._plans[f._fast_key((p,))]
    for other in ({"w": np.ones(3), "x": np.ones(3), "c": 1.0},        # same size, another key
                  {"w": np.ones(3), "x": np.ones(3)},                  # a key missing
                  {**p, "c": 1.0}):                                    # a key more
        assert plan((other,)) is fastcall.MISS
    same_error(f, {"w": np.ones(3), "x": np.ones(3), "c": 1.0})
    from collections import OrderedDict
    same(f(OrderedDict(p)), want)
    same(f({**p, "b": 3}), np.full(3, 2.0) * np.arange(3.0) - 3)      # an int entry: its own plan


def test_run_time_checks_through_the_fast_path():
    def f(x, k):
        lax.check(lax.lt(k, 10), "too big")
        return x * 2.0
    g = sprue.qjit(f)
    same(g(np.ones(3), 1), np.full(3, 2.0))
    same(g(np.ones(3), 1), np.full(3, 2.0))
    e = same_error(g, np.ones(3), 11)
    assert isinstance(e, sprue.SprueValueError) and "too big" in str(e)


def test_calls_while_tracing_still_become_call_equations():
    inner = sprue.qjit(lambda x: x * 2.0)
    inner(np.ones(3)), inner(np.ones(3))                   # a fast caller exists

    @sprue.qjit
    def outer(x):
        return inner(x) + 1.0
    same(outer(np.ones(3)), np.full(3, 3.0))
    assert "pjit" in str(outer.jaxpr)

    @sprue.qjit
    def constant(x):
        return inner(np.ones(3)) + x                       # concrete arguments, while tracing
    same(constant(np.ones(3)), np.full(3, 3.0))
    assert "pjit" in str(constant.jaxpr)


# -- ownership ------------------------------------------------------------------------------------
def counting(f):
    unpacker = f._last.function._unpacker
    freed: list[int] = []
    real = unpacker.free
    ffi = f._last.function._ffi

    def free(p):
        freed.append(int(ffi.cast("intptr_t", p)))
        real(p)
    unpacker.free = free
    return freed


def test_fast_path_frees_every_result_exactly_once():
    s = sprue.qjit(lambda x: x * 2.0)
    s(1.5)
    freed = counting(s)
    for _ in range(5):
        assert s(1.5) == 3.0
    assert len(freed) == 5 and len(set(freed)) <= 5        # one free per scalar result, at once

    a = sprue.qjit(lambda x: (x + 1.0, x.sum()))
    x = np.arange(4.0)
    a(x)
    freed = counting(a)
    out = a(x)
    assert len(freed) == 1                                 # the scalar
    del out
    assert len(freed) == 2                                 # the array, when dropped

    one = sprue.qjit(lambda x: x + 1.0)
    one(x)
    freed = counting(one)
    r = one(x)
    v = r[1:]
    del r
    assert freed == []
    del v
    assert len(freed) == 1


# -- threads --------------------------------------------------------------------------------------
def run_threads(work, n: int = 8, calls: int = 300) -> None:
    errors: list = []
    barrier = threading.Barrier(n)

    def body(t):
        try:
            barrier.wait()
            for i in range(calls):
                work(t, i)
        except BaseException as e:   # noqa: BLE001 -- reported below
            errors.append(e)
    threads = [threading.Thread(target=body, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[0]


def test_eight_threads_call_one_scalar_function():
    f = sprue.qjit(lambda x: x * 2.0 + 1.0)
    f(0.5)

    def work(t, i):
        v = t * 1000.0 + i
        assert f(v) == v * 2.0 + 1.0
    run_threads(work)


def test_eight_threads_call_one_array_function():
    f = sprue.qjit(lambda x, y: (x * y + 1.0, (x - y).sum()))
    f(np.ones(4), np.ones(4))

    def work(t, i):
        x = np.arange(4.0) + t
        y = np.full(4, float(i))
        a, s = f(x, y)
        np.testing.assert_array_equal(a, x * y + 1.0)
        assert s == (x - y).sum()
    run_threads(work)


def test_eight_threads_with_varying_sizes_and_signatures():
    f = sprue.qjit(lambda x: x * 2.0, abstracted_axes={0: "n"})
    g = sprue.qjit(lambda x, k: x * k)

    def work(t, i):
        x = np.arange(float((t + i) % 7))
        np.testing.assert_array_equal(f(x), x * 2.0)
        k = i if t % 2 else float(i)
        np.testing.assert_array_equal(g(np.arange(3.0) + t, k), (np.arange(3.0) + t) * k)
    run_threads(work, calls=100)
    assert f.compile_count == 1 and g.compile_count == 2


def test_eight_threads_call_a_loaded_runtime_function():
    f = sprue.qjit(lambda x, y: x * y)
    f(np.ones(4), np.ones(4))
    cf = f._last.function

    def work(t, i):
        x = np.full(4, float(t))
        y = np.full(4, float(i))
        (r,) = cf(x, y)
        np.testing.assert_array_equal(r, x * y)
    run_threads(work)


# -- the runtime's fast path keeps the runtime's errors -------------------------------------------
def test_runtime_errors_unchanged():
    f = sprue.qjit(lambda x, k: x * k)
    f(np.ones(4), 2.0)
    cf = f._last.function
    with pytest.raises(ValueError, match=re.escape("argument 'x': expected f64[4], got an array of shape (5,)")):
        cf(np.ones(5), 2.0)
    with pytest.raises(TypeError, match=re.escape("expected 2 arguments (x, k), got 1")):
        cf(np.ones(4))
    with pytest.raises(TypeError, match="does not cast safely"):
        cf(np.ones(4, np.complex64), 2.0)
    same(cf(np.ones(4, np.int32), 2), [np.full(4, 2.0)])   # safe casts: the general path
    assert cf._fast((np.ones(4, np.int32), 2)) is fastcall.MISS


def test_specialize_refuses_kinds_that_do_not_fit():
    f = sprue.qjit(lambda x, k: x * k)
    f(np.ones(4, np.float32), 2.0)
    cf = f._last.function
    assert cf.specialize([fastcall.Array(np.dtype(np.float64), (4,)), fastcall.Scalar(float)]) is None
    assert cf.specialize([fastcall.Array(np.dtype(np.float32), (5,)), fastcall.Scalar(float)]) is None
    assert cf.specialize([fastcall.Array(np.dtype(np.float32), (4,)), fastcall.Scalar(int)]) is None
    assert cf.specialize([fastcall.Array(np.dtype(np.float32), (4,))]) is None
    ok = cf.specialize([fastcall.Array(np.dtype(np.float32), (4,)), fastcall.Scalar(float)], fastcall.SINGLE)
    same(ok((np.ones(4, np.float32), 3.0)), np.full(4, 3.0, np.float32))
    assert ok((np.ones(4), 3.0)) is fastcall.MISS and ok((np.ones(4, np.float32),)) is fastcall.MISS
    assert f._mono is not _no_plan


def test_a_static_none_on_the_fast_path():
    """A static argument whose value is None (static_argnums, or a left-out parameter whose default
    is None): its fast caller compares by value. It once kept no reference to None and read the
    type of a null pointer: the second call crashed the interpreter."""
    f = sprue.qjit(lambda x, mask: x if mask is None else x * mask, static_argnums=1)
    x = np.arange(3.0)
    for _ in range(3):
        same(f(x, None), x)
    same(f(x, 2.0), x * 2)
    same_error(f, x, np.ones(3))                   # unhashable static value: the general path's error
    g = sprue.qjit(lambda x, mask=None: x if mask is None else x * mask)
    for _ in range(3):
        same(g(x), x)
    same(g(x, np.full(3, 3.0)), x * 3)             # passed: an argument, compiled apart
    same(g(x), x)
    assert g.compile_count == 2
