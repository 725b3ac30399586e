"""Fuzzing sprue's readers: the jaxpr text reader (sprue.load of a saved program or printed jaxpr)
and the StableHLO input (sprue.load of a .mlir file).

    harness.py      run_case(kind, data, timeout): the case runs in a persistent child process
                    (worker.py); OK (compiled, or a clean SprueError), CRASH (a signal, an exit, an
                    exception that is not a SprueError) or HANG (timeout)
    strategies.py   hypothesis strategies: mutations of the corpus, token soups, random bytes
    campaign.py     the long run (`make fuzz`); failing inputs go to regressions/
    make_corpus.py  regenerates corpus/ (seeds: jaxprs from the tests and sprue.save, StableHLO
                    from the conformance cases and sprue's own lowering)
    regressions/    every input that failed once; test_fuzz_short.py (part of `make test`) replays them all
"""
