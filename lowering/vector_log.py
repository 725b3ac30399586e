"""log: a scalar function the loop vectorizer widens to an AVX-512 kernel of our own.

The pipeline turns every scalar float32/float64 `math.log` into a call of LOG_F32/LOG_F64
(approximations.expand_log, declared only); each LLVM module that calls one gets its definitions
here (define_log), once the target CPU is known:

- the scalar function, without a table or a call: fdlibm's e_log.c (Sun) for float64 (x = 2^k
  (1 + f) by integer ops on the bits, log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)), s = f / (2 + f),
  R of degree 7 in s^2, k ln 2 in two parts: < 1 ulp, one division), Cephes' logf (Moshier) for
  float32 (the same split, f - f^2/2 + f^3 P(f) with P of degree 8: ~1 ulp). Without AVX-512 it
  is always inlined, so loops vectorize its arithmetic.
- with AVX-512F, a vector variant the loop vectorizer calls instead (LLVM's
  `vector-function-abi-variant`, as clang's -fveclib gives libm's functions), inlined after O3.
  numpy's AVX-512 log reads a table from registers (`vpermi2pd`/`vpermps`), which generic IR
  cannot ask for; the arithmetic forms above took 1.05-1.13x numpy's time (float64, 2^15
  elements) and 0.99-1.02x (float32): their split into exponent and mantissa, subnormals and
  special values are about half of their ops. The kernel is the table method of Intel's SVML and
  ARM's optimized-routines, with AVX-512's own instructions:
    x = 2^e m, m in [1, 2)           vgetexp, vgetmant (subnormals included)
    c = 1/m to 5 bits                vrcp14 (14 bits), vrndscale to a multiple of 1/32
    r = m c - 1, |r| <= 2^-5         one FMA, exact (c has 6 significant bits)
    log x = e ln2 - log c + log1p(r), -log c from a 16-entry table in registers (vpermi2pd on
                                     two for float64, vpermps on one for float32, indexed by c's
                                     top mantissa bits; c < 3/4 is read as 2c, one more 2 in e)
    log1p(r) = r + r^2 P(r)          P of degree 7 (float64) or 3 (float32), fitted at
                                     Chebyshev nodes on |r| <= 0.0315
  e ln2 + T (ln2's head, e ln2_head exact) and then + r are summed with their rounding errors
  kept (Fast2Sum: e ln2 outweighs T or is 0; T outweighs r or is 0), ln2's and T's tails added to
  the small part: within 1 ulp of the correctly rounded result. Where getexp gives no finite
  exponent it is the result (-inf at 0, inf at inf, nan at nan); negative x give nan.
"""
from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass
from decimal import Decimal, localcontext

import numpy as np

__all__ = ["LOG_F32", "LOG_F64", "VECTOR_LOG_NAMES", "define_log", "has_vector_log"]

LOG_F64, LOG_F32 = "sprue_log_f64", "sprue_log_f32"


@dataclass(frozen=True)
class _Kind:
    name: str               # the scalar function
    scalar: str             # LLVM's type
    lanes: int              # the kernel's (one 512-bit vector)
    variants: tuple[int, ...]   # lane counts with a variant (the kernel's padded or split)
    int_bits: int
    mantissa: int
    isa: str                # AVX-512's suffix: pd, ps
    ln2_head: float         # e * ln2_head exact for every exponent e
    poly: tuple[float, ...]  # P's coefficients, lowest first

    @property
    def vt(self) -> str:
        return f"<{self.lanes} x {self.scalar}>"

    @property
    def suffix(self) -> str:
        """The type in LLVM's intrinsic names: f64, f32."""
        return f"f{self.int_bits}"

    @property
    def mask(self) -> str:
        """AVX-512's mask type for one vector: a bit a lane."""
        return f"i{self.lanes}"

    def vector(self, lanes: int) -> str:
        return f"sprue_log_v{lanes}{self.suffix}"

    def round(self, value: float) -> float:
        return value if self.scalar == "double" else float(np.float32(value))


_F64 = _Kind(LOG_F64, "double", 8, (2, 4, 8, 16), 64, 52, "pd", float.fromhex("0x1.62e42fefa3800p-1"),
             (-0.49999999999999956, 0.3333333333333326, -0.2500000000247267, 0.20000000002038784,
              -0.1666665430654962, 0.1428570437116848, -0.12519901157847796, 0.11127923897418078))
_F32 = _Kind(LOG_F32, "float", 16, (4, 8, 16, 32), 32, 23, "ps", float.fromhex("0x1.62e4p-1"),
             (-0.4999999701976776, 0.333333283662796, -0.25016653537750244, 0.20017845928668976))
