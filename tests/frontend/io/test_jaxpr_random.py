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


KEY_ARRAYS = """{ lambda ; a:u32[2] i:i64[] w:bool[4]. let
    b:key<fry>[] = random_wrap[impl=fry] a
    p:key<fry>[4] = random_split[shape=(4,)] b
    q:key<fry>[1] = slice[limit_indices=(2,) start_indices=(1,) strides=(1,)] p
    r:key<fry>[] = squeeze[dimensions=(0,)] q
    s:key<fry>[2,2] = reshape[dimensions=None new_sizes=(2, 2)] p
    t:key<fry>[2,2] = transpose[permutation=(1, 0)] s
    u:key<fry>[1] = dynamic_slice[slice_sizes=(1,)] p i
    v:key<fry>[3,4] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(3, 4)] p
    x:key<fry>[4] = select_n w p p
    y:key<fry>[1,4] = expand_dims[dimensions=(0,)] x
    c:u32[2] = random_unwrap r
    d:u32[2,2,2] = random_unwrap t
    e:u32[1,2] = random_unwrap u
    f:u32[3,4,2] = random_unwrap v
    g:u32[1,4,2] = random_unwrap y
  in (c, d, e, f, g) }
"""


def test_structural_operations_on_key_arrays(tmp_path):
    """Slicing, squeezing, reshaping, transposing, broadcasting and selecting key arrays (as JAX
    prints them for `keys[1]`, randint's split, vmap): the words axis follows."""
    p = tmp_path / "keys.jaxpr"
    p.write_text(KEY_ARRAYS)
    key = np.asarray(sprue.random.PRNGKey(5))
    keys = np.asarray(sprue.random.split(key, 4))
    which = np.array([True, False, True, False])
    c, d, e, f, g = sprue.load(p)(key, np.int64(2), which)
    np.testing.assert_array_equal(c, keys[1])
    np.testing.assert_array_equal(d, keys.reshape(2, 2, 2).transpose(1, 0, 2))
    np.testing.assert_array_equal(e, keys[2:3])
    np.testing.assert_array_equal(f, np.broadcast_to(keys, (3, 4, 2)))
    np.testing.assert_array_equal(g, keys[None])


@pytest.mark.parametrize("text,message", [
    ("{ lambda ; a:key<pcg>[]. let b:u32[4] = random_unwrap a in (b,) }",
     "k.jaxpr:1:14: the key type 'key<pcg>' is not supported; sprue implements JAX's PRNGs key<fry>, key<rbg>,"
     " key<urbg>"),
    ("{ lambda ; a:u32[4]. let b:key<fry>[] = random_wrap[impl=pcg] a in (b,) }",
     "random_wrap: the PRNG implementation 'pcg' is not supported; sprue implements JAX's fry, rbg, urbg"),
    ("{ lambda ; a:u32[2]. let b:u32[3] = random_bits[bit_width=32 shape=(4,)] a in (b,) }",
     "output 0 of random_bits is declared u32[3] but sprue computes u32[4]"),
    ("{ lambda ; a:u32[2]. let b:key<fry>[] = random_wrap[impl=fry] a; c:key<fry>[2] = random_split[shape=(2,)] b"
     "; d:key<fry>[2] = sort[dimension=0 is_stable=True num_keys=1] c; e:u32[2,2] = random_unwrap d in (e,) }",
     "sort of PRNG key arrays is not supported by sprue's reader"),
])
def test_errors(tmp_path, text, message):
    p = tmp_path / "k.jaxpr"
    p.write_text(text)
    with pytest.raises(JaxprError) as e:
        sprue.load(p)
    assert message in str(e.value)
