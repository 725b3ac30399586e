"""The runtime's C objects built at installation (lowering/c_toolchain.py prebuild_runtime_objects):
used without cc when the compile cache is off, ignored when another user could have written them."""
import re
import subprocess

import numpy as np
import pytest

from sprue.lowering import c_toolchain
from sprue.lowering.allocation import RUNTIME_C
from sprue.lowering.backend import build_shared_library
from sprue.runtime.function import load
from sprue.runtime.kernel_signature import Signature, TensorSpec

DOUBLE = """module {
  func.func @main(%x: tensor<4xf64>) -> tensor<4xf64> {
    %0 = stablehlo.add %x, %x : tensor<4xf64>
    return %0 : tensor<4xf64>
  }
}
"""


@pytest.fixture
def prebuilt(tmp_path, monkeypatch):
    folder = tmp_path / "_prebuilt"
    monkeypatch.setattr(c_toolchain, "PREBUILT_DIR", folder)
    monkeypatch.setenv("SPRUE_CACHE_DIR", "off")
    written = c_toolchain.prebuild_runtime_objects()
    assert len(written) == 5 and all(p.parent == folder for p in written)   # (runtime, pool, memrefCopy, print, linalg)
    return folder


def _key(text: str) -> tuple:
    return (tuple(c_toolchain.find_c_compiler()), text)


def test_the_installed_objects_are_read_with_the_cache_off(prebuilt):
    for text in (RUNTIME_C, c_toolchain._MEMREF_COPY_C):   # (memrefCopy's: what generic copies call)
        data = c_toolchain._kept_object(_key(text))
        assert data is not None and data in {p.read_bytes() for p in prebuilt.iterdir()}
    assert c_toolchain._kept_object(_key(RUNTIME_C + "\n/* another source */\n")) is None


def test_installed_objects_others_may_write_are_not_read(prebuilt):
    prebuilt.chmod(0o777)
    try:
        assert c_toolchain._kept_object(_key(RUNTIME_C)) is None
    finally:
        prebuilt.chmod(0o755)
    for path in prebuilt.iterdir():
        path.chmod(0o666)
    assert c_toolchain._kept_object(_key(RUNTIME_C)) is None


def test_a_build_with_the_cache_off_runs_no_cc_for_the_runtime(prebuilt, tmp_path, monkeypatch):
    monkeypatch.setattr(c_toolchain, "_c_objects", {})
    started = []
    popen = subprocess.Popen

    def watch(cmd, *args, **kwargs):
        if "-c" in cmd:
            started.append(cmd)
        return popen(cmd, *args, **kwargs)
    monkeypatch.setattr(c_toolchain.subprocess, "Popen", watch)
    so = build_shared_library(DOUBLE, tmp_path / "out", name="k", internal=["main"])
    assert started == [], started
    f = load(str(so), "main", Signature([TensorSpec("x", "float64", (4,))], [TensorSpec("r", "float64", (4,))]))
    x = np.arange(4.0)
    np.testing.assert_array_equal(f(x)[0], 2 * x)


SIGNATURE = Signature([TensorSpec("x", "float64", (4,))], [TensorSpec("r", "float64", (4,))])


def test_work_meanwhile_runs_during_the_link_and_its_error_after_it(tmp_path):
    """build_shared_library's `meanwhile` (the runtime's FFI declarations: compile_closed_jaxpr)
    runs while cc links; an exception it raises comes once the link has finished, and the build
    leaves no library behind (nor the linker's partial output)."""
    ran = []
    so = build_shared_library(DOUBLE, tmp_path / "a", name="k", internal=["main"], meanwhile=lambda: ran.append(1))
    assert ran == [1] and so.is_file()

    def fail():
        raise KeyError("declared wrong")
    with pytest.raises(KeyError, match="declared wrong"):
        build_shared_library(DOUBLE, tmp_path / "b", name="k", internal=["main"], meanwhile=fail)
    assert not (tmp_path / "b" / "k.so").exists() and not (tmp_path / "b" / "k.so.partial").exists()


