# Ported by port.py from PennyLane Catalyst (663cf5a3f), frontend/test/pytest/test_jax_dynamic_api.py:
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

"""This test fixes our expectations regarding the JAX dynamic API."""

# pylint: disable=too-many-lines

from tests.e2e.catalyst_classical.shims import jax
import numpy as np
from tests.e2e.catalyst_classical.shims import pennylane as qp
import pytest
import sprue.numpy as jnp
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from jax._src.source_info_util import current as current_source_info
current_source_info = _lookup('jax', 'jax._src.source_info_util', 'current')
from numpy import array_equal
from numpy.testing import assert_allclose

from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst import cond, qjit
cond = _lookup('catalyst', 'catalyst', 'cond')
qjit = _lookup('catalyst', 'catalyst', 'qjit')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst.jax_extras import DShapedArray, ShapedArray
DShapedArray = _lookup('catalyst', 'catalyst.jax_extras', 'DShapedArray')
ShapedArray = _lookup('catalyst', 'catalyst.jax_extras', 'ShapedArray')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst.jax_extras.tracing import trace_to_jaxpr
trace_to_jaxpr = _lookup('catalyst', 'catalyst.jax_extras.tracing', 'trace_to_jaxpr')
from tests.e2e.catalyst_classical.shims import lookup as _lookup  # from catalyst.tracing.contexts import EvaluationContext
EvaluationContext = _lookup('catalyst', 'catalyst.tracing.contexts', 'EvaluationContext')

DTYPES = [float, int, jnp.float32, jnp.float64, jnp.int8, jnp.int16, "float32", np.float64]
SHAPES = [3, (2, 3, 1), (), jnp.array([2, 1, 3], dtype=int)]


def assert_array_and_dtype_equal(a, b):
    """Check that two arrays have exactly the same values and types"""

    assert array_equal(a, b)
    assert a.dtype == b.dtype




class TestBasicArrayCreation:
    """Test that involve the creation of dynamic arrays with control flow."""


    @pytest.mark.parametrize("dtype", DTYPES)
    @pytest.mark.parametrize("shape", SHAPES)
    def test_classical_tracing_init(self, shape, dtype, capture_mode):
        """Test that tensor primitive work in the classical tracing mode"""

        assert_array_and_dtype_equal(
            qjit(lambda: jnp.zeros(shape, dtype))(), jnp.zeros(shape, dtype=dtype)
        )
        assert_array_and_dtype_equal(
            qjit(lambda: jnp.ones(shape, dtype))(), jnp.ones(shape, dtype=dtype)
        )
        assert_array_and_dtype_equal(
            qjit(lambda s: jnp.ones(s, dtype))(shape), jnp.ones(shape, dtype=dtype)
        )
        assert_array_and_dtype_equal(
            qjit(lambda s: jnp.zeros(s, dtype))(shape), jnp.zeros(shape, dtype=dtype)
        )

        @qjit(capture=capture_mode)
        def f(s):
            res = jnp.empty(shape=s, dtype=dtype)
            return res

        res = f(shape)
        assert_allclose(res.shape, shape)
        assert res.dtype == dtype

    @pytest.mark.parametrize(
        "op",
        [
            jnp.sin,
            jnp.cos,
            jnp.abs,
        ],
    )
    def test_classical_tracing_unary_ops(self, op, capture_mode):
        """Test that tensor primitives work with basic unary operations"""

        shape = (3, 4)
        dtype = complex

        @qjit(capture=capture_mode)
        def f(s):
            return op(jnp.ones(s, dtype))

        assert_array_and_dtype_equal(f(shape), op(jnp.ones(shape, dtype)))

    @pytest.mark.parametrize(
        "op",
        [
            (lambda x, y: x + y),
            (lambda x, y: x - y),
            (lambda x, y: x * y),
            (lambda x, y: x / y),
        ],
    )
    def test_classical_tracing_binary_ops(self, op, capture_mode):
        """Test that tensor primitives work with basic binary operations"""

        shape = (3, 4)
        dtype = complex

        @qjit(capture=capture_mode)
        def f(s):
            return op(jnp.ones(s, dtype), jnp.ones(s, dtype))

        assert_array_and_dtype_equal(f(shape), op(jnp.ones(shape, dtype), jnp.ones(shape, dtype)))

    def test_classical_tracing_binary_ops_3D(self, capture_mode):
        """Test that tensor primitives work with basic binary operations on 3D arrays"""
        # TODO: Merge with the binary operations test after fixing
        # pylint: disable=unnecessary-lambda-assignment

        shape = (1, 2, 3)
        dtype = complex
        op = lambda a, b: a + b

        @qjit(capture=capture_mode)
        def f(s):
            return op(jnp.ones(s, dtype), jnp.ones(s, dtype))

        assert_array_and_dtype_equal(f(shape), op(jnp.ones(shape, dtype), jnp.ones(shape, dtype)))





    def test_classical_tracing_2(self, capture_mode):
        """Test that tensor primitive work in the classical tracing mode,
        the traced dimension case"""

        @qjit(capture=capture_mode)
        def f(x):
            return jnp.ones(shape=[1, x], dtype=int)

        assert_array_and_dtype_equal(f(3), jnp.ones((1, 3), dtype=int))

    @pytest.mark.skip("Jax does not detect error in this use-case")
    def test_invalid_shapes_2(self, capture_mode):
        """Test the unsupported shape formats"""
        bad_shape = jnp.array([[3, 2]], dtype=int)

        def f():
            return jnp.empty(shape=bad_shape, dtype=int)

        with pytest.raises(TypeError):
            qjit(f, capture=capture_mode)

    @pytest.mark.parametrize(
        "bad_shape",
        [
            [[2, 3]],
            [2, 3.0],
            [1, jnp.array(2, dtype=float)],
        ],
    )
    def test_invalid_shapes(self, bad_shape, capture_mode):
        """Test the unsupported shape formats"""

        def f():
            return jnp.empty(shape=bad_shape, dtype=int)

        with pytest.warns(UserWarning, match="AOT.*failed"):
            f = qjit(f, capture=capture_mode)

        with pytest.raises(TypeError, match="Shapes must be 1D sequences of integer scalars"):
            f()

    def test_accessing_shapes(self, capture_mode):
        """Test that dynamic tensor shapes are available for calculations"""

        @qjit(capture=capture_mode)
        def f(sz):
            a = jnp.ones((sz, sz))
            sa = jnp.array(a.shape)
            return jnp.sum(sa)

        assert f(3) == 6

    def test_array_indexing(self, capture_mode):
        """Test the support of indexing of dynamically-shaped arrays"""

        @qjit(capture=capture_mode)
        def fun(sz, idx):
            r = jnp.ones((sz, 3, sz + 1), dtype=int)
            return r[idx, 2, idx]

        res = fun(5, 2)
        assert res == 1

    def test_array_assignment(self, capture_mode):
        """Test the support of assigning a value to a dynamically-shaped array"""

        @qjit(capture=capture_mode)
        def fun(sz, idx, val):
            r = jnp.ones((sz, 3, sz), dtype=int)
            r = r.at[idx, 0, idx].set(val)
            return r

        result = fun(5, 2, 33)
        expected = jnp.ones((5, 3, 5), dtype=int).at[2, 0, 2].set(33)
        assert_array_and_dtype_equal(result, expected)












