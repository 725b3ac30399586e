"""Products: dot, matmul, vdot, inner, outer, tensordot, einsum — all as lax.dot_general (with
transpose, reshape, broadcast and diagonal/reduce_sum around it), dtypes promoted as numpy does."""
from __future__ import annotations

import builtins
from collections import Counter

import numpy as np

from sprue import lax
from sprue.base import dtypes
from sprue.lax.dot import contract as contract_product
from sprue.numpy import _dims as _d
from sprue.numpy._avals import aval, describe, type_error, value_error
from sprue.numpy._creation import astype
from sprue.numpy._promote import as_result, broadcast_to, normalize_axis, operands, promote, reshape, static_int
from sprue.numpy._reductions import lax_reduce
from sprue.numpy._reductions import sum as _sum
from sprue.numpy._shape import diagonal
from sprue.numpy._ufuncs import _funcs as F

__all__ = ["dot", "matmul", "vdot", "inner", "outer", "tensordot", "einsum", "vecdot", "kron", "convolve", "correlate"]


def _dg(a, b, contract, batch=((), ()), permutation=None):
    """dot_general of two operands of one dtype (the result's: no preferred_element_type needed),
    its result transposed by `permutation`, as lax.dot.contract plans it: a broadcast multiply where
    nothing is summed, the operands swapped where that gives the order asked for."""
    return contract_product(a, b, (tuple(map(tuple, contract)), tuple(map(tuple, batch))), permutation)


def _contract(fname, a, b, pairs, message: str):
    """a and b with each contracted pair of axes (i of a, j of b) of one size: provably equal
    sizes need nothing, provably different ones raise `message`, and sizes only run time can
    compare get a check and are both cut to the smaller (a clamped gather: never out of bounds)."""
    for i, j in pairs:
        p, q = aval(a).shape[i], aval(b).shape[j]
        if _d.dims_equal(p, q):
            continue
        r = _d.unify_equal(fname, [p, q], message)
        a, b = _d.fit_axis(a, i, r), _d.fit_axis(b, j, r)
    return a, b


def _arrays(fname, a, b):
    a, b = promote(fname, a, b, shape=False)
    return a, b, aval(a), aval(b)


def dot(a, b, out=None):
    """numpy.dot: multiply for scalars, else a sum over a's last axis and b's second-to-last."""
    if out is not None:
        raise type_error("dot", "out= is not supported (sprue arrays are immutable)")
    a, b, av, bv = _arrays("dot", a, b)
    if av.ndim == 0 or bv.ndim == 0:
        return F["multiply"](a, b)
    kb = 0 if bv.ndim == 1 else bv.ndim - 2
    a, b = _contract("dot", a, b, [(av.ndim - 1, kb)], f"shapes {describe(a, b)} not aligned: {av.shape[-1]}"
                                                       f" (dim {av.ndim - 1}) != {bv.shape[kb]} (dim {kb})")
    return as_result(_dg(a, b, ((av.ndim - 1,), (kb,))))


