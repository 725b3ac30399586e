"""os.fork() while other threads compile (issue 20, item 5).

fork() copies only the calling thread: a lock another thread holds at that moment stays held in
the child for ever. sprue's locks that guard Python state are replaced in the child
(qjit._after_fork_in_child, compile_cache._forget_after_fork, build_folders._forget_after_fork); those that guard native state
(LLVM's, llvmlite's, MLIR's pass registration, cffi's parser) make the fork wait for the section
in progress (lowering/backend.py, runtime/function.py). Each scenario runs in its own interpreter,
so that a deadlocked child is a timeout of that script, not a stuck test run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# Waits for a forked child, killing it after `timeout` seconds; the child's fate as a word.
_WAIT = """
import os, time
def wait(pid, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return "exit %d" % os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return "hung"
"""

# What a child does: compile a new function and call it, and compile a new signature of the
# function the other thread uses; exit status 0 only when both results are right.
_CHILD = """
def child_work(k, shared):
    import numpy as np
    import sprue
    g = sprue.qjit(lambda x: x * (k + 2.0) + 1.0)
    ok = np.allclose(g(np.arange(4.0)), np.arange(4.0) * (k + 2.0) + 1.0)
    ok = ok and np.allclose(shared(np.zeros(40 + k)), 2.0)
    return 0 if ok else 2
"""


def _run(body: str, tmp_path: Path, timeout: float = 600, **env) -> dict:
    script = tmp_path / "script.py"
    script.write_text(_WAIT + _CHILD + textwrap.dedent(body))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# Each lock, as the script names it, held by another thread while the main thread forks.
LOCKS = {
    "llvm": "sys.modules['sprue.lowering.backend']._llvm_lock",
    "llvmlite": "sys.modules['sprue.lowering.backend']._LLVMLITE_LOCK",
    "mlir pass registration": "sys.modules['sprue.lowering.pipeline']._register_lock",
    "cffi parser": "sys.modules['cffi.cparser'].lock",
    "runtime object": "sys.modules['sprue.lowering.c_toolchain']._c_lock",
    "build folder": "sys.modules['sprue.runtime.build_folders']._build_root_lock",
    "held folders": "sys.modules['sprue.runtime.build_folders']._held_lock",
    "cache stats": "sys.modules['sprue.api.compile_cache']._stats_lock",
    "cache facts": "sys.modules['sprue.api.compile_cache']._compiler_lock",
    "function": "shared._lock",
}


@pytest.mark.parametrize("lock", LOCKS)
def test_fork_while_another_thread_holds_a_lock(lock, tmp_path):
    out = _run(f"""
        import json, sys, threading, time
        import numpy as np
        import sprue, sprue.numpy as jnp
        import sprue.lowering.backend
        shared = sprue.qjit(lambda x: jnp.cos(x) + 1.0)
        assert np.allclose(shared(np.zeros(3)), 2.0)    # loads (and so imports) everything once
        lock = {LOCKS[lock]}
        assert lock is not None
        held = threading.Event()
        def hold():
            with lock:
                held.set()
                time.sleep(0.5)
        t = threading.Thread(target=hold)
        t.start()
        held.wait()
        pid = os.fork()
        if pid == 0:
            os._exit(child_work(0, shared))
        fate = wait(pid)
        t.join()
        print(json.dumps({{"child": fate, "parent": bool(np.allclose(shared(np.zeros(5)), 2.0))}}))
    """, tmp_path)
    assert out == {"child": "exit 0", "parent": True}


def test_forks_during_compilation_never_hang(tmp_path):
    """32 forks while two threads compile without pause; every child compiles and calls, half of
    them exit through the interpreter's exit (atexit handlers run in the child), and the parent
    still compiles afterwards: a child never deletes the parent's build folder."""
    out = _run("""
        import json, random, sys, threading, time
        import numpy as np
        import sprue, sprue.numpy as jnp
        shared = sprue.qjit(lambda x: jnp.cos(x) + 1.0)
        stop, errors = threading.Event(), []
        def compile_forever(tid):
            i = 0
            try:
                while not stop.is_set():
                    i += 1
                    c = i + 0.25 * tid
                    f = sprue.qjit(lambda x: jnp.sin(x) * c + x)
                    assert np.allclose(f(np.ones(3)), np.sin(1.0) * c + 1.0)
                    assert np.allclose(shared(np.zeros(2 + (7 * i + tid) % 30)), 2.0)
            except BaseException as e:
                errors.append(repr(e))
        threads = [threading.Thread(target=compile_forever, args=(t,), daemon=True) for t in range(2)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        rng, fates = random.Random(20), []
        for k in range(32):
            time.sleep(rng.uniform(0.0, 0.15))
            pid = os.fork()
            if pid == 0:
                code = child_work(k, shared)
                if k % 2:
                    os._exit(code)
                sys.exit(code)
            fates.append(wait(pid))
        stop.set()
        for t in threads:
            t.join(120)
        h = sprue.qjit(lambda x: x - 3.0)
        print(json.dumps({"fates": fates, "errors": errors, "parent": bool(np.allclose(h(np.ones(2)), -2.0))}))
    """, tmp_path, timeout=1200, SPRUE_CACHE_DIR=str(tmp_path / "cache"))
    assert out == {"fates": ["exit 0"] * 32, "errors": [], "parent": True}


def test_uncached_child_builds_in_its_own_folder(tmp_path):
    """With the cache off, builds go to a build root in the temp folder: the child makes its own,
    deletes it when it exits, and leaves the parent's alone."""
    out = _run("""
        import json, sys
        import numpy as np
        import sprue
        cache_module = sys.modules["sprue.runtime.build_folders"]
        f = sprue.qjit(lambda x: x + 1.0)
        assert np.allclose(f(np.ones(2)), 2.0)
        parent_root = cache_module._build_root
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            g = sprue.qjit(lambda x: x * 5.0)
            ok = np.allclose(g(np.ones(2)), 5.0) and np.allclose(f(np.ones(3)), 2.0)
            os.write(w, str(cache_module._build_root).encode())
            sys.exit(0 if ok else 2)
        os.close(w)
        child_root = os.read(r, 4096).decode()
        fate = wait(pid)
        h = sprue.qjit(lambda x: x - 1.0)
        print(json.dumps({"child": fate, "roots differ": child_root != str(parent_root),
                          "child root gone": not os.path.exists(child_root),
                          "parent root kept": parent_root.is_dir(),
                          "parent": bool(np.allclose(h(np.ones(2)), 0.0))}))
    """, tmp_path, SPRUE_CACHE_DIR="off", TMPDIR=str(tmp_path))
    assert out == {"child": "exit 0", "roots differ": True, "child root gone": True, "parent root kept": True,
                   "parent": True}


def test_fork_while_another_thread_loads_the_compiler(tmp_path):
    """A thread is inside the first compilation's import of the compiler (held there, between two
    of its modules, for 0.5 s) when the main thread forks: the fork waits for the import to end,
    and the child then compiles (instead of waiting for ever on an import lock a thread it does not
    have holds)."""
    out = _run("""
        import json, sys, threading, time
        import numpy as np
        import sprue, sprue.numpy as jnp
        from sprue.api import driver
        inside, go = threading.Event(), threading.Event()
        class Pause:
            '''Holds the import of one module of the compiler until `go`.'''
            def find_spec(self, name, path=None, target=None):
                if name == "sprue.runtime.c_names":
                    inside.set()
                    go.wait()
                return None
        sys.meta_path.insert(0, Pause())
        loader = threading.Thread(target=driver._lowering)
        loader.start()
        inside.wait()
        threading.Timer(0.5, go.set).start()
        pid = os.fork()
        if pid == 0:
            os._exit(child_work(1, sprue.qjit(lambda x: jnp.cos(x) + 1.0)))
        fate = wait(pid)
        loader.join()
        shared = sprue.qjit(lambda x: jnp.cos(x) + 1.0)
        print(json.dumps({"child": fate, "waited for the import": go.is_set(),
                          "parent": bool(np.allclose(shared(np.zeros(5)), 2.0))}))
    """, tmp_path)
    assert out == {"child": "exit 0", "waited for the import": True, "parent": True}


def test_loading_the_compiler_registers_no_fork_handler_that_takes_a_lock_first(tmp_path):
    """A fork waits for the compiler's import in sprue's handler (sprue.base.forks), which must
    run before any other that takes a lock: os.fork() runs the last registered first, so no module
    the compiler imports may register one of its own (logging's is registered before sprue's)."""
    out = _run("""
        import json
        registered = []
        real = os.register_at_fork
        def spy(**handlers):
            if "before" in handlers:
                registered.append(getattr(handlers["before"], "__module__", None) or repr(handlers["before"]))
            return real(**handlers)
        os.register_at_fork = spy
        import sprue
        from sprue.api import driver
        registered.clear()
        driver._lowering()
        print(json.dumps({"before handlers": registered}))
    """, tmp_path)
    assert out == {"before handlers": ["sprue.lowering.backend"]}
