"""Held-out programs, batch A (make_heldout.py): measured before the reader was fixed for them."""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import jax.scipy as jsp
import jax.scipy.special as jss
import numpy as np
from heldout_inputs import c64, case, f32, i32, pos, raw, reseed, spd  # noqa: F401  (each batch uses some)
from jax import lax


# ---- numpy-style math
@case("softplus_manual", f32(7))
def _(x): return jnp.logaddexp(x, 0.0)
@case("normalize_l2", f32(4, 5))
def _(x): return x / jnp.linalg.norm(x, axis=-1, keepdims=True)
@case("cosine_sim", f32(3, 6), f32(5, 6))
def _(a, b):
    a = a / jnp.sqrt(jnp.sum(a * a, -1, keepdims=True)); b = b / jnp.sqrt(jnp.sum(b * b, -1, keepdims=True))
    return a @ b.T
@case("pairwise_dist", f32(5, 3))
def _(x): return jnp.sqrt(jnp.sum((x[:, None, :] - x[None, :, :]) ** 2, -1) + 1e-6)
@case("polyval", f32(9))
def _(x): return jnp.polyval(jnp.asarray([1.0, -2.0, 0.5, 3.0]), x)
@case("horner_loop", f32(9))
def _(x):
    acc = jnp.zeros_like(x)
    for c in (0.3, -1.0, 2.0, 0.7):
        acc = acc * x + c
    return acc
@case("clip_by_norm", f32(8))
def _(x):
    n = jnp.linalg.norm(x); return jnp.where(n > 1.0, x / n, x)
@case("mean_var_axis", f32(3, 4, 5))
def _(x): return jnp.mean(x, axis=(0, 2)), jnp.var(x, axis=(0, 2), ddof=1)
@case("argsort_desc", f32(10))
def _(x): return jnp.argsort(-x)
@case("sort_2d_axis0", f32(6, 4))
def _(x): return jnp.sort(x, axis=0)
@case("lexsort_like", f32(8), i32(8))
def _(x, k): return jnp.lexsort((x, k))
@case("unique_counts_static", i32(12, lo=0, hi=4))
def _(x): return jnp.bincount(x, length=4)
@case("histogram_fixed", f32(20))
def _(x): return jnp.histogram(x, bins=5, range=(-2.0, 2.0))[0]
@case("searchsorted", f32(6), f32(9))
def _(a, v): return jnp.searchsorted(jnp.sort(a), v)
@case("digitize", f32(10))
def _(x): return jnp.digitize(x, jnp.linspace(-2, 2, 5))
@case("interp", f32(9))
def _(x): return jnp.interp(x, jnp.linspace(-2, 2, 5), jnp.linspace(0, 1, 5) ** 2)
@case("cumsum_reverse", f32(4, 6))
def _(x): return jnp.flip(jnp.cumsum(jnp.flip(x, 1), 1), 1)
@case("cummin", f32(4, 6))
def _(x): return lax.cummin(x, axis=0)
@case("cumsum_reverse_lax", f32(4, 6))
def _(x): return lax.cumsum(x, axis=1, reverse=True)
@case("cumprod_int", i32(10, lo=1, hi=3))
def _(x): return jnp.cumprod(x)
@case("diff", f32(10))
def _(x): return jnp.diff(x, n=2)
@case("ediff1d_like", f32(10))
def _(x): return jnp.ediff1d(x)
@case("trapezoid", f32(11))
def _(x): return jnp.trapezoid(x, dx=0.1)
@case("cross", f32(5, 3), f32(5, 3))
def _(a, b): return jnp.cross(a, b)
@case("kron", f32(2, 3), f32(3, 2))
def _(a, b): return jnp.kron(a, b)
@case("tensordot", f32(3, 4, 5), f32(4, 5, 2))
def _(a, b): return jnp.tensordot(a, b, axes=2)
@case("einsum_batch", f32(2, 3, 4), f32(2, 4, 5))
def _(a, b): return jnp.einsum("bij,bjk->bik", a, b)
@case("einsum_trace_outer", f32(4, 4), f32(3))
def _(a, v): return jnp.einsum("ii,j->j", a, v)
@case("einsum_three", f32(3, 4), f32(4, 5), f32(5, 2))
def _(a, b, c): return jnp.einsum("ij,jk,kl->il", a, b, c)
@case("einsum_bilinear", f32(6, 3), f32(3, 3), f32(6, 3))
def _(x, w, y): return jnp.einsum("ni,ij,nj->n", x, w, y)
@case("matrix_power", f32(3, 3, lo=-0.5, hi=0.5))
def _(a): return jnp.linalg.matrix_power(a, 3)
@case("where_three", f32(12))
def _(x): return jnp.where(x > 1, 1.0, jnp.where(x < -1, -1.0, x ** 3))
@case("select_piecewise", f32(12))
def _(x): return jnp.piecewise(x, [x < 0, x >= 0], [lambda t: -t, lambda t: t ** 2])
@case("logical_ops", f32(10), f32(10))
def _(a, b): return jnp.logical_xor(a > 0, b > 0) | jnp.logical_not(a < b)
@case("isclose", f32(10), f32(10))
def _(a, b): return jnp.isclose(a, a + b * 1e-7)
@case("allclose", f32(10))
def _(a): return jnp.allclose(a, a * 1.0000001)
@case("count_nonzero", f32(4, 5))
def _(x): return jnp.count_nonzero(x > 0, axis=1)
@case("nanmax", f32(4, 5))
def _(x): return jnp.nanmax(jnp.where(x > 1.5, jnp.nan, x), axis=0)
@case("nansum", f32(4, 5))
def _(x): return jnp.nansum(jnp.where(x > 1.5, jnp.nan, x), axis=1)
@case("average_weights", f32(4, 5), pos(5))
def _(x, w): return jnp.average(x, axis=1, weights=w)
@case("percentile", f32(3, 9))
def _(x): return jnp.percentile(x, 30.0, axis=1)
@case("quantile_linear", f32(11))
def _(x): return jnp.quantile(x, 0.75)
@case("meshgrid_sum", f32(4), f32(3))
def _(a, b):
    X, Y = jnp.meshgrid(a, b); return X * 2 + Y
