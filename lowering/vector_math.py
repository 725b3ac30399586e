"""Vectorized transcendentals: glibc's vector math library (libmvec) under LLVM's loop vectorizer.

Two routes, both ending in calls of libmvec's vector function ABI variants
(_ZGV<isa>N<lanes>v[v]_<name>; isa b = SSE2 2x f64, d = AVX2 4x f64, e = AVX-512 8x f64):

- math ops that convert-math-to-llvm makes LLVM intrinsics (sin, exp, log, pow, tanh, atan2, ...):
  the loop vectorizer widens `llvm.tanh.f64` to `llvm.tanh.v4f64`, which LLVM's code generator would
  split back into scalar libm calls; after optimization use_vector_math renames it to libmvec's
  variant (and splits vectors wider than the CPU's).
- math ops with no LLVM intrinsic (expm1, log1p, erf, cbrt; convert-math-to-llvm would even
  expand expm1/log1p to exp(x) - 1 and log(1 + x), losing every digit for tiny x): call_libm turns
  them into calls of the C library's function before the "llvm" stage, and declare_vector_variants
  gives that declaration LLVM's `vector-function-abi-variant` attribute naming libmvec's variants,
  the attribute clang's -fveclib=libmvec (LLVM's InjectTLIMappings) puts there; the loop vectorizer
  then calls the variants itself. llvmlite has no way to set TargetLibraryInfo's vector library.

A variant is used only when this machine's libmvec exports it (glibc 2.22 has sin/cos/exp/log/pow,
2.35 the rest) and the target CPU has its ISA; otherwise the scalar libm call stays, which is
also what runs in a loop's remainder. libmvec is part of glibc: a C host needs nothing new.
"""
from __future__ import annotations

import ctypes
import functools
import platform
import re
import sys

from torch_mlir import ir

from sprue.lowering.mlir_util import call_declared, ops_where
from sprue.lowering.targets import HOST_CPU, feature_overrides, host_cpu_features

# Vectorized math. LLVM's loop vectorizer turns a loop of `llvm.sin.f64` into `llvm.sin.v8f64`, which
# the code generator then splits back into 8 scalar libm calls. glibc ships vector versions
# (libmvec, x86-64: max 4 ulp error, special values handled as libm does); after optimization the
# vector intrinsics are renamed to them (vector function ABI names: _ZGV<isa>N<lanes>v[v]_<name>).
# Every math intrinsic convert-math-to-llvm emits that libmvec has (glibc 2.22: sin cos exp log pow;
# 2.35 added tan, tanh, atan2, the inverse and hyperbolic functions, exp2/exp10/log2/log10): a
# variant is used only if this machine's libmvec exports it (_libmvec_has), so an older glibc keeps
# the scalar calls instead of failing to link. (tanh and atan2 were left as scalar calls before:
# 45 ms for tanh on 2e6 f64, numpy 1.8 ms.)
_VECTOR_MATH = {"sin": 1, "cos": 1, "tan": 1, "exp": 1, "exp2": 1, "exp10": 1, "log": 1, "log2": 1,
                "log10": 1, "pow": 2, "tanh": 1, "sinh": 1, "cosh": 1, "asin": 1, "acos": 1, "atan": 1,
                "atan2": 2}
_VECTOR_INTRINSIC = re.compile(r"@llvm\.(" + "|".join(_VECTOR_MATH) + r")\.v(\d+)(f64|f32)\b")
# (bits of the vector) -> ISA letter, needing that CPU feature
_VECTOR_ISA = [(128, "b", "sse2"), (256, "d", "avx2"), (512, "e", "avx512f")]


def _variant(letter: str, lanes: int, name: str, arity: int, single: bool) -> str:
    """libmvec's name for `name` on `lanes` lanes of ISA `letter` (the vector function ABI:
    _ZGV<isa>N<lanes><v per argument>_<name>, `f` for float32)."""
    return f"_ZGV{letter}N{lanes}{'v' * arity}_{name}{'f' if single else ''}"


@functools.lru_cache(maxsize=None)
def _libmvec_available() -> bool:
    """glibc's libmvec on x86-64 Linux (a dlopen by soname: cheap, and what the link names)."""
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "AMD64"):
        return False
    try:
        ctypes.CDLL(LIBMVEC)
    except OSError:
        return False
    return True


LIBMVEC = "libmvec.so.1"


@functools.lru_cache(maxsize=None)
def _libmvec_has(symbol: str) -> bool:
    return _libmvec_available() and hasattr(ctypes.CDLL(LIBMVEC), symbol)


