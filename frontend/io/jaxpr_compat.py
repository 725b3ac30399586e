"""Forms JAX prints that sprue spells otherwise: each JAX primitive here is rewritten, as the
reader evaluates it, into sprue primitives that compute the same thing, and binary operations
whose operands differ in size-1 dimensions get their broadcasts made explicit.

Why rewrites and not primitives of their own: these are shorthands of JAX's jaxpr (`split`,
`stack`, `tile` and `expand_dims` are slices, broadcasts and reshapes; `empty2` is an array whose
contents are never read; JAX >= 0.9 lets an elementwise operation broadcast size-1 dimensions, the
numpy rule restricted to equal ranks), so sprue's own tracing never makes them and each has one
obvious spelling in primitives sprue already lowers, differentiates and batches.

Each rule takes (operands, params as Python values, the declared output avals) and returns the
outputs; params come converted by the reader (jaxpr_params.convert_value).
"""
from __future__ import annotations

import re

import numpy as np

from sprue import lax
from sprue.ir.core import ShapedArray
from sprue.lax import debugging
from sprue.lax.dimension_numbers import GatherDimensionNumbers, ScatterDimensionNumbers
from sprue.trace.tracing import Tracer, eval_jaxpr


def _shape(x) -> tuple:
    return x.aval.shape if isinstance(x, Tracer) else np.shape(x)


def _dtype(x):
    return x.aval.dtype if isinstance(x, Tracer) else np.asarray(x).dtype


def split(args, params, outs: list[ShapedArray]):
    """`split[axis sizes]`: consecutive slices along the axis (JAX >= 0.4.36, jnp.split)."""
    x, = args
    rank = len(_shape(x))
    axis = params["axis"] % rank
    pieces, start = [], 0
    for s in params["sizes"]:
        lo, hi = [0] * rank, list(_shape(x))
        lo[axis], hi[axis] = start, start + s
        pieces.append(lax.slice(x, lo, hi))
        start += s
    return pieces


def expand_dims(args, params, outs):
    """`expand_dims[dimensions]`: a reshape to the declared shape."""
    return [lax.reshape(args[0], outs[0].shape)]


def stack(args, params, outs):
    """`stack[axis]` (JAX >= 0.9, jnp.stack): each operand given a size-1 axis, then concatenated."""
    axis = params.get("axis", 0)
    rank = len(_shape(args[0])) + 1
    axis = axis % rank
    pieces = []
    for x in args:
        shape = list(_shape(x))
        shape.insert(axis, 1)
        dims = [d for d in range(rank) if d != axis]
        pieces.append(lax.broadcast_in_dim(x, tuple(shape), tuple(dims)))
    return [lax.concatenate(pieces, axis)]


def tile(args, params, outs):
    """`tile[reps]` (JAX >= 0.9, jnp.tile): broadcast to (r0, s0, r1, s1, ...), then merged."""
    x, = args
    shape = _shape(x)
    reps = tuple(params["reps"])
    if len(reps) < len(shape):
        reps = (1,) * (len(shape) - len(reps)) + reps
    if len(shape) < len(reps):
        x = lax.reshape(x, (1,) * (len(reps) - len(shape)) + tuple(shape))
        shape = _shape(x)
    wide = tuple(v for r, s in zip(reps, shape) for v in (r, s))
    y = lax.broadcast_in_dim(x, wide, tuple(range(1, 2 * len(shape), 2)))
    return [lax.reshape(y, tuple(r * s for r, s in zip(reps, shape)))]


def empty(args, params, outs):
    """`empty`/`empty2[dtype]`: an array JAX leaves uninitialised (the zeros of a branch's unused
    cotangent); sprue gives zeros of the declared type."""
    out, = outs
    return [lax.broadcast_in_dim(np.zeros((), out.dtype), tuple(out.shape), ())]


def _static(x, what: str) -> tuple:
    shape = tuple(_shape(x))
    if not all(isinstance(d, int) for d in shape):
        raise NotImplementedError(f"{what} of an array whose shape is known only at run time")
    return shape


def _window_params(params, keys=("window_dimensions", "window_strides", "padding", "base_dilation",
                                   "window_dilation")) -> dict:
    return {k: params[k] for k in keys if k in params}


