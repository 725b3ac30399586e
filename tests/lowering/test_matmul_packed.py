"""Large static matmuls pack B into panels (lowering/matmul.py, _script_packed) and keep numpy's
results: rows a register tile divides or not (a peeled last row tile), columns padded or not, f32
and f64, results returned or used further, inside loops, a transposed A read in place, a
transposed B (2-D or batched: attention's q @ k^T) packed from itself;
SPRUE_MATMUL_FORMS=0 keeps the unpacked kernel."""
import re

import numpy as np
import pytest

import sprue
from sprue import lax
from sprue.lowering import matmul
from tests.helpers.bufferization import copies_outside_loops

RNG = np.random.default_rng(21)


@pytest.fixture(autouse=True)
def _inline_products(monkeypatch):
    """These tests read the inline kernels' code: no product calls the prebuilt library
    (matmul_library.py; tests/lowering/test_matmul_library.py tests those calls)."""
    monkeypatch.setenv("SPRUE_MATMUL_LIBRARY", "0")


def _args(dtype, *shapes):
    return [RNG.standard_normal(s).astype(dtype) for s in shapes]


def _close(got, want, dtype):
    tol = 2e-4 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max(initial=0))))


def _packing(m, k, n, dtype):
    """What the bufferized module must hold: B's packing copy (a transpose of B seen as
    (K, N/NR, NR) into NR-column panels), and where no register row count divides M, the peeled
    row loop's last tile of M mod MR rows (MR, NR from the host's register tile, as matmul.py
    picks them)."""
    rows, nr = matmul.packed_register_tile(n, np.dtype(dtype).itemsize)
    ty = "f32" if dtype == np.float32 else "f64"
    want = [re.compile(rf"linalg.transpose ins\(%\w+ : memref<[?\d]+x[?\d]+x{nr}x{ty}.*permutation = \[1, 0, 2\]")]
    if not any(m % r == 0 for r in rows[:2]):
        last = f"{m % rows[0]}x" if m % rows[0] > 1 else ""
        want.append(re.compile(rf"iter_args\(.*\) -> \(vector<{last}{nr}x{ty}>\)"))
    return want


