"""A module cut for code generation (lowering/module_split.py), on LLVM IR text: the glue split
off, the kernels cut into parts; which function goes where, what is declared, made hidden and
renamed, and when nothing is split."""
import ctypes
import re

import llvmlite.binding as llvm

from sprue.lowering import backend
from sprue.lowering.module_split import FUNCTION_COST, GLUE_COST, KERNEL_PART_MIN, SPLIT_MIN_GLUE, split_module

N = SPLIT_MIN_GLUE // 2 + 1   # a glue function of 2 * N instructions: just enough


def _glue(name: str, calls: str, n: int = N, linkage: str = "") -> str:
    body = "".join(f"  %v{i} = load i64, ptr %p\n  store i64 %v{i}, ptr %q\n" for i in range(n))
    return f"define {linkage}void @{name}(ptr %p, ptr %q) {{\n{body}  call void @{calls}(ptr %p)\n  ret void\n}}\n"


KERNEL = """define internal void @kernel(ptr %p) #0 {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%j, %loop]
  %a = getelementptr double, ptr %p, i64 %i
  %v = load double, ptr %a
  %w = fmul double %v, 2.0
  store double %w, ptr %a
  %j = add i64 %i, 1
  %c = icmp slt i64 %j, 64
  br i1 %c, label %loop, label %done
done:
  ret void
}
attributes #0 = { noinline }
@table = private constant [2 x i64] [i64 1, i64 2]
"""


def split_off_glue(llvm_ir: str):
    """(the kernels' module, the glue's, the names called across) of a split into two, or None."""
    split = split_module(llvm_ir)
    if split is None:
        return None
    (kernels,) = split.kernels
    return kernels, split.glue, split.cross


def test_glue_and_kernels_go_to_modules_of_their_own_and_link_by_hidden_names():
    ir = _glue("entry", "kernel") + KERNEL
    kernels, glue, cross = split_off_glue(ir)
    (renamed,) = cross
    assert renamed.startswith("kernel.") and len(renamed) == len("kernel.") + 12
    assert f"define hidden void @{renamed}(" in kernels and "define void @entry(" not in kernels
    assert f"declare hidden void @{renamed}(" in glue and "define void @entry(" in glue
    assert f"call void @{renamed}(" in glue
    assert "@table = private constant" not in kernels + glue   # (no function reads it)
    for text in (kernels, glue):   # each a module LLVM reads
        llvm.parse_assembly(text).verify()


def test_an_exported_function_called_across_keeps_its_name_and_visibility():
    ir = _glue("entry", "kernel") + KERNEL.replace("define internal void @kernel", "define void @kernel")
    kernels, glue, cross = split_off_glue(ir)
    assert cross == {"kernel"}
    assert "define void @kernel(" in kernels and "declare void @kernel(" in glue