def test_qjit_cond_identity():
    """Test that catalyst tensor primitive is compatible with quantum conditional"""

    @qjit
    def f(flag, sz):
        a = jnp.ones([sz, 3], dtype=float)
        b = jnp.zeros([sz, 3], dtype=float)

        @cond(flag)
        def case():
            return a

        @case.otherwise
        def case():
            return b

        c = case()
        assert c.shape[0] is a.shape[0]
        assert c.shape[0] is b.shape[0]
        return c

    assert_array_and_dtype_equal(f(True, 3), jnp.ones([3, 3]))
    assert_array_and_dtype_equal(f(False, 3), jnp.zeros([3, 3]))


def test_qjit_cond_outdbidx():
    """Test that catalyst tensor primitive is compatible with quantum conditional"""

    @qjit
    def f(flag, sz):
        @cond(flag)
        def case():
            return jnp.ones([sz + 1, 3], dtype=float)

        @case.otherwise
        def case():
            return jnp.zeros([sz + 1, 3], dtype=float)

        return case()

    assert_array_and_dtype_equal(f(True, 3), jnp.ones([4, 3]))
    assert_array_and_dtype_equal(f(False, 3), jnp.zeros([4, 3]))


def test_qjit_cond_capture():
    """Test that catalyst tensor primitive is compatible with quantum conditional"""

    @qjit
    def f(flag, sz):
        a = jnp.ones([sz, 3], dtype=float)

        @cond(flag)
        def case():
            b = jnp.ones([sz, 3], dtype=float)
            return a + b

        @case.otherwise
        def case():
            b = jnp.zeros([sz, 3], dtype=float)
            return a + b

        c = case()
        return c + a

    assert_array_and_dtype_equal(f(True, 3), 3 * jnp.ones([3, 3]))
    assert_array_and_dtype_equal(f(False, 3), 2 * jnp.ones([3, 3]))




if __name__ == "__main__":
    pytest.main(["-x", __file__])