# (m, k, n): rows 4 or 6 divide, or neither (the row loop peeled), columns a register tile does
# not divide (B padded), a k the cache tile does not divide
SHAPES = [(512, 512, 512), (516, 400, 520), (515, 513, 517), (600, 130, 1001), (1021, 1000, 512)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_packed_matmul_matches_numpy(m, k, n, dtype, tmp_path):
    a, b = _args(dtype, (m, k), (k, n))
    f = sprue.qjit(lambda a, b: a @ b, keep_intermediate=str(tmp_path))
    got = f(a, b)
    assert got.dtype == dtype
    _close(got, a.astype(np.float64) @ b.astype(np.float64), dtype)
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    for pattern in _packing(m, k, n, dtype):
        assert pattern.search(text), pattern


def test_packed_result_used_further_and_returned():
    """The unpacked result is a view of the packed one (its copy dropped): returned and also read
    by later ops, whether it was padded or not."""
    a, b, c = _args(np.float64, (515, 513), (513, 517), (516, 400))
    d = _args(np.float64, (400, 520))[0]
    f = sprue.qjit(lambda a, b, c, d: (a @ b, (a @ b)[:3, :5] * 2.0, c @ d + 1.0, (c @ d).T))
    p, q, r, s = f(a, b, c, d)
    _close(p, a @ b, np.float64)
    _close(q, (a @ b)[:3, :5] * 2.0, np.float64)
    _close(r, c @ d + 1.0, np.float64)
    _close(s, (c @ d).T, np.float64)


def test_packed_matmul_in_a_loop():
    x, w = _args(np.float64, (420, 430), (430, 430))
    f = sprue.qjit(lambda x, w: lax.fori_loop(0, 3, lambda i, x: (x @ w) * 0.05, x))
    ref = x
    for _ in range(3):
        ref = (ref @ w) * 0.05
    _close(f(x, w), ref, np.float64)


def test_forms_switch_keeps_the_unpacked_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("SPRUE_MATMUL_FORMS", "0")
    a, b = _args(np.float64, (512, 512), (512, 512))
    f = sprue.qjit(lambda a, b: a @ b, keep_intermediate=str(tmp_path))
    _close(f(a, b), a @ b, np.float64)
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    assert "permutation = [1, 0, 2]" not in text
    assert re.search(r"vector\.fma", text)


def test_small_products_are_not_packed_and_dynamic_ones_only_where_their_sizes_pay(tmp_path, monkeypatch):
    monkeypatch.setenv("SPRUE_MATMUL_PACK_DYNAMIC", "1")
    a, b = _args(np.float64, (48, 48), (48, 48))
    small = sprue.qjit(lambda a, b: a @ b, keep_intermediate=str(tmp_path / "small"))
    _close(small(a, b), a @ b, np.float64)
    a, b = _args(np.float64, (520, 520), (520, 520))
    dyn = sprue.qjit(lambda a, b: a @ b, keep_intermediate=str(tmp_path / "dyn"),
                     abstracted_axes=({0: "m", 1: "k"}, {0: "k", 1: "n"}))
    _close(dyn(a, b), a @ b, np.float64)
    text = next((tmp_path / "small").glob("*.03_bufferized.mlir")).read_text()
    assert "permutation = [1, 0, 2]" not in text
    # run-time sizes: the packed kernel and the masked unpacked one, chosen by the sizes
    text = next((tmp_path / "dyn").glob("*.03_bufferized.mlir")).read_text()
    assert "permutation = [1, 0, 2]" in text and "vector.create_mask" in text
    assert re.search(r"arith.cmpi sge, %\w+, %c64\b", text)
    for rows in (8, 63, 64, 65):           # either side of PACK_MIN_ROWS, the same function
        a, b = _args(np.float64, (rows, 520), (520, 300))
        _close(dyn(a, b), a @ b, np.float64)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("m,k,n", [(256, 200, 264), (520, 512, 512), (515, 513, 517)])
def test_transposed_a_is_read_in_place(m, k, n, dtype, tmp_path):
    """`a.T @ b` (dot_canonical.py transposes A into canonical order) reads A through the
    matmul's indexing map: no transposed copy of A is left, packed or not."""
    a, b = _args(dtype, (k, m), (k, n))
    f = sprue.qjit(lambda a, b: a.T @ b, keep_intermediate=str(tmp_path))
    _close(f(a, b), a.T.astype(np.float64) @ b.astype(np.float64), dtype)
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    assert "affine_map<(d0, d1) -> (d1, d0)>" not in text
    assert re.search(r"vector\.fma", text)


def test_transposed_a_also_used_elsewhere_and_in_grad():
    a, b = _args(np.float64, (96, 80), (96, 72))
    t, p = sprue.qjit(lambda a, b: (a.T * 2.0, a.T @ b))(a, b)
    _close(t, a.T * 2.0, np.float64)
    _close(p, a.T @ b, np.float64)
    x, w = _args(np.float64, (128, 64), (64, 48))
    g = sprue.qjit(sprue.grad(lambda w, x: sprue.numpy.sum(sprue.numpy.tanh(x @ w))))(w, x)
    _close(g, x.T @ (1 - np.tanh(x @ w) ** 2), np.float64)


@pytest.mark.parametrize("m,k,n", [(512, 512, 512), (129, 67, 131)])
def test_packed_matmul_accumulating_into_an_init(m, k, n):
    """`a @ b + y`: the sum may become the product's initial value (fusion.py), which the packed
    result layout then starts from."""
    a, b, y = _args(np.float64, (m, k), (k, n), (m, n))
    _close(sprue.qjit(lambda a, b, y: a @ b + y)(a, b, y), a @ b + y, np.float64)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("m,k,n", [(256, 256, 264), (129, 67, 131), (515, 513, 517)])
def test_transposed_b_packs_from_b_itself(m, k, n, dtype, tmp_path):
    """`a @ b.T` and `a.T @ b.T`: B's panels are packed straight from the stored (N, K) B, with no
    transposed copy of B (nor of A) before it."""
    a, bt = _args(dtype, (m, k), (n, k))
    at = np.ascontiguousarray(a.T)
    want = a.astype(np.float64) @ bt.T.astype(np.float64)
    for i, (f, args) in enumerate([(lambda a, b: a @ b.T, (a, bt)), (lambda a, b: a.T @ b.T, (at, bt))]):
        got = sprue.qjit(f, keep_intermediate=str(tmp_path / str(i)))(*args)
        _close(got, want, dtype)
        text = next((tmp_path / str(i)).glob("*.03_bufferized.mlir")).read_text()
        assert "affine_map<(d0, d1) -> (d1, d0)>" not in text
        assert _BLOCK_TRANSPOSE.search(text)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name,f,ref,shapes", [
    ("batched", lambda p, v: p @ v, lambda p, v: p @ v, [(2, 258, 256), (2, 256, 256)]),
    ("odd", lambda p, v: p @ v, lambda p, v: p @ v, [(2, 129, 67), (2, 67, 131)]),
], ids=["batched", "odd"])
def test_packed_batch_matmul(name, f, ref, shapes, dtype, tmp_path):
    """A batch_matmul packs each batch element's B (one element at a time, its unit dim folded)."""
    args = _args(dtype, *shapes)
    got = sprue.qjit(f, keep_intermediate=str(tmp_path))(*args)
    _close(got, ref(*[x.astype(np.float64) for x in args]), dtype)
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    assert re.search(r"linalg.transpose .*permutation = \[1, 0, 2\]", text)


