"""float64 log: a scalar function the loop vectorizer widens to an AVX-512 kernel of our own.

The pipeline turns every scalar float64 `math.log` into a call of LOG_F64 (approximations.py,
declared only); each LLVM module that calls it gets its definitions here (define_log_f64), once
the target CPU is known:

- the scalar function: fdlibm's e_log.c (Sun) as approximations.py wrote it inline before:
  x = 2^k (1 + f) by integer ops on the bits, log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)) with
  s = f / (2 + f), R of degree 7 in s^2, k ln 2 in two parts; < 1 ulp, one division. Without
  AVX-512 it is always inlined, so loops vectorize its arithmetic, as before.
- with AVX-512F, a vector variant the loop vectorizer calls instead (LLVM's
  `vector-function-abi-variant`, as clang's -fveclib gives libm's functions), inlined after O3.
  numpy's AVX-512 log reads a table from registers (`vpermi2pd`), which generic IR cannot ask
  for, and fdlibm's form took 1.05-1.13x numpy's time at 2^15 elements (its split into exponent
  and mantissa, subnormals and specials are ~half of its 40 vector ops). The kernel is the table
  method of Intel's SVML and ARM's optimized-routines, with AVX-512's own instructions:
    x = 2^e m, m in [1, 2)           vgetexppd, vgetmantpd (subnormals included)
    c = 1/m to 5 bits                vrcp14pd (14 bits), vrndscalepd to a multiple of 1/32
    r = m c - 1, |r| <= 2^-5         one FMA, exact
    log x = e ln2 - log c + log1p(r), -log c from a 16-entry table held in two registers
                                     (vpermi2pd on c's top mantissa bits; c < 3/4 is read as
                                     2c, one more power of two in e)
    log1p(r) = r + r^2 P(r)          P of degree 7 (Chebyshev-node fit on |r| <= 0.0315)
  e ln2 + T (ln2's 42-bit head, exact) and then + r are summed with their rounding errors kept
  (Fast2Sum; |T| or |e ln2| is the larger or T is 0), with ln2's tail and T's tail added to the
  small part: within 1 ulp of the correctly rounded result, as numpy's. Where getexp gives no
  finite exponent it is the result (-inf at 0, inf at inf, nan at nan), and negative x give nan.
"""
from __future__ import annotations

import math
import re
import struct
from decimal import Decimal, localcontext

__all__ = ["LOG_F64", "VECTOR_LOG_NAMES", "define_log_f64", "has_vector_log"]

LOG_F64 = "sprue_log_f64"
_VECTOR = "sprue_log_v{lanes}f64"   # the vector variants (weak_odr hidden: one per library)
_LANES = (2, 4, 8, 16)   # 8 is the kernel; the others pad to or split into it
VECTOR_LOG_NAMES = frozenset(_VECTOR.format(lanes=n) for n in _LANES)

# fdlibm's R(s^2) coefficients Lg1..Lg7
_LG = (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
       2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,
       1.479819860511658591e-01)
_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10   # fdlibm's split
_SQRT_HALF_BITS = 0x3FE6A09E667F3BCD
_SMALLEST_NORMAL = 2.2250738585072014e-308

# the kernel's ln2: a head of 42 bits (e ln2_head exact for |e| < 2^11) and its tail
_LN2_HEAD = float.fromhex("0x1.62e42fefa3800p-1")
# log1p(r) = r + r^2 P(r): P's coefficients, lowest first (fitted at Chebyshev nodes on
# |r| <= 0.0315; its error times r^2 is under 1.2e-18, 0.01 ulp of log(1.99))
_P = (-0.49999999999999956, 0.3333333333333326, -0.2500000000247267, 0.20000000002038784,
      -0.1666665430654962, 0.1428570437116848, -0.12519901157847796, 0.11127923897418078)


