# Ported by port.py from PennyLane Catalyst (663cf5a3f), frontend/test/pytest/test_conditionals.py:
# its classical tests, with catalyst/pennylane/jax imports rewritten to shims.py (sprue).
# Copyright 2022-2025 Xanadu Quantum Technologies Inc.

# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at

#     http://www.apache.org/licenses/LICENSE-2.0

# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
# pylint: disable=too-many-lines

import re
from textwrap import dedent

from tests.e2e.catalyst_classical.shims import jax
import sprue.numpy as jnp
import numpy as np
from tests.e2e.catalyst_classical.shims import pennylane as qp
import pytest
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from pennylane import cond
cond = _lookup('pennylane', 'pennylane', 'cond')

from tests.e2e.catalyst_classical.shims import catalyst as catalyst
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst import api_extensions
api_extensions = _lookup('catalyst', 'catalyst', 'api_extensions')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst import cond as catalyst_cond
catalyst_cond = _lookup('catalyst', 'catalyst', 'cond')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst import measure as catalyst_measure
catalyst_measure = _lookup('catalyst', 'catalyst', 'measure')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst import qjit
qjit = _lookup('catalyst', 'catalyst', 'qjit')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst.utils.exceptions import PlxprCaptureCFCompatibilityError
PlxprCaptureCFCompatibilityError = _lookup('catalyst', 'catalyst.utils.exceptions', 'PlxprCaptureCFCompatibilityError')

# pylint: disable=missing-function-docstring


def measure(*args, **kwargs):
    if qp.capture.enabled():
        return qp.measure(*args, **kwargs)
    return catalyst_measure(*args, **kwargs)




