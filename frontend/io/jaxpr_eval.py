"""Evaluating a parsed jaxpr (the AST of jaxpr_ast, made by jaxpr_parser) by binding sprue's primitives under a trace.

Every equation goes through `Primitive.bind`, so sprue's shape rules re-check the program and
the result is a ClosedJaxpr built exactly like a traced one; each equation's declared output types
are then compared with the computed ones. Calls (`pjit`, `closed_call`, `custom_jvp_call`, ...) are
inlined; nested jaxprs of control flow are traced into ClosedJaxprs of their own, whose parameters
that hold an operand unchanged (a loop body's consts) stand for the operand's size, as in a traced
body (control_flow.primitives.invariant_parameters).
"""
from __future__ import annotations

import numpy as np

from sprue import lax
from sprue.base import dtypes
from sprue.base.errors import SprueError, SprueMemoryError, at
from sprue.base.source_info import user_frame_summary
from sprue.io import jaxpr_compat, jaxpr_linalg, jaxpr_random
from sprue.io.jaxpr_ast import Binder, Call, Ident, JaxprAST, Lit, Program, TypeAST, VarRef
from sprue.io.jaxpr_closures import HOISTING, called_constvars, captures, hoisted, leading_constvars
from sprue.io.jaxpr_lexer import JaxprError, JaxprUnsupportedError
from sprue.io.jaxpr_params import (
    ALIASES,
    CALLS,
    DTYPE_PARAMS_FROM_OUT,
    HARMLESS,
    IDENTITIES,
    NO_FILL,
    OMITTED,
    REQUIRED,
    RESET,
    SHAPE_PARAMS,
    convert_param,
    convert_value,
    sprue_params,
)
from sprue.ir.core import ShapedArray, aval_of_value, primitives
from sprue.ir.shapes import DimExpr, dim_out_of_range, format_dim, prove_equal
from sprue.ir.shapes import dim as dim_of
from sprue.lax.control_flow.primitives import invariant_parameters
from sprue.lax.dimension_numbers import GatherDimensionNumbers, ScatterDimensionNumbers
from sprue.trace.tracing import Tracer, as_dim, current_builder, trace_scope

# what to do about constvars, which JAX's printer prints without their values
CONSTS_ADVICE = (
    "JAX's printer drops the values of constants (JAX >= 0.7 hoists array constants such as index arrays and"
    " polynomial coefficients into constvars). Give sprue a form that keeps them: export the function"
    " with jax.export (open(path, 'wb').write(jax.export.export(jax.jit(f))(*args).serialize()),"
    " then sprue.load or `sprue compile` the .jax_exported file), or its StableHLO text"
    " (jax.jit(f).lower(*args).as_text()); or save it with sprue.save, or pass the constants in as"
    " arguments before printing the jaxpr")

# bfloat16 inside a program: carried in float32 and rounded to bfloat16's 8 exponent and 7 mantissa
# bits after every equation that declares a bf16 result, as the jaxpr's types say (XLA's CPU backend
# computes bf16 ops in f32 too, its float-normalization pass, but may keep f32 across a fusion, so the
# results agree with JAX's to bfloat16's precision, not bit for bit). Arguments and results of the
# program are passed as their bits (BF16_BITS, below).
BF16 = "bf16"
_BF16_BITS = {"exponent_bits": 8, "mantissa_bits": 7}


def _round_bf16(value):
    """value (a float32 tracer or numpy scalar) rounded to the nearest bfloat16, ties to even."""
    if isinstance(value, Tracer):
        return jaxpr_compat.reduce_precision([value], _BF16_BITS, None)[0]
    bits = np.asarray(value, np.float32).view(np.uint32)
    bits = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return np.where(np.isnan(value), value, bits.view(np.float32)).astype(np.float32)[()]


# primitives of JAX read as computations in sprue's (each module says why)
REWRITES = {**jaxpr_compat.REWRITES, **jaxpr_linalg.REWRITES}
# control flow carries key arrays as it carries any array: their binders in the nested jaxprs are read
# as the keys' words too (Evaluator.aval), so the loop or branch needs no change of its params
CONTROL_FLOW = {"while", "scan", "cond"}


def _kind(dt) -> str:
    return "b" if dtypes.is_bool(dt) else ("f" if dtypes.is_float(dt) else "i")


def _lit_kind(text: str) -> str:
    if text in ("True", "False"):
        return "b"
    if text.endswith(("j", "j)")):
        return "c"
    if any(c in text for c in ".eE") or text.lstrip("-") in ("inf", "nan"):
        return "f"
    return "i"