def _attention_forms():
    """Batched products of a batch-transposed B (b, N, K): swapaxes, einsum, vmap of `q @ k.T`."""
    snp = sprue.numpy
    return [lambda q, k: q @ snp.swapaxes(k, -1, -2), lambda q, k: snp.einsum("bqd,bkd->bqk", q, k),
            sprue.vmap(lambda q, k: q @ k.T)]


# The packing of a transposed B (matmul_scripts.transpose_blocks): 8 x 8 blocks of B's rows
# transposed in registers (transpose_blocks.py: the first of its three rounds of shuffles
# interleaves two rows' even lanes)
_BLOCK_TRANSPOSE = re.compile(r"vector\.shuffle %\w+, %\w+ \[0, 8, 2, 10, 4, 12, 6, 14\]")


def _no_transposed_copy(text, k, n, ty):
    """No copy of B into its (batch-)transposed layout (stablehlo.transpose's generic, or a
    buffer of B's transposed shape (K, N)) is left in the bufferized module."""
    assert "affine_map<(d0, d1, d2) -> (d0, d2, d1)>" not in text
    assert "affine_map<(d0, d1) -> (d1, d0)>" not in text
    assert not re.search(rf"memref.alloc\(\).*: memref<(\d+x)?{k}x{n}x{ty}>", text)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("b,m,n,k", [(8, 256, 256, 64), (3, 130, 131, 67), (1, 256, 200, 64), (2, 64, 520, 96)])
def test_batched_transposed_b_packs_from_b_itself(b, m, n, k, dtype, tmp_path):
    """Attention's `q @ swapaxes(k, -1, -2)` (and its einsum and vmap forms): the batch_matmul
    reads the untransposed B (b, N, K) through its indexing maps and packs each batch element's
    NR-column panels straight from it (matmul_operands.fold_rhs_transpose): the only copy of B is
    the packing one, a transpose of B seen as (N/NR, NR, K) into (N/NR, K, NR)."""
    q, kk = _args(dtype, (b, m, k), (b, n, k))
    want = q.astype(np.float64) @ np.swapaxes(kk, 1, 2).astype(np.float64)
    ty = "f32" if dtype == np.float32 else "f64"
    for i, f in enumerate(_attention_forms()):
        got = sprue.qjit(f, keep_intermediate=str(tmp_path / str(i)))(q, kk)
        assert got.dtype == dtype
        _close(got, want, dtype)
        text = next((tmp_path / str(i)).glob("*.03_bufferized.mlir")).read_text()
        _no_transposed_copy(text, k, n, ty)
        assert re.search(rf"vector.transfer_read %\w+.*: memref<1x8x\??\d*x{ty}, strided<\[\d+, {k}, 1\].*vector<8x8x{ty}>", text), i
        assert _BLOCK_TRANSPOSE.search(text), i


