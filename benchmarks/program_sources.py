"""The realistic programs of benchmarks/programs.py, each written once against a jax-like namespace.

Every program is `fn(m, *arrays)` where `m` carries `np` (sprue.numpy, jax.numpy, or numpy when
run eagerly), `lax` (sprue.lax or jax.lax), `grad`, `vmap`, and `add_at(x, index, values)` — `x.at[index]
.add(values)` for traced arrays, `numpy.add.at` on a copy for eager numpy arrays (numpy arrays have
no `.at`). `make(scale)` builds the arguments ("full": the benchmark's sizes, "tiny": the smoke
test's), `axes` is the `abstracted_axes` tuple of the dynamic-shape run (one dict or None per
argument), `flops(args)` the floating-point work where a count means something.

Written around what sprue lacks today: no random module (the Monte-Carlo loop hashes a counter
with integer ops, lowbias32 by Chris Wellons), no erf (Black-Scholes takes the tanh form of the
normal CDF, as in GELU's approximation by Hendrycks & Gimpel), no `lax.conv_general_dilated` (the
CNN sums nine shifted einsums).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass
class Program:
    name: str
    title: str
    fn: Callable
    make: Callable
    axes: tuple
    flops: Callable | None = None
    rtol: float = 1e-6


def _rng(seed: int = 0):
    return np.random.default_rng(seed)


def _softmax_last(m, s):
    s = s - m.np.max(s, axis=-1, keepdims=True)
    e = m.np.exp(s)
    return e / m.np.sum(e, axis=-1, keepdims=True)


# -- 1. multi-head attention ---------------------------------------------------------------------
def attention(m, q, k, v):
    scale = 1.0 / math.sqrt(q.shape[-1])
    p = _softmax_last(m, (q @ m.np.swapaxes(k, -1, -2)) * scale)
    return p @ v


def _attention_args(scale):
    b, t, d = (8, 256, 64) if scale == "full" else (2, 12, 8)
    r = _rng(1)
    return tuple(r.standard_normal((b, t, d)) for _ in range(3))


def _attention_flops(q, k, v):
    b, t, d = q.shape
    return 4 * b * t * t * d + 5 * b * t * t


# -- 1b. multi-head attention on (batch, heads, length, dim), written with einsum ---------------
def heads(m, q, k, v):
    s = m.np.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    return m.np.einsum("bhqk,bhkd->bhqd", _softmax_last(m, s), v)


def _heads_args(scale):
    b, h, t, d = (4, 8, 128, 64) if scale == "full" else (2, 3, 10, 8)
    r = _rng(27)
    return tuple(r.standard_normal((b, h, t, d)) for _ in range(3))


def _heads_flops(q, k, v):
    b, h, t, d = q.shape
    return 4 * b * h * t * t * d + 5 * b * h * t * t


# -- 1c. causal attention (an iota mask) and a transformer block -------------------------------------
def causal_attention(m, q, k, v):
    t = q.shape[1]
    i = m.np.arange(t)
    s = m.np.where(i[:, None] >= i[None, :], q @ m.np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]), -1e30)
    return _softmax_last(m, s) @ v


def _causal_args(scale):
    return _attention_args(scale)


def _layer_norm(m, x, g, b):
    mu = m.np.mean(x, axis=-1, keepdims=True)
    return (x - mu) / m.np.sqrt(m.np.mean((x - mu) ** 2, axis=-1, keepdims=True) + 1e-5) * g + b


def block(m, x, wq, wk, wv, wo, w1, w2, g, b):
    """Pre-norm transformer block, 4 heads: projections split into heads, attention per head, the
    heads merged back into the output projection, a tanh-GELU MLP, two residuals."""
    bt, t, d = x.shape
    heads = 4

    def split(y):
        return y.reshape(bt, t, heads, d // heads).transpose(0, 2, 1, 3)
    h = _layer_norm(m, x, g, b)
    q, k, v = split(h @ wq), split(h @ wk), split(h @ wv)
    p = _softmax_last(m, q @ m.np.swapaxes(k, -1, -2) / math.sqrt(d // heads))
    x = x + (p @ v).transpose(0, 2, 1, 3).reshape(bt, t, d) @ wo
    u = _layer_norm(m, x, g, b) @ w1
    return x + 0.5 * u * (1 + m.np.tanh(0.7978845608 * (u + 0.044715 * u ** 3))) @ w2


def _block_args(scale):
    bt, t, d = (4, 128, 128) if scale == "full" else (2, 8, 16)
    r = _rng(5)
    s = 1 / math.sqrt(d)
    return (r.standard_normal((bt, t, d)),) + tuple(s * r.standard_normal((d, d)) for _ in range(4)) + \
        (s * r.standard_normal((d, 4 * d)), 0.5 * s * r.standard_normal((4 * d, d)), np.ones(d), np.zeros(d))


def _block_flops(x, *w):
    bt, t, d = x.shape
    return 2 * bt * t * d * d * 12 + 4 * bt * t * t * d


# -- 2. LSTM over a sequence (scan) --------------------------------------------------------------
def _sigmoid(m, x):
    return 1.0 / (1.0 + m.np.exp(-x))


def lstm(m, xs, w, u, b, h0, c0):
    hid = u.shape[0]

    def step(carry, x):
        h, c = carry
        g = x @ w + h @ u + b
        i = _sigmoid(m, g[:, :hid])
        f = _sigmoid(m, g[:, hid:2 * hid])
        o = _sigmoid(m, g[:, 2 * hid:3 * hid])
        z = m.np.tanh(g[:, 3 * hid:])
        c = f * c + i * z
        h = o * m.np.tanh(c)
        return (h, c), h

    (_, c), hs = m.lax.scan(step, (h0, c0), xs)
    return hs, c


def _lstm_args(scale):
    t, bt, n_in, hid = (64, 32, 32, 64) if scale == "full" else (5, 3, 4, 6)
    r = _rng(2)
    return (r.standard_normal((t, bt, n_in)), 0.2 * r.standard_normal((n_in, 4 * hid)),
            0.2 * r.standard_normal((hid, 4 * hid)), 0.1 * r.standard_normal(4 * hid),
            np.zeros((bt, hid)), np.zeros((bt, hid)))


def _lstm_flops(xs, w, u, b, h0, c0):
    t, bt, n_in = xs.shape
    hid = u.shape[0]
    return t * (2 * bt * (n_in + hid) * 4 * hid + 12 * bt * hid)


# -- 3. MLP training loop: grad in fori_loop -----------------------------------------------------
def mlp_train(m, w1, b1, w2, b2, x, y):
    np_ = m.np

    def loss(params):
        a1, c1, a2, c2 = params
        h = np_.tanh(x @ a1 + c1)
        z = h @ a2 + c2
        z = z - np_.max(z, axis=1, keepdims=True)
        logp = z - np_.log(np_.sum(np_.exp(z), axis=1, keepdims=True))
        return -np_.sum(logp * y) / x.shape[0]

    def step(i, params):
        g = m.grad(loss)(params)
        return tuple(p - 0.5 * gp for p, gp in zip(params, g))

    params = m.lax.fori_loop(0, 10, step, (w1, b1, w2, b2))
    return params + (loss(params),)


def _mlp_args(scale):
    n, d, hid, c = (512, 64, 128, 10) if scale == "full" else (9, 5, 7, 3)
    r = _rng(3)
    x = r.standard_normal((n, d))
    y = np.eye(c)[r.integers(0, c, n)]
    return (0.3 * r.standard_normal((d, hid)), np.zeros(hid), 0.3 * r.standard_normal((hid, c)),
            np.zeros(c), x, y)


def _mlp_flops(w1, b1, w2, b2, x, y):
    n, d = x.shape
    hid, c = w2.shape
    return 10 * 3 * 2 * n * (d * hid + hid * c)   # forward, and two products per layer backward


# -- 4. Black-Scholes ----------------------------------------------------------------------------
def black_scholes(m, s, k, t):
    np_ = m.np
    rate, vol = 0.02, 0.3

    def cdf(x):   # the tanh form of the normal CDF (sprue has no erf yet)
        return 0.5 * (1.0 + np_.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))

    sqrt_t = np_.sqrt(t)
    d1 = (np_.log(s / k) + (rate + 0.5 * vol * vol) * t) / (vol * sqrt_t)
    d2 = d1 - vol * sqrt_t
    disc = k * np_.exp(-rate * t)
    call = s * cdf(d1) - disc * cdf(d2)
    return call, call - s + disc


def _bs_args(scale):
    n = 2_000_000 if scale == "full" else 37
    r = _rng(4)
    return r.uniform(10, 100, n), r.uniform(10, 100, n), r.uniform(0.1, 2.0, n)


# -- 5. k-means ----------------------------------------------------------------------------------
def kmeans(m, points, centers):
    np_ = m.np
    k = centers.shape[0]

    def step(i, c):
        d = np_.sum((points[:, None, :] - c[None, :, :]) ** 2, axis=-1)
        a = np_.argmin(d, axis=1)
        onehot = (a[:, None] == np_.arange(k)[None, :]).astype(points.dtype)
        counts = np_.sum(onehot, axis=0)
        sums = onehot.T @ points
        return np_.where(counts[:, None] > 0, sums / np_.maximum(counts, 1.0)[:, None], c)

    return m.lax.fori_loop(0, 20, step, centers)


def _kmeans_args(scale):
    n, d, k = (20_000, 8, 16) if scale == "full" else (40, 3, 4)
    r = _rng(5)
    blobs = r.standard_normal((k, d)) * 4
    points = blobs[r.integers(0, k, n)] + r.standard_normal((n, d))
    return points, points[:k].copy()


def _kmeans_flops(points, centers):
    n, d = points.shape
    k = centers.shape[0]
    return 20 * (3 * n * k * d + 2 * n * k * d)


# -- 6. n-body -----------------------------------------------------------------------------------
def nbody(m, pos, vel, mass):
    np_ = m.np
    dt = 0.01

    def accel(p):
        diff = p[None, :, :] - p[:, None, :]
        r2 = np_.sum(diff * diff, axis=-1) + 0.01
        inv = mass[None, :] / (r2 * np_.sqrt(r2))
        return np_.sum(diff * inv[:, :, None], axis=1)

    def step(i, state):
        p, v = state
        v = v + dt * accel(p)
        return p + dt * v, v

    return m.lax.fori_loop(0, 10, step, (pos, vel))


def _nbody_args(scale):
    n = 512 if scale == "full" else 7
    r = _rng(6)
    return r.standard_normal((n, 3)), 0.1 * r.standard_normal((n, 3)), r.uniform(0.5, 1.5, n)


def _nbody_flops(pos, vel, mass):
    return 10 * 20 * pos.shape[0] ** 2


# -- 7. heat stencil -----------------------------------------------------------------------------
def heat(m, u):
    def step(i, u):
        lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1]
        return m.add_at(u, (slice(1, -1), slice(1, -1)), 0.2 * lap)

    return m.lax.fori_loop(0, 50, step, u)


def _heat_args(scale):
    n = 512 if scale == "full" else 9
    return (_rng(7).uniform(0, 1, (n, n)),)


def _heat_flops(u):
    return 50 * 7 * (u.shape[0] - 2) * (u.shape[1] - 2)


# -- 8. a small CNN (convolutions as shifted einsums) --------------------------------------------
def cnn(m, x, k1, k2, wd):
    np_ = m.np

    def conv3(x4, k):   # 'valid' 3x3 convolution, NHWC, k: [3, 3, C, D]
        out = None
        for dy in range(3):
            for dx in range(3):
                patch = x4[:, dy:(dy - 2 if dy < 2 else None), dx:(dx - 2 if dx < 2 else None), :]
                term = np_.einsum("nhwc,cd->nhwd", patch, k[dy, dx])
                out = term if out is None else out + term
        return out

    h = np_.maximum(conv3(x[:, :, :, None], k1), 0.0)
    h = np_.maximum(conv3(h, k2), 0.0)
    z = np_.mean(h, axis=(1, 2)) @ wd
    z = z - np_.max(z, axis=1, keepdims=True)
    return z - np_.log(np_.sum(np_.exp(z), axis=1, keepdims=True))


def _cnn_args(scale):
    n, hw, c1, c2 = (16, 32, 8, 16) if scale == "full" else (2, 6, 3, 4)
    r = _rng(8)
    return (r.standard_normal((n, hw, hw)), 0.3 * r.standard_normal((3, 3, 1, c1)),
            0.3 * r.standard_normal((3, 3, c1, c2)), 0.3 * r.standard_normal((c2, 10)))


def _cnn_flops(x, k1, k2, wd):
    n, hw, _ = x.shape
    c1, c2 = k2.shape[2], k2.shape[3]
    return 2 * 9 * n * ((hw - 2) ** 2 * c1 + (hw - 4) ** 2 * c1 * c2)


# -- 9. Monte-Carlo loop (counter-based hash in integer ops) -------------------------------------
def _hash32(x):   # lowbias32 (Chris Wellons' hash-prospector): uint32 in, uint32 out
    x = x ^ (x >> 16)
    x = x * 0x7FEB352D
    x = x ^ (x >> 15)
    x = x * 0x846CA68B
    return x ^ (x >> 16)


def monte_carlo(m, counter, offset):
    np_ = m.np
    n = counter.shape[0]

    def step(i, state):
        off, inside, integral = state
        key = (counter + off) * 2
        x = (_hash32(key) >> 8).astype(np_.float64) * (1.0 / (1 << 24))
        y = (_hash32(key + 1) >> 8).astype(np_.float64) * (1.0 / (1 << 24))
        r2 = x * x + y * y
        inside = inside + np_.sum(np_.where(r2 < 1.0, 1.0, 0.0))
        integral = integral + np_.sum(np_.exp(-r2))
        return off + n, inside, integral

    zero = np_.sum(counter[:0].astype(np_.float64))
    _, inside, integral = m.lax.fori_loop(0, 20, step, (offset, zero, zero))
    return 4.0 * inside / (20 * n), integral / (20 * n)


def _mc_args(scale):
    n = 1 << 17 if scale == "full" else 33
    return np.arange(n, dtype=np.uint32), np.uint32(12345)


# -- 10. sparse-ish gather/scatter (segment sum, PageRank-like) ----------------------------------
def pagerank(m, x, src, dst, w):
    np_ = m.np

    def step(i, x):
        agg = m.add_at(np_.zeros_like(x), dst, x[src] * w)
        return 0.15 + 0.85 * agg

    return m.lax.fori_loop(0, 10, step, x)


def _pagerank_args(scale):
    n, e = (50_000, 500_000) if scale == "full" else (11, 40)
    r = _rng(10)
    src = r.integers(0, n, e)
    dst = r.integers(0, n, e)
    outdeg = np.bincount(src, minlength=n).astype(np.float64)
    return np.ones(n), src, dst, 1.0 / outdeg[src]


# -- 11. per-example gradients, clipped (DP-SGD): vmap of grad ----------------------------------
def per_example_grads(m, w1, w2, x, y):
    np_ = m.np

    def loss(params, xi, yi):
        a1, a2 = params
        z = np_.tanh(xi @ a1) @ a2
        z = z - np_.max(z)
        return np_.log(np_.sum(np_.exp(z))) - np_.sum(z * yi)

    g1, g2 = m.vmap(m.grad(loss), in_axes=(None, 0, 0))((w1, w2), x, y)
    norms = np_.sqrt(np_.sum(g1 * g1, axis=(1, 2)) + np_.sum(g2 * g2, axis=(1, 2)))
    scale = np_.minimum(1.0, 1.0 / np_.maximum(norms, 1e-12))
    n = x.shape[0]
    return (np_.sum(g1 * scale[:, None, None], axis=0) / n, np_.sum(g2 * scale[:, None, None], axis=0) / n,
            norms)


def _peg_args(scale):
    n, d, hid, c = (512, 32, 64, 10) if scale == "full" else (6, 4, 5, 3)
    r = _rng(11)
    return (0.3 * r.standard_normal((d, hid)), 0.3 * r.standard_normal((hid, c)), r.standard_normal((n, d)),
            np.eye(c)[r.integers(0, c, n)])


def _peg_flops(w1, w2, x, y):
    n, d = x.shape
    hid, c = w2.shape
    return 3 * 2 * n * (d * hid + hid * c)


# -- 12. a recurrent filter over a long sequence (scan with little work per step) ----------------
def ema_filter(m, xs, s0):
    np_ = m.np

    def step(carry, x):
        fast, slow = carry
        fast = 0.9 * fast + 0.1 * x
        slow = 0.99 * slow + 0.01 * x
        return (fast, slow), np_.where(fast > slow, 1.0, -1.0) * np_.abs(fast - slow)

    (fast, slow), signal = m.lax.scan(step, (s0, s0), xs)
    return signal, fast, slow


def _ema_args(scale):
    t, k = (20_000, 64) if scale == "full" else (30, 3)
    r = _rng(12)
    return np.cumsum(r.standard_normal((t, k)), axis=0), np.zeros(k)



# -- programs added after the first runs: kinds the first twelve did not cover --------------------
# (a transformer block, a GLM fitted by gradient descent, a kernel sum, a GRU, a large-vocabulary
# loss, an eigenvector iteration, an escape-time fractal, batch statistics, a filter plus a running
# sum)


def ffn(m, x, g, w1, w2):   # layernorm + GELU MLP + residual
    np_ = m.np
    mu = np_.mean(x, axis=-1, keepdims=True)
    var = np_.mean((x - mu) ** 2, axis=-1, keepdims=True)
    h = (x - mu) / np_.sqrt(var + 1e-5) * g
    a = h @ w1
    a = 0.5 * a * (1.0 + np_.tanh(0.7978845608 * (a + 0.044715 * a ** 3)))
    return x + a @ w2


def _ffn_args(scale):
    r = _rng(20)
    n, d, f = (256, 256, 1024) if scale == "full" else (3, 4, 8)
    return (r.standard_normal((n, d)), np.ones(d), 0.05 * r.standard_normal((d, f)), 0.05 * r.standard_normal((f, d)))


def logreg(m, x, y, w):
    np_ = m.np
    def loss(w):
        z = x @ w
        return np_.mean(np_.log1p(np_.exp(-y * z)))
    def step(i, w):
        return w - 0.1 * m.grad(loss)(w)
    return m.lax.fori_loop(0, 50, step, w)


def _logreg_args(scale):
    r = _rng(21)
    n, d = (20000, 64) if scale == "full" else (7, 3)
    return r.standard_normal((n, d)), np.sign(r.standard_normal(n)), np.zeros(d)


def rbf(m, x, z):
    np_ = m.np
    d2 = np_.sum((x[:, None, :] - z[None, :, :]) ** 2, axis=-1)
    return np_.sum(np_.exp(-0.5 * d2), axis=1)


def _rbf_args(scale):
    r = _rng(22)
    n, k, d = (2000, 1000, 16) if scale == "full" else (5, 4, 3)
    return r.standard_normal((n, d)), r.standard_normal((k, d))


def gru(m, xs, wz, wr, wh, h0):
    np_ = m.np
    def sig(v):
        return 1.0 / (1.0 + np_.exp(-v))
    def step(h, x):
        xh = np_.concatenate([x, h], axis=1)
        z = sig(xh @ wz)
        r = sig(xh @ wr)
        hh = np_.tanh(np_.concatenate([x, r * h], axis=1) @ wh)
        h = (1 - z) * h + z * hh
        return h, h
    h, hs = m.lax.scan(step, h0, xs)
    return hs


def _gru_args(scale):
    r = _rng(23)
    t, b, i, h = (64, 32, 32, 64) if scale == "full" else (4, 2, 3, 5)
    return (r.standard_normal((t, b, i)), 0.2 * r.standard_normal((i + h, h)), 0.2 * r.standard_normal((i + h, h)),
            0.2 * r.standard_normal((i + h, h)), np.zeros((b, h)))


def xent(m, logits, labels):
    np_ = m.np
    mx = np_.max(logits, axis=-1, keepdims=True)
    lse = np_.log(np_.sum(np_.exp(logits - mx), axis=-1)) + mx[:, 0]
    picked = np_.take_along_axis(logits, labels[:, None], axis=1)[:, 0]
    return np_.mean(lse - picked)


def _xent_args(scale):
    r = _rng(24)
    n, v = (128, 32000) if scale == "full" else (3, 7)
    return r.standard_normal((n, v)), r.integers(0, v, n)


def power_iter(m, a, v):
    np_ = m.np
    def step(i, v):
        w = a @ v
        return w / np_.sqrt(np_.sum(w * w))
    v = m.lax.fori_loop(0, 50, step, v)
    return v, v @ (a @ v)


def _power_args(scale):
    r = _rng(25)
    n = 1000 if scale == "full" else 5
    a = r.standard_normal((n, n))
    return a + a.T, np.ones(n) / math.sqrt(n)


def mandel(m, cr, ci):
    np_ = m.np
    def body(i, s):
        zr, zi, cnt = s
        zr2 = zr * zr - zi * zi + cr
        zi2 = 2 * zr * zi + ci
        inside = zr2 * zr2 + zi2 * zi2 < 4.0
        return np_.where(inside, zr2, zr), np_.where(inside, zi2, zi), cnt + np_.where(inside, 1.0, 0.0)
    z = np_.zeros_like(cr)
    return m.lax.fori_loop(0, 50, body, (z, z, z))[2]


def _mandel_args(scale):
    n = 512 if scale == "full" else 5
    re, im = np.meshgrid(np.linspace(-2, 1, n), np.linspace(-1.5, 1.5, n))
    return re, im


def batchnorm(m, x, g, b):
    np_ = m.np
    mu = np_.mean(x, axis=(0, 2, 3), keepdims=True)
    var = np_.var(x, axis=(0, 2, 3), keepdims=True)
    return np_.maximum((x - mu) / np_.sqrt(var + 1e-5) * g[None, :, None, None] + b[None, :, None, None], 0.0)


def _bn_args(scale):
    r = _rng(26)
    shp = (32, 64, 32, 32) if scale == "full" else (2, 3, 4, 4)
    return r.standard_normal(shp), np.ones(shp[1]), np.zeros(shp[1])


def conv1d(m, x, k):
    np_ = m.np
    n = x.shape[1]
    out = x[:, 0:n - 4] * k[0]
    for j in range(1, 5):
        out = out + x[:, j:n - 4 + j] * k[j]
    return np_.cumsum(out, axis=1)


def _conv1d_args(scale):
    r = _rng(27)
    return r.standard_normal((256, 4096) if scale == "full" else (2, 9)), r.standard_normal(5)


def newton(m, a):
    """Cube roots by Newton's method in a while_loop until the residual is small (a cond that reads
    an array beside the carry: with run-time sizes, a loop whose cond holds size checks)."""
    def cond(state):
        x, i = state
        return (i < 50) & (m.np.max(m.np.abs(x ** 3 - a) / a) > 1e-6)

    def body(state):
        x, i = state
        return x - (x ** 3 - a) / (3 * x * x), i + 1
    return m.lax.while_loop(cond, body, (m.np.maximum(a, 1.0), 0))[0]


def _newton_args(scale):
    return (_rng(28).uniform(0.1, 100.0, 1_000_000 if scale == "full" else 7),)


def conv2d(m, x, k1, k2):
    """Two convolutions (lax.conv_general_dilated, NCHW; the second strided) with relu and a global
    average pool: a CNN's feature extractor, its batch a run-time size in the dynamic version."""
    dn = ("NCHW", "OIHW", "NCHW")
    y = m.nn.relu(m.lax.conv_general_dilated(x, k1, (1, 1), "SAME", dimension_numbers=dn))
    y = m.lax.conv_general_dilated(y, k2, (2, 2), "SAME", dimension_numbers=dn)
    return m.np.mean(m.nn.relu(y), axis=(2, 3))


