"""The on-disk cache of compiled libraries.

A compilation (qjit, sprue.load of a saved program) is looked up here before anything is lowered:
a hit loads the cached library through the cffi runtime and never imports the MLIR bindings
(torch_mlir) or llvmlite; a miss compiles as before, into a fresh entry that is then published
atomically.

Location: $SPRUE_CACHE_DIR, else $XDG_CACHE_HOME/sprue, else ~/.cache/sprue. The cache is off when
SPRUE_CACHE_DIR is "off" (or 0, false, no, none, disabled) or SPRUE_NO_CACHE is set to anything but
"" / "0". Compilations that keep their intermediate files (keep_intermediate) bypass it.

The key is the sha256 of a JSON document (`key_components`) holding

- the cache format (FORMAT) and sprue.__version__;
- the jaxpr: its canonical text (str(closed_jaxpr)) plus what the text does not show: the values
  (dtype, shape, bytes) of the consts of the jaxpr and of every closed jaxpr nested in a
  parameter, array-valued parameters, and every equation's source location (it reaches the
  StableHLO locations and the run-time check messages);
- the number of implicit size arguments and the argument names (they shape the signature);
- the build options (optimization level, target CPU) as passed to build_shared_library;
- the compiler itself: the path, size and mtime of every module of sprue.lowering (the lowering
  rules, the pass pipelines of pipeline.STAGES and their options, the backend) and of the
  modules that make the signature and shape function (frontend qjit.py, shape_functions.py, this
  module; runtime signature.py, shape_function.py) -- any edit is a new key, so a fixed lowering
  rule never hides behind a stale entry (stat, not content: hashing ~300 KB of sources would
  cost every first call a few ms); the versions of torch-mlir and llvmlite (their dist-info
  names plus size and mtime of the dist-info RECORD, so a reinstall is a new key); and $CC;
- the target: sys.platform, the machine (os.uname), and, when compiling for the host CPU, a
  fingerprint of that CPU. On Linux it is a sha256 of the first processor block of
  /proc/cpuinfo minus the per-core and per-moment lines (vendor, family, model, model name,
  stepping, flags; on ARM implementer, architecture, variant, part, revision, features): the
  facts LLVM's host CPU name and features derive from, read without llvmlite. Elsewhere it is
  platform.processor() only, so a cache directory shared between different CPUs of one
  architecture is safe on Linux only.

None of this imports torch_mlir or llvmlite: the sources and the toolchain's dist-info folders
are found with importlib.util.find_spec (which imports no package it finds) and only stat'ed.
The per-process part is computed once; a key then costs printing the jaxpr and hashing it.

An entry is a directory `<root>/<key[:2]>/<key>/` holding

    lib.so               the library (read-only)
    lib.signature.json   its runtime signature (sprue.runtime.load(<entry>) works on the folder)
    stablehlo.mlir       the StableHLO module (`f.mlir` on a hit)
    manifest.json        format, key, and the size and sha256 of each of the three files

Writes are atomic: an entry is built in `<root>/.tmp/<unique>/` and renamed into place; when the
rename finds an entry already there (another process or thread compiled the same function at the
same time), that one is used and ours discarded. Every lookup verifies the manifest's sizes and
hashes before loading anything: a truncated, tampered or half-deleted entry is moved to
`<root>/.trash/`, deleted, logged as a warning (logger "sprue.compile_cache"), and compiled again;
it is never loaded. (The hashes detect corruption; they are no defence against someone who may
write the cache directory, who could rewrite the manifest too.)

`stats` counts hits, misses, builds (entries published), races lost and corrupt entries found in
this process.
"""
from __future__ import annotations

import errno
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["FORMAT", "CompileCache", "Entry", "cache_dir", "clear", "default_cache", "key_components", "stats"]


