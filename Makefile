# The two commands of the README: `make demo` and `make test`.
# Both install what is missing (apt), configure, build, then run.

BUILD ?= build
JOBS  ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo

# ccache hits across clones in different folders (CI clones afresh each run).
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1

.PHONY: all deps configure build test test-all test-unit test-integration bench demo format clean

all: build

deps:
	@bash deploy/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) > $(BUILD).configure.log 2>&1 || \
	  (cat $(BUILD).configure.log; exit 1)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# Everything but the minutes-long example runs (label `slow`).
test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) -LE slow

test-all: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

test-unit: build
	cd $(BUILD) && ctest --output-on-failure -L unit -j$(JOBS)

test-integration: build
	cd $(BUILD) && ctest --output-on-failure -L integration

# Benchmarks against peers measured in the same run (minutes; noisy on a
# shared machine: compare the printed ratios, not absolute numbers).
bench: build
	$(BUILD)/bin/bench_allreduce
	$(BUILD)/bin/bench_step_breakdown
	$(BUILD)/bin/bench_checkpoint_memory
	/usr/bin/python3 bench/ddp_compare.py --bin $(BUILD)/bin

demo: build
	bash deploy/local-cluster.sh --bin $(BUILD)/bin examples/fashion-mnist-mlp.yaml

format:
	git ls-files '*.cc' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(BUILD).configure.log
