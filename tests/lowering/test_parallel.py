"""Parallel loops (lowering/parallel.py) on the pool linked into the library
(lowering/parallel_runtime.py): the same bits with any number of threads, calls from many host
threads at once, a fork after use, one pool for every library of a process (runtime/threads.py),
and nothing for a host to install."""
import json
import multiprocessing
import os
import re
import subprocess
import sys
import textwrap
import threading

import cffi
import numpy as np
import pytest

import sprue
import sprue.lax
import sprue.numpy as jnp
from sprue.base.errors import SprueValueError
from sprue.runtime import threads


def _program(x, y):   # elementwise: the ops parallel loops take today
    return jnp.exp(x) * y + jnp.sin(y) * jnp.tanh(x - y) - 2.0


def _reference(x, y):
    return np.exp(x) * y + np.sin(y) * np.tanh(x - y) - 2.0


@pytest.fixture
def threads_restored():
    yield
    sprue.set_num_threads(len(os.sched_getaffinity(0)))   # the default


def _args(rows=600, cols=500):
    rng = np.random.default_rng(4)
    return rng.random((rows, cols)), rng.random((rows, cols))


def test_results_are_the_same_bits_with_any_number_of_threads(tmp_path, threads_restored):
    x, y = _args()
    f = sprue.qjit(_program, keep_intermediate=str(tmp_path))
    got = {}
    for n in (1, 2, 4, 1):
        sprue.set_num_threads(n)
        got[n] = f(x, y)
    np.testing.assert_allclose(got[1], _reference(x, y), rtol=1e-12, atol=1e-12)
    assert all(np.array_equal(got[1], g) for g in got.values())
    text = next(tmp_path.glob("*.opt.ll")).read_text()
    assert "@_sprue_parallel_for(" in text        # the big ops run on the pool


def test_small_ops_stay_serial(tmp_path):
    x, y = _args(rows=8, cols=16)
    f = sprue.qjit(_program, keep_intermediate=str(tmp_path))
    np.testing.assert_allclose(f(x, y), _reference(x, y), rtol=1e-12, atol=1e-12)
    assert "_sprue_parallel_for" not in next(tmp_path.glob("*.opt.ll")).read_text()


def test_many_host_threads_call_a_parallel_kernel_at_once():
    """8 host threads x 200 calls of parallel kernels (elementwise, a split reduction, a product)
    on one pool: a call that finds it busy runs its loops itself; every result the same bits."""
    x, y = _args()
    kernels = [(sprue.qjit(_program), (x, y)), (sprue.qjit(lambda x: (x * x).sum(axis=0)), (x,)),
               (sprue.qjit(lambda x, y: x[:256, :256] @ y[:256, :256]), (x, y))]
    wants = [f(*args) for f, args in kernels]
    errors = []

    def worker(seed):
        for i in range(200):
            f, args = kernels[(i + seed) % 3]
            if not np.array_equal(f(*args), wants[(i + seed) % 3]):
                errors.append(seed)
    pool = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in pool), "a call did not return"
    assert errors == []


def _child(queue):
    x, y = _args()
    queue.put(float(np.abs(sprue.qjit(_program)(x, y) - _reference(x, y)).max()))


def test_a_child_forked_after_parallel_calls_runs_them_too():
    x, y = _args()
    sprue.qjit(_program)(x, y)   # the pool's workers exist in this process
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(queue,))
    child.start()
    child.join(timeout=120)
    assert child.exitcode == 0, "the forked child hung or failed"
    assert queue.get(timeout=5) < 1e-11


def test_the_library_needs_only_the_c_library(tmp_path):
    x, y = _args()
    sprue.qjit(_program, keep_intermediate=str(tmp_path))(x, y)
    so = next(tmp_path.glob("*.so"))
    dynamic = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True, check=True).stdout
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dynamic))
    # (and the dynamic loader, for the checked allocator's thread-local state: test_c_embedding)
    assert {n for n in needed if not n.startswith("ld-linux")} <= {
        "libc.so.6", "libm.so.6", "libpthread.so.0", "libmvec.so.1"}, needed
    # one pool for the libraries a C host links: the pool's entry points are exported and the
    # kernel reaches _sprue_parallel_for through a dynamic relocation, which the dynamic linker
    # binds to the first library's (tests/e2e/test_c_threads.py runs such a host)
    exported = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True,
                              check=True).stdout.split()
    assert {"_sprue_parallel_for", "sprue_set_num_threads", "sprue_get_num_threads", "sprue_use_pool"} <= set(exported)
    relocations = subprocess.run(["readelf", "-rW", str(so)], capture_output=True, text=True, check=True).stdout
    assert re.search(r"R_X86_64_(GLOB_DAT|JUMP_SLOT)\s+\S+\s+_sprue_parallel_for", relocations) or \
        os.uname().machine != "x86_64", relocations


def test_set_num_threads_takes_a_positive_int():
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(SprueValueError, match=r"set_num_threads\(n\): n must be a positive int"):
            sprue.set_num_threads(bad)


