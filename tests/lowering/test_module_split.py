"""The glue's module split off (lowering/module_split.py), on LLVM IR text: which function goes
where, what is declared, made hidden and renamed, and when nothing is split."""
import ctypes

import llvmlite.binding as llvm

from sprue.lowering import backend
from sprue.lowering.module_split import SPLIT_MIN_GLUE, split_off_glue

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


def test_glue_and_kernels_go_to_modules_of_their_own_and_link_by_hidden_names():
    ir = _glue("entry", "kernel") + KERNEL
    kernels, glue, cross = split_off_glue(ir)
    (renamed,) = cross
    assert renamed.startswith("kernel.") and len(renamed) == len("kernel.") + 12
    assert f"define hidden void @{renamed}(" in kernels and "define void @entry(" not in kernels
    assert f"declare hidden void @{renamed}(" in glue and "define void @entry(" in glue
    assert f"call void @{renamed}(" in glue
    assert "@table = private constant" in kernels and "@table = private constant" in glue
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
    assert result.glue_obj is not None and len(result.objects) == 2
    assert _runs(result.object_file(tmp_path), tmp_path)   # the glue calls the kernel in the other object


def test_emit_object_gives_one_whole_object(tmp_path):
    assert _runs(backend.emit_object(_glue("entry", "kernel") + KERNEL), tmp_path)
