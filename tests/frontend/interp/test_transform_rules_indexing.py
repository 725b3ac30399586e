"""Transformation rules (jvp, vjp, vmap, cost) of the reductions (reduce_prod/max/min/and/or,
argmax/argmin, cumsum/cumprod/cummax/cummin) and of gather and the scatter family.

Derivatives are checked against central finite differences of a numpy reference (float64),
cotangents by the dot-product identity <vjp(ct), t> == <ct, jvp(t)> and against finite differences,
vmap against a Python loop over the numpy reference. Products are checked with zeros in the input,
scatters with repeated indices."""
from __future__ import annotations

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from sprue.interp.ad_util import batch_rules, cost_rules, jvp_rules, vjp_rules
from sprue.lax import GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers
from tests.helpers.rule_checks import check_jvp, check_vjp, check_vmap, close, fd_grad, randn


def distinct(*shape, seed=0):
    """Values far apart (no ties, even after a finite-difference step), in random order."""
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n) * 0.37 - n * 0.15).reshape(shape)


# -- numpy references ---------------------------------------------------------------------------------
def np_set(x, idx, v):
    y = x.copy()
    y[idx] = v  # numpy: the last of repeated indices wins, as sprue's scatter
    return y


def np_at(ufunc):
    def f(x, idx, v):
        y = x.copy()
        ufunc.at(y, idx, v)
        return y
    return f


def np_cum(ufunc, axis=0, reverse=False):
    def f(x):
        y = np.flip(x, axis) if reverse else x
        y = ufunc.accumulate(y, axis=axis)
        return np.flip(y, axis) if reverse else y
    return f


def with_zeros(x, positions):
    x = np.array(x, np.float64)
    for p in positions:
        x[p] = 0.0
    return x


I1 = np.array([0, 2, 2, 4])            # repeated index
I2 = np.array([[0, 1], [2, 0]])
IDX_SET = np.array([1, 3, 1, 0])       # repeated: the last write to 1 wins
X35 = randn(3, 5, seed=3)