def _tables() -> tuple[list[float], list[float], float]:
    """-log c for c's 16 table entries (head, tail), ln2's tail: c = 1/2 + j/32 for j >= 8, read
    as 2c = 1 + j/16 below (c = 1 is j = 0, as c = 1/2 read as 2c)."""
    with localcontext() as ctx:
        ctx.prec = 50
        head, tail = [], []
        for j in range(16):
            c = Decimal(1) + Decimal(j) / 16 if j < 8 else Decimal(1) / 2 + Decimal(j) / 32
            exact = -c.ln()
            head.append(float(exact))
            tail.append(float(exact - Decimal(head[-1])))
        return head, tail, float(Decimal(2).ln() - Decimal(_LN2_HEAD))


def _d(value: float) -> str:
    """A double as LLVM IR's exact hexadecimal constant."""
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]


def _splat(value: float, lanes: int = 8) -> str:
    return "<" + ", ".join([f"double {_d(value)}"] * lanes) + ">"


def _vector(values: list[float]) -> str:
    return "<" + ", ".join(f"double {_d(v)}" for v in values) + ">"


_ATTRS = "nounwind willreturn memory(none)"


def _scalar(inline: bool) -> str:
    """fdlibm's log as an LLVM function (the arithmetic approximations.py's _log_f64 had)."""
    lg = [_d(c) for c in _LG]
    attrs = f"{_ATTRS} {'alwaysinline' if inline else 'noinline'}"
    return f"""define internal double @{LOG_F64}(double %x) {attrs} {{
  %tiny = fcmp olt double %x, {_d(_SMALLEST_NORMAL)}
  %xm = fmul double %x, {_d(2.0 ** 54)}
  %xs = select i1 %tiny, double %xm, double %x
  %xb = bitcast double %xs to i64
  %b = sub i64 %xb, {_SQRT_HALF_BITS}
  %k = ashr i64 %b, 52
  %ks = shl i64 %k, 52
  %mb = sub i64 %xb, %ks
  %m = bitcast i64 %mb to double
  %kt = select i1 %tiny, i64 54, i64 0
  %k2 = sub i64 %k, %kt
  %dk = sitofp i64 %k2 to double
  %f = fsub double %m, 1.0
  %ff = fmul double %f, %f
  %hfsq = fmul double %ff, 0.5
  %f2 = fadd double %f, 2.0
  %s = fdiv double %f, %f2
  %z = fmul double %s, %s
  %w = fmul double %z, %z
  %a1 = call double @llvm.fma.f64(double {lg[5]}, double %w, double {lg[3]})
  %a2 = call double @llvm.fma.f64(double %a1, double %w, double {lg[1]})
  %t1 = fmul double %w, %a2
  %b1 = call double @llvm.fma.f64(double {lg[6]}, double %w, double {lg[4]})
  %b2 = call double @llvm.fma.f64(double %b1, double %w, double {lg[2]})
  %b3 = call double @llvm.fma.f64(double %b2, double %w, double {lg[0]})
  %t2 = fmul double %z, %b3
  %r = fadd double %t2, %t1
  %klo = fmul double %dk, {_d(_LN2_LO)}
  %hr = fadd double %hfsq, %r
  %inner = call double @llvm.fma.f64(double %s, double %hr, double %klo)
  %u1 = fsub double %hfsq, %inner
  %u2 = fsub double %u1, %f
  %u3 = fneg double %u2
  %y = call double @llvm.fma.f64(double %dk, double {_d(_LN2_HI)}, double %u3)
{_specials("double", "i1", 1)}
  ret double %out
}}"""


def _specials(t: str, mask: str, lanes: int) -> str:
    """-inf at 0, inf at inf, nan below 0 (and nan stays nan): selects on %y into %out."""
    def c(v: float) -> str:
        return _d(v) if lanes == 1 else _splat(v, lanes)
    return f"""  %zero = fcmp oeq {t} %x, {c(0.0)}
  %y1 = select {mask} %zero, {t} {c(-math.inf)}, {t} %y
  %inf = fcmp oeq {t} %x, {c(math.inf)}
  %y2 = select {mask} %inf, {t} %x, {t} %y1
  %neg = fcmp ugt {t} {c(0.0)}, %x
  %out = select {mask} %neg, {t} {c(math.nan)}, {t} %y2"""