def test_batched_transposed_b_used_elsewhere_and_in_a_loop():
    """The transposed copy stays for its other users; a loop's product packs from k each trip."""
    snp = sprue.numpy
    q, k = _args(np.float64, (4, 128, 64), (4, 136, 64))
    s, kt = sprue.qjit(lambda q, k: (q @ snp.swapaxes(k, 1, 2), snp.swapaxes(k, 1, 2) * 2.0))(q, k)
    _close(s, q @ np.swapaxes(k, 1, 2), np.float64)
    _close(kt, np.swapaxes(k, 1, 2) * 2.0, np.float64)
    x, w = _args(np.float64, (2, 128, 128), (2, 128, 128))
    f = sprue.qjit(lambda x, w: lax.fori_loop(0, 3, lambda i, x: (x @ snp.swapaxes(w, 1, 2)) * 0.05, x))
    ref = x
    for _ in range(3):
        ref = (ref @ np.swapaxes(w, 1, 2)) * 0.05
    _close(f(x, w), ref, np.float64)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_small_batched_transposed_b_keeps_the_unpacked_kernel(dtype, tmp_path):
    """Products too small to pack run the unpacked kernel on the transposed copy of B (its NR
    values per k contiguous there, a strided gather in B itself)."""
    q, k = _args(dtype, (3, 20, 16), (3, 24, 16))
    want = q.astype(np.float64) @ np.swapaxes(k, 1, 2).astype(np.float64)
    for i, f in enumerate(_attention_forms()):
        _close(sprue.qjit(f, keep_intermediate=str(tmp_path / str(i)))(q, k), want, dtype)
        text = next((tmp_path / str(i)).glob("*.03_bufferized.mlir")).read_text()
        assert "affine_map<(d0, d1, d2) -> (d0, d2, d1)>" in text, i
        assert "permutation = [1, 0, 2]" not in text and not _BLOCK_TRANSPOSE.search(text), i


@pytest.mark.parametrize("pack", ["0", "1"])
def test_batched_transposed_b_with_run_time_sizes(pack, monkeypatch, tmp_path):
    """abstracted_axes: by default the masked unpacked kernel on the transposed copy; under
    SPRUE_MATMUL_PACK_DYNAMIC=1 the packed branch of the run-time guard packs from k itself (its
    linalg.transpose reads k's (N/NR, NR, K) view), and the transposed copy is made in the
    unpacked branch only, after the packed one."""
    monkeypatch.setenv("SPRUE_MATMUL_PACK_DYNAMIC", pack)
    snp = sprue.numpy
    axes = ({0: "b", 1: "m", 2: "d"}, {0: "b", 1: "n", 2: "d"})
    f = sprue.qjit(lambda q, k: q @ snp.swapaxes(k, -1, -2), abstracted_axes=axes, keep_intermediate=str(tmp_path))
    for b, m, n, d in [(4, 130, 96, 64), (2, 63, 40, 33), (1, 200, 257, 64), (3, 8, 8, 5)]:
        q, k = _args(np.float64, (b, m, d), (b, n, d))
        _close(f(q, k), q @ np.swapaxes(k, 1, 2), np.float64)
    assert f.compile_count == 1
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    alias = re.search(r"(#map\d*) = affine_map<\(d0, d1, d2\) -> \(d0, d2, d1\)>", text).group(1)
    copy = re.search(rf"linalg.generic {{indexing_maps = \[{alias},", text)
    packed = _BLOCK_TRANSPOSE.search(text)
    assert copy and bool(packed) == (pack == "1")
    if packed:
        assert copy.start() > packed.start()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [10, 13])
