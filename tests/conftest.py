"""Test-session setup.

Compiled libraries are cached on disk (sprue/compile_cache.py). The suite must neither read a
developer's cache (a stale entry would hide what the test should exercise) nor fill it: every run
gets a fresh temporary cache, shared by all tests of the run (and the subprocesses they start),
deleted at exit. It is set here, at import, before any test module compiles at decoration time.
tests/test_compile_cache.py points each of its tests at its own folder.
"""
import atexit
import os
import shutil
import tempfile

_CACHE = tempfile.mkdtemp(prefix="sprue-test-cache-")
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
os.environ["SPRUE_CACHE_DIR"] = _CACHE
os.environ.pop("SPRUE_NO_CACHE", None)
