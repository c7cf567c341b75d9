# Thin wrapper: the two commands the README opens with (after `sh cmake/install-deps.sh`, which installs make).
#   make run   install missing Debian packages, configure, build, run `clustersim run` (built-in default scenario)
#   make test  the same, then every test through ctest
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# Warnings are errors in CI builds (CI=true).
WERROR := $(if $(filter true 1 yes,$(CI)),ON,OFF)

.PHONY: run test deps configure build bench clean

run: build
	./$(BUILD)/clustersim run

test: run
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

deps:
	@sh cmake/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -DCLUSTERSIM_WERROR=$(WERROR)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

bench: build
	./$(BUILD)/bench/clustersim_bench_engine

clean:
	rm -rf $(BUILD)
