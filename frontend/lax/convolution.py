"""conv_general_dilated: XLA's convolution (JAX's lax.conv_general_dilated), with window strides,
(low, high) padding, lhs dilation (a transposed convolution), rhs dilation (atrous), feature
groups and batch groups, in any layout its ConvDimensionNumbers name (lhs_spec = (batch, feature,
spatial...), rhs_spec = (out feature, in feature, spatial...), out_spec = (batch, feature,
spatial...)). Its shape rule and numpy reference, the function that binds it, its jvp, vjp,
batching and cost rules, as JAX's jax/_src/lax/convolution.py defines them; `conv_as_matmul`
spells it in pads, strided slices and one dot_general (im2col), which is what
sprue.lowering.rules_reductions compiles.

Sizes must be static here: the windows are unrolled into one slice per kernel offset."""
from __future__ import annotations

import math
import operator

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueTypeError, SprueValueError, at
from sprue.base.source_info import user_frame_summary
from sprue.interp.ad_util import aval_of, batch_rules, cost_rules, is_zero, jvp_rules, vjp_rules, zero_of
from sprue.interp.cost import numel
from sprue.ir.core import ShapedArray
from sprue.lax._rules import define, same_dtypes
from sprue.lax.dimension_numbers import ConvDimensionNumbers
from sprue.lax.dot import contract
from sprue.lax.elementwise import add, convert_element_type
from sprue.lax.indexing import concatenate, pad, slice
from sprue.lax.structural import reshape, rev, transpose

__all__ = ["ConvDimensionNumbers", "conv_general_dilated", "conv_general_dilated_p", "conv_as_matmul",
           "conv_dimension_numbers", "padtype_to_pads"]


# -- the parameters, as JAX's conv_general_dilated takes them ---------------------------------------
def _permutations(specs):
    """('NCHW', 'OIHW', 'NCHW')-style strings -> the three specs (JAX's conv_general_permutations):
    spatial dims ordered as they appear in the rhs spec."""
    pairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for i, (spec, (a, b)) in enumerate(zip(specs, pairs)):
        if spec.count(a) != 1 or spec.count(b) != 1 or len(set(spec)) != len(spec):
            raise SprueTypeError(f"conv_general_dilated: dimension_numbers[{i}] = {spec!r} must contain '{a}' and"
                                 f" '{b}' exactly once and no repeated letter")
    spatial = [set(s) - set(p) for s, p in zip(specs, pairs)]
    if not spatial[0] == spatial[1] == spatial[2]:
        raise SprueTypeError(f"conv_general_dilated: dimension_numbers {tuple(specs)} must name the same spatial"
                             f" letters in all three specs")
    rhs = specs[1]

    def perm(spec, pair):
        rest = sorted((i for i, c in enumerate(spec) if c not in pair), key=lambda i: rhs.index(spec[i]))
        return (spec.index(pair[0]), spec.index(pair[1]), *rest)
    return ConvDimensionNumbers(*(perm(s, p) for s, p in zip(specs, pairs)))


def conv_dimension_numbers(ndim: int, dimension_numbers) -> ConvDimensionNumbers:
    """None (NCHW, OIHW, NCHW), three layout strings, or a ConvDimensionNumbers."""
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    if dimension_numbers is None:
        iota = tuple(range(ndim))
        return ConvDimensionNumbers(iota, iota, iota)
    if (not isinstance(dimension_numbers, (tuple, list)) or len(dimension_numbers) != 3
            or not all(isinstance(s, str) for s in dimension_numbers)):
        raise SprueTypeError(f"conv_general_dilated: dimension_numbers must be None, a ConvDimensionNumbers or"
                             f" three layout strings such as ('NHWC', 'HWIO', 'NHWC'), got {dimension_numbers!r}")
    if any(len(s) != ndim for s in dimension_numbers):
        raise SprueTypeError(f"conv_general_dilated: each of dimension_numbers {tuple(dimension_numbers)} needs one"
                             f" letter per dimension of the operands (rank {ndim})")
    return _permutations(tuple(dimension_numbers))


