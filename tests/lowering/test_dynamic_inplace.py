"""Loops over arrays of run-time sizes update them in place, as with static sizes: a scan with
abstracted axes reads its rows as views, writes each output row straight into the stacked output
and allocates or copies nothing per trip (lowering/legalize_dynamic.py's unit reshapes and shape
vectors, lowering/inplace.py's prefix slices and copy loops). Results are compared with numpy at
several run-time sizes, edge sizes included, with one compiled library. Timing belongs to
benchmarks/ (programs.py's ema_filter: dynamic within 1.15x of static)."""
import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from tests.helpers.bufferization import buffer_ops_in_loops, copies_outside_loops, stage_text
from tests.helpers.scan_programs import ema_crossover as _ema
from tests.helpers.scan_programs import ema_crossover_numpy as _ema_ref


def _smooth(xs, s0):
    # the output row is the carry itself: copied into the stacked output (a row memmove per trip in
    # memrefCopy, backend.py), nothing allocated
    def step(c, x):
        c = 0.5 * c + x
        return c, c
    return lax.scan(step, s0, xs)


def _smooth_ref(xs, s0):
    c, rows = s0.copy(), []
    for x in xs:
        c = 0.5 * c + x
        rows.append(c)
    return c, np.array(rows).reshape(len(xs), len(s0))


SIZES = [(0, 3), (1, 1), (3, 0), (57, 7), (300, 64)]


@pytest.mark.parametrize("fn, reference, copies", [(_ema, _ema_ref, []), (_smooth, _smooth_ref, ["memref.copy"])],
                         ids=["ema", "carry_out"])
def test_dynamic_scan_writes_rows_in_place(fn, reference, copies, tmp_path):
    compiled = sprue.qjit(fn, abstracted_axes=({0: "t", 1: "k"}, {0: "k"}), keep_intermediate=tmp_path)
    rng = np.random.default_rng(3)
    for t, k in SIZES:
        xs, s0 = rng.standard_normal((t, k)), rng.standard_normal(k)
        before = xs.copy()
        got = sprue.tree_flatten(compiled(xs, s0))[0]
        want = reference(xs, s0)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=f"t={t}, k={k}")
        np.testing.assert_array_equal(xs, before)       # the argument is never written
    assert [name for name, _ in buffer_ops_in_loops(stage_text(tmp_path, "bufferized"))] == copies
    linalg = stage_text(tmp_path, "linalg")
    # the rows are views (no tensor.reshape, which copies a strided row), and the shape vectors of
    # the slices scalars (no i64 vector built per trip)
    assert "tensor.reshape" not in linalg and "tensor<2xi64>" not in linalg


def test_static_and_dynamic_scans_lower_the_loop_alike(tmp_path):
    """The dynamic loop body holds no more linalg ops than the static one: the shape computations
    are scalars, not small tensors computed by linalg loops on every trip."""
    xs, s0 = np.random.default_rng(4).standard_normal((20, 5)), np.zeros(5)
    counts = {}
    for name, axes in (("static", None), ("dynamic", ({0: "t", 1: "k"}, {0: "k"}))):
        out = tmp_path / name
        np.testing.assert_allclose(sprue.qjit(_ema, abstracted_axes=axes, keep_intermediate=out)(xs, s0)[0],
                                   _ema_ref(xs, s0)[0], rtol=1e-12)
        text = stage_text(out, "bufferized")
        body = text[text.index("scf.for"):]
        counts[name] = body.count("linalg.generic")
    assert counts["dynamic"] <= counts["static"], counts


def test_copies_of_dynamic_slices_by_rows_and_by_elements(tmp_path):
    """MLIR leaves a copy between `?`-sized strided buffers to memrefCopy (backend.py), which moves
    whole rows when both innermost strides are 1 and single elements otherwise."""
    def f(x, y):
        return x[1:], x[:, ::2], y[:, 1:]
    compiled = sprue.qjit(f, abstracted_axes=({0: "n", 1: "m"}, {0: "a", 1: "b", 2: "c"}), keep_intermediate=tmp_path)
    rng = np.random.default_rng(5)
    for n, m, shape in [(1, 1, (1, 1, 1)), (4, 7, (2, 3, 5)), (9, 0, (3, 0, 2)), (33, 65, (4, 9, 17))]:
        x, y = rng.standard_normal((n, m)), rng.standard_normal(shape)
        for got, want in zip(compiled(x, y), (x[1:], x[:, ::2], y[:, 1:])):
            np.testing.assert_array_equal(got, want)
    (ll,) = [p for p in tmp_path.glob("*.ll") if not p.name.endswith(".opt.ll")]
    assert "@memrefCopy(" in ll.read_text()


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint32, np.uint8, np.int8, np.uint64])
def test_small_integer_concatenates_are_built_from_scalars(dtype, tmp_path):
    """Concatenates of small integer vectors (shape vectors, legalize_dynamic.py) are assembled
    from their scalars: pieces that are reshaped scalars, constants (splat or not, the type's
    extremes) and vectors."""
    info = np.iinfo(dtype)

    def f(a, b, s):
        return jnp.concatenate([a, jnp.array([info.max, info.min], dtype), jnp.reshape(s, (1,)), b,
                                jnp.full((2,), 5, dtype)])
    compiled = sprue.qjit(f, keep_intermediate=tmp_path)
    a, b, s = np.array([1, 2], dtype), np.array([3], dtype), dtype(4)
    out = compiled(a, b, s)
    np.testing.assert_array_equal(out, np.array([1, 2, info.max, info.min, 4, 3, 5, 5], dtype))
    assert out.dtype == dtype
    assert any(line.strip().startswith("%from_elements") and line.endswith(f": tensor<8xi{8 * np.dtype(dtype).itemsize}>")
               for line in stage_text(tmp_path, "linalg").splitlines())