def matmul(x1, x2, /):
    """numpy.matmul: 1-D operands are promoted to matrices and back, batch dims broadcast."""
    a, b, av, bv = _arrays("matmul", x1, x2)
    if av.ndim == 0 or bv.ndim == 0:
        raise value_error("matmul", f"operands must be arrays of rank >= 1, got {describe(a, b)}")
    na, nb = av.ndim, bv.ndim
    kb = 0 if nb == 1 else nb - 2
    a, b = _contract("matmul", a, b, [(na - 1, kb)], f"contracted dimensions differ: {describe(a, b)}"
                                                     f" ({av.shape[-1]} is not {bv.shape[kb]})")
    av, bv = aval(a), aval(b)
    if na == 1 or nb == 1:
        return as_result(_dg(a, b, ((na - 1,), (kb,))))
    ba, bb = av.shape[:-2], bv.shape[:-2]
    if len(ba) == len(bb) and builtins.all(map(_d.dims_equal, ba, bb)):
        nbat = len(ba)
        return as_result(_dg(a, b, ((na - 1,), (nb - 2,)), (range(nbat), range(nbat))))
    if not bb:  # b is a matrix: a's batch dims are free dims of the product
        return as_result(_dg(a, b, ((na - 1,), (0,))))
    if not ba:  # a is a matrix: (m, batch..., n) -> (batch..., m, n)
        k = len(bb)
        return as_result(_dg(a, b, ((1,), (nb - 2,)), permutation=tuple(range(1, k + 1)) + (0, k + 1)))
    nd = builtins.max(len(ba), len(bb))
    pa, pb = (1,) * (nd - len(ba)) + ba, (1,) * (nd - len(bb)) + bb
    batch = []
    for i, (p, q) in enumerate(zip(pa, pb)):
        if isinstance(p, int) and isinstance(q, int):
            if p != q and 1 not in (p, q):
                raise value_error("matmul", f"batch dimensions of {describe(a, b)} cannot be broadcast together")
            batch.append(builtins.max(p, q))
        else:
            batch.append(_d.broadcast_dim("matmul", [p, q], (a, b)))
    batch = tuple(batch)
    a = broadcast_to(a, batch + av.shape[-2:])
    b = broadcast_to(b, batch + bv.shape[-2:])
    return as_result(_dg(a, b, ((nd + 1,), (nd,)), (range(nd), range(nd))))


def _conj(x):
    return lax.conj(x) if dtypes.is_complex(aval(x).dtype) else x


def vdot(a, b, /):
    a, b, av, bv = _arrays("vdot", a, b)
    a, b = reshape(a, (av.size,)), reshape(b, (bv.size,))
    a, b = _contract("vdot", a, b, [(0, 0)], f"operands {describe(a, b)} have different sizes")
    return as_result(_dg(_conj(a), b, ((0,), (0,))))   # numpy's vdot conjugates a


def vecdot(x1, x2, /, *, axis=-1):
    a, b = promote("vecdot", x1, x2, shape=False)
    return _sum(F["multiply"](_conj(a), b), axis=axis)   # numpy's vecdot conjugates x1


def inner(a, b, /):
    a, b, av, bv = _arrays("inner", a, b)
    if av.ndim == 0 or bv.ndim == 0:
        return F["multiply"](a, b)
    a, b = _contract("inner", a, b, [(av.ndim - 1, bv.ndim - 1)], f"last dimensions of {describe(a, b)} differ")
    return as_result(_dg(a, b, ((av.ndim - 1,), (bv.ndim - 1,))))


def outer(a, b, out=None):
    if out is not None:
        raise type_error("outer", "out= is not supported (sprue arrays are immutable)")
    a, b = operands("outer", a, b)
    na, nb = aval(a).size, aval(b).size
    return F["multiply"](reshape(a, (na, 1)), reshape(b, (1, nb)))


def kron(a, b):
    a, b = operands("kron", a, b)
    sa, sb = aval(a).shape, aval(b).shape
    nd = builtins.max(len(sa), len(sb))
    sa, sb = (1,) * (nd - len(sa)) + sa, (1,) * (nd - len(sb)) + sb
    ea = reshape(a, tuple(v for d in sa for v in (d, 1)))
    eb = reshape(b, tuple(v for d in sb for v in (1, d)))
    return reshape(F["multiply"](ea, eb), tuple(p * q for p, q in zip(sa, sb)))


def tensordot(a, b, axes=2):
    a, b, av, bv = _arrays("tensordot", a, b)
    if isinstance(axes, (list, tuple)):
        if len(axes) != 2:
            raise value_error("tensordot", "axes must be an int or a pair of axis sequences")
        xa, xb = [list(x) if isinstance(x, (list, tuple)) else [x] for x in axes]
        if len(xa) != len(xb):
            raise value_error("tensordot", f"axes {axes} must have the same number of axes for both operands")
        xa = [normalize_axis("tensordot", x, av.ndim, a) for x in xa]
        xb = [normalize_axis("tensordot", x, bv.ndim, b) for x in xb]
    else:
        n = static_int("tensordot", axes, "axes")
        if n < 0 or n > av.ndim or n > bv.ndim:
            raise value_error("tensordot", f"axes={n} is out of range for {describe(a, b)}")
        xa, xb = list(range(av.ndim - n, av.ndim)), list(range(n))
    for i, j in zip(xa, xb):
        a, b = _contract("tensordot", a, b, [(i, j)], f"shape mismatch for sum: axis {i} of {describe(a)} has size"
                                                      f" {av.shape[i]}, axis {j} of {describe(b)} has size {bv.shape[j]}")
    return as_result(_dg(a, b, (xa, xb)))


