"""Test-session setup.

Compiled libraries are cached on disk (sprue/compile_cache.py). The suite must neither read a
developer's cache (a stale entry would hide what the test should exercise) nor fill it: every run
gets a fresh temporary cache, shared by all tests of the run (and the subprocesses they start),
deleted at exit. It is set here, at import, before any test module compiles at decoration time.
tests/frontend/api/test_compile_cache.py points each of its tests at its own folder.

Nor may the suite leave anything in the system temp folder: everything temporary of the run --
the cache, sprue's build roots, saved failing IR, pytest's tmp_path folders, and the same of every
subprocess (TMPDIR) -- goes into one folder of the session, `sprue-test-*`, locked like a build
root: deleted at exit, and by the next session if this one is killed.
"""
import os
import tempfile

import pytest

from sprue.runtime import build_folders

_SYSTEM_TEMP = tempfile.gettempdir()
build_folders.sweep(_SYSTEM_TEMP, "sprue-test-")
_SESSION = str(build_folders.locked_folder(_SYSTEM_TEMP, "sprue-test-"))
os.environ["TMPDIR"] = tempfile.tempdir = _SESSION
_CACHE = tempfile.mkdtemp(prefix="cache-")
os.environ["SPRUE_CACHE_DIR"] = _CACHE
os.environ.pop("SPRUE_NO_CACHE", None)


@pytest.fixture
def system_temp_in_tmp_path(tmp_path, monkeypatch):
    """For one test, the system temp folder (tempfile.gettempdir()) is its tmp_path: what sprue puts
    there -- the IR of a compilation that fails, in sprue-failed/ (lowering/backend.py) -- stays
    with the test."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path
