"""sprue.numpy's errors: the right class, and a message naming the function, the operands
(`f64[3] and f64[4]`) and the user's file:line."""
import inspect

import numpy as np
import pytest

import sprue.numpy as jnp
from sprue.api.traced import make_jaxpr
from sprue.base.errors import ConcretizationError, SprueError, SprueTypeError, SprueValueError, UnsupportedError

HERE = "test_numpy_errors.py"
f32 = np.float32


def next_line():
    return inspect.currentframe().f_back.f_lineno + 1


def check(info, *parts, line=None):
    msg = str(info.value)
    for p in parts:
        assert p in msg, f"{p!r} not in {msg!r}"
    if line is not None:
        assert f"{HERE}:{line}" in msg, msg


def test_broadcast_mismatch_eager():
    with pytest.raises(SprueValueError) as info:
        line = next_line()
        jnp.add(np.ones(3), np.ones(4))
    check(info, "sprue.numpy.add", "f64[3] and f64[4]", "broadcast", line=line)


def test_broadcast_mismatch_traced_operator():
    with pytest.raises(SprueValueError) as info:
        line = next_line()
        make_jaxpr(lambda x, y: x * y)(np.ones((2, 3), f32), np.ones((4,), f32))
    check(info, "sprue.numpy.multiply", "f32[2,3] and f32[4]", line=line)


def test_where_three_way_mismatch():
    with pytest.raises(SprueValueError) as info:
        line = next_line()
        jnp.where(np.ones(2, bool), np.ones(3), 1.0)
    check(info, "sprue.numpy.where", "bool[2], f64[3] and f64[]", line=line)


@pytest.mark.parametrize("fn", [jnp.sum, jnp.max, jnp.mean, jnp.argmax, jnp.cumsum, jnp.sort, jnp.squeeze])
def test_axis_out_of_bounds(fn):
    with pytest.raises(SprueValueError) as info:
        line = next_line()
        fn(np.ones((2, 3)), axis=2)
    check(info, f"sprue.numpy.{fn.__name__}", "axis 2 is out of bounds", "f64[2,3]", line=line)


def test_repeated_axis():
    with pytest.raises(SprueValueError) as info:
        jnp.sum(np.ones((2, 3)), axis=(0, -2))
    check(info, "sprue.numpy.sum", "repeated axis")


@pytest.mark.parametrize("bad,what", [(np.ones(3, np.clongdouble), "complex256"), (np.array(["a", "b"]), "<U1"),
                                      (b"bytes", "bytes"), (None, "NoneType"), ({"a": 1}, "dict"),
                                      ("text", "str")])
def test_unsupported_operands(bad, what):
    with pytest.raises(SprueTypeError) as info:
        line = next_line()
        jnp.sin(bad)
    check(info, "sprue.numpy.sin", what, line=line)


def test_unsupported_operand_traced():
    with pytest.raises(SprueTypeError) as info:
        line = next_line()
        make_jaxpr(lambda x: x + np.ones(3, np.longdouble))(np.ones(3, f32))
    check(info, "sprue.numpy.add", "float128", line=line)


@pytest.mark.parametrize("fn", [jnp.zeros, jnp.ones, jnp.empty])
def test_unsupported_dtype_argument(fn):
    with pytest.raises(SprueTypeError) as info:
        fn(3, dtype=np.clongdouble)
    check(info, f"sprue.numpy.{fn.__name__}", "complex256", "not supported")


def test_numpy_type_errors_are_reported():
    with pytest.raises(SprueTypeError) as info:
        line = next_line()
        jnp.negative(np.array([True, False]))
    check(info, "sprue.numpy.negative", "bool[2]", "boolean negative", line=line)
    with pytest.raises(SprueTypeError) as info:
        make_jaxpr(lambda x: x & 1)(np.ones(3, f32))
    check(info, "sprue.numpy.bitwise_and", "f32[3]")


def test_integer_negative_power():
    with pytest.raises(SprueValueError) as info:
        jnp.power(np.arange(3), -2)
    check(info, "sprue.numpy.power", "negative integer powers", "i64[3]")


