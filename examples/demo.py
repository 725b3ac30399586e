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


def loss(params, x, labels):
    """Mean cross-entropy of the classifier (for its gradient)."""
    logits = x @ params["w"] + params["b"]
    z = logits - jnp.max(logits, axis=-1, keepdims=True)
    log_probs = z - jnp.log(jnp.sum(jnp.exp(z), axis=-1, keepdims=True))
    return -jnp.mean(jnp.take_along_axis(log_probs, labels[:, None], axis=1))


train_grad = sprue.qjit(sprue.grad(loss))   # the gradient, compiled too


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

    labels = rng.integers(0, 10, size=x.shape[0])
    g = train_grad(params, x, labels)
    # analytic gradient of the mean cross-entropy: x^T (softmax - onehot) / n
    delta = (expected["probs"] - np.eye(10)[labels]) / x.shape[0]
    np.testing.assert_allclose(g["w"], x.T @ delta, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g["b"], delta.sum(0), rtol=1e-10, atol=1e-12)

    print("jaxpr:")
    print(classify.jaxpr)
    print(f"\ncompiled and ran in {t1 - t0:.2f} s; matches numpy")
    print(f"mean confidence: {out['mean_confidence']:.6f}")
    print(f"probs[0]: {np.array2string(out['probs'][0], precision=4)}")
    print(f"gradient of the cross-entropy (sprue.grad, compiled) matches the analytic one;"
          f" |dL/dw| = {np.linalg.norm(g['w']):.6f}")


if __name__ == "__main__":
    main()