def _reduce_window(combine, init):
    """`reduce_window_{sum,max,min}` (pooling): sprue.lax.reduce_window with the reduction's identity
    (pad once, one strided slice per window offset, dilations included)."""
    def rule(args, params, outs):
        x, = args
        _static(x, "reduce_window")
        dt = np.dtype(_dtype(x))
        w = _window_params(params)
        return [lax.reduce_window(x, np.asarray(init(dt), dt)[()], combine, w["window_dimensions"],
                                  w["window_strides"], w.get("padding", "VALID"), w.get("base_dilation"),
                                  w.get("window_dilation"))]
    return rule


def reduce_window(args, params, outs):
    """`reduce_window[jaxpr=... consts=...]` (any computation): its operands, then as many inits,
    folded by the printed jaxpr."""
    n = len(args) // 2
    closed, consts = params["jaxpr"], list(params.get("consts") or ())
    for x in args[:n]:
        _static(x, "reduce_window")

    def computation(acc, piece):
        acc, piece = (acc, piece) if n > 1 else ((acc,), (piece,))
        out = eval_jaxpr(closed.jaxpr, list(closed.consts) + consts, *acc, *piece)
        return tuple(out) if n > 1 else out[0]
    w = _window_params(params)
    operand = tuple(args[:n]) if n > 1 else args[0]
    init = tuple(args[n:]) if n > 1 else args[n]
    out = lax.reduce_window(operand, init, computation, w["window_dimensions"], w["window_strides"],
                            w.get("padding", "VALID"), w.get("base_dilation"), w.get("window_dilation"))
    return list(out) if n > 1 else [out]


def select_and_scatter_add(args, params, outs):
    """The cotangent of max (min) pooling: each window's value added at its first maximum."""
    source, operand = args
    _static(operand, "select_and_scatter_add")
    return [lax.select_and_scatter_add(source, operand, params["select_prim"], params["window_dimensions"],
                                       params["window_strides"], params["padding"])]


def select_and_gather_add(args, params, outs):
    """The tangent of max (min) pooling: each window's tangent at its first maximum."""
    tangents, operand = args
    _static(operand, "select_and_gather_add")
    w = _window_params(params)
    return [lax.select_and_gather_add(tangents, operand, params["select_prim"], w["window_dimensions"],
                                      w["window_strides"], w["padding"], w.get("base_dilation"),
                                      w.get("window_dilation"))]


def _lowest(dt):
    return -np.inf if np.issubdtype(dt, np.floating) else np.iinfo(dt).min


def _highest(dt):
    return np.inf if np.issubdtype(dt, np.floating) else np.iinfo(dt).max


def top_k(args, params, outs):
    """`top_k[k axis]`: a stable sort of the negated keys (bitwise not for integers: no overflow)
    carrying the values and their positions, then the first k (ties keep the lower index, as
    JAX's)."""
    x, = args
    shape, dt = _static(x, "top_k"), np.dtype(_dtype(x))
    axis = params.get("axis", -1) % len(shape)
    key = lax.neg(x) if np.issubdtype(dt, np.floating) else lax.bitwise_not(x)
    index_dtype = outs[1].dtype if len(outs) > 1 else np.dtype(np.int32)
    iota = lax.broadcasted_iota(index_dtype, shape, axis)
    _, values, indices = lax.sort([key, x, iota], dimension=axis, is_stable=True, num_keys=1)
    limit = list(shape)
    limit[axis] = params["k"]
    return [lax.slice(values, [0] * len(shape), limit), lax.slice(indices, [0] * len(shape), limit)]


def approx_top_k(args, params, outs):
    """`approx_top_k[k reduction_dimension is_max_k ...]` (lax.approx_max_k/approx_min_k): on a CPU
    JAX computes the exact top k (the recall target is a TPU's), so this is top_k, of the negated
    operand for the smallest k."""
    x, = args
    axis = params.get("reduction_dimension", -1)
    # aggregate_to_topk=False returns as many as the declared results hold (on a CPU, all of the
    # operand's axis, sorted): take k from them
    k = outs[0].shape[axis] if outs and outs[0] is not None else params["k"]
    if params.get("is_max_k", True):
        return top_k(args, {"k": k, "axis": axis}, outs)
    neg = lax.neg(x) if np.issubdtype(np.dtype(_dtype(x)), np.floating) else lax.bitwise_not(x)
    values, indices = top_k([neg], {"k": k, "axis": axis}, outs)
    return [lax.neg(values) if np.issubdtype(np.dtype(_dtype(x)), np.floating) else lax.bitwise_not(values), indices]