@case("indices_grid", f32(3, 4))
def _(x):
    i, j = jnp.indices((3, 4)); return x * (i - j)
@case("take_along_axis", f32(4, 6))
def _(x): return jnp.take_along_axis(x, jnp.argsort(x, axis=1), axis=1)
@case("put_along", f32(4, 6))
def _(x): return jnp.put_along_axis(x, jnp.argmax(x, axis=1, keepdims=True), 0.0, axis=1, inplace=False)
@case("boolean_mask_where", f32(10))
def _(x): return jnp.sum(jnp.where(x > 0, x, 0.0)) / jnp.maximum(jnp.sum(x > 0), 1)
@case("at_mul_min", f32(8), i32(4, lo=0, hi=8))
def _(x, i): return x.at[i].multiply(2.0).at[i].min(0.5)
@case("at_get_clip", f32(8), i32(5, lo=-3, hi=12))
def _(x, i): return x.at[i].get(mode="clip")
@case("at_get_fill", f32(8), i32(5, lo=-3, hi=12))
def _(x, i): return x.at[i].get(mode="fill", fill_value=-7.0)
@case("segment_sum", f32(10), i32(10, lo=0, hi=4))
def _(x, s): return jax.ops.segment_sum(x, s, num_segments=4)
@case("segment_max", f32(10), i32(10, lo=0, hi=4))
def _(x, s): return jax.ops.segment_max(x, s, num_segments=4)
@case("fancy_2d", f32(5, 6), i32(3, lo=0, hi=5), i32(3, lo=0, hi=6))
def _(x, i, j): return x[i, j] + x[i][:, j].sum(1)
@case("slice_step_neg", f32(10))
def _(x): return x[::-2] + x[8::-4].sum()
@case("newaxis_ellipsis", f32(2, 3, 4))
def _(x): return x[..., None, 1:3] * x[:, None, :, 1:3].transpose(0, 2, 1, 3)
@case("reshape_minus1", f32(4, 6))
def _(x): return x.reshape(-1, 3).sum(0)
@case("hstack_vstack", f32(3, 2), f32(3, 2))
def _(a, b): return jnp.vstack([jnp.hstack([a, b]), jnp.hstack([b, a])])
@case("atleast_broadcast", f32(3))
def _(x): return jnp.broadcast_to(jnp.atleast_2d(x), (4, 3)) * 2
@case("rot90", f32(3, 4))
def _(x): return jnp.rot90(x)
@case("array_split_uneven", f32(10))
def _(x): return [s.sum() for s in jnp.array_split(x, 3)]
@case("block_matrix", f32(2, 2), f32(2, 2))
def _(a, b): return jnp.block([[a, b], [b, a]])
@case("triu_indices_sum", f32(4, 4))
def _(x): return x[jnp.triu_indices(4, 1)]
@case("diag_embed", f32(5))
def _(x): return jnp.diag(x) + jnp.diagflat(x[:3], 2)
@case("fill_diagonal", f32(4, 4))
def _(x): return jnp.fill_diagonal(x, 0.0, inplace=False)
@case("int_ops", i32(10, lo=1, hi=50), i32(10, lo=1, hi=9))
def _(a, b): return a // b, a % b, jnp.sign(a - 25), jnp.abs(a - 25) ** 2
@case("uint8_ops", raw().randint(0, 255, 10).astype(np.uint8))
def _(x): return (x >> 2) + (x & 7), x.astype(jnp.float32) / 255.0
@case("float16_roundtrip", f32(10))
def _(x): return x.astype(jnp.float16).astype(jnp.float32) * 2
@case("bool_reduce", f32(4, 5))
def _(x): return jnp.any(x > 1, axis=0) & jnp.all(x > -1.9, axis=0)
@case("round_decimals", f32(10))
def _(x): return jnp.round(x, 2)
@case("fmod_ldexp", f32(10), f32(10))
def _(a, b): return jnp.fmod(a, jnp.abs(b) + 0.5), jnp.ldexp(a, 3)
@case("frexp", f32(10))
def _(x): return jnp.frexp(x)
@case("modf", f32(10))
def _(x): return jnp.modf(x)
@case("divmod", f32(10), pos(10))
def _(a, b): return jnp.divmod(a, b)
@case("angle_unwrap", f32(10))
def _(x): return jnp.unwrap(jnp.cumsum(x))
@case("convolve_valid", f32(12), f32(3))
def _(a, k): return jnp.convolve(a, k, mode="valid")
@case("correlate_same", f32(12), f32(4))
def _(a, k): return jnp.correlate(a, k, mode="same")
@case("outer_sub_argmin", f32(6), f32(4))
def _(a, b): return jnp.argmin(jnp.abs(a[:, None] - b[None, :]), axis=1)

# ---- jax.nn
@case("nn_softmax_axis0", f32(5, 4))
def _(x): return jax.nn.softmax(x, axis=0)
@case("nn_log_softmax_where", f32(3, 5))
def _(x): return jax.nn.log_softmax(x, axis=-1, where=x > -1.5)
@case("nn_logsumexp_b", f32(3, 5), pos(3, 5))
def _(x, b): return jax.nn.logsumexp(x, axis=1, b=b)
@case("nn_one_hot_int", i32(6, lo=0, hi=4))
def _(i): return jax.nn.one_hot(i, 4)
@case("cross_entropy", f32(6, 4), i32(6, lo=0, hi=4))
def _(logits, y):
    return -jnp.mean(jnp.sum(jax.nn.one_hot(y, 4) * jax.nn.log_softmax(logits), -1))