def test_narrow_products_pad_b_to_whole_panels(n, dtype, tmp_path):
    """Products with fewer columns than two register tiles (a classifier's `h @ w2` and its
    gradient `h.T @ g`) pack B into whole zero-padded panels: no masked last column tile."""
    nr = matmul._register_tiles(np.dtype(dtype).itemsize)[1][0]
    n = n if n >= nr else n + nr          # at least one whole register tile of columns
    h, w, g = _args(dtype, (512, 128), (128, n), (512, n))
    h64, w64, g64 = (x.astype(np.float64) for x in (h, w, g))
    for i, (f, args, want) in enumerate([(lambda h, w: h @ w, (h, w), h64 @ w64),
                                         (lambda h, g: h.T @ g, (h, g), h64.T @ g64)]):
        got = sprue.qjit(f, keep_intermediate=str(tmp_path / str(i)))(*args)
        _close(got, want, dtype)
        text = next((tmp_path / str(i)).glob("*.03_bufferized.mlir")).read_text()
        assert re.search(r"linalg.transpose .*permutation = \[1, 0, 2\]", text), i
        assert "vector.mask" not in text and "maskedstore" not in text, i


@pytest.mark.parametrize("m,k,n", [(512, 128, 10), (37, 64, 20), (515, 130, 131), (256, 300, 1024)])
def test_dynamic_packing_switch_matches_numpy(m, k, n, monkeypatch, tmp_path):
    """SPRUE_MATMUL_PACK_DYNAMIC=1: products with run-time sizes are packed (the rows the register
    tile leaves, one at a time: no masks) where the sizes at run time pass the static rule, else
    run the masked unpacked kernel: both are compiled, behind an scf.if (37 rows take the unpacked
    one). By default (0) only the masked unpacked kernel."""
    a, b = _args(np.float64, (m, k), (k, n))
    axes = ({0: "m", 1: "k"}, {0: "k", 1: "n"})
    for mode in ("1", "0"):
        monkeypatch.setenv("SPRUE_MATMUL_PACK_DYNAMIC", mode)
        f = sprue.qjit(lambda a, b: a @ b, abstracted_axes=axes, keep_intermediate=str(tmp_path / mode))
        _close(f(a, b), a @ b, np.float64)
        text = next((tmp_path / mode).glob("*.03_bufferized.mlir")).read_text()
        assert ("permutation = [1, 0, 2]" in text) == (mode == "1"), mode
        assert "vector.create_mask" in text, mode


@pytest.mark.parametrize("k,n", [(5, 7), (1, 64), (300, 8)])
def test_run_time_rows_with_static_columns_too_few_to_pack_match_numpy(k, n, monkeypatch):
    # sizes known at compile time that fail the packing rule (fewer than NR columns, one step of
    # k) leave the product unpacked, whatever the rows at run time
    monkeypatch.setenv("SPRUE_MATMUL_PACK_DYNAMIC", "1")
    f = sprue.qjit(lambda a, b: a @ b, abstracted_axes=({0: "m"}, None))
    for m in (9, 70, 300):
        a, b = _args(np.float64, (m, k), (k, n))
        _close(f(a, b), a @ b, np.float64)


def test_run_time_rows_pack_a_static_b_unless_it_is_fixed_across_a_loop(tmp_path):
    """By default a product whose only run-time size is its rows packs its static B with no
    run-time guard (one kernel: the rows the register tile leaves run one at a time), except where
    B is the same on every trip of an enclosing loop (a recurrent scan's weights: packed again on
    every trip), which keeps the masked unpacked kernel; a B that changes per trip (weights
    trained in a fori_loop) packs."""
    snp = sprue.numpy
    rng = np.random.default_rng(5)
    cols = 3 * matmul._register_tiles(8)[1][0]    # (whole register tiles: 24 on AVX2, 96 on AVX-512)
    w = rng.standard_normal((64, cols)) * 0.1
    plain = sprue.qjit(lambda x, w: x @ w, abstracted_axes=({0: "m"}, None), keep_intermediate=str(tmp_path / "p"))
    scan = sprue.qjit(lambda xs, w: lax.scan(lambda h, x: (snp.tanh(x @ w + h), h), snp.zeros((xs.shape[1], cols)), xs)[0],
                      abstracted_axes=({1: "m"}, None), keep_intermediate=str(tmp_path / "s"))
    trained = sprue.qjit(lambda x, w: lax.fori_loop(0, 3, lambda i, w: w - 0.01 * snp.tanh(x @ w)[:64], w),
                         abstracted_axes=({0: "m"}, None), keep_intermediate=str(tmp_path / "t"))
    for m in (1, 7, 64, 130):
        x = rng.standard_normal((m, 64))
        _close(plain(x, w), x @ w, np.float64)
        xs = rng.standard_normal((3, m, 64))
        h = np.zeros((m, cols))
        for step in xs:
            h = np.tanh(step @ w + h)
        _close(scan(xs, w), h, np.float64)
        if m >= 64:
            wt = w
            for _ in range(3):
                wt = wt - 0.01 * np.tanh(x @ wt)[:64]
            _close(trained(x, w), wt, np.float64)
    packs = {d: "permutation = [1, 0, 2]" in next((tmp_path / d).glob("*.03_bufferized.mlir")).read_text()
             for d in ("p", "s", "t")}
    assert packs == {"p": True, "s": False, "t": True}
    text = next((tmp_path / "p").glob("*.03_bufferized.mlir")).read_text()
    assert not re.search(r"arith.cmpi sge, %\w+, %c64\b", text)     # no run-time guard
    assert copies_outside_loops(text) == 0       # C written in place (only the padded last rows are copied)


