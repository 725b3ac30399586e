"""The dynamic-shapes seed's example (../shared/seeds/000): compiled once, right for every size,
its jaxpr showing the size as a variable exactly as the seed prints it."""
import re

import numpy as np

import sprue
import sprue.numpy as jnp


def make_circuit():
    @sprue.qjit
    def circuit(sz: int):
        a0 = jnp.ones([sz], dtype=float)

        @sprue.for_loop(0, 10, 1)
        def loop(i, a):
            return a + a0
        a2 = loop(a0)
        return a0 + a2
    return circuit


def test_seed_example_compiles_once_for_every_size():
    circuit = make_circuit()
    assert circuit.compile_count == 1          # int hint: compiled at decoration
    for sz in (0, 1, 3, 10**6):
        out = circuit(sz)
        expected = np.ones(sz) + (np.ones(sz) + 10 * np.ones(sz))
        assert out.shape == (sz,) and out.dtype == np.float64
        np.testing.assert_array_equal(out, expected)
    assert circuit.compile_count == 1


def test_seed_example_jaxpr_shows_the_size_as_a_variable():
    text = str(make_circuit().jaxpr)
    assert text.startswith("{ lambda ; a:i64[]. let"), text
    assert re.search(r"\n    (\w+):f64\[a\] = broadcast_in_dim\[broadcast_dimensions=\(\) shape=\(None,\)"
                     r" sharding=None\] 1\.0:f64\[\] a\n", text), text
    # the loop body gets the captured size first, then the captured array typed by it, as in the seed:
    # { lambda ; d:i64[] e:f64[d] f:i64[] g:f64[d]. let h:f64[d] = add g e in (h,) }
    body = re.search(r"body_jaxpr=\{ lambda ; (\w):i64\[\] (\w):f64\[\1\] (\w):i64\[\] (\w):f64\[\1\]\. let\n"
                     r"\s+(\w):f64\[\1\] = add \4 \2\n\s+in \(\5,\) \}", text)
    assert body, text
    assert re.search(r"body_nconsts=2\n\s+nimplicit=0\n\s+preserve_dimensions=True\]", text), text
    assert re.search(r"\n    \w+:f64\[a\] = add \w+ \w+\n  in \(\w+,\) \}$", text), text
