"""Forms held-out batch F found (tests/jax_corpus/heldout_batch_f*.py), written by hand in JAX 0.10's
style, compiled with sprue.load and compared with numpy: the constvars of called jaxprs as
parameters, complex sorts, reshapes with `dimensions`, bitcasts to and from bfloat16's bits,
approx_top_k without aggregation, and XLA's stateful generator refused by name."""
import numpy as np
import pytest

from sprue.errors import SprueTypeError
from sprue.io.jaxpr_lexer import JaxprUnsupportedError
from tests.helpers.jaxprs import load_text as load

# two shared jaxprs with constants (as JAX >= 0.7 prints jnp.piecewise's coefficients), one called in a
# cond branch, and an inline jit with its own; the main jaxpr has a constvar too
CALLED_CONSTS = """let scale = { lambda a:f32[3]; b:f32[3]. let
    c:f32[3] = mul a b
  in (c,) } in
let shift = { lambda d:f32[] e:f32[3]; f:f32[3]. let
    g:f32[3] = add f e
    h:f32[3] = mul g d
  in (h,) } in
{ lambda m:f32[3]; n:f32[3] o:i32[]. let
    p:f32[3] = jit[name=scale jaxpr=scale] n
    q:f32[3] = cond[
      branches=(
        { lambda ; r:f32[3]. let s:f32[3] = jit[name=shift jaxpr=shift] r in (s,) }
        { lambda ; t:f32[3]. let u:f32[3] = neg t in (u,) }
      )
    ] o p
    v:f32[3] = jit[
      name=inner
      jaxpr={ lambda w:f32[3]; x:f32[3]. let y:f32[3] = sub x w in (y,) }
    ] q
    z:f32[3] = add v m
  in (z,) }"""


def test_called_jaxprs_constvars_are_parameters_after_the_mains(tmp_path):
    f = load(tmp_path, CALLED_CONSTS)
    assert f.constvars == ["m", "a", "d", "e", "w"] and f.arg_names == ["m", "a", "d", "e", "w", "n", "o"]
    rng = np.random.RandomState(0)
    m, a, e, w, n = (rng.uniform(-1, 1, 3).astype(np.float32) for _ in range(5))
    d = np.float32(1.5)
    for o in (0, 1):
        p = a * n
        q = (p + e) * d if o == 0 else -p
        np.testing.assert_allclose(f(m, a, d, e, w, n, np.int32(o)), q - w + m, rtol=1e-6)
    with pytest.raises(SprueTypeError, match=r"takes 7 arguments .*got 2; the first 5 \(m, a, d, e, w\) are the"
                                             r" jaxpr's constvars"):
        f(n, np.int32(0))


def test_complex_sorts_order_by_real_then_imaginary_part(tmp_path):
    # jnp.sort / argsort of complex64 (ties in the real part), num_keys=1 with an index payload
    f = load(tmp_path, "{ lambda ; a:c64[6] b:i32[6]. let\n"
                       "    c:c64[6] = sort[dimension=0 is_stable=True num_keys=1] a\n"
                       "    _:c64[6] d:i32[6] = sort[dimension=0 is_stable=True num_keys=1] a b\n"
                       "  in (c, d) }")
    z = np.array([1 + 2j, -1 + 0j, 1 - 1j, 0.5 + 3j, -1 - 2j, 1 + 2j], np.complex64)
    c, d = f(z, np.arange(6, dtype=np.int32))
    np.testing.assert_array_equal(c, np.sort(z))   # numpy orders complex numbers the same way
    np.testing.assert_array_equal(d, np.argsort(z, kind="stable"))


def test_reshape_with_dimensions_transposes_first(tmp_path):
    # jnp.reshape(x, (4, -1), order="F") and ravel(order="F")
    f = load(tmp_path, "{ lambda ; a:f32[2,3,4]. let\n"
                       "    b:f32[6,4] = reshape[dimensions=(2, 1, 0) new_sizes=(6, 4) sharding=None] a\n"
                       "    c:f32[24] = reshape[dimensions=(1, 0, 2) new_sizes=(24,) sharding=None] a\n"
                       "  in (b, c) }")
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b, c = f(x)
    np.testing.assert_array_equal(b, np.transpose(x, (2, 1, 0)).reshape(6, 4))
    np.testing.assert_array_equal(c, np.transpose(x, (1, 0, 2)).reshape(24))


