"""Hypothesis strategies for the fuzz classes that are programs or options rather than mutated text.

    huge_program()   a jaxpr whose arguments are small but one static intermediate or result is too
                     large for memory, or whose size product overflows int64 (broadcasts, iota, sort,
                     cumsum, concatenation, reductions over it); the worker loads and calls it, so
                     the allocation itself is reached: every case must end in a SprueError
                     (SprueMemoryError), never a signal
    options()        `sprue compile` options as JSON: kernel names (C and C++ keywords, libc/libm and
                     runtime symbols, reserved identifiers, odd bytes) and target CPUs/features (LLVM's
                     names, mutated ones, `help`, other architectures)
    fork_plan()      a fork during a compile as JSON: how long the compiling thread runs before the
                     fork, how many children, what each child compiles and calls

Each is deterministic given hypothesis's choices, like strategies.py.
"""
from __future__ import annotations

import json

from hypothesis import strategies as st

# -- huge static shapes ------------------------------------------------------------------------
# Sizes chosen so that a materialized array is far beyond the worker's address-space bound (6 GiB),
# or its byte count overflows int64: each must be refused, at parse time or by the allocation check.
HUGE_SIZES = [10 ** 6, 2 ** 31, 2 ** 32, 3 * 10 ** 9, 10 ** 11, 2 ** 40, 2 ** 62, 2 ** 63 - 1]
DTYPES = ["f64", "f32", "i8", "i32", "bool"]
ALLOCATOR_BYTES = [8 * 10 ** 9, 12 * 10 ** 9, 16 * 10 ** 9]
ITEMSIZE = {"f64": 8, "f32": 4, "i8": 1, "i32": 4, "bool": 1}


def _tail_ops(dtype: str, shape: tuple[int, ...], var: str) -> list[tuple[str, str, str]]:
    """Equations (out name, out type, text) that consume the huge `var` of type dtype[shape]."""
    t = f"{dtype}[{','.join(map(str, shape))}]"
    n = len(shape)
    ops = [("r", t, f"sort[dimension={n - 1} is_stable=True num_keys=1] {var}"),
           ("r", t, f"neg {var}" if dtype not in ("bool",) else f"not {var}")]
    if dtype in ("f64", "f32", "i32"):
        ops.append(("r", t, f"cumsum[axis={n - 1} reverse=False] {var}"))
        ops.append(("r", f"{dtype}[]", f"reduce_max[axes=({', '.join(map(str, range(n)))},) out_sharding=None]"
                                      f" {var}" if n > 1 else f"reduce_max[axes=(0,) out_sharding=None] {var}"))
    flat = 1
    for d in shape:
        flat *= d
    ops.append(("r", f"{dtype}[{flat}]", f"reshape[dimensions=None new_sizes=({flat},) sharding=None] {var}"))
    ops.append(("r", f"{dtype}[{shape[0] * 2}{''.join(',' + str(d) for d in shape[1:])}]",
                f"concatenate[dimension=0] {var} {var}"))
    return ops


