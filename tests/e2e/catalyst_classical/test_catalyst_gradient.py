# Ported by port.py from PennyLane Catalyst (663cf5a3f), frontend/test/pytest/test_gradient.py:
# its classical tests, with catalyst/pennylane/jax imports rewritten to shims.py (sprue).
# Copyright 2022-2023 Xanadu Quantum Technologies Inc.

# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at

#     http://www.apache.org/licenses/LICENSE-2.0

# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""Test built-in differentiation support in Catalyst."""

import platform
from dataclasses import replace
from functools import partial

from tests.e2e.catalyst_classical.shims import jax
import numpy as np
from tests.e2e.catalyst_classical.shims import pennylane as qp
import pytest
import sprue.numpy as jnp
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from jax.tree_util import tree_all, tree_flatten, tree_map, tree_structure
tree_all = _lookup('jax', 'jax.tree_util', 'tree_all')
tree_flatten = _lookup('jax', 'jax.tree_util', 'tree_flatten')
tree_map = _lookup('jax', 'jax.tree_util', 'tree_map')
tree_structure = _lookup('jax', 'jax.tree_util', 'tree_structure')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from pennylane import for_loop, grad, jacobian, qjit
for_loop = _lookup('pennylane', 'pennylane', 'for_loop')
grad = _lookup('pennylane', 'pennylane', 'grad')
jacobian = _lookup('pennylane', 'pennylane', 'jacobian')
qjit = _lookup('pennylane', 'pennylane', 'qjit')

from tests.e2e.catalyst_classical.shims import catalyst as catalyst
from tests.e2e.catalyst_classical.shims import lookup as _lookup
infer = _lookup('catalyst', 'catalyst.utils.calculate_grad_shape', None)
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst import ( CompileError, DifferentiableCompileError, measure, mitigate_with_zne, pure_callback, value_and_grad, vmap, )
CompileError = _lookup('catalyst', 'catalyst', 'CompileError')
DifferentiableCompileError = _lookup('catalyst', 'catalyst', 'DifferentiableCompileError')
measure = _lookup('catalyst', 'catalyst', 'measure')
mitigate_with_zne = _lookup('catalyst', 'catalyst', 'mitigate_with_zne')
pure_callback = _lookup('catalyst', 'catalyst', 'pure_callback')
value_and_grad = _lookup('catalyst', 'catalyst', 'value_and_grad')
vmap = _lookup('catalyst', 'catalyst', 'vmap')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst.compiler import get_lib_path
get_lib_path = _lookup('catalyst', 'catalyst.compiler', 'get_lib_path')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst.device.op_support import ( _are_param_frequencies_same_as_catalyst, _has_grad_recipe, _has_parameter_frequencies, _is_grad_recipe_same_as_catalyst, _paramshift_op_checker, )
_are_param_frequencies_same_as_catalyst = _lookup('catalyst', 'catalyst.device.op_support', '_are_param_frequencies_same_as_catalyst')
_has_grad_recipe = _lookup('catalyst', 'catalyst.device.op_support', '_has_grad_recipe')
_has_parameter_frequencies = _lookup('catalyst', 'catalyst.device.op_support', '_has_parameter_frequencies')
_is_grad_recipe_same_as_catalyst = _lookup('catalyst', 'catalyst.device.op_support', '_is_grad_recipe_same_as_catalyst')
_paramshift_op_checker = _lookup('catalyst', 'catalyst.device.op_support', '_paramshift_op_checker')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst.jax_tracer import HybridOp
HybridOp = _lookup('catalyst', 'catalyst.jax_tracer', 'HybridOp')

# pylint: disable=too-many-lines,missing-function-docstring,missing-class-docstring






def test_grad_outside_qjit():
    """Test that grad can be used outside of a jitting context."""

    def f(x):
        return x**2

    x = 4.0

    expected = jax.grad(f)(x)
    result = catalyst.grad(f)(x)

    assert np.allclose(expected, result)


def test_value_and_grad_outside_qjit():
    """Test that value_and_grad can be used outside of a jitting context."""

    def f(x):
        return x**2

    x = 4.0

    expected_val, expected_grad = jax.value_and_grad(f)(x)
    result_val, result_grad = value_and_grad(f)(x)

    assert np.allclose(expected_val, result_val)
    assert np.allclose(expected_grad, result_grad)


