"""The lock os.fork() waits for while sprue imports its compiler.

fork() copies only the calling thread. A module another thread is importing at that moment stays
half-initialized in the child, its import lock (importlib._bootstrap's per-module _ModuleLock,
which CPython does not reset in a child) held by a thread the child does not have: the child's
first use of the module waits for ever. sprue imports its compiler, ~180 modules with the MLIR
dialects' (sprue.lowering.dialects), at the first compilation. So the compile driver imports it
under `loading`, and every fork handler that takes a lock of the compiler's takes `loading` first:
a fork waits until the compiler is loaded, and afterwards no compilation imports anything.

The fork must wait holding nothing another thread's import may need: os.fork() runs the `before`
handlers last-registered first, so every handler registered before this module's runs after it.
logging's takes its module lock, which a module of the compiler takes at import (getLogger), so it
is registered first, here; no other module the compiler imports registers one
(tests/e2e/test_fork.py).
"""
from __future__ import annotations

import logging  # noqa: F401  (its fork handler must run after ours: see above)
import os
import threading

# Reentrant: a fork from inside the import (an import hook, a module's own code) still works.
loading = threading.RLock()

os.register_at_fork(before=loading.acquire, after_in_parent=loading.release, after_in_child=loading.release)
