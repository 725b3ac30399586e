"""The on-disk cache of compiled libraries.

A compilation (qjit, sprue.load of a saved program) is looked up here before anything is lowered:
a hit loads the cached library through the cffi runtime and never imports the MLIR bindings
(torch_mlir) or llvmlite; a miss compiles as before, into a fresh entry that is then published
atomically.

Location: runtime/private_files.cache_dir(): $SPRUE_CACHE_DIR, else $XDG_CACHE_HOME/sprue, else
~/.cache/sprue. The cache is off when SPRUE_CACHE_DIR is "off" (or 0, false, no, none, disabled) or
SPRUE_NO_CACHE is set to anything but "" / "0". Compilations that keep their intermediate files
(keep_intermediate) bypass it.

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
  modules that make the signature and shape function (frontend api/driver.py,
  shape_functions.py, this module; runtime kernel_signature.py, shape_function.py) -- any edit is
  a new key, so a fixed lowering rule never hides behind a stale entry (stat, not content: hashing
  ~300 KB of sources would cost every first call a few ms); the versions of torch-mlir and llvmlite (their dist-info
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
it is never loaded. An entry that verifies but whose library does not load is discarded and
rebuilt the same way (driver.compile_closed_jaxpr).

Trust. The hashes detect corruption, not tampering: whoever may write the cache can write a
manifest to match, and loading a library runs its constructors. So, as ssh and gpg do with their
folders, the cache trusts only what the current user alone may write: the root is created 0700,
and a root, an entry folder (and the folder between them) or an entry's file that is owned by
another user or writable by group or others is refused -- logged as a warning, never loaded, and
the function is compiled without the cache (UntrustedCache). The folders above the root are not
checked: a root inside a folder others may rename things in is not protected.

Leftovers. A staging folder in `<root>/.tmp/` is a locked folder (runtime/build_folders.py: a lock
file beside it, flock'ed for as long as its process lives), as is the build root `sprue-build-*` in
the system temp folder (compilations outside the cache); the first use of a cache root in a process
deletes the staging folders whose lock nobody holds. A process removes its own at exit.
"""
from __future__ import annotations

import errno
import importlib.util
import json
import os
import platform
import shutil
import stat
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sprue.ir.core import ClosedJaxpr, Jaxpr
from sprue.runtime import LibraryLoadError, Signature, load
from sprue.runtime.build_folders import LazyLogger, locked_folder, release_folder, sweep
from sprue.runtime.private_files import cache_dir

__all__ = ["FORMAT", "CompileCache", "Entry", "UntrustedCache", "cache_dir", "clear", "default_cache",
           "key_components", "stats"]

log = LazyLogger("sprue.compile_cache")

try:   # the interpreter's own SHA-256: importing hashlib loads OpenSSL, which costs a cache hit ms
    from _sha2 import sha256 as _small_sha256  # Python 3.12+
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
    import hashlib  # deferred: it loads OpenSSL, a few ms a cache hit (small digests) never needs
    return hashlib.sha256()


FORMAT = "sprue compile cache 1"

LIBRARY = "lib.so"
SIGNATURE = "lib.signature.json"    # sprue.runtime.signature_path(LIBRARY)
STABLEHLO = "stablehlo.mlir"
MANIFEST = "manifest.json"
_FILES = (LIBRARY, SIGNATURE, STABLEHLO)

stats: dict[str, int] = {"hits": 0, "misses": 0, "builds": 0, "races": 0, "corrupt": 0}
_stats_lock = threading.Lock()


def count(what: str) -> None:
    """stats[what] += 1 (thread-safe)."""
    with _stats_lock:
        stats[what] += 1


# -- where -------------------------------------------------------------------------------------
_unusable: set[Path] = set()   # roots we cannot or will not use: warned once, then skipped
_swept: set[Path] = set()      # roots whose leftovers this process has swept


