"""Regenerates the seed corpus in corpus/ (run by hand: `python tests/fuzz/make_corpus.py`).

    corpus/jaxpr/*.jaxpr        jaxpr texts from the tests (every string literal holding `{ lambda`
                                that sprue reads back) and saved programs of a few sprue.numpy
                                functions (sprue.save: headers, constants, dynamic shapes, control flow)
    corpus/stablehlo/*.mlir     small cases of ../shared/conformance/stablehlo_interpret (one or two
                                per op) and sprue's own StableHLO for a few programs
    corpus/vocab_jaxpr.txt      words for the token-level mutations: sprue's primitive names and
    corpus/vocab_mlir.txt       MLIR op names seen in the corpus

Only seeds that load are kept (every one is OK by construction), each at most MAX_BYTES.
"""
from __future__ import annotations

import ast
import hashlib
import re
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
ROOT = TESTS.parent
CONFORMANCE = ROOT.parent / "shared" / "conformance" / "stablehlo_interpret" / "cases"
MAX_BYTES = 4096


def _test_jaxprs() -> list[tuple[str, str]]:
    out = []
    for f in sorted(TESTS.rglob("test_*.py"), key=lambda f: f.name):   # by name, as when tests/ was flat
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "{ lambda" in node.value:
                out.append((f.stem.removeprefix("test_"), node.value))
    return out


def _programs():
    import sprue
    import sprue.numpy as jnp
    from sprue import lax

    c = np.array([1.5, -0.0, 2.0])

    def affine(x, y):
        return jnp.sin(x) * y + c

    def reductions(x):
        return jnp.sum(x, axis=0), jnp.max(x, axis=1), jnp.argmin(x, axis=0)

    def matmul(a, b):
        return jnp.tanh(a @ b).T

    def indexing(x, i):
        return x[1:3], x[::-1], x[i], jnp.where(x > 0, x, 0.0)

    def structural(x):
        return jnp.concatenate([x, x]).reshape(2, 6), jnp.flip(x), jnp.cumsum(x)

    def loop(x):
        return lax.fori_loop(0, 3, lambda i, v: v * 2.0 + i, x)

    def branch(p, x):
        return lax.cond(p > 0, lambda v: v + 1.0, lambda v: v - 1.0, x)

    def ints(a, b):
        return (a << 2) ^ b, a // 3, (a % 5).astype(np.int8), jnp.sort(b)

    def scan_fn(xs):
        return lax.scan(lambda carry, x: (carry + x, carry * x), 0.0, xs)

    specs = [
        ("affine", affine, (np.zeros(3), np.zeros(3)), None),
        ("reductions", reductions, (np.zeros((3, 4), np.float32),), None),
        ("matmul", matmul, (np.zeros((2, 3)), np.zeros((3, 4))), None),
        ("indexing", indexing, (np.zeros(5), np.int64(2)), None),
        ("structural", structural, (np.zeros(6),), None),
        ("loop", loop, (np.zeros(4),), None),
        ("branch", branch, (np.int64(1), np.zeros(2)), None),
        ("ints", ints, (np.zeros(4, np.int32), np.zeros(4, np.int32)), None),
        ("scan", scan_fn, (np.zeros(5),), None),
        ("dynamic", lambda x: jnp.concatenate([x, x])[:-1] * 2, (np.ones(4),), {0: "n"}),
        ("dynamic_sum", lambda x, y: (x * y).sum() + x.shape[0], (np.ones(4), np.ones(4)), {0: "n"}),
    ]
    out = []
    tmp = HERE / ".tmp_corpus"
    tmp.mkdir(exist_ok=True)
    try:
        for name, fn, args, axes in specs:
            try:
                q = sprue.qjit(fn, abstracted_axes=axes) if axes else sprue.qjit(fn)
                q(*args)
                p = sprue.save(q, tmp / f"{name}.jaxpr")
                out.append((name, p.read_text(), q.mlir))
            except Exception as e:   # a program this version cannot trace is simply left out
                print(f"skipped program {name}: {type(e).__name__}: {e}", file=sys.stderr)
    finally:
        for p in tmp.iterdir():
            p.unlink()
        tmp.rmdir()
    return out


def _loads_jaxpr(text: str) -> bool:
    from sprue.io.saved_format import parse_saved
    try:
        parse_saved(text, "<seed>")
        return True
    except Exception:
        return False


def _loads_mlir(text: str) -> bool:
    from sprue.lowering.stablehlo_input import prepare
    try:
        prepare(text if "\n" in text else text + "\n")
        return True
    except Exception:
        return False


def _write(d: Path, name: str, text: str) -> bool:
    data = text.encode()
    if len(data) > MAX_BYTES:
        return False
    (d / name).write_bytes(data)
    return True


def main() -> None:
    jd, sd = HERE / "corpus" / "jaxpr", HERE / "corpus" / "stablehlo"
    for d in (jd, sd):
        d.mkdir(parents=True, exist_ok=True)
        for p in d.iterdir():
            p.unlink()
    seen = set()
    n_j = n_s = 0
    for stem, text in _test_jaxprs():
        h = hashlib.sha1(text.encode()).hexdigest()[:8]
        if h in seen or not _loads_jaxpr(text):
            continue
        seen.add(h)
        n_j += _write(jd, f"test_{stem}-{h}.jaxpr", text)
    for name, text, mlir in _programs():
        n_j += _write(jd, f"saved_{name}.jaxpr", text)
        if mlir and _loads_mlir(mlir):
            n_s += _write(sd, f"sprue_{name}.mlir", mlir)
    per_op: dict[str, int] = {}
    if CONFORMANCE.is_dir():
        for p in sorted(CONFORMANCE.glob("*.mlir"), key=lambda p: (p.stat().st_size, p.name)):
            op = p.name.split("__")[0]
            if per_op.get(op, 0) >= 2 or p.stat().st_size > MAX_BYTES:
                continue
            text = p.read_text()
            if _loads_mlir(text) and _write(sd, f"conf_{p.name}", text):
                per_op[op] = per_op.get(op, 0) + 1
                n_s += 1
    # vocabularies
    from sprue.io.jaxpr_params import CALLS, IDENTITIES
    from sprue.ir.core import primitives
    words = set(primitives) | set(CALLS) | set(IDENTITIES)
    for p in jd.glob("*.jaxpr"):
        words |= set(re.findall(r"\b([a-z_]+)=", p.read_text()))   # param names
    (HERE / "corpus" / "vocab_jaxpr.txt").write_text("\n".join(sorted(words)) + "\n")
    ops = set()
    for p in sd.glob("*.mlir"):
        ops |= set(re.findall(r"\b((?:stablehlo|chlo|func|tensor|arith|math)\.[a-z_]+)\b", p.read_text()))
    (HERE / "corpus" / "vocab_mlir.txt").write_text("\n".join(sorted(ops)) + "\n")
    print(f"{n_j} jaxpr seeds, {n_s} StableHLO seeds, {len(words)} jaxpr words, {len(ops)} MLIR ops")


if __name__ == "__main__":
    main()
