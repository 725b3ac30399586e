"""Cases covering sprue.numpy: `CASES` is a list of (name, fn, args) — fn a small function of
arrays written with sprue.numpy (and the traced-array operators/methods), args its numpy inputs.
Each case also carries `.ref` (the same computation done by numpy itself, the expected value) and
`.eager` (whether fn may also be called eagerly on numpy arrays: not for `.at` or operators).

`ERROR_CASES` lists (name, fn, args, exc_type, eager) where numpy raises (TypeError for `-bool`, ...):
sprue must raise the same builtin exception class (its SprueTypeError / SprueValueError).

The compiled-path test reuses these: compile fn, run it on args, compare with case.ref(*args).
`one_per_name()` picks one case per function for quick runs.
"""
from __future__ import annotations

import warnings

import numpy as np

import sprue.numpy as jnp


class Case(tuple):
    """(name, fn, args), plus .ref (numpy's computation) and .eager."""

    def __new__(cls, name, fn, args, ref, eager=True):
        self = tuple.__new__(cls, (name, fn, tuple(args)))
        self.ref, self.eager = ref, eager
        return self

    name = property(lambda self: self[0])
    fn = property(lambda self: self[1])
    args = property(lambda self: self[2])


CASES: list[Case] = []
ERROR_CASES: list[tuple] = []
_rng = np.random.default_rng(1234)

F64, F32, I64, I32, B = np.float64, np.float32, np.int64, np.int32, np.bool_
DTYPES = [F64, F32, I64, I32, B]
_SHORT = {F64: "f64", F32: "f32", I64: "i64", I32: "i32", B: "bool"}


def data(shape, dtype, domain="any"):
    """Deterministic test data of a dtype over a domain suited to the function."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    if dtype == np.bool_:
        vals = _rng.random(n) < 0.5 if domain not in ("pos", "ge1", "nonzero") else np.ones(n, bool)
    elif dtype.kind == "i":
        lo, hi = {"any": (-5, 6), "pos": (1, 7), "unit": (0, 2), "ge1": (1, 7), "nonzero": (1, 6),
                  "small": (0, 4), "special": (-5, 6)}[domain]
        vals = _rng.integers(lo, hi, n)
        if domain == "nonzero":
            vals = vals * np.where(_rng.random(n) < 0.5, -1, 1)
    else:
        if domain == "special":
            base = np.array([np.nan, np.inf, -np.inf, 0.5, -0.5, 1.5, 2.5, -2.5, 0.0, -0.0, 3.7, -3.7])
            vals = np.resize(base, n)
        else:
            lo, hi = {"any": (-3, 3), "pos": (0.1, 5), "unit": (-0.9, 0.9), "ge1": (1, 5), "nonzero": (0.5, 3),
                      "small": (-2, 2)}[domain]
            vals = np.round(_rng.uniform(lo, hi, n), 3)
            if domain == "nonzero":
                vals = vals * np.where(_rng.random(n) < 0.5, -1, 1)
    return np.asarray(vals).astype(dtype).reshape(shape)


def assert_matches(got, want, rtol=None, where=""):
    """got (sprue) equals want (numpy) in structure, shape, dtype and value (floats to rtol)."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), f"{where}: {got!r} vs {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_matches(g, w, rtol, f"{where}[{i}]")
        return
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape, f"{where}: shape {g.shape} != numpy's {w.shape}"
    assert g.dtype == w.dtype, f"{where}: dtype {g.dtype} != numpy's {w.dtype}"
    if w.dtype.kind == "f":
        tol = rtol if rtol is not None else {8: 1e-11, 4: 2e-6, 2: 2e-3}[w.dtype.itemsize]
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True, err_msg=where)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=where)
    else:
        np.testing.assert_array_equal(g, w, err_msg=where)


