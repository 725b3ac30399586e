"""Checks of one transformation rule at a time against a numpy reference, for the tests of the rules
of sprue.lax's primitives (tests/frontend/interp/test_transform_rules_*.py) and of the
transformations' API (test_transforms.py):

- check_jvp: sprue.jvp's primal output equals the reference, its tangent output central finite
  differences of the reference (float64);
- check_vjp: the dot-product identity <vjp(ct), t> == <ct, jvp(t)>, and the cotangents against
  finite differences of the reference;
- check_vmap: sprue.vmap against a Python loop over the reference.

Integer arguments (indices, sizes) are held fixed: only float arguments get tangents. A function
may return one array or a tuple of them; integer outputs are not differentiated.
"""
from __future__ import annotations

import numpy as np

import sprue

EPS = 1e-6   # the finite-difference step


def randn(*shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def is_float(x) -> bool:
    return np.issubdtype(np.asarray(x).dtype, np.floating)


def close(a, b, rtol=1e-6, atol=1e-8) -> None:
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol, atol=atol)


def fd_jvp(ref, args, tangents):
    """Central finite difference of the numpy reference along the tangents (None: held fixed); a
    list for a reference with several outputs."""
    plus = [a + EPS * t if t is not None else a for a, t in zip(args, tangents)]
    minus = [a - EPS * t if t is not None else a for a, t in zip(args, tangents)]
    hi, lo = ref(*plus), ref(*minus)
    if isinstance(hi, (tuple, list)):
        return [(np.asarray(h, np.float64) - np.asarray(m, np.float64)) / (2 * EPS) for h, m in zip(hi, lo)]
    return (np.asarray(hi, np.float64) - np.asarray(lo, np.float64)) / (2 * EPS)


def fd_grad(ref_scalar, x, eps=EPS) -> np.ndarray:
    """The gradient of a scalar function of one float64 array by central differences, coordinate by
    coordinate."""
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (float(ref_scalar(x + e)) - float(ref_scalar(x - e))) / (2 * eps)
    return g


def _of_float_args(f, args):
    """f as a function of its float arguments only (the others fixed at `args`), and their positions."""
    diff = [k for k, a in enumerate(args) if is_float(a)]

    def g(*d):
        full = list(args)
        for k, v in zip(diff, d):
            full[k] = v
        return f(*full)
    return g, diff


def _at_positions(n, diff, values) -> list:
    """A list of n, `values` at the positions `diff`, None elsewhere."""
    full = [None] * n
    for k, v in zip(diff, values):
        full[k] = v
    return full


def check_jvp(f, ref, args, seed=1, fd_atol=1e-8):
    """sprue.jvp of f along random tangents: the primal output as the reference's (rtol 1e-12), the
    tangent output as the reference's finite differences (rtol 1e-6, atol fd_atol)."""
    g, diff = _of_float_args(f, args)
    ts = [randn(*np.shape(args[k]), seed=seed + k) for k in diff]
    out, tout = sprue.jvp(g, tuple(args[k] for k in diff), tuple(ts))
    want = ref(*args)
    fd = fd_jvp(ref, args, _at_positions(len(args), diff, ts))
    if isinstance(want, (tuple, list)):
        for o, w, t, d in zip(out, want, tout, fd):
            close(o, w, rtol=1e-12)
            if is_float(w):
                close(t, d, atol=fd_atol)
                assert np.asarray(t).dtype == np.asarray(w).dtype
    else:
        close(out, want, rtol=1e-12)
        close(tout, fd, atol=fd_atol)
        assert np.shape(tout) == np.shape(want) and np.asarray(tout).dtype == np.asarray(want).dtype


def check_vjp(f, ref, args, seed=7, fd_rtol=1e-6):
    """sprue.vjp of f at random cotangents: the cotangents' shapes and dtypes are the primals', the
    dot-product identity against sprue.jvp holds (rtol 1e-10), and <ct, fd(t)> agrees with it
    (rtol fd_rtol, atol 1e-7)."""
    g, diff = _of_float_args(f, args)
    prim = [args[k] for k in diff]
    out, vjp_fn = sprue.vjp(g, *prim)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    cts = [randn(*np.shape(o), seed=seed + j) if is_float(o) else np.zeros(np.shape(o), np.asarray(o).dtype)
           for j, o in enumerate(outs)]
    grads = vjp_fn(type(out)(cts) if isinstance(out, (tuple, list)) else cts[0])
    for gr, p in zip(grads, prim):
        assert np.shape(gr) == np.shape(p) and np.asarray(gr).dtype == np.asarray(p).dtype
    ts = [randn(*np.shape(p), seed=seed + 10 + k) for k, p in enumerate(prim)]
    _, tout = sprue.jvp(g, tuple(prim), tuple(ts))
    touts = list(tout) if isinstance(tout, (tuple, list)) else [tout]
    lhs = sum(np.vdot(gr, t) for gr, t in zip(grads, ts))
    close(lhs, sum(np.vdot(c, t) for c, t, o in zip(cts, touts, outs) if is_float(o)), rtol=1e-10)
    fd = fd_jvp(ref, args, _at_positions(len(args), diff, ts))
    fds = fd if isinstance(fd, list) else [fd]
    close(lhs, sum(np.vdot(c, d) for c, d, o in zip(cts, fds, outs) if is_float(o)), rtol=fd_rtol, atol=1e-7)


def check_vmap(f, ref, args, in_axes):
    """sprue.vmap(f, in_axes) equals the reference applied to each slice along in_axes, stacked."""
    got = sprue.vmap(f, in_axes=in_axes)(*args)
    size = next(np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
    per = [ref(*[a if ax is None else np.take(a, b, axis=ax) for a, ax in zip(args, in_axes)]) for b in range(size)]
    if isinstance(per[0], (tuple, list)):
        for j in range(len(per[0])):
            want = np.stack([p[j] for p in per])
            assert np.shape(got[j]) == want.shape
            close(got[j], want, rtol=1e-12)
    else:
        want = np.stack(per)
        assert np.shape(got) == want.shape
        close(got, want, rtol=1e-12)
