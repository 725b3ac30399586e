"""The fuzzing harness's child process: runs cases sent over a pipe, one after another.

Started by harness.Worker as `python worker.py`; never imported by the tests. Protocol (binary,
on stdin/stdout): a request is a 4-byte big-endian length and a JSON header {"kind", "level"},
then a 4-byte length and the case's bytes; the reply is a 4-byte length and a JSON object
{"status": "ok" | "error" | "exception", "stage", "type", "message", "traceback"}. Anything the
compiler prints goes to stderr (fd 1 is pointed at fd 2 before sprue is imported), so a stray
print cannot corrupt the replies.

A case is the input of `sprue.load` (kind "jaxpr": a saved program or a jaxpr as JAX prints it;
kind "stablehlo": a `.mlir` module), taken as far as its level says:

    parse   read the file and build the program (jaxpr: the ClosedJaxpr; StableHLO: the prepared module)
    lower   ... and lower it through the MLIR pipeline to LLVM IR (no LLVM codegen, no linking)
    call    sprue.load (the whole way: a shared library) and call it on zeros of its argument types

"error" is a SprueError (the clean rejection every bad input must end in); "exception" is any other
exception escaping the compiler, which the harness counts as a crash.
"""
from __future__ import annotations

import faulthandler
import json
import os
import resource
import shutil
import signal
import struct
import sys
import tempfile
import traceback
from pathlib import Path

# Bound the address space: a runaway allocation becomes a MemoryError/bad_alloc in this child
# instead of a machine that swaps. FUZZ_WORKER_MEMORY_MB (default 6144) sets the bound.
_MEM_MB = int(os.environ.get("FUZZ_WORKER_MEMORY_MB", "6144"))
if _MEM_MB > 0:
    try:
        resource.setrlimit(resource.RLIMIT_AS, (_MEM_MB << 20, _MEM_MB << 20))
    except (ValueError, OSError):
        pass
# No core files from the crashes we are looking for.
try:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
except (ValueError, OSError):
    pass

# The harness sends SIGUSR1 before killing a hung case: the Python stacks go to stderr (the note).
faulthandler.register(signal.SIGUSR1, all_threads=True)

_REPLY = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)
sys.stdout = sys.stderr
_REQUEST = os.fdopen(os.dup(0), "rb", buffering=0)

os.environ.setdefault("SPRUE_NO_CACHE", "1")   # no compile-cache entries for fuzzed programs

# Imported only now, under the memory bound and with fd 1 already moved away from the reply pipe:
# nothing a library writes while it loads can corrupt a reply.
import numpy as np  # noqa: E402

import sprue  # noqa: E402
from sprue.api import saved  # noqa: E402
from sprue.base.errors import SprueError  # noqa: E402

_SUFFIX = {"jaxpr": ".jaxpr", "stablehlo": ".mlir", "huge": ".jaxpr", "options": ".json", "fork": ".json"}