@pytest.mark.parametrize("env, omp, want", [("3", None, 3), (" 5x", None, 5), ("0", None, 1), ("999", None, 256),
                                            (None, None, None), (None, "1", 1), ("3", "1", 3), (None, "3,1", 3),
                                            (None, "x", None)])
def test_get_num_threads_says_the_count_before_and_after_a_library_is_loaded(env, omp, want):
    """sprue.get_num_threads(): SPRUE_NUM_THREADS as the pool reads it (strtol, 1..256), else
    OMP_NUM_THREADS's first number (as a Dask worker's nanny sets it: runtime/threads.py), else the
    CPUs this process may use; the same before any library is loaded, from the pool after, and
    what set_num_threads chose once it is called."""
    script = textwrap.dedent("""
        import json, numpy as np, sprue, sprue.numpy as jnp
        before = sprue.get_num_threads()
        sprue.qjit(lambda x: jnp.sin(x) * 2.0)(np.ones((600, 500)))
        after = sprue.get_num_threads()
        sprue.set_num_threads(2)
        print(json.dumps([before, after, sprue.get_num_threads()]))
    """)
    environ = {k: v for k, v in os.environ.items() if k not in ("SPRUE_NUM_THREADS", "OMP_NUM_THREADS")}
    if env is not None:
        environ["SPRUE_NUM_THREADS"] = env
    if omp is not None:
        environ["OMP_NUM_THREADS"] = omp
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environ, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    default = want if want is not None else len(os.sched_getaffinity(0))
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [default, default, 2]


# Two libraries with parallel loops in one new process: the counts of its threads (exact: nothing
# else starts any once both are compiled), and what a library's own pool controls say.
_TWO_LIBRARIES = textwrap.dedent("""
    import os
    import cffi
    import numpy as np
    import sprue
    import sprue.numpy as jnp
    from sprue.runtime import threads

    def tasks():
        return len(os.listdir("/proc/self/task"))

    rng = np.random.default_rng(7)
    x, y = rng.random((2000, 1000)), rng.random((2000, 1000))
    f = sprue.qjit(lambda x, y: jnp.exp(x) * y + jnp.sin(x), keep_intermediate=os.environ["DIR_F"])
    g = sprue.qjit(lambda x, y: jnp.tanh(x) * 3.0 - y, keep_intermediate=os.environ["DIR_G"])
    sprue.set_num_threads(1)
    one = [f(x, y), g(x, y)]   # compiled and run: no thread started
    base = tasks()
    sprue.set_num_threads(3)
    many = [f(x, y), g(x, y)]
    print("tasks", base, tasks())
    print("same_bits", all(np.array_equal(a, b) for a, b in zip(one, many)))
    # the same libraries, opened again (dlopen hands back the loaded ones): g's forwards to f's
    libs = []
    for d in ("DIR_F", "DIR_G"):
        ffi = cffi.FFI()
        ffi.cdef(threads.DECLS)
        libs.append(ffi.dlopen(next(p.path for p in os.scandir(os.environ[d]) if p.name.endswith(".so"))))
    lf, lg = libs
    print("counts", lf.sprue_get_num_threads(), lg.sprue_get_num_threads(), lg.sprue_set_num_threads(2),
          lf.sprue_get_num_threads())
    own = (lf._sprue_parallel_for, lf.sprue_set_num_threads, lf.sprue_get_num_threads)
    print("use_pool", lf.sprue_use_pool(*own), lg.sprue_use_pool(*own))
""")


def test_two_libraries_in_one_process_share_one_pool(tmp_path):
    env = {**os.environ, "DIR_F": str(tmp_path / "f"), "DIR_G": str(tmp_path / "g"), "SPRUE_NUM_THREADS": "2"}
    proc = subprocess.run([sys.executable, "-c", _TWO_LIBRARIES], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines()}
    for d in ("f", "g"):
        assert "@_sprue_parallel_for(" in next((tmp_path / d).glob("*.opt.ll")).read_text(), d
    base, after = map(int, got["tasks"])
    assert after == base + 2, got   # f's pool's two workers; g's loops ran on them (not two more)
    assert got["same_bits"] == ["True"]
    # g's count is f's pool's, and setting it through g sets f's
    assert got["counts"] == ["3", "3", "3", "2"]
    # a library's own pool is refused as where to forward; g already forwards there (0)
    assert got["use_pool"] == ["-1", "0"]


_OLDER_POOL = r"""
static int count = 0;
int sprue_set_num_threads(int n) { int old = count; count = n; return old; }
int sprue_get_num_threads(void) { return count; }
"""


def test_a_library_whose_pool_cannot_be_shared_is_told_the_count(tmp_path, threads_restored):
    """(one built before sprue_use_pool: it keeps its own pool)"""
    (tmp_path / "old.c").write_text(_OLDER_POOL)
    so = tmp_path / "libold.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(tmp_path / "old.c")], check=True)
    ffi = cffi.FFI()
    ffi.cdef(threads.DECLS)
    lib = ffi.dlopen(str(so))
    pool = threads.register(lib)
    assert pool is not None and pool is not threads._owner
    sprue.set_num_threads(3)
    assert lib.sprue_get_num_threads() == 3