def _ref_ok(ref, args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            ref(*args)
            return None
        except (TypeError, ValueError, IndexError) as e:
            return type(e)


def add(name, body, *args, ref=None, eager=True):
    """A case from `body(module, *arrays)`: fn runs it with sprue.numpy, ref with numpy."""
    fn = lambda *a: body(jnp, *a)  # noqa: E731
    ref = ref or (lambda *a: body(np, *a))
    err = _ref_ok(ref, args)
    if err is None:
        CASES.append(Case(name, fn, args, ref, eager))
    else:
        ERROR_CASES.append((name, fn, tuple(args), err, eager))


def one_per_name():
    seen, out = set(), []
    for c in CASES:
        base = c.name.split("[")[0]
        if base not in seen:
            seen.add(base)
            out.append(c)
    return out


def _tag(*xs):
    return ",".join(_SHORT[np.dtype(x.dtype).type] + str(list(x.shape)).replace(" ", "") if isinstance(x, np.ndarray)
                    else repr(x) for x in xs)


# -- elementwise ---------------------------------------------------------------------------------
UNARY_DOMAINS = {
    "negative": "any", "positive": "any", "absolute": "any", "abs": "any", "sign": "any", "exp": "any",
    "exp2": "any", "expm1": "any", "log": "pos", "log2": "pos", "log10": "pos", "log1p": "pos", "sin": "any",
    "cos": "any", "tan": "any", "arcsin": "unit", "arccos": "unit", "arctan": "any", "sinh": "any", "cosh": "any",
    "tanh": "any", "arcsinh": "any", "arccosh": "ge1", "arctanh": "unit", "sqrt": "pos", "cbrt": "any",
    "square": "any", "reciprocal": "nonzero", "floor": "any", "ceil": "any", "trunc": "any", "rint": "any",
    "fix": "any", "isfinite": "any", "isnan": "any", "isinf": "any", "signbit": "any", "logical_not": "any",
    "invert": "any", "bitwise_not": "any", "deg2rad": "any", "rad2deg": "any", "conjugate": "any",
}
for _name, _dom in UNARY_DOMAINS.items():
    for _dt in DTYPES:
        for _shape in [(), (7,), (3, 4)]:
            _x = data(_shape, _dt, _dom)
            add(f"{_name}[{_tag(_x)}]", lambda m, x, _n=_name: getattr(m, _n)(x), _x)
    if _dom != "unit":
        _x = data((12,), F64, "special")
        add(f"{_name}[special]", lambda m, x, _n=_name: getattr(m, _n)(x), _x)
        add(f"{_name}[special,f32]", lambda m, x, _n=_name: getattr(m, _n)(x), _x.astype(F32))
    add(f"{_name}[py-scalar]", lambda m, _n=_name: getattr(m, _n)(2))
    add(f"{_name}[py-float]", lambda m, _n=_name: getattr(m, _n)(1.5))

BINARY_DOMAINS = {
    "add": ("any", "any"), "subtract": ("any", "any"), "multiply": ("any", "any"), "divide": ("any", "nonzero"),
    "true_divide": ("any", "any"), "floor_divide": ("any", "any"), "remainder": ("any", "any"),
    "mod": ("any", "nonzero"), "fmod": ("any", "any"), "power": ("pos", "small"), "float_power": ("pos", "any"),
    "maximum": ("special", "any"), "minimum": ("special", "any"), "fmax": ("special", "special"),
    "fmin": ("special", "any"), "arctan2": ("any", "any"), "hypot": ("any", "any"), "copysign": ("any", "special"),
    "heaviside": ("any", "any"), "logaddexp": ("any", "any"), "equal": ("any", "any"),
    "not_equal": ("any", "any"), "less": ("special", "any"), "less_equal": ("any", "any"),
    "greater": ("any", "any"), "greater_equal": ("any", "special"), "logical_and": ("any", "any"),
    "logical_or": ("any", "any"), "logical_xor": ("any", "any"), "bitwise_and": ("any", "any"),
    "bitwise_or": ("any", "any"), "bitwise_xor": ("any", "any"), "left_shift": ("any", "small"),
    "right_shift": ("any", "small"),
}
DTYPE_PAIRS = [(F64, F64), (F32, F32), (I64, I64), (I32, I32), (B, B), (F32, F64), (I32, F32), (I32, I64),
               (B, I32), (B, F32), (I64, F32), (F64, I32)]
SHAPE_PAIRS = [((3, 4), (3, 4)), ((3, 1), (4,)), ((), (2, 3)), ((2, 1, 4), (3, 1))]
PY_SCALARS = [(F32, 2.0), (F32, 2), (I32, 2), (I32, 2.5), (B, 1), (B, 1.5), (F64, True), (I64, -3), (I32, 0)]

for _name, (_dx, _dy) in BINARY_DOMAINS.items():
    _f = lambda m, x, y, _n=_name: getattr(m, _n)(x, y)  # noqa: E731
    for _i, (_t1, _t2) in enumerate(DTYPE_PAIRS):
        for _s1, _s2 in (SHAPE_PAIRS if _i < 5 else SHAPE_PAIRS[:2]):
            _x, _y = data(_s1, _t1, _dx), data(_s2, _t2, _dy)
            add(f"{_name}[{_tag(_x, _y)}]", _f, _x, _y)
    for _t, _v in PY_SCALARS:
        _x = data((5,), _t, _dx)
        add(f"{_name}[{_tag(_x)},{_v!r}]", lambda m, x, _n=_name, _v=_v: getattr(m, _n)(x, _v), _x)
        add(f"{_name}[{_v!r},{_tag(_x)}]", lambda m, x, _n=_name, _v=_v: getattr(m, _n)(_v, x), _x)
    add(f"{_name}[py,py]", lambda m, _n=_name: getattr(m, _n)(3, 2.5))

# integer division and remainder: numpy's signs and division by zero
_num = np.array([7, -7, 7, -7, 0, 5, -5, 3], I64)
_den = np.array([2, 2, -2, -2, 3, 0, 0, 7], I64)
for _n in ["floor_divide", "remainder", "fmod", "divmod"]:
    for _t in (I64, I32, F64, F32):
        add(f"{_n}[signs,{_SHORT[_t]}]", lambda m, x, y, _n=_n: getattr(m, _n)(x, y), _num.astype(_t), _den.astype(_t))
add("power[f32,int-exps]", lambda m, x: (m.power(x, 3), m.power(x, -2), m.power(x, 0), x ** 2), data((4,), F32, "pos"))
add("power[i32,np.int64]", lambda m, x: m.power(x, np.int64(2)), data((4,), I32))
add("power[i32,-1]", lambda m, x: m.power(x, -1), data((4,), I32))
for _t in DTYPES:
    _x = data((3, 4), _t, "special")
    add(f"where[{_SHORT[_t]}]", lambda m, c, x: m.where(c > 0, x, 0), data((3, 4), F64), _x)
    add(f"where[bcast,{_SHORT[_t]}]", lambda m, c, x: m.where(c, x, 2.5), data((4,), B), _x)
    add(f"clip[{_SHORT[_t]}]", lambda m, x: m.clip(x, -1, 2), _x)
    add(f"clip[float-bounds,{_SHORT[_t]}]", lambda m, x: m.clip(x, 0.5, None), _x)
    add(f"round[{_SHORT[_t]}]", lambda m, x: m.round(x), _x)
    add(f"around[dec2,{_SHORT[_t]}]", lambda m, x: m.around(x * 1.2345, 2), _x)
    add(f"round[dec-1,{_SHORT[_t]}]", lambda m, x: m.round(x * 17, -1), _x)
    add(f"isclose[{_SHORT[_t]}]", lambda m, x: m.isclose(x, x + 1e-9), _x)
    add(f"nan_to_num[{_SHORT[_t]}]", lambda m, x: m.nan_to_num(x), _x)
add("allclose", lambda m, x, y: (m.allclose(x, y), m.allclose(x, x + 1e-7), m.array_equal(x, x), m.array_equal(x, y),
                                 m.array_equal(x, x[:1]), m.allclose(x, np.nan, equal_nan=True)),
    data((3, 4), F64), data((3, 4), F64))
add("where[arrays]", lambda m, c, x, y: m.where(c, x, y), data((2, 1), B), data((3,), I32), data((2, 3), F32))
add("clip[arrays]", lambda m, x, lo, hi: m.clip(x, lo, hi), data((3, 4), F64), data((4,), F64, "small"),
    np.float64(2.0))
add("round[halves]", lambda m, x: m.round(x), np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.49999, 2.675], F64))
add("round[dec,f32]", lambda m, x: m.round(x, 1), np.array([0.05, 0.15, 0.25, 1.35, -2.45], F32))
add("round[int,dec-1]", lambda m, x: m.round(x, -1), np.array([15, 25, -15, 1234, 5], I32))