def any_complex(args) -> bool:
    return any(np.dtype(_dtype(a)).kind == "c" for a in args)


def sort_complex(args, params):
    """`sort[dimension is_stable num_keys]` of complex operands (jnp.sort of complex numbers) as their
    real and imaginary parts, a complex key as two keys, real first: JAX's sort comparator orders
    complex numbers lexicographically (lax._sort_lt_comparator)."""
    complex_at = [np.dtype(_dtype(a)).kind == "c" for a in args]
    parts, num_keys = [], params["num_keys"]
    for k, (a, c) in enumerate(zip(args, complex_at)):
        parts += [lax.real(a), lax.imag(a)] if c else [a]
        num_keys += int(c and k < params["num_keys"])
    done = iter(lax.sort(parts, dimension=params["dimension"], is_stable=params["is_stable"], num_keys=num_keys))
    return [lax.complex(next(done), next(done)) if c else next(done) for c in complex_at]


def reshape_dimensions(args: list, params: dict) -> tuple[list, dict]:
    """`reshape[dimensions=(...)]` (jnp.reshape / ravel with order='F'): the operand transposed by
    `dimensions`, then reshaped (lax.reshape's definition)."""
    if params.get("dimensions") is None:
        return args, params
    return [lax.transpose(args[0], tuple(params["dimensions"])), *args[1:]], {**params, "dimensions": None}


def reduce(args, params, outs):
    """`reduce[jaxpr dimensions]` (lax.reduce with a computation that is not one of the named
    reductions): its operands, then as many inits, folded along the dimensions by the printed jaxpr,
    as a window that spans them (sprue.lax.reduce_window) reshaped to the result."""
    shape = _static(args[0], "reduce")
    dims = {d % len(shape) for d in params["dimensions"]}
    window = tuple(s if d in dims else 1 for d, s in enumerate(shape))
    pooled = reduce_window(args, {"jaxpr": params["jaxpr"], "consts": params.get("consts") or (),
                                  "window_dimensions": window, "window_strides": (1,) * len(shape)}, outs)
    return [lax.reshape(p, tuple(o.shape)) for p, o in zip(pooled, outs)]


def reduce_xor(args, params, outs):
    """`reduce_xor[axes]` (lax.reduce_xor): the exclusive or of the elements along the axes, as a
    window that spans them."""
    x, = args
    shape = _static(x, "reduce_xor")
    axes = {d % len(shape) for d in params["axes"]}
    window = tuple(s if d in axes else 1 for d, s in enumerate(shape))
    init = np.zeros((), _dtype(x))[()]
    pooled = lax.reduce_window(x, init, lax.bitwise_xor, window, (1,) * len(shape), "VALID")
    return [lax.reshape(pooled, tuple(outs[0].shape))]


def platform_index(args, params, outs):
    """`platform_index[platforms]` (a cond per platform, e.g. jnp.linalg.slogdet's): the index of
    the first entry naming the CPU, else of the default entry (None), for sprue compiles for the CPU."""
    platforms = params["platforms"]
    for i, names in enumerate(platforms):
        if names is not None and "cpu" in names:
            return [np.int32(i)]
    for i, names in enumerate(platforms):
        if names is None:
            return [np.int32(i)]
    raise NotImplementedError(f"a platform_index with no branch for the CPU (platforms={platforms})")


def _logaddexp(a, b):
    hi, lo = lax.max(a, b), lax.min(a, b)
    r = lax.add(hi, lax.log1p(lax.exp(lax.sub(lo, hi))))
    return lax.select_n(lax.eq(hi, np.asarray(-np.inf, _dtype(a))[()]), r, hi)   # both -inf: -inf, not NaN


def cumlogsumexp(args, params, outs):
    """`cumlogsumexp[axis reverse]`: log(sum(exp)) of every prefix, as Hillis and Steele's scan:
    log2(n) rounds, each combining every element with the one 2^k before it by logaddexp (no
    common shift, which would underflow the prefixes far below the maximum)."""
    x, = args
    shape, dt = _static(x, "cumlogsumexp"), np.dtype(_dtype(x))
    axis = params.get("axis", 0) % len(shape)
    if params.get("reverse", False):
        x = lax.rev(x, (axis,))
    step = 1
    while step < shape[axis]:
        config = [(0, 0, 0)] * len(shape)
        config[axis] = (step, -step, 0)
        x = _logaddexp(x, lax.pad(x, np.asarray(-np.inf, dt)[()], config))
        step *= 2
    return [lax.rev(x, (axis,)) if params.get("reverse", False) else x]


