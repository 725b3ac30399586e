"""Held-out programs, batch F, its second half (make_heldout.py imports it right after heldout_batch_f,
whose docstring says what the batch covers; the inputs continue that module's generator): explicit lax,
random bits and PRNG implementations, batched jnp.linalg, jax.scipy.signal / ndimage, jax.image.resize
and jnp.fft.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from heldout_batch_f import bools, u8, u32
from heldout_inputs import c64, case, f32, i32, pos, raw, spd
from jax import lax


# ---- associative_scan
@case("f_assoc_scan_cumsum_axis1", f32(3, 8))
def _(x): return lax.associative_scan(jnp.add, x, axis=1), lax.associative_scan(jnp.maximum, x, reverse=True, axis=1)
@case("f_assoc_scan_linear_recurrence", f32(9, lo=0.5, hi=0.99), f32(9))
def _(a, b):
    def comb(l, r): return (l[0] * r[0], r[0] * l[1] + r[1])
    return lax.associative_scan(comb, (a, b))[1]
@case("f_assoc_scan_matmul_pairs", f32(5, 2, 2, lo=-0.7, hi=0.7))
def _(m): return lax.associative_scan(lambda a, b: b @ a, m)
@case("f_assoc_scan_odd_length_1", f32(1, 3))
def _(x): return lax.associative_scan(jnp.multiply, x), lax.associative_scan(jnp.add, f32(7) * 0 + x[0, 0])

# ---- lax.reduce with custom computations and several operands
@case("f_reduce_two_operands_argmax", f32(4, 6))
def _(x):
    idx = lax.broadcasted_iota(jnp.int32, x.shape, 1)
    def comb(a, b):
        take_a = (a[0] > b[0]) | ((a[0] == b[0]) & (a[1] < b[1]))
        return jnp.where(take_a, a[0], b[0]), jnp.where(take_a, a[1], b[1])
    return lax.reduce((x, idx), (-jnp.inf, 0), comb, (1,))
@case("f_reduce_custom_body", f32(3, 5))
def _(x): return lax.reduce(x, 0.0, lambda a, b: a + b * b, (0,)), lax.reduce(x, 1.0, lax.mul, (0, 1))
@case("f_reduce_three_operands", f32(6), f32(6), i32(6))
def _(a, b, c): return lax.reduce((a, b, c), (0.0, 1.0, 0), lambda x, y: (x[0] + y[0], x[1] * y[1], jnp.maximum(x[2], y[2])), (0,))
@case("f_reduce_and_or_int", i32(4, 5, lo=0, hi=255), bools(4, 5))
def _(x, b): return lax.reduce(x, -1, lax.bitwise_and, (1,)), lax.reduce(b, False, lax.bitwise_or, (0,)), lax.reduce(x, 0, lax.bitwise_xor, (0,))

# ---- sort with several operands, num_keys, top_k, approx_max_k
@case("f_sort_three_operands_num_keys2", i32(8, lo=0, hi=3), f32(8), i32(8))
def _(k1, k2, v): return lax.sort((k1, k2, v), num_keys=2)
@case("f_sort_dimension0_unstable", f32(5, 3), i32(5, 3))
def _(x, y): return lax.sort((x, y), dimension=0, is_stable=False, num_keys=1)
@case("f_sort_nan_inf_negzero", np.array([np.nan, 1.0, -0.0, 0.0, -np.inf, np.inf, -1.0], np.float32))
def _(x): return jnp.sort(x), jnp.argsort(x), lax.sort(x)
@case("f_top_k_rows_and_ties", np.array([[1, 3, 3, 2], [5, 5, 5, 0]], np.float32))
def _(x): return lax.top_k(x, 2), lax.top_k(-x, 3)
@case("f_top_k_int_and_grad", i32(7), f32(7))
def _(i, x): return lax.top_k(i, 3), jax.grad(lambda x: lax.top_k(x, 2)[0].sum())(x)
@case("f_approx_max_k_recall", f32(3, 32))
def _(x): return lax.approx_max_k(x, 4), lax.approx_min_k(x, 2, reduction_dimension=0)
@case("f_approx_max_k_aggregate", f32(40))
def _(x): return lax.approx_max_k(x, 5, recall_target=0.99, aggregate_to_topk=False)[0].shape[0] * 0 + lax.approx_max_k(x, 5)[0]

# ---- dynamic slices at clamped indices
@case("f_dus_clamped_indices", f32(6, 4), f32(3, 2), np.int32(5), np.int32(-3))
def _(x, u, i, j): return lax.dynamic_update_slice(x, u, (i, j)), lax.dynamic_slice(x, (i, j), (2, 3)), lax.dynamic_slice_in_dim(x, -10, 2, 1)
@case("f_dus_index_in_dim_unsigned", f32(5, 3), np.uint32(9))
def _(x, i): return lax.dynamic_index_in_dim(x, i, 0), lax.dynamic_update_index_in_dim(x, jnp.ones(3), i, 0)
@case("f_dynamic_slice_vmap_clamped", f32(4, 6), i32(4, lo=-3, hi=9))
def _(x, i): return jax.vmap(lambda r, i: lax.dynamic_slice(r, (i,), (3,)))(x, i)

# ---- pad: negative and interior
@case("f_pad_negative_interior", f32(5, 4))
def _(x): return lax.pad(x, 0.0, ((-1, 2, 1), (1, -2, 2))), lax.pad(x, -1.0, ((0, 0, 3), (-1, -1, 0)))
@case("f_pad_int_bool", i32(3), bools(3))
def _(a, b): return lax.pad(a, 7, ((2, -1, 1),)), lax.pad(b, True, ((1, 1, 1),))
@case("f_pad_grad", f32(4))
def _(x): return jax.grad(lambda x: jnp.sum(lax.pad(x, 0.0, ((1, -1, 2),)) ** 2))(x)

# ---- convolutions
@case("f_conv_feature_group_count", f32(1, 4, 6, 6), f32(8, 2, 3, 3))
def _(x, w): return lax.conv_general_dilated(x, w, (1, 1), "SAME", feature_group_count=2)
@case("f_conv_batch_group_count", f32(4, 2, 5, 5), f32(4, 2, 3, 3))
def _(x, w): return lax.conv_general_dilated(x, w, (1, 1), "VALID", batch_group_count=2)
@case("f_conv_lhs_dilation_transpose", f32(1, 3, 4, 4), f32(2, 3, 3, 3))
def _(x, w): return lax.conv_general_dilated(x, w, (1, 1), ((2, 2), (2, 2)), lhs_dilation=(2, 2))
@case("f_conv_1d_lhs_rhs_dilation_stride", f32(2, 3, 11), f32(4, 3, 3))
def _(x, w): return lax.conv_general_dilated(x, w, (2,), [(1, 2)], lhs_dilation=(3,), rhs_dilation=(2,))
@case("f_conv_3d_ndhwc", f32(1, 4, 4, 4, 2), f32(2, 2, 2, 2, 3))
def _(x, w): return lax.conv_general_dilated(x, w, (1, 1, 1), "SAME", dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))
@case("f_conv_depthwise_grad_wrt_w", f32(2, 3, 6, 6), f32(3, 1, 3, 3))
def _(x, w): return jax.grad(lambda w: jnp.sum(lax.conv_general_dilated(x, w, (1, 1), "SAME", feature_group_count=3) ** 2))(w)
@case("f_conv_transpose_api", f32(1, 5, 5, 2), f32(3, 3, 2, 4))
def _(x, w): return lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
@case("f_conv_preferred_f32_from_f16", f32(1, 2, 6), f32(3, 2, 3))
def _(x, w): return lax.conv_general_dilated(x.astype(jnp.float16), w.astype(jnp.float16), (1,), "VALID", preferred_element_type=jnp.float32)
@case("f_conv_int", i32(1, 1, 6, lo=-3, hi=4), i32(1, 1, 3, lo=-2, hi=3))
def _(x, w): return lax.conv_general_dilated(x, w, (1,), "VALID")

# ---- dot_general
@case("f_dot_general_preferred_int", raw().randint(-100, 100, (3, 4)).astype(np.int8), raw().randint(-100, 100, (4, 2)).astype(np.int8))
def _(a, b): return lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=jnp.int32), jnp.matmul(a, b, preferred_element_type=jnp.int32)
@case("f_dot_general_batch_non_leading", f32(3, 2, 4), f32(4, 2, 5))
def _(a, b): return lax.dot_general(a, b, (((2,), (0,)), ((1,), (1,))))
@case("f_dot_general_f16_to_f32", f32(3, 8), f32(8, 2))
def _(a, b): return lax.dot_general(a.astype(jnp.float16), b.astype(jnp.float16), (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32)
@case("f_dot_general_uint8_to_int32", u8(2, 5), u8(5, 3))
def _(a, b): return lax.dot(a, b, preferred_element_type=jnp.int32), lax.dot(a.astype(jnp.int32), b.astype(jnp.int32))
@case("f_dot_general_no_contraction", f32(2, 3), f32(4))
def _(a, b): return lax.dot_general(a, b, (((), ()), ((), ())))
@case("f_einsum_preferred_element_type", f32(2, 3).astype(np.float16), f32(3, 4).astype(np.float16))
def _(a, b): return jnp.einsum("ij,jk->ik", a, b, preferred_element_type=jnp.float32)

# ---- reduce_precision, bitcast_convert_type, population_count, clz
@case("f_reduce_precision_formats", f32(6, lo=-1000, hi=1000))
def _(x): return lax.reduce_precision(x, 5, 10), lax.reduce_precision(x, 8, 7), lax.reduce_precision(x, 4, 3), lax.reduce_precision(x, 5, 2)
@case("f_bitcast_f32_to_u8_and_back", f32(3))
def _(x):
    b = lax.bitcast_convert_type(x, jnp.uint8)
    return b, lax.bitcast_convert_type(b, jnp.float32), lax.bitcast_convert_type(x, jnp.int32)
@case("f_bitcast_u16_pairs_to_f32", raw().randint(0, 2**15, (4, 2)).astype(np.uint16))
def _(u): return lax.bitcast_convert_type(u, jnp.float32), lax.bitcast_convert_type(u, jnp.int16), lax.bitcast_convert_type(u, jnp.float16)
@case("f_bitcast_f16_to_i8", f32(3).astype(np.float16))
def _(h): return lax.bitcast_convert_type(h, jnp.int8), lax.bitcast_convert_type(h, jnp.bfloat16).astype(jnp.float32)
@case("f_population_count_dtypes", u32(5), u8(5), i32(5, lo=-1000, hi=1000))
def _(a, b, c): return lax.population_count(a), lax.population_count(b), lax.population_count(c), lax.clz(b), lax.clz(c)
@case("f_bitwise_count_and_bitops", i32(5, lo=-50, hi=50))
def _(x): return jnp.bitwise_count(x), jnp.left_shift(x, 3), jnp.right_shift(x, 2), jnp.invert(x), jnp.bitwise_not(x.astype(jnp.uint8))

# ---- random bits: XLA's generator and the PRNG implementations
@case("f_rng_bit_generator_default", np.array([1, 2, 3, 4], np.uint32))
def _(k): return lax.rng_bit_generator(k, (4, 3), dtype=jnp.uint32)
@case("f_rng_bit_generator_philox", np.array([7, 0, 0, 9], np.uint32))
def _(k): return lax.rng_bit_generator(k, (5,), dtype=jnp.uint32, algorithm=lax.RandomAlgorithm.RNG_PHILOX)
@case("f_rng_bit_generator_threefry", np.array([7, 0, 3, 9], np.uint32))
def _(k): return lax.rng_bit_generator(k, (2, 3), dtype=jnp.uint32, algorithm=lax.RandomAlgorithm.RNG_THREE_FRY)
@case("f_rng_bit_generator_u8_u64", np.array([5, 6, 7, 8], np.uint32))
def _(k): return lax.rng_bit_generator(k, (7,), dtype=jnp.uint8, algorithm=lax.RandomAlgorithm.RNG_PHILOX)
@case("f_rbg_key_uniform", np.int32(11))
def _(s): return jax.random.uniform(jax.random.key(s, impl="rbg"), (5,))
@case("f_rbg_key_split_normal", np.int32(3))
def _(s):
    k1, k2 = jax.random.split(jax.random.key(s, impl="rbg"))
    return jax.random.normal(k1, (3,)), jax.random.bits(k2, (2,))
@case("f_unsafe_rbg_bits", np.int32(5))
def _(s): return jax.random.bits(jax.random.key(s, impl="unsafe_rbg"), (4,))
@case("f_threefry_partitionable_style", np.int32(2))
def _(s): k = jax.random.key(s); return jax.random.randint(k, (6,), -3, 8, dtype=jnp.int8), jax.random.uniform(k, (2,), jnp.float16)
@case("f_random_bits_uint8_uint16", np.array([0, 42], np.uint32))
def _(k): return jax.random.bits(k, (5,), jnp.uint8), jax.random.bits(k, (3,), jnp.uint16)
@case("f_random_truncated_normal_bf16", np.array([0, 9], np.uint32))
def _(k): return jax.random.truncated_normal(k, -1.0, 1.0, (4,)), jax.random.normal(k, (3,), jnp.bfloat16).astype(jnp.float32)
@case("f_random_zero_size", np.array([0, 9], np.uint32))
def _(k): return jax.random.normal(k, (0, 3)), jax.random.split(k, 0), jax.random.uniform(k, ())

# ---- batched jnp.linalg
@case("f_linalg_batched_inv_det", np.stack([spd(3), spd(3)]))
def _(a): return jnp.linalg.inv(a), jnp.linalg.det(a), jnp.linalg.slogdet(a)
@case("f_linalg_batched_solve_vector", np.stack([spd(3), spd(3)]), f32(2, 3))
def _(a, b): return jnp.linalg.solve(a, b[..., None])[..., 0], jnp.linalg.solve(a, jnp.stack([b, b], -1))
@case("f_linalg_batched_cholesky_eigh", np.stack([spd(3), spd(3), spd(3)]))
def _(a): return jnp.linalg.cholesky(a), jnp.linalg.eigvalsh(a)
@case("f_linalg_batched_qr_svdvals", f32(2, 4, 3))
def _(a): q, r = jnp.linalg.qr(a); return jnp.abs(r.diagonal(axis1=-2, axis2=-1)), jnp.linalg.svd(a, compute_uv=False), jnp.linalg.norm(a, "fro", (-2, -1))
@case("f_linalg_batched_norms_ord", f32(2, 3, 3))
def _(a): return jnp.linalg.norm(a, 1, (-2, -1)), jnp.linalg.norm(a, jnp.inf, (1, 2)), jnp.linalg.norm(a, 2, axis=-1), jnp.linalg.matrix_norm(a, ord="nuc")
@case("f_linalg_batched_pinv_lstsq", f32(2, 4, 3), f32(2, 4))
def _(a, b): return jnp.linalg.pinv(a), jax.vmap(lambda a, b: jnp.linalg.lstsq(a, b)[0])(a, b)
@case("f_linalg_batched_matrix_power_trace", f32(3, 2, 2, lo=-1, hi=1))
def _(a): return jnp.linalg.matrix_power(a, 3), jnp.trace(a, axis1=-2, axis2=-1), jnp.linalg.matrix_transpose(a)
@case("f_linalg_complex_batched", c64(2, 3, 3) + 4 * np.eye(3, dtype=np.complex64))
def _(a): return jnp.linalg.inv(a), jnp.linalg.det(a)
@case("f_linalg_empty_batch", np.zeros((0, 3, 3), np.float32))
def _(a): return jnp.linalg.det(a + jnp.eye(3)), jnp.linalg.inv(a + jnp.eye(3))

# ---- jax.scipy.signal
@case("f_signal_convolve_modes", f32(12), f32(4))
def _(x, h):
    from jax.scipy import signal
    return signal.convolve(x, h), signal.convolve(x, h, mode="same"), signal.correlate(x, h, mode="valid")
@case("f_signal_convolve2d_boundary", f32(6, 5), f32(3, 2))
def _(x, h):
    from jax.scipy import signal
    return signal.convolve2d(x, h, mode="same"), signal.correlate2d(x, h, mode="full")
@case("f_signal_fftconvolve", f32(20), f32(5))
def _(x, h):
    from jax.scipy import signal
    return signal.fftconvolve(x, h), signal.fftconvolve(x, h, mode="valid")
@case("f_signal_detrend", f32(3, 10))
def _(x):
    from jax.scipy import signal
    return signal.detrend(x), signal.detrend(x, type="constant", axis=0)
@case("f_signal_welch_csd", f32(64), f32(64))
def _(x, y):
    from jax.scipy import signal
    return signal.welch(x, nperseg=16)[1], jnp.abs(signal.csd(x, y, nperseg=16)[1])
@case("f_signal_stft_istft", f32(40))
def _(x):
    from jax.scipy import signal
    _, _, z = signal.stft(x, nperseg=8)
    return jnp.abs(z), signal.istft(z, nperseg=8)[1]

# ---- jax.scipy.ndimage.map_coordinates
@case("f_map_coordinates_modes", f32(5, 6), f32(2, 7, lo=-2, hi=7))
def _(img, c):
    from jax.scipy.ndimage import map_coordinates
    return [map_coordinates(img, [c[0], c[1]], order=1, mode=m, cval=0.5) for m in ("constant", "nearest", "wrap", "mirror", "reflect")]
@case("f_map_coordinates_order0_3d", f32(3, 4, 5), f32(3, 6, lo=-1, hi=5))
def _(v, c):
    from jax.scipy.ndimage import map_coordinates
    return map_coordinates(v, list(c), order=0), map_coordinates(v, list(c), order=1, mode="nearest")
@case("f_map_coordinates_grad", f32(4, 4), f32(2, 5, lo=0, hi=3))
def _(img, c):
    from jax.scipy.ndimage import map_coordinates
    return jax.grad(lambda im: map_coordinates(im, [c[0], c[1]], order=1).sum())(img)

# ---- jax.image.resize: every method
@case("f_resize_every_method_up", f32(5, 6))
def _(x): return [jax.image.resize(x, (8, 9), m) for m in ("nearest", "linear", "cubic", "lanczos3", "lanczos5")]
@case("f_resize_every_method_down_antialias", f32(9, 8))
def _(x): return [jax.image.resize(x, (4, 3), m, antialias=a) for m in ("linear", "cubic", "lanczos3") for a in (True, False)]
@case("f_resize_3d_trilinear_bicubic", f32(2, 4, 4, 3))
def _(x): return jax.image.resize(x, (2, 6, 3, 3), "trilinear"), jax.image.resize(x, (2, 2, 7, 3), "bicubic"), jax.image.resize(x, (2, 5, 5, 3), "bilinear")
@case("f_resize_nearest_down_int_like", f32(6, 6))
def _(x): return jax.image.resize(x, (3, 2), "nearest"), jax.image.resize(x, (1, 1), "linear")
@case("f_scale_and_translate_methods", f32(6, 6))
def _(x):
    return [jax.image.scale_and_translate(x, (5, 7), (0, 1), jnp.array([0.8, 1.2]), jnp.array([0.5, -1.0]), m)
            for m in ("linear", "cubic", "lanczos3")]

# ---- jnp.fft variants
@case("f_fft_norms_axes", c64(4, 6))
def _(z): return [jnp.fft.fft(z, norm=n, axis=0) for n in ("backward", "ortho", "forward")] + [jnp.fft.ifft(z, n=8, norm="ortho")]
@case("f_fft_fftn_ifftn_s_axes", c64(3, 4, 5))
def _(z): return jnp.fft.fftn(z, s=(4, 6), axes=(0, 2)), jnp.fft.ifftn(z, axes=(-1,)), jnp.fft.fft2(z, axes=(-3, -1))
@case("f_fft_rfft_odd_and_real_input_int", f32(9), i32(8))
def _(x, i): return jnp.fft.rfft(x), jnp.fft.irfft(jnp.fft.rfft(x), n=9), jnp.fft.fft(i), jnp.fft.rfft(i, n=5)
@case("f_fft_rfft2_irfft2_s", f32(6, 8))
def _(x): return jnp.fft.rfft2(x), jnp.fft.irfft2(jnp.fft.rfft2(x), s=(6, 8)), jnp.fft.irfftn(jnp.fft.rfftn(x, s=(4, 4)))
@case("f_fft_hfft_ihfft_norm", f32(8))
def _(x): return jnp.fft.ihfft(x, norm="ortho"), jnp.fft.hfft(jnp.fft.ihfft(x), n=8), jnp.fft.hfft(x[:5].astype(jnp.complex64), norm="forward")
@case("f_fft_shift_freq_helpers", c64(8))
def _(z): return jnp.fft.fftshift(jnp.fft.fft(z)), jnp.fft.ifftshift(z), jnp.fft.fftfreq(8, d=0.1), jnp.fft.rfftfreq(7)
@case("f_fft_grad_through_rfft", f32(8))
def _(x): return jax.grad(lambda x: jnp.sum(jnp.abs(jnp.fft.rfft(x)) ** 2))(x)
@case("f_fft_length1_and_f16_input", f32(1), f32(4).astype(np.float16))
def _(a, h): return jnp.fft.fft(a), jnp.fft.rfft(a), jnp.fft.fft(h)
@case("f_fft_vmap_fft2", c64(3, 4, 4))
def _(z): return jax.vmap(jnp.fft.fft2)(z), jax.vmap(jnp.fft.ifft, in_axes=1, out_axes=1)(z)

# ---- odds and ends of explicit lax
@case("f_lax_rng_uniform", np.float32(0.0))
def _(a): return lax.rng_uniform(a, 1.0, (3,))
@case("f_lax_reduce_window_padding_strides", f32(1, 7, 7, 1))
def _(x): return lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), ((0, 0), (1, 1), (2, 0), (0, 0)))
@case("f_lax_reduce_window_base_dilation", f32(6))
def _(x): return lax.reduce_window(x, 0.0, lax.add, (2,), (1,), "VALID", base_dilation=(2,), window_dilation=(2,))
@case("f_lax_cumlogsumexp_reverse_axis", f32(3, 5))
def _(x): return lax.cumlogsumexp(x, axis=1, reverse=True), lax.cummax(x, axis=0), lax.cummin(x, reverse=True)
@case("f_lax_gather_fill_mode", f32(5, 3), i32(4, 1, lo=-2, hi=7))
def _(x, i):
    dn = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    return lax.gather(x, i, dn, (1, 3), mode="fill", fill_value=-7.0), lax.gather(x, i, dn, (1, 3), mode="clip")
@case("f_lax_scatter_mul_min", f32(5), i32(4, 1, lo=0, hi=5), f32(4))
def _(x, i, u):
    dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    return lax.scatter_mul(x, i, u, dn), lax.scatter_min(x, i, u, dn), lax.scatter_max(x, i, u, dn)
@case("f_lax_select_n_many", i32(6, lo=0, hi=4), f32(6), f32(6), f32(6), f32(6))
def _(w, a, b, c, d): return lax.select_n(w, a, b, c, d), lax.select_n(w > 1, a, b)
@case("f_lax_iota_eye_tri", np.float32(1.0))
def _(a): return lax.iota(jnp.int8, 4), lax.broadcasted_iota(jnp.float32, (2, 3), 1) * a, jnp.tri(3, 4, -1, jnp.int32)
@case("f_lax_expand_dims_squeeze_rev", f32(3, 1, 2))
def _(x): return lax.expand_dims(x, (0, 4)), lax.squeeze(x, (1,)), lax.rev(x, (0, 2)), lax.collapse(x, 0, 2)
@case("f_lax_nextafter_clamp_erf", f32(4), f32(4))
def _(a, b): return lax.nextafter(a, b), lax.clamp(-0.5, a, 0.5), lax.erf_inv(jnp.clip(a / 3, -0.9, 0.9)), lax.is_finite(a / (b - b))
@case("f_lax_polygamma_igamma_family", pos(4), pos(4))
def _(a, x): return lax.igamma(a, x), lax.igammac(a, x), lax.lgamma(a), lax.digamma(a), lax.random_gamma_grad(a, x), lax.bessel_i1e(x)
@case("f_lax_conv_general_dilated_patches", f32(1, 2, 5, 5))
def _(x): return lax.conv_general_dilated_patches(x, (2, 2), (1, 2), "VALID")
@case("f_lax_cond_with_pos_int8_index", np.int32(2), f32(3))
def _(i, x): return lax.switch(i.astype(jnp.int8), [lambda: x, lambda: x * 2, lambda: x * 3])
@case("f_lax_while_pytree_with_none", f32(2))
def _(x): return lax.while_loop(lambda c: c["n"] < 3, lambda c: {"n": c["n"] + 1, "x": c["x"] * 2, "z": None}, {"n": 0, "x": x, "z": None})
@case("f_lax_split_and_concat_many", f32(10, 2))
def _(x): return lax.split(x, (3, 0, 7), axis=0), lax.concatenate([x, x, x[:0]], 0)
@case("f_lax_optimization_barrier_tuple", f32(3), np.int32(2))
def _(x, n): a, m = lax.optimization_barrier((x * 2, n + 1)); return a * m
@case("f_lax_stop_gradient_in_grad", f32(3))
def _(x): return jax.grad(lambda x: jnp.sum(x * lax.stop_gradient(x) ** 2))(x)
@case("f_lax_linalg_tridiagonal_solve_batched", f32(2, 5, lo=0.1, hi=0.5), f32(2, 5, lo=3, hi=4), f32(2, 5, lo=0.1, hi=0.5), f32(2, 5, 1))
def _(dl, d, du, b): return lax.linalg.tridiagonal_solve(dl.at[:, 0].set(0), d, du.at[:, -1].set(0), b)
@case("f_lax_custom_root", f32(3, lo=1, hi=4))
def _(a):
    def solve_sqrt(f, x0):
        return lax.while_loop(lambda c: jnp.max(jnp.abs(f(c))) > 1e-5, lambda c: c - f(c) / (2 * c), x0)
    def tangent_solve(g, y): return y / g(jnp.ones_like(y))
    sq = lambda a: lax.custom_root(lambda x: x * x - a, jnp.ones_like(a), solve_sqrt, tangent_solve)
    return sq(a), jax.grad(lambda a: sq(a).sum())(a)
@case("f_lax_custom_linear_solve_sym", spd(3), f32(3))
def _(a, b):
    mv = lambda x: a @ x
    def solve(matvec, b): return jnp.linalg.solve(a, b)
    return lax.custom_linear_solve(mv, b, solve, symmetric=True), jax.grad(lambda b: lax.custom_linear_solve(mv, b, solve, symmetric=True).sum())(b)
