"""sprue.nn against numpy formulas, eagerly and compiled, with JAX's derivatives at kinks and
gradients against central differences elsewhere; dot_product_attention against an explicit numpy
attention."""
from __future__ import annotations

import math

import numpy as np
import pytest

import sprue
import sprue.nn as nn
import sprue.numpy as snp

X = np.array([-7.0, -3.0, -1.0, -0.4, -1e-3, 0.25, 0.9, 2.0, 5.5, 8.0])


def sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def softplus(x):
    return np.logaddexp(x, 0.0)


ERFC = np.vectorize(math.erfc)
FORMULAS = {
    "relu": lambda x: np.maximum(x, 0), "relu6": lambda x: np.clip(x, 0, 6),
    "leaky_relu": lambda x: np.where(x >= 0, x, 0.01 * x), "hard_tanh": lambda x: np.clip(x, -1, 1),
    "hard_sigmoid": lambda x: np.clip(x + 3, 0, 6) / 6, "hard_silu": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "hard_swish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "sparse_plus": lambda x: np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4)),
    "sparse_sigmoid": lambda x: np.clip(x + 1, 0, 2) / 2, "identity": lambda x: x,
    "sigmoid": sig, "softplus": softplus, "log_sigmoid": lambda x: -softplus(-x),
    "soft_sign": lambda x: x / (np.abs(x) + 1), "silu": lambda x: x * sig(x), "swish": lambda x: x * sig(x),
    "tanh": np.tanh, "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    "celu": lambda x: np.maximum(x, 0) + np.expm1(np.minimum(x, 0)),
    "selu": lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(np.minimum(x, 0))),
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
    "mish": lambda x: x * np.tanh(softplus(x)), "squareplus": lambda x: (x + np.sqrt(x * x + 4)) / 2,
    "log1mexp": lambda x: np.log(-np.expm1(-x)),
}


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_activation(name):
    fn = getattr(nn, name)
    x = np.abs(X) + 1e-3 if name == "log1mexp" else X
    eager = np.asarray(fn(x))
    np.testing.assert_allclose(eager, FORMULAS[name](x), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(sprue.qjit(lambda t: fn(t))(x), eager, rtol=1e-13, atol=1e-15)
    kinks = np.array([-3.0, -1.0, 0.0, 1.0, 3.0, 6.0])
    smooth = x[np.min(np.abs(x[:, None] - kinks), axis=1) > 1e-2]
    grad = np.asarray(sprue.grad(lambda t: snp.sum(fn(t)))(smooth))
    h = 1e-6
    np.testing.assert_allclose(grad, (FORMULAS[name](smooth + h) - FORMULAS[name](smooth - h)) / (2 * h),
                               rtol=1e-6, atol=1e-8)


def test_derivatives_at_kinks_are_jaxs():
    kinks = np.array([0.0, 6.0, -3.0])
    assert np.asarray(sprue.grad(lambda t: snp.sum(nn.relu(t)))(kinks)).tolist() == [0.0, 1.0, 0.0]
    assert np.asarray(sprue.grad(lambda t: snp.sum(nn.relu6(t)))(kinks)).tolist() == [0.0, 0.0, 0.0]
    assert sprue.grad(nn.leaky_relu)(0.0) == 1.0
    assert nn.relu(np.array([-1, 2])).dtype == np.int64          # integers stay integers


def test_gelu_exact_and_glu():
    np.testing.assert_allclose(nn.gelu(X, approximate=False), X * ERFC(-X / math.sqrt(2)) / 2, rtol=1e-13)
    m = np.arange(12.0).reshape(3, 4) / 5
    np.testing.assert_allclose(sprue.qjit(lambda t: nn.glu(t))(m), m[:, :2] * sig(m[:, 2:]), rtol=1e-13)
    np.testing.assert_allclose(nn.glu(m.T, axis=0), m.T[:2] * sig(m.T[2:]), rtol=1e-13)
    with pytest.raises(sprue.SprueValueError, match="glu: axis -1 must have a static, even size, got 3"):
        nn.glu(np.ones((2, 3)))


def test_softmax_family():
    rng = np.random.default_rng(0)
    m = rng.standard_normal((3, 5))
    e = np.exp(m - m.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(sprue.qjit(lambda t: nn.softmax(t))(m), e / e.sum(axis=-1, keepdims=True), rtol=1e-13)
    np.testing.assert_allclose(nn.log_softmax(m), np.log(e / e.sum(axis=-1, keepdims=True)), rtol=1e-13)
    where = rng.uniform(size=(3, 5)) > 0.3
    got = nn.softmax(m, axis=0, where=where)
    w = np.where(where, np.exp(m), 0.0)
    np.testing.assert_allclose(got, w / w.sum(axis=0, keepdims=True), rtol=1e-13)
    np.testing.assert_allclose(nn.logmeanexp(m, axis=1), np.log(np.exp(m).mean(axis=1)), rtol=1e-13)
    np.testing.assert_allclose(nn.logsumexp(m), np.log(np.exp(m).sum()), rtol=1e-13)
    grad = np.asarray(sprue.grad(lambda t: nn.log_softmax(t)[0, 1])(m))
    p = e / e.sum(axis=-1, keepdims=True)
    want = np.zeros_like(m)
    want[0] = -p[0]
    want[0, 1] += 1.0
    np.testing.assert_allclose(grad, want, rtol=1e-12, atol=1e-15)
    std = nn.standardize(m)
    np.testing.assert_allclose(std, (m - m.mean(-1, keepdims=True)) / np.sqrt(m.var(-1, keepdims=True) + 1e-5),
                               rtol=1e-9)


def test_one_hot():
    labels = np.array([[0, 2], [5, -1]])
    got = sprue.qjit(lambda t: nn.one_hot(t, 3))(labels)
    np.testing.assert_array_equal(got, (labels[..., None] == np.arange(3)).astype(np.float64))
    assert nn.one_hot(labels, 4, dtype=np.int32, axis=0).shape == (4, 2, 2)
    assert nn.one_hot(labels, 4, dtype=np.int32, axis=0).dtype == np.int32
    np.testing.assert_array_equal(nn.one_hot(labels, 4, axis=0)[:, 1, 0], [0, 0, 0, 0])   # 5 is out of range
    with pytest.raises(sprue.SprueValueError, match="one_hot: axis 3 is out of bounds for a result of rank 3"):
        nn.one_hot(labels, 3, axis=3)


def _attention_reference(q, k, v, keep=None, bias=None, scale=None):
    heads, kv_heads = q.shape[2], k.shape[2]
    k, v = np.repeat(k, heads // kv_heads, axis=2), np.repeat(v, heads // kv_heads, axis=2)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    logits = np.einsum("btnh,bsnh->bnts", q, k) * scale + (0 if bias is None else bias)
    if keep is not None:
        logits = np.where(keep, logits, -0.7 * np.finfo(np.float32).max)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bnts,bsnh->btnh", p, v)


def test_dot_product_attention():
    r = np.random.default_rng(2)
    q, k, v = r.standard_normal((2, 5, 4, 8)), r.standard_normal((2, 6, 2, 8)), r.standard_normal((2, 6, 2, 8))
    bias, mask = r.standard_normal((2, 4, 5, 6)), r.uniform(size=(2, 4, 5, 6)) > 0.2
    att = sprue.qjit(lambda *a: nn.dot_product_attention(*a))
    np.testing.assert_allclose(att(q, k, v, bias, mask), _attention_reference(q, k, v, mask, bias), rtol=1e-12)
    causal = np.tril(np.ones((5, 5), bool))
    np.testing.assert_allclose(nn.dot_product_attention(q, k[:, :5], v[:, :5], is_causal=True, scale=0.3),
                               _attention_reference(q, k[:, :5], v[:, :5], causal, scale=0.3), rtol=1e-12)
    qlen, kvlen = np.array([3, 5]), np.array([6, 2])
    keep = (np.arange(5)[None, :, None] < qlen[:, None, None]) & (np.arange(6)[None, None, :] < kvlen[:, None, None])
    want = _attention_reference(q, k, v, keep[:, None]) * (np.arange(5)[None, :] < qlen[:, None])[:, :, None, None]
    got = nn.dot_product_attention(q, k, v, query_seq_lengths=qlen, key_value_seq_lengths=kvlen)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    window = (np.arange(5)[:, None] <= np.arange(6)[None, :] + 1) & (np.arange(5)[:, None] >= np.arange(6)[None, :] - 2)
    np.testing.assert_allclose(nn.dot_product_attention(q, k, v, local_window_size=(1, 2)),
                               _attention_reference(q, k, v, window), rtol=1e-12)
    np.testing.assert_allclose(nn.dot_product_attention(q[0], k[0], v[0]),
                               _attention_reference(q[:1], k[:1], v[:1])[0], rtol=1e-12)
    out, lse = nn.dot_product_attention(q, k, v, return_residual=True)
    logits = np.einsum("btnh,bsnh->bnts", q, np.repeat(k, 2, axis=2)) / math.sqrt(8)
    np.testing.assert_allclose(lse, np.log(np.exp(logits).sum(-1)).transpose(0, 2, 1), rtol=1e-12)
    grad = sprue.grad(lambda t: snp.sum(nn.dot_product_attention(t, k, v) ** 2))(q)
    h, e = 1e-6, np.zeros_like(q)
    e[1, 2, 3, 4] = h
    fd = (np.sum(_attention_reference(q + e, k, v) ** 2) - np.sum(_attention_reference(q - e, k, v) ** 2)) / (2 * h)
    assert np.asarray(grad)[1, 2, 3, 4] == pytest.approx(fd, rel=1e-6)


def test_dot_product_attention_errors():
    q = np.ones((2, 5, 3, 8))
    with pytest.raises(sprue.UnsupportedError, match="implementation='cudnn' is not available in sprue"):
        nn.dot_product_attention(q, q, q, implementation="cudnn")
    with pytest.raises(sprue.SprueValueError, match="the query's 3 heads must be a multiple of the key's 2"):
        nn.dot_product_attention(q, np.ones((2, 5, 2, 8)), np.ones((2, 5, 2, 8)))
    with pytest.raises(sprue.SprueValueError, match=r"must all be of rank 3 \(T, N, H\) or 4 \(B, T, N, H\), got"
                                                    r" ranks 4, 3, 4"):
        nn.dot_product_attention(q, q[0], q)
