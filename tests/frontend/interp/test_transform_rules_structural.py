"""Transformation rules (jvp, vjp, vmap, cost) of the shape-changing primitives (sprue.lax
structural: reshape, transpose, squeeze, rev, concatenate, pad, slice, dynamic_slice,
dynamic_update_slice, iota, copy), dot_general, sort and check.

Every derivative is checked against central finite differences of a numpy reference, every
cotangent by the dot-product identity <vjp(ct), t> == <ct, jvp(t)>, every vmap against a Python
loop over the numpy reference."""
from __future__ import annotations

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from sprue.base.errors import SprueValueError, UnsupportedError
from sprue.interp.ad_util import batch_rules, cost_rules, jvp_rules, vjp_rules
from tests.helpers.rule_checks import EPS, check_jvp, check_vjp, check_vmap, close, fd_grad, fd_jvp, is_float, randn


class Case:
    def __init__(self, name, f, ref, args, vmap_axes=()):
        self.name, self.f, self.ref, self.args, self.vmap_axes = name, f, ref, args, vmap_axes


def np_pad(x, v, config):
    """numpy reference of lax.pad: interior by strided placement, then edges (negative = crop)."""
    shape = [d + max(d - 1, 0) * i for d, (_, _, i) in zip(x.shape, config)]
    y = np.full(shape, v, np.result_type(x, v))
    y[tuple(slice(None, None, i + 1) for _, _, i in config)] = x
    for ax, (lo, hi, _) in enumerate(config):
        y = np.moveaxis(y, ax, 0)
        y = y[max(-lo, 0): y.shape[0] - max(-hi, 0)]
        y = np.concatenate([np.full((max(lo, 0),) + y.shape[1:], v), y, np.full((max(hi, 0),) + y.shape[1:], v)])
        y = np.moveaxis(y, 0, ax)
    return y


def np_dynamic_slice(x, idx, sizes):
    st = [int(np.clip(i, 0, d - s)) for i, d, s in zip(idx, x.shape, sizes)]
    return x[tuple(slice(s, s + n) for s, n in zip(st, sizes))]


def np_dus(x, u, idx):
    st = [int(np.clip(i, 0, d - s)) for i, d, s in zip(idx, x.shape, u.shape)]
    y = x.copy()
    y[tuple(slice(s, s + n) for s, n in zip(st, u.shape))] = u
    return y


def np_sort_pair(k, v, axis):
    order = np.argsort(k, axis=axis, kind="stable")
    return np.take_along_axis(k, order, axis), np.take_along_axis(v, order, axis)


PAD1 = [(1, 2, 0), (-1, 2, 1)]
PAD2 = [(-2, -1, 2), (0, 1, 0)]

