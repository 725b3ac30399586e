"""Every dot_general form takes the matmul fast path and keeps numpy's results: batch dims,
contracting dims on either side (lowering/dot_canonical.py), matvec/vecmat, f32/f64, odd and
dynamic sizes, in loops, under grad and vmap (lowering/matmul.py)."""
import re

import numpy as np
import pytest

import sprue
import sprue.numpy as snp
from sprue import lax
from sprue.lowering.targets import host_vector_bytes

RNG = np.random.default_rng(13)


@pytest.fixture(autouse=True)
def _inline_products(monkeypatch):
    """These tests read the inline kernels' code: no product calls the prebuilt library
    (matmul_library.py; tests/lowering/test_matmul_library.py tests those calls)."""
    monkeypatch.setenv("SPRUE_MATMUL_LIBRARY", "0")


def _close(got, want, dtype):
    tol = 2e-4 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max(initial=0))))


def _args(dtype, *shapes):
    return [RNG.standard_normal(s).astype(dtype) for s in shapes]


# (name, sprue function, numpy function, operand shapes)
FORMS = [
    ("matmul", lambda a, b: a @ b, lambda a, b: a @ b, [(65, 33), (33, 48)]),
    ("batched", lambda a, b: a @ b, lambda a, b: a @ b, [(3, 40, 17), (3, 17, 24)]),
    ("attention", lambda q, k: q @ snp.swapaxes(k, 1, 2), lambda q, k: q @ np.swapaxes(k, 1, 2), [(2, 48, 16), (2, 36, 16)]),
    ("a_t", lambda a, b: a.T @ b, lambda a, b: a.T @ b, [(33, 40), (33, 24)]),
    ("b_t", lambda a, b: a @ b.T, lambda a, b: a @ b.T, [(40, 33), (24, 33)]),
    ("matvec", lambda a, x: a @ x, lambda a, x: a @ x, [(129, 65), (65,)]),
    ("vecmat", lambda x, a: x @ a, lambda x, a: x @ a, [(65,), (65, 96)]),
    ("vecmat_odd", lambda x, a: x @ a, lambda x, a: x @ a, [(33,), (33, 131)]),
    ("vecmat_wide", lambda x, a: x @ a, lambda x, a: x @ a, [(1100,), (1100, 320)]),
    ("vecmat_big_odd", lambda x, a: x @ a, lambda x, a: x @ a, [(1029,), (1029, 1031)]),
    ("a_t_vec", lambda a, x: a.T @ x, lambda a, x: a.T @ x, [(65, 129), (65,)]),
    ("vec_a_t", lambda x, a: x @ a.T, lambda x, a: x @ a.T, [(65,), (96, 65)]),
    ("dg_00", lambda a, b: lax.dot_general(a, b, (((0,), (0,)), ((), ()))), lambda a, b: a.T @ b, [(17, 40), (17, 24)]),
    ("dg_11", lambda a, b: lax.dot_general(a, b, (((1,), (1,)), ((), ()))), lambda a, b: a @ b.T, [(40, 17), (24, 17)]),
    ("dg_batch_last", lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((2,), (2,)))),
     lambda a, b: np.einsum("mkb,knb->bmn", a, b), [(12, 9, 3), (9, 24, 3)]),
    ("dg_two_batch", lambda a, b: lax.dot_general(a, b, (((3,), (2,)), ((0, 1), (0, 1)))),
     lambda a, b: a @ b, [(2, 3, 8, 5), (2, 3, 5, 16)]),
    ("dg_two_contract", lambda a, b: lax.dot_general(a, b, (((1, 2), (0, 1)), ((), ()))),
     lambda a, b: np.einsum("mij,ijn->mn", a, b), [(10, 4, 6), (4, 6, 24)]),
    ("dg_two_free", lambda a, b: lax.dot_general(a, b, (((2,), (0,)), ((), ()))),
     lambda a, b: np.einsum("ijk,kn->ijn", a, b), [(4, 6, 7), (7, 24)]),
    ("dg_vec_two_contract", lambda a, x: lax.dot_general(a, x, (((0, 1), (0, 1)), ((), ()))),
     lambda a, x: np.einsum("ijm,ij->m", a, x), [(5, 7, 24), (5, 7)]),
    ("vmapped", lambda a, b: sprue.vmap(lambda x: x @ b)(a), lambda a, b: a @ b, [(3, 20, 9), (9, 24)]),
    ("batched_matvec", lambda a, x: lax.dot_general(a, x, (((2,), (1,)), ((0,), (0,)))),
     lambda a, x: np.einsum("bmk,bk->bm", a, x), [(3, 20, 9), (3, 9)]),
    ("heads", lambda q, k: snp.einsum("bhqd,bhkd->bhqk", q, k), lambda q, k: np.einsum("bhqd,bhkd->bhqk", q, k),
     [(2, 3, 24, 16), (2, 3, 20, 16)]),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name,f,ref,shapes", FORMS, ids=[f[0] for f in FORMS])
