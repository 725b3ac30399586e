"""The runtime's C objects built at installation (lowering/c_toolchain.py prebuild_runtime_objects):
used without cc when the compile cache is off, ignored when another user could have written them."""
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
    assert len(written) == 2 and all(p.parent == folder for p in written)
    return folder


def _key(text: str) -> tuple:
    return (tuple(c_toolchain.find_c_compiler()), text)


def test_the_installed_objects_are_read_with_the_cache_off(prebuilt):
    data = c_toolchain._kept_object(_key(RUNTIME_C))
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