CASES = [
    Case("reshape_lax", lambda x: lax.reshape(x, (6, 2)), lambda x: np.reshape(x, (6, 2)), (randn(3, 4),),
         [(0,), (1,)]),
    Case("reshape_jnp", lambda x: jnp.reshape(x, (2, -1)), lambda x: np.reshape(x, (2, -1)), (randn(3, 4, 2),),
         [(0,), (2,)]),
    Case("transpose_jnp", lambda x: jnp.transpose(x, (2, 0, 1)), lambda x: np.transpose(x, (2, 0, 1)),
         (randn(2, 3, 4),), [(0,), (1,)]),
    Case("transpose_T", lambda x: x.T * 1.0, lambda x: x.T, (randn(3, 5),), [(1,)]),
    Case("squeeze", lambda x: lax.squeeze(x, (1, -1)), lambda x: np.squeeze(x, (1, 3)), (randn(3, 1, 4, 1),),
         [(0,), (2,)]),
    Case("squeeze_jnp", lambda x: jnp.squeeze(x), lambda x: np.squeeze(x), (randn(1, 4, 1),), [(1,)]),
    Case("rev", lambda x: lax.rev(x, (0, -1)), lambda x: np.flip(x, (0, 1)), (randn(3, 4),), [(0,), (1,)]),
    Case("flip_jnp", lambda x: jnp.flip(x, 1), lambda x: np.flip(x, 1), (randn(3, 4),), [(1,)]),
    Case("copy", lambda x: lax.copy_p.bind(x), lambda x: x.copy(), (randn(3, 2),), [(0,), (1,)]),
    Case("concatenate_jnp", lambda x, y: jnp.concatenate([x, y], axis=1),
         lambda x, y: np.concatenate([x, y], 1), (randn(3, 2), randn(3, 4, seed=1)),
         [(0, 0), (0, None), (None, 1), (1, 0)]),
    Case("concatenate_lax3", lambda x, y, z: lax.concatenate([x, y, z], 0),
         lambda x, y, z: np.concatenate([x, y, z], 0), (randn(2, 3), randn(1, 3, seed=1), randn(4, 3, seed=2)),
         [(0, None, 1), (None, None, 1), (1, 1, 1)]),
    Case("pad_edges_interior", lambda x, v: lax.pad(x, v, PAD1), lambda x, v: np_pad(x, v, PAD1),
         (randn(3, 4), np.float64(0.5)), [(0, None), (0, 0), (None, 0), (1, 0)]),
    Case("pad_negative", lambda x, v: lax.pad(x, v, PAD2), lambda x, v: np_pad(x, v, PAD2),
         (randn(4, 3), np.float64(-1.5)), [(0, None), (1, 0), (None, 0)]),
    Case("slice_getitem", lambda x: x[1:5:2], lambda x: x[1:5:2], (randn(7),), [(0,)]),
    Case("slice_getitem2", lambda x: x[1:, :3], lambda x: x[1:, :3], (randn(4, 5),), [(0,), (1,)]),
    Case("slice_lax_strided", lambda x: lax.slice(x, (0, 1), (5, 4), (2, 2)), lambda x: x[0:5:2, 1:4:2],
         (randn(6, 5),), [(0,), (2,)]),
    Case("slice_empty", lambda x: lax.slice(x, (2,), (2,), (3,)), lambda x: x[2:2:3], (randn(5),), [(0,)]),
    Case("dynamic_slice", lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 3)),
         lambda x, i, j: np_dynamic_slice(x, (i, j), (2, 3)), (randn(4, 5), np.int64(1), np.int64(4)),
         [(0, None, None), (None, 0, 0), (0, 0, None), (1, None, 0)]),
    Case("dynamic_slice_i32", lambda x, i: lax.dynamic_slice(x, (i,), (3,)),
         lambda x, i: np_dynamic_slice(x, (i,), (3,)), (randn(6), np.int32(-2)), [(0, None), (None, 0), (0, 0)]),
    Case("dynamic_update_slice", lambda x, u, i, j: lax.dynamic_update_slice(x, u, (i, j)),
         lambda x, u, i, j: np_dus(x, u, (i, j)), (randn(4, 5), randn(2, 3, seed=1), np.int64(3), np.int64(1)),
         [(0, 0, None, None), (None, 0, None, None), (0, None, None, None), (0, 0, 0, 0), (None, 0, 0, None),
          (0, None, None, 0), (1, 1, 0, 0)]),
    Case("dot_matmul", lambda a, b: a @ b, lambda a, b: a @ b, (randn(3, 4), randn(4, 5, seed=1)),
         [(0, None), (None, 1), (0, 0), (1, 2)]),
    Case("dot_vectors", lambda a, b: jnp.dot(a, b), lambda a, b: np.dot(a, b), (randn(4), randn(4, seed=1)),
         [(0, None), (None, 0), (0, 0)]),
    Case("dot_matvec", lambda a, b: jnp.matmul(a, b), lambda a, b: a @ b, (randn(3, 4), randn(4, seed=1)),
         [(0, 0), (None, 0), (0, None)]),
    Case("einsum_batched", lambda a, b: jnp.einsum("bij,bjk->bik", a, b), lambda a, b: np.einsum("bij,bjk->bik", a, b),
         (randn(2, 3, 4), randn(2, 4, 5, seed=1)), [(0, None), (None, 2), (1, 1)]),
    Case("dot_general_odd_dims", lambda a, b: lax.dot_general(a, b, (((3, 0), (1, 3)), ((1,), (0,)))),
         lambda a, b: np.einsum("kbmc,bcnk->bmn", a, b), (randn(2, 3, 4, 5), randn(3, 5, 6, 2, seed=1)),
         [(0, None), (None, 3), (4, 0)]),
    Case("sort_jnp", lambda x: jnp.sort(x), lambda x: np.sort(x), (randn(7),), [(0,)]),
    Case("sort_axis0", lambda x: jnp.sort(x, axis=0), lambda x: np.sort(x, axis=0), (randn(5, 3),), [(0,), (1,)]),
    Case("sort_pair", lambda k, v: lax.sort((k, v), dimension=1, num_keys=1), lambda k, v: np_sort_pair(k, v, 1),
         (randn(3, 5), randn(3, 5, seed=1)), [(0, None), (None, 1), (1, 0)]),
    Case("sort_with_ints", lambda k, i, v: lax.sort((k, i, v), dimension=0, num_keys=1),
         lambda k, i, v: (np.sort(k, kind="stable"), i[np.argsort(k, kind="stable")], v[np.argsort(k, kind="stable")]),
         (randn(6), np.arange(6) * 3, randn(6, seed=2)), [(0, None, None), (None, 0, 0)]),
    Case("sort_by_int_key", lambda i, v: lax.sort((i, v), dimension=0, num_keys=1),
         lambda i, v: np_sort_pair(i, v, 0), (np.array([3, 1, 2, 0, 5]), randn(5)), [(None, 0), (0, 0)]),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_primal_and_jvp(case):
    close(case.f(*case.args), case.ref(*case.args)) if not isinstance(case.ref(*case.args), tuple) else None
    check_jvp(case.f, case.ref, case.args)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_vjp(case):
    check_vjp(case.f, case.ref, case.args)


