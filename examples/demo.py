"""sprue's demo: a softmax, a matmul and a reduction over a dict of inputs, compiled ahead of time
to native code, checked against numpy."""
import time

import numpy as np

import sprue
import sprue.numpy as jnp


@sprue.qjit
def classify(params, x):
    logits = x @ params["w"] + params["b"]
    z = logits - jnp.max(logits, axis=-1, keepdims=True)
    probs = jnp.exp(z) / jnp.sum(jnp.exp(z), axis=-1, keepdims=True)
    return {"probs": probs, "mean_confidence": jnp.mean(jnp.max(probs, axis=-1))}


def reference(params, x):
    logits = x @ params["w"] + params["b"]
    e = np.exp(logits - logits.max(-1, keepdims=True))
    probs = e / e.sum(-1, keepdims=True)
    return {"probs": probs, "mean_confidence": probs.max(-1).mean()}


def main():
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((64, 10)), "b": rng.standard_normal(10)}
    x = rng.standard_normal((256, 64))

    t0 = time.perf_counter()
    out = classify(params, x)
    t1 = time.perf_counter()
    expected = reference(params, x)
    np.testing.assert_allclose(out["probs"], expected["probs"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out["mean_confidence"], expected["mean_confidence"], rtol=1e-12)

    print("jaxpr:")
    print(classify.jaxpr)
    print(f"\ncompiled and ran in {t1 - t0:.2f} s; matches numpy")
    print(f"mean confidence: {out['mean_confidence']:.6f}")
    print(f"probs[0]: {np.array2string(out['probs'][0], precision=4)}")


if __name__ == "__main__":
    main()
