"""The jaxpr reader on JAX 0.10's PRNG forms (`key<fry>[...]` types, random_seed, random_wrap,
random_unwrap, random_bits, random_split, random_fold_in, threefry2x32): programs using jax.random
as JAX 0.10.2 printed them (tests/frontend/random/make_jax_data.py), loaded with sprue.load, run,
and compared with JAX's outputs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import sprue
from sprue.io.jaxpr_lexer import JaxprError

HERE = Path(__file__).resolve().parents[1] / "random" / "jax_random_jaxprs"
PROGRAMS = sorted(p.stem for p in HERE.glob("*.jaxpr"))
# the programs whose other equations need no reader form beyond the PRNG's: the rest print
# uniform's internals, whose bare `broadcast_in_dim` and size-1 broadcasting the reader reads
# since issue 15 (branch s20-issue15)
PRNG_ONLY = {"bits_chain", "split_fold", "threefry_raw", "typed_key_arg", "vmap_bits", "vmap_fold_in"}


@pytest.fixture(scope="module")
def reads_bare_broadcast(tmp_path_factory) -> bool:
    probe = tmp_path_factory.mktemp("probe") / "p.jaxpr"
    probe.write_text("{ lambda ; a:f64[]. let b:f64[1] = broadcast_in_dim a in (b,) }")
    try:
        sprue.load(probe)
    except JaxprError:
        return False
    return True


@pytest.mark.parametrize("name", PROGRAMS)
def test_jax_printed_random_programs(name, reads_bare_broadcast):
    if name not in PRNG_ONLY and not reads_bare_broadcast:
        pytest.skip(f"{name}.jaxpr prints a bare broadcast_in_dim, which the reader reads once issue 15's"
                    f" reader forms are merged")
    data = np.load(HERE / f"{name}.npz")
    ins = [data[k] for k in sorted(data) if k.startswith("in")]
    outs = [data[k] for k in sorted(data) if k.startswith("out")]
    f = sprue.load(HERE / f"{name}.jaxpr")
    got = f(*ins)
    got = got if isinstance(got, (tuple, list)) else (got,)
    assert len(got) == len(outs)
    for g, w in zip(got, outs):
        assert g.dtype == w.dtype and g.shape == w.shape
        if np.issubdtype(w.dtype, np.floating):
            np.testing.assert_allclose(g, w, rtol=64 * np.finfo(w.dtype).eps)
        else:
            np.testing.assert_array_equal(g, w)


def test_key_types_read_as_words(tmp_path):
    p = tmp_path / "k.jaxpr"
    p.write_text("{ lambda ; a:key<fry>[3]. let b:u32[3,2] = random_unwrap a in (b,) }")
    f = sprue.load(p)
    keys = np.arange(6, dtype=np.uint32).reshape(3, 2)
    np.testing.assert_array_equal(f(keys), keys)


@pytest.mark.parametrize("text,message", [
    ("{ lambda ; a:key<rbg>[]. let b:u32[4] = random_unwrap a in (b,) }",
     "k.jaxpr:1:14: the key type 'key<rbg>' is not supported; sprue implements JAX's default PRNG, threefry2x32"),
    ("{ lambda ; a:u32[4]. let b:key<fry>[] = random_wrap[impl=rbg] a in (b,) }",
     "random_wrap: the PRNG implementation 'rbg' is not supported"),
    ("{ lambda ; a:u32[2]. let b:u32[3] = random_bits[bit_width=32 shape=(4,)] a in (b,) }",
     "output 0 of random_bits is declared u32[3] but sprue computes u32[4]"),
])
def test_errors(tmp_path, text, message):
    p = tmp_path / "k.jaxpr"
    p.write_text(text)
    with pytest.raises(JaxprError) as e:
        sprue.load(p)
    assert message in str(e.value)
