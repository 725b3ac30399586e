"""The forms recent JAX prints that sprue spells otherwise (io/jaxpr_compat.py) and the params JAX's
printer leaves out (jaxpr_params.OMITTED), written by hand in JAX's style, compiled with sprue.load
and compared with numpy; what is left unsupported, by its error's text."""
import numpy as np
import pytest

from sprue.io.jaxpr_lexer import JaxprUnsupportedError
from tests.helpers.jaxprs import load_text as load


def test_one_line_jaxpr_with_special_literals_and_omitted_params(tmp_path):
    # JAX 0.10: `;` between equations, broadcast_in_dim without shape and broadcast_dimensions, -inf
    f = load(tmp_path, "{ lambda ; a:f32[3]. let b:f32[3] = broadcast_in_dim -inf:f32[]; c:bool[3] = gt a 0.0:f32[];"
                       " d:f32[3] = select_n c b a; e:f32[3] = add d inf:f32[]; g:f32[] = reduce_max[axes=(0,)] d"
                       " in (d, e, g) }")
    x = np.array([-1.0, 2.0, 0.5], np.float32)
    d, e, g = f(x)
    np.testing.assert_array_equal(d, np.where(x > 0, x, -np.inf))
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(e, d + np.float32(np.inf))   # -inf + inf is NaN
    assert g == 2.0


def test_binary_operations_broadcast_size_one_dimensions(tmp_path):
    f = load(tmp_path, """\
{ lambda ; a:f32[4,5] b:f32[1,5] c:f32[4,1]. let
    d:f32[4,5] = add a b
    e:f32[4,5] = sub d c
    f:f32[4,5] = mul b c
    g:bool[4,5] = lt c b
  in (e, f, g) }
""")
    a, b, c = (np.random.RandomState(0).rand(*s).astype(np.float32) for s in ((4, 5), (1, 5), (4, 1)))
    e, fb, g = f(a, b, c)
    np.testing.assert_allclose(e, a + b - c, rtol=1e-6)
    np.testing.assert_allclose(fb, b * c, rtol=1e-6)
    np.testing.assert_array_equal(g, c < b)


def test_scan_without_linear_and_a_returned_underscore(tmp_path):
    f = load(tmp_path, """\
{ lambda ; a:f32[4]. let
    _:i32[] b:f32[4] = scan[
      jaxpr={ lambda ; c:i32[] d:f32[4]. let
          e:i32[] = add c 1:i32[]
          f:f32[4] = mul d 2.0:f32[]
        in (e, f) }
      length=3
      num_carry=2
      num_consts=0
      reverse=False
    ] 0:i32[] a
    c:f32[4] = jit[name=g jaxpr={ lambda ; b:f32[4]. let _:f32[4] = neg b in (_,) }] b
  in (c,) }
""")
    np.testing.assert_array_equal(f(np.arange(4, dtype=np.float32)), -8 * np.arange(4))


def test_stack_tile_and_empty(tmp_path):
    f = load(tmp_path, """\
{ lambda ; a:f32[2,3]. let
    b:f32[2,2,3] = stack[axis=0] a a
    c:f32[4,6] = tile[reps=(2, 2)] a
    d:f32[] = empty2[dtype=float32]
    e:f32[2,3] = broadcast_in_dim d
    g:f32[2,3] = add a e
  in (b, c, g) }
""")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b, c, g = f(a)
    np.testing.assert_array_equal(b, np.stack([a, a]))
    np.testing.assert_array_equal(c, np.tile(a, (2, 2)))
    np.testing.assert_array_equal(g, a)


def test_gather_with_batching_dims(tmp_path):
    # JAX >= 0.4.31: vmap of dynamic_slice
    f = load(tmp_path, """\
{ lambda ; a:f32[5,8] b:i32[5]. let
    f:i32[5,1] = broadcast_in_dim[broadcast_dimensions=(0,)] b
    g:f32[5,3] = gather[
      dimension_numbers=GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(), start_index_map=(1,), operand_batching_dims=(0,), start_indices_batching_dims=(0,))
      fill_value=None
      indices_are_sorted=True
      mode=GatherScatterMode.CLIP
      slice_sizes=(1, 3)
      unique_indices=True
    ] a f
  in (g,) }
""")
    a = np.arange(40, dtype=np.float32).reshape(5, 8)
    i = np.array([0, 2, 7, 5, 1], np.int32)
    want = np.stack([a[r, min(k, 5):min(k, 5) + 3] for r, k in enumerate(i)])
    np.testing.assert_array_equal(f(a, i), want)


