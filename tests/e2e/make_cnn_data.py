"""JAX 0.10.2's losses for examples/cnn.py: the example's own source run by JAX (the names it takes
from sprue -- qjit, value_and_grad, sprue.numpy, sprue.lax -- bound to jax.jit, jax.value_and_grad,
jax.numpy, jax.lax), float64, into cnn_jax.json beside this file. Run by hand (tests never import
JAX):

    /work/jaxvenv/bin/python tests/e2e/make_cnn_data.py
"""
from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

import jax
import jax.numpy as jnp
from jax import lax

jax.config.update("jax_enable_x64", True)
HERE = Path(__file__).resolve().parent
STEPS = 30


def main():
    shim = types.ModuleType("sprue")
    shim.qjit, shim.value_and_grad, shim.numpy, shim.lax = jax.jit, jax.value_and_grad, jnp, lax
    sys.modules.update({"sprue": shim, "sprue.numpy": jnp, "sprue.lax": lax})
    spec = importlib.util.spec_from_file_location("cnn", HERE.parent.parent / "examples" / "cnn.py")
    cnn = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cnn)
    losses, accuracy = cnn.main(steps=STEPS, verbose=False)
    (HERE / "cnn_jax.json").write_text(json.dumps({"jax": jax.__version__, "steps": STEPS, "losses": losses,
                                                   "accuracy": accuracy}, indent=1) + "\n")
    print(f"jax {jax.__version__}: loss {losses[0]} -> {losses[-1]}, accuracy {accuracy}")


if __name__ == "__main__":
    main()
