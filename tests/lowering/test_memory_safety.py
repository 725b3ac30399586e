"""Generated code is memory-safe: out-of-bounds dynamic indices clamp (JAX's semantics), integer
division by zero gives a documented value, and sizes that are negative, too large for memory or
whose product overflows raise an error instead of reaching the allocator: arrays too large for
memory are SprueMemoryErrors naming the size and the line, at trace time when their shapes are
static, and an allocation that fails at run time ends the call with one, after freeing what the
call allocated (lowering/allocation.py). The cases that could crash run in a child process, so a
regression shows as a failed test, not a dead test run."""
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax


def run_child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("i", [0, 4, 5, 100, -1, -5, -6, -100, 2 ** 40, -(2 ** 40)])
def test_dynamic_index_clamps(i):
    f = sprue.qjit(lambda x, i: x[i])
    x = np.arange(5.0)
    assert f(x, i) == x[np.clip(i if i >= 0 else i + 5, 0, 4)]


@pytest.mark.parametrize("start", [-10, 0, 3, 7, 2 ** 40])
def test_dynamic_slice_starts_clamp(start):
    f = sprue.qjit(lambda x, s: lax.dynamic_slice(x, (s,), (3,)))
    x = np.arange(8.0)
    s = min(max(start, 0), 5)
    np.testing.assert_array_equal(f(x, start), x[s:s + 3])


@pytest.mark.parametrize("i", [-100, -6, 5, 100])
def test_out_of_bounds_updates_are_dropped(i):
    f = sprue.qjit(lambda x, i: x.at[i].set(-1.0))
    x = np.arange(5.0)
    np.testing.assert_array_equal(f(x, i), x)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8])