_KINDS = (_F64, _F32)
VECTOR_LOG_NAMES = frozenset(kind.vector(n) for kind in _KINDS for n in kind.variants)


def _tables(kind: _Kind) -> tuple[list[float], list[float], float]:
    """-log c for c's 16 table entries (head, tail) and ln2's tail, in the kind's precision:
    c = 1/2 + j/32 for j >= 8, read as 2c = 1 + j/16 below (c = 1 is j = 0, as c = 1/2 is)."""
    with localcontext() as ctx:
        ctx.prec = 50
        head, tail = [], []
        for j in range(16):
            c = Decimal(1) + Decimal(j) / 16 if j < 8 else Decimal(1) / 2 + Decimal(j) / 32
            exact = -c.ln()
            head.append(kind.round(float(exact)))
            tail.append(kind.round(float(exact - Decimal(head[-1]))))
        return head, tail, kind.round(float(Decimal(2).ln() - Decimal(kind.ln2_head)))


def _c(value: float) -> str:
    """A float or double as LLVM IR's exact hexadecimal constant (a float's value as a double)."""
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]


def _splat(kind: _Kind, value: float, lanes: int | None = None) -> str:
    return "<" + ", ".join([f"{kind.scalar} {_c(value)}"] * (lanes or kind.lanes)) + ">"


def _constants(kind: _Kind, values: list[float]) -> str:
    return "<" + ", ".join(f"{kind.scalar} {_c(v)}" for v in values) + ">"


_ATTRS = "nounwind willreturn memory(none)"


def _split(kind: _Kind, sqrt_half_bits: int, smallest_normal: float, scale: int) -> str:
    """%dk, %f: x = 2^k (1 + f), 1 + f in [sqrt(1/2), sqrt(2)), subnormal x scaled by 2^scale."""
    t, i = kind.scalar, f"i{kind.int_bits}"
    return f"""  %tiny = fcmp olt {t} %x, {_c(smallest_normal)}
  %xm = fmul {t} %x, {_c(2.0 ** scale)}
  %xs = select i1 %tiny, {t} %xm, {t} %x
  %xb = bitcast {t} %xs to {i}
  %b = sub {i} %xb, {sqrt_half_bits}
  %k = ashr {i} %b, {kind.mantissa}
  %ks = shl {i} %k, {kind.mantissa}
  %mb = sub {i} %xb, %ks
  %m = bitcast {i} %mb to {t}
  %kt = select i1 %tiny, {i} {scale}, {i} 0
  %k2 = sub {i} %k, %kt
  %dk = sitofp {i} %k2 to {t}
  %f = fsub {t} %m, 1.0"""


def _horner(kind: _Kind, z: str, coefficients: tuple[float, ...], out: str) -> list[str]:
    """Lines computing sum c_i z^(n-i) (highest power first) into %out by scalar FMAs."""
    t, lines, acc = kind.scalar, [], _c(coefficients[0])
    for j, c in enumerate(coefficients[1:]):
        name = out if j == len(coefficients) - 2 else f"{out}.{j}"
        lines.append(f"  {name} = call {t} @llvm.fma.{kind.suffix}({t} {acc}, {t} {z}, {t} {_c(c)})")
        acc = name
    return lines


# fdlibm's R(s^2) coefficients Lg1..Lg7, its ln2 in two parts
_LG = (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
       2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,
       1.479819860511658591e-01)
_FDLIBM_LN2 = (6.93147180369123816490e-01, 1.90821492927058770002e-10)
# Cephes' logf P (highest power first) and its ln2 in two parts (Cody & Waite)
_LOGF_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
           -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)
_CEPHES_LN2 = (0.693359375, -2.12194440e-4)


