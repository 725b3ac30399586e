"""Records the jaxprs JAX 0.10.2 prints for convolutions (lax.conv_general_dilated in several
layouts, jnp.convolve/correlate, a small CNN layer and its gradient; one StableHLO module) with
the inputs and JAX's results, into conv_data/ beside this file. Run by hand (tests never import JAX):

    /work/jaxvenv/bin/python tests/frontend/lax/make_conv_data.py

Each case gives `<name>.jaxpr` (str(jax.make_jaxpr(f)(*args))) and `<name>.npz` (in0, in1, ...:
the arguments; out0, ...: JAX's flattened results). float64 (x64 on) and float32 cases both.
"""
from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)
HERE = Path(__file__).resolve().parent
rng = np.random.RandomState(0)


def r(*shape, dtype=np.float64):
    return rng.uniform(-1, 1, shape).astype(dtype)


def cnn_layer(x, w, b):
    """NHWC conv + bias + relu + 2x2 average pool (as flax/stax write it)."""
    y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = jax.nn.relu(y + b)
    return lax.reduce_window(y, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0


def cnn_loss(x, w, b):
    return jnp.sum(cnn_layer(x, w, b) ** 2)


CASES = [
    ("conv_nchw_same", lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME"), (r(2, 3, 8, 8), r(4, 3, 3, 3))),
    ("conv_strided_dilated_f32",
     lambda x, w: lax.conv_general_dilated(x, w, (2, 1), ((1, 0), (2, 2)), lhs_dilation=(1, 2), rhs_dilation=(2, 1)),
     (r(2, 3, 8, 8, dtype=np.float32), r(4, 3, 3, 3, dtype=np.float32))),
    ("conv_nhwc_groups",
     lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                           feature_group_count=2),
     (r(2, 8, 8, 4), r(3, 3, 2, 6))),
    ("conv_batch_groups",
     lambda x, w: lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (0, 1)), batch_group_count=2),
     (r(4, 3, 6, 5), r(6, 3, 2, 2))),
    ("conv_1d_nwc", lambda x, w: lax.conv_general_dilated(x, w, (2,), "SAME", rhs_dilation=(2,),
                                                          dimension_numbers=("NWC", "WIO", "NCW")),
     (r(2, 9, 4), r(3, 4, 5))),
    ("conv_grad", jax.grad(lambda x, w: jnp.sum(jnp.sin(lax.conv_general_dilated(x, w, (2, 2), "SAME"))),
                           argnums=(0, 1)), (r(2, 3, 8, 8), r(4, 3, 3, 3))),
    ("jnp_convolve_full", lambda a, v: jnp.convolve(a, v), (r(7), r(3))),
    ("jnp_convolve_same_f32", lambda a, v: jnp.convolve(a, v, "same"), (r(5, dtype=np.float32), r(8, dtype=np.float32))),
    ("jnp_correlate_valid", lambda a, v: jnp.correlate(a, v), (r(9), r(4))),
    ("jnp_correlate_full_swapped", lambda a, v: jnp.correlate(a, v, "full"), (r(3), r(6))),
    ("cnn_layer", cnn_layer, (r(2, 8, 8, 3), r(3, 3, 3, 8), r(8))),
    ("cnn_layer_grad", jax.grad(cnn_loss, argnums=(1, 2)), (r(2, 8, 8, 3), r(3, 3, 3, 8), r(8))),
]

EXPORTED = ("stablehlo_conv_nhwc",
            lambda x, w: lax.conv_general_dilated(x, w, (2, 1), "SAME", rhs_dilation=(1, 2),
                                                  dimension_numbers=("NHWC", "HWIO", "NHWC")),
            (r(2, 8, 8, 3), r(3, 3, 3, 4)))


def main():
    out = HERE / "conv_data"
    out.mkdir(exist_ok=True)
    for name, fn, args in CASES:
        leaves = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
        np.savez(out / f"{name}.npz", **{f"in{i}": a for i, a in enumerate(args)},
                 **{f"out{i}": np.asarray(x) for i, x in enumerate(leaves)})
        (out / f"{name}.jaxpr").write_text(str(jax.make_jaxpr(fn)(*args)) + "\n")
    # a StableHLO module with stablehlo.convolution, as jax.jit(f).lower(...).as_text() writes it
    name, fn, args = EXPORTED
    (out / f"{name}.mlir").write_text(jax.jit(fn).lower(*args).as_text())
    np.savez(out / f"{name}.npz", **{f"in{i}": a for i, a in enumerate(args)}, out0=np.asarray(jax.jit(fn)(*args)))
    print(f"jax {jax.__version__}: {len(CASES)} cases")


if __name__ == "__main__":
    main()