class Evaluator:
    def __init__(self, prog: Program):
        self.prog = prog
        self.called_consts: dict[int, object] = {}   # id of a called jaxpr's constvar -> the parameter holding it
        self.filename = prog.filename

    # -- errors -------------------------------------------------------------------------------
    def error(self, msg: str, tok=None, cls=JaxprError):
        return cls(msg, self.filename, tok.line if tok else 0, tok.col if tok else 0)

    def unsupported(self, msg: str, tok=None):
        return self.error(msg, tok, JaxprUnsupportedError)

    # -- types --------------------------------------------------------------------------------
    def dtype(self, t: TypeAST):
        if t.dtype == BF16:
            return dtypes.float32
        try:
            return dtypes.from_short_name(t.dtype)
        except SprueError:
            raise self.unsupported(f"element type '{t.dtype}' is not supported by sprue", t.tok) from None

    def dim(self, d, env):
        kind = d[0]
        if kind == "int":
            return d[1]
        if kind == "name":
            v = env.get(d[1])
            if v is None:
                raise self.error(f"dimension '{d[1]}' is not a variable bound before this type", d[2])
            if isinstance(v, Tracer):
                return as_dim(v)
            return int(v)
        if kind == "neg":
            return -self.dim(d[1], env)
        a, b = self.dim(d[1], env), self.dim(d[2], env)
        if kind == "add":
            return a + b
        if kind == "sub":
            return a - b
        if kind == "mul":
            return a * b
        if not isinstance(b, int) or b <= 0:
            raise _DimError(f"the divisor of '{'//' if kind == 'floordiv' else '%'}' must be a positive integer,"
                            f" got {b}")
        if kind == "floordiv":
            return a // b
        return a % b

    def shape(self, t: TypeAST, env) -> tuple:
        """The dims of a type: each a non-negative int or a size expression (DimExpr); any other
        value (a negative size, a division by zero, an expression sprue cannot represent) is a
        JaxprError at the type."""
        out = []
        for k, d in enumerate(t.dims):
            try:
                v = self.dim(d, env)
            except JaxprError:
                raise
            except (_DimError, SprueError, ArithmeticError, TypeError, ValueError) as e:
                raise self.error(f"dimension {k} of the type {t.dtype}[...]: {e}", t.tok) from None
            if isinstance(v, bool) or not isinstance(v, (int, DimExpr)):
                raise self.error(f"dimension {k} of the type {t.dtype}[...] is not a size (it evaluates to"
                                 f" {type(v).__name__})", t.tok)
            if isinstance(v, int) and v < 0:
                raise self.error(f"dimension {k} of the type {t.dtype}[...] is negative ({v})", t.tok)
            if dim_out_of_range(v) is not None:   # sizes are int64 (shapes.MAX_DIM)
                raise self.error(f"dimension {k} of the type {t.dtype}[...] does not fit in int64"
                                 f" ({format_dim(v)})", t.tok)
            out.append(v)
        return tuple(out)

    def aval(self, t: TypeAST | None, env, binder_tok=None) -> ShapedArray:
        if t is None:
            raise self.unsupported("a variable without a type (JAX before 0.4 printed untyped jaxprs); sprue"
                                   " reads typed jaxprs only", binder_tok)
        if t.dtype.startswith("key<"):   # a PRNG key array: its uint32 words on a last axis (jaxpr_random)
            tag = t.dtype[4:-1]
            if not jaxpr_random.key_impl_supported(tag):
                raise self.unsupported(f"the key type '{t.dtype}' is not supported; sprue implements JAX's PRNGs"
                                       f" {', '.join(f'key<{k}>' for k in sorted(jaxpr_random.KEY_WORDS))}", t.tok)
            return ShapedArray((*self.shape(t, env), jaxpr_random.key_words(tag)), np.dtype(np.uint32))
        return ShapedArray(self.shape(t, env), self.dtype(t))

    def check_type(self, what: str, t: TypeAST | None, value, env, tok):
        if t is None:
            return
        actual = value.aval if isinstance(value, Tracer) else aval_of_value(value)
        declared = self.aval(t, env)
        ok = actual.dtype == declared.dtype and actual.ndim == declared.ndim and all(
            (a == b) or prove_equal(a, b) is True for a, b in zip(actual.shape, declared.shape))
        if not ok:
            raise self.error(f"{what} is declared {_fmt(declared)} but sprue computes {_fmt(actual)}", tok)

    # -- atoms --------------------------------------------------------------------------------
    def literal(self, lit: Lit, dtype=None):
        if lit.type is not None:
            if lit.type.dims:
                raise self.error("a literal must be a scalar", lit.tok)
            dtype = self.dtype(lit.type)
            if lit.type.dtype == BF16:
                return _round_bf16(self.literal(Lit(lit.text, None, lit.tok), dtype))
        kind = _lit_kind(lit.text)
        if dtype is None:
            dtype = {"b": dtypes.bool_, "f": dtypes.float64, "i": dtypes.int64, "c": dtypes.complex128}[kind]
        if kind == "b":
            value = lit.text == "True"
        elif kind == "c":
            value = complex(lit.text)
        elif kind == "f":
            value = float(lit.text)
        else:
            value = int(lit.text)
        try:
            if dtypes.is_int(dtype) and kind == "f":
                if not float(value).is_integer():
                    raise ValueError
                value = int(value)
            with np.errstate(over="raise"):
                return np.asarray(value, dtype)[()] if not dtypes.is_int(dtype) else _int_scalar(value, dtype)
        except (ValueError, OverflowError, FloatingPointError):
            raise self.error(f"literal {lit.text} does not fit {dtypes.short_name(dtype)}", lit.tok) from None

    def args(self, e, env):
        vals, untyped = [], []
        for a in e.args:
            if isinstance(a, VarRef):
                if a.name not in env:
                    raise self.error(f"variable '{a.name}' is not defined", a.tok)
                vals.append(env[a.name])
            elif a.type is None:
                untyped.append(len(vals))
                vals.append(None)
            else:
                vals.append(self.literal(a))
        called = self._called(e) if untyped and e.prim in CALLS else None
        for i in untyped:   # older JAX printed literals untyped: take the type from the equation
            lit = e.args[i]
            kind = _lit_kind(lit.text)
            if called is not None and i < len(called.invars) and called.invars[i].type is not None \
                    and not called.invars[i].type.dims:   # a call's operand: the called jaxpr's parameter type
                vals[i] = self.literal(lit, self.dtype(called.invars[i].type))
                continue
            cands = [np.dtype(v.aval.dtype) if isinstance(v, Tracer) else np.asarray(v).dtype
                     for v in vals if v is not None]
            cands += [self.dtype(b.type) for b in e.outs if b.type is not None]
            dt = next((d for d in cands if _kind(d) == kind), None)
            if dt is None and kind == "i":   # an index beside float operands: JAX's default int of their width
                dt = dtypes.int32 if any(np.dtype(d).itemsize <= 4 for d in cands) else None
            vals[i] = self.literal(lit, dt)
        return vals

    # -- jaxprs -------------------------------------------------------------------------------
    def shared(self, name_or_ast, tok=None) -> JaxprAST | None:
        if isinstance(name_or_ast, JaxprAST):
            return name_or_ast
        if isinstance(name_or_ast, Ident):
            return self.prog.shared.get(name_or_ast.name)
        return None

    def no_consts(self, ast: JaxprAST, what: str):
        if ast.constvars and not all(id(b) in self.called_consts for b in ast.constvars):
            raise self.error(f"{what} has constvars ({', '.join(b.name or '_' for b in ast.constvars)}) whose"
                             f" values the text does not give: {CONSTS_ADVICE}", ast.tok)

    def bind_consts(self, ast: JaxprAST, env: dict) -> None:
        """A called jaxpr's constvars bound to the program's parameters that hold them (build)."""
        for binder in ast.constvars:
            if binder.name is not None:
                env[binder.name] = self.called_consts[id(binder)]

    def trace_closed(self, ast: JaxprAST, operands: dict | None = None):
        """A nested jaxpr as a ClosedJaxpr (no consts), traced in a scope of its own. `operands`
        maps a parameter's index to the operand of the enclosing equation it holds unchanged
        (control_flow.primitives.invariant_parameters): such a size parameter binds the operand's
        dimension variable, not a fresh one, as tracing the body would have (`a:i64[] b:f64[a]` in
        a loop body given `n`: b's type is f64[n], the operand's)."""
        self.no_consts(ast, "a nested jaxpr")
        operands = operands or {}
        with trace_scope() as b:
            env, aliased = {}, []
            self.bind_consts(ast, env)
            for k, binder in enumerate(ast.invars):
                t = b.new_arg(self.aval(binder.type, env, binder.tok))
                if k in operands:
                    aliased.append((t, operands[k]))
                    _bind_operand_dim(b, t, operands[k], aliased)
                if binder.name is not None:
                    env[binder.name] = t
            outs = self.run(ast, env)
            closed = b.finish(outs)
        held = {id(v) for v in self.called_consts.values()}
        if not all(id(c) in held for c in closed.consts):
            raise self.error("a nested jaxpr uses values from outside it", ast.tok)
        return closed   # consts: the parameters holding called jaxprs' constvars (Evaluator.apply hoists them)

    def inline(self, ast: JaxprAST, args, tok):
        """A called jaxpr's outputs for the given operands, its equations added to the current trace."""
        self.no_consts(ast, "a called jaxpr")
        if len(args) != len(ast.invars):
            raise self.error(f"the called jaxpr takes {len(ast.invars)} operands, got {len(args)}", tok)
        env = {}
        self.bind_consts(ast, env)
        for binder, a in zip(ast.invars, args):
            if binder.name is not None:
                env[binder.name] = a
        for binder, a in zip(ast.invars, args):
            self.check_type(f"parameter '{binder.name}'", binder.type, a, env, binder.tok)
        return self.run(ast, env)

    def run(self, ast: JaxprAST, env: dict) -> list:
        sizes = _dim_names([*ast.constvars, *ast.invars, *(b for e in ast.eqns for b in e.outs)])
        for e in ast.eqns:
            self.eqn(e, env, sizes)
        outs = []
        for a in ast.outs:
            if isinstance(a, VarRef):
                if a.name not in env:
                    raise self.error(f"variable '{a.name}' is not defined", a.tok)
                outs.append(env[a.name])
            else:
                outs.append(self.literal(a))
        return outs

    # -- equations ----------------------------------------------------------------------------
    def eqn(self, e, env, sizes=frozenset()):
        args = self.args(e, env)
        builder = current_builder()
        n0 = len(builder.eqns)
        try:
            outs = self.apply(e, args, env)
        except JaxprError:
            raise
        except SprueMemoryError as ex:   # an array too large for memory stays a MemoryError, located in the text
            raise SprueMemoryError(f"{self.filename}:{e.tok.line}:{e.tok.col}: {ex}") from None
        except SprueError as ex:
            raise self.error(_rule_message(e.prim, ex), e.tok) from None
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, StopIteration, ArithmeticError) as ex:
            # a rule met operands or params it cannot take (wrong arity, a malformed param)
            raise self.error(f"{e.prim} cannot take these operands/params ({len(args)} operands,"
                             f" params {sorted(e.params)}): {type(ex).__name__}: {ex}", e.tok) from None
        for k, v in enumerate(outs):
            bad = _bad_dim(v.aval.shape) if isinstance(v, Tracer) else None
            if bad is not None:
                raise self.error(f"{e.prim}: output {k} would have the size {bad!r}, not a non-negative integer"
                                 f" (check the params {sorted(e.params)})", e.tok)
        where = f"{self.filename}:{e.tok.line}"
        for eq in builder.eqns[n0:]:
            if not (eq.source_info or "").startswith(f"{self.filename}:"):
                eq.source_info = where
        if len(outs) != len(e.outs) and e.outs:
            raise self.error(f"{e.prim} gives {len(outs)} results, the text declares {len(e.outs)}", e.tok)
        outs = [_round_bf16(v) if b.type is not None and b.type.dtype == BF16 else v for b, v in zip(e.outs, outs)]
        for b, v in zip(e.outs, outs):
            env[b.name if b.name is not None else "_"] = v   # JAX >= 0.7 may return a `_` binder
            if b.name in sizes and isinstance(v, Tracer) and v.aval.shape == () and v.aval.dtype == dtypes.int64 \
                    and v.dim_expr is None:
                as_dim(v)   # a size the types name: its variable is bound where it is made, as the tracer had it
        for k, (b, v) in enumerate(zip(e.outs, outs)):
            self.check_type(f"output {k} of {e.prim}", b.type, v, env, b.tok)

    def apply(self, e, args, env) -> list:
        name = e.prim
        if name in CALLS:
            ast = self._called(e)
            return self.inline(ast, args, e.tok)
        if name in IDENTITIES:
            return list(args)
        if name in jaxpr_random.FORMS:
            return jaxpr_random.apply(name, args, lambda k: self._convert(e, k), lambda m: self.unsupported(m, e.tok),
                                      jaxpr_random.key_tag(b.type for b in e.outs))
        if name in REWRITES:
            params = {k: self._convert(e, k) for k in e.params}
            try:
                return REWRITES[name](args, params, self._out_avals(e, env))
            except NotImplementedError as ex:
                raise self.unsupported(f"{name}: {ex} is not supported", e.tok) from None
        if name in jaxpr_compat.INDEXING and self._empty_results(e, env):
            # nothing to read or write: an empty gather's windows may not fit its empty operand, which
            # StableHLO refuses (vmap over a batch of 0 matrices)
            return [np.zeros(a.shape, a.dtype) for a in self._out_avals(e, env)]
        if name == "custom_linear_solve":
            return self._custom_linear_solve(e, args)
        if name == "scatter" and self._applies(e):
            f = self.shared(e.params["update_jaxpr"].value)
            try:
                return jaxpr_compat.scatter_apply(args, {k: self._convert(e, k) for k in e.params if k != "update_jaxpr"},
                                                  lambda old, new: self.inline(f, [old, new], e.tok)[0])
            except NotImplementedError as ex:
                raise self.unsupported(f"{name}: {ex} is not supported", e.tok) from None
        if name == "while" and self._batched_predicate(e):
            return self._while_batched(e, args)
        if name in jaxpr_compat.BROADCASTING:
            args = jaxpr_compat.broadcast_operands(args)
        if "out_dtype" in e.params and e.params["out_dtype"].value is not None:
            args = jaxpr_compat.with_out_dtype(args, self._convert(e, "out_dtype"))
        if name == "pow" and len(args) == 2:
            args = self._same_dtype_exponent(args)
        p = primitives.get(ALIASES.get(name, name))
        if p is None:
            why = jaxpr_compat.REFUSED.get(name)
            raise self.unsupported(f"primitive '{name}' is not supported: {why}" if why else
                                   f"unknown primitive '{name}'", e.tok)
        args, params = self._for_sprue(e, args, self.params(p, e, env, args))
        if name == "sort" and jaxpr_compat.any_complex(args):
            return jaxpr_compat.sort_complex(args, params)
        if name in jaxpr_compat.ACCUMULATING and jaxpr_compat.half_operands(args):
            return [jaxpr_compat.accumulated_in_f32(p, args, params)]
        out = p.bind(*args, **params)
        return list(out) if p.multiple_results else [out]

    def _for_sprue(self, e, args: list, params: dict) -> tuple[list, dict]:
        """The operands and params of sprue's primitive for JAX's: captures hoisted, key arrays as their
        words, a reshape's `dimensions` as a transpose, batching dims as indices."""
        name = e.prim
        if captures(params):   # a called jaxpr's constvars inside a branch or a loop body (jaxpr_closures)
            if name not in HOISTING:
                raise self.unsupported(f"{name}: a jaxpr in its params calls a jaxpr with constvars, which sprue"
                                       f" reads inside {', '.join(sorted(HOISTING))} and calls only", e.tok)
            args, params = hoisted(name, args, params)
        if name not in CONTROL_FLOW and jaxpr_random.makes_keys(b.type for b in e.outs):
            args, params = jaxpr_random.for_key_arrays(name, args, params, lambda m: self.unsupported(m, e.tok),
                                                       jaxpr_random.key_words(jaxpr_random.key_tag(b.type for b in e.outs)))
        if name == "reshape":
            args, params = jaxpr_compat.reshape_dimensions(args, params)
        if isinstance(params.get("dimension_numbers"), (GatherDimensionNumbers, ScatterDimensionNumbers)):
            args, params = jaxpr_compat.unbatch_indices(name, args, params)
        return args, params

    def _applies(self, e) -> bool:
        """A `scatter` whose update_jaxpr computes something (x.at[i].apply(f)), not one returning the update."""
        f = self.shared(e.params["update_jaxpr"].value) if "update_jaxpr" in e.params else None
        if f is None or len(f.invars) != 2:
            return False
        return not (len(f.outs) == 1 and isinstance(f.outs[0], VarRef) and f.outs[0].name == f.invars[1].name)

    def _custom_linear_solve(self, e, args) -> list:
        """`custom_linear_solve[const_lengths jaxprs]` (jnp.linalg.solve, jax.scipy.sparse.linalg): the
        value is its `solve` jaxpr applied to its consts and the right-hand sides. The other jaxprs
        (matvec, vecmat, transpose_solve) serve JAX's derivatives, which a printed program already
        spells out (a transposed solve is another custom_linear_solve with the roles exchanged)."""
        lengths, jaxprs = (e.params[k].value if k in e.params else None for k in ("const_lengths", "jaxprs"))
        if not isinstance(lengths, Call) or not isinstance(jaxprs, Call) or "solve" not in jaxprs.kwargs:
            raise self.error("custom_linear_solve needs the params const_lengths=_LinearSolveTuple(...) and"
                             " jaxprs=_LinearSolveTuple(..., solve=..., ...)", e.tok)
        counts = [convert_value(lengths.kwargs.get(k, 0), lambda v: None, self.error)
                  for k in ("matvec", "vecmat", "solve", "transpose_solve")]
        if not all(isinstance(c, int) and c >= 0 for c in counts) or sum(counts) > len(args):
            raise self.error(f"custom_linear_solve: const_lengths {counts} do not fit its {len(args)} operands", e.tok)
        solve = self.shared(jaxprs.kwargs["solve"])
        if solve is None:
            raise self.error("custom_linear_solve: its solve is not a jaxpr", e.tok)
        start = counts[0] + counts[1]
        return self.inline(solve, [*args[start:start + counts[2]], *args[sum(counts):]], e.tok)

    def _batched_predicate(self, e) -> bool:
        """Whether a while's cond_jaxpr returns an array of bools (JAX's vmap of a while loop whose
        predicate depends on the mapped axis)."""
        ast = self.shared(e.params["cond_jaxpr"].value) if "cond_jaxpr" in e.params else None
        if ast is None or len(ast.outs) != 1 or not isinstance(ast.outs[0], VarRef):
            return False
        name = ast.outs[0].name
        binders = [*ast.invars, *(b for q in ast.eqns for b in q.outs)]
        typ = next((b.type for b in reversed(binders) if b.name == name), None)
        return typ is not None and bool(typ.dims)

    def _while_batched(self, e, args) -> list:
        """A while whose predicate is an array (JAX's batched while, lowered by JAX as: loop while
        any element's predicate holds, and keep the carries of the elements whose predicate is false,
        which lead every carry's shape) as sprue's while of reduce_or and a select per carry."""
        cond_ast, body_ast = self.shared(e.params["cond_jaxpr"].value), self.shared(e.params["body_jaxpr"].value)
        nc, nb = (self._convert(e, k) if k in e.params else 0 for k in ("cond_nconsts", "body_nconsts"))
        cconsts, bconsts, init = args[:nc], args[nc:nc + nb], args[nc + nb:]

        def pred(carry):
            p, = self.inline(cond_ast, [*cconsts, *carry], e.tok)
            return p

        def body(carry):
            p, new = pred(carry), self.inline(body_ast, [*bconsts, *carry], e.tok)
            out = []
            for old, value in zip(carry, new):
                shape = tuple(value.aval.shape) if isinstance(value, Tracer) else np.shape(value)
                keep = lax.broadcast_in_dim(p, shape, tuple(range(p.aval.ndim)))
                out.append(lax.select_n(keep, old, value))
            return tuple(out)

        def cond(carry):
            p = pred(carry)
            return lax.reduce_or(p, tuple(range(p.aval.ndim)))
        return list(lax.while_loop(cond, body, tuple(init)))

    def _empty_results(self, e, env) -> bool:
        avals = [self.aval(b.type, env, b.tok) for b in e.outs if b.type is not None]
        return len(avals) == len(e.outs) > 0 and all(any(isinstance(d, int) and d == 0 for d in a.shape)
                                                     for a in avals)

    def _out_avals(self, e, env) -> list[ShapedArray]:
        """The declared output types (each needed: a rewrite or an omitted param reads them)."""
        if any(b.type is None for b in e.outs):
            raise self.error(f"{e.prim}: the output types are needed to read this equation", e.tok)
        return [self.aval(b.type, env, b.tok) for b in e.outs]

    def _called(self, e) -> JaxprAST:
        key = CALLS[e.prim]
        for k in (key, "jaxpr", "call_jaxpr", "fun_jaxpr"):
            if k in e.params:
                ast = self.shared(e.params[k].value)
                if ast is None:
                    raise self.error(f"{e.prim}: param {k} is not a jaxpr (or the name of a shared one)",
                                     e.params[k].tok)
                return ast
        raise self.error(f"{e.prim} has no '{key}' param", e.tok)

    def _out_shape(self, e, env):
        if len(e.outs) != 1 or e.outs[0].type is None:
            raise self.error(f"{e.prim}: the output type is needed to know its shape", e.tok)
        return self.shape(e.outs[0].type, env)

    def _same_dtype_exponent(self, args):
        x, y = args
        dx = x.aval.dtype if isinstance(x, Tracer) else np.asarray(x).dtype
        dy = y.aval.dtype if isinstance(y, Tracer) else np.asarray(y).dtype
        if dx != dy:
            y = lax.convert_element_type(y, dx) if isinstance(y, Tracer) else np.asarray(y, dx)[()]
        return [x, y]

    def _convert(self, e, k, operands: dict | None = None):
        if k not in e.params:
            raise self.error(f"{e.prim} needs the param '{k}'", e.tok)
        prm = e.params[k]
        v = convert_value(prm.value, lambda x: self._jaxpr_value(x, operands), self.error)
        return convert_param(e.prim, k, v, prm.tok, self.error)

    def _jaxpr_value(self, v, operands: dict | None = None):
        ast = self.shared(v)
        return None if ast is None else self.trace_closed(ast, operands)

    def _invariant_operands(self, p, e, args) -> dict[str, dict]:
        """{jaxpr param: {parameter index: operand}}: the nested jaxprs' parameters that hold an
        operand of this equation unchanged (see trace_closed)."""
        found = invariant_parameters(p, lambda k: self._convert(e, k) if k in e.params else None, len(args))
        return {k: {i: args[j] for i, j in m.items()} for k, m in found.items()}

    def params(self, p, e, env, args=()) -> dict:
        spec = sprue_params(p)
        invariant = self._invariant_operands(p, e, args)
        out = {}
        for k, prm in e.params.items():
            if k in spec:
                if k not in RESET:
                    out[k] = self._convert(e, k, invariant.get(k))
            elif k in HARMLESS or prm.value is None:
                continue
            else:
                raise self.unsupported(f"{e.prim}: unknown param '{k}' (sprue's {p.name} takes"
                                       f" {', '.join(sorted(spec)) or 'no params'})", prm.tok)
        for k, d in spec.items():
            if k in out:
                continue
            if d is not REQUIRED:
                if k not in NO_FILL:
                    out[k] = d
            else:
                out[k] = self._omitted(e, k, env, args)
        return out

    def _omitted(self, e, k: str, env, args):
        """A required param the text leaves out: JAX's default (OMITTED), or the declared output
        type's shape (SHAPE_PARAMS) or element type (DTYPE_PARAMS_FROM_OUT)."""
        if (e.prim, k) not in OMITTED and k not in SHAPE_PARAMS and k not in DTYPE_PARAMS_FROM_OUT:
            raise self.error(f"{e.prim}: the param '{k}' is missing", e.tok)
        outs = self._out_avals(e, env)
        if (e.prim, k) in OMITTED:
            ins = [a.aval if isinstance(a, Tracer) else aval_of_value(a) for a in args]
            return OMITTED[e.prim, k](ins, outs)
        if len(outs) != 1:
            raise self.error(f"{e.prim}: the param '{k}' is missing", e.tok)
        if k in SHAPE_PARAMS:
            if not all(isinstance(s, int) for s in outs[0].shape):
                raise self.error(f"{e.prim}: the param '{k}' is missing (the output's shape is not static)", e.tok)
            return tuple(outs[0].shape)
        return outs[0].dtype


