"""Vectorized transcendentals against numpy, in units in the last place.

Every elementwise math function, f32 and f64, compiled through sprue.qjit on arrays long enough
that the loop vectorizer's vector body (and so glibc's libmvec variants, backend.use_vector_math)
does the work, with the special values placed among ordinary ones so they pass through the
vector lanes too. Bound: 4 ulp from numpy (glibc's scalar libm) on special values (0, -0, tiny,
denormals, huge, +-inf, nan, the edges of overflow and underflow) and on random values over each
function's whole range; results that are 0, inf or nan must be exactly numpy's (sign included).
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import sprue
import sprue.numpy as snp
from sprue import lax
from sprue.lowering import backend
from tests.helpers.ulp import ulp_distance

MAX_ULP = 4
# float32 tanh is Eigen's rational approximation, XLA's own (approximations.py): 5 ulp at worst
ULP_BOUNDS = {("tanh", "float32"): 5}


def test_ulp_distance_counts_floats_between():
    one = np.array([1.0, 1.0, 0.0, -0.0, np.nan, np.nan, np.inf, -1e-320], np.float64)
    other = np.array([np.nextafter(1.0, 2.0), np.nextafter(np.nextafter(1.0, 0.0), 0.0), -0.0,
                      np.nextafter(0.0, -1.0), np.nan, 1.0, np.finfo(np.float64).max, 1e-320], np.float64)
    assert ulp_distance(one, other).tolist() == [1, 2, 0, 1, 0, np.inf, 1, 2 * 2024]
    f = np.array([1.0, -np.inf], np.float32)
    g = np.array([np.nextafter(np.float32(1), np.float32(0)), -np.finfo(np.float32).max], np.float32)
    assert ulp_distance(f, g).tolist() == [1, 1]


def specials(dt) -> np.ndarray:
    fi = np.finfo(dt)
    tiny, big = fi.smallest_normal, fi.max
    denormal = fi.smallest_subnormal
    base = [0.0, 1.0, 2.0, 0.5, 1e-8, 1e-30, tiny, denormal, denormal * 3, tiny / 2, 1e-5, 0.1,
            np.pi / 4, np.pi / 2, np.pi, 1e3, 1e6, 1e15, 1e30, big, big / 2, np.inf, np.nan,
            np.log(big), np.log(big) * 1.001, np.log(tiny), np.log(denormal), np.log(denormal) * 1.01,
            -np.log(tiny), 19.0, 20.0, 22.0, 9.0, 0.625, 0.55, 0.9999, 1.0001]
    v = np.array([b for b in base if abs(b) <= big or not np.isfinite(b)], dtype=np.float64)
    v = np.concatenate([v, -v]).astype(dt)
    return v[np.isfinite(v) | ~np.isfinite(v.astype(np.float64))]


def wide(dt, lo_exp: float, hi_exp: float, n: int, rng, signed: bool = True) -> np.ndarray:
    """Magnitudes 10^uniform(lo_exp, hi_exp), random signs: every binade of the range."""
    m = 10.0 ** rng.uniform(lo_exp, hi_exp, n)
    if signed:
        m *= rng.choice([-1.0, 1.0], n)
    return m.astype(dt)


def _max_exp(dt) -> float:
    return float(np.log10(np.finfo(dt).max)) - 0.01


def _min_exp(dt) -> float:
    return float(np.log10(np.finfo(dt).smallest_subnormal)) + 0.01


def inputs(name: str, dt) -> np.ndarray:
    rng = np.random.default_rng(sum(map(ord, name)) + np.dtype(dt).itemsize)
    n = 20000
    lo, hi = _min_exp(dt), _max_exp(dt)
    emax = float(np.log(np.finfo(dt).max))
    emin = float(np.log(np.finfo(dt).smallest_subnormal))
    by_name = {
        "exp": [rng.uniform(emin - 5, emax + 5, n), rng.uniform(-5, 5, n)],
        "expm1": [rng.uniform(emin - 5, emax + 5, n), wide(dt, lo, 0.5, n, rng)],
        "logistic": [rng.uniform(emin - 5, -emin + 5, n), wide(dt, lo, 0.5, n, rng)],
        "sinh": [rng.uniform(-emax - 5, emax + 5, n), wide(dt, lo, 0.5, n, rng)],
        "cosh": [rng.uniform(-emax - 5, emax + 5, n), wide(dt, lo, 0.5, n, rng)],
        "tanh": [rng.uniform(-25, 25, n), wide(dt, lo, hi, n, rng)],
        "sin": [rng.uniform(-10, 10, n), wide(dt, lo, 9, n, rng)],
        "cos": [rng.uniform(-10, 10, n), wide(dt, lo, 9, n, rng)],
        "tan": [rng.uniform(-10, 10, n), wide(dt, lo, 9, n, rng)],
        "arcsin": [rng.uniform(-1.01, 1.01, n), wide(dt, lo, 0, n, rng)],
        "arccos": [rng.uniform(-1.01, 1.01, n), wide(dt, lo, 0, n, rng)],
        "arctanh": [rng.uniform(-1.01, 1.01, n), wide(dt, lo, 0, n, rng)],
        "arccosh": [rng.uniform(0.9, 10, n), wide(dt, 0, hi, n, rng, signed=False)],
    }
    parts = by_name.get(name, [rng.uniform(-10, 10, n), wide(dt, lo, hi, n, rng)])
    return np.concatenate([specials(dt)] + [np.asarray(p).astype(dt) for p in parts])


def _logistic_np(x):
    # numpy has none: 1/(1 + e^-x) in x87 long double (64-bit significand, exponent range to
    # 1e4932: e^-x does not overflow for any float64 x), rounded once to x's dtype.
    if np.finfo(np.longdouble).nmant < 63:
        pytest.skip("the logistic reference needs x87 long double (64-bit significand); not here")
    return (1 / (1 + np.exp(-x.astype(np.longdouble)))).astype(x.dtype)


UNARY = {
    "tanh": (snp.tanh, np.tanh), "exp": (snp.exp, np.exp), "log": (snp.log, np.log),
    "sin": (snp.sin, np.sin), "cos": (snp.cos, np.cos), "tan": (snp.tan, np.tan),
    "log1p": (snp.log1p, np.log1p), "expm1": (snp.expm1, np.expm1), "log2": (snp.log2, np.log2),
    "log10": (snp.log10, np.log10), "exp2": (snp.exp2, np.exp2),
    "arctan": (snp.arctan, np.arctan), "arcsin": (snp.arcsin, np.arcsin), "arccos": (snp.arccos, np.arccos),
    "sinh": (snp.sinh, np.sinh), "cosh": (snp.cosh, np.cosh), "arcsinh": (snp.arcsinh, np.arcsinh),
    "arccosh": (snp.arccosh, np.arccosh), "arctanh": (snp.arctanh, np.arctanh),
    "cbrt": (snp.cbrt, np.cbrt), "logistic": (lax.logistic, _logistic_np),
}


def check_ulp(got: np.ndarray, want: np.ndarray, x: tuple[np.ndarray, ...], what: str,
              max_ulp: int = MAX_ULP) -> None:
    assert got.dtype == want.dtype, what
    d = ulp_distance(got, want)
    bad = d > max_ulp
    # results that are zero, infinite or nan are numpy's exactly, with their sign
    exact = (want == 0) | ~np.isfinite(want)
    bad |= exact & ~((got == want) & (np.signbit(got) == np.signbit(want)) | np.isnan(got) & np.isnan(want))
    if bad.any():
        i = np.flatnonzero(bad)[:8]
        rows = "\n".join(f"  x={[a[j] for a in x]!r} got={got[j]!r} numpy={want[j]!r} ulp={d[j]}" for j in i)
        pytest.fail(f"{what}: {bad.sum()} of {len(d)} results beyond {max_ulp} ulp (worst {d.max()}):\n{rows}")


@pytest.mark.parametrize("dt", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_within_4_ulp_of_numpy(name, dt):
    ours, theirs = UNARY[name]
    x = inputs(name, dt)
    got = np.asarray(sprue.qjit(ours)(x))
    with np.errstate(all="ignore"):
        want = theirs(x)
    bound = ULP_BOUNDS.get((name, np.dtype(dt).name), MAX_ULP)
    check_ulp(got, want, (x,), f"{name} {np.dtype(dt).name}", bound)
    # a short array takes the loop's scalar remainder (the scalar libm call): same bound
    head = np.ascontiguousarray(x[:3])
    check_ulp(np.asarray(sprue.qjit(ours)(head)), want[:3], (head,), f"{name} {np.dtype(dt).name}, 3 elements", bound)


def _pair_inputs(name: str, dt) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7 + np.dtype(dt).itemsize)
    s = specials(dt)
    a, b = np.meshgrid(s, s)   # every pair of special values
    n = 20000
    if name == "power":
        x = np.concatenate([a.ravel(), wide(dt, -5, 5, n, rng, signed=False), rng.uniform(-3, 3, n)])
        y = np.concatenate([b.ravel(), rng.uniform(-60, 60, n), np.round(rng.uniform(-20, 20, n))])
    else:
        x = np.concatenate([a.ravel(), wide(dt, _min_exp(dt), _max_exp(dt), 2 * n, rng)])
        y = np.concatenate([b.ravel(), wide(dt, _min_exp(dt), _max_exp(dt), 2 * n, rng)])
    return x.astype(dt), y.astype(dt)


@pytest.mark.parametrize("dt", [np.float64, np.float32])
@pytest.mark.parametrize("name", ["power", "arctan2"])
def test_binary_within_4_ulp_of_numpy(name, dt):
    ours, theirs = {"power": (snp.power, np.power), "arctan2": (snp.arctan2, np.arctan2)}[name]
    x, y = _pair_inputs(name, dt)
    got = np.asarray(sprue.qjit(ours)(x, y))
    with np.errstate(all="ignore"):
        want = theirs(x, y)
    check_ulp(got, want, (x, y), f"{name} {np.dtype(dt).name}")


@pytest.mark.skipif(not backend._libmvec_available(), reason="glibc's libmvec is not available here")
@pytest.mark.parametrize("name", ["tanh", "atan2", "sinh", "cosh", "asin", "acos", "atan", "exp"])
def test_every_libmvec_intrinsic_gets_its_vector_variant(name):
    """The vectorizer's `llvm.<f>.v4f64` becomes libmvec's AVX2 variant, if this libmvec has it
    (glibc 2.35 and later have them all); a name libmvec lacks stays an intrinsic."""
    args = 2 if name == "atan2" else 1
    vt = "<4 x double>"
    params = ", ".join(f"{vt} %a{i}" for i in range(args))
    ir = (f"declare {vt} @llvm.{name}.v4f64({', '.join([vt] * args)})\n"
          f"define {vt} @f({params}) {{\n  %y = call {vt} @llvm.{name}.v4f64({params})\n  ret {vt} %y\n}}\n")
    vname = f"_ZGVdN4{'v' * args}_{name}"
    out = backend.use_vector_math(ir, "generic", "+avx2")
    if backend._libmvec_has(vname):
        assert f"call {vt} @{vname}(" in out and f"declare {vt} @{vname}(" in out
    else:
        print(f"this libmvec has no {vname}: the intrinsic stays")
        assert out == ir


@pytest.mark.skipif(not backend._libmvec_has("_ZGVdN4vv_pow"), reason="this libmvec has no AVX2 pow")
def test_a_vector_wider_than_the_cpu_is_split_into_libmvec_calls():
    """<8 x double> (a float32 loop computing in float64) on AVX2: two 4-wide calls, the halves
    taken and joined by shufflevector; constants as operands are sliced too. The result verifies
    and computes pow lane by lane."""
    vt = "<8 x double>"
    ir = (f"declare {vt} @llvm.pow.v8f64({vt}, {vt})\n"
          f"define void @f(ptr %p, ptr %q) {{\n  %1 = load {vt}, ptr %p\n"
          f"  %2 = tail call fast {vt} @llvm.pow.v8f64({vt} %1, {vt} splat (double 5.000000e-01)) #0\n"
          f"  store {vt} %2, ptr %q\n  ret void\n}}\nattributes #0 = {{ nounwind }}\n")
    out = backend.use_vector_math(ir, "generic", "+avx2")
    assert out.count("call fast <4 x double> @_ZGVdN4vv_pow(") == 2 and "@llvm.pow.v8f64(<8" not in out.split("define")[1]
    mod = backend.llvm.parse_assembly(out)
    mod.verify()
    # sse2 only: four 2-wide calls
    assert backend.use_vector_math(ir, "generic").count("call fast <2 x double> @_ZGVbN2vv_pow(") == 4


def test_vectorized_kernels_call_libmvec_not_scalar_libm(tmp_path):
    """tan and atan2 on a long f64 array: the optimized IR calls the vector variants (the
    scalar intrinsic remains only in the loop's remainder). (tanh is arithmetic around exp:
    test_tanh_is_arithmetic_and_exp.)"""
    if not (backend._libmvec_has("_ZGVdN4v_tan") and "avx2" in backend.llvm.get_host_cpu_features()):
        pytest.skip("needs glibc >= 2.35's libmvec and an AVX2 host")
    fn = sprue.qjit(lambda x: (snp.tan(x), snp.arctan2(x, 2.0)), keep_intermediate=tmp_path)
    x = np.linspace(-3, 3, 1000)
    t, a = fn(x)
    np.testing.assert_allclose(t, np.tan(x), rtol=1e-14)
    np.testing.assert_allclose(a, np.arctan2(x, 2.0), rtol=1e-15)
    (opt,) = tmp_path.glob("*.opt.ll")
    text = opt.read_text()
    assert re.search(r"@_ZGV[de]N[48]v_tan\(", text) and re.search(r"@_ZGV[de]N[48]vv_atan2\(", text)
    assert not re.search(r"@llvm\.tan\.v\d+f64\(", text.split("declare")[0])


def test_float64_math_in_a_float32_loop_is_vectorized(tmp_path):
    """float32 data computed in float64 (`sin(x.astype(float64)).astype(float32)`) loads 8 floats
    a step: its <8 x double> sin is split into AVX2 calls instead of being scalarized."""
    if not (backend._libmvec_has("_ZGVdN4v_sin") and "avx2" in backend.llvm.get_host_cpu_features()):
        pytest.skip("needs libmvec and an AVX2 host")
    x = np.linspace(-4, 4, 1000, dtype=np.float32)
    got = sprue.qjit(lambda x: snp.sin(x.astype(np.float64)).astype(np.float32), keep_intermediate=tmp_path)(x)
    assert ulp_distance(np.asarray(got), np.sin(x.astype(np.float64)).astype(np.float32)).max() <= 1
    (opt,) = tmp_path.glob("*.opt.ll")
    # (AVX-512 has the 8-wide variant itself)
    assert re.search(r"call <4 x double> @_ZGVdN4v_sin\(|call <8 x double> @_ZGVeN8v_sin\(", opt.read_text())


def test_log_is_our_own_code_not_a_libm_call(tmp_path):
    """log in both dtypes is sprue's own code (vector_log.py: Cephes' and fdlibm's arithmetic,
    or the AVX-512 kernels): no libm or libmvec call is left."""
    x = np.linspace(0.5, 4, 1000)
    f = sprue.qjit(lambda a, b: (snp.log(a), snp.log(b)), keep_intermediate=tmp_path)
    got64, got32 = f(x, x.astype(np.float32))
    assert ulp_distance(np.asarray(got64), np.log(x)).max() <= 1
    assert ulp_distance(np.asarray(got32), np.log(x.astype(np.float32))).max() <= 4
    (opt,) = tmp_path.glob("*.opt.ll")
    assert not re.search(r"call .*@(_ZGV\w+_log\w*|logf?)\(", opt.read_text())


def test_libm_declarations_name_the_variants_the_cpu_can_run():
    """declare_vector_variants: expm1's declaration names libmvec's variants for the target's ISAs
    (what -fveclib=libmvec does), declares them and keeps them for the vectorizer; a function it
    does not know (tgamma) and a CPU without libmvec's ISAs leave the IR as it was."""
    ir = "declare double @expm1(double)\ndeclare float @log1pf(float)\ndeclare double @tgamma(double)\n"
    if not (backend._libmvec_has("_ZGVdN4v_expm1") and backend._libmvec_has("_ZGVdN8v_log1pf")):
        pytest.skip("this libmvec has no AVX2 expm1/log1pf (glibc < 2.35)")
    out = backend.declare_vector_variants(ir, "generic", "+avx2")
    assert ('declare double @expm1(double) nounwind willreturn memory(none) "vector-function-abi-variant"='
            '"_ZGVbN2v_expm1(_ZGVbN2v_expm1),_ZGVdN4v_expm1(_ZGVdN4v_expm1)"') in out
    assert '"_ZGVbN4v_log1pf(_ZGVbN4v_log1pf),_ZGVdN8v_log1pf(_ZGVdN8v_log1pf)"' in out
    assert "declare <4 x double> @_ZGVdN4v_expm1(<4 x double>)" in out and "declare double @tgamma(double)\n" in out
    assert "@llvm.compiler.used = appending global [4 x ptr]" in out
    backend.llvm.parse_assembly(out).verify()
    assert "_ZGVd" not in backend.declare_vector_variants(ir, "generic")   # sse2 only
    assert backend.declare_vector_variants("declare double @tgamma(double)\n", "generic", "+avx2") == \
        "declare double @tgamma(double)\n"


