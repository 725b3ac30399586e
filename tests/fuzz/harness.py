"""Running fuzz cases in a child process, and classifying what happened.

    with Harness() as h:
        r = h.run_case("jaxpr", data, timeout=10)     # Result(outcome="ok" | "crash" | "hang", ...)

A persistent worker process (worker.py) receives the cases over a pipe: starting one costs about
1.5 s of imports, a case that is rejected at parse time a millisecond. The worker is restarted after
a crash (it died on a signal or exited), a hang (no reply within the timeout: it is killed), or an
exception that is not a SprueError (its interpreter may be left in a bad state: a RecursionError,
a MemoryError).

Outcomes:
    OK      the case compiled, or was rejected with a SprueError
    CRASH   the worker died (signal, exit), or an exception other than a SprueError escaped
            (AttributeError, KeyError, IndexError, RecursionError, ... are compiler bugs too)
    HANG    no answer within the timeout

`run_case(kind, data, timeout)` is the module-level shortcut on a shared harness. Failing inputs are
kept with `save_regression` as regressions/<kind>-<sha1>.<ext> (test_fuzz_short.py replays them).
"""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKER = HERE / "worker.py"
CORPUS = HERE / "corpus"
REGRESSIONS = HERE / "regressions"
# The readers' kinds (mutated text, run to the harness's level), then the classes that are programs or
# options (classes.py), which the worker always takes the whole way: a huge static shape must reach
# its allocation, a kernel name its header, a fork its child's compile and call.
READERS = ("jaxpr", "stablehlo")
KINDS = (*READERS, "huge", "options", "fork")
EXT = {"jaxpr": "jaxpr", "stablehlo": "mlir", "huge": "jaxpr", "options": "json", "fork": "json"}
LEVELS = ("parse", "lower", "call")

OK, CRASH, HANG = "ok", "crash", "hang"
STARTUP_TIMEOUT = 120.0


@dataclass
class Result:
    outcome: str                 # OK / CRASH / HANG
    detail: str = ""             # the SprueError's or the crash's one-line summary
    status: str = ""             # the worker's status: ok / error / exception / died / timeout
    stage: str = ""              # where the worker was: read, parse, prepare, lower-llvm, call, ...
    error_type: str = ""         # the exception's class name
    traceback: str = ""          # for a leaked exception: its traceback; for a death: the stderr tail
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.outcome == OK

    def signature(self) -> str:
        """What identifies the bug (for de-duplication): outcome, stage, exception type, and the
        innermost frame of sprue's code when there is a traceback."""
        frame = ""
        for line in self.traceback.splitlines():
            s = line.strip()
            if s.startswith("File ") and ("/frontend/" in s or "/lowering/" in s or "/runtime/" in s):
                frame = s.split("/")[-1]
        return f"{self.outcome}:{self.stage}:{self.error_type}:{frame}"

    def describe(self) -> str:
        s = f"{self.outcome.upper()} at {self.stage or '?'}: {self.error_type or self.status}"
        if self.detail:
            s += f": {self.detail}"
        if self.traceback and self.outcome != OK:
            tb = self.traceback.rstrip()
            s += "\n" + (tb if len(tb) <= 5000 else "...\n" + tb[-5000:])
        return s


class WorkerDied(Exception):
    pass