@case("nn_sparse_plus", f32(10))
def _(x): return jax.nn.sparse_plus(x), jax.nn.sparse_sigmoid(x)
@case("nn_squareplus", f32(10))
def _(x): return jax.nn.squareplus(x)
@case("nn_relu_grad", f32(10))
def _(x): return jax.grad(lambda x: jnp.sum(jax.nn.relu(x) ** 2))(x)
@case("nn_gelu_grad", f32(10))
def _(x): return jax.grad(lambda x: jnp.sum(jax.nn.gelu(x)))(x)
@case("nn_silu_vmap", f32(3, 4))
def _(x): return jax.vmap(jax.nn.silu)(x)
@case("nn_init_like", f32(4, 3))
def _(x): return x * jnp.sqrt(2.0 / x.shape[0])
@case("nn_dot_product_attention", f32(1, 4, 2, 8), f32(1, 5, 2, 8), f32(1, 5, 2, 8))
def _(q, k, v): return jax.nn.dot_product_attention(q, k, v)
@case("nn_causal_attention", f32(6, 4), f32(6, 4), f32(6, 4))
def _(q, k, v):
    s = q @ k.T / 2.0
    mask = jnp.tril(jnp.ones((6, 6), bool))
    return jax.nn.softmax(jnp.where(mask, s, -1e9), axis=-1) @ v

# ---- scipy.special
@case("sp_betaln", pos(8), pos(8))
def _(a, b): return jss.betaln(a, b)
@case("sp_gamma", pos(8))
def _(x): return jss.gamma(x)
@case("sp_polygamma1", pos(8))
def _(x): return jss.polygamma(1, x)
@case("sp_zeta", pos(8))
def _(x): return jss.zeta(x + 1.5, 2.0)
@case("sp_xlog1py", pos(8), f32(8, lo=-0.5, hi=2))
def _(x, y): return jss.xlog1py(x, y)
@case("sp_rel_entr", pos(8), pos(8))
def _(x, y): return jss.rel_entr(x, y), jss.kl_div(x, y)
@case("sp_softmax", f32(3, 4))
def _(x): return jss.softmax(x, axis=0)
@case("sp_logsumexp_sign", f32(6))
def _(x): return jss.logsumexp(x, b=jnp.sign(x) + 2.0, return_sign=True)
@case("sp_erfcx_like", f32(8, lo=0, hi=3))
def _(x): return jnp.exp(x * x) * jss.erfc(x)
@case("sp_i0_i1", f32(8))
def _(x): return jss.i0(x), jss.i1(x)
@case("sp_multigammaln", pos(6))
def _(x): return jss.multigammaln(x + 2.0, 3)
@case("sp_betainc", pos(6), pos(6), f32(6, lo=0.05, hi=0.95))
def _(a, b, x): return jss.betainc(a, b, x)
@case("sp_expi_like", pos(6))
def _(x): return jss.exp1(x)
@case("sp_bernoulli_like", f32(6))
def _(x): return jss.log_softmax(x) if hasattr(jss, "log_softmax") else jax.nn.log_softmax(x)
@case("stats_norm_logpdf", f32(8))
def _(x): return jsp.stats.norm.logpdf(x, 0.5, 2.0), jsp.stats.norm.cdf(x)
@case("stats_gamma_logpdf", pos(8))
def _(x): return jsp.stats.gamma.logpdf(x, 2.5)
@case("stats_beta_logpdf", f32(8, lo=0.05, hi=0.95))
def _(x): return jsp.stats.beta.logpdf(x, 2.0, 3.0)
@case("stats_poisson_logpmf", i32(8, lo=0, hi=9))
def _(k): return jsp.stats.poisson.logpmf(k, 3.0)
@case("stats_mvn_logpdf", f32(4, 3))
def _(x): return jsp.stats.multivariate_normal.logpdf(x, jnp.zeros(3), jnp.eye(3) * 2.0)
@case("stats_t_logpdf", f32(8))
def _(x): return jsp.stats.t.logpdf(x, 4.0)

# ---- control flow
@case("fori_unroll", f32(4))
def _(x): return lax.fori_loop(0, 6, lambda i, c: c * 0.5 + i, x, unroll=2)
@case("fori_tuple_carry", f32(4), f32(4))
def _(a, b):
    def body(i, c):
        x, y = c; return (y, x + y * 0.1)
    return lax.fori_loop(0, 7, body, (a, b))
@case("while_newton_sqrt", pos(5))
def _(a):
    def cond(c): return jnp.logical_and(c[1] < 20, jnp.max(jnp.abs(c[0] * c[0] - a)) > 1e-5)
    def body(c): return (0.5 * (c[0] + a / c[0]), c[1] + 1)
    return lax.while_loop(cond, body, (a, 0))
@case("scan_ema", f32(10, 3))
def _(xs):
    return lax.scan(lambda m, x: (0.9 * m + 0.1 * x, m), xs[0], xs[1:])
@case("scan_length_only", f32(3))
def _(x):
    return lax.scan(lambda c, _: (c * 1.5 - 0.2, c.sum()), x, None, length=5)
@case("scan_pytree", f32(4), f32(6, 4))
def _(h, xs):
    def step(c, x):
        return {"h": jnp.tanh(c["h"] + x), "n": c["n"] + 1}, (c["h"] * 2, x.sum())
    return lax.scan(step, {"h": h, "n": jnp.int32(0)}, xs)
