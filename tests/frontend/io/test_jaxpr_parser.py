"""Reading jaxprs as JAX prints them (0.4.x and 0.6+), written here by hand in JAX's printed style,
compiled with sprue.load and compared with numpy; and every error, by its text."""
import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from sprue.io.jaxpr_parser import parse_jaxpr
from sprue.trace.tracing import eval_jaxpr
from tests.helpers.jaxprs import load_text as load

# -- JAX 0.4.x: untyped literals, params without commas --------------------------------------------
UNTYPED = """\
{ lambda ; a:f32[8] b:f32[8]. let
    c:f32[8] = sin b
    d:f32[8] = mul c 3.0
    e:f32[8] = add a d
    f:f32[] = reduce_sum[axes=(0,)] e
    g:bool[8] = gt e 0.5
    h:f32[8] = max e 1.0
  in (f, h) }
"""


def test_untyped_literals_jax_04(tmp_path):
    f = load(tmp_path, UNTYPED)
    a, b = np.linspace(-1, 1, 8).astype(np.float32), np.arange(8, dtype=np.float32)
    total, h = f(a, b)
    e = a + np.sin(b) * np.float32(3)
    np.testing.assert_allclose(total, e.sum(), rtol=1e-5)
    np.testing.assert_allclose(h, np.maximum(e, 1.0), rtol=1e-6)
    assert h.dtype == np.float32


PJIT = """\
{ lambda ; a:f32[4]. let
    b:f32[4] = pjit[
      name=f
      jaxpr={ lambda ; c:f32[4]. let
          d:f32[4] = integer_pow[y=2] c
          e:f32[4] = mul d 2.0:f32[]
        in (e,) }
    ] a
    f:f32[4] = sub b 1.0:f32[]
    g:f32[4] = jit[name=g jaxpr={ lambda ; a:f32[4]. let b:f32[4] = neg a in (b,) }] f
  in (g,) }
"""


def test_pjit_and_jit_are_inlined(tmp_path):
    f = load(tmp_path, PJIT)
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(f(x), -(2 * x ** 2 - 1))
    assert all(e.primitive.name != "pjit" for e in f.jaxpr.eqns)


SHARED = """\
let f = { lambda ; a:f32[3]. let b:f32[3] = integer_pow[y=2] a in (b,) } in
{ lambda ; c:f32[3]. let
    d:f32[3] = pjit[name=<lambda> jaxpr=f] c
    e:f32[3] = pjit[name=<lambda> jaxpr=f] d
    g:f32[3] = add d e
  in (g,) }
"""


def test_let_hoisted_shared_jaxprs(tmp_path):
    f = load(tmp_path, SHARED)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_array_equal(f(x), x ** 2 + x ** 4)


SCAN = """\
{ lambda ; a:f32[3]. let
    _:i32[] b:f32[3] = scan[
      _split_transpose=False
      jaxpr={ lambda ; c:i32[] d:f32[3]. let
          e:i32[] = add c 1:i32[]
          f:f32[] = convert_element_type[new_dtype=float32 weak_type=False] c
          g:f32[3] = add d f
        in (e, g) }
      length=5
      linear=(False, False)
      num_carry=2
      num_consts=0
      reverse=False
      unroll=1
    ] 0:i32[] a
  in (b,) }
"""


def test_scan_from_fori_loop(tmp_path):
    f = load(tmp_path, SCAN)
    x = np.array([1.0, -2.0, 0.5], np.float32)
    np.testing.assert_array_equal(f(x), x + 10)


WHILE = """\
{ lambda ; a:i32[] b:f32[]. let
    _:i32[] c:f32[] = while[
      body_jaxpr={ lambda ; d:i32[] e:f32[]. let
          f:i32[] = add d 1
          g:f32[] = mul e 2.0
        in (f, g) }
      body_nconsts=0
      cond_jaxpr={ lambda ; h:i32[] i:f32[]. let j:bool[] = lt h 4 in (j,) }
      cond_nconsts=0
    ] a b
  in (c,) }
"""


