"""gamma, loggamma, beta and dirichlet: JAX's samplers (jax._src.random.core: _gamma_one,
_gamma_impl, _beta, _dirichlet), Marsaglia and Tsang's rejection method ("A simple method for
generating gamma variables", 2000) with one key per element.

JAX maps _gamma_one over the elements with vmap, which turns its while loops into loops that run
while any element is still rejecting, each trip updating only those elements (a batched
predicate). That is written out here over the flat elements: the same trips, the same keys, so
the same numbers (within the ulps of log and pow). Sizes must be static, as in JAX.
"""
from __future__ import annotations

import math

import numpy as np

import sprue.numpy as jnp
from sprue import lax
from sprue.random._keys import check_key, split_keys, value_error
from sprue.random._samplers import _as, _check_broadcast, _float_dtype, _normal, _shape, _uniform
from sprue.trace.tracing import Tracer


def _split_each(keys, num: int):
    """Each key of keys[n, 2] split into `num`: [num][n, 2] (JAX's _split under vmap)."""
    parts = split_keys(keys, (num,))            # [n, num, 2]
    return [parts[:, i] for i in range(num)]


def _while(cond, body, state):
    """JAX's while_loop under vmap with a batched predicate: trips while any element's predicate
    holds, each trip keeping the new state only where it held."""
    def step(s):
        active = cond(s)
        new = body(s)
        return tuple(jnp.where(active[:, None] if x.ndim == 2 else active, y, x) for x, y in zip(s, new))
    return lax.while_loop(lambda s: jnp.any(cond(s)), step, state)


def _gamma_flat(keys, alpha, log_space: bool):
    """_gamma_one over the flat elements: keys[n, 2], alpha[n]."""
    dtype = np.dtype(alpha.dtype)
    c_ = lambda v: np.array(v, dtype)[()]   # noqa: E731  (a constant of alpha's dtype)
    n = alpha.shape[0]
    zeros, ones = jnp.zeros(n, dtype), jnp.ones(n, dtype)
    boost_mask = alpha >= c_(1)
    alpha_orig = alpha
    alpha = jnp.where(boost_mask, alpha, alpha + c_(1))
    d = alpha - c_(1 / 3)
    c = c_(1 / 3) / jnp.sqrt(d)

    def cond_fn(s):
        _, x, v, u = s
        return (u >= c_(1) - c_(0.0331) * (x * x)) & (jnp.log(u) >= x * c_(0.5) + d * (c_(1) - v + jnp.log(v)))

    def next_xv(s):
        key, _, _ = s
        key, subkey = _split_each(key, 2)
        x = _normal(subkey, (), dtype)
        return key, x, c_(1) + x * c

    def body_fn(s):
        key = s[0]
        key, x_key, u_key = _split_each(key, 3)
        _, x, v = _while(lambda t: t[2] <= c_(0), next_xv, (x_key, zeros, -ones))
        return key, x * x, v * v * v, _uniform(u_key, (), dtype, 0.0, 1.0)

    key, subkey = _split_each(keys, 2)
    _, _, v, _ = _while(cond_fn, body_fn, (key, zeros, ones, ones * c_(2)))
    if log_space:
        log_samples = lax.log1p(lax.neg(_uniform(subkey, (), dtype, 0.0, 1.0)))   # -exponential
        log_boost = jnp.where(boost_mask | (log_samples == c_(0)), c_(0), log_samples * (c_(1) / alpha_orig))
        return jnp.log(d) + jnp.log(v) + log_boost
    samples = c_(1) - _uniform(subkey, (), dtype, 0.0, 1.0)
    boost = jnp.where(boost_mask, c_(1), lax.pow(samples, c_(1) / alpha_orig))
    return d * v * boost


def _gamma(fname, key, a, shape, dtype, log_space):
    key = check_key(fname, key)
    dtype = _float_dtype(fname, dtype)
    a = a if isinstance(a, Tracer) else np.asarray(a)
    shape = tuple(a.shape) if shape is None else _shape(fname, shape)
    _check_broadcast(fname, shape, a)
    count = math.prod(shape)
    if not isinstance(count, int):
        raise value_error(fname, "sprue samples gammas of static shapes only (as JAX)")
    a = jnp.broadcast_to(_as(a, dtype), shape)
    if count == 0:
        return jnp.zeros(shape, dtype)
    keys = split_keys(key, (count,))
    return jnp.reshape(_gamma_flat(keys, jnp.reshape(a, (count,)), log_space), shape)


def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) floats (JAX's gamma: Marsaglia-Tsang with one key per element)."""
    return _gamma("gamma", key, a, shape, dtype, log_space=False)


def loggamma(key, a, shape=None, dtype=None):
    """log of Gamma(a, 1) floats, computed in log space (accurate for small a)."""
    return _gamma("loggamma", key, a, shape, dtype, log_space=True)


def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) floats: ga / (ga + gb) of two log-space gammas, scaled by their maximum."""
    key = check_key("beta", key)
    dtype = _float_dtype("beta", dtype)
    a = a if isinstance(a, Tracer) else np.asarray(a)
    b = b if isinstance(b, Tracer) else np.asarray(b)
    shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape)) if shape is None else _shape("beta", shape)
    _check_broadcast("beta", shape, a, b)
    key_a, key_b = (split_keys(key, (2,))[i] for i in range(2))
    log_a = _gamma("beta", key_a, jnp.broadcast_to(_as(a, dtype), shape), shape, dtype, True)
    log_b = _gamma("beta", key_b, jnp.broadcast_to(_as(b, dtype), shape), shape, dtype, True)
    log_max = jnp.maximum(log_a, log_b)
    ga, gb = jnp.exp(log_a - log_max), jnp.exp(log_b - log_max)
    return ga / (ga + gb)


def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet(alpha) vectors along alpha's last axis: the softmax of log-space gammas."""
    key = check_key("dirichlet", key)
    dtype = _float_dtype("dirichlet", dtype)
    alpha = alpha if isinstance(alpha, Tracer) else np.asarray(alpha)
    if alpha.ndim < 1:
        raise value_error("dirichlet", f"alpha must have at least one axis, got alpha.ndim == {alpha.ndim}")
    shape = tuple(alpha.shape[:-1]) if shape is None else _shape("dirichlet", shape)
    _check_broadcast("dirichlet", shape, jnp.zeros(tuple(alpha.shape[:-1])))
    full = (*shape, alpha.shape[-1])
    logs = _gamma("dirichlet", key, jnp.broadcast_to(_as(alpha, dtype), full), full, dtype, True)
    shifted = logs - jnp.max(logs, axis=-1, keepdims=True)   # jax.nn.softmax
    e = jnp.exp(shifted)
    return e / jnp.sum(e, axis=-1, keepdims=True)


__all__ = ["beta", "dirichlet", "gamma", "loggamma"]
