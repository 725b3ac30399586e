"""A scan program shared by tests of its lowering: two EMAs and their crossover signal
(benchmarks/program_sources.py's ema_filter), over sprue and over numpy."""
import numpy as np

import sprue.numpy as jnp
from sprue import lax


def ema_crossover(xs, s0):
    """(signal rows, fast, slow): a scan whose stacked row reads both carries."""
    def step(carry, x):
        fast, slow = carry
        fast = 0.9 * fast + 0.1 * x
        slow = 0.99 * slow + 0.01 * x
        return (fast, slow), jnp.where(fast > slow, 1.0, -1.0) * jnp.abs(fast - slow)
    (fast, slow), signal = lax.scan(step, (s0, s0), xs)
    return signal, fast, slow


def ema_crossover_numpy(xs, s0):
    fast, slow, rows = s0.copy(), s0.copy(), []
    for x in xs:
        fast = 0.9 * fast + 0.1 * x
        slow = 0.99 * slow + 0.01 * x
        rows.append(np.where(fast > slow, 1.0, -1.0) * np.abs(fast - slow))
    return np.array(rows).reshape(len(xs), len(s0)), fast, slow