def test_while(tmp_path):
    f = load(tmp_path, WHILE)
    assert f(np.int32(0), np.float32(1.5)) == np.float32(24.0)
    assert f(np.int32(3), np.float32(1.5)) == np.float32(3.0)


COND = """\
{ lambda ; a:f32[] b:f32[3]. let
    c:bool[] = gt a 0.0
    d:i32[] = convert_element_type[new_dtype=int32 weak_type=False] c
    e:f32[3] = cond[
      branches=(
        { lambda ; f:f32[] g:f32[3]. let h:f32[3] = sub g f in (h,) }
        { lambda ; i:f32[] j:f32[3]. let k:f32[3] = add j i in (k,) }
      )
      linear=(False, False)
    ] d a b
  in (e,) }
"""


def test_cond_with_int_index_and_linear(tmp_path):
    f = load(tmp_path, COND)
    b = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_array_equal(f(np.float32(2), b), b + 2)
    np.testing.assert_array_equal(f(np.float32(-2), b), b + 2)   # -2 - ... : b - (-2)
    np.testing.assert_array_equal(f(np.float32(-1), b), b + 1)


CUSTOM_JVP = """\
{ lambda ; a:f32[5]. let
    b:f32[5] = custom_jvp_call[
      name=relu
      call_jaxpr={ lambda ; c:f32[5]. let
          d:f32[5] = pjit[
            name=relu
            jaxpr={ lambda ; e:f32[5]. let f:f32[5] = max e 0.0:f32[] in (f,) }
          ] c
        in (d,) }
      jvp_jaxpr_fun=<function _memoize.<locals>.memoized at 0x7f1c2c1d3e20>
      num_consts=0
      symbolic_zeros=False
    ] a
    g:f32[5] = custom_vjp_call_jaxpr[
      bwd=<function f_bwd at 0x7f00>
      fun_jaxpr={ lambda ; h:f32[5]. let i:f32[5] = mul h 3.0 in (i,) }
      fwd_jaxpr_thunk=<function _memoize.<locals>.memoized at 0x7f01>
      num_consts=0
      out_trees=<function transformation_with_aux.<locals>.<lambda> at 0x7f02>
      symbolic_zeros=False
    ] b
  in (g,) }
"""


def test_custom_jvp_and_vjp_compile_the_primal(tmp_path):
    f = load(tmp_path, CUSTOM_JVP)
    x = np.array([-2, -1, 0, 1, 2], np.float32)
    np.testing.assert_array_equal(f(x), np.maximum(x, 0) * 3)


GATHER = """\
{ lambda ; a:f32[5,3] b:i32[]. let
    c:bool[] = lt b 0:i32[]
    d:i32[] = add b 5:i32[]
    e:i32[] = select_n c b d
    f:i32[1] = broadcast_in_dim[broadcast_dimensions=() shape=(1,) sharding=None] e
    g:f32[3] = gather[
      dimension_numbers=GatherDimensionNumbers(offset_dims=(0,), collapsed_slice_dims=(0,), start_index_map=(0,), operand_batching_dims=(), start_indices_batching_dims=())
      fill_value=None
      indices_are_sorted=True
      mode=GatherScatterMode.PROMISE_IN_BOUNDS
      slice_sizes=(1, 3)
      unique_indices=True
    ] a f
    h:f32[3] = gather[dimension_numbers=GatherDimensionNumbers(offset_dims=(0,), collapsed_slice_dims=(0,), start_index_map=(0,), operand_batching_dims=(), start_indices_batching_dims=()) fill_value=None indices_are_sorted=False mode=1 slice_sizes=(1, 3) unique_indices=False] a f
  in (g, h) }
"""


def test_gather_with_dimension_numbers_and_mode(tmp_path):
    f = load(tmp_path, GATHER)
    a = np.arange(15, dtype=np.float32).reshape(5, 3)
    for i in (0, 3, -1):
        g, h = f(a, np.int32(i))
        np.testing.assert_array_equal(g, a[i])
        np.testing.assert_array_equal(h, a[i])