def test_form_matches_numpy(name, f, ref, shapes, dtype):
    args = _args(dtype, *shapes)
    got = sprue.qjit(f)(*args)
    assert got.dtype == dtype
    _close(got, ref(*args), dtype)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 3, 3), (17, 17, 17), (1, 129, 129), (129, 129, 1),
                                   (129, 3, 129), (129, 129, 129), (8, 8, 8), (16, 16, 16), (96, 40, 48)])
def test_odd_sizes(m, k, n):
    a, b = _args(np.float64, (2, m, k), (2, k, n))
    f = sprue.qjit(lambda a, b: (a @ b, a[0] @ b[0], a[0].T.T @ snp.swapaxes(b, 1, 2)[0].T))
    got, got2, got3 = f(a, b)
    _close(got, a @ b, np.float64)
    _close(got2, a[0] @ b[0], np.float64)
    _close(got3, a[0] @ b[0], np.float64)


@pytest.mark.parametrize("name,f,ref,shapes", [FORMS[i] for i in (0, 1, 2, 4, 5, 6)],
                         ids=[FORMS[i][0] for i in (0, 1, 2, 4, 5, 6)])
def test_dynamic_sizes(name, f, ref, shapes):
    dyn = sprue.qjit(f, abstracted_axes=_shared_axes(name, shapes))
    for scale in (1, 2):
        args = _args(np.float64, *[tuple(d * scale if d > 1 else d for d in s) for s in shapes])
        _close(dyn(*args), ref(*args), np.float64)
    assert dyn.compile_count == 1


def _shared_axes(name, shapes):
    """Names the sizes so that the contracted (and batch) sizes are one name."""
    return {
        "matmul": ({0: "m", 1: "k"}, {0: "k", 1: "n"}),
        "batched": ({0: "b", 1: "m", 2: "k"}, {0: "b", 1: "k", 2: "n"}),
        "attention": ({0: "b", 1: "m", 2: "k"}, {0: "b", 1: "n", 2: "k"}),
        "b_t": ({0: "m", 1: "k"}, {0: "n", 1: "k"}),
        "matvec": ({0: "m", 1: "k"}, {0: "k"}),
        "vecmat": ({0: "k"}, {0: "k", 1: "n"}),
    }[name]


def test_grad_and_vmap_of_matmuls():
    w1, w2, x = _args(np.float64, (16, 32), (32, 8), (20, 16))

    def loss(w1, w2, x):
        return snp.sum(snp.tanh(x @ w1) @ w2)

    g1, g2 = sprue.qjit(sprue.grad(loss, argnums=(0, 1)))(w1, w2, x)
    h = np.tanh(x @ w1)
    dh = np.ones((20, 8)) @ w2.T * (1 - h ** 2)
    _close(g1, x.T @ dh, np.float64)
    _close(g2, h.T @ np.ones((20, 8)), np.float64)
    vm = sprue.qjit(sprue.vmap(lambda a, b: a @ b, in_axes=(0, None)))(x.reshape(4, 5, 16), w1)
    _close(vm, x.reshape(4, 5, 16) @ w1, np.float64)
    mv = sprue.qjit(sprue.vmap(lambda a, v: a @ v, in_axes=(None, 0)))(np.ascontiguousarray(w1.T), x)
    _close(mv, x @ w1, np.float64)
    vm = sprue.qjit(sprue.vmap(lambda v, a: v @ a, in_axes=(0, None)))(x, w1)
    _close(vm, x @ w1, np.float64)