# -- einsum ---------------------------------------------------------------------------------------
def _parse_spec(fname, spec: str, ndim: int, ell_count: list):
    """Labels of one operand: letters, and ('...', k) for the k-th ellipsis dim from the right."""
    if "..." in spec:
        left, right = spec.split("...", 1)
        if "..." in right or "." in left + right:
            raise value_error(fname, f"invalid subscript {spec!r}: at most one ellipsis '...'")
        k = ndim - len(left) - len(right)
        if k < 0:
            raise value_error(fname, f"subscript {spec!r} has more labels than the operand's {ndim} dimensions")
        ell_count.append(k)
        labels = list(left) + [("...", k - 1 - i) for i in range(k)] + list(right)
    else:
        labels = list(spec)
        if len(labels) != ndim:
            raise value_error(fname, f"subscript {spec!r} has {len(labels)} labels for an operand of rank {ndim}")
    for l in labels:
        if isinstance(l, str) and not l.isalpha():
            raise value_error(fname, f"invalid subscript character {l!r} in {spec!r}")
    return labels


def _sum_labels(x, labels, drop):
    axes = tuple(i for i, l in enumerate(labels) if l in drop)
    if not axes:
        return x, labels
    return lax_reduce("sum", x, axes), [l for l in labels if l not in drop]


def _take_diagonals(x, labels):
    """Repeated labels within one operand ('ii->i', 'ii->'): take the diagonal."""
    while True:
        seen = {}
        rep = None
        for i, l in enumerate(labels):
            if l in seen:
                rep = (seen[l], i)
                break
            seen[l] = i
        if rep is None:
            return x, labels
        i, j = rep
        x = diagonal(x, 0, i, j)
        l = labels[i]
        labels = [m for k, m in enumerate(labels) if k not in (i, j)] + [l]


def _output_labels(fname, subscripts: str, specs: list, n_ell: int) -> list:
    """The output's labels: as given after '->' (the ellipsis dims where '...' stands), else numpy's
    implicit output, the ellipsis dims then the labels used once, sorted."""
    _, arrow, out_spec = subscripts.replace(" ", "").partition("->")
    if arrow:
        if "..." in out_spec:
            left, right = out_spec.split("...", 1)
            out_labels = list(left) + [("...", n_ell - 1 - i) for i in range(n_ell)] + list(right)
        else:
            if n_ell:
                raise value_error(fname, "output has more dimensions than subscripts given in einstein sum, but no"
                                         " '...' ellipsis provided to broadcast the extra dimensions")
            out_labels = list(out_spec)
        for l in out_labels:
            if isinstance(l, str) and not l.isalpha():
                raise value_error(fname, f"invalid output subscript character {l!r}")
    else:
        counts = Counter(l for s in specs for l in s if isinstance(l, str))
        out_labels = [("...", n_ell - 1 - i) for i in range(n_ell)] + sorted(l for l, c in counts.items() if c == 1)
    if len(set(out_labels)) != len(out_labels):
        raise value_error(fname, f"output subscript {out_spec!r} repeats a label")
    all_labels = {l for s in specs for l in s}
    for l in out_labels:
        if l not in all_labels:
            raise value_error(fname, f"output label {l!r} does not appear in the inputs of {subscripts!r}")
    return out_labels