VMAP_CASES = [(c, ax) for c in CASES for ax in c.vmap_axes]


def _batched_args(case, axes, size=3):
    """The case's arguments with a batch of `size` inserted at each in_axes position."""
    out = []
    for k, (a, ax) in enumerate(zip(case.args, axes)):
        if ax is None:
            out.append(a)
            continue
        if is_float(a):
            stack = np.stack([np.asarray(a) + randn(*np.shape(a), seed=20 + 5 * k + b) for b in range(size)], ax)
        else:  # integers: indices in and out of range
            stack = np.stack([np.asarray(a) + (b - 1) * 2 for b in range(size)], ax) if np.ndim(a) == 0 else \
                np.stack([np.random.default_rng(b).permutation(np.asarray(a)) for b in range(size)], ax)
        out.append(stack.astype(np.asarray(a).dtype))
    return out


@pytest.mark.parametrize("case,axes", VMAP_CASES, ids=[f"{c.name}-{ax}" for c, ax in VMAP_CASES])
def test_vmap(case, axes):
    check_vmap(case.f, case.ref, _batched_args(case, axes), axes)


@pytest.mark.parametrize("case,axes", VMAP_CASES[::3], ids=[f"{c.name}-{ax}" for c, ax in VMAP_CASES[::3]])
def test_vmap_of_grad_and_grad_of_vmap(case, axes):
    """vmap of the rules' own jvp/vjp (their equations are batched too) and vjp of vmap."""
    args = _batched_args(case, axes)
    diff = [k for k, a in enumerate(case.args) if is_float(a)]

    def loss(*full):
        outs = case.f(*full)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return sum(jnp.sum(jnp.sin(o)) for o in outs if is_float_aval(o))

    def ref_loss(*full):
        outs = case.ref(*full)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return sum(np.sum(np.sin(o)) for o in outs if is_float(o))
    g = sprue.vmap(sprue.grad(loss, argnums=tuple(diff)), in_axes=axes)(*args)
    size = next(np.shape(a)[ax] for a, ax in zip(args, axes) if ax is not None)
    for b in range(size):
        per = [np.take(a, b, axis=ax) if ax is not None else a for a, ax in zip(args, axes)]
        for j, k in enumerate(diff):
            gb = np.take(g[j], b, axis=0)
            ts = [None] * len(per)
            for m in range(np.asarray(per[k]).size):
                e = np.zeros(np.shape(per[k]))
                e.flat[m] = 1.0
                ts[k] = e
                close(gb.flat[m], fd_jvp(ref_loss, per, ts), rtol=1e-5, atol=1e-7)
    # and the gradient of a vmapped function
    vg = sprue.grad(lambda *d: jnp.sum(sprue.vmap(loss, in_axes=axes)(*_replace(args, diff, d))),
                    argnums=tuple(range(len(diff))))(*[args[k] for k in diff])
    for j, k in enumerate(diff):
        ts = [None] * len(args)
        t = randn(*np.shape(args[k]), seed=40 + j)
        ts[k] = t
        want = fd_jvp(lambda *full: sum(ref_loss(*[np.take(a, b, axis=ax) if ax is not None else a
                                                   for a, ax in zip(full, axes)]) for b in range(size)), args, ts)
        close(np.vdot(vg[j], t), want, rtol=1e-5)