# (name, f of arrays written with sprue.numpy / sprue.lax, numpy reference, args)
CASES = [
    # reductions
    ("prod", lambda x: jnp.prod(x), np.prod, [randn(5, seed=1)]),
    ("prod_one_zero", lambda x: jnp.prod(x), np.prod, [with_zeros(randn(5, seed=2), [2])]),
    ("prod_two_zeros", lambda x: jnp.prod(x), np.prod, [with_zeros(randn(5, seed=3), [1, 3])]),
    ("prod_axis1_zeros", lambda x: jnp.prod(x, axis=1), lambda x: np.prod(x, axis=1),
     [with_zeros(randn(3, 4, seed=4), [(0, 1), (1, 0), (1, 3)])]),
    ("lax_reduce_prod_02", lambda x: lax.reduce_prod(x, (0, 2)), lambda x: np.prod(x, axis=(0, 2)),
     [with_zeros(randn(2, 3, 4, seed=5), [(0, 0, 1), (1, 2, 0), (1, 2, 3)])]),
    ("max_axis0", lambda x: jnp.max(x, axis=0), lambda x: np.max(x, axis=0), [distinct(4, 3)]),
    ("min_axis1", lambda x: jnp.min(x, axis=1), lambda x: np.min(x, axis=1), [distinct(4, 3, seed=1)]),
    ("lax_reduce_max_all", lambda x: lax.reduce_max(x, (0, 1)), lambda x: np.max(x), [distinct(3, 4, seed=2)]),
    ("lax_reduce_min_0", lambda x: lax.reduce_min(x, (0,)), lambda x: np.min(x, axis=0), [distinct(3, 4, seed=3)]),
    ("argmax_take", lambda x: jnp.take_along_axis(x, jnp.argmax(x, axis=1)[:, None], axis=1) * x,
     lambda x: np.take_along_axis(x, np.argmax(x, axis=1)[:, None], axis=1) * x, [distinct(3, 4, seed=4)]),
    ("argmin_scale", lambda x: x * jnp.argmin(x).astype(np.float64),
     lambda x: x * np.argmin(x), [distinct(5, seed=5)]),
    ("cumsum", lambda x: jnp.cumsum(x, axis=1), lambda x: np.cumsum(x, axis=1), [randn(3, 4, seed=6)]),
    ("lax_cumsum_reverse", lambda x: lax.cumsum(x, 0, reverse=True), np_cum(np.add, 0, True), [randn(4, 3, seed=7)]),
    ("cumprod", lambda x: jnp.cumprod(x), np.cumprod, [randn(6, seed=8)]),
    ("cumprod_zeros", lambda x: jnp.cumprod(x), np.cumprod, [with_zeros(randn(7, seed=9), [1, 4])]),
    ("cumprod_axis1_zeros", lambda x: jnp.cumprod(x, axis=1), lambda x: np.cumprod(x, axis=1),
     [with_zeros(randn(3, 5, seed=10), [(0, 0), (1, 2), (1, 3), (2, 4)])]),
    ("lax_cumprod_reverse_zeros", lambda x: lax.cumprod(x, 1, reverse=True), np_cum(np.multiply, 1, True),
     [with_zeros(randn(3, 5, seed=11), [(0, 4), (1, 1), (1, 3)])]),
    ("lax_cummax", lambda x: lax.cummax(x, 0), np_cum(np.maximum), [distinct(7, seed=12)]),
    ("lax_cummax_axis1", lambda x: lax.cummax(x, 1), np_cum(np.maximum, 1), [distinct(3, 6, seed=13)]),
    ("lax_cummin_reverse", lambda x: lax.cummin(x, 0, reverse=True), np_cum(np.minimum, 0, True),
     [distinct(6, 2, seed=14)]),
    ("lax_cummax_reverse", lambda x: lax.cummax(x, 1, reverse=True), np_cum(np.maximum, 1, True),
     [distinct(2, 6, seed=15)]),
    # gathers
    ("getitem_int_array", lambda x: x[I1], lambda x: x[I1], [randn(5, seed=20)]),
    ("getitem_cols", lambda x: x[:, I1], lambda x: x[:, I1], [randn(3, 5, seed=21)]),
    ("getitem_2d_index", lambda x: x[I2], lambda x: x[I2], [randn(4, 3, seed=22)]),
    ("getitem_points", lambda x: x[I2, I2.T], lambda x: x[I2, I2.T], [randn(3, 3, seed=23)]),
    ("getitem_traced_index", lambda x, i: x[i] * 2.0, lambda x, i: x[i] * 2.0, [randn(5, 2, seed=24), I1]),
    ("take_axis1", lambda x: jnp.take(x, I1, axis=1), lambda x: np.take(x, I1, axis=1), [randn(2, 5, seed=25)]),
    ("take_clip", lambda x: jnp.take(x, np.array([-3, 1, 9]), mode="clip"),
     lambda x: np.take(x, np.array([-3, 1, 9]), mode="clip"), [randn(5, seed=26)]),
    ("take_along_axis", lambda x: jnp.take_along_axis(x, np.array([[0, 2, 2], [1, 1, 0]]), axis=1),
     lambda x: np.take_along_axis(x, np.array([[0, 2, 2], [1, 1, 0]]), axis=1), [randn(2, 4, seed=27)]),
    ("get_fill", lambda x: x.at[np.array([1, 9, 3])].get(mode="fill", fill_value=-1.5),
     lambda x: np.where(np.array([True, False, True]), x[np.array([1, 0, 3])], -1.5), [randn(5, seed=28)]),
    ("lax_gather_windows", lambda x: lax.gather(
        x, np.array([[0], [3], [4]]), GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(),
                                                             start_index_map=(0,)), (2, 3)),
     lambda x: np.stack([x[s:s + 2, :3] for s in (0, 3, 3)]), [randn(5, 4, seed=29)]),   # 4 clamps to 3
    # scatters
    ("set_repeated", lambda x, v: x.at[IDX_SET].set(v), lambda x, v: np_set(x, IDX_SET, v),
     [randn(5, seed=30), randn(4, seed=31)]),
    ("set_rows", lambda x, v: x.at[np.array([2, 0, 2])].set(v), lambda x, v: np_set(x, np.array([2, 0, 2]), v),
     [randn(4, 3, seed=32), randn(3, 3, seed=33)]),
    ("set_drop", lambda x, v: x.at[np.array([1, 7])].set(v, mode="drop"),
     lambda x, v: np_set(x, np.array([1]), v[:1]), [randn(5, seed=34), randn(2, seed=35)]),
    ("add_repeated", lambda x, v: x.at[IDX_SET].add(v), lambda x, v: np_at(np.add)(x, IDX_SET, v),
     [randn(5, seed=36), randn(4, seed=37)]),
    ("add_cols", lambda x, v: x.at[:, np.array([1, 1, 4])].add(v), lambda x, v: np_at(np.add)(x, (slice(None), [1, 1, 4]), v),
     [randn(3, 5, seed=38), randn(3, 3, seed=39)]),
    ("add_clip", lambda x, v: x.at[np.array([1, 9])].add(v, mode="clip"),
     lambda x, v: np_at(np.add)(x, np.array([1, 4]), v), [randn(5, seed=40), randn(2, seed=41)]),
    ("multiply_repeated", lambda x, v: x.at[IDX_SET].multiply(v), lambda x, v: np_at(np.multiply)(x, IDX_SET, v),
     [randn(5, seed=42), randn(4, seed=43)]),
    ("multiply_zeros", lambda x, v: x.at[IDX_SET].multiply(v), lambda x, v: np_at(np.multiply)(x, IDX_SET, v),
     [with_zeros(randn(5, seed=44), [3]), with_zeros(randn(4, seed=45), [0])]),
    ("multiply_two_zeros_same_place", lambda x, v: x.at[np.array([1, 2, 1, 1])].multiply(v),
     lambda x, v: np_at(np.multiply)(x, np.array([1, 2, 1, 1]), v), [randn(4, seed=46), with_zeros(randn(4, seed=47), [0, 3])]),
    ("min_repeated", lambda x, v: x.at[IDX_SET].min(v), lambda x, v: np_at(np.minimum)(x, IDX_SET, v),
     [distinct(5, seed=48), distinct(4, seed=49) + 0.1]),
    ("max_repeated", lambda x, v: x.at[IDX_SET].max(v), lambda x, v: np_at(np.maximum)(x, IDX_SET, v),
     [distinct(5, seed=50), distinct(4, seed=51) + 0.1]),
    ("max_rows_drop", lambda x, v: x.at[np.array([0, 5, 0])].max(v, mode="drop"),
     lambda x, v: np_at(np.maximum)(x, np.array([0, 0]), v[[0, 2]]), [distinct(3, 2, seed=52), distinct(3, 2, seed=53) + 0.1]),
    ("lax_scatter_add_windows", lambda x, v: lax.scatter_add(
        x, np.array([[1], [3], [1]]), v, ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                                                 scatter_dims_to_operand_dims=(0,))),
     lambda x, v: np_at(np.add)(x, np.array([1, 3, 1]), v), [randn(4, 3, seed=54), randn(3, 3, seed=55)]),
    ("lax_scatter_window_overlap", lambda x, v: lax.scatter(
        x, np.array([[0], [1]]), v, ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(),
                                                            scatter_dims_to_operand_dims=(0,))),
     lambda x, v: np_set(np_set(x, slice(0, 2), v[0]), slice(1, 3), v[1]), [randn(4, seed=56), randn(2, 2, seed=57)]),
]