def test_expm1_and_log1p_are_libm_calls_vectorized_with_libmvec(tmp_path):
    """expm1/log1p (f32, f64) reach the C library as calls, not as convert-math-to-llvm's
    exp(x) - 1 and log(1 + x), and the vectorizer widens them to libmvec's variants; tiny x keeps
    every digit."""
    fn = sprue.qjit(lambda x, y: (snp.expm1(x), snp.log1p(x), snp.expm1(y), snp.log1p(y)), keep_intermediate=tmp_path)
    x = np.concatenate([np.geomspace(1e-300, 1, 500), -np.geomspace(1e-300, 0.5, 500)])
    y = x.astype(np.float32)
    for got, want in zip(fn(x, y), [np.expm1(x), np.log1p(x), np.expm1(y), np.log1p(y)]):
        assert ulp_distance(np.asarray(got), want).max() <= 2
    stage = next(tmp_path.glob("*_llvm.mlir")).read_text()
    for name in ("expm1", "log1p", "expm1f", "log1pf"):
        assert f"llvm.call @{name}(" in stage, name
    text = next(tmp_path.glob("*.opt.ll")).read_text()
    if backend._libmvec_has("_ZGVdN4v_expm1") and "avx2" in backend.llvm.get_host_cpu_features():
        for name, single in (("expm1", False), ("log1p", False), ("expm1f", True), ("log1pf", True)):
            # the widest variant the host's ISA has: AVX2's, or AVX-512's twice as wide
            call = (r"call <(4|8) x double> @_ZGV[de]N\1v_" if not single else r"call <(8|16) x float> @_ZGV[de]N\1v_") + name + r"\("
            assert re.search(call, text), name
    else:
        print("no AVX2 libmvec expm1 here: only the scalar calls are checked")