def _conv2d_args(scale):
    r = _rng(29)
    n, c, hw, o1, o2 = (8, 16, 32, 32, 32) if scale == "full" else (2, 3, 6, 4, 5)
    return r.standard_normal((n, c, hw, hw)), r.standard_normal((o1, c, 3, 3)) * 0.1, \
        r.standard_normal((o2, o1, 3, 3)) * 0.1


def _conv2d_flops(x, k1, k2):
    n, c, h, w = x.shape
    return 2 * n * h * w * k1.shape[0] * c * 9 + 2 * n * (h // 2) * (w // 2) * k2.shape[0] * k2.shape[1] * 9


def classifier(m, x, w, b, labels):
    """A classifier's loss and its gradient: layernorm, a dense layer, log_softmax and a one-hot
    cross-entropy (jax.nn's log_softmax and one_hot)."""
    def loss(w, b):
        h = (x - m.np.mean(x, -1, keepdims=True)) / m.np.sqrt(m.np.var(x, -1, keepdims=True) + 1e-5)
        logp = m.nn.log_softmax(h @ w + b)
        return -m.np.mean(m.np.sum(logp * m.nn.one_hot(labels, w.shape[1]), axis=-1))
    value, (gw, gb) = m.value_and_grad(loss, argnums=(0, 1))(w, b)
    return value, gw, gb


def _classifier_args(scale):
    r = _rng(30)
    n, d, k = (1024, 256, 100) if scale == "full" else (5, 4, 3)
    return r.standard_normal((n, d)), r.standard_normal((d, k)) * 0.1, r.standard_normal(k), r.integers(0, k, n)


def _classifier_flops(x, w, b, labels):
    return 3 * 2 * x.shape[0] * w.shape[0] * w.shape[1]


def gp(m, x, y, xs):
    """Gaussian-process regression: an RBF kernel matrix with noise, its Cholesky factor, the
    posterior mean and variance at test points (linear solves) and the log-determinant term."""
    np_ = m.np

    def kernel(a, c):
        d2 = np_.sum(a * a, 1)[:, None] + np_.sum(c * c, 1)[None, :] - 2.0 * (a @ c.T)
        return np_.exp(-0.5 * d2)
    k = kernel(x, x) + 0.1 * np_.eye(x.shape[0])
    chol = np_.linalg.cholesky(k)
    ks = kernel(xs, x)
    mean = ks @ np_.linalg.solve(k, y)
    v = np_.linalg.solve(chol, ks.T)
    return mean, 1.0 - np_.sum(v * v, 0), np_.sum(np_.log(np_.diagonal(chol)))


def _gp_args(scale):
    r = _rng(31)
    n, t, d = (400, 200, 8) if scale == "full" else (6, 3, 2)
    return r.standard_normal((n, d)), r.standard_normal(n), r.standard_normal((t, d))


def _gp_flops(x, y, xs):
    n, t = x.shape[0], xs.shape[0]
    return n ** 3 / 3 + 2 * n ** 3 / 3 + 2 * n * n * t + 2 * n * n * x.shape[1]


def _ffn_flops(x, g, w1, w2):
    return 2 * 2 * x.shape[0] * w1.shape[0] * w1.shape[1]


def _logreg_flops(x, y, w):
    return 50 * 4 * x.shape[0] * x.shape[1]


def _power_flops(a, v):
    return 51 * 2 * a.shape[0] * a.shape[1]


PROGRAMS = [
    Program("attention", "multi-head attention 8x256x64", attention, _attention_args,
            ({0: "b", 1: "t"}, {0: "b", 1: "t"}, {0: "b", 1: "t"}), _attention_flops),
    Program("heads", "multi-head attention 4x8 heads x128x64 (einsum on 4-D)", heads, _heads_args,
            ({2: "t"}, {2: "t"}, {2: "t"}), _heads_flops),
    Program("causal", "causal attention 8x256x64 (iota mask, -1e30 where masked)", causal_attention, _causal_args,
            ({0: "b"}, {0: "b"}, {0: "b"}), _attention_flops),
    Program("block", "transformer block 4x128x128: layernorm, 4 heads, output projection, GELU MLP", block,
            _block_args, ({0: "b", 1: "t"},) + (None,) * 8, _block_flops),
    Program("lstm", "LSTM, 64 steps of lax.scan (batch 32, 32 in, 64 hidden)", lstm, _lstm_args,
            ({0: "t", 1: "b"}, None, None, None, {0: "b"}, {0: "b"}), _lstm_flops),
    Program("mlp_train", "MLP training, 10 grad steps in fori_loop (512x64, 128 hidden, 10 classes)",
            mlp_train, _mlp_args, (None, None, None, None, {0: "n"}, {0: "n"}), _mlp_flops),
    Program("black_scholes", "Black-Scholes, 2e6 options (log, sqrt, exp, tanh CDF)", black_scholes,
            _bs_args, ({0: "n"}, {0: "n"}, {0: "n"})),
    Program("kmeans", "k-means, 20 iterations, 20000x8 points, k=16", kmeans, _kmeans_args,
            ({0: "n"}, None), _kmeans_flops),
    Program("nbody", "n-body, 10 leapfrog steps, 512 bodies", nbody, _nbody_args,
            ({0: "n"}, {0: "n"}, {0: "n"}), _nbody_flops),
    Program("heat", "heat stencil, 50 steps on 512x512 (slices + .at[].add)", heat, _heat_args,
            ({0: "h", 1: "w"},), _heat_flops),
    Program("cnn", "small CNN, 16x32x32, two 3x3 convs (einsum of slices), pool, dense", cnn,
            _cnn_args, ({0: "n"}, None, None, None), _cnn_flops),
    Program("monte_carlo", "Monte-Carlo pi, 20 x 2^17 samples, integer hash RNG", monte_carlo,
            _mc_args, ({0: "n"}, None), rtol=1e-9),
    Program("pagerank", "segment sum via .at[idx].add, 10 sweeps, 5e5 edges", pagerank,
            _pagerank_args, ({0: "n"}, {0: "e"}, {0: "e"}, {0: "e"})),
    Program("per_example", "per-example gradients clipped (vmap of grad), 512 examples, 32-64-10", per_example_grads,
            _peg_args, (None, None, {0: "n"}, {0: "n"}), _peg_flops),
    Program("ema_filter", "two EMAs and a crossover signal, scan over 20000 steps x 64 series", ema_filter,
            _ema_args, ({0: "t", 1: "k"}, {0: "k"})),
    Program("ffn", "transformer MLP block: layernorm, 256x256 @ 256x1024, tanh GELU, @ 1024x256, residual", ffn,
            _ffn_args, ({0: "n"}, None, None, None), _ffn_flops),
    Program("logreg", "logistic regression, 50 grad steps in fori_loop, 20000x64", logreg, _logreg_args,
            ({0: "n"}, {0: "n"}, None), _logreg_flops),
    Program("rbf", "Gaussian kernel sums, 2000x1000 pairs in 16 dims (broadcast difference, sum, exp)", rbf,
            _rbf_args, ({0: "n"}, {0: "k"})),
    Program("gru", "GRU, 64 steps of lax.scan (concatenate, batch 32, 32 in, 64 hidden)", gru, _gru_args,
            ({0: "t", 1: "b"}, None, None, None, {0: "b"})),
    Program("xent", "cross-entropy over a 32000-word vocabulary, 128 rows (logsumexp, take_along_axis)", xent,
            _xent_args, ({0: "n", 1: "v"}, {0: "n"})),
    Program("power_iter", "power iteration, 50 matrix-vector products in fori_loop, 1000x1000", power_iter,
            _power_args, ({0: "n", 1: "n"}, {0: "n"}), _power_flops),
    Program("mandel", "Mandelbrot escape counts, 50 iterations on 512x512 (where, shared masks)", mandel,
            _mandel_args, ({0: "h", 1: "w"}, {0: "h", 1: "w"})),
    Program("newton", "Newton cube roots of 1e6 values, while_loop to a relative residual of 1e-6", newton,
            _newton_args, ({0: "n"},)),
    Program("conv2d", "two conv_general_dilated layers (NCHW, 8x16x32x32, 3x3, relu, stride 2), mean pool", conv2d,
            _conv2d_args, ({0: "n"}, None, None), _conv2d_flops),
    Program("classifier", "layernorm, dense 1024x256 @ 256x100, log_softmax, one-hot cross-entropy and its grad",
            classifier, _classifier_args, ({0: "n"}, None, None, {0: "n"}), _classifier_flops),
    Program("batchnorm", "batch normalization + relu, 32x64x32x32 NCHW (reductions over three axes)", batchnorm,
            _bn_args, ({0: "n", 2: "h", 3: "w"}, None, None)),
    Program("conv1d", "5-tap filter from shifted slices, then a running sum, 256x4096", conv1d, _conv1d_args,
            ({0: "b", 1: "n"}, None)),
    Program("gp", "Gaussian-process regression, 400 points x 200 test points: Cholesky, solves, log-determinant",
            gp, _gp_args, ({0: "n"}, {0: "n"}, {0: "t"}), _gp_flops, rtol=1e-8),
]
