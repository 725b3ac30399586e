"""Forms held-out batch D found (tests/jax_corpus/heldout_batch_d.py), written by hand in JAX 0.10's
style, compiled with sprue.load and compared with numpy: vmap's collectives, jax.debug.print,
float16 products accumulated in float32, loops carrying PRNG keys, and the leading parameters a
jaxpr's constvars become."""
import numpy as np
import pytest

import sprue
from sprue.errors import SprueTypeError
from sprue.io.jaxpr_lexer import JaxprUnsupportedError
from sprue.runtime import load as load_library
from sprue.tools.cli import main
from sprue.tools.compile import read_kernel
from tests.helpers.jaxprs import load_text as load


def test_vmaps_collectives_reduce_over_their_positional_axes(tmp_path):
    # jax.vmap(f, axis_name="i") with lax.psum / pmax / pmin(x, "i") inside
    f = load(tmp_path, "{ lambda ; a:f32[5,2] b:i32[5,2]. let\n"
                       "    c:f32[2] = psum[axes=(0,) axis_index_groups=None] a\n"
                       "    d:f32[2] = pmax[axes=(0,) axis_index_groups=None] a\n"
                       "    e:i32[] f:f32[] = pmin[axes=(0, 1) axis_index_groups=None] b a\n  in (c, d, e, f) }")
    a = np.random.RandomState(0).uniform(-1, 1, (5, 2)).astype(np.float32)
    b = np.arange(10, dtype=np.int32).reshape(5, 2) - 3
    c, d, e, g = f(a, b)
    np.testing.assert_allclose(c, a.sum(0), rtol=1e-6)
    np.testing.assert_array_equal(d, a.max(0))
    assert e == b.min() and g == a.min()


def test_collectives_over_named_axes_are_refused_by_name(tmp_path):
    with pytest.raises(JaxprUnsupportedError, match=r"prog.jaxpr:2:5: psum: a collective over the named axes"
                                                    r" \('i',\) .*one device's program"):
        load(tmp_path, "{ lambda ; a:f32[2]. let\n    b:f32[2] = psum[axes=('i',) axis_index_groups=None] a\n"
                       "  in (b,) }")


def test_jax_debug_print_prints_as_str_format(tmp_path, capfd):
    # jax.debug.print("x = {x}, {} and {}", a, b, x=c): the format unquoted, the operands the leaves
    # of (args, kwargs) laid out by in_tree; printed when the compiled code runs
    f = load(tmp_path, "{ lambda ; a:f32[3] b:i32[] c:f32[]. let\n"
                       "    debug_print[\n      fmt=x = {x}, {} and {}: done\n      has_placeholders=True\n"
                       "      in_tree=PyTreeDef(((*, *), {'x': *}))\n      logging_record=None\n"
                       "      np_printoptions=(('precision', 8), ('formatter', None))\n      ordered=False\n"
                       "      partitioned=False\n      static_args=()\n    ] a b c\n"
                       "    d:f32[3] = mul a 2.0:f32[]\n  in (d,) }")
    a = np.array([1.5, -2.0, 0.25], np.float32)
    capfd.readouterr()
    np.testing.assert_array_equal(f(a, np.int32(7), np.float32(0.5)), a * 2)
    assert capfd.readouterr().out == "x = {}, {} and {}: done\n".format(0.5, a, 7)
    # one line: the format runs to the next param
    f = load(tmp_path, "{ lambda ; a:f32[]. let debug_print[fmt=a={} has_placeholders=True"
                       " in_tree=PyTreeDef(((*,), {})) static_args=()] a in (a,) }", "one_line.jaxpr")
    f(np.float32(3.0))
    assert capfd.readouterr().out == "a=3.0\n"


def test_float16_products_accumulate_in_float32(tmp_path):
    # XLA's CPU backend computes a float16 dot in float32 and rounds once: a float16 accumulator
    # would round after every addition
    f = load(tmp_path, "{ lambda ; a:f16[3,64] b:f16[64,2]. let\n"
                       "    c:f16[3,2] = dot_general[dimension_numbers=(([1], [0]), ([], []))"
                       " preferred_element_type=float16] a b\n"
                       "    d:f32[3,2] = dot_general[dimension_numbers=(([1], [0]), ([], []))"
                       " preferred_element_type=float32] a b\n  in (c, d) }")
    r = np.random.RandomState(1)
    a, b = r.uniform(-1, 1, (3, 64)).astype(np.float16), r.uniform(-1, 1, (64, 2)).astype(np.float16)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    c, d = f(a, b)
    assert c.dtype == np.float16 and d.dtype == np.float32
    np.testing.assert_array_equal(c, exact.astype(np.float32).astype(np.float16))
    np.testing.assert_allclose(d, exact, rtol=1e-6, atol=1e-6)


