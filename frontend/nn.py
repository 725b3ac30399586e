"""sprue.nn: jax.nn's activation functions, softmax family, one_hot, standardize and
dot_product_attention, over sprue.numpy and sprue.scipy.special. Traced and eager alike; the
derivatives at kinks are JAX's (relu'(0) = 0, relu6' is 0 at 0 and 6), through custom JVPs where
the plain composition would differ."""
from __future__ import annotations

import math

import numpy as np

import sprue.numpy as jnp
from sprue import lax
from sprue.base.errors import UnsupportedError
from sprue.lax.custom_derivatives import custom_jvp
from sprue.numpy._avals import value_error
from sprue.numpy._promote import check_dtype, operand, static_int
from sprue.scipy.special import float_operands, logsumexp

__all__ = ["celu", "dot_product_attention", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu", "hard_swish",
           "hard_tanh", "identity", "leaky_relu", "log1mexp", "log_sigmoid", "log_softmax", "logmeanexp",
           "logsumexp", "mish", "one_hot", "relu", "relu6", "selu", "sigmoid", "silu", "soft_sign", "softmax",
           "softplus", "sparse_plus", "sparse_sigmoid", "squareplus", "standardize", "swish", "tanh"]


# -- piecewise-linear units, with JAX's derivatives at their kinks ------------------------------
@custom_jvp
def _relu(x):
    return jnp.maximum(x, 0)


_relu.defjvps(lambda g, ans, x: jnp.where(x > 0, g, jnp.zeros_like(g)))


def relu(x):
    """max(x, 0); its derivative at 0 is 0 (jax.nn.relu's)."""
    return _relu(operand("relu", x))


@custom_jvp
def _relu6(x):
    return jnp.minimum(jnp.maximum(x, 0), 6.0)


_relu6.defjvps(lambda g, ans, x: jnp.where((x > 0) & (x < 6), g, jnp.zeros_like(g)))


def relu6(x):
    return _relu6(operand("relu6", x))


def leaky_relu(x, negative_slope=0.01):
    x = operand("leaky_relu", x)
    return jnp.where(x >= 0, x, negative_slope * x)


def hard_tanh(x):
    x = operand("hard_tanh", x)
    return jnp.where(x > 1, 1, jnp.where(x < -1, -1, x))


def hard_sigmoid(x):
    return relu6(jnp.add(operand("hard_sigmoid", x), 3.0)) / 6.0


def hard_silu(x):
    x = operand("hard_silu", x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


def sparse_plus(x):
    x = float_operands("sparse_plus", x)
    return jnp.where(x <= -1.0, 0.0, jnp.where(x >= 1.0, x, (x + 1.0) ** 2 / 4.0))


def sparse_sigmoid(x):
    x = float_operands("sparse_sigmoid", x)
    return 0.5 * jnp.clip(x + 1.0, 0.0, 2.0)


def identity(x):
    return operand("identity", x)


# -- smooth activations --------------------------------------------------------------------------
def sigmoid(x):
    return lax.logistic(float_operands("sigmoid", x))


def softplus(x):
    return jnp.logaddexp(float_operands("softplus", x), 0.0)


def log_sigmoid(x):
    return -softplus(-float_operands("log_sigmoid", x))


def soft_sign(x):
    x = float_operands("soft_sign", x)
    return x / (jnp.abs(x) + 1.0)


def silu(x):
    x = float_operands("silu", x)
    return x * lax.logistic(x)


swish = silu


def tanh(x):
    return jnp.tanh(operand("tanh", x))


def elu(x, alpha=1.0):
    x = float_operands("elu", x)
    safe_x = jnp.where(x > 0, 0.0, x)
    return jnp.where(x > 0, x, alpha * jnp.expm1(safe_x))


def celu(x, alpha=1.0):
    x = float_operands("celu", x)
    return jnp.maximum(x, 0.0) + alpha * jnp.expm1(jnp.minimum(x, 0.0) / alpha)


# SELU's constants (Klambauer et al., "Self-Normalizing Neural Networks")
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x):
    return _SELU_SCALE * elu(x, _SELU_ALPHA)


def gelu(x, approximate=True):
    """x * Phi(x): with `approximate` (jax.nn's default) the tanh form of Hendrycks and Gimpel."""
    x = float_operands("gelu", x)
    if approximate:
        cdf = 0.5 * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
        return x * cdf
    return x * (lax.erfc(-x / math.sqrt(2.0)) / 2.0)


