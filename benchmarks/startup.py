"""Start-up costs, each measured in fresh processes (median over runs):

    import_sprue        `import sprue` (numpy already imported, as any caller would have it)
    compile_cold        the first call of a small qjit'd function minus its second call, in a new
                        process with an empty compile cache
    compile_cache_hit   the same in another new process sharing that cache (with no persistent
                        cache this is a second cold compile)
    jax: the first call of the same function under jax.jit minus its second call, when installed.
"""
from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile

_SPRUE = r"""
import json, time, numpy as np
t0 = time.perf_counter()
import sprue, sprue.numpy as snp
t1 = time.perf_counter()

@sprue.qjit
def small(x, y):
    return snp.sum(snp.sin(x) * y + 1.0)

x = np.linspace(0.0, 1.0, 100)
t2 = time.perf_counter(); small(x, x); t3 = time.perf_counter(); small(x, x); t4 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "compile": (t3 - t2) - (t4 - t3)}))
"""

_JAX = r"""
import json, time, numpy as np
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp

@jax.jit
def small(x, y):
    return jnp.sum(jnp.sin(x) * y + 1.0)

x = np.linspace(0.0, 1.0, 100)
t2 = time.perf_counter(); small(x, x).block_until_ready(); t3 = time.perf_counter()
small(x, x).block_until_ready(); t4 = time.perf_counter()
print(json.dumps({"compile": (t3 - t2) - (t4 - t3)}))
"""


def _run(script: str, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _env(cache: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    # wherever a persistent compile cache keeps its files, it starts empty here
    env["SPRUE_CACHE_DIR"] = cache
    env["XDG_CACHE_HOME"] = cache
    # as installed code runs: bytecode cached (some environments set PYTHONDONTWRITEBYTECODE, which
    # would add ~70 ms of compiling sprue's own Python source to every import and compile)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("SPRUE_NO_CACHE", None)
    return env


def measurements(runs: int = 5) -> dict[str, dict[str, list[float]]]:
    """name -> implementation -> seconds of each run."""
    res: dict[str, dict[str, list[float]]] = {"import_sprue": {"sprue": []}, "compile_cold": {"sprue": []},
                                              "compile_cache_hit": {"sprue": []}}
    with tempfile.TemporaryDirectory(prefix="sprue-bench-cache-") as cache:
        _run(_SPRUE, _env(cache))    # warm-up: bytecode written, files in the OS page cache
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="sprue-bench-cache-") as cache:
            env = _env(cache)
            cold = _run(_SPRUE, env)
            hit = _run(_SPRUE, env)
        res["import_sprue"]["sprue"] += [cold["import"], hit["import"]]
        res["compile_cold"]["sprue"].append(cold["compile"])
        res["compile_cache_hit"]["sprue"].append(hit["compile"])
    if importlib.util.find_spec("jax") is not None:
        with tempfile.TemporaryDirectory() as cache:
            env = _env(cache)
            _run(_JAX, env)
            res["compile_cold"]["jax"] = [_run(_JAX, env)["compile"] for _ in range(runs)]
    return res


if __name__ == "__main__":
    for name, impls in measurements().items():
        print(name, {k: statistics.median(v) for k, v in impls.items()})
