"""sprue.lax: the primitives, as functions (JAX's lax API). Each primitive's shape rule and numpy
reference rule are beside its definition in this package; its lowering is in sprue.lowering."""
from __future__ import annotations

import builtins as _builtins

import numpy as np

from sprue.base import dtypes as _dtypes
from sprue.lax.control_flow.primitives import cond_p, for_loop_p, scan_p, while_p  # noqa: F401
from sprue.lax.checks import check_p
from sprue.lax.dot import dot_general_p
from sprue.lax.elementwise import *  # noqa: F401,F403  (the *_p primitive objects)
from sprue.lax.elementwise import RoundingMethod
from sprue.lax.indexing import (GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers, gather_p,
    scatter_add_p, scatter_max_p, scatter_min_p, scatter_mul_p, scatter_p)
from sprue.lax.reductions import *  # noqa: F401,F403
from sprue.lax.sorting import sort_p
from sprue.lax.filtering import filter, filter_p  # noqa: F401  (data-dependent shapes: a fresh size per result)
from sprue.lax.structural import *  # noqa: F401,F403
from sprue.lax import elementwise as _e, reductions as _r, structural as _s
from sprue.lax._rules import runtime_size_ops as _runtime_size_ops
from sprue.trace.tracing import lax_ops as _lax_ops


def _unary(p):
    def f(x):
        return p.bind(x)
    f.__name__ = p.name
    return f


def _binary(p):
    def f(x, y):
        return p.bind(x, y)
    f.__name__ = p.name
    return f


neg = _unary(_e.neg_p); sign = _unary(_e.sign_p); floor = _unary(_e.floor_p); ceil = _unary(_e.ceil_p)
is_finite = _unary(_e.is_finite_p); exp = _unary(_e.exp_p); exp2 = _unary(_e.exp2_p); log = _unary(_e.log_p)
log1p = _unary(_e.log1p_p); expm1 = _unary(_e.expm1_p); tanh = _unary(_e.tanh_p)
logistic = _unary(_e.logistic_p); sin = _unary(_e.sin_p); cos = _unary(_e.cos_p); tan = _unary(_e.tan_p)
asin = _unary(_e.asin_p); acos = _unary(_e.acos_p); atan = _unary(_e.atan_p); sinh = _unary(_e.sinh_p)
cosh = _unary(_e.cosh_p); asinh = _unary(_e.asinh_p); acosh = _unary(_e.acosh_p); atanh = _unary(_e.atanh_p)
sqrt = _unary(_e.sqrt_p); rsqrt = _unary(_e.rsqrt_p); cbrt = _unary(_e.cbrt_p); abs = _unary(_e.abs_p)
bitwise_not = _unary(_e.not_p); square = _unary(_e.square_p)

add = _binary(_e.add_p); sub = _binary(_e.sub_p); mul = _binary(_e.mul_p); div = _binary(_e.div_p)
rem = _binary(_e.rem_p); pow = _binary(_e.pow_p); max = _binary(_e.max_p); min = _binary(_e.min_p)
atan2 = _binary(_e.atan2_p); bitwise_and = _binary(_e.and_p); bitwise_or = _binary(_e.or_p)
bitwise_xor = _binary(_e.xor_p); shift_left = _binary(_e.shift_left_p)
shift_right_arithmetic = _binary(_e.shift_right_arithmetic_p)
shift_right_logical = _binary(_e.shift_right_logical_p)
eq = _binary(_e.eq_p); ne = _binary(_e.ne_p); lt = _binary(_e.lt_p); le = _binary(_e.le_p)
gt = _binary(_e.gt_p); ge = _binary(_e.ge_p)


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):
    return _e.round_p.bind(x, rounding_method=RoundingMethod(rounding_method))


def integer_pow(x, y: int):
    return _e.integer_pow_p.bind(x, y=int(y))


def convert_element_type(x, new_dtype):
    return _e.convert_element_type_p.bind(x, new_dtype=_dtypes.canonicalize(new_dtype), weak_type=False,
                                          sharding=None)