def test_reshape_size():
    with pytest.raises(SprueValueError) as info:
        line = next_line()
        make_jaxpr(lambda x: x.reshape(4, 2))(np.ones((2, 3), f32))
    check(info, "sprue.numpy.reshape", "cannot reshape f32[2,3]", "(4, 2)", line=line)
    with pytest.raises(SprueValueError) as info:
        jnp.reshape(np.ones(6), (-1, -1))
    check(info, "sprue.numpy.reshape", "invalid new shape")


def test_products():
    with pytest.raises(SprueValueError) as info:
        line = next_line()
        make_jaxpr(lambda a, b: a @ b)(np.ones((2, 3), f32), np.ones((4, 2), f32))
    check(info, "sprue.numpy.matmul", "f32[2,3] and f32[4,2]", line=line)
    with pytest.raises(SprueValueError) as info:
        jnp.dot(np.ones((2, 3)), np.ones(4))
    check(info, "sprue.numpy.dot", "f64[2,3] and f64[4]", "not aligned")
    with pytest.raises(SprueValueError) as info:
        jnp.matmul(np.ones((2, 2, 3)), np.ones((3, 3, 4)))
    check(info, "sprue.numpy.matmul", "batch dimensions")
    with pytest.raises(SprueValueError) as info:
        jnp.matmul(np.float64(2.0), np.ones(3))
    check(info, "sprue.numpy.matmul", "rank >= 1")


@pytest.mark.parametrize("spec,shapes,part", [
    ("ij,jk->ik", [(2, 3), (4, 5)], "sizes 3 and 4"), ("ij->ik", [(2, 3)], "'k' does not appear"),
    ("ij,jk", [(2, 3)], "2 subscripts for 1 operands"), ("ijk->i", [(2, 3)], "3 labels for an operand of rank 2"),
    ("i1->i", [(2, 2)], "invalid subscript"), ("...i->i", [(2, 3)], "no '...' ellipsis"),
    ("ij->ii", [(2, 2)], "repeats a label")])
def test_einsum_errors(spec, shapes, part):
    with pytest.raises(SprueValueError) as info:
        jnp.einsum(spec, *[np.ones(s) for s in shapes])
    check(info, "sprue.numpy.einsum", part)


def test_shape_errors():
    with pytest.raises(SprueValueError) as info:
        jnp.concatenate([np.ones((2, 3)), np.ones((3, 2))])
    check(info, "sprue.numpy.concatenate", "f64[2,3] and f64[3,2]")
    with pytest.raises(SprueValueError) as info:
        jnp.stack([np.ones(2), np.ones(3)])
    check(info, "sprue.numpy.stack", "same shape", "f64[2] and f64[3]")
    with pytest.raises(SprueValueError) as info:
        jnp.broadcast_to(np.ones((2, 3)), (3, 3))
    check(info, "sprue.numpy.broadcast_to", "cannot broadcast f64[2,3] to shape (3, 3)")
    with pytest.raises(SprueValueError) as info:
        jnp.squeeze(np.ones((2, 3)), axis=0)
    check(info, "sprue.numpy.squeeze", "size not equal to one")
    with pytest.raises(SprueValueError) as info:
        jnp.transpose(np.ones((2, 3)), (0, 0))
    check(info, "sprue.numpy.transpose", "not a permutation")
    with pytest.raises(SprueValueError) as info:
        jnp.concatenate([np.float64(1), np.float64(2)])
    check(info, "zero-dimensional")


def test_reduction_errors():
    with pytest.raises(SprueValueError) as info:
        jnp.max(np.ones((0, 3)), axis=0)
    check(info, "sprue.numpy.max", "zero-size", "f64[0,3]", "no identity")
    with pytest.raises(SprueValueError) as info:
        jnp.argmin(np.ones(0))
    check(info, "sprue.numpy.argmin", "empty sequence")
    with pytest.raises(SprueValueError) as info:
        jnp.min(np.ones(3), where=np.ones(3, bool))
    check(info, "sprue.numpy.min", "initial")
    with pytest.raises(SprueTypeError) as info:
        jnp.sum(np.ones(3), out=np.ones(()))
    check(info, "out= is not supported")


