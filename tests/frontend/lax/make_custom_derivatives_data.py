"""Records JAX 0.10.2's results for custom_cases.py's programs, and the jaxprs it prints for them
(custom_jvp_call, custom_vjp_call, remat2, stop_gradient), into custom_derivatives_data/ beside
this file. Run by hand (tests never import JAX):

    /work/jaxvenv/bin/python tests/frontend/lax/make_custom_derivatives_data.py
"""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from custom_cases import CASES  # noqa: E402

API = SimpleNamespace(numpy=jnp, custom_jvp=jax.custom_jvp, custom_vjp=jax.custom_vjp, checkpoint=jax.checkpoint,
                      stop_gradient=jax.lax.stop_gradient, grad=jax.grad, jvp=jax.jvp, vmap=jax.vmap)


def main():
    out = HERE / "custom_derivatives_data"
    out.mkdir(exist_ok=True)
    for name, build, args in CASES:
        fn = build(API)
        result = jax.jit(fn)(*args)
        leaves = jax.tree_util.tree_leaves(result)
        np.savez(out / f"{name}.npz", **{f"out{i}": np.asarray(r) for i, r in enumerate(leaves)})
        (out / f"{name}.jaxpr").write_text(str(jax.make_jaxpr(fn)(*args)) + "\n")
    print(f"jax {jax.__version__}: {len(CASES)} cases")


if __name__ == "__main__":
    main()
