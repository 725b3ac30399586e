"""The `sprue` command line.

    sprue compile INPUT [-o OUTDIR] [--name NAME] [--emit KIND[,KIND]] [-O 0-3] [--target-cpu CPU]
                        [--target-features +F,-G] [-v]
    sprue doctor          check the C compiler, MLIR and LLVM
    sprue targets         the CPU names and features --target-cpu and --target-features accept
    sprue --cmake-dir     the directory holding SprueConfig.cmake (for CMake's Sprue_DIR)
    sprue --version

Exit codes: 0 success; 1 a user error (one line: `file:line: message` when the line is known);
2 bad usage (argparse); 3 an internal error (a bug in sprue: run with -v for the traceback).
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import traceback
from pathlib import Path

from sprue import __version__
from sprue.api import driver
from sprue.base.errors import SprueError
from sprue.tools.compile import EMIT_FILES, Options, compile_file

EXIT_OK, EXIT_USER_ERROR, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
# Kinds --emit accepts (the .so and .h are always written).
EMIT_KINDS = [k for k in EMIT_FILES if k not in ("so", "h")]


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

    probes = driver.toolchain()
    check("python", lambda: f"{platform.python_version()} ({sys.executable})")
    check("C compiler", cc)
    check("MLIR (torch-mlir)", probes.mlir_version)
    check("LLVM (llvmlite)", probes.llvm_version)
    return 0 if ok else 1


def _targets() -> int:
    """Print the CPU names LLVM can generate code for on this machine's triple (each probed once,
    then cached: targets.py) and the feature names."""
    try:
        triple, cpus, features = driver.target_list()
    except SprueError as err:
        print(f"sprue: error: {err}", file=sys.stderr)
        return EXIT_USER_ERROR
    print(f"target triple: {triple}")
    print(f"CPUs (--target-cpu): host, generic, {', '.join(c for c in cpus if c != 'generic')}")
    print(f"features (--target-features +NAME or -NAME): {', '.join(features)}")
    return EXIT_OK


def cmake_dir() -> Path:
    """The directory holding SprueConfig.cmake: the repository's cmake/ for an editable install
    (the package's sources live in the repository), else the copy shipped as package data."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "cmake", here / "cmake"):
        if (candidate / "SprueConfig.cmake").is_file():
            return candidate
    raise FileNotFoundError(f"SprueConfig.cmake is not installed next to {here}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sprue", description="sprue: an ahead-of-time compiler for numeric Python",
                                     epilog="exit codes: 0 ok, 1 error in the input, 2 bad usage, 3 internal error")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("--cmake-dir", action="store_true",
                        help="print the directory of SprueConfig.cmake (pass it to CMake as Sprue_DIR)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("doctor", help="check that the C compiler, MLIR and LLVM are usable")
    sub.add_parser("targets", help="list the CPU names and features --target-cpu/--target-features accept here")
    c = sub.add_parser("compile", help="compile a jaxpr or StableHLO file to lib<NAME>.so and <NAME>.h",
                       description="Compile INPUT (a jaxpr file: sprue's saved format or JAX-printed; or a"
                                   " StableHLO .mlir module) to OUTDIR/lib<NAME>.so and OUTDIR/<NAME>.h.")
    c.add_argument("input", metavar="INPUT", type=Path)
    c.add_argument("-o", "--output-dir", dest="out_dir", type=Path, default=Path("."), metavar="OUTDIR",
                   help="where to write the outputs (default: the current directory)")
    c.add_argument("--name", help="the kernel's C name: the entry point is _mlir_ciface_NAME and the header's"
                                  " wrapper NAME(). Not a C or C++ keyword, a reserved identifier (_X, __),"
                                  " a name of the C library or its headers, or sprue's (sprue_*, memref_*_*d)"
                                  " (default: INPUT's stem as a C identifier; NAME_kernel when that is not allowed)")
    c.add_argument("--emit", action="append", default=[], metavar="KIND",
                   help=f"also write a stage; repeat or separate with commas: {', '.join(EMIT_KINDS)}")
    c.add_argument("-O", dest="opt_level", type=int, choices=range(4), default=3, metavar="LEVEL",
                   help="LLVM optimization level 0-3 (default 3)")
    c.add_argument("--target-cpu", default="host", metavar="CPU",
                   help="host (default: this machine's CPU), generic (any CPU of this architecture) or an"
                        " LLVM CPU name such as skylake or znver3 (`sprue targets` lists them)")
    c.add_argument("--target-features", default="", metavar="FEATURES",
                   help="LLVM features to enable (+name) or disable (-name) on top of the CPU's, separated by"
                        " commas, e.g. +avx2,-fma; write --target-features=-fma when the first is a -name"
                        " (`sprue targets` lists them)")
    c.add_argument("--no-into", dest="into", action="store_false",
                   help="leave out the destination-passing entry (a jaxpr input's NAME_into() then copies the"
                        " kernel's results into the caller's buffers; the library compiles in less time)")
    c.add_argument("--no-debug-print", dest="debug_print", action="store_false",
                   help="leave out the program's sprue.debug.print calls (the kernel prints nothing)")
    c.add_argument("-v", "--verbose", action="store_true", help="print each stage's time (and tracebacks)")
    return parser


def _emit_kinds(parser: argparse.ArgumentParser, values: list[str]) -> set[str]:
    kinds = {k.strip() for v in values for k in v.split(",") if k.strip()}
    unknown = sorted(kinds - set(EMIT_KINDS))
    if unknown:
        parser.error(f"unknown --emit kind(s) {', '.join(unknown)}; choose from {', '.join(EMIT_KINDS)}")
    return kinds


def _diagnostic(err: BaseException, input_path: Path) -> str:
    """One line naming the file (and line, when the error knows it)."""
    text = str(err).strip() or type(err).__name__
    first = text.splitlines()[0]
    line = getattr(err, "line", 0)
    if getattr(err, "filename", None) and line:   # a jaxpr error: already `file:line:col: message`
        return first
    return f"{input_path}: {first}"


def _compile(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    opts = Options(args.input, args.out_dir, args.name, _emit_kinds(parser, args.emit), args.opt_level,
                   args.target_cpu, args.verbose, args.target_features, args.into, args.debug_print)

    def log(line: str) -> None:
        print(line, file=sys.stderr)
    try:
        written = compile_file(opts, log)
    except (SprueError, ValueError, OSError) as err:   # problems with the input or the toolchain
        print(f"sprue: error: {_diagnostic(err, args.input)}", file=sys.stderr)
        if args.verbose:
            print(str(err), file=sys.stderr)
        return EXIT_USER_ERROR
    except Exception as err:   # a bug in sprue, not in the input: say so, and how to see more
        print(f"sprue: internal error: {type(err).__name__}: {err}"
              f"{'' if args.verbose else ' (run with -v for the traceback)'}", file=sys.stderr)
        if args.verbose:
            traceback.print_exc()
        return EXIT_INTERNAL
    if args.verbose:
        for kind, path in written.items():
            log(f"wrote {path} ({kind})")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.version:
        print(f"sprue {__version__}")
        return EXIT_OK
    if args.cmake_dir:
        print(cmake_dir())
        return EXIT_OK
    if args.command == "doctor":
        return _doctor()
    if args.command == "targets":
        return _targets()
    if args.command == "compile":
        return _compile(parser, args)
    parser.print_help()
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