def test_integer_division_by_zero_is_zero(dtype):
    f = sprue.qjit(lambda a, b: (lax.div(a, b), lax.rem(a, b), a // b, a % b))
    a = np.array([7, 0, 5], dtype)
    b = np.zeros(3, dtype)
    for got in f(a, b):
        np.testing.assert_array_equal(got, np.zeros(3, dtype))


def test_int_min_divided_by_minus_one_does_not_trap():
    f = sprue.qjit(lambda a, b: (lax.div(a, b), lax.rem(a, b)))
    for dt in (np.int64, np.int32, np.int8):
        a = np.array([np.iinfo(dt).min, -6], dt)
        q, r = f(a, np.array([-1, -1], dt))
        np.testing.assert_array_equal(q, [np.iinfo(dt).min, 6])   # INT_MIN / -1 wraps (XLA's value), no SIGFPE
        np.testing.assert_array_equal(r, [0, 0])


@pytest.mark.parametrize("n", [-1, -(2 ** 40)])
def test_negative_sizes_are_errors(n):
    f = sprue.qjit(lambda n: jnp.zeros(n))
    with pytest.raises(sprue.SprueValueError, match="negative dimensions are not allowed"):
        f(n)


def test_sizes_too_large_for_memory_or_overflowing_are_errors_not_crashes():
    proc = run_child("""
        import numpy as np, sprue, sprue.numpy as jnp
        f = sprue.qjit(lambda n, m: jnp.zeros((n, m), np.int8))
        g = sprue.qjit(lambda n: jnp.ones(n))
        h = sprue.qjit(lambda n: jnp.eye(n))
        cases = [(f, (2 ** 32, 2 ** 32)), (f, (2 ** 31, 2 ** 31)), (f, (2 ** 62, 4)), (g, (2 ** 62,)),
                 (g, (2 ** 40,)), (h, (2 ** 20,))]
        for fn, args in cases:
            try:
                fn(*args)
                print("NO ERROR", args)
            except sprue.SprueValueError as e:
                assert "would take more than this machine's memory" in str(e), e
                print("ok")
        print(f(3, 4).shape, g(5).shape, h(3).shape)
    """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("ok") == 6, proc.stdout
    assert "(3, 4) (5,) (3, 3)" in proc.stdout


def test_size_arithmetic_that_overflows_is_caught():
    proc = run_child("""
        import numpy as np, sprue, sprue.numpy as jnp
        f = sprue.qjit(lambda n: jnp.ones((n * n, n)))     # n*n*n wraps around in int64
        try:
            f(2 ** 22)
            print("NO ERROR")
        except sprue.SprueValueError as e:
            print("ok" if "memory" in str(e) else e)
    """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "ok", proc.stdout


def test_failed_checks_zero_the_later_sizes():
    # after a failed check the compiled code runs on; sizes used after it are 0, so a loop bounded by
    # a size that failed its check does not run off the end of anything
    @sprue.qjit
    def f(n, x):
        y = jnp.ones(n)                  # n = -5: the sign check fails
        return x + jnp.sum(y), y.shape[0]
    with pytest.raises(sprue.SprueValueError, match="negative dimensions"):
        f(-5, np.ones(3))
    out, size = f(2, np.ones(3))
    np.testing.assert_array_equal(out, np.full(3, 3.0))
    assert size == 2


# -- arrays too large for memory, with static sizes (issue 20, item 1) ------------------------------
# Each case makes an array that cannot exist (8 TB, or a byte count past 2**63) and must raise
# SprueMemoryError naming its size and the line that makes it, at trace time: never a crash.
STATIC_CASES = {
    "outer": ("lambda x, y: jnp.outer(x, y)", "(big, big)", "(1000000, 1000000)", "8000000000000 bytes"),
    "zeros_plus": ("lambda x: jnp.zeros((10**6, 10**6)) + x", "(big,)", "(1000000, 1000000)", "8000000000000 bytes"),
    "broadcast_to": ("lambda x: jnp.broadcast_to(x, (10**6, 10**6))", "(big,)", "(1000000, 1000000)",
                     "8000000000000 bytes"),
    "overflow": ("lambda x: jnp.zeros((2**32, 2**32)) + x", "(one,)", "(4294967296, 4294967296)",
                 "overflows the 64-bit byte count"),
    "overflow_int8": ("lambda x: jnp.ones((2**40, 2**40), np.int8)", "(one,)", "(1099511627776, 1099511627776)",
                      "overflows the 64-bit byte count"),
    "tile": ("lambda x: jnp.tile(x, 10**11)", "(three,)", "(100000000000, 3)", "2400000000000 bytes"),
    "sum": ("lambda x: jnp.sum(jnp.outer(x, x))", "(big,)", "(1000000, 1000000)", "8000000000000 bytes"),
    "sort": ("lambda x: jnp.sort(jnp.outer(x, x), axis=None)[:3]", "(big,)", "(1000000, 1000000)",
             "8000000000000 bytes"),
    "matmul": ("lambda x: x[:, None] @ x[None, :]", "(big,)", "(1000000, 1000000)", "8000000000000 bytes"),
    "scan_stack": ("lambda x: lax.scan(lambda c, _: (c, c), x, None, length=10**6)[1]", "(big,)",
                   "(1000000, 1000000)", "8000000000000 bytes"),
    "vmap": ("lambda x: sprue.vmap(lambda r: r * x)(x)", "(big,)", "(1000000, 1000000)", "8000000000000 bytes"),
}


def run_script(tmp_path, code: str) -> subprocess.CompletedProcess:
    """Runs code from a file (so that its lines have a file name) in a child process."""
    script = tmp_path / "repro.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=tmp_path)


def test_static_arrays_too_large_for_memory_are_errors_at_trace_time(tmp_path):
    lines = {}
    body = ["import numpy as np, sprue, sprue.numpy as jnp", "from sprue import lax",
            "big, one, three = np.ones(10**6), np.ones(1), np.ones(3)", "def attempt(name, f, args):",
            "    try:", "        f(*args)", "        print(name, 'NO ERROR')", "    except sprue.SprueMemoryError as e:",
            "        print(name, 'MEMORY', repr(str(e)))"]
    for name, (fn, args, _, _) in STATIC_CASES.items():
        body.append(f"f_{name} = {fn}")
        lines[name] = len(body)
        body.append(f"attempt({name!r}, sprue.qjit(f_{name}), {args})")
    body.append("attempt('eager', lambda: jnp.zeros((2**32, 2**32)), ())")
    lines["eager"] = len(body)
    proc = run_script(tmp_path, "\n".join(body) + "\n")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in proc.stdout.splitlines()}
    for name, (_, _, shape, size) in {**STATIC_CASES, "eager": (None, None, "(4294967296, 4294967296)",
                                                              "147573952589676412928 bytes")}.items():
        verdict = out[name]
        assert verdict.startswith("MEMORY"), (name, verdict)
        assert f"an array of shape {shape}" in verdict and size in verdict, (name, verdict)
        where = f"repro.py:{lines[name]} (<lambda>)"   # the line that makes the array: the lambda's
        assert where in verdict, (name, where, verdict)


def test_loaded_jaxpr_with_a_huge_static_shape_is_a_memory_error(tmp_path):
    (tmp_path / "big.jaxpr").write_text(
        "{ lambda ; a:f64[1000000]. let\n"
        "    b:f64[1000000,1000000] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(1000000, 1000000)"
        " sharding=None] a\n"
        "    c:f64[1000000] = reduce_sum[axes=(0,)] b\n"
        "  in (c,) }\n")
    (tmp_path / "overflow.jaxpr").write_text(
        "{ lambda ; a:f64[4294967296,4294967296]. let\n    c:f64[4294967296,4294967296] = neg a\n  in (c,) }\n")
    proc = run_script(tmp_path, """
        import sprue
        for name in ("big.jaxpr", "overflow.jaxpr"):
            try:
                sprue.load(name)
                print(name, "NO ERROR")
            except sprue.SprueMemoryError as e:
                print(name, "MEMORY", e)
    """)
    assert proc.returncode == 0, proc.stderr[-3000:]
    big, overflow = proc.stdout.splitlines()
    assert big.startswith("big.jaxpr MEMORY big.jaxpr:2:5: an array of shape (1000000, 1000000) and dtype float64"
                          " would take 8000000000000 bytes"), big
    assert "it is made by broadcast_in_dim" in big
    assert overflow.startswith("overflow.jaxpr MEMORY overflow.jaxpr:1:14: the type f64[4294967296,4294967296]"), overflow
    assert "overflows the 64-bit byte count" in overflow


def test_parsed_types_whose_byte_count_overflows_are_memory_errors():
    from sprue.io.jaxpr_parser import parse_jaxpr
    with pytest.raises(sprue.SprueMemoryError, match=r"<jaxpr>:1:14: the type i8\[9223372036854775807,2\]"):
        parse_jaxpr("{ lambda ; a:i8[9223372036854775807,2]. let  in (a,) }")
    parse_jaxpr("{ lambda ; a:i8[9223372036854775807]. let  in (a,) }")   # 2**63-1 bytes: no overflow
    parse_jaxpr("{ lambda ; a:f64[0,9223372036854775807,9223372036854775807]. let  in (a,) }")   # empty


def test_a_static_size_known_too_large_for_memory_in_a_numpy_creation_is_a_memory_error():
    f = sprue.qjit(lambda n: jnp.zeros((n, 10**7, 10**7)))   # even with n = 1: 800 TB
    with pytest.raises(sprue.SprueMemoryError, match=r"shape \(\w+, 10000000, 10000000\).*more than this machine's"
                                                     r" memory.*test_memory_safety.py"):
        f(1)


def test_a_failed_run_time_size_check_is_a_memory_error_too():
    f = sprue.qjit(lambda n: jnp.ones(n * n * 3))
    with pytest.raises(sprue.SprueMemoryError, match="would take more than this machine's memory"):
        f(2 ** 32)
    assert f(3).shape == (27,)


# -- allocations that fail at run time --------------------------------------------------------------
# A memory limit (RLIMIT_AS) makes an allocation of the compiled code fail although the array is
# smaller than this machine's memory (the trace-time check passes): the call must end with a
# SprueMemoryError naming the size and the line, free everything it allocated, and the next call work.
needs_linux_memory = pytest.mark.skipif(
    not sys.platform.startswith("linux") or sprue.ir.core.memory_bytes() < 8 << 30,
    reason="RLIMIT_AS is enforced on Linux only, and the test arrays (2 GB) must fit in this machine's memory")

_LIMIT = """
import os, resource
def limit_memory(extra):   # this process's address space may grow by `extra` bytes only
    vm = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (vm + extra, resource.RLIM_INFINITY))
"""


def line_of(code: str, text: str) -> int:
    """The (1-based) line of `code` holding `text`."""
    return next(i for i, line in enumerate(code.splitlines(), 1) if text in line)


@needs_linux_memory
def test_a_failed_allocation_is_a_memory_error_with_its_size_and_line(tmp_path):
    code = _LIMIT + """
import numpy as np, sprue, sprue.numpy as jnp

def kernel(x):
    y = jnp.outer(x, x)
    return jnp.sort(y.ravel())[:3]

f = sprue.qjit(kernel)
x, small = np.ones(16000), np.ones(10)         # y: 16000 * 16000 * 8 bytes = 2.048 GB
print(f(small))                                 # one compilation for the small shape ...
f.result_shapes(x)                              # ... and one for the big one, compiled without running it
limit_memory(1 << 30)
for attempt in range(6):                        # the general path first, then the fast path
    try:
        f(x)
        print("NO ERROR")
    except sprue.SprueMemoryError as e:
        print("MEMORY", e)
print(f(small), f(np.arange(10.0)))             # the library works on after the failures
"""
    proc = run_script(tmp_path, code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    errors = [line for line in lines if line.startswith("MEMORY")]
    assert len(errors) == 6 and "NO ERROR" not in proc.stdout, proc.stdout
    for e in errors:   # the same allocation every time: nothing leaked by the failed calls
        assert "could not allocate 2048000000 bytes (1.9 GiB) while running the compiled code" in e, e
        # the array of that size, and the lines that make it (the product, and its flattening)
        assert "f64[16000,16000]" in e and f"repro.py:{line_of(code, 'jnp.outer')} (kernel)" in e, e
    assert lines[-1] == "[1. 1. 1.] [0. 0. 0.]", lines[-1]


@needs_linux_memory
def test_failed_calls_free_what_they_allocated(tmp_path):
    # The product (1.15 GB) is allocated, then the copy its sort needs fails under a 1.6 GB limit.
    # glibc's mallinfo2 counts the bytes malloc has handed out (mmap'ed blocks included): after 8
    # failed calls, it must be what it was before the first.
    proc = run_script(tmp_path, _LIMIT + """
import ctypes
import numpy as np, sprue, sprue.numpy as jnp

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2

def in_use():
    m = libc.mallinfo2()
    return m.hblkhd + m.uordblks

@sprue.qjit
def two(x):
    return jnp.sort(jnp.outer(x, x).ravel())[::100000]

x = np.ones(12000)                              # the product: 1152000000 bytes
print(two(x[:10]))
two.result_shapes(x)                            # compiled, not run
limit_memory(1600 << 20)
before = in_use()
sizes = []
for attempt in range(8):
    try:
        two(x)
        sizes.append("none")
    except sprue.SprueMemoryError as e:
        sizes.append(str(e).split("could not allocate ")[1].split(" ")[0])
print(sizes)
print(in_use() - before)
print(two(x[:10]))
""")
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[1] == str(["1152000000"] * 8), lines
    assert int(lines[2]) < 64 << 20, lines      # not the 1.15 GB product (leaked: +1152008992 bytes)
    assert lines[3] == lines[0] == "[1.]", lines


@needs_linux_memory
def test_failed_allocations_with_sizes_known_at_run_time_every_call_path(tmp_path):
    proc = run_script(tmp_path, _LIMIT + """
import threading
import numpy as np, sprue, sprue.numpy as jnp

f = sprue.qjit(lambda x: jnp.sum(jnp.sort(jnp.outer(x, x).ravel())[::1000]), abstracted_axes={0: "n"})
x = np.ones(16000)
print(f(x[:10]))
cf = f._last.function                            # the runtime's CompiledFunction: fast and general paths
limit_memory(1 << 30)
outcomes = []

def call(how):
    try:
        how()
        outcomes.append("NO ERROR")
    except sprue.SprueMemoryError as e:
        outcomes.append("could not allocate 2048000000 bytes" in str(e))

call(lambda: f(x))
call(lambda: cf(16000, x))                       # fast path
call(lambda: cf(16000, x.astype(np.float32)))    # general path (an argument it converts)
call(lambda: cf(16000, x, out=np.empty(())))     # destination passing
threads = [threading.Thread(target=call, args=(lambda: f(x),)) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(outcomes)
print(float(f(x[:10])), float(cf(3, np.ones(3))[0]))
""")
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[1] == str([True] * 8), lines
    assert lines[0] == "1.0" and lines[2] == "1.0 1.0", lines   # sum(sort(outer)[::1000]): the first element


# -- the cost of the check -------------------------------------------------------------------------
def test_kernels_without_allocation_failures_return_status_zero_and_export_the_message_function():
    f = sprue.qjit(lambda x: x * 2.0 + 1.0)
    assert f(1.5) == 4.0
    cf = f._last.function
    assert cf.checked   # built by sprue: its entry returns a status
    assert cf._ffi.string(cf._lib._sprue_error_main()) == b""   # no failure on this thread yet


def test_stack_buffers_that_could_overflow_the_stack_are_refused():
    from sprue.base.errors import CompileError
    from sprue.lowering.allocation import MAX_STACK_BUFFER, check_stack, type_bytes
    assert type_bytes("[4 x double]") == 32 and type_bytes("{ ptr, ptr, i64, [2 x i64], [2 x i64] }") == 56
    assert type_bytes("<8 x float>") == 32 and type_bytes("[3 x [5 x i1]]") == 15
    check_stack("define void @f() {\n  %1 = alloca { ptr, ptr, i64 }, i64 1, align 8\n  ret void\n}\n")
    check_stack(f"  %2 = alloca [{MAX_STACK_BUFFER // 8} x double], align 16\n")   # exactly the limit
    with pytest.raises(CompileError, match=r"a stack buffer of 8000000 bytes \(%3 = alloca \[1000000 x double\]"):
        check_stack("  %3 = alloca [1000000 x double], align 16\n")
    with pytest.raises(CompileError, match="a stack buffer of 800000 bytes"):
        check_stack("  %4 = alloca double, i64 100000, align 8\n")
    with pytest.raises(CompileError, match="a size known only at run time"):
        check_stack("  %5 = alloca i8, i64 %n, align 16\n")


def test_only_checkable_allocation_functions_reach_the_object():
    import llvmlite.binding as llvm

    from sprue.base.errors import CompileError
    from sprue.lowering.allocation import CHECKED, check_allocations
    llvm.initialize_native_target()
    decls = "".join(f"declare ptr @{n}(i64, i64)\n" for n in CHECKED if n != "free") + "declare void @free(ptr)\n"
    mod = llvm.parse_assembly(decls + "define ptr @k(i64 %n) {\n  %p = call ptr @malloc(i64 %n, i64 0)\n  ret ptr %p\n}\n")
    check_allocations(mod)
    assert sorted(f.name for f in mod.functions if f.is_declaration) == sorted(CHECKED.values())
    bad = llvm.parse_assembly("declare i32 @posix_memalign(ptr, i64, i64)\n")
    with pytest.raises(CompileError, match="calls posix_memalign, whose allocations sprue cannot check"):
        check_allocations(bad)


def test_the_compiled_code_calls_only_the_checked_allocator(tmp_path):
    f = sprue.qjit(lambda x: jnp.sort(jnp.outer(x, x).ravel())[:3], keep_intermediate=tmp_path)
    np.testing.assert_array_equal(f(np.arange(4.0)), [0.0, 0.0, 0.0])
    optimized = next(tmp_path.glob("*.opt.ll")).read_text()
    assert "@_sprue_aligned_alloc(" in optimized and "@_sprue_free(" in optimized
    assert not re.search(r"@(aligned_alloc|malloc|calloc|realloc|free)\(", optimized)
    assert re.search(r"define i64 @_mlir_ciface_main\(", optimized)   # the checked entry: returns the status