DOT = """\
{ lambda ; a:f32[2,3] b:f32[3,4]. let
    c:f32[2,4] = dot_general[
      dimension_numbers=(([1], [0]), ([], []))
      precision=None
      preferred_element_type=float32
    ] a b
    d:f32[2,4] = dot_general[dimension_numbers=(([1], [0]), ([], [])) out_sharding=None precision=(Precision.DEFAULT, Precision.DEFAULT) preferred_element_type=dtype('float32')] a b
    e:f32[2,4] = add c d
  in (e,) }
"""


def test_dot_general_with_preferred_element_type(tmp_path):
    f = load(tmp_path, DOT)
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(f(a, b), 2 * a @ b)


STRUCTURAL = """\
{ lambda ; a:f32[2,3]. let
    b:f32[2,3] = tanh[accuracy=None] a
    c:f32[3,2] = transpose[permutation=(1, 0)] b
    d:f32[6] = reshape[dimensions=None new_sizes=(6,) sharding=None] c
    e:f32[1,6] = expand_dims[dimensions=(0,)] d
    f:f32[6] = squeeze[dimensions=(0,)] e
    g:f32[6] = cumsum[axis=0 reverse=False] f
    h:f32[8] = pad[padding_config=((1, 1, 0),)] g 0.0:f32[]
    i:f32[8] = rev[dimensions=(0,)] h
    j:f32[2] k:f32[6] = split[axis=0 sizes=(2, 6)] i
    l:f32[8] = concatenate[dimension=0] k j
    m:i32[8] = iota[dimension=0 dtype=int32 shape=(8,) sharding=None]
    n:f32[8] = convert_element_type[new_dtype=float32 weak_type=False] m
    o:f32[8] = add_any l n
    p:f32[8] = stop_gradient o
    q:f32[8] = clamp 0.0:f32[] p 5.0:f32[]
    r:i32[] = argmax[axes=(0,) index_dtype=int32] q
    s:f32[8] = sort[dimension=0 is_stable=True num_keys=1] q
    t:f32[] = reduce_max[axes=(0,) out_sharding=None] s
    u:f32[8] = copy_p s
    v:f32[8] = square u
    w:f32[8] = round[rounding_method=1] q
    x:f32[8] = round[rounding_method=RoundingMethod.AWAY_FROM_ZERO] q
    y:f32[3] = broadcast_in_dim[broadcast_dimensions=()] 1.5
    z:f32[8] = copy q
  in (r, t, v, w, x, y, z) }
"""


def _structural_reference(a):
    g = np.cumsum(np.tanh(a).T.reshape(6))
    i = np.pad(g, 1)[::-1]
    l = np.concatenate([i[2:], i[:2]]) + np.arange(8, dtype=np.float32)
    q = np.clip(l, 0, 5)
    return q


def test_structural_and_renamed_primitives(tmp_path):
    f = load(tmp_path, STRUCTURAL)
    a = np.linspace(-1, 2, 6, dtype=np.float32).reshape(2, 3)
    r, t, v, w, x, y, z = f(a)
    q = _structural_reference(a)
    assert r == np.argmax(q) and r.dtype == np.int32
    np.testing.assert_allclose(t, q.max(), rtol=1e-6)
    np.testing.assert_allclose(v, np.sort(q) ** 2, rtol=1e-5)
    np.testing.assert_array_equal(w, np.round(q))
    np.testing.assert_array_equal(x, np.where(q - np.trunc(q) >= 0.5, np.trunc(q) + 1, np.trunc(q)))
    np.testing.assert_array_equal(y, np.full(3, 1.5, np.float32))
    np.testing.assert_allclose(z, q, rtol=1e-6)