# pylint: disable=too-many-public-methods,too-many-lines
class TestCond:
    """Test suite for the Cond functionality in Catalyst."""




    def test_cond_else_if_classical(self, capture_mode):
        """Test a cond with multiple else_if branches using the classical compilation path."""

        @qjit(capture=capture_mode)
        def circuit(x):
            @cond(x > 4.8)
            def cond_fn():
                return x * 16

            @cond_fn.else_if(x > 2.7)
            def cond_elif():
                return x * 8

            @cond_fn.else_if(x > 1.4)
            def cond_elif2():
                return x * 4

            @cond_fn.otherwise
            def cond_else():
                return x

            return cond_fn()

        assert circuit(5) == 80
        assert circuit(3) == 24
        assert circuit(2) == 8
        assert circuit(-3) == -3


    def test_branch_return_pytree_mismatch(self, capture_mode):
        """Test that an exception is raised when the true branch returns a value without an else
        branch.
        """

        if capture_mode:
            pytest.xfail("We forgot about this case and will fix it in pl-core.")  # [sc-97385]

        def circuit(pred: bool):
            @cond(pred)
            def cond_fn():
                return (1, 1)

            @cond_fn.otherwise
            def cond_fn():
                return [2, 2]

            return cond_fn()

        with pytest.warns(UserWarning, match="AOT.*failed"):
            circuit = qjit(circuit, capture=capture_mode)

        with pytest.raises(
            TypeError,
            match="Control flow requires a consistent return structure across all branches",
        ):
            circuit(True)


    def test_branch_return_shape_mismatch_classical(self, capture_mode):
        """Test that an exception is raised when the array shapes across branches don't match."""

        def circuit(x: bool):
            @cond(x)
            def cond_fn():
                return True

            @cond_fn.otherwise
            def cond_fn():
                return jnp.array([True, False])

            return cond_fn()

        if capture_mode:
            # [sc-97387] improve error message
            with pytest.warns(UserWarning, match="AOT.*failed"):
                circuit = qjit(circuit, capture=capture_mode)
            with pytest.raises(
                ValueError,
                match=r"argument 2 is shorter than argument 1",
            ):
                circuit(True)
        else:
            m = "Control flow requires a consistent array shape per result across all branches"
            with pytest.warns(UserWarning, match="AOT.*failed"):
                circuit = qjit(circuit, capture=capture_mode)
            with pytest.raises(
                TypeError,
                match=m,
            ):
                circuit(True)



    def test_branch_multi_return_type_unification_qjit(self, capture_mode):
        """Test that unification happens before the results of the cond primitve is available."""

        if capture_mode:
            pytest.xfail("capture requires same dtype across all branches")  # [sc-97050]

        @qjit(capture=capture_mode)
        def circuit(pred):
            @cond(pred)
            def cond_fn():
                return 0

            @cond_fn.otherwise
            def cond_else():
                return True

            r = cond_fn()
            assert r.dtype is jnp.dtype("int")  # pylint: disable=no-member
            return r

        assert 0 == circuit(True)

    def test_branch_multi_return_type_unification_qjit_2(self, capture_mode):
        """Test that unification happens before the results of the cond primitve is available."""

        if capture_mode:
            pytest.xfail("capture requires same dtype across all branches")  # [sc-97050]

        @qjit(capture=capture_mode)
        def circuit(cond1, cond2):
            @cond(cond1)
            def cond_fn():
                return False

            @cond_fn.else_if(cond2)
            def cond_fn_2():
                return 0.5

            @cond_fn.otherwise
            def cond_fn_3():
                return False

            r = cond_fn()
            assert r.dtype is jnp.dtype(  # pylint: disable=no-member
                "float64" if jax.config.values["jax_enable_x64"] else "float32"
            )
            return r

        assert 0.5 == circuit(False, True)

    def test_branch_multi_return_type_unification_qjit_3(self, capture_mode):
        """Test that unification happens before the results of the cond primitve is available."""

        if capture_mode:
            pytest.xfail("capture requires same dtype across all branches")  # [sc-97050]

        @qjit(capture=capture_mode)
        def circuit(cond1, cond2):
            @cond(cond1)
            def cond_fn():
                return False

            @cond_fn.else_if(cond2)
            def cond_fn_2():
                return False

            @cond_fn.otherwise
            def cond_fn_3():
                return 0.5

            r = cond_fn()
            assert r.dtype is jnp.dtype(  # pylint: disable=no-member
                "float64" if jax.config.values["jax_enable_x64"] else "float32"
            )
            return r

        assert 0.0 == circuit(False, True)

    def test_branch_multi_return_type_unification_qjit_4(self, capture_mode):
        """Test that unification happens before the results of the cond primitve is available."""

        if capture_mode:
            pytest.xfail("capture requires same dtype across all branches")  # [sc-97050]

        @qjit(capture=capture_mode)
        def circuit(cond1, cond2):
            @cond(cond1)
            def cond_fn():
                return {0: True, 1: 0.5}

            @cond_fn.else_if(cond2)
            def cond_fn_2():
                return {0: 0.7, 1: True}

            @cond_fn.otherwise
            def cond_fn_3():
                return {0: True, 1: False}

            r = cond_fn()
            expected_dtype = jnp.dtype(
                "float64" if jax.config.values["jax_enable_x64"] else "float32"
            )
            assert all(v.dtype is expected_dtype for _, v in r.items())  # pylint: disable=no-member
            return r

        assert {0: 0.7, 1: 1.0} == circuit(False, True)



    def test_branch_return_mismatch_classical(self, capture_mode):
        """Test that an exception is raised when the true branch returns a different pytree-shape
        than the else branch, given a classical tracing context (no QNode).
        """

        def circuit(pred: bool):
            @cond(pred)
            def cond_fn():
                return (1, 1)

            @cond_fn.otherwise
            def cond_fn():
                return 2

            return cond_fn()

        if capture_mode:
            with pytest.warns(UserWarning, match="AOT.*failed"):
                circuit = qjit(circuit, capture=capture_mode)
            with pytest.raises(ValueError, match="Mismatch in number of output variables"):
                circuit(True)
        else:
            with pytest.warns(UserWarning, match="AOT.*failed"):
                circuit = qjit(circuit, capture=capture_mode)
            with pytest.raises(
                TypeError,
                match="Control flow requires a consistent return structure across all branches",
            ):
                circuit(True)

    def test_branch_return_promotion_classical(self, capture_mode):
        """Test that an exception is raised when the true branch returns a different type than the
        else branch, given a classical tracing context (no QNode).
        """
        if capture_mode:
            pytest.xfail("capture requires matching dtypes.")

        def circuit():
            @cond(True)
            def cond_fn():
                return 1

            @cond_fn.otherwise
            def cond_fn():
                return 2.0

            return cond_fn()

        assert 1.0 == qjit(circuit, capture=capture_mode)()