_FLOAT_BITS = {np.dtype(np.float64): (11, 52, np.int64), np.dtype(np.float32): (8, 23, np.int32),
               np.dtype(np.float16): (5, 10, np.int16)}


def reduce_precision(args, params, outs):
    """`reduce_precision[exponent_bits mantissa_bits]`: rounded to nearest-even at that many
    mantissa bits and clamped to that exponent range (to inf above, to signed zero below) on the
    float's bits, XLA's algorithm (ReducePrecisionInsertion's reference, xla/literal_util)."""
    x, = args
    dt = np.dtype(_dtype(x))
    nexp, nmant, it = _FLOAT_BITS[dt]
    ebits, mbits = params["exponent_bits"], params["mantissa_bits"]
    c = lambda v: np.asarray(v).astype(it)[()]   # noqa: E731  (two's complement wrap for masks)
    bits = lax.bitcast_convert_type(x, it)
    if mbits < nmant:
        last = 1 << (nmant - mbits)
        last_bit = lax.shift_right_logical(lax.bitwise_and(bits, c(last)), c(nmant - mbits))
        bias = lax.add(last_bit, c((last >> 1) - 1))
        bits = lax.bitwise_and(lax.add(bits, bias), c(~(last - 1)))
    if ebits < nexp:
        exp_mask = ((1 << nexp) - 1) << nmant
        exponent_bias, reduced_bias = (1 << (nexp - 1)) - 1, (1 << (ebits - 1)) - 1
        exponent = lax.bitwise_and(bits, c(exp_mask))
        signed_zero = lax.bitwise_and(bits, c(1 << (nexp + nmant)))
        signed_inf = lax.bitwise_or(signed_zero, c(exp_mask))
        bits = lax.select_n(lax.le(exponent, c((exponent_bias - reduced_bias) << nmant)), bits, signed_zero)
        bits = lax.select_n(lax.gt(exponent, c((exponent_bias + reduced_bias) << nmant)), bits, signed_inf)
    y = lax.bitcast_convert_type(bits, dt)
    if mbits > 0:   # NaN stays NaN (its payload's bits could have rounded to inf)
        y = lax.select_n(lax.ne(x, x), y, x)
    return [y]


def _total_order_key(x):
    """An integer that orders floats as IEEE 754's totalOrder (-NaN < -inf < ... < -0 < +0 < ... < +inf
    < +NaN): the bits, with the magnitude bits flipped for negative numbers (XLA's lowering of the
    total-order comparisons); integers are their own key."""
    dt = np.dtype(_dtype(x))
    if not np.issubdtype(dt, np.floating):
        return x
    it = _FLOAT_BITS[dt][2]
    bits = lax.bitcast_convert_type(x, it)
    sign = lax.shift_right_arithmetic(bits, np.asarray(dt.itemsize * 8 - 1, it)[()])
    return lax.bitwise_xor(bits, lax.bitwise_and(sign, np.asarray(np.iinfo(it).max, it)[()]))


def _total_order(compare):
    """`eq_to`, `lt_to`, `le_to` (JAX's comparisons in totalOrder, which jnp.searchsorted and
    jnp.interp use): the comparison of the keys."""
    def rule(args, params, outs):
        return [compare(*(_total_order_key(a) for a in broadcast_operands(list(args))))]
    return rule


_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def carrier_of_bf16_bits(bits):
    """The float32 carrier (jaxpr_eval: bfloat16 computed in float32) of bfloat16 bits (uint16)."""
    wide = lax.shift_left(lax.convert_element_type(bits, np.uint32), np.uint32(16))
    return lax.bitcast_convert_type(wide, np.float32)


def bf16_bits_of_carrier(x):
    """The bfloat16 bits (uint16) of a float32 carrier (exact: it holds a bfloat16 value)."""
    return lax.convert_element_type(lax.shift_right_logical(lax.bitcast_convert_type(x, np.uint32), np.uint32(16)),
                                    np.uint16)