ELEMENTWISE = """\
{ lambda ; a:f32[4] b:f32[4] c:i32[4] d:i32[4]. let
    e:f32[4] = pow a b
    f:f32[4] = exp2 b
    g:f32[4] = atan2 a b
    h:f32[4] = logistic[accuracy=None] a
    i:f32[4] = log1p[accuracy=None] a
    j:f32[4] = expm1 a
    k:f32[4] = sqrt a
    l:f32[4] = rsqrt a
    m:f32[4] = cbrt b
    n:f32[4] = sign b
    o:f32[4] = floor b
    p:f32[4] = ceil b
    q:bool[4] = is_finite b
    r:f32[4] = abs b
    s:f32[4] = div a b
    t:f32[4] = max a b
    u:f32[4] = min a b
    v:f32[4] = neg a
    w:i32[4] = rem c d
    x:i32[4] = and c d
    y:i32[4] = or c d
    z:i32[4] = xor c d
    ba:i32[4] = not c
    bb:bool[4] = eq c d
    bc:bool[4] = ne c d
    bd:bool[4] = le c d
    be:bool[4] = ge c d
    bf:bool[4] = and bb bd
    bg:f32[4] = pow a 2:i32[]
  in (e, f, g, h, i, j, k, l, m, n, o, p, q, r, s, t, u, v, w, x, y, z, ba, bc, be, bf, bg) }
"""


@pytest.mark.filterwarnings("ignore:divide by zero")
def test_elementwise(tmp_path):
    f = load(tmp_path, ELEMENTWISE)
    a = np.array([0.5, 1.0, 2.0, 3.0], np.float32)
    b = np.array([-1.5, 0.0, 2.5, -3.0], np.float32)
    c, d = np.array([7, -7, 5, 12], np.int32), np.array([3, 3, -2, 5], np.int32)
    got = f(a, b, c, d)
    want = [a ** b, 2 ** b, np.arctan2(a, b), 1 / (1 + np.exp(-a)), np.log1p(a), np.expm1(a), np.sqrt(a),
            1 / np.sqrt(a), np.cbrt(b), np.sign(b), np.floor(b), np.ceil(b), np.isfinite(b), np.abs(b), a / b,
            np.maximum(a, b), np.minimum(a, b), -a, np.fmod(c, d), c & d, c | d, c ^ d, ~c, c != d, c >= d,
            (c == d) & (c <= d), a ** 2]
    assert len(got) == len(want)
    for k, (x, y) in enumerate(zip(got, want)):
        np.testing.assert_allclose(x, y, rtol=2e-6, err_msg=f"output {k}")


INDEXING = """\
{ lambda ; a:f32[5] b:i32[2] c:f32[2] d:i32[]. let
    e:i32[2,1] = broadcast_in_dim[broadcast_dimensions=(0,) shape=(2, 1) sharding=None] b
    f:f32[5] = scatter-add[
      dimension_numbers=ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), operand_batching_dims=(), scatter_indices_batching_dims=())
      indices_are_sorted=False
      mode=GatherScatterMode.FILL_OR_DROP
      unique_indices=False
      update_consts=()
      update_jaxpr={ lambda ; g:f32[] h:f32[]. let i:f32[] = add g h in (i,) }
    ] a e c
    j:f32[2] = dynamic_slice[slice_sizes=(2,)] f d
    k:f32[5] = dynamic_update_slice f j 0:i32[]
  in (f, k) }
"""


def test_scatter_and_dynamic_slices(tmp_path):
    f = load(tmp_path, INDEXING)
    a, b, c = np.zeros(5, np.float32), np.array([1, 1], np.int32), np.array([2.0, 3.0], np.float32)
    s, k = f(a, b, c, np.int32(1))
    np.testing.assert_array_equal(s, [0, 5, 0, 0, 0])
    np.testing.assert_array_equal(k, [5, 0, 0, 0, 0])


def test_whitespace_and_wrapping_anywhere():
    text = "{lambda;a:f64[2,\n 3]\n.let b:f64[3,2]=transpose[\npermutation=(1,\n0)]\na\nin(b,)}"
    closed, n = parse_jaxpr(text)
    assert closed.out_avals[0].shape == (3, 2) and n == 0