def test_matmuls_in_a_loop():
    a, w = _args(np.float64, (8, 64, 32), (8, 32, 32))
    f = sprue.qjit(lambda a, w: lax.fori_loop(0, 3, lambda i, x: snp.tanh(x @ w) + x @ snp.swapaxes(w, 1, 2), a))
    ref = a
    for _ in range(3):
        ref = np.tanh(ref @ w) + ref @ np.swapaxes(w, 1, 2)
    _close(f(a, w), ref, np.float64)


@pytest.mark.parametrize("name", ["batched", "attention", "heads", "b_t", "vecmat", "dg_00", "dg_11", "dg_two_batch", "dg_two_free",
                                  "dg_batch_last", "vmapped"])
def test_forms_take_the_vector_kernel(name, tmp_path):
    """The blocked kernel's outer products (vector FMAs) appear before bufferization's output."""
    _, f, _, shapes = next(form for form in FORMS if form[0] == name)
    big = [tuple(d * 4 if d > 3 else d for d in s) for s in shapes]
    sprue.qjit(f, keep_intermediate=str(tmp_path))(*_args(np.float64, *big))
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    assert re.search(r"vector\.(fma|outerproduct)", text), name


def test_matvec_reassociates(tmp_path):
    a, x = _args(np.float64, (64, 48), (48,))
    sprue.qjit(lambda a, x: a @ x, keep_intermediate=str(tmp_path))(a, x)
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    assert "fastmath<reassoc,contract>" in text


def test_partial_tiles_take_the_vector_kernel(tmp_path, monkeypatch):
    """Sizes known only at run time, unpacked (SPRUE_MATMUL_PACK_DYNAMIC=0; by default only a B
    fixed across a loop stays unpacked): the register loops are peeled, and the full tiles run the
    unmasked kernel (vector FMAs on whole rows, C held across the k loop), the last partial ones
    masked loads and stores."""
    monkeypatch.setenv("SPRUE_MATMUL_PACK_DYNAMIC", "0")
    a, b = _args(np.float64, (129, 67), (67, 131))
    f = sprue.qjit(lambda a, b: a @ b, keep_intermediate=str(tmp_path), abstracted_axes=({0: "m", 1: "k"}, {0: "k", 1: "n"}))
    _close(f(a, b), a @ b, np.float64)
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    assert re.search(r"vector\.fma .*: vector<\d+xf64>", text)
    assert "vector.create_mask" in text
    assert re.search(r"scf\.for .* iter_args\(.*\) -> \(vector<4x\d+xf64>\)", text)


def test_odd_static_sizes_pack_instead_of_masking(tmp_path):
    """Static sizes no register tile divides pack B into zero-padded panels and peel the row
    loop (matmul.py, _packed_plan): full tiles, a static last row tile, no masks."""
    a, b = _args(np.float64, (129, 67), (67, 131))
    f = sprue.qjit(lambda a, b: a @ b, keep_intermediate=str(tmp_path))
    _close(f(a, b), a @ b, np.float64)
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    assert "vector.create_mask" not in text and "vector.mask" not in text
    assert "permutation = [1, 0, 2]" in text
    assert re.search(r"vector\.fma .*: vector<\d+xf64>", text)


def _heads_attention(xp, q, k, v):
    s = xp.einsum("bhqd,bhkd->bhqk", q, k) / 8.0
    s = s - s.max(-1, keepdims=True)
    p = xp.exp(s)
    return xp.einsum("bhqk,bhkd->bhqd", p / p.sum(-1, keepdims=True), v)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "run-time length"])
