"""Parallel loops (lowering/parallel.py) on the pool linked into the library
(lowering/parallel_runtime.py): the same bits with any number of threads, calls from many host
threads at once, a fork after use, and nothing for a host to install."""
import multiprocessing
import os
import re
import subprocess
import threading

import numpy as np
import pytest

import sprue
import sprue.lax
import sprue.numpy as jnp
from sprue.base.errors import SprueValueError


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
    x, y = _args()
    f = sprue.qjit(_program)
    want = f(x, y)
    errors = []

    def worker(seed):
        for _ in range(40):
            if not np.array_equal(f(x, y), want):
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


def test_set_num_threads_takes_a_positive_int():
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(SprueValueError, match=r"set_num_threads\(n\): n must be a positive int"):
            sprue.set_num_threads(bad)
