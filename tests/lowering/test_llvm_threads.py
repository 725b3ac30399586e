"""LLVM's modules compiled at once (lowering/llvm_threads.py): the same objects as one at a time,
results in order, errors raised on the caller's thread, llvmlite usable after, and one thread when
there is one CPU or llvmlite's lock has callbacks."""
import locale
import os
import threading

import llvmlite.binding as llvm
import numpy as np
import pytest

import sprue
from sprue.lowering import backend, llvm_threads

pytestmark = pytest.mark.skipif(llvm_threads.llvmlite_lock() is None,
                                reason="llvmlite's lock is not the one llvm_threads.py takes over")


def _module(k: int) -> str:
    return (f"define void @scale{k}(ptr noalias %p, i64 %n) {{\nentry:\n  br label %loop\nloop:\n"
            "  %i = phi i64 [0, %entry], [%j, %loop]\n  %a = getelementptr double, ptr %p, i64 %i\n"
            f"  %v = load double, ptr %a\n  %w = fmul double %v, {k}.0\n  %x = call double @llvm.exp.f64(double %w)\n"
            "  store double %x, ptr %a\n  %j = add i64 %i, 1\n  %c = icmp slt i64 %j, %n\n"
            "  br i1 %c, label %loop, label %done\ndone:\n  ret void\n}\ndeclare double @llvm.exp.f64(double)\n")


def _compile(i: int, context, slot: int) -> tuple[str, bytes, str | None]:
    return backend._optimize_and_emit(_module(i), 3, 3, backend.HOST_CPU, "", (), False, context=context,
                                      slot=slot, options=False)


def _at_once(tasks, work, threads):
    with backend._llvm_lock:
        for slot in range(threads):
            backend._target_machine(backend.HOST_CPU, 3, "", slot)
        return llvm_threads.run(tasks, work, threads)


def test_modules_compiled_at_once_give_the_objects_of_one_at_a_time_in_order():
    tasks = list(range(1, 7))
    serial = _at_once(tasks, _compile, 1)
    threads_seen = set()

    def watched(i, context, slot):
        threads_seen.add(threading.current_thread().name)
        return _compile(i, context, slot)

    parallel = _at_once(tasks, watched, 3)
    assert [obj for _, obj, _ in parallel] == [obj for _, obj, _ in serial]
    assert [text for text, _, _ in parallel] == [text for text, _, _ in serial]
    assert len(threads_seen) >= 2


def test_an_error_in_one_module_is_raised_on_the_callers_thread_and_llvmlite_stays_usable():
    def failing(i, context, slot):
        if i == 3:
            llvm.parse_assembly("define void @broken( {", context=context)
        return _compile(i, context, slot)

    with pytest.raises(RuntimeError, match="LLVM IR parsing error"):
        _at_once(list(range(1, 6)), failing, 2)
    assert not llvm_threads._section.exempt
    parsed = []   # another thread takes llvmlite's lock as before
    other = threading.Thread(target=lambda: parsed.append(str(llvm.parse_assembly(_module(9)))))
    other.start()
    other.join(timeout=30)
    assert parsed and "@scale9" in parsed[0]


def test_an_interrupt_on_the_callers_thread_is_raised_once_the_other_threads_stopped():
    def interrupted(i, context, slot):
        if slot == 0:
            raise KeyboardInterrupt
        return _compile(i, context, slot)

    with pytest.raises(KeyboardInterrupt):
        _at_once(list(range(1, 9)), interrupted, 3)
    assert not llvm_threads._section.exempt
    assert not [t for t in threading.enumerate() if t.name.startswith("sprue-llvm-")]


def test_one_thread_with_one_cpu_or_a_lock_callback(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert llvm_threads.workers() == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    assert llvm_threads.workers() == llvm_threads.MAX_WORKERS

    def nothing():
        pass

    llvm.ffi.register_lock_callback(nothing, nothing)
    try:
        assert llvm_threads.workers() == 1
    finally:
        llvm.ffi.unregister_lock_callback(nothing, nothing)


def test_a_deep_program_compiled_on_two_threads_computes_what_numpy_does(monkeypatch):
    """60 layers: more nests than outline.py leaves inline, cut into modules compiled at once."""
    monkeypatch.setattr(llvm_threads, "workers", lambda: 2)
    sections, run = [], llvm_threads.run
    monkeypatch.setattr(llvm_threads, "run", lambda tasks, work, threads: sections.append((len(tasks), threads))
                        or run(tasks, work, threads))
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal((8, 8)) / 3 for _ in range(60)]
    x = rng.standard_normal((4, 8))

    def net(x, *ws):
        for i, w in enumerate(ws):
            x = sprue.numpy.tanh(x @ w) if i % 2 else sprue.numpy.exp(-(x @ w) ** 2)
        return x

    expected = x
    for i, w in enumerate(ws):
        expected = np.tanh(expected @ w) if i % 2 else np.exp(-(expected @ w) ** 2)
    np.testing.assert_allclose(sprue.qjit(net)(x, *ws), expected, rtol=1e-12, atol=1e-14)
    assert sections and sections[0][0] >= 3 and sections[0][1] == 2   # two parts of kernels and the glue


def test_threads_printing_modules_at_once_leave_the_locale_as_it_was():
    """llvmlite prints a module with the locale set to "C" (module_text's comment)."""
    before = locale.setlocale(locale.LC_CTYPE)

    def printing(i, context, slot):
        module = llvm.parse_assembly(_module(i), context=context)
        return [len(llvm_threads.module_text(module)) for _ in range(200)]

    for _ in range(5):
        _at_once(list(range(1, 9)), printing, 4)
        assert locale.setlocale(locale.LC_CTYPE) == before