def _label_sizes(fname, specs: list, xs: list) -> dict:
    """The size of each label, with numpy's broadcasting of size-1 dimensions."""
    sizes: dict = {}
    for s, x in zip(specs, xs):
        for l, d in zip(s, aval(x).shape):
            if not (isinstance(d, int) and isinstance(sizes.get(l, 1), int)):  # run-time sizes: checked
                sizes[l] = _d.broadcast_dim(fname, [sizes.get(l, 1), d], xs)
                continue
            if sizes.get(l, 1) != 1 and d not in (1, sizes[l]):
                raise value_error(fname, f"label {l if isinstance(l, str) else '...'!r} has sizes {sizes[l]} and {d}"
                                         f" in {describe(*xs)}")
            sizes[l] = d if sizes.get(l, 1) == 1 else sizes[l]
    return sizes


def _drop_broadcast_dims(x, labels: list, sizes: dict):
    """x without its size-1 dims whose label another operand has at a larger size (JAX's einsum
    filter_singleton_dims): x is constant along them, so the label is left to that operand, and a
    contracted one is summed there before the product ('ij,jk' with i x 1 and 3 x 4: b's rows are
    summed, then a broadcast product) instead of broadcasting x and multiplying it in full."""
    shape = aval(x).shape
    drop = [i for i, (l, d) in enumerate(zip(labels, shape)) if isinstance(d, int) and d == 1
            and isinstance(sizes[l], int) and sizes[l] != 1 and labels.count(l) == 1]
    if not drop:
        return x, labels
    return lax.squeeze(x, drop), [l for i, l in enumerate(labels) if i not in drop]


def _next_pair(ops: list, out_labels: list, sizes: dict) -> tuple[int, int]:
    """The two operands to contract next: opt_einsum's greedy choice (the path JAX's einsum takes
    by default), the pair whose product most shrinks the total size held, pairs that share a label
    before outer products, then the cheaper product. 'ij,jk,k->i' is two matrix-vector products,
    never the (i, k) matrix. Left to right where a size is known only at run time."""
    if len(ops) == 2 or not builtins.all(isinstance(d, int) for d in sizes.values()):
        return 0, 1

    def size(labels):
        n = 1
        for l in labels:
            n *= sizes[l]
        return n
    best = None
    for i in range(len(ops)):
        for j in range(i + 1, len(ops)):
            li, lj = ops[i][1], ops[j][1]
            needed = set(out_labels).union(*[set(t) for k, (_, t) in enumerate(ops) if k not in (i, j)])
            union = list(dict.fromkeys(li + lj))
            kept = [l for l in union if l in needed]
            key = (not set(li) & set(lj), size(kept) - size(li) - size(lj), size(union))
            if best is None or key < best[0]:
                best = (key, (i, j))
    return best[1]


