"""The on-disk compile cache (sprue/compile_cache.py): hits, misses on changed inputs or options,
a new process hitting it without the compiler, corrupt entries rebuilt, concurrent compilations
into one cache folder, and turning it off."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.api import compile_cache, driver
from sprue.runtime import load


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("SPRUE_CACHE_DIR", str(root))
    monkeypatch.delenv("SPRUE_NO_CACHE", raising=False)
    return root


def entries(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("??/*") if p.is_dir())


class Stats:
    """compile_cache.stats since creation."""

    def __init__(self):
        self.start = dict(compile_cache.stats)

    def __getitem__(self, what: str) -> int:
        return compile_cache.stats[what] - self.start[what]


def no_compiler(monkeypatch):
    """Any lowering or build from now on fails the test."""
    import sprue.lowering.backend as backend
    import sprue.lowering.stablehlo as stablehlo

    def fail(*a, **k):
        raise AssertionError("compiled although the cache holds this function")
    monkeypatch.setattr(backend, "build_shared_library", fail)
    monkeypatch.setattr(stablehlo, "lower", fail)


def poly(x):
    return jnp.sum(jnp.sin(x) * 2.0 + x * x)


def poly_ref(x):
    return np.sum(np.sin(x) * 2.0 + x * x)


X = np.linspace(0.0, 1.0, 7)


# -- hits ----------------------------------------------------------------------------------------
def test_second_qjit_of_the_same_function_hits(cache, monkeypatch):
    s = Stats()
    f = sprue.qjit(poly)
    np.testing.assert_allclose(f(X), poly_ref(X))
    assert (s["misses"], s["builds"], s["hits"]) == (1, 1, 0)
    assert len(entries(cache)) == 1

    no_compiler(monkeypatch)
    g = sprue.qjit(poly)   # a new QJIT: its own in-memory cache is empty
    np.testing.assert_allclose(g(X), poly_ref(X))
    assert (s["misses"], s["builds"], s["hits"]) == (1, 1, 1)
    assert g.mlir == f.mlir and "func.func" in g.mlir
    assert g._last.library == f._last.library   # the cached library itself, loaded twice
    np.testing.assert_allclose(f(X * 2), poly_ref(X * 2))   # both loads of one .so keep working
    np.testing.assert_allclose(g(X * 3), poly_ref(X * 3))
    assert len(entries(cache)) == 1


def test_entry_layout_and_manifest(cache):
    f = sprue.qjit(poly)
    f(X)
    [entry] = entries(cache)
    assert entry.parent.name == entry.name[:2] and len(entry.name) == 64
    assert sorted(p.name for p in entry.iterdir()) == ["lib.signature.json", "lib.so", "manifest.json",
                                                       "stablehlo.mlir"]
    manifest = json.loads((entry / "manifest.json").read_text())
    assert manifest["format"] == compile_cache.FORMAT and manifest["key"] == entry.name
    for name, want in manifest["files"].items():
        data = (entry / name).read_bytes()
        h = compile_cache.sha256()
        h.update(data)
        assert want == {"size": len(data), "sha256": h.hexdigest()}
        assert not os.stat(entry / name).st_mode & 0o222   # read-only
    assert (entry / "stablehlo.mlir").read_text() == f.mlir
    # the entry is a plain runtime folder: sprue.runtime.load works on it without the compiler
    np.testing.assert_allclose(load(entry)(X)[0], poly_ref(X))
    assert not list((cache / ".tmp").iterdir())   # no staging folder left


def test_saved_programs_are_cached_too(cache, tmp_path, monkeypatch):
    f = sprue.qjit(poly)
    f(X)
    path = tmp_path / "poly.jaxpr"
    sprue.save(f, path)
    s = Stats()
    np.testing.assert_allclose(sprue.load(path)(X), poly_ref(X))
    no_compiler(monkeypatch)
    np.testing.assert_allclose(sprue.load(path)(X), poly_ref(X))
    assert s["hits"] >= 1


def test_hit_keeps_checks_dynamic_sizes_and_shape_functions(cache, monkeypatch):
    """What the signature carries (check messages, implicit sizes, the shape function) comes back
    from the entry."""
    from sprue import lax
    from sprue.base.errors import SprueValueError

    def bounded(x, y, k):
        lax.check(lax.lt(k, 10), "k must be below 10")
        return jnp.concatenate([x * k, y])

    sprue.qjit(bounded, abstracted_axes={0: "n"})(np.ones(3), np.ones(3), 2)
    no_compiler(monkeypatch)
    s = Stats()
    g = sprue.qjit(bounded, abstracted_axes={0: "n"})
    np.testing.assert_allclose(g(X, X, 3), np.concatenate([X * 3, X]))
    assert s["hits"] == 1
    assert g.result_shapes(np.ones(4), np.ones(4), 1) == (8,)
    with pytest.raises(SprueValueError, match="^k must be below 10$"):
        g(X, X, 11)
    with pytest.raises(SprueValueError, match="size mismatch"):
        g(np.ones(4), np.ones(5), 1)


# -- misses --------------------------------------------------------------------------------------
def test_changed_static_argument_or_dtype_misses(cache):
    def scaled(x, k):
        return x * k + 1.0

    s = Stats()
    f = sprue.qjit(scaled, static_argnums=1)
    np.testing.assert_allclose(f(X, 2), X * 2 + 1)
    np.testing.assert_allclose(f(X, 3), X * 3 + 1)
    assert s["builds"] == 2 and len(entries(cache)) == 2
    out = f(X.astype(np.float32), 3)
    assert out.dtype == np.float32 and s["builds"] == 3
    g = sprue.qjit(scaled, static_argnums=1)
    g(X, 2), g(X, 3), g(X.astype(np.float32), 3)
    assert s["builds"] == 3 and s["hits"] == 3 and len(entries(cache)) == 3


def test_closed_over_values_are_part_of_the_key(cache):
    """The jaxpr text shows a const's type, not its value."""
    def make(w):
        return sprue.qjit(lambda x: x * w)

    a, b = np.arange(7.0), np.arange(7.0)[::-1].copy()
    fa, fb = make(a), make(b)
    np.testing.assert_allclose(fa(X), X * a)
    np.testing.assert_allclose(fb(X), X * b)
    assert str(fa.jaxpr) == str(fb.jaxpr)
    assert len(entries(cache)) == 2