def test_sprue_printed_jaxprs_read_back_exactly():
    def f(x, y):
        z = lax.fori_loop(0, 3, lambda i, a: a + 1.0, jnp.sin(x) * 2.0)
        v = lax.while_loop(lambda a: a.sum() < 100, lambda a: a * 2, z)
        return jnp.sum(v * y), x[1:], x[y.astype(int)], jnp.sort(x), lax.cond(x[0] > 0, lambda: x, lambda: -x)
    closed = sprue.make_jaxpr(f)(np.ones(3), np.ones(3))
    assert str(parse_jaxpr(str(closed))[0]) == str(closed)
    g = sprue.qjit(lambda x: jnp.concatenate([x, x])[:-1] * 2, abstracted_axes={0: "n"})
    g(np.ones(4))
    back, n_implicit = parse_jaxpr(str(g.jaxpr))
    assert str(back) == str(g.jaxpr) and n_implicit == 1


def test_names_restart_and_shadow_in_nested_jaxprs(tmp_path):
    text = """{ lambda ; a:f32[2] b:f32[2]. let
        c:f32[2] = pjit[name=f jaxpr={ lambda ; b:f32[2] a:f32[2]. let c:f32[2] = sub b a in (c,) }] a b
      in (c,) }"""
    f = load(tmp_path, text)
    np.testing.assert_array_equal(f(np.ones(2, np.float32), np.full(2, 3, np.float32)), [-2, -2])


# -- errors ------------------------------------------------------------------------------------------
def err(text, exc=sprue.JaxprError):
    with pytest.raises(exc) as info:
        parse_jaxpr(text, filename="t.jaxpr")
    return str(info.value)


def test_unknown_primitive_names_it_and_its_line():
    msg = err("{ lambda ; a:f32[3]. let\n    b:f32[3] = bessel_i1 a\n  in (b,) }", sprue.JaxprUnsupportedError)
    assert msg.startswith("t.jaxpr:2:5:") and "unknown primitive 'bessel_i1'" in msg
    msg = err("{ lambda ; a:f32[3,3]. let\n  b:c64[3] = eig a\n  in (b,) }", sprue.UnsupportedError)
    assert "t.jaxpr:2:" in msg and "'eig'" in msg


def test_unknown_param_names_it():
    msg = err("{ lambda ; a:f32[3]. let\n b:f32[] = reduce_sum[axes=(0,) frobnicate=3] a\n in (b,) }",
              sprue.JaxprUnsupportedError)
    assert "t.jaxpr:2:" in msg and "unknown param 'frobnicate'" in msg and "axes" in msg
    # an unknown param whose value is None is JAX's default: ignored
    parse_jaxpr("{ lambda ; a:f32[3]. let b:f32[] = reduce_sum[axes=(0,) frobnicate=None] a in (b,) }")


def test_constvars_without_values_are_leading_parameters():
    """JAX's printer drops the constants' values: the constvars lead the parameters, as
    jax.core.eval_jaxpr(jaxpr, consts, *args) takes them (implicit sizes stay first)."""
    closed, n_implicit = parse_jaxpr("{ lambda a:f32[3] b:i32[]; c:f32[3]. let d:f32[3] = add a c;"
                                     " e:f32[] = convert_element_type[new_dtype=float32 weak_type=False] b;"
                                     " f:f32[3] = mul d e in (f,) }")
    assert n_implicit == 0 and not closed.consts
    assert [v.aval.str_short() for v in closed.jaxpr.invars] == ["f32[3]", "i32[]", "f32[3]"]
    a, c = np.array([1.0, 2.0, 3.0], np.float32), np.array([0.5, -1.0, 4.0], np.float32)
    np.testing.assert_array_equal(eval_jaxpr(closed.jaxpr, [], a, np.int32(3), c), [(a + c) * 3])
    closed, n_implicit = parse_jaxpr("{ lambda a:f32[3]; n:i64[] b:f32[n]. let c:f32[n] = sin b in (c,) }")
    assert n_implicit == 1 and [v.aval.str_short() for v in closed.jaxpr.invars][1:] == ["f32[3]", "f32[n]"]