@pytest.mark.parametrize("name,f,ref,args", CASES, ids=[c[0] for c in CASES])
def test_jvp(name, f, ref, args):
    check_jvp(f, ref, args)


@pytest.mark.parametrize("name,f,ref,args", CASES, ids=[c[0] for c in CASES])
def test_vjp(name, f, ref, args):
    check_vjp(f, ref, args)


@pytest.mark.parametrize("name,f,ref,args", [c for c in CASES if len(c[3]) == 1 or c[0] == "set_repeated"],
                         ids=[c[0] for c in CASES if len(c[3]) == 1 or c[0] == "set_repeated"])
def test_grad_against_coordinatewise_fd(name, f, ref, args):
    w = randn(*np.shape(ref(*args)), seed=99)
    x = args[0]
    g = sprue.grad(lambda x: jnp.sum(f(x, *args[1:]) * w))(x)
    close(g, fd_grad(lambda x: np.sum(ref(x, *args[1:]) * w), x), rtol=1e-6, atol=1e-7)


# -- the conventions at ties and zeros, against their definition ------------------------------------------
def test_max_ties_share_evenly():
    x = np.array([[1.0, 4.0, 4.0, 2.0], [3.0, 3.0, 3.0, 0.0]])
    g = sprue.grad(lambda x: jnp.sum(jnp.max(x, axis=1) * np.array([2.0, 3.0])))(x)
    mask = (x == x.max(axis=1, keepdims=True))
    close(g, mask / mask.sum(axis=1, keepdims=True) * np.array([[2.0], [3.0]]))
    g = sprue.grad(lambda x: jnp.min(x))(x)
    close(g, (x == x.min()) / np.sum(x == x.min()))


