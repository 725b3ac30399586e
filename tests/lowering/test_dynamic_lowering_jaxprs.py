"""Lowering of `?`-shaped equations written directly as jaxprs: slices with symbolic limits,
dynamic_slice with run-time sizes, dynamic_update_slice, pad, gather and scatter over `?` dims,
and shapes holding DimExprs (floordiv, mod, products). Building the equations by hand tests the
lowering rules on exactly the equations the frontend is meant to emit, independently of the
shape rules that produce them; results are compared with numpy at several run-time sizes."""
import tempfile

import numpy as np
import pytest

from sprue import lax
from sprue.ir.core import ClosedJaxpr, Eqn, Jaxpr, Literal, ShapedArray, Var
from sprue.ir.shapes import DimVar, dim
from sprue.lax import GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers
from sprue.lowering.backend import build_shared_library
from sprue.lowering.stablehlo import lower
from sprue.runtime import Signature, TensorSpec, load

rng = np.random.default_rng(1)


@pytest.fixture(autouse=True)
def _build_in_tmp_path(tmp_path, monkeypatch):
    """Libraries are built in the test's tmp_path, never in the system temp folder."""
    monkeypatch.setattr(Builder, "out_dir", tmp_path)


class Builder:
    """A jaxpr under construction: size arguments (i64[] binders), array arguments, equations."""

    out_dir = None   # set per test (_build_in_tmp_path)

    def __init__(self):
        self.invars: list[Var] = []
        self.eqns: list[Eqn] = []

    def size(self, name: str):
        dv = DimVar(name)
        self.invars.append(Var(ShapedArray((), np.int64), dim=dv))
        return dim(dv)

    def size_var(self, k: int) -> Var:
        return self.invars[k]

    def arg(self, shape, dtype=np.float64) -> Var:
        v = Var(ShapedArray(shape, dtype))
        self.invars.append(v)
        return v

    def eqn(self, prim, invars, shape, dtype=np.float64, /, **params) -> Var:
        out = Var(ShapedArray(shape, dtype))
        self.eqns.append(Eqn(prim, list(invars), [out], params))
        return out

    def compile(self, *outs):
        """The jaxpr compiled and loaded: a function of (sizes..., arrays...) -> list of results."""
        closed = ClosedJaxpr(Jaxpr([], self.invars, list(outs), self.eqns), [])
        lowered = lower(closed)
        # a folder per library: dlopen returns the library already loaded from a path it has seen
        so = build_shared_library(lowered.text, tempfile.mkdtemp(prefix="dyn-", dir=self.out_dir), "main")

        def spec(name, aval):
            return TensorSpec(name, aval.dtype, [d if isinstance(d, int) else None for d in aval.shape])
        sig = Signature([spec(f"a{i}", v.aval) for i, v in enumerate(self.invars)],
                        [spec(f"r{i}", v.aval) for i, v in enumerate(outs)],
                        lowered.check_messages if lowered.has_status else None)
        return load(so, "main", sig)


def lit(x, dtype=np.int64) -> Literal:
    return Literal(np.array(x, dtype)[()], ShapedArray((), dtype))


def agree(f, cases, reference):
    for args in cases:
        (got,) = f(*args)
        want = reference(*args)
        assert got.shape == want.shape, (args[:2], got.shape, want.shape)
        np.testing.assert_array_equal(got, want)


# -- slice ----------------------------------------------------------------------------------------
def test_slice_to_a_symbolic_limit():
    b = Builder()
    n = b.size("n")
    x = b.arg((n,))
    y = b.eqn(lax.slice_p, [x], (n - 1,), start_indices=(1,), limit_indices=(n,), strides=None)
    agree(b.compile(y), [(k, rng.random(k)) for k in (1, 3, 1000)], lambda n, x: x[1:])