@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_tanh_is_arithmetic(dt, tmp_path):
    """approximations.expand_tanh: no call is left (libmvec's tanh costs ~5 ns an f64 element,
    glibc before 2.35 has none; float64 builds expm1 itself, float32 is a rational function), and
    the results stay within the ulp bound (test_unary_within_4_ulp_of_numpy covers the ranges and
    special values, test_float32_tanh_dense every 61st float32 where it is not 1)."""
    x = np.linspace(-5, 5, 4001).astype(dt)
    f = sprue.qjit(snp.tanh, keep_intermediate=str(tmp_path))
    check_ulp(np.asarray(f(x)), np.tanh(x), (x,), f"tanh {np.dtype(dt).name}", ULP_BOUNDS.get(("tanh", np.dtype(dt).name), MAX_ULP))
    text = next(tmp_path.glob("*.opt.ll")).read_text()
    assert "tanh" not in text.replace("@_sprue", "")
    assert not re.search(r"@(llvm\.exp\.|_ZGV\w+_exp|expf?\(|expm1)", text)


def test_float32_tanh_dense():
    """Every 61st float32 from 0 to 9.5 (tanh is 1 beyond; odd, so the negatives mirror these):
    18 million arguments, within the 5-ulp bound of numpy's (~1 ulp) tanh."""
    end = int(np.float32(9.5).view(np.int32))
    x = np.arange(0, end, 61, dtype=np.int32).view(np.float32)
    f = sprue.qjit(snp.tanh)
    for part in np.array_split(x, 4):
        check_ulp(np.asarray(f(part)), np.tanh(part), (part,), "tanh float32, dense", ULP_BOUNDS[("tanh", "float32")])


