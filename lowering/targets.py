"""Target CPUs and features: what codegen's `cpu=`/`features=` (`sprue compile --target-cpu`,
`--target-features`) accept, checked before LLVM sees them.

LLVM does not return an error for a target it cannot generate code for: it ends the process. On
x86-64, an unknown CPU ('znver9') is only warned about and its empty feature set lacks 64-bit mode,
and a 32-bit CPU (i386) too: "LLVM ERROR: 64-bit code requested on a subtarget that doesn't support
it!" and exit(1) at the first object emitted; `help` prints LLVM's tables and then does the same; a
feature without its + or - fails an assertion (SIGABRT); disabling what the calling convention needs
(-sse2) is a fatal "SSE2 register return with SSE2 disabled". So a target is checked in two steps,
both in child processes, whose death costs nothing:

- the table: llvmlite.binding has no call that lists CPUs or features (only the host's name and
  features), but LLVM prints both for the CPU name "help" (MCSubtargetInfo: "Available CPUs for
  this target:", "Available features for this target:") when a target machine is created, before
  any code is generated: a child does that and exits; its stderr is parsed. Names not in it are
  refused, with the closest ones (difflib);
- the probe: a name in the table may still be unusable for the triple (i386 on x86-64), and
  features may remove what code generation needs: a child creates the target machine for the
  (cpu, features) pair and emits a module of double, float, vector and integer code (one fork per
  pair, so one child answers many pairs); exit status 0 means usable; otherwise LLVM's message is
  the error's.

Answers are kept in memory and on disk, per user: `<compile cache root>/targets/<llvmlite>-<LLVM>-
<triple>.json` (JSON data only, written atomically, read only from a folder and file this user owns
that no one else may write; nothing when the cache is off). "host" and "generic" without features
need neither step: LLVM always knows them.
"""
from __future__ import annotations

import difflib
import functools
import json
import os
import re
import stat
import subprocess
import sys
import threading
from dataclasses import dataclass, field

import llvmlite
import llvmlite.binding as llvm

from sprue.base.errors import CompileError, SprueValueError
from sprue.runtime.private_files import cache_dir, only_mine, read_private, write_private

__all__ = ["GENERIC_CPU", "HOST_CPU", "TargetOptionError", "TargetTable", "check_target", "machine_cpu_and_features",
           "parse_features", "target_table", "usable_cpus"]

# `cpu` values with a meaning beyond an LLVM CPU name.
HOST_CPU = "host"
GENERIC_CPU = "generic"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_LIST_ROW = re.compile(r"^\s+(\S+)\s+- ")


class TargetOptionError(SprueValueError):
    """A target CPU or feature LLVM does not know, or cannot generate code for on this triple."""


@dataclass
class TargetTable:
    """LLVM's CPU and feature names for `triple`, and what the probes found (cpu, features) -> error or ""."""
    triple: str
    cpus: tuple[str, ...]
    features: tuple[str, ...]
    probes: dict[str, str] = field(default_factory=dict)


# -- the child ------------------------------------------------------------------------------------
# Run as `python -c _CHILD help` or `python -c _CHILD probe <ir> <json [[cpu, features], ...]>`. It
# imports llvmlite only (not sprue: faster, and nothing of sprue's state is needed).
_CHILD = r"""
import json, os, sys
import llvmlite.binding as llvm
llvm.initialize_native_target()
llvm.initialize_native_asmprinter()
target = llvm.Target.from_default_triple()

def machine(cpu, features):
    if cpu == "host":
        host = llvm.get_host_cpu_features().flatten()
        cpu, features = llvm.get_host_cpu_name(), ",".join(f for f in (host, features) if f)
    return target.create_target_machine(cpu=cpu, features=features, opt=2, reloc="pic")

def emit(cpu, features, ir):
    tm = machine(cpu, features)
    mod = llvm.parse_assembly(ir)
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    tm.emit_object(mod)

if sys.argv[1] == "help":        # LLVM prints its tables on stderr when the machine is created
    machine("help", "")
    sys.stderr.flush()
    os._exit(0)
ir, pairs = sys.argv[2], json.loads(sys.argv[3])
if sys.argv[1] == "direct":      # no fork on this platform: one pair, in this process
    emit(pairs[0][0], pairs[0][1], ir)
    os._exit(0)
answers = []
for cpu, features in pairs:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 2)
        try:
            emit(cpu, features, ir)
        except BaseException as e:
            os.write(2, (type(e).__name__ + ": " + str(e)).encode())
            os._exit(1)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        err = f.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    answers.append("" if os.waitstatus_to_exitcode(status) == 0 else (err.strip() or "exit status %d" % status))
print(json.dumps(answers))
"""

