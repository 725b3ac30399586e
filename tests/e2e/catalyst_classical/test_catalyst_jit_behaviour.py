# Ported by port.py from PennyLane Catalyst (663cf5a3f), frontend/test/pytest/test_jit_behaviour.py:
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

import os
import random
import warnings
from functools import partial
from timeit import default_timer as timer

from tests.e2e.catalyst_classical.shims import jax
import numpy as np
from tests.e2e.catalyst_classical.shims import pennylane as qp
import pytest
import sprue.numpy as jnp
from numpy import pi

from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst import for_loop, grad, measure, qjit
for_loop = _lookup('catalyst', 'catalyst', 'for_loop')
grad = _lookup('catalyst', 'catalyst', 'grad')
measure = _lookup('catalyst', 'catalyst', 'measure')
qjit = _lookup('catalyst', 'catalyst', 'qjit')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst.jax_primitives import _scalar_abstractify
_scalar_abstractify = _lookup('catalyst', 'catalyst.jax_primitives', '_scalar_abstractify')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst.tracing.type_signatures import ( TypeCompatibility, get_abstract_signature, params_are_annotated, typecheck_signatures, )
TypeCompatibility = _lookup('catalyst', 'catalyst.tracing.type_signatures', 'TypeCompatibility')
get_abstract_signature = _lookup('catalyst', 'catalyst.tracing.type_signatures', 'get_abstract_signature')
params_are_annotated = _lookup('catalyst', 'catalyst.tracing.type_signatures', 'params_are_annotated')
typecheck_signatures = _lookup('catalyst', 'catalyst.tracing.type_signatures', 'typecheck_signatures')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst.utils.exceptions import CompileError
CompileError = _lookup('catalyst', 'catalyst.utils.exceptions', 'CompileError')

# pylint: disable=too-many-lines


def f_aot_builder(backend, wires=1, shots=1000):
    """Test AOT builder."""

    @qjit
    @qp.set_shots(shots)
    @qp.qnode(qp.device(backend, wires=wires))
    def f(x: float) -> bool:
        qp.RY(x, wires=0)
        return measure(wires=0)

    return f


def f_jit_builder(backend, wires=1, shots=1000):
    """Test JIT builder."""

    @qjit
    @qp.set_shots(shots)
    @qp.qnode(qp.device(backend, wires=wires))
    def f(x):
        qp.RY(x, wires=0)
        return measure(wires=0)

    return f


def fsample_aot_builder(backend, wires=1, shots=1000):
    """Test AOT builder with the sample measurement process."""

    @qjit
    @qp.set_shots(shots)
    @qp.qnode(qp.device(backend, wires=wires))
    def f(x: float):
        qp.RY(x, wires=0)
        return qp.sample()

    return f














            # We are failing this test because of the type system.
            # If shots is specified AOT, we would need to recompile
            # since the types are set at compile time. I.e., before the call.
            # assert expected_shape == observed_shape






class TestSignatureErrors:

    def test_incompatible_type_reachable_from_user_code(self):
        """Raise error message for incompatible types"""

        with pytest.warns(UserWarning, match="AOT.*failed"):

            @qjit
            def f(x: str):
                return

        with pytest.raises(TypeError, match="<class 'str'> is not a valid JAX type"):
            f("abc")















class TestTwoQJITsOneName:
    """Test two QJITs with the same name."""

    # pylint: disable=disallowed-name
    # pylint: disable=function-redefined

    def test_two_qjit(self):
        """Test two qjits with the same name"""

        def foo():
            """Returns 1"""
            return 1

        foo_1 = qjit(foo)

        def foo():
            """Returns 2"""
            return 2

        foo_2 = qjit(foo)

        assert foo_1() == 1
        assert foo_2() == 2



class TestQJITUsagePatterns:
    """Test usage patterns of catalyst.qjit."""

    def test_usage_patterns(self):
        """Test two usage patterns of catalyst.qjit."""

        def fn(x, y):
            return x * y

        res_pattern_fn_as_argument = qjit(fn, autograph=False)(5, 6)
        res_pattern_partial = qjit(autograph=False)(fn)(5, 6)

        expected = 30
        assert res_pattern_fn_as_argument == expected
        assert res_pattern_partial == expected


class TestGradPartial:
    """Test functools.partial with catalyst.qjit and catalyst.qjit."""

    def test_partial_func_grad(self):
        """Test if partial triggers function name error with gjit and grad."""

        def fn(x, y):
            return x * y

        partial_fn = partial(fn, y=1)

        @qjit
        def grad_partial_fn(x):
            return grad(partial_fn)(x)

        expected = jax.grad(partial_fn)(0.3)

        assert np.allclose(grad_partial_fn(0.3), expected)








if __name__ == "__main__":
    pytest.main(["-x", __file__])
