"""The README is a user's manual that runs (issue 23): every ```python and ```sh block runs, in the
README's order, in one folder and (for Python) one namespace, as a reader following it would run
them; the C host and CMake blocks build and run their programs. The one block written for the JAX
user's environment (it imports JAX, which sprue's tests never do) is left out, and said so."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
JAX_ONLY = "# in the JAX user's environment"


def blocks() -> list[tuple[str, str, int]]:
    text = README.read_text()
    return [(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1)
            for m in re.finditer(r"^```(python|sh)\n(.*?)^```", text, re.S | re.M)]


def test_readme_blocks_run_in_order(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    namespace: dict = {"__name__": "__readme__"}
    found = blocks()
    skipped = [line for lang, code, line in found if code.startswith(JAX_ONLY)]
    print(f"README blocks for the JAX user's environment, not run here: lines {skipped}")
    assert len(skipped) == 1
    ran = 0
    for lang, code, line in found:
        if code.startswith(JAX_ONLY):
            continue
        if lang == "python":
            exec(compile(code, f"README.md:{line}", "exec"), namespace)
        else:
            proc = subprocess.run(["bash", "-euo", "pipefail", "-c", code], capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, f"README.md:{line}:\n{proc.stdout}\n{proc.stderr}"
            namespace.setdefault("_sh_outputs", []).append(proc.stdout)
        ran += 1
    assert ran >= 12
    host_lines = namespace["_sh_outputs"]
    assert host_lines[0].split() == host_lines[1].split() == ["0.462117", "0.244919"]   # tanh(0.5), tanh(0.25)
    assert capfd.readouterr().out.count("step ") == 3   # the debug.print example's three lines


@pytest.mark.parametrize("lang", ["python", "sh"])
def test_readme_has_blocks(lang):
    assert any(b[0] == lang for b in blocks())
