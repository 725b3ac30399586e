"""Windowed reductions: JAX's `lax.reduce_window` (pooling: max, sum, min, any computation), and the
two operations JAX's pooling gradients print, `select_and_scatter_add` (the cotangent of max pooling)
and `select_and_gather_add` (its tangent).

Each is a composition of sprue primitives, not a primitive of its own: the operand padded once
(`lax.pad`: edge padding by the init value, base dilation as interior padding), then one strided
slice per window offset (window dilation spaces the offsets), combined elementwise -- XLA's
definition of a window read literally, as jaxpr_compat reads the pooling shorthands. So
differentiation, batching and lowering come from pad, slice and the combining operation: grad of a
max pool routes each cotangent to the window's maximum (the first one, as XLA's select), vmap of a
pool pools each batch member. Pooling windows are small (prod(window_dimensions) slices); a window
wider than MAX_TAPS taps is refused with what to do.
"""
from __future__ import annotations

import builtins

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueTypeError, SprueValueError, at
from sprue.base.pytree import tree_flatten, tree_unflatten
from sprue.base.source_info import user_frame_summary
from sprue.interp.ad_util import aval_of
from sprue.lax.elementwise import add, bitwise_and, bitwise_not, bitwise_or, eq, ge, le, max, min, select
from sprue.lax.indexing import pad, slice
from sprue.lax.structural import broadcast_in_dim

__all__ = ["reduce_window", "select_and_gather_add", "select_and_scatter_add"]

MAX_TAPS = 4096


def _where() -> str:
    return at(user_frame_summary())


def _ints(name: str, v, rank: int, default: int | None = None) -> tuple[int, ...]:
    if v is None and default is not None:
        return (default,) * rank
    try:
        out = tuple(int(d) for d in v)
    except TypeError:
        raise SprueTypeError(f"reduce_window: {name} must be a sequence of {rank} ints, got {v!r}{_where()}") from None
    if len(out) != rank or any(d < 1 for d in out):
        raise SprueValueError(f"reduce_window: {name} must be {rank} positive ints (one per operand axis), got"
                              f" {out}{_where()}")
    return out