def check(ok, message: str):
    """Assert `ok` (a bool scalar) at run time; a failure raises SprueValueError(message)."""
    check_p.bind(ok, message=str(message))


def select_n(which, *cases):
    return _e.select_n_p.bind(which, *cases)


def select(pred, on_true, on_false):
    """pred ? on_true : on_false (JAX's lax.select)."""
    return _e.select_n_p.bind(pred, on_false, on_true)


def clamp(lo, x, hi):
    return _e.clamp_p.bind(lo, x, hi)


def _split_dims(dims) -> tuple[tuple, list]:
    """(param, size operands): static sizes stay in the param; a size known only at run time is
    None there and its value becomes a trailing operand (JAX's dynamic-shape convention)."""
    from sprue.ir.shapes import DimExpr
    from sprue.trace.tracing import as_dim, dim_value
    param, operands = [], []
    for d in dims:
        if d is not None and not isinstance(d, DimExpr):
            d = as_dim(d)
        if isinstance(d, int):
            param.append(d)
        else:
            param.append(None)
            operands.append(dim_value(d))
    return tuple(param), operands


def broadcast_in_dim(x, shape, broadcast_dimensions):
    shape, sizes = _split_dims(shape)
    return _s.broadcast_in_dim_p.bind(x, *sizes, shape=shape, broadcast_dimensions=tuple(broadcast_dimensions),
                                      sharding=None)


def reshape(x, new_sizes):
    new_sizes, sizes = _split_dims(new_sizes)
    return _s.reshape_p.bind(x, *sizes, new_sizes=new_sizes, dimensions=None, sharding=None)


def transpose(x, permutation):
    return _s.transpose_p.bind(x, permutation=tuple(permutation))


def squeeze(x, dimensions):
    return _s.squeeze_p.bind(x, dimensions=tuple(dimensions))


def rev(x, dimensions):
    return _s.rev_p.bind(x, dimensions=tuple(dimensions))


def concatenate(xs, dimension: int):
    return _s.concatenate_p.bind(*xs, dimension=dimension)


def pad(x, padding_value, padding_config):
    return _s.pad_p.bind(x, padding_value, padding_config=tuple(tuple(c) for c in padding_config))


def slice(x, start_indices, limit_indices, strides=None):
    return _s.slice_p.bind(x, start_indices=tuple(start_indices), limit_indices=tuple(limit_indices),
                           strides=None if strides is None else tuple(strides))


def bind_dynamic_slice(x, start_indices, slice_sizes):
    """The dynamic_slice primitive itself: its sizes must provably fit the operand."""
    slice_sizes, sizes = _split_dims(slice_sizes)
    return _s.dynamic_slice_p.bind(x, *start_indices, *sizes, slice_sizes=slice_sizes)


def bind_dynamic_update_slice(x, update, start_indices):
    """The dynamic_update_slice primitive itself: the update must provably fit the operand."""
    return _s.dynamic_update_slice_p.bind(x, update, *start_indices)


def dynamic_slice(x, start_indices, slice_sizes):
    """x[start : start + size] per axis, starts clamped as JAX does. Sizes known only at run time
    are checked then, and never read outside x (see sprue.numpy._lax_dynamic)."""
    return _runtime_size_ops.dynamic_slice(x, start_indices, slice_sizes)


def dynamic_update_slice(x, update, start_indices):
    """x with `update` written at the clamped starts; sizes known only at run time are checked
    then, and never write outside x."""
    return _runtime_size_ops.dynamic_update_slice(x, update, start_indices)


def iota(dtype, size):
    return broadcasted_iota(dtype, (size,), 0)


def broadcasted_iota(dtype, shape, dimension: int):
    shape, sizes = _split_dims(shape)
    return _s.iota_p.bind(*sizes, dtype=_dtypes.canonicalize(dtype), shape=shape, dimension=dimension,
                          sharding=None)


