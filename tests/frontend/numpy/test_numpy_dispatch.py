"""numpy's own functions on traced arrays (issue 23): ufuncs (and their reduce/accumulate), array
functions and methods all run sprue.numpy's function of the same name inside qjit, so the compiled
result is numpy's on the same values; a numpy function sprue.numpy lacks, or `out=`, is one error
naming it, at the user's line."""
import numpy as np
import pytest

import sprue

x = np.array([[0.5, -1.25, 2.0], [3.0, 0.25, -0.75]])
w = np.array([[1.0, 0.5], [-2.0, 0.25], [0.75, 3.0]])

CASES = {
    "ufunc": lambda a: np.exp(a) + np.sin(a) * np.maximum(a, 0.0),
    "ufunc_divide_power": lambda a: np.true_divide(a, 3.0) + np.power(a, 2),
    "ufunc_with_numpy_left": lambda a: np.ones(3) + a,
    "reduce": lambda a: np.add.reduce(a) + np.maximum.reduce(a, axis=1).sum(),
    "accumulate": lambda a: np.multiply.accumulate(a, axis=1),
    "array_function_dot": lambda a: np.dot(a, w),
    "array_function_sum": lambda a: np.sum(a, axis=0) + np.mean(a) + np.std(a),
    "array_function_shape_ops": lambda a: np.concatenate([np.transpose(a), np.flip(a.T, 0)], axis=1),
    "array_function_where": lambda a: np.where(a > 0, a, np.zeros_like(a)),
    "linalg": lambda a: np.linalg.norm(a) + np.linalg.norm(a, axis=1).sum(),
    "einsum": lambda a: np.einsum("ij,jk->ik", a, w),
    "methods": lambda a: a.sum(axis=1) + a.max() - a.mean(axis=1) + a.T.reshape(2, 3).prod(axis=0)[:2],
}


@pytest.mark.parametrize("name", list(CASES))
def test_numpy_function_inside_qjit_gives_numpys_result(name):
    f = CASES[name]
    np.testing.assert_allclose(sprue.qjit(f)(x), f(x), rtol=1e-13)


@pytest.mark.parametrize("f,message", [
    (lambda a: np.roots(a[0]), "numpy.roots on a traced array: sprue.numpy has no roots yet"),
    (lambda a: np.exp(a, out=a), "numpy.exp(..., out=...) on a traced array: traced arrays are immutable"),
    (lambda a: np.add.outer(a, a), "numpy.add.outer on a traced array: sprue.numpy has no equivalent"),
    (lambda a: np.isnat(a), "numpy.isnat on a traced array"),
])
def test_missing_numpy_functions_are_one_error_at_the_users_line(f, message):
    with pytest.raises(sprue.SprueTypeError) as info:
        sprue.make_jaxpr(f)(x)
    assert message in str(info.value)
    assert "test_numpy_dispatch.py" in str(info.value)


@pytest.mark.parametrize("module,name,message", [
    ("sprue.numpy", "lnalg", "module 'sprue.numpy' has no attribute 'lnalg'. Did you mean: 'linalg'?"),
    ("sprue.numpy", "roots", "(numpy.roots is not in sprue.numpy yet: write it with sprue.numpy's or"
                             " sprue.lax's functions, or compute it outside qjit)"),
    ("sprue", "jitt", "module 'sprue' has no attribute 'jitt'. Did you mean: 'qjit'?"),
    ("sprue.lax", "fori", "'fori_loop'"),
])
def test_missing_names_suggest_public_ones(module, name, message):
    import importlib
    with pytest.raises(AttributeError) as info:
        getattr(importlib.import_module(module), name)
    assert message in str(info.value)
    assert "'_" not in str(info.value)