def _bad_dim(shape):
    """The first dim of a computed shape that is not a size (a float, a negative int, ...), or None."""
    for d in shape:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer, DimExpr)) or \
                (not isinstance(d, DimExpr) and d < 0):
            return d
    return None


def _rule_message(prim: str, ex: SprueError) -> str:
    """A shape rule's error as the reader reports it at the equation's file:line:col: prefixed with
    the primitive's name once, without the Python line the rule names (the caller of sprue.load or
    the `sprue` script, not a place in the program)."""
    msg = str(ex)
    suffix = at(user_frame_summary())
    if suffix and msg.endswith(suffix):
        msg = msg[:-len(suffix)]
    return msg if msg.startswith((f"{prim}: ", f"{prim} ")) else f"{prim}: {msg}"


def _bind_operand_dim(b, t: Tracer, operand, aliased: list) -> None:
    """Make the nested jaxpr's integer parameter t (of builder b), which holds `operand` unchanged,
    stand for the operand's size: a dimension variable's value binds that variable (the body's
    types then mention the enclosing jaxpr's variable, as a traced body's do); a size expression
    over variables that the jaxpr's earlier parameters bind becomes t's value as a size (traced
    code captures the variables, not the expression). Anything else keeps t's fresh variable."""
    if not (isinstance(operand, Tracer) and operand.aval.shape == () and operand.aval.dtype == dtypes.int64
            and t.aval.shape == () and t.aval.dtype == dtypes.int64):
        return
    d = operand.dim_expr
    if not isinstance(d, DimExpr):
        return
    vs = d.dim_vars()
    if len(vs) == 1 and d == dim_of(next(iter(vs))):
        t.jvar.dim = next(iter(vs))   # not bind_dim: the variable's binder stays the outer tracer
    elif vs <= {a.jvar.dim for a, _ in aliased if a.jvar.dim is not None}:
        t.jvar.dim = None
    else:
        return
    t.dim_expr = d
    b.dim_values.setdefault(d, t)   # dim_value(d) inside the body: this parameter, not a capture


