# Tilewright: the two commands a user needs are `make demo` and `make test`.
# Everything is installed into .venv on first use; builds are incremental (build/py).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
DEPS   := numpy ml_dtypes nanobind scikit-build-core pytest threadpoolctl ninja
PIP_BUILD := $(PY) -m pip install --quiet --no-build-isolation --no-deps \
             -Cbuild-dir=build/py -Ccmake.define.TW_BUILD_TESTS=ON --editable .

.PHONY: demo test build bench fuzz clean

$(VENV)/.stamp:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(DEPS)
	touch $@

build: $(VENV)/.stamp
	$(PIP_BUILD)

# The seed's matmul on the CPU, then on the Ascend 910B simulator (fp16, Ascend-tuned blocks),
# each checked against numpy, with timings (simulated time and Cube utilisation on Ascend).
demo: build
	$(PY) examples/seed_matmul.py
	$(PY) examples/seed_matmul.py 4096 --target ascend910b --dtype float16 --blocks 128,256,64

# C++ unit tests, then the Python tests (numerics vs numpy, errors, examples).
test: build
	build/py/tw_tests --gtest_brief=1
	for t in build/py/tw_cpu_runtime_tests_*; do $$t --gtest_brief=1 || exit 1; done
	$(PY) -m pytest -q tests/python

# The differential fuzzer: FUZZ_N random tile programs from FUZZ_SEED on cpu and on the 910B
# simulator against a float64 reference, FUZZ_JOBS worker processes; prints the counts and every
# failure reduced to a minimal kernel (docs/testing.md). `make test` runs a 500-program corpus.
FUZZ_N    ?= 10000
FUZZ_SEED ?= 0
FUZZ_JOBS ?= 2
fuzz: build
	cd tests/python && ../../$(PY) -m fuzz -n $(FUZZ_N) --seed $(FUZZ_SEED) --jobs $(FUZZ_JOBS)

bench: build
	$(PY) bench/run.py
	$(PY) bench/ascend.py

clean:
	rm -rf build $(VENV)