class _LazyLog:
    """logging.getLogger("sprue.compile_cache"), imported at the first message (a cache hit logs
    nothing and should not pay for importing logging)."""

    def __getattr__(self, level: str):
        import logging
        return getattr(logging.getLogger("sprue.compile_cache"), level)


log = _LazyLog()

try:   # the interpreter's own SHA-256: importing hashlib loads OpenSSL, which costs a cache hit ms
    from _sha2 import sha256 as _small_sha256        # Python 3.12+
except ImportError:
    try:
        from _sha256 import sha256 as _small_sha256  # Python 3.11
    except ImportError:
        _small_sha256 = None
_BIG = 1 << 22   # from 4 MiB on, OpenSSL's SHA-256 (several times faster) is worth importing


def sha256(nbytes: int = 0):
    """A SHA-256 hash object for about `nbytes` of data (same digests either way)."""
    if _small_sha256 is not None and nbytes < _BIG:
        return _small_sha256()
    import hashlib
    return hashlib.sha256()

FORMAT = "sprue compile cache 1"

LIBRARY = "lib.so"
SIGNATURE = "lib.signature.json"    # sprue.runtime.signature_path(LIBRARY)
STABLEHLO = "stablehlo.mlir"
MANIFEST = "manifest.json"
_FILES = (LIBRARY, SIGNATURE, STABLEHLO)

_OFF = {"off", "0", "false", "no", "none", "disable", "disabled"}
_STALE_SECONDS = 24 * 3600   # staging folders older than this were left by a process that died

stats: dict[str, int] = {"hits": 0, "misses": 0, "builds": 0, "races": 0, "corrupt": 0}
_stats_lock = threading.Lock()


def count(what: str) -> None:
    """stats[what] += 1 (thread-safe)."""
    with _stats_lock:
        stats[what] += 1


# -- where -------------------------------------------------------------------------------------
def cache_dir() -> Path | None:
    """The cache's root folder from the environment, or None when the cache is disabled."""
    no = os.environ.get("SPRUE_NO_CACHE", "").strip()
    if no and no != "0":
        return None
    env = os.environ.get("SPRUE_CACHE_DIR", "").strip()
    if env:
        return None if env.lower() in _OFF else Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "sprue"


_unusable: set[Path] = set()   # roots we failed to create: warned once, then skipped


def default_cache() -> "CompileCache | None":
    """The cache at cache_dir(), or None when disabled or its folder cannot be created."""
    root = cache_dir()
    if root is None or root in _unusable:
        return None
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        _unusable.add(root)
        log.warning("sprue: compile cache disabled: cannot create %s: %s", root, e)
        return None
    return CompileCache(root)


def clear(root: str | os.PathLike | None = None) -> None:
    """Delete every entry of the cache at `root` (default: cache_dir())."""
    root = Path(root) if root is not None else cache_dir()
    if root is not None and root.is_dir():
        shutil.rmtree(root, ignore_errors=True)


# -- the key -----------------------------------------------------------------------------------
def _update_array(h, value) -> None:
    a = np.ascontiguousarray(np.asarray(value))
    h.update(f"{a.dtype.str}{a.shape}|".encode())
    h.update(a.tobytes())


def _update_param(h, value) -> None:
    from .core import ClosedJaxpr, Jaxpr
    if isinstance(value, ClosedJaxpr):
        h.update(b"closed(")
        for c in value.consts:
            _update_array(h, c)
        _update_jaxpr(h, value.jaxpr)
        h.update(b")")
    elif isinstance(value, Jaxpr):
        _update_jaxpr(h, value)
    elif isinstance(value, (tuple, list)):
        h.update(b"(")
        for v in value:
            _update_param(h, v)
        h.update(b")")
    elif isinstance(value, np.ndarray):   # printed with "..." past a size: the bytes are the value
        _update_array(h, value)
    else:
        h.update(b".")  # shown exactly by the text