@st.composite
def huge_program(draw) -> bytes:
    dtype = draw(st.sampled_from(DTYPES))
    k = draw(st.sampled_from([1, 3]))
    big = draw(st.sampled_from(HUGE_SIZES))
    rank = draw(st.sampled_from([1, 2, 2, 3]))
    if rank == 1:
        shape = (big,)
    elif rank == 2:
        shape = (big, draw(st.sampled_from([k, 10 ** 6, big])))
    else:
        shape = (draw(st.sampled_from([2, 10 ** 4])), big, draw(st.sampled_from([k, 7])))
    elements = 1
    for d in shape:
        elements *= d
    if elements * ITEMSIZE[dtype] < 1 << 34:   # fits the worker after all (10**6 alone): make it not
        shape = (2 ** 40, *shape[1:])
    if draw(st.integers(0, 2)) == 0:
        # Larger than the worker's address space (6 GiB) but smaller than this machine's memory:
        # no trace-time error, so the compiled code's allocation itself must fail cleanly.
        total = draw(st.sampled_from(ALLOCATOR_BYTES)) // ITEMSIZE[dtype]
        shape = (total,) if rank == 1 else (total // 1000, 1000) if rank == 2 else (2, total // 2000, 1000)
    t = f"{dtype}[{','.join(map(str, shape))}]"
    how = draw(st.sampled_from(["broadcast", "iota", "broadcast"]))
    if how == "iota" or shape[-1] != k:
        if dtype == "bool":
            dtype, t = "i32", t.replace("bool", "i32")
        make = f"b:{t} = iota[dimension=0 dtype={_np_name(dtype)} shape=({', '.join(map(str, shape))},) sharding=None]"
        make = make.replace(",)", ")") if len(shape) > 1 else make
    else:   # the argument along the last axis
        make = (f"b:{t} = broadcast_in_dim[broadcast_dimensions=({len(shape) - 1},) shape=({', '.join(map(str, shape))},)"
                f" sharding=None] a").replace(",)", ")") if len(shape) > 1 else \
               f"b:{t} = broadcast_in_dim[broadcast_dimensions=(0,) shape=({shape[0]},) sharding=None] a"
    eqns = [make]
    outs = ["b"]
    if draw(st.booleans()):
        name, rtype, text = draw(st.sampled_from(_tail_ops(dtype, shape, "b")))
        eqns.append(f"{name}:{rtype} = {text}")
        outs = [name]
    body = "\n    ".join(eqns)
    return f"{{ lambda ; a:{dtype}[{k}]. let\n    {body}\n  in ({', '.join(outs)},) }}\n".encode()


def _np_name(dtype: str) -> str:
    return {"f64": "float64", "f32": "float32", "i8": "int8", "i32": "int32", "bool": "bool"}[dtype]


# -- compile options ----------------------------------------------------------------------------
C_KEYWORDS = ["int", "char", "return", "static", "struct", "typedef", "void", "while", "_Bool", "restrict",
              "inline", "class", "template", "namespace", "new", "delete", "operator", "this", "bool", "true"]
SYMBOLS = ["main", "free", "malloc", "calloc", "realloc", "aligned_alloc", "posix_memalign", "madvise", "memcpy",
           "memset", "exit", "abort", "printf", "errno", "sin", "exp", "tanh", "pow", "setjmp", "longjmp",
           "memrefCopy", "sprue_aligned_alloc", "memref_f64_1d", "memref_f32_2d", "_mlir_ciface_main",
           "__libc_start_main", "_Exit", "__x", "_X", "main_results", "environ", "stdout", "dlopen", "pthread_create"]
ORDINARY = ["kernel", "axpy", "k2", "my_kernel", "f", "rms", "softmax_scores", "a" * 200]
ODD = ["", "1abc", "a-b", "a b", "a.b", "é", "a\x00b", "../x", "a/b", "$x", "a;b", "\n", "x" * 5000]
CPUS = ["host", "generic", "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "skylake", "skylake-avx512", "znver3",
        "znver4", "znver9", "i386", "i686", "pentium", "help", "", " ", "native", "cortex-a72", "apple-m1",
        "sm_80", "gfx90a", "-mcpu", "skylake,avx2", "SKYLAKE", "k8", "core2", "x" * 300]
FEATURES = ["", "+avx2", "-avx2", "+avx512f", "+sse2,+fma", "avx2", "+nonexistent", "+help", "help", ",", "+",
            "+avx2,-avx2", "+64bit", "-64bit", "+neon", "-sse2", "+x87"]


@st.composite
def _mutated_word(draw, words: list[str]) -> str:
    w = draw(st.sampled_from(words))
    edit = draw(st.sampled_from(["keep", "keep", "upper", "prefix", "suffix", "digit", "cut"]))
    if edit == "upper":
        return w.upper()
    if edit == "prefix":
        return draw(st.sampled_from(["_", "__", "sprue_", "_mlir_ciface_", "x"])) + w
    if edit == "suffix":
        return w + draw(st.sampled_from(["_", "2", "_results", "_free_results", "_into", "_result_shapes"]))
    if edit == "digit":
        return w + str(draw(st.integers(0, 99)))
    if edit == "cut" and len(w) > 1:
        return w[:draw(st.integers(1, len(w) - 1))]
    return w


@st.composite
def options(draw) -> bytes:
    name = draw(st.one_of(_mutated_word(C_KEYWORDS + SYMBOLS + ORDINARY), st.sampled_from(ODD),
                          st.text(min_size=1, max_size=12)))
    cpu = draw(st.one_of(st.just("host"), _mutated_word(CPUS)))
    features = draw(st.one_of(st.just(""), st.sampled_from(FEATURES),
                              st.lists(st.sampled_from(FEATURES[1:]), max_size=3).map(",".join)))
    return json.dumps({"name": name, "cpu": cpu, "features": features}).encode()


# -- fork during a compile ---------------------------------------------------------------------
@st.composite
def fork_plan(draw) -> bytes:
    return json.dumps({
        "delay_ms": draw(st.sampled_from([0, 1, 5, 20, 50, 120, 300])),
        "children": draw(st.integers(1, 4)),
        "threads": draw(st.integers(1, 2)),
        "child_compiles": draw(st.booleans()),
        "size": draw(st.integers(1, 64)),
    }).encode()
