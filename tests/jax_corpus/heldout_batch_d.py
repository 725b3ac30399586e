"""Held-out programs, batch D (make_heldout.py): measured after batches A, B and C's fixes, before its own.

Written in styles batches A-C did not cover: equinox-like modules (dataclasses and classes registered as
pytrees, NamedTuple states) flattened at the boundary; lax.scan / fori_loop / while_loop with pytree
carries, `reverse`, `unroll` and `xs=None`; jax.checkpoint with static arguments and policies;
custom_jvp / custom_vjp with pytree residuals and nondiff arguments; vmap with in_axes/out_axes dicts,
axis names and collectives, nested vmaps; hessian / jacfwd / jacrev of pytrees; jax.numpy's indexing and
array-building forms with their keyword arguments (.at[] with modes, take_along_axis, searchsorted
methods, unique / bincount / histogram with sizes, cumulative ops, einsum of many operands, pads of every
mode, polynomial helpers, interp with period); typed random keys and samplers; jax.scipy.stats/special;
jax.nn activations and initializers; int8/int16/uint8/uint16/float16/complex dtypes; reduce_precision;
cond/switch over operands of many types; jnp.linalg and jnp.fft with their options; debugging and
sharding primitives users leave in their code.

Measured before its fixes (JAX 0.10.2; sprue.load and `sprue compile` alike): 187 of the 200 without
top-level constvars passed (93.5 %; 187 of all 214 = 87.4 %, the 14 with constvars then refused).
The 13: psum/pmax under vmap (2), jax.debug.print, lu_pivots_to_permutation, a float16 dot
accumulated in float16, a while carrying PRNG keys, a complex triangular solve, constants of called
jaxprs (3, refused by text), XLA's rng_bit_generator and the unsafe_rbg key (2, refused by name),
and multivariate_normal(method="svd"), whose factor a repeated eigenvalue leaves free.
"""
from __future__ import annotations

import dataclasses
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import jax.scipy.special as jss
import jax.scipy.stats as jst
import numpy as np
from heldout_inputs import c64, case, f32, f64, i32, pos, raw, reseed, spd, x64case
from jax import lax

reseed(2028)
tmap = jax.tree_util.tree_map
K = np.array([0, 7], np.uint32)




# ---- equinox-like modules: dataclasses and classes registered as pytrees
@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Linear:
    weight: jax.Array
    bias: jax.Array

    def __call__(self, x):
        return self.weight @ x + self.bias


@jax.tree_util.register_pytree_node_class
class MLPModule:
    def __init__(self, layers, activation_scale):
        self.layers, self.activation_scale = layers, activation_scale

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = jax.nn.swish(layer(x) * self.activation_scale)
        return self.layers[-1](x)

    def tree_flatten(self):
        return (self.layers, self.activation_scale), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


def _lin(n_in, n_out):
    return Linear(f32(n_out, n_in, lo=-0.5, hi=0.5), f32(n_out, lo=-0.1, hi=0.1))


def _to_tree(m):   # the flattened leaves are the program's arguments; rebuild the module inside
    leaves, treedef = jax.tree_util.tree_flatten(m)
    return leaves, treedef


_mlp = MLPModule([_lin(3, 6), _lin(6, 6), _lin(6, 2)], np.float32(1.5))
_mlp_leaves, _mlp_def = _to_tree(_mlp)
@case("d_eqx_mlp_call", _mlp_leaves, f32(3))
def _(leaves, x): return jax.tree_util.tree_unflatten(_mlp_def, leaves)(x)
@case("d_eqx_mlp_vmap", _mlp_leaves, f32(5, 3))
def _(leaves, xs): return jax.vmap(jax.tree_util.tree_unflatten(_mlp_def, leaves))(xs)
@case("d_eqx_filter_grad", _mlp_leaves, f32(4, 3), f32(4, 2))
def _(leaves, xs, ys):
    def loss(m): return jnp.mean((jax.vmap(m)(xs) - ys) ** 2)
    g = jax.grad(loss)(jax.tree_util.tree_unflatten(_mlp_def, leaves))
    return jax.tree_util.tree_leaves(g)
@case("d_eqx_sgd_step", _mlp_leaves, f32(4, 3), f32(4, 2))
def _(leaves, xs, ys):
    m = jax.tree_util.tree_unflatten(_mlp_def, leaves)
    loss, g = jax.value_and_grad(lambda m: jnp.mean(optax_like_l2(jax.vmap(m)(xs) - ys)))(m)
    return loss, jax.tree_util.tree_leaves(tmap(lambda p, d: p - 0.1 * d, m, g))


def optax_like_l2(r):
    return 0.5 * jnp.sum(r * r, -1)


class AdamState(NamedTuple):
    count: jax.Array
    mu: dict
    nu: dict


@case("d_namedtuple_adam", {"w": f32(3, 2), "b": f32(2)}, {"w": f32(3, 2), "b": f32(2)}, np.int32(3))
def _(params, grads, count):
    st = AdamState(count, tmap(jnp.zeros_like, params), tmap(jnp.zeros_like, params))
    def step(st, _):
        mu = tmap(lambda m, g: 0.9 * m + 0.1 * g, st.mu, grads)
        nu = tmap(lambda v, g: 0.999 * v + 0.001 * g * g, st.nu, grads)
        c = st.count + 1
        return AdamState(c, mu, nu), tmap(lambda m, v: m / (1 - 0.9 ** c) / (jnp.sqrt(v / (1 - 0.999 ** c)) + 1e-8), mu, nu)
    st, ups = lax.scan(step, st, None, length=3)
    return st, ups
@case("d_dataclass_carry_scan", f32(2, 2), f32(2), f32(6, 2))
def _(w, b, xs):
    def cell(lin, x):
        y = jnp.tanh(lin(x)); return Linear(lin.weight * 0.99, lin.bias + 0.01 * y), y
    return lax.scan(cell, Linear(w, b), xs)
@case("d_module_stateful_bn", f32(6, 4), {"mean": f32(4), "var": pos(4)}, np.bool_(True))
def _(x, state, training):
    def train(x, st):
        m, v = x.mean(0), x.var(0)
        return (x - m) / jnp.sqrt(v + 1e-5), {"mean": 0.9 * st["mean"] + 0.1 * m, "var": 0.9 * st["var"] + 0.1 * v}
    def infer(x, st): return (x - st["mean"]) / jnp.sqrt(st["var"] + 1e-5), st
    return lax.cond(training, train, infer, x, state)
@case("d_partial_module_apply", f32(4, 4), f32(4, 3))
def _(w, x):
    apply = jax.tree_util.Partial(lambda w, s, x: s * (w @ x), w, 0.5)
    return jax.vmap(apply, in_axes=1, out_axes=1)(x)
@case("d_tree_structure_ops", {"a": f32(3), "b": (f32(2), f32(2, 2))})
def _(t):
    leaves = jax.tree_util.tree_leaves(t)
    norm = jnp.sqrt(sum(jnp.sum(l ** 2) for l in leaves))
    return jax.tree_util.tree_map_with_path(lambda p, l: l / norm * len(p), t)

# ---- control flow with pytree carries, reverse, unroll, xs=None
@case("d_scan_reverse_unroll", f32(9))
def _(xs): return lax.scan(lambda c, x: (c * 0.5 + x, c), 0.0, xs, reverse=True, unroll=3)
@case("d_scan_unroll_true", f32(5, 2))
def _(xs): return lax.scan(lambda c, x: (c + x, jnp.sin(c)), jnp.zeros(2), xs, unroll=True)
@case("d_scan_dict_xs", {"a": f32(6, 2), "b": i32(6, lo=0, hi=3)})
def _(xs):
    def body(c, x): return c + x["a"] * x["b"], {"s": c.sum(), "i": x["b"] * 2}
    return lax.scan(body, jnp.ones(2), xs)