def test_changed_build_options_miss(cache, tmp_path):
    f = sprue.qjit(poly)
    f(X)
    closed = f.jaxpr
    s = Stats()
    compile_ = driver.compile_closed_jaxpr
    for options in ({"opt_level": 2}, {"cpu": "generic"}, {"opt_level": 2}):
        _, library, fn, _ = compile_(closed, 0, ["x"], tmp_path, "p", **options)
        np.testing.assert_allclose(fn(X)[0], poly_ref(X))
    assert s["builds"] == 2 and s["hits"] == 1 and len(entries(cache)) == 3


def test_changed_compiler_misses(cache, monkeypatch):
    """Editing the pipeline (pipeline.STAGES, a lowering rule, the backend) changes the compiler's
    fingerprint: simulated by changing the recorded sources."""
    f = sprue.qjit(poly)
    f(X)
    facts = dict(compile_cache._compiler_facts())
    assert "lowering/pipeline.py" in facts["sources"] and "lowering/backend.py" in facts["sources"]
    monkeypatch.setattr(compile_cache, "_compiler", {**facts, "sources": facts["sources"] + "\nedited"})
    s = Stats()
    np.testing.assert_allclose(sprue.qjit(poly)(X), poly_ref(X))
    assert s["misses"] == 1 and s["builds"] == 1 and len(entries(cache)) == 2


def test_matmul_forms_switch_misses(cache, monkeypatch):
    """SPRUE_MATMUL_FORMS=0 builds other code for a matmul: a library built with the switch on is
    not served with it off."""
    def mm(a, b):
        return a @ b
    a, b = np.arange(12.0).reshape(3, 4), np.arange(8.0).reshape(4, 2)
    np.testing.assert_allclose(sprue.qjit(mm)(a, b), a @ b)
    monkeypatch.setenv("SPRUE_MATMUL_FORMS", "0")
    s = Stats()
    np.testing.assert_allclose(sprue.qjit(mm)(a, b), a @ b)
    assert (s["misses"], s["builds"], s["hits"]) == (1, 1, 0) and len(entries(cache)) == 2