def pads_for(padding, shape, window, strides, window_dilation) -> tuple[tuple[int, int], ...]:
    """JAX's padtype_to_pads: 'VALID', 'SAME' (extra at the end) or 'SAME_LOWER', of the dilated
    window over the operand; or the pairs as given."""
    rank = len(shape)
    if isinstance(padding, str):
        kind = padding.upper()
        if kind == "VALID":
            return ((0, 0),) * rank
        if kind not in ("SAME", "SAME_LOWER"):
            raise SprueValueError(f"reduce_window: padding must be 'VALID', 'SAME', 'SAME_LOWER' or (low, high) pairs,"
                                  f" got {padding!r}{_where()}")
        out = []
        for n, w, s, d in zip(shape, window, strides, window_dilation):
            total = builtins.max(0, (-(-n // s) - 1) * s + (w - 1) * d + 1 - n)
            lo = total // 2 if kind == "SAME" else total - total // 2
            out.append((lo, total - lo))
        return tuple(out)
    pairs = tuple(tuple(int(v) for v in p) for p in padding)
    if len(pairs) != rank or any(len(p) != 2 for p in pairs):
        raise SprueValueError(f"reduce_window: padding must give a (low, high) pair per operand axis ({rank}), got"
                              f" {padding!r}{_where()}")
    return pairs


def _static_shape(x, what: str) -> tuple[int, ...]:
    shape = aval_of(x).shape
    if not all(isinstance(d, (int, np.integer)) for d in shape):
        raise SprueValueError(f"{what}: the operand's shape {shape} is known only at run time; windows are unrolled"
                              f" when compiling, so give it a static shape{_where()}")
    return tuple(int(d) for d in shape)


def _window_slices(x, fill, window, strides, padding, base_dilation, window_dilation):
    """(out_shape, [(offset, x padded by fill, sliced at that window offset)]) in row-major offset order."""
    x = pad(x, fill, [(lo, hi, b - 1) for (lo, hi), b in zip(padding, base_dilation)])
    padded = aval_of(x).shape
    reach = [(w - 1) * d + 1 for w, d in zip(window, window_dilation)]
    out_shape = tuple(builtins.max(0, (n - r) // s + 1) for n, r, s in zip(padded, reach, strides))
    pieces = []
    for offset in np.ndindex(*window):
        start = [o * d for o, d in zip(offset, window_dilation)]
        limit = [st + builtins.max(m - 1, 0) * s + (1 if m else 0) for st, m, s in zip(start, out_shape, strides)]
        pieces.append((offset, slice(x, start, limit, strides)))
    return out_shape, pieces


def _check_taps(window, what: str) -> None:
    taps = int(np.prod(window))
    if taps > MAX_TAPS:
        raise SprueValueError(f"{what}: a window of {taps} elements {tuple(window)} is unrolled one slice per element;"
                              f" sprue takes at most {MAX_TAPS}. Reduce along the axis instead (jnp.sum, jnp.max,"
                              f" a cumulative op) or pool in stages{_where()}")


def reduce_window(operand, init_value, computation, window_dimensions, window_strides, padding,
                  base_dilation=None, window_dilation=None):
    """JAX's lax.reduce_window: computation folded over each window of operand padded by
    init_value, starting from init_value. operand and init_value may be matching pytrees (the
    computation then takes and returns such trees)."""
    flat, tree = tree_flatten(operand)
    inits, init_tree = tree_flatten(init_value)
    if init_tree != tree or not flat:
        raise SprueTypeError(f"reduce_window: operand and init_value must have the same structure, got {tree} and"
                             f" {init_tree}{_where()}")
    shape = _static_shape(flat[0], "reduce_window")
    for x in flat[1:]:
        if tuple(aval_of(x).shape) != shape:
            raise SprueTypeError(f"reduce_window: the operands must have one shape, got {shape} and"
                                 f" {aval_of(x).shape}{_where()}")
    rank = len(shape)
    window = _ints("window_dimensions", window_dimensions, rank)
    strides = _ints("window_strides", window_strides, rank)
    base = _ints("base_dilation", base_dilation, rank, 1)
    dilation = _ints("window_dilation", window_dilation, rank, 1)
    _check_taps(window, "reduce_window")
    base_shape = tuple((n - 1) * b + 1 if n else 0 for n, b in zip(shape, base))
    pads = pads_for(padding, base_shape, window, strides, dilation)
    inits = [np.asarray(v, aval_of(x).dtype)[()] if not hasattr(v, "aval") else v for v, x in zip(inits, flat)]
    per_operand = [_window_slices(x, v, window, strides, pads, base, dilation) for x, v in zip(flat, inits)]
    out_shape = per_operand[0][0]
    acc = [broadcast_in_dim(v, out_shape, ()) for v in inits]
    for k in range(len(per_operand[0][1])):
        piece = [slices[k][1] for _, slices in per_operand]
        out = computation(tree_unflatten(tree, acc), tree_unflatten(tree, piece))
        acc, out_tree = tree_flatten(out)
        if out_tree != tree:
            raise SprueTypeError(f"reduce_window: the computation must return the operand's structure {tree}, got"
                                 f" {out_tree}{_where()}")
    return tree_unflatten(tree, acc)


def _select(select_prim) -> tuple[str, object]:
    """('ge' | 'le', the reduction that finds the selected value) from JAX's select_prim."""
    name = getattr(select_prim, "name", select_prim)
    if name not in ("ge", "gt", "le", "lt"):
        raise SprueValueError(f"select_and_scatter_add: select_prim must be ge or le (max or min pooling), got"
                              f" {select_prim!r}{_where()}")
    return name, (max if name in ("ge", "gt") else min)


def _extreme(dt, name: str):
    low = name in ("ge", "gt")
    if dtypes.is_float(dt):
        return np.asarray(-np.inf if low else np.inf, dt)[()]
    info = np.iinfo(dt)
    return np.asarray(info.min if low else info.max, dt)[()]


def _chosen(operand, name, choose, window, strides, padding, base, dilation):
    """(out_shape, [(offset, whether this offset is the window's selected element)]): XLA's select
    keeps the current element while select(current, candidate) holds, so the first maximum (ge) or
    minimum (le) in row-major window order is chosen."""
    dt = aval_of(operand).dtype
    out_shape, pieces = _window_slices(operand, _extreme(dt, name), window, strides, padding, base, dilation)
    best = pieces[0][1]
    for _, piece in pieces[1:]:
        best = choose(best, piece)
    taken, chosen = None, []
    for offset, piece in pieces:
        hit = eq(piece, best)
        if taken is not None:
            hit = bitwise_and(hit, bitwise_not(taken))
        taken = hit if taken is None else bitwise_or(taken, hit)
        chosen.append((offset, hit))
    return out_shape, chosen


def select_and_gather_add(tangents, operand, select_prim, window_dimensions, window_strides, padding,
                          base_dilation=None, window_dilation=None):
    """Per window, the tangent at the element select_prim chooses in operand (max pooling's jvp)."""
    shape = _static_shape(operand, "select_and_gather_add")
    rank = len(shape)
    window = _ints("window_dimensions", window_dimensions, rank)
    strides = _ints("window_strides", window_strides, rank)
    base = _ints("base_dilation", base_dilation, rank, 1)
    dilation = _ints("window_dilation", window_dilation, rank, 1)
    _check_taps(window, "select_and_gather_add")
    name, choose = _select(select_prim)
    pads = pads_for(padding, shape, window, strides, dilation)
    out_shape, chosen = _chosen(operand, name, choose, window, strides, pads, base, dilation)
    zero = np.zeros((), aval_of(tangents).dtype)[()]
    _, pieces = _window_slices(tangents, zero, window, strides, pads, base, dilation)
    out = broadcast_in_dim(zero, out_shape, ())
    for (_, hit), (_, piece) in zip(chosen, pieces):
        out = add(out, select(hit, piece, broadcast_in_dim(zero, out_shape, ())))
    return out


def select_and_scatter_add(source, operand, select_prim, window_dimensions, window_strides, padding):
    """Each window's source value added at the element select_prim chooses in operand (max
    pooling's cotangent: JAX's _select_and_scatter_add)."""
    shape = _static_shape(operand, "select_and_scatter_add")
    rank = len(shape)
    window = _ints("window_dimensions", window_dimensions, rank)
    strides = _ints("window_strides", window_strides, rank)
    _check_taps(window, "select_and_scatter_add")
    name, choose = _select(select_prim)
    ones = (1,) * rank
    pads = pads_for(padding, shape, window, strides, ones)
    out_shape, chosen = _chosen(operand, name, choose, window, strides, pads, ones, ones)
    if tuple(aval_of(source).shape) != out_shape:
        raise SprueTypeError(f"select_and_scatter_add: source has shape {aval_of(source).shape}, the windows give"
                             f" {out_shape}{_where()}")
    dt = aval_of(source).dtype
    zero = np.zeros((), dt)[()]
    padded = [n + lo + hi for n, (lo, hi) in zip(shape, pads)]
    total = broadcast_in_dim(zero, tuple(padded), ())
    for offset, hit in chosen:
        contribution = select(hit, source, broadcast_in_dim(zero, out_shape, ()))
        # element i of the window grid lands at offset + i * stride of the padded operand
        config = [(o, n - (o + builtins.max(m - 1, 0) * s + 1), s - 1)
                  for o, n, m, s in zip(offset, padded, out_shape, strides)]
        total = add(total, pad(contribution, zero, config))
    return slice(total, [lo for lo, _ in pads], [lo + n for n, (lo, _) in zip(shape, pads)])


# JAX's select_prim names the comparison primitive; sprue's readers pass its name
SELECT_PRIMS = {"ge": ge, "le": le}