def mish(x):
    x = float_operands("mish", x)
    return x * jnp.tanh(softplus(x))


def squareplus(x, b=4):
    x = float_operands("squareplus", x)
    return (x + jnp.sqrt(x * x + b)) / 2.0


def log1mexp(x):
    """log(1 - exp(-x)) for x >= 0, by expm1 near 0 and log1p beyond log(2) (Maechler's split)."""
    x = float_operands("log1mexp", x)
    return jnp.where(x < math.log(2.0), jnp.log(-jnp.expm1(-x)), jnp.log1p(-jnp.exp(-x)))


def glu(x, axis=-1):
    """The first half of `axis` gated by the sigmoid of the second."""
    x = operand("glu", x)
    size = jnp.shape(x)[axis]
    if not isinstance(size, (int, np.integer)) or size % 2:
        raise value_error("glu", f"axis {axis} must have a static, even size, got {size}")
    first, second = jnp.split(x, 2, axis=axis)
    return first * sigmoid(second)


# -- softmax and its relatives -------------------------------------------------------------------
def softmax(x, axis=-1, where=None):
    """exp(x - max) / sum over `axis`, the maximum without gradient; with `where`, masked entries
    are left out of both and are 0 in the result (jax.nn.softmax's)."""
    x = float_operands("softmax", x)
    x_max = jnp.max(x, axis=axis, keepdims=True, where=where, initial=-jnp.inf)
    unnormalized = jnp.exp(x - lax.stop_gradient(x_max))
    result = unnormalized / jnp.sum(unnormalized, axis=axis, keepdims=True, where=where)
    return result if where is None else jnp.where(where, result, 0.0)


def log_softmax(x, axis=-1, where=None):
    x = float_operands("log_softmax", x)
    x_max = jnp.max(x, axis=axis, keepdims=True, where=where, initial=-jnp.inf)
    shifted = x - lax.stop_gradient(x_max)
    result = shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=axis, keepdims=True, where=where))
    return result if where is None else jnp.where(where, result, -jnp.inf)


def logmeanexp(x, axis=None, where=None, keepdims=False):
    x = float_operands("logmeanexp", x)
    count = jnp.sum(jnp.ones_like(x), axis=axis, keepdims=keepdims, where=where)
    return logsumexp(x, axis=axis, where=where, keepdims=keepdims) - jnp.log(count)


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None):
    """(x - mean) / sqrt(variance + epsilon) over `axis`, the variance as E[x^2] - E[x]^2 (jax.nn's)."""
    x = float_operands("standardize", x)
    if mean is None:
        mean = jnp.mean(x, axis=axis, keepdims=True, where=where)
    if variance is None:
        variance = jnp.mean(jnp.square(x), axis=axis, keepdims=True, where=where) - jnp.square(mean)
    return jnp.subtract(x, mean) * lax.rsqrt(jnp.add(variance, epsilon))


def one_hot(x, num_classes, *, dtype=None, axis=-1):
    """x's integers as indicator vectors of length num_classes along `axis` (all zero for an
    index outside [0, num_classes))."""
    num_classes = static_int("one_hot", num_classes, "num_classes")
    if num_classes < 0:
        raise value_error("one_hot", f"num_classes must be non-negative, got {num_classes}")
    dtype = np.float64 if dtype is None else check_dtype("one_hot", dtype)
    x = jnp.asarray(operand("one_hot", x))
    out_ndim = x.ndim + 1
    axis = static_int("one_hot", axis, "axis")
    if not -out_ndim <= axis < out_ndim:
        raise value_error("one_hot", f"axis {axis} is out of bounds for a result of rank {out_ndim}")
    axis %= out_ndim
    classes_shape = [1] * out_ndim
    classes_shape[axis] = num_classes
    classes = jnp.arange(num_classes).reshape(classes_shape)
    return (jnp.expand_dims(x, axis) == classes).astype(dtype)


