"""`make venv`: the matmul library's routines (matmul_library.py) compiled for this machine into
the prebuilt objects' folder (c_toolchain.PREBUILT_DIR), beside the runtime's. A module of its own:
compiling them takes the backend's codegen, and the backend links them (matmul_library_build.py)."""
from sprue.lowering.backend import codegen
from sprue.lowering.c_toolchain import PREBUILT_DIR
from sprue.lowering.matmul_library_build import prebuild
from sprue.lowering.targets import HOST_CPU

if __name__ == "__main__":
    PREBUILT_DIR.mkdir(mode=0o755, exist_ok=True)
    for path in prebuild(PREBUILT_DIR, HOST_CPU, codegen):
        print(f"sprue: built {path}")