class TestInterpretationConditional:
    """Test that the conditional operation's execution is semantically equivalent
    when compiled and interpreted."""

    def test_conditional_interpreted_and_compiled(self, capture_mode):
        """Test that a compiled and interpreted conditional have the same output."""

        def arithi(x: int, y: int, op: int):
            @cond(op == 0)
            def branch():
                return x - y

            @branch.otherwise
            def branch():
                return x + y

            return branch()

        arithc = qjit(arithi, capture=capture_mode)
        assert arithc(0, 0, 0) == arithi(0, 0, 0)
        assert arithc(0, 0, 1) == arithi(0, 0, 1)



class TestClassicalCompilation:
    """Test suite for the Catalyst Cond functionality outside of QNode contexts."""



    def test_no_true_false_parameters(self, capture_mode):
        """Test non-empty parameter detection in conditionals"""

        def arithc2(pred: bool):
            @cond(pred)
            def branch(_):
                return 1

            @branch.otherwise
            def branch():
                return 0

            return branch()

        with pytest.warns(UserWarning, match="AOT.*failed"):
            arithc2_jit = qjit(arithc2, capture=capture_mode)

        with pytest.raises(TypeError, match="missing 1 required positional argument"):
            arithc2_jit(True)

        def arithc1(pred: bool):
            @cond(pred)
            def branch():
                return 1

            @branch.otherwise
            def branch(_):
                return 0

            return branch()  # pylint: disable=no-value-for-parameter

        with pytest.warns(UserWarning, match="AOT.*failed"):
            arithc1_jit = qjit(arithc1, capture=capture_mode)

        with pytest.raises(TypeError, match="missing 1 required positional argument"):
            arithc1_jit(True)




class TestCondPredicateConversion:
    """Test suite for checking predicate conversion to bool."""

    def test_conversion_integer(self, capture_mode):
        """Test entry predicate conversion from integer to bool."""

        @qjit(capture=capture_mode)
        def workflow(x):
            n = 1

            # n is an integer but it gets converted to bool
            @cond(n)
            def cond_fn():
                return x**2

            @cond_fn.otherwise
            def else_fn():
                return x

            return cond_fn()

        assert workflow(3) == 9

    def test_conversion_float(self, capture_mode):
        """Test entry predicate conversion from float to bool."""

        @qjit(capture=capture_mode)
        def workflow(x):
            n = 2.0

            # n is a float but it gets converted to bool
            @cond(n)
            def cond_fn():
                return x**2

            @cond_fn.otherwise
            def else_fn():
                return x

            return cond_fn()

        assert workflow(3) == 9

    def test_jax_bool(self, capture_mode):
        """Test entry predicate with a JAX bool."""

        @qjit(capture=capture_mode)
        def workflow(x):
            n = jnp.bool_(True)

            # n is a JAX bool and does not need conversion
            @cond(n)
            def cond_fn():
                return x**2

            @cond_fn.otherwise
            def else_fn():
                return x

            return cond_fn()

        assert workflow(3) == 9

    def test_else_if_conversion_integer(self, capture_mode):
        """Test else_if predicate conversion from integer to bool."""

        @qjit(capture=capture_mode)
        def workflow(x):
            n = 1

            @cond(n < 0)
            def cond_fn():
                return -x

            # n is an integer but it gets converted to bool
            @cond_fn.else_if(n)
            def else_if_fn():
                return x**2

            @cond_fn.otherwise
            def else_fn():
                return x

            return cond_fn()

        assert workflow(3) == 9








if __name__ == "__main__":
    pytest.main(["-x", __file__])