@pytest.mark.parametrize("argnums", (None, 0, [1], (0, 1)))
def test_grad_outside_qjit_argnum(argnums):
    """Test that argnums work correctly outside of a jitting context."""

    def f(x, y):
        return x**2 + y**2

    x, y = 4.0, 4.0

    expected = jax.grad(f, argnums=argnums if argnums is not None else 0)(x, y)
    result = catalyst.grad(f, argnums=argnums)(x, y)

    assert np.allclose(expected, result)


@pytest.mark.parametrize("argnums", (None, 0, [1], (0, 1)))
def test_value_and_grad_outside_qjit_argnum(argnums):
    """Test that argnums work correctly outside of a jitting context."""

    def f(x, y):
        return x**2 + y**2

    x, y = 4.0, 4.0

    expected_val, expected_grad = jax.value_and_grad(
        f, argnums=argnums if argnums is not None else 0
    )(x, y)
    result_val, result_grad = value_and_grad(f, argnums=argnums)(x, y)

    assert np.allclose(expected_val, result_val)
    assert np.allclose(expected_grad, result_grad)


def test_jacobian_outside_qjit():
    """Test that jacobian can be used outside of a jitting context."""

    def f(x):
        return x**2, 2 * x

    x = jnp.array([4.0, 5.0])

    expected = jax.jacobian(f)(x)
    result = catalyst.jacobian(f)(x)

    assert len(expected) == len(result) == 2
    assert np.allclose(expected[0], result[0])
    assert np.allclose(expected[1], result[1])


@pytest.mark.parametrize("argnums", (None, 0, [1], (0, 1)))
def test_jacobian_outside_qjit_argnums(argnums):
    """Test that argnums work correctly outside of a jitting context."""

    def f(x, y):
        return x**2 + y**2, 2 * x + 2 * y

    x, y = jnp.array([4.0, 5.0]), jnp.array([4.0, 5.0])

    expected = jax.jacobian(f, argnums=argnums if argnums is not None else 0)(x, y)
    result = catalyst.jacobian(f, argnums=argnums)(x, y)

    assert len(expected) == len(result) == 2
    assert np.allclose(expected[0], result[0])
    assert np.allclose(expected[1], result[1])






































































def test_assert_non_differentiable():
    """Test non-differentiable parameter detection"""

    def workflow(x: float):
        h = grad("string!", method="fd")
        return h(x)

    with pytest.warns(UserWarning, match="AOT.*failed"):
        workflow = qjit(workflow)

    with pytest.raises(TypeError, match="'string!' is not a callable object"):
        workflow(1.0)


























































class TestGradientUsagePatterns:
    """Test usage patterns of Gradient functions"""

    def test_grad_usage_patterns(self):
        """Test usage patterns of catalyst.grad."""

        def fn(x):
            return x**2

        x = 4.0

        res_pattern_fn_as_argument = catalyst.grad(fn, method="fd")(x)
        res_pattern_partial = catalyst.grad(method="fd")(fn)(x)
        expected = jax.grad(fn)(x)

        assert np.allclose(res_pattern_fn_as_argument, expected)
        assert np.allclose(res_pattern_partial, expected)

    def test_value_and_grad_usage_patterns(self):
        """Test usage patterns of catalyst.value_and_grad."""

        def fn(x):
            return x**2

        x = 4.0

        fn_as_argument_val, fn_as_argument_grad = value_and_grad(fn, method="fd")(x)
        partial_val, partial_grad = value_and_grad(method="fd")(fn)(x)
        expected_val, expected_grad = jax.value_and_grad(fn)(x)

        assert np.allclose(fn_as_argument_val, expected_val)
        assert np.allclose(partial_val, expected_val)
        assert np.allclose(fn_as_argument_grad, expected_grad)
        assert np.allclose(partial_grad, expected_grad)

    def test_jacobian_usage_patterns(self):
        """Test usage patterns of catalyst.jacobian."""

        def fn(x):
            return x**2

        x = 4.0

        res_pattern_fn_as_argument = catalyst.jacobian(fn, method="fd")(x)
        res_pattern_partial = catalyst.jacobian(method="fd")(fn)(x)
        expected = jax.jacobian(fn)(x)

        assert np.allclose(res_pattern_fn_as_argument, expected)
        assert np.allclose(res_pattern_partial, expected)
























if __name__ == "__main__":
    pytest.main(["-x", __file__])
