"""Held-out programs, batch E, its second half (make_heldout.py imports it right after heldout_batch_e,
whose docstring says what the batch covers and what it measured; the inputs continue that module's
generator, so the two are one batch split for length): signal processing, image ops, sparse-ish
segment ops, ranking and sorting, and jit / vmap / grad compositions.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from heldout_batch_e import P3, K, _params, global_norm, mlp, mse, tmap
from heldout_inputs import case, f32, f64, i32, pos, spd, x64case
from jax import lax


# ---- signal processing
def frames(x, n, hop):
    idx = jnp.arange(0, x.shape[0] - n + 1, hop)[:, None] + jnp.arange(n)[None]
    return x[idx]


@case("e_sig_stft_magnitude_hann", f32(64))
def _(x):
    win = jnp.hanning(16).astype(jnp.float32)
    return jnp.abs(jnp.fft.rfft(frames(x, 16, 8) * win, axis=-1))
@case("e_sig_stft_istft_overlap_add", f32(48))
def _(x):
    win = jnp.sqrt(jnp.hanning(17)[:-1]).astype(jnp.float32)
    F = jnp.fft.rfft(frames(x, 16, 8) * win, axis=-1)
    fr = jnp.fft.irfft(F, n=16, axis=-1) * win
    out = jnp.zeros(48)
    def add(out, i): return lax.dynamic_update_slice(out, lax.dynamic_slice(out, (i * 8,), (16,)) + fr[i], (i * 8,)), None
    return lax.scan(add, out, jnp.arange(fr.shape[0]))[0]
@case("e_sig_fir_conv1d_valid", f32(2, 1, 40), f32(3, 1, 5))
def _(x, h):
    return lax.conv_general_dilated(x, h, (1,), "VALID")
@case("e_sig_fir_conv1d_nwc_same_stride", f32(2, 30, 2), f32(5, 2, 3))
def _(x, h):
    return lax.conv_general_dilated(x, h, (2,), "SAME", dimension_numbers=("NWC", "WIO", "NWC"))
@case("e_sig_dilated_causal_conv1d", f32(1, 2, 20), f32(2, 2, 3))
def _(x, w):
    return lax.conv_general_dilated(x, w, (1,), [(4, 0)], rhs_dilation=(2,))
@case("e_sig_iir_biquad_scan", f32(40), f32(3), f32(2, lo=-0.4, hi=0.4))
def _(x, b, a):
    def step(s, xn):
        x1, x2, y1, y2 = s
        y = b[0] * xn + b[1] * x1 + b[2] * x2 - a[0] * y1 - a[1] * y2
        return (xn, x1, y, y1), y
    return lax.scan(step, (0.0, 0.0, 0.0, 0.0), x)[1]
@case("e_sig_resample_linear_interp", f32(25))
def _(x):
    t = jnp.linspace(0, 24, 60)
    return jnp.interp(t, jnp.arange(25.0), x)
@case("e_sig_resample_fft", f32(16))
def _(x):
    X = jnp.fft.rfft(x)
    Y = jnp.zeros(17, X.dtype).at[:9].set(X)
    return jnp.fft.irfft(Y, n=32) * 2
@case("e_sig_autocorr_fft", f32(32))
def _(x):
    x = x - x.mean()
    F = jnp.fft.fft(x, n=64)
    r = jnp.fft.ifft(F * jnp.conj(F)).real[:32]
    return r / r[0]
@case("e_sig_welch_psd", f32(128))
def _(x):
    w = jnp.hanning(32).astype(jnp.float32)
    fr = frames(x, 32, 16)
    fr = (fr - fr.mean(-1, keepdims=True)) * w
    return jnp.mean(jnp.abs(jnp.fft.rfft(fr)) ** 2, 0) / jnp.sum(w ** 2)
@case("e_sig_mel_filterbank_log", f32(40, 17, lo=0, hi=3), f32(17, 6, lo=0, hi=1))
def _(spec, fb):
    return jnp.log(jnp.maximum(spec ** 2 @ fb, 1e-10))
@case("e_sig_moving_average_cumsum", f32(30))
def _(x):
    c = jnp.cumsum(jnp.concatenate([jnp.zeros(1), x]))
    return (c[5:] - c[:-5]) / 5
@case("e_sig_convolve_np_modes_grad", f32(20), f32(4))
def _(x, h):
    return jnp.convolve(x, h, mode="same"), jax.grad(lambda h: jnp.sum(jnp.convolve(x, h, mode="valid") ** 2))(h)
@case("e_sig_hilbert_envelope", f32(32))
def _(x):
    X = jnp.fft.fft(x)
    h = jnp.zeros(32).at[0].set(1).at[1:16].set(2).at[16].set(1)
    return jnp.abs(jnp.fft.ifft(X * h))
@case("e_sig_goertzel_vmap", f32(3, 50), np.array([0.1, 0.2, 0.3], np.float32))
def _(xs, f):
    def g(x, f):
        c = 2 * jnp.cos(2 * jnp.pi * f)
        def step(s, xn): return (xn + c * s[0] - s[1], s[0]), None
        s = lax.scan(step, (0.0, 0.0), x)[0]
        return s[0] ** 2 + s[1] ** 2 - c * s[0] * s[1]
    return jax.vmap(g)(xs, f)
@case("e_sig_median_filter_sort", f32(20))
def _(x):
    p = jnp.pad(x, 2, mode="edge")
    return jnp.sort(frames(p, 5, 1), -1)[:, 2]
@case("e_sig_dct_by_matrix", f32(4, 8))
def _(x):
    n = jnp.arange(8.0)
    C = jnp.cos(jnp.pi / 8 * (n[None] + 0.5) * n[:, None])
    return x @ C.T


# ---- image ops
@case("e_img_resize_linear", f32(1, 5, 6, 2))
def _(x): return jax.image.resize(x, (1, 9, 11, 2), "linear")
@case("e_img_resize_nearest", f32(4, 4))
def _(x): return jax.image.resize(x, (7, 3), "nearest")
@case("e_img_resize_cubic", f32(6, 6))
def _(x): return jax.image.resize(x, (10, 4), "cubic")
@case("e_img_resize_lanczos3_antialias", f32(8, 8, 1))
def _(x): return jax.image.resize(x, (3, 5, 1), "lanczos3", antialias=True)
@case("e_img_resize_lanczos5", f32(5, 5))
def _(x): return jax.image.resize(x, (9, 9), "lanczos5")
@case("e_img_scale_and_translate", f32(6, 6))
def _(x):
    return jax.image.scale_and_translate(x, (8, 8), (0, 1), jnp.array([1.3, 1.3]), jnp.array([0.5, -0.2]), "linear")
@case("e_img_resize_grad", f32(4, 4))
def _(x): return jax.grad(lambda x: jnp.sum(jax.image.resize(x, (6, 6), "bilinear") ** 2))(x)
@case("e_img_rotate_by_gather_bilinear", f32(9, 9), np.float32(0.4))
def _(img, theta):
    ys, xs = jnp.meshgrid(jnp.arange(9.0), jnp.arange(9.0), indexing="ij")
    c, s = jnp.cos(theta), jnp.sin(theta)
    xr = c * (xs - 4) + s * (ys - 4) + 4
    yr = -s * (xs - 4) + c * (ys - 4) + 4
    x0, y0 = jnp.floor(xr), jnp.floor(yr)
    wx, wy = xr - x0, yr - y0
    def at(y, x):
        ok = (y >= 0) & (y < 9) & (x >= 0) & (x < 9)
        return jnp.where(ok, img[jnp.clip(y, 0, 8).astype(int), jnp.clip(x, 0, 8).astype(int)], 0.0)
    return ((1 - wy) * ((1 - wx) * at(y0, x0) + wx * at(y0, x0 + 1)) + wy * ((1 - wx) * at(y0 + 1, x0) + wx * at(y0 + 1, x0 + 1)))
@case("e_img_map_coordinates_order1", f32(6, 6), f32(2, 10, lo=0, hi=5))
def _(img, coords):
    return jax.scipy.ndimage.map_coordinates(img, [coords[0], coords[1]], order=1, mode="nearest")
@case("e_img_map_coordinates_constant", f32(5, 5), f32(2, 4, 4, lo=-1, hi=6))
def _(img, c):
    return jax.scipy.ndimage.map_coordinates(img, list(c), order=0, mode="constant", cval=-1.0)
@case("e_img_morph_dilate_erode", f32(8, 8))
def _(x):
    d = lax.reduce_window(x, -jnp.inf, lax.max, (3, 3), (1, 1), "SAME")
    e = lax.reduce_window(x, jnp.inf, lax.min, (3, 3), (1, 1), "SAME")
    return d, e, d - e
@case("e_img_morph_opening_closing", (np.random.RandomState(9).rand(10, 10) > 0.6).astype(np.float32))
def _(m):
    def dil(x): return lax.reduce_window(x, -jnp.inf, lax.max, (3, 3), (1, 1), "SAME")
    def ero(x): return lax.reduce_window(x, jnp.inf, lax.min, (3, 3), (1, 1), "SAME")
    return dil(ero(m)), ero(dil(m))
@case("e_img_sobel_edges_conv", f32(1, 1, 8, 8))
def _(x):
    kx = jnp.array([[-1.0, 0, 1], [-2, 0, 2], [-1, 0, 1]])
    k = jnp.stack([kx, kx.T])[:, None]
    g = lax.conv_general_dilated(x, k, (1, 1), "SAME")
    return jnp.sqrt(g[:, 0] ** 2 + g[:, 1] ** 2 + 1e-8)
@case("e_img_gaussian_blur_separable", f32(10, 10))
def _(x):
    k = jnp.exp(-0.5 * (jnp.arange(-2.0, 3.0) / 1.0) ** 2); k = k / k.sum()
    y = jax.vmap(lambda r: jnp.convolve(r, k, mode="same"))(x)
    return jax.vmap(lambda c: jnp.convolve(c, k, mode="same"), 1, 1)(y)
@case("e_img_avg_pool_count_include_pad", f32(2, 6, 6, 3))
def _(x):
    s = lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
    n = lax.reduce_window(jnp.ones_like(x), 0.0, lax.add, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
    return s / n
@case("e_img_maxpool_grad", f32(1, 4, 4, 1))
def _(x):
    return jax.grad(lambda x: jnp.sum(lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") ** 2))(x)
@case("e_img_flip_transpose_augment", f32(2, 5, 5, 3), np.array([True, False]))
def _(x, flip):
    return jnp.where(flip[:, None, None, None], x[:, :, ::-1], x), jnp.rot90(x, 1, axes=(1, 2))
@case("e_img_random_crop_dynamic_slice", f32(3, 8, 8), K)
def _(x, key):
    offs = jax.random.randint(key, (3, 2), 0, 4)
    return jax.vmap(lambda im, o: lax.dynamic_slice(im, (o[0], o[1]), (5, 5)))(x, offs)
@case("e_img_histogram_equalize", f32(8, 8, lo=0, hi=1))
def _(x):
    h, _ = jnp.histogram(x, bins=16, range=(0.0, 1.0))
    cdf = jnp.cumsum(h) / x.size
    return cdf[jnp.clip((x * 16).astype(jnp.int32), 0, 15)]
@case("e_img_rgb_to_hsv_like", f32(4, 4, 3, lo=0, hi=1))
def _(rgb):
    mx, mn = rgb.max(-1), rgb.min(-1)
    d = mx - mn
    s = jnp.where(mx > 0, d / jnp.where(mx > 0, mx, 1), 0)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    h = jnp.select([d == 0, mx == r, mx == g], [0.0, (g - b) / jnp.where(d == 0, 1, d) % 6, (b - r) / jnp.where(d == 0, 1, d) + 2],
                   (r - g) / jnp.where(d == 0, 1, d) + 4)
    return h / 6, s, mx
@case("e_img_total_variation_denoise", f32(6, 6))
def _(y):
    def tv(x): return jnp.sum(jnp.sqrt(jnp.diff(x, axis=0)[:, :-1] ** 2 + jnp.diff(x, axis=1)[:-1] ** 2 + 1e-4))
    def step(x, _): return x - 0.1 * jax.grad(lambda x: 0.5 * jnp.sum((x - y) ** 2) + 0.2 * tv(x))(x), None
    return lax.scan(step, y, None, length=10)[0]
@case("e_img_patchify_vit", f32(2, 8, 8, 3), f32(12, 5))
def _(x, w):
    p = x.reshape(2, 4, 2, 4, 2, 3).transpose(0, 1, 3, 2, 4, 5).reshape(2, 16, 12)
    return p @ w
@case("e_img_conv_general_patches", f32(1, 3, 6, 6))
def _(x):
    return lax.conv_general_dilated_patches(x, (3, 3), (2, 2), "VALID")


# ---- sparse-ish: segments, COO by gathers, graphs
SEG = np.array([0, 0, 1, 3, 3, 3, 1, 4], np.int32)
EDGES = np.array([[0, 1], [1, 2], [2, 0], [3, 1], [4, 3], [1, 4], [2, 3]], np.int32)


@case("e_sparse_segment_sum_mean", f32(8, 3), SEG)
def _(x, seg):
    s = jax.ops.segment_sum(x, seg, num_segments=5)
    n = jax.ops.segment_sum(jnp.ones(8), seg, num_segments=5)
    return s, s / jnp.maximum(n, 1)[:, None]
@case("e_sparse_segment_max_min_prod", f32(8), SEG)
def _(x, seg):
    return (jax.ops.segment_max(x, seg, 5), jax.ops.segment_min(x, seg, 5),
            jax.ops.segment_prod(x, seg, 5))
@case("e_sparse_segment_sorted_indices", f32(8, 2), np.sort(SEG))
def _(x, seg):
    return jax.ops.segment_sum(x, seg, 5, indices_are_sorted=True), jax.ops.segment_max(x, seg, 5, indices_are_sorted=True)
@case("e_sparse_segment_softmax", f32(8), SEG)
def _(x, seg):
    m = jax.ops.segment_max(x, seg, 5)
    e = jnp.exp(x - m[seg])
    return e / jax.ops.segment_sum(e, seg, 5)[seg]
@case("e_sparse_segment_sum_grad", f32(8, 2), SEG)
def _(x, seg):
    return jax.grad(lambda x: jnp.sum(jnp.tanh(jax.ops.segment_sum(x, seg, 5)) ** 2))(x)
@case("e_sparse_coo_matvec", f32(7), EDGES, f32(5))
def _(vals, ij, x):
    return jax.ops.segment_sum(vals * x[ij[:, 1]], ij[:, 0], 5)
@case("e_sparse_coo_to_dense_scatter", f32(7), EDGES)
def _(vals, ij):
    return jnp.zeros((5, 5)).at[ij[:, 0], ij[:, 1]].add(vals)
@case("e_sparse_gcn_layer", f32(5, 3), EDGES, f32(3, 4))
def _(h, e, w):
    src, dst = e[:, 0], e[:, 1]
    deg = jax.ops.segment_sum(jnp.ones(7), dst, 5) + 1
    msg = h[src] / jnp.sqrt(deg[src] * deg[dst])[:, None]
    agg = jax.ops.segment_sum(msg, dst, 5) + h / deg[:, None]
    return jax.nn.relu(agg @ w)
@case("e_sparse_gat_attention", f32(5, 4), EDGES, f32(4, 4), f32(8))
def _(h, e, w, a):
    z = h @ w
    src, dst = e[:, 0], e[:, 1]
    s = jax.nn.leaky_relu(jnp.concatenate([z[src], z[dst]], -1) @ a, 0.2)
    s = jnp.exp(s - jax.ops.segment_max(s, dst, 5)[dst])
    att = s / jax.ops.segment_sum(s, dst, 5)[dst]
    return jax.ops.segment_sum(att[:, None] * z[src], dst, 5)
@case("e_sparse_pagerank_power_iter", EDGES)
def _(e):
    n = 5
    out = jax.ops.segment_sum(jnp.ones(7), e[:, 0], n)
    def it(r, _):
        m = jax.ops.segment_sum(r[e[:, 0]] / out[e[:, 0]], e[:, 1], n)
        return 0.15 / n + 0.85 * m, None
    return lax.scan(it, jnp.full(n, 1.0 / n), None, length=20)[0]
@case("e_sparse_csr_rowptr_matvec", f32(7), np.array([0, 2, 3, 5, 6, 7], np.int32), EDGES[:, 1].copy(), f32(5))
def _(vals, indptr, cols, x):
    rows = jnp.searchsorted(indptr, jnp.arange(7), side="right") - 1
    return jax.ops.segment_sum(vals * x[cols], rows, 5)
@case("e_sparse_embedding_bag", f32(10, 3), np.array([1, 5, 5, 2, 9, 0], np.int32), np.array([0, 0, 1, 1, 1, 2], np.int32))
def _(table, ids, bag):
    return jax.ops.segment_sum(table[ids], bag, 3) / jax.ops.segment_sum(jnp.ones(6), bag, 3)[:, None]
@case("e_sparse_scatter_max_unsorted", f32(6), np.array([3, 1, 3, 0, 1, 3], np.int32))
def _(x, idx):
    return jnp.full(4, -jnp.inf).at[idx].max(x), jnp.zeros(4, jnp.int32).at[idx].add(1)
@case("e_sparse_vmap_segment_sum", f32(3, 8), SEG)
def _(xs, seg):
    return jax.vmap(lambda x: jax.ops.segment_sum(x, seg, 5))(xs)


# ---- ranking, sorting, cumulative
@case("e_rank_top_k_values_indices", f32(4, 10))
def _(x):
    v, i = lax.top_k(x, 3)
    return v, i, jnp.take_along_axis(x, i, 1)
@case("e_rank_top_k_grad", f32(10))
def _(x):
    return jax.grad(lambda x: jnp.sum(lax.top_k(x, 4)[0] ** 2))(x)
@case("e_rank_argsort_take_along", f32(3, 6), f32(3, 6))
def _(k, v):
    i = jnp.argsort(k, axis=1)
    return jnp.take_along_axis(v, i, 1), jnp.argsort(i, axis=1)
@case("e_rank_ndcg", f32(8, lo=0, hi=3), f32(8))
def _(rel, scores):
    order = jnp.argsort(-scores)
    disc = 1.0 / jnp.log2(jnp.arange(2.0, 10.0))
    dcg = jnp.sum((2 ** rel[order] - 1) * disc)
    idcg = jnp.sum((2 ** jnp.sort(rel)[::-1] - 1) * disc)
    return dcg / idcg
@case("e_rank_sort_multiple_keys", i32(12, lo=0, hi=3), f32(12))
def _(a, b):
    return lax.sort((a, b, jnp.arange(12)), num_keys=2)
@case("e_rank_cummax_cumlogsumexp", f32(10))
def _(x):
    return lax.cummax(x), lax.cumlogsumexp(x), lax.cummin(x, reverse=True), jnp.cumprod(1 + 0.1 * x)
@case("e_rank_cumsum_grad_reverse", f32(8))
def _(x):
    return jax.grad(lambda x: jnp.sum(jnp.cumsum(x) ** 2))(x), lax.cumsum(x, reverse=True)
@case("e_rank_pairwise_hinge_loss", f32(6), f32(6))
def _(s, y):
    d = s[:, None] - s[None]
    m = (y[:, None] > y[None]).astype(jnp.float32)
    return jnp.sum(m * jax.nn.relu(1 - d)) / jnp.maximum(m.sum(), 1)
@case("e_rank_soft_rank_sigmoid", f32(7))
def _(x):
    return 1 + jnp.sum(jax.nn.sigmoid((x[:, None] - x[None]) / 0.1), 1) - 0.5
@case("e_rank_topk_accuracy", f32(6, 8), np.array([1, 7, 3, 0, 2, 2], np.int32))
def _(logits, y):
    _, i = lax.top_k(logits, 3)
    return jnp.mean(jnp.any(i == y[:, None], 1)), jnp.mean(i[:, 0] == y)
@case("e_rank_beam_search_step", f32(3), f32(3, 5))
def _(beam_lp, next_lp):
    tot = (beam_lp[:, None] + jax.nn.log_softmax(next_lp)).reshape(-1)
    v, i = lax.top_k(tot, 3)
    return v, i // 5, i % 5
@case("e_rank_nms_greedy_fori", f32(6, 4, lo=0, hi=5), f32(6))
def _(boxes, scores):
    b = jnp.concatenate([jnp.minimum(boxes[:, :2], boxes[:, 2:]), jnp.maximum(boxes[:, :2], boxes[:, 2:])], 1)
    order = jnp.argsort(-scores)
    b = b[order]
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt = jnp.maximum(b[:, None, :2], b[None, :, :2]); rb = jnp.minimum(b[:, None, 2:], b[None, :, 2:])
    inter = jnp.prod(jnp.clip(rb - lt, 0), -1)
    iou = inter / (area[:, None] + area[None] - inter + 1e-6)
    def body(i, keep):
        sup = jnp.any((iou[i] > 0.3) & keep & (jnp.arange(6) < i))
        return keep.at[i].set(~sup)
    return order, lax.fori_loop(0, 6, body, jnp.ones(6, bool))
@case("e_rank_quantiles_sorted", f32(25))
def _(x):
    return jnp.quantile(x, jnp.array([0.1, 0.5, 0.9])), jnp.percentile(x, 75.0, method="midpoint")
@case("e_rank_searchsorted_bucketize", np.sort(f32(6)), f32(10))
def _(edges, x):
    return jnp.searchsorted(edges, x), jnp.digitize(x, edges)
@case("e_rank_argmax_ties_masked", f32(4, 5), np.random.RandomState(4).rand(4, 5) > 0.3)
def _(x, m):
    return jnp.argmax(jnp.where(m, x, -jnp.inf), 1), jnp.argmin(jnp.round(x), 1)
@case("e_rank_sort_descending_stable", i32(10, lo=0, hi=4))
def _(x):
    return jnp.argsort(x, descending=True, stable=True), jnp.sort(x, descending=True)
@case("e_rank_cumulative_max_drawdown", pos(20))
def _(p):
    peak = lax.cummax(p)
    return jnp.max((peak - p) / peak)


# ---- jit / vmap / grad compositions over whole programs
@case("e_comp_jit_static_argnames_inner", f32(4, 4))
def _(x):
    @partial(jax.jit, static_argnames=("n", "act"))
    def block(x, n, act):
        for _ in range(n):
            x = getattr(jax.nn, act)(x @ x.T * 0.1)
        return x
    return block(x, n=2, act="tanh"), block(x, n=1, act="relu")
@case("e_comp_vmap_grad_ensemble", [tmap(lambda a: np.stack([a, a * 0.5]), p) for p in _params(3, 5, 1)], f32(6, 3), f32(6, 1))
def _(ens, x, y):
    return jax.vmap(lambda p: jax.value_and_grad(mse)(p, x, y))(ens)
@case("e_comp_jacrev_of_jit_model", _params(2, 4, 2), f32(2))
def _(p, x):
    return jax.jit(jax.jacrev(lambda x: mlp(p, x)))(x)
@case("e_comp_hvp_forward_over_reverse", _params(2, 3, 1), f32(5, 2), f32(5, 1))
def _(p, x, y):
    v = tmap(jnp.ones_like, p)
    return jax.jvp(jax.grad(lambda p: mse(p, x, y)), (p,), (v,))[1]
@case("e_comp_maml_inner_loop_grad", _params(1, 6, 1), f32(5, 1), f32(5, 1), f32(5, 1), f32(5, 1))
def _(p, xs, ys, xq, yq):
    def adapt(p):
        for _ in range(2):
            g = jax.grad(mse)(p, xs, ys)
            p = tmap(lambda a, b: a - 0.1 * b, p, g)
        return p
    return jax.value_and_grad(lambda p: mse(adapt(p), xq, yq))(p)
@case("e_comp_vmap_in_axes_none_scan", f32(4, 3), f32(5, 3))
def _(w0, xs):
    def run(w, x0):
        return lax.scan(lambda h, _: (jnp.tanh(h * w + x0), h.sum()), x0, None, length=4)[1]
    return jax.vmap(run, in_axes=(None, 0))(w0[0], xs)
@case("e_comp_custom_vjp_clip_gradient", f32(6))
def _(x):
    @jax.custom_vjp
    def clip_grad(x): return x
    def fwd(x): return x, None
    def bwd(_, g): return (jnp.clip(g, -0.5, 0.5),)
    clip_grad.defvjp(fwd, bwd)
    return jax.grad(lambda x: jnp.sum(clip_grad(x) ** 3))(x)
@case("e_comp_custom_jvp_softplus_inverse", pos(5))
def _(x):
    @jax.custom_jvp
    def inv_softplus(y): return jnp.log(jnp.expm1(y))
    @inv_softplus.defjvp
    def _j(p, t):
        (y,), (dy,) = p, t
        return inv_softplus(y), dy / -jnp.expm1(-y)
    return inv_softplus(x), jax.vmap(jax.grad(inv_softplus))(x)
@case("e_comp_stop_gradient_target_net", _params(2, 4, 1), _params(2, 4, 1), f32(6, 2), f32(6))
def _(p, tp, s, r):
    def loss(p):
        q = mlp(p, s)[:, 0]
        tgt = r + 0.9 * lax.stop_gradient(mlp(tp, s)[:, 0])
        return jnp.mean(optax_huber(q - tgt))
    return jax.grad(loss)(p)
def optax_huber(d, delta=1.0):
    a = jnp.abs(d)
    return jnp.where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))
@case("e_comp_linear_solve_implicit_grad", spd(3), f32(3))
def _(A, b):
    def f(A, b):
        x = lax.custom_linear_solve(lambda v: A @ v, b, lambda mv, r: jnp.linalg.solve(A, r), symmetric=True)
        return jnp.sum(x ** 2)
    return jax.grad(f, argnums=(0, 1))(A, b)
@case("e_comp_fixed_point_while_grad_free", f32(3, 3, lo=-0.3, hi=0.3), f32(3))
def _(W, b):
    def cond(c): return (jnp.max(jnp.abs(c[0] - c[1])) > 1e-6) & (c[2] < 100)
    def body(c): return jnp.tanh(W @ c[0] + b), c[0], c[2] + 1
    z, _, n = lax.while_loop(cond, body, (jnp.zeros(3), jnp.ones(3), 0))
    return z, n
@case("e_comp_xmap_like_nested_vmap", f32(3, 4, 5))
def _(x):
    return jax.vmap(jax.vmap(lambda r: r / jnp.linalg.norm(r), 0), 1, 1)(x)
@case("e_comp_pmap_free_axis_name_mean", f32(4, 3))
def _(x):
    return jax.vmap(lambda r: r - lax.pmean(r, "b"), axis_name="b")(x)
@case("e_comp_cond_switch_in_scan", f32(6), np.array([0, 2, 1, 1, 0, 2], np.int32))
def _(x, ops):
    def step(c, io):
        xi, o = io
        c = lax.switch(o, [lambda c: c + xi, lambda c: c * xi, lambda c: jnp.maximum(c, xi)], c)
        return c, c
    return lax.scan(step, 1.0, (x, ops))
@case("e_comp_grad_of_while_fori_fixed_trip", np.float32(1.3))
def _(x):
    return jax.grad(lambda x: lax.fori_loop(0, 5, lambda i, y: jnp.sin(y) * x, x))(x)
@case("e_comp_value_and_grad_has_aux_metrics", P3, f32(6, 3), f32(6, 2))
def _(p, x, y):
    def loss(p):
        pred = mlp(p, x)
        return mse(p, x, y), {"mae": jnp.mean(jnp.abs(pred - y)), "max": jnp.max(pred)}
    (l, aux), g = jax.value_and_grad(loss, has_aux=True)(p)
    return l, aux, global_norm(g)
@case("e_comp_eval_shape_free_zeros_like", P3)
def _(p):
    shapes = jax.eval_shape(lambda p: p, p)
    return tmap(lambda s: jnp.zeros(s.shape, s.dtype) + 1.0, shapes)
@case("e_comp_tree_reduce_param_count_l2", P3)
def _(p):
    return jax.tree_util.tree_reduce(lambda a, b: a + jnp.sum(b ** 2), p, 0.0)
@x64case("e_x64_comp_newton_optimizer_hessian", f64(3))
def _(x0):
    def rosen(x): return jnp.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)
    def step(x, _):
        return x - jnp.linalg.solve(jax.hessian(rosen)(x) + 1e-3 * jnp.eye(3), jax.grad(rosen)(x)), rosen(x)
    return lax.scan(step, x0 * 0.3, None, length=8)
@x64case("e_x64_comp_gauss_newton_curve_fit", f64(20, lo=0, hi=3), f64(3, lo=0.5, hi=1.5))
def _(t, p0):
    y = 2.0 * jnp.exp(-0.7 * t) + 0.3
    def model(p): return p[0] * jnp.exp(-p[1] * t) + p[2]
    def step(p, _):
        r = model(p) - y
        J = jax.jacfwd(model)(p)
        return p - jnp.linalg.lstsq(J, r)[0], jnp.sum(r ** 2)
    return lax.scan(step, p0, None, length=6)
@x64case("e_x64_prob_logsumexp_float64_mixture", f64(15), f64(4), f64(4, lo=0.2, hi=2))
def _(x, mu, s):
    lp = jax.scipy.stats.norm.logpdf(x[:, None], mu, s) - jnp.log(4.0)
    return jax.scipy.special.logsumexp(lp, 1), jax.grad(lambda mu: jax.scipy.special.logsumexp(lp + 0 * mu, 1).sum())(mu)
@x64case("e_x64_sig_fft_convolution_float64", f64(30), f64(7))
def _(x, h):
    n = 64
    return jnp.fft.irfft(jnp.fft.rfft(x, n) * jnp.fft.rfft(h, n), n)[:36]
@x64case("e_x64_sparse_segment_sum_int64", np.arange(10, dtype=np.int64), np.array([0, 1, 1, 2, 2, 2, 3, 3, 3, 3], np.int64))
def _(x, seg):
    return jax.ops.segment_sum(x, seg, 4), jax.ops.segment_max(x * 3 - 7, seg, 4)