class _DimError(Exception):
    """A dimension expression that is not a size (reported as a JaxprError at its type)."""


def _int_scalar(value: int, dtype):
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        raise OverflowError
    return np.asarray(value, dtype)[()]


def _fmt(aval: ShapedArray) -> str:
    return aval.str_short()


def _dim_names(binders) -> set[str]:
    """The names the binders' types use in their dimensions."""
    mentioned = set()
    stack = [d for b in binders if b.type is not None for d in b.type.dims]
    while stack:
        d = stack.pop()
        if d[0] == "name":
            mentioned.add(d[1])
        elif d[0] != "int":
            stack.extend(x for x in d[1:] if isinstance(x, tuple))
    return mentioned


def _implicit_names(ast: JaxprAST) -> list[str]:
    """Leading i64[] invars that name a dimension of a later invar: implicit size arguments."""
    mentioned = _dim_names(ast.invars)
    out = []
    for b in ast.invars:
        if b.name in mentioned and b.type is not None and b.type.dtype == "i64" and not b.type.dims:
            out.append(b.name)
        else:
            break
    return out


def build(prog: Program, consts=None, implicit=None):
    """The program's main jaxpr as a ClosedJaxpr and its number of implicit size arguments.

    consts: the constvars' values in order; None (a JAX-printed text, whose printer drops them)
    makes the constvars the program's leading parameters, after the implicit sizes and before the
    invars -- the order in which `jax.core.eval_jaxpr(jaxpr, consts, *args)` takes them, so the
    caller passes `closed_jaxpr.consts` first. implicit: {name: dim name} of the leading invars
    that are implicit sizes (None: inferred from the invars' types)."""
    ev = Evaluator(prog)
    ast = prog.main
    if consts is not None and len(consts) != len(ast.constvars):
        raise ev.error(f"the jaxpr has {len(ast.constvars)} constvars but {len(consts)} values were given", ast.tok)
    if implicit is None:
        implicit = {n: n for n in _implicit_names(ast)}
    names = [b.name for b in ast.invars]
    if list(implicit) != names[:len(implicit)]:
        raise ev.error(f"the implicit size arguments {list(implicit)} must be the leading invars", ast.tok)
    try:
        return _build(ev, ast, consts, implicit)
    except RecursionError:
        raise ev.error("the program nests too deeply for sprue to evaluate", ast.tok) from None