# -- reductions ----------------------------------------------------------------------------------
AXES = [None, 0, -1, (0, 2), (1,)]
for _name in ["sum", "prod", "max", "min", "amax", "amin", "mean", "var", "std", "any", "all", "ptp",
              "count_nonzero", "nansum", "nanmax", "nanmin", "nanmean", "nanprod"]:
    for _t in DTYPES:
        _x = data((2, 3, 4), _t, "any")
        for _ax in AXES:
            add(f"{_name}[{_tag(_x)},axis={_ax}]", lambda m, x, _n=_name, _a=_ax: getattr(m, _n)(x, axis=_a), _x)
        add(f"{_name}[{_tag(_x)},keepdims]", lambda m, x, _n=_name: getattr(m, _n)(x, axis=(0, 2), keepdims=True), _x)
        add(f"{_name}[{_tag(_x)},scalar]", lambda m, x, _n=_name: getattr(m, _n)(x[0, 0, 0]), _x)
    _x = data((3, 4), F64, "special")
    add(f"{_name}[special]", lambda m, x, _n=_name: getattr(m, _n)(x, axis=0), _x)
for _name in ["argmax", "argmin", "cumsum", "cumprod"]:
    for _t in DTYPES:
        _x = data((2, 3, 4), _t, "any")
        for _ax in [None, 0, 1, -1]:
            add(f"{_name}[{_tag(_x)},axis={_ax}]", lambda m, x, _n=_name, _a=_ax: getattr(m, _n)(x, axis=_a), _x)
    add(f"{_name}[special]", lambda m, x, _n=_name: getattr(m, _n)(x, axis=1), data((3, 4), F64, "special"))
for _t in DTYPES:
    _x = data((3, 4), _t)
    add(f"argmax[keepdims,{_SHORT[_t]}]", lambda m, x: (m.argmax(x, axis=1, keepdims=True),
                                                       m.argmin(x, keepdims=True)), _x)
    add(f"sum[dtype,{_SHORT[_t]}]", lambda m, x: (m.sum(x, dtype=np.float32), m.mean(x, axis=0, dtype=np.float32),
                                                 m.cumsum(x, axis=1, dtype=np.float64)), _x)
    add(f"sum[initial-where,{_SHORT[_t]}]", lambda m, x: (m.sum(x, axis=1, initial=2), m.max(x, axis=0, initial=-10),
                                                          m.sum(x, where=x > 0), m.min(x, axis=1, initial=9,
                                                                                       where=x > 1)), _x)
    add(f"var[ddof,{_SHORT[_t]}]", lambda m, x: (m.var(x, ddof=1), m.std(x, axis=0, ddof=1), m.var(x, axis=1, ddof=4)), _x)
    add(f"mean[where,{_SHORT[_t]}]", lambda m, x: (m.mean(x, axis=1, where=x > 0), m.var(x, axis=0, where=x > -2)), _x)
    add(f"any[where,{_SHORT[_t]}]", lambda m, x: (m.any(x, axis=0, where=x < 0), m.all(x, where=x > 0)), _x)
add("sum[empty]", lambda m, x: (m.sum(x, axis=0), m.prod(x), m.any(x), m.all(x, axis=1), m.mean(x, axis=1)),
    np.zeros((0, 3), F32))
