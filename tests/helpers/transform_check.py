"""Checks of sprue's transformations (jvp, vjp, vmap, grad-of-grad, qjit(grad)) on the cases of
numpy_cases, shared by tests/frontend/interp/test_transform_numpy_cases.py and usable from a REPL
(in the repository's root) to reproduce a failure:

    from tests.helpers import transform_check as tc
    tc.check_jvp(tc.BY_NAME["sin[f64[7]]"])

Each check either returns normally (passed), raises AssertionError (wrong result), raises
`Excluded(reason)` (the check does not apply to the case: integer outputs, non-finite values,
kinks/jumps everywhere, no array argument), or lets sprue's exception through (a crash).

Conventions:
- FD is computed on the *numpy reference* (case.ref), so the derivative is checked against numpy's
  own function, independently of sprue's primal evaluation.
- Tangents are random normals scaled by max(1, |x|) elementwise ("eps scaled to the input
  magnitude"); only float64 inputs get tangents in the FD check (float32 ones would drown in
  rounding), all float inputs do in the dot-product identity.
- Points where the reference is not smooth are detected numerically per output element: central
  differences with h and h/2 disagree (a jump), or forward and backward differences disagree (a
  kink). Such elements are left out of the comparison (counted, and reported through a warning);
  a case where every float64 output element is such a point is excluded with a reason.
"""
from __future__ import annotations

import warnings
import zlib

import numpy as np

import sprue
import sprue.numpy as jnp
from sprue.api.traced import trace_function
from sprue.base.pytree import tree_flatten, tree_unflatten
from sprue.trace.tracing import eval_jaxpr
from tests.helpers.numpy_cases import CASES, assert_matches

BY_NAME = {c.name: c for c in CASES}

H = 1e-6               # FD step (relative: tangents are scaled by max(1, |x|))
FD_RTOL, FD_ATOL = 1e-5, 1e-6


class Excluded(Exception):
    """The check does not apply to this case (the message says why)."""


# -- selection ----------------------------------------------------------------------------------
def _is_f64(a) -> bool:
    return isinstance(a, (np.ndarray, np.floating)) and np.asarray(a).dtype == np.float64


def _is_float(a) -> bool:
    return isinstance(a, (np.ndarray, np.generic)) and np.asarray(a).dtype.kind == "f"


def base_name(case) -> str:
    return case.name.split("[")[0]


def float64_cases(max_per_name: int | None = None) -> list:
    """Cases with at least one float64 array argument (at most max_per_name per function)."""
    out, count = [], {}
    for c in CASES:
        if not any(_is_f64(a) for a in c.args):
            continue
        b = base_name(c)
        if max_per_name is not None and count.get(b, 0) >= max_per_name:
            continue
        count[b] = count.get(b, 0) + 1
        out.append(c)
    return out


def rng_for(case, salt: str = "") -> np.random.Generator:
    return np.random.default_rng(zlib.crc32((case.name + salt).encode()))