def test_attention_with_heads_takes_the_packed_kernel(dynamic, tmp_path):
    """Multi-head attention on (batch, heads, length, dim): both products (the softmax's division
    fused into `p @ v` split out again, matmul_unfuse.py) run the register kernel, over the heads
    collapsed into one batch dim (a packed batch_matmul) where the sizes allow; numpy's results."""
    q, k, v = _args(np.float64, (2, 3, 64, 32), (2, 3, 64, 32), (2, 3, 64, 32))
    axes = ({2: "t"}, {2: "t"}, {2: "t"}) if dynamic else None
    f = sprue.qjit(lambda q, k, v: _heads_attention(snp, q, k, v), abstracted_axes=axes,
                   keep_intermediate=str(tmp_path))
    _close(f(q, k, v), _heads_attention(np, q, k, v), np.float64)
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    assert re.search(r"vector\.(?:fma|outerproduct)", text)
    # no product left with the division fused in (a scalar loop nest: divide, multiply, accumulate)
    assert not re.search(r"arith\.divf[^}]*arith\.mulf[^}]*arith\.addf", text)
    # nor a transposed copy of v (layouts.py's copies are for the generics matmul.py leaves)
    assert "affine_map<(d0, d1, d2, d3) -> (d0, d1, d3, d2)>" not in text


def test_a_fused_operand_of_several_ops_is_split_out_in_order():
    """A 4-D product whose operand is computed by several ops (fused into the product by linalg's
    fusion): matmul_unfuse.py copies them def before use (copied use first, the interpreter
    crashed)."""
    a, b, v = _args(np.float64, (2, 3, 64, 48), (2, 3, 64, 48), (2, 3, 48, 32))
    f = sprue.qjit(lambda a, b, v: snp.einsum("bhqk,bhkd->bhqd", snp.tanh(a * 2.0 + b) - 0.5, v))
    _close(f(a, b, v), np.einsum("bhqk,bhkd->bhqd", np.tanh(a * 2.0 + b) - 0.5, v), np.float64)


def _per_head_attention(xp, loop, q, k, v):
    """Attention written per batch element: `q[i] @ k[i].T` of slices, in a loop (fori_loop) or
    unrolled in Python."""
    def one(i):
        s = q[i] @ k[i].T / 8.0
        p = xp.exp(s - s.max(-1, keepdims=True))
        return (p / p.sum(-1, keepdims=True)) @ v[i]
    if loop is None:
        return xp.stack([one(i) for i in range(q.shape[0])])
    return loop(0, q.shape[0], lambda i, out: out.at[i].set(one(i)), xp.zeros_like(q))


@pytest.mark.parametrize("looped", [True, False], ids=["fori_loop", "unrolled"])
def test_products_of_slices_take_the_packed_kernel(looped, tmp_path):
    """A product of slices (`q[i] @ k[i].T`) reaches matmul.py as a generic over unit loops in
    another loop order (linalg's fusion folds the slices' reshapes into it): its unit loops are
    dropped, its loops put in order and its transposed operand read through a copy the packing
    folds (matmul_unfuse.py), so both products run the packed register kernel, as the batched
    form does; no scalar product loop nest is left."""
    q, k, v = _args(np.float64, (3, 64, 32), (3, 64, 32), (3, 64, 32))
    loop = lax.fori_loop if looped else None
    f = sprue.qjit(lambda q, k, v: _per_head_attention(snp, loop, q, k, v), keep_intermediate=str(tmp_path))
    _close(f(q, k, v), _per_head_attention(np, None, q, k, v), np.float64)
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    assert len(re.findall(r"vector\.fma .*: vector<\d+xf64>", text)) >= 2 * 4, text
    products = [line for line in text.splitlines() if "linalg.generic" in line and '"reduction"' in line
                and "x32xf64" in line and "x64xf64" in line]
    assert products == [], products


