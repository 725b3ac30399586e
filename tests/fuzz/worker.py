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

import json
import os
import resource
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
import faulthandler  # noqa: E402
import signal  # noqa: E402
faulthandler.register(signal.SIGUSR1, all_threads=True)

_REPLY = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)
sys.stdout = sys.stderr
_REQUEST = os.fdopen(os.dup(0), "rb", buffering=0)

os.environ.setdefault("SPRUE_NO_CACHE", "1")   # no compile-cache entries for fuzzed programs

import numpy as np  # noqa: E402

import sprue  # noqa: E402
from sprue.errors import SprueError  # noqa: E402
from sprue import saved  # noqa: E402

_SUFFIX = {"jaxpr": ".jaxpr", "stablehlo": ".mlir"}


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
    from sprue.lowering.stablehlo import lower
    from sprue.lowering.pipeline import lower_to_llvm_ir
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


def run(kind: str, data: bytes, level: str, workdir: Path) -> dict:
    path = workdir / f"case{_SUFFIX[kind]}"
    path.write_bytes(data)
    stage = _Stage()
    try:
        if kind == "jaxpr":
            _jaxpr_case(path, level, stage)
        else:
            _stablehlo_case(path, level, stage)
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
