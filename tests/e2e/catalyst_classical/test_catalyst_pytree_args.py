# Ported by port.py from PennyLane Catalyst (663cf5a3f), frontend/test/pytest/test_pytree_args.py:
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

"""Test PyTree support in Catalyst."""

from typing import Iterable

from tests.e2e.catalyst_classical.shims import jax
import sprue.numpy as jnp
import numpy as np
from tests.e2e.catalyst_classical.shims import pennylane as qp
import pytest
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from jax._src.tree_util import tree_flatten
tree_flatten = _lookup('jax', 'jax._src.tree_util', 'tree_flatten')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from pennylane import adjoint, cond, for_loop, grad, qjit
adjoint = _lookup('pennylane', 'pennylane', 'adjoint')
cond = _lookup('pennylane', 'pennylane', 'cond')
for_loop = _lookup('pennylane', 'pennylane', 'for_loop')
grad = _lookup('pennylane', 'pennylane', 'grad')
qjit = _lookup('pennylane', 'pennylane', 'qjit')

from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst import measure
measure = _lookup('catalyst', 'catalyst', 'measure')






class TestAuxiliaryData:
    """Test PyTrees with Auxiliary data."""

    def test_auxiliary_data(self, capture_mode):
        """Make sure that we are able to return arbitrary PyTrees.

        The example below was taken from:
        https://jax.readthedocs.io/en/latest/jax-101/05.1-pytrees.html
        """

        class MyContainer:
            """A named container."""

            def __init__(self, name: str, a: int):
                self.name = name
                self.a = a

        def flatten_MyContainer(container) -> tuple[Iterable[int], str]:
            """Returns an iterable over container contents, and aux data."""
            flat_contents = [container.a]

            # we don't want the name to appear as a child, so it is auxiliary data.
            # auxiliary data is usually a description of the structure of a node,
            # e.g., the keys of a dict -- anything that isn't a node's children.
            aux_data = container.name
            return flat_contents, aux_data

        def unflatten_MyContainer(aux_data: str, flat_contents: Iterable[int]) -> MyContainer:
            """Converts aux data and the flat contents into a MyContainer."""
            return MyContainer(aux_data, *flat_contents)

        jax.tree_util.register_pytree_node(MyContainer, flatten_MyContainer, unflatten_MyContainer)

        @qjit(capture=capture_mode)
        def classical(x):
            return MyContainer("aux_data", x * x)

        result = classical(2)
        assert result.name == "aux_data"
        assert result.a == 4


if __name__ == "__main__":
    pytest.main(["-x", __file__])