def bitcast_convert_type(args, params, outs):
    """`bitcast_convert_type[new_dtype]`: between types of one width, sprue's primitive; between
    widths, JAX's rule: a wider operand's bits split along a new last axis of the ratio's size, the
    lowest piece first (a little-endian machine's memory order, as XLA's CPU), or a narrower
    operand's last axis (of that size) joined into one element, by shifts of unsigned integers."""
    x, = args
    old, new = np.dtype(_dtype(x)), np.dtype(params["new_dtype"])
    if old.itemsize != new.itemsize and outs and outs[0] is not None and tuple(outs[0].shape) == tuple(_shape(x)):
        # widths differ but shapes do not: one side is bfloat16, carried in float32 (jaxpr_eval), so
        # through its 16 bits
        if old == np.float32 and new.itemsize == 2:
            return [lax.bitcast_convert_type(bf16_bits_of_carrier(x), new)]
        if old.itemsize == 2 and new == np.float32:
            return [carrier_of_bf16_bits(lax.bitcast_convert_type(x, np.uint16))]
    if old.itemsize == new.itemsize or old.kind in "bc" or new.kind in "bc":
        return [lax.bitcast_convert_type(x, new)]   # same width, or its error (bool, complex)
    wide, narrow = _UINT[max(old.itemsize, new.itemsize)], _UINT[min(old.itemsize, new.itemsize)]
    ratio, step = np.dtype(wide).itemsize // np.dtype(narrow).itemsize, 8 * np.dtype(narrow).itemsize
    if old.itemsize > new.itemsize:
        bits = lax.bitcast_convert_type(x, wide)
        shape = (*_shape(x), 1)
        pieces = [lax.reshape(lax.convert_element_type(
            lax.shift_right_logical(bits, np.asarray(k * step, wide)[()]), narrow), shape) for k in range(ratio)]
        return [lax.bitcast_convert_type(lax.concatenate(pieces, len(shape) - 1), new)]
    if not _shape(x) or _shape(x)[-1] != ratio:
        raise ValueError(f"a {old} operand's last axis must have size {ratio} to join into {new}, got {list(_shape(x))}")
    pieces = lax.convert_element_type(lax.bitcast_convert_type(x, narrow), wide)
    shifts = lax.broadcast_in_dim(np.arange(0, ratio * step, step, dtype=wide), _shape(x), (len(_shape(x)) - 1,))
    joined = lax.reduce_sum(lax.shift_left(pieces, shifts), (len(_shape(x)) - 1,))   # disjoint bits: sum is or
    return [lax.bitcast_convert_type(joined, new)]


def scatter_apply(args, params, combine):
    """`scatter[update_jaxpr=f ...]` with an f that does not just return the update (x.at[i].apply(g)):
    XLA's scatter applies f(current, update) at each index in turn, so a repeated index applies it again.
    Each update is one element (update_window_dims empty, as .apply makes); the loop runs over them in
    order, an index out of bounds dropped (FILL_OR_DROP, PROMISE_IN_BOUNDS) or clamped (CLIP)."""
    operand, indices, updates = args
    dn, mode = params["dimension_numbers"], str(params.get("mode", "FILL_OR_DROP")).rsplit(".", 1)[-1].upper()
    if dn.update_window_dims or dn.operand_batching_dims:
        raise NotImplementedError("scatter with an update computation over windows or batching dims")
    shape = _shape(operand)
    points = int(np.prod(_shape(indices)[:-1]))
    flat_indices = lax.reshape(indices, (points, _shape(indices)[-1]))
    flat_updates = lax.reshape(updates, (points,))

    def step(i, out):
        point = lax.dynamic_slice(flat_indices, (i, 0), (1, _shape(indices)[-1]))
        start = [np.int32(0)] * len(shape)
        inside = np.bool_(True)
        for k, d in enumerate(dn.scatter_dims_to_operand_dims):
            at = lax.convert_element_type(lax.reshape(lax.slice(point, (0, k), (1, k + 1)), ()), np.int32)
            if mode == "CLIP":
                at = lax.clamp(np.int32(0), at, np.int32(shape[d] - 1))
            inside = lax.bitwise_and(inside, lax.bitwise_and(lax.ge(at, np.int32(0)), lax.lt(at, np.int32(shape[d]))))
            start[d] = at
        old = lax.reshape(lax.dynamic_slice(out, start, (1,) * len(shape)), ())
        new = combine(old, lax.reshape(lax.dynamic_slice(flat_updates, (i,), (1,)), ()))
        changed = lax.dynamic_update_slice(out, lax.reshape(new, (1,) * len(shape)), start)
        return lax.select(lax.broadcast_in_dim(inside, shape, ()), changed, out)
    return [lax.fori_loop(0, points, step, operand)]


