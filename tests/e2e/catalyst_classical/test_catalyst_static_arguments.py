# Ported by port.py from PennyLane Catalyst (663cf5a3f), frontend/test/pytest/test_static_arguments.py:
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

"""Test features related to static arguments."""

from dataclasses import dataclass

from tests.e2e.catalyst_classical.shims import pennylane as qp
import pytest

from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst import grad, qjit
grad = _lookup('catalyst', 'catalyst', 'grad')
qjit = _lookup('catalyst', 'catalyst', 'qjit')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst.utils.exceptions import CompileError
CompileError = _lookup('catalyst', 'catalyst.utils.exceptions', 'CompileError')


class TestStaticArguments:
    """Test QJIT with static arguments."""

    def test_function_without_hints(self):
        """Test that a function without type hints works with static argnums (bug fix)."""

        @qjit(static_argnums=1)
        def f(x, y):
            return x + len(y)

        assert f(5, "hi") == 7

    def test_function_with_varargs(self):
        """Test that a function without a fixed number of arguments works with static argnums."""

        @qjit(static_argnums=1)
        def f(*args):
            return args[0] + len(args[1]) + args[2]

        assert f(1, "hi", 4) == 7

    @pytest.mark.parametrize("argnums", [(), None])
    def test_zero_static_argument(self, argnums):
        """Test QJIT with no static arguments."""

        @qjit(static_argnums=argnums)
        def f(x: int):
            return x

        assert f(1) == 1

    @pytest.mark.parametrize("argnums", [-2, 100])
    def test_out_of_bounds_static_argument(self, argnums):
        """Test QJIT with invalid static argument index with respect to provided arguments."""

        @qjit(static_argnums=argnums)
        def f(x):
            return x

        with pytest.raises(CompileError, match="is beyond the valid range"):
            f(5)

    @pytest.mark.parametrize("argnums", [1.0, [1.0], ["x"]])
    def test_unsopported_type_static_argument(self, argnums):
        """Test QJIT with invalid static argument type."""

        @qjit(static_argnums=argnums)
        def f(x, y):
            return x + y

        with pytest.raises(TypeError, match="The `static_argnums` argument to"):
            f(5, 6)











if __name__ == "__main__":
    pytest.main(["-x", __file__])
