"""lowering/deferred_scaling.py: `(e / s[:, None]) @ v` computed as `(e @ v) / s[:, None]`,
checked on the IR the pipeline keeps (the division runs over the product's result, not over e)
and on results against numpy, and left alone where the factor would not commute."""
import re

import numpy as np
import pytest

import sprue
import sprue.numpy as snp


def _softmax_product(s, v):
    e = snp.exp(s - snp.max(s, axis=-1, keepdims=True))
    return (e / snp.sum(e, axis=-1, keepdims=True)) @ v


def _softmax_product_ref(s, v):
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("batch", [(), (3,)])
def test_softmax_is_normalized_after_its_product(batch, tmp_path):
    rng = np.random.default_rng(0)
    s, v = rng.standard_normal((*batch, 40, 56)), rng.standard_normal((*batch, 56, 8))
    got = sprue.qjit(_softmax_product, keep_intermediate=str(tmp_path))(s, v)
    np.testing.assert_allclose(got, _softmax_product_ref(s, v), rtol=1e-12, atol=1e-14)
    text = next(tmp_path.glob("*02_linalg.mlir")).read_text()
    divides = [line for line in text.splitlines() if "arith.divf %in, %in" in line]
    assert len(divides) == 1, text
    # the division's generic writes the product's shape (..., 40, 8), not the scores' (..., 40, 56)
    generic = text[:text.index(divides[0])].rsplit("linalg.generic", 1)[1]
    out_type = re.search(r"outs\(%[\w#]+ : (tensor<[^>]*>)\)", generic).group(1)
    assert out_type == f"tensor<{'x'.join(map(str, (*batch, 40, 8)))}xf64>", generic


def test_a_product_added_to_another_array_keeps_its_scaled_operand():
    """`(e / s) @ v + y`: the product accumulates into y (fusion.accumulate_sums), which the factor
    must not scale; the division stays before the product and the result is numpy's."""
    rng = np.random.default_rng(1)
    e, s, v, y = rng.random((30, 20)), rng.random((30, 1)) + 0.5, rng.random((20, 12)), rng.random((30, 12))
    got = sprue.qjit(lambda e, s, v, y: (e / s) @ v + y)(e, s, v, y)
    np.testing.assert_allclose(got, (e / s) @ v + y, rtol=1e-12)


def test_a_factor_along_the_contraction_is_not_moved():
    """`(e / c[None, :]) @ v`: the factor varies along the summed axis; it does not commute."""
    rng = np.random.default_rng(2)
    e, c, v = rng.random((30, 20)), rng.random(20) + 0.5, rng.random((20, 12))
    got = sprue.qjit(lambda e, c, v: (e / c[None, :]) @ v)(e, c, v)
    np.testing.assert_allclose(got, (e / c[None, :]) @ v, rtol=1e-12)


def test_run_time_rows_keep_their_sizes():
    """A run-time row count: the scaled result's empty tensor takes its sizes from the product's."""
    rng = np.random.default_rng(3)
    f = sprue.qjit(_softmax_product, abstracted_axes=({0: "n"}, None))
    v = rng.standard_normal((24, 8))
    for n in (5, 17):
        s = rng.standard_normal((n, 24))
        np.testing.assert_allclose(f(s, v), _softmax_product_ref(s, v), rtol=1e-12, atol=1e-14)