class Worker:
    """One child process running worker.py."""

    def __init__(self, level: str = "lower", temp_root: Path | None = None):
        self.level = level
        self.tmp = Path(tempfile.mkdtemp(prefix="sprue-fuzz-", dir=temp_root))
        self.stderr_path = self.tmp / "stderr.txt"
        self.proc: subprocess.Popen | None = None
        self.started = 0

    def start(self) -> None:
        env = dict(os.environ)
        env["TMPDIR"] = str(self.tmp)
        env.setdefault("SPRUE_NO_CACHE", "1")
        env["PYTHONFAULTHANDLER"] = "1"      # a fatal signal prints the Python stack to stderr
        self.stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen([sys.executable, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, env=env, start_new_session=True, cwd=str(self.tmp))
        self.started += 1
        ready = self._read_reply(STARTUP_TIMEOUT)
        if ready is None or ready.get("status") != "ready":
            tail = self.stderr_tail()
            self.kill()
            raise RuntimeError(f"the fuzz worker did not start:\n{tail}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for f in (self.proc.stdin, self.proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass
            self.proc = None
        if getattr(self, "stderr", None) is not None:
            self.stderr.close()
            self.stderr = None

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def stderr_tail(self, n: int = 4000) -> str:
        try:
            data = self.stderr_path.read_bytes()
        except OSError:
            return ""
        return data[-n:].decode("utf-8", "replace")

    def _read_exact(self, n: int, deadline: float) -> bytes | None:
        fd = self.proc.stdout.fileno()
        buf = b""
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                return None
            chunk = os.read(fd, n - len(buf))
            if not chunk:
                raise WorkerDied()
            buf += chunk
        return buf

    def _read_reply(self, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        try:
            head = self._read_exact(4, deadline)
            if head is None:
                return None
            body = self._read_exact(struct.unpack(">I", head)[0], deadline)
        except WorkerDied:
            raise
        if body is None:
            return None
        return json.loads(body)

    def run(self, kind: str, data: bytes, timeout: float) -> Result:
        if not self.alive():
            self.kill()
            self.start()
        # Truncate the stderr log so that a crash shows this case's output only.
        self.stderr.seek(0)
        self.stderr.truncate()
        header = json.dumps({"kind": kind, "level": self.level}).encode()
        t0 = time.monotonic()
        try:
            self.proc.stdin.write(struct.pack(">I", len(header)) + header + struct.pack(">I", len(data)) + data)
            self.proc.stdin.flush()
            reply = self._read_reply(timeout)
        except (BrokenPipeError, WorkerDied):
            return self._died(time.monotonic() - t0)
        dt = time.monotonic() - t0
        if reply is None:
            try:   # worker.py dumps its Python stacks on SIGUSR1: where it hung
                os.kill(self.proc.pid, signal.SIGUSR1)
                time.sleep(0.5)
            except (ProcessLookupError, PermissionError):
                pass
            tail = self.stderr_tail()
            self.kill()
            stage, innermost = "", ""
            for line in tail.splitlines():
                if "File " in line and not innermost:
                    innermost = line   # faulthandler prints the innermost frame first
                if "File " in line and ("frontend/" in line or "lowering/" in line):
                    stage = line.strip()
                    break
            if "runtime/" in innermost and (b"while[" in data or b"stablehlo.while" in data):
                # the compiled code itself ran past the timeout: a while loop whose condition never
                # fails on the zero arguments of a call-level case (the program's meaning, not a bug)
                return Result(OK, "the compiled program did not terminate on zero arguments (a while loop)",
                              "nonterminating", "call", "", traceback=tail, seconds=dt)
            return Result(HANG, f"no answer within {timeout:g} s", "timeout", stage, "Timeout", traceback=tail,
                          seconds=dt)
        status = reply.get("status")
        r = Result(OK if status in ("ok", "error") else CRASH, reply.get("message", "").split("\n")[0][:300],
                   status, reply.get("stage", ""), reply.get("type", ""), reply.get("traceback", ""), dt,
                   {"message": reply.get("message", "")})
        if status == "exception":
            self.kill()   # a RecursionError or MemoryError may leave the interpreter in a bad state
        return r

    def _died(self, dt: float) -> Result:
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        tail = self.stderr_tail()
        self.kill()
        if code is not None and code < 0:
            try:
                what = signal.Signals(-code).name
            except ValueError:
                what = f"signal {-code}"
        else:
            what = f"exit status {code}"
        stage = ""
        for line in tail.splitlines():
            if "File " in line and ("frontend/" in line or "lowering/" in line):
                stage = line.strip()
                break   # faulthandler prints the innermost frame first
        return Result(CRASH, f"the worker died: {what}", "died", stage, what, tail, dt)


class Harness:
    """A worker per level, restarted as needed. Use as a context manager."""

    def __init__(self, level: str = "lower", temp_root: Path | None = None):
        """temp_root: where the worker's folder goes (default: the system temp folder)."""
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}")
        self.worker = Worker(level, temp_root)
        self.cases = 0

    def run_case(self, kind: str, data: bytes, timeout: float = 10.0) -> Result:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}")
        self.cases += 1
        return self.worker.run(kind, bytes(data), timeout)

    @property
    def restarts(self) -> int:
        return max(0, self.worker.started - 1)

    def close(self) -> None:
        self.worker.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_shared: dict[str, Harness] = {}


def run_case(kind: str, data: bytes, timeout: float = 10.0, level: str = "lower") -> Result:
    """Run one case on a harness shared by the whole process (closed at exit)."""
    h = _shared.get(level)
    if h is None:
        h = _shared[level] = Harness(level)
        atexit.register(h.close)
    return h.run_case(kind, data, timeout)


# -- corpus and regressions -------------------------------------------------------------------
def sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def regression_path(kind: str, data: bytes) -> Path:
    return REGRESSIONS / f"{kind}-{sha1(data)}.{EXT[kind]}"


def save_regression(kind: str, data: bytes, result: Result | None = None) -> Path:
    """Keep a failing input as regressions/<kind>-<sha1>.<ext>; its outcome goes in a note beside
    it (regressions/<same name>.txt), which the replay ignores."""
    REGRESSIONS.mkdir(exist_ok=True)
    path = regression_path(kind, data)
    if not path.exists():
        path.write_bytes(data)
    if result is not None:
        note = path.with_name(path.name + ".txt")
        if not note.exists():
            note.write_text(result.describe() + "\n")
    return path


def regressions() -> list[tuple[str, Path]]:
    """(kind, path) of every kept failing input."""
    out = []
    if REGRESSIONS.is_dir():
        for p in sorted(REGRESSIONS.iterdir()):
            kind = p.name.split("-", 1)[0]
            if kind in KINDS and p.suffix == "." + EXT[kind]:
                out.append((kind, p))
    return out


def corpus(kind: str, hostile: bool = False) -> list[tuple[str, bytes]]:
    """(name, bytes) of the seed files of one kind, sorted by name: programs that compile, or with
    `hostile`, inputs made to break the reader (corpus/<kind>_hostile: foreign dialects, forged
    resources, bytecode), each of which must load or be rejected with a SprueError."""
    d = CORPUS / (f"{kind}_hostile" if hostile else kind)
    return [(p.name, p.read_bytes()) for p in sorted(d.glob(f"*.{EXT[kind]}"))] if d.is_dir() else []


def minimize(h: Harness, kind: str, data: bytes, bad: Result, timeout: float = 10.0, budget: float = 60.0) -> bytes:
    """A smaller input failing the same way (same Result.signature()): removes chunks of lines,
    then of bytes (ddmin-style), within `budget` seconds."""
    sig = bad.signature()
    deadline = time.monotonic() + budget

    def fails(candidate: bytes) -> bool:
        if time.monotonic() > deadline:
            return False
        r = h.run_case(kind, candidate, timeout)
        return not r.ok and r.signature() == sig

    def reduce(units: list[bytes]) -> list[bytes]:
        n = 2
        while len(units) >= 2 and time.monotonic() < deadline:
            chunk = max(1, len(units) // n)
            removed = False
            for start in range(0, len(units), chunk):
                cand = units[:start] + units[start + chunk:]
                if cand and fails(b"".join(cand)):
                    units, n, removed = cand, max(n - 1, 2), True
                    break
            if not removed:
                if chunk == 1:
                    break
                n = min(len(units), n * 2)
        return units

    lines = reduce(data.splitlines(keepends=True))
    data = b"".join(lines)
    if len(data) <= 4096:
        data = b"".join(reduce([bytes([b]) for b in data]))
    return data