add("max[empty]", lambda m, x: m.max(x, axis=0), np.zeros((0, 3), F32))
add("argmax[empty]", lambda m, x: m.argmax(x), np.zeros((0,), F32))
add("cumulative_sum", lambda m, x: (m.cumulative_sum(x, axis=1, include_initial=True),
                                    m.cumulative_prod(x, axis=0)), data((3, 4), I32))
add("mean[f16]", lambda m, x: (m.mean(x), m.sum(x, axis=0)), data((3, 4), np.float16))

# -- products -------------------------------------------------------------------------------------
DOT_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((3,), (3, 4)), ((2, 2, 3), (3, 4)),
              ((2, 2, 3), (4, 3, 5)), ((), (3,)), ((2, 3), ())]
MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (5, 3, 4)),
                 ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((2, 1, 2, 3), (5, 3, 4)), ((3,), (5, 3, 4)),
                 ((5, 2, 3), (3,))]
for _t1, _t2 in [(F64, F64), (F32, F32), (I32, I32), (I64, I64), (B, B), (I32, F32), (F32, F64)]:
    for _s1, _s2 in DOT_SHAPES:
        _x, _y = data(_s1, _t1), data(_s2, _t2)
        add(f"dot[{_tag(_x, _y)}]", lambda m, x, y: m.dot(x, y), _x, _y)
    for _s1, _s2 in MATMUL_SHAPES:
        _x, _y = data(_s1, _t1), data(_s2, _t2)
        add(f"matmul[{_tag(_x, _y)}]", lambda m, x, y: m.matmul(x, y), _x, _y)
    _x, _y = data((2, 3), _t1), data((3, 2), _t2)
    add(f"vdot[{_tag(_x, _y)}]", lambda m, x, y: m.vdot(x, y), _x, _y)
    add(f"inner[{_tag(_x, _y)}]", lambda m, x, y: m.inner(x, y.T), _x, _y)
    add(f"outer[{_tag(_x, _y)}]", lambda m, x, y: m.outer(x, y), _x, _y)
    _x, _y = data((2, 3, 4), _t1), data((3, 4, 5), _t2)
    add(f"tensordot[{_tag(_x, _y)}]", lambda m, x, y: (m.tensordot(x, y), m.tensordot(x, y, axes=([1], [0])),
                                                       m.tensordot(x, y, axes=([2, 1], [1, 0])),
                                                       m.tensordot(x[0, 0], y[0, 0], axes=0)), _x, _y)
EINSUMS = [("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]), ("i,j->ij", [(3,), (4,)]),
           ("ii->", [(3, 3)]), ("ii->i", [(3, 3)]), ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]), ("ij->j", [(2, 3)]),
           ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("ij,ij->i", [(2, 3), (2, 3)]), ("i,i", [(3,), (3,)]),
           ("ij,jk", [(2, 3), (3, 4)]), ("...ij,...jk->...ik", [(2, 1, 2, 3), (5, 3, 4)]), ("ba,ab", [(2, 3), (3, 2)]),
           ("iij->ji", [(3, 3, 2)]), ("ijk,jil->kl", [(2, 3, 4), (3, 2, 5)]), ("i,i->", [(1,), (3,)]),
           ("ij,kl->ijkl", [(2, 3), (2, 2)]), ("...i->...", [(2, 3, 4)]), ("abc,cd,dbe->ae", [(2, 3, 4), (4, 5), (5, 3, 2)])]
for _spec, _shapes in EINSUMS:
    for _t in (F64, F32, I32, B):
        _xs = [data(s, _t) for s in _shapes]
        add(f"einsum[{_spec},{_SHORT[_t]}]", lambda m, *xs, _s=_spec: m.einsum(_s, *xs), *_xs)
add("einsum[mixed]", lambda m, x, y: m.einsum("ij,jk->ik", x, y), data((2, 3), I32), data((3, 4), F32))
add("kron", lambda m, x, y: m.kron(x, y), data((2, 3), F64), data((2, 2), I32))

