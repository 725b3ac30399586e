"""log (vector_log.py): the scalar functions (fdlibm's, Cephes') and the AVX-512 kernels, each
against the C library's float64 log (glibc's, correctly rounded in all but rare cases; rounded to
float32 for float32) in units in the last place, on every kind of input and on lengths that leave
a scalar remainder after the vector loop."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

import sprue
import sprue.numpy as snp
from sprue.api.driver import compile_closed_jaxpr
from sprue.lowering import backend, vector_log
from sprue.lowering.targets import HOST_CPU
from sprue.lowering.vector_math import has_avx512
from tests.helpers.ulp import ulp_distance

HAS_AVX512 = has_avx512(HOST_CPU)
NO_CALL = re.compile(r"call .*@(sprue_log_v\d+f(64|32)|logf?|_ZGV\w+_logf?)\(")


def _inputs(dtype) -> np.ndarray:
    info = np.finfo(dtype)
    tiny, smallest, big = float(info.tiny), float(info.smallest_subnormal), float(info.max)
    rng = np.random.default_rng(7)
    parts = [
        rng.uniform(1e-3, 1e3, 4000),
        rng.uniform(0.97, 1.03, 2000),                   # near 1: the result is r itself
        1.0 + rng.uniform(-1e-6, 1e-6, 500),
        np.geomspace(smallest, big / 2, 4000),           # every binade, subnormals included
        np.array([1.0, 2.0, 0.5, 0.75, 1.5, math.e, tiny, smallest, big]),
        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, -smallest]),
    ]
    x = np.concatenate(parts).astype(dtype)
    x = np.concatenate([x, np.nextafter(np.array([1.0, 1.0], dtype), np.array([0.0, 2.0], dtype))])
    return rng.permutation(x)   # specials among ordinary values in the vector lanes


def _compiled(tmp_path, features: str, n: int, dtype=np.float64):
    closed = sprue.make_jaxpr(lambda x: snp.log(x))(np.zeros(n, dtype))
    return compile_closed_jaxpr(closed, 0, ["x"], tmp_path / f"{np.dtype(dtype).name}_{n}", "k",
                                keep_intermediate=True, features=features)[2]


def _reference(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        want = np.array([math.log(v) if v > 0 and v != math.inf else np.log(v) for v in x.astype(np.float64).tolist()])
    return want.astype(x.dtype)


def _check(f, x: np.ndarray) -> None:
    want, got = _reference(x), np.asarray(f(x)[0])
    d = ulp_distance(got, want)
    worst = np.argsort(d)[-3:]
    assert d.max() <= 1, [(x[i], got[i], want[i], d[i]) for i in worst]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("features", ["", "-avx512f"], ids=["host", "no-avx512"])
def test_log_within_1_ulp_of_libm(tmp_path, features, dtype):
    """Both forms within 1 ulp of libm, also on lengths with a scalar remainder (or nothing but)."""
    if features == "" and not HAS_AVX512:
        print("this CPU has no AVX-512: the host case checks the scalar form again")
    x = _inputs(dtype)
    _check(_compiled(tmp_path, features, x.size, dtype), x)
    for n in (1, 7, 13, 41):
        _check(_compiled(tmp_path, features, n, dtype), x[-n:].copy())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_avx512_kernel_is_what_the_vector_loop_runs(tmp_path, dtype):
    """With AVX-512 the vector body is the table kernel, inlined (no call of a variant is left);
    without it the loop vectorizes the arithmetic form and no x86 intrinsic appears."""
    _compiled(tmp_path / "scalar", "-avx512f", 1000, dtype)
    scalar = next((tmp_path / "scalar").glob("*/*.opt.ll")).read_text()
    assert "@llvm.x86." not in scalar and not NO_CALL.search(scalar)
    if not HAS_AVX512:
        pytest.skip("this CPU has no AVX-512F: the kernel cannot run here")
    _compiled(tmp_path / "avx512", "", 1000, dtype)
    text = next((tmp_path / "avx512").glob("*/*.opt.ll")).read_text()
    table = "vpermi2var.pd" if dtype == np.float64 else "permvar.sf"
    assert f"@llvm.x86.avx512.{table}.512" in text and "@llvm.x86.avx512.mask.getmant." in text
    assert not NO_CALL.search(text)
    assert not re.search(r"^define .*@sprue_log_v\d+f(64|32)\(", text, re.M)   # dropped once inlined


def test_define_log_replaces_the_declarations_only_where_called():
    """Each declaration becomes its definitions (every form parses and verifies); a module
    without one is returned as it was."""
    ir = ("declare double @sprue_log_f64(double)\ndeclare float @sprue_log_f32(float)\n"
          "define double @f(double %x, float %y) {\n  %a = call double @sprue_log_f64(double %x)\n"
          "  %b = call float @sprue_log_f32(float %y)\n  ret double %a\n}\n")
    scalar = vector_log.define_log(ir, avx512=False)
    assert scalar.count("alwaysinline") == 2 and "vector-function-abi-variant" not in scalar and "x86" not in scalar
    backend.llvm.parse_assembly(scalar).verify()
    wide = vector_log.define_log(ir, avx512=True)
    assert ('"vector-function-abi-variant"="_ZGV_LLVM_N2v_sprue_log_f64(sprue_log_v2f64),'
            '_ZGV_LLVM_N4v_sprue_log_f64(sprue_log_v4f64),_ZGV_LLVM_N8v_sprue_log_f64(sprue_log_v8f64),'
            '_ZGV_LLVM_N16v_sprue_log_f64(sprue_log_v16f64)"') in wide
    assert '_ZGV_LLVM_N32v_sprue_log_f32(sprue_log_v32f32)"' in wide
    assert vector_log.has_vector_log(wide) and not vector_log.has_vector_log(scalar)
    backend.llvm.parse_assembly(wide).verify()
    plain = "define double @f(double %x) {\n  ret double %x\n}\n"
    assert vector_log.define_log(plain, avx512=True) is plain


@pytest.mark.parametrize("kind", [vector_log._F64, vector_log._F32], ids=["f64", "f32"])
def test_the_kernel_table_is_minus_log_of_its_reciprocals(kind):
    """Table entry j is -log c for c = 1/2 + j/32 (j >= 8) or 2c = 1 + j/16 (j < 8), head plus
    tail; checked against math.log, independently of the Decimal arithmetic."""
    head, tail, ln2_tail = vector_log._tables(kind)
    eps = np.finfo(np.float64 if kind.scalar == "double" else np.float32).eps
    for j in range(16):
        c = 1.0 + j / 16 if j < 8 else 0.5 + j / 32
        assert abs(head[j] + math.log(c)) <= abs(math.log(c)) * eps
        assert abs(tail[j]) <= abs(head[j]) * eps
        assert kind.round(head[j]) == head[j] and kind.round(tail[j]) == tail[j]
    # (in float64 arithmetic: the float64 tail rounds the sum to ln2's double, the float32 one
    # is that tail's rounding, ~|tail| eps, away from it)
    assert abs(kind.ln2_head + ln2_tail - math.log(2.0)) <= abs(ln2_tail) * eps * (0 if kind.scalar == "double" else 1)
    # e ln2_head is exact for every exponent e the kind has (|e| < 2^11 or 2^8)
    bits = 53 if kind.scalar == "double" else 24
    mantissa = int(kind.ln2_head * 2 ** (bits + 1))
    assert mantissa * 2 ** -(bits + 1) == kind.ln2_head
    assert (mantissa & -mantissa).bit_length() - 1 >= (11 if bits == 53 else 8)


def test_a_module_that_only_declares_log_gets_no_definitions():
    """A split module (module_split.py) may carry the declaration without a call: nothing to define."""
    ir = "declare double @sprue_log_f64(double)\ndefine double @f(double %x) {\n  ret double %x\n}\n"
    assert vector_log.define_log(ir, avx512=True) == ir
