"""Products calling the prebuilt matmul library (lowering/matmul_library.py): every form and dtype
against numpy, static and run-time sizes, C starting at a bias, operands the routine cannot read
in place, products in loops; which products call it and which keep their inline code; the routine
linked only where called, hidden, needing nothing beyond the C library; SPRUE_MATMUL_LIBRARY=0."""
from __future__ import annotations

import os
import re
import subprocess

import numpy as np
import pytest

import sprue
import sprue.numpy as snp
from sprue import lax
from sprue.lowering import matmul_library, matmul_library_build
from sprue.lowering.backend import codegen
from sprue.lowering.matmul_library import FORMS, SYMBOL_PREFIX
from sprue.lowering.targets import HOST_CPU

RNG = np.random.default_rng(16)
ALLOWED = {"libc.so.6", "libm.so.6", "libmvec.so.1", "libpthread.so.0"}


def _close(got, want, dtype):
    tol = 2e-4 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max(initial=0))))


def _calls(tmp_path) -> set[str]:
    """The routines the kept bufferized module's code calls (after the loops stage: call_routines)."""
    text = next(tmp_path.glob("*.04_loops.mlir")).read_text()
    return set(re.findall(rf"call @({SYMBOL_PREFIX}\w+)\(", text))


def _product(form: str, m: int, k: int, n: int, dtype):
    """(function, operands, numpy's result) of one product of `form` (FORMS)."""
    batch = 3
    a, b = RNG.standard_normal((batch, m, k)).astype(dtype), RNG.standard_normal((batch, k, n)).astype(dtype)
    want = a.astype(np.float64) @ b.astype(np.float64)
    if form == "nn":
        return (lambda x, y: x @ y), (a[0], b[0]), want[0]
    if form == "tn":
        return (lambda x, y: x.T @ y), (a[0].T.copy(), b[0]), want[0]
    if form == "nt":
        return (lambda x, y: x @ y.T), (a[0], b[0].T.copy()), want[0]
    if form == "bnn":
        return (lambda x, y: snp.einsum("bij,bjk->bik", x, y)), (a, b), want
    return (lambda x, y: snp.einsum("bij,bkj->bik", x, y)), (a, b.transpose(0, 2, 1).copy()), want


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_form_calls_its_routine_and_matches_numpy(form, dtype, tmp_path):
    # 130 rows: no register tile divides them (the kernel's padded last row tile); k = 70
    f, args, want = _product(form, 130, 70, 256, dtype)
    got = sprue.qjit(f, keep_intermediate=str(tmp_path))(*args)
    _close(got, want, dtype)
    assert _calls(tmp_path) == {matmul_library.routine(form, "f64" if dtype == np.float64 else "f32")}


@pytest.mark.parametrize("form", ["nn", "bnt"])
def test_run_time_sizes_call_the_routine_once_for_every_shape(form, tmp_path):
    f = sprue.qjit(lambda x, y: _product(form, 1, 1, 1, np.float64)[0](x, y),
                   abstracted_axes=({0: "m", 1: "k"} if form == "nn" else {1: "m", 2: "k"},
                                    {0: "k", 1: "n"} if form == "nn" else {1: "n", 2: "k"}),
                   keep_intermediate=str(tmp_path))
    for m, k, n in [(5, 3, 7), (200, 64, 300), (64, 1, 128), (0, 5, 7), (5, 0, 7), (5, 7, 0)]:
        _, args, want = _product(form, m, k, n, np.float64)
        _close(f(*args), want, np.float64)
    assert _calls(tmp_path) == {matmul_library.routine(form, "f64")}


def test_a_bias_is_c_s_initial_value(tmp_path):
    x, w, b = RNG.standard_normal((200, 100)), RNG.standard_normal((100, 128)), RNG.standard_normal(128)
    got = sprue.qjit(lambda x, w, b: snp.tanh(x @ w + b), keep_intermediate=str(tmp_path))(x, w, b)
    _close(got, np.tanh(x @ w + b), np.float64)
    assert _calls(tmp_path) == {matmul_library.routine("nn", "f64")}


def test_strided_operands_are_read_through_copies(tmp_path):
    # every other column of A: a view whose last axis is not contiguous, copied for the routine
    a, b = RNG.standard_normal((128, 140)), RNG.standard_normal((70, 256))
    got = sprue.qjit(lambda a, b: a[:, ::2] @ b, keep_intermediate=str(tmp_path))(a, b)
    _close(got, a[:, ::2] @ b, np.float64)


def test_products_in_a_loop_with_changing_weights(tmp_path):
    x, w = RNG.standard_normal((128, 128)), 0.05 * RNG.standard_normal((128, 128))

    def descend(x, w):
        return lax.fori_loop(0, 3, lambda i, w: w - 0.01 * (x.T @ (x @ w)), w)

    got = sprue.qjit(descend, keep_intermediate=str(tmp_path))(x, w)
    want = w
    for _ in range(3):
        want = want - 0.01 * (x.T @ (x @ want))
    _close(got, want, np.float64)
    assert _calls(tmp_path) == {matmul_library.routine("nn", "f64"), matmul_library.routine("tn", "f64")}


@pytest.mark.parametrize("what,m,k,n", [("few rows", 32, 128, 128), ("shallow", 256, 16, 128),
                                        ("columns no block divides", 256, 128, 100), ("small", 64, 64, 128)])