# -- helpers ------------------------------------------------------------------------------------
def numpy_ref(case, *args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return case.ref(*(args or case.args))


def leaves_of(x) -> list:
    return tree_flatten(x)[0]


def _float_leaf_dtype(x):
    d = getattr(x, "dtype", None)
    return np.dtype(d) if d is not None and np.dtype(d).kind == "f" else None


FINITE_FILL = np.array([0.75, -1.25, 1.75, -0.25, 2.25])


def finite_args(case) -> tuple:
    """The case's arguments with any nan/inf of a float argument replaced by finite values
    (0.75, -1.25, 1.75, ... in turn): derivatives are checked at finite points only ("special"
    cases keep their other values: exact halves for round, zeros for abs and sign, ties, ...)."""
    out = []
    for a in case.args:
        if _is_float(a) and not np.all(np.isfinite(a)):
            a_ = np.array(a)
            bad = ~np.isfinite(a_)
            a_[bad] = np.resize(FINITE_FILL, int(bad.sum())).astype(a_.dtype)
            a = a_
        out.append(a)
    return tuple(out)


class _At:
    """The case at other arguments (the checks read .name, .fn, .ref, .args)."""

    def __init__(self, case, args):
        self.name, self.fn, self.ref, self.args, self.eager = case.name, case.fn, case.ref, tuple(args), case.eager


def _finite_outputs(ref_leaves):
    for r in ref_leaves:
        r = np.asarray(r)
        if r.dtype.kind == "f" and not np.all(np.isfinite(r)):
            raise Excluded("the numpy reference output has non-finite values")


def _tangents(case, rng, which=_is_f64):
    """One tangent per argument: random (scaled by max(1, |x|)) for the selected float args, zeros
    of the argument's dtype for the other float args, float0 zeros (JAX's) for integer/boolean args."""
    ts = []
    for a in case.args:
        a_ = np.asarray(a)
        if which(a):
            t = rng.standard_normal(a_.shape) * np.maximum(1.0, np.abs(a_))
            ts.append(np.asarray(t, a_.dtype))
        elif _is_float(a):
            ts.append(np.zeros_like(a_))
        else:
            ts.append(np.zeros(a_.shape, sprue.float0))
    return ts


def _moved(case, ts, s):
    return [np.asarray(np.asarray(a) + s * t, np.asarray(a).dtype) if _is_float(a) else a
            for a, t in zip(case.args, ts)]


# -- 1. jvp vs central finite differences -------------------------------------------------------
def check_jvp(case, verbose=False):
    """sprue.jvp's tangent equals central FD of the numpy reference (float64 outputs), and its
    primal output equals numpy's. Returns (number of compared elements, number left out)."""
    case = _At(case, finite_args(case))
    ref = numpy_ref(case)
    ref_leaves = leaves_of(ref)
    _finite_outputs(ref_leaves)
    f64_out = [i for i, r in enumerate(ref_leaves) if np.asarray(r).dtype == np.float64]
    rng = rng_for(case, "jvp")
    ts = _tangents(case, rng)
    if not f64_out:
        kinds = sorted({np.asarray(r).dtype.name for r in ref_leaves})
        if not any(k.startswith("float") for k in kinds):
            # still: jvp runs, and the tangent of an integer/boolean output is zero
            primal, tangent = sprue.jvp(case.fn, tuple(case.args), tuple(ts))
            assert_matches(primal, ref, where=f"{case.name}: jvp primal output")
            for t in leaves_of(tangent):
                assert not np.any(np.asarray(t)), f"{case.name}: nonzero tangent {t!r} of an integer/boolean output"
        raise Excluded(f"no float64 output (outputs are {'/'.join(kinds) or 'empty'}): nothing to differentiate"
                       f" by FD" + (" (checked: jvp runs, with zero tangents)" if not any(
                           k.startswith("float") for k in kinds) else ""))
    if all(not np.any(t) for t in ts):
        raise Excluded("the float64 inputs are empty")
    primal, tangent = sprue.jvp(case.fn, tuple(case.args), tuple(ts))
    assert_matches(primal, ref, where=f"{case.name}: jvp primal output")
    t_leaves = leaves_of(tangent)
    assert len(t_leaves) == len(ref_leaves), f"{case.name}: jvp tangent structure {tangent!r}"

    def at(s):
        return leaves_of(numpy_ref(case, *_moved(case, ts, s)))

    fp, fm, fp2, fm2 = at(H), at(-H), at(H / 2), at(-H / 2)
    compared = excluded = 0
    for i in f64_out:
        f0 = np.asarray(ref_leaves[i], np.float64)
        t = np.asarray(t_leaves[i])
        assert t.shape == f0.shape, f"{case.name}: output {i}: tangent shape {t.shape} != output shape {f0.shape}"
        assert t.dtype == f0.dtype, f"{case.name}: output {i}: tangent dtype {t.dtype} != output dtype {f0.dtype}"
        a, b, a2, b2 = (np.asarray(v[i], np.float64) for v in (fp, fm, fp2, fm2))
        dc = (a - b) / (2 * H)
        dc2 = (a2 - b2) / H
        df, db = (a - f0) / H, (f0 - b) / H
        scale = max(1.0, float(np.max(np.abs(dc), initial=0.0, where=np.isfinite(dc))))
        tol = FD_ATOL * scale + FD_RTOL * np.abs(dc)
        ok = np.isfinite(dc) & np.isfinite(dc2) & np.isfinite(df) & np.isfinite(db)
        with np.errstate(invalid="ignore"):
            ok &= np.abs(dc - dc2) <= 0.25 * tol                      # no jump within h
            ok &= np.abs(df - db) <= 1e-3 * np.maximum(scale, np.abs(dc))  # no kink within h
        compared += int(ok.sum())
        excluded += int((~ok).sum())
        if ok.any():
            bad = ok & ~(np.abs(t - dc) <= tol)
            if bad.any():
                k = np.argwhere(bad)[0] if bad.ndim else ()
                k = tuple(int(j) for j in k)
                raise AssertionError(
                    f"{case.name}: output {i}: jvp tangent differs from central FD at {int(bad.sum())} of"
                    f" {int(ok.sum())} smooth points; first at {k}: jvp {t[k]!r} vs FD {dc[k]!r}"
                    f" (primal {f0[k]!r})")
    if compared + excluded == 0:
        raise Excluded("the float64 outputs are empty")
    if compared == 0:
        raise Excluded(f"every float64 output element ({excluded}) is at a kink or jump of the reference"
                       f" (FD with h and h/2, or forward and backward FD, disagree): piecewise function")
    return compared, excluded


# -- 2. vjp: <ct, J t> == <vjp(ct), t> ---------------------------------------------------------
def check_vjp(case):
    """The dot-product identity between sprue.jvp and sprue.vjp (exact up to rounding), with
    random ct for every float output and random t for every float input."""
    case = _At(case, finite_args(case))
    ref = numpy_ref(case)
    ref_leaves = leaves_of(ref)
    _finite_outputs(ref_leaves)
    if any(np.asarray(r).dtype.kind == "f" for r in ref_leaves) and \
            not any(np.asarray(r).dtype.kind == "f" and np.asarray(r).size for r in ref_leaves):
        raise Excluded("the float outputs are empty")
    if not any(np.asarray(r).dtype.kind == "f" for r in ref_leaves):
        kinds = sorted({np.asarray(r).dtype.name for r in ref_leaves})
        # still: vjp runs, and pulls zero cotangents back to the float arguments
        out, vjp_fn = sprue.vjp(case.fn, *case.args)
        assert_matches(out, ref, where=f"{case.name}: vjp primal output")
        o_leaves, o_tree = tree_flatten(out)
        grads = vjp_fn(tree_unflatten(o_tree, [np.zeros_like(np.asarray(o)) for o in o_leaves]))
        for k, (a, g) in enumerate(zip(case.args, grads)):
            if _is_float(a):
                g = np.asarray(g)
                assert g.shape == np.shape(a) and g.dtype == np.asarray(a).dtype and not np.any(g), \
                    f"{case.name}: cotangent of argument {k} is {g!r}"
        raise Excluded(f"no float output (outputs are {'/'.join(kinds) or 'empty'}): no cotangent to pull back"
                       f" (checked: vjp runs, with zero cotangents)")
    rng = rng_for(case, "vjp")
    ts = _tangents(case, rng, _is_float)
    _, tangent = sprue.jvp(case.fn, tuple(case.args), tuple(ts))
    if not all(np.all(np.isfinite(t)) for t in leaves_of(tangent) if _float_leaf_dtype(t) is not None):
        raise Excluded("the jvp tangent is not finite (a point where the derivative is infinite or undefined,"
                       " e.g. cbrt or sqrt at 0; test_jvp checks it against FD)")
    out, vjp_fn = sprue.vjp(case.fn, *case.args)
    assert_matches(out, ref, where=f"{case.name}: vjp primal output")
    o_leaves, o_tree = tree_flatten(out)
    cts = []
    for o in o_leaves:
        o_ = np.asarray(o)
        cts.append(np.asarray(rng.standard_normal(o_.shape), o_.dtype) if o_.dtype.kind == "f" else np.zeros_like(o_))
    grads = vjp_fn(tree_unflatten(o_tree, cts))
    assert isinstance(grads, tuple) and len(grads) == len(case.args), f"{case.name}: vjp_fn returned {grads!r}"
    low = False
    lhs, mag = 0.0, 0.0
    for c, jt in zip(cts, leaves_of(tangent)):
        if c.dtype.kind == "f":
            jt = np.asarray(jt)
            assert jt.shape == c.shape and jt.dtype == c.dtype, \
                f"{case.name}: jvp tangent {jt.dtype}{jt.shape} vs output {c.dtype}{c.shape}"
            low |= c.dtype != np.float64
            lhs += float(np.sum(c.astype(np.float64) * jt))
            mag += float(np.sum(np.abs(c.astype(np.float64) * jt)))
    rhs, mag2 = 0.0, 0.0
    for k, (a, g, t) in enumerate(zip(case.args, grads, ts)):
        if _is_float(a):
            g, a_ = np.asarray(g), np.asarray(a)
            assert g.shape == a_.shape and g.dtype == a_.dtype, \
                f"{case.name}: cotangent of argument {k} is {g.dtype}{g.shape}, the argument is {a_.dtype}{a_.shape}"
            low |= a_.dtype != np.float64
            rhs += float(np.sum(g.astype(np.float64) * t))
            mag2 += float(np.sum(np.abs(g.astype(np.float64) * t)))
    tol = (1e-4 if low else 1e-11) * max(mag, mag2, 1e-300)
    assert np.isfinite(lhs) and np.isfinite(rhs) and abs(lhs - rhs) <= tol, \
        f"{case.name}: <ct, J t> = {lhs!r} but <vjp(ct), t> = {rhs!r} (|diff| {abs(lhs - rhs):.3g} > {tol:.3g})"
    # with several float arguments: grad of <ct, f> w.r.t. each one alone (the others inactive)
    # equals that argument's entry of vjp(ct)
    floats = [k for k, a in enumerate(case.args) if _is_float(a)]
    if len(floats) > 1:
        def weighted(*a):
            total = None
            for leaf, c in zip(leaves_of(case.fn(*a)), cts):
                if c.dtype.kind == "f":
                    s = jnp.sum(leaf * c).astype(np.float64)
                    total = s if total is None else total + s
            return total
        for k in floats:
            gk = np.asarray(sprue.grad(weighted, argnums=k)(*case.args))
            want = np.asarray(grads[k])
            assert gk.shape == want.shape and gk.dtype == want.dtype, \
                f"{case.name}: grad w.r.t. argument {k} alone is {gk.dtype}{gk.shape}, vjp's {want.dtype}{want.shape}"
            scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
            np.testing.assert_allclose(gk, want, rtol=0, atol=(1e-4 if low else 1e-11) * scale,
                                       err_msg=f"{case.name}: grad w.r.t. argument {k} alone vs vjp")


# -- 3. vmap vs a loop ----------------------------------------------------------------------------
def _draws(case, n=3):
    """n input draws: the case's own arguments, then per-argument random permutations of their
    elements (same dtypes, shapes and domains)."""
    rng = rng_for(case, "vmap")
    draws = [list(case.args)]
    for _ in range(n - 1):
        d = []
        for a in case.args:
            a_ = np.asarray(a)
            d.append(rng.permutation(a_.ravel()).reshape(a_.shape) if a_.ndim else a_)
        draws.append(d)
    return draws


def check_vmap(case, unbatched_rest=False, last_axis=False):
    """sprue.vmap(fn) on 3 stacked draws (or, unbatched_rest, only the first argument batched;
    last_axis: draws stacked along each argument's last axis, in_axes=out_axes=-1) equals fn
    evaluated per example (its jaxpr evaluated, to 1e-12) and numpy per example (shape, dtype
    exactly; values as test_numpy_cases)."""
    if not case.args:
        raise Excluded("no array argument to map over")
    if unbatched_rest and len(case.args) < 2:
        raise Excluded("a single argument")
    draws = _draws(case)
    if unbatched_rest:
        draws = [[d[0], *draws[0][1:]] for d in draws]
        in_axes = (0,) + (None,) * (len(case.args) - 1)
        stacked = [np.stack([np.asarray(d[0]) for d in draws]), *draws[0][1:]]
    else:
        in_axes = 0
        stacked = [np.stack([np.asarray(d[k]) for d in draws]) for k in range(len(case.args))]
    if last_axis:
        stacked = [np.stack([np.asarray(d[k]) for d in draws], axis=-1) for k in range(len(case.args))]
        got = sprue.vmap(case.fn, in_axes=-1, out_axes=-1)(*stacked)
        got = tree_unflatten(tree_flatten(got)[1], [np.moveaxis(np.asarray(g), -1, 0) for g in leaves_of(got)])
    else:
        got = sprue.vmap(case.fn, in_axes=in_axes)(*stacked)
    traced = trace_function(case.fn, tuple(case.args), {})
    cj = traced.closed_jaxpr
    g_leaves, g_tree = tree_flatten(got)
    for j, d in enumerate(draws):
        want = numpy_ref(case, *d)
        w_leaves, w_tree = tree_flatten(want)
        assert g_tree == w_tree, f"{case.name}: vmap output structure {g_tree} != numpy's {w_tree}"
        loop = eval_jaxpr(cj.jaxpr, cj.consts, *d)
        for k, (g, w, l) in enumerate(zip(g_leaves, w_leaves, loop)):
            g = np.asarray(g)
            assert g.ndim >= 1 and g.shape[0] == len(draws), \
                f"{case.name}: vmap output {k} has shape {g.shape}, expected a leading batch axis of {len(draws)}"
            where = f"{case.name}: vmap output {k}, example {j}"
            assert_matches(g[j], np.asarray(w), where=where + " vs numpy")
            tight = 1e-12 if np.asarray(l).dtype == np.float64 else None   # float32: assert_matches' 2e-6
            assert_matches(g[j], np.asarray(l), rtol=tight, where=where + " vs the unbatched jaxpr")


# -- 4. second derivatives: Hessian-vector products -----------------------------------------------
def check_hvp(case, mode):
    """H v of f_sum = sum(fn(*args)) w.r.t. every argument, computed by `mode`, equals central FD
    of sprue.grad(f_sum). mode: "rev-rev" (grad of <grad f, v>), "fwd-rev" (jvp of grad),
    "rev-fwd" (grad of jvp), "hessian" (sprue.hessian, contracted with v in numpy)."""
    args = tuple(case.args)
    n = len(args)
    nums = tuple(range(n))

    f_sum = scalarized(case)
    g = sprue.grad(f_sum, argnums=nums)
    rng = rng_for(case, "hvp")
    v = tuple(np.asarray(t) for t in _tangents(case, rng))
    if mode == "rev-rev":
        hv = sprue.grad(lambda *a: sum(jnp.sum(gi * vi) for gi, vi in zip(g(*a), v)), argnums=nums)(*args)
    elif mode == "fwd-rev":
        hv = sprue.jvp(g, args, v)[1]
    elif mode == "rev-fwd":
        hv = sprue.grad(lambda *a: sprue.jvp(f_sum, a, v)[1], argnums=nums)(*args)
    elif mode == "hessian":
        hess = sprue.hessian(f_sum, argnums=nums)(*args)
        hv = tuple(sum(np.tensordot(np.asarray(hess[i][j]), v[j], axes=np.ndim(v[j])) for j in range(n))
                   for i in range(n))
    else:
        raise ValueError(mode)
    h = 1e-5
    gp = g(*[a + h * t for a, t in zip(args, v)])
    gm = g(*[a - h * t for a, t in zip(args, v)])
    for i in range(n):
        fd = (np.asarray(gp[i]) - np.asarray(gm[i])) / (2 * h)
        got = np.asarray(hv[i])
        assert got.shape == fd.shape and got.dtype == np.asarray(args[i]).dtype, \
            f"{case.name}: H v ({mode}) for argument {i} is {got.dtype}{got.shape}"
        scale = max(1.0, float(np.max(np.abs(fd), initial=0.0)))
        np.testing.assert_allclose(got, fd, rtol=1e-5, atol=1e-6 * scale,
                                   err_msg=f"{case.name}: H v ({mode}) vs FD of sprue.grad, argument {i}")


# -- 5. compiled gradients ------------------------------------------------------------------------
def scalarized(case):
    """sum over the float outputs of case.fn, as one float64 scalar."""
    def f(*a):
        total = None
        for leaf in leaves_of(case.fn(*a)):
            if _float_leaf_dtype(leaf) is not None:
                s = jnp.sum(leaf).astype(np.float64)
                total = s if total is None else total + s
        return total
    return f


def check_compiled_grad(case):
    nums = tuple(k for k, a in enumerate(case.args) if _is_f64(a))
    f = scalarized(case)
    eager = sprue.grad(f, argnums=nums)(*case.args)
    compiled = sprue.qjit(sprue.grad(f, argnums=nums))(*case.args)
    assert len(compiled) == len(eager)
    for k, (c, e) in enumerate(zip(compiled, eager)):
        assert_matches(np.asarray(c), np.asarray(e), rtol=1e-10,
                       where=f"{case.name}: qjit(grad) vs eager grad, argument {nums[k]}")


# -- 6. compositions: jacobians (vmap of jvp / vjp) and per-example gradients (vmap of grad) -----
def float_outputs(case):
    """case.fn restricted to its float outputs (a tuple), for jacrev/jacfwd."""
    def f(*a):
        return tuple(leaf for leaf in leaves_of(case.fn(*a)) if _float_leaf_dtype(leaf) is not None)
    return f


def check_jacobians(case):
    """sprue.jacfwd (vmap of jvp) and sprue.jacrev (vmap of vjp) w.r.t. every float64 argument
    agree, have shape out.shape + in.shape, and jacfwd contracted with a tangent is sprue.jvp's."""
    case = _At(case, finite_args(case))
    ref_leaves = leaves_of(numpy_ref(case))
    _finite_outputs(ref_leaves)
    outs = [np.asarray(r) for r in ref_leaves if np.asarray(r).dtype.kind == "f"]
    if not outs:
        raise Excluded("no float output")
    if not all(o.size for o in outs):
        raise Excluded("an empty float output")
    nums = tuple(k for k, a in enumerate(case.args) if _is_f64(a))
    f = float_outputs(case)
    jf = sprue.jacfwd(f, argnums=nums)(*case.args)
    jr = sprue.jacrev(f, argnums=nums)(*case.args)
    rng = rng_for(case, "jac")
    ts = _tangents(case, rng)
    _, tangent = sprue.jvp(f, tuple(case.args), tuple(ts))
    assert len(jf) == len(jr) == len(outs) == len(tangent)
    for i, o in enumerate(outs):
        jt = np.zeros(o.shape)
        for k, n in enumerate(nums):
            a = np.asarray(case.args[n])
            bf, br = np.asarray(jf[i][k]), np.asarray(jr[i][k])
            where = f"{case.name}: d output {i} / d argument {n}"
            assert bf.shape == o.shape + a.shape, f"{where}: jacfwd block shape {bf.shape}"
            assert br.shape == o.shape + a.shape, f"{where}: jacrev block shape {br.shape}"
            if not (np.all(np.isfinite(bf)) and np.all(np.isfinite(br))):
                raise Excluded("the Jacobian is not finite (a point where the derivative is infinite or"
                               " undefined; test_jvp checks it against FD)")
            scale = max(1.0, float(np.max(np.abs(bf), initial=0.0)))
            tol = 1e-4 * scale if o.dtype != np.float64 else 1e-10 * scale
            np.testing.assert_allclose(bf, br, rtol=0, atol=tol, err_msg=f"{where}: jacfwd vs jacrev")
            jt = jt + np.tensordot(bf, ts[n], axes=a.ndim)
        t = np.asarray(tangent[i], np.float64)
        scale = max(1.0, float(np.max(np.abs(t), initial=0.0)))
        tol = 1e-4 * scale if o.dtype != np.float64 else 1e-10 * scale
        np.testing.assert_allclose(jt, t, rtol=0, atol=tol,
                                   err_msg=f"{case.name}: jacfwd . t vs jvp tangent, output {i}")


def _grad_draws(case):
    """(argnums of the float64 arguments, 3 finite draws, the draws stacked) for the batched-gradient
    checks; Excluded when there is nothing to compare."""
    nums = tuple(k for k, a in enumerate(case.args) if _is_f64(a))
    ref_leaves = leaves_of(numpy_ref(case))
    if not any(np.asarray(r).dtype.kind == "f" for r in ref_leaves):
        raise Excluded("no float output")
    draws = [finite_args(_At(case, d)) for d in _draws(case)]
    for d in draws:
        if not all(np.all(np.isfinite(r)) for r in leaves_of(numpy_ref(case, *d)) if np.asarray(r).dtype.kind == "f"):
            raise Excluded("the numpy reference output has non-finite values")
    stacked = [np.stack([np.asarray(d[k]) for d in draws]) for k in range(len(case.args))]
    return nums, draws, stacked


def _same_as_per_draw(case, what: str, batched, g, draws, nums):
    """Each draw's slice of the batched gradients equals grad at that draw."""
    for j, d in enumerate(draws):
        for k, (b, o) in enumerate(zip(batched, g(*d))):
            b, o = np.asarray(b), np.asarray(o)
            assert b.shape[1:] == o.shape and b.dtype == o.dtype, \
                f"{case.name}: {what} for argument {nums[k]} is {b.dtype}{b.shape}, grad {o.dtype}{o.shape}"
            if not np.all(np.isfinite(o)):
                raise Excluded("the gradient is not finite at this point")
            scale = max(1.0, float(np.max(np.abs(o), initial=0.0)))
            np.testing.assert_allclose(b[j], o, rtol=0, atol=1e-12 * scale,
                                       err_msg=f"{case.name}: {what} vs grad, example {j}, argument {nums[k]}")


def check_per_example_grad(case):
    """vmap(grad(sum of the float outputs)) over 3 stacked draws equals grad per draw."""
    nums, draws, stacked = _grad_draws(case)
    g = sprue.grad(scalarized(case), argnums=nums)
    _same_as_per_draw(case, "vmap(grad)", sprue.vmap(g)(*stacked), g, draws, nums)


def check_grad_of_vmap(case):
    """grad of sum(vmap(f)) over 3 stacked draws (reverse mode through batched primitives) equals
    the per-draw gradients stacked."""
    nums, draws, stacked = _grad_draws(case)
    f = scalarized(case)
    batched = sprue.grad(lambda *a: jnp.sum(sprue.vmap(f)(*a)), argnums=nums)(*stacked)
    _same_as_per_draw(case, "grad of vmap", batched, sprue.grad(f, argnums=nums), draws, nums)


def check_compiled_jvp_vmap(case):
    """qjit(jvp) and qjit(vmap) equal their eager versions."""
    case = _At(case, finite_args(case))
    ts = _tangents(case, rng_for(case, "cjvp"), _is_float)
    f = lambda *a: sprue.jvp(case.fn, a, tuple(ts))      # noqa: E731
    eager, compiled = f(*case.args), sprue.qjit(f)(*case.args)
    for k, (c, e) in enumerate(zip(leaves_of(compiled), leaves_of(eager))):
        assert_matches(np.asarray(c), np.asarray(e), rtol=1e-10, where=f"{case.name}: qjit(jvp) vs eager jvp, leaf {k}")
    stacked = [np.stack([np.asarray(d[k]) for d in _draws(case)]) for k in range(len(case.args))]
    eager, compiled = sprue.vmap(case.fn)(*stacked), sprue.qjit(sprue.vmap(case.fn))(*stacked)
    for k, (c, e) in enumerate(zip(leaves_of(compiled), leaves_of(eager))):
        assert_matches(np.asarray(c), np.asarray(e), rtol=1e-10, where=f"{case.name}: qjit(vmap) vs eager vmap, leaf {k}")