def _replace(args, diff, d):
    full = list(args)
    for k, v in zip(diff, d):
        full[k] = v
    return full


def is_float_aval(o):
    return np.issubdtype(np.dtype(o.dtype), np.floating)


# -- dot_general specifics -------------------------------------------------------------------------
def test_dot_general_grad_of_grad_and_hessian():
    B = randn(4, 4, seed=3)
    x = randn(4, seed=4)
    quad = lambda x: x @ (B @ x)  # noqa: E731
    close(sprue.grad(quad)(x), (B + B.T) @ x, rtol=1e-12)
    close(sprue.hessian(quad)(x), B + B.T, rtol=1e-12)
    close(sprue.jacfwd(sprue.grad(quad))(x), B + B.T, rtol=1e-12)
    close(sprue.jacrev(sprue.grad(quad))(x), B + B.T, rtol=1e-12)
    # third order through grad of grad: d/dx of sum(grad(grad(cubic)))
    A = randn(3, 4, seed=5)
    cubic = lambda x: jnp.sum((A @ x) ** 3)  # noqa: E731
    gg = sprue.grad(lambda x: jnp.sum(sprue.grad(cubic)(x) * x))
    # grad cubic = 3 A^T (Ax)^2 ; s(x) = x . (3 A^T (Ax)^2) = 3 sum((Ax)^3); grad s = 9 A^T (Ax)^2
    close(gg(x), 9 * A.T @ (A @ x) ** 2, rtol=1e-10)


def test_dot_general_matrix_grads():
    a, b = randn(3, 4), randn(4, 5, seed=1)
    ga, gb = sprue.grad(lambda a, b: jnp.sum(jnp.sin(a @ b)), argnums=(0, 1))(a, b)
    c = np.cos(a @ b)
    close(ga, c @ b.T, rtol=1e-12)
    close(gb, a.T @ c, rtol=1e-12)


def test_dot_general_preferred_element_type():
    a = randn(3, 4).astype(np.float32)
    b = randn(4, 2, seed=1).astype(np.float32)
    dn = (((1,), (0,)), ((), ()))
    f = lambda a, b: lax.dot_general(a, b, dn, preferred_element_type=np.float64)  # noqa: E731
    out = f(a, b)
    assert out.dtype == np.float64
    ct = randn(3, 2, seed=2)
    _, vjp_fn = sprue.vjp(f, a, b)
    ga, gb = vjp_fn(ct)
    assert ga.dtype == np.float32 and gb.dtype == np.float32
    close(ga, ct @ b.astype(np.float64).T, rtol=1e-5)
    close(gb, a.astype(np.float64).T @ ct, rtol=1e-5)
    ta, tb = randn(3, 4, seed=3).astype(np.float32), randn(4, 2, seed=4).astype(np.float32)
    _, t = sprue.jvp(f, (a, b), (ta, tb))
    assert t.dtype == np.float64
    close(t, ta.astype(np.float64) @ b + a.astype(np.float64) @ tb, rtol=1e-5)
    # integer operands: no derivative, and vmap keeps the preferred type
    ia, ib = np.arange(12).reshape(3, 4), np.arange(8).reshape(4, 2)
    got = sprue.vmap(lambda a: lax.dot_general(a, ib, dn, preferred_element_type=np.float64))(np.stack([ia, ia + 1]))
    assert got.dtype == np.float64
    close(got, np.stack([ia @ ib, (ia + 1) @ ib]).astype(np.float64))


def test_dot_general_jvp_with_one_constant_operand():
    a, b = randn(3, 4), randn(4, 5, seed=1)
    ta = randn(3, 4, seed=2)
    _, t = sprue.jvp(lambda a: a @ b, (a,), (ta,))
    close(t, ta @ b, rtol=1e-12)
    _, t = sprue.jvp(lambda b: a @ b, (b,), (ta.T[:, :1].repeat(5, 1),))
    close(t, a @ ta.T[:, :1].repeat(5, 1), rtol=1e-12)