def _build(ev: Evaluator, ast: JaxprAST, consts: list | None, implicit: dict):
    with trace_scope() as b:
        env = {}
        for binder, value in zip(ast.constvars, consts or ()):
            value = np.asarray(value)
            ev.check_type(f"constant '{binder.name}'", binder.type, value, env, binder.tok)
            if binder.name is not None:
                env[binder.name] = value
        sizes, explicit = ast.invars[:len(implicit)], ast.invars[len(implicit):]
        called = set(map(id, called_constvars(ev.prog)))
        for binder in [*sizes, *leading_constvars(ev.prog, consts is not None), *explicit]:
            if _is_bf16(binder):   # passed as its bits; computed in its float32 carrier
                t = b.new_arg(ShapedArray(ev.aval(binder.type, env, binder.tok).shape, BF16_BITS))
                env[binder.name or "_"] = _carrier_of_bits(t)
                continue
            t = b.new_arg(ev.aval(binder.type, {}, binder.tok) if id(binder) in called else
                          ev.aval(binder.type, env, binder.tok))
            if id(binder) in called:   # a called jaxpr's constant: bound where that jaxpr runs
                ev.called_consts[id(binder)] = t
                continue
            if binder.name is not None:
                env[binder.name] = t
                if binder.name in implicit and t.jvar.dim is not None:
                    t.jvar.dim.name = implicit[binder.name]
        outs = ev.run(ast, env)
        as_bits = bf16_results(ast)
        outs = [_bits_of_carrier(v) if k in as_bits else v for k, v in enumerate(outs)]
        closed = b.finish(outs)
    return closed, len(implicit)


