"""The held-out JAX programs (issue 15): written after the corpus (make.py), in the style users write,
without looking at what sprue reads, to measure how many jaxprs real JAX prints that sprue had not
seen load and match. Batch A was measured before the reader was fixed for it (240 of 274 passed),
batch B after batch A's fixes and before its own (72 of 73), batch C (programs in the style of JAX
code in the wild) after both and before its own (123 of 126), batch D (styles A-C did not cover) after
all three and before its own (187 of 200), batch E (whole programs: training scripts, hand-written
layers, ODEs, samplers, signal and image processing, segment ops) after all four and before its own
(152 of the 153 without constvars; 160 of all 161); all pass now, or are refused by text and stay tested
(test_corpus.test_heldout). The counts leave out programs with top-level constvars, which sprue
refused until batch D: now they are the programs' leading parameters, and their values are saved.

Run by hand in a venv holding JAX (never in sprue's .venv):

    /work/jaxvenv/bin/python tests/jax_corpus/make_heldout.py     # writes tests/jax_corpus/heldout/jax-<version>/

Each case `<name>` gives `<name>.jaxpr` (str(jax.make_jaxpr(f)(*args))) and `<name>.npz` (in0, ...:
the flattened arguments; out0, ...: JAX's flattened results; const0, ...: the values of the jaxpr's
constvars, which JAX's printer drops); `cases.json` lists them, a case whose jaxpr has constvars
marked so. JAX runs in float32, its default, but for the cases of X64 (jax.enable_x64).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import heldout_batch_a  # noqa: F401  (registers batch A's cases, then B's, C's, D's, E's, in this order)
import heldout_batch_b  # noqa: F401
import heldout_batch_c  # noqa: F401
import heldout_batch_d  # noqa: F401
import heldout_batch_e  # noqa: F401
import heldout_batch_e2  # noqa: F401  (batch E's second half, after its first)
import jax
import numpy as np
from heldout_inputs import CASES, X64


def _flat(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def main() -> None:
    out = Path(__file__).parent / "heldout" / f"jax-{jax.__version__}"
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for name, fn, args in CASES:
        try:
            with jax.enable_x64(name in X64):
                closed = jax.make_jaxpr(fn)(*args)
                outs, ins = _flat(jax.jit(fn)(*args)), _flat(args)
        except Exception as e:   # a function this JAX version lacks: left out, with why
            print(f"  skipped {name}: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
            continue
        (out / f"{name}.jaxpr").write_text(str(closed) + "\n")
        np.savez(out / f"{name}.npz", **{f"in{i}": a for i, a in enumerate(ins)},
                 **{f"out{i}": a for i, a in enumerate(outs)},
                 **{f"const{i}": np.asarray(c) for i, c in enumerate(closed.consts)})
        entry = {"name": name}
        if closed.consts:
            entry["constvars"] = len(closed.consts)
        entries.append(entry)
    (out / "cases.json").write_text(json.dumps({"jax": jax.__version__, "cases": entries}, indent=1) + "\n")
    print(f"jax {jax.__version__}: {len(entries)} held-out cases in {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
