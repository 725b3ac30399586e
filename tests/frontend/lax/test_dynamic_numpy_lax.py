"""sprue.lax shape rules on symbolic dimensions: result sizes by dimension arithmetic; equal sizes
required provably (unknown -> an error that points to sprue.numpy's run-time checks, provably
different -> a plain shape error); bounds rejected only when provably out of range. And
dynamic_slice / dynamic_update_slice with sizes only run time can fit (sprue.numpy._lax_dynamic):
JAX's clamping, a check, and no access outside the operand."""
from __future__ import annotations

import numpy as np
import pytest

from sprue import lax
from sprue.api.traced import trace_function
from sprue.base.errors import SprueValueError
from sprue.numpy import _lax_dynamic
from sprue.trace.tracing import eval_jaxpr
from tests.helpers.jaxprs import f64

NOT_PROVABLE = r"not provably equal; sprue.lax needs provably equal sizes \(sprue.numpy inserts run-time checks"


def types(fn, *avals) -> list[str]:
    cj = trace_function(fn, avals, {}).closed_jaxpr
    return [a.str_short() for a in cj.out_avals]


def raises(pattern: str, fn, *avals):
    with pytest.raises(SprueValueError, match=pattern):
        trace_function(fn, avals, {})


def test_elementwise_needs_provably_equal_shapes():
    assert types(lambda x, y: lax.add(x, y), f64("n", 3), f64("n", 3)) == ["f64[n,3]"]
    assert types(lambda x: lax.mul(x, 2.0), f64("n")) == ["f64[n]"]  # rank 0 beside any shape
    raises(r"add requires operands of equal shapes.*f64\[n\], f64\[m\].*" + NOT_PROVABLE,
           lambda x, y: lax.add(x, y), f64("n"), f64("m"))
    raises(r"add requires operands of equal shapes \(or rank 0\), got f64\[n\], f64\[n\+1\] \(at",
           lambda x: lax.add(x, lax.iota(np.float64, x.shape[0] + 1)), f64("n"))


def test_select_n_and_clamp():
    assert types(lambda x: lax.select(lax.gt(x, 0.0), x, lax.neg(x)), f64("n")) == ["f64[n]"]
    raises(r"select_n cases: f64\[n\] and f64\[m\] must have one shape.*" + NOT_PROVABLE,
           lambda x, y: lax.select(lax.gt(x, 0.0), x, y), f64("n"), f64("m"))
    assert types(lambda x: lax.clamp(0.0, x, 1.0), f64("n")) == ["f64[n]"]
    raises(r"clamp bounds: f64\[m\] and f64\[n\] must have one shape", lambda x, y: lax.clamp(y, x, 1.0),
           f64("n"), f64("m"))


def test_broadcast_in_dim_reshape_iota():
    assert types(lambda x: lax.broadcast_in_dim(x, (2, x.shape[0]), (1,)), f64("n")) == ["f64[2,n]"]
    # a static 1 broadcasts to any size
    assert types(lambda x, y: lax.broadcast_in_dim(x, (y.shape[0] + 1, 3), (0, 1)), f64(1, 3), f64("n")) == \
        ["f64[n+1,3]"]
    raises(r"broadcast_in_dim: cannot broadcast f64\[n\] to shape \(m,\).*" + NOT_PROVABLE,
           lambda x, y: lax.broadcast_in_dim(x, (y.shape[0],), (0,)), f64("n"), f64("m"))
    assert types(lambda x: lax.reshape(x, (x.shape[0] * 3,)), f64("n", 3)) == ["f64[3*n]"]
    assert types(lambda x: lax.reshape(x, (3, x.shape[0])), f64("n", 3)) == ["f64[3,n]"]
    raises(r"cannot reshape f64\[n\] \(size n\) into shape \(n\+1,\)", lambda x: lax.reshape(x, (x.shape[0] + 1,)),
           f64("n"))
    raises(r"the sizes n and m are not provably equal; sprue.numpy.reshape checks them at run time",
           lambda x, y: lax.reshape(x, (y.shape[0],)), f64("n"), f64("m"))
    assert types(lambda x: lax.iota(np.int64, 2 * x.shape[0] + 1), f64("n")) == ["i64[2*n+1]"]


def test_structural_rules():
    assert types(lambda x: lax.transpose(x, (1, 0)), f64("n", 3)) == ["f64[3,n]"]
    assert types(lambda x: lax.rev(x, (0,)), f64("n", 3)) == ["f64[n,3]"]
    assert types(lambda x: lax.squeeze(x, (1,)), f64("n", 1)) == ["f64[n]"]
    raises(r"squeeze: axis 0 of f64\[n,3\] has size n, not 1 \(a size known only at run time\)",
           lambda x: lax.squeeze(x, (0,)), f64("n", 3))
    assert types(lambda x, y: lax.concatenate([x, y, x], 0), f64("n", 2), f64("m", 2)) == ["f64[m+2*n,2]"]
    raises(r"concatenate: operands must match except along the axis.*the sizes n and m are not provably equal",
           lambda x, y: lax.concatenate([x, y], 1), f64("n", 2), f64("m", 2))
    assert types(lambda x: lax.pad(x, 0.0, [(1, 2, 0), (0, -1, 0)]), f64("n", 3)) == ["f64[n+3,2]"]
    assert types(lambda x: lax.pad(x, 0.0, [(0, 0, 2)]), f64(1)) == ["f64[1]"]
    raises(r"pad: interior padding of a dimension n that may be 0 at run time",
           lambda x: lax.pad(x, 0.0, [(0, 0, 1)]), f64("n"))


