# Ported by port.py from PennyLane Catalyst (663cf5a3f), frontend/test/pytest/test_jvpvjp.py:
# its classical tests, with catalyst/pennylane/jax imports rewritten to shims.py (sprue).
# Copyright 2023 Xanadu Quantum Technologies Inc.

# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at

#     http://www.apache.org/licenses/LICENSE-2.0

# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""Test JVP/VJP operation lowering"""

# pylint: disable=too-many-lines
from typing import TypeVar

from tests.e2e.catalyst_classical.shims import jax
import sprue.numpy as jnp
from tests.e2e.catalyst_classical.shims import pennylane as qp
import pytest
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from jax import jvp as J_jvp
J_jvp = _lookup('jax', 'jax', 'jvp')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from jax import vjp as J_vjp
J_vjp = _lookup('jax', 'jax', 'vjp')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from jax.tree_util import tree_flatten, tree_unflatten
tree_flatten = _lookup('jax', 'jax.tree_util', 'tree_flatten')
tree_unflatten = _lookup('jax', 'jax.tree_util', 'tree_unflatten')
from numpy.testing import assert_allclose

from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst import jvp as C_jvp
C_jvp = _lookup('catalyst', 'catalyst', 'jvp')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst import qjit
qjit = _lookup('catalyst', 'catalyst', 'qjit')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst import vjp as C_vjp
C_vjp = _lookup('catalyst', 'catalyst', 'vjp')

X = TypeVar("X")
T = TypeVar("T")


def circuit_rx(x1, x2):
    """A test quantum function"""
    qp.RX(x1, wires=0)
    qp.RX(x2, wires=0)
    return qp.expval(qp.PauliY(0))


def f_R1_to_R2(x):
    """A test function f : R1 -> R2"""
    return 2 * x, x * x


def g_R3_to_R2(_n, x):
    """A test function g : R3 -> R2, where `_n` is a dummy, non-differentiable parameter"""
    return jnp.stack([1 + x[0] + 2 * x[1] + 3 * x[2], 1 + x[0] + 2 * x[1] ** 2 + 3 * x[2] ** 3])


diff_methods = ["auto", "fd"]


def test_vjp_outside_qjit_scalar_scalar():
    """Test that vjp can be used outside of a jitting context on a scalar-scalar function."""

    def f(x):
        return x**2

    x = jnp.array(4.0)
    ct = jnp.array(1.0)
    res, f_vjp = jax.vjp(f, x)
    expected = tuple([res, f_vjp(ct)])
    result = C_vjp(f, (x,), ct)

    res_jax, tree_jax = jax.tree_util.tree_flatten(expected)
    res_cat, tree_cat = jax.tree_util.tree_flatten(result)
    assert tree_jax == tree_cat

    for r_j, r_c in zip(res_jax, res_cat):
        assert_allclose(r_j, r_c)


def test_vjp_outside_qjit_tuple_scalar():
    """Test that vjp can be used outside of a jitting context on a tuple-scalar function."""

    def f(x, y):
        return x**2 + y**2

    x = (jnp.array(4.0), jnp.array(4.0))
    ct = jnp.array(1.0)

    res, f_vjp = jax.vjp(f, *x)
    expected = tuple([res, f_vjp(ct)])
    result = C_vjp(f, x, ct)

    res_jax, tree_jax = jax.tree_util.tree_flatten(expected)
    res_cat, tree_cat = jax.tree_util.tree_flatten(result)
    assert tree_jax == tree_cat

    for r_j, r_c in zip(res_jax, res_cat):
        assert_allclose(r_j, r_c)


def test_vjp_outside_qjit_tuple_tuple():
    """Test that vjp can be used outside of a jitting context on a tuple-tuple function."""

    def f(x, y):
        return x**2, y**2

    x = (4.0, 4.0)
    ct = (1.0, 1.0)

    res, f_vjp = jax.vjp(f, *x)
    expected = tuple([res, f_vjp(ct)])
    result = C_vjp(f, x, ct)

    res_jax, tree_jax = jax.tree_util.tree_flatten(expected)
    res_cat, tree_cat = jax.tree_util.tree_flatten(result)
    assert tree_jax == tree_cat

    for r_j, r_c in zip(res_jax, res_cat):
        assert_allclose(r_j, r_c)


def test_jvp_outside_qjit_scalar_scalar():
    """Test that jvp can be used outside of a jitting context on a scalar-scalar function."""

    def f(x):
        return x**2

    x = (4.0,)
    t = (1.0,)

    expected = jax.jvp(f, x, t)
    result = C_jvp(f, x, t)

    assert_allclose(expected, result)


def test_jvp_outside_qjit_tuple_scalar():
    """Test that jvp can be used outside of a jitting context on a tuple-scalar function."""

    def f(x, y):
        return x**2 + y**2

    x = (4.0, 4.0)
    t = (1.0, 1.0)

    expected = jax.jvp(f, x, t)
    result = C_jvp(f, x, t)

    assert_allclose(expected, result)


def test_jvp_outside_qjit_tuple_tuple():
    """Test that jvp can be used outside of a jitting context on a tuple-tuple function."""

    def f(x, y):
        return x**2, y**2

    x = (4.0, 4.0)
    t = (1.0, 1.0)

    expected = jax.jvp(f, x, t)
    result = C_jvp(f, x, t)

    assert_allclose(expected, result)






















































@pytest.mark.parametrize("diff_method", diff_methods)
def test_vjp_argument_type_checks_incompatible_n_inputs(diff_method):
    """Tests error handling of Catalyst's vjp when the number of function output params
    and cotangent arguments are incompatible.
    """

    with pytest.warns(UserWarning, match="AOT.*failed"):

        @qjit
        def C_workflow():
            # If `f` returns two outputs, then `cotangents` must have length 2
            x = (1.0,)
            cotangents = (1.0,)
            return C_vjp(f_R1_to_R2, x, cotangents, method=diff_method, argnums=[0])

    with pytest.raises(
        TypeError,
        match=("number of cotangent and number of function output parameters in"),
    ):
        C_workflow()






if __name__ == "__main__":
    pytest.main(["-x", __file__])