def test_a_product_of_slices_reading_an_iota_keeps_its_loop_numbers():
    """A product of slices whose transposed operand is scaled by an iota (the iota fused into the
    product reads loop numbers): its unit loops stay (matmul_unfuse.drop_unit_loops would renumber
    the loops but not the iota's linalg.index, which failed verification at bufferization)."""
    x = RNG.standard_normal((2, 6, 4))
    f = sprue.qjit(lambda x: x[0, :4, :] @ snp.swapaxes(x[0] * lax.broadcasted_iota(np.int64, (1, 4), 1), -1, -2))
    _close(f(x), x[0, :4, :] @ (x[0] * np.arange(4)).T, np.float64)


def test_a_batched_product_with_an_iota_fused_into_an_operand():
    """An operand computed with an iota (a take_along_axis grid, a mask) fused into a batched
    product: split_fused_operands computes it in a generic of its own over fewer loops, its
    linalg.index renumbered with them (it kept the product's loop numbers: pinv of a batch failed
    at bufferization)."""
    x = RNG.standard_normal((2, 3, 6, 4))
    f = sprue.qjit(lambda x: x[..., :4, :] @ snp.swapaxes(x * lax.broadcasted_iota(np.int64, (2, 3, 1, 4), 3), -1, -2))
    _close(f(x), x[..., :4, :] @ np.swapaxes(x * np.arange(4), -1, -2), np.float64)


def test_heads_product_packs_the_untransposed_keys(tmp_path):
    """`einsum('bhqd,bhkd->bhqk')`: the heads collapse into one batch dim and the packing reads k
    as it is stored; no transposed copy of the 4-D k is made first."""
    q, k = _args(np.float64, (2, 3, 64, 32), (2, 3, 64, 32))
    f = sprue.qjit(lambda q, k: snp.einsum("bhqd,bhkd->bhqk", q, k), keep_intermediate=str(tmp_path))
    _close(f(q, k), np.einsum("bhqd,bhkd->bhqk", q, k), np.float64)
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    assert not re.search(r"memref<2x3x32x64xf64>", text), text
    assert re.search(r"vector\.fma .*: vector<\d+xf64>", text)


def test_a_recurrent_step_copies_no_weights(tmp_path):
    """An LSTM-style scan (`x @ w + h @ u` per step): linalg's fusion leaves a product reading a
    transposed copy of u transposed; the product reads u itself (matmul_unfuse.name_product), with
    no copy of the weights, let alone two on every step."""
    xs, w, u, h0 = _args(np.float64, (16, 32, 32), (32, 256), (64, 256), (32, 64))
    w, u = w * 0.1, u * 0.1

    def run(xs, w, u, h0):
        def step(h, x):
            h = snp.tanh((x @ w + h @ u)[:, :64])
            return h, h
        return lax.scan(step, h0, xs)[1]

    f = sprue.qjit(run, keep_intermediate=str(tmp_path))
    ref, h = [], h0
    for x in xs:
        h = np.tanh((x @ w + h @ u)[:, :64])
        ref.append(h)
    _close(f(xs, w, u, h0), np.array(ref), np.float64)
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    assert "affine_map<(d0, d1) -> (d1, d0)>" not in text, text


def test_recurrent_products_with_run_time_rows_hold_8_rows_of_2_vectors(tmp_path):
    """A scan's `h @ u` with a run-time batch (the LSTM's): the masked unpacked kernel (u fixed
    across the loop is not packed) takes the same 8 x 2-vector tile on AVX-512, its last row tile
    masked; numpy's results at batches 8 does and does not divide."""
    def run(xs, u, h0):
        def step(h, x):
            h = snp.tanh(x + h @ u)
            return h, h
        return lax.scan(step, h0, xs)[1]
    f = sprue.qjit(run, abstracted_axes=({1: "b"}, None, {0: "b"}), keep_intermediate=str(tmp_path))
    for b in (32, 13, 3, 1):
        xs, u, h0 = _args(np.float64, (5, b, 256), (256, 256), (b, 256))
        u = u * 0.05
        ref, h = [], h0
        for x in xs:
            h = np.tanh(x + h @ u)
            ref.append(h)
        _close(f(xs, u, h0), np.array(ref), np.float64)
    assert f.compile_count == 1
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    tiles = set(re.findall(r"iter_args\(.*\) -> \(vector<(\d+)x(\d+)xf64>\)", text))
    if host_vector_bytes() == 64:
        assert tiles == {("8", "16")}, tiles
    else:
        assert tiles and all(int(c) * 8 <= 2 * host_vector_bytes() for _, c in tiles), tiles