def _update_jaxpr(h, jaxpr) -> None:
    for eqn in jaxpr.eqns:
        h.update(f"@{eqn.source_info or ''}\n".encode())
        for k in sorted(eqn.params):
            h.update(f"{k}=".encode())
            _update_param(h, eqn.params[k])


def _nbytes(closed) -> int:
    """The bytes of the top-level consts (nested ones are usually small)."""
    return sum(getattr(c, "nbytes", 0) for c in closed.consts)


def jaxpr_digest(closed) -> str | None:
    """sha256 of the closed jaxpr: its text and what the text does not show (see the module
    docstring). None when the text holds an object address (" at 0x"), which differs between
    processes: such a jaxpr is compiled but not cached."""
    text = str(closed)
    if " at 0x" in text:
        return None
    h = sha256(_nbytes(closed))
    h.update(text.encode())
    h.update(b"\nconsts:")
    for c in closed.consts:
        _update_array(h, c)
    h.update(b"\neqns:")
    _update_jaxpr(h, closed.jaxpr)
    return h.hexdigest()


_SOURCES = {   # package -> modules whose text is part of every key ("*": all of its modules)
    "sprue.lowering": ("*",),
    "sprue": ("qjit.py", "shape_functions.py", "compile_cache.py"),
    "sprue.runtime": ("signature.py", "shape_function.py"),
}
_compiler: dict | None = None
_compiler_lock = threading.Lock()