@case("scan_unroll", f32(8))
def _(xs): return lax.scan(lambda c, x: (c + x * c, c), 1.0, xs, unroll=3)
@case("associative_scan_add", f32(9))
def _(x): return lax.associative_scan(jnp.add, x)
@case("associative_scan_max", f32(4, 6))
def _(x): return lax.associative_scan(jnp.maximum, x, axis=1)
@case("cond_operands", f32(3), f32(3), f32())
def _(a, b, p): return lax.cond(p > 0, lambda a, b: (a + b, a * b), lambda a, b: (a - b, b), a, b)
@case("cond_int_pred", f32(3), np.int32(1))
def _(x, i): return lax.cond(i, lambda: x * 2, lambda: -x)
@case("switch_clamped", f32(3), np.int32(7))
def _(x, i): return lax.switch(i, [lambda x: x, lambda x: x ** 2, jnp.exp], x)
@case("select_n", f32(5), f32(5), i32(5, lo=0, hi=3))
def _(a, b, i): return lax.select_n(i, a, b, a * b)
@case("nested_scan_cond", f32(5, 2))
def _(xs):
    def step(c, x): return lax.cond(jnp.sum(x) > 0, lambda: c + x, lambda: c * 0.5), c[0]
    return lax.scan(step, jnp.zeros(2), xs)
@case("while_in_scan", f32(4))
def _(xs):
    def step(c, x):
        y = lax.while_loop(lambda v: v < 5.0, lambda v: v * 2 + 0.1, jnp.abs(x) + 0.1)
        return c + y, y
    return lax.scan(step, 0.0, xs)
@case("fori_dynamic_update", f32(6))
def _(x):
    return lax.fori_loop(0, 5, lambda i, v: v.at[i + 1].set(v[i] * 0.5 + v[i + 1]), x)
@case("map_batched", f32(6, 3))
def _(x): return lax.map(lambda r: jnp.outer(r, r).sum(), x, batch_size=2)
@case("stop_gradient", f32(5))
def _(x): return jax.grad(lambda x: jnp.sum(x * lax.stop_gradient(x) ** 2))(x)
@case("checkpoint_grad", f32(5))
def _(x): return jax.grad(jax.checkpoint(lambda x: jnp.sum(jnp.sin(jnp.sin(x)))))(x)
@case("remat_policy", f32(4, 4))
def _(x):
    f = jax.checkpoint(lambda x: jnp.tanh(x @ x).sum(), policy=jax.checkpoint_policies.dots_saveable)
    return jax.grad(f)(x)

# ---- transforms
@case("jvp_tanh", f32(6), f32(6))
def _(x, t): return jax.jvp(lambda x: jnp.tanh(x) * x, (x,), (t,))
@case("vjp_pair", f32(4), f32(4))
def _(x, ct):
    y, f = jax.vjp(lambda x: (jnp.sin(x), jnp.sum(x ** 2)), x)
    return f((ct, 1.0))
@case("linearize", f32(5), f32(5))
def _(x, t):
    y, f = jax.linearize(lambda x: jnp.exp(x).sum() * x, x); return y, f(t)
@case("grad_argnums", f32(3), f32(3))
def _(a, b): return jax.grad(lambda a, b: jnp.sum(a * b ** 2), argnums=(0, 1))(a, b)
@case("grad_has_aux", f32(4))
def _(x): return jax.grad(lambda x: (jnp.sum(x ** 3), x.mean()), has_aux=True)(x)
@case("value_and_grad_mlp", f32(3, 4), f32(4), f32(5, 3), f32(5, 4))
def _(w, b, x, y):
    return jax.value_and_grad(lambda w, b: jnp.mean((jax.nn.sigmoid(x @ w + b) - y) ** 2), argnums=(0, 1))(w, b)
@case("vmap_in_axes_none", f32(4, 3), f32(3))
def _(x, w): return jax.vmap(lambda r, w: jnp.dot(r, w) * w, in_axes=(0, None))(x, w)
@case("vmap_out_axes", f32(4, 3))
def _(x): return jax.vmap(lambda r: r * 2, out_axes=1)(x)
@case("vmap_axis1", f32(3, 5))
def _(x): return jax.vmap(jnp.sum, in_axes=1)(x)
@case("vmap_nested", f32(2, 3, 4))
def _(x): return jax.vmap(jax.vmap(lambda v: jnp.max(v) - v))(x)
@case("vmap_sort", f32(4, 5))
def _(x): return jax.vmap(jnp.sort)(x)
@case("vmap_top_k", f32(4, 7))
def _(x): return jax.vmap(lambda r: lax.top_k(r, 2))(x)
@case("vmap_cumsum", f32(3, 6))
def _(x): return jax.vmap(jnp.cumsum)(x)
@case("vmap_matmul_pytree", {"w": f32(3, 2), "b": f32(2)}, f32(5, 3))
def _(p, x): return jax.vmap(lambda r: r @ p["w"] + p["b"])(x)
@case("vmap_scan", f32(3, 5))
def _(x): return jax.vmap(lambda r: lax.scan(lambda c, v: (c + v, c), 0.0, r))(x)
@case("vmap_fori", f32(3, 4))
def _(x): return jax.vmap(lambda r: lax.fori_loop(0, 3, lambda i, c: jnp.sin(c) + r, r))(x)
@case("jacfwd_matrix", f32(3))
def _(x): return jax.jacfwd(lambda x: jnp.outer(x, jnp.cos(x)))(x)
@case("jacrev_softmax", f32(4))
def _(x): return jax.jacrev(jax.nn.softmax)(x)
@case("hessian_vector", f32(4), f32(4))
def _(x, v):
    f = lambda x: jnp.sum(jnp.tanh(x) ** 2)
    return jax.jvp(jax.grad(f), (x,), (v,))[1]