# -- cost ------------------------------------------------------------------------------------------
def test_cost_dot_general():
    M, K, N = 3, 4, 5
    a, b = randn(M, K), randn(K, N, seed=1)
    assert sprue.cost(lambda a, b: a @ b)(a, b) == 2 * M * N * K
    assert sprue.cost(lambda a, b: jnp.dot(a[0], b[:, 0]))(a, b) == 2 * K
    x, y = randn(2, M, K), randn(2, K, N, seed=1)
    assert sprue.cost(lambda x, y: jnp.einsum("bij,bjk->bik", x, y))(x, y) == 2 * 2 * M * N * K
    assert sprue.cost(lambda a, b: a @ b)(sprue.ShapedArray((M, K), np.float64),
                                          sprue.ShapedArray((K, N), np.float64)) == 2 * M * N * K
    ia, ib = np.arange(12).reshape(3, 4), np.arange(20).reshape(4, 5)
    assert sprue.cost(lambda a, b: a @ b)(ia, ib) == 0
    # the gradient of sum(a @ b) wrt a: the forward matmul, the sum (M*N - 1 adds), one matmul back
    assert sprue.cost(sprue.grad(lambda a, b: jnp.sum(a @ b)))(a, b) == 2 * M * N * K + (M * N - 1) + 2 * M * N * K
    # vmap of a matvec: one dot_general of the whole batch
    assert sprue.cost(sprue.vmap(lambda v: a @ v))(randn(7, K)) == 7 * 2 * M * K


def test_cost_of_data_movement_is_zero():
    x = randn(4, 6)

    def moves(x):
        y = jnp.reshape(x, (6, 4)).T
        y = lax.pad(y, 0.0, [(1, -1, 1), (0, 2, 0)])
        y = jnp.concatenate([y[1:5:2], jnp.flip(y[:2], 0)], axis=0)
        y = lax.dynamic_slice(y, (1, 0), (2, 3))
        y = lax.dynamic_update_slice(y, jnp.ones((1, 2)), (0, 1))
        y = jnp.sort(y, axis=1) + lax.iota(np.float64, 6)[:3]
        return lax.squeeze(jnp.reshape(y, (1, 6)), (0,))
    assert sprue.cost(moves)(x) == 6  # the one add
    assert sprue.cost(lambda x: lax.copy_p.bind(jnp.transpose(x)))(x) == 0
    for p in (lax.reshape_p, lax.transpose_p, lax.squeeze_p, lax.rev_p, lax.concatenate_p, lax.pad_p, lax.slice_p,
              lax.dynamic_slice_p, lax.dynamic_update_slice_p, lax.iota_p, lax.copy_p, lax.sort_p, lax.check_p):
        assert cost_rules[p]([], []) == 0


def test_every_primitive_has_all_four_rules():
    for p in (lax.reshape_p, lax.transpose_p, lax.squeeze_p, lax.rev_p, lax.concatenate_p, lax.pad_p, lax.slice_p,
              lax.dynamic_slice_p, lax.dynamic_update_slice_p, lax.iota_p, lax.copy_p, lax.broadcast_in_dim_p,
              lax.dot_general_p, lax.sort_p, lax.check_p):
        for table in (jvp_rules, vjp_rules, batch_rules, cost_rules):
            assert p in table, (p, table)


# -- iota, check -----------------------------------------------------------------------------------
def test_iota_rules():
    x = randn(5)
    f = lambda x: x * lax.iota(np.float64, 5) + lax.convert_element_type(lax.iota(np.int64, 5), np.float64)  # noqa
    _, t = sprue.jvp(f, (x,), (np.ones(5),))
    close(t, np.arange(5.0))
    close(sprue.grad(lambda x: jnp.sum(f(x)))(x), np.arange(5.0))
    r = np.arange(5.0)
    close(sprue.vmap(f)(np.stack([x, 2 * x])), np.stack([x * r + r, 2 * x * r + r]))
    out, tan = jvp_rules[lax.iota_p]([np.int64(4)], [None], dtype=np.dtype(np.float64), shape=(None,), dimension=0,
                                     sharding=None)
    close(out, np.arange(4.0))
    assert tan.aval.shape == (4,)
    assert vjp_rules[lax.iota_p]([np.ones(4)], [np.int64(4)], [out], dtype=np.dtype(np.float64), shape=(None,),
                                 dimension=0, sharding=None) == [None]


