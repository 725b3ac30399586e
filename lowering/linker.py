"""The system linker driven directly: the command line the C compiler would give it, learned once
per process, then run without the compiler's driver.

`cc -shared -o lib.so kernel.o ... -lm` spends a third of its ~15 ms in the driver and in gcc's
collect2 before ld starts. The driver's `-###` prints the linker command it would run (start
files, search paths, default libraries) without running it; that line, with the objects and
libraries of each link put where the driver puts its inputs, is the same link. Where binutils'
gold is installed (`-fuse-ld=gold`, as Debian, Ubuntu and Fedora ship it), it is the linker:
it links a kernel's library in ~8 ms where ld.bfd takes ~12 (a 100-layer training step's
objects, medians of 15, this machine). gold defines `__bss_start`, `_edata` and `_end` as
global symbols of the library, which ld.bfd does not: a version script keeps them local, so a
library exports the same names either way.

The line is learned in the background while a kernel is lowered (`prepare`, from
backend.build_shared_library); `command` returns None when it is unknown (a compiler whose `-###`
prints no linker line, such as one on macOS, or SPRUE_DIRECT_LINK=0), and link_shared then runs
the compiler as before, as it does when a direct link fails.
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

__all__ = ["ENV", "LinkerCommand", "command", "forget", "prepare"]

ENV = "SPRUE_DIRECT_LINK"
# placeholders for the driver's dry run: names no real path has
_OUT = "/__sprue_link_output__.so"
_INPUT = "/__sprue_link_input__.o"
# the version script gold needs for the names above (ld.bfd keeps them local by itself)
GOLD_VERSION_SCRIPT = "{ local: __bss_start; _edata; _end; };\n"


@dataclass(frozen=True)
class LinkerCommand:
    """A linker's argument vector with the output and input placeholders found in it."""
    argv: tuple[str, ...]
    out_at: int
    input_at: int
    gold: bool

    def for_link(self, output: str, inputs: Sequence[str], libraries: Sequence[str],
                 version_script: str | None) -> list[str]:
        """The command linking `inputs` then `libraries` (linker options: -lm, --as-needed) into
        `output`, where the driver would put them."""
        argv = list(self.argv)
        argv[self.out_at] = output
        extra = [f"--version-script={version_script}"] if self.gold and version_script else []
        return argv[:self.input_at] + extra + list(inputs) + list(libraries) + argv[self.input_at + 1:]


_lock = threading.Lock()
_known: dict[tuple[str, ...], LinkerCommand | None] = {}
_pending: dict[tuple[str, ...], threading.Thread] = {}


def _enabled() -> bool:
    return os.environ.get(ENV, "1").strip() not in ("0", "no", "off", "false")


def _dry_run(compiler: list[str], flags: list[str]) -> list[str] | None:
    """The last command the driver prints for a shared link with `flags`, as arguments."""
    try:
        proc = subprocess.run([*compiler, *flags, "-###", "-shared", "-fPIC", "-o", _OUT, _INPUT],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    lines = [line for line in proc.stderr.splitlines() if _OUT in line and _INPUT in line
             and not line.startswith("COLLECT_GCC_OPTIONS")]
    if not lines:
        return None
    try:
        return shlex.split(lines[-1])
    except ValueError:
        return None


def _real_linker(compiler: list[str], argv0: str, gold: bool) -> str | None:
    """The program to run: the line's own unless it is gcc's collect2 (which runs ld, or
    ld.gold under -fuse-ld=gold, found as the driver finds its programs)."""
    if Path(argv0).name != "collect2":
        return argv0 if os.path.isabs(argv0) else shutil.which(argv0)
    name = "ld.gold" if gold else "ld"
    try:
        found = subprocess.run([*compiler, f"-print-prog-name={name}"], capture_output=True, text=True,
                               timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return found if found and os.path.isabs(found) else shutil.which(found or name)


def _parse(compiler: list[str], argv: list[str], gold: bool) -> LinkerCommand | None:
    program = _real_linker(compiler, argv[0], gold)
    if program is None:
        return None
    args: list[str] = []
    skip = False
    for arg in argv[1:]:
        # gcc's LTO plugin and its options: no input here is LTO bitcode; the plugin's resolution
        # file is a temporary of the dry run's
        if skip:
            skip = False
            continue
        if arg == "-plugin":
            skip = True
            continue
        if arg.startswith("-plugin-opt=") or arg == "-fuse-ld=gold":
            continue
        args.append(arg)
    if args.count(_OUT) != 1 or args.count(_INPUT) != 1:
        return None
    argv_out = (program, *args)
    return LinkerCommand(argv_out, argv_out.index(_OUT), argv_out.index(_INPUT), gold)


def _learn(compiler: tuple[str, ...]) -> LinkerCommand | None:
    for gold in (True, False):
        argv = _dry_run(list(compiler), ["-fuse-ld=gold"] if gold else [])
        if argv is not None:
            found = _parse(list(compiler), argv, gold)
            if found is not None:
                return found
    return None


def _learn_into(compiler: tuple[str, ...]) -> None:
    found = _learn(compiler)
    with _lock:
        _known[compiler] = found
        _pending.pop(compiler, None)


def prepare(compiler: list[str]) -> None:
    """Starts learning the linker command for `compiler` in the background, once per process."""
    key = tuple(compiler)
    if not _enabled():
        return
    with _lock:
        if key in _known or key in _pending:
            return
        thread = threading.Thread(target=_learn_into, args=(key,), name="sprue-linker-dry-run", daemon=True)
        _pending[key] = thread
    thread.start()


def command(compiler: list[str]) -> LinkerCommand | None:
    """The linker command for `compiler` (waiting for its dry run if under way), or None."""
    key = tuple(compiler)
    if not _enabled():
        return None
    prepare(compiler)
    with _lock:
        thread = _pending.get(key)
    if thread is not None:
        thread.join()
    with _lock:
        return _known.get(key)


def forget(compiler: list[str]) -> None:
    """A direct link failed where the compiler's succeeded: this process links through it."""
    with _lock:
        _known[tuple(compiler)] = None


def _after_fork_in_child() -> None:
    """A forked child has none of its parent's threads: dry runs under way are started again."""
    global _lock
    _lock = threading.Lock()
    _pending.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)
