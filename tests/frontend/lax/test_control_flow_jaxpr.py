"""The jaxprs of control flow: JAX's text format with nested jaxprs, consts hoisted into operands,
eval_jaxpr (eager, and re-staging inside a trace), source lines, and the StableHLO they lower to."""
import re
import textwrap

import numpy as np
from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo

import sprue
import sprue.numpy as jnp
from sprue import lax
from sprue.ir.core import ClosedJaxpr
from sprue.trace.tracing import eval_jaxpr


def expect(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def test_fori_loop_jaxpr_hoists_the_closure_into_operands():
    def f(x, n):
        return lax.fori_loop(0, n, lambda i, c: c * 2.0 + x, x)
    assert str(sprue.make_jaxpr(f)(np.ones(3), np.int64(2))) == expect("""
        { lambda ; a:f64[3] b:i64[]. let
            c:f64[3] = for_loop[apply_reverse_transform=False
                                body_jaxpr={ lambda ; a:f64[3] b:i64[] c:f64[3]. let
                                               d:f64[3] = mul c 2.0:f64[]
                                               e:f64[3] = add d a
                                             in (e,) }
                                body_nconsts=1
                                nimplicit=0
                                preserve_dimensions=True] a 0:i64[] b 1:i64[] a
          in (c,) }""")


def test_while_jaxpr_passes_cond_consts_then_body_consts_then_the_carry():
    def f(x, tol):
        return lax.while_loop(lambda c: c[1] > tol, lambda c: (c[0] * 0.5, c[1] * 0.5), (x, 1.0))
    assert str(sprue.make_jaxpr(f)(np.ones(2), 0.1)) == expect("""
        { lambda ; a:f64[2] b:f64[]. let
            c:f64[2] d:f64[] = while[body_jaxpr={ lambda ; a:f64[2] b:f64[]. let
                                                    c:f64[2] = mul a 0.5:f64[]
                                                    d:f64[] = mul b 0.5:f64[]
                                                  in (c, d) }
                                     body_nconsts=0
                                     cond_jaxpr={ lambda ; a:f64[] b:f64[2] c:f64[]. let
                                                    d:bool[] = gt c a
                                                  in (d,) }
                                     cond_nconsts=1] b a 1.0:f64[]
          in (c, d) }""")


def test_cond_jaxpr_puts_the_false_branch_first():
    def f(p, x):
        return lax.cond(p, lambda x: x + 1.0, lambda x: x - 1.0, x)
    assert str(sprue.make_jaxpr(f)(True, 2.0)) == expect("""
        { lambda ; a:bool[] b:f64[]. let
            c:i32[] = convert_element_type[new_dtype=int32 sharding=None weak_type=False] a
            d:f64[] = cond[branches=({ lambda ; a:f64[]. let
                                         b:f64[] = sub a 1.0:f64[]
                                       in (b,) }
                                     { lambda ; a:f64[]. let
                                         b:f64[] = add a 1.0:f64[]
                                       in (b,) })] c b
          in (d,) }""")


def test_switch_jaxpr_clamps_then_converts_the_index():
    def f(i, x):
        return lax.switch(i, [lambda x: x, lambda x: -x, lambda x: x * x], x)
    text = str(sprue.make_jaxpr(f)(np.int64(1), 2.0))
    assert text.startswith(expect("""
        { lambda ; a:i64[] b:f64[]. let
            c:i64[] = clamp 0:i64[] a 2:i64[]
            d:i32[] = convert_element_type[new_dtype=int32 sharding=None weak_type=False] c
            e:f64[] = cond[branches=({ lambda ; a:f64[]. let
                                       in (a,) }"""))
    assert text.count("{ lambda ; a:f64[]. let") == 3 and text.endswith("] d b\n  in (e,) }")


def test_catalyst_cond_chains_its_predicates_into_one_index():
    def f(x, p, q):
        @sprue.cond(p)
        def first():
            return x

        @first.else_if(q)
        def second():
            return x * 2.0

        @first.otherwise
        def third():
            return x * 3.0
        return first()
    text = str(sprue.make_jaxpr(f)(1.0, True, False))
    assert text.startswith(expect("""
        { lambda ; a:f64[] b:bool[] c:bool[]. let
            d:i32[] = select_n c 0:i32[] 2:i32[]
            e:i32[] = select_n b d 1:i32[]
            f:f64[] = cond[branches=({ lambda ; a:f64[]. let
                                         b:f64[] = mul a 3.0:f64[]
                                       in (b,) }
                                     { lambda ; a:f64[]. let
                                       in (a,) }"""))
    assert text.endswith("] e a\n  in (f,) }")


def test_scan_jaxpr():
    def f(xs):
        return lax.scan(lambda c, x: (c + x, c), 0.0, xs, reverse=True)
    assert str(sprue.make_jaxpr(f)(np.ones(3))) == expect("""
        { lambda ; a:f64[3]. let
            b:f64[] c:f64[3] = scan[_split_transpose=False
                                    jaxpr={ lambda ; a:f64[] b:f64[]. let
                                              c:f64[] = add a b
                                            in (c, a) }
                                    length=3
                                    linear=(False, False)
                                    num_carry=1
                                    num_consts=0
                                    reverse=True
                                    unroll=1] 0.0:f64[] a
          in (b, c) }""")


def test_nested_loops_print_nested_jaxprs():
    def f(x, k):
        @sprue.while_loop(lambda v: v[0] < 100.0)
        def loop(v):
            @sprue.for_loop(0, k, 1)
            def inner(i, u):
                return u * 2.0
            return inner(v)
        return loop(x)
    assert str(sprue.make_jaxpr(f)(np.ones(2), np.int64(3))) == expect("""
        { lambda ; a:f64[2] b:i64[]. let
            c:f64[2] = while[body_jaxpr={ lambda ; a:i64[] b:f64[2]. let
                                            c:f64[2] = for_loop[apply_reverse_transform=False
                                                                body_jaxpr={ lambda ; a:i64[] b:f64[2]. let
                                                                               c:f64[2] = mul b 2.0:f64[]
                                                                             in (c,) }
                                                                body_nconsts=0
                                                                nimplicit=0
                                                                preserve_dimensions=True] 0:i64[] a 1:i64[] b
                                          in (c,) }
                             body_nconsts=1
                             cond_jaxpr={ lambda ; a:f64[2]. let
                                            b:f64[1] = slice[limit_indices=(1,) start_indices=(0,) strides=None] a
                                            c:f64[] = squeeze[dimensions=(0,)] b
                                            d:bool[] = lt c 100.0:f64[]
                                          in (d,) }
                             cond_nconsts=0] b a
          in (c,) }""")


def _nested(closed: ClosedJaxpr):
    """Every nested ClosedJaxpr of a jaxpr's equations, recursively."""
    for eqn in closed.jaxpr.eqns:
        for v in eqn.params.values():
            for j in (v if isinstance(v, tuple) else (v,)):
                if isinstance(j, ClosedJaxpr):
                    yield j
                    yield from _nested(j)


def test_nested_jaxprs_have_no_consts_of_their_own():
    table = np.array([1.0, 2.0, 3.0])

    def f(x, n):
        y = x * 2.0

        def body(i, c):
            return lax.cond(c[0] > 0, lambda: c + table * y, lambda: lax.fori_loop(0, i, lambda j, d: d - table, c))
        return lax.fori_loop(0, n, body, x)
    closed = sprue.make_jaxpr(f)(np.ones(3), np.int64(3))
    nested = list(_nested(closed))
    assert len(nested) == 4  # the loop body, two branches, the inner body
    assert all(not j.consts and not j.jaxpr.constvars for j in nested)
    # the numpy array went all the way up: the only const of the whole program, hoisted at the top
    assert len(closed.consts) == 1 and closed.consts[0] is table
    loop = closed.jaxpr.eqns[-1]
    assert loop.primitive is lax.for_loop_p and loop.params["body_nconsts"] == 2


def test_eval_jaxpr_runs_and_restages_control_flow():
    def f(x, n):
        return lax.fori_loop(0, n, lambda i, c: lax.cond(c[0] > 4.0, lambda: c - 3.0, lambda: c * 2.0), x)
    x = np.array([1.0, 0.5])
    closed = sprue.make_jaxpr(f)(x, np.int64(6))
    want = x.copy()
    for _ in range(6):
        want = want - 3.0 if want[0] > 4.0 else want * 2.0
    out, = eval_jaxpr(closed.jaxpr, closed.consts, x, np.int64(6))
    np.testing.assert_allclose(out, want)
    restaged = sprue.make_jaxpr(lambda x, n: eval_jaxpr(closed.jaxpr, closed.consts, x, n)[0])(x, np.int64(6))
    assert str(restaged) == str(closed)


def test_equations_carry_the_users_line():
    def f(x):
        return lax.cond(x > 0, lambda: x, lambda: -x)   # this line
    eqn = sprue.make_jaxpr(f)(1.0).jaxpr.eqns[-1]
    assert eqn.primitive is lax.cond_p
    assert re.search(r"test_control_flow_jaxpr\.py:\d+ \(f\)", eqn.source_info)


def test_lowering_emits_valid_stablehlo_control_flow():
    def f(x, i, n):
        y = lax.switch(i, [lambda: x, lambda: x * 2.0, lambda: -x])
        z = lax.cond(i > 0, lambda: y, lambda: y + 1.0)
        w = lax.fori_loop(0, n, lambda k, c: c + z, z)
        _, ys = lax.scan(lambda c, v: (c, v * c), 2.0, w)
        return lax.while_loop(lambda c: jnp.sum(c) < 1e3, lambda c: c * 3.0 + 1.0, ys)
    compiled = sprue.qjit(f)
    x = np.array([1.0, 2.0])
    out = compiled(x, np.int64(1), np.int64(3))
    want = x * 2.0
    want = want + 3 * want
    want = want * 2.0
    while want.sum() < 1e3:
        want = want * 3.0 + 1.0
    np.testing.assert_allclose(out, want)
    text = compiled.mlir
    for opname in ("stablehlo.while", "stablehlo.case", "stablehlo.if", "stablehlo.dynamic_update_slice"):
        assert opname in text
    with ir.Context() as ctx:
        _stablehlo.register_dialect(ctx)
        module = ir.Module.parse(text)
        assert module.operation.verify()
    assert "scf." not in text  # scf only appears after our legalization
