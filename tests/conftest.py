"""Test-session setup.

Compiled libraries are cached on disk (sprue/compile_cache.py). The suite must neither read a
developer's cache (a stale entry would hide what the test should exercise) nor fill it: every run
gets a fresh temporary cache, shared by all tests of the run (and the subprocesses they start),
deleted at exit. It is set here, at import, before any test module compiles at decoration time.
tests/test_compile_cache.py points each of its tests at its own folder.

Nor may the suite leave anything in the system temp folder: everything temporary of the run --
the cache, sprue's build roots, saved failing IR, pytest's tmp_path folders, and the same of every
subprocess (TMPDIR) -- goes into one folder of the session, `sprue-test-*`, locked like a build
root: deleted at exit, and by the next session if this one is killed.
"""
import os
import tempfile

from sprue.api import compile_cache

_SYSTEM_TEMP = tempfile.gettempdir()
compile_cache.sweep(_SYSTEM_TEMP, "sprue-test-")
_SESSION = str(compile_cache.locked_folder(_SYSTEM_TEMP, "sprue-test-"))
os.environ["TMPDIR"] = tempfile.tempdir = _SESSION
_CACHE = tempfile.mkdtemp(prefix="cache-")
os.environ["SPRUE_CACHE_DIR"] = _CACHE
os.environ.pop("SPRUE_NO_CACHE", None)
