"""Once the compiler is loaded, compiling imports nothing (sprue.lowering.dialects,
sprue.base.forks): an import in progress is where a fork's child hangs, and the MLIR bindings'
dialect modules are loaded once. Each check runs in a fresh interpreter, so that what this test
run imported before does not hide an import."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.lowering.test_stablehlo_input import JAX_MODULE

SCRIPT = """
import json, math, sys
import numpy as np
import sprue, sprue.numpy as jnp
from sprue.api import driver

driver._lowering()     # the compiler, loaded as the first compilation loads it
attempts = []

class Spy:
    '''Records every import that is not already done; finds nothing itself.'''
    def find_spec(self, name, path=None, target=None):
        attempts.append(name)
        return None

rng = np.random.default_rng(0)
a, b = rng.standard_normal((40, 40)), rng.standard_normal((3, 40, 40))
v = rng.standard_normal(50)
def loop(x):
    return sprue.lax.fori_loop(0, 5, lambda i, c: c * 0.5 + jnp.sin(c), x)
def many_nests(x):      # enough separate loop nests to be outlined into functions of their own
    return [jnp.sort(x * k)[::-1] + k for k in range(60)]
checks = [
    (sprue.qjit(lambda x: jnp.tanh(x) * 2 + x), (a,), lambda x: np.tanh(x) * 2 + x),
    (sprue.qjit(lambda x, y: jnp.tanh(x @ y).sum(0)), (a, a), lambda x, y: np.tanh(x @ y).sum(0)),
    (sprue.qjit(lambda y: jnp.einsum("bij,bkj->bik", y, y)), (b,), lambda y: np.einsum("bij,bkj->bik", y, y)),
    (sprue.qjit(lambda x: jnp.cumsum(x) / jnp.max(x)), (v,), lambda x: np.cumsum(x) / np.max(x)),
    (sprue.qjit(lambda x: jnp.sort(x) + jnp.argsort(x)), (v,), lambda x: np.sort(x) + np.argsort(x)),
    (sprue.qjit(lambda x: x.at[jnp.array([1, 3, 1])].add(2.0)), (v,), lambda x: x + np.bincount([1, 3, 1], minlength=50) * 2.0),
    (sprue.qjit(loop), (v,), None),      # checked against numpy by the control-flow tests; here: what it imports
    (sprue.qjit(sprue.grad(lambda x: (jnp.exp(x) ** 2).sum())), (v,), lambda x: 2 * np.exp(2 * x)),
    (sprue.qjit(lambda x: jnp.where(x > 0, x, 0.0).astype(np.int32), abstracted_axes={0: "n"}), (a,),
     lambda x: np.where(x > 0, x, 0.0).astype(np.int32)),
    # as JAX exports it: sdy, chlo and stablehlo ops read and rewritten in Python
    (driver.load_stablehlo(open("jax_module.mlir").read()), (v[:3].astype(np.float32), v[:3].astype(np.float32)),
     lambda x, y: [np.array([math.erf(max(math.sin(t), 0.0)) for t in x]), y.sum()]),
    (sprue.qjit(many_nests), (v,), lambda x: [np.sort(x * k)[::-1] + k for k in range(60)]),
]
def flat(out):
    return np.concatenate([np.ravel(o) for o in (out if isinstance(out, (list, tuple)) else [out])])
right = []
sys.meta_path.insert(0, Spy())
for f, args, reference in checks:
    out = f(*args)
    right.append(reference is None or np.allclose(flat(out), flat(reference(*args)), rtol=1e-5))
sys.meta_path.remove(sys.meta_path[0])
print(json.dumps({"attempts": sorted(set(attempts)), "right": all(right),
                  "linalg or llvm modules": sorted(m for m in sys.modules if m in
                                                   ("torch_mlir.dialects.linalg", "torch_mlir.dialects.llvm"))}))
"""


@pytest.mark.parametrize("cache", ["off", "on"])
def test_compiling_imports_nothing_once_the_compiler_is_loaded(cache, tmp_path):
    (tmp_path / "jax_module.mlir").write_text(JAX_MODULE)
    cache_dir = "off" if cache == "off" else str(tmp_path / "cache")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path, env={**os.environ, "SPRUE_CACHE_DIR": cache_dir})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # linalg's and llvm's torch_mlir modules (~300 ms) are never needed: their ops are read generically
    assert out == {"attempts": [], "right": True, "linalg or llvm modules": []}
