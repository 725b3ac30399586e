"""examples/cnn.py: its training losses equal JAX 0.10.2's for the same data and initial weights
(the example's own source run by JAX: make_cnn_data.py), and its compiled gradient equals finite
differences of the loss."""
import importlib.util
import json
from pathlib import Path

import numpy as np

import sprue
from tests.helpers.system import REPO

JAX = json.loads(Path(__file__).with_name("cnn_jax.json").read_text())


def _example():
    spec = importlib.util.spec_from_file_location("cnn", REPO / "examples" / "cnn.py")
    cnn = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cnn)
    return cnn


def test_training_matches_jax(capsys):
    cnn = _example()
    losses, accuracy = cnn.main(steps=JAX["steps"])
    np.testing.assert_allclose(losses, JAX["losses"], rtol=1e-9)
    assert accuracy == JAX["accuracy"]
    assert "held-out accuracy" in capsys.readouterr().out
    assert cnn.train_step.compile_count == 1


def test_gradient_against_finite_differences():
    cnn = _example()
    images, labels = cnn.bars(16)
    params = cnn.init()
    grads = sprue.qjit(sprue.grad(cnn.loss))(params, images, labels)
    rng = np.random.default_rng(3)
    direction = {k: rng.standard_normal(v.shape) for k, v in params.items()}
    eps = 1e-6

    def at(t):
        return float(cnn.loss({k: params[k] + t * direction[k] for k in params}, images, labels))
    fd = (at(eps) - at(-eps)) / (2 * eps)
    np.testing.assert_allclose(sum(np.sum(grads[k] * direction[k]) for k in params), fd, rtol=1e-6)