@pytest.mark.parametrize("m", [32, 60])
def test_small_products_on_avx512_hold_8_rows_of_2_vectors(m, tmp_path):
    """The unpacked kernel (a small product, 64 rows or fewer) on AVX-512: 8 rows of 2 vectors of C
    in registers where 8 divides the rows, else the 4 x 4-vector tile; the host's tile elsewhere."""
    a, b = _args(np.float64, (m, 64), (64, 256))
    f = sprue.qjit(lambda a, b: a @ b, keep_intermediate=str(tmp_path))
    _close(f(a, b), a @ b, np.float64)
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    tiles = set(re.findall(r"iter_args\(.*\) -> \(vector<(\d+)x(\d+)xf64>\)", text))
    if host_vector_bytes() == 64:
        assert tiles == ({("8", "16")} if m % 8 == 0 else {("4", "32")}), tiles
    else:
        assert tiles and all(int(c) * 8 <= 2 * host_vector_bytes() for _, c in tiles), tiles


@pytest.mark.parametrize("cols", [8, 4])
def test_narrow_columns_take_a_narrower_vector_not_a_masked_wide_one(cols, tmp_path):
    """A float32 product over a run-time reduction with 8 (or 4) columns, k-means' `onehot.T @
    points`: its register tile is one 8- (4-) lane vector per row, so C stays in registers over k
    (a 16-lane vector masked to 8 loaded and stored C every k step: k-means 1.8x its static time)."""
    lanes = host_vector_bytes() // 4
    if lanes < 2 * cols:
        pytest.skip(f"{cols} float32 columns fill this CPU's vectors ({lanes} lanes): nothing narrower to take")
    a, b = _args(np.float32, (300, 16), (300, cols))
    f = sprue.qjit(lambda a, b: a.T @ b, abstracted_axes=({0: "n"}, {0: "n"}), keep_intermediate=str(tmp_path))
    _close(f(a, b), a.T @ b, np.float32)
    text = next(tmp_path.glob("*04_loops.mlir")).read_text()
    assert re.search(rf"iter_args\(.*\) -> \(vector<\d+x{cols}xf32>\)", text), text
    assert "vector.constant_mask" not in text


def _residual_heads(xp, x, a, wo, w2):
    """A transformer block's two residuals: the heads merged into the output projection (a product
    over (heads, dim) that accumulate_sums makes add into x), then a second product adding into
    that result through a function of it."""
    b, t, d = x.shape
    x = x + a.transpose(0, 2, 1, 3).reshape(b, t, d) @ wo
    return x + xp.tanh(x) @ w2


def test_a_residual_product_over_merged_heads_takes_the_packed_kernel(tmp_path):
    """The product adding into x reduces over (heads, dim), which collapse_contraction_dims makes
    one loop (matmul_unfuse.py); a product adding into an argument, or into another product's
    result over other loops, is no convolution tap for fusion_sums.py to merge (a transformer
    block's output projection ran as scalar loops, 2.2x its packed time)."""
    x, a, wo, w2 = _args(np.float64, (2, 48, 64), (2, 4, 48, 16), (64, 64), (64, 64))
    f = sprue.qjit(lambda *args: _residual_heads(snp, *args), keep_intermediate=str(tmp_path))
    _close(f(x, a, wo, w2), _residual_heads(np, x, a, wo, w2), np.float64)
    text = next(tmp_path.glob("*.03_bufferized.mlir")).read_text()
    assert '"reduction", "reduction"' not in text, text
    assert len(re.findall(r"vector\.fma .*: vector<\d+xf64>", text)) >= 2 * 4, text