def test_a_while_loop_carries_prng_keys(tmp_path):
    # jax.random.poisson's rejection loop: a key<fry>[] carried by a while; each turn splits it
    f = load(tmp_path, "{ lambda ; a:u32[2]. let\n    b:key<fry>[] = random_wrap[impl=fry] a\n"
                       "    c:i32[] d:key<fry>[] = while[\n      body_jaxpr={ lambda ; e:i32[] f:key<fry>[]. let\n"
                       "          g:key<fry>[2] = random_split[shape=(2,)] f\n"
                       "          h:key<fry>[1] = slice[limit_indices=(1,) start_indices=(0,) strides=None] g\n"
                       "          i:key<fry>[] = squeeze[dimensions=(0,)] h\n          j:i32[] = add e 1:i32[]\n"
                       "        in (j, i) }\n      body_nconsts=0\n"
                       "      cond_jaxpr={ lambda ; k:i32[] l:key<fry>[]. let m:bool[] = lt k 3:i32[] in (m,) }\n"
                       "      cond_nconsts=0\n    ] 0:i32[] b\n    n:u32[2] = random_unwrap d\n  in (c, n) }")
    key = np.array([0, 7], np.uint32)
    # the same three splits written with sprue.random, which draws JAX's threefry2x32 keys
    want = key
    for _ in range(3):
        want = np.asarray(sprue.qjit(lambda k: sprue.random.split(k, 2)[0])(want))
    count, got = f(key)
    assert count == 3
    np.testing.assert_array_equal(got, want)


# jnp.take with a literal index array, times a literal scale: JAX >= 0.7 hoists both into constvars
# and prints them without their values
PROGRAM_WITH_CONSTS = (
    "{ lambda a:f32[3] b:i32[2]; c:f32[4,3]. let\n"
    "    d:f32[1,3] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(1, 3) sharding=None] a\n"
    "    e:f32[4,3] = mul c d\n"
    "    f:i32[1] = slice[limit_indices=(1,) start_indices=(0,) strides=None] b\n"
    "    g:i32[] = squeeze[dimensions=(0,)] f\n"
    "    h:i32[1] = slice[limit_indices=(2,) start_indices=(1,) strides=None] b\n"
    "    i:i32[] = squeeze[dimensions=(0,)] h\n"
    "    j:f32[1,3] = dynamic_slice[slice_sizes=(1, 3)] e g 0:i32[]\n"
    "    k:f32[1,3] = dynamic_slice[slice_sizes=(1, 3)] e i 0:i32[]\n"
    "    l:f32[2,3] = concatenate[dimension=0] j k\n"
    "  in (l,) }")


def _consts_program(tmp_path):
    p = tmp_path / "take_scaled.jaxpr"
    p.write_text(PROGRAM_WITH_CONSTS)
    return p


def test_constvars_lead_the_parameters_as_eval_jaxpr_takes_them(tmp_path):
    p = _consts_program(tmp_path)
    f = sprue.load(p)
    assert f.constvars == ["a", "b"] and f.arg_names == ["a", "b", "c"]
    scale, rows = np.array([1.0, 2.0, -1.0], np.float32), np.array([3, 1], np.int32)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(f(scale, rows, x), (x * scale)[rows])
    with pytest.raises(SprueTypeError, match=r"takes 3 arguments \(a, b, c\), got 1; the first 2 \(a, b\) are the"
                                             r" jaxpr's constvars, whose values JAX's printer drops: pass the"
                                             r" ClosedJaxpr's consts first \(closed.consts, in order; then those of"
                                             r" the jaxprs it calls, which the text declares after, in its order\),"
                                             r" then the function's arguments, as jax.core.eval_jaxpr"):
        f(x)