@case("grad_of_while", f32())
def _(x): return jax.grad(lambda x: lax.fori_loop(0, 4, lambda i, c: c * jnp.sin(c), x))(x)
@case("grad_of_sort", f32(6))
def _(x): return jax.grad(lambda x: jnp.sum(jnp.sort(x) * jnp.arange(6.0)))(x)
@case("grad_of_max", f32(3, 4))
def _(x): return jax.grad(lambda x: jnp.sum(jnp.max(x, axis=1) ** 2))(x)
@case("grad_of_cumsum", f32(6))
def _(x): return jax.grad(lambda x: jnp.sum(jnp.cumsum(x) ** 2))(x)
@case("grad_of_cumprod", f32(6))
def _(x): return jax.grad(lambda x: jnp.sum(jnp.cumprod(x)))(x)
@case("grad_of_gather", f32(6), i32(4, lo=0, hi=6))
def _(x, i): return jax.grad(lambda x: jnp.sum(x[i] ** 2))(x)
@case("grad_of_where", f32(6))
def _(x): return jax.grad(lambda x: jnp.sum(jnp.where(x > 0, jnp.sqrt(jnp.abs(x) + 1), x ** 2)))(x)
@case("grad_of_norm", f32(5))
def _(x): return jax.grad(lambda x: jnp.linalg.norm(x))(x)
@case("grad_of_logsumexp", f32(2, 5))
def _(x): return jax.grad(lambda x: jss.logsumexp(x, axis=1).sum())(x)
@case("grad_of_top_k", f32(7))
def _(x): return jax.grad(lambda x: lax.top_k(x, 3)[0].sum())(x)
@case("grad_of_pow", pos(5), f32(5))
def _(x, p): return jax.grad(lambda x, p: jnp.sum(x ** p), argnums=(0, 1))(x, p)
@case("grad_of_dynamic_slice", f32(8), np.int32(3))
def _(x, i): return jax.grad(lambda x: jnp.sum(lax.dynamic_slice(x, (i,), (3,)) ** 2))(x)
@case("grad_of_erf", f32(6))
def _(x): return jax.grad(lambda x: jnp.sum(jss.erf(x) * jss.gammaln(jnp.abs(x) + 1)))(x)

# ---- custom derivatives
@jax.custom_jvp
def _safe_log(x): return jnp.log(x)
@_safe_log.defjvp
def _(primals, tangents):
    x, = primals; t, = tangents
    return jnp.log(x), t / jnp.maximum(x, 1e-3)
@case("custom_jvp_call", pos(5))
def _(x): return _safe_log(x) * 2
@case("custom_jvp_grad", pos(5))
def _(x): return jax.grad(lambda x: jnp.sum(_safe_log(x)))(x)

@jax.custom_vjp
def _clip_grad(x): return x
def _cg_fwd(x): return x, None
def _cg_bwd(_, g): return (jnp.clip(g, -0.5, 0.5),)
_clip_grad.defvjp(_cg_fwd, _cg_bwd)
@case("custom_vjp_call", f32(5))
def _(x): return _clip_grad(x) * 3
@case("custom_vjp_grad", f32(5))
def _(x): return jax.grad(lambda x: jnp.sum(_clip_grad(x) * x * 3))(x)

@partial(jax.custom_jvp, nondiff_argnums=(1,))
def _scaled_tanh(x, s): return jnp.tanh(x) * s
@_scaled_tanh.defjvp
def _(s, primals, tangents):
    x, = primals; t, = tangents
    return _scaled_tanh(x, s), s * (1 - jnp.tanh(x) ** 2) * t
@case("custom_jvp_nondiff", f32(5))
def _(x): return jax.grad(lambda x: jnp.sum(_scaled_tanh(x, 3.0)))(x), _scaled_tanh(x, 2.0)

# ---- random
@case("random_normal", np.array([0, 42], np.uint32))
def _(k): return jax.random.normal(jax.random.wrap_key_data(k, impl="threefry2x32"), (5,))
@case("random_key_uniform", np.float32(0.0))
def _(x): return jax.random.uniform(jax.random.key(7), (4, 3)) + x
@case("random_split_normal", np.float32(1.0))
def _(x):
    k1, k2 = jax.random.split(jax.random.key(3)); return jax.random.normal(k1, (3,)) * x + jax.random.normal(k2, (3,))
@case("random_bernoulli", np.float32(0.3))
def _(p): return jax.random.bernoulli(jax.random.key(0), p, (10,))
@case("random_randint", np.float32(0.0))
def _(x): return jax.random.randint(jax.random.key(11), (8,), 0, 10)
@case("random_permutation", f32(6))
def _(x): return jax.random.permutation(jax.random.key(5), x)
@case("random_choice", f32(6))
def _(x): return jax.random.choice(jax.random.key(2), x, (3,), replace=False)
@case("random_categorical", f32(4, 5))
def _(logits): return jax.random.categorical(jax.random.key(9), logits)
@case("random_dropout", f32(4, 5))
def _(x):
    keep = jax.random.bernoulli(jax.random.key(1), 0.8, x.shape); return jnp.where(keep, x / 0.8, 0.0)
@case("random_truncated_normal", np.float32(0.0))
def _(x): return jax.random.truncated_normal(jax.random.key(4), -1.0, 1.0, (6,)) + x
@case("random_gumbel_exponential", np.float32(0.0))
def _(x):
    k = jax.random.key(6); return jax.random.gumbel(k, (4,)) + jax.random.exponential(k, (4,)) + x
