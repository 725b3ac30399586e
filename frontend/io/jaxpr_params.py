"""Translating JAX's primitive names and params (as parsed from a printed jaxpr) to sprue's.

Policy for params: a param sprue's primitive takes is converted and passed on (except those in
`RESET`, which only carry layout/precision/sharding hints: sprue uses its own default); a param
sprue's primitive does not take is ignored when it cannot change the result (`HARMLESS`) or when
its value is None (JAX's "default"); any other is an error naming it. Params JAX leaves out
(`shape` of broadcast_in_dim, `new_sizes` of reshape, `shape`/`dtype` of iota) come from the
equation's declared output type.
"""
from __future__ import annotations

import inspect

import numpy as np

from sprue.base import dtypes
from sprue.io.jaxpr_ast import Call, Ident, JaxprAST, Opaque
from sprue.ir.core import Primitive, shape_rules
from sprue.lax.dimension_numbers import (
    ConvDimensionNumbers,
    GatherDimensionNumbers,
    GatherScatterMode,
    ScatterDimensionNumbers,
)
from sprue.lax.elementwise import RoundingMethod

REQUIRED = object()

# JAX names -> sprue's primitive names (same meaning)
ALIASES = {
    "add_any": "add", "copy_p": "copy",
}

# primitives whose body is inlined: the param holding the called jaxpr
CALLS = {
    "pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
    "xla_call": "call_jaxpr", "remat": "jaxpr", "remat2": "jaxpr", "checkpoint": "jaxpr",
    "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr",
    "custom_jvp_call_jaxpr": "fun_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr",
}

# primitives that return their operands unchanged (hints to JAX's autodiff or partitioner)
IDENTITIES = {"optimization_barrier", "device_put", "sharding_constraint", "pvary",
              "mesh_cast", "reshard"}

# params sprue takes, but whose JAX value only affects layout, precision choice or sharding
RESET = {"sharding", "out_sharding", "precision", "accuracy", "indices_are_sorted", "unique_indices",
         "update_jaxpr", "update_consts",
         "unroll", "_split_transpose"}

# params sprue does not take that cannot change what a program computes
HARMLESS = RESET | {
    "linear", "name", "inline", "keep_unused", "donated_invars", "in_shardings", "out_shardings",
    "in_layouts", "out_layouts", "resource_env", "ctx_mesh", "compiler_options_kvs", "jvp_jaxpr_fun",
    "jvp_jaxpr_thunk", "num_consts", "symbolic_zeros", "bwd", "fwd_jaxpr_thunk", "out_trees",
    "input_shape", "update_jaxpr", "update_consts", "differentiated", "prevent_cse", "policy", "concrete",
    "algorithm", "transpose_algorithm", "copy_semantics", "devices", "srcs", "debug_info",
    "branches_platforms",   # cond's branch per platform: the index operand (platform_index) already chose
}

# optional params left out when the text does not give them (sprue's own tracing omits them too)
NO_FILL = {"nimplicit", "preserve_dimensions", "apply_reverse_transform"}

# Params JAX's printer leaves out (broadcast_in_dim's empty broadcast_dimensions, its shape and every
# sharding "implied by the let binder type", JAX's printers say) or that older versions did not
# have (scan's `linear`): {(primitive, param): value from (operands' avals, declared output avals)}.
# Params of any primitive named like a shape or a dtype come from the declared output type
# (Evaluator.params); these are the rest, each JAX's default.
OMITTED = {
    ("broadcast_in_dim", "broadcast_dimensions"): lambda ins, outs: (),
    ("scan", "linear"): lambda ins, outs: (False,) * len(ins),
    ("scan", "reverse"): lambda ins, outs: False,
    ("scan", "num_consts"): lambda ins, outs: 0,
    ("while", "cond_nconsts"): lambda ins, outs: 0,
    ("while", "body_nconsts"): lambda ins, outs: 0,
    ("for_loop", "body_nconsts"): lambda ins, outs: 0,
    ("pjit", "name"): lambda ins, outs: "jit",
    ("iota", "dimension"): lambda ins, outs: 0,
    ("sort", "dimension"): lambda ins, outs: len(ins[0].shape) - 1,
    ("concatenate", "dimension"): lambda ins, outs: next(
        (k for k, (a, b) in enumerate(zip(ins[0].shape, outs[0].shape)) if a != b), 0),
    ("cumsum", "axis"): lambda ins, outs: 0, ("cumprod", "axis"): lambda ins, outs: 0,
    ("cummax", "axis"): lambda ins, outs: 0, ("cummin", "axis"): lambda ins, outs: 0,
    ("dynamic_slice", "slice_sizes"): lambda ins, outs: tuple(outs[0].shape),
}

# params named like these take the declared output type's shape, or its element type
SHAPE_PARAMS = {"shape", "new_sizes"}
DTYPE_PARAMS_FROM_OUT = {"dtype", "new_dtype", "index_dtype"}

# params of rules that take **params
_EXTRA_PARAMS = {"round": {"rounding_method": RoundingMethod.AWAY_FROM_ZERO}, "integer_pow": {"y": REQUIRED}}

_DTYPE_PARAMS = {"new_dtype", "dtype", "index_dtype", "preferred_element_type"}

_DTYPE_NAMES = {
    "float64": "float64", "float32": "float32", "float16": "float16", "int64": "int64", "int32": "int32",
    "int16": "int16", "int8": "int8", "uint64": "uint64", "uint32": "uint32", "uint16": "uint16",
    "uint8": "uint8", "bool": "bool", "bool_": "bool", "f64": "float64", "f32": "float32", "f16": "float16",
    "i64": "int64", "i32": "int32", "i16": "int16", "i8": "int8", "u64": "uint64", "u32": "uint32",
    "u16": "uint16", "u8": "uint8", "complex64": "complex64", "complex128": "complex128", "c64": "complex64",
    "c128": "complex128",
    # bfloat16 is carried in float32, rounded after each equation (jaxpr_eval's BF16)
    "bfloat16": "float32", "bf16": "float32",
}