def _kernel() -> str:
    """The AVX-512 kernel on 8 lanes (the module docstring's method)."""
    head, tail, ln2_tail = _tables()
    v8, i8 = "<8 x double>", "<8 x i64>"
    p = [_splat(c) for c in _P]
    fma = "call <8 x double> @llvm.fma.v8f64"
    return f"""define weak_odr hidden {v8} @{_VECTOR.format(lanes=8)}({v8} %x) {_ATTRS} alwaysinline {{
  %m = call {v8} @llvm.x86.avx512.mask.getmant.pd.512({v8} %x, i32 4, {v8} zeroinitializer, i8 -1, i32 4)
  %e0 = call {v8} @llvm.x86.avx512.mask.getexp.pd.512({v8} %x, {v8} zeroinitializer, i8 -1, i32 4)
  %rc = call {v8} @llvm.x86.avx512.rcp14.pd.512({v8} %m, {v8} zeroinitializer, i8 -1)
  %c = call {v8} @llvm.x86.avx512.mask.rndscale.pd.512({v8} %rc, i32 88, {v8} zeroinitializer, i8 -1, i32 4)
  %r = {fma}({v8} %m, {v8} %c, {v8} {_splat(-1.0)})
  %low = fcmp olt {v8} %c, {_splat(0.75)}
  %e1 = fadd {v8} %e0, {_splat(1.0)}
  %e = select <8 x i1> %low, {v8} %e1, {v8} %e0
  %cb = bitcast {v8} %c to {i8}
  %j = lshr {i8} %cb, <i64 48, i64 48, i64 48, i64 48, i64 48, i64 48, i64 48, i64 48>
  %t = call {v8} @llvm.x86.avx512.vpermi2var.pd.512({v8} {_vector(head[:8])}, {i8} %j, {v8} {_vector(head[8:])})
  %tt = call {v8} @llvm.x86.avx512.vpermi2var.pd.512({v8} {_vector(tail[:8])}, {i8} %j, {v8} {_vector(tail[8:])})
  %r2 = fmul {v8} %r, %r
  %r4 = fmul {v8} %r2, %r2
  %p01 = {fma}({v8} %r, {v8} {p[1]}, {v8} {p[0]})
  %p23 = {fma}({v8} %r, {v8} {p[3]}, {v8} {p[2]})
  %p45 = {fma}({v8} %r, {v8} {p[5]}, {v8} {p[4]})
  %p67 = {fma}({v8} %r, {v8} {p[7]}, {v8} {p[6]})
  %q0 = {fma}({v8} %r2, {v8} %p23, {v8} %p01)
  %q1 = {fma}({v8} %r2, {v8} %p67, {v8} %p45)
  %pr = {fma}({v8} %r4, {v8} %q1, {v8} %q0)
  %elo = fmul {v8} %e, {_splat(ln2_tail)}
  %lo = {fma}({v8} %r2, {v8} %pr, {v8} %elo)
  %ea = fmul {v8} %e, {_splat(_LN2_HEAD)}
  %w = fadd {v8} %ea, %t
  %wd = fsub {v8} %ea, %w
  %we = fadd {v8} %wd, %t
  %h = fadd {v8} %w, %r
  %hd = fsub {v8} %w, %h
  %he = fadd {v8} %hd, %r
  %l1 = fadd {v8} %tt, %we
  %l2 = fadd {v8} %l1, %he
  %l3 = fadd {v8} %lo, %l2
  %y = fadd {v8} %h, %l3
  %ae = call {v8} @llvm.fabs.v8f64({v8} %e0)
  %sp = fcmp ueq {v8} %ae, {_splat(math.inf)}
  %ys = select <8 x i1> %sp, {v8} %e0, {v8} %y
  %neg = fcmp olt {v8} %x, zeroinitializer
  %out = select <8 x i1> %neg, {v8} {_splat(math.nan)}, {v8} %ys
  ret {v8} %out
}}"""