def test_static_arguments_must_be_static():
    # traced integer scalars are sizes (dynamic shapes: tests/frontend/numpy/test_dynamic_numpy*.py); axes,
    # steps and non-integer sizes must still be static
    with pytest.raises(SprueTypeError) as info:
        line = next_line()
        make_jaxpr(lambda n: jnp.arange(0, 10, n))(np.int64(3))
    check(info, "sprue.numpy.arange", "step must be static", line=line)
    with pytest.raises(SprueTypeError) as info:
        make_jaxpr(lambda x: jnp.sum(x, axis=x.astype(int)[0]))(np.ones(3))
    check(info, "sprue.numpy.sum", "axis must be a static int")
    with pytest.raises(SprueTypeError) as info:
        make_jaxpr(lambda x: jnp.zeros(x[0]))(np.ones(3))
    check(info, "sprue.numpy.zeros", "shape must be an integer scalar", "f64[]")


def test_where_one_argument():
    with pytest.raises(SprueTypeError) as info:
        jnp.where(np.ones(3, bool), 1.0)
    check(info, "sprue.numpy.where", "either both or neither of x and y must be given")
    cond = np.array([True, False, True])
    (got,) = jnp.where(cond)      # the one-argument form is nonzero
    np.testing.assert_array_equal(got, np.where(cond)[0])


def test_traced_bool_mask():
    # a traced mask selects a number of elements known only at run time: a `filter` equation
    assert "filter[" in str(make_jaxpr(lambda x: x[x > 0])(np.ones(3, f32)))
    with pytest.raises(ConcretizationError):
        make_jaxpr(lambda x: x.at[x > 0].set(0.0))(np.ones(3, f32))


def test_index_errors():
    with pytest.raises(IndexError) as info:
        line = next_line()
        make_jaxpr(lambda x: x[3])(np.ones(3, f32))
    check(info, "index 3 is out of bounds for axis 0 with size 3", line=line)
    assert isinstance(info.value, SprueError)
    with pytest.raises(IndexError) as info:
        make_jaxpr(lambda x: x[:, [0, -5]])(np.ones((2, 4), f32))
    check(info, "index -5 is out of bounds for axis 1 with size 4")
    with pytest.raises(IndexError) as info:
        make_jaxpr(lambda x: x[0, 0, 0])(np.ones((2, 4), f32))
    check(info, "too many indices", "2-dimensional, but 3 were indexed")
    with pytest.raises(IndexError) as info:
        make_jaxpr(lambda x: x[1.5])(np.ones(3, f32))
    check(info, "only integers, slices")
    with pytest.raises(IndexError) as info:
        make_jaxpr(lambda x: x[np.array([True, False])])(np.ones(3, f32))
    check(info, "boolean index did not match")
    with pytest.raises(IndexError) as info:
        make_jaxpr(lambda x: x[[0, 1], [0, 1, 2]])(np.ones((3, 3), f32))
    check(info, "could not be broadcast together")
    with pytest.raises(IndexError) as info:
        make_jaxpr(lambda x: x.at[5].set(1.0))(np.ones(3, f32))
    check(info, "index 5 is out of bounds")
    with pytest.raises(IndexError) as info:
        make_jaxpr(lambda x: x[..., ...])(np.ones(3, f32))
    check(info, "single ellipsis")


def test_setitem_on_tracer():
    def f(x):
        x[0] = 1.0
        return x
    with pytest.raises(SprueTypeError) as info:
        make_jaxpr(f)(np.ones(3, f32))
    check(info, "immutable", "x.at[idx].set(y)")


def test_update_value_shape():
    with pytest.raises(SprueValueError) as info:
        make_jaxpr(lambda x: x.at[0].set(np.ones(4, f32)))(np.ones((3, 2), f32))
    check(info, "at[...].set", "f32[4]", "(2,)")


def test_python_int_overflow():
    with pytest.raises(SprueValueError) as info:
        jnp.add(np.ones(3, np.int32), 2**40)
    check(info, "out of bounds for int32")
    with pytest.raises(SprueValueError) as info:
        jnp.add(np.ones(3), 2**70)
    check(info, "does not fit in int64")


def test_errors_are_sprue_errors():
    for exc in (SprueTypeError, SprueValueError, ConcretizationError, UnsupportedError):
        assert issubclass(exc, SprueError)
