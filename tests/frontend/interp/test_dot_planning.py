"""The products that transformations and sprue.numpy form (sprue.lax.dot.contract): a broadcast
multiply where nothing is summed, one dot_general in an operand order that needs no transpose where
one exists, vmap's unbatched operand folded into a plain matmul. Values against numpy (and
analytic gradients), the jaxpr's structure where it is the point."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from sprue.lax.dot import contract
from tests.helpers.jaxprs import prims
from tests.helpers.rule_checks import check_jvp, check_vjp, close, randn


def dots(cj):
    return [e for e in cj.eqns if e.primitive.name == "dot_general"]


CASES = {  # name: (lhs shape, rhs shape, dimension numbers)
    "matmul": ((3, 4), (4, 5), (((1,), (0,)), ((), ()))),
    "transposed_lhs": ((4, 3), (4, 5), (((0,), (0,)), ((), ()))),
    "batched": ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,)))),
    "batch_not_leading": ((3, 2, 4), (4, 5, 2), (((2,), (0,)), ((1,), (2,)))),
    "outer": ((3,), (5,), (((), ()), ((), ()))),
    "batched_outer": ((2, 3), (5, 2), (((), ()), ((0,), (1,)))),
    "size_one_contraction": ((2, 3, 1), (1, 4), (((2,), (0,)), ((), ()))),
    "two_size_one": ((1, 3, 1), (1, 4, 1), (((0, 2), (2, 0)), ((), ()))),
    "batched_size_one": ((2, 1, 3), (4, 2, 1), (((1,), (2,)), ((0,), (1,)))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_contract_is_the_transposed_dot_general_in_every_order(name):
    ls, rs, dn = CASES[name]
    a, b = randn(*ls), randn(*rs, seed=1)
    (lc, rc), (lb, rb) = dn
    want = np.asarray(lax.dot_general(a, b, dn))     # the primitive's numpy reference (an einsum)
    nothing_summed = all(ls[d] == 1 for d in lc)
    for perm in itertools.permutations(range(want.ndim)):
        close(contract(a, b, dn, perm), np.transpose(want, perm), rtol=1e-12)
        cj = sprue.make_jaxpr(lambda x, y: contract(x, y, dn, perm))(a, b)
        if nothing_summed:            # a broadcast multiply, each operand broadcast in place
            assert "dot_general" not in prims(cj) and "mul" in prims(cj), (perm, prims(cj))
            # an operand is transposed only when its dims come out of order in the result
            lf = [d for d in range(len(ls)) if d not in lc and d not in lb]
            rf = [d for d in range(len(rs)) if d not in rc and d not in rb]
            natural = [(i, j) for i, j in zip(lb, rb)] + [(d, None) for d in lf] + [(None, d) for d in rf]
            wanted = [natural[p] for p in perm]
            moved = 0
            for side, n in ((0, len(ls)), (1, len(rs))):
                pos = [k for d in range(n) for k, w in enumerate(wanted) if w[side] == d]
                moved += pos != sorted(pos)
            assert prims(cj).count("transpose") == moved, (perm, prims(cj))
        else:
            assert len(dots(cj)) == 1
            lf = [d for d in range(len(ls)) if d not in lc and d not in lb]
            rf = [d for d in range(len(rs)) if d not in rc and d not in rb]
            nb = len(lb)
            swapped = tuple(range(nb)) + tuple(range(nb + len(lf), want.ndim)) + tuple(range(nb, nb + len(lf)))
            if perm in (tuple(range(want.ndim)), swapped):
                assert "transpose" not in prims(cj), (perm, prims(cj))
                assert (dots(cj)[0].invars[0].aval.shape == tuple(rs)) == (perm != tuple(range(want.ndim))
                                                                            and bool(lf) and bool(rf))


def test_contract_keeps_the_preferred_element_type():
    a, b = np.arange(6).reshape(2, 3, 1), np.arange(4).reshape(1, 4)
    dn = (((2,), (0,)), ((), ()))
    got = contract(a, b, dn, preferred_element_type=np.float64)   # through dot_general: it converts
    assert got.dtype == np.float64
    close(got, np.einsum("ijk,kl->ijl", a, b))
    got = contract(a.astype(np.float32), b.astype(np.float32), dn, (2, 0, 1))
    assert got.dtype == np.float32
    close(got, np.einsum("ijk,kl->lij", a, b))


def test_vmap_of_a_matmul_with_unbatched_weights_is_one_plain_matmul():
    W = randn(4, 5, seed=1)
    xs = randn(7, 4)
    f = sprue.vmap(lambda x: x @ W)
    cj = sprue.make_jaxpr(f)(xs)
    (d,) = dots(cj)
    assert d.params["dimension_numbers"] == (((1,), (0,)), ((), ())) and prims(cj) == ["dot_general"]
    close(f(xs), xs @ W, rtol=1e-12)
    # the batched operand on the right: W' @ x_i for every i is xs @ W'.T, no transpose of the result
    V = randn(3, 4, seed=2)
    g = sprue.vmap(lambda x: V @ x)
    cj = sprue.make_jaxpr(g)(xs)
    (d,) = dots(cj)
    assert prims(cj) == ["dot_general"] and d.params["dimension_numbers"] == (((1,), (1,)), ((), ()))
    close(g(xs), xs @ V.T, rtol=1e-12)
    # batched on both sides: a batch dimension; a batch of matrices times one matrix: free dims
    ys = randn(7, 4, 2, seed=3)
    close(sprue.vmap(lambda x, y: x @ y)(xs, ys), np.einsum("bk,bkn->bn", xs, ys), rtol=1e-12)
    Ms = randn(7, 3, 4, seed=4)
    cj = sprue.make_jaxpr(sprue.vmap(lambda m: m @ W))(Ms)
    assert prims(cj) == ["dot_general"] and dots(cj)[0].params["dimension_numbers"][1] == ((), ())
    close(sprue.vmap(lambda m: m @ W)(Ms), Ms @ W, rtol=1e-12)


def test_grad_of_a_matmul_forms_each_cotangent_without_a_transpose():
    x, W = randn(6, 4), randn(4, 3, seed=1)

    def loss(x, W):
        return jnp.sum(jnp.sin(x @ W))
    cj = sprue.make_jaxpr(sprue.grad(loss, argnums=(0, 1)))(x, W)
    assert "transpose" not in prims(cj) and len(dots(cj)) == 3
    gx, gW = sprue.grad(loss, argnums=(0, 1))(x, W)
    c = np.cos(x @ W)
    close(gx, c @ W.T, rtol=1e-12)
    close(gW, x.T @ c, rtol=1e-12)


def per_example_loss(params, xi, yi):
    a1, a2 = params
    z = jnp.tanh(xi @ a1) @ a2
    return jnp.sum((z - yi) ** 2)


def test_per_example_gradients_are_broadcast_products_not_batched_outer_dots():
    """vmap(grad) of a small MLP: the weights' per-example cotangents outer(x_i, g_i) are broadcast
    multiplies (a batched dot_general summing nothing would reach the matmul kernel with K = 1),
    the forward and backward matmuls of the batch plain 2-D dot_generals, and nothing transposed."""
    w1, w2 = randn(5, 6, seed=1), randn(6, 3, seed=2)
    x, y = randn(8, 5, seed=3), randn(8, 3, seed=4)
    f = sprue.vmap(sprue.grad(per_example_loss), in_axes=(None, 0, 0))
    cj = sprue.make_jaxpr(f)((w1, w2), x, y)
    assert "transpose" not in prims(cj)
    for d in dots(cj):
        (lc, _), (lb, _) = d.params["dimension_numbers"]
        assert lc and not lb, d.params["dimension_numbers"]
    # analytic per-example gradients
    h = np.tanh(x @ w1)
    dz = 2 * (h @ w2 - y)
    dh = (dz @ w2.T) * (1 - h * h)
    want = (np.einsum("bi,bj->bij", x, dh), np.einsum("bi,bj->bij", h, dz))
    # the example count known only at run time: the broadcast products take symbolic sizes
    dyn = sprue.qjit(lambda w1, w2, x, y: f((w1, w2), x, y), abstracted_axes=(None, None, {0: "n"}, {0: "n"}))
    for got in (f((w1, w2), x, y), sprue.qjit(f)((w1, w2), x, y), dyn(w1, w2, x, y)):
        close(got[0], want[0], rtol=1e-12)
        close(got[1], want[1], rtol=1e-12)
    got = dyn(w1, w2, x[:3], y[:3])
    close(got[1], want[1][:3], rtol=1e-12)


def test_einsum_with_a_size_one_contraction_is_a_broadcast_multiply():
    patch, k = randn(2, 5, 5, 1), randn(1, 4, seed=1)
    f = lambda p, k: jnp.einsum("nhwc,cd->nhwd", p, k)  # noqa: E731
    cj = sprue.make_jaxpr(f)(patch, k)
    assert "dot_general" not in prims(cj) and "transpose" not in prims(cj)
    close(f(patch, k), np.einsum("nhwc,cd->nhwd", patch, k), rtol=1e-12)
    close(sprue.qjit(f)(patch, k), np.einsum("nhwc,cd->nhwd", patch, k), rtol=1e-12)
    check_jvp(f, lambda p, k: np.einsum("nhwc,cd->nhwd", p, k), (patch, k))
    check_vjp(f, lambda p, k: np.einsum("nhwc,cd->nhwd", p, k), (patch, k))
    # an outer product, and a contraction whose output order is the swapped operands'
    u, v = randn(3), randn(4, seed=2)
    cj = sprue.make_jaxpr(lambda u, v: jnp.einsum("i,j->ji", u, v))(u, v)
    assert prims(cj) == ["broadcast_in_dim", "broadcast_in_dim", "mul"]
    close(jnp.einsum("i,j->ji", u, v), np.einsum("i,j->ji", u, v), rtol=1e-12)
    a, b = randn(3, 4), randn(4, 5, seed=3)
    cj = sprue.make_jaxpr(lambda a, b: jnp.einsum("ij,jk->ki", a, b))(a, b)
    assert prims(cj) == ["dot_general"]
    close(sprue.qjit(lambda a, b: jnp.einsum("ij,jk->ki", a, b))(a, b), (a @ b).T, rtol=1e-12)


def test_matmul_of_a_matrix_and_a_stack_is_exact():
    a, b = randn(3, 4), randn(2, 4, 5, seed=1)
    close(jnp.matmul(a, b), np.matmul(a, b), rtol=1e-12)
    check_vjp(jnp.matmul, np.matmul, (a, b))


def test_einsum_contracts_in_the_greedy_order():
    """'ij,jk,k->i' as opt_einsum's greedy path (jax.numpy.einsum's default) forms it: two
    matrix-vector products, never the (i, k) matrix; the values are numpy's."""
    a, b, c = randn(6, 7), randn(7, 8, seed=1), randn(8, seed=2)
    f = lambda a, b, c: jnp.einsum("ij,jk,k->i", a, b, c)  # noqa: E731
    cj = sprue.make_jaxpr(f)(a, b, c)
    assert [d.outvars[0].aval.shape for d in dots(cj)] == [(7,), (6,)]
    close(sprue.qjit(f)(a, b, c), a @ (b @ c), rtol=1e-12)
    check_vjp(f, lambda a, b, c: np.einsum("ij,jk,k->i", a, b, c), (a, b, c))
    # four operands, the output's order asked of the last product
    d = randn(5, 6, seed=3)
    g = lambda a, b, c, d: jnp.einsum("ij,jk,k,li->li", a, b, c, d)  # noqa: E731
    close(g(a, b, c, d), np.einsum("ij,jk,k,li->li", a, b, c, d), rtol=1e-12)
    assert "transpose" not in prims(sprue.make_jaxpr(g)(a, b, c, d))


