"""Held-out programs, batch B (make_heldout.py): measured after batch A's fixes, before their own."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy as jsp
import jax.scipy.special as jss
import numpy as np
from heldout_inputs import c64, case, f32, i32, pos, raw, reseed, spd  # noqa: F401  (each batch uses some)
from jax import lax

reseed(777)

@case("b_swish_beta", f32(9), np.float32(1.5))
def _(x, b): return x * jax.nn.sigmoid(b * x)
@case("b_huber", f32(10), f32(10))
def _(p, y):
    d = jnp.abs(p - y); return jnp.mean(jnp.where(d < 1.0, 0.5 * d ** 2, d - 0.5))
@case("b_focal_loss", f32(6, 3), i32(6, lo=0, hi=3))
def _(z, y):
    p = jax.nn.softmax(z); pt = jnp.take_along_axis(p, y[:, None], 1)[:, 0]
    return -jnp.mean((1 - pt) ** 2 * jnp.log(pt))
@case("b_label_smoothing", f32(4, 5), i32(4, lo=0, hi=5))
def _(z, y):
    t = jax.nn.one_hot(y, 5) * 0.9 + 0.02; return -jnp.sum(t * jax.nn.log_softmax(z), -1)
@case("b_l2_reg_grad", f32(4, 3), f32(8, 4), f32(8, 3))
def _(w, x, y): return jax.grad(lambda w: jnp.mean((x @ w - y) ** 2) + 1e-2 * jnp.sum(w ** 2))(w)
@case("b_mlp_vmap_grad", f32(3, 4), f32(6, 3), f32(6, 4))
def _(w, xs, ys):
    per = jax.vmap(jax.grad(lambda w, x, y: jnp.sum((jnp.tanh(x @ w) - y) ** 2)), in_axes=(None, 0, 0))
    return per(w, xs, ys).mean(0)
@case("b_jacobian_norm", f32(3))
def _(x): return jnp.linalg.norm(jax.jacfwd(lambda x: jnp.sin(x) * jnp.sum(x))(x))
@case("b_hvp_rev", f32(4), f32(4))
def _(x, v): return jax.grad(lambda x: jnp.vdot(jax.grad(lambda y: jnp.sum(jnp.exp(y) * y))(x), v))(x)
@case("b_scan_linear_recurrence", f32(8), np.float32(0.7))
def _(xs, a): return lax.scan(lambda h, x: (a * h + x, h), 0.0, xs)[1]
@case("b_scan_two_carries", f32(6, 2))
def _(xs):
    def f(c, x):
        m, s = c; m2 = jnp.maximum(m, x); return (m2, s * jnp.exp(m - m2) + jnp.exp(x - m2)), m2
    return lax.scan(f, (jnp.full(2, -jnp.inf), jnp.zeros(2)), xs)
@case("b_while_count", f32(5))
def _(x): return lax.while_loop(lambda c: c[0].sum() < 100.0, lambda c: (c[0] * 1.5 + 1, c[1] + 1), (jnp.abs(x), 0))[1]
@case("b_cond_in_vmap_grad", f32(4))
def _(x): return jax.vmap(jax.grad(lambda v: lax.cond(v > 0, jnp.sin, jnp.cos, v)))(x)
@case("b_switch_vmap", f32(5), i32(5, lo=0, hi=3))
def _(x, i): return jax.vmap(lambda x, i: lax.switch(i, [jnp.sin, jnp.exp, jnp.tanh], x))(x, i)
@case("b_fori_matrix", f32(3, 3, lo=-0.5, hi=0.5))
def _(a): return lax.fori_loop(0, 4, lambda i, m: m @ a + jnp.eye(3), jnp.eye(3))
@case("b_cumsum_axis0_int", i32(4, 3))
def _(x): return jnp.cumsum(x, axis=0), jnp.cumulative_sum(x, axis=1, include_initial=True)
@case("b_cummax_grad", f32(7))
def _(x): return jax.grad(lambda x: jnp.sum(lax.cummax(x) ** 2))(x)
@case("b_logcumsumexp_like", f32(7))
def _(x): return jnp.log(jnp.cumsum(jnp.exp(x)))
@case("b_sort_by_key", f32(6), f32(6))
def _(k, v): return v[jnp.argsort(k)]
@case("b_topk_mask", f32(3, 6))
def _(x):
    v, _ = lax.top_k(x, 2); return jnp.where(x >= v[:, -1:], x, 0.0)
@case("b_median_grad", f32(7))
def _(x): return jax.grad(lambda x: jnp.median(x) * 2)(x)
@case("b_argmax_onehot", f32(4, 5))
def _(x): return jax.nn.one_hot(jnp.argmax(x, -1), 5) * x
@case("b_einsum_attention", f32(2, 3, 4), f32(2, 5, 4), f32(2, 5, 4))
def _(q, k, v):
    s = jnp.einsum("bqd,bkd->bqk", q, k); return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, -1), v)
@case("b_einsum_diag_sum", f32(4, 4))
def _(a): return jnp.einsum("ii->i", a), jnp.einsum("ij->", a)
@case("b_outer_product_sum", f32(5), f32(5))
def _(a, b): return jnp.einsum("i,j->ij", a, b).sum(0)
@case("b_solve_batched", np.stack([spd(3), spd(3)]), f32(2, 3))
def _(a, b): return jnp.linalg.solve(a, b[..., None])[..., 0]
@case("b_inv_grad", spd(3))
def _(a): return jax.grad(lambda a: jnp.trace(jnp.linalg.inv(a)))(a)
@case("b_logdet_spd", spd(4))
def _(a): return 2 * jnp.sum(jnp.log(jnp.diag(jnp.linalg.cholesky(a))))
@case("b_gaussian_process", f32(5), f32(5))
def _(x, y):
    k = jnp.exp(-0.5 * (x[:, None] - x[None, :]) ** 2) + 0.1 * jnp.eye(5)
    return jnp.linalg.solve(k, y)
@case("b_qr_solve", f32(5, 3), f32(5))
def _(a, b):
    q, r = jnp.linalg.qr(a); return jsp.linalg.solve_triangular(r, q.T @ b)
@case("b_svd_lowrank", f32(4, 4))
def _(a):
    u, s, vt = jnp.linalg.svd(a); return (u[:, :2] * s[:2]) @ vt[:2]
@case("b_eigh_power", spd(3))
def _(a):
    w, v = jnp.linalg.eigh(a); return (v * w ** 2) @ v.T
@case("b_det_grad", f32(3, 3))
def _(a): return jax.grad(jnp.linalg.det)(a)
@case("b_rfft_filter", f32(16))
def _(x):
    X = jnp.fft.rfft(x); X = X * (jnp.arange(9) < 4); return jnp.fft.irfft(X, n=16)
@case("b_fft_ortho", f32(8))
def _(x): return jnp.abs(jnp.fft.fft(x, norm="ortho")), jnp.fft.ifft(x, norm="forward").imag
@case("b_fft_axis0", f32(4, 3))
def _(x): return jnp.fft.fft(x, axis=0).real
@case("b_rfft2_abs", f32(4, 6))
def _(x): return jnp.abs(jnp.fft.rfft2(x))
@case("b_complex_poly", c64(5))
def _(z): return z ** 3 - 2 * z + 1j
@case("b_complex_abs_grad", f32(4), f32(4))
def _(a, b): return jax.grad(lambda a: jnp.sum(jnp.abs(lax.complex(a, b))))(a)
@case("b_complex_conj_real", c64(3, 3))
def _(z): return (z @ jnp.conj(z).T).real
@case("b_random_multi", np.float32(0.0))
def _(x):
    k = jax.random.key(17); k1, k2, k3 = jax.random.split(k, 3)
    return jax.random.normal(k1, (3,)) + jax.random.uniform(k2, (3,), minval=-1, maxval=1) + jax.random.laplace(k3, (3,)) + x
@case("b_random_shuffle_idx", f32(5))
def _(x): return x[jax.random.permutation(jax.random.key(3), 5)]
@case("b_random_beta", np.float32(2.0))
def _(a): return jax.random.beta(jax.random.key(1), a, 3.0, (3,))
@case("b_random_noise_grad", f32(4))
def _(x): return jax.grad(lambda x: jnp.sum((x + 0.1 * jax.random.normal(jax.random.key(2), (4,))) ** 2))(x)
@case("b_random_bits_uint", np.float32(0.0))
def _(x): return jax.random.bits(jax.random.key(4), (4,))
@case("b_avg_pool_1d_same", f32(10))
def _(x): return lax.reduce_window(x, 0.0, lax.add, (3,), (1,), "SAME") / 3.0
@case("b_max_pool_3d", f32(4, 4, 4))
def _(x): return lax.reduce_window(x, -jnp.inf, lax.max, (2, 2, 2), (2, 2, 2), "VALID")
@case("b_global_avg_pool", f32(2, 5, 5, 3))
def _(x): return jnp.mean(x, axis=(1, 2))
@case("b_custom_jvp_softclip", f32(6))
def _(x):
    @jax.custom_jvp
    def softclip(x): return jnp.tanh(x) * 2
    @softclip.defjvp
    def _j(p, t): return softclip(p[0]), t[0] * 2 / jnp.cosh(p[0]) ** 2
    return softclip(x), jax.grad(lambda x: softclip(x).sum())(x)
@case("b_custom_vjp_straight_through", f32(6))
def _(x):
    @jax.custom_vjp
    def rnd(x): return jnp.round(x)
    rnd.defvjp(lambda x: (jnp.round(x), None), lambda _, g: (g,))
    return jax.grad(lambda x: jnp.sum(rnd(x) * x))(x)
@case("b_special_combo", pos(6))
def _(x): return jss.gammaln(x) - jss.digamma(x) + jss.erf(x / 3) + jss.expit(-x)
@case("b_special_log_ndtr_grad", f32(6))
def _(x): return jax.grad(lambda x: jnp.sum(jss.log_ndtr(x)))(x)
@case("b_stats_logistic_laplace", f32(6))
def _(x): return jsp.stats.logistic.logpdf(x), jsp.stats.laplace.cdf(x)
@case("b_stats_norm_ppf", f32(6, lo=0.05, hi=0.95))
def _(p): return jsp.stats.norm.ppf(p)
@case("b_xlogy_entropy", pos(3, 4))
def _(p):
    p = p / p.sum(-1, keepdims=True); return -jnp.sum(jss.xlogy(p, p), -1)
@case("b_where_nan_safe_grad", f32(6))
def _(x):
    return jax.grad(lambda x: jnp.sum(jnp.where(x > 0, jnp.sqrt(jnp.where(x > 0, x, 1.0)), 0.0)))(x)
@case("b_clip_grad_norm", f32(3, 3))
def _(g):
    n = jnp.sqrt(jnp.sum(g ** 2)); return g * jnp.minimum(1.0, 0.5 / (n + 1e-6))
@case("b_layernorm_grad", f32(3, 6))
def _(x):
    f = lambda x: jnp.sum(((x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)) ** 3)
    return jax.grad(f)(x)
@case("b_conv_grad", f32(1, 1, 6, 6), f32(2, 1, 3, 3))
def _(x, w): return jax.grad(lambda w: jnp.sum(lax.conv(x, w, (1, 1), "SAME") ** 2))(w)
@case("b_depthwise_conv", f32(1, 3, 7), f32(3, 1, 3))
def _(x, w): return lax.conv_general_dilated(x, w, (1,), "VALID", feature_group_count=3)
@case("b_scatter_histogram", i32(12, lo=0, hi=5), f32(12))
def _(i, w): return jnp.zeros(5).at[i].add(w)
@case("b_gather_batched_rows", f32(3, 6), i32(3, 2, lo=0, hi=6))
def _(x, i): return jax.vmap(lambda r, k: r[k])(x, i)
@case("b_dynamic_update_loop", f32(5, 3))
def _(x):
    return lax.fori_loop(0, 5, lambda i, acc: lax.dynamic_update_slice(acc, x[i][None] * i, (i, 0)), jnp.zeros((5, 3)))
@case("b_roll_dynamic", f32(8), np.int32(3))
def _(x, s): return jnp.roll(x, s)
@case("b_argwhere_size", f32(8))
def _(x): return jnp.argwhere(x > 0, size=8, fill_value=-1)[:, 0]
@case("b_nonzero_size", f32(8))
def _(x): return jnp.nonzero(x > 0.5, size=4)[0]
@case("b_clip_int_astype", f32(8))
def _(x): return jnp.clip((x * 100).astype(jnp.int32), -50, 50).astype(jnp.int16)
@case("b_int64_free_mean", i32(3, 4))
def _(x): return jnp.mean(x, axis=0), jnp.std(x)
@case("b_bool_sum_any", f32(4, 4))
def _(x): return jnp.sum(x > 0), jnp.any(jnp.isnan(x)), jnp.mean(x > 0)
@case("b_linspace_endpoint", f32(5))
def _(x): return x * jnp.linspace(0.0, 1.0, 5, endpoint=False) + jnp.logspace(0, 1, 5)
@case("b_tri_masks", f32(4, 4))
def _(x): return jnp.where(jnp.tri(4, k=-1, dtype=bool), x, -x)
@case("b_vander", f32(4))
def _(x): return jnp.vander(x, 3)
@case("b_cov_corrcoef", f32(3, 6))
def _(x): return jnp.cov(x), jnp.corrcoef(x)
@case("b_polyfit_like", f32(6))
def _(y):
    x = jnp.linspace(0, 1, 6); A = jnp.stack([x ** 2, x, jnp.ones(6)], 1)
    return jnp.linalg.solve(A.T @ A, A.T @ y)
@case("b_cumulative_prod_reverse", f32(5))
def _(x): return lax.cumprod(x, reverse=True)
@case("b_reduce_and_or_xor", i32(6, lo=0, hi=8))
def _(x): return lax.reduce_and(x > 2, (0,)), lax.reduce_xor(x, (0,))
