"""Held-out programs, batch E (make_heldout.py): measured after batches A-D's fixes, before its own.

Written as JAX users' whole programs look, in styles batches A-D did not cover: small training scripts
(optax-like optimizers with schedules, clipping by global norm, weight-decay masks over pytrees,
gradient accumulation), flax.linen-like modules written by hand (dropout with an rng, batchnorm with
running statistics in a state dict, layer/group/RMS norms, attention with rotary embeddings, an
MLP-mixer block, a GRU), physics and ODEs (RK4 and leapfrog in scan, implicit Euler with a while loop
and linear solves, an N-body step, a heat equation), probabilistic code (log-likelihoods with
logsumexp, HMC leapfrog with a Metropolis test, Gaussian-mixture EM, Kalman filter, importance
sampling), signal processing (STFT by frames and rfft, FIR filters by 1-D conv_general_dilated,
resampling by interpolation, autocorrelation by FFT), image ops (jax.image.resize's methods, rotations
by gather, morphology by reduce_window, Sobel edges), sparse-ish ops (jax.ops.segment_sum / max / min /
prod, COO matvecs by gathers, graph message passing), ranking and sorting (top_k, argsort with
take_along_axis, ranks, cumulative ops, NDCG), and jit / vmap / grad compositions over them; float32
mostly, some float64 under x64. The second half (signal processing on) is heldout_batch_e2.py, split
for length; its inputs continue this module's generator.

Measured before its fixes (JAX 0.10.2; sprue.load and `sprue compile` alike, every result compared
with JAX's as test_corpus.test_heldout does): 160 of all 161 programs passed (99.4 %); counted as
batches A-C were, leaving out the 8 with top-level constvars (all 8 pass, as leading parameters since
batch D): 152 of 153 (99.3 %). The one: e_rank_ndcg, a bufferization error ("invalid indexing maps
are non-invertible"): lowering/fusion_siblings.py merged its two sums and inlined a producer that
read sort(rel) reversed, leaving no input whose map gives the loops' extents. Fixed; all 161 pass.
The batch has 161 programs (the brief asked for 100-150): all were written before the measurement,
and none was dropped after it.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from heldout_inputs import case, f32, f64, pos, reseed, spd, x64case
from jax import lax

reseed(2029)
tmap = jax.tree_util.tree_map
tleaves = jax.tree_util.tree_leaves
K = np.array([0, 11], np.uint32)




def _params(*sizes):
    return [{"w": f32(a, b, lo=-0.5, hi=0.5), "b": f32(b, lo=-0.1, hi=0.1)} for a, b in zip(sizes, sizes[1:])]


def mlp(params, x):
    for p in params[:-1]:
        x = jax.nn.gelu(x @ p["w"] + p["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def mse(params, x, y):
    return jnp.mean((mlp(params, x) - y) ** 2)


# ---- optax-like optimizers, written by hand
def global_norm(tree):
    return jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in tleaves(tree)))


def clip_by_global_norm(tree, max_norm):
    n = global_norm(tree)
    scale = jnp.where(n < max_norm, 1.0, max_norm / n)
    return tmap(lambda g: g * scale, tree)


def warmup_cosine(step, peak=1e-2, warmup=5, total=50, end=1e-4):
    step = jnp.asarray(step, jnp.float32)
    warm = peak * step / warmup
    frac = jnp.clip((step - warmup) / (total - warmup), 0.0, 1.0)
    cos = end + 0.5 * (peak - end) * (1 + jnp.cos(jnp.pi * frac))
    return jnp.where(step < warmup, warm, cos)


def adamw_update(grads, state, params, lr, mask, b1=0.9, b2=0.999, eps=1e-8, wd=1e-2):
    count = state["count"] + 1
    mu = tmap(lambda m, g: b1 * m + (1 - b1) * g, state["mu"], grads)
    nu = tmap(lambda v, g: b2 * v + (1 - b2) * g * g, state["nu"], grads)
    mhat = tmap(lambda m: m / (1 - b1 ** count), mu)
    vhat = tmap(lambda v: v / (1 - b2 ** count), nu)
    upd = tmap(lambda m, v, p, k: -lr * (m / (jnp.sqrt(v) + eps) + (wd * p if k else 0.0)), mhat, vhat, params, mask)
    return upd, {"count": count, "mu": mu, "nu": nu}


P3 = _params(3, 8, 2)
MASK = [{"w": True, "b": False} for _ in P3]


def _adam_state(params):
    return {"count": np.int32(0), "mu": tmap(np.zeros_like, params), "nu": tmap(np.zeros_like, params)}


@case("e_train_adamw_cosine_clip", P3, _adam_state(P3), f32(8, 3), f32(8, 2))
def _(params, state, x, y):
    def step(carry, i):
        params, state = carry
        loss, g = jax.value_and_grad(mse)(params, x, y)
        g = clip_by_global_norm(g, 1.0)
        upd, state = adamw_update(g, state, params, warmup_cosine(i), MASK)
        return (tmap(jnp.add, params, upd), state), loss
    (params, state), losses = lax.scan(step, (params, state), jnp.arange(12))
    return params, losses
@case("e_train_sgd_momentum_nesterov", P3, f32(16, 3), f32(16, 2))
def _(params, x, y):
    def step(i, carry):
        p, v = carry
        g = jax.grad(mse)(p, x, y)
        v = tmap(lambda v, g: 0.9 * v + g, v, g)
        p = tmap(lambda p, v, g: p - 0.05 * (g + 0.9 * v), p, v, g)
        return p, v
    return lax.fori_loop(0, 10, step, (params, tmap(jnp.zeros_like, params)))[0]
@case("e_train_minibatch_epochs", P3, f32(24, 3), f32(24, 2))
def _(params, x, y):
    xb, yb = x.reshape(4, 6, 3), y.reshape(4, 6, 2)
    def batch_step(p, b):
        l, g = jax.value_and_grad(mse)(p, *b)
        return tmap(lambda p, g: p - 0.1 * g, p, g), l
    def epoch(p, _):
        p, ls = lax.scan(batch_step, p, (xb, yb))
        return p, ls.mean()
    return lax.scan(epoch, params, None, length=3)
@case("e_train_grad_accumulation", P3, f32(4, 5, 3), f32(4, 5, 2))
def _(params, xs, ys):
    def acc(g, b):
        return tmap(jnp.add, g, jax.grad(mse)(params, *b)), None
    g, _ = lax.scan(acc, tmap(jnp.zeros_like, params), (xs, ys))
    return tmap(lambda p, g: p - 0.1 * g / 4, params, g)
@case("e_train_per_example_grads_clip", P3, f32(6, 3), f32(6, 2))
def _(params, x, y):
    per = jax.vmap(lambda a, b: jax.grad(mse)(params, a[None], b[None]))(x, y)
    norms = jnp.sqrt(sum(jnp.sum(g.reshape(6, -1) ** 2, 1) for g in tleaves(per)))
    f = jnp.minimum(1.0, 0.5 / (norms + 1e-6))
    return tmap(lambda g: jnp.mean(g * f.reshape((-1,) + (1,) * (g.ndim - 1)), 0), per)
@case("e_train_rmsprop_lr_schedule_piecewise", P3, f32(8, 3), f32(8, 2))
def _(params, x, y):
    def lr(i): return jnp.where(i < 4, 1e-2, jnp.where(i < 8, 5e-3, 1e-3))
    def step(c, i):
        p, s = c
        g = jax.grad(mse)(p, x, y)
        s = tmap(lambda s, g: 0.9 * s + 0.1 * g * g, s, g)
        return (tmap(lambda p, g, s: p - lr(i) * g / (jnp.sqrt(s) + 1e-6), p, g, s), s), None
    return lax.scan(step, (params, tmap(jnp.zeros_like, params)), jnp.arange(10))[0][0]
@case("e_train_adagrad_l1_prox", f32(5, 3), f32(20, 5), f32(20, 3))
def _(w, x, y):
    def step(c, _):
        w, acc = c
        g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
        acc = acc + g * g
        w = w - 0.1 * g / jnp.sqrt(acc + 1e-10)
        return (jnp.sign(w) * jnp.maximum(jnp.abs(w) - 1e-3, 0.0), acc), jnp.sum(jnp.abs(w))
    return lax.scan(step, (w, jnp.full_like(w, 0.1)), None, length=8)
@case("e_train_ema_params", P3, P3)
def _(params, ema):
    return tmap(lambda e, p: 0.99 * e + 0.01 * p, ema, params), optax_like_decay(ema)
def optax_like_decay(t):
    return sum(jnp.sum(x ** 2) for x in tleaves(t)) * 0.5
@case("e_train_lion_update", {"a": f32(4, 4), "b": f32(4)}, {"a": f32(4, 4), "b": f32(4)}, {"a": f32(4, 4), "b": f32(4)})
def _(params, grads, m):
    upd = tmap(lambda m, g: jnp.sign(0.9 * m + 0.1 * g), m, grads)
    m = tmap(lambda m, g: 0.99 * m + 0.01 * g, m, grads)
    return tmap(lambda p, u: p - 1e-3 * (u + 0.1 * p), params, upd), m
@case("e_train_softmax_classifier_acc", f32(4, 3), f32(3), f32(30, 4), np.random.RandomState(7).randint(0, 3, 30).astype(np.int32))
def _(w, b, x, labels):
    def loss(w, b):
        logits = x @ w + b
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], 1))
    def step(c, _):
        w, b = c
        gw, gb = jax.grad(loss, argnums=(0, 1))(w, b)
        return (w - 0.5 * gw, b - 0.5 * gb), loss(w, b)
    (w, b), ls = lax.scan(step, (w, b), None, length=15)
    acc = jnp.mean(jnp.argmax(x @ w + b, -1) == labels)
    return ls, acc
@case("e_train_label_smoothing_xent", f32(10, 5), np.random.RandomState(8).randint(0, 5, 10).astype(np.int32))
def _(logits, labels):
    oh = jax.nn.one_hot(labels, 5)
    t = oh * 0.9 + 0.1 / 5
    l = -jnp.sum(t * jax.nn.log_softmax(logits), -1)
    return l.mean(), jax.grad(lambda z: -jnp.sum(t * jax.nn.log_softmax(z)))(logits)
@x64case("e_x64_train_lbfgs_like_two_loop", f64(4), f64(3, 4), f64(3, 4))
def _(g, s, y):
    rho = 1.0 / jnp.sum(s * y, 1)
    def back(q, i):
        a = rho[i] * (s[i] @ q)
        return q - a * y[i], a
    q, alpha = lax.scan(back, g, jnp.arange(2, -1, -1))
    gamma = (s[-1] @ y[-1]) / (y[-1] @ y[-1])
    r = gamma * q
    def fwd(r, ia):
        i, a = ia
        b = rho[i] * (y[i] @ r)
        return r + s[i] * (a - b), None
    return lax.scan(fwd, r, (jnp.arange(3), alpha[::-1]))[0]


# ---- flax.linen-like modules written by hand
def dense(p, x):
    return x @ p["kernel"] + p["bias"]


@case("e_nn_dropout_train", f32(4, 6), K)
def _(x, key):
    keep = jax.random.bernoulli(key, 0.8, x.shape)
    return jnp.where(keep, x / 0.8, 0.0)
@case("e_nn_dropout_mlp_rng_split", {"kernel": f32(6, 6), "bias": f32(6)}, f32(3, 6), K)
def _(p, x, key):
    k1, k2 = jax.random.split(key)
    h = jax.nn.relu(dense(p, x))
    h = h * jax.random.bernoulli(k1, 0.9, h.shape) / 0.9
    h = dense(p, h)
    return h * jax.random.bernoulli(k2, 0.9, h.shape) / 0.9
@case("e_nn_batchnorm_train_state", f32(8, 4), {"scale": f32(4), "bias": f32(4)}, {"mean": f32(4), "var": pos(4)})
def _(x, params, stats):
    m, v = jnp.mean(x, 0), jnp.var(x, 0)
    y = (x - m) * lax.rsqrt(v + 1e-5) * params["scale"] + params["bias"]
    return y, {"mean": 0.9 * stats["mean"] + 0.1 * m, "var": 0.9 * stats["var"] + 0.1 * v * 8 / 7}
@case("e_nn_batchnorm_conv_nhwc", f32(2, 5, 5, 3), {"mean": f32(3), "var": pos(3)}, f32(3), f32(3))
def _(x, st, g, b):
    return (x - st["mean"]) / jnp.sqrt(st["var"] + 1e-5) * g + b
@case("e_nn_layernorm_grad", f32(3, 8), f32(8), f32(8))
def _(x, g, b):
    def ln(x, g, b):
        m = x.mean(-1, keepdims=True)
        v = jnp.mean((x - m) ** 2, -1, keepdims=True)
        return (x - m) * lax.rsqrt(v + 1e-6) * g + b
    return ln(x, g, b), jax.grad(lambda g, b: jnp.sum(jnp.sin(ln(x, g, b))), argnums=(0, 1))(g, b)
@case("e_nn_groupnorm", f32(2, 4, 4, 6), f32(6), f32(6))
def _(x, g, b):
    n, h, w, c = x.shape
    xg = x.reshape(n, h, w, 3, c // 3)
    m = xg.mean((1, 2, 4), keepdims=True)
    v = xg.var((1, 2, 4), keepdims=True)
    return ((xg - m) / jnp.sqrt(v + 1e-5)).reshape(x.shape) * g + b
@case("e_nn_rmsnorm_vmap", f32(5, 8), f32(8))
def _(x, w):
    return jax.vmap(lambda r: r * lax.rsqrt(jnp.mean(r * r) + 1e-6) * (1 + w))(x)


def rope(x, pos):
    d = x.shape[-1] // 2
    freqs = 1.0 / (10000 ** (jnp.arange(d, dtype=jnp.float32) / d))
    ang = pos[:, None] * freqs[None]
    c, s = jnp.cos(ang), jnp.sin(ang)
    x1, x2 = x[..., :d], x[..., d:]
    return jnp.concatenate([x1 * c - x2 * s, x1 * s + x2 * c], -1)


@case("e_nn_rope_attention_causal", f32(6, 8), f32(8, 8), f32(8, 8), f32(8, 8))
def _(x, wq, wk, wv):
    pos = jnp.arange(x.shape[0], dtype=jnp.float32)
    q, k, v = rope(x @ wq, pos), rope(x @ wk, pos), x @ wv
    s = q @ k.T / jnp.sqrt(8.0)
    mask = jnp.tril(jnp.ones((6, 6), bool))
    s = jnp.where(mask, s, -1e9)
    return jax.nn.softmax(s, -1) @ v
@case("e_nn_mha_einsum_rope", f32(2, 5, 8), f32(8, 2, 4), f32(8, 2, 4), f32(8, 2, 4), f32(2, 4, 8))
def _(x, wq, wk, wv, wo):
    q = jnp.einsum("bsd,dhk->bshk", x, wq)
    k = jnp.einsum("bsd,dhk->bshk", x, wk)
    v = jnp.einsum("bsd,dhk->bshk", x, wv)
    pos = jnp.arange(5.0)
    q = jax.vmap(jax.vmap(lambda t: rope(t, pos), 2, 2))(q)
    k = jax.vmap(jax.vmap(lambda t: rope(t, pos), 2, 2))(k)
    w = jax.nn.softmax(jnp.einsum("bqhk,bshk->bhqs", q, k) / 2.0, -1)
    return jnp.einsum("bhqs,bshk,hkd->bqd", w, v, wo)
@case("e_nn_gqa_kv_repeat", f32(4, 4, 2), f32(4, 2, 2), f32(4, 2, 2))
def _(q, k, v):
    k, v = jnp.repeat(k, 2, axis=1), jnp.repeat(v, 2, axis=1)
    s = jnp.einsum("qhd,khd->hqk", q, k) * 0.7
    return jnp.einsum("hqk,khd->qhd", jax.nn.softmax(s, -1), v)
@case("e_nn_kv_cache_decode", f32(8, 4), f32(8, 4), f32(4), f32(4), np.int32(3))
def _(kc, vc, k, v, t):
    kc = lax.dynamic_update_slice(kc, k[None], (t, 0))
    vc = lax.dynamic_update_slice(vc, v[None], (t, 0))
    s = jnp.where(jnp.arange(8) <= t, kc @ k, -jnp.inf)
    return jax.nn.softmax(s) @ vc, kc, vc
@case("e_nn_mlp_mixer_block", f32(2, 6, 4), f32(6, 8), f32(8, 6), f32(4, 8), f32(8, 4))
def _(x, t1, t2, c1, c2):
    def ln(z): return (z - z.mean(-1, keepdims=True)) / jnp.sqrt(z.var(-1, keepdims=True) + 1e-6)
    y = jnp.swapaxes(ln(x), 1, 2)
    x = x + jnp.swapaxes(jax.nn.gelu(y @ t1) @ t2, 1, 2)
    return x + jax.nn.gelu(ln(x) @ c1, approximate=False) @ c2
@case("e_nn_gru_scan", f32(7, 3), f32(3, 12), f32(4, 12), f32(12))
def _(xs, wi, wh, b):
    def cell(h, x):
        gi, gh = x @ wi + b, h @ wh
        r = jax.nn.sigmoid(gi[:4] + gh[:4]); z = jax.nn.sigmoid(gi[4:8] + gh[4:8])
        n = jnp.tanh(gi[8:] + r * gh[8:])
        h = (1 - z) * n + z * h
        return h, h
    return lax.scan(cell, jnp.zeros(4), xs)
@case("e_nn_lstm_bidirectional", f32(5, 3), f32(3, 16), f32(4, 16))
def _(xs, wi, wh):
    def cell(c, x):
        h, cc = c
        g = x @ wi + h @ wh
        i, f, o, u = jnp.split(g, 4)
        cc = jax.nn.sigmoid(f) * cc + jax.nn.sigmoid(i) * jnp.tanh(u)
        h = jax.nn.sigmoid(o) * jnp.tanh(cc)
        return (h, cc), h
    z = (jnp.zeros(4), jnp.zeros(4))
    _, fw = lax.scan(cell, z, xs)
    _, bw = lax.scan(cell, z, xs, reverse=True)
    return jnp.concatenate([fw, bw], -1)
@case("e_nn_conv_block_nhwc_same", f32(2, 6, 6, 3), f32(3, 3, 3, 4), f32(4))
def _(x, k, b):
    y = lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")) + b
    y = jax.nn.relu(y)
    return lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
@case("e_nn_depthwise_separable", f32(1, 5, 5, 4), f32(3, 3, 1, 4), f32(1, 1, 4, 6))
def _(x, dw, pw):
    dn = ("NHWC", "HWIO", "NHWC")
    y = lax.conv_general_dilated(x, dw, (1, 1), "SAME", dimension_numbers=dn, feature_group_count=4)
    return lax.conv_general_dilated(jax.nn.silu(y), pw, (1, 1), "VALID", dimension_numbers=dn)
@case("e_nn_conv_transpose_upsample", f32(1, 4, 4, 2), f32(3, 3, 2, 3))
def _(x, k):
    return lax.conv_transpose(x, k, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
@case("e_nn_embedding_tied_logits", f32(10, 4), np.array([1, 4, 4, 9, 0], np.int32))
def _(emb, toks):
    h = emb[toks]
    h = h / jnp.linalg.norm(h, axis=-1, keepdims=True)
    return h @ emb.T
@case("e_nn_swiglu_ffn", f32(3, 4), f32(4, 8), f32(4, 8), f32(8, 4))
def _(x, w1, w3, w2):
    return (jax.nn.silu(x @ w1) * (x @ w3)) @ w2
@case("e_nn_residual_stack_scan", f32(4, 5, 5), f32(3, 5))
def _(ws, x):
    def layer(h, w): return h + 0.5 * jnp.tanh(h @ w), None
    return lax.scan(layer, x, ws)[0]
@case("e_nn_remat_layers", f32(3, 4, 4), f32(2, 4))
def _(ws, x):
    @jax.checkpoint
    def layer(h, w): return jnp.sin(h @ w), None
    return jax.grad(lambda ws: jnp.sum(lax.scan(layer, x, ws)[0] ** 2))(ws)
@case("e_nn_weight_norm", f32(4, 3), f32(3), f32(5, 4))
def _(v, g, x):
    w = g * v / jnp.linalg.norm(v, axis=0)
    return x @ w
@case("e_nn_spectral_norm_power_iter", f32(5, 4), f32(4))
def _(w, u0):
    def it(u, _):
        v = w @ u; v = v / jnp.linalg.norm(v)
        u = w.T @ v; u = u / jnp.linalg.norm(u)
        return u, None
    u = lax.scan(it, u0, None, length=10)[0]
    v = w @ u
    return w / jnp.linalg.norm(v)
@case("e_nn_sinusoidal_time_embedding", f32(6), f32(8, 8))
def _(t, w):
    half = 4
    f = jnp.exp(-jnp.log(10000.0) * jnp.arange(half) / half)
    e = jnp.concatenate([jnp.sin(t[:, None] * f), jnp.cos(t[:, None] * f)], -1)
    return jax.nn.silu(e @ w)
@case("e_nn_vae_reparam_kl", f32(4, 3), f32(4, 3), K)
def _(mu, logvar, key):
    eps = jax.random.normal(key, mu.shape)
    z = mu + jnp.exp(0.5 * logvar) * eps
    kl = -0.5 * jnp.sum(1 + logvar - mu ** 2 - jnp.exp(logvar), -1)
    return z, kl
@case("e_nn_gumbel_softmax", f32(4, 5), K)
def _(logits, key):
    g = -jnp.log(-jnp.log(jax.random.uniform(key, logits.shape, minval=1e-6, maxval=1.0)))
    y = jax.nn.softmax((logits + g) / 0.5)
    hard = jax.nn.one_hot(jnp.argmax(y, -1), 5)
    return hard + y - lax.stop_gradient(y)
@case("e_nn_maxout_prelu", f32(4, 6), f32(6, 8), f32(4))
def _(x, w, a):
    h = (x @ w).reshape(4, 4, 2).max(-1)
    return jnp.where(h > 0, h, a * h)


# ---- physics and ODEs
def rk4_step(f, y, t, h):
    k1 = f(y, t)
    k2 = f(y + h / 2 * k1, t + h / 2)
    k3 = f(y + h / 2 * k2, t + h / 2)
    k4 = f(y + h * k3, t + h)
    return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


@case("e_ode_rk4_lorenz_scan", np.array([1.0, 1.0, 1.0], np.float32), np.float32(0.01))
def _(y0, h):
    def lorenz(y, t):
        x, yy, z = y
        return jnp.stack([10 * (yy - x), x * (28 - z) - yy, x * yy - 8 / 3 * z])
    def step(c, _):
        y, t = c
        y = rk4_step(lorenz, y, t, h)
        return (y, t + h), y
    return lax.scan(step, (y0, 0.0), None, length=50)[1]
@case("e_ode_rk4_pendulum_vmap", f32(5, 2), np.float32(0.05))
def _(y0s, h):
    def f(y, t): return jnp.array([y[1], -9.81 * jnp.sin(y[0]) - 0.1 * y[1]])
    def run(y0): return lax.fori_loop(0, 40, lambda i, y: rk4_step(f, y, i * h, h), y0)
    return jax.vmap(run)(y0s)
@case("e_ode_leapfrog_harmonic_energy", f32(4), f32(4), np.float32(0.1))
def _(q, p, dt):
    def grad_u(q): return jax.grad(lambda q: 0.5 * jnp.sum(q ** 2) + 0.1 * jnp.sum(q ** 4))(q)
    def step(c, _):
        q, p = c
        p = p - 0.5 * dt * grad_u(q)
        q = q + dt * p
        p = p - 0.5 * dt * grad_u(q)
        return (q, p), 0.5 * jnp.sum(p ** 2) + 0.5 * jnp.sum(q ** 2) + 0.1 * jnp.sum(q ** 4)
    return lax.scan(step, (q, p), None, length=30)
@case("e_ode_nbody_velocity_verlet", f32(5, 2), f32(5, 2), pos(5))
def _(x, v, m):
    def acc(x):
        d = x[None] - x[:, None]
        r2 = jnp.sum(d ** 2, -1) + 0.1
        return jnp.sum(m[None, :, None] * d / r2[..., None] ** 1.5, 1)
    def step(c, _):
        x, v, a = c
        x = x + 0.01 * v + 0.5 * 0.0001 * a
        a2 = acc(x)
        return (x, v + 0.005 * (a + a2), a2), None
    return lax.scan(step, (x, v, acc(x)), None, length=20)[0][:2]
@case("e_ode_implicit_euler_newton_while", f32(3), np.float32(0.1))
def _(y0, h):
    def f(y): return -jnp.array([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [1.0, 0.0, 4.0]]) @ y - 0.1 * y ** 3
    def implicit_step(y):
        def res(z): return z - y - h * f(z)
        def body(c):
            z, i = c
            J = jax.jacfwd(res)(z)
            return z - jnp.linalg.solve(J, res(z)), i + 1
        def cond(c): return (jnp.linalg.norm(res(c[0])) > 1e-5) & (c[1] < 20)
        return lax.while_loop(cond, body, (y, 0))[0]
    return lax.fori_loop(0, 5, lambda i, y: implicit_step(y), y0)
@case("e_ode_heat_equation_explicit", f32(32, lo=0, hi=1), np.float32(0.2))
def _(u, r):
    def step(u, _):
        lap = jnp.roll(u, 1) - 2 * u + jnp.roll(u, -1)
        u = u + r * lap
        return u.at[0].set(0.0).at[-1].set(0.0), None
    return lax.scan(step, u, None, length=40)[0]
@case("e_ode_crank_nicolson_tridiag", f32(8, lo=0, hi=1), np.float32(0.5))
def _(u, r):
    n = 8
    A = jnp.eye(n) * (1 + r) - r / 2 * (jnp.eye(n, k=1) + jnp.eye(n, k=-1))
    B = jnp.eye(n) * (1 - r) + r / 2 * (jnp.eye(n, k=1) + jnp.eye(n, k=-1))
    return lax.fori_loop(0, 6, lambda i, u: jnp.linalg.solve(A, B @ u), u)
@case("e_ode_wave_2d_stencil", f32(8, 8), f32(8, 8))
def _(u, up):
    def step(c, _):
        u, up = c
        lap = (jnp.pad(u, 1)[2:, 1:-1] + jnp.pad(u, 1)[:-2, 1:-1] + jnp.pad(u, 1)[1:-1, 2:] + jnp.pad(u, 1)[1:-1, :-2] - 4 * u)
        return (2 * u - up + 0.1 * lap, u), None
    return lax.scan(step, (u, up), None, length=10)[0][0]
@case("e_ode_adaptive_euler_heun_while", np.float32(1.0), np.float32(2.0))
def _(y0, t_end):
    def f(t, y): return -2.0 * t * y
    def cond(c): return c[0] < t_end
    def body(c):
        t, y, h, n = c
        h = jnp.minimum(h, t_end - t)
        k1 = f(t, y); k2 = f(t + h, y + h * k1)
        err = jnp.abs(h * (k2 - k1) / 2)
        ok = err < 1e-4
        t2 = jnp.where(ok, t + h, t); y2 = jnp.where(ok, y + h * (k1 + k2) / 2, y)
        h2 = h * jnp.clip(0.9 * jnp.sqrt(1e-4 / (err + 1e-12)), 0.2, 5.0)
        return t2, y2, h2, n + 1
    return lax.while_loop(cond, body, (0.0, y0, 0.1, 0))
@case("e_ode_grad_through_rk4", np.float32(0.5), f32(2))
def _(k, y0):
    def final(k):
        def f(y, t): return jnp.array([y[1], -k * y[0]])
        return lax.fori_loop(0, 20, lambda i, y: rk4_step(f, y, 0.0, 0.05), y0)[0]
    return final(k), jax.grad(final)(k)
@case("e_ode_spring_mass_system_expm_free", f32(4), f32(4), pos(4))
def _(x, v, kk):
    K_ = jnp.diag(kk) + jnp.diag(-kk[1:] / 2, 1) + jnp.diag(-kk[1:] / 2, -1)
    def step(c, _):
        x, v = c
        v = v - 0.05 * K_ @ x
        return (x + 0.05 * v, v), x
    return lax.scan(step, (x, v), None, length=25)[1]
@x64case("e_x64_ode_rk4_kepler_energy", np.array([1.0, 0.0, 0.0, 1.1]), np.float64(0.01))
def _(s, h):
    def f(y, t):
        r = jnp.sqrt(y[0] ** 2 + y[1] ** 2)
        return jnp.array([y[2], y[3], -y[0] / r ** 3, -y[1] / r ** 3])
    y = lax.fori_loop(0, 200, lambda i, y: rk4_step(f, y, 0.0, h), s)
    e = 0.5 * (y[2] ** 2 + y[3] ** 2) - 1 / jnp.sqrt(y[0] ** 2 + y[1] ** 2)
    return y, e
@x64case("e_x64_ode_bdf1_stiff_solve", f64(3), np.float64(0.5))
def _(y, h):
    A = jnp.array([[-100.0, 1.0, 0.0], [1.0, -2.0, 1.0], [0.0, 1.0, -0.5]])
    M = jnp.eye(3) - h * A
    return lax.scan(lambda y, _: (jnp.linalg.solve(M, y), y), y, None, length=8)


# ---- probabilistic code
@case("e_prob_gmm_loglik_logsumexp", f32(20), f32(3), pos(3), f32(3))
def _(x, mu, sigma, logits):
    logw = jax.nn.log_softmax(logits)
    lp = -0.5 * ((x[:, None] - mu) / sigma) ** 2 - jnp.log(sigma) - 0.5 * jnp.log(2 * jnp.pi)
    return jnp.sum(jax.scipy.special.logsumexp(lp + logw, axis=1))
@case("e_prob_gmm_em_steps", f32(30), np.array([-1.0, 0.0, 1.0], np.float32), np.ones(3, np.float32), np.full(3, 1 / 3, np.float32))
def _(x, mu, var, w):
    def em(c, _):
        mu, var, w = c
        lp = jnp.log(w) - 0.5 * jnp.log(2 * jnp.pi * var) - 0.5 * (x[:, None] - mu) ** 2 / var
        r = jnp.exp(lp - jax.scipy.special.logsumexp(lp, 1, keepdims=True))
        nk = r.sum(0)
        mu = (r * x[:, None]).sum(0) / nk
        var = (r * (x[:, None] - mu) ** 2).sum(0) / nk + 1e-3
        return (mu, var, nk / x.shape[0]), jax.scipy.special.logsumexp(lp, 1).sum()
    return lax.scan(em, (mu, var, w), None, length=10)
@case("e_prob_hmc_leapfrog_metropolis", f32(3), K)
def _(q0, key):
    def logp(q): return -0.5 * jnp.sum(q ** 2 / jnp.array([1.0, 4.0, 0.25]))
    def hmc_step(c, key):
        q, acc = c
        k1, k2 = jax.random.split(key)
        p0 = jax.random.normal(k1, q.shape)
        def lf(state, _):
            q, p = state
            p = p + 0.05 * jax.grad(logp)(q)
            q = q + 0.1 * p
            p = p + 0.05 * jax.grad(logp)(q)
            return (q, p), None
        (q1, p1), _ = lax.scan(lf, (q, p0), None, length=5)
        logr = logp(q1) - 0.5 * p1 @ p1 - logp(q) + 0.5 * p0 @ p0
        ok = jnp.log(jax.random.uniform(k2)) < logr
        return (jnp.where(ok, q1, q), acc + ok), q
    return lax.scan(hmc_step, (q0, 0), jax.random.split(key, 10))
@case("e_prob_mala_chain_vmap", f32(4, 2), K)
def _(q0, key):
    def logp(q): return -jnp.sum((q - 1.0) ** 2) - 0.5 * jnp.sum(q ** 4) * 0.1
    def chain(q, key):
        def step(q, k):
            g = jax.grad(logp)(q)
            prop = q + 0.01 * g + jnp.sqrt(0.02) * jax.random.normal(k, q.shape)
            return prop, logp(prop)
        return lax.scan(step, q, jax.random.split(key, 8))
    return jax.vmap(chain)(q0, jax.random.split(key, 4))
@case("e_prob_kalman_filter_scan", f32(10, 2), f32(2), spd(2))
def _(ys, m0, P0):
    F = jnp.array([[1.0, 0.1], [0.0, 1.0]]); H = jnp.eye(2); Q = 0.01 * jnp.eye(2); R = 0.1 * jnp.eye(2)
    def step(c, y):
        m, P = c
        m, P = F @ m, F @ P @ F.T + Q
        S = H @ P @ H.T + R
        Kg = jnp.linalg.solve(S, H @ P).T
        m = m + Kg @ (y - H @ m)
        P = (jnp.eye(2) - Kg @ H) @ P
        ll = jax.scipy.stats.multivariate_normal.logpdf(y, H @ m, S)
        return (m, P), (m, ll)
    return lax.scan(step, (m0, P0), ys)
@case("e_prob_bayes_logreg_logpost_grad", f32(4), f32(25, 4), (np.random.RandomState(3).rand(25) > 0.5).astype(np.float32))
def _(w, X, y):
    def logpost(w):
        z = X @ w
        return jnp.sum(y * jax.nn.log_sigmoid(z) + (1 - y) * jax.nn.log_sigmoid(-z)) - 0.5 * w @ w
    return jax.value_and_grad(logpost)(w), jax.hessian(logpost)(w)
@case("e_prob_importance_sampling_ess", K, np.float32(1.5))
def _(key, mu):
    x = jax.random.normal(key, (200,)) * 2.0
    logw = jax.scipy.stats.norm.logpdf(x, mu, 1.0) - jax.scipy.stats.norm.logpdf(x, 0.0, 2.0)
    w = jax.nn.softmax(logw)
    return jnp.sum(w * x), 1.0 / jnp.sum(w ** 2)
@case("e_prob_hmm_forward_logspace", f32(3), f32(3, 3), f32(3, 4), np.array([0, 2, 1, 3, 3, 0], np.int32))
def _(init, trans, emit, obs):
    lt, le = jax.nn.log_softmax(trans, 1), jax.nn.log_softmax(emit, 1)
    a0 = jax.nn.log_softmax(init) + le[:, obs[0]]
    def step(a, o):
        a = jax.scipy.special.logsumexp(a[:, None] + lt, 0) + le[:, o]
        return a, a
    a, alphas = lax.scan(step, a0, obs[1:])
    return jax.scipy.special.logsumexp(a), alphas
@case("e_prob_viterbi_argmax_scan", f32(3, 3), f32(6, 3))
def _(lt, le):
    def step(d, e):
        s = d[:, None] + lt
        return s.max(0) + e, jnp.argmax(s, 0)
    d, bp = lax.scan(step, le[0], le[1:])
    last = jnp.argmax(d)
    def back(s, b): return b[s], b[s]
    _, path = lax.scan(back, last, bp, reverse=True)
    return jnp.concatenate([path, last[None]]), d.max()
@case("e_prob_categorical_entropy_kl", f32(5, 4), f32(5, 4))
def _(a, b):
    pa, la, lb = jax.nn.softmax(a), jax.nn.log_softmax(a), jax.nn.log_softmax(b)
    return -jnp.sum(pa * la, -1), jnp.sum(pa * (la - lb), -1)
@case("e_prob_student_t_robust_fit", f32(30), np.float32(0.0), np.float32(0.0))
def _(x, mu, logs):
    def nll(mu, logs): return -jnp.sum(jax.scipy.stats.t.logpdf(x, 3.0, mu, jnp.exp(logs)))
    def step(c, _):
        g = jax.grad(nll, argnums=(0, 1))(*c)
        return (c[0] - 0.01 * g[0], c[1] - 0.01 * g[1]), nll(*c)
    return lax.scan(step, (mu, logs), None, length=10)
@case("e_prob_gibbs_bivariate_normal", K, np.float32(0.8))
def _(key, rho):
    def step(c, k):
        x, y = c
        k1, k2 = jax.random.split(k)
        x = rho * y + jnp.sqrt(1 - rho ** 2) * jax.random.normal(k1)
        y = rho * x + jnp.sqrt(1 - rho ** 2) * jax.random.normal(k2)
        return (x, y), jnp.stack([x, y])
    return lax.scan(step, (0.0, 0.0), jax.random.split(key, 20))[1]
@case("e_prob_mixture_sampling_categorical", K, f32(3), f32(3), pos(3))
def _(key, logits, mu, s):
    k1, k2 = jax.random.split(key)
    c = jax.random.categorical(k1, logits, shape=(50,))
    return mu[c] + s[c] * jax.random.normal(k2, (50,)), jnp.bincount(c, length=3)
@case("e_prob_elbo_mean_field", f32(3), f32(3), K, f32(10, 3), f32(10))
def _(mu, rho, key, X, y):
    def elbo(mu, rho):
        s = jax.nn.softplus(rho)
        eps = jax.random.normal(key, (8, 3))
        w = mu + s * eps
        ll = jax.vmap(lambda w: jnp.sum(jax.scipy.stats.norm.logpdf(y, X @ w, 1.0)))(w).mean()
        kl = jnp.sum(0.5 * (s ** 2 + mu ** 2 - 1) - jnp.log(s))
        return ll - kl
    return elbo(mu, rho), jax.grad(elbo, argnums=(0, 1))(mu, rho)
@x64case("e_x64_prob_poisson_glm_irls", f64(20, 2, lo=-1, hi=1), np.random.RandomState(5).poisson(2.0, 20).astype(np.float64))
def _(X, y):
    def step(b, _):
        mu = jnp.exp(X @ b)
        H = X.T @ (mu[:, None] * X)
        return b + jnp.linalg.solve(H, X.T @ (y - mu)), jnp.sum(y * (X @ b) - mu)
    return lax.scan(step, jnp.zeros(2), None, length=6)