def _widened(lanes: int) -> str:
    """The variant on `lanes` lanes by the 8-lane kernel: padded with 1.0 (log 1 = 0), or halves."""
    vt, v8, name = f"<{lanes} x double>", "<8 x double>", _VECTOR.format(lanes=lanes)
    kernel = "@" + _VECTOR.format(lanes=8)
    head = f"define weak_odr hidden {vt} @{name}({vt} %x) {_ATTRS} alwaysinline {{"
    if lanes < 8:
        pad = ", ".join(f"i32 {i if i < lanes else lanes}" for i in range(8))
        ones = _splat(1.0, lanes)
        keep = ", ".join(f"i32 {i}" for i in range(lanes))
        return f"""{head}
  %w = shufflevector {vt} %x, {vt} {ones}, <8 x i32> <{pad}>
  %y = call {v8} {kernel}({v8} %w)
  %out = shufflevector {v8} %y, {v8} poison, <{lanes} x i32> <{keep}>
  ret {vt} %out
}}"""
    lo = ", ".join(f"i32 {i}" for i in range(8))
    hi = ", ".join(f"i32 {i}" for i in range(8, 16))
    both = ", ".join(f"i32 {i}" for i in range(16))
    return f"""{head}
  %a = shufflevector {vt} %x, {vt} poison, <8 x i32> <{lo}>
  %b = shufflevector {vt} %x, {vt} poison, <8 x i32> <{hi}>
  %ya = call {v8} {kernel}({v8} %a)
  %yb = call {v8} {kernel}({v8} %b)
  %out = shufflevector {v8} %ya, {v8} %yb, <16 x i32> <{both}>
  ret {vt} %out
}}"""


_DECLARE = re.compile(r"^declare double @" + LOG_F64 + r"\(double\)[^\n]*$", re.M)
_INTRINSICS = """declare double @llvm.fma.f64(double, double, double)
declare <8 x double> @llvm.fma.v8f64(<8 x double>, <8 x double>, <8 x double>)
declare <8 x double> @llvm.fabs.v8f64(<8 x double>)
declare <8 x double> @llvm.x86.avx512.mask.getmant.pd.512(<8 x double>, i32, <8 x double>, i8, i32)
declare <8 x double> @llvm.x86.avx512.mask.getexp.pd.512(<8 x double>, <8 x double>, i8, i32)
declare <8 x double> @llvm.x86.avx512.rcp14.pd.512(<8 x double>, <8 x double>, i8)
declare <8 x double> @llvm.x86.avx512.mask.rndscale.pd.512(<8 x double>, i32, <8 x double>, i8, i32)
declare <8 x double> @llvm.x86.avx512.vpermi2var.pd.512(<8 x double>, <8 x i64>, <8 x double>)"""


def define_log_f64(llvm_ir: str, avx512: bool) -> str:
    """llvm_ir (one module, before optimization) with its declaration of LOG_F64 replaced by
    definitions: the scalar function, always inlined; with `avx512` (the target CPU has AVX-512F)
    not inlined but vectorized as the AVX-512 kernel, which has_vector_log then says to inline
    after O3. Unchanged if the module does not call LOG_F64."""
    if "@" + LOG_F64 not in llvm_ir or not _DECLARE.search(llvm_ir):
        return llvm_ir
    defined = {m.group(1) for m in re.finditer(r"^declare [^@\n]*@(llvm\.[\w.]+)\(", llvm_ir, re.M)}
    declarations = "\n".join(d for d in _INTRINSICS.split("\n")
                             if re.search(r"@([\w.]+)\(", d).group(1) not in defined
                             and (avx512 or "x86" not in d and "v8f64" not in d))
    if not avx512:
        return _DECLARE.sub(lambda _: _scalar(inline=True), llvm_ir) + "\n" + declarations + "\n"
    variants = ",".join(f"_ZGV_LLVM_N{n}v_{LOG_F64}({_VECTOR.format(lanes=n)})" for n in _LANES)
    scalar = _scalar(inline=False).replace(
        f"{_ATTRS} noinline", f"{_ATTRS} noinline \"vector-function-abi-variant\"=\"{variants}\"", 1)
    kernels = [_kernel()] + [_widened(n) for n in _LANES if n != 8]
    return _DECLARE.sub(lambda _: scalar, llvm_ir) + "\n" + "\n".join(kernels) + "\n" + declarations + "\n"


def has_vector_log(llvm_ir: str) -> bool:
    """Whether define_log_f64 gave llvm_ir the vector kernel (to inline after O3)."""
    return "@" + _VECTOR.format(lanes=8) + "(" in llvm_ir
