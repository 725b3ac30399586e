# Ported by port.py from PennyLane Catalyst (663cf5a3f), frontend/test/pytest/test_vmap.py:
# its classical tests, with catalyst/pennylane/jax imports rewritten to shims.py (sprue).
# Copyright 2024 Xanadu Quantum Technologies Inc.

# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at

#     http://www.apache.org/licenses/LICENSE-2.0

# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""Test QJIT compatibility of jax.vmap and catalyst.vmap."""

from tests.e2e.catalyst_classical.shims import jax
import sprue.numpy as jnp
from tests.e2e.catalyst_classical.shims import pennylane as qp
import pytest

from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst import qjit, vmap
qjit = _lookup('catalyst', 'catalyst', 'qjit')
vmap = _lookup('catalyst', 'catalyst', 'vmap')

# pylint: disable=protected-access


class TestVectorizeMap:
    """Test QJIT compatibility with JAX vectorization."""

    @pytest.mark.parametrize("vmap_fn", (jax.vmap, vmap))
    def test_simple_classical(self, vmap_fn):
        """
        Test jax.vmap and catalyst.vmap for a classical program inside and outside qjit.
        """

        def workflow(axes_dct):
            return axes_dct["x"] + axes_dct["y"]

        expected = jnp.array([1, 2, 3, 4, 5])

        # Outside qjit
        result_out = vmap_fn(qjit(workflow), in_axes=({"x": None, "y": 0},))(
            {"x": 1, "y": jnp.arange(5)}
        )
        assert jnp.allclose(result_out, expected)

        # Inside qjit
        result_in = qjit(vmap_fn(workflow, in_axes=({"x": None, "y": 0},)))(
            {"x": 1, "y": jnp.arange(5)}
        )
        assert jnp.allclose(result_in, expected)















    def test_vmap_incomp_in_axes_pytree(self):
        """Test catalyst.vmap of a hybrid workflow inside QJIT with
        incompatible PyTrees for in_axes and args."""

        def f(x, y):
            return x, y

        x = jnp.array([0, 1, 2, 3])
        xx = jnp.stack([x, x])

        with pytest.raises(
            ValueError,
            match="Invalid batch sizes; expected the batch size to be the same for all arguments",
        ):
            qjit(lambda: vmap(f, in_axes=0)(xx, x))()

        with pytest.raises(
            ValueError,
            match="Invalid 'in_axes'; it must be an int or match the length of positional",
        ):
            qjit(lambda: vmap(f, in_axes=[0, {"hi": 0}])(xx, xx))()

        with pytest.raises(
            ValueError,
            match="Invalid 'in_axes'; it must be an int or match the length of positional",
        ):
            qjit(lambda: vmap(f, in_axes=[0, {"bi": 0}])(xx, {"hi": xx}))()







    def test_vmap_incomp_out_axes_pytree(self):
        """Test catalyst.vmap of a hybrid workflow inside QJIT with
        incompatible PyTrees for out_axes and return values."""

        def f(x, y):
            return {"x": x, "y": y}

        x = jnp.array([0, 1, 2, 3])
        xx = jnp.stack([x, x])

        with pytest.raises(
            ValueError,
            match="Invalid batch sizes; expected the batch size to be the same for all arguments",
        ):
            qjit(lambda: vmap(f, out_axes=0)(xx, x))()

        with pytest.raises(
            ValueError,
            match="Invalid 'out_axes'; it must be an int or match the number of function results",
        ):
            qjit(lambda: vmap(f, out_axes=[0, {"hi": 0}])(xx, xx))()

        with pytest.raises(
            ValueError,
            match="Invalid 'out_axes'; it must be an int or match the number of function results",
        ):
            qjit(lambda: vmap(f, out_axes=[0, {"bi": 0}])(xx, {"hi": xx}))()