# What the probe compiles: double (returned in SSE registers on x86-64), float, vectors, integer
# division, an intrinsic call and a memcpy: the kinds of code a kernel is made of.
_PROBE_IR = """
declare double @llvm.sqrt.f64(double)
declare <4 x double> @llvm.fma.v4f64(<4 x double>, <4 x double>, <4 x double>)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)

define double @d(double %x, double %y) {
  %a = fmul double %x, %y
  %b = call double @llvm.sqrt.f64(double %a)
  %c = fdiv double %b, %y
  ret double %c
}

define float @f(float %x, i64 %n) {
  %c = sitofp i64 %n to float
  %a = fadd float %x, %c
  ret float %a
}

define <4 x double> @v(<4 x double> %x, <4 x double> %y) {
  %a = call <4 x double> @llvm.fma.v4f64(<4 x double> %x, <4 x double> %y, <4 x double> %x)
  ret <4 x double> %a
}

define <8 x float> @vf(<8 x float> %x) {
  %a = fmul <8 x float> %x, %x
  ret <8 x float> %a
}

define i64 @i(i64 %x, i64 %y, ptr %p, ptr %q) {
  %a = mul i64 %x, %y
  %b = sdiv i64 %a, %y
  call void @llvm.memcpy.p0.p0.i64(ptr %p, ptr %q, i64 %b, i1 false)
  %l = load double, ptr %p
  %r = fptosi double %l to i64
  ret i64 %r
}
"""