@case("random_fold_in_loop", np.float32(0.0))
def _(x):
    return lax.fori_loop(0, 3, lambda i, c: c + jax.random.uniform(jax.random.fold_in(jax.random.key(0), i)), x)
@case("random_old_prngkey", np.float32(0.0))
def _(x): return jax.random.normal(jax.random.PRNGKey(21), (3, 2)) + x
@case("random_vmap_keys", np.float32(0.0))
def _(x):
    keys = jax.random.split(jax.random.key(8), 4)
    return jax.vmap(lambda k: jax.random.uniform(k, (2,)))(keys) + x
@case("random_gamma", pos(4))
def _(a): return jax.random.gamma(jax.random.key(13), a)

# ---- pooling / windows
@case("avg_pool_2d", f32(6, 6))
def _(x): return lax.reduce_window(x, 0.0, lax.add, (2, 2), (2, 2), "VALID") / 4.0
@case("max_pool_nhwc", f32(1, 6, 6, 2))
def _(x): return lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
@case("max_pool_explicit_pad", f32(5, 5))
def _(x): return lax.reduce_window(x, -jnp.inf, lax.max, (3, 3), (1, 1), ((1, 1), (0, 2)))
@case("avg_pool_grad", f32(6, 6))
def _(x): return jax.grad(lambda x: jnp.sum(lax.reduce_window(x, 0.0, lax.add, (3, 3), (1, 1), "SAME") ** 2))(x)
@case("max_pool_nhwc_grad", f32(1, 4, 4, 2))
def _(x): return jax.grad(lambda x: jnp.sum(lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")))(x)
@case("moving_average_conv", f32(16))
def _(x): return jnp.convolve(x, jnp.ones(4) / 4, mode="valid")
@case("conv2d_nchw", f32(1, 2, 6, 6), f32(3, 2, 3, 3))
def _(x, w): return lax.conv_general_dilated(x, w, (1, 1), "SAME")
@case("conv1d_stride", f32(2, 3, 10), f32(4, 3, 3))
def _(x, w): return lax.conv(x, w, (2,), "VALID")

# ---- sorting / top_k
@case("sort_multi_operand", f32(6), i32(6))
def _(x, y): return lax.sort((x, y), num_keys=1)
@case("sort_descending", f32(3, 5))
def _(x): return jnp.sort(x, axis=-1, descending=True)
@case("argsort_stable", i32(10, lo=0, hi=3))
def _(x): return jnp.argsort(x, stable=True)
@case("top_k_2d", f32(3, 8))
def _(x): return lax.top_k(x, 4)
@case("approx_max_k", f32(3, 8))
def _(x): return lax.approx_max_k(x, 2)
@case("partition", f32(9))
def _(x): return jnp.partition(x, 4)[4]
@case("argpartition_top", f32(9))
def _(x): return jnp.sort(x[jnp.argpartition(x, 6)[6:]])
@case("unique_size", i32(10, lo=0, hi=5))
def _(x): return jnp.unique(x, size=5, fill_value=-1)
@case("sort_int_rows", i32(4, 5))
def _(x): return jnp.sort(x, axis=1), jnp.argmax(x, axis=0)

# ---- linalg
@case("linalg_solve", spd(4), f32(4))
def _(a, b): return jnp.linalg.solve(a, b)
@case("linalg_inv", spd(3))
def _(a): return jnp.linalg.inv(a)
@case("linalg_cholesky", spd(4))
def _(a): return jnp.linalg.cholesky(a)
@case("linalg_det", f32(3, 3))
def _(a): return jnp.linalg.det(a)
@case("linalg_slogdet", spd(3))
def _(a): return jnp.linalg.slogdet(a)
@case("linalg_qr", f32(4, 3))
def _(a):
    q, r = jnp.linalg.qr(a); return q @ r
@case("linalg_eigh_vals", spd(4))
def _(a): return jnp.linalg.eigvalsh(a)
@case("linalg_svd_vals", f32(4, 3))
def _(a): return jnp.linalg.svd(a, compute_uv=False)
@case("linalg_lstsq", f32(6, 3), f32(6))
def _(a, b): return jnp.linalg.lstsq(a, b)[0]
@case("linalg_triangular", spd(4), f32(4, 2))
def _(a, b): return jsp.linalg.solve_triangular(jnp.linalg.cholesky(a), b, lower=True)
@case("linalg_cho_solve", spd(4), f32(4))
def _(a, b): return jsp.linalg.cho_solve(jsp.linalg.cho_factor(a), b)
@case("linalg_pinv", f32(4, 3))
def _(a): return jnp.linalg.pinv(a)
@case("linalg_norm_fro_nuc", f32(3, 3))
def _(a): return jnp.linalg.norm(a, "fro"), jnp.linalg.norm(a, ord=1), jnp.linalg.norm(a, ord=jnp.inf)
@case("linalg_vector_norms", f32(6))
def _(x): return jnp.linalg.norm(x, 1), jnp.linalg.norm(x, jnp.inf), jnp.linalg.norm(x, 3)
@case("linalg_grad_solve", spd(3), f32(3))
def _(a, b): return jax.grad(lambda a: jnp.sum(jnp.linalg.solve(a, b)))(a)
@case("linalg_expm", f32(3, 3, lo=-0.5, hi=0.5))
def _(a): return jsp.linalg.expm(a)
@case("linalg_eigh_vecs", spd(3))
def _(a):
    w, v = jnp.linalg.eigh(a); return w, jnp.abs(v)
@case("linalg_lu", f32(3, 3))
def _(a):
    p, l, u = jsp.linalg.lu(a); return p @ l @ u

# ---- fft
@case("fft_rfft", f32(16))
def _(x): return jnp.abs(jnp.fft.rfft(x))
@case("fft_roundtrip", f32(8))
def _(x): return jnp.fft.ifft(jnp.fft.fft(x)).real
@case("fft_irfft", f32(8))
def _(x): return jnp.fft.irfft(jnp.fft.rfft(x) * 2.0, n=8)
@case("fft_fft2", f32(4, 4))
def _(x): return jnp.fft.fft2(x)
@case("fft_freq_shift", f32(8))
def _(x): return jnp.fft.fftshift(jnp.abs(jnp.fft.fft(x))) * jnp.fft.fftfreq(8)
@case("fft_convolve", f32(8), f32(8))
def _(a, b): return jnp.fft.irfft(jnp.fft.rfft(a) * jnp.fft.rfft(b), n=8)
@case("fft_power_spectrum_grad", f32(8))
def _(x): return jax.grad(lambda x: jnp.sum(jnp.abs(jnp.fft.rfft(x)) ** 2))(x)

# ---- complex
@case("complex_mul_abs", c64(6), c64(6))
def _(a, b): return jnp.abs(a * b), jnp.angle(a / b)
@case("complex_exp_log", c64(6))
def _(z): return jnp.exp(z), jnp.log(z)
@case("complex_from_parts", f32(6), f32(6))
def _(a, b):
    z = lax.complex(a, b); return jnp.real(z * jnp.conj(z)), jnp.imag(z ** 2)
@case("complex_matmul", c64(3, 4), c64(4, 2))
def _(a, b): return a @ b
@case("complex_sqrt_trig", c64(6))
def _(z): return jnp.sqrt(z), jnp.sin(z), jnp.tanh(z)
@case("complex_sum_mean", c64(3, 4))
def _(z): return jnp.sum(z, axis=0), jnp.mean(z), jnp.vdot(z[0], z[1])
@case("complex_grad_abs2", c64(5))
def _(z): return jax.grad(lambda z: jnp.sum(jnp.abs(z) ** 2))(z)
@case("complex_rotation", f32(6))
def _(theta): return jnp.exp(1j * theta) * (1 + 2j)

# ---- small models
@case("conv_pool_mlp", f32(2, 1, 8, 8), f32(3, 1, 3, 3), f32(27, 4))
def _(x, k, w):
    h = jax.nn.relu(lax.conv_general_dilated(x, k, (1, 1), "VALID"))
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
    return jax.nn.log_softmax(h.reshape(2, -1) @ w)
@case("gru_cell_scan", f32(3, 3), f32(3, 3), f32(7, 3))
def _(wz, wh, xs):
    def step(h, x):
        z = jax.nn.sigmoid(x @ wz + h); hh = jnp.tanh(x @ wh + z * h)
        return (1 - z) * h + z * hh, hh.sum()
    return lax.scan(step, jnp.zeros(3), xs)
@case("adam_step", f32(5), f32(5), f32(5), f32(5))
def _(p, g, m, v):
    m = 0.9 * m + 0.1 * g; v = 0.999 * v + 0.001 * g * g
    mh = m / (1 - 0.9 ** 3); vh = v / (1 - 0.999 ** 3)
    return p - 1e-3 * mh / (jnp.sqrt(vh) + 1e-8), m, v
@case("train_loop_sgd", f32(3), f32(8, 3), f32(8))
def _(w, x, y):
    loss = lambda w: jnp.mean((x @ w - y) ** 2)
    return lax.fori_loop(0, 10, lambda i, w: w - 0.05 * jax.grad(loss)(w), w)
@case("batchnorm_train", f32(6, 4), f32(4), f32(4))
def _(x, g, b):
    mu = x.mean(0); var = x.var(0)
    return (x - mu) * lax.rsqrt(var + 1e-5) * g + b
@case("rmsnorm", f32(3, 8), f32(8))
def _(x, g): return x * lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * g
@case("transformer_block", f32(4, 8), f32(8, 24), f32(8, 8))
def _(x, wqkv, wo):
    q, k, v = jnp.split(x @ wqkv, 3, axis=-1)
    a = jax.nn.softmax(q @ k.T / jnp.sqrt(8.0), axis=-1) @ v
    h = x + a @ wo
    return h / jnp.linalg.norm(h, axis=-1, keepdims=True)
@case("logistic_regression_grad", f32(3), f32(10, 3), (raw().rand(10) > 0.5).astype(np.float32))
def _(w, x, y):
    def loss(w):
        z = x @ w; return jnp.mean(jnp.logaddexp(0.0, z) - y * z)
    return jax.grad(loss)(w)
@case("kmeans_step", f32(10, 2), f32(3, 2))
def _(x, c):
    d = jnp.sum((x[:, None] - c[None]) ** 2, -1); a = jnp.argmin(d, 1)
    oh = jax.nn.one_hot(a, 3)
    return (oh.T @ x) / jnp.maximum(oh.sum(0), 1.0)[:, None]
@case("ode_euler", f32(2))
def _(y0):
    return lax.fori_loop(0, 20, lambda i, y: y + 0.05 * jnp.array([y[1], -y[0]]), y0)
@case("rk4_scan", f32(2))
def _(y0):
    f = lambda y: jnp.stack([y[1], -jnp.sin(y[0])])
    def step(y, _):
        h = 0.1; k1 = f(y); k2 = f(y + h / 2 * k1); k3 = f(y + h / 2 * k2); k4 = f(y + h * k3)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4); return y, y
    return lax.scan(step, y0, None, length=10)
@case("mandelbrot_escape", f32(6), f32(6))
def _(re, im):
    c = lax.complex(re * 0.8, im * 0.8)
    def body(i, s):
        z, n = s; z = z * z + c; return z, n + (jnp.abs(z) < 2)
    return lax.fori_loop(0, 10, body, (jnp.zeros_like(c), jnp.zeros(6, jnp.int32)))[1]
@case("tree_map_update", {"a": f32(3), "b": f32(2, 2)}, {"a": f32(3), "b": f32(2, 2)})
def _(p, g): return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, p, g)
@case("pytree_list_in", [f32(3), f32(3), f32(3)])
def _(xs): return sum(xs) / len(xs), jnp.stack(xs).max(0)
@case("int64_free_int_index", f32(6, 6))
def _(x): return x[jnp.arange(6), (jnp.arange(6) * 2) % 6]
@case("embedding_lookup", f32(10, 4), i32(5, lo=0, hi=10))
def _(emb, ids): return jnp.take(emb, ids, axis=0).mean(0)
@case("gather_nd_clip", f32(4, 5), i32(3, 2, lo=0, hi=4))
def _(x, idx): return x[idx[:, 0], idx[:, 1]]
@case("scatter_rows_add", f32(5, 3), i32(4, lo=0, hi=5), f32(4, 3))
def _(x, i, u): return x.at[i].add(u)
@case("scatter_2d_max", f32(4, 4), i32(3, lo=0, hi=4), i32(3, lo=0, hi=4))
def _(x, i, j): return x.at[i, j].max(5.0)
@case("dynamic_slice_in_loop", f32(10))
def _(x):
    return lax.fori_loop(0, 7, lambda i, acc: acc + lax.dynamic_slice(x, (i,), (3,)), jnp.zeros(3))
