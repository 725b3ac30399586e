"""sprue.lax: the primitives, as functions (JAX's lax API). Each primitive's shape rule and numpy
reference rule are beside its definition in this package; its lowering is in sprue.lowering."""
from __future__ import annotations

from sprue.base.errors import missing_attribute as _missing_attribute
from sprue.lax import elementwise as _e
from sprue.lax import structural as _s
from sprue.lax._rules import runtime_size_ops as _runtime_size_ops
from sprue.lax.calls import pjit_p  # noqa: F401  (calls of functions compiled as their own)
from sprue.lax.checks import check, check_p  # noqa: F401
from sprue.lax.complex_numbers import *  # noqa: F401,F403  (real, imag, conj, complex; abs of complex)
from sprue.lax.control_flow import rules as control_flow_rules  # noqa: F401  (their jvp/vjp/batching/cost rules)
from sprue.lax.control_flow.api import cond, fori_loop, scan, switch, while_loop  # noqa: F401
from sprue.lax.control_flow.primitives import cond_p, for_loop_p, scan_p, while_p  # noqa: F401
from sprue.lax.convolution import *  # noqa: F401,F403  (conv_general_dilated)
from sprue.lax.custom_derivatives import custom_jvp_call_p, custom_vjp_call_p, remat_p, stop_gradient, stop_gradient_p  # noqa: F401
from sprue.lax.debugging import debug_print_p  # noqa: F401  (sprue.debug.print's primitive)
from sprue.lax.dimension_numbers import (  # noqa: F401
    ConvDimensionNumbers,
    GatherDimensionNumbers,
    GatherScatterMode,
    ScatterDimensionNumbers,
)
from sprue.lax.dot import dot_general, dot_general_p  # noqa: F401
from sprue.lax.elementwise import *  # noqa: F401,F403  (the *_p primitive objects and their functions)
from sprue.lax.filtering import filter, filter_p  # noqa: F401  (data-dependent shapes: a fresh size per result)
from sprue.lax.indexing import *  # noqa: F401,F403
from sprue.lax.linalg import *  # noqa: F401,F403  (sprue.numpy.linalg's factorizations and triangular solve)
from sprue.lax.random_bits import threefry2x32, threefry2x32_p  # noqa: F401
from sprue.lax.reductions import *  # noqa: F401,F403
from sprue.lax.rng_bit_generator import RNG_ALGORITHMS, rng_bit_generator  # noqa: F401  (XLA's generator, as JAX's CPU backend runs it)
from sprue.lax.scatter_reductions import (  # noqa: F401
    scatter_max,
    scatter_max_p,
    scatter_min,
    scatter_min_p,
    scatter_mul,
    scatter_mul_p,
)
from sprue.lax.sorting import sort, sort_p  # noqa: F401
from sprue.lax.special import *  # noqa: F401,F403  (erf, lgamma, ..., clz, bitcast_convert_type, nextafter)
from sprue.lax.special_gamma import *  # noqa: F401,F403  (igamma, igammac, bessel_i0e, bessel_i1e, ...)
from sprue.lax.special_series import betainc, polygamma, zeta  # noqa: F401
from sprue.lax.structural import *  # noqa: F401,F403
from sprue.lax.structural import _split_dims  # noqa: F401  (sprue.numpy._dims binds gathers with it)
from sprue.lax.windowed import reduce_window, select_and_gather_add, select_and_scatter_add  # noqa: F401
from sprue.trace.tracing import lax_ops as _lax_ops


def dynamic_slice(x, start_indices, slice_sizes):
    """x[start : start + size] per axis, starts clamped as JAX does. Sizes known only at run time
    are checked then, and never read outside x (see sprue.numpy._lax_dynamic)."""
    return _runtime_size_ops.dynamic_slice(x, start_indices, slice_sizes)


def dynamic_update_slice(x, update, start_indices):
    """x with `update` written at the clamped starts; sizes known only at run time are checked
    then, and never write outside x."""
    return _runtime_size_ops.dynamic_update_slice(x, update, start_indices)


# the operations the tracer and the transformation interpreters stage (sprue.trace.tracing.LaxOps)
_lax_ops.add, _lax_ops.mul, _lax_ops.div, _lax_ops.rem = _e.add, _e.mul, _e.div, _e.rem
_lax_ops.convert_element_type = _e.convert_element_type
_lax_ops.broadcast_in_dim, _lax_ops.transpose = _s.broadcast_in_dim, _s.transpose


def __getattr__(name: str):
    raise _missing_attribute('sprue.lax', name, globals())