def default_cache() -> "CompileCache | None":
    """The cache at cache_dir(), or None when disabled, or when its folder cannot be created, is
    not valid UTF-8, or may be written by someone else (each warned about once per process)."""
    root = cache_dir()
    if root is None or root in _unusable:
        return None
    try:
        str(root).encode("utf-8")
    except UnicodeEncodeError:
        # os.environ holds undecodable bytes as surrogates; cffi opens libraries by UTF-8 path
        _unusable.add(root)
        log.warning("sprue: compile cache disabled: its folder %r (SPRUE_CACHE_DIR or XDG_CACHE_HOME) is not"
                    " valid UTF-8, and libraries are loaded by UTF-8 path; set it to a UTF-8 path", str(root))
        return None
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        check_trusted(root, os.stat(root), "the compile cache folder")
    except OSError as e:
        _unusable.add(root)
        log.warning("sprue: compile cache disabled: cannot create %s: %s", root, e)
        return None
    except UntrustedCache as e:
        _unusable.add(root)
        log.warning("sprue: compile cache disabled: %s", e)
        return None
    cache = CompileCache(root)
    if root not in _swept:
        _swept.add(root)
        cache._sweep()
    return cache


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
    "sprue.api": ("driver.py", "shape_functions.py", "compile_cache.py"),
    "sprue.runtime": ("kernel_signature.py", "shape_function.py"),
    # the lowerings of conv_general_dilated and of the incomplete gamma and Bessel functions trace
    # conv_as_matmul and special_gamma's float64 algorithms
    "sprue.lax": ("convolution.py", "special_gamma.py"),
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
        # the lowering's A/B switch for the matmul forms (lowering/matmul.py) changes the code built
        "matmul_forms": os.environ.get("SPRUE_MATMUL_FORMS", "").strip(),
        "matmul_pack_dynamic": os.environ.get("SPRUE_MATMUL_PACK_DYNAMIC", "").strip(),
        # and so does the switch of the loop-order and accumulation rewrites (lowering/fusion.py)
        "fusion": os.environ.get("SPRUE_FUSION", "").strip(),
        # and the convolution lowering's (lowering/rules_convolution.py)
        "conv_lowering": os.environ.get("SPRUE_CONV_LOWERING", "").strip(),
        "jaxpr": digest,
        "n_implicit": n_implicit,
        "in_names": list(in_names),
        "options": options,
    }


def key_of(components: dict) -> str:
    h = sha256()
    h.update(json.dumps(components, sort_keys=True, default=str).encode())
    return h.hexdigest()


_unloadable: set[str] = set()   # entry libraries that failed to load in this process


def loadable(library: Path, elsewhere: Path) -> Path:
    """`library`, or a hard link to it (else a copy) at `elsewhere` when a library at that path
    failed to load in this process: dlopen hands back the library it already holds for a path it
    has seen, even after the file was replaced (a rebuilt entry is where the bad one was)."""
    if str(library) not in _unloadable:
        return library
    try:
        os.link(library, elsewhere)
    except OSError:
        shutil.copy2(library, elsewhere)
    return elsewhere


# -- trust -------------------------------------------------------------------------------------
class UntrustedCache(Exception):
    """A cache folder or file that someone other than the current user may have written: it is
    never loaded (the module docstring, "Trust")."""


def check_trusted(path: Path, st: os.stat_result, what: str) -> None:
    """Raises UntrustedCache unless `st` (of `path`) is owned by the current user and writable
    by no one else -- the rule of ssh's StrictModes for ~/.ssh."""
    uid = os.geteuid()
    if st.st_uid != uid:
        raise UntrustedCache(
            f"{what} {path} is owned by uid {st.st_uid}, not by the current user (uid {uid}); a library"
            f" someone else could have written is never loaded. Point SPRUE_CACHE_DIR at a folder of your own")
    if st.st_mode & 0o022:
        who = {0o022: "its group and others", 0o020: "its group", 0o002: "others"}[st.st_mode & 0o022]
        raise UntrustedCache(
            f"{what} {path} is writable by {who} (mode {stat.filemode(st.st_mode)}); a library someone else"
            f" could have written is never loaded. If no one else has written to it, `chmod go-w {path}`;"
            f" otherwise delete it")


