"""float64 log (vector_log.py): the scalar fdlibm function and the AVX-512 kernel, each against
the C library's log (glibc's, correctly rounded in all but rare cases) in units in the last place,
on every kind of input and on lengths that leave a scalar remainder after the vector loop."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

import sprue
import sprue.numpy as snp
from sprue.api.driver import compile_closed_jaxpr
from sprue.lowering import backend, vector_log
from tests.helpers.ulp import ulp_distance

HAS_AVX512 = bool(backend.llvm.get_host_cpu_features().get("avx512f"))


def _inputs() -> np.ndarray:
    rng = np.random.default_rng(7)
    parts = [
        rng.uniform(1e-3, 1e3, 4000),
        rng.uniform(0.97, 1.03, 2000),                   # near 1: the result is r itself
        1.0 + rng.uniform(-1e-9, 1e-9, 500),
        np.geomspace(5e-324, 1.7e308, 4000),             # every binade, subnormals included
        rng.uniform(1.0, 2.0, 1000) * 2.0 ** rng.integers(-1074, 1023, 1000),
        np.array([1.0 - 2.0 ** -53, 1.0, 1.0 + 2.0 ** -52, 2.0, 0.5, 0.75, 1.5, math.e, 2.2250738585072014e-308,
                  np.nextafter(2.2250738585072014e-308, 0.0), 5e-324, 1.7976931348623157e308]),
        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, -5e-324, -np.nan]),
    ]
    x = np.concatenate(parts)
    return rng.permutation(x)   # specials among ordinary values in the vector lanes


def _compiled(tmp_path, features: str, n: int):
    closed = sprue.make_jaxpr(lambda x: snp.log(x))(np.zeros(n))
    return compile_closed_jaxpr(closed, 0, ["x"], tmp_path / str(n), "k", keep_intermediate=True,
                                features=features)[2]


def _check(f, x: np.ndarray) -> None:
    want = np.array([math.log(v) if v > 0 else (-math.inf if v == 0 else math.nan) if not math.isnan(v) else math.nan
                     for v in x.tolist()])
    want = np.where(np.isposinf(x), np.inf, want)
    got = np.asarray(f(x)[0])
    d = ulp_distance(got, want)
    worst = np.argsort(d)[-3:]
    assert d.max() <= 1, [(x[i], got[i], want[i], d[i]) for i in worst]


@pytest.mark.parametrize("features", ["", "-avx512f"], ids=["host", "no-avx512"])
def test_log_f64_within_1_ulp_of_libm(tmp_path, features):
    """Both forms within 1 ulp of libm, also on lengths with a scalar remainder (or nothing but)."""
    if features == "" and not HAS_AVX512:
        print("this CPU has no AVX-512: the host case checks the scalar form again")
    x = _inputs()
    _check(_compiled(tmp_path, features, x.size), x)
    for n in (1, 7, 13, 41):
        _check(_compiled(tmp_path, features, n), x[-n:].copy())


def test_the_avx512_kernel_is_what_the_vector_loop_runs(tmp_path):
    """With AVX-512 the vector body is the table kernel, inlined (no call of a variant is left);
    without it the loop vectorizes fdlibm's arithmetic and no x86 intrinsic appears."""
    _compiled(tmp_path / "scalar", "-avx512f", 1000)
    scalar = next((tmp_path / "scalar").glob("*/*.opt.ll")).read_text()
    assert "vpermi2var" not in scalar and "getmant" not in scalar
    assert not re.search(r"call .*@(sprue_log_v\d+f64|log|_ZGV\w+_log)\(", scalar)
    if not HAS_AVX512:
        pytest.skip("this CPU has no AVX-512F: the kernel cannot run here")
    _compiled(tmp_path / "avx512", "", 1000)
    text = next((tmp_path / "avx512").glob("*/*.opt.ll")).read_text()
    assert "@llvm.x86.avx512.vpermi2var.pd.512" in text and "@llvm.x86.avx512.mask.getmant.pd.512" in text
    assert not re.search(r"call .*@(sprue_log_v\d+f64|log|_ZGV\w+_log)\(", text)
    assert not re.search(r"^define .*@sprue_log_v\d+f64\(", text, re.M)   # dropped once inlined


def test_define_log_f64_replaces_the_declaration_only_where_called():
    """The declaration becomes the definitions (both forms parse and verify); a module without
    it is returned as it was."""
    ir = ("declare double @sprue_log_f64(double)\n"
          "define double @f(double %x) {\n  %y = call double @sprue_log_f64(double %x)\n  ret double %y\n}\n")
    scalar = vector_log.define_log_f64(ir, avx512=False)
    assert "alwaysinline" in scalar and "vector-function-abi-variant" not in scalar and "x86" not in scalar
    backend.llvm.parse_assembly(scalar).verify()
    wide = vector_log.define_log_f64(ir, avx512=True)
    assert ('"vector-function-abi-variant"="_ZGV_LLVM_N2v_sprue_log_f64(sprue_log_v2f64),'
            '_ZGV_LLVM_N4v_sprue_log_f64(sprue_log_v4f64),_ZGV_LLVM_N8v_sprue_log_f64(sprue_log_v8f64),'
            '_ZGV_LLVM_N16v_sprue_log_f64(sprue_log_v16f64)"') in wide
    assert vector_log.has_vector_log(wide) and not vector_log.has_vector_log(scalar)
    backend.llvm.parse_assembly(wide).verify()
    plain = "define double @f(double %x) {\n  ret double %x\n}\n"
    assert vector_log.define_log_f64(plain, avx512=True) is plain


def test_the_kernel_table_is_minus_log_of_its_reciprocals():
    """Table entry j is -log c for c = 1/2 + j/32 (j >= 8) or 2c = 1 + j/16 (j < 8), head plus
    tail to ~2^-106: checked against math.log, independently of the Decimal arithmetic."""
    head, tail, ln2_tail = vector_log._tables()
    for j in range(16):
        c = 1.0 + j / 16 if j < 8 else 0.5 + j / 32
        assert head[j] == pytest.approx(-math.log(c), rel=2.0 ** -52, abs=0.0)
        assert abs(tail[j]) <= abs(head[j]) * 2.0 ** -52
    assert vector_log._LN2_HEAD + ln2_tail == math.log(2.0)
