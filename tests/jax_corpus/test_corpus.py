"""Programs real JAX printed (tests/jax_corpus/make.py, run by hand in a venv of each JAX version),
loaded with sprue.load, called with the inputs JAX was given and compared with JAX's outputs; a few
also through `sprue compile`. A case sprue does not compile yet is listed in UNSUPPORTED with the
reason, and must fail with a JaxprUnsupportedError naming the primitive or form at its
file:line:col -- so the list shrinks as sprue learns, and a case that starts passing fails here.
"""
from __future__ import annotations

import json
import os
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest

import sprue
from sprue.errors import RuntimeCheckError, SprueTypeError
from sprue.io.jaxpr_lexer import JaxprError, JaxprUnsupportedError
from sprue.lowering.pipeline import LoweringError
from sprue.lowering.stablehlo_chlo import UnsupportedStableHLOOpError
from sprue.lowering.stablehlo_input import StableHLOInputError
from sprue.runtime import load as load_library
from sprue.tools.cli import main
from sprue.tools.compile import read_kernel

HERE = Path(__file__).parent
VERSIONS = sorted(p.name for p in HERE.glob("jax-*") if p.is_dir())

# case -> (what the error names, why): the forms and primitives sprue does not compile yet (none today;
# a case listed here must fail with JaxprUnsupportedError naming it, so the list shrinks as sprue learns)
UNSUPPORTED: dict[str, tuple[str, str]] = {}

# MLIR bytecode is stable across versions only as a StableHLO portable artifact (VHLO, what jax.export
# stores); `write_bytecode` of the stablehlo dialect ties it to one MLIR version
MLIRBC_UNREADABLE = {"jax-0.4.35": "JAX 0.4.35's MLIR writes stablehlo bytecode that the MLIR sprue uses"
                                   " (StableHLO 1.19) does not read; its jax.export artifacts are read"}

# float32 results of transcendental functions: JAX's (XLA's) and sprue's (libm's) approximations
# differ by a few ulp, more where the function is steep
TOLERANCE = {"default": (2e-5, 2e-6), "special": (2e-4, 1e-5)}


def _listed(version: str) -> dict:
    return json.loads((HERE / version / "cases.json").read_text())


def _cases():
    for version in VERSIONS:
        for entry in _listed(version)["cases"]:
            if "skipped" not in entry:
                yield pytest.param(version, entry["name"], id=f"{version}/{entry['name']}")


def _data(version: str, name: str):
    data = np.load(HERE / version / f"{name}.npz")
    ins = [data[f"in{i}"] for i in range(sum(k.startswith("in") for k in data.files))]
    outs = [data[f"out{i}"] for i in range(sum(k.startswith("out") for k in data.files))]
    return ins, outs


def _compare(name: str, got, want: list[np.ndarray]) -> None:
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(want)
    rtol, atol = TOLERANCE["special" if name.startswith(("special_", "nn_gelu")) else "default"]
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, f"result {k}: {g.dtype}{g.shape}, JAX {w.dtype}{w.shape}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{name}: result {k}")


def test_the_corpus_holds_every_version():
    assert {"jax-0.4.35", "jax-0.10.2"} <= set(VERSIONS), VERSIONS
    for version in VERSIONS:
        assert len(list((HERE / version).glob("*.jaxpr"))) >= 150, version


