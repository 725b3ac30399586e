"""The JAX user's path to C: a `jax.export` artifact with a symbolic batch size (made by real JAX:
tests/jax_corpus/make.py) compiled once by `sprue compile`, called from a C program at several batch
sizes against JAX's outputs, and refused by the header's wrapper -- with JAX's shape-assertion
message -- when two arguments disagree on the batch size."""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np

from sprue.tools.cli import main
from tests.helpers.system import CC

CORPUS = Path(__file__).parent.parent / "jax_corpus"
VERSION = sorted(p.name for p in CORPUS.glob("jax-*") if (p / "exported").is_dir())[-1]
FOLDER = CORPUS / VERSION / "exported"


def _c_floats(a: np.ndarray) -> str:
    return "{" + ", ".join(f"{float(v)!r}f" for v in a.reshape(-1)) + "}"


def _host(data, n_sizes: int) -> str:
    """A C program calling pair(x: f32[b,3], y: f32[b]) at each size of the corpus, then with y one
    element short; it prints each result row by row and the refused call's status message."""
    calls = []
    for k in range(n_sizes):
        x, y = data[f"s{k}_in0"], data[f"s{k}_in1"]
        b = x.shape[0]
        calls.append(f"""
  {{
    static float x[] = {_c_floats(x)}, y[] = {_c_floats(y)};
    memref_f32_2d xd = {{x, x, 0, {{{b}, 3}}, {{3, 1}}}};
    memref_f32_1d yd = {{y, y, 0, {{{b}}}, {{1}}}};
    pair_results r;
    int64_t status = pair(&r, &xd, &yd);
    printf("size{k}:");
    for (int64_t i = 0; i < r.result0.sizes[0] * r.result0.sizes[1]; ++i) printf(" %.9g", r.result0.aligned[i]);
    printf("\\nstatus{k}: %lld\\n", (long long)status);
    pair_free_results(&r);
  }}""")
    return f"""#include <stdio.h>
#include "pair.h"
int main(void) {{{"".join(calls)}
  {{
    static float x[6] = {{0}}, y[1] = {{0}};
    memref_f32_2d xd = {{x, x, 0, {{2, 3}}, {{3, 1}}}};
    memref_f32_1d yd = {{y, y, 0, {{1}}, {{1}}}};
    pair_results r;
    int64_t status = pair(&r, &xd, &yd);
    printf("refused: %s\\n", status ? pair_status_message(status) : "no");
    pair_free_results(&r);
  }}
  return 0;
}}
"""


def test_jax_export_to_a_c_host_with_a_symbolic_batch(tmp_path):
    assert main(["compile", str(FOLDER / "pair_batch.jax_exported"), "-o", str(tmp_path), "--name", "pair"]) == 0
    data = np.load(FOLDER / "pair_batch.npz")
    n_sizes = len([f for f in data.files if f.endswith("_in0")])
    assert n_sizes >= 2   # one library for every batch size
    (tmp_path / "host.c").write_text(_host(data, n_sizes))
    exe = tmp_path / "host"
    proc = subprocess.run([CC, "-std=c99", "-Wall", "-Werror", f"-I{tmp_path}", str(tmp_path / "host.c"),
                           f"-L{tmp_path}", "-lpair", f"-Wl,-rpath,{tmp_path}", "-o", str(exe)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=True).stdout
    lines = dict(line.split(":", 1) for line in out.splitlines())
    for k in range(n_sizes):
        assert lines[f"status{k}"].strip() == "0"
        got = np.array(lines[f"size{k}"].split(), np.float32)
        np.testing.assert_allclose(got, data[f"s{k}_out0"].reshape(-1), rtol=2e-6, atol=1e-6)
    assert ("Found inconsistency between dimension size args[1].shape[0] (= arg1.sizes[0]) and the specification"
            " 'b' (= arg0.sizes[0])") in lines["refused"]