def test_constvars_of_a_called_jaxpr_are_parameters(tmp_path):
    # JAX's printer drops their values too: they follow the main jaxpr's constvars (test_jaxpr_compat_batch_f)
    f = load(tmp_path, "let _f = { lambda a:f32[3]; b:f32[3]. let c:f32[3] = add a b in (c,) } in\n"
                       "{ lambda ; x:f32[3]. let y:f32[3] = jit[name=f jaxpr=_f] x in (y,) }")
    assert f.constvars == ["a"] and f.arg_names == ["a", "x"]
    a, x = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    np.testing.assert_array_equal(f(a, x), a + x)


def test_syntax_errors_have_file_line_col():
    msg = err("{ lambda ; a:f32[3]. let\n    b:f32[3] = sin a\n  (b,) }", sprue.JaxprSyntaxError)
    assert msg.startswith("t.jaxpr:3:3:")
    msg = err("{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) } extra", sprue.JaxprSyntaxError)
    assert "t.jaxpr:1:" in msg and "extra" in msg
    msg = err("{ lambda ; a:f32[3]. let b:f32[3] = sin[x=$] a in (b,) }", sprue.JaxprSyntaxError)
    assert "unexpected character '$'" in msg


def test_declared_type_mismatch_names_the_line():
    msg = err("{ lambda ; a:f32[3]. let\n  b:f32[4] = sin a\n  in (b,) }")
    assert msg.startswith("t.jaxpr:2:") and "declared f32[4] but sprue computes f32[3]" in msg
    msg = err("{ lambda ; a:f32[3]. let b:f32[3] = add a z in (b,) }")
    assert "variable 'z' is not defined" in msg


def test_shape_rule_errors_name_the_line():
    msg = err("{ lambda ; a:f32[3] b:f32[4]. let\n  c:f32[3] = add a b\n  in (c,) }")
    assert msg.startswith("t.jaxpr:2:") and "add" in msg


def test_unsupported_dtype():
    # float8 (JAX's f8_e4m3fn); bfloat16 is read (passed at the boundary as its bits: test_jaxpr_compat_batch_d)
    msg = err("{ lambda ; a:f8_e4m3fn[3]. let in (a,) }", sprue.JaxprUnsupportedError)
    assert "element type 'f8_e4m3fn' is not supported" in msg
    closed, _ = parse_jaxpr("{ lambda ; a:bf16[3]. let in (a,) }")
    assert [v.aval.str_short() for v in closed.jaxpr.invars] == ["u16[3]"]


def test_wrong_operand_count_is_an_error_not_a_crash():
    msg = err("{ lambda ; a:f32[3]. let\n  b:f32[3] = add a\n  in (b,) }")
    assert msg.startswith("t.jaxpr:2:") and "add cannot take these operands" in msg


# -- JAX's variable names include the reader's keywords --------------------------------------------
def _jax_name(n):
    """JAX's name sequence (jax/_src/core.py, _encode_digits_alphabetic): it does not skip keywords."""
    s = ""
    while not s or n:
        n, i = divmod(n, 26)
        s = chr(97 + i) + s
    return s


def test_jax_names_reach_in_inf_let_and_nan():
    """A chain of 9,000 equations named as JAX names them: `in` (the 221st), `inf`, `let`, `nan`
    are variables, as operands, as outputs, and as the last operand before the keyword `in`."""
    from sprue.trace.tracing import eval_jaxpr
    n = 9000
    names = [_jax_name(i) for i in range(n + 2)]
    assert {"in", "inf", "let", "nan"} <= set(names)
    lines = [f"{{ lambda ; {names[0]}:f32[3] {names[1]}:f32[3]. let"]
    for k in range(2, n + 2):   # names[k] = x + (k - 1) y
        lines.append(f"    {names[k]}:f32[3] = add {names[k - 1] if k > 2 else names[0]} {names[1]}")
    lines.append(f"  in ({names[-1]}, in, inf, let, nan) }}")
    closed, _ = parse_jaxpr("\n".join(lines))
    x, y = np.arange(3, dtype=np.float32), np.array([1, 2, 4], np.float32)
    outs = eval_jaxpr(closed.jaxpr, closed.consts, x, y)
    idx = {name: k for k, name in enumerate(names)}
    for out, name in zip(outs, [names[-1], "in", "inf", "let", "nan"]):
        np.testing.assert_array_equal(out, x + (idx[name] - 1) * y)


