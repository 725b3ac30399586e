"""The compiler's own pieces as `sprue doctor` reports them: MLIR (torch-mlir's StableHLO
bindings) and LLVM (llvmlite). Each is probed on its own: one that is missing or broken does not
hide the state of the other, so this module imports both where a failure is caught, and each
probe raises its own failure again."""
from __future__ import annotations

try:
    from torch_mlir._mlir_libs import _stablehlo
    _MLIR_FAILURE: BaseException | None = None
except ImportError as e:   # raised again by mlir_version, which the doctor reports
    _stablehlo, _MLIR_FAILURE = None, e

try:
    import llvmlite
    import llvmlite.binding as llvm
    _LLVM_FAILURE: BaseException | None = None
except ImportError as e:   # raised again by llvm_version, which the doctor reports
    llvmlite, llvm, _LLVM_FAILURE = None, None, e

__all__ = ["llvm_version", "mlir_version"]


def mlir_version() -> str:
    """The StableHLO API version of the MLIR bindings; raises why they do not load."""
    if _MLIR_FAILURE is not None:
        raise _MLIR_FAILURE
    return f"StableHLO API version {_stablehlo.get_api_version()}"


def llvm_version() -> str:
    """llvmlite's version and the host CPU LLVM sees; raises why llvmlite does not load or start."""
    if _LLVM_FAILURE is not None:
        raise _LLVM_FAILURE
    llvm.initialize_native_target()
    return f"llvmlite {llvmlite.__version__}, host CPU {llvm.get_host_cpu_name()}"