def _run_child(*args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, timeout=600,
                              env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    except (OSError, subprocess.TimeoutExpired) as err:
        raise CompileError(f"cannot ask LLVM about target CPUs: running {sys.executable} failed: {err}",
                           stage="llvm") from err


def _parse_help(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The CPU and feature names of LLVM's -mcpu=help output."""
    cpus, features, section = [], [], None
    for line in text.splitlines():
        if line.startswith("Available CPUs"):
            section = cpus
        elif line.startswith("Available features"):
            section = features
        elif line.startswith("Use +feature"):
            section = None
        elif section is not None:
            m = _LIST_ROW.match(line)
            if m:
                section.append(m.group(1))
    return tuple(cpus), tuple(features)


def _probe(pairs: list[tuple[str, str]]) -> list[str]:
    """Per (cpu, features): "" when LLVM generates code for it, else LLVM's message."""
    if not pairs:
        return []
    if not hasattr(os, "fork"):
        out = []
        for pair in pairs:
            proc = _run_child("direct", _PROBE_IR, json.dumps([pair]))
            out.append("" if proc.returncode == 0 else (proc.stderr.strip() or f"exit status {proc.returncode}"))
        return out
    proc = _run_child("probe", _PROBE_IR, json.dumps(pairs))
    try:
        answers = json.loads(proc.stdout)
    except ValueError:
        answers = None
    if not isinstance(answers, list) or len(answers) != len(pairs):
        raise CompileError(f"cannot ask LLVM about target CPUs: the probe failed (exit {proc.returncode}):"
                           f" {proc.stderr.strip()[-500:]}", stage="llvm")
    return [_llvm_message(a) for a in answers]


def _llvm_message(err: str) -> str:
    """The line of a child's stderr that says what went wrong (LLVM's own first, warnings skipped)."""
    lines = [line.strip() for line in err.splitlines() if line.strip()]
    for line in lines:
        if "LLVM ERROR" in line or "error:" in line or "Assertion" in line:
            return line
    return lines[-1] if lines else ""


# -- the cache ------------------------------------------------------------------------------------
_lock = threading.Lock()
_tables: dict[str, TargetTable] = {}
_checked: set[tuple[str, str]] = set()


def _reset_after_fork() -> None:   # a fork while another thread asked LLVM must not inherit the held lock
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _cache_file(triple: str) -> str | None:
    """The disk cache of the table for `triple`, in a folder this user owns (created 0700), or None."""
    try:
        root = cache_dir()
    except (OSError, UnicodeError):
        return None
    if root is None:
        return None
    folder = os.path.join(os.fsdecode(root), "targets")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError:
        return None
    if not only_mine(folder, stat.S_ISDIR):
        return None
    version = ".".join(map(str, llvm.llvm_version_info))
    return os.path.join(folder, re.sub(r"[^A-Za-z0-9_.-]", "_", f"llvmlite-{llvmlite.__version__}-llvm-{version}-{triple}")
                        + ".json")


def _load(path: str | None, triple: str) -> TargetTable | None:
    kept = None if path is None else read_private(path)
    if kept is None:
        return None
    try:
        data = json.loads(kept)
        cpus, features, probes = data["cpus"], data["features"], data["probes"]
    except (ValueError, KeyError, TypeError):
        return None
    if not (isinstance(cpus, list) and isinstance(features, list) and isinstance(probes, dict)
            and all(isinstance(x, str) for x in (*cpus, *features, *probes, *probes.values())) and cpus):
        return None
    return TargetTable(triple, tuple(cpus), tuple(features), dict(probes))


def _store(path: str | None, table: TargetTable) -> None:
    if path is not None:
        write_private(path, json.dumps({"triple": table.triple, "cpus": list(table.cpus),
                                        "features": list(table.features), "probes": table.probes}).encode())


def target_table() -> TargetTable:
    """LLVM's CPUs and features for the default triple (from memory, the disk cache, or a child)."""
    triple = llvm.get_default_triple()
    with _lock:
        table = _tables.get(triple)
        if table is None:
            path = _cache_file(triple)
            table = _load(path, triple)
            if table is None:
                proc = _run_child("help")
                cpus, features = _parse_help(proc.stderr)
                if not cpus:
                    raise CompileError(f"cannot ask LLVM about target CPUs: no CPU list in its -mcpu=help output"
                                       f" (exit {proc.returncode}): {proc.stderr.strip()[-500:]}", stage="llvm")
                table = TargetTable(triple, cpus, features)
                _store(path, table)
            _tables[triple] = table
        return table


def _probed(table: TargetTable, pairs: list[tuple[str, str]]) -> list[str]:
    """The probe's answer per pair, probing (in one child) only those not known yet."""
    key = "\0".join
    with _lock:
        todo = [p for p in dict.fromkeys(pairs) if key(p) not in table.probes]
        if todo:
            for pair, answer in zip(todo, _probe(todo)):
                table.probes[key(pair)] = answer
            _store(_cache_file(table.triple), table)
        return [table.probes[key(p)] for p in pairs]


def usable_cpus() -> list[str]:
    """Every CPU name of the table LLVM can generate code for on this triple (probes them all once)."""
    table = target_table()
    return [c for c, answer in zip(table.cpus, _probed(table, [(c, "") for c in table.cpus])) if not answer]


# -- the check ------------------------------------------------------------------------------------
def parse_features(features: str) -> tuple[str, ...]:
    """"+avx2, -fma" -> ("+avx2", "-fma"); a TargetOptionError for an item without its sign or name."""
    if not isinstance(features, str):
        raise TargetOptionError(f"target features must be a str like '+avx2,-fma', got {type(features).__name__}")
    items = [f.strip() for f in features.split(",") if f.strip()]
    for item in items:
        if item[0] not in "+-" or not _NAME.fullmatch(item[1:]):
            raise TargetOptionError(f"target feature {item!r} must be + (enable) or - (disable) followed by an LLVM"
                                    f" feature name, e.g. +avx2 or -fma; separate features with commas")
    return tuple(items)


def _closest(word: str, names, n: int = 5) -> list[str]:
    return difflib.get_close_matches(word, names, n=n, cutoff=0.5) or difflib.get_close_matches(
        word.lower(), [x.lower() for x in names], n=n, cutoff=0.5)


def _usable_closest(table: TargetTable, cpu: str, features: str) -> list[str]:
    """The names of the table closest to `cpu` that LLVM can generate code for (with `features`)."""
    candidates = difflib.get_close_matches(cpu, table.cpus, n=10, cutoff=0.4) or difflib.get_close_matches(
        cpu.lower(), table.cpus, n=10, cutoff=0.4)
    answers = _probed(table, [(c, features) for c in candidates])
    return [c for c, answer in zip(candidates, answers) if not answer][:5]


def _choices(table: TargetTable) -> str:
    arch = table.triple.split("-")[0]
    return (f"use host (this machine's CPU), generic (any {arch} CPU) or an LLVM CPU name (`sprue targets` lists"
            f" every name)")


def check_target(cpu: str, features: str = "") -> None:
    """Raises TargetOptionError unless LLVM can generate code for `cpu` with `features` on the default
    triple (see the module docstring); a CompileError if LLVM cannot be asked."""
    if not isinstance(cpu, str) or not _NAME.fullmatch(cpu):
        raise TargetOptionError(f"target CPU must be host, generic or an LLVM CPU name, got {cpu!r}")
    flags = parse_features(features)
    joined = ",".join(flags)
    if (cpu, joined) in _checked or (cpu in (HOST_CPU, GENERIC_CPU) and not flags):
        return
    table = target_table()
    if cpu.lower() == "help" or any(f[1:].lower() == "help" for f in flags):   # LLVM's -mcpu=help / -mattr=help
        raise TargetOptionError(f"'help' is not a target CPU or feature: `sprue targets` lists the CPU and feature"
                                f" names LLVM knows for {table.triple}; {_choices(table)}")
    for flag in flags:
        if flag[1:] not in table.features:
            close = _closest(flag[1:], table.features)
            raise TargetOptionError(
                f"unknown target feature {flag[1:]!r} (in {flag!r}) for {table.triple}"
                f"{'; the closest LLVM knows: ' + ', '.join(close) if close else ''}. Features are +name (enable)"
                f" or -name (disable), separated by commas (`sprue targets` lists every name)")
    if cpu not in (HOST_CPU, GENERIC_CPU) and cpu not in table.cpus:
        close = _usable_closest(table, cpu, joined)
        raise TargetOptionError(f"unknown target CPU {cpu!r} for {table.triple}"
                                f"{'; the closest LLVM knows: ' + ', '.join(close) if close else ''}; {_choices(table)}")
    answer = _probed(table, [(cpu, joined)])[0]
    if answer:
        what = f"target CPU {cpu!r}" + (f" with features {joined!r}" if flags else "")
        close = [] if flags else _usable_closest(table, cpu, joined)
        raise TargetOptionError(f"LLVM cannot generate {table.triple} code for {what}: {answer}"
                                f"{'; the closest CPUs it can: ' + ', '.join(close) if close else ''}"
                                f"{'' if flags else '; ' + _choices(table)}")
    _checked.add((cpu, joined))


@functools.cache
def host_cpu_features() -> dict[str, bool]:
    """This CPU's features as LLVM names them ({"avx2": True, ...}), asked of LLVM once."""
    return dict(llvm.get_host_cpu_features())


def host_vector_bytes() -> int:
    """Bytes of the host's widest float vector register: 64 (AVX-512), 32 (AVX), else 16."""
    features = host_cpu_features()
    if features.get("avx512f"):
        return 64
    return 32 if features.get("avx") else 16


def machine_cpu_and_features(cpu: str, features: str = "") -> tuple[str, str]:
    """The (cpu, features) strings for create_target_machine: the host's name and features for
    "host" (then the user's, which win: LLVM applies them in order), else `cpu` and the user's."""
    flags = ",".join(parse_features(features))
    if cpu == HOST_CPU:
        host = llvm.get_host_cpu_features().flatten()
        return llvm.get_host_cpu_name(), ",".join(f for f in (host, flags) if f)
    return cpu, flags


def feature_overrides(features: str) -> dict[str, bool]:
    """{"avx2": True, "fma": False} for "+avx2,-fma"."""
    return {f[1:]: f[0] == "+" for f in parse_features(features)}