def _two_results(a, b):
    t = jnp.exp(-0.02 * b)
    z = jnp.log(a) * t + b
    return z, z * t - jnp.sqrt(a)      # computed in the buffer of t, read here for the last time


def _array_allocations(text: str) -> int:
    """memref.alloc ops of at least one dim (not 0-d scalars), outside the `else` of the checks."""
    body = text[:text.index("} else {")] if "} else {" in text else text
    return sum(1 for line in body.splitlines() if "memref.alloc(" in line and "memref<0x" not in line
               and not line.rstrip().endswith(("memref<i64>", "memref<f64>", "memref<i1>")))


def test_dynamic_results_reuse_buffers_as_static_ones_do(tmp_path):
    """The entry checks' `else` yields an empty tensor per result (split_shared_yields): one shared
    between results made bufferization take them for aliases and allocate an extra buffer."""
    rng = np.random.default_rng(6)
    counts = {}
    for name, axes in (("static", None), ("dynamic", ({0: "n"}, {0: "n"}))):
        out = tmp_path / name
        compiled = sprue.qjit(_two_results, abstracted_axes=axes, keep_intermediate=out)
        for n in ((1000,) if axes is None else (0, 1, 1000)):
            a, b = rng.random(n) + 0.5, rng.random(n)
            z, w = compiled(a, b)
            t = np.exp(-0.02 * b)
            np.testing.assert_allclose(z, np.log(a) * t + b, rtol=1e-12, atol=1e-15)
            np.testing.assert_allclose(w, (np.log(a) * t + b) * t - np.sqrt(a), rtol=1e-12, atol=1e-15)
        counts[name] = _array_allocations(stage_text(out, "bufferized"))
    assert counts["dynamic"] == counts["static"] == 2, counts


@pytest.mark.parametrize("dynamic", [False, True])
def test_products_sharing_their_zeros_each_fill_their_own_buffer(tmp_path, dynamic):
    # CSE leaves one linalg.fill of zeros for every product; each product gets its own copy of
    # the fill (inplace.split_shared_fills), not a filled buffer copied into its own
    def layers(x, a, b, c):
        return jnp.tanh(jnp.tanh(x @ a) @ b) @ c

    rng = np.random.default_rng(7)
    # 16 columns: whole panels of the packed kernel that the run-time batch takes (a padded B
    # pads C, copied in and out: copies this test is not about)
    x, a, b, c = (rng.standard_normal((16, 16)) for _ in range(4))
    axes = ({0: "n"}, None, None, None) if dynamic else None
    f = sprue.qjit(layers, abstracted_axes=axes, keep_intermediate=str(tmp_path))
    np.testing.assert_allclose(f(x, a, b, c), np.tanh(np.tanh(x @ a) @ b) @ c, rtol=1e-12, atol=1e-12)
    text = stage_text(tmp_path, "loops")
    assert copies_outside_loops(text) == 0


def _newton_cube_roots(a):
    # its cond reads `a` beside the carry: a run-time size check, so the while is rotated (the
    # cond's predicate carried: rules_control_flow._rotated_while)
    def cond(s):
        return (s[1] < 60) & (jnp.max(jnp.abs(s[0] ** 3 - a)) > 1e-12)

    def body(s):
        x, i = s
        return x - (x ** 3 - a) / (3 * x * x), i + 1
    return lax.while_loop(cond, body, (jnp.maximum(a, 1.0), 0))


def test_dynamic_while_with_checks_updates_its_carry_in_place(tmp_path):
    """A while whose cond holds run-time checks carries its predicate; the carries keep their
    positions through the condition region, so one-shot bufferization updates them in place
    instead of allocating and copying each per trip."""
    compiled = sprue.qjit(_newton_cube_roots, abstracted_axes=({0: "n"},), keep_intermediate=tmp_path)
    rng = np.random.default_rng(5)
    for n in (1, 7, 1000):
        a = rng.uniform(0.1, 100.0, n)
        x, trips = compiled(a)
        np.testing.assert_allclose(x, np.cbrt(a), rtol=1e-12)
        assert 0 < trips < 60
    # (a scalar's cell may be copied per trip: the reduction's; no array is)
    in_loops = buffer_ops_in_loops(stage_text(tmp_path, "bufferized"))
    assert all(size == 1 for _, size in in_loops), in_loops