def test_key_components_without_the_compiler():
    f = sprue.qjit(poly)
    f(X)
    c = compile_cache.key_components(f.jaxpr, 0, ["x"], {"opt_level": 3, "cpu": "host"})
    assert c["format"] == compile_cache.FORMAT and c["sprue"] == sprue.__version__
    assert c["torch_mlir"].split()[-3].startswith("torch_mlir-") and "llvmlite-" in c["llvmlite"]
    assert c["host_cpu"] and c["machine"] and c["options"] == {"cpu": "host", "opt_level": 3}
    other = compile_cache.key_components(f.jaxpr, 0, ["y"], {"opt_level": 3, "cpu": "host"})
    generic = compile_cache.key_components(f.jaxpr, 0, ["x"], {"opt_level": 3, "cpu": "generic"})
    assert generic["host_cpu"] is None   # a generic library runs on any CPU of the machine type
    keys = {compile_cache.key_of(k) for k in (c, other, generic)}
    assert len(keys) == 3

    class Unstable:
        consts = []

        def __str__(self):
            return "{ lambda ; a:f64[]. let b:f64[] = custom[fn=<function g at 0x7f00>] a in (b,) }"
    assert compile_cache.jaxpr_digest(Unstable()) is None   # differs per process: not cached


def test_source_locations_are_part_of_the_key():
    f1 = sprue.qjit(lambda x: x + 1.0)
    f2 = sprue.qjit(lambda x: x + 1.0)   # same text, another line
    f1(X), f2(X)
    assert str(f1.jaxpr) == str(f2.jaxpr)
    assert compile_cache.jaxpr_digest(f1.jaxpr) != compile_cache.jaxpr_digest(f2.jaxpr)