def _scalar_body(kind: _Kind) -> str:
    t = kind.scalar
    if kind is _F64:
        hi, lo = _FDLIBM_LN2
        return "\n".join([_split(kind, 0x3FE6A09E667F3BCD, 2.2250738585072014e-308, 54),
                          f"  %ff = fmul {t} %f, %f", f"  %hfsq = fmul {t} %ff, 0.5", f"  %f2 = fadd {t} %f, 2.0",
                          f"  %s = fdiv {t} %f, %f2", f"  %z = fmul {t} %s, %s", f"  %w = fmul {t} %z, %z",
                          *_horner(kind, "%w", (_LG[5], _LG[3], _LG[1]), "%a"), f"  %t1 = fmul {t} %w, %a",
                          *_horner(kind, "%w", (_LG[6], _LG[4], _LG[2], _LG[0]), "%bb"), f"  %t2 = fmul {t} %z, %bb",
                          f"  %r = fadd {t} %t2, %t1", f"  %klo = fmul {t} %dk, {_c(lo)}", f"  %hr = fadd {t} %hfsq, %r",
                          f"  %inner = call {t} @llvm.fma.f64({t} %s, {t} %hr, {t} %klo)",
                          f"  %u1 = fsub {t} %hfsq, %inner", f"  %u2 = fsub {t} %u1, %f", f"  %u3 = fneg {t} %u2",
                          f"  %y = call {t} @llvm.fma.f64({t} %dk, {t} {_c(hi)}, {t} %u3)"])
    hi, lo = (kind.round(v) for v in _CEPHES_LN2)
    return "\n".join([_split(kind, 0x3F3504F3, 1.1754943508222875e-38, 25), f"  %z = fmul {t} %f, %f",
                      *_horner(kind, "%f", tuple(kind.round(c) for c in _LOGF_P), "%p"),
                      f"  %pf = fmul {t} %p, %f", f"  %y0 = fmul {t} %pf, %z",
                      f"  %y1 = call {t} @llvm.fma.f32({t} %dk, {t} {_c(lo)}, {t} %y0)",
                      f"  %y2 = call {t} @llvm.fma.f32({t} %z, {t} {_c(-0.5)}, {t} %y1)",
                      f"  %fy = fadd {t} %f, %y2", f"  %y = call {t} @llvm.fma.f32({t} %dk, {t} {_c(hi)}, {t} %fy)"])


def _scalar(kind: _Kind, attrs: str) -> str:
    """The scalar function (the arithmetic approximations.py wrote inline before), specials last:
    -inf at 0, inf at inf, nan below 0 and at nan (as libm)."""
    t = kind.scalar
    return f"""define internal {t} @{kind.name}({t} %x) {attrs} {{
{_scalar_body(kind)}
  %zero = fcmp oeq {t} %x, 0.0
  %y1s = select i1 %zero, {t} {_c(-math.inf)}, {t} %y
  %inf = fcmp oeq {t} %x, {_c(math.inf)}
  %y2s = select i1 %inf, {t} %x, {t} %y1s
  %neg = fcmp ugt {t} 0.0, %x
  %out = select i1 %neg, {t} {_c(math.nan)}, {t} %y2s
  ret {t} %out
}}"""


def _avx512(kind: _Kind, op: str) -> str:
    mask = kind.mask
    return {"getmant": f"@llvm.x86.avx512.mask.getmant.{kind.isa}.512({kind.vt} %x, i32 4, {kind.vt} zeroinitializer, {mask} -1, i32 4)",
            "getexp": f"@llvm.x86.avx512.mask.getexp.{kind.isa}.512({kind.vt} %x, {kind.vt} zeroinitializer, {mask} -1, i32 4)",
            "rcp14": f"@llvm.x86.avx512.rcp14.{kind.isa}.512({kind.vt} %m, {kind.vt} zeroinitializer, {mask} -1)",
            # 0x58: round to nearest, to 5 fraction bits, no precision exception
            "rndscale": f"@llvm.x86.avx512.mask.rndscale.{kind.isa}.512({kind.vt} %rc, i32 88, {kind.vt} zeroinitializer, {mask} -1, i32 4)",
            }[op]


def _lookup(kind: _Kind, values: list[float], out: str) -> str:
    iv = f"<{kind.lanes} x i{kind.int_bits}>"
    if kind is _F64:
        return (f"  {out} = call {kind.vt} @llvm.x86.avx512.vpermi2var.pd.512({kind.vt} {_constants(kind, values[:8])}, "
                f"{iv} %j, {kind.vt} {_constants(kind, values[8:])})")
    return f"  {out} = call {kind.vt} @llvm.x86.avx512.permvar.sf.512({kind.vt} {_constants(kind, values)}, {iv} %j)"