# A call of a vector intrinsic whose result is an SSA value (the loop vectorizer's form), split into
# calls of a narrower variant when the vector is wider than the widest ISA: a float32 loop that
# computes in float64 (rules_math._in_float64) is vectorized 8 floats wide, so its math is
# <8 x double>, which AVX2 has no variant for and LLVM's code generator would scalarize.
_VECTOR_CALL = re.compile(r"^(\s*)(%[-\w.$]+) = (?:tail |notail |musttail )?call ((?:[a-z]+ )*)<(\d+) x (double|float)> "
                          r"@llvm\.(" + "|".join(_VECTOR_MATH) + r")\.v\d+(?:f64|f32)\((.*)\)((?: #\d+)?)\s*$")
_VECTOR_ARG = re.compile(r", (?=<\d+ x (?:double|float)> )")


def _split_vector_call(m: re.Match, isa: dict[int, str]) -> tuple[list[str], str, str] | None:
    """The lines computing m's call as calls of the widest libmvec variant that divides it, that
    variant's name and vector type; None if there is none."""
    indent, result, flags, lanes, scalar, name, args, attrs = m.groups()
    tmp = "%vm." + result[1:]   # %8 -> %vm.8...: a temporary's name must not start with a digit
    lanes, bits = int(lanes), 64 if scalar == "double" else 32
    for width in sorted(isa, reverse=True):
        part = width // bits
        vname = _variant(isa[width], part, name, _VECTOR_MATH[name], scalar == "float")
        count = lanes // part   # a power of two: the pieces are joined pairwise
        if part < lanes and lanes % part == 0 and count & (count - 1) == 0 and _libmvec_has(vname):
            break
    else:
        return None
    wide, narrow = f"<{lanes} x {scalar}>", f"<{part} x {scalar}>"
    operands = [a[len(wide) + 1:] for a in _VECTOR_ARG.split(args)]
    lines, pieces = [], []
    for k in range(lanes // part):
        mask = ", ".join(f"i32 {k * part + i}" for i in range(part))
        sliced = []
        for j, operand in enumerate(operands):
            lines.append(f"{indent}{tmp}.a{j}.{k} = shufflevector {wide} {operand}, {wide} poison, "
                         f"<{part} x i32> <{mask}>")
            sliced.append(f"{narrow} {tmp}.a{j}.{k}")
        lines.append(f"{indent}{tmp}.p{k} = call {flags}{narrow} @{vname}({', '.join(sliced)}){attrs}")
        pieces.append(f"{tmp}.p{k}")
    while len(pieces) > 1:   # concatenate pairwise: shufflevector joins two vectors of one width
        n = len(pieces) // 2
        width = lanes // n
        half = f"<{width // 2} x {scalar}>"
        mask = ", ".join(f"i32 {i}" for i in range(width))
        joined = []
        for k in range(n):
            name_k = result if n == 1 else f"{tmp}.j{width}.{k}"
            lines.append(f"{indent}{name_k} = shufflevector {half} {pieces[2 * k]}, {half} {pieces[2 * k + 1]}, "
                         f"<{width} x i32> <{mask}>")
            joined.append(name_k)
        pieces = joined
    return lines, vname, narrow


def use_vector_math(optimized_ir: str, cpu: str, features: str = "") -> str:
    """optimized_ir with vector math intrinsics renamed to libmvec functions the CPU can run (the
    host's features; sse2 only for any other CPU; then `features`, "+avx2,-avx512f", as given),
    and their declarations; calls on vectors wider than the CPU's are split (_split_vector_call).
    Unchanged without libmvec."""
    if not _VECTOR_INTRINSIC.search(optimized_ir):
        return optimized_ir
    if not _libmvec_available():
        return optimized_ir
    isa = _isa(cpu, features)
    declared: dict[str, str] = {}

    def declare(vname: str, vt: str, name: str) -> None:
        declared[vname] = f"declare {vt} @{vname}({', '.join([vt] * _VECTOR_MATH[name])})"

    def rename(m: re.Match) -> str:
        name, lanes, ftype = m.group(1), int(m.group(2)), m.group(3)
        letter = isa.get(lanes * (64 if ftype == "f64" else 32))
        if letter is None:
            return m.group(0)
        vname = _variant(letter, lanes, name, _VECTOR_MATH[name], ftype == "f32")
        if not _libmvec_has(vname):
            return m.group(0)
        declare(vname, f"<{lanes} x {'double' if ftype == 'f64' else 'float'}>", name)
        return "@" + vname
    lines = []
    for line in optimized_ir.split("\n"):
        if line.startswith("declare ") and _VECTOR_INTRINSIC.search(line):
            lines.append(line)     # the intrinsic's own declaration stays (unused ones are fine)
            continue
        if "@llvm." not in line:
            lines.append(line)
            continue
        renamed = _VECTOR_INTRINSIC.sub(rename, line)
        call = _VECTOR_CALL.match(line) if renamed == line else None
        split = _split_vector_call(call, isa) if call else None
        if split is None:
            lines.append(renamed)
            continue
        lines += split[0]
        declare(split[1], split[2], call.group(6))
    return "\n".join(lines + sorted(declared.values())) + "\n"


def has_avx512(cpu: str, features: str = "") -> bool:
    """Whether the target CPU (the host's features for HOST_CPU, then `features`) has AVX-512F."""
    return 512 in _isa(cpu, features)


def _isa(cpu: str, features: str) -> dict[int, str]:
    """{vector bits: libmvec ISA letter} the target CPU can run."""
    have = {**(host_cpu_features() if cpu == HOST_CPU else {"sse2": True}),
            **feature_overrides(features)}
    return {bits: letter for bits, letter, feature in _VECTOR_ISA if have.get(feature, False)}


# math ops without an LLVM intrinsic -> the C library function (float64 name; float32 adds "f")
LIBM_CALLS = {"math.expm1": "expm1", "math.log1p": "log1p", "math.erf": "erf", "math.cbrt": "cbrt"}


def call_libm(module: ir.Module) -> bool:
    """Every scalar f32/f64 op of LIBM_CALLS becomes a func.call of its libm function (declared
    private in the module), which convert-func-to-llvm keeps as a plain C call. Whether any other
    math op is left (for MLIR's conversions to LLVM's intrinsics and to libm calls)."""
    others: list[str] = []

    def wanted(op: ir.Operation) -> bool:
        if op.name in LIBM_CALLS and str(op.results[0].type) in ("f32", "f64"):
            return True
        if op.name.startswith("math."):
            others.append(op.name)
        return False

    found = ops_where(module.operation, wanted)
    call_declared(module, found, lambda op: LIBM_CALLS[op.name] + ("f" if str(op.results[0].type) == "f32" else ""))
    return bool(others)


_LIBM_DECLARE = re.compile(r"^declare (double|float) @(" + "|".join(LIBM_CALLS.values()) + r")f?\((?:double|float)\)(.*)$")


def declare_vector_variants(llvm_ir: str, cpu: str, features: str = "") -> str:
    """llvm_ir (before optimization) with each libm declaration of call_libm marked with the
    libmvec variants the CPU can run (`vector-function-abi-variant`), those variants declared and
    kept (llvm.compiler.used) until the loop vectorizer has looked for them; and marked as not
    touching memory (as MLIR marks the intrinsics), which the vectorizer needs."""
    if (not re.search(_LIBM_DECLARE.pattern, llvm_ir, re.MULTILINE) or "@llvm.compiler.used" in llvm_ir
            or not _libmvec_available()):
        return llvm_ir   # (the common case: no such call; nothing split or copied)
    isa = _isa(cpu, features)
    extra: list[str] = []
    kept: list[str] = []

    def mark(line: str) -> str:
        m = _LIBM_DECLARE.match(line)
        if not m:
            return line
        scalar, base = m.group(1), m.group(2)
        fname = base + ("f" if scalar == "float" else "")   # the C library's name
        if not line.startswith(f"declare {scalar} @{fname}("):
            return line
        variants = []
        for bits, letter in sorted(isa.items()):
            lanes = bits // (64 if scalar == "double" else 32)
            vname = _variant(letter, lanes, base, 1, scalar == "float")
            if _libmvec_has(vname):
                vt = f"<{lanes} x {scalar}>"
                extra.append(f"declare {vt} @{vname}({vt})")
                kept.append(f"ptr @{vname}")
                variants.append(f"{vname}({vname})")
        if not variants:
            return line
        return (f"declare {scalar} @{fname}({scalar}) nounwind willreturn memory(none) "
                f"\"vector-function-abi-variant\"=\"{','.join(variants)}\"")
    lines = [mark(line) if line.startswith("declare ") else line for line in llvm_ir.split("\n")]
    if not kept:
        return llvm_ir
    lines += extra + [f"@llvm.compiler.used = appending global [{len(kept)} x ptr] [{', '.join(kept)}], "
                      "section \"llvm.metadata\""]
    return "\n".join(lines) + "\n"
