"""The long fuzzing campaign (`make fuzz`): hypothesis-generated inputs for the jaxpr reader and the
StableHLO input, each run in the harness's child process; every failing input is kept.

    python tests/fuzz/campaign.py                          # FUZZ_EXAMPLES (default 5000) per reader,
                                                           # FUZZ_CLASS_EXAMPLES (300) per class
    python tests/fuzz/campaign.py --examples 20000 --kinds jaxpr --minutes 30 --seed 7
    python tests/fuzz/campaign.py --level call             # also build the library and call it
    python tests/fuzz/campaign.py --replay                 # just replay regressions/

Environment: FUZZ_EXAMPLES, FUZZ_MINUTES, FUZZ_SEED, FUZZ_LEVEL, FUZZ_TIMEOUT give the defaults of
the options of the same names.

A failing case (CRASH: the worker died or a non-SprueError escaped; HANG: no answer within the
timeout) is written to regressions/<kind>-<sha1>.<ext> with a note (<same>.txt) saying what
happened; a minimized input failing the same way is kept too. At most --keep-per-bug inputs are
kept for each distinct failure (outcome, stage, exception type, innermost frame) in one run, so one
common bug does not fill the folder. The campaign does not stop at a failure: hypothesis runs in
rounds of --round examples with successive seeds, without shrinking, until the examples or the
minutes are spent. The exit status is 1 if anything failed.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hyp_seed

# Run as a script (`make fuzz`): the package `fuzz` is found beside this file.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fuzz import harness, strategies  # noqa: E402


def _env(name: str, default, cast):
    v = os.environ.get(name, "").strip()
    return cast(v) if v else default


def replay(h: harness.Harness, timeout: float, log) -> list:
    bad = []
    for kind, path in harness.regressions():
        r = h.run_case(kind, path.read_bytes(), timeout)
        if not r.ok:
            bad.append((path, r))
            log(f"REGRESSION {path.name}: {r.describe()}")
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=_env("FUZZ_EXAMPLES", 5000, int), help="cases per kind")
    ap.add_argument("--minutes", type=float, default=_env("FUZZ_MINUTES", 0.0, float),
                    help="stop after this long in all (0: no limit)")
    ap.add_argument("--seed", type=int, default=_env("FUZZ_SEED", int(time.time()) % 100000, int))
    ap.add_argument("--level", choices=harness.LEVELS, default=_env("FUZZ_LEVEL", "lower", str))
    ap.add_argument("--timeout", type=float, default=_env("FUZZ_TIMEOUT", 20.0, float), help="seconds per case")
    ap.add_argument("--kinds", default=",".join(harness.KINDS))
    ap.add_argument("--class-examples", type=int, default=_env("FUZZ_CLASS_EXAMPLES", 300, int),
                    help="cases per kind for the kinds that compile every case (huge, options, fork)")
    ap.add_argument("--round", type=int, default=250, help="examples per hypothesis run")
    ap.add_argument("--keep-per-bug", type=int, default=3)
    ap.add_argument("--no-minimize", action="store_true")
    ap.add_argument("--replay", action="store_true", help="only replay the kept regressions")
    args = ap.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]

    def log(msg: str) -> None:
        print(msg, flush=True)

    t_start = time.monotonic()
    deadline = t_start + args.minutes * 60 if args.minutes > 0 else float("inf")
    failures: dict[str, list] = collections.defaultdict(list)   # signature -> [(kind, path, result)]
    stats = collections.Counter()
    stages = collections.Counter()   # how far the cases got: {kind}:{status}@{stage}

    with harness.Harness(args.level) as h:
        bad = replay(h, args.timeout, log)
        log(f"replayed {len(harness.regressions())} regression cases: {len(bad)} failing")
        if args.replay:
            return 1 if bad else 0
        log(f"fuzzing {', '.join(kinds)} at level {args.level!r}: {args.examples} examples per kind,"
            f" seed {args.seed}, timeout {args.timeout:g} s" + (f", {args.minutes:g} min" if args.minutes else ""))

        def record(kind: str, data: bytes, r: harness.Result) -> None:
            sig = r.signature()
            stats[r.outcome] += 1
            known = failures[sig]
            if len(known) >= args.keep_per_bug:
                return
            path = harness.save_regression(kind, data, r)
            known.append((kind, path, r))
            log(f"\n{r.outcome.upper()} #{len(known)} [{sig}] -> {path.name}\n{r.describe()[:3000]}")
            if not args.no_minimize and len(known) == 1 and len(data) > 64:
                small = harness.minimize(h, kind, data, r, args.timeout, budget=90)
                if small != data:
                    r2 = h.run_case(kind, small, args.timeout)
                    if not r2.ok:
                        p2 = harness.save_regression(kind, small, r2)
                        log(f"  minimized to {len(small)} bytes -> {p2.name}")

        for kind in kinds:
            t_kind = time.monotonic()
            done, rnd = 0, 0
            total = args.examples if kind in harness.READERS else args.class_examples
            while done < total and time.monotonic() < deadline:
                n = min(args.round, total - done)
                counter = {"n": 0}

                @hyp_seed(args.seed * 1000 + rnd)
                @settings(max_examples=n, deadline=None, database=None, derandomize=False,
                          phases=[Phase.generate], suppress_health_check=list(HealthCheck))
                @given(strategies.inputs(kind))
                def one(data: bytes) -> None:
                    if time.monotonic() >= deadline:
                        return
                    counter["n"] += 1
                    r = h.run_case(kind, data, args.timeout)
                    stats[f"{kind}:{r.status}"] += 1
                    stages[f"{kind}:{r.status}@{r.stage}"] += 1
                    if not r.ok:
                        record(kind, data, r)

                one()
                done += counter["n"]
                rnd += 1
                if counter["n"] == 0:
                    break
                elapsed = time.monotonic() - t_kind
                log(f"  {kind}: {done} cases in {elapsed:.0f} s ({done / max(elapsed, 1e-9):.1f}/s),"
                    f" {sum(len(v) for s, v in failures.items())} failing inputs kept so far")
            stats[f"{kind}:cases"] = done
            stats[f"{kind}:seconds"] = round(time.monotonic() - t_kind, 1)
        restarts = h.restarts

    log(f"\ncampaign done in {time.monotonic() - t_start:.0f} s: {dict(sorted(stats.items()))},"
        f" worker restarts {restarts}")
    log("how far the cases got: " + ", ".join(f"{k} {v}" for k, v in sorted(stages.items())))
    if failures:
        log(f"{len(failures)} distinct failures:")
        for sig, items in failures.items():
            log(f"  {sig}: {', '.join(p.name for _, p, _ in items)}")
    return 1 if failures or bad else 0


if __name__ == "__main__":
    sys.exit(main())