def _collective(reduce):
    """`psum`/`pmax`/`pmin[axes axis_index_groups]`: what vmap makes of a collective over its named
    axis (jax.vmap(f, axis_name="i") with lax.psum(x, "i") inside) -- positional axes, each operand
    reduced over them and the result broadcast back by the jaxpr's next equations. Named axes (a
    shard_map's or pmap's devices) are refused: sprue compiles one device's program."""
    def rule(args, params, outs):
        axes = tuple(params.get("axes") or ())
        if not all(isinstance(a, (int, np.integer)) for a in axes):
            raise NotImplementedError(f"a collective over the named axes {axes} (shard_map or pmap's devices; sprue"
                                      " compiles one device's program)")
        if params.get("axis_index_groups") is not None:
            raise NotImplementedError("axis_index_groups")
        return [reduce(x, tuple(int(a) for a in axes)) for x in args]
    return rule


_TREE = re.compile(r"PyTreeDef\(\(\((?P<args>[*, ]*)\), \{(?P<kwargs>(?:'[A-Za-z_]\w*': \*(?:, )?)*)\}\)\)")


def debug_print(args, params, outs):
    """`debug_print[fmt in_tree ...]` (jax.debug.print, JAX >= 0.6): the operands are the leaves of
    (args, kwargs) as `in_tree` lays them out, formatted by `fmt` as str.format would: sprue.debug.print
    of the same call, printed when the compiled code runs (from a C host too). sprue's own printed
    form (`debug_print[fmt='...']`, fields numbered by operand) binds its primitive as it is."""
    if "in_tree" not in params:
        return lax.debug_print_p.bind(*args, fmt=params["fmt"])
    tree = _TREE.fullmatch(str(params["in_tree"]))
    if tree is None or params.get("static_args"):
        raise NotImplementedError(f"debug_print of arguments laid out as {params['in_tree']} (sprue reads arrays"
                                  " passed positionally or by keyword, each its own field)")
    n_args = tree["args"].count("*")
    names = re.findall(r"'(\w+)'", tree["kwargs"])
    if n_args + len(names) != len(args):
        raise NotImplementedError(f"debug_print with {len(args)} operands for the tree {params['in_tree']}")
    debugging.print(str(params["fmt"]), *args[:n_args], **dict(zip(names, args[n_args:])))
    return []


REWRITES = {"split": split, "bitcast_convert_type": bitcast_convert_type, "expand_dims": expand_dims, "stack": stack, "tile": tile, "empty": empty,
            "empty2": empty,
            "reduce_window_sum": _reduce_window(lax.add, lambda dt: 0),
            "reduce_window_max": _reduce_window(lax.max, _lowest),
            "reduce_window_min": _reduce_window(lax.min, _highest),
            "reduce_window": reduce_window, "select_and_scatter_add": select_and_scatter_add,
            "select_and_gather_add": select_and_gather_add,
            "eq_to": _total_order(lax.eq), "lt_to": _total_order(lax.lt), "le_to": _total_order(lax.le),
            "top_k": top_k, "approx_top_k": approx_top_k, "cumlogsumexp": cumlogsumexp,
            "debug_print": debug_print,
            "psum": _collective(lax.reduce_sum), "pmax": _collective(lax.reduce_max),
            "pmin": _collective(lax.reduce_min),
            "reduce_precision": reduce_precision, "reduce": reduce, "reduce_xor": reduce_xor, "platform_index": platform_index,
            # jax.scipy.special's primitives that sprue computes in its own operations (lax.special_series)
            "zeta": lambda args, params, outs: [lax.zeta(*args)],
            "polygamma": lambda args, params, outs: [lax.polygamma(*args)],
            "regularized_incomplete_beta": lambda args, params, outs: [lax.betainc(*args)]}

# Elementwise primitives whose operands JAX (>= 0.9) may print with size-1 dimensions that the
# result broadcasts (`g:f32[4,5] = add f b` with f:f32[1,5]).
BROADCASTING = {
    "add", "add_any", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "and", "or", "xor", "eq", "ne",
    "lt", "le", "gt", "ge", "shift_left", "shift_right_arithmetic", "shift_right_logical", "nextafter",
    "select_n", "clamp", "igamma", "igammac", "complex",
}