# -- attention -----------------------------------------------------------------------------------
def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None, is_causal=False,
                          query_seq_lengths=None, key_value_seq_lengths=None, local_window_size=None,
                          implementation=None, return_residual=False):
    """softmax(Q K^T * scale + bias, masked) V on arrays laid out (batch, length, heads, head_dim)
    or (length, heads, head_dim), as jax.nn.dot_product_attention's "xla" implementation: masked
    logits are -0.7 * float32's max, outputs past a query's length are 0, keys and values may have
    fewer heads than queries (each shared by a group). One difference: JAX computes the softmax
    in float32 whatever the inputs' type; sprue in the inputs' (float64 results differ from JAX's
    by ~1e-7)."""
    if implementation not in (None, "xla"):
        raise UnsupportedError(f"dot_product_attention: implementation={implementation!r} is not available in"
                               f" sprue; its one implementation is JAX's 'xla' (None selects it)")
    q, k, v = (jnp.asarray(operand("dot_product_attention", t)) for t in (query, key, value))
    batched = q.ndim == 4
    if q.ndim not in (3, 4) or k.ndim != q.ndim or v.ndim != q.ndim:
        raise value_error("dot_product_attention", f"query, key and value must all be of rank 3 (T, N, H) or 4"
                                                   f" (B, T, N, H), got ranks {q.ndim}, {k.ndim}, {v.ndim}")
    if not batched:
        q, k, v = q[None], k[None], v[None]
    heads, kv_heads = q.shape[2], k.shape[2]
    if isinstance(heads, int) and isinstance(kv_heads, int):
        if kv_heads == 0 or heads % kv_heads:
            raise value_error("dot_product_attention", f"the query's {heads} heads must be a multiple of the"
                                                       f" key's {kv_heads}")
        if kv_heads != heads:
            k, v = (jnp.repeat(t, heads // kv_heads, axis=2) for t in (k, v))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    logits = jnp.einsum("btnh,bsnh->bnts", q, k) * scale
    if bias is not None:
        logits = logits + (bias if batched else jnp.expand_dims(bias, 0))
    keep = _attention_mask(mask, batched, is_causal, query_seq_lengths, key_value_seq_lengths, local_window_size,
                           q.shape[1], k.shape[1])
    if keep is not None:
        large_negative = -0.7 * float(min(np.finfo(np.dtype(logits.dtype)).max, np.finfo(np.float32).max))
        logits = jnp.where(keep, logits, large_negative)
    probs = softmax(logits, axis=-1).astype(v.dtype)
    out = jnp.einsum("bnts,bsnh->btnh", probs, v)
    if query_seq_lengths is not None:
        lengths = jnp.asarray(operand("dot_product_attention", query_seq_lengths))
        out = out * (jnp.arange(out.shape[1])[None, :] < lengths[:, None])[:, :, None, None].astype(out.dtype)
    if not batched:
        out = out[0]
    if not return_residual:
        return out
    residual = lax.stop_gradient(jnp.swapaxes(logsumexp(logits, axis=-1), 1, 2))   # (b, n, t) -> (b, t, n)
    return out, (residual if batched else residual[0])


def _attention_mask(mask, batched, is_causal, query_seq_lengths, key_value_seq_lengths, local_window_size,
                    t, s):
    """Which logits (b, n, t, s) are kept, from the user's mask, causality, a local window and
    sequence lengths; None when all are."""
    keep = None

    def both(a, b):
        return b if a is None else a & b
    if mask is not None:
        keep = jnp.asarray(operand("dot_product_attention", mask)).astype(bool)
        if not batched:
            keep = jnp.expand_dims(keep, 0)
    query_pos, key_pos = jnp.arange(t)[:, None], jnp.arange(s)[None, :]
    if is_causal:
        keep = both(keep, (query_pos >= key_pos)[None, None])
    if local_window_size is not None:
        left, right = (local_window_size, local_window_size) if isinstance(local_window_size, int) \
            else tuple(local_window_size)
        keep = both(keep, ((query_pos <= key_pos + left) & (query_pos >= key_pos - right))[None, None])
    if query_seq_lengths is not None:
        lengths = jnp.asarray(operand("dot_product_attention", query_seq_lengths))
        keep = both(keep, (jnp.arange(t)[None, :] < lengths[:, None])[:, None, :, None])
    if key_value_seq_lengths is not None:
        lengths = jnp.asarray(operand("dot_product_attention", key_value_seq_lengths))
        keep = both(keep, (jnp.arange(s)[None, :] < lengths[:, None])[:, None, None, :])
    return keep