@pytest.mark.parametrize("version,name", list(_cases()))
def test_load_and_compare(version, name):
    path = HERE / version / f"{name}.jaxpr"
    ins, want = _data(version, name)
    constvars = {e["name"]: e.get("constvars") for e in _listed(version)["cases"]}[name]
    if constvars:
        # JAX's printer dropped the constants' values: they are the program's leading parameters (as
        # jax.core.eval_jaxpr takes them); make.py did not keep their values, so the program is checked
        # by its signature and by the call without them (the held-out cases below pass theirs and compare)
        f = sprue.load(path)
        assert len(f.constvars) == constvars and f.arg_names[:constvars] == f.constvars
        assert len(f.arg_names) == constvars + len(ins)
        with pytest.raises(SprueTypeError, match=rf"takes {constvars + len(ins)} arguments .*got {len(ins)}; the"
                           rf" first {constvars} \(.*\) are the jaxpr's constvars, whose values JAX's printer drops:"
                           r" pass the ClosedJaxpr's consts first .*jax.core.eval_jaxpr"):
            f(*ins)
        return
    if name in UNSUPPORTED:
        prim, why = UNSUPPORTED[name]
        print(f"{version}/{name}: expected to be refused: {why}")
        with pytest.raises(JaxprUnsupportedError) as e:
            sprue.load(path)
        assert re.match(rf"{re.escape(str(path))}:\d+:\d+: .*{re.escape(prim)}", str(e.value)), str(e.value)
        return
    _compare(name, sprue.load(path)(*ins), want)


@pytest.mark.parametrize("name", ["mlp", "layernorm", "scan_rnn", "grad_cond", "broadcast_add_row",
                                  "value_and_grad_pytree"])
def test_sprue_compile(name, tmp_path):
    """`sprue compile` of JAX's text writes a library that computes JAX's results."""
    version = VERSIONS[-1]
    path = HERE / version / f"{name}.jaxpr"
    assert main(["compile", str(path), "-o", str(tmp_path), "--name", "kernel"]) == 0
    assert (tmp_path / "kernel.h").is_file()
    signature = read_kernel(path, "kernel").signature
    ins, want = _data(version, name)
    _compare(name, load_library(tmp_path / "libkernel.so", "kernel", signature)(*ins), want)


# -- jax.export artifacts and StableHLO bytecode ------------------------------------------------------------
def _exports():
    for version in VERSIONS:
        for entry in json.loads((HERE / version / "cases.json").read_text()).get("exports", []):
            yield pytest.param(version, entry, id=f"{version}/{entry['name']}")


def _sized(data, k: int, what: str) -> list[np.ndarray]:
    return [data[f"s{k}_{what}{i}"] for i in range(sum(f.startswith(f"s{k}_{what}") for f in data.files))]


def test_the_exports_are_there():
    assert {v for v, *_ in (p.values for p in _exports())} >= {"jax-0.7.2", "jax-0.10.2"}


@pytest.mark.parametrize("version,entry", list(_exports()))
def test_jax_exported_runs_every_size_from_one_compilation(version, entry):
    folder = HERE / version / "exported"
    data = np.load(folder / f"{entry['name']}.npz")
    f = sprue.load(folder / f"{entry['name']}.jax_exported")
    for k in range(entry["n_sizes"]):
        _compare(entry["name"], f(*_sized(data, k, "in")), _sized(data, k, "out"))
    # StableHLO bytecode, as jax.jit(f).lower(...).compiler_ir("stablehlo") writes it, at the first sizes
    mlirbc = folder / f"{entry['name']}.mlirbc"
    if version in MLIRBC_UNREADABLE:
        print(f"{version}/{mlirbc.name}: expected to be refused: {MLIRBC_UNREADABLE[version]}")
        with pytest.raises(StableHLOInputError, match="is not a valid MLIR bytecode module"):
            sprue.load(mlirbc)
        return
    _compare(entry["name"], sprue.load(mlirbc)(*_sized(data, 0, "in")), _sized(data, 0, "out"))


def test_shape_assertions_fail_with_jaxs_messages():
    """A symbolic size below 1, or two arguments that disagree on a size they share: the call is
    refused with the message JAX's export wrote, its values filled in, before the library runs."""
    folder = HERE / VERSIONS[-1] / "exported"
    f = sprue.load(folder / "pair_batch.jax_exported")
    ok = f(np.ones((3, 3), np.float32), np.ones(3, np.float32))
    np.testing.assert_allclose(ok, np.tanh(np.ones((3, 3))) * np.ones(3)[:, None], rtol=1e-6)
    with pytest.raises(RuntimeCheckError, match=r"Found inconsistency between dimension size args\[1\].shape\[0\]"
                                                 r" \(= 4\) and the specification 'b' \(= 3\)"):
        f(np.ones((3, 3), np.float32), np.ones(4, np.float32))
    g = sprue.load(folder / "double_batch.jax_exported")
    with pytest.raises(RuntimeCheckError, match=r"Division had remainder 1 when computing the value of 'b'"):
        g(np.ones((5, 3), np.float32))
    np.testing.assert_allclose(g(np.ones((4, 3), np.float32)), np.concatenate([np.ones((4, 3)), 2 * np.ones((4, 3))]))


