# Ported by port.py from PennyLane Catalyst (663cf5a3f), frontend/test/pytest/test_jax_integration.py:
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

"""Test QJIT compatibility with JAX transformations such as jax.jit and jax.grad."""

import textwrap
from dataclasses import dataclass, field
from functools import partial

from tests.e2e.catalyst_classical.shims import jax
import sprue.numpy as jnp
from tests.e2e.catalyst_classical.shims import pennylane as qp
import pytest
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from jax.interpreters.mlir import ir
ir = _lookup('jax', 'jax.interpreters.mlir', 'ir')

from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst import for_loop, measure, qjit
for_loop = _lookup('catalyst', 'catalyst', 'for_loop')
measure = _lookup('catalyst', 'catalyst', 'measure')
qjit = _lookup('catalyst', 'catalyst', 'qjit')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst.jax_extras.lowering import get_mlir_attribute_from_pyval
get_mlir_attribute_from_pyval = _lookup('catalyst', 'catalyst.jax_extras.lowering', 'get_mlir_attribute_from_pyval')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst.jit import JAX_QJIT
JAX_QJIT = _lookup('catalyst', 'catalyst.jit', 'JAX_QJIT')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst.utils.exceptions import CompileError
CompileError = _lookup('catalyst', 'catalyst.utils.exceptions', 'CompileError')




class TestJAXAD:
    """Test QJIT compatibility with JAX differentiation."""








    @pytest.mark.parametrize("shape", ([2, 3], [3, 2], [1, 6]))
    def test_multiD_calls(self, shape):
        """Test a jax.grad in combination with qjit on non-1D input parameters."""

        def func(p1, p2):
            return jnp.reshape(p1, shape) + 2 * jnp.reshape(p2, shape)

        C_func = qjit(func)
        PL_func = func

        def cost_fn(p1, p2, f):
            m1 = f(p1, p2)
            m2 = f(p1, p2)
            return m1 + m2

        p1 = jnp.array([[0.1, 0.3, 0.5], [0.1, 0.2, 0.8]])
        p2 = jnp.array([[0.3, 0.5], [0.2, 0.8], [0.2, 0.8]])
        result = jax.jacobian(cost_fn, argnums=[0, 1])(p1, p2, C_func)
        reference = jax.jacobian(cost_fn, argnums=[0, 1])(p1, p2, PL_func)
        assert len(result) == len(reference)
        for a, b in zip(result, reference):
            assert a.shape == b.shape
            assert jnp.allclose(a, b, rtol=1e-6, atol=1e-6)











if __name__ == "__main__":
    pytest.main(["-x", __file__])