@case("d_scan_no_carry", f32(5, 3))
def _(xs): return lax.scan(lambda _, x: (None, jnp.cumsum(x)), None, xs)[1]
@case("d_scan_nested_tuple_carry", f32(4), f32(7))
def _(h0, xs):
    def body(carry, x):
        (h, (n, m)) = carry
        h = jnp.roll(h, 1) * 0.8 + x
        return (h, (n + 1, jnp.maximum(m, h.max()))), h[0]
    return lax.scan(body, (h0, (0, -jnp.inf)), xs)
@case("d_scan_length_ys_pytree", f32(3))
def _(x0):
    def body(x, _): y = x @ jnp.array([[0.9, 0.1, 0.0], [0.0, 0.9, 0.1], [0.1, 0.0, 0.9]]); return y, (y, y.sum())
    return lax.scan(body, x0, length=5)
@case("d_fori_unroll_pytree", f32(3), f32(3))
def _(a, b):
    return lax.fori_loop(0, 6, lambda i, c: (c[0] + c[1] * i, c[1] * 0.9, c[2] + 1), (a, b, 0), unroll=2)
@case("d_fori_dynamic_bounds", f32(8), np.int32(2), np.int32(6))
def _(x, lo, hi): return lax.fori_loop(lo, hi, lambda i, s: s + x[i] * i, 0.0)
@case("d_while_tuple_tolerance", pos(4))
def _(a):
    def cond(s): x, it, err = s; return (err > 1e-5) & (it < 50)
    def body(s):
        x, it, err = s; nx = 0.5 * (x + a / x); return nx, it + 1, jnp.max(jnp.abs(nx - x))
    return lax.while_loop(cond, body, (a, 0, jnp.inf))