@pytest.mark.parametrize("suffix", [".mlirbc", ".jax_exported"])
def test_sprue_compile_of_bytecode_and_exports(suffix, tmp_path):
    folder = HERE / VERSIONS[-1] / "exported"
    path = folder / f"softmax_rows{suffix}"
    assert main(["compile", str(path), "-o", str(tmp_path), "--name", "kernel"]) == 0
    signature = read_kernel(path, "kernel").signature
    data = np.load(folder / "softmax_rows.npz")
    _compare("softmax_rows", load_library(tmp_path / "libkernel.so", "kernel", signature)(*_sized(data, 0, "in")),
             _sized(data, 0, "out"))


# -- every case in JAX's other forms (forms.zip, tests/jax_corpus/make.py's make_forms) -----------------
# StableHLO text (`.mlir`), StableHLO bytecode (`.mlirbc`; not JAX 0.4's, MLIRBC_UNREADABLE), a static
# jax.export artifact, and one with a symbolic leading size `b` (where JAX can export one), run at the
# case's sizes and at two others from the one compilation. `make test` runs a fixed sample per version:
# FAST_FORMS_SAMPLE cases spread over the corpus and FAST_FORMS, the ones that exercise a rewrite of the
# foreign StableHLO path; `make corpus` (SPRUE_FULL_CORPUS=1) runs all of them.
FULL = os.environ.get("SPRUE_FULL_CORPUS", "").strip() not in ("", "0")

# case -> (what the error names, why): symbolic-size exports sprue refuses (none today: run-time windows,
# dynamic_pad, select_and_scatter and windows of two operands with run-time sizes are lowered by
# lowering/stablehlo_windows.py). A case listed here must fail naming the op, so the list shrinks as sprue learns.
SYMBOLIC_GAPS: dict[str, tuple[str, str]] = {}
FAST_FORMS_SAMPLE = 10
FAST_FORMS = {
    "jnp_arcsin",          # a stablehlo.composite (JAX >= 0.7's export): its decomposition inlined
    "special_i1e", "special_erfinv", "special_digamma", "jnp_nextafter", "array_top_k",   # chlo ops
    "array_cumsum",        # a padded stablehlo.reduce_window; with run-time sizes, a linalg.generic
    "array_cumlogsumexp",  # ... whose body (logaddexp) is cloned in
    "array_ravel", "array_reduce_precision",   # dynamic_reshape, reduce_precision with run-time sizes
    "pool_max_pool_grad",  # stablehlo.select_and_scatter
    "array_take", "special_ndtri",   # constvars: the jaxpr takes them as parameters, these forms carry the values
    # jax.export's run-time windows (lowering/stablehlo_windows.py): a window of `b` rows, run-time padding
    # (dynamic_pad), select_and_scatter and a window of two operands with run-time sizes
    "array_cumprod", "pool_max_pool_dilated", "pool_sum_pool_base_dilated_grad", "pool_min_pool_strided_grad",
    "pool_max_pool_jvp",
}