def test_strided_slice_of_a_dynamic_dim_has_a_floordiv_size():
    b = Builder()
    n = b.size("n")
    x = b.arg((n, 3))
    y = b.eqn(lax.slice_p, [x], ((n + 1) // 2, 2), start_indices=(0, 0), limit_indices=(n, 3), strides=(2, 2))
    agree(b.compile(y), [(k, rng.random((k, 3))) for k in (0, 1, 3, 1000)], lambda n, x: x[::2, ::2])


def test_slice_with_symbolic_start_and_static_result():
    b = Builder()
    n = b.size("n")
    x = b.arg((n, 3))
    y = b.eqn(lax.slice_p, [x], (2, 3), start_indices=(n - 2, 0), limit_indices=(n, 3), strides=None)
    agree(b.compile(y), [(k, rng.random((k, 3))) for k in (2, 3, 1000)], lambda n, x: x[n - 2:])


def test_static_slice_of_a_dynamic_operand():
    b = Builder()
    n = b.size("n")
    x = b.arg((n, 4))
    y = b.eqn(lax.slice_p, [x], (2, 2), start_indices=(0, 1), limit_indices=(2, 3), strides=None)
    agree(b.compile(y), [(k, rng.random((k, 4))) for k in (2, 1000)], lambda n, x: x[:2, 1:3])


# -- dynamic_slice / dynamic_update_slice -----------------------------------------------------------
def _clamped(start, dim, size):
    return min(max(start, 0), dim - size)


def test_dynamic_slice_with_a_run_time_size_clamps_like_jax():
    b = Builder()
    n, m = b.size("n"), b.size("m")
    x, s = b.arg((n,)), b.arg((), np.int64)
    y = b.eqn(lax.dynamic_slice_p, [x, s, b.size_var(1)], (m,), slice_sizes=(None,))
    cases = [(0, 0, rng.random(0), 0), (1, 1, rng.random(1), 5), (3, 2, rng.random(3), -4),
             (1000, 10, rng.random(1000), 995), (1000, 10, rng.random(1000), 3), (5, 5, rng.random(5), 2)]
    agree(b.compile(y), cases, lambda n, m, x, s: x[_clamped(s, n, m):][:m])


def test_dynamic_slice_with_static_sizes_of_a_dynamic_operand():
    b = Builder()
    n = b.size("n")
    x, s = b.arg((n, 3)), b.arg((), np.int32)
    y = b.eqn(lax.dynamic_slice_p, [x, s, lit(1, np.int32)], (2, 2), slice_sizes=(2, 2))
    cases = [(2, rng.random((2, 3)), np.int32(0)), (5, rng.random((5, 3)), np.int32(4)),
             (1000, rng.random((1000, 3)), np.int32(-1))]
    agree(b.compile(y), cases, lambda n, x, s: x[_clamped(int(s), n, 2):][:2, 1:3])


def test_dynamic_update_slice_of_dynamic_shapes():
    b = Builder()
    n, m = b.size("n"), b.size("m")
    x, u, s = b.arg((n,)), b.arg((m,)), b.arg((), np.int64)
    y = b.eqn(lax.dynamic_update_slice_p, [x, u, s], (n,))

    def reference(n, m, x, u, s):
        out = x.copy()
        start = _clamped(s, n, m)
        out[start:start + m] = u
        return out
    cases = [(k, j, rng.random(k), rng.random(j), s) for k, j, s in
             [(0, 0, 0), (1, 1, 5), (3, 2, -4), (1000, 10, 995), (1000, 10, 3), (4, 0, 2)]]
    f = b.compile(y)
    agree(f, cases, reference)
    x = rng.random(5)
    before = x.copy()
    f(5, 2, x, np.zeros(2), 1)
    np.testing.assert_array_equal(x, before)   # the argument is never written


def test_dynamic_update_slice_never_writes_outside_even_for_an_oversized_update():
    # The frontend never makes such an update; after a failed check it must still be memory-safe.
    b = Builder()
    n, m = b.size("n"), b.size("m")
    x, u = b.arg((n,)), b.arg((m,))
    y = b.eqn(lax.dynamic_update_slice_p, [x, u, lit(0)], (n,))
    (out,) = b.compile(y)(3, 5, np.zeros(3), np.arange(5.0), )
    np.testing.assert_array_equal(out, [0.0, 1.0, 2.0])


def test_dynamic_update_slice_of_a_computed_row_computes_only_what_fits():
    # The update is an elementwise result: lowering/inplace.py computes it over the slice that is
    # written, in the destination; an oversized one still writes its first `dim` elements only.
    b = Builder()
    n, m = b.size("n"), b.size("m")
    x, u, s = b.arg((1, n)), b.arg((1, m)), b.arg((), np.int64)
    v = b.eqn(lax.mul_p, [u, u], (1, m))
    w = b.eqn(lax.add_p, [v, lit(1.0, np.float64)], (1, m))
    y = b.eqn(lax.dynamic_update_slice_p, [x, w, lit(0), s], (1, n))

    def reference(n, m, x, u, s):
        out = x.copy()
        count = min(m, n)
        start = _clamped(s, n, count)
        out[0, start:start + count] = (u * u + 1.0)[0, :count]
        return out
    cases = [(k, j, rng.random((1, k)), rng.random((1, j)), s) for k, j, s in
             [(0, 0, 0), (5, 2, 1), (5, 2, 9), (64, 64, 0), (3, 5, 0), (3, 5, 2), (0, 4, 0), (4, 0, 3)]]
    agree(b.compile(y), cases, reference)


# -- pad --------------------------------------------------------------------------------------------
def test_pad_of_a_dynamic_dim():
    b = Builder()
    n = b.size("n")
    x = b.arg((n, 2))
    y = b.eqn(lax.pad_p, [x, lit(7.0, np.float64)], (n + 3, 1), padding_config=((1, 2, 0), (0, -1, 0)))
    agree(b.compile(y), [(k, rng.random((k, 2))) for k in (0, 1, 3)],
          lambda n, x: np.pad(x[:, :1], ((1, 2), (0, 0)), constant_values=7.0))


def test_negative_padding_of_a_dynamic_dim_crops():
    b = Builder()
    n = b.size("n")
    x = b.arg((n,))
    y = b.eqn(lax.pad_p, [x, lit(7.0, np.float64)], (n - 2,), padding_config=((-1, -1, 0),))
    agree(b.compile(y), [(k, rng.random(k)) for k in (2, 3, 1000)], lambda n, x: x[1:-1])


def test_interior_padding_of_a_dynamic_dim():
    b = Builder()
    n = b.size("n")
    x = b.arg((n,))
    y = b.eqn(lax.pad_p, [x, lit(7.0, np.float64)], (2 * n,), padding_config=((2, -1, 1),))

    def reference(n, x):
        spread = np.full(2 * n - 1, 7.0)
        spread[::2] = x
        return np.concatenate([[7.0, 7.0], spread])[:-1]
    agree(b.compile(y), [(k, rng.random(k)) for k in (1, 3, 1000)], reference)


# -- gather -------------------------------------------------------------------------------------------
ROWS = GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
POINTS = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0, 1), start_index_map=(0, 1))