def test_a_library_declared_otherwise_is_declared_again(tmp_path):
    """load(declared=...): declarations made before the library existed (runtime.function.
    Declarations, while cc links) that do not fit it (the entry declared without the status a
    sprue library's returns) are made again from the library, and the call is right."""
    from sprue.runtime.function import Declarations
    so = build_shared_library(DOUBLE, tmp_path / "out", name="k", internal=["main"])
    f = load(str(so), "main", SIGNATURE, declared=Declarations(SIGNATURE, "main", checked=False))
    x = np.arange(4.0)
    assert f.checked and f._ffi.typeof(f._fn).result.cname == "int64_t"   # its status is read
    np.testing.assert_array_equal(f(x)[0], 2 * x)
    g = load(str(so), "main", SIGNATURE, declared=Declarations(SIGNATURE, "main"))
    np.testing.assert_array_equal(g(x)[0], 2 * x)


def test_a_function_prepared_before_its_library_calls_that_library(tmp_path):
    """Declarations.prepare (while cc links): the converters and the fast caller made before the
    library exists are the loaded function's, calling its library; they serve one function only,
    and one of another name gets its own."""
    from sprue.runtime.function import Declarations
    libraries = {k: build_shared_library(text, tmp_path / k, name="k", internal=["main"])
                 for k, text in (("double", DOUBLE), ("triple", DOUBLE.replace("%x, %x", "%x, %1").replace(
                     "%0 = stablehlo.add", "%1 = stablehlo.add %x, %x : tensor<4xf64>\n    %0 = stablehlo.add")))}
    x = np.arange(4.0)
    for k, factor in (("double", 2), ("triple", 3)):
        declared = Declarations(SIGNATURE, "main")
        declared.prepare("k")
        prepared = declared.parts
        f = load(str(libraries[k]), "main", SIGNATURE, name="k", declared=declared)
        assert declared.parts is None and f._converters is prepared._converters   # used, and used up
        np.testing.assert_array_equal(f(x)[0], factor * x)   # (the fast path: exact kinds)
        np.testing.assert_array_equal(f(x.astype(np.float32))[0], factor * x)   # (the general path: a safe cast)
        other = Declarations(SIGNATURE, "main")
        other.prepare("another name")
        not_its = other.parts
        g = load(str(libraries[k]), "main", SIGNATURE, name="k", declared=other)
        assert g._converters is not not_its._converters
        np.testing.assert_array_equal(g(x)[0], factor * x)


ATAN2 = """module {
  func.func @main(%x: tensor<4xf64>, %y: tensor<4xf64>) -> tensor<4xf64> {
    %0 = stablehlo.atan2 %x, %y : tensor<4xf64>
    return %0 : tensor<4xf64>
  }
}
"""


def _needed(library) -> set[str] | None:
    try:
        dynamic = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dynamic))


@pytest.mark.skipif(c_toolchain._glibc_math() is None, reason="libm is only left out on glibc Linux")
def test_libm_is_linked_only_when_the_kernel_calls_it(tmp_path):
    """A library whose code calls no libm function is linked without it (ld reads every library
    it is given); one calling atan2 needs libm and computes numpy's values."""
    x, y = np.array([1.0, -2.0, 3.0, 0.5]), np.array([2.0, 1.0, -1.0, -4.0])
    for text, args, expected, with_libm in ((DOUBLE, (x,), 2 * x, False), (ATAN2, (x, y), np.arctan2(x, y), True)):
        out = tmp_path / ("atan2" if with_libm else "double")
        library = build_shared_library(text, out)
        specs = [TensorSpec(name, "float64", (4,)) for name in "xy"[:len(args)]]
        function = load(library, "main", Signature(specs, [TensorSpec("r", "float64", (4,))]))
        np.testing.assert_allclose(function(*args)[0], expected, rtol=1e-15)
        needed = _needed(library)
        if needed is None:
            print("readelf is not installed: the libraries' NEEDED entries are not checked")
            continue
        assert ("libm.so.6" in needed) == with_libm, needed


def test_the_undefined_symbols_of_an_object_are_read_from_its_elf_symbol_table(tmp_path):
    source = tmp_path / "calls.c"
    source.write_text("double cos(double); void *malloc(unsigned long);\n"
                      "double f(double x) { return cos(x) + (double)(long)malloc(8); }\n")
    obj = tmp_path / "calls.o"
    subprocess.run([*c_toolchain.find_c_compiler(), "-c", "-fPIC", "-O1", str(source), "-o", str(obj)], check=True)
    assert {"cos", "malloc"} <= c_toolchain.elf_undefined_symbols(obj.read_bytes())
    assert "f" not in c_toolchain.elf_undefined_symbols(obj.read_bytes())
    assert c_toolchain.elf_undefined_symbols(b"not an object") is None
    assert c_toolchain.elf_undefined_symbols(obj.read_bytes()[:80]) is None   # cut short