def test_iota_of_a_batched_size_is_not_batchable():
    with pytest.raises(UnsupportedError, match="not batchable: iota to a size that differs between batch elements"):
        sprue.vmap(lambda n: jnp.sum(lax.iota(np.int64, n)))(np.arange(1, 4))


def test_reshape_to_a_batched_size_is_not_batchable():
    with pytest.raises(UnsupportedError, match="not batchable: reshape to a size that differs between batch"):
        batch_rules[lax.reshape_p]([randn(6), np.array([3, 3])], [None, 0], new_sizes=(None, 2), dimensions=None,
                                   sharding=None)
    with pytest.raises(UnsupportedError, match="not batchable: dynamic_slice to a size that differs"):
        batch_rules[lax.dynamic_slice_p]([randn(2, 6), np.int64(0), np.array([3, 3])], [0, None, 0],
                                         slice_sizes=(None,))


def test_check_rules():
    def f(x):
        lax.check(jnp.all(x > 0), "x must be positive")
        return jnp.sum(jnp.log(x))
    x = np.abs(randn(3, 4)) + 0.1
    close(sprue.vmap(f)(x), np.sum(np.log(x), axis=1), rtol=1e-12)
    close(sprue.grad(f)(x[0]), 1 / x[0], rtol=1e-12)
    _, t = sprue.jvp(f, (x[0],), (np.ones(4),))
    close(t, np.sum(1 / x[0]), rtol=1e-12)
    bad = x.copy()
    bad[2, 1] = -1.0
    with pytest.raises(SprueValueError, match="x must be positive"):
        sprue.vmap(f)(bad)
    g = sprue.qjit(sprue.vmap(f))
    close(g(x), np.sum(np.log(x), axis=1), rtol=1e-12)
    with pytest.raises(SprueValueError, match="x must be positive"):
        g(bad)
    # the rules themselves
    assert jvp_rules[lax.check_p]([np.bool_(True)], [None], message="m") == ([], [])
    assert vjp_rules[lax.check_p]([], [np.bool_(True)], [], message="m") == [None]
    assert batch_rules[lax.check_p]([np.array([True, True])], [0], message="m") == ([], [])
    with pytest.raises(SprueValueError, match="^m$"):
        batch_rules[lax.check_p]([np.array([True, False])], [0], message="m")


# -- sort specifics --------------------------------------------------------------------------------
def test_sort_grad_of_grad_and_argsort():
    x = randn(6, seed=11)
    w = np.arange(1.0, 7.0)
    f = lambda x: jnp.sum(jnp.sort(x) ** 3 * w)  # noqa: E731
    s = np.sort(x)
    order = np.argsort(x)
    g = np.zeros(6)
    g[order] = 3 * s ** 2 * w
    close(sprue.grad(f)(x), g, rtol=1e-12)
    h = np.zeros((6, 6))
    h[order, order] = 6 * s * w
    close(sprue.hessian(f)(x), h, rtol=1e-12)
    # argsort is piecewise constant: take_along_axis by it moves the gradient as sort does
    f2 = lambda x: jnp.sum(jnp.take_along_axis(x, jnp.argsort(x), 0) * w)  # noqa: E731
    g2 = np.zeros(6)
    g2[order] = w
    close(sprue.grad(f2)(x), g2, rtol=1e-12)


# -- qjit and dynamic shapes -----------------------------------------------------------------------
def _mixed(x):
    """Most of the primitives above, on an f64[12]."""
    m = jnp.reshape(x, (3, 4))
    y = m.T @ m[:, :2]                                          # (4, 2)
    y = lax.pad(y, 0.25, [(1, -1, 1), (0, 2, 0)])               # (7, 4)
    y = jnp.concatenate([y[1:6:2], jnp.flip(y[:2], 0)], axis=0)  # (5, 4)
    y = lax.dynamic_update_slice(y, jnp.sin(m[:2, :2]), (1, 1))
    y = lax.dynamic_slice(y, (1, 0), (3, 3))
    return jnp.sum(jnp.sort(y, axis=1) * jnp.arange(1.0, 4.0)) + jnp.sum(jnp.squeeze(y[None, :1], 0) ** 2)


