# Tilewright: the two commands a user needs are `make demo` and `make test`.
# Everything is installed into .venv on first use; builds are incremental (build/py).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
DEPS   := numpy ml_dtypes nanobind scikit-build-core pytest pytest-xdist threadpoolctl ninja
# The stamp's name carries a checksum of DEPS, so a .venv made before a dependency was added gets it.
STAMP  := $(VENV)/.stamp-$(firstword $(shell echo '$(DEPS)' | cksum))
PIP_BUILD := $(PY) -m pip install --quiet --no-build-isolation --no-deps \
             -Cbuild-dir=build/py -Ccmake.define.TW_BUILD_TESTS=ON --editable .

.PHONY: demo test build bench clean fuzz fuzz-diff fuzz-mutate sanitize soak

$(STAMP):
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(DEPS)
	touch $@

build: $(STAMP)
	$(PIP_BUILD)

# The seed's matmul on the CPU, then on the Ascend 910B simulator (fp16, Ascend-tuned blocks),
# each checked against numpy, with timings (simulated time and Cube utilisation on Ascend).
demo: build
	$(PY) examples/seed_matmul.py
	$(PY) examples/seed_matmul.py 4096 --target ascend910b --dtype float16 --blocks 128,256,64

# C++ unit tests (the single-threaded binaries two at a time: a failing one fails the target),
# then the Python tests (numerics vs numpy, errors, examples).
test: build
	mkdir -p build/py/test-logs
	ls build/py/tw_tests build/py/tw_cpu_runtime_tests_* | xargs -P 2 -I{} sh -c 'l=build/py/test-logs/$$(basename {}).log; {} --gtest_brief=1 > $$l 2>&1; s=$$?; cat $$l; exit $$s'
	$(PY) -m pytest -q -n auto --durations=30 tests/python

# The differential fuzzer: FUZZ_N random tile programs from FUZZ_SEED on cpu and on the 910B
# simulator against a float64 reference, FUZZ_JOBS worker processes; prints the counts and every
# failure reduced to a minimal kernel (docs/testing.md). `make test` runs a 500-program corpus.
# `make fuzz` runs both fuzzers (this one and fuzz-mutate below).
FUZZ_N    ?= 10000
FUZZ_SEED ?= 0
FUZZ_JOBS ?= 2
fuzz-diff: build
	cd tests/python && ../../$(PY) -m fuzz -n $(FUZZ_N) --seed $(FUZZ_SEED) --jobs $(FUZZ_JOBS)

# Mutation fuzzing (tests/fuzz/fuzz_mutate.py): 10,000 mutants of the examples' kernels, each
# compiled and run in a child process with a timeout, for cpu and ascend910b. Fails on any signal,
# hang, internal (non-Tilewright) exception or error without a source line. `make test` runs a
# fixed-seed corpus of it (tests/python/test_fuzz_mutate.py).
fuzz-mutate: build
	$(PY) tests/fuzz/fuzz_mutate.py --seed $(FUZZ_SEED) --count $(FUZZ_N) --jobs 2 --keep build/fuzz-mutate

fuzz: fuzz-diff fuzz-mutate

# The C++ unit tests and the Python suite under AddressSanitizer + UndefinedBehaviorSanitizer: a
# separate build (build/asan) and virtual environment (.venv-asan). Slow (docs/environment.md
# "Sanitizers" gives the time); not part of `make test`.
ASAN_PY    := .venv-asan/bin/python
SAN_FLAGS  := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -O1 -g
sanitize: $(STAMP)
	# .venv-asan sees the packages of .venv (a .pth line; not its editable tilewright) and gets
	# its own editable build of tilewright, instrumented.
	test -x $(ASAN_PY) || ($(PYTHON) -m venv .venv-asan && $(ASAN_PY) -c "import site, sys; \
	    open(site.getsitepackages()[0] + '/tw_main_venv.pth', 'w').write(sys.argv[1] + chr(10))" \
	    "$$($(PY) -c 'import site; print(site.getsitepackages()[0])')")
	$(ASAN_PY) -m pip install --quiet --no-build-isolation --no-deps -Cbuild-dir=build/asan \
	    -Ccmake.define.TW_BUILD_TESTS=ON -Ccmake.define.CMAKE_BUILD_TYPE=Debug \
	    "-Ccmake.define.CMAKE_CXX_FLAGS=$(SAN_FLAGS)" "-Ccmake.define.CMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined" \
	    "-Ccmake.define.CMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" --editable .
	ASAN_OPTIONS=detect_leaks=0 build/asan/tw_tests --gtest_brief=1
	LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
	    ASAN_OPTIONS=detect_leaks=0 TW_CACHE_DIR=$(CURDIR)/build/asan/twcache $(ASAN_PY) -m pytest -q tests/python

# Soak benchmark (not a test): 20,000 distinct kernels, 1,000,000 calls; RSS, mappings, fds.
soak: build
	$(PY) bench/soak.py

bench: build
	$(PY) bench/run.py
	$(PY) bench/ascend.py

clean:
	rm -rf build $(VENV) .venv-asan