def _gather(b, x, idx, out_shape, dn, slice_sizes, mode, *sizes):
    return b.eqn(lax.gather_p, [x, idx, *sizes], out_shape, dimension_numbers=dn, slice_sizes=slice_sizes,
                 indices_are_sorted=False, unique_indices=False, mode=mode, fill_value=None)


def _rows(x, i, width):
    """x[clip(i)] for an operand with rows; zeros (the reference rule) from an empty operand."""
    if len(x) == 0:
        return np.zeros((len(i), width))
    return x[np.clip(i, 0, len(x) - 1)]


@pytest.mark.parametrize("n, m", [(0, 2), (1, 3), (3, 0), (1000, 50)])
def test_gather_rows_with_clip_never_reads_outside_even_an_empty_operand(n, m):
    b = Builder()
    nn, mm = b.size("n"), b.size("m")
    x, idx = b.arg((nn, 3)), b.arg((mm, 1), np.int64)
    y = _gather(b, x, idx, (mm, 3), ROWS, (1, 3), GatherScatterMode.CLIP)
    agree(b.compile(y), [(n, m, rng.random((n, 3)), rng.integers(-5, n + 5, (m, 1)))],
          lambda n, m, x, idx: _rows(x, idx[:, 0], 3))


@pytest.mark.parametrize("n, m", [(0, 2), (1, 3), (3, 0), (1000, 50)])
def test_gather_rows_fill_or_drop(n, m):
    b = Builder()
    nn, mm = b.size("n"), b.size("m")
    x, idx = b.arg((nn, 3)), b.arg((mm, 1), np.int64)
    y = _gather(b, x, idx, (mm, 3), ROWS, (1, 3), GatherScatterMode.FILL_OR_DROP)

    def reference(n, m, x, idx):
        i = idx[:, 0]
        return np.where(((i >= 0) & (i < n))[:, None], _rows(x, i, 3), np.nan)
    agree(b.compile(y), [(n, m, rng.random((n, 3)), rng.integers(-5, n + 5, (m, 1)))], reference)


@pytest.mark.parametrize("n, k, m", [(0, 3, 2), (1, 0, 3), (3, 2, 0), (1000, 7, 50)])
def test_gather_with_a_window_over_a_dynamic_dim(n, k, m):
    # rows of f64[n, k]: the slice size k is None in the param and a trailing operand
    b = Builder()
    nn, kk, mm = b.size("n"), b.size("k"), b.size("m")
    x, idx = b.arg((nn, kk)), b.arg((mm, 1), np.int64)
    y = _gather(b, x, idx, (mm, kk), ROWS, (1, None), GatherScatterMode.CLIP, b.size_var(1))
    agree(b.compile(y), [(n, k, m, rng.random((n, k)), rng.integers(-5, n + 5, (m, 1)))],
          lambda n, k, m, x, idx: _rows(x, idx[:, 0], k))