def _mixed_np(x):
    m = x.reshape(3, 4)
    y = m.T @ m[:, :2]
    y = np_pad(y, 0.25, [(1, -1, 1), (0, 2, 0)])
    y = np.concatenate([y[1:6:2], np.flip(y[:2], 0)], axis=0)
    y = np_dus(y, np.sin(m[:2, :2]), (1, 1))
    y = np_dynamic_slice(y, (1, 0), (3, 3))
    return np.sum(np.sort(y, axis=1) * np.arange(1.0, 4.0)) + np.sum(y[:1] ** 2)


def test_mixed_grad_eager_and_qjit():
    x = randn(12, seed=21)
    close(_mixed(x), _mixed_np(x), rtol=1e-12)
    eager = sprue.grad(_mixed)(x)
    close(eager, fd_grad(_mixed_np, x), rtol=1e-5, atol=1e-7)
    close(sprue.qjit(sprue.grad(_mixed))(x), eager, rtol=1e-12)
    close(sprue.grad(sprue.qjit(_mixed))(x), eager, rtol=1e-12)
    xs = randn(3, 12, seed=22)
    close(sprue.qjit(sprue.vmap(sprue.grad(_mixed)))(xs), np.stack([sprue.grad(_mixed)(r) for r in xs]), rtol=1e-12)
    t = randn(12, seed=23)
    _, tq = sprue.qjit(lambda x, t: sprue.jvp(_mixed, (x,), (t,)))(x, t)
    close(tq, fd_jvp(_mixed_np, [x], [t]), rtol=1e-5)


def _dyn(x):
    """A function of an f64[n] using the rules under dynamic shapes."""
    y = jnp.sort(x)
    z = jnp.concatenate([y, x[::-1] * 2.0])                       # f64[2n]
    m = jnp.reshape(z, (2, -1))                                   # (2, n)
    w = m @ jnp.flip(m, 1).T                                      # (2, 2)
    return jnp.sum(w * jnp.array([[1.0, 2.0], [3.0, 4.0]])) + jnp.sum(jnp.sin(jnp.transpose(m)) * y[:, None]) \
        + jnp.sum(x[1:] * x[:-1])


def _dyn_np(x):
    y = np.sort(x)
    z = np.concatenate([y, x[::-1] * 2.0])
    m = z.reshape(2, -1)
    w = m @ np.flip(m, 1).T
    return np.sum(w * np.array([[1.0, 2.0], [3.0, 4.0]])) + np.sum(np.sin(m.T) * y[:, None]) + np.sum(x[1:] * x[:-1])


def test_grad_with_dynamic_shapes():
    g = sprue.qjit(sprue.grad(_dyn), abstracted_axes={0: "n"})
    for n in (1, 2, 5, 8):
        x = randn(n, seed=30 + n)
        want = fd_grad(_dyn_np, x)
        close(sprue.grad(_dyn)(x), want, rtol=1e-5, atol=1e-7)
        close(g(x), want, rtol=1e-5, atol=1e-7)
    assert g.compile_count == 1


def test_vmap_over_a_dynamic_batch():
    def f(r, v):
        return jnp.concatenate([r[1:4:2], lax.pad(r[:2], v, [(1, 0, 1)])]) @ jnp.arange(6.0)

    def f_np(r, v):
        return np.concatenate([r[1:4:2], np_pad(r[:2], v, [(1, 0, 1)])]) @ np.arange(6.0)
    g = sprue.qjit(sprue.vmap(f), abstracted_axes=({0: "n"}, {0: "n"}))
    for n in (1, 4):
        rows, vs = randn(n, 5, seed=n), randn(n, seed=n + 1)
        close(g(rows, vs), [f_np(r, v) for r, v in zip(rows, vs)], rtol=1e-12)
    assert g.compile_count == 1