def _forms():
    for version in VERSIONS:
        listed = [e for e in _listed(version).get("forms", []) if "skipped" not in e]
        sample = {e["name"] for e in listed[::max(1, len(listed) // FAST_FORMS_SAMPLE)]} | FAST_FORMS
        chosen = listed if FULL else [e for e in listed if e["name"] in sample]
        for entry in chosen:
            yield pytest.param(version, entry, id=f"{version}/{entry['name']}")


def test_every_case_comes_in_every_form():
    """At least 150 functions per version in each form; a symbolic export for all but the few whose
    shapes JAX itself cannot make symbolic (fixed reshapes, scalars)."""
    for version in VERSIONS:
        forms = _listed(version)["forms"]
        made = [e for e in forms if "skipped" not in e]
        assert len(made) >= 150, (version, len(made))
        assert sum("symbolic" in e for e in made) >= 150, version
        with zipfile.ZipFile(HERE / version / "forms.zip") as z:
            names = set(z.namelist())
        for e in made:
            assert {f"{e['name']}.mlir", f"{e['name']}.jax_exported"} <= names, (version, e["name"])


@pytest.mark.parametrize("version,entry", list(_forms()))
def test_forms(version, entry, tmp_path):
    name = entry["name"]
    ins, want = _data(version, name)
    with zipfile.ZipFile(HERE / version / "forms.zip") as z:
        z.extractall(tmp_path, [m for m in z.namelist() if m.startswith(f"{name}.")])
    kinds = [".mlir", ".jax_exported"] + ([".mlirbc"] if entry["mlirbc"] else [])
    for kind in kinds:
        _compare(name, sprue.load(tmp_path / f"{name}{kind}")(*ins), want)
    if "symbolic" in entry and name in SYMBOLIC_GAPS:
        op, why = SYMBOLIC_GAPS[name]
        print(f"{version}/{name}.b.jax_exported: expected to be refused: {why}")
        with pytest.raises((UnsupportedStableHLOOpError, LoweringError), match=re.escape(op)):
            sprue.load(tmp_path / f"{name}.b.jax_exported")
    elif "symbolic" in entry:
        f = sprue.load(tmp_path / f"{name}.b.jax_exported")
        _compare(name, f(*ins), want)
        data = np.load(tmp_path / f"{name}.b.npz")
        for k in range(2):
            _compare(name, f(*_sized(data, k, "in")), _sized(data, k, "out"))


# -- the held-out programs (make_heldout.py): written after the corpus, in the style users write, to
# measure what sprue reads of jaxprs it had not seen; they stay tested. `make test` runs a sample
# (every HELDOUT_SAMPLE-th case and HELDOUT_FAST, one per form that a rewrite reads), `make corpus` all.
HELDOUT = HERE / "heldout"
HELDOUT_SAMPLE = 16
BF16_TOLERANCE = 2.0 ** -7   # bfloat16's 8 significant bits: half an ulp at the bottom of a binade is 2**-8
F16_TOLERANCE = 2.0 ** -10   # float16's 11
HELDOUT_FAST = {
    "complex_rotation", "mandelbrot_escape",            # complex literals ((1+2j):c64[], 0j:c64[])
    "fft_irfft", "fft_fft2",                            # fft (fft_type 3 and 0 over two axes)
    "linalg_solve", "linalg_inv",                       # lu, triangular_solve, custom_linear_solve (a let in a param)
    "linalg_slogdet",                                   # platform_index and cond's branches_platforms
    "linalg_cholesky", "linalg_qr", "linalg_eigh_vecs", "linalg_svd_vals", "linalg_grad_solve",
    "sp_zeta", "sp_polygamma1", "sp_betainc",           # zeta, polygamma, regularized_incomplete_beta
    "random_gamma", "approx_max_k", "lax_reduce_two", "b_reduce_and_or_xor",
    "linalg_expm",                                      # a called jaxpr's constvars: parameters after the main's
    "c_x64_newton_system",                              # an LU's empty slices inside a loop
    "c_bf16_cast_roundtrip", "c_post_bf16_grad",        # bfloat16 carried in float32
    "c_bf16_matmul_f32_acc",                            # bfloat16 arguments: passed as their bits
    "c2_tridiagonal_solve", "c2_string_ops_bitcast",    # tridiagonal_solve, bitcast_convert_type between widths
    "polyval", "d_stats_entropy_like",                  # top-level constvars: the leading parameters
    "d_vmap_pmean_pmax", "d_debug_print_left_in",       # psum/pmax over vmap's axis; jax.debug.print
    "d_f16_matmul_softplus",                            # a float16 dot accumulated in float32
    "d_sampler_poisson_geometric",                      # a while loop carrying PRNG keys
    "d_scipy_linalg_lu_factor_solve",                   # lu_pivots_to_permutation
    "d_complex_matvec_solve",                           # complex LU (LAPACK's pivots) and triangular solves
    "d_at_divide_power_apply",                          # a scatter whose update_jaxpr computes (.at[].apply)
    "d_mvn_svd_method",                                 # a factor JAX's SVD leaves free: compared up to it
    "d_lax_rng_bit_generator",                          # XLA's generator (Philox, its CPU default), bit for bit
    "e_rank_ndcg",                                      # sibling sums, one producer read reversed
    "f_rng_bit_generator_threefry", "f_rbg_key_split_normal", "f_unsafe_rbg_bits",   # ... ThreeFry; rbg keys
    "d_stats_rankdata_mode", "d_special_spence_hyp1f1",  # called jaxprs' constvars, in a cond branch's call
    "f_complex_compare_sort", "f_reshape_minus_one_order_f", "f_approx_max_k_aggregate",
    "f_bitcast_f16_to_i8", "f_random_truncated_normal_bf16",   # bitcasts to and from bfloat16's bits
    "f_linalg_empty_batch", "f_x64_arange_int64_default",      # an empty gather; a sum of an iota alone
    "f_f16_reductions_cumsum", "f_ldexp_frexp_modf",            # a float16 prefix sum; nextafter of a scalar
    "f_special_values_math", "f_f16_layernorm", "f_lax_rng_uniform",
}
# case -> (why the text cannot be read, the refusal's text)
HELDOUT_REFUSED = {
    # XLA's stateful RngUniform: JAX's own program draws new numbers at every call
    "f_lax_rng_uniform": ("lax.rng_uniform has no reproducible results",
                          r"f_lax_rng_uniform.jaxpr:1:25: primitive 'rng_uniform' is not supported: it is XLA's"
                          r" stateful generator .*draw from a key instead"),
}
# case -> why its inputs hold subnormal numbers: XLA's CPU backend flushes them to zero (it runs with
# the FTZ/DAZ flags), sprue keeps IEEE arithmetic (as numpy), so the program is called with them
# flushed, as XLA read them
HELDOUT_SUBNORMAL_INPUTS = {"f_special_values_math": "jnp.sign(1e-40): 0 in JAX (flushed), 1 in IEEE arithmetic"}
# case -> (why its results are not JAX's, what they must satisfy): a result a factorization leaves
# free. jax.random.multivariate_normal(method="svd") draws mean + z (u sqrt(s))^T from standard normals
# z; its covariance (jnp.eye(3) + 0.3) has a repeated eigenvalue, so u is any rotation within that
# eigenspace (LAPACK's and sprue's differ) -- every factor gives each sample the same Mahalanobis
# distance ||z|| from the mean, which is compared
HELDOUT_FACTOR_FREE = {"d_mvn_svd_method": np.eye(3) + 0.3}


def _heldout():
    for folder in sorted(HELDOUT.glob("jax-*")):
        listed = json.loads((folder / "cases.json").read_text())["cases"]
        for k, entry in enumerate(listed):
            if FULL or k % HELDOUT_SAMPLE == 0 or entry["name"] in HELDOUT_FAST:
                yield pytest.param(folder, entry, id=f"{folder.name}/{entry['name']}")


def test_the_heldout_programs_are_there():
    cases = list(_heldout_all())
    assert len(cases) >= 1133 and {e["name"] for e in cases} >= HELDOUT_FAST | set(HELDOUT_REFUSED)


def _heldout_all():
    for folder in sorted(HELDOUT.glob("jax-*")):
        yield from json.loads((folder / "cases.json").read_text())["cases"]


def _bits_if_bf16(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint16) if x.dtype == np.dtype("V2") else x


@pytest.mark.parametrize("folder,entry", list(_heldout()))
def test_heldout(folder, entry):
    name = entry["name"]
    path = folder / f"{name}.jaxpr"
    if name in HELDOUT_REFUSED:
        why, refusal = HELDOUT_REFUSED[name]
        print(f"{folder.name}/{name}: expected to be refused: {why}")
        with pytest.raises(JaxprError, match=refusal):
            sprue.load(path)
        return
    data = np.load(folder / f"{name}.npz")
    # numpy saved JAX's bfloat16 arrays (ml_dtypes') as their two bytes: the bits a bf16 argument takes
    ins = [_bits_if_bf16(data[f"in{i}"]) for i in range(sum(k.startswith("in") for k in data.files))]
    want = [data[f"out{i}"] for i in range(sum(k.startswith("out") for k in data.files))]
    # a jaxpr's constvars (their values not printed) lead the arguments, as jax.core.eval_jaxpr takes them
    consts = [data[f"const{i}"] for i in range(entry.get("constvars", 0))]
    if name in HELDOUT_SUBNORMAL_INPUTS:
        print(f"{folder.name}/{name}: subnormal inputs flushed to zero: {HELDOUT_SUBNORMAL_INPUTS[name]}")
        flushed = [_flushed(x) for x in ins]
        assert any(not np.array_equal(a, b, equal_nan=True) for a, b in zip(ins, flushed))
        ins = flushed
    f = sprue.load(path)
    assert len(f.constvars) == len(consts)
    got = f(*consts, *ins)
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(want)
    if name in HELDOUT_FACTOR_FREE:
        (g,), (w,), mean, cov = got, want, ins[1], HELDOUT_FACTOR_FREE[name]
        assert g.dtype == w.dtype and g.shape == w.shape and not np.allclose(g, w)
        def distance(x): return np.einsum("ij,jk,ik->i", x - mean, np.linalg.inv(cov), x - mean)
        np.testing.assert_allclose(distance(g), distance(w), rtol=2e-4)
        return
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, f"result {k}: {g.dtype}{g.shape}, JAX {w.dtype}{w.shape}"
        # float32 results through factorizations, special functions' series and fractions: a few ulp of
        # each step apart from XLA's (LAPACK's) order of operations; a program computing in bfloat16 or
        # a float16 result: to its precision (sprue rounds after every equation, XLA's CPU may keep
        # float32 inside a fusion)
        tol = _tolerance(path, w)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol / 10, err_msg=f"{name}: result {k}")


def _flushed(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind != "f":
        return x
    subnormal = (x != 0) & (np.abs(x) < np.finfo(x.dtype).tiny)
    return np.where(subnormal, np.zeros_like(x) * np.sign(x), x).astype(x.dtype)


def _tolerance(path, want: np.ndarray) -> float:
    text = path.read_text()
    return BF16_TOLERANCE if "bf16[" in text else F16_TOLERANCE if want.dtype == np.float16 or "f16[" in text else 2e-4


@pytest.mark.parametrize("name", ["polyval", "d_stats_entropy_like", "d_eqx_mlp_call", "d_vmap_pmean_pmax",
                                  "d_scipy_linalg_lu_factor_solve", "c_bf16_matmul_f32_acc", "e_rank_ndcg",
                                  "d_special_spence_hyp1f1", "f_rbg_key_split_normal"])
def test_heldout_sprue_compile(name, tmp_path):
    """`sprue compile` of held-out programs (constvars first in the C signature, as sprue.load takes them;
    bfloat16 arguments as their bits)."""
    folder = HELDOUT / "jax-0.10.2"
    path = folder / f"{name}.jaxpr"
    entry = {e["name"]: e for e in _heldout_all()}[name]
    assert main(["compile", str(path), "-o", str(tmp_path), "--name", "kernel"]) == 0
    data = np.load(folder / f"{name}.npz")
    consts = [data[f"const{i}"] for i in range(entry.get("constvars", 0))]
    ins = [_bits_if_bf16(data[f"in{i}"]) for i in range(sum(k.startswith("in") for k in data.files))]
    want = [data[f"out{i}"] for i in range(sum(k.startswith("out") for k in data.files))]
    got = load_library(tmp_path / "libkernel.so", "kernel", read_kernel(path, "kernel").signature)(*consts, *ins)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        tol = _tolerance(path, w)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol / 10, err_msg=f"{name}: result {k}")
