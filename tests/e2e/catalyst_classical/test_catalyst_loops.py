# Ported by port.py from PennyLane Catalyst (663cf5a3f), frontend/test/pytest/test_loops.py:
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
"""Test suite for loop operations in Catalyst."""

from textwrap import dedent

import numpy as np
from tests.e2e.catalyst_classical.shims import pennylane as qp
import pytest

from tests.e2e.catalyst_classical.shims import catalyst as catalyst
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst import api_extensions, for_loop, measure, qjit, while_loop
api_extensions = _lookup('catalyst', 'catalyst', 'api_extensions')
for_loop = _lookup('catalyst', 'catalyst', 'for_loop')
measure = _lookup('catalyst', 'catalyst', 'measure')
qjit = _lookup('catalyst', 'catalyst', 'qjit')
while_loop = _lookup('catalyst', 'catalyst', 'while_loop')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst.utils.exceptions import PlxprCaptureCFCompatibilityError
PlxprCaptureCFCompatibilityError = _lookup('catalyst', 'catalyst.utils.exceptions', 'PlxprCaptureCFCompatibilityError')

# pylint: disable=no-value-for-parameter,unused-argument








class TestClassicalCompilation:
    """Test that Catalyst loops can be used outside of quantum functions."""


    @pytest.mark.parametrize("x,n", [(2, 3), (4, 5)])
    def test_while_nested_loop(self, x, n):
        """Test nested while loops in classical function."""

        @qjit
        def mulc(x: int, n: int):
            @while_loop(lambda i, _: i < x)
            def loop(i, accum):
                @while_loop(lambda j: j < n)
                def loop2(j):
                    return j + 1

                return i + 1, accum + loop2(0)

            _, x_times_n = loop(0, 0)
            return x_times_n

        assert mulc(x, n) == x * n







class TestInterpretationControlFlow:
    """Test that the loops' executions are semantically equivalent when compiled and interpreted."""

    def test_while_loop(self):
        """Test simple while loop."""

        def muli(x: int, n: int):
            @while_loop(lambda v, _: v < n)
            def loop(v, i):
                return v + 1, i + x

            _, x_times_n = loop(0, 0)
            return x_times_n

        mulc = qjit(muli)
        assert mulc(1, 2) == muli(1, 2)

    def test_for_loop(self):
        """Test simple for loop."""

        def muli(x: int, n: int):
            @for_loop(0, n, 1)
            def loop(_, agg):
                return agg + x

            x_times_n = loop(0)
            return x_times_n

        mulc = qjit(muli)
        assert np.allclose(mulc(1, 2), muli(1, 2))




class TestResultStructureInterpreted:
    """Test that interpreted loops preserve the (tuple) structure of arguments/results:
    - no arguments: return None
    - scalar argument: return scalar
    - single tuple argument: return tuple of same size (tested for 0-, 1-, 2-length tuples)
    - multiple arguments: return tuple preserving individual argument structure
    """

    def test_for_loop_no_args(self):
        """Test for loop result structure with no arguments."""

        def loop(_):
            pass

        assert for_loop(0, 0, 1)(loop)() is None
        assert for_loop(0, 1, 1)(loop)() is None
        assert for_loop(0, 2, 1)(loop)() is None

    @pytest.mark.parametrize("x", [1, (), (1,), (1, 1)])
    def test_for_loop_one_arg(self, x):
        """Test for loop result structure with one argument."""

        def loop(_, x):
            return x

        assert for_loop(0, 0, 1)(loop)(x) == x
        assert for_loop(0, 1, 1)(loop)(x) == x
        assert for_loop(0, 2, 1)(loop)(x) == x

    @pytest.mark.parametrize("x", [1, (), (1,), (1, 1)])
    @pytest.mark.parametrize("y", [1, (), (1,), (1, 1)])
    def test_for_loop_two_arg(self, x, y):
        """Test for loop result structure with two arguments."""

        def loop(_, x, y):
            return x, y

        assert for_loop(0, 0, 1)(loop)(x, y) == (x, y)
        assert for_loop(0, 1, 1)(loop)(x, y) == (x, y)
        assert for_loop(0, 2, 1)(loop)(x, y) == (x, y)

    def test_while_loop_no_args(self):
        """Test while loop result structure with no arguments."""

        def loop():
            pass

        assert while_loop(lambda: False)(loop)() is None

    def test_while_loop_one_scalar(self):
        """Test while loop result structure with one scalar."""

        def loop(x):
            return x + 1

        assert while_loop(lambda x: x < 1)(loop)(1) == 1
        assert while_loop(lambda x: x < 2)(loop)(1) == 2
        assert while_loop(lambda x: x < 3)(loop)(1) == 3

    def test_while_loop_two_scalars(self):
        """Test while loop result structure with two scalars."""

        def loop(x, y):
            return x, y + 1

        assert while_loop(lambda _, y: y < 1)(loop)(1, 1) == (1, 1)
        assert while_loop(lambda _, y: y < 2)(loop)(1, 1) == (1, 2)
        assert while_loop(lambda _, y: y < 3)(loop)(1, 1) == (1, 3)

    def test_while_loop_one_empty_tuple(self):
        """Test while loop result structure with one empty tuple."""

        def loop(x):
            return x

        assert while_loop(lambda _: False)(loop)(()) == ()

    def test_while_loop_two_empty_tuples(self):
        """Test while loop result structure with two empty tuples."""

        def loop(x, y):
            return x, y

        assert while_loop(lambda *_: False)(loop)((), ()) == ((), ())

    @pytest.mark.parametrize("x", [(1,), (1, 1)])
    def test_while_loop_one_tuple(self, x):
        """Test while loop result structure with one tuple."""

        def loop(x):
            return (x[0] + 1,) + x[1:]

        assert while_loop(lambda x: x[0] < 1)(loop)(x) == (x[0] + 0,) + x[1:]
        assert while_loop(lambda x: x[0] < 2)(loop)(x) == (x[0] + 1,) + x[1:]
        assert while_loop(lambda x: x[0] < 3)(loop)(x) == (x[0] + 2,) + x[1:]

    @pytest.mark.parametrize("x", [(1,), (1, 1)])
    @pytest.mark.parametrize("y", [(1,), (1, 1)])
    def test_while_loop_two_tuples(self, x, y):
        """Test while loop result structure with two tuples."""

        def loop(x, y):
            return x, (y[0] + 1,) + y[1:]

        assert while_loop(lambda _, y: y[0] < 1)(loop)(x, y) == (x, (y[0] + 0,) + y[1:])
        assert while_loop(lambda _, y: y[0] < 2)(loop)(x, y) == (x, (y[0] + 1,) + y[1:])
        assert while_loop(lambda _, y: y[0] < 3)(loop)(x, y) == (x, (y[0] + 2,) + y[1:])








if __name__ == "__main__":
    pytest.main(["-x", __file__])