def test_keyword_names_in_every_place_jax_prints_a_variable(tmp_path):
    text = """\
{ lambda ; lambda:f32[2] let:f32[2]. let
    in:f32[2] = add lambda let
    inf:f32[2] = mul in 2.0:f32[]
    nan:f32[2] = add inf in
    _:f32[2] b:f32[2] = pjit[name=f jaxpr={ lambda ; c:f32[2]. let  in (c, c) }] nan
    d:f32[2] = add b in
  in (d, in, inf:f32[]) }"""
    f = load(tmp_path, text)
    x, y = np.array([1, 2], np.float32), np.array([10, 20], np.float32)
    s = x + y
    d, got_in, got_inf = f(x, y)
    np.testing.assert_array_equal(d, 3 * s + s)
    np.testing.assert_array_equal(got_in, s)
    assert got_inf == np.inf and got_inf.dtype == np.float32


def test_one_line_jaxprs_separate_equations_with_semicolons():
    """JAX prints a jaxpr that fits in 80 columns on one line, equations separated by '; '."""
    closed, _ = parse_jaxpr("{ lambda ; a:f32[]. let b:f32[] = sin a; c:f32[] = cos b in (c,) }")
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["sin", "cos"]


def test_typed_literal_names_before_a_typed_equation():
    """`inf:f32[]` as the last operand is a literal, not the first output of the next equation."""
    closed, _ = parse_jaxpr("{ lambda ; a:f32[]. let\n    b:f32[] = min a inf:f32[]\n"
                            "    c:f32[] = max b nan:f32[]\n    d:f32[] = mul c c\n  in (d,) }")
    assert [len(e.invars) for e in closed.jaxpr.eqns] == [2, 2, 2]
    assert np.isinf(closed.jaxpr.eqns[0].invars[1].val) and np.isnan(closed.jaxpr.eqns[1].invars[1].val)


# -- long, deep and huge dimensions (issue 20, item 12) --------------------------------------------
def test_a_1000_term_dimension_reads_and_compiles(tmp_path):
    terms = "+".join(["a"] * 1000)
    text = f"{{ lambda ; a:i64[] x:f64[a] b:f64[{terms}]. let\n    c:f64[{terms}] = mul b b\n  in (c,) }}"
    closed, n_implicit = parse_jaxpr(text)
    assert n_implicit == 1 and str(closed.jaxpr).startswith("{ lambda ; a:i64[] b:f64[a] c:f64[1000*a]. let")
    f = load(tmp_path, text)
    np.testing.assert_array_equal(f(np.ones(2), np.arange(2000.0)), np.arange(2000.0) ** 2)
    many = "-".join(["a"] * 10000) + "+" + "*".join(["2"] * 20)   # 10,000 terms and a run of factors
    closed, _ = parse_jaxpr(f"{{ lambda ; a:i64[] b:f64[{many}]. let in (b,) }}")
    assert str(closed.jaxpr).startswith("{ lambda ; a:i64[] b:f64[-9998*a+1048576]. let")


def test_dimensions_nested_too_deep_are_syntax_errors_at_their_line():
    chain = "a" + "//2" * 150
    msg = err(f"{{ lambda ; a:i64[]\n  b:f64[{chain}]. let in (b,) }}", sprue.JaxprSyntaxError)
    assert msg.startswith("t.jaxpr:2:9: a dimension nested more than 100 levels deep")
    parens = "(" * 150 + "a" + ")" * 150
    msg = err(f"{{ lambda ; a:i64[] b:f64[{parens}]. let in (b,) }}", sprue.JaxprSyntaxError)
    assert msg.startswith("t.jaxpr:1:") and "nested more than 100 levels deep" in msg
    closed, _ = parse_jaxpr("{ lambda ; a:i64[] b:f64[" + "a" + "//2" * 50 + "]. let in (b,) }")
    assert closed.jaxpr.invars[1].aval.ndim == 1