@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_exp_is_arithmetic(dt, tmp_path):
    """approximations.expand_exp: exp calls neither libm nor libmvec, whose vector exp sends every
    lane that underflows or overflows (a masked softmax's exp(-1e30 - max), exp(-inf)) through
    scalar exp and errno: causal attention ran 2.7x slower than JAX. Underflow, overflow and nan
    lanes among ordinary ones, against numpy within the ulp bound (the ranges: test_unary_...)."""
    x = np.concatenate([np.linspace(-30, 30, 4001), [-1e30, -np.inf, np.inf, np.nan, -800, 800, -0.0]]).astype(dt)
    f = sprue.qjit(snp.exp, keep_intermediate=str(tmp_path))
    with np.errstate(over="ignore", under="ignore"):
        want = np.exp(x)
    check_ulp(np.asarray(f(x)), want, (x,), f"exp {np.dtype(dt).name}")
    text = next(tmp_path.glob("*.opt.ll")).read_text()
    assert not re.search(r"@(llvm\.exp\.|_ZGV\w+_expf?\b|expf?\()", text), text


@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_exp_below_range_is_exact_zero(dt):
    """approximations._EXP_RANGE: x below where e^x rounds to +0 is clamped to the x whose
    powers of two are both +0.0 (no underflowing multiply, whose microcode assist made a causal
    softmax's exp 3x slower). Dense values from the subnormal results down past the clamp and
    its neighbours, against numpy: subnormals within the ulp bound, zeros exactly +0."""
    bottom = {np.float64: -2046 * np.log(2.0), np.float32: -254 * np.log(2.0)}[dt]
    low = {np.float64: -760.0, np.float32: -110.0}[dt]
    edge = np.array([bottom], dt)
    near = [np.nextafter(edge, dt(-np.inf)), edge, np.nextafter(edge, dt(0))]
    x = np.concatenate([np.linspace(low, -80.0, 3001), np.linspace(bottom - 5, bottom + 5, 1001), *near,
                        [-1e30, -np.inf, -np.finfo(dt).max]]).astype(dt)
    with np.errstate(under="ignore"):
        want = np.exp(x)
    check_ulp(np.asarray(sprue.qjit(snp.exp)(x)), want, (x,), f"exp {np.dtype(dt).name} below the range")