def test_cummax_ties_go_to_the_latest():
    x = np.array([1.0, 3.0, 3.0, 2.0, 5.0, 5.0])
    w = np.arange(1.0, 7.0)
    g = sprue.grad(lambda x: jnp.sum(lax.cummax(x) * w))(x)
    src, best = [], 0
    for i in range(len(x)):
        if x[i] >= x[best]:
            best = i
        src.append(best)
    want = np.zeros_like(x)
    np.add.at(want, src, w)
    close(g, want)


def test_scatter_max_ties_share_evenly():
    x = np.array([1.0, 5.0, 3.0])
    idx, v = np.array([1, 1, 2]), np.array([5.0, 2.0, 7.0])
    gx, gv = sprue.grad(lambda x, v: jnp.sum(x.at[idx].max(v) * np.array([1.0, 2.0, 3.0])), argnums=(0, 1))(x, v)
    close(gx, [1.0, 1.0, 0.0])      # element 1: x[1] and v[0] tie at 5: half each of 2
    close(gv, [1.0, 0.0, 3.0])


def test_prod_with_zeros_exact():
    x = np.array([2.0, 0.0, 3.0, -1.5])
    close(sprue.grad(lambda x: jnp.prod(x))(x), [0.0, 2.0 * 3.0 * -1.5, 0.0, 0.0])
    x = np.array([2.0, 0.0, 3.0, 0.0])
    close(sprue.grad(lambda x: jnp.prod(x))(x), np.zeros(4))


def test_cumprod_with_zeros_against_definition():
    x = np.array([1.5, -2.0, 0.0, 3.0, 0.0, 0.5])
    w = randn(6, seed=5)
    g = sprue.grad(lambda x: jnp.sum(jnp.cumprod(x) * w))(x)
    want = np.array([sum(w[i] * np.prod(np.delete(x[:i + 1], k)) for i in range(k, 6)) for k in range(6)])
    close(g, want)


def test_set_repeated_index_gradient_goes_to_the_winner():
    x, v = randn(5), np.array([10.0, 20.0, 30.0])
    idx = np.array([2, 2, 2])
    gx, gv = sprue.grad(lambda x, v: jnp.sum(x.at[idx].set(v) * np.arange(1.0, 6.0)), argnums=(0, 1))(x, v)
    close(gx, [1.0, 2.0, 0.0, 4.0, 5.0])
    close(gv, [0.0, 0.0, 3.0])


def test_integer_outputs_have_zero_tangents():
    x = distinct(3, 4)
    out, t = sprue.jvp(lambda x: jnp.argmax(x, axis=1), (x,), (np.ones_like(x),))
    np.testing.assert_array_equal(out, np.argmax(x, axis=1))
    assert not np.any(t)
    out, t = sprue.jvp(lambda x: lax.reduce_or(x > 0, (0,)), (x,), (np.ones_like(x),))
    np.testing.assert_array_equal(out, np.any(x > 0, axis=0))
    g = sprue.grad(lambda x: jnp.sum(x * jnp.argmax(x, axis=1)[:, None]))(x)
    close(g, np.broadcast_to(np.argmax(x, axis=1)[:, None], x.shape))