@case("d_while_int_state", i32(1, lo=7, hi=30))
def _(n0):
    def body(s): n, steps = s; return jnp.where(n % 2 == 0, n // 2, 3 * n + 1), steps + 1
    return lax.while_loop(lambda s: jnp.all(s[0] != 1), body, (n0, 0))
@case("d_map_pytree", {"x": f32(4, 3), "y": f32(4)})
def _(t): return lax.map(lambda d: jnp.dot(d["x"], d["x"]) + d["y"], t)
@case("d_scan_grad_through_carry", f32(3), f32(5, 3))
def _(h0, xs):
    def f(h0):
        def body(h, x): h = jnp.tanh(h * 0.7 + x); return h, h.sum()
        return lax.scan(body, h0, xs)[1].sum()
    return jax.grad(f)(h0)
@case("d_associative_scan_axis1_rev", f32(3, 6))
def _(x): return lax.associative_scan(jnp.maximum, x, axis=1, reverse=True)
@case("d_cond_no_operands", f32(4), np.float32(-1.0))
def _(x, s): return lax.cond(s > 0, lambda: x * 2, lambda: x - 1)
@case("d_cond_int_outputs", i32(5), np.int32(1))
def _(x, p): return lax.cond(p, lambda x: (x * 3, x.sum()), lambda x: (x // 2, x.max()), x)
@case("d_cond_complex_operand", c64(3), np.bool_(False))
def _(z, p): return lax.cond(p, lambda z: z * 1j, lambda z: jnp.conj(z) + 1, z)
@case("d_cond_f16_bool_ops", f32(4).astype(np.float16), np.bool_(True))
def _(h, p): return lax.cond(p, lambda h: (h * h, h > 0), lambda h: (-h, h < 0), h)
@case("d_switch_pytree_many", np.int32(2), f32(3), i32(3))
def _(k, x, n):
    bs = [lambda a: {"v": a[0] + 1, "n": a[1]}, lambda a: {"v": a[0] * 2, "n": a[1] + 1},
          lambda a: {"v": jnp.sin(a[0]), "n": a[1] * 2}, lambda a: {"v": a[0] ** 2, "n": -a[1]}]
    return lax.switch(k, bs, (x, n))
@case("d_switch_out_of_range", np.int32(7), f32(3))
def _(k, x): return lax.switch(k, [jnp.sin, jnp.cos, jnp.tanh], x), lax.switch(-k, [jnp.sin, jnp.cos], x)
@case("d_cond_uint8_operand", raw().randint(0, 255, 6).astype(np.uint8), np.int32(0))
def _(x, p): return lax.cond(p > 0, lambda x: x >> 1, lambda x: x ^ np.uint8(255), x)

# ---- remat / checkpoint
@case("d_checkpoint_static_arg", f32(4), f32(4))
def _(x, w):
    @partial(jax.checkpoint, static_argnums=(1,))
    def layer(x, n): return jnp.sin(x * w) ** n
    return jax.grad(lambda x: jnp.sum(layer(layer(x, 2), 3)))(x)
@case("d_checkpoint_nothing_saveable", f32(3, 3), f32(3))
def _(w, x):
    f = jax.checkpoint(lambda w, x: jax.nn.gelu(w @ x), policy=jax.checkpoint_policies.nothing_saveable)
    return jax.grad(lambda w: jnp.sum(f(w, f(w, x))))(w)
@case("d_remat_prevent_cse_false", f32(5))
def _(x):
    f = jax.remat(lambda x: jnp.exp(jnp.sin(x)), prevent_cse=False)
    return jax.vmap(jax.grad(lambda t: f(t) * 2))(x)
@case("d_checkpoint_in_scan_grad", f32(4), f32(6, 4))
def _(h, xs):
    @jax.checkpoint
    def body(h, x): return jnp.tanh(h + x * h), None
    return jax.grad(lambda h: jnp.sum(lax.scan(body, h, xs)[0]))(h)

# ---- custom derivatives
@jax.custom_jvp
def _safe_norm(x):
    return jnp.sqrt(jnp.sum(x * x))
@_safe_norm.defjvp
def _safe_norm_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    n = _safe_norm(x)
    return n, jnp.where(n > 0, jnp.dot(x, t) / jnp.where(n > 0, n, 1.0), 0.0)
@case("d_custom_jvp_safe_norm", f32(4))
def _(x): return _safe_norm(x), jax.grad(_safe_norm)(x), jax.grad(_safe_norm)(x * 0)
@case("d_custom_jvp_hessian", f32(3))
def _(x): return jax.hessian(lambda x: _safe_norm(x) ** 3)(x)


@jax.custom_vjp
def _tree_fn(p, x):
    return {"y": p["a"] * jnp.sin(x) + p["b"]}
def _tree_fwd(p, x):
    return _tree_fn(p, x), (p, jnp.cos(x), jnp.sin(x))
def _tree_bwd(res, g):
    p, c, s = res
    return {"a": jnp.sum(g["y"] * s), "b": jnp.sum(g["y"])}, g["y"] * p["a"] * c
_tree_fn.defvjp(_tree_fwd, _tree_bwd)
@case("d_custom_vjp_pytree_residuals", {"a": np.float32(1.3), "b": np.float32(-0.2)}, f32(5))
def _(p, x): return jax.grad(lambda p, x: jnp.sum(_tree_fn(p, x)["y"] ** 2), argnums=(0, 1))(p, x)


@partial(jax.custom_vjp, nondiff_argnums=(0,))
def _scaled_clip(scale, x):
    return x * scale
def _sc_fwd(scale, x): return x * scale, None
def _sc_bwd(scale, _, g): return (jnp.clip(g * scale, -1.0, 1.0),)
_scaled_clip.defvjp(_sc_fwd, _sc_bwd)
@case("d_custom_vjp_nondiff_vmap", f32(4, 3))
def _(x): return jax.vmap(jax.grad(lambda r: jnp.sum(_scaled_clip(3.0, r) ** 2)))(x)


@jax.custom_jvp
def _logaddexp_cj(a, b):
    m = jnp.maximum(a, b); return m + jnp.log1p(jnp.exp(-jnp.abs(a - b)))
_logaddexp_cj.defjvps(lambda ta, ans, a, b: ta * jnp.exp(a - ans), lambda tb, ans, a, b: tb * jnp.exp(b - ans))
@case("d_custom_jvp_defjvps_jacfwd", f32(3), f32(3))
def _(a, b): return jax.jacfwd(_logaddexp_cj, argnums=(0, 1))(a, b)
@case("d_custom_jvp_in_scan", f32(5))
def _(xs): return lax.scan(lambda c, x: (_logaddexp_cj(c, x), c), -jnp.inf, xs)

# ---- vmap forms
@case("d_vmap_in_out_dicts", {"w": f32(3, 4), "b": f32(4)}, f32(5, 3))
def _(p, xs):
    return jax.vmap(lambda p, x: {"o": x @ p["w"] + p["b"], "n": jnp.sum(x)}, in_axes=({"w": None, "b": None}, 0),
                    out_axes={"o": 1, "n": 0})(p, xs)
@case("d_vmap_nested_in_axes", f32(3, 4, 5))
def _(x): return jax.vmap(jax.vmap(lambda r: r / r.sum(), in_axes=1, out_axes=1), in_axes=2, out_axes=0)(x)
@case("d_vmap_axis_name_psum", f32(4, 3))
def _(x): return jax.vmap(lambda r: r / lax.psum(jnp.sum(r), "batch"), axis_name="batch")(x)
@case("d_vmap_pmean_pmax", f32(5, 2))
def _(x): return jax.vmap(lambda r: (r - lax.pmean(r, "i"), lax.pmax(r, "i"), lax.axis_index("i")), axis_name="i")(x)
@case("d_vmap_axis_size_none", f32(3))
def _(x): return jax.vmap(lambda: x * 2, axis_size=4)()
@case("d_vmap_out_axes_none", f32(4, 2), f32(2))
def _(x, c): return jax.vmap(lambda r: (r * c, c), out_axes=(0, None))(x)
@case("d_vmap_of_scan_over_batch", f32(3, 6))
def _(xs): return jax.vmap(lambda s: lax.scan(lambda c, x: (c + x * c, c), 1.0, s))(xs)
@case("d_vmap_of_while_batched_pred", f32(4, lo=0.5, hi=8))
def _(x): return jax.vmap(lambda v: lax.while_loop(lambda s: s[0] > 1, lambda s: (s[0] / 2, s[1] + 1), (v, 0)))(x)
@case("d_vmap_dynamic_slice_batched", f32(4, 10), i32(4, lo=0, hi=7))
def _(x, i): return jax.vmap(lambda r, s: lax.dynamic_slice(r, (s,), (3,)))(x, i)
@case("d_vmap_dynamic_update_batched", f32(3, 8), f32(3, 2), i32(3, lo=0, hi=6))
def _(x, u, i): return jax.vmap(lambda r, v, s: lax.dynamic_update_slice(r, v, (s,)))(x, u, i)
@case("d_vmap_gather_in_axes_tuple", f32(5, 6), i32(6, 2, lo=0, hi=5))
def _(x, idx): return jax.vmap(lambda col, ii: col[ii], in_axes=(1, 0))(x, idx)
@case("d_vmap_spmd_matmul_chain", f32(2, 3, 4), f32(4, 5), f32(2, 5))
def _(a, w, b): return jax.vmap(lambda x, bb: jax.nn.relu(x @ w + bb), in_axes=(0, 0))(a, b)

# ---- hessian / jacfwd / jacrev of pytrees
@case("d_hessian_pytree", {"a": f32(2), "b": f32(3)})
def _(t): return jax.hessian(lambda t: jnp.sum(jnp.sin(t["a"])) * jnp.sum(t["b"] ** 2))(t)
@case("d_jacrev_has_aux", f32(3))
def _(x): return jax.jacrev(lambda x: (jnp.tanh(x) * x.sum(), x.mean()), has_aux=True)(x)
@case("d_jacfwd_matrix_fn", f32(2, 2) + np.eye(2, dtype=np.float32) * 2)
def _(a): return jax.jacfwd(jnp.linalg.inv)(a)
@case("d_jacrev_argnums_tuple", f32(3), f32(3))
def _(x, y): return jax.jacrev(lambda x, y: jnp.outer(x, y).sum(0) * jnp.exp(x), argnums=(0, 1))(x, y)
@case("d_hessian_logsumexp", f32(4))
def _(x): return jax.hessian(jax.nn.logsumexp)(x)
@case("d_jvp_of_grad", f32(3), f32(3))
def _(x, v): return jax.jvp(jax.grad(lambda x: jnp.sum(jnp.cos(x) * x ** 2)), (x,), (v,))
@case("d_grad_of_grad_scalar", np.float32(0.7))
def _(x): return jax.grad(jax.grad(jax.grad(lambda x: jnp.exp(jnp.sin(x)))))(x)
@case("d_jacfwd_scan", f32(3))
def _(x0): return jax.jacfwd(lambda x0: lax.scan(lambda c, _: (jnp.sin(c) * 1.1, None), x0, length=4)[0])(x0)

# ---- jax.numpy indexing: .at[] with modes and flags, masks, take_along_axis
@case("d_at_set_drop_promise", f32(6), i32(4, lo=-2, hi=9), f32(4))
def _(x, i, u): return x.at[i].set(u, mode="drop"), x.at[jnp.clip(i, 0, 5)].set(u, mode="promise_in_bounds")
@case("d_at_add_unique_sorted", f32(8), f32(3))
def _(x, u): return x.at[jnp.array([1, 3, 6])].add(u, indices_are_sorted=True, unique_indices=True)
@case("d_at_min_max_2d", f32(4, 5), i32(3, lo=0, hi=4), f32(3, 5))
def _(x, i, u): return x.at[i].min(u), x.at[i, 1:3].max(u[:, :2])
@case("d_at_divide_power_apply", pos(6))
def _(x): return x.at[::2].divide(2.0), x.at[1:4].power(2), x.at[jnp.array([0, 5])].apply(jnp.log)
@case("d_at_get_fill_2d", f32(3, 4), i32(5, lo=-4, hi=6))
def _(x, i): return x.at[i, 0].get(mode="fill", fill_value=jnp.nan), x.at[:, i].get(mode="clip")
@case("d_at_set_bool_mask", f32(6))
def _(x): return jnp.where(x < 0, 0.0, x).at[jnp.argmax(x)].set(-1.0), jnp.where(x > 1, x, jnp.nan)
@case("d_at_scalar_dynamic_index", f32(5, 3), np.int32(3))
def _(x, k): return x.at[k].set(x[k] * 10).at[k - 1, k - 2].add(100.0)
@case("d_take_along_axis_argsort", f32(4, 6))
def _(x):
    order = jnp.argsort(-x, axis=1)
    return jnp.take_along_axis(x, order, axis=1), jnp.take_along_axis(x, order[:, :2], axis=1, mode="clip")
@case("d_put_along_axis_argmax", f32(3, 5))
def _(x): return jnp.put_along_axis(x, jnp.argmax(x, 1, keepdims=True), 0.0, axis=1, inplace=False)
@case("d_argsort_stable_descending", i32(10, lo=0, hi=4))
def _(x): return jnp.argsort(x, stable=True), jnp.argsort(x, descending=True), jnp.sort(x, descending=True)
@case("d_searchsorted_methods", np.sort(f32(12)), f32(5))
def _(a, v):
    return (jnp.searchsorted(a, v, side="right"), jnp.searchsorted(a, v, method="sort"),
            jnp.searchsorted(a, v, method="compare_all"), jnp.searchsorted(a, v, method="scan_unrolled"))
@case("d_unique_all_outputs", i32(10, lo=0, hi=5))
def _(x): return jnp.unique(x, size=6, fill_value=99, return_index=True, return_inverse=True, return_counts=True)
@case("d_unique_values_2d", i32(4, 3, lo=0, hi=3))
def _(x): return jnp.unique_values(x.ravel(), size=3), jnp.unique(x, axis=0, size=4, fill_value=0)
@case("d_bincount_length_weights", i32(9, lo=0, hi=5), pos(9))
def _(x, w): return jnp.bincount(x, length=6), jnp.bincount(x, weights=w, length=5), jnp.bincount(x, minlength=3, length=7)
@case("d_histogram_bins_array", f32(20), np.array([-2, -1, 0, 0.5, 2], np.float32))
def _(x, edges): return jnp.histogram(x, bins=edges), jnp.histogram(x, bins=edges, density=True)[0]
@case("d_histogram2d", f32(15), f32(15))
def _(x, y): return jnp.histogram2d(x, y, bins=3, range=[[-2, 2], [-2, 2]])[0]
@case("d_cumsum_dtype_axis", i32(3, 4, lo=0, hi=4).astype(np.int16))
def _(x): return jnp.cumsum(x, axis=0, dtype=jnp.int32), jnp.cumprod(x, axis=1), jnp.cumulative_sum(x, axis=1, include_initial=True)
@case("d_nancumsum_nanprod", np.array([1.0, np.nan, 2.0, 3.0, np.nan], np.float32))
def _(x): return jnp.nancumsum(x), jnp.nancumprod(x), jnp.nanmean(x), jnp.nanvar(x)
@case("d_diff_n2_prepend", f32(7))
def _(x): return jnp.diff(x, n=2), jnp.diff(x, prepend=0.0, append=x[-1:]), jnp.ediff1d(x, to_begin=jnp.array([9.0]))
@case("d_diff_2d_axis0", f32(4, 3))
def _(x): return jnp.diff(x, axis=0), jnp.gradient(x)[1]
@case("d_einsum_four_operands", f32(2, 3), f32(3, 4), f32(4, 5), f32(5))
def _(a, b, c, d): return jnp.einsum("ij,jk,kl,l->i", a, b, c, d), jnp.einsum("ij,jk,kl,l", a, b, c, d, optimize="greedy")
@case("d_einsum_ellipsis_broadcast", f32(2, 3, 4), f32(4, 4))
def _(a, m): return jnp.einsum("...ij,jk->...ik", a, m), jnp.einsum("bij->b", a), jnp.einsum("ii", m)
@case("d_einsum_repeated_output", f32(3), f32(3, 3))
def _(v, m): return jnp.einsum("i,ij,j->", v, m, v), jnp.einsum("ij,ij->i", m, m), jnp.einsum("i,j->ji", v, v)
@case("d_tensordot_axes_forms", f32(2, 3, 4), f32(3, 4, 5))
def _(a, b): return jnp.tensordot(a, b, axes=2), jnp.tensordot(a, b, axes=([1], [0])), jnp.tensordot(a[0, 0], b[0, 0], axes=0), jnp.tensordot(a[0], b[0], axes=1)
@case("d_kron_outer_inner", f32(2, 2), f32(3, 2))
def _(a, b): return jnp.kron(a, b), jnp.inner(a, b), jnp.outer(a, b).sum(1), jnp.vdot(a, a)
@case("d_poly_family", f32(4), f32(3), f32(5))
def _(p, q, x):
    return jnp.polyval(p, x), jnp.polyadd(p, q), jnp.polymul(p, q), jnp.polyder(p), jnp.polyint(q), jnp.polysub(p, q)
@case("d_interp_left_right_period", np.sort(f32(8)), f32(8), f32(6, lo=-3, hi=3))
def _(xp, fp, x): return jnp.interp(x, xp, fp, left=-9.0, right=9.0), jnp.interp(x, xp, fp, period=2.0)
@case("d_convolve_full_same", f32(9), f32(4))
def _(a, k): return jnp.convolve(a, k), jnp.convolve(a, k, mode="same"), jnp.correlate(a, k, mode="full")
@case("d_correlate_complex", c64(6), c64(3))
def _(a, k): return jnp.correlate(a, k, mode="valid"), jnp.convolve(a, k, mode="valid")
@case("d_pad_all_modes", f32(3, 4))
def _(x):
    return [jnp.pad(x, ((1, 2), (2, 1)), mode=m) for m in ("edge", "reflect", "symmetric", "wrap", "maximum",
                                                          "mean", "minimum", "median")] + \
           [jnp.pad(x, 2, mode="linear_ramp", end_values=((1.0, -1.0), (0.5, 0.5))), jnp.pad(x, ((0, 1), (1, 0)), constant_values=((7, 8), (9, 10))),
            jnp.pad(x, 1, mode="reflect", reflect_type="odd")]
@case("d_pad_empty_stat_length", f32(6))
def _(x): return jnp.pad(x, (2, 3), mode="mean", stat_length=2), jnp.pad(x, (3, 1), mode="maximum", stat_length=(1, 3))
@case("d_roll_multi_axes", f32(3, 5), np.int32(2))
def _(x, s): return jnp.roll(x, (1, -2), axis=(0, 1)), jnp.roll(x, s), jnp.roll(x, s, axis=1)
@case("d_tril_triu_k", f32(4, 5))
def _(x): return jnp.tril(x, -1), jnp.triu(x, 2), jnp.tri(4, 5, 1), jnp.tril_indices_from(x[:, :4], -1)[1]
@case("d_linspace_forms", np.float32(-1.0), np.float32(3.0))
def _(a, b):
    return (jnp.linspace(a, b, 7), jnp.linspace(a, b, 4, endpoint=False), jnp.linspace(a, b, 5, retstep=True)[1],
            jnp.logspace(0, 2, 5), jnp.geomspace(1.0, 8.0, 4), jnp.linspace(jnp.zeros(2), jnp.ones(2) * b, 3, axis=1))
@case("d_meshgrid_ij_sparse", f32(3), f32(4))
def _(x, y):
    a, b = jnp.meshgrid(x, y, indexing="ij"); c, d = jnp.meshgrid(x, y, sparse=True)
    return a * b, c + d, jnp.stack(jnp.meshgrid(x, y, x, indexing="ij")).sum(0)
@case("d_where_one_arg_size", f32(8))
def _(x): return jnp.where(x > 0, size=5, fill_value=7)[0], jnp.flatnonzero(x > 0, size=4), jnp.extract(x > 0, x, size=4)
@case("d_select_piecewise_compress", f32(9))
def _(x):
    return (jnp.select([x < -1, x < 1], [x * 2, x ** 2], default=-5.0),
            jnp.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v * 3]),
            jnp.compress(jnp.arange(9) % 3 == 0, x, size=3))
@case("d_repeat_tile_total", f32(3), i32(3, lo=1, hi=3))
def _(x, r): return jnp.repeat(x, r, total_repeat_length=8), jnp.tile(x, (2, 2)), jnp.repeat(x[None], 2, axis=0)
@case("d_split_stack_forms", f32(6, 4))
def _(x):
    a, b, c = jnp.split(x, [1, 4]); d, e = jnp.hsplit(x, 2)
    return jnp.dstack([d, e]), jnp.column_stack([a.ravel(), a.ravel()]), jnp.concatenate([b, c], 0), jnp.vsplit(x, 3)[2]
@case("d_moveaxis_swap_flip", f32(2, 3, 4))
def _(x): return jnp.moveaxis(x, 0, -1), jnp.swapaxes(x, 0, 2), jnp.flip(x, (0, 2)), jnp.fliplr(x[0]), jnp.flipud(x[1])
@case("d_clip_nan_to_num", np.array([1.0, np.nan, np.inf, -np.inf, -3.0], np.float32))
def _(x): return jnp.nan_to_num(x), jnp.nan_to_num(x, nan=-1.0, posinf=9.0), jnp.clip(x, min=-2.0), jnp.isnan(x) | jnp.isinf(x)
@case("d_argmin_argmax_keepdims", f32(3, 4))
def _(x): return jnp.argmax(x, axis=1, keepdims=True), jnp.argmin(x), jnp.nanargmax(x.at[0, 0].set(jnp.nan), axis=0)
@case("d_lexsort_partition", f32(8), i32(8, lo=0, hi=3))
def _(a, b): return jnp.lexsort((a, b)), jnp.partition(a, 3), jnp.argpartition(a, 2)[:2]
@case("d_ptp_median_percentile", f32(5, 6))
def _(x): return jnp.ptp(x, axis=0), jnp.median(x, axis=1), jnp.percentile(x, jnp.array([10.0, 90.0]), method="nearest")
@case("d_trace_diagonal_offset", f32(4, 5))
def _(x): return jnp.trace(x, offset=1), jnp.diagonal(x, offset=-1), jnp.diag(x, k=2)
@case("d_count_sum_where", f32(4, 5))
def _(x): return jnp.sum(x, where=x > 0, axis=1), jnp.max(x, where=x < 1, initial=-10.0), jnp.mean(x, where=x > -1)
@case("d_cross_vecdot_matvec", f32(4, 3), f32(4, 3))
def _(a, b): return jnp.cross(a, b), jnp.vecdot(a, b), jnp.linalg.vecdot(a, b, axis=0), jnp.matmul(a, b.T)
@case("d_isin_setops_size", i32(8, lo=0, hi=6), i32(4, lo=0, hi=6))
def _(a, b):
    return (jnp.isin(a, b), jnp.intersect1d(a, b, size=4, fill_value=-1), jnp.union1d(a, b, size=9, fill_value=-1),
            jnp.setdiff1d(a, b, size=4, fill_value=-1))
@case("d_indices_ravel_multi", i32(5, lo=0, hi=3), i32(5, lo=0, hi=4))
def _(i, j):
    flat = jnp.ravel_multi_index((i, j), (3, 4), mode="clip"); return flat, jnp.unravel_index(flat, (3, 4)), jnp.indices((2, 3)).sum(0)
@case("d_apply_along_vectorize", f32(3, 4))
def _(x):
    return jnp.apply_along_axis(lambda r: r.max() - r.min(), 1, x), jnp.vectorize(lambda a, b: a * b + 1)(x, x[0]), \
        jnp.vectorize(jnp.outer, signature="(n),(m)->(n,m)")(x, x)

# ---- random: typed keys, key_data, samplers with shapes and dtypes
@case("d_key_typed_split_fold", K)
def _(raw_key):
    k = jax.random.wrap_key_data(raw_key)
    a, b, c = jax.random.split(k, 3)
    return jax.random.key_data(jax.random.fold_in(a, 5)), jax.random.normal(b, (3,)), jax.random.uniform(c, (2, 2), minval=-1, maxval=3)
@case("d_key_new_style_seed", np.int32(11))
def _(seed):
    k = jax.random.key(seed); return jax.random.key_data(k), jax.random.normal(k, (4,), dtype=jnp.float16)
@case("d_prngkey_split_shape", np.int32(5))
def _(seed): return jax.random.split(jax.random.PRNGKey(seed), (2, 3)), jax.random.bits(jax.random.PRNGKey(seed), (3,), jnp.uint8)
@case("d_categorical_shape_axis", K, f32(3, 5))
def _(k, logits):
    return jax.random.categorical(k, logits, axis=-1, shape=(4, 3)), jax.random.categorical(k, logits.T, axis=0)
@case("d_permutation_independent", K, f32(3, 5))
def _(k, x): return jax.random.permutation(k, x, axis=1, independent=True), jax.random.permutation(k, 6)
@case("d_bernoulli_array_p", K, raw().uniform(0, 1, (2, 4)).astype(np.float32))
def _(k, p): return jax.random.bernoulli(k, p), jax.random.bernoulli(k, 0.3, (3,)).astype(jnp.int32)
@case("d_normal_dtypes", K)
def _(k):
    return (jax.random.normal(k, (3,), jnp.float16), jax.random.normal(k, (2, 2)) * 2 + 1,
            jax.random.truncated_normal(k, -1.0, 2.0, (4,)), jax.random.uniform(k, (3,), jnp.float16))
@case("d_randint_dtypes", K)
def _(k):
    return (jax.random.randint(k, (5,), 0, 10, jnp.int16), jax.random.randint(k, (3,), -3, 3, jnp.int8),
            jax.random.randint(k, (4,), jnp.array([0, 1, 2, 3]), 10))
@case("d_samplers_misc", K)
def _(k):
    ks = jax.random.split(k, 8)
    return (jax.random.rademacher(ks[0], (4,)), jax.random.cauchy(ks[1], (3,)), jax.random.logistic(ks[2], (3,)),
            jax.random.laplace(ks[3], (3,)), jax.random.pareto(ks[4], 3.0, (3,)), jax.random.weibull_min(ks[5], 1.0, 2.0, (3,)),
            jax.random.maxwell(ks[6], (3,)), jax.random.triangular(ks[7], 0.0, 0.3, 1.0, (3,)))
@case("d_sampler_ball_dirichlet", K, pos(3))
def _(k, a): return jax.random.ball(k, 3, 2, (4,)), jax.random.dirichlet(k, a, (2,))
@case("d_sampler_choice_noreplace_p", K, pos(6))
def _(k, w): return jax.random.choice(k, 6, (3,), replace=False, p=w / w.sum()), jax.random.choice(k, jnp.arange(10) * 2, (2, 2))
@case("d_sampler_poisson_geometric", K)
def _(k): return jax.random.poisson(k, 3.0, (5,)), jax.random.geometric(k, 0.3, (4,))
@case("d_sampler_binomial", K)
def _(k): return jax.random.binomial(k, 10.0, 0.3, (4,))
@case("d_sampler_t_loggamma_gennorm", K)
def _(k):
    ks = jax.random.split(k, 3)
    return jax.random.t(ks[0], 5.0, (3,)), jax.random.loggamma(ks[1], 2.0, (3,)), jax.random.generalized_normal(ks[2], 1.5, (3,))
@case("d_random_vmap_fold_in", K, f32(4))
def _(k, x): return jax.vmap(lambda i, v: v + jax.random.normal(jax.random.fold_in(k, i)))(jnp.arange(4), x)
@case("d_random_in_scan_split", K, f32(5))
def _(k, xs):
    def body(k, x): k, s = jax.random.split(k); return k, x + jax.random.uniform(s)
    return lax.scan(body, k, xs)
@case("d_random_shuffle_rows", K, f32(6, 3))
def _(k, x): return x[jax.random.permutation(k, x.shape[0])], jax.random.permutation(k, x, axis=0)
@case("d_mvn_svd_method", K, f32(3))
def _(k, m): return jax.random.multivariate_normal(k, m, jnp.eye(3) + 0.3, (2,), method="svd")

# ---- jax.scipy.special / stats
@case("d_special_gammainc_family", pos(6), pos(6))
def _(a, x): return jss.gammainc(a, x), jss.gammaincc(a, x), jss.gammaln(a), jss.digamma(a), jss.gammasgn(a - 1.5)
@case("d_special_ndtr_logit", f32(6))
def _(x): return jss.ndtr(x), jss.log_ndtr(x), jss.expit(x), jss.logit(jss.expit(x)), jss.erfc(x), jss.erfcx(x)
@case("d_special_entr_xlogy", pos(5), pos(5))
def _(p, q): return jss.entr(p), jss.xlogy(p, q), jss.kl_div(p, q), jss.rel_entr(p, q), jss.log_softmax(p)
@case("d_special_bessel_i0e", f32(6))
def _(x): return jss.i0e(x), jss.i1e(x), jss.i0(x), jss.i1(x)
@case("d_special_poch_factorial", pos(5), pos(5))
def _(a, m): return jss.poch(a, m), jss.factorial(jnp.round(a * 2)), jss.beta(a, m), jss.betaln(a, m)
@case("d_special_expn_exp1", pos(5))
def _(x): return jss.exp1(x), jss.expn(2, x), jss.expi(x)
@case("d_special_spence_hyp1f1", pos(5), pos(5))
def _(x, b): return jss.spence(x), jss.hyp1f1(1.5, b, x * 0.3)
@case("d_special_bessel_jn", pos(5))
def _(x): return jss.bessel_jn(x, v=3)
@case("d_special_logsumexp_sign_axis", f32(3, 4), f32(3, 4))
def _(x, b): return jss.logsumexp(x, axis=0, b=b, return_sign=True), jss.logsumexp(x, axis=(0, 1), keepdims=True)
@case("d_stats_cdf_family", f32(6))
def _(x):
    return (jst.norm.cdf(x, 0.5, 2.0), jst.norm.logcdf(x), jst.norm.sf(x), jst.norm.logsf(x), jst.logistic.cdf(x),
            jst.cauchy.cdf(x), jst.laplace.cdf(x), jst.t.logpdf(x, 3.0))
@case("d_stats_discrete", i32(6, lo=0, hi=8), raw().uniform(0.1, 0.9, 6).astype(np.float32))
def _(k, p):
    return (jst.binom.logpmf(k, 10, p), jst.nbinom.logpmf(k, 3, p), jst.geom.logpmf(k + 1, p),
            jst.bernoulli.logpmf(k % 2, p), jst.poisson.cdf(k, 3.0))
@case("d_stats_continuous_more", pos(6))
def _(x):
    return (jst.chi2.logpdf(x, 3.0), jst.expon.logpdf(x, scale=2.0), jst.uniform.logpdf(x, 0.5, 2.0),
            jst.pareto.logpdf(x + 1, 2.0), jst.gamma.cdf(x, 2.0), jst.beta.logpdf(x / 4, 2.0, 3.0),
            jst.vonmises.logpdf(x, 1.0), jst.gennorm.logpdf(x, 1.5), jst.truncnorm.logpdf(x, 0.0, 2.0))
@case("d_stats_dirichlet_multinomial", raw().dirichlet(np.ones(4)).astype(np.float32), pos(4))
def _(x, a): return jst.dirichlet.logpdf(x, a), jst.multinomial.logpmf(jnp.array([1, 2, 0, 3]), 6, x)
@case("d_stats_mvn_cov_batch", f32(5, 3), f32(3), spd(3))
def _(x, m, c): return jst.multivariate_normal.logpdf(x, m, c), jst.multivariate_normal.pdf(x[0], m, c)
@case("d_stats_rankdata_mode", f32(7), i32(7, lo=0, hi=3))
def _(x, k): return jst.rankdata(x), jst.rankdata(k, method="min"), jst.mode(k).mode
@case("d_stats_entropy_like", pos(6))
def _(p): q = p / p.sum(); return -jnp.sum(jss.entr(q)), jnp.sum(jss.rel_entr(q, q[::-1])), jst.norm.ppf(q / 2)

# ---- jax.nn activations and initializers
@case("d_nn_activations_all", f32(10, lo=-4, hi=4))
def _(x):
    return (jax.nn.celu(x), jax.nn.elu(x, 0.5), jax.nn.selu(x), jax.nn.hard_tanh(x), jax.nn.hard_sigmoid(x),
            jax.nn.hard_swish(x), jax.nn.log_sigmoid(x), jax.nn.mish(x), jax.nn.relu6(x), jax.nn.leaky_relu(x, 0.2),
            jax.nn.soft_sign(x), jax.nn.sigmoid(x), jax.nn.gelu(x, approximate=False), jax.nn.glu(x.reshape(2, 5), 0))
@case("d_nn_standardize_one_hot_axis", f32(3, 4), i32(5, lo=-1, hi=4))
def _(x, i): return jax.nn.standardize(x, axis=1), jax.nn.one_hot(i, 4, axis=0), jax.nn.one_hot(i, 3, dtype=jnp.int8)
@case("d_nn_activation_grads", f32(8))
def _(x):
    return [jax.grad(lambda v: jnp.sum(f(v)))(x) for f in (jax.nn.mish, jax.nn.selu, jax.nn.elu, jax.nn.log_sigmoid,
                                                           jax.nn.hard_swish, jax.nn.relu6)]
@case("d_nn_initializers", K)
def _(k):
    ks = jax.random.split(k, 6); ini = jax.nn.initializers
    return (ini.lecun_normal()(ks[0], (3, 4)), ini.he_uniform()(ks[1], (4, 2)), ini.glorot_normal()(ks[2], (2, 5)),
            ini.variance_scaling(2.0, "fan_avg", "truncated_normal")(ks[3], (3, 3)), ini.normal(0.02)(ks[4], (4,)),
            ini.uniform(0.1)(ks[5], (2, 2)), ini.constant(0.5)(k, (2,)), ini.zeros(k, (3,)))
@case("d_nn_init_conv_fan_in", K)
def _(k): return jax.nn.initializers.lecun_uniform(in_axis=-2, out_axis=-1)(k, (3, 3, 2, 4)), jax.nn.initializers.delta_orthogonal()(k, (3, 2, 2))
@case("d_nn_softmax_multi_axis", f32(2, 3, 4))
def _(x): return jax.nn.softmax(x, axis=(1, 2)), jax.nn.log_softmax(x, axis=0), jax.nn.logsumexp(x, axis=(0, 2))
@case("d_nn_dpa_bias_mask", f32(1, 3, 2, 4), f32(1, 5, 2, 4), f32(1, 5, 2, 4), f32(1, 2, 3, 5))
def _(q, k, v, b):
    mask = jnp.arange(5)[None, None, None, :] < 4
    return jax.nn.dot_product_attention(q, k, v, bias=b, mask=mask, scale=0.3)

# ---- dtypes: int8/int16/uint8/uint16/float16/complex, reduce_precision
I16 = raw().randint(-300, 300, 8).astype(np.int16)
U16 = raw().randint(0, 60000, 8).astype(np.uint16)
U8 = raw().randint(0, 256, 8).astype(np.uint8)
I8 = raw().randint(-128, 128, 8).astype(np.int8)
@case("d_int16_arith_wrap", I16, I16[::-1].copy())
def _(a, b): return a * b, a + b, a // jnp.where(b == 0, 1, b), a % 7, (a >> 3), a.astype(jnp.float32) / 300
@case("d_uint16_ops", U16)
def _(x): return x + np.uint16(1000), x >> 4, x & 0xFF, x.max(), jnp.sum(x, dtype=jnp.uint32), x.astype(jnp.int32) - 30000
@case("d_uint8_saturate_clip", U8, U8[::-1].copy())
def _(a, b):
    wide = a.astype(jnp.int16) + b.astype(jnp.int16)
    return jnp.clip(wide, 0, 255).astype(jnp.uint8), a - b, (a.astype(jnp.float32) * 0.5).astype(jnp.uint8), jnp.mean(a)
@case("d_int8_ops_overflow", I8, I8[::-1].copy())
def _(a, b): return a + b, a * 2, -a, jnp.abs(a), jnp.maximum(a, b), lax.shift_left(a, jnp.int8(1)), jnp.sign(a)
@case("d_int_bitwise_family", i32(6, lo=-100, hi=100), i32(6, lo=0, hi=5))
def _(a, s):
    return (jnp.bitwise_and(a, 0x0F), jnp.bitwise_or(a, s), jnp.bitwise_xor(a, -1), jnp.invert(a), jnp.left_shift(a, s),
            jnp.right_shift(a, s), lax.shift_right_logical(a, s), lax.population_count(a), lax.clz(a))
@case("d_uint32_popcount_clz", raw().randint(0, 2**31, 6).astype(np.uint32))
def _(x): return lax.population_count(x), lax.clz(x), x >> 3, x * np.uint32(2654435761), x.astype(jnp.float32)
@case("d_f16_arith_reduce", f32(3, 4).astype(np.float16))
def _(x): return x * x + 1, jnp.exp(x), jnp.sum(x, 1), jnp.max(x), x.astype(jnp.float32).mean(), jnp.sqrt(jnp.abs(x))
@case("d_f16_matmul_softplus", f32(3, 4).astype(np.float16), f32(4, 2).astype(np.float16))
def _(a, b): return jax.nn.softplus(a @ b), lax.dot(a, b, preferred_element_type=jnp.float32)
@case("d_reduce_precision_forms", f32(6) * 100)
def _(x):
    return (lax.reduce_precision(x, 5, 10), lax.reduce_precision(x, 8, 7), lax.reduce_precision(x, 4, 3),
            lax.reduce_precision(x, exponent_bits=8, mantissa_bits=23))
@case("d_complex_arith_family", c64(5), c64(5))
def _(a, b):
    return a / b, a * jnp.conj(b), jnp.abs(a), jnp.angle(b), jnp.real(a * b), jnp.imag(a / b), jnp.exp(a), jnp.log(b), a ** 2
@case("d_complex_from_real_ops", f32(4), f32(4))
def _(re, im):
    z = lax.complex(re, im)
    return jnp.sqrt(z), jnp.sin(z), jnp.tanh(z), z.sum(), jnp.prod(z), jnp.cumsum(z), jnp.abs(z) ** 2, z.astype(jnp.complex64).conj()
@case("d_complex_matvec_solve", (np.eye(3) * 3 + c64(3, 3) * 0.3).astype(np.complex64), c64(3))
def _(a, b): return jnp.linalg.solve(a, b), a @ b, jnp.linalg.det(a), jnp.linalg.inv(a)
@x64case("d_x64_complex128", (f64(4) + 1j * f64(4)).astype(np.complex128))
def _(z): return jnp.exp(z) * jnp.conj(z), jnp.abs(z), jnp.angle(z), jnp.fft.fft(z)
@x64case("d_x64_int64_uint64", np.array([2**40, -3, 7, 2**33 + 1], np.int64))
def _(x): return x * 3, x // 5, x.astype(jnp.uint64) >> 2, x.astype(jnp.float64) / 7, jnp.cumsum(x)
@x64case("d_x64_float64_precision", f64(5))
def _(x): return jnp.exp(x) - 1 - x, jnp.expm1(x) - x, jnp.log1p(x ** 2), jnp.sum(x * 1e-12) + 1.0
@case("d_mixed_dtype_promotion", I8, U8, f32(8).astype(np.float16), f32(8))
def _(a, b, h, f): return a + b, a * h, b / f, h + f, (a > 0) + (b > 10), jnp.where(a > 0, h, f)
@case("d_bool_arith", f32(6) > 0, f32(6) > 0)
def _(a, b): return a ^ b, a & ~b, jnp.sum(a), a.astype(jnp.float32) * 2, jnp.logical_not(a), jnp.cumsum(b)
@case("d_astype_float_int_edges", np.array([-2.7, -0.5, 0.5, 2.5, 1e6, 129.4], np.float32))
def _(x): return x.astype(jnp.int32), x.astype(jnp.int16), jnp.trunc(x), jnp.floor(x).astype(jnp.int32), x.astype(jnp.bool_)

# ---- jnp.linalg with options
@case("d_linalg_solve_batched_b", spd(3), f32(3, 4))
def _(a, b): return jnp.linalg.solve(a, b), jnp.linalg.solve(jnp.stack([a, a * 2]), b[:, :2].T[..., None])[..., 0]
@case("d_linalg_inv_det_small", f32(1, 1) + 2, spd(2))
def _(a, b): return jnp.linalg.inv(a), jnp.linalg.det(a), jnp.linalg.det(b), jnp.linalg.slogdet(b)
@case("d_linalg_norm_matrix_ords", f32(3, 4))
def _(a):
    return [jnp.linalg.norm(a, o) for o in (None, "fro", "nuc", 1, -1, 2, -2, jnp.inf, -jnp.inf)]
@case("d_linalg_norm_vector_ords", f32(5))
def _(v):
    return [jnp.linalg.norm(v, o) for o in (0, 1, 2, 3, jnp.inf, -jnp.inf, -1)] + [jnp.linalg.vector_norm(v, ord=0.5)]
@case("d_linalg_norm_axes_keepdims", f32(2, 3, 4))
def _(a): return jnp.linalg.norm(a, axis=(1, 2)), jnp.linalg.norm(a, axis=-1, keepdims=True), jnp.linalg.matrix_norm(a, ord=1)
@case("d_linalg_pinv_rtol", f32(4, 3))
def _(a): return jnp.linalg.pinv(a), jnp.linalg.pinv(a, rtol=1e-3)
@case("d_linalg_lstsq_rcond", f32(6, 3), f32(6, 2))
def _(a, b): return jnp.linalg.lstsq(a, b, rcond=None)
@case("d_linalg_matrix_power_neg", spd(3) / 3)
def _(a): return jnp.linalg.matrix_power(a, -2), jnp.linalg.matrix_power(a, 0), jnp.linalg.matrix_power(a, 7)
@case("d_linalg_eigh_upper", spd(4))
def _(a): w, v = jnp.linalg.eigh(a, UPLO="U"); return w, jnp.abs(v), jnp.linalg.eigvalsh(a, UPLO="L")
@case("d_linalg_svd_full", f32(4, 3))
def _(a):
    u, s, vt = jnp.linalg.svd(a, full_matrices=True)
    return s, jnp.abs(u[:, :3] @ jnp.diag(s) @ vt), jnp.linalg.svdvals(a), jnp.linalg.cond(a)
@case("d_linalg_qr_modes", f32(4, 3))
def _(a): return jnp.abs(jnp.linalg.qr(a, mode="r")), jnp.abs(jnp.linalg.qr(a, mode="complete")[0]).sum()
@case("d_linalg_cholesky_upper_multidot", spd(3), f32(3, 3), f32(3, 2))
def _(a, b, c): return jnp.linalg.cholesky(a, upper=True), jnp.linalg.multi_dot([a, b, c]), jnp.linalg.matrix_rank(b)
@case("d_linalg_tensorsolve_outer", spd(4).reshape(2, 2, 2, 2), f32(2, 2))
def _(a, b): return jnp.linalg.tensorsolve(a, b), jnp.linalg.outer(b[0], b[1]), jnp.linalg.trace(a.reshape(4, 4))
@case("d_scipy_linalg_lu_factor_solve", spd(3) + f32(3, 3) * 0.2, f32(3))
def _(a, b):
    lu, piv = jsl.lu_factor(a); return jsl.lu_solve((lu, piv), b), jsl.lu_solve((lu, piv), b, trans=1)
@case("d_scipy_linalg_cho_triangular", spd(3), f32(3, 2))
def _(a, b):
    c = jsl.cho_factor(a, lower=False)
    return jsl.cho_solve(c, b), jsl.solve_triangular(jnp.tril(a), b, lower=True, trans="T"), jsl.solve(a, b, assume_a="pos")
@case("d_scipy_linalg_structured", f32(3), f32(2, 2), f32(4))
def _(v, m, w): return jsl.block_diag(m, jnp.diag(v), m), jsl.toeplitz(w), jsl.toeplitz(w, w[::-1]), jsl.det(m)
@case("d_linalg_grad_eigh_slogdet", spd(3))
def _(a): return jax.grad(lambda a: jnp.linalg.slogdet(a)[1] + jnp.sum(jnp.linalg.eigvalsh(a) ** 2))(a)
@case("d_linalg_vmap_lstsq", f32(2, 5, 2), f32(2, 5))
def _(a, b): return jax.vmap(lambda a, b: jnp.linalg.lstsq(a, b)[0])(a, b)

# ---- jnp.fft variants
@case("d_fft_n_pad_crop", f32(10))
def _(x): return jnp.fft.fft(x, n=16), jnp.fft.fft(x, n=6), jnp.fft.ifft(x), jnp.fft.rfft(x, n=12)
@case("d_fftn_axes_s", c64(4, 6))
def _(z): return jnp.fft.fftn(z), jnp.fft.ifftn(z, axes=(0,)), jnp.fft.fftn(z, s=(3, 8)), jnp.fft.ifft2(z, norm="forward")
@case("d_rfftn_irfftn_s", f32(4, 6))
def _(x): return jnp.fft.rfftn(x), jnp.fft.irfftn(jnp.fft.rfftn(x), s=(4, 6)), jnp.fft.irfft2(jnp.fft.rfft2(x, axes=(0, 1)), axes=(0, 1))
@case("d_hfft_ihfft", c64(5), f32(8))
def _(z, x): return jnp.fft.hfft(z), jnp.fft.ihfft(x), jnp.fft.hfft(z, n=6)
@case("d_fft_norms_axis", f32(3, 8))
def _(x): return [jnp.fft.rfft(x, axis=0, norm=n) for n in ("backward", "forward")] + [jnp.fft.irfft(jnp.fft.rfft(x), norm="forward")]
@case("d_fftfreq_shift_axes", f32(4, 6))
def _(x):
    f = jnp.fft.fftfreq(6, d=0.5); r = jnp.fft.rfftfreq(6, 0.1)
    return jnp.fft.fftshift(x, axes=1) * f, jnp.fft.ifftshift(x), r, jnp.fft.fftshift(jnp.fft.fft2(x)).real
@case("d_fft_grad_vmap", f32(3, 8))
def _(x): return jax.vmap(jax.grad(lambda v: jnp.sum(jnp.abs(jnp.fft.rfft(v)) ** 2)))(x)

# ---- what users leave in their code: debugging, sharding hints, barriers, named scopes
@case("d_debug_print_left_in", f32(4))
def _(x):
    y = jnp.sin(x); jax.debug.print("y = {y}", y=y); return y * 2
@case("d_sharding_constraint_cpu", f32(4, 4))
def _(x):
    s = jax.sharding.SingleDeviceSharding(jax.devices()[0]); return lax.with_sharding_constraint(x @ x, s) + 1
@case("d_optimization_barrier", f32(5))
def _(x): a, b = lax.optimization_barrier((jnp.exp(x), jnp.cos(x))); return a * b
@case("d_named_scope_and_call", f32(5))
def _(x):
    with jax.named_scope("block"):
        y = jnp.tanh(x)
    return jax.jit(lambda v: v * 3, inline=False)(y) + jax.named_call(jnp.sin, name="mysin")(y)
@case("d_ensure_compile_time_eval", f32(4))
def _(x):
    with jax.ensure_compile_time_eval():
        c = jnp.arange(4.0) * 2
    return x * c
@case("d_pjit_donate_static", f32(3), f32(3))
def _(a, b): return jax.jit(lambda a, b, n: a * n + b, static_argnums=2, donate_argnums=0)(a, b, 4)
@case("d_lax_sort_dimension_keys", f32(3, 5), i32(3, 5))
def _(x, i): return lax.sort((x, i), dimension=0, num_keys=1, is_stable=True), lax.sort(i, dimension=1)
@case("d_lax_top_k_int", i32(3, 7, lo=-20, hi=20))
def _(x): return lax.top_k(x, 3)
@case("d_lax_gather_explicit", f32(5, 4), i32(3, 1, lo=0, hi=4))
def _(x, i):
    dn = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    return lax.gather(x, i, dn, (1, 4), mode=lax.GatherScatterMode.CLIP)
@case("d_lax_scatter_explicit", f32(5, 4), i32(2, 1, lo=0, hi=5), f32(2, 4))
def _(x, i, u):
    dn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    return lax.scatter_add(x, i, u, dn), lax.scatter_mul(x, i, u, dn), lax.scatter(x, i, u, dn, mode="drop")
@case("d_lax_conv_general_groups", f32(2, 4, 7), f32(6, 2, 3))
def _(x, k): return lax.conv_general_dilated(x, k, (2,), [(1, 1)], lhs_dilation=(1,), rhs_dilation=(2,), feature_group_count=2)
@case("d_lax_reduce_window_generic", f32(6, 6))
def _(x):
    return (lax.reduce_window(x, -jnp.inf, lax.max, (3, 3), (2, 2), ((1, 1), (1, 1))),
            lax.reduce_window(x, 1.0, lax.mul, (2, 1), (1, 1), "SAME"),
            lax.reduce_window(x, jnp.inf, lax.min, (2, 2), (1, 1), "VALID", window_dilation=(2, 2)))
@case("d_lax_cumulative_reverse", f32(3, 5))
def _(x): return lax.cummax(x, axis=1, reverse=True), lax.cummin(x, 0), lax.cumprod(x, 1, reverse=True), lax.cumsum(x, 0, reverse=True)
@case("d_lax_argminmax_index_dtype", f32(4, 5))
def _(x): return lax.argmax(x, 1, jnp.int16), lax.argmin(x, 0, jnp.uint8)
@case("d_lax_pad_interior_negative", f32(4, 3))
def _(x): return lax.pad(x, 0.0, ((1, -1, 1), (-1, 2, 2)))
@case("d_lax_split_concat", f32(7, 2))
def _(x): a, b, c = lax.split(x, (2, 4, 1)); return lax.concatenate([c, a, b], 0), b.sum()
@case("d_lax_dot_general_int_batch", i32(2, 3, 4), i32(2, 4, 2))
def _(a, b): return lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))), lax.batch_matmul(a.astype(jnp.float32), b.astype(jnp.float32))
@case("d_lax_select_n_multi", i32(6, lo=0, hi=3), f32(6), f32(6), f32(6))
def _(w, a, b, c): return lax.select_n(w, a, b, c), lax.select_n(w > 0, a, b)
@case("d_lax_special_math", pos(5))
def _(x):
    return (lax.lgamma(x), lax.digamma(x), lax.igamma(x, x + 1), lax.igammac(x, 2.0), lax.random_gamma_grad(x, x),
            lax.bessel_i0e(x), lax.bessel_i1e(x), lax.erf_inv(x / 4), lax.nextafter(x, x + 1))
@case("d_lax_rng_bit_generator", np.array([1, 2, 3, 4], np.uint32))
def _(k): return lax.rng_bit_generator(k, (2, 3), dtype=jnp.uint32)
@case("d_rbg_key_impl", np.int32(3))
def _(seed): k = jax.random.key(seed, impl="unsafe_rbg"); return jax.random.normal(k, (3,))