def test_dynamic_slices_under_grad_and_vmap():
    def f(x, i):
        return jnp.sum(lax.dynamic_slice(x, (i,), (3,)) ** 2) + jnp.sum(x[2:] * x[:-2])

    def f_np(x, i):
        return np.sum(np_dynamic_slice(x, (i,), (3,)) ** 2) + np.sum(x[2:] * x[:-2])
    g = sprue.qjit(sprue.grad(f), abstracted_axes=({0: "n"}, None))
    for n, i in ((3, 0), (5, 1), (7, 9), (6, -3)):
        x = randn(n, seed=n)
        want = fd_grad(lambda x: f_np(x, i), x)
        close(sprue.grad(f)(x, np.int64(i)), want, rtol=1e-5, atol=1e-7)
        close(g(x, np.int64(i)), want, rtol=1e-5, atol=1e-7)
    # batched start indices: a gather / scatter per batch
    xs, idx = randn(4, 6), np.array([0, 2, 5, -1])
    vs = sprue.qjit(sprue.vmap(sprue.grad(f)))(xs, idx)
    for x, i, v in zip(xs, idx, vs):
        close(v, fd_grad(lambda x: f_np(x, i), x), rtol=1e-5, atol=1e-7)


def test_dynamic_pad_and_strided_slice_grads():
    """The symbolic paths of the pad and slice rules (windows as dynamic_slice + reshape)."""
    def f(x):
        y = lax.pad(jnp.concatenate([x, jnp.ones(1)]), 0.5, [(-1, 2, 2)])   # f64[3n + 2]
        return jnp.sum(jnp.sin(y) * jnp.cos(jnp.sort(y))) + jnp.sum(x[1::2] ** 2)

    def f_np(x):
        y = np_pad(np.concatenate([x, np.ones(1)]), 0.5, [(-1, 2, 2)])
        return np.sum(np.sin(y) * np.cos(np.sort(y))) + np.sum(x[1::2] ** 2)
    g = sprue.qjit(sprue.grad(f), abstracted_axes={0: "n"})
    for n in (2, 3, 6):
        x = randn(n, seed=50 + n)
        close(g(x), fd_grad(f_np, x), rtol=1e-5, atol=1e-7)


def test_batched_start_indices_over_a_dynamic_batch():
    """dynamic_slice / dynamic_update_slice with per-example starts: a gather / scatter over a batch
    whose size is known only at run time (starts clamped as the primitives clamp them)."""
    def f(x, u, i):
        y = lax.dynamic_update_slice(x, u, (i,))
        return lax.dynamic_slice(y, (i - 1,), (3,)) * 2.0

    def f_np(x, u, i):
        return np_dynamic_slice(np_dus(x, u, (i,)), (i - 1,), (3,)) * 2.0
    g = sprue.qjit(sprue.vmap(f), abstracted_axes=({0: "b"}, {0: "b"}, {0: "b"}))
    for b in (1, 4):
        xs, us, idx = randn(b, 6, seed=b), randn(b, 2, seed=b + 9), np.array([0, 5, -2, 3][:b])
        close(g(xs, us, idx), [f_np(x, u, i) for x, u, i in zip(xs, us, idx)], rtol=1e-12)
    assert g.compile_count == 1
    # and its gradient (vjp of the gather and scatter made by the batch rules)
    h = sprue.qjit(sprue.grad(lambda xs, us, idx: jnp.sum(jnp.sin(sprue.vmap(f)(xs, us, idx))), argnums=(0, 1)))
    xs, us, idx = randn(3, 6, seed=1), randn(3, 2, seed=2), np.array([1, 4, 0])
    gx, gu = h(xs, us, idx)
    for k in range(3):
        ref = lambda x, u: np.sum(np.sin(f_np(x, u, idx[k])))  # noqa: E731
        close(gx[k], fd_grad(lambda x: ref(x, us[k]), xs[k]), rtol=1e-5, atol=1e-7)
        close(gu[k], fd_grad(lambda u: ref(xs[k], u), us[k]), rtol=1e-5, atol=1e-7)


def test_mixed_second_derivatives():
    """jvp of vjp of every rule in _mixed (hessian = jacfwd(jacrev)) against finite differences of
    the gradient (itself checked against finite differences of numpy above)."""
    x = randn(12, seed=24)
    grad = sprue.grad(_mixed)
    fd = np.stack([(grad(x + EPS * e) - grad(x - EPS * e)) / (2 * EPS) for e in np.eye(12)], 1)
    h = sprue.hessian(_mixed)(x)
    close(h, fd, rtol=1e-5, atol=1e-6)
    close(h, h.T, rtol=1e-10, atol=1e-12)
    close(sprue.jacrev(grad)(x), h, rtol=1e-10, atol=1e-12)
    close(sprue.qjit(sprue.hessian(_mixed))(x), h, rtol=1e-10, atol=1e-12)