def padtype_to_pads(in_shape, window_shape, strides, padding: str):
    """'VALID', 'SAME' or 'SAME_LOWER' -> (low, high) pairs (JAX's lax.padtype_to_pads: 'SAME' gives
    ceil(n / stride) outputs, the odd element of padding at the end; 'SAME_LOWER' at the start)."""
    mode = padding.upper()
    if mode == "VALID":
        return tuple((0, 0) for _ in in_shape)
    if mode not in ("SAME", "SAME_LOWER"):
        raise SprueValueError(f"conv_general_dilated: padding must be 'SAME', 'SAME_LOWER', 'VALID' or (low, high)"
                              f" pairs, got {padding!r}")
    out = []
    for n, w, s in zip(in_shape, window_shape, strides):
        total = max((-(-n // s) - 1) * s + w - n, 0)
        lo = total // 2 if mode == "SAME" else total - total // 2
        out.append((lo, total - lo))
    return tuple(out)


def _dilate(n: int, d: int) -> int:
    return 0 if n == 0 else 1 + d * (n - 1)


def _static(name, lhs: ShapedArray, rhs: ShapedArray, dimension_numbers, groups: int = 1):
    """The spatial sizes (and, with feature or batch groups, every size) must be static: the windows
    are unrolled at compile time. The batch and feature sizes may be run-time ones: they are a
    matmul's rows and contraction (a CNN with a run-time batch; its kernel's gradient contracts
    over the batch)."""
    ls, rs, _ = dimension_numbers
    for a, spec in ((lhs, ls), (rhs, rs)):
        dims = range(a.ndim) if groups > 1 else spec[2:]
        if not all(isinstance(a.shape[d], int) for d in dims):
            what = "size" if groups > 1 else "spatial size"
            raise SprueValueError(f"{name}: operand {a.str_short()} has a {what} known only at run time; sprue's"
                                  f" convolution needs static spatial sizes (its windows are unrolled at compile"
                                  f" time){', and static sizes with feature or batch groups' if groups > 1 else ''}")


# -- the primitive ---------------------------------------------------------------------------------
def _conv_rule(lhs: ShapedArray, rhs: ShapedArray, *, window_strides, padding, lhs_dilation, rhs_dilation,
               dimension_numbers, feature_group_count, batch_group_count, precision=None,
               preferred_element_type=None, out_sharding=None):
    name = "conv_general_dilated"
    same_dtypes(name, lhs, rhs)
    if lhs.ndim != rhs.ndim or lhs.ndim < 2:
        raise SprueValueError(f"{name}: lhs {lhs.str_short()} and rhs {rhs.str_short()} must have one rank, at least 2")
    _static(name, lhs, rhs, dimension_numbers, feature_group_count * batch_group_count)
    ls, rs, os_ = dimension_numbers
    nsp = lhs.ndim - 2
    for what, v in (("window_strides", window_strides), ("padding", padding), ("lhs_dilation", lhs_dilation),
                    ("rhs_dilation", rhs_dilation)):
        if len(v) != nsp:
            raise SprueValueError(f"{name}: {what} {tuple(v)} needs one entry per spatial dimension ({nsp})")
    if any(s < 1 for s in (*window_strides, *lhs_dilation, *rhs_dilation)):
        raise SprueValueError(f"{name}: strides and dilations must be positive, got window_strides="
                              f"{tuple(window_strides)} lhs_dilation={tuple(lhs_dilation)} rhs_dilation={tuple(rhs_dilation)}")
    fg, bg = feature_group_count, batch_group_count
    if fg < 1 or bg < 1 or (fg > 1 and bg > 1):
        raise SprueValueError(f"{name}: feature_group_count={fg} and batch_group_count={bg} must be positive, at"
                              f" most one of them > 1")
    n, c, o, i = lhs.shape[ls[0]], lhs.shape[ls[1]], rhs.shape[rs[0]], rhs.shape[rs[1]]
    if (fg > 1 and c % fg) or (c // fg if fg > 1 else c) != i:   # (sizes are static where fg or bg > 1)
        raise SprueValueError(f"{name}: lhs {lhs.str_short()} has {c} features; with feature_group_count={fg} the"
                              f" rhs {rhs.str_short()} needs {c}/{fg} input features, it has {i}")
    if fg * bg > 1 and (o % fg or o % bg or n % bg):
        raise SprueValueError(f"{name}: the rhs's {o} output features must be a multiple of feature_group_count="
                              f"{fg} and batch_group_count={bg}, and the lhs's batch {n} of batch_group_count")
    spatial = []
    for k in range(nsp):
        size = _dilate(lhs.shape[ls[k + 2]], lhs_dilation[k]) + padding[k][0] + padding[k][1]
        window = _dilate(rhs.shape[rs[k + 2]], rhs_dilation[k])
        if size < 0:
            raise SprueValueError(f"{name}: padding {tuple(padding)} removes more than lhs {lhs.str_short()} has")
        spatial.append(max((size - window) // window_strides[k] + 1, 0))
    canonical = (n // bg if bg > 1 else n, o, *spatial)
    shape = [0] * lhs.ndim
    for dim, size in zip(os_, canonical):
        shape[dim] = size
    out_dtype = dtypes.canonicalize(preferred_element_type) if preferred_element_type is not None else lhs.dtype
    return ShapedArray(tuple(shape), out_dtype)


def _windows_numpy(x, w_spatial, strides, rhs_dilation, out_spatial):
    """x (n, c, *padded spatial) -> for each kernel offset, the strided window (n, c, *out spatial)."""
    for offset in np.ndindex(*w_spatial):
        index = tuple(np.s_[o * d: o * d + (m - 1) * s + 1: s]
                      for o, d, s, m in zip(offset, rhs_dilation, strides, out_spatial))
        yield offset, x[(Ellipsis, *index)]


def _conv_impl(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
               feature_group_count, batch_group_count, precision=None, preferred_element_type=None,
               out_sharding=None):
    """The numpy reference: canonical layout, the lhs dilated and padded, one einsum per kernel offset."""
    out_aval = _conv_rule(ShapedArray(lhs.shape, lhs.dtype), ShapedArray(rhs.shape, rhs.dtype),
                          window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
                          rhs_dilation=rhs_dilation, dimension_numbers=dimension_numbers,
                          feature_group_count=feature_group_count, batch_group_count=batch_group_count,
                          preferred_element_type=preferred_element_type)
    ls, rs, os_ = dimension_numbers
    calc = np.result_type(out_aval.dtype, np.float32 if lhs.dtype == bool else lhs.dtype)
    x, w = np.transpose(lhs, ls).astype(calc), np.transpose(rhs, rs).astype(calc)
    dilated = np.zeros(x.shape[:2] + tuple(_dilate(s, d) for s, d in zip(x.shape[2:], lhs_dilation)), calc)
    dilated[(Ellipsis, *(np.s_[::d] for d in lhs_dilation))] = x
    lo = [max(p, 0) for p, _ in padding]
    hi = [max(p, 0) for _, p in padding]
    x = np.pad(dilated, [(0, 0), (0, 0), *zip(lo, hi)])
    x = x[(Ellipsis, *(np.s_[-min(p, 0): x.shape[k + 2] + min(q, 0)] for k, (p, q) in enumerate(padding)))]
    fg, bg = feature_group_count, batch_group_count
    n, c = x.shape[:2]
    o = w.shape[0]
    out_spatial = [out_aval.shape[d] for d in os_[2:]]
    # groups: lhs (g, n/g or n, c/g or c), rhs (g, o/g, i), out (n', g, o/g)
    xg = x.reshape(bg, n // bg, fg, c // fg, *x.shape[2:])
    wg = w.reshape(bg * fg, o // (bg * fg), *w.shape[1:])
    out = np.zeros((n // bg, bg * fg, o // (bg * fg), *out_spatial), calc)
    for offset, win in _windows_numpy(xg, w.shape[2:], window_strides, rhs_dilation, out_spatial):
        win = win.reshape(bg, n // bg, fg, c // fg, *out_spatial)
        taps = wg[(Ellipsis, *offset)]                   # (g, o/g, i)
        if bg > 1:
            out += np.einsum("gnc...,goc->ngo...", win[:, :, 0], taps)
        else:
            out += np.einsum("ngc...,goc->ngo...", win[0], taps)
    out = out.reshape(n // bg, o, *out_spatial)
    return np.transpose(out, np.argsort(os_)).astype(out_aval.dtype)


conv_general_dilated_p = define("conv_general_dilated", _conv_rule, _conv_impl)


def _pairs(padding):
    try:
        return tuple((operator.index(lo), operator.index(hi)) for lo, hi in padding)
    except (TypeError, ValueError) as e:
        raise SprueValueError(f"conv_general_dilated: padding must be 'SAME', 'SAME_LOWER', 'VALID' or a sequence"
                              f" of (low, high) integer pairs, got {padding!r}") from e


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
                         dimension_numbers=None, feature_group_count: int = 1, batch_group_count: int = 1,
                         precision=None, preferred_element_type=None, out_sharding=None):
    """JAX's lax.conv_general_dilated (padding 'SAME'/'SAME_LOWER'/'VALID' or (low, high) pairs;
    dimension_numbers None, ('NCHW', 'OIHW', 'NCHW')-style strings or a ConvDimensionNumbers)."""
    la, ra = aval_of(lhs), aval_of(rhs)
    dn = conv_dimension_numbers(la.ndim, dimension_numbers)
    nsp = la.ndim - 2
    lhs_dilation = (1,) * nsp if lhs_dilation is None else tuple(int(d) for d in lhs_dilation)
    rhs_dilation = (1,) * nsp if rhs_dilation is None else tuple(int(d) for d in rhs_dilation)
    window_strides = tuple(int(s) for s in window_strides)
    if isinstance(padding, str):
        if any(d != 1 for d in lhs_dilation):
            raise SprueValueError("conv_general_dilated: string padding with lhs_dilation (a transposed convolution)"
                                  " is not defined; give (low, high) pairs")
        try:
            _static("conv_general_dilated", la, ra, dn, int(feature_group_count) * int(batch_group_count))
        except SprueValueError as e:   # raised before bind, which would name the user's line
            raise SprueValueError(f"{e}{at(user_frame_summary())}") from None
        window = [_dilate(ra.shape[d], r) for d, r in zip(dn.rhs_spec[2:], rhs_dilation)]
        padding = padtype_to_pads([la.shape[d] for d in dn.lhs_spec[2:]], window, window_strides, padding)
    params = dict(window_strides=window_strides, padding=_pairs(padding), lhs_dilation=lhs_dilation,
                  rhs_dilation=rhs_dilation, dimension_numbers=dn, feature_group_count=int(feature_group_count),
                  batch_group_count=int(batch_group_count),
                  preferred_element_type=None if preferred_element_type is None else np.dtype(preferred_element_type))
    if not all(isinstance(d, int) for d in (*la.shape, *ra.shape)):
        # A run-time batch or feature size: the im2col decomposition traced here, into the caller's
        # program (pads, strided slices, dot_generals over the run-time rows), whose primitives
        # carry the run-time size and their own derivatives; the lowering's im2col re-traces with
        # static avals only.
        try:
            _conv_rule(la, ra, **params)   # (the primitive's checks, at the user's line)
        except SprueValueError as e:
            raise SprueValueError(f"{e}{at(user_frame_summary())}") from None
        return conv_as_matmul(lhs, rhs, **params)
    return conv_general_dilated_p.bind(lhs, rhs, precision=None, out_sharding=None, **params)


# -- im2col: the convolution as pads, strided slices and one dot_general ------------------------------
def _contract(patches, w, fg, bg, preferred_element_type):
    """patches (n, *out, K, c) against the kernel (K, i, g, o/g) -> (n / bg, *out, o): one
    dot_general over (K, c), the feature or batch group a batch dimension of it (lax.dot.contract:
    a broadcast multiply where K * c is 1)."""
    n, *out_spatial, ntaps, c = aval_of(patches).shape
    nsp = len(out_spatial)
    _, i, g, og = aval_of(w).shape
    if g == 1:
        return contract(patches, reshape(w, (ntaps, i, og)), (((nsp + 1, nsp + 2), (0, 1)), ((), ())),
                        preferred_element_type=preferred_element_type)
    if fg > 1:
        patches = reshape(patches, (n, *out_spatial, ntaps, fg, c // fg))
        dims = (((nsp + 1, nsp + 3), (0, 1)), ((nsp + 2,), (2,)))
    else:
        patches = reshape(patches, (bg, n // bg, *out_spatial, ntaps, c))
        dims = (((nsp + 2, nsp + 3), (0, 1)), ((0,), (2,)))
    res = contract(patches, w, dims, preferred_element_type=preferred_element_type)   # (g, n', *out, o/g)
    return reshape(transpose(res, (*range(1, nsp + 2), 0, nsp + 2)), (n // bg, *out_spatial, g * og))


def conv_as_matmul(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                   feature_group_count, batch_group_count, preferred_element_type=None, **unused):
    """The lhs channels-last (n, *spatial, c), dilated and padded by one lax.pad, contracted with
    the kernel as (K, c, o) by dot_generals (matmuls (rows, c) by (c, o), the matmul kernels' form;
    the feature or batch group a batch dimension of them), one per window piece, whichever pieces
    are fewer:
    - per kernel tap (K <= P output positions): the strided slice of every output's tap,
      (n, *out, c), times the tap's (c, o), summed over the taps (fusion_sums.py accumulates such
      sums in one buffer: no (n, *out, K, c) patches in memory);
    - per output position (P < K: the kernel's gradient, whose "kernel" is the forward's output
      cotangent): the position's window (n, *kernel, c) times the kernel (K * c, o), the P results
      stacked."""
    ls, rs, os_ = dimension_numbers
    la, ra = aval_of(lhs), aval_of(rhs)
    out_aval = _conv_rule(la, ra, window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
                          rhs_dilation=rhs_dilation, dimension_numbers=dimension_numbers,
                          feature_group_count=feature_group_count, batch_group_count=batch_group_count,
                          preferred_element_type=preferred_element_type)
    nsp = la.ndim - 2
    sp = tuple(range(1, nsp + 1))
    x = transpose(lhs, (ls[0], *ls[2:], ls[1]))
    x = pad(x, np.zeros((), la.dtype)[()],
            [(0, 0, 0), *((lo, hi, d - 1) for (lo, hi), d in zip(padding, lhs_dilation)), (0, 0, 0)])
    n, c = aval_of(x).shape[0], aval_of(x).shape[-1]
    o, i, *kernel = (ra.shape[d] for d in rs)
    out_spatial = [out_aval.shape[d] for d in os_[2:]]
    ntaps, npos = math.prod(kernel), math.prod(out_spatial)
    fg, bg = feature_group_count, batch_group_count
    g = fg * bg
    w = reshape(transpose(rhs, (*rs[2:], rs[1], rs[0])), (ntaps, i, g, o // g))
    res = None
    if ntaps <= npos:
        for k, offset in enumerate(np.ndindex(*kernel)):
            start = [0, *(t * d for t, d in zip(offset, rhs_dilation)), 0]
            limit = [n, *(s + (m - 1) * st + 1 for s, m, st in zip(start[1:], out_spatial, window_strides)), c]
            piece = reshape(slice(x, start, limit, [1, *window_strides, 1]), (n, *out_spatial, 1, c))
            term = _contract(piece, slice(w, [k, 0, 0, 0], [k + 1, i, g, o // g]), fg, bg, preferred_element_type)
            res = term if res is None else add(res, term)
    else:
        rows = []
        for position in np.ndindex(*out_spatial):
            start = [0, *(q * st for q, st in zip(position, window_strides)), 0]
            limit = [n, *(s + (t - 1) * d + 1 for s, t, d in zip(start[1:], kernel, rhs_dilation)), c]
            piece = reshape(slice(x, start, limit, [1, *rhs_dilation, 1]), (n, *(1,) * nsp, ntaps, c))
            rows.append(reshape(_contract(piece, w, fg, bg, preferred_element_type), (n // bg, 1, o)))
        res = rows[0] if npos == 1 else concatenate(rows, 1)
        res = reshape(res, (n // bg, *out_spatial, o))
    canonical = (0, nsp + 1, *sp)                                            # (n, o, *out) of res's axes
    perm = tuple(canonical[int(k)] for k in np.argsort(os_))
    return res if perm == tuple(range(nsp + 2)) else transpose(res, perm)


# -- derivatives: bilinear, the transposes are convolutions (JAX's _conv_general_dilated_transpose_*) ---
def _conv(lhs, rhs, **params):
    return conv_general_dilated_p.bind(lhs, rhs, **params)


def _conv_jvp(primals, tangents, **params):
    lhs, rhs = primals
    tl, tr = tangents
    out = _conv(lhs, rhs, **params)
    terms = [_conv(tl, rhs, **params)] if not is_zero(tl) else []
    if not is_zero(tr):
        terms.append(_conv(lhs, tr, **params))
    if not terms or not dtypes.is_float(aval_of(out).dtype):
        return out, zero_of(out)
    return out, terms[0] if len(terms) == 1 else add(*terms)


def _spec_transpose(spec):
    return (spec[1], spec[0], *spec[2:])


def _reshape_axis_out_of(src, size1, x):
    shape = list(aval_of(x).shape)
    shape[src:src + 1] = [size1, shape[src] // size1]
    return reshape(x, tuple(shape))


def _reshape_axis_into(src, dst, x):
    """`src` merged into `dst` (numbered after `src` is removed), src the major part (JAX's)."""
    shape = aval_of(x).shape
    perm = [i for i in range(len(shape)) if i != src]
    perm.insert(dst, src)
    new = [shape[i] for i in range(len(shape)) if i != src]
    new[dst] *= shape[src]
    return reshape(transpose(x, tuple(perm)), tuple(new))


def _with_dtype(x, dtype):
    return x if aval_of(x).dtype == dtype else convert_element_type(x, dtype)


def _transpose_lhs(g, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                   feature_group_count, batch_group_count, **params):
    ls, rs, os_ = dimension_numbers
    la, ra, ga = aval_of(lhs), aval_of(rhs), aval_of(g)
    if feature_group_count > 1 or batch_group_count > 1:
        # the group moves from the kernel's input features to its output features
        rhs = _reshape_axis_out_of(rs[0], max(feature_group_count, batch_group_count), rhs)
        rhs = _reshape_axis_into(rs[0], rs[1], rhs)
    pads = []
    for k in range(len(window_strides)):
        in_d = _dilate(la.shape[ls[k + 2]], lhs_dilation[k])
        win = _dilate(ra.shape[rs[k + 2]], rhs_dilation[k])
        out_d = _dilate(ga.shape[os_[k + 2]], window_strides[k])
        before = win - padding[k][0] - 1
        pads.append((before, in_d + win - 1 - out_d - before))
    out = _conv(g, _with_dtype(rev(rhs, tuple(rs[2:])), ga.dtype), window_strides=tuple(lhs_dilation),
                padding=tuple(pads), lhs_dilation=tuple(window_strides), rhs_dilation=rhs_dilation,
                dimension_numbers=ConvDimensionNumbers(os_, _spec_transpose(rs), ls),
                feature_group_count=max(feature_group_count, batch_group_count), batch_group_count=1, **params)
    out = _with_dtype(out, la.dtype)
    if batch_group_count > 1:
        out = _reshape_axis_out_of(ls[1], batch_group_count, out)
        out = _reshape_axis_into(ls[1], ls[0], out)
    return out


def _transpose_rhs(g, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                   feature_group_count, batch_group_count, **params):
    ls, rs, os_ = dimension_numbers
    la, ra, ga = aval_of(lhs), aval_of(rhs), aval_of(g)
    pads = []
    for k in range(len(window_strides)):
        in_d = _dilate(la.shape[ls[k + 2]], lhs_dilation[k])
        win = _dilate(ra.shape[rs[k + 2]], rhs_dilation[k])
        out_d = _dilate(ga.shape[os_[k + 2]], window_strides[k])
        lo = padding[k][0]
        pads.append((lo, out_d - in_d + win - lo - 1))
    out = _conv(_with_dtype(lhs, ga.dtype), g, window_strides=tuple(rhs_dilation), padding=tuple(pads),
                lhs_dilation=lhs_dilation, rhs_dilation=tuple(window_strides),
                dimension_numbers=ConvDimensionNumbers(*map(_spec_transpose, (ls, os_, rs))),
                feature_group_count=batch_group_count, batch_group_count=feature_group_count, **params)
    return _with_dtype(out, ra.dtype)


def _conv_vjp(cts, primals, outs, **params):
    (g,), (lhs, rhs) = cts, primals
    if is_zero(g):
        return [None, None]
    return [lambda: _transpose_lhs(g, lhs, rhs, **params), lambda: _transpose_rhs(g, lhs, rhs, **params)]


def _conv_batch(args, dims, *, dimension_numbers, feature_group_count, batch_group_count, **params):
    """JAX's _conv_general_dilated_batch_rule: the vmapped axis (at 0) folded into the lhs batch,
    the rhs output features, or both with one more feature group; the result's axis moved to 0."""
    (lhs, rhs), (dl, dr) = args, dims
    ls, rs, os_ = dimension_numbers
    fg, bg = feature_group_count, batch_group_count
    if dl is not None and dr is not None:
        size = aval_of(lhs).shape[0]
        if bg > 1:
            new_lhs, bg = _reshape_axis_into(0, ls[0], lhs), bg * size
        else:
            new_lhs, fg = _reshape_axis_into(0, ls[1], lhs), fg * size
        out = _conv(new_lhs, _reshape_axis_into(0, rs[0], rhs), dimension_numbers=dimension_numbers,
                    feature_group_count=fg, batch_group_count=bg, **params)
        out, at = _reshape_axis_out_of(os_[1], size, out), os_[1]
    elif dl is not None:
        size = aval_of(lhs).shape[0]
        if bg == 1:
            new_lhs = _reshape_axis_into(0, ls[0], lhs)
        else:
            new_lhs = _reshape_axis_out_of(ls[0] + 1, bg, lhs)
            new_lhs = _reshape_axis_into(0, ls[0] + 1, new_lhs)
            new_lhs = _reshape_axis_into(ls[0], ls[0], new_lhs)
        out = _conv(new_lhs, rhs, dimension_numbers=dimension_numbers, feature_group_count=fg,
                    batch_group_count=bg, **params)
        out, at = _reshape_axis_out_of(os_[0], size, out), os_[0]
    else:
        size = aval_of(rhs).shape[0]
        if fg == 1 and bg == 1:
            new_rhs = _reshape_axis_into(0, rs[0], rhs)
        else:
            new_rhs = _reshape_axis_out_of(rs[0] + 1, fg * bg, rhs)
            new_rhs = _reshape_axis_into(0, rs[0] + 1, new_rhs)
            new_rhs = _reshape_axis_into(rs[0], rs[0], new_rhs)
        out = _conv(lhs, new_rhs, dimension_numbers=dimension_numbers, feature_group_count=fg,
                    batch_group_count=bg, **params)
        if fg == 1 and bg == 1:
            out = _reshape_axis_out_of(os_[1], size, out)
        else:
            out = _reshape_axis_out_of(os_[1], fg * bg, out)
            out = _reshape_axis_out_of(os_[1] + 1, size, out)
            out = _reshape_axis_into(os_[1], os_[1] + 1, out)
        at = os_[1]
    if at == 0:
        return out, 0
    nd = aval_of(out).ndim
    return transpose(out, (at, *(d for d in range(nd) if d != at))), 0


def _conv_cost(in_avals, out_avals, *, dimension_numbers, feature_group_count, batch_group_count, **params):
    """A multiply and an add per kernel tap of every output element: 2 * out * (in features/group) * taps."""
    if not dtypes.is_float(out_avals[0].dtype):
        return 0
    rhs = in_avals[1]
    _, rs, _ = dimension_numbers
    taps = math.prod(rhs.shape[d] for d in rs[1:])
    return 2 * numel(out_avals[0]) * int(taps)


jvp_rules[conv_general_dilated_p], vjp_rules[conv_general_dilated_p] = _conv_jvp, _conv_vjp
batch_rules[conv_general_dilated_p], cost_rules[conv_general_dilated_p] = _conv_batch, _conv_cost
