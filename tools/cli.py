"""The `sprue` command line. Today: `sprue --version` and `sprue doctor` (checks the toolchain).
Compiling saved jaxpr files arrives with the command-line compiler issue."""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys


def _doctor() -> int:
    """Check every piece the compile path needs; print one line each; exit 1 if any is missing."""
    ok = True

    def check(name: str, fn):
        nonlocal ok
        try:
            detail = fn()
            print(f"ok    {name}: {detail}")
        except Exception as e:  # report any failure of a probe as a missing piece, then go on
            ok = False
            print(f"FAIL  {name}: {type(e).__name__}: {e}")

    def cc():
        compiler = os.environ.get("CC", "cc")
        path = shutil.which(compiler)
        if path is None:
            raise RuntimeError(f"no C compiler '{compiler}' on PATH; install one (e.g. apt-get install gcc) or set CC")
        return path

    def mlir():
        from torch_mlir._mlir_libs import _stablehlo
        return f"StableHLO API version {_stablehlo.get_api_version()}"

    def llvm():
        import llvmlite
        import llvmlite.binding as b
        b.initialize_native_target()
        return f"llvmlite {llvmlite.__version__}, host CPU {b.get_host_cpu_name()}"

    check("python", lambda: f"{platform.python_version()} ({sys.executable})")
    check("C compiler", cc)
    check("MLIR (torch-mlir)", mlir)
    check("LLVM (llvmlite)", llvm)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sprue", description="sprue: an ahead-of-time compiler for numeric Python")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("doctor", help="check that the C compiler, MLIR and LLVM are usable")
    args = parser.parse_args(argv)
    if args.version:
        import sprue
        print(f"sprue {sprue.__version__}")
        return 0
    if args.command == "doctor":
        return _doctor()
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