# bfloat16 at the program's boundary: numpy (without ml_dtypes) and C have no bfloat16, so a bf16
# argument or result is passed as its bits, a uint16 array (the top half of its float32; what an
# ml_dtypes bfloat16 array holds: x.view(np.uint16)), and converted to and from the float32 carrier
# inside -- exactly, as the carrier holds bfloat16 values
BF16_BITS = np.dtype(np.uint16)


def _is_bf16(binder: Binder) -> bool:
    return binder.type is not None and binder.type.dtype == BF16


_carrier_of_bits, _bits_of_carrier = jaxpr_compat.carrier_of_bf16_bits, jaxpr_compat.bf16_bits_of_carrier


def bf16_results(ast: JaxprAST) -> set[int]:
    """The positions of the program's results declared bf16 (a literal result never is)."""
    types = {b.name: b for b in [*ast.constvars, *ast.invars, *(b for e in ast.eqns for b in e.outs)]
             if b.name is not None}
    return {k for k, a in enumerate(ast.outs) if isinstance(a, VarRef) and a.name in types and _is_bf16(types[a.name])}


def bf16_arguments(prog: Program, n_implicit: int, consts_given: bool) -> set[int]:
    """The positions among the explicit arguments (the leading constvars first) of those declared bf16."""
    explicit = [*leading_constvars(prog, consts_given), *prog.main.invars[n_implicit:]]
    return {k for k, b in enumerate(explicit) if _is_bf16(b)}


__all__ = ["build", "Evaluator", "DimExpr", "Binder"]