def _forget_after_fork() -> None:
    """In a forked child: a lock another thread held at the fork would stay held here for ever
    (the build folders forget the parent's by themselves: runtime/build_folders.py)."""
    global _stats_lock, _compiler_lock
    _stats_lock, _compiler_lock = threading.Lock(), threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


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
        """The verified entry of `key`, or None (a corrupt entry is removed and logged). Raises
        UntrustedCache for an entry someone else may have written (left in place, never loaded)."""
        d = self.entry_dir(key)
        try:
            st = os.lstat(d)
        except OSError:
            return None
        self._check_folders(d, st)
        try:
            return self._verify(d, key)
        except (OSError, CorruptEntry) as e:
            self.discard(d, str(e) if isinstance(e, CorruptEntry) else f"{type(e).__name__}: {e}", st.st_ino)
            return None

    def _check_folders(self, d: Path, st: os.stat_result) -> None:
        """Every folder from the root down to the entry `d` (lstat'ed as `st`) must be trusted."""
        check_trusted(self.root, os.stat(self.root), "the compile cache folder")
        check_trusted(d.parent, os.lstat(d.parent), "the compile cache folder")
        check_trusted(d, st, "the compile cache entry")

    def _verify(self, d: Path, key: str) -> Entry:
        manifest_path = d / MANIFEST
        self._check_file(manifest_path)
        try:
            manifest = json.loads(manifest_path.read_bytes())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CorruptEntry(f"unreadable manifest: {e}") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("key") != key:
            raise CorruptEntry("the manifest is not this entry's")
        files = manifest.get("files")
        if not isinstance(files, dict) or set(files) != set(_FILES):
            raise CorruptEntry(f"the manifest lists {sorted(files) if isinstance(files, dict) else files!r}")
        contents = {}
        for name in _FILES:
            want = files[name]
            path = d / name
            if not isinstance(want, dict) or self._check_file(path).st_size != want.get("size"):
                raise CorruptEntry(f"{name} has the wrong size")
            data = path.read_bytes()
            if len(data) != want.get("size") or _digest(data) != want.get("sha256"):
                raise CorruptEntry(f"{name} does not match its sha256")
            contents[name] = data
        try:
            return Entry(d, json.loads(contents[SIGNATURE]), contents[STABLEHLO].decode())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CorruptEntry(f"unreadable signature or StableHLO text: {e}") from None

    @staticmethod
    def _check_file(path: Path) -> os.stat_result:
        """lstat of one of an entry's files: a regular file, trusted (else UntrustedCache)."""
        st = os.lstat(path)
        check_trusted(path, st, "the compile cache file")
        if not stat.S_ISREG(st.st_mode):
            raise CorruptEntry(f"{path.name} is not a regular file")
        return st

    def load(self, key: str, name: str) -> tuple[Entry, Any] | None:
        """(entry, loaded function) of `key`, or None; an entry that verifies but whose signature
        or library does not load is discarded like a corrupt one, so that it is built again.
        Raises UntrustedCache (see lookup)."""
        entry = self.lookup(key)
        if entry is None:
            return None
        try:
            sig = Signature.from_dict(entry.signature["signature"])
        except (KeyError, TypeError, ValueError) as e:
            self.discard(entry.path, f"unusable signature: {e}")
            return None
        try:
            return entry, load(entry.library, "main", sig, name=name)
        except LibraryLoadError as e:
            _unloadable.add(str(entry.library))
            self.discard(entry.path, f"the library does not load: {e}")
            return None

    def discard(self, d: Path, why: str, ino: int | None = None) -> None:
        """Remove the corrupt entry folder `d` (`ino`: its inode when found corrupt)."""
        count("corrupt")
        log.warning("sprue: discarding the corrupt compile cache entry %s (%s); compiling again", d, why)
        trash = self.root / ".trash"
        try:
            trash.mkdir(mode=0o700, exist_ok=True)
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
        except OSError as e:   # gone already (another process discarded it), or put back
            log.debug("sprue: %s: %s", d, e)
        shutil.rmtree(gone, ignore_errors=True)

    # -- writing ----------------------------------------------------------------------------
    def staging(self, key: str) -> Path:
        """A fresh private folder inside the cache to build the entry of `key` in, locked as
        this process's (module docstring, "Leftovers"); hand it to `finish` when done."""
        tmp = self.root / ".tmp"
        tmp.mkdir(mode=0o700, exist_ok=True)
        return locked_folder(tmp, key[:16] + "-")

    def finish(self, staging: Path) -> None:
        """Delete `staging` (unless committed, that is renamed away) and its lock."""
        release_folder(staging)

    def commit(self, key: str, staging: Path, meta: dict | None = None) -> Entry:
        """Publish the files in `staging` as the entry of `key` and return it (or the entry another
        process published first, when that one verifies; `staging` is then deleted). Raises
        UntrustedCache when another's entry is in the way."""
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
        final.parent.mkdir(mode=0o700, exist_ok=True)
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
        """Delete staging folders left by processes that died (module docstring, "Leftovers")
        and whatever was left in the trash."""
        sweep(self.root / ".tmp")
        try:
            trash = list(os.scandir(self.root / ".trash"))
        except OSError:
            trash = []
        for item in trash:
            shutil.rmtree(item.path, ignore_errors=True)
