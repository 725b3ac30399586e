# Quick start: `make run` (demo end to end) and `make test`. Both create .venv first if it is missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test corpus bench bench-threads bench-programs bench-compile venv clean example fuzz

# The runtime's C objects (lowering/c_toolchain.py), built at installation and again when the
# modules holding their sources change (an object no longer prebuilt is compiled at first use).
RUNTIME_SOURCES := lowering/c_toolchain.py lowering/allocation.py lowering/parallel_runtime.py lowering/print_runtime.py runtime/fastcall_c.py
# ... and the matmul library's routines (lowering/matmul_library.py), which sprue's whole lowering compiles
RUNTIME_SOURCES += $(wildcard lowering/*.py)
PREBUILT := $(VENV)/.prebuilt

venv: $(PREBUILT)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

$(PREBUILT): $(STAMP) $(RUNTIME_SOURCES)
	$(PY) -m sprue.lowering.c_toolchain
	$(PY) -m sprue.lowering.matmul_prebuild
	touch $(PREBUILT)

run: $(PREBUILT)
	$(PY) examples/demo.py

# StableHLO's interpreter tests as compile-and-run cases (run.py always exits 0); CI clones
# shared/ beside the checkout. They run first and pytest last, so that pytest's summary is the
# closing line and its status is make's.
CONFORMANCE := ../shared/conformance/stablehlo_interpret

# ruff first (pyflakes, import order, E402, complexity: pyproject.toml), then the conformance cases,
# then pytest, whose tests/test_layers.py keeps the layers (README, "Layers"), on every core
# (pytest-xdist; each worker has its own session folder and compile cache: tests/conftest.py).
test: $(PREBUILT)
	$(VENV)/bin/ruff check .
	@if [ -d $(CONFORMANCE) ]; then \
	  echo "StableHLO interpreter conformance ($(CONFORMANCE)):"; \
	  cd $(CONFORMANCE) && $(abspath $(PY)) run.py 2>&1 | grep -E '^(FAIL |[0-9]+ passed, [0-9]+ failed)' \
	    || echo "the conformance runner printed no summary"; \
	else echo "no $(CONFORMANCE): StableHLO conformance cases skipped"; fi
	$(PY) -m pytest -q -n auto tests

# The whole JAX corpus in JAX's other forms (tests/jax_corpus/forms.zip: StableHLO text and bytecode,
# static and symbolic-size jax.export artifacts of every case of every JAX version); `make test`
# runs a fixed sample of them (test_corpus.FAST_FORMS_SAMPLE per version). About 25 minutes on 2 cores.
corpus: $(PREBUILT)
	SPRUE_FULL_CORPUS=1 $(PY) -m pytest -q -n auto tests/jax_corpus

# The long fuzzing campaign over the jaxpr reader and the StableHLO input (tests/fuzz/campaign.py):
# FUZZ_EXAMPLES cases per reader, each in a child process, then FUZZ_CLASS_EXAMPLES of each class
# that compiles and runs every case (huge static shapes, compile options, fork during a compile);
# every failing input is kept in tests/fuzz/regressions/ (replayed by tests/fuzz/test_fuzz_short.py, part
# of `make test`). Also: FUZZ_MINUTES (a time bound), FUZZ_SEED, FUZZ_LEVEL (parse / lower / call),
# FUZZ_TIMEOUT. About 15 minutes on 2 cores.
FUZZ_EXAMPLES ?= 10000
FUZZ_CLASS_EXAMPLES ?= 100

fuzz: $(PREBUILT)
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) FUZZ_CLASS_EXAMPLES=$(FUZZ_CLASS_EXAMPLES) $(PY) tests/fuzz/campaign.py

# The C embedding example (examples/c_host): compile two kernels with `sprue compile`, build the C
# host with cc directly, run it.
EXAMPLE := examples/c_host
EXAMPLE_BUILD := $(EXAMPLE)/build

example: $(PREBUILT)
	mkdir -p $(EXAMPLE_BUILD)
	$(PY) $(EXAMPLE)/gen_kernels.py $(EXAMPLE_BUILD)
	$(VENV)/bin/sprue compile $(EXAMPLE_BUILD)/axpy.jaxpr -o $(EXAMPLE_BUILD)
	$(VENV)/bin/sprue compile $(EXAMPLE_BUILD)/stretch.jaxpr -o $(EXAMPLE_BUILD)
	$${CC:-cc} -std=c99 -Wall -Werror -I$(EXAMPLE_BUILD) $(EXAMPLE)/main.c -L$(EXAMPLE_BUILD) -laxpy -lstretch \
	  -Wl,-rpath,'$$ORIGIN' -o $(EXAMPLE_BUILD)/c_host
	$(EXAMPLE_BUILD)/c_host

# every kernel at all threads and at 1 (the speedup) beside numpy/JAX/numba, then the thread sweep
bench: $(PREBUILT)
	$(PY) benchmarks/run.py
	$(PY) benchmarks/threads.py

# sprue at 1 thread vs all threads over sizes 1e3..1e7 (matmul 32..1024), about a minute (issue 14);
# ARGS="--only sum,matmul --sizes 1e5,1e7 --matmul 512 --runs 3" and so on
bench-threads: $(PREBUILT)
	$(PY) benchmarks/threads.py $(ARGS)

# realistic whole programs vs jax.jit (issue 13); ARGS=--one-core for the per-core comparison
bench-programs: $(PREBUILT)
	$(PY) benchmarks/programs.py $(ARGS)

# first-call compile time as programs grow, vs jax.jit (issue 24): each case in a fresh process;
# ARGS=--quick for a short run, ARGS="--sizes 30,100 --timeout 120 --one-core" and so on
bench-compile: $(PREBUILT)
	$(PY) benchmarks/compile_time.py $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache $(EXAMPLE_BUILD)