# -- vmap -----------------------------------------------------------------------------------------------
VMAP_REDUCTIONS = [
    ("prod", lambda x: jnp.prod(x, axis=0), lambda x: np.prod(x, axis=0), with_zeros(randn(4, 3, 2), [(0, 1, 0)])),
    ("lax_reduce_prod", lambda x: lax.reduce_prod(x, (1,)), lambda x: np.prod(x, axis=1), randn(4, 3, 2)),
    ("max", lambda x: jnp.max(x, axis=-1), lambda x: np.max(x, axis=-1), randn(4, 3, 2)),
    ("min", lambda x: lax.reduce_min(x, (0, 1)), np.min, randn(4, 3, 2)),
    ("argmax", lambda x: jnp.argmax(x, axis=1), lambda x: np.argmax(x, axis=1), distinct(4, 3, 5)),
    ("argmin", lambda x: lax.argmin(x, 0), lambda x: np.argmin(x, axis=0), distinct(4, 3, 5)),
    ("reduce_and", lambda x: lax.reduce_and(x > 0, (1,)), lambda x: np.all(x > 0, axis=1), randn(4, 3, 5)),
    ("reduce_or", lambda x: lax.reduce_or(x > 1, (0,)), lambda x: np.any(x > 1, axis=0), randn(4, 3, 5)),
    ("cumsum", lambda x: lax.cumsum(x, -1, reverse=True), np_cum(np.add, -1, True), randn(4, 3, 5)),
    ("cumprod", lambda x: lax.cumprod(x, 0), np_cum(np.multiply, 0), randn(4, 3, 5)),
    ("cummax", lambda x: lax.cummax(x, 1), np_cum(np.maximum, 1), randn(4, 3, 5)),
    ("cummin", lambda x: lax.cummin(x, 0, reverse=True), np_cum(np.minimum, 0, True), randn(4, 3, 5)),
]


@pytest.mark.parametrize("name,f,ref,x", VMAP_REDUCTIONS, ids=[c[0] for c in VMAP_REDUCTIONS])
@pytest.mark.parametrize("axis", [0, 1])
def test_vmap_reductions(name, f, ref, x, axis):
    check_vmap(f, ref, [np.moveaxis(x, 0, axis)], (axis,))


IX = np.array([[0, 4, 4], [1, 2, 0], [3, 3, 3], [2, 0, 1]])   # one row per batch element
VMAP_INDEXING = [
    ("getitem", lambda x, i: x[i], lambda x, i: x[i], [randn(4, 5), IX]),
    ("getitem_cols", lambda x, i: x[:, i], lambda x, i: x[:, i], [randn(4, 2, 5), IX]),
    ("take_along", lambda x, i: jnp.take_along_axis(x, i[None, :], axis=1),
     lambda x, i: np.take_along_axis(x, i[None, :], axis=1), [randn(4, 2, 5), IX]),
    ("get_fill", lambda x, i: x.at[i].get(mode="fill", fill_value=9.0),
     lambda x, i: np.where(i < 5, x[np.minimum(i, 4)], 9.0), [randn(4, 5), IX + np.array([[0], [0], [3], [0]])]),
    ("set", lambda x, i, v: x.at[i].set(v), lambda x, i, v: np_set(x, i, v), [randn(4, 5), IX, randn(4, 3)]),
    ("add", lambda x, i, v: x.at[i].add(v), np_at(np.add), [randn(4, 5), IX, randn(4, 3)]),
    ("multiply", lambda x, i, v: x.at[i].multiply(v), np_at(np.multiply), [randn(4, 5), IX, randn(4, 3)]),
    ("min", lambda x, i, v: x.at[i].min(v), np_at(np.minimum), [randn(4, 5), IX, randn(4, 3)]),
    ("max", lambda x, i, v: x.at[i].max(v), np_at(np.maximum), [randn(4, 5), IX, randn(4, 3)]),
    ("add_drop", lambda x, i, v: x.at[i].add(v, mode="drop"),
     lambda x, i, v: np_at(np.add)(x, i[i < 5], v[i < 5]), [randn(4, 5), IX + np.array([[0], [4], [0], [0]]), randn(4, 3)]),
    ("add_clip_rows", lambda x, i, v: x.at[i].add(v, mode="clip"),
     lambda x, i, v: np_at(np.add)(x, np.minimum(i, 4), v), [randn(4, 5, 2), IX + 2, randn(4, 3, 2)]),
]