# -- shapes -----------------------------------------------------------------------------------------
for _t in DTYPES:
    _x = data((2, 3, 4), _t)
    _T = _SHORT[_t]
    add(f"reshape[{_T}]", lambda m, x: (m.reshape(x, (6, 4)), m.reshape(x, (-1,)), m.reshape(x, (4, -1, 2)),
                                        m.reshape(x, (3, 8), order="F")), _x)
    add(f"ravel[{_T}]", lambda m, x: (m.ravel(x), m.ravel(x, order="F")), _x)
    add(f"transpose[{_T}]", lambda m, x: (m.transpose(x), m.transpose(x, (1, 0, 2)), m.transpose(x, [-1, 0, 1])), _x)
    add(f"swapaxes[{_T}]", lambda m, x: (m.swapaxes(x, 0, 2), m.swapaxes(x, -1, 1)), _x)
    add(f"moveaxis[{_T}]", lambda m, x: (m.moveaxis(x, 0, -1), m.moveaxis(x, [0, 1], [2, 0])), _x)
    add(f"squeeze[{_T}]", lambda m, x: (m.squeeze(x), m.squeeze(x, axis=1), m.squeeze(x, (0, 3))),
        data((1, 1, 3, 1), _t))
    add(f"expand_dims[{_T}]", lambda m, x: (m.expand_dims(x, 0), m.expand_dims(x, -1), m.expand_dims(x, (0, 2))), _x)
    add(f"concatenate[{_T}]", lambda m, x, y: (m.concatenate([x, y]), m.concatenate((x, x), axis=-1),
                                               m.concatenate([x, y], axis=None)), _x, data((1, 3, 4), _t))
    add(f"concatenate[mixed,{_T}]", lambda m, x, y: m.concatenate([x, y], axis=1), data((2, 2), _t), data((2, 3), I32))
    add(f"stack[{_T}]", lambda m, x, y: (m.stack([x, y]), m.stack((x, y), axis=-1), m.stack([x, y, x], axis=1)),
        data((3, 4), _t), data((3, 4), _t))
    add(f"hstack[{_T}]", lambda m, x, y: (m.hstack([x, y]), m.hstack([x[0], y[0]])), data((2, 3), _t),
        data((2, 2), _t))
    add(f"vstack[{_T}]", lambda m, x, y: (m.vstack([x, y]), m.vstack([x[0], x[1]])), data((2, 3), _t),
        data((1, 3), _t))
    add(f"dstack[{_T}]", lambda m, x, y: (m.dstack([x, y]), m.column_stack([x[0], y[0]])), data((2, 3), _t),
        data((2, 3), _t))
    add(f"atleast[{_T}]", lambda m, x: (m.atleast_1d(x[0, 0, 0]), m.atleast_2d(x[0, 0]), m.atleast_3d(x[0]),
                                        m.atleast_3d(x[0, 0])), _x)
    add(f"broadcast_to[{_T}]", lambda m, x: (m.broadcast_to(x, (2, 2, 3)), m.broadcast_to(x[0, 0], (4, 3)),
                                             m.broadcast_to(x[0, :1], (5, 2, 3))), data((1, 2, 3), _t))
    add(f"broadcast_arrays[{_T}]", lambda m, x, y: m.broadcast_arrays(x, y, 1.0), data((3, 1), _t), data((4,), I32))
    add(f"flip[{_T}]", lambda m, x: (m.flip(x), m.flip(x, 0), m.flip(x, (0, 2)), m.fliplr(x), m.flipud(x)), _x)
    add(f"diag[{_T}]", lambda m, v, x: (m.diag(v), m.diag(v, 1), m.diag(v, -2), m.diag(x), m.diag(x, 1),
                                        m.diag(x, -2), m.diag(x, 5)), data((3,), _t), data((3, 4), _t))
    add(f"diagonal[{_T}]", lambda m, x: (m.diagonal(x), m.diagonal(x, 1), m.diagonal(x, -1, 2, 1),
                                         m.diagonal(x, 0, 0, 2)), _x)
    add(f"trace[{_T}]", lambda m, x: (m.trace(x[0]), m.trace(x, 1, 1, 2)), _x)
    add(f"tril[{_T}]", lambda m, x: (m.tril(x), m.tril(x, 1), m.triu(x), m.triu(x, -1), m.tril(x[0, 0])), _x)
    add(f"roll[{_T}]", lambda m, x: (m.roll(x, 2), m.roll(x, -1, axis=1), m.roll(x, (1, 2), axis=(0, 2))), _x)
    add(f"repeat[{_T}]", lambda m, x: (m.repeat(x, 2), m.repeat(x, 3, axis=1), m.repeat(x[0], [1, 0, 2], axis=0)), _x)
    add(f"tile[{_T}]", lambda m, x: (m.tile(x[0], 2), m.tile(x[0], (2, 1, 2))), _x)
    add(f"split[{_T}]", lambda m, x: (m.split(x, 2), m.split(x, [1, 3], axis=2), m.array_split(x, 3, axis=2)), _x)

# -- creation -----------------------------------------------------------------------------------------
CREATION = {
    "zeros": lambda m: (m.zeros((2, 3)), m.zeros(4, np.int32), m.zeros((), bool), m.zeros((0, 2))),
    "ones": lambda m: (m.ones((2, 3)), m.ones(3, dtype=np.float32), m.ones((2,), int)),
    "full": lambda m: (m.full((2, 2), 3.5), m.full(3, True), m.full((2, 3), np.array([1, 2, 3], np.int32)),
                       m.full((2,), 7, dtype=np.float32)),
    "empty": lambda m: (m.zeros_like(m.empty((2, 3))), m.zeros_like(m.empty(4, np.int32))),
    "arange": lambda m: (m.arange(5), m.arange(1, 10, 3), m.arange(0, 1, 0.1), m.arange(5, 0, -1), m.arange(3.0),
                         m.arange(3, dtype=np.float32), m.arange(10.5), m.arange(-2, 3, dtype=np.int32),
                         m.arange(0), m.arange(5, 1), m.arange(0.5, 2.0, 0.25, dtype=np.float32)),
    "linspace": lambda m: (m.linspace(0, 1, 5), m.linspace(0, 1, 5, endpoint=False), m.linspace(2, 3, 1),
                           m.linspace(0, 10, 7, dtype=np.int32), m.linspace(-1.0, 1.0, 4, retstep=True),
                           m.linspace(0, 1, 0), m.linspace(np.float32(0), 1, 3), m.logspace(0, 2, 3)),
    "eye": lambda m: (m.eye(3), m.eye(3, 4, 1), m.eye(4, 3, -1, np.int32), m.eye(2, dtype=bool), m.identity(3)),
    "tri": lambda m: (m.tri(3), m.tri(3, 4, -1, dtype=np.int32)),
    "array": lambda m: (m.array([[1, 2], [3, 4]]), m.array([1.0, 2]), m.array([True, False]),
                        m.array([[1, 2]], dtype=np.float32), m.asarray(3.5), m.array(np.int32(3)),
                        m.array([1, 2], ndmin=3), m.asarray([[0.5], [1]])),
}
for _name, _body in CREATION.items():
    add(f"{_name}[static]", _body)