def _estrin(kind: _Kind) -> list[str]:
    """%pr = P(r) by Estrin's scheme (pairs, then pairs of pairs: a short dependency chain)."""
    vt, fma = kind.vt, f"call {kind.vt} @llvm.fma.v{kind.lanes}{kind.suffix}"
    terms = [f"  %e0.{j} = {fma}({vt} %r, {vt} {_splat(kind, kind.poly[2 * j + 1])}, {vt} {_splat(kind, kind.poly[2 * j])})"
             for j in range(len(kind.poly) // 2)]
    names, power, level, lines = [f"%e0.{j}" for j in range(len(terms))], "%r2", 0, terms
    while len(names) > 1:
        level += 1
        nxt = []
        for j in range(0, len(names), 2):
            name = "%pr" if len(names) == 2 else f"%e{level}.{j // 2}"
            lines.append(f"  {name} = {fma}({vt} {power}, {vt} {names[j + 1]}, {vt} {names[j]})")
            nxt.append(name)
        if len(nxt) > 1:
            lines.append(f"  %r{2 ** (level + 1)} = fmul {vt} {power}, {power}")
            power = f"%r{2 ** (level + 1)}"
        names = nxt
    return lines


def _kernel(kind: _Kind) -> str:
    """The AVX-512 kernel on one 512-bit vector (the module docstring's method)."""
    head, tail, ln2_tail = _tables(kind)
    vt, n, iv = kind.vt, kind.lanes, f"<{kind.lanes} x i{kind.int_bits}>"
    fma = f"call {vt} @llvm.fma.v{n}{kind.suffix}"
    shift = "<" + ", ".join([f"i{kind.int_bits} {kind.mantissa - 4}"] * n) + ">"
    lines = [
        f"define weak_odr hidden {vt} @{kind.vector(n)}({vt} %x) {_ATTRS} alwaysinline {{",
        f"  %m = call {vt} {_avx512(kind, 'getmant')}",
        f"  %e0 = call {vt} {_avx512(kind, 'getexp')}",
        f"  %rc = call {vt} {_avx512(kind, 'rcp14')}",
        f"  %c = call {vt} {_avx512(kind, 'rndscale')}",
        f"  %r = {fma}({vt} %m, {vt} %c, {vt} {_splat(kind, -1.0)})",
        f"  %low = fcmp olt {vt} %c, {_splat(kind, 0.75)}",
        f"  %e1 = fadd {vt} %e0, {_splat(kind, 1.0)}",
        f"  %e = select <{n} x i1> %low, {vt} %e1, {vt} %e0",
        f"  %cb = bitcast {vt} %c to {iv}",
        f"  %j = lshr {iv} %cb, {shift}",
        _lookup(kind, head, "%t"), _lookup(kind, tail, "%tt"),
        f"  %r2 = fmul {vt} %r, %r",
        *_estrin(kind),
        f"  %elo = fmul {vt} %e, {_splat(kind, ln2_tail)}",
        f"  %lo = {fma}({vt} %r2, {vt} %pr, {vt} %elo)",
        f"  %ea = fmul {vt} %e, {_splat(kind, kind.ln2_head)}",
        f"  %w = fadd {vt} %ea, %t", f"  %wd = fsub {vt} %ea, %w", f"  %we = fadd {vt} %wd, %t",
        f"  %h = fadd {vt} %w, %r", f"  %hd = fsub {vt} %w, %h", f"  %he = fadd {vt} %hd, %r",
        f"  %l1 = fadd {vt} %tt, %we", f"  %l2 = fadd {vt} %l1, %he", f"  %l3 = fadd {vt} %lo, %l2",
        f"  %y = fadd {vt} %h, %l3",
        f"  %ae = call {vt} @llvm.fabs.v{n}{kind.suffix}({vt} %e0)",
        f"  %sp = fcmp ueq {vt} %ae, {_splat(kind, math.inf)}",
        f"  %ys = select <{n} x i1> %sp, {vt} %e0, {vt} %y",
        f"  %neg = fcmp olt {vt} %x, zeroinitializer",
        f"  %out = select <{n} x i1> %neg, {vt} {_splat(kind, math.nan)}, {vt} %ys",
        f"  ret {vt} %out", "}"]
    return "\n".join(lines)


def _widened(kind: _Kind, lanes: int) -> str:
    """The variant on `lanes` lanes by the kernel: padded with 1.0 (log 1 = 0), or halves."""
    vt, kt, n = f"<{lanes} x {kind.scalar}>", kind.vt, kind.lanes
    kernel = "@" + kind.vector(n)
    head = f"define weak_odr hidden {vt} @{kind.vector(lanes)}({vt} %x) {_ATTRS} alwaysinline {{"
    if lanes < n:
        pad = ", ".join(f"i32 {i if i < lanes else lanes}" for i in range(n))
        keep = ", ".join(f"i32 {i}" for i in range(lanes))
        return f"""{head}
  %w = shufflevector {vt} %x, {vt} {_splat(kind, 1.0, lanes)}, <{n} x i32> <{pad}>
  %y = call {kt} {kernel}({kt} %w)
  %out = shufflevector {kt} %y, {kt} poison, <{lanes} x i32> <{keep}>
  ret {vt} %out
}}"""
    lo, hi = (", ".join(f"i32 {i}" for i in range(a, a + n)) for a in (0, n))
    both = ", ".join(f"i32 {i}" for i in range(2 * n))
    return f"""{head}
  %a = shufflevector {vt} %x, {vt} poison, <{n} x i32> <{lo}>
  %b = shufflevector {vt} %x, {vt} poison, <{n} x i32> <{hi}>
  %ya = call {kt} {kernel}({kt} %a)
  %yb = call {kt} {kernel}({kt} %b)
  %out = shufflevector {kt} %ya, {kt} %yb, <{2 * n} x i32> <{both}>
  ret {vt} %out
}}"""


def _declarations(kind: _Kind, avx512: bool) -> list[str]:
    s, isa, mask, vt = kind.suffix, kind.isa, kind.mask, kind.vt
    lines = [f"declare {kind.scalar} @llvm.fma.{s}({kind.scalar}, {kind.scalar}, {kind.scalar})"]
    if avx512:
        v = f"v{kind.lanes}{s}"
        lines += [f"declare {vt} @llvm.fma.{v}({vt}, {vt}, {vt})", f"declare {vt} @llvm.fabs.{v}({vt})",
                  f"declare {vt} @llvm.x86.avx512.mask.getmant.{isa}.512({vt}, i32, {vt}, {mask}, i32)",
                  f"declare {vt} @llvm.x86.avx512.mask.getexp.{isa}.512({vt}, {vt}, {mask}, i32)",
                  f"declare {vt} @llvm.x86.avx512.rcp14.{isa}.512({vt}, {vt}, {mask})",
                  f"declare {vt} @llvm.x86.avx512.mask.rndscale.{isa}.512({vt}, i32, {vt}, {mask}, i32)",
                  f"declare {vt} @llvm.x86.avx512.vpermi2var.pd.512({vt}, <8 x i64>, {vt})" if kind is _F64 else
                  f"declare {vt} @llvm.x86.avx512.permvar.sf.512({vt}, <16 x i32>)"]
    return lines


def _definitions(kind: _Kind, avx512: bool) -> tuple[str, list[str]]:
    """(the scalar function, what to append: the kernels and the intrinsics' declarations)."""
    if not avx512:
        return _scalar(kind, f"{_ATTRS} alwaysinline"), _declarations(kind, False)
    variants = ",".join(f"_ZGV_LLVM_N{n}v_{kind.name}({kind.vector(n)})" for n in kind.variants)
    scalar = _scalar(kind, f"{_ATTRS} noinline \"vector-function-abi-variant\"=\"{variants}\"")
    kernels = [_kernel(kind)] + [_widened(kind, n) for n in kind.variants if n != kind.lanes]
    return scalar, kernels + _declarations(kind, True)


def define_log(llvm_ir: str, avx512: bool) -> str:
    """llvm_ir (one module, before optimization) with its declarations of LOG_F64/LOG_F32
    replaced by definitions: the scalar function, always inlined; with `avx512` (the target CPU
    has AVX-512F) not inlined but vectorized as the AVX-512 kernel, which has_vector_log then says
    to inline after O3. Unchanged if the module calls neither."""
    if "@sprue_log_f" not in llvm_ir:
        return llvm_ir
    extra: list[str] = []
    for kind in _KINDS:
        declaration = re.compile(rf"^declare {kind.scalar} @{kind.name}\({kind.scalar}\)[^\n]*$", re.M)
        # (a module of a split may only have the declaration copied: module_split.py)
        if not declaration.search(llvm_ir) or f"@{kind.name}(" not in llvm_ir.replace(f"declare {kind.scalar} @{kind.name}(", ""):
            continue
        scalar, more = _definitions(kind, avx512)
        llvm_ir = declaration.sub(lambda _: scalar, llvm_ir)
        extra += more
    declared = set(re.findall(r"^declare [^@\n]*@(llvm\.[\w.]+)\(", llvm_ir, re.M))
    extra = [line for line in dict.fromkeys(extra)
             if not line.startswith("declare ") or re.search(r"@([\w.]+)\(", line).group(1) not in declared]
    return llvm_ir + "\n" + "\n".join(extra) + "\n" if extra else llvm_ir


def has_vector_log(llvm_ir: str) -> bool:
    """Whether define_log gave llvm_ir an AVX-512 kernel (to inline after O3)."""
    return any(f"@{kind.vector(kind.lanes)}(" in llvm_ir for kind in _KINDS)