def test_nothing_is_split_below_the_threshold_without_kernels_or_with_a_variable():
    assert split_off_glue(_glue("entry", "kernel", n=N // 4) + KERNEL) is None
    assert split_off_glue(_glue("entry", "other") + _glue("other", "ext", linkage="internal ")
                          + "declare void @ext(ptr)\n") is None
    assert split_off_glue(_glue("entry", "kernel") + KERNEL + "@counter = internal global i64 0\n") is None


def _runs(obj_bytes: bytes, tmp_path) -> bool:
    """Whether the object, linked into a library, runs `entry` (which calls the kernel)."""
    obj = tmp_path / "k.o"
    obj.write_bytes(obj_bytes)
    lib = ctypes.CDLL(str(backend.link_shared(obj, tmp_path / "libk.so")))
    data = (ctypes.c_double * 64)(*range(64))
    scratch = (ctypes.c_int64 * 1)(7)
    lib.entry(data, scratch)
    return list(data) == [2.0 * i for i in range(64)]


def test_a_split_module_compiles_to_two_objects_that_link(tmp_path):
    result = backend.codegen(_glue("entry", "kernel") + KERNEL)
    assert len(result.objects) == 2
    assert _runs(result.object_file(tmp_path), tmp_path)   # the glue calls the kernel in the other object


def test_emit_object_gives_one_whole_object(tmp_path):
    assert _runs(backend.emit_object(_glue("entry", "kernel") + KERNEL), tmp_path)


def _kernel(name: str, factor: int, linkage: str = "internal ", attrs: str = "#0") -> str:
    """A loop of KERNEL_PART_MIN instructions or more over 64 doubles, times `factor`."""
    body = "".join(f"  %w{i} = fmul double %v, {factor}.0\n  store double %w{i}, ptr %a\n"
                   for i in range(KERNEL_PART_MIN))
    return (f"define {linkage}void @{name}(ptr %p) {attrs} {{\nentry:\n  br label %loop\nloop:\n"
            "  %i = phi i64 [0, %entry], [%j, %loop]\n  %a = getelementptr double, ptr %p, i64 %i\n"
            f"  %v = load double, ptr %a\n{body}  %j = add i64 %i, 1\n  %c = icmp slt i64 %j, 64\n"
            "  br i1 %c, label %loop, label %done\ndone:\n  ret void\n}\n")


def _defines(text: str, name: str) -> bool:
    """Whether the module text defines `name` (renamed or not)."""
    return re.search(rf"^define [^@]*@{name}(?:\.[0-9a-f]+)?\(", text, re.M) is not None


def _calling(*kernels: str) -> str:
    calls = "".join(f"  call void @{k}(ptr %p)\n" for k in kernels)
    return f"define void @entry(ptr %p, ptr %q) {{\n{calls}  ret void\n}}\n"


TABLE_USER = """define internal void @reads_table(ptr %p) #0 {
  %t = load i64, ptr @table
  store i64 %t, ptr %p
  ret void
}
"""


def test_noinline_kernels_are_spread_over_parts_and_the_others_stay_together():
    ir = (_calling("k1", "k2", "k3", "inlinable") + _kernel("k1", 2) + _kernel("k2", 3) + _kernel("k3", 5)
          + _kernel("inlinable", 7, attrs="") + "attributes #0 = { noinline }\n")
    split = split_module(ir, kernel_parts=2)
    assert split is not None and split.glue is None and len(split.kernels) == 2
    first, second = split.kernels
    assert "define void @entry(" in first and "define internal void @inlinable(" in first   # may be inlined
    homes = {k: [i for i, text in enumerate(split.kernels) if _defines(text, k)] for k in ("k1", "k2", "k3")}
    assert all(len(h) == 1 for h in homes.values()) and {h[0] for h in homes.values()} == {0, 1}
    for text in split.kernels:
        llvm.parse_assembly(text).verify()
    assert split_module(ir, kernel_parts=1) is None   # one part and no glue: nothing to split
    assert split_module(_calling("k1") + _kernel("k1", 2) + "attributes #0 = { noinline }\n", kernel_parts=4) is None


def test_a_constant_goes_only_to_the_modules_that_read_it():
    ir = (_calling("k1", "k2", "reads_table") + _kernel("k1", 2) + _kernel("k2", 3) + TABLE_USER
          + "attributes #0 = { noinline }\n@table = private constant [2 x i64] [i64 1, i64 2]\n")
    split = split_module(ir, kernel_parts=3)
    assert split is not None and len(split.kernels) >= 2
    readers = [text for text in split.kernels if "@table = private constant" in text]
    assert len(readers) == 1 and _defines(readers[0], "reads_table")


def test_kernels_in_several_modules_compile_at_once_and_link(tmp_path, monkeypatch):
    """The parts compiled on llvm_threads' threads (two, whatever this machine has) give objects
    that link into a library computing what one module does."""
    from sprue.lowering import llvm_threads
    monkeypatch.setattr(llvm_threads, "workers", lambda: 2)
    ir = (_calling("k1", "k2", "k3") + _kernel("k1", 2) + _kernel("k2", 3) + _kernel("k3", 5)
          + "attributes #0 = { noinline }\n")
    result = backend.codegen(ir)
    assert len(result.objects) == 2
    lib = _linked(result, tmp_path)
    data = (ctypes.c_double * 64)(*range(64))
    lib.entry(data, data)
    assert list(data) == [30.0 * i for i in range(64)]


def _linked(result, tmp_path) -> ctypes.CDLL:
    """The objects of a codegen result linked into a library, loaded."""
    obj = tmp_path / "k.o"
    obj.write_bytes(result.object_file(tmp_path))
    return ctypes.CDLL(str(backend.link_shared(obj, tmp_path / "libk.so")))


def _glue_calling(*kernels: str, n: int = N) -> str:
    body = "".join(f"  %v{i} = load i64, ptr %q\n  store i64 %v{i}, ptr %q\n" for i in range(n))
    calls = "".join(f"  call void @{k}(ptr %p)\n" for k in kernels)
    return f"define void @entry(ptr %p, ptr %q) {{\n{body}{calls}  ret void\n}}\n"


def test_the_part_compiled_after_the_glue_is_the_lighter_by_the_glues_cost():
    """With glue, the thread that compiles it takes the last part of the kernels next: that part
    is balanced against the others counting the glue (GLUE_COST an instruction), and per function
    (FUNCTION_COST)."""
    kernels = [f"k{i}" for i in range(8)]
    ir = _glue_calling(*kernels, n=4 * N) + "".join(_kernel(k, 2 + i) for i, k in enumerate(kernels)) \
        + "attributes #0 = { noinline }\n"
    split = split_module(ir, kernel_parts=2)
    assert split is not None and split.glue is not None and len(split.kernels) == 2
    counts = [sum(_defines(text, k) for k in kernels) for text in split.kernels]
    assert sum(counts) == len(kernels) and counts[1] < counts[0]
    glue_cost = GLUE_COST * 8 * N
    per_kernel = _kernel("k", 2).count("\n  ") + FUNCTION_COST   # (instructions of one, about)
    assert counts[0] - counts[1] <= glue_cost / per_kernel + 1


def test_glue_and_two_parts_compiled_in_the_glue_first_order_link_and_compute(tmp_path, monkeypatch):
    from sprue.lowering import llvm_threads
    monkeypatch.setattr(llvm_threads, "workers", lambda: 2)
    kernels = [f"k{i}" for i in range(6)]
    ir = _glue_calling(*kernels, n=4 * N) + "".join(_kernel(k, 2) for k in kernels) \
        + "attributes #0 = { noinline }\n"
    result = backend.codegen(ir)
    assert len(result.objects) == 3
    lib = _linked(result, tmp_path)
    data = (ctypes.c_double * 64)(*range(64))
    scratch = (ctypes.c_int64 * 1)(7)
    lib.entry(data, scratch)
    assert list(data) == [2.0 ** 6 * i for i in range(64)] and scratch[0] == 7