def _package_dir(name: str) -> Path | None:
    """The folder of a package, without importing it (a top-level package) or only its parents."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _sources_fingerprint() -> str:
    """The compiler's sources by path, size and modification time (stat only: reading and hashing
    them would cost a cache hit milliseconds; any edit or checkout changes the mtime)."""
    parts = []
    for package, modules in _SOURCES.items():
        d = _package_dir(package)
        if d is None:
            parts.append(f"{package}: missing")
            continue
        if modules == ("*",):
            parts += _tree_stats(str(d))
            continue
        for m in modules:
            try:
                st = os.stat(d / m)
                parts.append(f"{d / m} {st.st_size} {st.st_mtime_ns}")
            except OSError:
                parts.append(f"{d / m} missing")
    return "\n".join(parts)


def _tree_stats(folder: str) -> list[str]:
    """'path size mtime' of every .py file under `folder`, sorted."""
    out = []
    try:
        with os.scandir(folder) as it:
            for e in it:
                if e.name.endswith(".py") and e.is_file():
                    st = e.stat()
                    out.append(f"{e.path} {st.st_size} {st.st_mtime_ns}")
                elif e.is_dir() and e.name != "__pycache__" and not e.name.startswith("."):
                    out += _tree_stats(e.path)
    except OSError:
        out.append(f"{folder} unreadable")
    return sorted(out)


def _distribution(name: str) -> str:
    """'<dist-info folder> <RECORD size> <RECORD mtime>' of an installed package, found beside it."""
    d = _package_dir(name)
    if d is None:
        return "missing"
    prefix = name.replace("-", "_") + "-"
    try:
        infos = sorted(e for e in os.listdir(d.parent) if e.startswith(prefix) and e.endswith(".dist-info"))
    except OSError:
        infos = []
    parts = []
    for info in infos:
        try:
            st = os.stat(d.parent / info / "RECORD")
            parts.append(f"{info} {st.st_size} {st.st_mtime_ns}")
        except OSError:
            parts.append(info)
    if not parts:   # not installed from a wheel: the native libraries stand for the version
        for f in sorted([*d.glob("*.so"), *d.glob("*/*.so"), *d.glob("*.dylib"), *d.glob("*/*.dylib")]):
            st = f.stat()
            parts.append(f"{f.relative_to(d)} {st.st_size} {st.st_mtime_ns}")
    return f"{d} " + "; ".join(parts)


_CPU_KEYS = {"vendor_id", "cpu family", "model", "model name", "stepping", "flags",   # x86
             "cpu implementer", "cpu architecture", "cpu variant", "cpu part", "cpu revision",
             "features",                                                            # ARM
             "isa", "uarch", "mmu", "cpu"}                                         # RISC-V, POWER


def host_cpu() -> str:
    """A fingerprint of the host CPU without llvmlite (see the module docstring)."""
    lines = []
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:   # the first processor's block only: big machines print thousands
                if not line.strip():
                    if lines:
                        break
                    continue
                k, _, v = line.partition(":")
                k = k.strip().lower()
                if k in _CPU_KEYS:
                    v = " ".join(sorted(v.split())) if k in ("flags", "features") else v.strip()
                    lines.append(f"{k}: {v}")
    except OSError:
        pass
    if lines:
        h = sha256()
        h.update("\n".join(lines).encode())
        return "cpuinfo " + h.hexdigest()
    import platform
    return f"processor {platform.processor()}"


def _compiler_facts() -> dict:
    """The per-process part of every key (computed once)."""
    global _compiler
    with _compiler_lock:
        if _compiler is None:
            _compiler = {
                "sprue": getattr(sys.modules.get("sprue"), "__version__", None),
                "sources": _sources_fingerprint(),
                "torch_mlir": _distribution("torch_mlir"),
                "llvmlite": _distribution("llvmlite"),
                "platform": sys.platform,
                "machine": os.uname().machine if hasattr(os, "uname") else os.environ.get("PROCESSOR_ARCHITECTURE"),
                "host_cpu": host_cpu(),
            }
        return _compiler


def key_components(closed, n_implicit: int, in_names, options: dict[str, Any]) -> dict | None:
    """Everything the key hashes (None when the jaxpr cannot be keyed: see jaxpr_digest)."""
    digest = jaxpr_digest(closed)
    if digest is None:
        return None
    options = dict(sorted(options.items()))
    facts = _compiler_facts()
    return {
        "format": FORMAT,
        **facts,
        "host_cpu": facts["host_cpu"] if options.get("cpu", "host") == "host" else None,
        "cc": os.environ.get("CC", "").strip(),
        "jaxpr": digest,
        "n_implicit": n_implicit,
        "in_names": list(in_names),
        "options": options,
    }


def key_of(components: dict) -> str:
    h = sha256()
    h.update(json.dumps(components, sort_keys=True, default=str).encode())
    return h.hexdigest()


# -- entries -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """A verified cache entry."""
    path: Path
    signature: dict      # the parsed signature file and
    stablehlo: str       # the StableHLO text, from the verified bytes (the files are not read again)

    @property
    def library(self) -> Path:
        return self.path / LIBRARY


class CorruptEntry(Exception):
    pass


def _digest(data: bytes) -> str:
    h = sha256(len(data))
    h.update(data)
    return h.hexdigest()


def _sha256_file(path: Path) -> tuple[int, str]:
    data = path.read_bytes()
    return len(data), _digest(data)


class CompileCache:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def entry_dir(self, key: str) -> Path:
        return self.root / key[:2] / key

    # -- reading ----------------------------------------------------------------------------
    def lookup(self, key: str) -> Entry | None:
        """The verified entry of `key`, or None (a corrupt entry is removed and logged)."""
        d = self.entry_dir(key)
        try:
            ino = os.stat(d).st_ino
        except OSError:
            return None
        try:
            return self._verify(d, key)
        except (OSError, CorruptEntry) as e:
            self.discard(d, str(e) if isinstance(e, CorruptEntry) else f"{type(e).__name__}: {e}", ino)
            return None

    def _verify(self, d: Path, key: str) -> Entry:
        try:
            manifest = json.loads((d / MANIFEST).read_bytes())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CorruptEntry(f"unreadable manifest: {e}") from None
        except IsADirectoryError:
            raise CorruptEntry("the manifest is a folder") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("key") != key:
            raise CorruptEntry("the manifest is not this entry's")
        files = manifest.get("files")
        if not isinstance(files, dict) or set(files) != set(_FILES):
            raise CorruptEntry(f"the manifest lists {sorted(files) if isinstance(files, dict) else files!r}")
        contents = {}
        for name in _FILES:
            want = files[name]
            path = d / name
            if not isinstance(want, dict) or os.stat(path).st_size != want.get("size"):
                raise CorruptEntry(f"{name} has the wrong size")
            data = path.read_bytes()
            if len(data) != want.get("size") or _digest(data) != want.get("sha256"):
                raise CorruptEntry(f"{name} does not match its sha256")
            contents[name] = data
        try:
            return Entry(d, json.loads(contents[SIGNATURE]), contents[STABLEHLO].decode())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CorruptEntry(f"unreadable signature or StableHLO text: {e}") from None

    def discard(self, d: Path, why: str, ino: int | None = None) -> None:
        """Remove the corrupt entry folder `d` (`ino`: its inode when found corrupt)."""
        count("corrupt")
        log.warning("sprue: discarding the corrupt compile cache entry %s (%s); compiling again", d, why)
        trash = self.root / ".trash"
        try:
            trash.mkdir(exist_ok=True)
            gone = Path(tempfile.mkdtemp(prefix=d.name[:16] + "-", dir=trash))
        except OSError as e:
            log.warning("sprue: cannot move %s aside (%s); deleting it in place", d, e)
            shutil.rmtree(d, ignore_errors=True)
            return
        try:
            os.rename(d, gone / "entry")  # atomic: no reader sees half a deletion
            if ino is not None and os.stat(gone / "entry").st_ino != ino:
                # another process discarded the corrupt one and published a good one meanwhile
                os.rename(gone / "entry", d)
        except OSError:
            pass   # gone already (another process discarded it), or put back: nothing to do
        shutil.rmtree(gone, ignore_errors=True)

    # -- writing ----------------------------------------------------------------------------
    def staging(self, key: str) -> Path:
        """A fresh private folder inside the cache to build the entry of `key` in."""
        tmp = self.root / ".tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=key[:16] + "-", dir=tmp))

    def commit(self, key: str, staging: Path, meta: dict | None = None) -> Entry:
        """Publish the files in `staging` as the entry of `key` and return it (or the entry another
        process published first, when that one verifies; `staging` is then deleted)."""
        files = {}
        for name in _FILES:
            size, digest = _sha256_file(staging / name)
            files[name] = {"size": size, "sha256": digest}
        manifest = {"format": FORMAT, "key": key, "files": files, "created": time.time(), **(meta or {})}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        for name in (*_FILES, MANIFEST):
            os.chmod(staging / name, 0o444)
        signature = json.loads((staging / SIGNATURE).read_bytes())
        stablehlo = (staging / STABLEHLO).read_text()
        final = self.entry_dir(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(3):
            try:
                os.rename(staging, final)
            except OSError as e:
                if e.errno not in (errno.EEXIST, errno.ENOTEMPTY) and not final.exists():
                    raise
                theirs = self.lookup(key)   # complete (renamed atomically), unless corrupt
                if theirs is not None:
                    count("races")
                    log.debug("sprue: %s was compiled by another process meanwhile; using it", final)
                    shutil.rmtree(staging, ignore_errors=True)
                    return theirs
                continue   # theirs was corrupt and is gone: publish ours
            count("builds")
            self._sweep()
            return Entry(final, signature, stablehlo)
        raise OSError(f"cannot publish the compile cache entry {final}")

    def _sweep(self) -> None:
        """Delete staging folders left by processes that died (rarely: only after a build)."""
        now = time.time()
        for sub in (".tmp", ".trash"):
            try:
                items = list(os.scandir(self.root / sub))
            except OSError:
                continue
            for item in items:
                try:
                    if sub == ".trash" or now - item.stat().st_mtime > _STALE_SECONDS:
                        shutil.rmtree(item.path, ignore_errors=True)
                except OSError:
                    pass