for _t in DTYPES:
    _x = data((2, 3), _t)
    _T = _SHORT[_t]
    add(f"zeros_like[{_T}]", lambda m, x: (m.zeros_like(x), m.ones_like(x), m.full_like(x, 7), m.zeros_like(m.empty_like(x)),
                                           m.ones_like(x, dtype=np.int32), m.zeros_like(x, shape=(4,)),
                                           m.full_like(x, 2.5)), _x)
    add(f"astype[{_T}]", lambda m, x: tuple(m.astype(x, t) for t in (np.float64, np.float32, np.int64, np.int32,
                                                                       bool)), data((2, 3), _t, "any"))
    add(f"array[traced,{_T}]", lambda m, x: (m.array(x), m.asarray(x, dtype=np.float32), m.array([x[0], x[1]]),
                                             m.array([[x[0, 0], 1], [2, x[1, 1]]])), _x)
    add(f"linspace[traced,{_T}]", lambda m, x: (m.linspace(x[0, 0], x[1, 2], 4), m.linspace(x[0], x[1], 3, axis=1)),
        data((2, 3), _t))
add("meshgrid", lambda m, x, y: (m.meshgrid(x, y), m.meshgrid(x, y, indexing="ij"), m.meshgrid(x, y, x, sparse=True)),
    data((3,), F64), data((2,), I32))
add("scalar_types", lambda m, x: (m.float32(x), m.int32(x), m.float64(2), m.bool_(x)), data((3,), F64))

# -- sorting ------------------------------------------------------------------------------------------
for _t in DTYPES:
    _x = data((3, 5), _t, "small")
    add(f"sort[{_SHORT[_t]}]", lambda m, x: (m.sort(x), m.sort(x, axis=0), m.sort(x, axis=None)), _x)
    add(f"argsort[{_SHORT[_t]}]", lambda m, x: (m.argsort(x, kind="stable"), m.argsort(x, axis=0, kind="stable"),
                                                m.argsort(x, axis=None, stable=True)), _x)
add("sort[nan]", lambda m, x: (m.sort(x), m.argsort(x, kind="stable")),
    np.array([3.0, np.nan, 1.0, -np.inf, np.nan, 1.0, np.inf, -0.0, 0.0], F64))
add("sort[nan,f32]", lambda m, x: (m.sort(x), m.argsort(x, kind="stable")),
    np.array([[3.0, np.nan, 1.0], [np.nan, -1.0, -1.0]], F32))

# -- indexing -------------------------------------------------------------------------------------------
X = data((4, 5, 6), F64)
STATIC_INDICES = [
    0, -1, (1, 2), (1, -1, 3), slice(1, 3), slice(None, None, 2), slice(None, None, -1), slice(-2, None, -2),
    (slice(1, None), 2), (Ellipsis, 1), (None, 0), (0, None, slice(None), None), (slice(3, 1),), (slice(10, 20),),
    (1, Ellipsis, None), [0, 2], ([0, 2], [1, 1]), (slice(None), [0, -1]), (slice(None), [0, 2], [1, 3]),
    ([0, 1], slice(None), [2, 3]), (0, slice(None), [1, 2]), (np.array([[0, 1], [2, 3]]), 1),
    (np.array([True, False, True, True]),), (slice(None), np.array([True, False, True, False, True])),
    (np.array([[True, False, True, False, True]] * 4),), (Ellipsis, [1, 0]), (None, [0, 1], None, 1),
    ([[0], [1]], [[1, 2]]), (slice(None, None, -1), [0, 1]), np.array(2), (np.int32(1), np.int64(-2)),
    ([],), (slice(1, 3), [0, 0, 4], slice(None, None, -2)), (Ellipsis,), (), (slice(None, None, 3), 1, slice(5, 0, -2)),
    (1, [0, 2], slice(None), [1, 3]), (np.array([2, 0]), np.array([[1], [3]]), np.array([5, 0])),
]
for _i, _idx in enumerate(STATIC_INDICES):
    add(f"getitem[{_i}:{_idx!r}]".replace("\n", ""), lambda m, x, _ix=_idx: x[_ix], X, eager=False)
    add(f"getitem[{_i},i32]", lambda m, x, _ix=_idx: x[_ix], X.astype(I32), eager=False)