def test_slice_with_symbolic_limits():
    n = lambda x: x.shape[0]  # noqa: E731
    assert types(lambda x: lax.slice(x, (1,), (n(x),)), f64("n")) == ["f64[n-1]"]
    assert types(lambda x: lax.slice(x, (0,), (n(x),), (2,)), f64("n")) == ["f64[(n+1)//2]"]
    assert types(lambda x: lax.slice(x, (1, 0), (n(x), 3), (3, 2)), f64("n", 3)) == ["f64[(n+1)//3,2]"]
    raises(r"slice: \[0:n\+1:1\] is out of bounds for a dimension of size n", lambda x: lax.slice(x, (0,), (n(x) + 1,)),
           f64("n"))


def test_dynamic_slices_and_gathers_accept_run_time_sizes():
    assert types(lambda x, i: lax.dynamic_slice(x, (i,), (x.shape[0] // 2,)), f64("n"), 0) == ["f64[n//2]"]
    assert types(lambda x, u, i: lax.dynamic_update_slice(x, u, (i,)), f64("n"), f64("m"), 0) == ["f64[n]"]
    raises(r"dynamic_slice: slice_sizes \(n\+1,\) do not fit f64\[n\]",
           lambda x: lax.dynamic_slice(x, (0,), (x.shape[0] + 1,)), f64("n"))


def test_dot_general_contracts_provably_equal_sizes():
    dn = (((1,), (0,)), ((), ()))
    assert types(lambda a, b: lax.dot_general(a, b, dn), f64(3, "n"), f64("n", "m")) == ["f64[3,m]"]
    raises(r"dot_general: contracting dimensions disagree: f64\[3,n\] axis 1 has size n, f64\[m,2\] axis 0 has size m.*"
           + NOT_PROVABLE, lambda a, b: lax.dot_general(a, b, dn), f64(3, "n"), f64("m", 2))
    bdn = (((2,), (1,)), ((0,), (0,)))
    assert types(lambda a, b: lax.dot_general(a, b, bdn), f64("b", 2, "n"), f64("b", "n", 4)) == ["f64[b,2,4]"]


def test_reductions_argmax_cumulative_sort():
    assert types(lambda x: lax.reduce_sum(x, (0,)), f64("n", 3)) == ["f64[3]"]
    assert types(lambda x: lax.reduce_max(x, (1,)), f64("n", 3)) == ["f64[n]"]
    assert types(lambda x: lax.argmax(x, 1), f64("n", 3)) == ["i64[n]"]
    assert types(lambda x: lax.argmax(x, 0), f64("n", 3)) == ["i64[3]"]  # empty only at run time: numpy checks
    assert types(lambda x: lax.cumsum(x, 0), f64("n", 3)) == ["f64[n,3]"]
    assert types(lambda x: lax.sort((x, lax.neg(x))), f64("n")) == ["f64[n]", "f64[n]"]
    raises(r"sort: operands must share one shape.*" + NOT_PROVABLE, lambda x, y: lax.sort((x, y)), f64("n"), f64("m"))


def test_convert_and_unary_keep_symbolic_shapes():
    assert types(lambda x: lax.convert_element_type(lax.exp(x), np.float32), f64("n", "m")) == ["f32[n,m]"]


# -- dynamic_slice / dynamic_update_slice when only run time can fit the sizes -------------------
def _jax_dynamic_slice(x, i, size):
    i = min(max(i, 0), len(x) - size)
    return x[i:i + size]


def _jax_dynamic_update_slice(x, u, i):
    i = min(max(i, 0), len(x) - len(u))
    y = x.copy()
    y[i:i + len(u)] = u
    return y


def test_safe_dynamic_slice_and_update():
    def fn(x, i):
        return _lax_dynamic.dynamic_slice(x, (i,), (3,)), _lax_dynamic.dynamic_update_slice(x, np.full(2, 7.0), (i,))
    cj = trace_function(fn, (f64("n"), 0), {}).closed_jaxpr
    assert [e.primitive.name for e in cj.eqns].count("check") == 2
    assert "dynamic_update_slice" not in [e.primitive.name for e in cj.eqns]  # a scatter that drops a misfit
    for n in (3, 4, 7):
        x = np.arange(n * 1.0)
        for i in (-2, 0, 1, n - 2, n + 5):
            got = eval_jaxpr(cj.jaxpr, cj.consts, n, x, i)
            np.testing.assert_array_equal(got[0], _jax_dynamic_slice(x, i, 3))
            np.testing.assert_array_equal(got[1], _jax_dynamic_update_slice(x, np.full(2, 7.0), i))
    for n in (0, 1, 2):
        with pytest.raises(SprueValueError, match=r"sprue.lax.dynamic_slice: size 3 does not fit in axis 0 of size n"):
            eval_jaxpr(cj.jaxpr, cj.consts, n, np.arange(n * 1.0), 0)


def test_safe_dynamic_slice_keeps_provable_sizes_plain():
    cj = trace_function(lambda x, i: _lax_dynamic.dynamic_slice(x, (i, 0), (x.shape[0] // 2, 2)), (f64("n", 3), 0),
                        {}).closed_jaxpr
    assert [e.primitive.name for e in cj.eqns if e.primitive.name != "div"] == ["dynamic_slice"]