def test_run_time_columns_pack_whole_blocks_and_pad_the_rest(tmp_path):
    """By default a product with run-time columns packs with no run-time guard: a loop over whole
    blocks of NC columns, which pack nothing padded and write their part of C in place (C seen as
    (m, NC/NR, NR) panels, no copy), then the last, partial block packed with B and C padded;
    no masks anywhere. Attention's `q @ swapaxes(k)` reads k in place in both parts."""
    snp = sprue.numpy
    f = sprue.qjit(lambda a, b: a @ b, abstracted_axes=({0: "m", 1: "k"}, {0: "k", 1: "n"}),
                   keep_intermediate=str(tmp_path / "mm"))
    g = sprue.qjit(lambda q, k: q @ snp.swapaxes(k, -1, -2), abstracted_axes=({0: "b", 1: "t"}, {0: "b", 1: "t"}),
                   keep_intermediate=str(tmp_path / "qk"))
    for m, k, n in [(1, 1, 1), (7, 5, 3), (130, 77, 128), (64, 256, 129), (200, 3, 300), (256, 256, 256)]:
        a, b = _args(np.float64, (m, k), (k, n))
        _close(f(a, b), a @ b, np.float64)
    for b, t in [(1, 3), (2, 128), (3, 257)]:
        q, k = _args(np.float64, (b, t, 16), (b, t, 16))
        _close(g(q, k), q @ np.swapaxes(k, 1, 2), np.float64)
    assert f.compile_count == g.compile_count == 1
    nc, nr = matmul.PACK_NC, matmul._register_tiles(8)[1][0]
    for name in ("mm", "qk"):
        text = next((tmp_path / name).glob("*.03_bufferized.mlir")).read_text()
        assert re.search(rf"scf.for %\w+ = %c0 to %\w+ step %c{nc} ", text), name          # the whole blocks
        assert re.search(rf"memref.expand_shape %\w+ \[\[0\], \[1, 2\]\] output_shape \[%\w+, {nc // nr}, {nr}\]", text), name
        assert "vector.create_mask" not in text and "vector.mask" not in text, name
    assert "affine_map<(d0, d1, d2) -> (d0, d2, d1)>" not in text     # no transposed copy of k


@pytest.mark.parametrize("m", [258, 256, 130, 64])
def test_run_time_k_with_static_rows_any_multiple_of_the_tile(m, tmp_path):
    """Static rows with a run-time k: the row loop's last tile is static (m % MR rows, none when
    MR divides m: 258 = 43 x 6 once failed to compile, "failed to peel the last iteration"), and A,
    read row by row with a run-time stride, takes 4-row tiles (6 spilled a row address in the k
    loop)."""
    f = sprue.qjit(lambda a, b: a @ b, abstracted_axes=({1: "k"}, {0: "k"}), keep_intermediate=str(tmp_path))
    for k in (70, 1, 300):
        a, b = _args(np.float64, (m, k), (k, 256))
        _close(f(a, b), a @ b, np.float64)
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    assert "permutation = [1, 0, 2]" in text        # packed
    if matmul._vector_bytes() == 32:
        assert re.search(r"-> \(vector<4x8xf64>\)", text) and not re.search(r"-> \(vector<6x8xf64>\)", text)