def broadcast_operands(args: list) -> list:
    """The operands with size-1 dimensions broadcast to the shape they share with the others
    (scalars stay scalars: sprue's rules take them as they are); operands of different ranks, or
    sizes that differ other than by 1, are left for the primitive's shape rule to report."""
    shapes = [_shape(a) for a in args]
    ranked = [s for s in shapes if len(s)]
    if len({len(s) for s in ranked}) != 1 or len(set(ranked)) == 1:
        return args
    target = []
    for sizes in zip(*ranked):
        others = {d for d in sizes if not (isinstance(d, int) and d == 1)}
        if len(others) > 1:
            return args
        target.append(others.pop() if others else 1)
    target = tuple(target)
    out = []
    for a, s in zip(args, shapes):
        if len(s) and tuple(s) != target:
            if not isinstance(a, Tracer):
                a = np.asarray(a)
            a = lax.broadcast_in_dim(a, target, tuple(range(len(target))))
        out.append(a)
    return out


def with_out_dtype(args: list, out_dtype) -> list:
    """Operands of `mul[out_dtype=...]` (JAX >= 0.10: a product computed in another type)
    converted to that type first."""
    return [lax.convert_element_type(a, out_dtype) if _dtype(a) != out_dtype else a for a in args]


# Products of float16 operands: XLA's CPU backend accumulates them in float32 and rounds the result
# once (its float-normalization of dot and convolution), where a float16 accumulator would round
# after every addition; JAX's results are the former
ACCUMULATING = {"dot_general", "conv_general_dilated"}


def half_operands(args: list) -> bool:
    return all(np.dtype(_dtype(a)) == np.float16 for a in args)


def accumulated_in_f32(p, args: list, params: dict):
    """p (a dot or convolution of float16 operands) computed in float32, its result converted to the
    type it declares (float16, or a wider preferred_element_type)."""
    out = np.dtype(params.get("preferred_element_type") or np.float16)
    wide = [lax.convert_element_type(a, np.float32) for a in args]
    return lax.convert_element_type(p.bind(*wide, **{**params, "preferred_element_type": np.dtype(np.float32)}), out)


# primitives sprue refuses by name, and why
REFUSED = {
    "rng_uniform": "it is XLA's stateful generator (lax.rng_uniform: RngUniform), which draws new numbers from a"
                   " hidden state at every call of JAX's program, so there are no results to reproduce; draw"
                   " from a key instead (jax.random, or lax.rng_bit_generator, which sprue computes as XLA does)",
}

# indexing primitives, whose empty results need nothing computed (jaxpr_eval.Evaluator.apply)
INDEXING = {"gather", "dynamic_slice"}


def unbatch_indices(name: str, args: list, params: dict) -> tuple[list, dict]:
    """A gather or scatter with batching dims (JAX >= 0.4.31: what `vmap` of an indexing op gives)
    as one without: each batching pair (operand dim o, indices dim i) becomes an index component
    equal to the position along i (an iota), with o collapsed (or inserted) and mapped by it, which
    selects the same element of o that the batching dims pair up (XLA's own expansion)."""
    dn = params["dimension_numbers"]
    ob = tuple(dn.operand_batching_dims)
    ib = tuple(dn.start_indices_batching_dims if name == "gather" else dn.scatter_indices_batching_dims)
    if not ob:
        return args, params
    operand, indices, *rest = args
    ishape = _shape(indices)
    idt = _dtype(indices)
    batch = tuple(ishape[:-1]) + (1,)
    extra = [lax.broadcasted_iota(idt, batch, i) for i in ib]
    indices = lax.concatenate([indices, *extra], len(ishape) - 1)
    if name == "gather":
        dn = GatherDimensionNumbers(tuple(dn.offset_dims), tuple(sorted((*dn.collapsed_slice_dims, *ob))),
                                    (*dn.start_index_map, *ob))
    else:
        dn = ScatterDimensionNumbers(tuple(dn.update_window_dims), tuple(sorted((*dn.inserted_window_dims, *ob))),
                                     (*dn.scatter_dims_to_operand_dims, *ob))
    return [operand, indices, *rest], {**params, "dimension_numbers": dn}


__all__ = ["REWRITES", "unbatch_indices", "BROADCASTING", "broadcast_operands", "with_out_dtype"]
