"""lax.conv_general_dilated and jnp.convolve/correlate: forward against a direct-loop numpy
reference (tests/helpers/conv_reference.py), compiled and eager, f32 and f64; derivatives against
finite differences; vmap against loops; the jaxprs JAX 0.10.2 prints (conv_data/, recorded by
make_conv_data.py) read by sprue.load and compared with JAX's results."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from tests.helpers.conv_reference import conv_loops

DATA = Path(__file__).with_name("conv_data")
rng = np.random.default_rng(0)

# (lhs shape, rhs shape, strides, padding, lhs_dilation, rhs_dilation, dimension_numbers, feature groups, batch groups)
CASES = {
    "plain": ((2, 3, 7, 6), (4, 3, 3, 2), (1, 1), ((1, 1), (0, 1)), (1, 1), (1, 1), None, 1, 1),
    "same": ((2, 3, 7, 6), (4, 3, 3, 3), (2, 2), "SAME", None, None, None, 1, 1),
    "valid_rhs_dilated": ((1, 2, 9, 8), (3, 2, 2, 3), (1, 1), "VALID", None, (2, 2), None, 1, 1),
    "strided_dilated_groups": ((2, 4, 7, 6), (6, 2, 3, 2), (2, 1), ((1, 0), (2, 2)), (1, 2), (2, 1), None, 2, 1),
    "batch_groups_negative_pad": ((4, 3, 7, 6), (6, 3, 3, 2), (1, 2), ((0, 0), (1, -1)), (2, 1), (1, 1), None, 1, 2),
    "nhwc_hwio": ((2, 8, 8, 4), (3, 3, 2, 6), (1, 1), "SAME", None, None, ("NHWC", "HWIO", "NHWC"), 2, 1),
    "depthwise": ((1, 6, 6, 3), (3, 3, 1, 3), (1, 1), "VALID", None, None, ("NHWC", "HWIO", "NHWC"), 3, 1),
    "1d_mixed_layouts": ((2, 9, 4), (3, 4, 5), (2,), ((2, 1),), None, (2,), ("NWC", "WIO", "NCW"), 1, 1),
    "3d": ((1, 2, 5, 4, 4), (2, 2, 2, 2, 3), (1, 2, 1), "SAME", None, None, None, 1, 1),
}


def _args(case, dtype):
    ls, rs, *_ = CASES[case]
    return rng.standard_normal(ls).astype(dtype), rng.standard_normal(rs).astype(dtype)


def _conv(case):
    _, _, st, pd, ld, rd, dn, fg, bg = CASES[case]
    return lambda x, w: lax.conv_general_dilated(x, w, st, pd, ld, rd, dn, fg, bg)


def _reference(case, x, w):
    _, _, st, pd, ld, rd, dn, fg, bg = CASES[case]
    specs = tuple(lax.conv_dimension_numbers(x.ndim, dn))
    nsp = x.ndim - 2
    if isinstance(pd, str):     # 'SAME' as XLA defines it: ceil(n / stride) outputs, the odd pad high
        mode, pd = pd, []
        for k in range(nsp):
            n, kk = x.shape[specs[0][k + 2]], w.shape[specs[1][k + 2]]
            kk = (kk - 1) * (rd or (1,) * nsp)[k] + 1
            total = max((-(-n // st[k]) - 1) * st[k] + kk - n, 0) if mode == "SAME" else 0
            pd.append((total // 2, total - total // 2))
    return conv_loops(x, w, st, pd, ld or (1,) * nsp, rd or (1,) * nsp, specs, fg, bg)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", sorted(CASES))
def test_forward_against_loops(case, dtype):
    x, w = _args(case, dtype)
    want = _reference(case, x, w)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    eager = _conv(case)(x, w)
    assert eager.dtype == dtype and eager.shape == want.shape
    np.testing.assert_allclose(eager, want, rtol=tol, atol=tol)
    compiled = sprue.qjit(_conv(case))(x, w)
    assert compiled.dtype == dtype
    np.testing.assert_allclose(compiled, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("lowering", ["im2col", "stablehlo"])
@pytest.mark.parametrize("case", ["strided_dilated_groups", "batch_groups_negative_pad", "nhwc_hwio", "depthwise",
                                  "1d_mixed_layouts"])
def test_both_lowerings(case, lowering, monkeypatch):
    """Each lowering forced (im2col is the default: rules_convolution.py)."""
    monkeypatch.setenv("SPRUE_CONV_LOWERING", lowering)
    x, w = _args(case, np.float32)
    np.testing.assert_allclose(sprue.qjit(_conv(case))(x, w), _reference(case, x, w), rtol=1e-5, atol=1e-5)


def _finite_difference(f, args, i, direction, eps=1e-6):
    plus, minus = list(args), list(args)
    plus[i], minus[i] = args[i] + eps * direction, args[i] - eps * direction
    return (f(*plus) - f(*minus)) / (2 * eps)


@pytest.mark.parametrize("case", ["plain", "strided_dilated_groups", "batch_groups_negative_pad", "nhwc_hwio",
                                  "1d_mixed_layouts", "depthwise"])
def test_jvp_and_grad_against_finite_differences(case):
    x, w = _args(case, np.float64)
    conv = _conv(case)
    probe = rng.standard_normal(np.shape(_reference(case, x, w)))

    def loss(x, w):
        return jnp.sum(jnp.sin(conv(x, w)) * probe)

    def loss_np(x, w):
        return np.sum(np.sin(_reference(case, x, w)) * probe)
    tx, tw = rng.standard_normal(x.shape), rng.standard_normal(w.shape)
    _, tangent = sprue.jvp(loss, (x, w), (tx, tw))
    fd = _finite_difference(loss_np, [x, w], 0, tx) + _finite_difference(loss_np, [x, w], 1, tw)
    np.testing.assert_allclose(tangent, fd, rtol=1e-6, atol=1e-7)
    gx, gw = sprue.qjit(sprue.grad(loss, argnums=(0, 1)))(x, w)
    np.testing.assert_allclose(np.sum(gx * tx) + np.sum(gw * tw), fd, rtol=1e-6, atol=1e-7)
    ex, ew = sprue.grad(loss, argnums=(0, 1))(x, w)      # eager: the transposes' numpy references
    np.testing.assert_allclose(ex, gx, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ew, gw, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0)])
@pytest.mark.parametrize("case", ["plain", "strided_dilated_groups", "batch_groups_negative_pad", "nhwc_hwio"])
def test_vmap_against_loops(case, in_axes):
    x, w = _args(case, np.float64)
    xs = np.stack([x, 2 * x + 1, -x]) if in_axes[0] == 0 else x
    ws = np.stack([w, w * w, 1 - w]) if in_axes[1] == 0 else w
    want = np.stack([_reference(case, xs[i] if in_axes[0] == 0 else x, ws[i] if in_axes[1] == 0 else w)
                     for i in range(3)])
    got = sprue.qjit(sprue.vmap(_conv(case), in_axes=in_axes))(xs, ws)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sprue.vmap(_conv(case), in_axes=in_axes)(xs, ws), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("fname", ["convolve", "correlate"])
@pytest.mark.parametrize("n,m", [(9, 4), (3, 7), (5, 5), (1, 1)])
def test_numpy_convolve_correlate(fname, mode, dtype, n, m):
    a, v = rng.standard_normal(n).astype(dtype), rng.standard_normal(m).astype(dtype)
    want = getattr(np, fname)(a.astype(np.float64), v.astype(np.float64), mode)
    tol = 1e-5 if dtype == np.float32 else 1e-13
    f = getattr(jnp, fname)
    np.testing.assert_allclose(f(a, v, mode), want, rtol=tol, atol=tol)
    got = sprue.qjit(lambda a, v: f(a, v, mode))(a, v)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_convolve_of_integers_is_float():
    got = jnp.convolve(np.arange(5), np.arange(3))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, np.convolve(np.arange(5), np.arange(3)))


def _data(name):
    data = np.load(DATA / f"{name}.npz")
    count = lambda k: sum(f.startswith(k) for f in data.files)   # noqa: E731
    return [data[f"in{i}"] for i in range(count("in"))], [data[f"out{i}"] for i in range(count("out"))]


@pytest.mark.parametrize("name", sorted(p.stem for p in DATA.glob("*.jaxpr")))
def test_jax_printed_jaxprs(name):
    text = (DATA / f"{name}.jaxpr").read_text()
    assert "conv_general_dilated[" in text
    ins, outs = _data(name)
    got = sprue.load(DATA / f"{name}.jaxpr")(*ins)
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(outs)
    for g, want in zip(got, outs):
        tol = 2e-5 if want.dtype == np.float32 else 1e-12
        assert g.dtype == want.dtype and g.shape == want.shape
        np.testing.assert_allclose(g, want, rtol=tol, atol=tol)


def test_jax_stablehlo_convolution_loads():
    """stablehlo.convolution in a module JAX lowered: stablehlo-legalize-to-linalg compiles it."""
    ins, (want,) = _data("stablehlo_conv_nhwc")
    assert "stablehlo.convolution" in (DATA / "stablehlo_conv_nhwc.mlir").read_text()
    np.testing.assert_allclose(sprue.load(DATA / "stablehlo_conv_nhwc.mlir")(*ins), want, rtol=1e-12, atol=1e-12)


def test_printed_form_reads_back():
    x, w = _args("nhwc_hwio", np.float64)
    f = sprue.qjit(_conv("nhwc_hwio"))
    text = str(sprue.make_jaxpr(_conv("nhwc_hwio"))(x, w))
    assert "dimension_numbers=ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1)," \
           " out_spec=(0, 3, 1, 2))" in text
    assert "padding=((1, 1), (1, 1))" in text
    np.testing.assert_allclose(f(x, w), _reference("nhwc_hwio", x, w), rtol=1e-12, atol=1e-12)


def test_cost_counts_multiply_adds():
    x, w = _args("plain", np.float64)
    out = _reference("plain", x, w)
    assert sprue.cost(_conv("plain"))(x, w) == 2 * out.size * 3 * 3 * 2


@pytest.mark.parametrize("call,message", [
    (lambda: lax.conv_general_dilated(np.ones((1, 3, 5, 5)), np.ones((2, 2, 3, 3)), (1, 1), "SAME"),
     "lhs f64[1,3,5,5] has 3 features; with feature_group_count=1 the rhs f64[2,2,3,3] needs 3/1 input features"),
    (lambda: lax.conv_general_dilated(np.ones((1, 3, 5, 5)), np.ones((2, 3, 3, 3)), (1, 1), "HALF"),
     "padding must be 'SAME', 'SAME_LOWER', 'VALID' or (low, high) pairs, got 'HALF'"),
    (lambda: lax.conv_general_dilated(np.ones((1, 3, 5, 5)), np.ones((2, 3, 3, 3)), (1,), "VALID"),
     "window_strides (1,) needs one entry per spatial dimension (2)"),
    (lambda: lax.conv_general_dilated(np.ones((1, 5, 5, 3)), np.ones((3, 3, 3, 2)), (1, 1), "VALID",
                                      dimension_numbers=("NHWC", "HWIO", "NHWK")),
     "dimension_numbers[2] = 'NHWK' must contain 'N' and 'C' exactly once"),
    (lambda: jnp.convolve(np.ones((2, 2)), np.ones(2)), "only 1-D inputs are supported"),
    (lambda: jnp.correlate(np.ones(4), np.ones(2), "half"), "mode must be 'full', 'same' or 'valid', got 'half'"),
])
def test_errors(call, message):
    with pytest.raises(sprue.SprueError) as e:
        call()
    assert message in str(e.value)


def test_run_time_spatial_sizes_are_refused_at_the_users_line():
    f = sprue.qjit(lambda x, w: lax.conv_general_dilated(x, w, (1,), "VALID"), abstracted_axes=({2: "w"}, None))
    with pytest.raises(sprue.SprueValueError, match=r"operand f64\[2,3,w\] has a spatial size known only at run"
                                                    r" time; sprue's convolution needs static spatial sizes"
                                                    r" .*test_convolution.py"):
        f(np.ones((2, 3, 9)), np.ones((4, 3, 2)))
    g = sprue.qjit(lambda x, w: lax.conv_general_dilated(x, w, (1,), "VALID", feature_group_count=3),
                   abstracted_axes=({0: "n"}, None))
    with pytest.raises(sprue.SprueValueError, match=r"and static sizes with feature or batch groups"):
        g(np.ones((2, 3, 9)), np.ones((3, 1, 2)))


@pytest.mark.parametrize("layout, strides, padding", [(("NCHW", "OIHW", "NCHW"), (1, 1), "SAME"),
                                                      (("NHWC", "HWIO", "NHWC"), (2, 1), ((1, 0), (2, 1)))])
def test_run_time_batch(layout, strides, padding):
    """A CNN layer compiled once for every batch size, with its gradients (the kernel's contracts
    over the run-time batch), equal to the static compilation's."""
    r = np.random.default_rng(4)
    nchw = layout[0] == "NCHW"
    x = r.standard_normal((6, 3, 7, 8) if nchw else (6, 7, 8, 3))
    w = r.standard_normal((5, 3, 3, 2) if nchw else (3, 2, 3, 5)) * 0.3

    def loss(x, w):
        y = lax.conv_general_dilated(x, w, strides, padding, dimension_numbers=layout)
        return jnp.sum(jnp.tanh(y) ** 2)
    dyn = sprue.qjit(sprue.value_and_grad(loss, argnums=(0, 1)), abstracted_axes=({0: "n"}, None))
    for batch in (6, 1, 4):
        value, (gx, gw) = dyn(x[:batch], w)
        want_value, (want_gx, want_gw) = sprue.value_and_grad(loss, argnums=(0, 1))(x[:batch], w)
        np.testing.assert_allclose(value, want_value, rtol=1e-12)
        np.testing.assert_allclose(gx, want_gx, rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(gw, want_gw, rtol=1e-11, atol=1e-13)
    assert dyn.compile_count == 1