def einsum(subscripts, *operands_, out=None, optimize=False, precision=None, preferred_element_type=None):
    """numpy.einsum: diagonals of repeated labels, sums of private labels, then pairwise
    contractions in opt_einsum's greedy order (`optimize` is accepted and the greedy path always
    taken, as jax.numpy.einsum takes one by default), the last one formed in the output's order."""
    fname = "einsum"
    if out is not None:
        raise type_error(fname, "out= is not supported (sprue arrays are immutable)")
    if not isinstance(subscripts, str):
        raise type_error(fname, "the subscripts must be a string (the interleaved operand/sublist form is not"
                                " supported)")
    if not operands_:
        raise value_error(fname, "needs at least one operand")
    xs = promote(fname, *operands_, shape=False)
    in_specs = subscripts.replace(" ", "").partition("->")[0].split(",")
    if len(in_specs) != len(xs):
        raise value_error(fname, f"{len(in_specs)} subscripts for {len(xs)} operands in {subscripts!r}")
    ell_counts: list = []
    specs = [_parse_spec(fname, s, aval(x).ndim, ell_counts) for s, x in zip(in_specs, xs)]
    n_ell = builtins.max(ell_counts, default=0)
    out_labels = _output_labels(fname, subscripts, specs, n_ell)
    sizes = _label_sizes(fname, specs, xs)
    xs, specs = map(list, zip(*[_drop_broadcast_dims(x, s, sizes) for x, s in zip(xs, specs)]))
    xs = [broadcast_to(x, tuple(sizes[l] for l in s)) for s, x in zip(specs, xs)]
    ops = []
    for k, (x, s) in enumerate(zip(xs, specs)):
        x, s = _take_diagonals(x, s)
        elsewhere = set(out_labels).union(*[set(t) for j, t in enumerate(specs) if j != k])
        x, s = _sum_labels(x, s, {l for l in s if l not in elsewhere})
        ops.append((x, s))
    while len(ops) > 1:
        i, j = _next_pair(ops, out_labels, sizes)
        (acc, acc_l), (x, xl) = ops[i], ops[j]
        rest = [o for k, o in enumerate(ops) if k not in (i, j)]
        needed = set(out_labels).union(*[set(t) for _, t in rest])
        shared = [l for l in acc_l if l in xl]
        batch = [l for l in shared if l in needed]
        contract = [l for l in shared if l not in needed]
        labels = batch + [l for l in acc_l if l not in shared] + [l for l in xl if l not in shared]
        # the last product is asked for in the output's order (no transpose after it where swapping
        # its operands gives that order, none at all for a broadcast product)
        perm = tuple(labels.index(l) for l in out_labels) if not rest and set(labels) == set(out_labels) else None
        acc = _dg(acc, x, ([acc_l.index(l) for l in contract], [xl.index(l) for l in contract]),
                  ([acc_l.index(l) for l in batch], [xl.index(l) for l in batch]), perm)
        ops = rest + [(acc, labels if perm is None else list(out_labels))]
    acc, acc_l = ops[0]
    acc, acc_l = _sum_labels(acc, acc_l, {l for l in acc_l if l not in out_labels})
    perm = tuple(acc_l.index(l) for l in out_labels)
    if perm != tuple(range(len(perm))):
        acc = lax.transpose(acc, perm)
    if preferred_element_type is not None:
        acc = astype(acc, preferred_element_type)
    return as_result(acc)


# -- convolve, correlate: one conv_general_dilated, as jax.numpy's _conv ------------------------------
def _conv1d(fname, a, v, mode):
    """jax.numpy's _conv: both operands promoted to a float type (numpy's own keeps integers; JAX
    computes convolutions in floats), the longer one as the signal, one 1-D conv_general_dilated."""
    a, v = promote(fname, a, v, shape=False)
    if aval(a).ndim != 1 or aval(v).ndim != 1:
        raise value_error(fname, f"only 1-D inputs are supported, got {describe(a, v)}")
    n, m = aval(a).shape[0], aval(v).shape[0]
    if not (isinstance(n, int) and isinstance(m, int)):
        raise value_error(fname, f"the lengths of {describe(a, v)} must be known at trace time")
    if n == 0 or m == 0:
        raise value_error(fname, f"inputs cannot be empty, got {describe(a, v)}")
    if not dtypes.is_float(aval(a).dtype):
        a, v = astype(a, np.float64), astype(v, np.float64)
    if mode not in ("full", "same", "valid"):
        raise value_error(fname, f"mode must be 'full', 'same' or 'valid', got {mode!r}")
    reverse = False
    if n < m:
        a, v, n, m, reverse = v, a, m, n, fname == "correlate"
    if fname == "convolve":
        v = lax.rev(v, (0,))
    padding = {"valid": (0, 0), "same": (m // 2, m - m // 2 - 1), "full": (m - 1, m - 1)}[mode]
    out = lax.conv_general_dilated(reshape(a, (1, 1, n)), reshape(v, (1, 1, m)), (1,), (padding,))
    out = reshape(out, (aval(out).shape[2],))
    return as_result(lax.rev(out, (0,)) if reverse else out)


def convolve(a, v, mode="full"):
    """numpy.convolve (as jax.numpy's: computed in a float type)."""
    return _conv1d("convolve", a, v, mode)


def correlate(a, v, mode="valid"):
    """numpy.correlate (as jax.numpy's: computed in a float type)."""
    return _conv1d("correlate", a, v, mode)
