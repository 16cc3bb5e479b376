# The two commands of the README: `make demo` and `make test`.
# Both install what is missing (apt), configure, build, then run.

BUILD ?= build
JOBS  ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo

# ccache hits across clones in different folders (CI clones afresh each run).
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1

# The second flavour: the same tree against a pinned PyTorch 2.x wheel (a
# CUDA LibTorch with NCCL), in its own build folder. No GPU needed to build
# it or to run its CPU tests; docs/gpu.md.
TORCH2_VERSION ?= 2.11.0
TORCH2_VENV    ?= build-torch2-venv
TORCH2_BUILD   ?= build-torch2
TORCH2_PYTHON  := $(TORCH2_VENV)/bin/python

.PHONY: all deps configure build test test-all test-unit test-integration bench demo format clean \
        torch2-deps configure-torch2 build-torch2 test-torch2 build-cuda

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
	$(BUILD)/bin/bench_control_plane --bin $(BUILD)/bin
	/usr/bin/python3 bench/ddp_compare.py --bin $(BUILD)/bin

torch2-deps: deps
	@bash deploy/install-torch2.sh $(TORCH2_VENV) $(TORCH2_VERSION)

# Torch_DIR, not the wheel's folder on CMAKE_PREFIX_PATH: that folder also
# holds a protoc and protobuf headers of its own (cmake/torch_flavour.cmake).
configure-torch2: torch2-deps
	@cmake -S . -B $(TORCH2_BUILD) $(CMAKE_FLAGS) -DTRAINCTL_CUDA=ON \
	  -DTorch_DIR="$$($(TORCH2_PYTHON) -W ignore -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')/Torch" \
	  > $(TORCH2_BUILD).configure.log 2>&1 || (cat $(TORCH2_BUILD).configure.log; exit 1)

build-torch2: configure-torch2
	cmake --build $(TORCH2_BUILD) -j$(JOBS)

# The CUDA worker (ProcessGroupNCCL, CUDA tensors) is what build-torch2
# builds: the wheel's LibTorch has CUDA.
build-cuda: build-torch2

# The sanitizer and fuzzer tests build trees of their own without LibTorch
# (TRAINCTL_WITH_WORKER=OFF), the same in both flavours: they run once, in
# `make test`.
test-torch2: build-torch2
	cd $(TORCH2_BUILD) && ctest --output-on-failure -j$(JOBS) -LE "slow|sanitize|fuzz"

demo: build
	bash deploy/local-cluster.sh --bin $(BUILD)/bin examples/fashion-mnist-mlp.yaml

format:
	git ls-files '*.cc' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(BUILD).configure.log $(TORCH2_BUILD) $(TORCH2_BUILD).configure.log build-venvs
