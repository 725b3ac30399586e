"""Arrays for the tests of dynamically-shaped programs, the comparison of a result with numpy's,
and small programs written once for numpy and sprue.numpy."""
import numpy as np

# The sizes a program compiled once for a dynamic size is run at: empty, one element, a few, and
# more than any vector width or unrolling.
SIZES = (0, 1, 3, 1000)


def vec(n: int, seed: int = 0) -> np.ndarray:
    """f64[n], uniform in [0, 1), the same for the same (n, seed)."""
    return np.random.default_rng(seed * 7919 + n).random(n)


def agree(got, want) -> None:
    """got equals want (a value or a tuple of values) in shape, dtype and value (to 1e-12)."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            agree(g, w)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def shifted_conv3(np_, x, k):
    """A 'valid' 3 x 3 convolution of NHWC `x` by `k` [3, 3, C, D] as nine shifted einsums, written
    against the namespace `np_` (numpy or sprue.numpy): benchmarks/program_sources.py's CNN."""
    out = None
    for dy in range(3):
        for dx in range(3):
            patch = x[:, dy:(dy - 2 if dy < 2 else None), dx:(dx - 2 if dx < 2 else None), :]
            term = np_.einsum("nhwc,cd->nhwd", patch, k[dy, dx])
            out = term if out is None else out + term
    return out


def tanh_net_grads(ws, x) -> list[np.ndarray]:
    """d/dw of sum(net(x, ws) ** 2) for net = layers of `x = tanh(x @ w)`, by backpropagation in
    numpy: the reference of the deep training-step tests."""
    acts = [x]
    for w in ws:
        acts.append(np.tanh(acts[-1] @ w))
    g, grads = 2 * acts[-1], [None] * len(ws)
    for i in reversed(range(len(ws))):
        g = g * (1 - acts[i + 1] ** 2)
        grads[i] = acts[i].T @ g
        g = g @ ws[i].T
    return grads