_n = lambda i, n: np.clip(np.where(i < 0, i + n, i), 0, n - 1)  # noqa: E731  (gather clamps)
TRACED_INDICES = [
    ("int-array", lambda x, i: x[i], np.array([0, -1, 2, 2])),
    ("int-array,i32", lambda x, i: x[i], np.array([[3], [-4]], I32)),
    ("dyn-int", lambda x, i: x[i], np.int64(-2)),
    ("dyn-int,i32", lambda x, i: x[1:, i], np.int32(3)),
    ("dyn-int,slices", lambda x, i: x[::-1, 2:, i], np.int64(-1)),
    ("dyn-ints", lambda x, i: x[i, i + 1, -1], np.int32(2)),
    ("array,strided", lambda x, i: x[:, i, ::2], np.array([4, 0, 1])),
    ("array,int", lambda x, i: x[i, 1], np.array([[0, 1, 2]])),
    ("array,none", lambda x, i: x[None, i, ..., -1], np.array([1, 3])),
    ("array,ellipsis", lambda x, i: x[..., i], np.array([5, 0, -6])),
    ("array,separated", lambda x, i: x[i, :, i], np.array([1, 2, 3])),
    ("array,mixed", lambda x, i: x[i, np.array([1, 0, 4])], np.array([[0], [3]])),
    ("oob-clamped", lambda x, i: x[i], np.array([0, 10, -10])),
]
for _name, _f, _i in TRACED_INDICES:
    add(f"getitem[traced,{_name}]", lambda m, x, i, _f=_f: _f(x, i), X, _i, eager=False,
        ref=(lambda x, i, _f=_f: _f(x, _n(i, 4))) if _name == "oob-clamped" else None)

AT_INDICES = [0, (1, 2), slice(1, 3), (slice(None), [0, 3, 2]), ([0, 1, 3], [2, 2, 4]), (Ellipsis, -1),
              (slice(None, None, -2),), (np.array([True, False, True, False]),), ([0, 1], slice(None), 1),
              (None, 2, slice(1, None)), (slice(None), slice(None)), (1, [0, 2], [1, 3])]
_AT_UFUNC = {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}


def _at_ref(op, idx):
    def ref(x, v):
        y = x.copy()
        if op == "set":
            y[idx] = v
        else:
            _AT_UFUNC[op].at(y, idx, v)
        return y
    return ref


for _i, _idx in enumerate(AT_INDICES):
    for _op in ["set", "add", "multiply", "min", "max"]:
        for _t in (F64, F32, I32):
            _x = data((4, 5, 6), _t)
            _v = data(np.shape(_x[_idx]), _t)
            add(f"at.{_op}[{_i},{_SHORT[_t]}]", lambda m, x, v, _ix=_idx, _o=_op: getattr(x.at[_ix], _o)(v), _x, _v,
                ref=_at_ref(_op, _idx), eager=False)
        add(f"at.{_op}[{_i},scalar]", lambda m, x, _ix=_idx, _o=_op: getattr(x.at[_ix], _o)(2.5), X,
            ref=lambda x, _ix=_idx, _o=_op: _at_ref(_o, _ix)(x, 2.5), eager=False)
for _op in ["add", "multiply", "min", "max", "set"]:
    _dup = _op != "set"  # duplicates accumulate (add, multiply, min, max); set's order is unspecified
    _i = np.array([0, 2, 0, -1] if _dup else [0, 2, -1])
    add(f"at.{_op}[traced-array]", lambda m, x, i, _o=_op: getattr(x.at[i], _o)(1.5), X, _i, eager=False,
        ref=lambda x, i, _o=_op: _at_ref(_o, i)(x, 1.5))
    add(f"at.{_op}[traced-2d]", lambda m, x, i, v, _o=_op: getattr(x.at[i, :, i], _o)(v), X, _i,
        data((len(_i), 5), F64), eager=False, ref=lambda x, i, v, _o=_op: _at_ref(_o, (i, slice(None), i))(x, v))
    add(f"at.{_op}[dyn-int]", lambda m, x, i, _o=_op: getattr(x.at[1, i], _o)(-3.0), X, np.int64(-2), eager=False,
        ref=lambda x, i, _o=_op: _at_ref(_o, (1, i))(x, -3.0))
add("at.add[oob-dropped]", lambda m, x, i: x.at[i].add(1.0), X, np.array([1, 9, -9, 3]), eager=False,
    ref=lambda x, i: _at_ref("add", np.array([1, 3]))(x, 1.0))
add("at.set[oob-dropped]", lambda m, x, i: x.at[0, i].set(1.0), X, np.array([7, 2]), eager=False,
    ref=lambda x, i: _at_ref("set", (0, np.array([2])))(x, 1.0))
add("at.get[fill]", lambda m, x, i: x.at[i].get(mode="fill", fill_value=-1.0), X[:, 0, 0], np.array([0, 7, -1, -9]),
    eager=False, ref=lambda x, i: np.where((i >= -4) & (i < 4), x[np.clip(i, -4, 3)], -1.0))
add("at.get[static]", lambda m, x: (x.at[1:3].get(), x.at[::-1, 0].get(mode="clip")), X, eager=False,
    ref=lambda x: (x[1:3], x[::-1, 0]))
def _subtract_ref(x):
    a, b, c = x.copy(), x.copy(), x.copy()
    a[0] -= 1.0
    b[1] /= 2.0
    c[2, 0] **= 2
    return a, b, c


add("at.subtract", lambda m, x: (x.at[0].subtract(1.0), x.at[1].divide(2.0), x.at[2, 0].power(2)), X, eager=False,
    ref=_subtract_ref)