def test_dimensions_beyond_int64_are_errors_at_their_line():
    msg = err("{ lambda ;\n  b:f64[0,99999999999999999999]. let in (b,) }", sprue.JaxprSyntaxError)
    assert msg == "t.jaxpr:2:11: the size 99999999999999999999 does not fit in int64 (sizes are at most 2**63-1)"
    msg = err("{ lambda ; a:i64[] b:f64[a*9223372036854775808]. let in (b,) }", sprue.JaxprSyntaxError)
    assert "t.jaxpr:1:28: the size 9223372036854775808 does not fit in int64" in msg
    msg = err("{ lambda ;\n  b:f64[0,4611686018427387904*4]. let in (b,) }")
    assert msg == "t.jaxpr:2:5: dimension 1 of the type f64[...] does not fit in int64 (18446744073709551616)"
    msg = err("{ lambda ; a:i64[] b:f64[a+4611686018427387904*4]. let in (b,) }")
    assert msg.startswith("t.jaxpr:1:22: dimension 0 of the type f64[...] does not fit in int64")


def test_complex_literals_as_python_writes_them(tmp_path):
    """JAX prints complex literals by Python's repr: (1+2j), 0j, -1.5j, (nan+infj), (-0-1j)."""
    f = load(tmp_path, "{ lambda ; a:c64[3]. let\n    b:c64[3] = mul a (1+2j):c64[]\n    c:c64[3] = add b 0j:c64[]\n"
                       "    d:c64[3] = sub c -1.5j:c64[]\n    e:c64[3] = add d (-0-1j):c64[]\n"
                       "    f:bool[3] = ne e (nan+infj):c64[]\n  in (e, f) }")
    a = np.array([1 + 1j, -2j, 3], np.complex64)
    e, ne = f(a)
    np.testing.assert_allclose(e, a * (1 + 2j) + 1.5j - 1j, rtol=1e-6)
    assert e.dtype == np.complex64 and ne.all()


def test_shared_jaxprs_scoped_to_one_param_value(tmp_path):
    """`transpose_solve=let _s = {...} in {...}` (JAX's custom_linear_solve): the name `_s` means that
    jaxpr only inside the value, even where the top-level `let` binds the same name to another."""
    text = """\
let _s = { lambda ; a:f32[2]. let b:f32[2] = mul a 10.0:f32[] in (b,) } in
{ lambda ; x:f32[2,2] y:f32[2]. let
    z:f32[2] = custom_linear_solve[
      const_lengths=_LinearSolveTuple(matvec=1, vecmat=0, solve=1, transpose_solve=0)
      jaxprs=_LinearSolveTuple(matvec={ lambda ; a:f32[2,2] b:f32[2]. let
    c:f32[2] = dot_general[dimension_numbers=(([1], [0]), ([], []))] a b
  in (c,) }, vecmat=None, solve=let _s = { lambda ; a:f32[2,2] b:f32[2]. let
    c:f32[2] = div b 2.0:f32[]
  in (c,) } in
{ lambda ; a:f32[2,2] b:f32[2]. let
    c:f32[2] = jit[name=_s jaxpr=_s] a b
  in (c,) }, transpose_solve=None)
    ] x x y
    w:f32[2] = jit[name=_s jaxpr=_s] z
  in (w,) }
"""
    f = load(tmp_path, text)
    x, y = np.eye(2, dtype=np.float32) * 2, np.array([1.0, 4.0], np.float32)
    np.testing.assert_allclose(f(x, y), y / 2 * 10)   # the solve's own _s, then the top-level _s
    with pytest.raises(sprue.JaxprError, match=r"prog.jaxpr:3:\d+: custom_linear_solve: const_lengths"):
        load(tmp_path, text.replace("solve=1, transpose_solve=0", "solve=3, transpose_solve=0"))