def test_bitcasts_to_and_from_bfloat16(tmp_path):
    # jax.random's bfloat16 uniform makes its values from bits (u16 -> bf16); a float16's bits read as
    # a bfloat16 (f16 -> bf16); a bfloat16's bits as int16 (bf16 -> i16)
    f = load(tmp_path, "{ lambda ; a:u16[3] b:f16[3]. let\n"
                       "    c:bf16[3] = bitcast_convert_type[new_dtype=bfloat16] a\n"
                       "    d:f32[3] = convert_element_type[new_dtype=float32 weak_type=False] c\n"
                       "    e:bf16[3] = bitcast_convert_type[new_dtype=bfloat16] b\n"
                       "    g:f32[3] = convert_element_type[new_dtype=float32 weak_type=False] e\n"
                       "    h:i16[3] = bitcast_convert_type[new_dtype=int16] c\n"
                       "  in (d, g, h) }")
    bits = np.array([0x3F80, 0xC040, 0x0001], np.uint16)
    half = np.array([1.0, -2.5, 65504], np.float16)
    d, g, h = f(bits, half)
    as_f32 = lambda u: (u.astype(np.uint32) << 16).view(np.float32)   # noqa: E731
    np.testing.assert_array_equal(d, as_f32(bits))
    np.testing.assert_array_equal(g, as_f32(half.view(np.uint16)))
    np.testing.assert_array_equal(h, bits.view(np.int16))


def test_approx_top_k_without_aggregation_returns_the_declared_count(tmp_path):
    # lax.approx_max_k(x, 2, aggregate_to_topk=False): on a CPU, as many as the results declare, sorted
    f = load(tmp_path, "{ lambda ; a:f32[6]. let\n"
                       "    b:f32[6] c:i32[6] = approx_top_k[aggregate_to_topk=False is_max_k=True k=2"
                       " recall_target=0.95 reduction_dimension=-1 reduction_input_size_override=-1] a\n"
                       "  in (b, c) }")
    x = np.array([0.3, -1.0, 2.0, 0.7, 5.0, -3.0], np.float32)
    b, c = f(x)
    np.testing.assert_array_equal(b, np.sort(x)[::-1])
    np.testing.assert_array_equal(c, np.argsort(-x))


def test_xlas_stateful_generator_is_refused_by_name(tmp_path):
    with pytest.raises(JaxprUnsupportedError, match=r"prog.jaxpr:1:25: primitive 'rng_uniform' is not supported:"
                                                    r" it is XLA's stateful generator .*no results to reproduce"):
        load(tmp_path, "{ lambda ; a:f32[]. let b:f32[3] = rng_uniform[shape=(3,)] a 1.0:f32[] in (b,) }")


def test_called_constvars_inside_loop_bodies(tmp_path):
    # a shared jaxpr with a constant called in a while loop's cond and body and in a scan's body
    f = load(tmp_path, """let step = { lambda a:f32[2]; b:f32[2]. let
    c:f32[2] = add b a
  in (c,) } in
{ lambda ; d:f32[2] e:f32[3,2]. let
    f:f32[2] = while[
      body_jaxpr={ lambda ; g:f32[2]. let h:f32[2] = jit[name=step jaxpr=step] g in (h,) }
      body_nconsts=0
      cond_jaxpr={ lambda ; i:f32[2]. let
          j:f32[2] = jit[name=step jaxpr=step] i
          k:f32[] = reduce_sum[axes=(0,) out_sharding=None] j
          l:bool[] = lt k 10.0:f32[]
        in (l,) }
      cond_nconsts=0
    ] d
    m:f32[2] n:f32[3,2] = scan[
      _split_transpose=False
      jaxpr={ lambda ; o:f32[2] p:f32[2]. let
          q:f32[2] = jit[name=step jaxpr=step] o
          r:f32[2] = mul q p
        in (r, q) }
      length=3
      linear=(False, False)
      num_carry=1
      num_consts=0
      reverse=False
      unroll=1
    ] f e
  in (m, n) }""")
    assert f.constvars == ["a"]
    a = np.array([0.5, 1.0], np.float32)
    d = np.array([0.0, 1.0], np.float32)
    e = np.arange(6, dtype=np.float32).reshape(3, 2) / 4
    x = d
    while (x + a).sum() < 10:
        x = x + a
    ys = []
    for row in e:
        ys.append(x + a)
        x = (x + a) * row
    m, n = f(a, d, e)
    np.testing.assert_allclose(m, x, rtol=1e-6)
    np.testing.assert_allclose(n, np.stack(ys), rtol=1e-6)