@case("dynamic_index_in_dim", f32(4, 5), np.int32(2))
def _(x, i): return lax.dynamic_index_in_dim(x, i, axis=1, keepdims=False)
@case("expand_dims_many", f32(3, 4))
def _(x): return jnp.expand_dims(x, (0, 2)).sum((1,))
@case("squeeze_none", f32(1, 4, 1))
def _(x): return jnp.squeeze(x) * 2
@case("pad_reflect_edge", f32(3, 4))
def _(x): return jnp.pad(x, 1, mode="reflect"), jnp.pad(x, ((0, 1), (2, 0)), mode="edge")
@case("pad_negative_lax", f32(6))
def _(x): return lax.pad(x, 0.0, ((-1, 2, 1),))
@case("lax_reductions", f32(3, 4))
def _(x): return lax.reduce_max(x, (1,)), lax.reduce_sum(x, (0,)), lax.argmax(x, 1, jnp.int32)
@case("lax_reduce_custom", f32(3, 4))
def _(x): return lax.reduce(x, 1.0, lambda a, b: a * b + 0.0, (1,))
@case("lax_reduce_two", f32(3, 4), f32(3, 4))
def _(x, y): return lax.reduce((x, y), (0.0, -jnp.inf), lambda a, b: (a[0] + b[0], jnp.maximum(a[1], b[1])), (0,))
@case("lax_clamp_integer_pow", f32(8))
def _(x): return lax.clamp(-1.0, x, 1.0), lax.integer_pow(x, 5), lax.square(x)
@case("lax_bitcast", f32(6))
def _(x): return lax.bitcast_convert_type(x, jnp.int32) >> 23
@case("lax_shift_logical", i32(6, lo=-100, hi=100))
def _(x): return lax.shift_right_logical(x, 2), lax.shift_right_arithmetic(x, 2)
@case("lax_iota_broadcasted", f32(3, 4))
def _(x): return x + lax.broadcasted_iota(jnp.float32, (3, 4), 1) * lax.broadcasted_iota(jnp.float32, (3, 4), 0)
@case("lax_rev_transpose", f32(2, 3, 4))
def _(x): return lax.rev(lax.transpose(x, (2, 0, 1)), (0, 2))
@case("lax_dot_general_batch", f32(2, 3, 4), f32(2, 4, 3))
def _(a, b): return lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))))
@case("lax_dot_preferred", i32(3, 4), i32(4, 2))
def _(a, b): return lax.dot(a, b, preferred_element_type=jnp.float32)
@case("lax_convert_round", f32(8))
def _(x): return lax.round(x * 3, lax.RoundingMethod.TO_NEAREST_EVEN), lax.convert_element_type(x * 3, jnp.int8)
@case("lax_nextafter_is_finite", f32(6))
def _(x): return lax.nextafter(x, jnp.zeros_like(x)), lax.is_finite(1.0 / x)
@case("lax_rem_sign", f32(6), f32(6))
def _(a, b): return lax.rem(a, b), lax.sign(a) * lax.abs(b)
@case("lax_expand_dims_concat", f32(3), f32(3))
def _(a, b): return lax.concatenate([lax.expand_dims(a, (0,)), lax.expand_dims(b, (0,))], 0)
@case("lax_collapse_squeeze", f32(2, 1, 3))
def _(x): return lax.collapse(lax.squeeze(x, (1,)), 0, 2)
@case("lax_slice_in_dim", f32(6, 4))
def _(x): return lax.slice_in_dim(x, 1, 5, 2, axis=0), lax.index_in_dim(x, 2, axis=1)
@case("lax_polygamma_igamma", pos(5))
def _(x): return lax.lgamma(x), lax.digamma(x), lax.igamma(x, x), lax.erf_inv(jnp.tanh(x) * 0.9)
@case("lax_logistic_exp2", f32(6))
def _(x): return lax.logistic(x), lax.exp2(x), lax.tan(x * 0.5)
@case("lax_cbrt_atan2", f32(6), f32(6))
def _(a, b): return lax.cbrt(a), lax.atan2(a, b), lax.acosh(jnp.abs(a) + 1.0)
