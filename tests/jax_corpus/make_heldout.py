"""The held-out JAX programs (issue 15): written after the corpus (make.py), in the style users write,
without looking at what sprue reads, to measure how many jaxprs real JAX prints that sprue had not
seen load and match. Batch A was measured before the reader was fixed for it (240 of 274 passed),
batch B after batch A's fixes and before its own (72 of 73), batch C (programs in the style of JAX
code in the wild) after both and before its own (123 of 126), batch D (styles A-C did not cover) after
all three and before its own (187 of 200), batch E (whole programs: training scripts, hand-written
layers, ODEs, samplers, signal and image processing, segment ops) after all four and before its own
(152 of the 153 without constvars; 160 of all 161), batch F (edge cases: empty arrays, scalars, dtypes,
explicit lax, XLA's generator) after all five and before its own (200 of the 219 without constvars; 215
of all 234); all pass now, or are refused by text and stay tested
(test_corpus.test_heldout). The counts leave out programs with top-level constvars, which sprue
refused until batch D: now they are the programs' leading parameters, and their values are saved.

Run by hand in a venv holding JAX (never in sprue's .venv):

    /work/jaxvenv/bin/python tests/jax_corpus/make_heldout.py     # writes tests/jax_corpus/heldout/jax-<version>/

Each case `<name>` gives `<name>.jaxpr` (str(jax.make_jaxpr(f)(*args))) and `<name>.npz` (in0, ...:
the flattened arguments; out0, ...: JAX's flattened results; const0, ...: the values of the jaxpr's
constvars, then of its called jaxprs' (called_consts), which JAX's printer drops); `cases.json` lists
them, a case whose jaxpr has constvars marked with their count. JAX runs in float32, its default, but for the cases of X64 (jax.enable_x64).
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import heldout_batch_a  # noqa: F401  (registers batch A's cases, then B's, C's, D's, E's, in this order)
import heldout_batch_b  # noqa: F401
import heldout_batch_c  # noqa: F401
import heldout_batch_d  # noqa: F401
import heldout_batch_e  # noqa: F401
import heldout_batch_e2  # noqa: F401  (batch E's second half, after its first)
import heldout_batch_f  # noqa: F401
import heldout_batch_f2  # noqa: F401  (batch F's second half, after its first)
import jax
import numpy as np
from heldout_inputs import CASES, X64
from jax._src import core as jcore


def _flat(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def called_consts(closed, text: str) -> list:
    """The values of the constvars of the jaxprs `closed` calls (a jit's, a cond branch's, a shared
    `let` definition's), in the order `text` (str(closed)) declares them: the order in which sprue
    takes them, after the main jaxpr's constvars (jaxpr_eval.called_constvars). The names JAX's
    printer gave their Vars come from its own naming context, recorded while printing."""
    contexts = []
    printing = jcore.JaxprPpContext

    class Recording(printing):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            contexts.append(self)
    jcore.JaxprPpContext = Recording
    try:
        reprinted = str(closed)
    finally:
        jcore.JaxprPpContext = printing
    assert reprinted + "\n" == text and contexts
    names = contexts[0].var_names
    values = {}

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            for v in eqn.params.values():
                for x in (v if isinstance(v, (tuple, list)) else (v,)):
                    if isinstance(x, jcore.ClosedJaxpr):
                        values.update((names.get(var), c) for var, c in zip(x.jaxpr.constvars, x.consts))
                        walk(x.jaxpr)
                    elif isinstance(x, jcore.Jaxpr):
                        walk(x)
    walk(closed.jaxpr)
    # the constvars' binders as the text declares them: `lambda a:f32[8] b:f32[8]; ...` of every jaxpr
    # but the main one (the line that starts with `{ lambda`)
    declared = [m for m in re.finditer(r"\{ lambda ([^;]*);", text) if m.start() and text[m.start() - 1] != "\n"]
    order = [b.split(":")[0] for m in declared for b in m.group(1).split()]
    assert all(n in values for n in order), (order, sorted(values))
    return [np.asarray(values[n]) for n in order]


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
        text = str(closed) + "\n"
        (out / f"{name}.jaxpr").write_text(text)
        consts = [np.asarray(c) for c in closed.consts] + called_consts(closed, text)
        np.savez(out / f"{name}.npz", **{f"in{i}": a for i, a in enumerate(ins)},
                 **{f"out{i}": a for i, a in enumerate(outs)},
                 **{f"const{i}": c for i, c in enumerate(consts)})
        entry = {"name": name}
        if consts:
            entry["constvars"] = len(consts)
        entries.append(entry)
    (out / "cases.json").write_text(json.dumps({"jax": jax.__version__, "cases": entries}, indent=1) + "\n")
    print(f"jax {jax.__version__}: {len(entries)} held-out cases in {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