def _axes_combinations(n):
    """in_axes with at least one batched argument: every argument batched, each one alone, and the
    indices unbatched."""
    combos = {(0,) * n}
    for k in range(n):
        combos.add(tuple(0 if j == k else None for j in range(n)))
        combos.add(tuple(None if j == k else 0 for j in range(n)))
    return sorted(combos, key=str)


@pytest.mark.parametrize("name,f,ref,args,in_axes",
                         [(*c, ax) for c in VMAP_INDEXING for ax in _axes_combinations(len(c[3]))],
                         ids=[f"{c[0]}-{ax}" for c in VMAP_INDEXING for ax in _axes_combinations(len(c[3]))])
def test_vmap_indexing(name, f, ref, args, in_axes):
    args = [a if ax is not None else a[0] for a, ax in zip(args, in_axes)]
    check_vmap(f, ref, args, in_axes)


def test_vmap_lax_gather_and_scatter_windows():
    dn = GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(), start_index_map=(0,))
    sdn = ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(), scatter_dims_to_operand_dims=(0,))
    xs, ids, us = randn(3, 6), np.array([[[0], [5]], [[2], [1]], [[4], [4]]]), randn(3, 2, 2)

    def gather_ref(x, i):
        return np.stack([x[min(s, 4):min(s, 4) + 2] for s in i[:, 0]])
    check_vmap(lambda x, i: lax.gather(x, i, dn, (2,)), gather_ref, [xs, ids], (0, 0))
    check_vmap(lambda x, i: lax.gather(x, i, dn, (2,), mode=GatherScatterMode.FILL_OR_DROP, fill_value=0.5),
               lambda x, i: np.stack([x[s:s + 2] if s <= 4 else np.full(2, 0.5) for s in i[:, 0]]), [xs, ids], (0, 0))

    def scatter_ref(x, i, u):
        y = x.copy()
        for s, w in zip(i[:, 0], u):
            if s <= 4:
                y[s:s + 2] += w
        return y
    check_vmap(lambda x, i, u: lax.scatter_add(x, i, u, sdn), scatter_ref, [xs, ids, us], (0, 0, 0))
    check_vmap(lambda x, i, u: lax.scatter_add(x, i, u, sdn), scatter_ref, [xs[0], ids, us], (None, 0, 0))
    check_vmap(lambda x, i, u: lax.scatter_add(x, i, u, sdn), scatter_ref, [xs, ids[0], us], (0, None, 0))


def test_vmap_of_grad_and_grad_of_vmap():
    xs, w = randn(4, 5), randn(3)

    def f(x, i):
        return jnp.sum(jnp.cumprod(x[i]) * w) + jnp.prod(x) + jnp.max(x.at[i].add(x[:3] * 2.0))
    g = sprue.vmap(sprue.grad(f), in_axes=(0, 0))(xs, IX)
    want = np.stack([sprue.grad(f)(xs[b], IX[b]) for b in range(4)])
    close(g, want, rtol=1e-12)
    gv = sprue.grad(lambda xs: jnp.sum(sprue.vmap(f, in_axes=(0, 0))(xs, IX)))(xs)
    close(gv, want, rtol=1e-12)


# -- higher order ----------------------------------------------------------------------------------------
def test_hessian_of_prod():
    x = np.array([1.5, -2.0, 0.7, 3.0])
    h = sprue.jacfwd(sprue.grad(lambda x: jnp.prod(x)))(x)
    want = np.prod(x) / np.outer(x, x)
    np.fill_diagonal(want, 0.0)
    close(h, want, rtol=1e-12)
    h = sprue.jacrev(sprue.grad(lambda x: jnp.prod(x)))(x)
    close(h, want, rtol=1e-12)