@pytest.mark.parametrize("spec, shapes", [
    ("ij,jk->ik", [(2, 1), (3, 4)]),             # a's j broadcast: b's rows summed first
    ("ij,ij->ij", [(1, 3), (2, 3)]),             # a label of the output broadcast
    ("ij,jk,kl->il", [(2, 1), (3, 1), (4, 5)]),  # through three operands
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (5, 3, 4)]),
    ("ii,ij->j", [(1, 1), (3, 2)]),              # a repeated label keeps its broadcast
])
def test_einsum_leaves_a_broadcast_label_to_the_operand_that_has_it(spec, shapes):
    """A size-1 dim whose label another operand has at a larger size is dropped (JAX's einsum
    filter_singleton_dims) rather than broadcast: no product is larger than numpy's result needs."""
    xs = [randn(*s, seed=i) for i, s in enumerate(shapes)]
    f = lambda *xs: jnp.einsum(spec, *xs)  # noqa: E731
    want = np.einsum(spec, *xs)
    close(f(*xs), want, rtol=1e-12)
    close(sprue.qjit(f)(*xs), want, rtol=1e-12)
    check_vjp(f, lambda *xs: np.einsum(spec, *xs), tuple(xs))
    if spec == "ij,jk->ik":
        cj = sprue.make_jaxpr(f)(*xs)
        assert "dot_general" not in prims(cj) and max(e.outvars[0].aval.size for e in cj.eqns) == want.size