# -- corrupt entries -----------------------------------------------------------------------------
def _replace(path: Path, data: bytes) -> None:
    """Rewrite a file as a new inode (the old one may be mapped by this process)."""
    tmp = path.with_name(path.name + ".tampered")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _flip(entry: Path):
    data = bytearray((entry / "lib.so").read_bytes())
    data[len(data) // 2] ^= 0x40
    _replace(entry / "lib.so", bytes(data))


def _truncate(entry: Path):
    data = (entry / "lib.so").read_bytes()
    _replace(entry / "lib.so", data[: len(data) // 3])


def _bad_manifest(entry: Path):
    _replace(entry / "manifest.json", (entry / "manifest.json").read_bytes()[:40])


def _tampered_signature(entry: Path):
    sig = json.loads((entry / "lib.signature.json").read_text())
    sig["signature"]["results"][0]["dtype"] = "f32"   # valid JSON, wrong content
    _replace(entry / "lib.signature.json", json.dumps(sig).encode())


def _missing_stablehlo(entry: Path):
    (entry / "stablehlo.mlir").unlink()


@pytest.mark.parametrize("tamper", [_flip, _truncate, _bad_manifest, _tampered_signature, _missing_stablehlo],
                         ids=lambda t: t.__name__.strip("_"))
def test_corrupt_entry_is_detected_and_rebuilt(cache, tamper, caplog):
    f = sprue.qjit(poly)
    f(X)
    [entry] = entries(cache)
    tamper(entry)
    s = Stats()
    with caplog.at_level("WARNING", logger="sprue.compile_cache"):
        g = sprue.qjit(poly)
        np.testing.assert_allclose(g(X), poly_ref(X))
    assert (s["corrupt"], s["misses"], s["builds"], s["hits"]) == (1, 1, 1, 0)
    assert any("corrupt" in r.getMessage() for r in caplog.records)
    assert entries(cache) == [entry] and compile_cache.CompileCache(cache).lookup(entry.name) is not None
    assert not list((cache / ".trash").iterdir())
    np.testing.assert_allclose(sprue.qjit(poly)(X), poly_ref(X))
    assert s["hits"] == 1


def test_lost_race_uses_the_published_entry(tmp_path):
    """Two builders of one key: the second rename finds the first's entry and uses it."""
    c = compile_cache.CompileCache(tmp_path)
    key = "ab" + "0" * 62
    stagings = []
    for content in (b"first", b"second"):
        d = c.staging(key)
        for name in ("lib.so", "stablehlo.mlir"):
            (d / name).write_bytes(content)
        (d / "lib.signature.json").write_text(json.dumps({"who": content.decode()}))
        stagings.append(d)
    s = Stats()
    first = c.commit(key, stagings[0])
    second = c.commit(key, stagings[1])
    assert first.path == second.path == c.entry_dir(key) and second.signature == {"who": "first"}
    assert (first.library.read_bytes(), s["builds"], s["races"]) == (b"first", 1, 1)
    assert not stagings[1].exists()
    assert sorted(p.name for p in (tmp_path / ".tmp").iterdir()) == sorted(d.name + ".lock" for d in stagings)
    for d in stagings:   # what compile_closed_jaxpr does when done: the locks go too
        c.finish(d)
    assert not list((tmp_path / ".tmp").iterdir())


# -- other processes -----------------------------------------------------------------------------
SCRIPT = """
import json, sys, time
import numpy as np
import sprue, sprue.numpy as jnp
from sprue.api import compile_cache

BARRIER = {barrier!r}
if BARRIER:   # hold every process at commit until all have built: they then race to publish
    import pathlib, os
    commit = compile_cache.CompileCache.commit
    def waiting_commit(self, *a, **k):
        d = pathlib.Path(BARRIER)
        (d / str(os.getpid())).touch()
        deadline = time.time() + 300
        while len(list(d.iterdir())) < {n} and time.time() < deadline:
            time.sleep(0.01)
        return commit(self, *a, **k)
    compile_cache.CompileCache.commit = waiting_commit

@sprue.qjit
def f(x, y):
    return jnp.sum(jnp.sin(x) * y) + jnp.max(x)

x = np.linspace(0.0, 2.0, 9)
t = time.perf_counter()
r = f(x, x + 1.0)
elapsed = time.perf_counter() - t
loaded = sorted({{m.split('.')[0] for m in sys.modules}} & {{'torch_mlir', 'llvmlite'}})
print(json.dumps({{"result": float(r), "expected": float(np.sum(np.sin(x) * (x + 1.0)) + x.max()),
                  "stats": compile_cache.stats, "loaded": loaded, "ms": elapsed * 1e3,
                  "mlir": f.mlir, "library": str(f._last.library)}}))
"""


def _script(tmp_path: Path, barrier: Path | None = None, n: int = 2) -> Path:
    path = tmp_path / "cached_fn.py"   # one file: the equations' source locations are part of the key
    path.write_text(SCRIPT.format(barrier=str(barrier) if barrier else "", n=n))
    return path


def _run(script: Path, cache: Path, **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "SPRUE_CACHE_DIR": str(cache), **env})


def _result(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    r = json.loads(out.strip().splitlines()[-1])
    assert r["result"] == pytest.approx(r["expected"], rel=1e-12)
    return r


def test_new_process_hits_without_importing_the_compiler(cache, tmp_path):
    script = _script(tmp_path)
    first = _result(_run(script, cache))
    assert first["stats"]["builds"] == 1 and "llvmlite" in first["loaded"]
    second = _result(_run(script, cache))
    assert second["stats"]["hits"] == 1 and second["stats"]["builds"] == 0
    assert second["loaded"] == []   # neither torch_mlir nor llvmlite was imported
    assert second["mlir"] == first["mlir"] and second["library"] == first["library"]


def test_concurrent_processes_compile_the_same_function(cache, tmp_path):
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    script = _script(tmp_path, barrier)
    procs = [_run(script, cache) for _ in range(2)]
    results = [_result(p) for p in procs]
    assert sorted((r["stats"]["builds"], r["stats"]["races"]) for r in results) == [(0, 1), (1, 0)]
    assert results[0]["library"] == results[1]["library"]
    assert len(entries(cache)) == 1 and not list((cache / ".tmp").iterdir())
    third = _result(_run(_script(tmp_path), cache))   # and the entry they left verifies
    assert third["stats"]["hits"] == 1 and third["loaded"] == []


# -- turning it off ------------------------------------------------------------------------------
@pytest.mark.parametrize("env", [{"SPRUE_CACHE_DIR": "off"}, {"SPRUE_NO_CACHE": "1"}])
def test_cache_can_be_turned_off(cache, monkeypatch, env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert compile_cache.cache_dir() is None and compile_cache.default_cache() is None
    s = Stats()
    for _ in range(2):
        np.testing.assert_allclose(sprue.qjit(poly)(X), poly_ref(X))
    assert (s["hits"], s["misses"], s["builds"]) == (0, 0, 0)
    assert not cache.exists()


def test_keep_intermediate_bypasses_the_cache(cache, tmp_path):
    keep = tmp_path / "keep"
    s = Stats()
    f = sprue.qjit(poly, keep_intermediate=keep)
    np.testing.assert_allclose(f(X), poly_ref(X))
    assert (keep / "poly.so").is_file() and (keep / "poly.ll").is_file()
    assert (s["hits"], s["misses"]) == (0, 0) and not entries(cache)


def test_cache_location(monkeypatch, tmp_path):
    monkeypatch.delenv("SPRUE_NO_CACHE", raising=False)
    monkeypatch.setenv("SPRUE_CACHE_DIR", str(tmp_path / "c"))
    assert compile_cache.cache_dir() == tmp_path / "c"
    monkeypatch.delenv("SPRUE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compile_cache.cache_dir() == tmp_path / "xdg" / "sprue"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert compile_cache.cache_dir() == tmp_path / "home" / ".cache" / "sprue"
    monkeypatch.setenv("SPRUE_NO_CACHE", "0")   # "0" does not turn it off
    assert compile_cache.cache_dir() is not None


def test_unusable_cache_folder_falls_back_to_compiling(monkeypatch, tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("SPRUE_CACHE_DIR", str(blocker / "cache"))
    with caplog.at_level("WARNING", logger="sprue.compile_cache"):
        np.testing.assert_allclose(sprue.qjit(poly)(X), poly_ref(X))
    assert any("disabled" in r.getMessage() for r in caplog.records)


def test_discard_spares_an_entry_published_meanwhile(tmp_path):
    """A process that found an entry corrupt must not delete the good one another process
    published at the same path after discarding the corrupt one first."""
    c = compile_cache.CompileCache(tmp_path)
    d = c.entry_dir("cd" + "1" * 62)
    d.mkdir(parents=True)
    corrupt_ino = os.stat(d).st_ino
    os.rename(d, tmp_path / "elsewhere")          # (the other process's discard)
    d.mkdir()                                      # (and its fresh entry)
    (d / "lib.so").write_bytes(b"good")
    assert os.stat(d).st_ino != corrupt_ino
    c.discard(d, "found corrupt earlier", corrupt_ino)
    assert (d / "lib.so").read_bytes() == b"good"
    assert not list((tmp_path / ".trash").iterdir())


# -- trust: a cache someone else may write (issue 20, item 10) --------------------------------------
# A library whose constructor runs at dlopen: it writes MARKER. Loading it is what an attacker who
# may write the cache wants; it exports no kernel, so even a loaded one fails to be used.
PLANTED_C = r"""
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
  FILE *f = fopen(MARKER, "w");
  if (f) { fputs("the planted library ran", f); fclose(f); }
}
"""
OTHER_UID = 65534   # nobody


def _planted_library(tmp_path: Path, marker: Path) -> bytes:
    from sprue.lowering.backend import find_c_compiler
    src, so = tmp_path / "planted.c", tmp_path / "planted.so"
    src.write_text(PLANTED_C)
    subprocess.run([*find_c_compiler(), "-shared", "-fPIC", f'-DMARKER="{marker}"', "-o", str(so), str(src)],
                   check=True)
    return so.read_bytes()


def _rewrite_library(entry: Path, data: bytes) -> None:
    """Replace the entry's library and rewrite its manifest to match, as someone who may write the
    folder can: the hashes then verify."""
    manifest = json.loads((entry / "manifest.json").read_text())
    manifest["files"]["lib.so"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    _replace(entry / "lib.so", data)
    _replace(entry / "manifest.json", json.dumps(manifest).encode())
    for name in ("lib.so", "manifest.json"):
        os.chmod(entry / name, 0o444)


def _fresh_copy(cache: Path, tmp_path: Path, monkeypatch) -> Path:
    """poly's entry, built in `cache`, copied into a new cache root that becomes the current one
    (a library path this process has never loaded: dlopen would return the loaded one)."""
    np.testing.assert_allclose(sprue.qjit(poly)(X), poly_ref(X))
    [entry] = entries(cache)
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    (victim / entry.parent.name).mkdir(mode=0o700)
    shutil.copytree(entry, victim / entry.parent.name / entry.name)
    monkeypatch.setenv("SPRUE_CACHE_DIR", str(victim))
    return victim / entry.parent.name / entry.name


def _chown(*paths: Path) -> None:
    for p in paths:
        os.chown(p, OTHER_UID, OTHER_UID)


# (how the planted entry is exposed, what the warning says)
EXPOSURES = {
    "entry owned by another user": (lambda e: _chown(e, *e.iterdir()), f"owned by uid {OTHER_UID}"),
    "library owned by another user": (lambda e: _chown(e / "lib.so"), f"owned by uid {OTHER_UID}"),
    "root owned by another user": (lambda e: _chown(e.parent.parent), f"owned by uid {OTHER_UID}"),
    "entry writable by others": (lambda e: os.chmod(e, 0o777), "writable by its group and others"),
    "key folder writable by its group": (lambda e: os.chmod(e.parent, 0o770), "writable by its group"),
    "root writable by others": (lambda e: os.chmod(e.parent.parent, 0o703), "writable by others"),
    "library writable by its group": (lambda e: os.chmod(e / "lib.so", 0o464), "writable by its group"),
}


@pytest.mark.parametrize("exposure", EXPOSURES)
def test_a_library_someone_else_may_have_planted_is_never_loaded(cache, tmp_path, monkeypatch, caplog, exposure):
    expose, says = EXPOSURES[exposure]
    if "owned by another user" in exposure and os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root (os.chown): run as root to test this exposure")
    entry = _fresh_copy(cache, tmp_path, monkeypatch)
    marker = tmp_path / "planted-ran"
    planted = _planted_library(tmp_path, marker)
    _rewrite_library(entry, planted)
    expose(entry)
    s = Stats()
    with caplog.at_level("WARNING", logger="sprue.compile_cache"):
        f = sprue.qjit(poly)
        np.testing.assert_allclose(f(X), poly_ref(X))
    assert not marker.exists()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(says in w and "never loaded" in w for w in warnings), warnings
    assert s["hits"] == 0 and s["builds"] == 0          # compiled without the cache,
    assert (entry / "lib.so").read_bytes() == planted   # and the planted entry left as found
    assert not str(f._last.library).startswith(str(entry.parent.parent))


def test_the_planted_library_runs_when_the_cache_is_trusted(cache, tmp_path, monkeypatch, caplog):
    """The control of the test above: in a cache only we may write, the same planted entry is
    loaded (its constructor runs); it exports no kernel, so it is discarded and rebuilt."""
    entry = _fresh_copy(cache, tmp_path, monkeypatch)
    marker = tmp_path / "planted-ran"
    _rewrite_library(entry, _planted_library(tmp_path, marker))
    s = Stats()
    with caplog.at_level("WARNING", logger="sprue.compile_cache"):
        np.testing.assert_allclose(sprue.qjit(poly)(X), poly_ref(X))
    assert marker.read_text() == "the planted library ran"
    assert any("the library does not load" in r.getMessage() for r in caplog.records)
    assert (s["corrupt"], s["builds"]) == (1, 1)


def test_the_cache_folders_are_private_whatever_the_umask(tmp_path, monkeypatch):
    root = tmp_path / "a" / "cache"
    monkeypatch.setenv("SPRUE_CACHE_DIR", str(root))
    old = os.umask(0o002)
    try:
        np.testing.assert_allclose(sprue.qjit(poly)(X), poly_ref(X))
    finally:
        os.umask(old)
    [entry] = entries(root)
    for d in (root, root / ".tmp", entry.parent, entry):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
    for f in entry.iterdir():
        assert stat.S_IMODE(os.stat(f).st_mode) == 0o444, f
    assert compile_cache.CompileCache(root).lookup(entry.name) is not None


# -- entries that verify but do not load, odd folders, leftovers (issue 20, item 11) ---------------
def test_an_entry_whose_library_does_not_load_is_rebuilt(cache, tmp_path, monkeypatch, caplog):
    entry = _fresh_copy(cache, tmp_path, monkeypatch)
    _rewrite_library(entry, b"\x7fELF but not a library")
    s = Stats()
    with caplog.at_level("WARNING", logger="sprue.compile_cache"):
        np.testing.assert_allclose(sprue.qjit(poly)(X), poly_ref(X))
    assert any("the library does not load" in r.getMessage() for r in caplog.records)
    assert (s["corrupt"], s["builds"]) == (1, 1)
    assert (entry / "lib.so").read_bytes()[:4] == b"\x7fELF" and len((entry / "lib.so").read_bytes()) > 1000
    np.testing.assert_allclose(sprue.qjit(poly)(X), poly_ref(X))
    assert s["hits"] == 1


def test_a_cache_folder_that_is_not_utf8_is_not_used(tmp_path, monkeypatch, caplog):
    folder = str(tmp_path) + "/cache-\udcff"   # os.environ's spelling of the byte 0xff
    monkeypatch.setenv("SPRUE_CACHE_DIR", folder)
    s = Stats()
    with caplog.at_level("WARNING", logger="sprue.compile_cache"):
        np.testing.assert_allclose(sprue.qjit(poly)(X), poly_ref(X))
    assert any("is not valid UTF-8" in r.getMessage() and "compile cache disabled" in r.getMessage()
               for r in caplog.records)
    assert (s["hits"], s["misses"]) == (0, 0) and not os.path.lexists(folder)


def test_a_non_utf8_cache_folder_from_the_environment(tmp_path):
    env = {k.encode(): v.encode() for k, v in os.environ.items()}
    env[b"SPRUE_CACHE_DIR"] = os.fsencode(tmp_path) + b"/x\xff"
    code = "import numpy as np, sprue; print(sprue.qjit(lambda x: x * 2.0)(np.arange(3.0)).tolist())"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[0.0, 2.0, 4.0]"
    assert "is not valid UTF-8" in proc.stderr


LEFTOVERS = """
import os, sys, time
import numpy as np
import sprue, sprue.numpy as jnp
i = 0
while True:   # compiles until killed
    i += 1
    c = i + 0.5
    assert np.allclose(sprue.qjit(lambda x: jnp.sin(x) * c)(np.zeros(3)), 0.0)
    if len(sys.argv) > 1:
        break
"""


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("cached", [True, False], ids=["cached", "uncached"])
def test_the_temp_folder_is_left_as_found(tmp_path, cached):
    """Compiling leaves nothing in the system temp folder; a build killed midway leaves its folder
    (in the cache's .tmp, or a build root in the temp folder), which the next process deletes."""
    temp, cache = tmp_path / "temp", tmp_path / "cache"
    temp.mkdir()
    script = tmp_path / "leftovers.py"
    script.write_text(LEFTOVERS)
    env = {**os.environ, "TMPDIR": str(temp), "SPRUE_CACHE_DIR": str(cache) if cached else "off"}
    once = subprocess.run([sys.executable, str(script), "once"], env=env, capture_output=True, text=True, timeout=600)
    assert once.returncode == 0, once.stderr
    assert _tree(temp) == []
    if cached:
        assert len(entries(cache)) == 1 and _tree(cache / ".tmp") == []

    # killed while a staging folder is locked; uncached, the build root lives as long as the process
    busy = (lambda: list((cache / ".tmp").glob("*.lock"))) if cached else (lambda: list(temp.glob("sprue-build-*")))
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not busy() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    proc.kill()   # SIGKILL: no atexit, no finally
    assert proc.wait(60) == -9, proc.stderr.read()
    if cached:
        assert _tree(cache / ".tmp"), "the killed build left no staging folder (killed too late?)"
    else:
        assert {p.name[:len("sprue-build-")] for p in temp.iterdir()} == {"sprue-build-"}

    again = subprocess.run([sys.executable, str(script), "once"], env=env, capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stderr
    assert _tree(temp) == []
    if cached:
        assert _tree(cache / ".tmp") == []


def test_the_runtime_object_is_kept_only_where_this_user_alone_may_write(tmp_path, monkeypatch):
    # the allocation runtime's object (lowering/allocation.py) is compiled once and kept in the cache;
    # like a library, an object someone else could have written is never linked in
    from sprue.lowering import backend
    monkeypatch.setenv("SPRUE_CACHE_DIR", str(tmp_path / "cache"))
    key = (tuple(backend.find_c_compiler()), "int sprue_test_kept(void) { return 7; }\n")
    assert backend._kept_object(key) is None
    backend._keep_object(key, b"the object's bytes")
    path = backend._kept_object_path(key)
    assert path.parent == tmp_path / "cache" / "runtime" and path.stat().st_mode & 0o077 == 0
    assert backend._kept_object(key) == b"the object's bytes"
    path.chmod(0o664)
    assert backend._kept_object(key) is None
    path.chmod(0o600)
    path.parent.chmod(0o777)
    assert backend._kept_object(key) is None
    path.parent.chmod(0o700)
    assert backend._kept_object(key) == b"the object's bytes"
    monkeypatch.setenv("SPRUE_CACHE_DIR", "off")
    assert backend._kept_object(key) is None