def _second_directional(f, ref_scalar, x, v):
    """grad(<grad f, v>) against finite differences of grad f's finite-difference version."""
    got = sprue.grad(lambda x: jnp.sum(sprue.grad(f)(x) * v))(x)
    want = (fd_grad(ref_scalar, x + 1e-4 * v) - fd_grad(ref_scalar, x - 1e-4 * v)) / 2e-4  # the Hessian is symmetric
    close(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name,f,ref", [
    ("gather_cube", lambda x: jnp.sum(x[I1] ** 3), lambda x: np.sum(x[I1] ** 3)),
    ("cumprod", lambda x: jnp.sum(jnp.cumprod(x) * np.arange(1.0, 6.0)), lambda x: np.sum(np.cumprod(x) * np.arange(1.0, 6.0))),
    ("scatter_mul", lambda x: jnp.sum(x.at[np.array([0, 0, 3])].multiply(x[1:4]) ** 2),
     lambda x: np.sum(np_at(np.multiply)(x, np.array([0, 0, 3]), x[1:4]) ** 2)),
    ("scatter_max", lambda x: jnp.sum(x.at[np.array([0, 2])].max(x[3:] * 2.0) ** 2),
     lambda x: np.sum(np_at(np.maximum)(x, np.array([0, 2]), x[3:] * 2.0) ** 2)),
    ("max_min", lambda x: jnp.max(x) * jnp.min(x), lambda x: np.max(x) * np.min(x)),
    ("cummax_sq", lambda x: jnp.sum(lax.cummax(x, 0) ** 2), lambda x: np.sum(np.maximum.accumulate(x) ** 2)),
])
def test_grad_of_grad(name, f, ref):
    x = np.array([0.9, -1.3, 1.7, 0.4, 2.2])
    _second_directional(f, ref, x, randn(5, seed=3))


def test_grad_of_grad_cumprod_with_a_zero_first_order_exact():
    # the second derivative through a zero is exact where it does not involve the zero's own slot
    x = np.array([1.5, 0.0, 2.0, -1.0])
    g = sprue.grad(lambda x: jnp.sum(jnp.cumprod(x)))(x)
    close(g, fd_grad(lambda x: np.sum(np.cumprod(x)), x))


# -- qjit ------------------------------------------------------------------------------------------------
QJIT_CASES = [
    ("prod_zeros", lambda x: jnp.prod(x[:3]) + jnp.sum(jnp.cumprod(x)), with_zeros(randn(6), [2])),
    ("max_gather", lambda x: jnp.max(x[I1]) + jnp.sum(jnp.take(x, I1) ** 2), randn(6, seed=1)),
    ("scatter", lambda x: jnp.sum(x.at[IDX_SET].set(x[:4] * 3.0) * x) + jnp.sum(x.at[IDX_SET].multiply(x[2:]) ** 2),
     randn(6, seed=2)),
    ("cum", lambda x: jnp.sum(lax.cummax(x, 0) * jnp.cumsum(x)), distinct(6, seed=3)),
]


@pytest.mark.parametrize("name,f,x", QJIT_CASES, ids=[c[0] for c in QJIT_CASES])
def test_qjit_grad(name, f, x):
    close(sprue.qjit(sprue.grad(f))(x), sprue.grad(f)(x), rtol=1e-12)


def test_qjit_vmap_gather_scatter():
    def f(x, i, v):
        return x.at[i].add(v * x[i])
    xs, vs = randn(4, 5), randn(4, 3)
    close(sprue.qjit(sprue.vmap(f))(xs, IX, vs), sprue.vmap(f)(xs, IX, vs), rtol=1e-12)


def test_qjit_grad_dynamic_size():
    f = sprue.grad(lambda x: jnp.prod(x) + jnp.max(x) + jnp.sum(jnp.cumprod(x)))
    g = sprue.qjit(f, abstracted_axes=({0: "n"},))
    for n in (3, 6):
        x = with_zeros(randn(n, seed=n), [1])
        close(g(x), f(x), rtol=1e-12)


# -- cost ------------------------------------------------------------------------------------------------
def test_cost_reductions():
    x = randn(7)
    assert sprue.cost(jnp.sum)(x) == 6
    assert sprue.cost(jnp.prod)(x) == 6
    assert sprue.cost(jnp.max)(x) == 6
    assert sprue.cost(jnp.argmax)(x) == 6
    m = randn(3, 5)
    assert sprue.cost(lambda m: jnp.min(m, axis=1))(m) == 3 * 4
    assert sprue.cost(lambda m: jnp.cumsum(m, axis=1))(m) == 3 * 4
    assert sprue.cost(lambda m: lax.cumprod(m, 0))(m) == 2 * 5
    assert sprue.cost(lambda m: lax.cummax(m, 1))(m) == 3 * 4
    assert sprue.cost(lambda m: lax.reduce_or(m > 0, (0,)))(m) == 3 * 5  # only the comparison
    assert sprue.cost(lambda m: jnp.cumsum(m.astype(np.int64), axis=1))(m) == 0


