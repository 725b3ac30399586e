"""The entry function is its own C interface (lowering/entry_arguments.py) and the checked wrapper
names its argument struct once (lowering/allocation.py): arguments of every kind still arrive, and
the text per argument stays constant however many there are."""
import re

import numpy as np

import sprue
import sprue.numpy as jnp
from sprue.lowering import allocation


def _stage(tmp_path, suffix):
    return next(tmp_path.glob(f"*{suffix}")).read_text()


def _entry(text):
    body = text[text.index("llvm.func @_mlir_ciface_main("):]
    return body[:body.index("\n  }\n")]


def test_arguments_of_every_kind_reach_the_entry_through_their_descriptors(tmp_path):
    """A dynamic-shape array (its sizes read from its descriptor), a 0-d array, a Python scalar, a
    strided view and an int array; one array result (the interface stores it)."""
    def program(x, s, n, v, k):
        return x * s + n + jnp.sum(v) + k[: x.shape[0]].astype(x.dtype)

    rng = np.random.default_rng(1)
    x = rng.random((5, 3))
    v = rng.random((6, 4))[::2, 1:]          # not contiguous
    k = np.arange(7, dtype=np.int64)[:, None] * np.ones((1, 3), dtype=np.int64)
    f = sprue.qjit(program, keep_intermediate=str(tmp_path), abstracted_axes=({0: "n"}, None, None, None, {0: "n"}))
    got = f(x, np.float64(2.5), 4, v, k[:5])
    np.testing.assert_allclose(got, x * 2.5 + 4 + v.sum() + k[:5], rtol=1e-12)
    x2 = rng.random((2, 3))
    np.testing.assert_allclose(f(x2, np.float64(-1.0), 1, v, k[:2]), -x2 + 1 + v.sum() + k[:2], rtol=1e-12)
    text = _stage(tmp_path, ".05_llvm.mlir")
    assert "llvm.func @main(" not in text, "the raw entry function is gone: the interface is the entry"
    entry = _entry(text)
    signature = entry[:entry.index("{")]
    assert "i64, i64" not in signature, signature       # descriptors passed by pointer, not by field
    # each field read where it is used, once (a 0-d argument's aligned pointer, offset 8, only)
    reads = re.findall(r"llvm\.getelementptr %arg(\d+)\[(\d+)\]", entry)
    assert len(reads) == len(set(reads)), reads
    fields = {}
    for arg, offset in reads:
        fields.setdefault(arg, []).append(int(offset))
    assert any(offsets == [8] for offsets in fields.values()), fields
    # x: its aligned pointer, offset and run-time size (its allocated pointer, unused, never read;
    # which strides are read depends on how its loops index it: collapse.py makes x * s one loop)
    assert any({8, 16, 24} <= set(offsets) for offsets in fields.values()), fields
    assert not any(0 in offsets for offsets in fields.values()), fields


def test_many_arguments_give_text_linear_in_their_number():
    """The checked wrapper loads each of n parameters from one struct: its type is named once,
    not written out in each of the 2n getelementptrs (O(n^2) text: 40 MB at 2,000 arguments)."""
    def module(n):
        params = ", ".join(f"ptr %{i}" for i in range(n))
        return f"define void @_mlir_ciface_k({params}) {{\n  ret void\n}}\n"
    small, big = (len(allocation.add_entry_wrappers(module(n))) for n in (100, 2000))
    assert big < 25 * small, (small, big)


def test_hundreds_of_arguments_compile_and_arrive_in_order():
    n = 600

    def program(*xs):
        return sum(xs[i] * (i % 7) for i in range(len(xs)))
    xs = [np.full(2, float(i)) for i in range(n)]
    got = sprue.qjit(program)(*xs)
    np.testing.assert_allclose(got, sum(xs[i] * (i % 7) for i in range(n)))