def dot_general(lhs, rhs, dimension_numbers, preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dn, precision=None,
                              preferred_element_type=preferred_element_type, out_sharding=None)


def _reducer(p):
    def f(x, axes):
        return p.bind(x, axes=tuple(axes), out_sharding=None)
    f.__name__ = p.name
    return f


reduce_sum = _reducer(_r.reduce_sum_p); reduce_prod = _reducer(_r.reduce_prod_p)
reduce_max = _reducer(_r.reduce_max_p); reduce_min = _reducer(_r.reduce_min_p)
reduce_and = _reducer(_r.reduce_and_p); reduce_or = _reducer(_r.reduce_or_p)


def argmax(x, axis: int, index_dtype=np.int64):
    return _r.argmax_p.bind(x, axes=(axis,), index_dtype=_dtypes.canonicalize(index_dtype))


def argmin(x, axis: int, index_dtype=np.int64):
    return _r.argmin_p.bind(x, axes=(axis,), index_dtype=_dtypes.canonicalize(index_dtype))


def cumsum(x, axis: int = 0, reverse: bool = False):
    return _r.cumsum_p.bind(x, axis=axis, reverse=reverse)


def cumprod(x, axis: int = 0, reverse: bool = False):
    return _r.cumprod_p.bind(x, axis=axis, reverse=reverse)


def cummax(x, axis: int = 0, reverse: bool = False):
    return _r.cummax_p.bind(x, axis=axis, reverse=reverse)


def cummin(x, axis: int = 0, reverse: bool = False):
    return _r.cummin_p.bind(x, axis=axis, reverse=reverse)


def sort(operands, dimension: int = -1, is_stable: bool = True, num_keys: int = 1):
    single = not isinstance(operands, (tuple, list))
    ops = [operands] if single else list(operands)
    nd = np.ndim(ops[0]) if not hasattr(ops[0], "ndim") else ops[0].ndim
    outs = sort_p.bind(*ops, dimension=dimension % _builtins.max(nd, 1), is_stable=is_stable, num_keys=num_keys)
    return outs[0] if single else tuple(outs)


def gather(operand, indices, dimension_numbers, slice_sizes, mode=GatherScatterMode.CLIP, fill_value=None):
    return gather_p.bind(operand, indices, dimension_numbers=dimension_numbers, slice_sizes=tuple(slice_sizes),
                         indices_are_sorted=False, unique_indices=False, mode=mode, fill_value=fill_value)


def _scatterer(p):
    def f(operand, indices, updates, dimension_numbers, mode=GatherScatterMode.FILL_OR_DROP):
        return p.bind(operand, indices, updates, dimension_numbers=dimension_numbers, indices_are_sorted=False,
                      unique_indices=False, mode=mode, update_jaxpr=None, update_consts=())
    f.__name__ = p.name
    return f


scatter = _scatterer(scatter_p); scatter_add = _scatterer(scatter_add_p); scatter_mul = _scatterer(scatter_mul_p)
scatter_min = _scatterer(scatter_min_p); scatter_max = _scatterer(scatter_max_p)


# Structured control flow (JAX's spelling); the primitives are in control_flow.py, the tracing of
# bodies in sprue.control_flow. Imported last: that module uses the primitives defined above.
from sprue.lax.control_flow.api import cond, fori_loop, scan, switch, while_loop  # noqa: E402,F401
from sprue.lax.control_flow import rules as control_flow_rules  # noqa: E402,F401  (their jvp/vjp/batching/cost rules)
from sprue.lax.calls import pjit_p  # noqa: E402,F401  (calls of functions compiled as their own)


# the operations the tracer and the transformation interpreters stage (sprue.trace.tracing.LaxOps)
_lax_ops.add, _lax_ops.mul, _lax_ops.div, _lax_ops.rem = add, mul, div, rem
_lax_ops.convert_element_type, _lax_ops.broadcast_in_dim = convert_element_type, broadcast_in_dim
_lax_ops.transpose = transpose