# params whose value is an integer, and params whose value is a tuple of integers (possibly nested:
# padding_config; None and names stand for dynamic sizes): a float or a bool there is an error
INT_PARAMS = {"y", "axis", "dimension", "body_nconsts", "cond_nconsts", "length", "num_carry", "num_consts",
              "num_keys", "nimplicit"}
INT_TUPLE_PARAMS = {"axes", "broadcast_dimensions", "dimensions", "limit_indices", "new_sizes", "permutation",
                    "shape", "slice_sizes", "start_indices", "strides", "padding_config", "sizes"}
_INT64_MAX = 2 ** 63 - 1


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -_INT64_MAX - 1 <= v <= _INT64_MAX


def _is_int_tuple(v) -> bool:
    if isinstance(v, tuple):
        return all(x is None or isinstance(x, str) or _is_int(x) or _is_int_tuple(x) for x in v)
    return False


_ENUMS = {"GatherScatterMode": GatherScatterMode, "RoundingMethod": RoundingMethod}
_DIM_NUMBERS = {"ConvDimensionNumbers": ConvDimensionNumbers, "GatherDimensionNumbers": GatherDimensionNumbers, "ScatterDimensionNumbers": ScatterDimensionNumbers}


def sprue_params(p: Primitive) -> dict:
    """{param: default or REQUIRED} of sprue's primitive p, read from its shape rule."""
    if p.name in _EXTRA_PARAMS:
        return dict(_EXTRA_PARAMS[p.name])
    out = {}
    for k, v in inspect.signature(shape_rules[p]).parameters.items():
        if v.kind == v.KEYWORD_ONLY or (v.kind == v.POSITIONAL_OR_KEYWORD and v.default is not v.empty):
            out[k] = REQUIRED if v.default is v.empty else v.default
    return out


def dtype_of_name(name: str):
    """`float32`, `np.float32`, `jnp.int32`, `f32` -> a numpy dtype; None if not a dtype name."""
    base = name.rsplit(".", 1)[-1] if name.split(".", 1)[0] in ("np", "numpy", "jnp", "jax.numpy") else name
    full = _DTYPE_NAMES.get(base)
    return np.dtype(full) if full else None


def convert_value(v, jaxpr_fn, error):
    """A parsed param value as a Python value: tuples for lists, numpy dtypes, enums, dimension
    numbers, Python scalars for numpy scalars, ClosedJaxprs (jaxpr_fn) for jaxprs."""
    if isinstance(v, JaxprAST):
        return jaxpr_fn(v)
    if isinstance(v, (tuple, list)):
        return tuple(convert_value(x, jaxpr_fn, error) for x in v)
    if isinstance(v, Ident):
        dt = dtype_of_name(v.name)
        if dt is not None:
            return dt
        head, _, tail = v.name.rpartition(".")
        if head.rsplit(".", 1)[-1] in _ENUMS:
            try:
                return _ENUMS[head.rsplit(".", 1)[-1]][tail]
            except KeyError:
                raise error(f"unknown {head} member '{tail}'", v.tok) from None
        jaxpr = jaxpr_fn(v)  # a shared jaxpr's name, or None
        return jaxpr if jaxpr is not None else v.name
    if isinstance(v, Call):
        base = v.name.rsplit(".", 1)[-1]
        args = [convert_value(a, jaxpr_fn, error) for a in v.args]
        kwargs = {k: convert_value(a, jaxpr_fn, error) for k, a in v.kwargs.items()}
        if base == "dtype" and len(args) == 1 and isinstance(args[0], str):
            return np.dtype(args[0])
        if dtype_of_name(v.name) is not None and len(args) == 1:
            return np.asarray(args[0], dtype_of_name(v.name))[()].item()
        if base in _DIM_NUMBERS:
            try:
                return _DIM_NUMBERS[base](*args, **{k: tuple(a) for k, a in kwargs.items()})
            except TypeError as e:
                raise error(f"bad {base}: {e}", v.tok) from None
        return Opaque(f"{v.name}(...)", v.tok)
    if isinstance(v, np.generic):
        return v.item()
    return v


def convert_param(prim: str, k: str, v, tok, error):
    """Param-specific conversions after convert_value."""
    if k in INT_PARAMS and v is not None and not _is_int(v):
        raise error(f"{prim}: param {k}={v!r} must be an integer", tok)
    if k in INT_TUPLE_PARAMS and v is not None and not _is_int_tuple(v):
        raise error(f"{prim}: param {k}={v!r} must be a tuple of integers", tok)
    if k in _DTYPE_PARAMS and v is not None:
        if isinstance(v, str):
            dt = dtype_of_name(v)
            if dt is None:
                raise error(f"{prim}: param {k}={v} is not a dtype", tok)
            v = dt
        try:
            return dtypes.canonicalize(v)
        except Exception as e:
            raise error(f"{prim}: param {k}: {e}", tok) from None
    if k == "mode" and prim in ("gather", "scatter", "scatter-add", "scatter-mul", "scatter-min", "scatter-max"):
        if isinstance(v, int):
            return GatherScatterMode(v)
        if isinstance(v, str):
            key = v.rsplit(".", 1)[-1].upper()
            if key in GatherScatterMode.__members__:
                return GatherScatterMode[key]
            raise error(f"{prim}: unknown mode {v}", tok)
        return v
    if k == "rounding_method":
        return RoundingMethod(v) if isinstance(v, int) else v
    return v