for _ax in (0, 1, -1):
    add(f"take_along_axis[{_ax}]", lambda m, x, _a=_ax: m.take_along_axis(x, m.argsort(x, axis=_a), axis=_a), X)
    add(f"take_along_axis[traced,{_ax}]", lambda m, x, i, _a=_ax: m.take_along_axis(x, i, axis=_a), X,
        np.take(np.argsort(X, axis=_ax), [0, 2], axis=_ax), eager=False)
add("take", lambda m, x: (m.take(x, [0, 2], axis=1), m.take(x, 3), m.take(x, [[0, 1], [2, -3]]),
                          m.take(x, [-1, 7], axis=0, mode="clip"), m.take(x, [-1, 9], axis=2, mode="wrap"),
                          m.take(x, 1, axis=2)), X)
add("take[traced]", lambda m, x, i: m.take(x, i, axis=2), X, np.array([[0, 5], [3, -1]]), eager=False)
add("put_along_axis", lambda m, x, i: m.put_along_axis(x, i, 9.0, axis=1, inplace=False), X,
    np.array([[[0, 1, 0, 2, 1, 4]] * 4])[0][:, None, :], eager=False,
    ref=lambda x, i: (lambda y: (np.put_along_axis(y, i, 9.0, axis=1), y)[1])(x.copy()))

# -- operators and methods on traced arrays ---------------------------------------------------------------
OPERATORS = {
    "+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y, "/": lambda x, y: x / y,
    "//": lambda x, y: x // y, "%": lambda x, y: x % y, "**": lambda x, y: x ** y, "&": lambda x, y: x & y,
    "|": lambda x, y: x | y, "^": lambda x, y: x ^ y, "<<": lambda x, y: x << y, ">>": lambda x, y: x >> y,
    "==": lambda x, y: x == y, "!=": lambda x, y: x != y, "<": lambda x, y: x < y, "<=": lambda x, y: x <= y,
    ">": lambda x, y: x > y, ">=": lambda x, y: x >= y, "divmod": lambda x, y: divmod(x, y),
}
for _sym, _f in OPERATORS.items():
    for _t1, _t2 in [(F64, F64), (F32, F32), (I32, I32), (I64, I32), (B, B), (F32, I64)]:
        _x = data((3, 4), _t1, "pos" if _sym == "**" else "any")
        _y = data((4,), _t2, "small" if _sym in ("**", "<<", ">>") else "nonzero")
        add(f"op{_sym}[{_tag(_x, _y)}]", lambda m, x, y, _f=_f: _f(x, y), _x, _y, eager=False)
        add(f"op{_sym}[{_tag(_x, _y)},const]", lambda m, x, _f=_f, _y=_y: _f(x, _y), _x, eager=False)
        add(f"op{_sym}[const,{_tag(_x, _y)}]", lambda m, y, _f=_f, _x=_x: _f(_x, y), _y, eager=False)
    for _v in (2, 2.0, True):
        for _t in (F32, I32, B):
            _x = data((5,), _t, "pos" if _sym == "**" else "any")
            add(f"op{_sym}[{_tag(_x)},{_v!r}]", lambda m, x, _f=_f, _v=_v: _f(x, _v), _x, eager=False)
            add(f"op{_sym}[{_v!r},{_tag(_x)}]", lambda m, x, _f=_f, _v=_v: _f(_v, x), _x, eager=False)
for _t in DTYPES:
    _x = data((3, 4), _t)
    for _name, _f in {"neg": lambda x: -x, "pos": lambda x: +x, "invert": lambda x: ~x, "abs": lambda x: abs(x),
                      "matmul": lambda x: x @ x.T, "rmatmul": lambda x: np.ones((2, 3), x.dtype) @ x,
                      "round": lambda x: round(x[0, 0] * 1.37, 1)}.items():
        add(f"op.{_name}[{_SHORT[_t]}]", lambda m, x, _f=_f: _f(x), _x, eager=False)
    add(f"methods[{_SHORT[_t]}]", lambda m, x: (
        x.T, x.mT, x.astype(np.float32), x.reshape(2, -1), x.reshape((4, 3)), x.sum(), x.sum(axis=0), x.prod(axis=1),
        x.max(), x.min(axis=0, keepdims=True), x.mean(), x.argmax(), x.argmin(axis=1), x.any(), x.all(axis=0),
        x.cumsum(axis=1), x.cumprod(), x.std(), x.var(axis=1), x.transpose(), x.transpose(1, 0), x.swapaxes(0, 1),
        x[:1].squeeze(), x.flatten(), x.ravel(), x.clip(0, 1), x.dot(x.T), x.diagonal(), x.trace(),
        x.take([0, 2], axis=1), x.repeat(2, axis=0), x.ndim, x.shape, x.size, len(x), x.conj(), x.real,
        [r for r in x]), _x, eager=False)
    add(f"methods.sort[{_SHORT[_t]}]", lambda m, x: (x.sort(), x.argsort(axis=0), x.sort(axis=None)), _x,
        eager=False, ref=lambda x: (np.sort(x), np.argsort(x, axis=0, kind="stable"), np.sort(x, axis=None)))
    add(f"methods.round[{_SHORT[_t]}]", lambda m, x: (x.round(), (x * 1.234).round(2)), _x, eager=False)