def test_pooling_top_k_cumlogsumexp_reduce_precision(tmp_path):
    f = load(tmp_path, """\
{ lambda ; a:f32[4,6]. let
    b:f32[3,3] = reduce_window_max[
      base_dilation=(1, 1)
      padding=((0, 0), (0, 1))
      window_dilation=(1, 1)
      window_dimensions=(2, 2)
      window_strides=(1, 2)
    ] a
    c:f32[4,2] d:i32[4,2] = top_k[k=2] a
    e:f32[4,6] = cumlogsumexp[axis=1 reverse=False] a
    g:f32[4,6] = reduce_precision[exponent_bits=5 mantissa_bits=10] a
  in (b, c, d, e, g) }
""")
    a = np.array([[1, 5, 2, 5, 0, -1], [3, 3, 3, 3, 3, 3], [-200, 0, -100, 7, 1e-3, 2],
                  [0.1, 0.2, 0.3, 0.4, 0.5, 70000]], np.float32)
    b, c, d, e, g = f(a)
    padded = np.pad(a, ((0, 0), (0, 1)), constant_values=-np.inf)
    np.testing.assert_array_equal(b, [[padded[r:r + 2, k:k + 2].max() for k in (0, 2, 4)] for r in range(3)])
    order = np.argsort(-a, axis=1, kind="stable")[:, :2]
    np.testing.assert_array_equal(d, order)
    np.testing.assert_array_equal(c, np.take_along_axis(a, order, 1))
    want = np.logaddexp.accumulate(a.astype(np.float64), axis=1)   # no common shift: -200 stays -200
    np.testing.assert_allclose(e, want, rtol=1e-6, atol=1e-6)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(g, a.astype(np.float16).astype(np.float32))   # 70000 -> inf, as float16


def test_unsupported_primitives_and_forms_name_themselves_at_their_line(tmp_path):
    with pytest.raises(JaxprUnsupportedError, match=r"prog.jaxpr:2:5: unknown primitive 'schur'"):
        load(tmp_path, "{ lambda ; a:f32[3,3]. let\n    b:f32[3,3] c:f32[3,3] = schur a\n  in (b, c) }")
    # dilated windows read through lax.reduce_window: a[i] + a[i + 2]
    f = load(tmp_path, "{ lambda ; a:f32[4]. let\n    b:f32[2] = reduce_window_sum[base_dilation=(1,)"
                       " padding=((0, 0),) window_dilation=(2,) window_dimensions=(2,) window_strides=(1,)] a\n"
                       "  in (b,) }")
    a = np.array([1.0, 2.0, 4.0, 8.0], np.float32)
    np.testing.assert_array_equal(f(a), a[:2] + a[2:])


def test_total_order_comparisons(tmp_path):
    # jnp.searchsorted / jnp.interp: -0 < +0, NaN above +inf (IEEE 754 totalOrder)
    f = load(tmp_path, "{ lambda ; a:f32[6] b:f32[6]. let c:bool[6] = lt_to a b; d:bool[6] = le_to a b;"
                       " e:bool[6] = eq_to a b in (c, d, e) }")
    a = np.array([-0.0, 0.0, np.nan, -np.inf, 1.0, 2.0], np.float32)
    b = np.array([0.0, -0.0, np.inf, -1.0, 1.0, np.nan], np.float32)
    lt, le, eq = f(a, b)
    np.testing.assert_array_equal(lt, [True, False, False, True, False, True])
    np.testing.assert_array_equal(le, [True, False, False, True, True, True])
    np.testing.assert_array_equal(eq, [False, False, False, False, True, False])


def _bf16(x):
    """float32 values rounded to bfloat16's 8 significant bits, to nearest even (frexp's mantissa in
    [0.5, 1) times 2**8 rounded by np.round, which rounds halves to even)."""
    m, e = np.frexp(x.astype(np.float64))
    return np.ldexp(np.round(m * 256) / 256, e).astype(np.float32)