def _read_exact(n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = _REQUEST.read(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def _read_message() -> bytes | None:
    head = _read_exact(4)
    if head is None:
        return None
    return _read_exact(struct.unpack(">I", head)[0])


def _reply(obj: dict) -> None:
    data = json.dumps(obj).encode()
    _REPLY.write(struct.pack(">I", len(data)) + data)


def _zeros(spec, size: int = 2):
    shape = tuple(size if not isinstance(d, int) else d for d in spec.shape)
    if any(d > 1 << 16 for d in shape) or int(np.prod(shape, dtype=np.int64)) > 1 << 20:
        return None   # too big to bother running
    return np.zeros(shape, spec.dtype)


class _Stage:
    name = "start"


def _jaxpr_case(path: Path, level: str, stage: _Stage) -> None:
    stage.name = "read"
    text = saved.read_program_text(path)
    if saved._is_mlir(path, text):
        return _stablehlo_case(path, level, stage)
    if level == "call":
        stage.name = "load"
        f = sprue.load(path)
        args = [_zeros_aval(v.aval) for v in f.jaxpr.jaxpr.invars[f.n_implicit:]]
        if any(a is None for a in args):
            return
        stage.name = "call"
        f(*args)
        return
    stage.name = "parse"
    closed, n_implicit, names = saved.parse_saved(text, str(path))
    if level == "parse":
        return
    from sprue.lowering.pipeline import lower_to_llvm_ir
    from sprue.lowering.stablehlo import lower
    stage.name = "lower-stablehlo"
    lowered = lower(closed, name="main")
    stage.name = "lower-llvm"
    lower_to_llvm_ir(lowered.text)


def _zeros_aval(aval):
    shape = tuple(d if isinstance(d, int) else 2 for d in aval.shape)
    if any(d > 1 << 16 for d in shape) or int(np.prod(shape, dtype=np.int64)) > 1 << 20:
        return None
    return np.zeros(shape, aval.dtype)


def _stablehlo_case(path: Path, level: str, stage: _Stage) -> None:
    from sprue.lowering.stablehlo_input import prepare
    if level == "call":
        stage.name = "load"
        f = sprue.load(path)
        args = [_zeros(s) for s in f.signature.args]
        if any(a is None for a in args):
            return
        stage.name = "call"
        f(*args)
        return
    stage.name = "prepare"
    prepared = prepare(path)
    if level == "parse":
        return
    from sprue.lowering.pipeline import lower_to_llvm_ir
    stage.name = "lower-llvm"
    lower_to_llvm_ir(prepared.text)


def _huge_case(path: Path, level: str, stage: _Stage) -> None:
    """A program with a huge static intermediate, loaded and called on small arguments: the
    allocation is reached, and must fail with a SprueError (SprueMemoryError)."""
    stage.name = "load"
    f = sprue.load(path)
    args = [_zeros_aval(v.aval) for v in f.jaxpr.jaxpr.invars[f.n_implicit:]]
    stage.name = "call"
    out = f(*args)
    raise AssertionError(f"a program with a huge static array ran and returned {type(out).__name__}")


# A small kernel for the options class: every accepted name and target must give a library whose
# header compiles as C and C++ and links into a host.
_OPTIONS_PROGRAM = "{ lambda ; a:f64[3] b:f64[]. let c:f64[3] = mul a b in (c,) }\n"
_HOST_C = '#include "{name}.h"\nint main(void) {{ return 0; }}\n'


def _options_case(path: Path, level: str, stage: _Stage) -> None:
    import subprocess

    from sprue.tools.compile import Options, compile_file
    opts = json.loads(path.read_text())
    out = path.parent / "options_out"
    shutil.rmtree(out, ignore_errors=True)
    src = path.parent / "kernel.jaxpr"
    src.write_text(_OPTIONS_PROGRAM)
    stage.name = "compile"
    compile_file(Options(src, out, opts["name"], set(), 1, opts["cpu"], False, opts["features"]), lambda line: None)
    headers = list(out.glob("*.h"))
    libs = list(out.glob("lib*.so"))
    if len(headers) != 1 or len(libs) != 1:
        raise AssertionError(f"compile wrote {sorted(p.name for p in out.iterdir())}, not one header and one library")
    name = headers[0].stem
    for lang, cc in (("c", "cc"), ("c++", "c++")):
        stage.name = f"header-{lang}"
        host = out / ("host.c" if lang == "c" else "host.cpp")
        host.write_text(_HOST_C.format(name=name))
        proc = subprocess.run([cc, "-Wall", "-Werror", "-I", str(out), str(host), str(libs[0]), "-o", str(out / "host")],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise AssertionError(f"the header of kernel {name!r} does not compile or link as {lang}:\n{proc.stderr[-2000:]}")


def _fork_case(path: Path, level: str, stage: _Stage) -> None:
    """fork() while other threads compile: every child must compile (or reuse) a function, call it
    and exit 0 within CHILD_SECONDS (a child that inherited a lock held by a compiling thread hangs)."""
    import threading
    import time

    import sprue.numpy as jnp
    plan = json.loads(path.read_text())
    stop = threading.Event()
    failures: list[BaseException] = []

    def compile_loop(t: int) -> None:
        k = 0
        try:
            while not stop.is_set():
                k += 1
                scale = float(t * 1000 + k)
                f = sprue.qjit(lambda x: jnp.sin(x) * scale)
                f(np.ones(plan["size"]))
        except BaseException as e:   # noqa: BLE001  (reported by the case, not lost in the thread)
            failures.append(e)

    stage.name = "threads"
    threads = [threading.Thread(target=compile_loop, args=(t,), daemon=True) for t in range(plan["threads"])]
    for t in threads:
        t.start()
    time.sleep(plan["delay_ms"] / 1000)
    reused = sprue.qjit(lambda x: x * 2.0)
    reused(np.arange(3.0))
    stage.name = "fork"
    pids = []
    for c in range(plan["children"]):
        pid = os.fork()
        if pid == 0:   # the child: compile a new function (or call one compiled before the fork)
            code = 3
            try:
                g = sprue.qjit(lambda x: x * 2.0 + c) if plan["child_compiles"] else reused
                want = np.arange(3.0) * 2.0 + (c if plan["child_compiles"] else 0)
                code = 0 if np.array_equal(g(np.arange(3.0)), want) else 2
            finally:
                os._exit(code)
        pids.append(pid)
    stage.name = "children"
    deadline = time.monotonic() + CHILD_SECONDS
    codes = {}
    while len(codes) < len(pids):
        for pid in pids:
            if pid not in codes:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    codes[pid] = os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            for pid in set(pids) - set(codes):
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            stop.set()
            raise AssertionError(f"{len(pids) - len(codes)} of {len(pids)} forked children hung"
                                 f" (fork {plan['delay_ms']} ms into a compile)")
        time.sleep(0.01)
    stop.set()
    for t in threads:
        t.join(60)
    if failures:
        raise failures[0]
    bad = {pid: code for pid, code in codes.items() if code != 0}
    if bad:
        raise AssertionError(f"forked children failed (exit codes {sorted(bad.values())}: 2 wrong result, 3 an exception)")


CHILD_SECONDS = 15.0


def run(kind: str, data: bytes, level: str, workdir: Path) -> dict:
    path = workdir / f"case{_SUFFIX[kind]}"
    path.write_bytes(data)
    stage = _Stage()
    try:
        if kind == "jaxpr":
            _jaxpr_case(path, level, stage)
        elif kind == "stablehlo":
            _stablehlo_case(path, level, stage)
        elif kind == "huge":
            _huge_case(path, level, stage)
        elif kind == "options":
            _options_case(path, level, stage)
        else:
            _fork_case(path, level, stage)
        return {"status": "ok", "stage": stage.name}
    except SprueError as e:
        return {"status": "error", "stage": stage.name, "type": type(e).__name__, "message": str(e)[:4000]}
    except KeyboardInterrupt:
        raise
    except BaseException as e:   # noqa: BLE001  (SystemExit, RecursionError, MemoryError included)
        return {"status": "exception", "stage": stage.name, "type": type(e).__name__, "message": str(e)[:4000],
                "traceback": "".join(traceback.format_exception(e))[-8000:]}


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="sprue-fuzz-case-"))
    _reply({"status": "ready", "pid": os.getpid()})
    while True:
        head = _read_message()
        if head is None:
            return
        req = json.loads(head)
        data = _read_message()
        if data is None:
            return
        _reply(run(req["kind"], data, req.get("level", "lower"), workdir))


if __name__ == "__main__":
    main()