def test_products_the_inline_code_runs_faster_keep_it(what, m, k, n, tmp_path):
    a, b = RNG.standard_normal((m, k)), RNG.standard_normal((k, n))
    _close(sprue.qjit(lambda a, b: a @ b, keep_intermediate=str(tmp_path))(a, b), a @ b, np.float64)
    assert _calls(tmp_path) == set(), what


def test_weights_fixed_across_a_scan_keep_the_inline_kernel(tmp_path):
    xs, w = RNG.standard_normal((4, 128, 128)), RNG.standard_normal((128, 128)) / 128

    def body(h, x):
        h = snp.tanh(x @ w + h)
        return h, h.sum()

    got = sprue.qjit(lambda xs: lax.scan(body, np.zeros((128, 128)), xs), keep_intermediate=str(tmp_path))(xs)
    h, want = np.zeros((128, 128)), []
    for x in xs:
        h = np.tanh(x @ w + h)
        want.append(h.sum())
    _close(got[0], h, np.float64)
    _close(got[1], np.array(want), np.float64)
    assert _calls(tmp_path) == set()


def test_the_switch_keeps_every_product_inline(tmp_path, monkeypatch):
    monkeypatch.setenv("SPRUE_MATMUL_LIBRARY", "0")
    a, b = RNG.standard_normal((256, 128)), RNG.standard_normal((128, 256))
    _close(sprue.qjit(lambda a, b: a @ b, keep_intermediate=str(tmp_path))(a, b), a @ b, np.float64)
    assert _calls(tmp_path) == set()


def _readelf(*args) -> str:
    try:
        return subprocess.run(["readelf", *args], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("readelf is not installed: the library's symbols and NEEDED entries cannot be read")


def test_the_routine_is_linked_only_where_called_hidden_and_needs_only_libc(tmp_path):
    a, b = RNG.standard_normal((256, 128)), RNG.standard_normal((128, 256))
    sprue.qjit(lambda a, b: a @ b, keep_intermediate=str(tmp_path / "big"))(a, b)
    sprue.qjit(lambda a, b: a @ b, keep_intermediate=str(tmp_path / "small"))(a[:8, :8], b[:8, :8])
    big, small = next((tmp_path / "big").glob("*.so")), next((tmp_path / "small").glob("*.so"))
    symbols = _readelf("-sW", str(big))
    name = f"_mlir_ciface_{matmul_library.routine('nn', 'f64')}"
    # defined (a section number, not UND), local or hidden: no library exports it
    assert re.search(rf"FUNC\s+\w+\s+(HIDDEN|DEFAULT)\s+\d+\s+{name}$", symbols, re.M), symbols
    assert name not in _readelf("--dyn-syms", "-W", str(big))
    assert SYMBOL_PREFIX not in _readelf("-sW", str(small))
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", _readelf("-d", str(big))))
    assert {n for n in needed if not n.startswith("ld-linux")} <= ALLOWED, needed


def test_a_routine_not_prebuilt_is_compiled_and_kept(tmp_path, monkeypatch):
    # another CPU than the prebuilt objects' (and an empty cache): compiled now, then kept
    monkeypatch.setenv("SPRUE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(matmul_library_build, "_compiled", {})
    obj = matmul_library_build.routine_object("nt", "f32", "x86-64-v2" if HOST_CPU != "x86-64-v2" else "x86-64-v3", "",
                                              codegen)
    assert obj.startswith(b"\x7fELF")
    assert len(list((tmp_path / "cache" / "runtime").glob("matmul-nt-f32-*.o"))) == 1


def test_routines_run_on_the_pool_with_the_same_bits_at_each_thread_count(tmp_path):
    assert "_sprue_parallel_for" in _readelf("-sW", str(_object(tmp_path, "bnt", "f64")))
    q, k = RNG.random((8, 128, 64)), RNG.random((8, 256, 64))
    f = sprue.qjit(lambda q, k: q @ snp.swapaxes(k, -1, -2), keep_intermediate=str(tmp_path))
    got = []
    try:
        for n in (1, 2, 4):
            sprue.set_num_threads(n)
            got.append(np.asarray(f(q, k)))
    finally:
        sprue.set_num_threads(len(os.sched_getaffinity(0)))   # the default
    for g in got[1:]:
        np.testing.assert_array_equal(g, got[0])
    _close(got[0], q @ np.swapaxes(k, 1, 2), np.float64)
    assert _calls(tmp_path) == {matmul_library.routine("bnt", "f64")}


def _object(tmp_path, form, dtype):
    path = tmp_path / f"{form}_{dtype}.o"
    path.write_bytes(matmul_library_build.routine_object(form, dtype, HOST_CPU, "", codegen))
    return path


def test_products_of_a_module_a_column_split_collects_again_keep_their_calls():
    """The products a run-time N splits (matmul._split_columns) are collected again after the split:
    a product calling the library must not be among them (its B already folded as transposed, it
    was tiled as an unpacked one: the gradient below came out wrong)."""
    def loss(a, b):
        spd = a @ a.T + 3 * snp.eye(a.shape[0])
        return snp.sum(snp.linalg.solve(a, b)) + snp.sum(snp.linalg.cholesky(spd))

    grad = sprue.grad(loss, argnums=(0, 1))
    f = sprue.qjit(grad, abstracted_axes=({0: "n", 1: "n"}, {0: "n"}))
    for n in (3, 70):
        a, b = RNG.standard_normal((n, n)) + 3 * np.eye(n), RNG.standard_normal((n, 2))
        for got, want in zip(f(a, b), grad(a, b)):
            _close(got, np.asarray(want), np.float64)