def test_cost_indexing():
    x = randn(6)
    assert sprue.cost(lambda x: x[I1])(x) == 0
    assert sprue.cost(lambda x: x.at[I1].set(1.0))(x) == 0
    assert sprue.cost(lambda x: x.at[I1].add(1.0))(x) == 4
    assert sprue.cost(lambda x: x.at[I1].max(x[:4]))(x) == 4


def test_every_primitive_has_all_rules():
    from sprue.ir.core import Primitive
    from sprue.lax import indexing, reductions, scatter_reductions, structural
    modules = (indexing, reductions, scatter_reductions, structural)
    prims = {v for m in modules for v in vars(m).values() if isinstance(v, Primitive)}
    assert len(prims) == 30
    for p in prims:
        for table in (jvp_rules, vjp_rules, batch_rules, cost_rules):
            assert p in table, (p, table)


@pytest.mark.parametrize("name,f", [
    ("prod", lambda x: jnp.prod(x)), ("max", lambda x: jnp.max(x, axis=0).sum()),
    ("cumprod", lambda x: jnp.cumprod(x).sum()), ("cummin", lambda x: lax.cummin(x, 0).sum()),
    ("gather", lambda x: jnp.sum(x[I1] ** 2)), ("scatter_min", lambda x: jnp.sum(x.at[IDX_SET].min(x[1:]))),
    ("scatter_mul", lambda x: jnp.sum(x.at[IDX_SET].multiply(x[1:]))),
])
def test_float32_cotangents_keep_the_dtype(name, f):
    x = with_zeros(randn(5, seed=8), [2]).astype(np.float32)
    g = sprue.grad(f)(x)
    assert g.dtype == np.float32 and g.shape == x.shape
    close(g, sprue.grad(f)(x.astype(np.float64)), rtol=1e-5, atol=1e-6)


# -- sizes known only at run time (qjit's abstracted_axes) -------------------------------------------------
@pytest.mark.parametrize("name,f,args,axes", [
    ("vmap_gather_both", sprue.vmap(lambda x, i: x[i] * 2.0), [randn(4, 5), IX], ({0: "b"}, {0: "b"})),
    ("vmap_gather_operand", sprue.vmap(lambda x: x[I1[:3]]), [randn(4, 5)], ({0: "b"},)),
    ("vmap_scatter_add", sprue.vmap(lambda x, i, v: x.at[i].add(v)), [randn(4, 5), IX, randn(4, 3)],
     ({0: "b"}, {0: "b"}, {0: "b"})),
    ("grad_cummin_reverse", sprue.grad(lambda x: jnp.sum(lax.cummin(x, 1, reverse=True) ** 2)), [distinct(3, 5)],
     ({0: "m", 1: "n"},)),
    ("grad_take_along", sprue.grad(lambda x, i: jnp.sum(jnp.take_along_axis(x, i, axis=1) ** 2)),
     [randn(4, 5), IX], ({0: "m"}, {0: "m"})),
    ("grad_scatter_max", sprue.grad(lambda x, v: jnp.sum(x.at[I1[:3]].max(v) ** 2), argnums=(0, 1)),
     [distinct(5), distinct(3, seed=2) + 0.1], ({0: "n"}, None)),
    ("grad_scatter_set", sprue.grad(lambda x, v: jnp.sum(x.at[I1[:3]].set(v) ** 2 * x), argnums=(0, 1)),
     [randn(5), randn(3, seed=2)], ({0: "n"}, None)),
    ("vmap_grad", sprue.vmap(sprue.grad(lambda x, i: jnp.sum(jnp.cumprod(x[i])))), [randn(4, 5), IX],
     ({0: "b"}, {0: "b"})),
])
def test_qjit_dynamic_sizes(name, f, args, axes):
    got, want = sprue.qjit(f, abstracted_axes=axes)(*args), f(*args)
    for g, w in (zip(got, want) if isinstance(want, tuple) else [(got, want)]):
        close(g, w, rtol=1e-12)