def test_sprue_compile_takes_the_constvars_first_and_says_so_in_the_header(tmp_path):
    p = _consts_program(tmp_path)
    out = tmp_path / "out"
    assert main(["compile", str(p), "-o", str(out), "--name", "take_scaled"]) == 0
    header = (out / "take_scaled.h").read_text()
    assert "Signature: (a: f32[3], b: i32[2], c: f32[4,3]) -> (f32[2,3])" in header
    assert "a, b: the jaxpr's constvars, whose values JAX's printer drops; pass the" in header
    g = load_library(out / "libtake_scaled.so", "take_scaled", read_kernel(p, "take_scaled").signature)
    scale, rows = np.array([0.5, 1.0, 3.0], np.float32), np.array([0, 2], np.int32)
    x = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
    got, = g(scale, rows, x)   # the library's results, as a tuple
    np.testing.assert_array_equal(got, (x * scale)[rows])


def test_scatter_with_an_update_computation_applies_it_per_index_in_order(tmp_path):
    # x.at[i].apply(f): a `scatter` whose update_jaxpr computes; a repeated index applies f again (XLA's
    # scatter combines one update at a time), an index out of bounds is dropped, or clamped with CLIP
    scatter = ("    {out}:f32[6] = scatter[\n      dimension_numbers=ScatterDimensionNumbers(update_window_dims=(),"
               " inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), operand_batching_dims=(),"
               " scatter_indices_batching_dims=())\n      indices_are_sorted=False\n      mode=GatherScatterMode.{mode}\n"
               "      unique_indices=False\n      update_consts=()\n"
               "      update_jaxpr={{ lambda ; y:f32[] z:f32[]. let w:f32[] = mul y y; v:f32[] = add w z in (v,) }}\n"
               "    ] a b c\n")
    f = load(tmp_path, "{ lambda ; a:f32[6] b:i32[4,1] c:f32[4]. let\n" + scatter.format(out="d", mode="FILL_OR_DROP")
             + scatter.format(out="e", mode="CLIP") + "  in (d, e) }")
    x = np.array([0.5, -1.0, 2.0, 0.25, 1.5, -0.5], np.float32)
    idx = np.array([[2], [7], [2], [-1]], np.int32)
    upd = np.array([0.1, 0.2, 0.3, 0.4], np.float32)

    def reference(clip):
        out = x.copy()
        for (i,), u in zip(idx, upd):
            if clip:
                i = min(max(i, 0), 5)
            if 0 <= i < 6:
                out[i] = out[i] * out[i] + u
        return out
    d, e = f(x, idx, upd)
    np.testing.assert_allclose(d, reference(False), rtol=1e-6)
    np.testing.assert_allclose(e, reference(True), rtol=1e-6)


def test_bfloat16_arguments_and_results_are_passed_as_their_bits(tmp_path):
    # numpy and C have no bfloat16: a bf16 argument or result is its bits, uint16 (the top half of its
    # float32); inside, the program computes in the float32 carrier rounded to bfloat16
    f = load(tmp_path, "{ lambda ; a:bf16[4] b:f32[4]. let\n"
                       "    c:bf16[4] = convert_element_type[new_dtype=bfloat16 weak_type=False] b\n"
                       "    d:bf16[4] = mul a c\n"
                       "    e:f32[4] = convert_element_type[new_dtype=float32 weak_type=False] d\n  in (d, e) }")
    assert f.bf16_arguments == {0} and f.bf16_results == {0}
    a = np.array([1.5, -3.0, 0.0078125, 100.0], np.float32)
    b = np.array([2.0, 0.1, -7.0, 1.0 / 3.0], np.float32)
    bits = (a.view(np.uint32) >> 16).astype(np.uint16)    # these a are bfloat16 values: exact bits

    def to_bf16(x):   # round to nearest even at bfloat16's 7 mantissa bits
        u = x.astype(np.float32).view(np.uint32)
        return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)
    want = to_bf16(a * to_bf16(b))
    d, e = f(bits, b)
    assert d.dtype == np.uint16 and e.dtype == np.float32
    np.testing.assert_array_equal((d.astype(np.uint32) << 16).view(np.float32), want)
    np.testing.assert_array_equal(e, want)
    p = tmp_path / "prog.jaxpr"
    out = tmp_path / "out"
    assert main(["compile", str(p), "-o", str(out), "--name", "bf16mul"]) == 0
    header = (out / "bf16mul.h").read_text()
    assert "a, result0: bfloat16, passed as its bits (uint16: the top half of its float32)." in header
    g = load_library(out / "libbf16mul.so", "bf16mul", read_kernel(p, "bf16mul").signature)
    np.testing.assert_array_equal(g(bits, b)[0], d)