def test_gather_points_of_a_dynamic_operand():
    b = Builder()
    nn, mm = b.size("n"), b.size("m")
    x, idx = b.arg((nn, 3)), b.arg((mm, 2), np.int32)
    y = _gather(b, x, idx, (mm,), POINTS, (1, 1), GatherScatterMode.PROMISE_IN_BOUNDS)

    def reference(n, m, x, idx):
        if n == 0:
            return np.zeros(m)
        return x[np.clip(idx[:, 0], 0, n - 1), np.clip(idx[:, 1], 0, 2)]
    cases = [(n, m, rng.random((n, 3)), rng.integers(-5, n + 5, (m, 2)).astype(np.int32))
             for n, m in [(0, 2), (1, 3), (1000, 50)]]
    agree(b.compile(y), cases, reference)


# -- scatter ------------------------------------------------------------------------------------------
ELEMENTS = ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
ROW_UPDATES = ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                      scatter_dims_to_operand_dims=(0,))


@pytest.mark.parametrize("mode", [GatherScatterMode.FILL_OR_DROP, GatherScatterMode.CLIP])
def test_scatter_add_into_a_dynamic_operand(mode):
    b = Builder()
    nn, mm = b.size("n"), b.size("m")
    x, idx, u = b.arg((nn,)), b.arg((mm, 1), np.int64), b.arg((mm,))
    y = b.eqn(lax.scatter_add_p, [x, idx, u], (nn,), dimension_numbers=ELEMENTS, indices_are_sorted=False,
              unique_indices=False, mode=mode, update_jaxpr=None, update_consts=())

    def reference(n, m, x, idx, u):
        out, i = x.copy(), idx[:, 0]
        if mode == GatherScatterMode.CLIP:
            if n:
                np.add.at(out, np.clip(i, 0, n - 1), u)
        else:
            inside = (i >= 0) & (i < n)
            np.add.at(out, i[inside], u[inside])
        return out
    cases = [(n, m, rng.random(n), rng.integers(-5, n + 5, (m, 1)), rng.random(m))
             for n, m in [(0, 2), (1, 3), (3, 0), (1000, 50)]]
    agree(b.compile(y), cases, reference)


def test_scatter_rows_with_a_dynamic_window():
    b = Builder()
    nn, kk, mm = b.size("n"), b.size("k"), b.size("m")
    x, idx, u = b.arg((nn, kk)), b.arg((mm, 1), np.int64), b.arg((mm, kk))
    y = b.eqn(lax.scatter_p, [x, idx, u], (nn, kk), dimension_numbers=ROW_UPDATES, indices_are_sorted=False,
              unique_indices=False, mode=GatherScatterMode.FILL_OR_DROP, update_jaxpr=None, update_consts=())

    def reference(n, k, m, x, idx, u):
        out = x.copy()
        for j, i in enumerate(idx[:, 0]):
            if 0 <= i < n:
                out[i] = u[j]
        return out
    cases = [(n, k, m, rng.random((n, k)), rng.integers(-5, n + 5, (m, 1)), rng.random((m, k)))
             for n, k, m in [(0, 3, 2), (1, 0, 3), (3, 2, 0), (1000, 7, 50)]]
    agree(b.compile(y), cases, reference)


# -- dimension expressions --------------------------------------------------------------------------
@pytest.mark.parametrize("size, value", [
    (lambda n: n // 2, lambda n: n // 2), (lambda n: n % 3, lambda n: n % 3),
    (lambda n: (2 * n + 1) // 3, lambda n: (2 * n + 1) // 3), (lambda n: n * n + 1, lambda n: n * n + 1),
    (lambda n: (n + 4) % 5 + n // 4, lambda n: (n + 4) % 5 + n // 4)])
def test_shapes_holding_dim_expressions(size, value):
    b = Builder()
    n = b.size("n")
    y = b.eqn(lax.iota_p, [], (size(n),), np.int64, dtype=np.int64, shape=(size(n),), dimension=0, sharding=None)
    agree(b.compile(y), [(k,) for k in (0, 1, 3, 7, 100)], lambda n: np.arange(value(n)))


def test_a_negative_run_time_size_allocates_nothing():
    # A valid program never makes one; after a failed check it must not reach an allocation.
    b = Builder()
    n = b.size("n")
    y = b.eqn(lax.broadcast_in_dim_p, [lit(1.0, np.float64), b.size_var(0)], (n,), shape=(None,),
              broadcast_dimensions=(), sharding=None)
    (out,) = b.compile(y)(-5)
    assert out.shape == (0,)