def test_bfloat16_inside_a_program_is_float32_rounded_after_each_equation(tmp_path):
    # jnp.bfloat16 inside jax.numpy code: every bf16 result (and literal) rounded to bfloat16
    f = load(tmp_path, """\
{ lambda ; a:f32[6] b:i32[6]. let
    c:bf16[6] = convert_element_type[new_dtype=bfloat16 weak_type=False] a
    d:bf16[6] = mul c 1.1:bf16[]
    e:bf16[6] = exp d
    g:bf16[6] = convert_element_type[new_dtype=bfloat16 weak_type=False] b
    h:bf16[6] = add e g
    i:f32[6] = convert_element_type[new_dtype=float32 weak_type=False] h
    j:f32[] = reduce_sum[axes=(0,)] i
  in (i, j) }
""")
    a = np.array([0.3, -1.7, 2.05, 1e-3, 3.3, -0.01], np.float32)
    b = np.array([1, 300, -2, 7, 1001, 0], np.int32)
    i, j = f(a, b)
    d = _bf16(_bf16(a) * _bf16(np.float32(1.1)))
    want = _bf16(_bf16(np.exp(d)) + _bf16(b.astype(np.float32)))   # 1001 is no bfloat16: 1000
    np.testing.assert_allclose(i, want, rtol=1e-6)   # exp in float32 a few ulp from numpy's, then rounded alike
    assert i.dtype == j.dtype == np.float32
    np.testing.assert_allclose(j, i.sum(dtype=np.float64), rtol=1e-6)


def test_an_lu_solve_in_a_loop_in_float64(tmp_path):
    # jnp.linalg.solve in a fori_loop under jax.enable_x64: sprue's LU slices its empty left part,
    # which lowered as tensor.extract_slice of a zero-size dim failed MLIR's verifier
    f = load(tmp_path, """\
{ lambda ; a:f64[3,3] b:f64[3]. let
    _:i64[] c:f64[3] = scan[
      jaxpr={ lambda ; d:f64[3,3] e:i64[] g:f64[3]. let
          h:i64[] = add e 1:i64[]
          i:f64[3,3] j:i32[3] k:i32[3] = lu d
          l:f64[3,1] = broadcast_in_dim[broadcast_dimensions=(0,)] g
          m:i32[3,1] = broadcast_in_dim[broadcast_dimensions=(0,)] k
          n:f64[3,1] = gather[
            dimension_numbers=GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,), operand_batching_dims=(), start_indices_batching_dims=())
            fill_value=None
            indices_are_sorted=False
            mode=GatherScatterMode.PROMISE_IN_BOUNDS
            slice_sizes=(1, 1)
            unique_indices=False
          ] l m
          o:f64[3,1] = triangular_solve[left_side=True lower=True transpose_a=False unit_diagonal=True] i n
          p:f64[3,1] = triangular_solve[left_side=True lower=False transpose_a=False unit_diagonal=False] i o
          q:f64[3] = reshape[dimensions=None new_sizes=(3,)] p
          r:f64[3] = sub g q
        in (h, r) }
      length=3
      linear=(False, False, False)
      num_carry=2
      num_consts=1
      reverse=False
      unroll=1
    ] a 0:i64[] b
  in (c,) }
""")
    a = np.array([[1.0, 4.0, 0.5], [3.0, 1.0, 2.0], [0.0, 2.0, 5.0]])
    b = np.array([1.0, -2.0, 0.5])
    want = b.copy()
    for _ in range(3):
        want = want - np.linalg.solve(a, want)
    np.testing.assert_allclose(f(a, b), want, rtol=1e-12)


def test_bitcast_convert_type_between_widths_splits_and_joins_the_last_axis(tmp_path):
    # lax.bitcast_convert_type(x, jnp.uint8) of float32s, and back; float64 into int16 pieces
    f = load(tmp_path, """\
{ lambda ; a:f32[2,3] b:u8[3,4] c:f64[2]. let
    d:u8[2,3,4] = bitcast_convert_type[new_dtype=uint8] a
    e:f32[3] = bitcast_convert_type[new_dtype=float32] b
    g:i16[2,4] = bitcast_convert_type[new_dtype=int16] c
    h:f64[2] = bitcast_convert_type[new_dtype=float64] g
  in (d, e, g, h) }
""")
    a = np.array([[1.0, -0.0, np.inf], [3.5e-40, np.nan, -7.25]], np.float32)
    b = np.random.RandomState(1).randint(0, 256, (3, 4)).astype(np.uint8)
    c = np.array([np.pi, -1e300])
    d, e, g, h = f(a, b, c)
    # numpy's views of the same memory, on this little-endian machine as XLA's CPU
    np.testing.assert_array_equal(d, a.view(np.uint8).reshape(2, 3, 4))
    np.testing.assert_array_equal(e.view(np.uint32), b.view(np.uint32)[:, 0])
    np.testing.assert_array_equal(g, c.view(np.int16).reshape(2, 4))
    np.testing.assert_array_equal(h, c)
